// data/resample: Pillow-exact antialiased bilinear resampling fused with flip, normalize and layout/dtype output.
// Hot loops: the horizontal pass runs once per input row of the crop (3 accumulators per output pixel), the
// vertical pass accumulates whole interleaved rows (vectorizes over the row), the output conversion is one pass.
#pragma GCC optimize("O3")
#include "data/resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

#define PREC_BITS 22  // Pillow's PRECISION_BITS for 8-bit images (32 - 8 - 2)
#define HALF (1 << (PREC_BITS - 1))

static int grow(void **p, size_t *cap, size_t need) {
    if (need <= *cap) return 1;
    size_t n = need + need / 2 + 64;
    void *q = realloc(*p, n);
    if (!q) return 0;
    *p = q;
    *cap = n;
    return 1;
}

static inline double triangle(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

dlp_status dlp_resample_axis_plan(dlp_resample_axis *a, double origin, double scale, int k0, int out, int lo, int hi,
                                  int flip) {
    if (out <= 0 || hi <= lo || !(scale > 0) || !isfinite(origin))
        return DLP_ERR(DLP_ERR_INVALID, "bad resample axis: out %d, input [%d,%d), scale %g", out, lo, hi, scale);
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale;  // bilinear: support 1 in output units
    int taps = (int)ceil(support) * 2 + 1;
    if ((size_t)out > a->cap_out) {
        int32_t *f = realloc(a->first, sizeof(int32_t) * (size_t)out);
        if (f) a->first = f;
        int32_t *nn = f ? realloc(a->n, sizeof(int32_t) * (size_t)out) : NULL;
        if (nn) a->n = nn;
        if (!f || !nn) return DLP_ERR(DLP_ERR_NOMEM, "out of memory planning a resample of %d samples", out);
        a->cap_out = (size_t)out;
    }
    size_t ncoef = (size_t)out * (size_t)taps;
    if (ncoef > a->cap_coef) {
        int32_t *c = realloc(a->coef, sizeof(int32_t) * ncoef);
        if (!c) return DLP_ERR(DLP_ERR_NOMEM, "out of memory planning a resample of %d samples", out);
        a->coef = c;
        a->cap_coef = ncoef;
    }
    a->out = out;
    a->taps = taps;
    double ss = 1.0 / filterscale;
    double base = origin - lo;  // Pillow computes in coordinates of its (cropped) input: 0 = lo
    int nlim = hi - lo;
    int in_lo = hi, in_hi = lo;
    for (int i = 0; i < out; i++) {
        double center = base + (k0 + i + 0.5) * scale;
        int xmin = (int)floor(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = (int)floor(center + support + 0.5);
        if (xmax > nlim) xmax = nlim;
        int d = flip ? out - 1 - i : i;
        int32_t *k = a->coef + (size_t)d * taps;
        memset(k, 0, sizeof(int32_t) * (size_t)taps);
        if (xmax <= xmin) {  // centre outside the input (only with a box past the image): nearest sample
            xmin = xmin >= nlim ? nlim - 1 : xmin;
            xmax = xmin + 1;
            k[0] = 1 << PREC_BITS;
        } else {
            double ww = 0.0;
            for (int x = 0; x < xmax - xmin; x++) ww += triangle((x + xmin - center + 0.5) * ss);
            for (int x = 0; x < xmax - xmin; x++) {
                double w = triangle((x + xmin - center + 0.5) * ss);
                if (ww != 0.0) w /= ww;
                k[x] = w < 0 ? (int32_t)(-0.5 + w * (1 << PREC_BITS)) : (int32_t)(0.5 + w * (1 << PREC_BITS));
            }
        }
        a->first[d] = xmin + lo;
        a->n[d] = xmax - xmin;
        if (xmin + lo < in_lo) in_lo = xmin + lo;
        if (xmax + lo > in_hi) in_hi = xmax + lo;
    }
    // Pad every output to exactly `taps` coefficients (zeros), moved left where the window would pass hi, so the hot
    // loops have a fixed trip count. Zero weights change nothing in the result. Needs an input of >= taps samples.
    a->fixed = hi - lo >= taps;
    if (a->fixed) {
        in_lo = hi;
        in_hi = lo;
        for (int d = 0; d < out; d++) {
            int f = a->first[d], n = a->n[d];
            int f2 = f + taps > hi ? hi - taps : f;
            int shift = f - f2;
            int32_t *k = a->coef + (size_t)d * taps;
            if (shift > 0) {
                memmove(k + shift, k, sizeof(int32_t) * (size_t)n);
                memset(k, 0, sizeof(int32_t) * (size_t)shift);
            }
            a->first[d] = f2;
            a->n[d] = taps;
            if (f2 < in_lo) in_lo = f2;
            if (f2 + taps > in_hi) in_hi = f2 + taps;
        }
    }
    if (a->fixed) {  // the layout the 4-pixel SIMD loop loads directly
        size_t n4 = (size_t)(out / 4) * (size_t)taps * 16;
        if (n4 > a->cap_coef4) {
            int32_t *c4 = realloc(a->coef4, sizeof(int32_t) * (n4 ? n4 : 1));
            if (!c4) return DLP_ERR(DLP_ERR_NOMEM, "out of memory planning a resample of %d samples", out);
            a->coef4 = c4;
            a->cap_coef4 = n4;
        }
        for (int g = 0; g < out / 4; g++)
            for (int t = 0; t < taps; t++)
                for (int j = 0; j < 4; j++)
                    for (int l = 0; l < 4; l++)
                        a->coef4[((size_t)g * taps + t) * 16 + 4 * j + l] = a->coef[(size_t)(4 * g + j) * taps + t];
    }
    a->in_lo = in_lo;
    a->in_hi = in_hi;
    return DLP_OK;
}

void dlp_resample_axis_free(dlp_resample_axis *a) {
    DLP_FREE_ALL(a->first, a->n, a->coef, a->coef4);
    memset(a, 0, sizeof *a);
}

void dlp_resample_scratch_free(dlp_resample_scratch *s) {
    DLP_FREE_ALL(s->tmp, s->acc, s->row, s->sc, s->bi);
    memset(s, 0, sizeof *s);
}

static inline uint8_t clip8(int32_t v) {
    v >>= PREC_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

// One input row -> out RGB pixels (any tap counts).
static void hpass_row_generic(const uint8_t *src, int off_x, const dlp_resample_axis *ax, uint8_t *dst) {
    const int taps = ax->taps;
    for (int i = 0; i < ax->out; i++) {
        const uint8_t *p = src + (size_t)(ax->first[i] - off_x) * 3;
        const int32_t *k = ax->coef + (size_t)i * taps;
        int32_t r = HALF, g = HALF, b = HALF;
        const int n = ax->n[i];
        for (int t = 0; t < n; t++) {
            r += p[3 * t + 0] * k[t];
            g += p[3 * t + 1] * k[t];
            b += p[3 * t + 2] * k[t];
        }
        dst[3 * i + 0] = clip8(r);
        dst[3 * i + 1] = clip8(g);
        dst[3 * i + 2] = clip8(b);
    }
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define HAVE_HPASS_AVX512 1
#endif

#if defined(__SSE4_1__)
#include <immintrin.h>
#if !defined(HAVE_HPASS_AVX512)
// Fixed taps, one pixel's R,G,B (+1 byte of the next pixel, weighted but discarded) in four int32 lanes: the same
// integer arithmetic as the generic loop, so the same result. Reads 1 byte past the last pixel the taps touch and
// writes 1 byte past dst's last pixel: the caller guarantees both exist.
static void hpass_row_sse(const uint8_t *src, int off_x, const dlp_resample_axis *ax, uint8_t *dst) {
    const int taps = ax->taps;
    const __m128i half = _mm_set1_epi32(HALF);
    for (int i = 0; i < ax->out; i++) {
        const uint8_t *p = src + (size_t)(ax->first[i] - off_x) * 3;
        const int32_t *k = ax->coef + (size_t)i * taps;
        __m128i acc = half;
        for (int t = 0; t < taps; t++) {
            int32_t v;
            memcpy(&v, p + 3 * t, 4);
            __m128i px = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(v));
            acc = _mm_add_epi32(acc, _mm_mullo_epi32(px, _mm_set1_epi32(k[t])));
        }
        acc = _mm_srai_epi32(acc, PREC_BITS);
        __m128i w16 = _mm_packus_epi32(acc, acc);  // negative -> 0
        __m128i w8 = _mm_packus_epi16(w16, w16);   // > 255 -> 255: Pillow's clip8
        int32_t o = _mm_cvtsi128_si32(w8);
        memcpy(dst + 3 * i, &o, 4);
    }
}
#endif

#if defined(HAVE_HPASS_AVX512)
static inline int32_t load32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

// Four output pixels at once: their R,G,B,x in the four 128-bit lanes of a 512-bit register. Same integer arithmetic
// as the generic loop. TAPS is a constant in the specialized copies so the tap loop unrolls.
static inline __attribute__((always_inline)) void hpass_avx512_t(const uint8_t *src, int off_x,
                                                                 const dlp_resample_axis *ax, uint8_t *dst,
                                                                 const int TAPS) {
    const int groups = ax->out / 4;
    const __m512i half = _mm512_set1_epi32(HALF), zero = _mm512_setzero_si512();
    const __m128i pick = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    for (int g = 0; g < groups; g++) {
        const int i = 4 * g;
        const uint8_t *p0 = src + (size_t)(ax->first[i] - off_x) * 3, *p1 = src + (size_t)(ax->first[i + 1] - off_x) * 3;
        const uint8_t *p2 = src + (size_t)(ax->first[i + 2] - off_x) * 3, *p3 = src + (size_t)(ax->first[i + 3] - off_x) * 3;
        const int32_t *k = ax->coef4 + (size_t)g * TAPS * 16;
        __m512i acc = half;
        for (int t = 0; t < TAPS; t++) {
            __m128i v = _mm_setr_epi32(load32(p0 + 3 * t), load32(p1 + 3 * t), load32(p2 + 3 * t), load32(p3 + 3 * t));
            acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(v), _mm512_loadu_si512(k + 16 * t)));
        }
        acc = _mm512_max_epi32(_mm512_srai_epi32(acc, PREC_BITS), zero);  // clip8: < 0 -> 0 ...
        __m128i b = _mm_shuffle_epi8(_mm512_cvtusepi32_epi8(acc), pick);  // ... > 255 -> 255; drop the x bytes
        _mm_storeu_si128((__m128i *)(dst + 3 * i), b);                     // 12 bytes used, 4 overwritten next
    }
}

static void hpass_row_avx512(const uint8_t *src, int off_x, const dlp_resample_axis *ax, uint8_t *dst) {
    switch (ax->taps) {
    case 3: hpass_avx512_t(src, off_x, ax, dst, 3); break;
    case 5: hpass_avx512_t(src, off_x, ax, dst, 5); break;
    case 7: hpass_avx512_t(src, off_x, ax, dst, 7); break;
    default: hpass_avx512_t(src, off_x, ax, dst, ax->taps); break;
    }
    // the last out % 4 pixels, one at a time (same arithmetic)
    const int taps = ax->taps;
    for (int i = ax->out / 4 * 4; i < ax->out; i++) {
        const uint8_t *p = src + (size_t)(ax->first[i] - off_x) * 3;
        const int32_t *k = ax->coef + (size_t)i * taps;
        __m128i acc = _mm_set1_epi32(HALF);
        for (int t = 0; t < taps; t++)
            acc = _mm_add_epi32(acc, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(load32(p + 3 * t))),
                                                     _mm_set1_epi32(k[t])));
        acc = _mm_srai_epi32(acc, PREC_BITS);
        __m128i w8 = _mm_packus_epi16(_mm_packus_epi32(acc, acc), _mm_packus_epi32(acc, acc));
        int32_t o = _mm_cvtsi128_si32(w8);
        memcpy(dst + 3 * i, &o, 4);
    }
}
#endif
#endif

