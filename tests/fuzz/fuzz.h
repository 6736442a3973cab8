// tests/fuzz: one harness per parser of files dlperf reads from elsewhere (downloaded weights, profiles, catalog
// files, dataset lists, JPEGs, request bodies). Each harness takes arbitrary bytes, must never crash, hang, leak or
// trip a sanitizer, and aborts when a parser accepts something that breaks its own documented invariants.
// The same functions are driven by: tests/fuzz/main.c (afl++ persistent mode, or a plain replay of corpus files
// and directories: build/tests/fuzz_<name>), tests/unit/test_fuzz_corpus.c (cmocka: every corpus under make test),
// and libFuzzer (compile a harness with -DDLP_FUZZ_LIBFUZZER -fsanitize=fuzzer).
// Defines: dlp_fuzz_safetensors, dlp_fuzz_profile, dlp_fuzz_catalog, dlp_fuzz_dataset_list, dlp_fuzz_jpeg,
//          dlp_fuzz_serve, dlp_fuzz_http, dlp_fuzz_serve_parts, dlp_fuzz_tmpfile, dlp_fuzz_tmpdir, DLP_FUZZ_CHECK.
#ifndef DLP_TESTS_FUZZ_H
#define DLP_TESTS_FUZZ_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int dlp_fuzz_safetensors(const uint8_t *data, size_t size);
int dlp_fuzz_profile(const uint8_t *data, size_t size);
int dlp_fuzz_catalog(const uint8_t *data, size_t size);
int dlp_fuzz_dataset_list(const uint8_t *data, size_t size);
int dlp_fuzz_jpeg(const uint8_t *data, size_t size);
int dlp_fuzz_serve(const uint8_t *data, size_t size);
int dlp_fuzz_http(const uint8_t *data, size_t size);

// fuzz_serve's parts, shared with fuzz_http: a serving configuration for tiny batches, a fake 10-class engine over
// 16x16 inputs and the real single-image val transform as the preprocess (both live for the whole process).
struct dlp_serve_cfg;
struct dlp_serve_engine;
struct dlp_serve_preprocess;
void dlp_fuzz_serve_parts(struct dlp_serve_cfg *cfg, const struct dlp_serve_engine **engine,
                          const struct dlp_serve_preprocess **pre);

// A private directory for this process (created once, removed at exit).
const char *dlp_fuzz_tmpdir(void);
// Writes data to dlp_fuzz_tmpdir()/name and returns the path (static buffer); aborts if it cannot.
const char *dlp_fuzz_tmpfile(const char *name, const uint8_t *data, size_t size);

// An invariant a parser promised and broke: report and abort (the fuzzer records it as a crash).
#define DLP_FUZZ_CHECK(cond)                                                                      \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond);     \
            abort();                                                                              \
        }                                                                                         \
    } while (0)

#ifdef DLP_FUZZ_LIBFUZZER
#define DLP_FUZZ_LIBFUZZER_ENTRY(fn) \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fn(data, size); }
#else
#define DLP_FUZZ_LIBFUZZER_ENTRY(fn)
#endif

#endif
