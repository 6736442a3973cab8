// backend/cpu/cpu: internals shared by the files of the oneDNN backend (`cpu`); not a public header.
// A plan is built once: values (activations and their gradients, in the layouts the primitives chose), oneDNN
// primitives with their arguments bound, and step lists (forward train/eval, backward, input gradient) that the
// step functions only walk. Files: cpu.c (the ops table and the step functions), cpu_build.c (the
// training plan), cpu_infer.c (the inference plan), cpu_mem.c (tensors, buffers, steps, reorders),
// cpu_kernels.c (loss, SGD update, running statistics), cpu_peak.c (measure_peak).
// Defines: cpu_plan, cpu_tensor, cpu_value, cpu_step, cpu_steps, cpu_wcopy, cpu_buffer and the cpu_* helpers.
// oneDNN 3.x's C API: memory descriptors are opaque handles (const_dnnl_memory_desc_t). Every descriptor the
// backend makes or keeps is owned by the plan (cpu_md_keep) and lives until plan teardown; a descriptor queried
// from a primitive descriptor (cpu_pd_md) lives as long as that primitive descriptor.
#ifndef DLP_BACKEND_CPU_DNNL_H
#define DLP_BACKEND_CPU_DNNL_H
#include <oneapi/dnnl/dnnl.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend_impl.h"

extern const dlp_backend_ops dlp_backend_cpu;

// A view of memory as a oneDNN tensor: descriptor + data + the dnnl_memory_t bound to both.
typedef struct cpu_tensor {
    const_dnnl_memory_desc_t md;  // owned by the plan
    void *data;
    dnnl_memory_t mem;
    int buf;          // index of the pooled buffer it lives in; CPU_BUF_EXTERNAL, CPU_BUF_OWNED
    size_t own_bytes; // CPU_BUF_OWNED: its size (allocated by cpu_pool_finish)
} cpu_tensor;
#define CPU_BUF_EXTERNAL (-1)
#define CPU_BUF_OWNED (-2)

// A value is one tensor of the forward graph (a layer's output, or a converted copy of one) and its gradient.
typedef struct cpu_value {
    cpu_tensor *x;      // activation
    cpu_tensor *dx;     // gradient (same descriptor as x), NULL until the backward builder needs it
    int layer;          // net layer it represents (-1 for a converted copy)
    int src_value;      // for a converted copy: the value it was converted from; -1 otherwise
    int nuses;          // consumers (node inputs) in the plan
    int uses_left;      // while building: consumers not yet processed
    int defer;          // derived from the input batch: data gradients only in get_input_grad
    int dx_started;     // backward builder: the gradient has had its first (overwriting) write
    int next_conv;      // chain of converted copies of this value (-1: none)
    cpu_tensor *pending;  // backward builder: a gradient contribution not yet added into dx (cpu_build.c)
    float scale;        // int8 plans, a u8/s8 activation: real value = stored integer * scale
} cpu_value;

typedef enum { CPU_STEP_PRIM = 0, CPU_STEP_FN } cpu_step_kind;
// Forward steps run in the training pass, the eval pass, or both (mask 0).
#define CPU_MASK_TRAIN 1
#define CPU_MASK_EVAL 2

typedef struct cpu_plan cpu_plan;
typedef struct cpu_step cpu_step;
typedef void (*cpu_step_fn)(cpu_plan *p, const cpu_step *s);

#define CPU_MAX_ARGS 12
struct cpu_step {
    cpu_step_kind kind;
    int mask;
    int small;           // a short memory-bound op: runs on p->small_now threads
    dnnl_primitive_t prim;
    int nargs;
    dnnl_exec_arg_t args[CPU_MAX_ARGS];
    cpu_step_fn fn;
    void *a, *b, *c, *d;  // fn arguments
    int64_t n, m;
    float f;
    char what[64];       // "layer1.0.conv1 conv fwd" (errors and the profile)
    int64_t ns;          // accumulated time when profiling
    int64_t min_ns;      // the fastest call when profiling (interference only slows a call: the floor on a busy host)
    int64_t calls;
};

typedef struct cpu_steps {
    cpu_step *v;
    int n, cap;
} cpu_steps;