static inline uint16_t f32_to_bf16(float f) { return dlp_f32_to_bf16(f); }

// One 8-bit interleaved output row (w pixels) -> row y of the destination.
static void write_row(const dlp_pixel_out *o, int y, const uint8_t *restrict v, const float *restrict sc,
                      const float *restrict bi) {
    const int w = o->w, n = 3 * w;
    const size_t plane = (size_t)o->w * o->h;
    if (o->layout == DLP_LAYOUT_NHWC) {
        size_t base = (size_t)y * n;
        switch (o->dtype) {
        case DLP_DTYPE_F32: {
            float *restrict d = (float *)o->dst + base;
            for (int e = 0; e < n; e++) d[e] = (float)v[e] * sc[e] + bi[e];
            break;
        }
        case DLP_DTYPE_BF16: {
            uint16_t *restrict d = (uint16_t *)o->dst + base;
            for (int e = 0; e < n; e++) d[e] = f32_to_bf16((float)v[e] * sc[e] + bi[e]);
            break;
        }
        case DLP_DTYPE_F16: {
            _Float16 *restrict d = (_Float16 *)o->dst + base;
            for (int e = 0; e < n; e++) d[e] = (_Float16)((float)v[e] * sc[e] + bi[e]);
            break;
        }
        default:
            memcpy((uint8_t *)o->dst + base, v, (size_t)n);
            break;
        }
        return;
    }
    size_t base = (size_t)y * w;
    switch (o->dtype) {
    case DLP_DTYPE_F32: {
        float *restrict d0 = (float *)o->dst + base, *restrict d1 = d0 + plane, *restrict d2 = d1 + plane;
        const float s0 = o->scale[0], s1 = o->scale[1], s2 = o->scale[2];
        const float b0 = o->bias[0], b1 = o->bias[1], b2 = o->bias[2];
        for (int x = 0; x < w; x++) {
            d0[x] = (float)v[3 * x + 0] * s0 + b0;
            d1[x] = (float)v[3 * x + 1] * s1 + b1;
            d2[x] = (float)v[3 * x + 2] * s2 + b2;
        }
        break;
    }
    case DLP_DTYPE_BF16: {
        uint16_t *restrict d0 = (uint16_t *)o->dst + base, *restrict d1 = d0 + plane, *restrict d2 = d1 + plane;
        for (int x = 0; x < w; x++) {
            d0[x] = f32_to_bf16((float)v[3 * x + 0] * o->scale[0] + o->bias[0]);
            d1[x] = f32_to_bf16((float)v[3 * x + 1] * o->scale[1] + o->bias[1]);
            d2[x] = f32_to_bf16((float)v[3 * x + 2] * o->scale[2] + o->bias[2]);
        }
        break;
    }
    case DLP_DTYPE_F16: {
        _Float16 *restrict d0 = (_Float16 *)o->dst + base, *restrict d1 = d0 + plane, *restrict d2 = d1 + plane;
        for (int x = 0; x < w; x++) {
            d0[x] = (_Float16)((float)v[3 * x + 0] * o->scale[0] + o->bias[0]);
            d1[x] = (_Float16)((float)v[3 * x + 1] * o->scale[1] + o->bias[1]);
            d2[x] = (_Float16)((float)v[3 * x + 2] * o->scale[2] + o->bias[2]);
        }
        break;
    }
    default: {
        uint8_t *restrict d0 = (uint8_t *)o->dst + base, *restrict d1 = d0 + plane, *restrict d2 = d1 + plane;
        for (int x = 0; x < w; x++) {
            d0[x] = v[3 * x + 0];
            d1[x] = v[3 * x + 1];
            d2[x] = v[3 * x + 2];
        }
        break;
    }
    }
}

