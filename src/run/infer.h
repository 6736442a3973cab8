// run/infer: the inference runner. A ResNet with its weights (a dlperf checkpoint, torchvision weights converted
// to safetensors by tools/torchvision_to_safetensors.py, or a seeded random init) on a backend inference plan
// (cfg.train = 0: the backend may fold BN into the convolutions and fuse ReLU and the residual add; fp32 or bf16);
// the validation transform of one JPEG (Resize(256) + CenterCrop(224) + Normalize, Pillow-exact) written straight
// into the plan's input format; and the measurements: offline throughput over batch sizes and per-call latency
// percentiles, from preprocessed tensors (MLPerf's way: preprocess once into memory, time inference only) or from
// JPEG files (read, decode+resize and inference timed separately), plus top-k for given images.
//
//   dlp_infer_model m;  dlp_infer_model_load(&(dlp_infer_model_cfg){.model = "resnet50", .weights = w}, &m);
//   dlp_infer_engine e; dlp_infer_engine_create(&m, &(dlp_infer_engine_cfg){.device = "cpu", .batch = 32}, &e);
//   dlp_infer_prep *p;  dlp_infer_prep_create(&(dlp_infer_prep_cfg){...from e...}, &p);
//   dlp_infer_library lib;  dlp_infer_library_load(p, &files, 64, &lib);
//   dlp_infer_point pt;  dlp_infer_bench(&e, &(dlp_infer_bench_cfg){.lib = &lib, ...}, &pt);
//
// Defines: dlp_infer_model_cfg, dlp_infer_model, dlp_infer_model_load/free, dlp_infer_engine_cfg,
//          dlp_infer_engine, dlp_infer_engine_create/run/free, dlp_infer_prep_cfg, dlp_infer_prep,
//          dlp_infer_prep_create/run/free, dlp_infer_files, dlp_infer_files_add/from_dataset/free,
//          dlp_infer_library, dlp_infer_library_load/free, dlp_infer_labels_load/free, dlp_infer_topk,
//          dlp_infer_lat, dlp_infer_lat_from, dlp_infer_from, dlp_infer_bench_cfg,
//          dlp_infer_point, dlp_infer_bench, dlp_infer_point_to_json, dlp_infer_lat_to_json.
#ifndef DLP_RUN_INFER_H
#define DLP_RUN_INFER_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/net.h"
#include "core/status.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "data/transform.h"
#include "nn/quant.h"

struct dlp_monitor;

// ---- the model: a net and its weights ------------------------------------------------------------------
typedef struct dlp_infer_model_cfg {
    const char *model;    // "resnet50", ...; NULL: the weights' "dlperf.arch" metadata, else recognized from the
                          // state_dict's keys (blocks per stage, Bottleneck or not), else resnet50
    int num_classes;      // 0: from the weights (rows of the last fc.weight), else 1000
    int size;             // input side in pixels (0: 224)
    const char *weights;  // safetensors with torchvision names (a dlperf checkpoint's model file, or a converted
                          // torchvision state_dict); NULL: torchvision's init from `seed` (predictions meaningless)
    uint64_t seed;
} dlp_infer_model_cfg;

typedef struct dlp_infer_model {
    dlp_net net;
    float *params;        // (net.param_count) fp32, state_dict order
    float *bufs;          // (net.buf_count) BN running statistics
    int random_init;      // 1: no weights were given (seeded init): the answers mean nothing
    int size;
    uint64_t seed;
    char weights[1024];   // the file loaded ("" with random_init)
    dlp_quant quant;      // int8: the activation ranges (nlayers 0: none; dlp_infer_model_quantize)
    char quant_src[1100]; // where they came from ("calibrated on ...", or the file loaded)
} dlp_infer_model;

