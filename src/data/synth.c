// data/synth: the synthetic ImageNet generator and its cache.
//
// An image = class texture (two-colour stripes: the class's palette, orientation and frequency, phase-warped by
// low-frequency noise so they look like grain rather than a test chart) x illumination + fractal 1/f noise in
// luminance and chroma + a few random-colour blobs as distractors. The fractal noise is a pyramid: white noise
// at each octave, upsampled x2 and summed, which gives the roughly 1/f amplitude spectrum of photographs and,
// at quality 90-96, JPEG files of ImageNet's size.
#pragma GCC optimize("O3", "fp-contract=off")  // same bytes on any x86-64: no FMA contraction in the renderer
#include "data/synth.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fields.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/rng.h"
#include "data/jpeg_encode.h"

void dlp_synth_defaults(dlp_synth_params *p) {
    *p = (dlp_synth_params){.classes = 10, .per_class = 260, .val_per_class = 50, .seed = 0};
}

dlp_status dlp_synth_parse_size(const char *s, dlp_synth_params *p) {
    if (strcmp(s, "imagenet") == 0 || strcmp(s, "default") == 0) {
        p->size_min = p->size_max = 0;
        return DLP_OK;
    }
    int a = 0, b = 0;
    char tail;
    int n = sscanf(s, "%d-%d%c", &a, &b, &tail);
    if (n == 1 && strchr(s, '-') == NULL) b = a;
    else if (n != 2) return DLP_ERR(DLP_ERR_INVALID, "size '%s': expected MIN-MAX (e.g. 64-112), N, or imagenet", s);
    if (a < 8 || b < a || b > 4096)
        return DLP_ERR(DLP_ERR_INVALID, "size '%s': shorter side range must satisfy 8 <= MIN <= MAX <= 4096", s);
    p->size_min = a;
    p->size_max = b;
    return DLP_OK;
}

dlp_status dlp_synth_parse_spec(const char *spec, dlp_synth_params *p) {
    if (strncmp(spec, "synthetic", 9) != 0 || (spec[9] != '\0' && spec[9] != ':'))
        return DLP_ERR(DLP_ERR_INVALID, "'%s' is not a synthetic dataset spec (synthetic[:key=value,...])", spec);
    if (spec[9] == '\0') return DLP_OK;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec + 10);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) return DLP_ERR(DLP_ERR_INVALID, "synthetic spec: '%s' is not key=value", kv);
        *eq = '\0';
        const char *k = kv, *v = eq + 1;
        char *end;
        long x = strtol(v, &end, 10);
        int is_int = *v && !*end;
        if (strcmp(k, "size") == 0) {
            DLP_CHECK(dlp_synth_parse_size(v, p));
        } else if (!is_int) {
            return DLP_ERR(DLP_ERR_INVALID, "synthetic spec: %s=%s is not an integer", k, v);
        } else if (strcmp(k, "classes") == 0 && x >= 1 && x <= 100000) {
            p->classes = (int)x;
        } else if ((strcmp(k, "per-class") == 0 || strcmp(k, "per_class") == 0) && x >= 1 && x <= 100000000) {
            p->per_class = (int)x;
        } else if ((strcmp(k, "val-per-class") == 0 || strcmp(k, "val_per_class") == 0) && x >= 0 && x <= 100000000) {
            p->val_per_class = (int)x;
        } else if (strcmp(k, "seed") == 0 && x >= 0) {
            p->seed = (uint64_t)x;
        } else {
            return DLP_ERR(DLP_ERR_INVALID, "synthetic spec: unknown key or value out of range: %s=%s (keys: classes, "
                           "per-class, val-per-class, size, seed)", k, v);
        }
    }
    return DLP_OK;
}

uint64_t dlp_synth_hash(const dlp_synth_params *p) {
    char key[256];
    snprintf(key, sizeof key, "v%d c%d t%d v%d s%d-%d seed%" PRIu64, DLP_SYNTH_VERSION, p->classes, p->per_class,
             p->val_per_class, p->size_min, p->size_max, p->seed);
    uint64_t h = 0x243f6a8885a308d3ULL;
    for (const char *c = key; *c; c++) h = dlp_hash64(h ^ (uint8_t)*c);
    return h;
}

void dlp_synth_wnid(int cls, char *buf, size_t len) {
    // Increasing with the class index (so sorted folders keep the label order), 8 digits like n01440764.
    uint64_t jitter = dlp_hash64((uint64_t)cls + 77) % 4000;
    snprintf(buf, len, "n%08" PRIu64, (uint64_t)1440764 + (uint64_t)cls * 9973 + jitter);
}