// A reorder run outside the step lists (weight copies, the output and gradient conversions): its primitive and
// its scratchpad memory (NULL when it needs none; else bound to the plan's shared scratchpad like any step's).
// Some reorders want one: the Winograd weight transform (oneDNN's wino_reorder) does.
typedef struct cpu_reorder {
    dnnl_primitive_t prim;  // NULL: nothing to do
    dnnl_memory_t scratch;
} cpu_reorder;

// A compute copy of a weight: the fp32 master (flat array, OIHW) reordered into the layout/type a primitive
// wants; in an inference plan optionally with a BN folded in. Refreshed by set_params and after each update.
typedef struct cpu_wcopy {
    int param;                 // net->params index
    int fold_bn;               // BN layer folded in (-1: none)
    float *fold_bias;          // with fold_bn: the folded bias (K) is written here
    float *folded;             // with fold_bn: fp32 OIHW folded weights (the reorder's source)
    int64_t numel;
    float *qscale;             // int8: per output channel scale (K) of the s8 copy (NULL: no quantization)
    int8_t *q;                 // int8: the s8 OIHW weights (the reorder's source)
    int64_t qk;                // int8: output channels
    int snapshot;              // taken at backward (the input gradient, computed on demand, uses these weights)
    cpu_reorder reorder;       // prim NULL: the copy is the master itself
    dnnl_memory_t src, dst;
} cpu_wcopy;

// A raw buffer that tensors live in; pooled buffers are reused by tensors with disjoint lifetimes.
typedef struct cpu_buffer {
    void *data;
    size_t bytes;
    int refs;   // builder: tensors alive in it
    int pinned; // never reused
} cpu_buffer;

// One oneDNN implementation in use: "convolution jit_wino_4x3:avx512_core" and how many primitives use it.
#define CPU_MAX_KERNELS 48
typedef struct cpu_kernel {
    char name[72];
    int n;
} cpu_kernel;

struct cpu_plan {
    dlp_plan base;
    dlp_net net;
    dlp_plan_cfg cfg;
    int batch, train, threads;
    dlp_dtype prec;            // F32, BF16 or I8 (int8 inference: activations between int8 convolutions u8/s8)
    int int8;                  // prec == I8
    dnnl_data_type_t dt;       // activation type: dnnl_f32 or dnnl_bf16
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    dnnl_primitive_attr_t attr;  // default attributes: a user scratchpad (cpu_attr_new)
    dnnl_memory_desc_t *mds;     // every memory descriptor the plan made or cloned (destroyed at teardown)
    int nmds, cap_mds;

    float *params, *bufs, *grads, *mom;  // flat fp32 arrays in net order

    cpu_tensor **tensors;      // owned lists
    int ntensors, cap_tensors;
    cpu_value *vals;
    int nvals, cap_vals;
    int *val_of;               // net layer -> value holding its output (-1 none yet, -2 fused away)
    cpu_buffer *bufpool;
    int nbufpool, cap_bufpool;
    void **allocs;
    int nallocs, cap_allocs;
    dnnl_primitive_t *prims;
    int nprims, cap_prims;
    dnnl_memory_t *mems;
    int nmems, cap_mems;

    // the shared user scratchpad: every primitive's scratchpad memory points at it
    dnnl_memory_t *scratch_mems;
    int nscratch, cap_scratch;
    size_t scratch_bytes;
    void *scratch;

    cpu_steps fwd, bwd, in_grad;  // forward (train and eval by mask), backward, input gradient
    int build_mask;               // mask given to steps being added
    int build_small;              // steps being added are short memory-bound ops
    int small_busy;               // threads for short ops when the machine is busy (cpu.c)
    int small_fixed;              // DLPERF_CPU_SMALL_THREADS given: small_now never changes
    int small_now;                // threads for short ops now
    int64_t load_checked_ns;      // when the machine's load was last read
    cpu_wcopy *wcopies;
    int nwcopies, cap_wcopies;
    char *wcopy_of;               // param -> has copies to refresh after an update
    int nsnapshots;               // weight copies refreshed at backward

    int in_value, out_value;      // value indices
    int64_t in_elems, out_elems;  // per sample
    float *out_plain;             // (batch, out...) fp32 NCHW: the output as the interface gives it
    cpu_reorder out_reorder;      // value layout -> out_plain (prim NULL: out_plain is the value itself)
    dnnl_memory_t out_reorder_src, out_reorder_dst;
    float *dout_plain;            // d loss / d output, fp32 NCHW
    cpu_reorder dout_reorder;
    dnnl_memory_t dout_reorder_src, dout_reorder_dst;
    float *din_plain;             // d loss / d input, fp32 NCHW (NULL: nothing flows into the input)
    cpu_reorder din_reorder;
    dnnl_memory_t din_reorder_src, din_reorder_dst;

