// data/jpeg: JPEG decoding with libjpeg-turbo — header checks and limits, a region-of-interest decode at a DCT
// scale (jpeg_crop_scanline + jpeg_skip_scanlines, stopping after the last needed row), every colour kind
// converted to RGB, and a classification of bad input. Errors longjmp back (libjpeg never exits the process).
// Defines: dlp_bad_kind, dlp_bad_kind_name, dlp_jpeg_color, dlp_jpeg_info, dlp_jpeg_limits, dlp_jpeg_dec,
//          dlp_jpeg_rgb, dlp_jpeg_dec_create/free/set_limits, dlp_jpeg_open, dlp_jpeg_decode_region, dlp_jpeg_close,
//          dlp_jpeg_bad, dlp_jpeg_warnings, dlp_jpeg_sniff, dlp_jpeg_pick_scale, DLP_JPEG_SCALES_ALL,
//          dlp_jpeg_scaled_size.
#ifndef DLP_DATA_JPEG_H
#define DLP_DATA_JPEG_H
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

// Why a file could not be used. Counted per kind by the loader and reported in results.
typedef enum {
    DLP_BAD_NONE = 0,
    DLP_BAD_IO,           // cannot open or read the file
    DLP_BAD_EMPTY,        // zero bytes
    DLP_BAD_NOT_JPEG,     // no JPEG signature (PNG, GIF, text, ...)
    DLP_BAD_TRUNCATED,    // ends before the end-of-image marker
    DLP_BAD_CORRUPT,      // libjpeg error or corrupt-data warning (bad marker, bad Huffman code, ...)
    DLP_BAD_TOO_LARGE,    // dimensions or file size over the limits (checked before anything is allocated)
    DLP_BAD_UNSUPPORTED,  // valid JPEG of a kind we do not decode (e.g. 2 components)
    DLP_BAD_KIND_COUNT
} dlp_bad_kind;
const char *dlp_bad_kind_name(dlp_bad_kind k);  // "truncated", "not_jpeg", ... (JSON keys)

typedef enum {
    DLP_JPEG_GRAY = 0,
    DLP_JPEG_YCBCR,
    DLP_JPEG_RGB,   // 3 components stored as RGB (no colour transform)
    DLP_JPEG_CMYK,
    DLP_JPEG_YCCK,
} dlp_jpeg_color;

typedef struct dlp_jpeg_info {
    int width, height;  // full-resolution pixels
    int components;     // 1, 3 or 4
    dlp_jpeg_color color;
    int progressive;
    int h_samp, v_samp; // luma sampling factors relative to chroma: 1,1 = 4:4:4; 2,1 = 4:2:2; 2,2 = 4:2:0
    int adobe_inverted; // CMYK/YCCK with an Adobe marker: ink values stored inverted (Photoshop convention)
} dlp_jpeg_info;

typedef struct dlp_jpeg_limits {
    int max_side;         // pixels per side (default 16384)
    int64_t max_pixels;   // width*height (default 100M)
} dlp_jpeg_limits;

// An RGB region of the (scaled) image, owned by the decoder and valid until its next call.
typedef struct dlp_jpeg_rgb {
    const uint8_t *px;  // (h, stride) interleaved RGB
    int w, h, stride;   // stride in bytes
    int x0, y0;         // scaled-image coordinates of px[0]
    int scaled_w, scaled_h;  // size of the whole image at this scale
    int scale_num;      // DCT scale: the image was decoded at scale_num/8
} dlp_jpeg_rgb;

typedef struct dlp_jpeg_dec dlp_jpeg_dec;  // one per thread: libjpeg state and buffers reused across images

dlp_status dlp_jpeg_dec_create(dlp_jpeg_dec **out);
void dlp_jpeg_dec_free(dlp_jpeg_dec *d);
void dlp_jpeg_dec_set_limits(dlp_jpeg_dec *d, const dlp_jpeg_limits *lim);

// Starts an image: checks the signature and the end marker, reads the header, checks the limits. On failure
// returns DLP_ERR_FORMAT (message says why) and dlp_jpeg_bad() tells the kind. The buffer must stay valid
// until dlp_jpeg_close.
dlp_status dlp_jpeg_open(dlp_jpeg_dec *d, const uint8_t *buf, size_t len, dlp_jpeg_info *info);
// Decodes the scaled-image rectangle [x0,x1) x [y0,y1) (clipped to the image) at DCT scale scale_num/8
// (1..16; the scaled image is ceil(W*scale_num/8) wide). Only the rows down to y1 are entropy-decoded and only
// the iMCU columns covering [x0,x1) are inverse-transformed; out may start left of x0 (iMCU alignment).
// One region per image; call dlp_jpeg_close afterwards (also after a failure).
dlp_status dlp_jpeg_decode_region(dlp_jpeg_dec *d, int scale_num, int x0, int y0, int x1, int y1, dlp_jpeg_rgb *out);
void dlp_jpeg_close(dlp_jpeg_dec *d);
dlp_bad_kind dlp_jpeg_bad(const dlp_jpeg_dec *d);  // kind of the last failure (DLP_BAD_NONE if none)
int dlp_jpeg_warnings(const dlp_jpeg_dec *d);      // benign libjpeg warnings seen in the current image

// Quick signature check without libjpeg: DLP_BAD_NONE, EMPTY, NOT_JPEG (what it looks like in *what) or
// TRUNCATED (no end-of-image marker near the end of the buffer).
dlp_bad_kind dlp_jpeg_sniff(const uint8_t *buf, size_t len, const char **what);

// Smallest DCT scale s among the allowed ones (bit s of mask, s = 1..8; 8 is always allowed) with crop_w*s/8 >= out_w
// and crop_h*s/8 >= out_h; 8 if none smaller qualifies (upscaling crops are decoded at full size and resized).
int dlp_jpeg_pick_scale(double crop_w, double crop_h, int out_w, int out_h, unsigned mask);
#define DLP_JPEG_SCALES_ALL 0x1feu  // 1/8 .. 8/8
// Size of a w-pixel side at scale s/8, as libjpeg computes it: ceil(w*s/8).
static inline int dlp_jpeg_scaled_size(int w, int s) { return (int)(((int64_t)w * s + 7) / 8); }

#endif
