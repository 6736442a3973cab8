// backend/cuda/cuda_host: the host-side half of the cuda backend — everything that needs no GPU, built in every build
// and unit-tested on CPU-only machines: the op list a net becomes (BN + add + ReLU fused, BN folded into the
// convolutions of inference plans, which backward writes accumulate), parameter layouts (torchvision's
// (K,C,R,S) <-> cuDNN's NHWC filters (K,R,S,C)), BN folding, NCHW fp32 <-> NHWC fp16/bf16 conversion, gradient
// buckets and their finalize segments, the convolution-algorithm cache and the CUDA-graph capture state machine.
// Defines: dlp_cuop, dlp_cuda_oplist, dlp_cuda_ops_plan, dlp_cuda_param_perm, dlp_cuda_params_to_device,
//          dlp_cuda_params_from_device, dlp_cuda_fold_bn, dlp_cuda_nchw_to_nhwc, dlp_cuda_nhwc_to_nchw,
//          dlp_cuda_copy_offsets, dlp_cuda_seg, dlp_cuda_bucket, dlp_cuda_buckets_plan, dlp_cuda_conv_key, dlp_cuda_algo_cache,
//          dlp_cugraph_slot, dlp_cugraph_next, dlp_cugraph_done.
#ifndef DLP_BACKEND_CUDA_HOST_H
#define DLP_BACKEND_CUDA_HOST_H
#include <stddef.h>
#include <stdint.h>

#include "backend/net.h"
#include "core/status.h"
#include "core/tensor.h"

// ---- the op list -------------------------------------------------------------------------------------------
typedef enum {
    DLP_CUOP_CONV = 0,  // cuDNN convolution; inference: + folded BN (bias) [+ residual] [+ ReLU]
    DLP_CUOP_BN,        // batch norm [+ residual add] [+ ReLU] (one cuDNN BN-Ex call or our kernels)
    DLP_CUOP_RELU,
    DLP_CUOP_ADD,       // in + res [+ ReLU]
    DLP_CUOP_MAXPOOL,
    DLP_CUOP_AVGPOOL,
    DLP_CUOP_FC,        // cuBLAS GEMM + bias; output fp32 (logits)
    DLP_CUOP_KIND_COUNT
} dlp_cuop_kind;

typedef struct dlp_cuop {
    dlp_cuop_kind kind;
    int layer;        // the net layer that defines the op (its parameters and shape)
    int bn;           // inference CONV: the BN layer folded into it (-1: none)
    int out;          // the last net layer fused into the op: the op writes that layer's output
    int in, res;      // input layers (res: the residual operand of a fused add or of ADD; -1: none)
    int relu;         // 1: ReLU applied last
    int add_layer;    // the ADD layer fused into a CONV/BN op (-1: none)
    int relu_layer;   // the RELU layer fused into the op (-1: none)
    // Backward (training plans). grad_*: whether the gradient of in/res is computed during backward (0 for a
    // CONV reading the net's input: that data gradient is deferred to get_input_grad). acc_*: 1 when another
    // op wrote that gradient first (ops run backward in reverse order), so this one adds to it.
    int grad_in, grad_res;
    int acc_in, acc_res;
    int acc_in_deferred;  // for a deferred input gradient: 1 if it must add to what backward already wrote
} dlp_cuop;

typedef struct dlp_cuda_oplist {
    int nops;
    dlp_cuop *ops;      // in execution order (each op after the ops producing its inputs)
    int nlayers;
    int *kept;          // per layer: 1 if its output is materialized (the input, or some op's out)
    int *op_of_layer;   // per layer: the op whose `layer` it is, or that fuses it (-1 for the input)
    int *consumers;     // per layer: how many layer inputs read it (an ADD of x+x counts 2)
} dlp_cuda_oplist;

// Turns a net into ops. train: 1 for a training plan (no BN folding), fuse: 0 to disable all fusion (tests,
// debugging). Fails with DLP_ERR_UNSUPPORTED for nets this backend cannot run (e.g. a layer reading the FC's
// output, a pooling window larger than its padded input).
dlp_status dlp_cuda_ops_plan(const dlp_net *net, int train, int fuse, dlp_cuda_oplist *out);
void dlp_cuda_ops_free(dlp_cuda_oplist *o);
const char *dlp_cuop_kind_name(dlp_cuop_kind k);

