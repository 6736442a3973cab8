// data/transform: crop choice, decode window + DCT scale, fused resample into the output.
#include "data/transform.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "data/resample.h"

// Which DCT scales to use by default: see docs/data.md for the measurements behind the choice.
#define DLP_TRANSFORM_DCT_SCALES (1u << 1 | 1u << 2 | 1u << 4 | 1u << 8)

struct dlp_transformer {
    dlp_transform t;
    dlp_jpeg_dec *dec;
    dlp_resample_axis ax, ay;
    dlp_resample_scratch scratch;
};

void dlp_transform_defaults(dlp_transform *t, dlp_xform_kind kind) {
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->out_w = t->out_h = 224;
    t->scale_lo = 0.08;
    t->scale_hi = 1.0;
    t->ratio_lo = 3.0 / 4.0;
    t->ratio_hi = 4.0 / 3.0;
    t->flip_p = kind == DLP_XFORM_TRAIN ? 0.5 : 0.0;
    t->resize_short = 0;
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    memcpy(t->mean, mean, sizeof mean);
    memcpy(t->std, std, sizeof std);
    t->layout = DLP_LAYOUT_NCHW;
    t->dtype = DLP_DTYPE_F32;
    t->dct_scales = 0;
}

size_t dlp_transform_sample_bytes(const dlp_transform *t) {
    return (size_t)3 * (size_t)t->out_w * (size_t)t->out_h * dlp_dtype_size(t->dtype);
}

dlp_status dlp_transform_check(const dlp_transform *t) {
    if (t->out_w < 1 || t->out_h < 1 || t->out_w > 8192 || t->out_h > 8192)
        return DLP_ERR(DLP_ERR_INVALID, "crop size %dx%d is not in 1..8192", t->out_w, t->out_h);
    if (!(t->scale_lo > 0 && t->scale_lo <= t->scale_hi && t->scale_hi <= 1.0))
        return DLP_ERR(DLP_ERR_INVALID, "crop scale range %g-%g must satisfy 0 < lo <= hi <= 1", t->scale_lo, t->scale_hi);
    if (!(t->ratio_lo > 0 && t->ratio_lo <= t->ratio_hi && isfinite(t->ratio_hi)))
        return DLP_ERR(DLP_ERR_INVALID, "crop ratio range %g-%g must satisfy 0 < lo <= hi", t->ratio_lo, t->ratio_hi);
    if (!(t->flip_p >= 0 && t->flip_p <= 1)) return DLP_ERR(DLP_ERR_INVALID, "flip probability %g is not in [0,1]", t->flip_p);
    for (int c = 0; c < 3; c++)
        if (!(t->std[c] > 0) || !isfinite(t->mean[c]))
            return DLP_ERR(DLP_ERR_INVALID, "normalization mean/std of channel %d (%g/%g) is not usable", c, t->mean[c],
                           t->std[c]);
    if ((unsigned)t->dtype >= DLP_DTYPE_COUNT) return DLP_ERR(DLP_ERR_INVALID, "unknown dtype %d", (int)t->dtype);
    int big = t->out_w > t->out_h ? t->out_w : t->out_h;
    if (t->resize_short < 0 || (t->resize_short > 0 && t->resize_short < big))
        return DLP_ERR(DLP_ERR_INVALID, "resize size %d must be at least the crop size %d", t->resize_short, big);
    return DLP_OK;
}

// Python's round(): half to even (nearbyint in the default rounding mode).
static int pyround(double v) { return (int)nearbyint(v); }

