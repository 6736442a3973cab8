// tests/fuzz/main: the program around one harness (-DFUZZ_ENTRY=dlp_fuzz_<name>).
//   fuzz_<name> FILE|DIR...   replays every file (a directory: its regular files, sorted) through the harness;
//                             exit 0 when all ran (a failure aborts the process: non-zero status)
//   fuzz_<name>               with no arguments, under afl-fuzz (afl-clang-fast: persistent mode, shared-memory
//                             input), or one input on stdin otherwise
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

#ifndef FUZZ_ENTRY
#error "compile with -DFUZZ_ENTRY=dlp_fuzz_<name>"
#endif

#ifdef __AFL_FUZZ_TESTCASE_LEN
__AFL_FUZZ_INIT();
#endif

static int read_all(FILE *f, uint8_t **buf, size_t *len) {
    size_t cap = 65536, n = 0;
    uint8_t *b = malloc(cap);
    if (!b) return -1;
    size_t r;
    while ((r = fread(b + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            uint8_t *nb = realloc(b, cap *= 2);
            if (!nb) { free(b); return -1; }
            b = nb;
        }
    }
    *buf = b;
    *len = n;
    return ferror(f) ? -1 : 0;
}

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    uint8_t *b = NULL;
    size_t n = 0;
    if (!f || read_all(f, &b, &n) != 0) {
        fprintf(stderr, "cannot read %s\n", path);
        if (f) fclose(f);
        return 1;
    }
    fclose(f);
    FUZZ_ENTRY(b, n);
    free(b);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_path(const char *path, int *count) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "no such file or directory: %s\n", path);
        return 1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        (*count)++;
        return run_file(path);
    }
    DIR *d = opendir(path);
    if (!d) return 1;
    char **names = NULL;
    int n = 0, cap = 0, bad = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) names = realloc(names, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
            (*count)++;
            bad |= run_file(p);
        }
        free(names[i]);
    }
    free(names);
    return bad;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        int bad = 0, count = 0;
        for (int i = 1; i < argc; i++) bad |= run_path(argv[i], &count);
        fprintf(stderr, "%s: %d inputs replayed%s\n", argv[0], count, bad ? ", some unreadable" : "");
        return bad;
    }
#ifdef __AFL_FUZZ_TESTCASE_LEN
    __AFL_INIT();
    const uint8_t *buf = __AFL_FUZZ_TESTCASE_BUF;
    while (__AFL_LOOP(10000)) FUZZ_ENTRY(buf, (size_t)__AFL_FUZZ_TESTCASE_LEN);
    return 0;
#else
    uint8_t *b = NULL;
    size_t n = 0;
    if (read_all(stdin, &b, &n) != 0) return 1;
    FUZZ_ENTRY(b, n);
    free(b);
    return 0;
#endif
}
