// run/mllog: MLPerf logging lines (":::MLLOG {json}"), the format MLPerf Training results and their tools
// (mlperf-logging's compliance checker, result summarizers) read; `dlperf train --mllog FILE` writes one.
//
//   dlp_mllog *m;  dlp_mllog_open("run.mllog", &m);
//   DLP_MLLOG_POINT(m, "global_batch_size", json_integer(256), NULL);
//   DLP_MLLOG_START(m, "epoch_start", NULL, dlp_mllog_md("epoch_num", json_integer(1)));
//   dlp_mllog_close(m);
//
// Each line: {"namespace": "", "time_ms": <Unix ms>, "event_type": "POINT_IN_TIME"|"INTERVAL_START"|
// "INTERVAL_END", "key": ..., "value": ..., "metadata": {"file": ..., "lineno": ..., more}}, flushed at once.
// Defines: dlp_mllog, dlp_mllog_open, dlp_mllog_event, dlp_mllog_md, dlp_mllog_close, DLP_MLLOG_POINT,
//          DLP_MLLOG_START, DLP_MLLOG_END.
#ifndef DLP_RUN_MLLOG_H
#define DLP_RUN_MLLOG_H
#include <jansson.h>
#include <stdint.h>

#include "core/status.h"

typedef struct dlp_mllog dlp_mllog;
typedef enum { DLP_MLLOG_POINT_IN_TIME = 0, DLP_MLLOG_INTERVAL_START, DLP_MLLOG_INTERVAL_END } dlp_mllog_type;

// A new file (never overwritten), or "-" for the standard output.
dlp_status dlp_mllog_open(const char *path, dlp_mllog **out);
// One line. value and metadata are taken over (NULL: null, {}); time_ms 0: now (the wall clock, Unix ms).
void dlp_mllog_event(dlp_mllog *m, dlp_mllog_type type, const char *key, json_t *value, json_t *metadata,
                     int64_t time_ms, const char *file, int line);
// {"k": v} (v taken over): the usual one-entry metadata.
json_t *dlp_mllog_md(const char *k, json_t *v);
int64_t dlp_mllog_now_ms(void);
dlp_status dlp_mllog_close(dlp_mllog *m);  // NULL is fine; an error if any line could not be written

#define DLP_MLLOG_POINT(m, key, v, md) dlp_mllog_event((m), DLP_MLLOG_POINT_IN_TIME, (key), (v), (md), 0, __FILE__, __LINE__)
#define DLP_MLLOG_START(m, key, v, md) dlp_mllog_event((m), DLP_MLLOG_INTERVAL_START, (key), (v), (md), 0, __FILE__, __LINE__)
#define DLP_MLLOG_END(m, key, v, md) dlp_mllog_event((m), DLP_MLLOG_INTERVAL_END, (key), (v), (md), 0, __FILE__, __LINE__)

#endif