// Builds the net and loads the weights strictly (every tensor present with its shape). A .pth file is refused with
// the converter's command line as a hint.
dlp_status dlp_infer_model_load(const dlp_infer_model_cfg *cfg, dlp_infer_model *m);
void dlp_infer_model_free(dlp_infer_model *m);
// {"arch", "classes", "input": [3, H, W], "parameters", "gflop_per_image", "weights", "random_init", "seed"}
json_t *dlp_infer_model_to_json(const dlp_infer_model *m);

// ---- the engine: an inference plan with the weights set --------------------------------------------------
typedef struct dlp_infer_engine_cfg {
    const char *device;    // "cpu", "ref", "cuda", "sim:a100"
    int batch;             // the plan's batch: the largest n one call takes
    dlp_dtype precision;   // DLP_DTYPE_F32, BF16 (cpu with avx512_bf16 / AMX; GPUs), F16 (GPUs)
    int threads;           // compute threads (0: all allowed CPUs)
    int int8_first_conv;   // int8: 0 (default) or 1 quantizes the first convolution too; < 0 keeps it fp32
    int streams;           // cpu: plans the batch is split over, run side by side (0, 1: one)
    // calibration: the fp32 plan's observer (dlp_plan_cfg.observe)
    void (*observe)(void *ctx, int layer, const float *x, int64_t count);
    void *observe_ctx;
} dlp_infer_engine_cfg;

typedef struct dlp_infer_engine {
    const dlp_backend *ops;
    dlp_plan *plan;
    const dlp_net *net;    // the model's (borrowed: the model must outlive the engine)
    int batch, num_classes;
    dlp_dtype precision;
    int threads;
    dlp_layout layout;     // the plan's input format: one sample is net layer 0 in this layout and type
    dlp_dtype in_dtype;
    size_t sample_bytes;
    double create_ms;      // plan_create + set_params
} dlp_infer_engine;

dlp_status dlp_infer_engine_create(const dlp_infer_model *m, const dlp_infer_engine_cfg *cfg, dlp_infer_engine *e);
// One call: set_input(n) + forward(DLP_PASS_EVAL) + get_output (+ sync): n <= batch samples back to back in the
// input format -> logits (n, num_classes). Not re-entrant (one thread per engine).
dlp_status dlp_infer_engine_run(dlp_infer_engine *e, const void *batch, int n, float *logits);
// One inference call on an inference plan (n <= its batch; it computes its whole batch): set_input(n) +
// forward(DLP_PASS_EVAL) + get_output + sync. The one place a plan is run for inference: dlp_infer_engine_run and the
// service's plan ladder (serve/ladder.c) both call it.
dlp_status dlp_infer_plan_run(dlp_plan *plan, const void *batch, int n, float *logits);
void dlp_infer_engine_free(dlp_infer_engine *e);
// The backend's description of the plan (what was folded and fused, kernels, ISA) when it gives one; else {}.
json_t *dlp_infer_engine_plan_json(const dlp_infer_engine *e);

// ---- int8: calibration of the model's activation ranges (run/infer_quant.c) ------------------------------
typedef struct dlp_infer_calib_cfg {
    const char *device;        // the fp32 plan calibrating ("cpu")
    int threads;
    const char *data;          // dataset (--data spec) whose train split gives the images (val when it has none)
    int images;                // N images, spread evenly over the split
    dlp_calib_method method;
    double percentile;         // DLP_CALIB_PERCENTILE's p in % (0: 99.99)
    const char *path;          // calibration file: used when present, else written; NULL: beside the weights
                               // (dlp_quant_default_path), none for random weights
    int dct_scaling;           // as dlp_infer_prep_cfg (the serving preprocessing)
    void (*on_note)(void *ctx, const char *line);  // progress lines (optional)
    void *ctx;
} dlp_infer_calib_cfg;

