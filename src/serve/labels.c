// serve/labels: class names from a text file — one per line (imagenet_classes.txt), or the synthetic ImageNet's
// labels.txt; the parsing is the inference runner's (run/infer.h), so `dlperf infer` and the service agree.
#include "run/infer.h"
#include "serve/serve.h"

dlp_status dlp_serve_labels_load(const char *path, char ***labels, int *n) { return dlp_infer_labels_load(path, labels, n); }

void dlp_serve_labels_free(char **labels, int n) { dlp_infer_labels_free(labels, n); }