    dlp_bucket *buckets;
    int nbuckets;

    int n;                        // samples of the last set_input
    int fwd_pass;                 // -1 none, else the dlp_pass of the last forward
    int have_dlogits, out_ready, bwd_done, in_grad_done;
    int profile;                  // DLPERF_CPU_PROFILE=1: time every step, log a table at plan_free

    // what the plan chose (plan_info)
    dnnl_cpu_isa_t isa;
    cpu_kernel kernels[CPU_MAX_KERNELS];  // every oneDNN implementation the plan's primitives use, with counts
    int nkernels;
    char conv_impl[64];           // implementation of the first 3x3 convolution (e.g. "jit:avx512_core")
    int nfused_bn_relu, nfused_add_relu, nfolded_bn, nfused_sum;
    int nconverts;     // activations converted to another layout/type between layers (forward)
    int ngrad_copies;  // gradients copied where an add passes its gradient to a value used twice
    int nshortcut_aliases;  // ... and where the add's gradient itself became the shortcut's (cpu_build.c)
    int nfused_acc_relu;    // gradient accumulations fused into an add+ReLU backward (cpu_build.c)
    int winograd;                  // may use Winograd (DLPERF_CPU_WINOGRAD=0: never)
    int nwinograd;                 // convolution primitives that use it
    int nq8_convs, nq8_converts;  // int8: convolutions in int8, scaled conversions between f32 and u8/s8
    int infer_conv_training_prop;  // inference convolutions built as forward_training (see cpu_infer.c)
    int infer_prop;                // DLPERF_CPU_INFER_PROP: -1 auto (inference with AMX), 0 training, 1 inference
    int prop_tuned;                // auto at batch 1 without AMX: both kinds were built and timed (cpu.c)
    double tune_ms[2];             // their forward pass, ms (median): [0] forward_training, [1] forward_inference
    int64_t act_bytes, pool_bytes, weight_bytes;
    int64_t alloc_bytes, mem_limit_bytes;  // all plan allocations; refuse beyond the limit (0: none)
    int mem_limit_hit;
    // Streams (inference, cfg.streams > 1; cpu.c): the batch split over nsub plans of their own, each on
    // threads/streams threads, run side by side; this plan only dispatches to them and gathers their outputs.
    struct cpu_plan **sub;
    int nsub;
};