void dlp_transform_pick_crop(const dlp_transform *t, int W, int H, dlp_rng *rng, dlp_crop *c) {
    memset(c, 0, sizeof *c);
    if (t->kind == DLP_XFORM_VAL) {
        // Resize(short): torchvision's _compute_resized_output_size, then CenterCrop(out).
        int rs = t->resize_short ? t->resize_short
                                 : pyround((t->out_w < t->out_h ? t->out_w : t->out_h) * 256.0 / 224.0);
        int rw, rh;
        if (W <= H) {
            rw = rs;
            rh = (int)((double)rs * H / W);
        } else {
            rh = rs;
            rw = (int)((double)rs * W / H);
        }
        c->resized_w = rw;
        c->resized_h = rh;
        c->x = pyround((rw - t->out_w) / 2.0);
        c->y = pyround((rh - t->out_h) / 2.0);
        c->w = t->out_w;
        c->h = t->out_h;
        c->flip = 0;
        if (t->flip_p > 0 && rng) c->flip = dlp_rng_uniform(rng) < t->flip_p;
        return;
    }
    double area = (double)W * H;
    double lr0 = log(t->ratio_lo), lr1 = log(t->ratio_hi);
    int found = 0;
    for (int attempt = 0; attempt < 10 && !found; attempt++) {
        double target = area * dlp_rng_range(rng, t->scale_lo, t->scale_hi);
        double ar = exp(dlp_rng_range(rng, lr0, lr1));
        int w = pyround(sqrt(target * ar));
        int h = pyround(sqrt(target / ar));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            c->y = (int)dlp_rng_below(rng, (uint64_t)(H - h + 1));
            c->x = (int)dlp_rng_below(rng, (uint64_t)(W - w + 1));
            c->w = w;
            c->h = h;
            found = 1;
        }
    }
    if (!found) {
        double in_ratio = (double)W / H;
        int w, h;
        if (in_ratio < t->ratio_lo) {
            w = W;
            h = pyround(w / t->ratio_lo);
        } else if (in_ratio > t->ratio_hi) {
            h = H;
            w = pyround(h * t->ratio_hi);
        } else {
            w = W;
            h = H;
        }
        if (w < 1) w = 1;
        if (h < 1) h = 1;
        c->w = w;
        c->h = h;
        c->y = (H - h) / 2;
        c->x = (W - w) / 2;
    }
    c->flip = t->flip_p > 0 && dlp_rng_uniform(rng) < t->flip_p;
}

dlp_status dlp_transformer_create(const dlp_transform *t, dlp_transformer **out) {
    *out = NULL;
    DLP_CHECK(dlp_transform_check(t));
    dlp_transformer *x = calloc(1, sizeof *x);
    DLP_TRY_ALLOC(x);
    x->t = *t;
    dlp_status st = dlp_jpeg_dec_create(&x->dec);
    if (st) {
        free(x);
        return st;
    }
    dlp_jpeg_dec_set_limits(x->dec, &t->limits);
    *out = x;
    return DLP_OK;
}

void dlp_transformer_free(dlp_transformer *x) {
    if (!x) return;
    dlp_jpeg_dec_free(x->dec);
    dlp_resample_axis_free(&x->ax);
    dlp_resample_axis_free(&x->ay);
    dlp_resample_scratch_free(&x->scratch);
    free(x);
}

const dlp_transform *dlp_transformer_config(const dlp_transformer *x) { return &x->t; }

// Plans both axes for crop c of a W x H image decoded at scale s/8 (scaled size sw x sh).
static dlp_status plan_axes(dlp_transformer *x, const dlp_crop *c, int W, int H, int s, int sw, int sh) {
    const dlp_transform *t = &x->t;
    double f = s / 8.0;
    if (c->resized_w > 0) {  // resize the whole image, then take the window at (x, y): the filter may cross the window
        double scx = (double)W / c->resized_w * f, scy = (double)H / c->resized_h * f;
        DLP_CHECK(dlp_resample_axis_plan(&x->ax, 0.0, scx, c->x, t->out_w, 0, sw, c->flip));
        DLP_CHECK(dlp_resample_axis_plan(&x->ay, 0.0, scy, c->y, t->out_h, 0, sh, 0));
        return DLP_OK;
    }
    // cut the box out, then resize it: the filter sees only the box
    int lox = (int)floor(c->x * f), hix = (int)ceil((c->x + c->w) * f);
    int loy = (int)floor(c->y * f), hiy = (int)ceil((c->y + c->h) * f);
    if (hix > sw) hix = sw;
    if (hiy > sh) hiy = sh;
    if (hix <= lox) hix = lox + 1;
    if (hiy <= loy) hiy = loy + 1;
    DLP_CHECK(dlp_resample_axis_plan(&x->ax, c->x * f, c->w * f / t->out_w, 0, t->out_w, lox, hix, c->flip));
    DLP_CHECK(dlp_resample_axis_plan(&x->ay, c->y * f, c->h * f / t->out_h, 0, t->out_h, loy, hiy, 0));
    return DLP_OK;
}

