// backend: one interface for every compute backend (ggml's backend / fio's ioengine_ops pattern).
// A backend turns a net (backend/net.h) into a plan once — primitives, algorithms, workspace, layouts — then
// runs steps on it; nothing is allocated or chosen in the step loop. `ref` (plain C) is the yardstick every
// other backend is checked against; `cpu` is oneDNN, `cuda` is cuDNN/cuBLAS, `sim` is a GPU emulated from
// its hw/ profile (it sleeps for the time the step would take and computes nothing).
// This is the public header: callers hold opaque handles and call dlp_backend_* / dlp_plan_*, which handle the
// optional entries once; backend/backend_impl.h is the interface a backend implements (ggml-backend.h vs
// ggml-backend-impl.h).
// Defines: dlp_backend, dlp_plan, dlp_plan_cfg, dlp_pass, dlp_sgd, dlp_loss_out, dlp_backend_*, dlp_plan_*.
#ifndef DLP_BACKEND_H
#define DLP_BACKEND_H
#include <stddef.h>
#include <stdint.h>

#include "backend/net.h"
#include "core/alloc.h"
#include "core/status.h"
#include "core/tensor.h"

typedef struct dlp_backend_ops dlp_backend;  // a backend: opaque (backend/backend_impl.h is its interface)
typedef struct dlp_plan dlp_plan;            // a plan a backend made: opaque
struct json_t;                     // jansson's (plan_info)

typedef enum {
    DLP_PASS_TRAIN = 0,  // BN uses batch statistics and updates running stats; activations kept for backward
    DLP_PASS_EVAL,       // BN uses running statistics; nothing kept
} dlp_pass;

typedef struct dlp_plan_cfg {
    int batch;             // samples per step (the plan's fixed N)
    int train;             // 1: training plan; 0: inference-only plan (may fold BN into conv, fuse ReLU/add)
    dlp_dtype precision;   // compute type: F32, BF16 (CPU with avx512_bf16/AMX; GPU), F16 (GPU), I8 (cpu inference)
    int tf32;              // GPU: allow TF32 for F32
    int threads;           // compute threads for CPU backends (0: all allowed CPUs)
    const char *arg;       // the part after ':' in --device (sim:a100 -> "a100"); NULL if none
    // Gradient buckets: the flat gradient array is cut into buckets of about bucket_elems (0: one bucket),
    // taken from the end, since backward finishes the last parameters first. on_bucket is called (from the
    // thread running backward) as each bucket's gradients become final, so a communicator can start
    // reducing it while backward goes on.
    int64_t bucket_elems;
    void (*on_bucket)(void *ctx, int64_t offset, int64_t count);
    void *bucket_ctx;
    // int8 (precision DLP_DTYPE_I8; cpu inference plans): per net layer (net.nlayers entries) the calibrated range
    // of its output (|x| kept; 0: not calibrated) and its minimum (< 0: stored signed), from nn/quant;
    // int8_first_conv: 0 (default) or 1 quantizes the first convolution too; < 0 keeps it in fp32.
    const float *act_range, *act_min;
    int int8_first_conv;
    // Inference streams (cpu): > 1 splits each batch over that many independent plans of threads/streams threads
    // each, run side by side (no barrier between the halves of a batch); 0 or 1: one plan on all threads.
    int streams;
    // Calibration (cpu inference plans, fp32): after every forward, called with the output of each layer an int8
    // plan would store (x: fp32 in the backend's layout, count: the elements of the call's n samples).
    void (*observe)(void *ctx, int layer, const float *x, int64_t count);
    void *observe_ctx;
} dlp_plan_cfg;

typedef struct dlp_sgd {
    float lr;
    float momentum;        // 0.9; buffer v = momentum*v + g (PyTorch's form, dampening 0)
    float weight_decay;    // added to the gradient: g += wd * w
    int nesterov;          // g = g + momentum*v
    int decay_no_decay_params;  // 1: also decay params marked no_decay (BN, bias); 0: skip them
} dlp_sgd;

typedef struct dlp_loss_out {
    double loss;           // mean softmax cross-entropy over the batch (with label smoothing if asked)
    int correct_top1, correct_top5;
} dlp_loss_out;

// ---- backends ------------------------------------------------------------------------------------------------------