static double frac(double x) { return x - floor(x); }

static const char *hue_name(double h) {
    static const char *const n[12] = {"red",  "orange", "yellow", "lime",   "green",  "spring",
                                      "cyan", "azure",  "blue",   "violet", "magenta", "rose"};
    return n[(int)(frac(h + 1.0 / 24) * 12) % 12];
}

// ---- class appearance -------------------------------------------------------------------------------------------

typedef struct class_look {
    double hue, sat, val;      // colour A
    double hue_b, sat_b, val_b;  // colour B (dark)
    double theta;              // stripe orientation (radians, 0..pi)
    double cycles;             // stripes per shorter side
} class_look;

static void class_look_of(int c, int classes, class_look *k) {
    k->hue = classes <= 16 ? (double)c / classes : frac(c * 0.6180339887498949);
    k->sat = 0.60 + 0.30 * frac(c * 0.7548776662466927);
    k->val = 0.88;
    k->hue_b = frac(k->hue + ((c & 1) ? 0.06 : -0.06));
    k->sat_b = 0.65;
    k->val_b = 0.30;
    k->theta = frac(c * 0.3819660112501051 + 0.05) * M_PI;
    k->cycles = 4.0 + 10.0 * frac(c * 0.5698402909980532 + 0.3);
}

static void hsv_to_rgb(double h, double s, double v, float out[3]) {
    h = frac(h) * 6.0;
    int i = (int)h;
    double f = h - i, p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
    double r, g, b;
    switch (i) {
    case 0: r = v, g = t, b = p; break;
    case 1: r = q, g = v, b = p; break;
    case 2: r = p, g = v, b = t; break;
    case 3: r = p, g = q, b = v; break;
    case 4: r = t, g = p, b = v; break;
    default: r = v, g = p, b = q; break;
    }
    out[0] = (float)(r * 255.0);
    out[1] = (float)(g * 255.0);
    out[2] = (float)(b * 255.0);
}

// ---- one image --------------------------------------------------------------------------------------------------

typedef struct img_plan {
    int w, h;
    int quality, h_samp, v_samp, gray, progressive, optimize;
    float col_a[3], col_b[3];
    double theta, cycles, phase, contrast, warp_amp;
    double noise_fine, noise_gain, chroma;  // 1/f noise: finest-octave amplitude, per-octave gain; chroma share
    int nblobs;
    struct { double cx, cy, rx, ry, ang, alpha; float col[3]; } blob[4];
    double grad_dx, grad_dy, grad_amp;
} img_plan;

static void pick_size(const dlp_synth_params *p, dlp_rng *r, int *w, int *h) {
    if (p->size_max > 0) {
        int s = p->size_min + (int)dlp_rng_below(r, (uint64_t)(p->size_max - p->size_min + 1));
        double u = dlp_rng_uniform(r), ar;
        int portrait = 0;
        if (u < 0.45) ar = 4.0 / 3;
        else if (u < 0.65) ar = 3.0 / 2;
        else if (u < 0.80) ar = 1.0;
        else if (u < 0.95) ar = 4.0 / 3, portrait = 1;
        else ar = 3.0 / 2, portrait = 1;
        int l = (int)lround(s * ar);
        *w = portrait ? s : l;
        *h = portrait ? l : s;
        return;
    }
    // ImageNet-like: mostly 500 px on the long side; some smaller; ~3% large photos.
    double u = dlp_rng_uniform(r);
    if (u < 0.45) *w = 500, *h = 375;
    else if (u < 0.57) *w = 500, *h = 333;
    else if (u < 0.65) *w = 375, *h = 500;
    else if (u < 0.70) *w = 333, *h = 500;
    else if (u < 0.78) *w = 500, *h = 500;
    else {
        int lo, hi;
        if (u < 0.90) lo = 300, hi = 500;
        else if (u < 0.97) lo = 160, hi = 300;
        else lo = 1000, hi = 1800;
        int l = lo + (int)dlp_rng_below(r, (uint64_t)(hi - lo + 1));
        double ar = u >= 0.97 ? (dlp_rng_uniform(r) < 0.5 ? 0.75 : 2.0 / 3) : dlp_rng_range(r, 0.6, 1.0);
        int s = (int)lround(l * ar);
        if (dlp_rng_uniform(r) < 0.7) *w = l, *h = s;
        else *w = s, *h = l;
    }
}

