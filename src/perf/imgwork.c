// perf/imgwork: expected decode and augment work per image.
#include "perf/imgwork.h"

#include <math.h>
#include <string.h>

#include "core/rng.h"

void dlp_img_transform_init(dlp_img_transform *t, int train, int size) {
    memset(t, 0, sizeof *t);
    t->train = train;
    t->size = size;
    t->scale_min = 0.08;
    t->scale_max = 1.0;
    t->ratio_min = 3.0 / 4.0;
    t->ratio_max = 4.0 / 3.0;
    t->mcu = 16;
}

int dlp_dct_scale(int cw, int ch, int size, unsigned mask) {
    if (!mask) mask = 0x1FEu;
    for (int m = 1; m < 8; m++)
        if ((mask >> m & 1u) && (double)cw * m >= 8.0 * size && (double)ch * m >= 8.0 * size) return m;
    return 8;
}

// torchvision's RandomResizedCrop.get_params: up to 10 tries of a random area and log-uniform aspect ratio,
// then a center crop clamped to the ratio range.
static void rrc_sample(dlp_rng *r, int W, int H, const dlp_img_transform *t, int *x, int *y, int *cw, int *ch) {
    double area = (double)W * H;
    double lr0 = log(t->ratio_min), lr1 = log(t->ratio_max);
    for (int k = 0; k < 10; k++) {
        double ta = area * dlp_rng_range(r, t->scale_min, t->scale_max);
        double ar = exp(dlp_rng_range(r, lr0, lr1));
        int w = (int)lround(sqrt(ta * ar)), h = (int)lround(sqrt(ta / ar));
        if (w > 0 && h > 0 && w <= W && h <= H) {
            *x = (int)dlp_rng_below(r, (uint64_t)(W - w + 1));
            *y = (int)dlp_rng_below(r, (uint64_t)(H - h + 1));
            *cw = w;
            *ch = h;
            return;
        }
    }
    double in_ratio = (double)W / H;
    int w = W, h = H;
    if (in_ratio < t->ratio_min) h = (int)lround(w / t->ratio_min);
    else if (in_ratio > t->ratio_max) w = (int)lround(h * t->ratio_max);
    *cw = w;
    *ch = h;
    *x = (W - w) / 2;
    *y = (H - h) / 2;
}

static double scaled(int n, int m) { return (double)((n * m + 7) / 8); }

dlp_status dlp_image_work_expect(const dlp_dataset_stats *s, const dlp_pipeline_profile *p, const dlp_img_transform *t,
                                 uint64_t seed, int samples, dlp_image_work *out) {
    memset(out, 0, sizeof *out);
    if (t->size < 1) return DLP_ERR(DLP_ERR_INVALID, "image work: output size %d", t->size);
    if (s->nsizes < 1 || !(s->mean_bytes > 0)) return DLP_ERR(DLP_ERR_INVALID, "image work: dataset '%s' has no sizes", s->name);
    if (t->train && !(t->scale_min > 0 && t->scale_min <= t->scale_max && t->scale_max <= 1 && t->ratio_min > 0 &&
                      t->ratio_min <= t->ratio_max))
        return DLP_ERR(DLP_ERR_INVALID, "image work: crop scale (%g, %g) / ratio (%g, %g) out of range", t->scale_min,
                       t->scale_max, t->ratio_min, t->ratio_max);
    if (samples <= 0) samples = 4096;
    // Bytes per size: given, or in proportion to the pixel count so the weighted mean is the dataset's mean.
    double mean_px = 0;
    for (int i = 0; i < s->nsizes; i++) mean_px += s->sizes[i].weight * s->sizes[i].w * s->sizes[i].h;
    int resize_short = t->resize_short > 0 ? t->resize_short : (int)lround(t->size * 256.0 / 224.0);
    int mcu = t->mcu > 0 ? t->mcu : 1;
    for (int i = 0; i < s->nsizes; i++) {
        const dlp_image_size *z = &s->sizes[i];
        const int W = z->w, H = z->h;
        double bytes = z->mean_bytes > 0 ? z->mean_bytes : s->mean_bytes * W * H / mean_px;
        dlp_rng r;
        dlp_rng_init(&r, seed, (uint64_t)i);
        double ent = 0, dec = 0, rsz = 0, scl = 0, area = 0;
        for (int k = 0; k < samples; k++) {
            int x, y, cw, ch;
            if (t->train) {
                rrc_sample(&r, W, H, t, &x, &y, &cw, &ch);
            } else {  // the center crop of the resized image, in source pixels
                int side = (int)lround((double)(W < H ? W : H) * t->size / resize_short);
                if (side > W) side = W;
                if (side > H) side = H;
                cw = ch = side;
                x = (W - side) / 2;
                y = (H - side) / 2;
            }
            // DCT scale: for training the crop must reach `size`; for validation the shorter side must reach
            // resize_short before the center crop.
            int m = 8;
            if (p->dct_scaling) {
                if (t->train) m = dlp_dct_scale(cw, ch, t->size, p->dct_scale_mask);
                else m = dlp_dct_scale(W < H ? W : H, W < H ? W : H, resize_short, p->dct_scale_mask);
            }
            double progressive = s->progressive_fraction;
            // Window decode (baseline files): columns from the iMCU boundary left of x, rows up to the last one.
            double dec_w = scaled(cw + x % mcu, m), dec_h = scaled(ch, m);
            double win_dec = dec_w * dec_h, win_ent = bytes * (double)(y + ch) / H;
            double full_dec = scaled(W, m) * scaled(H, m);
            double d_base = p->crop_window ? win_dec : full_dec;
            double e_base = p->crop_window ? win_ent : bytes;
            dec += (1 - progressive) * d_base + progressive * full_dec;
            ent += (1 - progressive) * e_base + progressive * bytes;
            rsz += scaled(cw, m) * scaled(ch, m);
            scl += m / 8.0;
            area += (double)cw * ch / ((double)W * H);
        }
        double wgt = z->weight / samples;
        out->bytes += z->weight * bytes;
        out->entropy_bytes += wgt * ent;
        out->decoded_pixels += wgt * dec;
        out->resize_pixels += wgt * rsz;
        out->mean_dct_scale += wgt * scl;
        out->mean_crop_area += wgt * area;
    }
    out->out_pixels = (double)t->size * t->size;
    return DLP_OK;
}