// "cpu", "ref", "cuda", "sim:a100" -> the backend (arg gets what follows ':', or NULL). NULL + error if unknown.
const dlp_backend *dlp_backend_find(const char *device, const char **arg);
// NULL-terminated table of the backends compiled in (the first is the default device).
const dlp_backend *const *dlp_backends(void);
const char *dlp_backend_name(const dlp_backend *b);     // "ref", "cpu", "cuda", "sim"
const char *dlp_backend_summary(const dlp_backend *b);  // one line for --help
// DLP_OK if the backend can run here; otherwise a status, and why in `why` (e.g. "no CUDA device found").
dlp_status dlp_backend_available(const dlp_backend *b, char *why, size_t why_len);
// What a backend offers beyond the required entries, for callers that report or skip accordingly.
typedef enum {
    DLP_BACKEND_PEAK,         // dlp_backend_measure_peak measures (otherwise it gives 0)
    DLP_BACKEND_INPUT_GRAD,   // dlp_plan_get_input_grad works
    DLP_BACKEND_INPUT_STATS,  // dlp_plan_input_stats counts device copies (otherwise zeros)
    DLP_BACKEND_ASYNC,        // steps are queued on a device: dlp_plan_sync waits for them
    DLP_BACKEND_PLAN_INFO,    // dlp_plan_info describes the plan
} dlp_backend_feature;
int dlp_backend_has(const dlp_backend *b, dlp_backend_feature f);

// What kind of device a backend computes on (ggml's backend device type): callers tell backends apart by this and by
// dlp_backend_caps, never by name.
typedef enum {
    DLP_BACKEND_KIND_UNKNOWN = -1,  // dlp_backend_kind_of a name no build has
    DLP_BACKEND_KIND_CPU = 0,       // this host's CPUs compute (ref, cpu): threads and loader share the cores
    DLP_BACKEND_KIND_GPU,           // a real accelerator (cuda): the host only feeds it
    DLP_BACKEND_KIND_SIM,           // an emulated accelerator (sim): the host only feeds it, nothing is computed
} dlp_backend_kind;

// A backend's capabilities beyond the dlp_backend_has features (ggml's dev caps).
typedef struct dlp_backend_caps {
    dlp_backend_kind kind;
    dlp_dtype default_precision;  // the compute type when none is asked (F16 on a GPU, F32 on a CPU)
    int host_bf16;                // 1: bf16 runs on the CPU's bf16 instructions (avx512_bf16/AMX) where it has them
    int reference;                // 1: the plain-C yardstick: slow, measured on small problems only
    // The allocator for host memory the plan reads input batches from (pinned memory for a GPU's DMA); NULL: plain
    // host memory is as good.
    const dlp_allocator *(*host_allocator)(void);
} dlp_backend_caps;
const dlp_backend_caps *dlp_backend_get_caps(const dlp_backend *b);
// The kind of a --device string ("cuda:1", "sim:a100,scale=2"), also for backends this build lacks (a result read
// on another machine); DLP_BACKEND_KIND_UNKNOWN (no error set) for a name no build has.
dlp_backend_kind dlp_backend_kind_of(const char *device);
// "cpu", "gpu", "sim" ("unknown"): the kind as results write it.
const char *dlp_backend_kind_name(dlp_backend_kind k);
// The compute type a --device string runs at when none is asked: its caps' default_precision; F32 when the backend
// is not compiled in or the name is unknown (no error set).
dlp_dtype dlp_device_default_precision(const char *device);
// Sustained GFLOP/s of the backend's best convolution at this precision and thread count, measured on the spot (the
// "peak" a run's achieved GFLOP/s is compared with); *gflops = 0 and DLP_OK where the backend does not measure one.
dlp_status dlp_backend_measure_peak(const dlp_backend *b, dlp_dtype precision, int threads, double *gflops);
// The cores' speed at the backend's kind of work right now: GFLOP per CPU-second of a small convolution (ResNet's
// 3x3 at 128 channels, batch 1) at this precision, one on each of `threads` threads (<= 0: every allowed CPU), for
// about `seconds`. Per CPU-second, so time-sharing with other processes does not move it; a virtual machine's
// neighbours (a busy SMT sibling, shared caches and memory, clocks) do. *gflops_per_cpu_s = 0 and DLP_OK where the
// backend does not compute on the host's cores. *share (may be NULL): the CPU time those threads got over their wall
// time (0..1; 0 where not measured): a reading taken while other processes time-shared the cores also carries their
// cache and TLB pollution, which a long-running step feels less.
dlp_status dlp_backend_measure_speed(const dlp_backend *b, dlp_dtype precision, int threads, double seconds,
                                     double *gflops_per_cpu_s, double *share);