static void plan_image(const dlp_synth_params *p, int cls, dlp_rng *r, img_plan *g) {
    memset(g, 0, sizeof *g);
    pick_size(p, r, &g->w, &g->h);
    g->quality = 90 + (int)dlp_rng_below(r, 7);
    double u = dlp_rng_uniform(r);
    if (u < 0.55) g->h_samp = 2, g->v_samp = 2;      // 4:2:0
    else if (u < 0.95) g->h_samp = 1, g->v_samp = 1; // 4:4:4
    else g->h_samp = 2, g->v_samp = 1;               // 4:2:2
    g->gray = dlp_rng_uniform(r) < 0.02;
    g->progressive = dlp_rng_uniform(r) < 0.02;
    g->optimize = dlp_rng_uniform(r) < 0.5;
    class_look k;
    class_look_of(cls, p->classes, &k);
    double dh = dlp_rng_range(r, -0.02, 0.02);
    hsv_to_rgb(k.hue + dh, k.sat * dlp_rng_range(r, 0.85, 1.1), k.val * dlp_rng_range(r, 0.85, 1.1), g->col_a);
    hsv_to_rgb(k.hue_b + dh, k.sat_b * dlp_rng_range(r, 0.8, 1.2), k.val_b * dlp_rng_range(r, 0.7, 1.3), g->col_b);
    for (int c = 0; c < 3; c++)
        if (g->col_a[c] > 255) g->col_a[c] = 255;
    g->theta = k.theta + dlp_rng_range(r, -0.10, 0.10);
    g->cycles = k.cycles * dlp_rng_range(r, 0.85, 1.2);
    int smin = g->w < g->h ? g->w : g->h;
    if (g->cycles > smin / 5.0) g->cycles = smin / 5.0;  // stripes at least 5 px apart
    g->phase = dlp_rng_range(r, 0, 2 * M_PI);
    g->contrast = dlp_rng_range(r, 0.6, 1.0);
    g->warp_amp = dlp_rng_range(r, 0.5, 2.0);
    g->noise_fine = dlp_rng_range(r, 8.0, 13.0);  // 8-bit units: sets the file size
    g->noise_gain = dlp_rng_range(r, 1.05, 1.25);
    g->chroma = dlp_rng_range(r, 0.25, 0.45);
    g->nblobs = 1 + (int)dlp_rng_below(r, 4);
    for (int b = 0; b < g->nblobs; b++) {
        g->blob[b].cx = dlp_rng_uniform(r) * g->w;
        g->blob[b].cy = dlp_rng_uniform(r) * g->h;
        g->blob[b].rx = dlp_rng_range(r, 0.06, 0.22) * smin;
        g->blob[b].ry = g->blob[b].rx * dlp_rng_range(r, 0.5, 1.5);
        g->blob[b].ang = dlp_rng_range(r, 0, M_PI);
        g->blob[b].alpha = dlp_rng_range(r, 0.2, 0.45);
        hsv_to_rgb(dlp_rng_uniform(r), dlp_rng_range(r, 0.2, 0.9), dlp_rng_range(r, 0.2, 1.0), g->blob[b].col);
    }
    double ga = dlp_rng_range(r, 0, 2 * M_PI);
    g->grad_dx = cos(ga) / g->w;
    g->grad_dy = sin(ga) / g->h;
    g->grad_amp = dlp_rng_range(r, 0.0, 0.35);
}

enum { S_A, S_B, S_LUM, S_WARP, S_ILL, S_CH0, S_CH1, S_CH2, S_COUNT };
typedef struct scratch {
    float *f[S_COUNT];  // pyramid levels (A, B) and full-size planes
    size_t cap[S_COUNT];
} scratch;

static int ensure(scratch *s, int i, size_t n) {
    if (n <= s->cap[i] && s->f[i]) return 1;
    free(s->f[i]);
    s->f[i] = malloc(n * sizeof(float));
    s->cap[i] = s->f[i] ? n : 0;
    return s->f[i] != NULL;
}

