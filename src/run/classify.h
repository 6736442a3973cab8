// run/classify: the top-k classes of given images (`dlperf infer --top5`): the files read, decoded and preprocessed
// into the inference plan's input format, run in batches, and each image's probabilities, classes and logits; class
// names from a labels file, or the synthetic ImageNet's labels.txt found beside the images.
// Defines: DLP_CLASSIFY_TOPK, dlp_classify_cfg, dlp_classify_result, dlp_classify, dlp_classify_free,
//          dlp_classify_json.
#ifndef DLP_RUN_CLASSIFY_H
#define DLP_RUN_CLASSIFY_H
#include <jansson.h>

#include "run/infer.h"

#define DLP_CLASSIFY_TOPK 5

typedef struct dlp_classify_cfg {
    char **paths;             // image files or directories
    int npaths;
    const char *labels_path;  // NULL: a synthetic ImageNet's labels.txt beside the images, when it fits the model
    int dct_scaling;
    void (*on_labels)(void *ctx, const char *src);  // the labels were found (not given) in src; before the run
    void *ctx;
} dlp_classify_cfg;

typedef struct dlp_classify_result {
    int n;                                // images classified (the others could not be decoded: skipped)
    int nfiles, skipped;
    const char **paths;                   // [n]
    int (*cls)[DLP_CLASSIFY_TOPK];        // [n]: the classes, most probable first (-1: fewer classes)
    float (*prob)[DLP_CLASSIFY_TOPK];     // [n]
    float *logits;                        // (n, num_classes)
    int num_classes;
    char **labels;                        // [nlabels] class names (none: 0)
    int nlabels;
    char labels_src[4200];                // where they came from ("": none)
    json_t *plan;                         // the inference plan (dlp_infer_engine_plan_json)
    dlp_infer_files files;
} dlp_classify_result;

dlp_status dlp_classify(dlp_infer_model *m, const dlp_infer_engine_cfg *ec, const dlp_classify_cfg *c,
                        dlp_classify_result *r);
void dlp_classify_free(dlp_classify_result *r);
// The result into a dlperf.infer/1 object: "top5" (per image: path, top-5 classes with probability and label, every
// logit), "labels" (where the names came from), "skipped_images", "plan".
void dlp_classify_json(const dlp_classify_result *r, json_t *result);

#endif