// Gives m its int8 activation ranges: the calibration file when present (it must match m's model and weights:
// otherwise an error naming it; beside the weights a file of another image count is made again), else N images
// of cfg->data through the serving preprocessing and an fp32 plan with the calibration observer, saved.
dlp_status dlp_infer_model_quantize(dlp_infer_model *m, const dlp_infer_calib_cfg *cfg);
json_t *dlp_infer_quant_to_json(const dlp_infer_model *m);  // {"method", "images", "percentile", "source"}

// ---- accuracy on a dataset's val split (run/infer_quant.c) ---------------------------------------------------
typedef struct dlp_infer_accuracy {
    int n;                      // images evaluated
    int top1, top5;             // correct
    int *pred;                  // (n) top-1 class of each image
    int skipped;
} dlp_infer_accuracy;
// Top-1/top-5 of engine config ec on up to max images of data's val split (all when max <= 0), batch ec->batch.
dlp_status dlp_infer_accuracy_run(dlp_infer_model *m, const dlp_infer_engine_cfg *ec, const char *data, int max,
                                  int dct_scaling, dlp_infer_accuracy *out);
void dlp_infer_accuracy_free(dlp_infer_accuracy *a);

// ---- preprocessing: one JPEG -> one sample in the engine's input format -----------------------------------
typedef struct dlp_infer_prep_cfg {
    int size;              // crop side (224); the shorter side is first resized to round(size * 256 / 224)
    dlp_layout layout;
    dlp_dtype dtype;
    int dct_scaling;       // 1: let the decoder shrink by a DCT scale where the crop allows (faster, not
                           // bit-exact with Pillow); 0: full decode (torchvision's result exactly)
    int workers;           // threads that call dlp_infer_prep_run at once (one transformer each)
} dlp_infer_prep_cfg;

typedef struct dlp_infer_prep dlp_infer_prep;

dlp_status dlp_infer_prep_create(const dlp_infer_prep_cfg *cfg, dlp_infer_prep **out);
void dlp_infer_prep_free(dlp_infer_prep *p);
size_t dlp_infer_prep_sample_bytes(const dlp_infer_prep *p);
// Decodes and transforms one JPEG into dst; worker in [0, workers). Bad input: DLP_ERR_FORMAT (empty, not a JPEG,
// corrupt, truncated, too large) or DLP_ERR_UNSUPPORTED (a valid JPEG of a kind not decoded), with the
// decoder's message; info (optional) gets the decode and resize times.
dlp_status dlp_infer_prep_run(dlp_infer_prep *p, int worker, const uint8_t *jpg, size_t len, void *dst,
                              dlp_sample_info *info);

// ---- files and the preprocessed sample library ---------------------------------------------------------
typedef struct dlp_infer_files {
    char **paths;
    int32_t *labels;       // class of each file when known (a dataset), else -1
    int n, cap;
} dlp_infer_files;

// A JPEG file (any name), or a directory searched recursively for *.jpg / *.jpeg / *.JPEG (sorted).
dlp_status dlp_infer_files_add(dlp_infer_files *f, const char *path);
// max samples of a dataset spread evenly over it (all when max <= 0 or max >= ds->n), with their labels.
dlp_status dlp_infer_files_from_dataset(dlp_infer_files *f, const dlp_dataset *ds, int max);
void dlp_infer_files_free(dlp_infer_files *f);

typedef struct dlp_infer_library {
    int n;                 // samples preprocessed (files that failed are skipped and counted)
    size_t sample_bytes;
    uint8_t *data;         // (n, sample) in the prep's layout and type, 64-byte aligned
    int *file;             // (n) index into the files of each sample
    int skipped;
    int64_t bytes_read, read_ns, decode_ns, resize_ns;  // totals of the preprocessing
} dlp_infer_library;

// Reads and preprocesses the files in order on worker 0 of p until max samples are in (all files when max <= 0).
// Bad files are skipped with a warning naming them; DLP_ERR_FORMAT if none is usable.
dlp_status dlp_infer_library_load(dlp_infer_prep *p, const dlp_infer_files *files, int max, dlp_infer_library *lib);
void dlp_infer_library_free(dlp_infer_library *lib);