// Fractal noise into out (w x h): levels octaves, level 0 finest. amp[l] scales the white noise added at level l.
static void fractal(float *out, int w, int h, int levels, const double *amp, dlp_rng *r, float *ta, float *tb) {
    int lw = (w >> (levels - 1)) + 2, lh = (h >> (levels - 1)) + 2;
    float *cur = ta, *nxt = tb;
    for (int i = 0; i < lw * lh; i++) cur[i] = (float)(amp[levels - 1] * (2.0 * dlp_rng_uniform(r) - 1.0));
    for (int l = levels - 2; l >= 0; l--) {
        int nw = (w >> l) + 2, nh = (h >> l) + 2;
        float a = (float)amp[l];
        for (int y = 0; y < nh; y++) {
            int y0 = y >> 1;
            float fy = (y & 1) ? 0.5f : 0.0f;
            if (y0 + 1 >= lh) y0 = lh - 2, fy = 1.0f;
            const float *r0 = cur + (size_t)y0 * lw, *r1 = r0 + lw;
            float *o = nxt + (size_t)y * nw;
            for (int x = 0; x < nw; x++) {
                int x0 = x >> 1;
                float fx = (x & 1) ? 0.5f : 0.0f;
                if (x0 + 1 >= lw) x0 = lw - 2, fx = 1.0f;
                float top = r0[x0] + (r0[x0 + 1] - r0[x0]) * fx;
                float bot = r1[x0] + (r1[x0 + 1] - r1[x0]) * fx;
                o[x] = top + (bot - top) * fy;
            }
            if (a != 0.0f)
                for (int x = 0; x < nw; x++) o[x] += a * (float)(2.0 * dlp_rng_uniform(r) - 1.0);
        }
        float *t = cur;
        cur = nxt;
        nxt = t;
        lw = nw;
        lh = nh;
    }
    for (int y = 0; y < h; y++) memcpy(out + (size_t)y * w, cur + (size_t)y * lw, sizeof(float) * (size_t)w);
}

static float g_sin[4096];
static pthread_once_t g_sin_once = PTHREAD_ONCE_INIT;
static void init_sin(void) {
    for (int i = 0; i < 4096; i++) g_sin[i] = (float)sin(2 * M_PI * i / 4096.0);
}

static dlp_status render(const img_plan *g, dlp_rng *r, scratch *s, uint8_t *rgb) {
    const int w = g->w, h = g->h;
    int levels = 1;
    while ((w >> levels) >= 4 && (h >> levels) >= 4 && levels < 10) levels++;
    size_t lvl = (size_t)(w + 4) * (size_t)(h + 4);
    size_t n = (size_t)w * h;
    for (int i = 0; i < S_COUNT; i++)
        if (!ensure(s, i, i <= S_B ? lvl : n)) return DLP_ERR(DLP_ERR_NOMEM, "out of memory rendering a %dx%d image", w, h);
    float *A = s->f[S_A], *B = s->f[S_B], *lum = s->f[S_LUM], *warp = s->f[S_WARP], *ill = s->f[S_ILL];
    float *ch[3] = {s->f[S_CH0], s->f[S_CH1], s->f[S_CH2]};
    double amp[12];
    // luminance detail: 1/f-like, slightly rising towards coarse octaves
    for (int l = 0; l < levels; l++) amp[l] = g->noise_fine * pow(g->noise_gain, l);
    fractal(lum, w, h, levels, amp, r, A, B);
    for (int c = 0; c < 3; c++) {
        for (int l = 0; l < levels; l++) amp[l] = g->chroma * g->noise_fine * pow(g->noise_gain, l);
        fractal(ch[c], w, h, levels, amp, r, A, B);
    }
    // warp and illumination: coarse octaves only
    for (int l = 0; l < levels; l++) amp[l] = l >= levels - 3 ? 1.0 : 0.0;
    fractal(warp, w, h, levels, amp, r, A, B);
    for (int l = 0; l < levels; l++) amp[l] = l >= levels - 2 ? 0.15 : 0.0;
    fractal(ill, w, h, levels, amp, r, A, B);

    pthread_once(&g_sin_once, init_sin);
    const int smin = w < h ? w : h;
    const double k = 2 * M_PI * g->cycles / smin;
    const float kc = (float)(k * cos(g->theta) * 4096 / (2 * M_PI)), ks = (float)(k * sin(g->theta) * 4096 / (2 * M_PI));
    const float ph0 = (float)(g->phase * 4096 / (2 * M_PI)) + 4096.0f * 4096.0f;
    const float wa = (float)(g->warp_amp * 4096 / (2 * M_PI));
    const float half_c = (float)(0.5 * g->contrast);
    for (int y = 0; y < h; y++) {
        const size_t row = (size_t)y * w;
        for (int x = 0; x < w; x++) {
            size_t i = row + (size_t)x;
            float ph = ph0 + kc * (float)x + ks * (float)y + wa * warp[i];
            uint32_t idx = (uint32_t)(int64_t)ph & 4095u;
            float t = 0.5f + half_c * g_sin[idx];
            float il = 1.0f + ill[i] + (float)(g->grad_amp * (g->grad_dx * (x - w / 2) + g->grad_dy * (y - h / 2)));
            for (int c = 0; c < 3; c++) {
                float v = (g->col_b[c] + (g->col_a[c] - g->col_b[c]) * t) * il + lum[i] + ch[c][i];
                ch[c][i] = v;  // reuse the chroma plane for the composed value
            }
        }
    }
    for (int b = 0; b < g->nblobs; b++) {
        double ca = cos(g->blob[b].ang), sa = sin(g->blob[b].ang);
        double rmax = g->blob[b].rx > g->blob[b].ry ? g->blob[b].rx : g->blob[b].ry;
        int x0 = (int)(g->blob[b].cx - rmax), x1 = (int)(g->blob[b].cx + rmax) + 1;
        int y0 = (int)(g->blob[b].cy - rmax), y1 = (int)(g->blob[b].cy + rmax) + 1;
        if (x0 < 0) x0 = 0;
        if (y0 < 0) y0 = 0;
        if (x1 > w) x1 = w;
        if (y1 > h) y1 = h;
        for (int y = y0; y < y1; y++)
            for (int x = x0; x < x1; x++) {
                double dx = x - g->blob[b].cx, dy = y - g->blob[b].cy;
                double u = (dx * ca + dy * sa) / g->blob[b].rx, v = (-dx * sa + dy * ca) / g->blob[b].ry;
                double d2 = u * u + v * v;
                if (d2 >= 1.0) continue;
                float a = (float)(g->blob[b].alpha * (1.0 - d2) * (1.0 - d2));
                size_t i = (size_t)y * w + (size_t)x;
                for (int c = 0; c < 3; c++) ch[c][i] += (g->blob[b].col[c] - ch[c][i]) * a;
            }
    }
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) {
            float v = ch[c][i] + 0.5f;
            rgb[3 * i + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : (int)v);
        }
    return DLP_OK;
}

