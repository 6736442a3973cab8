// monitor/sink: the time-series sink interface (one file per format) and the row a sink receives.
// Defines: dlp_mon_row, dlp_mon_sink_ops, dlp_mon_sink_file (+ open/flush/close), dlp_mon_sink_csv, dlp_mon_sink_jsonl, dlp_mon_sink_null.
#ifndef DLP_MONITOR_SINK_H
#define DLP_MONITOR_SINK_H
#include <stdio.h>

#include "core/status.h"
#include "monitor/source.h"

// One sample: the interval [t_s - dt_s, t_s] since the monitor started, its wall-clock end, its phase, and a
// value per field (NaN: none).
typedef struct dlp_mon_row {
    double t_s, dt_s, unix_s;
    const char *phase;
    const double *vals;  // [nfields]
} dlp_mon_row;

// open() creates path (never overwriting: dlp_fopen_new) for the given fields; write() appends one sample;
// close() flushes and reports whether everything reached the file. A sink that fails is dropped by the monitor
// with a warning; the run goes on.
typedef struct dlp_mon_sink_ops {
    const char *name;
    dlp_status (*open)(void **state, const char *path, const dlp_mon_field *fields, int nfields);
    dlp_status (*write)(void *state, const dlp_mon_row *row);
    dlp_status (*close)(void *state);
} dlp_mon_sink_ops;

// The state of a sink that writes a file (monitor/sink_file.c): the file and the fields it was opened for.
// open creates path without overwriting it and is the state a sink's open() returns; flush after a sample reports
// a failed write naming the file; close (a sink's close()) reports whether everything reached the file and frees
// the state.
typedef struct dlp_mon_sink_file {
    FILE *f;
    char *path;
    const dlp_mon_field *fields;  // owned by the monitor, lives as long as the sink
    int n;
} dlp_mon_sink_file;
dlp_status dlp_mon_sink_file_open(void **state, const char *path, const dlp_mon_field *fields, int nfields);
dlp_status dlp_mon_sink_file_flush(const dlp_mon_sink_file *sf);
dlp_status dlp_mon_sink_file_close(void *state);

extern const dlp_mon_sink_ops dlp_mon_sink_csv;    // one row per sample, a column per field
extern const dlp_mon_sink_ops dlp_mon_sink_jsonl;  // one line per sample per metric set (set + instance)
extern const dlp_mon_sink_ops dlp_mon_sink_null;   // counts rows, writes nothing

#endif