// ---- errors ----
const char *cpu_dnnl_status_str(dnnl_status_t s);
#define CPU_DNNL(call, ...)                                                                              \
    do {                                                                                                 \
        dnnl_status_t cpu_s_ = (call);                                                                   \
        if (cpu_s_ != dnnl_success) {                                                                    \
            dlp_err_set(cpu_s_ == dnnl_unimplemented ? DLP_ERR_UNSUPPORTED : DLP_ERR_INTERNAL, __FILE__, \
                        __LINE__, "oneDNN: %s: %s", cpu_dnnl_status_str(cpu_s_), #call);                \
            dlp_err_context(__VA_ARGS__);                                                                \
            return dlp_err_status();                                                                     \
        }                                                                                                \
    } while (0)

// ---- memory and bookkeeping (cpu_mem.c) ----
void *cpu_alloc(cpu_plan *p, size_t bytes);  // zeroed, 64-aligned, owned by the plan; NULL on failure
int64_t cpu_mem_available_bytes(void);         // MemAvailable from /proc/meminfo (0: unknown)
// Plan-owned descriptors: plain (a, ab, abc, abcd) or format "any" (the primitive chooses), and a plan-owned
// clone of any descriptor (NULL with the error recorded when out of memory).
dlp_status cpu_md_plain(cpu_plan *p, const_dnnl_memory_desc_t *md, int ndims, const int64_t *dims,
                        dnnl_data_type_t dt);
dlp_status cpu_md_any(cpu_plan *p, const_dnnl_memory_desc_t *md, int ndims, const int64_t *dims,
                      dnnl_data_type_t dt);
const_dnnl_memory_desc_t cpu_md_keep(cpu_plan *p, const_dnnl_memory_desc_t md);
int cpu_md_dims(const_dnnl_memory_desc_t md, int64_t dims[DNNL_MAX_NDIMS]);  // returns ndims
dnnl_data_type_t cpu_md_dt(const_dnnl_memory_desc_t md);
dlp_status cpu_mem_new(cpu_plan *p, const_dnnl_memory_desc_t md, void *data, dnnl_memory_t *out);
// A tensor on `data` (NULL: its own memory, counted as activation memory and allocated by cpu_pool_finish).
dlp_status cpu_tensor_new(cpu_plan *p, const_dnnl_memory_desc_t md, void *data, cpu_tensor **out);
// A tensor in a pooled buffer: buffers are handed out by the builder as it simulates the step order and taken
// back with cpu_tensor_release, so tensors with disjoint lifetimes share memory; cpu_pool_finish allocates them.
dlp_status cpu_tensor_pooled(cpu_plan *p, const_dnnl_memory_desc_t md, cpu_tensor **out);
void cpu_tensor_retain(cpu_plan *p, cpu_tensor *t);
void cpu_tensor_release(cpu_plan *p, cpu_tensor *t);
void cpu_tensor_pin(cpu_plan *p, cpu_tensor *t);  // its buffer is never reused
// A second view of pooled tensor t's buffer in descriptor md (same size: int8 sum post-ops read a u8 output's
// buffer as the s8 shortcut it starts as); retains the buffer.
dlp_status cpu_tensor_view(cpu_plan *p, cpu_tensor *t, const_dnnl_memory_desc_t md, cpu_tensor **out);
int cpu_tensor_exclusive(const cpu_plan *p, const cpu_tensor *t);  // the only live tensor in its buffer
// Allocates owned and pooled tensors (refusing beyond the memory limit) and binds them; before it, tensors
// created with NULL data have no memory.
dlp_status cpu_pool_finish(cpu_plan *p, int64_t *total_bytes);
int cpu_value_new(cpu_plan *p, cpu_tensor *x, int layer);  // index, or -1 (error recorded)
const_dnnl_memory_desc_t cpu_pd_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what, int idx);
const char *cpu_pd_impl(const_dnnl_primitive_desc_t pd);
// Counts pd's implementation in p->kernels ("<primitive kind> <implementation>").
void cpu_kernel_note(cpu_plan *p, const_dnnl_primitive_desc_t pd);
dlp_status cpu_attr_new(dnnl_primitive_attr_t *attr);  // a user scratchpad
// The status of a dnnl_*_primitive_desc_create call (made with p->attr or attributes from cpu_attr_new) as a
// dlp_status: "oneDNN cannot create <what>: <why>" on failure (DLP_ERR_UNSUPPORTED when oneDNN has no
// implementation for it here).
dlp_status cpu_pd_check(dnnl_status_t s, const char *what);
// A step running pd's primitive with args (+ the shared scratchpad), masked with p->build_mask.
dlp_status cpu_step_prim(cpu_plan *p, cpu_steps *list, dnnl_primitive_desc_t pd, int nargs,
                         const dnnl_exec_arg_t *args, const char *what);
dlp_status cpu_step_fn_add(cpu_plan *p, cpu_steps *list, cpu_step_fn fn, const cpu_step *proto);
dlp_status cpu_step_reorder(cpu_plan *p, cpu_steps *list, dnnl_memory_t src, const_dnnl_memory_desc_t smd,
                            dnnl_memory_t dst, const_dnnl_memory_desc_t dmd, const char *what);
// A standalone reorder smd -> dmd; its scratchpad (if it wants one) is the shared one, so it must be created
// before cpu_scratch_finish. cpu_reorder_run executes it (nothing when r->prim is NULL) and waits.
dlp_status cpu_reorder_new(cpu_plan *p, const_dnnl_memory_desc_t smd, const_dnnl_memory_desc_t dmd,
                           cpu_reorder *out);
dlp_status cpu_reorder_run(cpu_plan *p, const cpu_reorder *r, dnnl_memory_t src, dnnl_memory_t dst, int wait,
                           const char *what);
