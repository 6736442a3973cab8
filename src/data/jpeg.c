// data/jpeg: libjpeg-turbo decoding of a region at a DCT scale, with an error manager that longjmps.
#include "data/jpeg.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "core/alloc.h"

const char *dlp_bad_kind_name(dlp_bad_kind k) {
    static const char *const n[DLP_BAD_KIND_COUNT] = {"none",    "io",        "empty",    "not_jpeg",
                                                      "truncated", "corrupt", "too_large", "unsupported"};
    return (unsigned)k < DLP_BAD_KIND_COUNT ? n[k] : "?";
}

typedef struct err_mgr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int benign;                 // warnings that do not make the image unusable (extraneous bytes, ...)
    dlp_bad_kind kind;          // set before longjmp
    char msg[JMSG_LENGTH_MAX];  // message of the error that stopped the decode
} err_mgr;

struct dlp_jpeg_dec {
    struct jpeg_decompress_struct ci;
    err_mgr err;
    dlp_jpeg_limits lim;
    int active;  // between open and close
    dlp_jpeg_info info;
    dlp_bad_kind bad;
    uint8_t *rgb;  // region output (rows, stride)
    size_t rgb_cap;
    uint8_t *cmyk;  // one row of CMYK before conversion
    size_t cmyk_cap;
    JSAMPROW *rows;
    size_t rows_cap;
};

// libjpeg's fatal errors: format the message and jump back to the call that started the operation.
static void on_error_exit(j_common_ptr c) {
    err_mgr *e = (err_mgr *)c->err;
    (*c->err->format_message)(c, e->msg);
    e->kind = DLP_BAD_CORRUPT;
    longjmp(e->jb, 1);
}

// Warnings (level -1). Data-corruption warnings stop the decode like turbojpeg's TJFLAG_STOPONWARNING: libjpeg
// would otherwise fill the rest of the image with grey and call it a success. Benign ones are counted.
static void on_emit_message(j_common_ptr c, int level) {
    if (level >= 0) return;  // trace messages
    err_mgr *e = (err_mgr *)c->err;
    c->err->num_warnings++;
    switch (c->err->msg_code) {
    case JWRN_JPEG_EOF:
        e->kind = DLP_BAD_TRUNCATED;
        break;
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
    case JWRN_BOGUS_PROGRESSION:
        e->kind = DLP_BAD_CORRUPT;
        break;
    default:  // JWRN_EXTRANEOUS_DATA, JWRN_JFIF_MAJOR, JWRN_ADOBE_XFORM, JWRN_BOGUS_ICC, ...: harmless
        e->benign++;
        return;
    }
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jb, 1);
}

static void on_output_message(j_common_ptr c) { (void)c; }  // never print: we report through dlp_status

dlp_status dlp_jpeg_dec_create(dlp_jpeg_dec **out) {
    *out = NULL;
    dlp_jpeg_dec *d = calloc(1, sizeof *d);
    DLP_TRY_ALLOC(d);
    d->ci.err = jpeg_std_error(&d->err.pub);
    d->err.pub.error_exit = on_error_exit;
    d->err.pub.emit_message = on_emit_message;
    d->err.pub.output_message = on_output_message;
    if (setjmp(d->err.jb)) {
        char msg[JMSG_LENGTH_MAX];
        memcpy(msg, d->err.msg, sizeof msg);
        free(d);
        return DLP_ERR(DLP_ERR_NOMEM, "cannot create a JPEG decoder: %s", msg);
    }
    jpeg_create_decompress(&d->ci);
    d->lim.max_side = 16384;
    d->lim.max_pixels = 100LL * 1000 * 1000;
    *out = d;
    return DLP_OK;
}

void dlp_jpeg_dec_free(dlp_jpeg_dec *d) {
    if (!d) return;
    jpeg_destroy_decompress(&d->ci);
    DLP_FREE_ALL(d->rgb, d->cmyk, d->rows, d);
}

void dlp_jpeg_dec_set_limits(dlp_jpeg_dec *d, const dlp_jpeg_limits *lim) {
    if (lim->max_side > 0) d->lim.max_side = lim->max_side;
    if (lim->max_pixels > 0) d->lim.max_pixels = lim->max_pixels;
}

dlp_bad_kind dlp_jpeg_bad(const dlp_jpeg_dec *d) { return d->bad; }
int dlp_jpeg_warnings(const dlp_jpeg_dec *d) { return d->err.benign; }

