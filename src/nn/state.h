// nn/state: a net's parameters and BN buffers to and from safetensors files under torchvision's state_dict
// names ("layer1.0.conv1.weight", "...bn1.running_var", "...bn1.num_batches_tracked" as I64 scalars), so weights
// move both ways between dlperf and torchvision (tools/torchvision_to_safetensors.py converts .pth files).
// Defines: dlp_state_load, dlp_state_load_file, dlp_state_add, dlp_state_save, DLP_STATE_* flags.
#ifndef DLP_NN_STATE_H
#define DLP_NN_STATE_H
#include <stdint.h>

#include "backend/net.h"
#include "core/status.h"
#include "nn/safetensors.h"

enum {
    DLP_STATE_STRICT = 0,   // every tensor of the net present with its shape, no unexpected keys (as torch strict)
    DLP_STATE_PARTIAL = 1,  // load what matches by name and shape; warn about the rest and leave it as it was
};

// Loads params (net->param_count floats) and bufs (net->buf_count; NULL: skip buffers) by name. Floating dtypes
// (F32, F16, BF16, F64) are converted to fp32. num_batches_tracked keys are accepted; the largest value found
// goes to *num_batches_tracked (if not NULL; 0 when absent). Keys may carry DataParallel's "module." prefix.
// Errors name the file and list missing / unexpected keys, or give the tensor and both shapes on a mismatch.
dlp_status dlp_state_load(const dlp_net *net, const char *path, int flags, float *params, float *bufs,
                          int64_t *num_batches_tracked);
dlp_status dlp_state_load_file(const dlp_net *net, const dlp_st_file *f, int flags, float *params, float *bufs,
                               int64_t *num_batches_tracked);
// Adds the net's tensors to a writer in state_dict order (params and bufs are borrowed; *nbt is the value
// written for every num_batches_tracked and must stay valid until the write).
dlp_status dlp_state_add(dlp_st_writer *w, const dlp_net *net, const float *params, const float *bufs,
                         const int64_t *nbt);
// Writes a torchvision-compatible safetensors file (metadata: format=pt, dlperf.arch, dlperf.num_classes).
// flags: DLP_WRITE_REPLACE or DLP_WRITE_NOCLOBBER (core/fs.h).
dlp_status dlp_state_save(const dlp_net *net, const char *path, const float *params, const float *bufs,
                          int64_t num_batches_tracked, int flags);

#endif
