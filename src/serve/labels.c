// serve/labels: class names from a text file, one per line.
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "serve/serve.h"

dlp_status dlp_serve_labels_load(const char *path, char ***labels, int *n) {
    *labels = NULL;
    *n = 0;
    char *data = NULL;
    size_t len = 0;
    DLP_CHECK(dlp_read_file(path, &data, &len, (size_t)64 << 20));
    int cap = 1024, cnt = 0;
    char **out = malloc((size_t)cap * sizeof *out);
    if (!out) {
        free(data);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory reading %s", path);
    }
    char *p = data, *end = data + len;
    int oom = 0;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        size_t l = (size_t)(le - p);
        if (l > 0 && p[l - 1] == '\r') l--;
        if (memchr(p, '\0', l)) {
            for (int i = 0; i < cnt; i++) free(out[i]);
            free(out);
            free(data);
            return DLP_ERR(DLP_ERR_FORMAT, "%s: line %d contains a NUL byte (not a text file?)", path, cnt + 1);
        }
        if (cnt == cap) {
            char **no = realloc(out, (size_t)cap * 2 * sizeof *out);
            if (!no) {
                oom = 1;
                break;
            }
            out = no;
            cap *= 2;
        }
        out[cnt] = malloc(l + 1);
        if (!out[cnt]) {
            oom = 1;
            break;
        }
        memcpy(out[cnt], p, l);
        out[cnt][l] = '\0';
        cnt++;
        p = nl ? nl + 1 : end;
    }
    free(data);
    if (oom) {
        for (int i = 0; i < cnt; i++) free(out[i]);
        free(out);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory reading %s", path);
    }
    if (cnt == 0) {
        free(out);
        return DLP_ERR(DLP_ERR_FORMAT, "%s: no labels (empty file)", path);
    }
    *labels = out;
    *n = cnt;
    return DLP_OK;
}

void dlp_serve_labels_free(char **labels, int n) {
    if (!labels) return;
    for (int i = 0; i < n; i++) free(labels[i]);
    free(labels);
}