static void scratch_free(scratch *s) {
    for (int i = 0; i < S_COUNT; i++) free(s->f[i]);
    memset(s, 0, sizeof *s);
}

static void image_rng(const dlp_synth_params *p, int split, int cls, int idx, dlp_rng *r) {
    dlp_rng_init(r, p->seed, ((uint64_t)split << 60) ^ ((uint64_t)cls << 32) ^ (uint64_t)idx);
}

dlp_status dlp_synth_render(const dlp_synth_params *p, int split, int cls, int idx, uint8_t **rgb, int *w, int *h) {
    dlp_rng r;
    image_rng(p, split, cls, idx, &r);
    img_plan g;
    plan_image(p, cls, &r, &g);
    *rgb = malloc((size_t)g.w * g.h * 3);
    DLP_TRY_ALLOC(*rgb);
    scratch s = {0};
    dlp_status st = render(&g, &r, &s, *rgb);
    scratch_free(&s);
    if (st) {
        free(*rgb);
        *rgb = NULL;
        return st;
    }
    *w = g.w;
    *h = g.h;
    return DLP_OK;
}

// ---- the whole dataset ------------------------------------------------------------------------------------------

typedef struct gen_job {
    const dlp_synth_params *p;
    const char *dir;
    int64_t total, ntrain;
    atomic_llong next, done, bytes, gray, prog, s444, s422, s420, big;
    atomic_int failed;
    pthread_mutex_t mu;
    dlp_status st;
    char msg[512];
} gen_job;

static void job_name(const gen_job *j, int64_t k, int *split, int *cls, int *idx, char *rel, size_t len) {
    const dlp_synth_params *p = j->p;
    char wnid[16];
    if (k < j->ntrain) {
        *split = 0;
        *cls = (int)(k / p->per_class);
        *idx = (int)(k % p->per_class);
        dlp_synth_wnid(*cls, wnid, sizeof wnid);
        snprintf(rel, len, "train/%s/%s_%d.JPEG", wnid, wnid, *idx);
    } else {
        int64_t v = k - j->ntrain;
        *split = 1;
        *cls = (int)(v / p->val_per_class);
        *idx = (int)(v % p->val_per_class);
        dlp_synth_wnid(*cls, wnid, sizeof wnid);
        snprintf(rel, len, "val/%s/ILSVRC2012_val_%08lld.JPEG", wnid, (long long)v + 1);
    }
}

