// core/fmt: numbers and durations as people read them: "19,722" and "2 h 05 min".
// Defines: dlp_fmt_grp, dlp_fmt_dur.
#ifndef DLP_CORE_FMT_H
#define DLP_CORE_FMT_H
#include <stddef.h>

// "19,722" ("-" when not finite); returns buf.
const char *dlp_fmt_grp(double v, char *buf, size_t len);
// "850 ms", "12.3 s", "3 min 04 s", "2 h 05 min", "3.5 days" (coarse: no ms, whole minutes below an hour: "54 min").
const char *dlp_fmt_dur(double s, int coarse, char *buf, size_t len);

#endif
