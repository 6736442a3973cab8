// nn/quant: static post-training quantization for int8 inference — the calibration of activation ranges (an
// observer fed every stored activation of an fp32 plan over N images, through the same preprocessing as serving),
// the ranges' methods (min/max, percentile), and their safetensors file, saved beside the weights and reused.
// The weights need no calibration: the backend quantizes them per output channel after folding BN.
//
//   dlp_calib *c; dlp_calib_create(&net, DLP_CALIB_PERCENTILE, 99.99, &c);
//   plan cfg: .observe = dlp_calib_observe, .observe_ctx = c;  ... forward N images ...
//   dlp_quant q;  dlp_calib_finish(c, N, &q);  dlp_quant_save(&q, path);   ... dlp_quant_load(path, &net, hash, &q)
//
// Defines: dlp_calib_method, dlp_calib_method_choices, dlp_quant, dlp_calib, dlp_calib_create/observe/finish/free,
//          dlp_quant_weights_hash, dlp_quant_save, dlp_quant_load, dlp_quant_free, dlp_quant_default_path.
#ifndef DLP_NN_QUANT_H
#define DLP_NN_QUANT_H
#include <stddef.h>
#include <stdint.h>

#include "backend/net.h"
#include "core/opts.h"
#include "core/status.h"

typedef enum {
    DLP_CALIB_MINMAX = 0,   // range = the largest |x| seen
    DLP_CALIB_PERCENTILE,   // range = the p-th percentile of |x| (clips rare outliers for a finer step)
} dlp_calib_method;
// minmax|percentile -> DLP_CALIB_*.
extern const dlp_opt_choice dlp_calib_method_choices[];

typedef struct dlp_quant {
    int nlayers;
    float *range;            // (nlayers) |x| kept for each layer's output (0: not observed)
    float *min;              // (nlayers) the smallest value seen (< 0: the layer is stored signed)
    dlp_calib_method method;
    double percentile;       // DLP_CALIB_PERCENTILE's p (in %)
    int images;              // images calibrated on
    uint64_t weights_hash;   // dlp_quant_weights_hash of the weights calibrated with
    char arch[64];
} dlp_quant;

typedef struct dlp_calib dlp_calib;

dlp_status dlp_calib_create(const dlp_net *net, dlp_calib_method method, double percentile, dlp_calib **out);
// The plan's observer (dlp_plan_cfg.observe): accumulates |x|'s maximum, the minimum and a histogram of |x|
// (32 bins per octave: the percentile is within 2.2% of the exact one) for layer.
void dlp_calib_observe(void *ctx, int layer, const float *x, int64_t count);
// The ranges by the method; DLP_ERR_INVALID when nothing was observed.
dlp_status dlp_calib_finish(const dlp_calib *c, int images, uint64_t weights_hash, dlp_quant *q);
void dlp_calib_free(dlp_calib *c);

// FNV-1a over the fp32 parameters and buffers: a calibration belongs to the weights it was made with.
uint64_t dlp_quant_weights_hash(const float *params, int64_t nparams, const float *bufs, int64_t nbufs);
// Writes q as safetensors (tensors "range", "min"; metadata: format, arch, layers, method, percentile, images,
// weights hash) atomically, replacing an older calibration.
dlp_status dlp_quant_save(const dlp_quant *q, const char *path);
// Reads a calibration for net and these weights; DLP_ERR_FORMAT / DLP_ERR_INVALID naming the file when it is
// not one, or belongs to another model or other weights.
dlp_status dlp_quant_load(const char *path, const dlp_net *net, uint64_t weights_hash, dlp_quant *q);
void dlp_quant_free(dlp_quant *q);
// The calibration's place beside the weights: "<weights without .safetensors>.int8-<method>.safetensors".
void dlp_quant_default_path(const char *weights, dlp_calib_method method, char *out, size_t len);

#endif