static dlp_status gen_one(gen_job *j, int64_t k, scratch *s, uint8_t **rgb, size_t *rgb_cap) {
    int split, cls, idx;
    char rel[256], path[4096];
    job_name(j, k, &split, &cls, &idx, rel, sizeof rel);
    snprintf(path, sizeof path, "%s/%s", j->dir, rel);
    dlp_rng r;
    image_rng(j->p, split, cls, idx, &r);
    img_plan g;
    plan_image(j->p, cls, &r, &g);
    size_t need = (size_t)g.w * g.h * 3;
    if (need > *rgb_cap) {
        free(*rgb);
        *rgb = malloc(need);
        *rgb_cap = *rgb ? need : 0;
        DLP_TRY_ALLOC(*rgb);
    }
    DLP_CHECK(render(&g, &r, s, *rgb));
    dlp_jpeg_enc_opts o;
    dlp_jpeg_enc_defaults(&o);
    o.quality = g.quality;
    o.h_samp = g.h_samp;
    o.v_samp = g.v_samp;
    o.progressive = g.progressive;
    o.optimize_coding = g.optimize;
    o.color = g.gray ? DLP_JPEG_ENC_GRAY : DLP_JPEG_ENC_YCBCR;
    uint8_t *jpg;
    size_t len;
    DLP_CHECK(dlp_jpeg_encode(*rgb, g.w, g.h, &o, &jpg, &len));
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(jpg);
        return DLP_ERR(DLP_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    }
    size_t wr = fwrite(jpg, 1, len, f);
    int cl = fclose(f);
    free(jpg);
    if (wr != len || cl != 0) return DLP_ERR(DLP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    atomic_fetch_add(&j->bytes, (long long)len);
    if (g.gray) atomic_fetch_add(&j->gray, 1);
    else if (g.h_samp == 1) atomic_fetch_add(&j->s444, 1);
    else if (g.v_samp == 1) atomic_fetch_add(&j->s422, 1);
    else atomic_fetch_add(&j->s420, 1);
    if (g.progressive) atomic_fetch_add(&j->prog, 1);
    if (g.w > 1000 || g.h > 1000) atomic_fetch_add(&j->big, 1);
    return DLP_OK;
}

static void *gen_thread(void *arg) {
    gen_job *j = arg;
    scratch s = {0};
    uint8_t *rgb = NULL;
    size_t cap = 0;
    for (;;) {
        if (atomic_load(&j->failed)) break;
        int64_t k = atomic_fetch_add(&j->next, 1);
        if (k >= j->total) break;
        dlp_status st = gen_one(j, k, &s, &rgb, &cap);
        if (st) {
            pthread_mutex_lock(&j->mu);
            if (!atomic_load(&j->failed)) {
                j->st = st;
                snprintf(j->msg, sizeof j->msg, "%s", dlp_err_msg());
            }
            atomic_store(&j->failed, 1);
            pthread_mutex_unlock(&j->mu);
            break;
        }
        atomic_fetch_add(&j->done, 1);
    }
    scratch_free(&s);
    free(rgb);
    return NULL;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}
static void rmtree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static dlp_status write_text(const char *path, const char *text) {
    return dlp_write_atomic(path, text, strlen(text), DLP_WRITE_REPLACE);
}

// labels.txt, train.txt, val.txt, dataset.json
static json_t *size_write(const void *rec) {
    const dlp_synth_params *p = rec;
    if (!p->size_max) return json_string("imagenet");
    char sz[32];
    snprintf(sz, sizeof sz, "%d-%d", p->size_min, p->size_max);
    return json_string(sz);
}

static json_t *mean_file_bytes_write(const void *rec) {
    const dlp_synth_report *rep = rec;
    return json_real(rep->images ? (double)rep->bytes / rep->images : 0);
}

// dataset.json: the parameters, then what was made.
#define PARAM_I(m) {DLP_FIELD(dlp_synth_params, m, DLP_FT_INT, 0)}
static const dlp_field_def k_params_fields[] = {
    PARAM_I(classes), PARAM_I(per_class), PARAM_I(val_per_class), {DLP_FIELD_CB("size", NULL, size_write)},
    PARAM_I(seed), {0}};
#define REP_I(m) {DLP_FIELD(dlp_synth_report, m, DLP_FT_INT, 0)}
static const dlp_field_def k_mix_fields[] = {
    REP_I(gray), REP_I(sub444), REP_I(sub422), REP_I(sub420), REP_I(progressive), REP_I(over_1000px), {0}};
static const dlp_field_def k_report_fields[] = {
    REP_I(images), REP_I(bytes), {DLP_FIELD_CB("mean_file_bytes", NULL, mean_file_bytes_write)},
    {.key = "mix", .type = DLP_FT_OBJ, .sub = k_mix_fields}, {0}};

static dlp_status write_index(const dlp_synth_params *p, const char *dir, const gen_job *j, const dlp_synth_report *rep) {
    size_t cap = (size_t)(j->total + p->classes + 16) * 96;
    char *buf = malloc(cap);
    DLP_TRY_ALLOC(buf);
    char path[4096];
    size_t off = 0;
    off += (size_t)snprintf(buf + off, cap - off, "# index wnid name\n");
    for (int c = 0; c < p->classes; c++) {
        char wnid[16];
        dlp_synth_wnid(c, wnid, sizeof wnid);
        class_look k;
        class_look_of(c, p->classes, &k);
        off += (size_t)snprintf(buf + off, cap - off, "%d %s synthetic %s stripes %03d deg %.1f cycles\n", c, wnid,
                                hue_name(k.hue), (int)lround(k.theta * 180 / M_PI), k.cycles);
    }
    snprintf(path, sizeof path, "%s/labels.txt", dir);
    dlp_status st = write_text(path, buf);
    for (int split = 0; split < 2 && st == DLP_OK; split++) {
        off = 0;
        for (int64_t q = 0; q < j->total; q++) {
            int sp, cls, idx;
            char rel[256];
            job_name(j, q, &sp, &cls, &idx, rel, sizeof rel);
            if (sp == split) off += (size_t)snprintf(buf + off, cap - off, "%s %d\n", rel, cls);
        }
        buf[off] = '\0';
        snprintf(path, sizeof path, "%s/%s.txt", dir, split ? "val" : "train");
        st = write_text(path, buf);
    }
    free(buf);
    if (st) return st;
    json_t *o = json_object();
    json_object_set_new(o, "schema", json_string("dlperf.synthetic/1"));
    json_object_set_new(o, "generator_version", json_integer(DLP_SYNTH_VERSION));
    dlp_fields_write(o, k_params_fields, p);
    dlp_fields_write(o, k_report_fields, rep);
    snprintf(path, sizeof path, "%s/dataset.json", dir);
    st = dlp_json_write(o, path, DLP_WRITE_REPLACE);
    json_decref(o);
    return st;
}

static int online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

dlp_status dlp_synth_generate(const dlp_synth_params *p, const char *out_dir, dlp_synth_report *rep_out) {
    if (p->classes < 1 || p->per_class < 1 || p->val_per_class < 0)
        return DLP_ERR(DLP_ERR_INVALID, "synthetic dataset needs classes >= 1, per-class >= 1, val-per-class >= 0");
    if (dlp_path_exists(out_dir))
        return DLP_ERR(DLP_ERR_EXISTS, "%s already exists; dlperf never overwrites a dataset: choose another --out", out_dir);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld-%llx", out_dir, (long)getpid(), (unsigned long long)(dlp_now_ns() & 0xffffffff));
    DLP_CHECK(dlp_mkdirs(tmp));
    int64_t t0 = dlp_now_ns();
    dlp_status st = DLP_OK;
    for (int split = 0; split < 2 && st == DLP_OK; split++) {
        if (split == 1 && p->val_per_class == 0) break;
        for (int c = 0; c < p->classes && st == DLP_OK; c++) {
            char wnid[16], d[4200];
            dlp_synth_wnid(c, wnid, sizeof wnid);
            snprintf(d, sizeof d, "%s/%s/%s", tmp, split ? "val" : "train", wnid);
            st = dlp_mkdirs(d);
        }
    }
    gen_job *j = calloc(1, sizeof *j);
    if (!j) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    if (st) {
        free(j);
        rmtree(tmp);
        return st;
    }
    j->p = p;
    j->dir = tmp;
    j->ntrain = (int64_t)p->classes * p->per_class;
    j->total = j->ntrain + (int64_t)p->classes * p->val_per_class;
    pthread_mutex_init(&j->mu, NULL);
    int nt = p->workers > 0 ? p->workers : online_cpus();
    if (nt > 256) nt = 256;
    if (nt > j->total) nt = (int)j->total;
    pthread_t th[256];
    int started = 0;
    for (int i = 0; i < nt; i++) {
        if (pthread_create(&th[i], NULL, gen_thread, j) != 0) break;
        started++;
    }
    if (started == 0) {
        st = DLP_ERR(DLP_ERR_INTERNAL, "cannot start generator threads");
        atomic_store(&j->failed, 1);
    }
    // Progress for humans on long runs.
    int64_t last = dlp_now_ns();
    while (started && atomic_load(&j->done) < j->total && !atomic_load(&j->failed)) {
        dlp_sleep_ns(20 * 1000 * 1000);
        if (dlp_now_ns() - last > 5000000000LL) {
            last = dlp_now_ns();
            DLP_INFO("generating synthetic ImageNet: %lld/%lld images", (long long)atomic_load(&j->done), (long long)j->total);
        }
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    if (st == DLP_OK && atomic_load(&j->failed)) st = DLP_ERR(j->st ? j->st : DLP_ERR_INTERNAL, "%s", j->msg);
    dlp_synth_report rep = {0};
    rep.images = atomic_load(&j->done);
    rep.bytes = atomic_load(&j->bytes);
    rep.gray = atomic_load(&j->gray);
    rep.progressive = atomic_load(&j->prog);
    rep.sub444 = atomic_load(&j->s444);
    rep.sub422 = atomic_load(&j->s422);
    rep.sub420 = atomic_load(&j->s420);
    rep.over_1000px = atomic_load(&j->big);
    if (st == DLP_OK) st = write_index(p, tmp, j, &rep);
    if (st == DLP_OK) {
        int fd = open(tmp, O_RDONLY | O_DIRECTORY);
        if (fd >= 0) {
            syncfs(fd);  // the files are on disk before the name says the dataset is complete
            close(fd);
        }
        if (rename(tmp, out_dir) != 0) {
            int e = errno;
            st = (e == EEXIST || e == ENOTEMPTY)
                     ? DLP_ERR(DLP_ERR_EXISTS, "%s appeared while generating (another run?); kept it", out_dir)
                     : DLP_ERR(DLP_ERR_IO, "cannot rename %s to %s: %s", tmp, out_dir, strerror(e));
        }
    }
    if (st) rmtree(tmp);
    pthread_mutex_destroy(&j->mu);
    free(j);
    rep.seconds = dlp_ns_to_s(dlp_now_ns() - t0);
    if (rep_out) *rep_out = rep;
    return st;
}

// Removes temporary directories of generator runs that died (their pid is gone).
static void clean_stale(const char *cache) {
    DIR *d = opendir(cache);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *t = strstr(e->d_name, ".tmp-");
        if (strncmp(e->d_name, "synthetic-", 10) != 0 || !t) continue;
        long pid = strtol(t + 5, NULL, 10);
        if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH)) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", cache, e->d_name);
            DLP_INFO("removing %s, left by an interrupted run", path);
            rmtree(path);
        }
    }
    closedir(d);
}

