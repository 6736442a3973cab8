// data/check: a dataset's files decoded one by one; one JPEG file through the transform.
#include "data/check.h"

#include <stdlib.h>
#include <string.h>

#include "core/fields.h"
#include "core/fs.h"

dlp_status dlp_dataset_check(const dlp_dataset *ds,
                             void (*on_bad)(void *ctx, const char *path, dlp_bad_kind kind, const char *why), void *ctx,
                             dlp_dataset_check_result *r) {
    memset(r, 0, sizeof *r);
    dlp_jpeg_dec *d;
    DLP_CHECK(dlp_jpeg_dec_create(&d));
    char path[4096];
    for (int64_t i = 0; i < ds->n; i++) {
        dlp_dataset_path(ds, i, path, sizeof path);
        char *buf;
        size_t len;
        dlp_bad_kind k = DLP_BAD_NONE;
        if (dlp_read_file(path, &buf, &len, 256u << 20) != DLP_OK) {
            k = DLP_BAD_IO;
        } else {
            r->bytes += (int64_t)len;
            dlp_jpeg_info ji;
            dlp_jpeg_rgb img;
            if (dlp_jpeg_open(d, (const uint8_t *)buf, len, &ji) != DLP_OK ||
                dlp_jpeg_decode_region(d, 1, 0, 0, 1 << 30, 1 << 30, &img) != DLP_OK)
                k = dlp_jpeg_bad(d) != DLP_BAD_NONE ? dlp_jpeg_bad(d) : DLP_BAD_CORRUPT;
            dlp_jpeg_close(d);
            free(buf);
        }
        if (k != DLP_BAD_NONE) {
            r->kinds[k]++;
            r->bad++;
            if (on_bad) on_bad(ctx, path, k, dlp_err_msg());
        }
        dlp_err_clear();
    }
    r->files = ds->n;
    dlp_jpeg_dec_free(d);
    return DLP_OK;
}

// The crop box must lie in the image: checked against the JPEG's header.
static dlp_status check_box(const char *buf, size_t len, const dlp_crop *c) {
    dlp_jpeg_dec *d;
    dlp_jpeg_info ji;
    DLP_CHECK(dlp_jpeg_dec_create(&d));
    dlp_status st = dlp_jpeg_open(d, (const uint8_t *)buf, len, &ji);
    dlp_jpeg_close(d);
    dlp_jpeg_dec_free(d);
    if (st == DLP_OK && (c->x + c->w > ji.width || c->y + c->h > ji.height))
        st = DLP_ERR(DLP_ERR_INVALID, "--box %d,%d,%d,%d is outside the %dx%d image", c->x, c->y, c->w, c->h, ji.width,
                     ji.height);
    return st;
}

dlp_status dlp_transform_file(const dlp_transform *t, const char *path, const dlp_crop *crop, uint64_t seed, void **out,
                              size_t *nbytes, dlp_sample_info *info) {
    *out = NULL;
    *nbytes = dlp_transform_sample_bytes(t);
    char *buf;
    size_t len;
    DLP_CHECK(dlp_read_file(path, &buf, &len, 256u << 20));
    dlp_transformer *xf;
    dlp_status st = dlp_transformer_create(t, &xf);
    if (st) {
        free(buf);
        return st;
    }
    if (crop) st = check_box(buf, len, crop);
    void *dst = calloc(1, *nbytes);
    dlp_rng rng;
    dlp_rng_init(&rng, seed, 0);
    if (st == DLP_OK && !dst) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    if (st == DLP_OK) st = dlp_transformer_run(xf, (const uint8_t *)buf, len, crop, &rng, dst, info);
    if (st == DLP_OK) *out = dst;
    else free(dst);
    free(buf);
    dlp_transformer_free(xf);
    return st;
}

#define CROP_F(m, t) DLP_FIELD(dlp_crop, m, t, 0)
static const dlp_field_def k_crop_fields[] = {
    {CROP_F(x, DLP_FT_INT)},         {CROP_F(y, DLP_FT_INT)},         {CROP_F(w, DLP_FT_INT)}, {CROP_F(h, DLP_FT_INT)},
    {CROP_F(resized_w, DLP_FT_INT)}, {CROP_F(resized_h, DLP_FT_INT)}, {CROP_F(flip, DLP_FT_BOOL)}, {0}};

#define INFO_F(key, m, t) DLP_FIELD_AS(dlp_sample_info, key, m, t, 0)
static const dlp_field_def k_sample_info_fields[] = {
    {INFO_F("width", width, DLP_FT_INT)},
    {INFO_F("height", height, DLP_FT_INT)},
    {INFO_F("components", jpeg.components, DLP_FT_INT)},
    {INFO_F("progressive", jpeg.progressive, DLP_FT_BOOL)},
    {INFO_F("crop", crop, DLP_FT_OBJ), .sub = k_crop_fields},
    {INFO_F("dct_scale", scale_num, DLP_FT_INT)},
    {INFO_F("decoded_w", dec_w, DLP_FT_INT)},
    {INFO_F("decoded_h", dec_h, DLP_FT_INT)},
    {0}};

json_t *dlp_sample_info_to_json(const dlp_sample_info *info, const dlp_transform *t, size_t nbytes) {
    json_t *o = dlp_fields_to_json(k_sample_info_fields, info);
    json_object_set_new(o, "out_w", json_integer(t->out_w));
    json_object_set_new(o, "out_h", json_integer(t->out_h));
    json_object_set_new(o, "dtype", json_string(dlp_dtype_name(t->dtype)));
    json_object_set_new(o, "layout", json_string(dlp_layout_name(t->layout)));
    json_object_set_new(o, "bytes", json_integer((json_int_t)nbytes));
    return o;
}
