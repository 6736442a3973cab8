// backend/backend_impl.h: the interface a backend implements (private: only backend/ and its tests include it).
// A new backend is one folder under backend/ with a `const dlp_backend_ops dlp_backend_<name>` table and one line
// in registry.c; callers reach it only through backend/backend.h's dlp_backend_* and dlp_plan_* functions, which
// handle the optional entries (NULL) once.
// Defines: dlp_backend_ops (= dlp_backend), struct dlp_plan (the first member of every backend's plan),
//          dlp_loss_check_labels, dlp_loss_xent_sample.
#ifndef DLP_BACKEND_IMPL_H
#define DLP_BACKEND_IMPL_H
#include "backend/backend.h"

struct json_t;

typedef struct dlp_backend_ops dlp_backend_ops;

struct dlp_backend_ops {
    const char *name;      // "ref", "cpu", "cuda", "sim"
    const char *summary;   // one line for --help
    dlp_backend_caps caps; // kind, default precision, host allocator (backend.h)
    // DLP_OK if the backend can run here; otherwise a status and why (e.g. "no CUDA device found").
    dlp_status (*available)(char *why, size_t why_len);
    dlp_status (*plan_create)(const dlp_net *net, const dlp_plan_cfg *cfg, dlp_plan **out);
    void (*plan_free)(dlp_plan *p);
    // The layout and type the plan wants the input batch in (the loader writes it that way).
    void (*input_format)(const dlp_plan *p, dlp_layout *layout, dlp_dtype *dtype);

    // Host-side state, fp32 flat arrays in net->params / net->bufs order (NULL bufs: leave them).
    dlp_status (*set_params)(dlp_plan *p, const float *params, const float *bufs);
    dlp_status (*get_params)(dlp_plan *p, float *params, float *bufs);
    dlp_status (*get_grads)(dlp_plan *p, float *grads);
    dlp_status (*set_momentum)(dlp_plan *p, const float *v);  // optimizer state (for checkpoints)
    dlp_status (*get_momentum)(dlp_plan *p, float *v);
    // The flat fp32 gradient array where the plan keeps it (device memory for cuda), for in-place allreduce.
    float *(*grad_buffer)(dlp_plan *p);

    // One step. set_input takes n <= batch samples in input_format (n < batch only for DLP_PASS_EVAL; the
    // rest is padding whose outputs are ignored); a GPU backend may start an asynchronous copy here.
    dlp_status (*set_input)(dlp_plan *p, const void *batch, int n);
    // DLP_PASS_TRAIN needs a training plan and a full batch (n == batch).
    dlp_status (*forward)(dlp_plan *p, dlp_pass pass);
    // The last layer's output for the n samples of the last set_input, fp32 NCHW (logits: (n, classes)).
    dlp_status (*get_output)(dlp_plan *p, float *out);
    // Softmax cross-entropy of the output against labels (n of them); keeps d(loss)/d(logits) for backward.
    // Label smoothing as PyTorch's cross_entropy(label_smoothing=); a label outside [0, classes) is an error.
    // On an inference plan it gives the loss and top-1/top-5 counts only (docs/nn.md has the conventions).
    dlp_status (*loss)(dlp_plan *p, const int32_t *labels, float label_smoothing, dlp_loss_out *out);
    // Backward from the loss (dy NULL) or from a given fp32 NCHW gradient of the output (tests), after a
    // DLP_PASS_TRAIN forward. It overwrites the gradient array (no accumulation across steps) and calls
    // cfg.on_bucket for each bucket of dlp_net_buckets() in order, as soon as its gradients are final.
    dlp_status (*backward)(dlp_plan *p, const float *dy);
    dlp_status (*get_input_grad)(dlp_plan *p, float *dx);  // optional (NULL): fp32 NCHW dL/d(input)
    dlp_status (*update)(dlp_plan *p, const dlp_sgd *hp);  // torch.optim.SGD on the current gradients
    dlp_status (*sync)(dlp_plan *p);  // optional: wait for queued device work
    void *(*stream)(dlp_plan *p);     // optional: the device stream the plan's steps are queued on

    // Optional: sustained GFLOP/s of this backend's best convolution at this precision and thread count,
    // measured on the spot (the "peak" a run's achieved GFLOP/s is compared with).
    dlp_status (*measure_peak)(dlp_dtype precision, int threads, double *gflops);
    // Optional: GFLOP per CPU-second of a small convolution at this precision on `threads` threads for about
    // `seconds` (each its own one-thread convolution): the cores' speed at this kind of work right now; *share (may be
    // NULL) the CPU time those threads got over their wall time.
    dlp_status (*measure_speed)(dlp_dtype precision, int threads, double seconds, double *gflops_per_cpu_s, double *share);

    // Optional: totals since the plan was made, for the step line and result — time spent copying input batches
    // to the device, time the step's compute waited for such a copy (the device-side data stall), and how many
    // copies those totals cover (a GPU backend measures with events; only copies already completed count).
    dlp_status (*input_stats)(dlp_plan *p, double *copy_ms, double *stall_ms, int64_t *copies);

    // Optional: what the plan chose, added to obj as JSON fields for the result (cpu: the ISA oneDNN dispatched,
    // threads, implementation of the 3x3 convolutions, fusions, memory).
    dlp_status (*plan_info)(const dlp_plan *p, struct json_t *obj);
};

struct dlp_plan {
    const dlp_backend_ops *ops;
    int64_t param_count;  // set by dlp_plan_create (the net's)
};

// The loss as the host backends compute it (backend/loss.c), so ref and cpu agree by construction.
// Every label in [0, K), else DLP_ERR_INVALID naming the first one outside.
dlp_status dlp_loss_check_labels(const int32_t *labels, int n, int64_t K);
// One sample of PyTorch's cross_entropy(label_smoothing=e) over its K logits z and label y; returns the sample's
// loss. *rank gets the label's rank (the classes with a larger logit; ties: lower index first). d (NULL: not
// wanted) gets d loss / d z of the mean over n samples.
double dlp_loss_xent_sample(const float *z, int64_t K, int y, double e, float *d, int n, int64_t *rank);

#endif
