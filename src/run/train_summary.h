// run/train_summary: the summary table of a training run as `dlperf train` prints it on stdout — the setup, the
// run, the phases per step, throughput, compute against the peak, loss, accuracy, stall verdict, loader, monitor,
// data-parallel figures and where the files went — from the run's result.
// Defines: dlp_train_summary_text.
#ifndef DLP_RUN_TRAIN_SUMMARY_H
#define DLP_RUN_TRAIN_SUMMARY_H
#include "run/train.h"

// The text (malloc'd; the caller frees it; NULL when out of memory). json_path: the result file, or NULL.
char *dlp_train_summary_text(const dlp_train_cfg *c, const dlp_train_result *r, const char *json_path);

#endif
