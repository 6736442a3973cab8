// tests/fuzz/fuzz_safetensors: a safetensors file (downloaded weights, checkpoints) — nn/safetensors' dlp_st_parse,
// the in-memory half of dlp_st_open: the 8-byte header length, the JSON header (dtypes, shapes, data_offsets,
// __metadata__, duplicates), the coverage of the data section; then every tensor accepted is looked up by name and
// converted (dlp_st_read_f32 / dlp_st_read_i64), which reads every byte the parser promised is there.
#include <string.h>

#include "fuzz.h"
#include "nn/safetensors.h"

int dlp_fuzz_safetensors(const uint8_t *data, size_t size) {
    char *buf = malloc(size ? size : 1);  // exactly size bytes: ASan sees any read past the file
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    dlp_st_file f;
    memset(&f, 0, sizeof f);
    if (dlp_st_parse("fuzz.safetensors", buf, size, &f) != DLP_OK) {
        dlp_st_close(&f);
        return 0;
    }
    DLP_FUZZ_CHECK(f.ntensors >= 0 && f.nmeta >= 0);
    for (int i = 0; i < f.ntensors; i++) {
        const dlp_st_tensor *t = &f.tensors[i];
        DLP_FUZZ_CHECK(t->name != NULL);
        DLP_FUZZ_CHECK(t->dtype >= 0 && t->dtype < DLP_ST_DTYPE_COUNT);
        DLP_FUZZ_CHECK(t->ndim >= 0 && t->ndim <= DLP_ST_MAX_DIMS);
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            DLP_FUZZ_CHECK(t->shape[d] >= 0);
            numel *= t->shape[d];  // bounded: the bytes are in the file (checked below)
        }
        DLP_FUZZ_CHECK(numel == t->numel);
        DLP_FUZZ_CHECK(t->nbytes == (size_t)t->numel * dlp_st_dtype_size(t->dtype));
        DLP_FUZZ_CHECK(t->nbytes == 0 || ((const char *)t->data >= f.buf && (const char *)t->data + t->nbytes <= f.buf + f.len));
        DLP_FUZZ_CHECK(dlp_st_find(&f, t->name) == t);  // names are unique
        size_t n = (size_t)t->numel ? (size_t)t->numel : 1;
        if (t->dtype <= DLP_ST_BF16) {
            float *out = malloc(n * sizeof(float));
            if (out) DLP_FUZZ_CHECK(dlp_st_read_f32(&f, t, out) == DLP_OK);
            free(out);
        } else {
            int64_t *out = malloc(n * sizeof(int64_t));
            if (out) DLP_FUZZ_CHECK(dlp_st_read_i64(&f, t, out) == DLP_OK);
            free(out);
        }
    }
    for (int i = 0; i < f.nmeta; i++) DLP_FUZZ_CHECK(dlp_st_meta(&f, f.meta_keys[i]) != NULL);
    dlp_st_close(&f);
    return 0;
}
DLP_FUZZ_LIBFUZZER_ENTRY(dlp_fuzz_safetensors)