// ---- parameter layouts ---------------------------------------------------------------------------------------
// A parameter (K, C, S) stored (K, S, C) on the device: conv weights (K,C,R,S) with S = R*S, FC weights over an
// input (C,H,W) with S = H*W (the activations are NHWC, so the flattened feature order is (h,w,c)).
// Returns 1 and fills k/c/s if the parameter is permuted; 0 for parameters stored as they are.
int dlp_cuda_param_perm(const dlp_net *net, const dlp_param *p, int64_t *k, int64_t *c, int64_t *s);
// Whole flat arrays (net->param_count elements, same offsets), torchvision order <-> device order.
void dlp_cuda_params_to_device(const dlp_net *net, const float *src, float *dst);
void dlp_cuda_params_from_device(const dlp_net *net, const float *src, float *dst);
// 1 if the parameter is a CONV or FC weight (also kept in the compute type for cuDNN/cuBLAS); 0 for BN
// scale/shift and biases (used in fp32).
int dlp_cuda_param_is_weight(const dlp_net *net, const dlp_param *p);
// 1 for a CONV weight (its gradient comes out of cuDNN in the compute type).
int dlp_cuda_param_is_conv_weight(const dlp_net *net, const dlp_param *p);

// Folds inference BN into the preceding convolution, per output channel k of w (K x inner, any layout with k
// outermost): s = gamma/sqrt(var+eps); w' = w*s; b' = beta - mean*s (computed in double).
void dlp_cuda_fold_bn(const float *w, int64_t K, int64_t inner, const float *gamma, const float *beta,
                      const float *mean, const float *var, float eps, float *w_out, float *b_out);

// fp32 NCHW (n, c, hw) <-> NHWC (n, hw, c) in dtype F32/BF16/F16 (round to nearest even).
void dlp_cuda_nchw_to_nhwc(const float *src, int64_t n, int64_t c, int64_t hw, dlp_dtype dt, void *dst);
void dlp_cuda_nhwc_to_nchw(const void *src, int64_t n, int64_t c, int64_t hw, dlp_dtype dt, float *dst);

// ---- gradient buckets ----------------------------------------------------------------------------------------
// Conv and FC weights also live in the compute type (fp16/bf16/fp32 copy used by cuDNN/cuBLAS), each at a
// 16-byte-aligned offset of its own array. Returns that array's length; coff[i] = -1 for parameters without a copy.
int64_t dlp_cuda_copy_offsets(const dlp_net *net, int64_t *coff);

// A stretch of the flat fp32 arrays handled by one block row of the finalize/update kernels. half: the gradient
// was produced in the compute type (conv weights: cuDNN writes dW in the data type) at coffset, else in fp32 in
// place (BN, biases, the FC weight whose GEMM writes fp32). copy: the parameter has a compute-type copy at
// coffset. Stretches with neither flag may span several parameters.
typedef struct dlp_cuda_seg {
    int64_t offset, count;
    int64_t coffset;  // -1: none
    int half, copy;
} dlp_cuda_seg;

typedef struct dlp_cuda_bucket {
    int64_t offset, count;  // elements of the flat gradient array (dlp_net_buckets' cut)
    int after_op;           // announced once the backward of this op (ops run in reverse) has been enqueued: the
                            // op finishing its last gradient, or later if a bucket before it is not final yet
    int nsegs;
    dlp_cuda_seg *segs;
} dlp_cuda_bucket;

// The buckets of dlp_net_buckets (parameter boundaries, from the end; bucket_elems <= 0: one bucket) with their
// segments, and when each can be announced: buckets are announced in order, so a bucket is never announced before
// the one preceding it (ops may be NULL: after_op 0). coff from dlp_cuda_copy_offsets.
dlp_status dlp_cuda_buckets_plan(const dlp_net *net, const dlp_cuda_oplist *ops, const int64_t *coff,
                                 int64_t bucket_elems, int *nbuckets, dlp_cuda_bucket **out);
