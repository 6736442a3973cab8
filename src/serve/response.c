// serve/response: the JSON bodies the service answers with.
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "serve/pipeline.h"

static char *dump(json_t *o, size_t *len) {
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(o);
    if (s && len) *len = strlen(s);
    return s;
}

char *dlp_serve_error_json(int status, const char *msg, size_t *len) {
    json_t *o = json_object();
    json_object_set_new(o, "error", json_string(msg ? msg : ""));
    json_object_set_new(o, "status", json_integer(status));
    return dump(o, len);
}

char *dlp_serve_answer_json(const dlp_serve_req *r, const char *const *labels, int nlabels, size_t *len) {
    if (r->status != 200) return dlp_serve_error_json(r->status, r->error, len);
    json_t *o = json_object(), *top = json_array();
    char key[16];
    snprintf(key, sizeof key, "top%d", r->ntop);
    for (int i = 0; i < r->ntop; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "class", json_integer(r->top_class[i]));
        if (labels && r->top_class[i] >= 0 && r->top_class[i] < nlabels) {
            // json_string rejects invalid UTF-8: fall back to the bytes as Latin-1-safe escapes.
            json_t *l = json_string(labels[r->top_class[i]]);
            json_object_set_new(e, "label", l ? l : json_string("(label is not UTF-8)"));
        }
        json_object_set_new(e, "prob", json_real(r->top_prob[i]));
        json_array_append_new(top, e);
    }
    json_object_set_new(o, key, top);
    json_object_set_new(o, "batch", json_integer(r->batch_size));
    json_object_set_new(o, "queue_ms", json_real(dlp_ns_to_ms(r->t_infer_start_ns - r->t_arrival_ns)));
    json_object_set_new(o, "infer_ms", json_real(dlp_ns_to_ms(r->t_infer_end_ns - r->t_infer_start_ns)));
    return dump(o, len);
}