dlp_status dlp_transformer_run(dlp_transformer *x, const uint8_t *jpg, size_t len, const dlp_crop *crop, dlp_rng *rng,
                               void *dst, dlp_sample_info *info) {
    const dlp_transform *t = &x->t;
    dlp_sample_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    int64_t t0 = dlp_now_ns();
    dlp_jpeg_info ji;
    dlp_status st = dlp_jpeg_open(x->dec, jpg, len, &ji);
    if (st) {
        info->bad = dlp_jpeg_bad(x->dec);
        info->decode_ns = dlp_now_ns() - t0;
        return st;
    }
    info->jpeg = ji;
    info->width = ji.width;
    info->height = ji.height;
    dlp_crop c;
    if (crop) {
        c = *crop;
    } else if (!rng && (t->kind == DLP_XFORM_TRAIN || t->flip_p > 0)) {
        dlp_jpeg_close(x->dec);
        return DLP_ERR(DLP_ERR_INVALID, "a random crop needs an rng (or give the crop)");
    } else {
        dlp_transform_pick_crop(t, ji.width, ji.height, rng, &c);
    }
    info->crop = c;
    // The DCT scale: the window seen at scale s/8 must stay at least the output size.
    double win_w, win_h;
    if (c.resized_w > 0) {
        win_w = (double)ji.width / c.resized_w * t->out_w;
        win_h = (double)ji.height / c.resized_h * t->out_h;
    } else {
        win_w = c.w;
        win_h = c.h;
    }
    int s = dlp_jpeg_pick_scale(win_w, win_h, t->out_w, t->out_h, t->dct_scales ? t->dct_scales : DLP_TRANSFORM_DCT_SCALES);
    int sw = dlp_jpeg_scaled_size(ji.width, s), sh = dlp_jpeg_scaled_size(ji.height, s);
    int64_t t1 = dlp_now_ns();
    st = plan_axes(x, &c, ji.width, ji.height, s, sw, sh);
    int64_t t2 = dlp_now_ns();
    if (st) {
        dlp_jpeg_close(x->dec);
        return st;
    }
    dlp_jpeg_rgb img;
    st = dlp_jpeg_decode_region(x->dec, s, x->ax.in_lo, x->ay.in_lo, x->ax.in_hi, x->ay.in_hi, &img);
    int64_t t3 = dlp_now_ns();
    info->scale_num = s;
    if (st) {
        info->bad = dlp_jpeg_bad(x->dec);
        dlp_jpeg_close(x->dec);
        info->decode_ns = (t1 - t0) + (t3 - t2);
        info->augment_ns = t2 - t1;
        return st;
    }
    info->dec_w = img.w;
    info->dec_h = img.h;
    dlp_pixel_out o = {.dst = dst, .w = t->out_w, .h = t->out_h, .layout = t->layout, .dtype = t->dtype};
    for (int ch = 0; ch < 3; ch++) {
        o.scale[ch] = 1.0f / (255.0f * t->std[ch]);
        o.bias[ch] = -t->mean[ch] / t->std[ch];
    }
    st = dlp_resample_rgb(img.px, img.stride, img.x0, img.y0, &x->ax, &x->ay, &x->scratch, &o);
    dlp_jpeg_close(x->dec);
    int64_t t4 = dlp_now_ns();
    info->decode_ns = (t1 - t0) + (t3 - t2);
    info->augment_ns = (t2 - t1) + (t4 - t3);
    return st;
}

dlp_status dlp_transform_jpeg(const dlp_transform *t, const uint8_t *jpg, size_t len, void *dst) {
    dlp_transformer *x;
    DLP_CHECK(dlp_transformer_create(t, &x));
    dlp_rng rng;
    dlp_rng_init(&rng, 0, 0);
    dlp_status st = dlp_transformer_run(x, jpg, len, NULL, &rng, dst, NULL);
    dlp_transformer_free(x);
    return st;
}
