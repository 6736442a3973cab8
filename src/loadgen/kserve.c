// loadgen/kserve: the KServe v2 inference protocol (also Triton's HTTP API) as far as a load generator needs it —
// POST /v2/models/NAME/infer bodies for one preprocessed image, as JSON or with the binary-data extension, and
// the top-1 class from the JSON response.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "loadgen/kserve.h"
#include "loadgen/loadgen.h"

dlp_status dlp_lg_kserve_body(const float *chw, int h, int w, const char *input_name, int binary, char **body,
                              size_t *len, size_t *header_len) {
    *body = NULL;
    *len = *header_len = 0;
    size_t n = (size_t)3 * (size_t)h * (size_t)w;
    json_t *in = json_pack("{s:s, s:[i,i,i,i], s:s}", "name", input_name, "shape", 1, 3, h, w, "datatype", "FP32");
    if (!in) return DLP_ERR(DLP_ERR_NOMEM, "out of memory for a KServe request");
    if (binary) json_object_set_new(in, "parameters", json_pack("{s:I}", "binary_data_size", (json_int_t)(n * 4)));
    json_t *req = json_pack("{s:[o]}", "inputs", in);
    if (binary) json_object_set_new(req, "parameters", json_pack("{s:b}", "binary_data_output", 0));
    char *head = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!head) return DLP_ERR(DLP_ERR_NOMEM, "out of memory for a KServe request");
    size_t hl = strlen(head);
    if (binary) {
        char *b = malloc(hl + n * 4);
        if (!b) {
            free(head);
            return DLP_ERR(DLP_ERR_NOMEM, "out of memory for a KServe request");
        }
        memcpy(b, head, hl);
        memcpy(b + hl, chw, n * 4);  // little-endian on every machine dlperf builds for
        *body = b;
        *len = hl + n * 4;
        *header_len = hl;
        free(head);
        return DLP_OK;
    }
    // JSON: the header with "data" spliced in before the input's closing brace ("%.9g" round-trips a float).
    char *at = strstr(head, "\"datatype\":\"FP32\"");
    if (!at) {
        free(head);
        return DLP_ERR(DLP_ERR_INVALID, "unexpected KServe header");
    }
    at += strlen("\"datatype\":\"FP32\"");
    size_t cap = hl + n * 18 + 32, pos = 0;
    char *b = malloc(cap);
    if (!b) {
        free(head);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory for a KServe JSON body of %zu floats", n);
    }
    memcpy(b, head, (size_t)(at - head));
    pos = (size_t)(at - head);
    pos += (size_t)snprintf(b + pos, cap - pos, ",\"data\":[");
    for (size_t i = 0; i < n; i++) pos += (size_t)snprintf(b + pos, cap - pos, i ? ",%.9g" : "%.9g", (double)chw[i]);
    pos += (size_t)snprintf(b + pos, cap - pos, "]%s", at);
    free(head);
    char *fit = realloc(b, pos + 1);  // 18 bytes a float were reserved; "%.9g" takes ~12: keep what is used
    if (fit) b = fit;
    *body = b;
    *len = pos;
    return DLP_OK;
}

int32_t dlp_lg_kserve_top1(const char *body, size_t len) {
    if (!body) return -1;
    json_t *j = json_loadb(body, len, 0, NULL);
    json_t *data = json_object_get(json_array_get(json_object_get(j, "outputs"), 0), "data");
    int32_t best = -1;
    double bv = 0;
    size_t i;
    json_t *v;
    json_array_foreach(data, i, v) {
        if (!json_is_number(v)) continue;
        double x = json_number_value(v);
        if (best < 0 || x > bv) best = (int32_t)i, bv = x;
    }
    json_decref(j);
    return best;
}
