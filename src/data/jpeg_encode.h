// data/jpeg_encode: writing JPEGs with libjpeg-turbo, in every kind the decoder must handle — YCbCr at 4:4:4,
// 4:2:2, 4:2:0 or 4:4:0, baseline or progressive, grayscale, RGB without a colour transform, and CMYK/YCCK with an
// Adobe marker (inks stored inverted, as Photoshop does). The synthetic ImageNet and the tests' fixtures use it.
// Defines: dlp_jpeg_enc_color, dlp_jpeg_enc_opts, dlp_jpeg_enc_defaults, dlp_jpeg_encode.
#ifndef DLP_DATA_JPEG_ENCODE_H
#define DLP_DATA_JPEG_ENCODE_H
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef enum {
    DLP_JPEG_ENC_YCBCR = 0,
    DLP_JPEG_ENC_GRAY,
    DLP_JPEG_ENC_RGB,   // stored as RGB components (Adobe transform 0)
    DLP_JPEG_ENC_CMYK,  // Adobe-inverted CMYK
    DLP_JPEG_ENC_YCCK,  // Adobe-inverted CMYK stored as YCCK
} dlp_jpeg_enc_color;

typedef struct dlp_jpeg_enc_opts {
    int quality;          // 1..100
    int h_samp, v_samp;   // chroma subsampling: 1,1 = 4:4:4; 2,1 = 4:2:2; 2,2 = 4:2:0; 1,2 = 4:4:0
    int progressive;
    int optimize_coding;  // optimized Huffman tables (as most cameras and Photoshop "optimized" files)
    int restart_rows;     // restart marker every N MCU rows (0: none)
    dlp_jpeg_enc_color color;
} dlp_jpeg_enc_opts;

void dlp_jpeg_enc_defaults(dlp_jpeg_enc_opts *o);  // quality 90, 4:2:0, baseline, YCbCr
// rgb: (h, w, 3) interleaved. *out is malloc'ed (free it).
dlp_status dlp_jpeg_encode(const uint8_t *rgb, int w, int h, const dlp_jpeg_enc_opts *o, uint8_t **out, size_t *len);

#endif