void dlp_cuda_buckets_free(dlp_cuda_bucket *b, int n);

// ---- convolution algorithm cache -----------------------------------------------------------------------------
enum { DLP_CUCONV_FWD = 0, DLP_CUCONV_BWD_DATA, DLP_CUCONV_BWD_FILTER, DLP_CUCONV_FWD_FUSED };
typedef struct dlp_cuda_conv_key {  // all ints, no padding: compared with memcmp
    int dir;        // DLP_CUCONV_*
    int n, c, h, w; // input
    int k, r, s;    // filter
    int stride, pad;
    int dtype;      // dlp_dtype of data
    int math;       // 0 strict fp32 (FMA), 1 tensor cores (fp16/bf16, or TF32 for fp32)
} dlp_cuda_conv_key;

typedef struct dlp_cuda_algo_row {
    dlp_cuda_conv_key key;
    int algo;              // cudnn*Algo_t value
    int math_type;         // the cudnnMathType_t it was measured with (set on the descriptor with the algorithm)
    int64_t workspace_bytes;
    float ms;              // measured by cudnnFind (0: from the heuristic)
} dlp_cuda_algo_row;

typedef struct dlp_cuda_algo_cache {
    int n, cap;
    dlp_cuda_algo_row *rows;
    int hits, misses;
} dlp_cuda_algo_cache;

// 1 and *row set if the key is cached (counts a hit), else 0 (counts a miss).
int dlp_cuda_algo_cache_find(dlp_cuda_algo_cache *c, const dlp_cuda_conv_key *key, const dlp_cuda_algo_row **row);
dlp_status dlp_cuda_algo_cache_put(dlp_cuda_algo_cache *c, const dlp_cuda_conv_key *key, int algo, int math_type,
                                   int64_t workspace_bytes, float ms);
void dlp_cuda_algo_cache_free(dlp_cuda_algo_cache *c);
// A cache file (DLPERF_CUDA_ALGO_CACHE) lets later processes skip the algorithm search: one text line per row
// (the key's 12 numbers, then algo, math type, workspace bytes, ms).
// Load merges the file's rows (a missing file is not an error; a malformed line is, naming file and line);
// save writes all rows atomically. Rows are only valid for the cuDNN version and GPU that found them: the file
// starts with a header line naming both, and a file with another header is ignored (load returns DLP_OK, 0 rows).
dlp_status dlp_cuda_algo_cache_load(dlp_cuda_algo_cache *c, const char *path, const char *header, int *loaded);
dlp_status dlp_cuda_algo_cache_save(const dlp_cuda_algo_cache *c, const char *path, const char *header);
// "fwd n256 c64 56x56 k64 3x3 s1 p1 fp16 tc" for logs.
void dlp_cuda_conv_key_str(const dlp_cuda_conv_key *k, char *buf, size_t len);

// ---- CUDA-graph capture state machine --------------------------------------------------------------------------
// Each phase of a step (forward for a pass and input buffer, loss, each backward segment, update) runs eagerly for
// `warmup` calls (lazy library initialization happens there), is captured on the next call, then replayed. A
// failed capture leaves the phase eager for good (with the reason logged once).
typedef enum { DLP_CUGRAPH_EAGER = 0, DLP_CUGRAPH_CAPTURE, DLP_CUGRAPH_REPLAY } dlp_cugraph_action;
typedef enum { DLP_CUGRAPH_WARMING = 0, DLP_CUGRAPH_READY, DLP_CUGRAPH_FAILED } dlp_cugraph_state;
typedef struct dlp_cugraph_slot {
    dlp_cugraph_state state;
    int runs;      // eager runs so far
    int replays;
} dlp_cugraph_slot;

dlp_cugraph_action dlp_cugraph_next(const dlp_cugraph_slot *s, int enabled, int warmup);
// Records how the action went (ok: the capture/instantiation or run succeeded).
void dlp_cugraph_done(dlp_cugraph_slot *s, dlp_cugraph_action a, int ok);

#endif