static int looks_like_text(const uint8_t *b, size_t n) {
    if (n > 256) n = 256;
    for (size_t i = 0; i < n; i++)
        if (b[i] < 0x09 || (b[i] > 0x0d && b[i] < 0x20) || b[i] == 0x7f) return 0;
    return 1;
}

// Offset of the first SOS marker, found by walking the header's marker segments; 0 if the walk fails (then
// libjpeg reads the header and reports what is wrong).
static size_t find_sos(const uint8_t *b, size_t n) {
    size_t p = 2;
    while (p + 4 <= n) {
        if (b[p] != 0xFF) return 0;
        while (p < n && b[p] == 0xFF) p++;  // fill bytes
        if (p >= n) return 0;
        uint8_t m = b[p++];
        if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) continue;  // no length
        if (m == 0xD9 || p + 2 > n) return 0;
        size_t len = (size_t)b[p] << 8 | b[p + 1];
        if (m == 0xDA) return p - 2;
        if (len < 2) return 0;
        p += len;
    }
    return 0;
}

dlp_bad_kind dlp_jpeg_sniff(const uint8_t *b, size_t n, const char **what) {
    const char *w = "";
    dlp_bad_kind k = DLP_BAD_NONE;
    if (n == 0) {
        k = DLP_BAD_EMPTY;
        w = "empty file (0 bytes)";
    } else if (n < 4 || b[0] != 0xFF || b[1] != 0xD8 || b[2] != 0xFF) {
        k = DLP_BAD_NOT_JPEG;
        if (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0) w = "not a JPEG (PNG signature)";
        else if (n >= 4 && memcmp(b, "GIF8", 4) == 0) w = "not a JPEG (GIF signature)";
        else if (n >= 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WEBP", 4) == 0) w = "not a JPEG (WebP signature)";
        else if (n >= 2 && memcmp(b, "BM", 2) == 0) w = "not a JPEG (BMP signature)";
        else if (looks_like_text(b, n)) w = "not a JPEG (text)";
        else w = "not a JPEG (no FF D8 FF signature)";
    } else {
        // Entropy-coded data never contains FF D9 (0xFF is stuffed as FF 00), so a complete file has its EOI
        // after the first SOS; a file cut anywhere after the header has none.
        size_t sos = find_sos(b, n);
        if (sos) {
            size_t i = n - 1;
            int found = 0;
            while (i > sos + 1) {
                if (b[i] == 0xD9 && b[i - 1] == 0xFF) {
                    found = 1;
                    break;
                }
                i--;
            }
            if (!found) {
                k = DLP_BAD_TRUNCATED;
                w = "truncated (no end-of-image marker after the image data)";
            }
        }
    }
    if (what) *what = w;
    return k;
}

dlp_status dlp_jpeg_open(dlp_jpeg_dec *d, const uint8_t *buf, size_t len, dlp_jpeg_info *info) {
    if (d->active) dlp_jpeg_close(d);
    d->bad = DLP_BAD_NONE;
    d->err.benign = 0;
    d->err.kind = DLP_BAD_NONE;
    const char *what;
    dlp_bad_kind k = dlp_jpeg_sniff(buf, len, &what);
    if (k != DLP_BAD_NONE) {
        d->bad = k;
        return DLP_ERR(DLP_ERR_FORMAT, "%s", what);
    }
    if (setjmp(d->err.jb)) {
        d->bad = d->err.kind;
        jpeg_abort_decompress(&d->ci);
        d->active = 0;
        return DLP_ERR(DLP_ERR_FORMAT, "%s (%s)", d->bad == DLP_BAD_TRUNCATED ? "truncated" : "corrupt JPEG",
                       d->err.msg);
    }
    d->active = 1;
    jpeg_mem_src(&d->ci, buf, (unsigned long)len);
    jpeg_read_header(&d->ci, TRUE);
    struct jpeg_decompress_struct *ci = &d->ci;
    int64_t w = ci->image_width, h = ci->image_height;
    if (w > d->lim.max_side || h > d->lim.max_side || w * h > d->lim.max_pixels) {
        d->bad = DLP_BAD_TOO_LARGE;
        jpeg_abort_decompress(ci);
        d->active = 0;
        return DLP_ERR(DLP_ERR_FORMAT, "image is %lldx%lld, over the limits (%d pixels a side, %lld pixels)",
                       (long long)w, (long long)h, d->lim.max_side, (long long)d->lim.max_pixels);
    }
    dlp_jpeg_info in = {0};
    in.width = (int)w;
    in.height = (int)h;
    in.components = ci->num_components;
    in.progressive = ci->progressive_mode ? 1 : 0;
    in.h_samp = in.v_samp = 1;
    int ok = 1;
    switch (ci->jpeg_color_space) {
    case JCS_GRAYSCALE: in.color = DLP_JPEG_GRAY; ok = ci->num_components == 1; break;
    case JCS_YCbCr: in.color = DLP_JPEG_YCBCR; ok = ci->num_components == 3; break;
    case JCS_RGB: in.color = DLP_JPEG_RGB; ok = ci->num_components == 3; break;
    case JCS_CMYK: in.color = DLP_JPEG_CMYK; ok = ci->num_components == 4; break;
    case JCS_YCCK: in.color = DLP_JPEG_YCCK; ok = ci->num_components == 4; break;
    default: ok = 0; break;
    }
    if (!ok) {
        d->bad = DLP_BAD_UNSUPPORTED;
        int nc = ci->num_components;
        jpeg_abort_decompress(ci);
        d->active = 0;
        return DLP_ERR(DLP_ERR_FORMAT, "unsupported JPEG colour space (%d components)", nc);
    }
    if (ci->num_components >= 3) {
        jpeg_component_info *c0 = &ci->comp_info[0], *c1 = &ci->comp_info[1];
        in.h_samp = c1->h_samp_factor ? c0->h_samp_factor / c1->h_samp_factor : 1;
        in.v_samp = c1->v_samp_factor ? c0->v_samp_factor / c1->v_samp_factor : 1;
    }
    in.adobe_inverted = (in.color == DLP_JPEG_CMYK || in.color == DLP_JPEG_YCCK) && ci->saw_Adobe_marker;
    d->info = in;
    if (info) *info = in;
    return DLP_OK;
}

static int grow(void **p, size_t *cap, size_t need) {
    if (need <= *cap) return 1;
    size_t n = need + need / 4;
    void *q = realloc(*p, n);
    if (!q) return 0;
    *p = q;
    *cap = n;
    return 1;
}

// CMYK row -> RGB. Adobe (Photoshop) files store inverted inks: the stored value is 255 - ink, so
// R = stored_C * stored_K / 255; plain CMYK uses R = (255 - C) * (255 - K) / 255.
static void cmyk_to_rgb(const uint8_t *in, uint8_t *out, int n, int inverted) {
    for (int i = 0; i < n; i++) {
        int c = in[4 * i], m = in[4 * i + 1], y = in[4 * i + 2], k = in[4 * i + 3];
        if (!inverted) {
            c = 255 - c;
            m = 255 - m;
            y = 255 - y;
            k = 255 - k;
        }
        out[3 * i + 0] = (uint8_t)((c * k + 127) / 255);
        out[3 * i + 1] = (uint8_t)((m * k + 127) / 255);
        out[3 * i + 2] = (uint8_t)((y * k + 127) / 255);
    }
}

// The part under setjmp: its arguments are never modified (they would be clobbered by longjmp).
static dlp_status decode_region(dlp_jpeg_dec *d, const int scale_num, const int x0, const int y0, const int x1,
                                const int y1, dlp_jpeg_rgb *out) {
    struct jpeg_decompress_struct *ci = &d->ci;
    const int is_cmyk = d->info.color == DLP_JPEG_CMYK || d->info.color == DLP_JPEG_YCCK;
    if (setjmp(d->err.jb)) {
        d->bad = d->err.kind;
        jpeg_abort_decompress(ci);
        d->active = 0;
        return DLP_ERR(DLP_ERR_FORMAT, "%s (%s)", d->bad == DLP_BAD_TRUNCATED ? "truncated" : "corrupt JPEG",
                       d->err.msg);
    }
    ci->scale_num = (unsigned)scale_num;
    ci->scale_denom = 8;
    ci->dct_method = JDCT_ISLOW;  // libjpeg's default, as Pillow uses: decoded pixels match torchvision's
    ci->do_fancy_upsampling = TRUE;
    ci->out_color_space = is_cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(ci);
    const int sw = (int)ci->output_width, sh = (int)ci->output_height;
    if (x1 > sw || y1 > sh) {  // cannot happen: the caller clipped with the same formula
        jpeg_abort_decompress(ci);
        d->active = 0;
        return DLP_ERR(DLP_ERR_INTERNAL, "decode region past the %dx%d scaled image", sw, sh);
    }
    JDIMENSION xoff = (JDIMENSION)x0, cw = (JDIMENSION)(x1 - x0);
    if (x0 > 0 || x1 < sw) jpeg_crop_scanline(ci, &xoff, &cw);
    if (y0 > 0) {
        JDIMENSION skipped = jpeg_skip_scanlines(ci, (JDIMENSION)y0);
        if ((int)skipped != y0) {
            jpeg_abort_decompress(ci);
            d->active = 0;
            d->bad = DLP_BAD_CORRUPT;
            return DLP_ERR(DLP_ERR_FORMAT, "corrupt JPEG (could skip only %u of %d rows)", skipped, y0);
        }
    }
    int nrows = y1 - y0;
    size_t stride = (size_t)cw * 3;
    if (!grow((void **)&d->rgb, &d->rgb_cap, stride * (size_t)nrows) ||
        !grow((void **)&d->rows, &d->rows_cap, sizeof(JSAMPROW) * (size_t)nrows) ||
        (is_cmyk && !grow((void **)&d->cmyk, &d->cmyk_cap, (size_t)cw * 4))) {
        jpeg_abort_decompress(ci);
        d->active = 0;
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory for a %ux%d decode region", cw, nrows);
    }
    if (!is_cmyk) {
        for (int r = 0; r < nrows; r++) d->rows[r] = d->rgb + (size_t)r * stride;
        int done = 0;
        while (done < nrows) {
            JDIMENSION got = jpeg_read_scanlines(ci, d->rows + done, (JDIMENSION)(nrows - done));
            if (got == 0) break;  // suspension cannot happen with a memory source; guard anyway
            done += (int)got;
        }
        if (done != nrows) {
            jpeg_abort_decompress(ci);
            d->active = 0;
            d->bad = DLP_BAD_TRUNCATED;
            return DLP_ERR(DLP_ERR_FORMAT, "truncated (got %d of %d rows)", done, nrows);
        }
    } else {
        for (int r = 0; r < nrows; r++) {
            JSAMPROW row = d->cmyk;
            if (jpeg_read_scanlines(ci, &row, 1) != 1) {
                jpeg_abort_decompress(ci);
                d->active = 0;
                d->bad = DLP_BAD_TRUNCATED;
                return DLP_ERR(DLP_ERR_FORMAT, "truncated (got %d of %d rows)", r, nrows);
            }
            cmyk_to_rgb(d->cmyk, d->rgb + (size_t)r * stride, (int)cw, d->info.adobe_inverted);
        }
    }
    out->px = d->rgb;
    out->w = (int)cw;
    out->h = nrows;
    out->stride = (int)stride;
    out->x0 = (int)xoff;
    out->y0 = y0;
    out->scaled_w = sw;
    out->scaled_h = sh;
    out->scale_num = scale_num;
    return DLP_OK;
}

dlp_status dlp_jpeg_decode_region(dlp_jpeg_dec *d, int scale_num, int x0, int y0, int x1, int y1, dlp_jpeg_rgb *out) {
    if (!d->active) return DLP_ERR(DLP_ERR_INVALID, "dlp_jpeg_decode_region without dlp_jpeg_open");
    if (scale_num < 1 || scale_num > 16) return DLP_ERR(DLP_ERR_INVALID, "DCT scale %d/8 is not in 1..16", scale_num);
    int sw = dlp_jpeg_scaled_size(d->info.width, scale_num), sh = dlp_jpeg_scaled_size(d->info.height, scale_num);
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 > sw) x1 = sw;
    if (y1 > sh) y1 = sh;
    if (x1 <= x0 || y1 <= y0)
        return DLP_ERR(DLP_ERR_INVALID, "empty decode region [%d,%d)x[%d,%d) of a %dx%d image", x0, x1, y0, y1, sw, sh);
    // libjpeg treats the right end of a cropped scanline as the image edge: with horizontally subsampled chroma, the
    // fancy upsampler then lacks the next chroma sample for the last columns. Decoding one iMCU further keeps every
    // pixel the caller asked for identical to a full decode.
    if (d->info.h_samp > 1) {
        x0 -= 1;  // a start on an iMCU boundary moves one iMCU left, so column x0 has its left neighbour
        if (x0 < 0) x0 = 0;
        x1 += 2 + 2 * scale_num;
        if (x1 > sw) x1 = sw;
    }
    return decode_region(d, scale_num, x0, y0, x1, y1, out);
}

void dlp_jpeg_close(dlp_jpeg_dec *d) {
    if (d->active) jpeg_abort_decompress(&d->ci);  // discards the rows below the region without decoding them
    d->active = 0;
}

int dlp_jpeg_pick_scale(double crop_w, double crop_h, int out_w, int out_h, unsigned mask) {
    for (int s = 1; s < 8; s++)
        if ((mask >> s & 1u) && crop_w * s >= 8.0 * out_w && crop_h * s >= 8.0 * out_h) return s;
    return 8;
}
