// Replays every fuzz corpus (tests/fuzz/corpus/<harness>/: seeds and the regression inputs fuzzing found) through
// the harness functions of tests/fuzz/ (compiled into this binary), so make test runs them in the normal build and
// under ASan+UBSan. A failure is a crash, a sanitizer report or a harness invariant (abort).
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "fuzz.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int read_file(const char *p, uint8_t **buf, size_t *len) {
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = malloc(n > 0 ? (size_t)n : 1);
    size_t r = n > 0 ? fread(*buf, 1, (size_t)n, f) : 0;
    fclose(f);
    *len = r;
    return r == (size_t)(n > 0 ? n : 0) ? 0 : -1;
}

static void replay(const char *name, int (*fn)(const uint8_t *, size_t)) {
    char dir[1024];
    const char *root = getenv("DLPERF_ROOT");
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", root && *root ? root : ".", name);
    DIR *d = opendir(dir);
    if (!d) fail_msg("no corpus directory %s (run from the repository root or set DLPERF_ROOT)", dir);
    char **names = NULL;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        names = realloc(names, (size_t)(n + 1) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    assert_true(n >= 1);
    for (int i = 0; i < n; i++) {
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        uint8_t *buf = NULL;
        size_t len = 0;
        if (read_file(p, &buf, &len) != 0) fail_msg("cannot read %s", p);
        fprintf(stderr, "  %s\n", p);
        fn(buf, len);
        free(buf);
        free(names[i]);
    }
    print_message("%s: %d inputs\n", name, n);
    free(names);
}

static void test_safetensors(void **s) { replay("safetensors", dlp_fuzz_safetensors); }
static void test_profile(void **s) { replay("profile", dlp_fuzz_profile); }
static void test_catalog(void **s) { replay("catalog", dlp_fuzz_catalog); }
static void test_dataset_list(void **s) { replay("dataset_list", dlp_fuzz_dataset_list); }
static void test_jpeg(void **s) { replay("jpeg", dlp_fuzz_jpeg); }
static void test_serve(void **s) { replay("serve", dlp_fuzz_serve); }
static void test_http(void **s) { replay("http", dlp_fuzz_http); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_safetensors), cmocka_unit_test(test_profile), cmocka_unit_test(test_catalog),
        cmocka_unit_test(test_dataset_list), cmocka_unit_test(test_jpeg), cmocka_unit_test(test_serve), cmocka_unit_test(test_http),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