// acc += src (binary add in place; same descriptor).
dlp_status cpu_step_accumulate(cpu_plan *p, cpu_steps *list, cpu_tensor *acc, cpu_tensor *src, const char *what);
dlp_status cpu_steps_run(cpu_plan *p, cpu_steps *list, int mask);
dlp_status cpu_scratch_finish(cpu_plan *p);  // allocates the shared scratchpad and binds every user to it
// A compute copy of parameter `param` in descriptor md (the master itself if md is plain fp32 and nothing is
// folded); fold_bn >= 0 folds that BN's running statistics in and writes the bias into fold_bias. A snapshot
// copy is refreshed only by backward (CPU_WCOPY_SNAPSHOT), so get_input_grad after update still sees the
// weights of the step.
dlp_status cpu_wcopy_add(cpu_plan *p, int param, const_dnnl_memory_desc_t md, int fold_bn, float *fold_bias,
                         int snapshot, dnnl_memory_t *out);
// An int8 copy: the weights (BN folded in when fold_bn >= 0) quantized symmetrically per output channel to s8,
// qscale[k] = max |w[k]| / 127, then reordered into md (an s8 descriptor a primitive chose).
dlp_status cpu_wcopy_add_q8(cpu_plan *p, int param, const_dnnl_memory_desc_t md, int fold_bn, float *fold_bias,
                            float *qscale, dnnl_memory_t *out);
#define CPU_WCOPY_ALL 0
#define CPU_WCOPY_LIVE 1
#define CPU_WCOPY_SNAPSHOT 2
dlp_status cpu_wcopy_refresh(cpu_plan *p, int param, int which);  // copies of param (-1: of every parameter)
void cpu_plan_destroy(cpu_plan *p);

// ---- builders ----
dlp_status cpu_build_train(cpu_plan *p);  // cpu_build.c
dlp_status cpu_build_infer(cpu_plan *p);  // cpu_infer.c
// The convolution algorithms to try for layer l in a pass, best first (returns how many): Winograd F(4x4, 3x3)
// for 3x3 stride-1 fp32 convolutions (oneDNN's jit_wino_4x3: ~2x its direct kernels on ResNet-50's 3x3 layers
// in every pass; only with >= 32 output tiles of 4x4), then direct. Not for the forward pass of a training plan: Winograd's rounding error is a few
// times the direct kernels', and in the forward pass it moves ReLU and maxpool decisions (a pre-activation
// within ~1e-6 of zero changes side), which changes gradients by far more than rounding; in the backward passes
// and in inference its error stays rounding-sized.
#define CPU_CONV_FWD 0
#define CPU_CONV_BWD 1
int cpu_conv_algs(const cpu_plan *p, const dlp_layer *l, int pass, dnnl_alg_kind_t algs[2]);
// Value v in descriptor want: v itself, or a converted copy whose reorder step is added to list (cache: reuse
// an earlier copy in the same descriptor).
dlp_status cpu_value_as(cpu_plan *p, int v, const_dnnl_memory_desc_t want, cpu_steps *list, int cache, int *out);

// ---- kernels (cpu_kernels.c) ----
void cpu_bn_running_update(cpu_plan *p, const cpu_step *s);  // a: mean, b: var, c: running mean, d: running var
void cpu_kernel_sgd(float *w, float *v, const float *g, int64_t n, float lr, float momentum, float wd,
                    int nesterov, int threads);
// Cross-entropy with label smoothing on (n, K) fp32 logits; writes d loss / d logits (batch rows, zero beyond
// n) into dz when not NULL. Returns DLP_ERR_INVALID on a bad label.
dlp_status cpu_kernel_xent(const float *z, int n, int batch, int64_t K, const int32_t *labels, float smoothing,
                           float *dz, dlp_loss_out *out);
void cpu_bucket_fire(cpu_plan *p, const cpu_step *s);  // n: first bucket, m: one past the last
// dst = (a + b) * (y > 0) elementwise over tensors of one descriptor (padding included): a gradient's last
// accumulation fused with the ReLU backward of the add+ReLU that produced the value. a: cpu_tensor *dst,
// b: a, c: b, d: y; n: elements; m: 1 for bf16 (rounded to nearest even once, as a binary add would).
void cpu_kernel_add_relu_bwd(cpu_plan *p, const cpu_step *s);

// ---- peak (cpu_peak.c) ----
dlp_status cpu_measure_peak(dlp_dtype precision, int threads, double *gflops);
dlp_status cpu_measure_speed(dlp_dtype precision, int threads, double seconds, double *gflops_per_cpu_s, double *share);

#endif
