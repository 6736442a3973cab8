// tests/fuzz/fuzz_dataset_list: a dataset list file ("path label" per line, '#' comments; shipped with datasets) —
// data/dataset's dlp_dataset_open_list on a temporary file: line splitting, whitespace, the last field as the
// label, label range, paths with spaces, NUL bytes and very long lines. An accepted list must give every sample a
// label below nclasses, a class name per class and a path that dlp_dataset_path can format.
#include <string.h>

#include "data/dataset.h"
#include "fuzz.h"

int dlp_fuzz_dataset_list(const uint8_t *data, size_t size) {
    const char *path = dlp_fuzz_tmpfile("list.txt", data, size);
    dlp_dataset *ds = NULL;
    if (dlp_dataset_open_list(path, &ds) != DLP_OK) {
        DLP_FUZZ_CHECK(ds == NULL);
        return 0;
    }
    DLP_FUZZ_CHECK(ds != NULL && ds->n > 0 && ds->nclasses > 0);
    for (int c = 0; c < ds->nclasses; c++) DLP_FUZZ_CHECK(ds->class_names[c] != NULL);
    char buf[256];
    for (int64_t i = 0; i < ds->n; i++) {
        DLP_FUZZ_CHECK(ds->labels[i] >= 0 && ds->labels[i] < ds->nclasses);
        DLP_FUZZ_CHECK(ds->path_off[i] >= 0 && (size_t)ds->path_off[i] < ds->pool_len);
        DLP_FUZZ_CHECK(dlp_dataset_relpath(ds, i)[0] != '\0');
        DLP_FUZZ_CHECK(dlp_dataset_path(ds, i, buf, sizeof buf) > 0);
    }
    dlp_dataset_free(ds);
    return 0;
}
DLP_FUZZ_LIBFUZZER_ENTRY(dlp_fuzz_dataset_list)
