// cli/fmt: numbers and durations as the commands print them for people (core/fmt's).
#include "cli/cli.h"
#include "core/fmt.h"

const char *dlp_cli_grp(double v, char *buf, size_t len) { return dlp_fmt_grp(v, buf, len); }
const char *dlp_cli_dur(double s, int coarse, char *buf, size_t len) { return dlp_fmt_dur(s, coarse, buf, len); }