// ---- answers ---------------------------------------------------------------------------------------------
// Class names: torchvision's imagenet_classes.txt (one name per line; blank lines kept as ""), or the synthetic
// ImageNet's labels.txt ("# index wnid name" header, then "<index> <wnid> <description>" lines: the label is
// "<wnid> <description>"). DLP_ERR_FORMAT for an empty file, a NUL byte, or index lines out of order.
dlp_status dlp_infer_labels_load(const char *path, char ***labels, int *n);
void dlp_infer_labels_free(char **labels, int n);
// Softmax over the n logits (in double; non-finite ones left out), then the k most probable classes, ties to the
// lower index; cls[j] = -1 (prob 0) past the finite logits.
void dlp_infer_topk(const float *logits, int n, int k, int *cls, float *prob);

// ---- latency statistics ------------------------------------------------------------------------------------
// MLPerf's percentile: sorted[floor(n * p)], clamped to n - 1 (sorted ascending, n >= 1).
typedef struct dlp_infer_lat {
    int64_t count;
    double min_ms, mean_ms, p50_ms, p90_ms, p95_ms, p99_ms, max_ms;
} dlp_infer_lat;
// Sorts ns in place and summarizes it.
void dlp_infer_lat_from(int64_t *ns, size_t n, dlp_infer_lat *out);
json_t *dlp_infer_lat_to_json(const dlp_infer_lat *l);

// ---- the measurement of one batch size ---------------------------------------------------------------------
typedef enum {
    DLP_INFER_FROM_TENSOR = 0,  // samples preprocessed into memory first; each call takes `batch` of them
    DLP_INFER_FROM_JPEG,        // each call's samples are read and decoded first (inline or on loader threads)
} dlp_infer_from;

typedef struct dlp_infer_bench_cfg {
    dlp_infer_from from;
    int warmup;                  // untimed calls first
    int64_t iters;               // timed calls: at least this many...
    double min_duration_s;       // ...and at least this long (timed part)
    int64_t max_iters;           // 0: no cap
    const dlp_infer_library *lib;   // FROM_TENSOR: the samples (call k takes samples k*batch.. mod n)
    // FROM_JPEG, inline (workers == 0): files read and decoded on the calling thread with prep (worker 0),
    // cycling through `files`; on loader threads (workers >= 1): a dlp_loader over `dataset` (val transform).
    const dlp_infer_files *files;
    dlp_infer_prep *prep;
    const dlp_dataset *dataset;
    int workers;
    int dct_scaling;             // loader: as dlp_infer_prep_cfg.dct_scaling
    struct dlp_monitor *mon;     // optional: images and data wait are counted into it
} dlp_infer_bench_cfg;

typedef struct dlp_infer_point {
    int batch;
    dlp_infer_from from;
    int workers;
    int64_t iters, images;
    double seconds;              // timed part, wall
    double images_per_s, gflops_per_s;
    dlp_infer_lat latency;       // per call, end to end: (read + decode/resize |  wait for the loader) + inference
    dlp_infer_lat infer;         // per call, inference alone (set_input + forward + get_output)
    // Mean per call, ms. Inline: read, decode, resize on the calling thread. Loader: wait (the data stall);
    // read/decode/resize are then the loader threads' time per image (worker time, in parallel with inference).
    double read_ms, decode_ms, resize_ms, wait_ms, infer_ms;
    int per_image_stages;        // 1: read/decode/resize are per image on loader threads, not per call
    int64_t bad;                 // files that failed and were skipped/replaced
    double create_ms;
} dlp_infer_point;

// Runs warm-up calls, then timed calls on the engine (batch = e->batch samples each).
dlp_status dlp_infer_bench(dlp_infer_engine *e, const dlp_infer_bench_cfg *cfg, dlp_infer_point *out);
json_t *dlp_infer_point_to_json(const dlp_infer_point *p);

#endif