// ---- plans ---------------------------------------------------------------------------------------------------------
// A backend turns a net into a plan once (primitives, algorithms, workspace, layouts), then runs steps on it.

dlp_status dlp_plan_create(const dlp_backend *b, const dlp_net *net, const dlp_plan_cfg *cfg, dlp_plan **out);
void dlp_plan_free(dlp_plan *p);  // NULL: nothing
const dlp_backend *dlp_plan_backend(const dlp_plan *p);
int64_t dlp_plan_param_count(const dlp_plan *p);  // the net's parameters: the length of the gradient array
// The layout and type the plan wants the input batch in (the loader writes it that way).
void dlp_plan_input_format(const dlp_plan *p, dlp_layout *layout, dlp_dtype *dtype);

// Host-side state, fp32 flat arrays in net->params / net->bufs order (NULL bufs: leave them).
dlp_status dlp_plan_set_params(dlp_plan *p, const float *params, const float *bufs);
dlp_status dlp_plan_get_params(dlp_plan *p, float *params, float *bufs);
dlp_status dlp_plan_get_grads(dlp_plan *p, float *grads);
dlp_status dlp_plan_set_momentum(dlp_plan *p, const float *v);  // optimizer state (for checkpoints)
dlp_status dlp_plan_get_momentum(dlp_plan *p, float *v);
// The flat fp32 gradient array where the plan keeps it (device memory for cuda), for in-place allreduce.
float *dlp_plan_grad_buffer(dlp_plan *p);

// One step. set_input takes n <= batch samples in input_format (n < batch only for DLP_PASS_EVAL; the rest is
// padding whose outputs are ignored); a GPU backend may start an asynchronous copy here.
dlp_status dlp_plan_set_input(dlp_plan *p, const void *batch, int n);
// DLP_PASS_TRAIN needs a training plan and a full batch (n == batch).
dlp_status dlp_plan_forward(dlp_plan *p, dlp_pass pass);
// The last layer's output for the n samples of the last set_input, fp32 NCHW (logits: (n, classes)).
dlp_status dlp_plan_get_output(dlp_plan *p, float *out);
// Softmax cross-entropy of the output against labels (n of them); keeps d(loss)/d(logits) for backward. Label
// smoothing as PyTorch's cross_entropy(label_smoothing=); a label outside [0, classes) is an error. On an inference
// plan it gives the loss and top-1/top-5 counts only (docs/nn.md has the conventions).
dlp_status dlp_plan_loss(dlp_plan *p, const int32_t *labels, float label_smoothing, dlp_loss_out *out);
// Backward from the loss (dy NULL) or from a given fp32 NCHW gradient of the output (tests), after a DLP_PASS_TRAIN
// forward. It overwrites the gradient array (no accumulation across steps) and calls cfg.on_bucket for each bucket
// of dlp_net_buckets() in order, as soon as its gradients are final.
dlp_status dlp_plan_backward(dlp_plan *p, const float *dy);
// fp32 NCHW dL/d(input) of the last backward; DLP_ERR_UNSUPPORTED where the backend does not keep it
// (dlp_backend_has(.., DLP_BACKEND_INPUT_GRAD) says beforehand).
dlp_status dlp_plan_get_input_grad(dlp_plan *p, float *dx);
dlp_status dlp_plan_update(dlp_plan *p, const dlp_sgd *hp);  // torch.optim.SGD on the current gradients
// Waits for the plan's queued device work (asynchronous devices); nothing on synchronous ones. Phase timing calls it
// between phases.
dlp_status dlp_plan_sync(dlp_plan *p);
// The device stream (cudaStream_t) the plan's work is queued on, for a communicator that must order its collectives
// after it; NULL for host backends.
void *dlp_plan_stream(dlp_plan *p);
// Totals since the plan was made: time spent copying input batches to the device, time the step's compute waited
// for such a copy (the device-side data stall), and how many copies those totals cover (a GPU backend measures with
// events; only completed copies count). Zeros where the backend copies nothing.
dlp_status dlp_plan_input_stats(dlp_plan *p, double *copy_ms, double *stall_ms, int64_t *copies);
// What the backend chose for the plan (the ISA oneDNN dispatched, threads, every kernel, fusions, memory) added to
// obj as JSON fields; DLP_ERR_UNSUPPORTED where the backend does not say.
dlp_status dlp_plan_info(const dlp_plan *p, struct json_t *obj);
// The same as a new JSON object; NULL when the backend does not say.
struct json_t *dlp_plan_info_json(const dlp_plan *p);

#endif
