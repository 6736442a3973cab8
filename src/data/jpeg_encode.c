// data/jpeg_encode: libjpeg-turbo compression into memory.
#include "data/jpeg_encode.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

typedef struct enc_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} enc_err;

static void enc_error_exit(j_common_ptr c) {
    enc_err *e = (enc_err *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jb, 1);
}
static void enc_output_message(j_common_ptr c) { (void)c; }

void dlp_jpeg_enc_defaults(dlp_jpeg_enc_opts *o) {
    memset(o, 0, sizeof *o);
    o->quality = 90;
    o->h_samp = o->v_samp = 2;
    o->color = DLP_JPEG_ENC_YCBCR;
}

// RGB -> the pixel row libjpeg takes for this colour kind.
static void convert_row(const uint8_t *rgb, int w, dlp_jpeg_enc_color color, uint8_t *out) {
    if (color == DLP_JPEG_ENC_GRAY) {
        for (int x = 0; x < w; x++) {  // ITU-R BT.601 luma, as libjpeg's own RGB->gray
            int r = rgb[3 * x], g = rgb[3 * x + 1], b = rgb[3 * x + 2];
            out[x] = (uint8_t)((19595 * r + 38470 * g + 7471 * b + 32768) >> 16);
        }
        return;
    }
    // Adobe-inverted CMYK: stored ink = 255 - ink; K = 255 - max(R,G,B), C = 255 (max - R) / max.
    for (int x = 0; x < w; x++) {
        int r = rgb[3 * x], g = rgb[3 * x + 1], b = rgb[3 * x + 2];
        int mx = r > g ? (r > b ? r : b) : (g > b ? g : b);
        if (mx == 0) {
            out[4 * x] = out[4 * x + 1] = out[4 * x + 2] = out[4 * x + 3] = 0;
            continue;
        }
        out[4 * x + 0] = (uint8_t)((r * 255 + mx / 2) / mx);
        out[4 * x + 1] = (uint8_t)((g * 255 + mx / 2) / mx);
        out[4 * x + 2] = (uint8_t)((b * 255 + mx / 2) / mx);
        out[4 * x + 3] = (uint8_t)mx;
    }
}

dlp_status dlp_jpeg_encode(const uint8_t *rgb, int w, int h, const dlp_jpeg_enc_opts *o, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (w < 1 || h < 1 || w > 65500 || h > 65500) return DLP_ERR(DLP_ERR_INVALID, "cannot encode a %dx%d JPEG", w, h);
    if (o->quality < 1 || o->quality > 100) return DLP_ERR(DLP_ERR_INVALID, "JPEG quality %d is not in 1..100", o->quality);
    int hs = o->h_samp ? o->h_samp : 1, vs = o->v_samp ? o->v_samp : 1;
    if (hs < 1 || hs > 2 || vs < 1 || vs > 2) return DLP_ERR(DLP_ERR_INVALID, "unsupported subsampling %dx%d", hs, vs);
    int comps = o->color == DLP_JPEG_ENC_GRAY ? 1 : (o->color == DLP_JPEG_ENC_CMYK || o->color == DLP_JPEG_ENC_YCCK) ? 4 : 3;
    uint8_t *row = NULL;
    if (comps != 3) {
        row = malloc((size_t)w * comps);
        DLP_TRY_ALLOC(row);
    }
    struct jpeg_compress_struct c;
    enc_err e;
    unsigned char *mem = NULL;
    unsigned long memlen = 0;
    memset(&c, 0, sizeof c);
    c.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = enc_error_exit;
    e.pub.output_message = enc_output_message;
    if (setjmp(e.jb)) {
        jpeg_destroy_compress(&c);
        free(mem);
        free(row);
        return DLP_ERR(DLP_ERR_INTERNAL, "JPEG encoding failed: %s", e.msg);
    }
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &mem, &memlen);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 4 ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&c);
    if (o->color == DLP_JPEG_ENC_RGB) jpeg_set_colorspace(&c, JCS_RGB);
    if (o->color == DLP_JPEG_ENC_YCCK) jpeg_set_colorspace(&c, JCS_YCCK);
    jpeg_set_quality(&c, o->quality, TRUE);
    if (o->color == DLP_JPEG_ENC_YCBCR || o->color == DLP_JPEG_ENC_YCCK) {
        c.comp_info[0].h_samp_factor = hs;
        c.comp_info[0].v_samp_factor = vs;
        for (int i = 1; i < c.num_components; i++) c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
        if (o->color == DLP_JPEG_ENC_YCCK) c.comp_info[3].h_samp_factor = hs, c.comp_info[3].v_samp_factor = vs;
    }
    c.optimize_coding = o->optimize_coding ? TRUE : FALSE;
    c.restart_in_rows = o->restart_rows;
    if (o->progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        const uint8_t *src = rgb + (size_t)c.next_scanline * w * 3;
        JSAMPROW r;
        if (comps == 3) {
            r = (JSAMPROW)src;
        } else {
            convert_row(src, w, o->color, row);
            r = row;
        }
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    *out = mem;
    *len = memlen;
    return DLP_OK;
}