dlp_status dlp_resample_rgb(const uint8_t *src, int stride, int off_x, int off_y, const dlp_resample_axis *ax,
                            const dlp_resample_axis *ay, dlp_resample_scratch *s, const dlp_pixel_out *o) {
    if (ax->out != o->w || ay->out != o->h)
        return DLP_ERR(DLP_ERR_INVALID, "resample planned for %dx%d but the output is %dx%d", ax->out, ay->out, o->w, o->h);
    if (ax->in_lo < off_x || ay->in_lo < off_y)
        return DLP_ERR(DLP_ERR_INTERNAL, "resample input starts at (%d,%d), before the source (%d,%d)", ax->in_lo,
                       ay->in_lo, off_x, off_y);
    const int w3 = 3 * o->w;
    const int rows = ay->in_hi - ay->in_lo;
    if (!grow((void **)&s->tmp, &s->tmp_cap, (size_t)rows * w3 + 16)) return DLP_ERR(DLP_ERR_NOMEM, "out of memory (resample)");
    if ((size_t)w3 > s->row_cap) {
        free(s->acc);
        free(s->sc);
        free(s->bi);
        free(s->row);
        s->acc = malloc(sizeof(int32_t) * (size_t)w3);
        s->sc = malloc(sizeof(float) * (size_t)w3);
        s->bi = malloc(sizeof(float) * (size_t)w3);
        s->row = malloc((size_t)w3);
        s->row_cap = (size_t)w3;
        if (!s->acc || !s->sc || !s->bi || !s->row) {
            dlp_resample_scratch_free(s);
            return DLP_ERR(DLP_ERR_NOMEM, "out of memory (resample)");
        }
    }
    for (int e = 0; e < w3; e++) {
        s->sc[e] = o->scale[e % 3];
        s->bi[e] = o->bias[e % 3];
    }
    // Horizontal pass over the rows the vertical pass reads. The SIMD loop reads one byte past a pixel, which is
    // inside the next row except on the last row: that one takes the generic loop.
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = src + (size_t)(ay->in_lo - off_y + r) * stride;
        uint8_t *out = s->tmp + (size_t)r * w3;
#if defined(HAVE_HPASS_AVX512)
        if (ax->fixed && r + 1 < rows) {
            hpass_row_avx512(row, off_x, ax, out);
            continue;
        }
#elif defined(__SSE4_1__)
        if (ax->fixed && r + 1 < rows) {
            hpass_row_sse(row, off_x, ax, out);
            continue;
        }
#endif
        hpass_row_generic(row, off_x, ax, out);
    }
    // Vertical pass, one output row at a time, then normalize/convert into the destination.
    int32_t *restrict acc = s->acc;
    uint8_t *restrict v = s->row;
    for (int y = 0; y < o->h; y++) {
        const int32_t *k = ay->coef + (size_t)y * ay->taps;
        const int n = ay->n[y];
        const uint8_t *base = s->tmp + (size_t)(ay->first[y] - ay->in_lo) * w3;
        for (int e = 0; e < w3; e++) acc[e] = HALF;
        for (int t = 0; t < n; t++) {
            const uint8_t *restrict in = base + (size_t)t * w3;
            const int32_t c = k[t];
            for (int e = 0; e < w3; e++) acc[e] += in[e] * c;
        }
        for (int e = 0; e < w3; e++) v[e] = clip8(acc[e]);
        write_row(o, y, v, s->sc, s->bi);
    }
    return DLP_OK;
}
