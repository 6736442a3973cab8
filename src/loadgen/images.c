// loadgen/images: the HTTP SUT's sample library — JPEGs in memory, their labels, KServe request bodies.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "data/transform.h"
#include "data/walk.h"
#include "loadgen/images.h"
#include "loadgen/kserve.h"

#define LG_MAX_IMAGES 100000


void dlp_lg_images_free(dlp_lg_images *s) {
    for (int i = 0; i < s->n; i++) {
        free(s->paths[i]);
        free(s->bodies[i]);
    }
    free(s->paths);
    free(s->bodies);
    free(s->lens);
    free(s->labels);
    memset(s, 0, sizeof *s);
}

dlp_status dlp_lg_images_load(const char *path, const char *labels, int max, dlp_lg_images *s) {
    memset(s, 0, sizeof *s);
    if (labels) {
        // ImageNet's val_map.txt: "relative/path label" a line; the library is those files in that order, so
        // qsl_idx i is line i (what MLPerf's accuracy-imagenet.py assumes).
        if (!dlp_is_dir(path)) return DLP_ERR(DLP_ERR_INVALID, "--labels needs --images to be a directory");
        char *text;
        size_t tlen;
        DLP_CHECK(dlp_read_file(labels, &text, &tlen, (size_t)64 << 20));
        int cap = max < LG_MAX_IMAGES ? max : LG_MAX_IMAGES;
        s->paths = calloc((size_t)cap, sizeof *s->paths);
        s->labels = calloc((size_t)cap, sizeof *s->labels);
        if (!s->paths || !s->labels) {
            free(text);
            return DLP_ERR(DLP_ERR_NOMEM, "out of memory for %d labels", cap);
        }
        int line = 0;
        char *save = NULL;
        for (char *l = strtok_r(text, "\n", &save); l && s->n < cap; l = strtok_r(NULL, "\n", &save)) {
            line++;
            char name[2048];
            long lab;
            if (l[0] == '\r' || l[0] == '\0') continue;
            if (sscanf(l, "%2047s %ld", name, &lab) != 2 || lab < 0 || lab > 1000000) {
                free(text);
                return DLP_ERR(DLP_ERR_FORMAT, "%s line %d: expected 'relative/path.JPEG label'", labels, line);
            }
            size_t plen = strlen(path) + strlen(name) + 2;
            s->paths[s->n] = malloc(plen);
            if (!s->paths[s->n]) {
                free(text);
                return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
            }
            snprintf(s->paths[s->n], plen, "%s/%s", path, name);
            s->labels[s->n++] = (int32_t)lab;
        }
        free(text);
        if (s->n == 0) return DLP_ERR(DLP_ERR_FORMAT, "%s lists no image", labels);
    } else if (dlp_is_dir(path)) {
        dlp_path_list l = {0};
        dlp_status st = dlp_jpeg_walk(path, 4, (size_t)(max < LG_MAX_IMAGES ? max : LG_MAX_IMAGES), &l);
        s->paths = l.paths;  // the set owns them now
        s->n = (int)l.n;
        DLP_CHECK(st);
        if (s->n == 0) return DLP_ERR(DLP_ERR_NOTFOUND, "no *.jpg or *.jpeg files under %s", path);
    } else {
        s->paths = malloc(sizeof *s->paths);
        DLP_TRY_ALLOC(s->paths);
        s->paths[0] = strdup(path);
        s->n = 1;
    }
    s->bodies = calloc((size_t)s->n, sizeof *s->bodies);
    s->lens = calloc((size_t)s->n, sizeof *s->lens);
    if (!s->bodies || !s->lens) return DLP_ERR(DLP_ERR_NOMEM, "out of memory for %d images", s->n);
    for (int i = 0; i < s->n; i++) {
        char *data;
        size_t len;
        dlp_status st = dlp_read_file(s->paths[i], &data, &len, (size_t)64 << 20);
        if (st != DLP_OK) {
            dlp_err_context("loading --images");
            return st;
        }
        s->bodies[i] = data;
        s->lens[i] = len;
    }
    return DLP_OK;
}

dlp_status dlp_lg_images_to_kserve(dlp_lg_images *s, int size, const char *input_name, int binary,
                                   size_t *header_len) {
    dlp_transform t;
    dlp_transform_defaults(&t, DLP_XFORM_VAL);
    t.out_w = t.out_h = size;
    DLP_CHECK(dlp_transform_check(&t));
    float *chw = malloc(dlp_transform_sample_bytes(&t));
    DLP_TRY_ALLOC(chw);
    dlp_status st = DLP_OK;
    for (int i = 0; i < s->n && st == DLP_OK; i++) {
        st = dlp_transform_jpeg(&t, s->bodies[i], s->lens[i], chw);
        if (st) {
            dlp_err_context("preprocessing %s for --request-format", s->paths[i]);
            break;
        }
        char *body;
        size_t len, hl;
        st = dlp_lg_kserve_body(chw, size, size, input_name, binary, &body, &len, &hl);
        if (st) break;
        if (i > 0 && hl != *header_len) st = DLP_ERR(DLP_ERR_INVALID, "KServe headers differ in length");
        *header_len = hl;
        free(s->bodies[i]);
        s->bodies[i] = body;
        s->lens[i] = len;
    }
    free(chw);
    return st;
}
