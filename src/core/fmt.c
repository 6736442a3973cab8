// core/fmt: numbers and durations for people.
#include "core/fmt.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *dlp_fmt_grp(double v, char *buf, size_t len) {
    if (!isfinite(v)) {
        snprintf(buf, len, "-");
        return buf;
    }
    char raw[48];
    snprintf(raw, sizeof raw, "%.0f", v);
    int neg = raw[0] == '-';
    const char *d = raw + neg;
    size_t nd = strlen(d), o = 0;
    if (neg && o + 1 < len) buf[o++] = '-';
    for (size_t i = 0; i < nd && o + 2 < len; i++) {
        if (i > 0 && (nd - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = d[i];
    }
    buf[o] = '\0';
    return buf;
}

const char *dlp_fmt_dur(double s, int coarse, char *buf, size_t len) {
    if (!isfinite(s)) snprintf(buf, len, "-");
    else if (s < 1 && !coarse) snprintf(buf, len, "%.0f ms", s * 1e3);
    else if (s < 60) snprintf(buf, len, "%.1f s", s);
    else if (s < 3600 && coarse) snprintf(buf, len, "%d min", (int)(s / 60 + 0.5));
    else if (s < 3600) snprintf(buf, len, "%d min %02d s", (int)(s / 60), (int)fmod(s, 60));
    else if (s < 48 * 3600) snprintf(buf, len, "%d h %02d min", (int)(s / 3600), (int)fmod(s / 60, 60));
    else snprintf(buf, len, "%.1f days", s / 86400);
    return buf;
}
