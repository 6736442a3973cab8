// tests/fuzz/fuzz_util: the per-process temporary directory the file-based harnesses write their input into.
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

static char g_dir[512];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }
static void rm_dir(void) {
    if (g_dir[0]) nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *dlp_fuzz_tmpdir(void) {
    if (!g_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(g_dir, sizeof g_dir, "%s/dlperf-fuzz-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(g_dir)) {
            fprintf(stderr, "fuzz: mkdtemp %s: %s\n", g_dir, strerror(errno));
            abort();
        }
        atexit(rm_dir);
    }
    return g_dir;
}

const char *dlp_fuzz_tmpfile(const char *name, const uint8_t *data, size_t size) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", dlp_fuzz_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", path);
        abort();
    }
    return path;
}
