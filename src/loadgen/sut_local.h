// loadgen/sut_local: the local SUT — dlperf's own inference engine in this process (MLPerf's usual set-up), the
// one loadgen file that runs the engine (serve/stack). The sample library (val images of --data, or --images) is
// preprocessed into memory before the run; each SUT thread owns a ladder of inference plans of batch 1, 2, 4, ..
// max_batch and answers each sample's top-1, scored against the dataset's labels when it has them.
// Defines: dlp_lg_local_cfg, dlp_lg_local, dlp_lg_sut_local_open, dlp_lg_local_samples, dlp_lg_local_label,
//          dlp_lg_local_top1, dlp_lg_local_json, dlp_lg_local_free.
#ifndef DLP_LOADGEN_SUT_LOCAL_H
#define DLP_LOADGEN_SUT_LOCAL_H
#include <jansson.h>
#include <stdint.h>

#include "loadgen/sut.h"
#include "serve/stack.h"

typedef struct dlp_lg_local_cfg {
    dlp_serve_stack_cfg stack;  // the model, device, precision, threads, max_batch (copies/workers set here)
    const char *data;           // the dataset whose val images form the library (when images is NULL)
    const char *images;         // a JPEG file or a directory of them (NULL: data)
    int samples;                // images in the library (MLPerf's performance_sample_count)
    int threads;                // SUT threads (1..64), one ladder each
} dlp_lg_local_cfg;

typedef struct dlp_lg_local dlp_lg_local;

// Opens the engine, preprocesses the library and makes *sut its in-process SUT (the SUT must be destroyed before
// *out is freed). On error nothing stays open.
dlp_status dlp_lg_sut_local_open(const dlp_lg_local_cfg *cfg, dlp_lg_sut *sut, dlp_lg_local **out);
int dlp_lg_local_samples(const dlp_lg_local *l);                 // the library's size
int32_t dlp_lg_local_label(const dlp_lg_local *l, uint32_t idx);  // sample idx's label (-1: none known)
// The samples answered that had a label, and how many of them the top-1 got right.
void dlp_lg_local_top1(const dlp_lg_local *l, long long *answered, long long *correct);
// {"model", "plan", "plans", "preprocessed", "top1_answered", "top1_accuracy"} for the result JSON.
json_t *dlp_lg_local_json(const dlp_lg_local *l);
void dlp_lg_local_free(dlp_lg_local *l);  // NULL is fine

#endif