dlp_status dlp_synth_ensure(const dlp_synth_params *p, char *dir, size_t len) {
    char cache[4096];
    dlp_cache_dir(cache, sizeof cache);
    snprintf(dir, len, "%s/synthetic-%016" PRIx64, cache, dlp_synth_hash(p));
    char marker[4200];
    snprintf(marker, sizeof marker, "%s/dataset.json", dir);
    if (dlp_path_exists(marker)) {
        DLP_INFO("using the synthetic ImageNet in %s", dir);
        return DLP_OK;
    }
    DLP_CHECK(dlp_mkdirs(cache));
    clean_stale(cache);
    int64_t n = (int64_t)p->classes * (p->per_class + p->val_per_class);
    DLP_INFO("generating a synthetic ImageNet (%d classes, %lld images) into %s (once; later runs reuse it)", p->classes,
             (long long)n, dir);
    dlp_synth_report rep;
    dlp_status st = dlp_synth_generate(p, dir, &rep);
    if (st == DLP_ERR_EXISTS && dlp_path_exists(marker)) {  // a concurrent run finished first: use its copy
        dlp_err_clear();
        DLP_INFO("another run generated %s first; using it", dir);
        return DLP_OK;
    }
    DLP_CHECK(st);
    DLP_INFO("generated %lld images, %.1f MB (%.0f KB each on average) in %.1f s", (long long)rep.images,
             rep.bytes / 1e6, rep.images ? rep.bytes / 1e3 / rep.images : 0.0, rep.seconds);
    return DLP_OK;
}
