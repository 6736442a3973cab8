// serve/kserve: the Open Inference Protocol (KServe v2) bodies of the service (see kserve.h).
//
// One model is served, with one input and one output:
//   input  "input":  one image per request — the model's sample in its native format (metadata), or any of FP32,
//                    BF16 (normalized, as the val transform writes) or UINT8 (pixels 0..255, normalized here) in NCHW
//                    [1,C,H,W] or NHWC [1,H,W,C]; or BYTES [1] holding one JPEG (decoded and transformed as
//                    /v1/classify's body). The batch dimension is 1: the server batches requests (--max-batch).
//   output "output": FP32 [1, classes], the logits; with the classification extension (the output's parameter
//                    "classification": k) BYTES [1, k] "value:index[:label]", highest first.
// Binary-data extension: an input's "binary_data_size" takes its bytes from after the JSON header (in input order;
// the Inference-Header-Content-Length request header gives the header's length); "binary_data_output" (request
// parameter) or an output's "binary_data" asks the output the same way. BYTES elements in binary are a 4-byte
// little-endian length then the bytes; in JSON a BYTES element holding a JPEG is its base64.
#include "serve/kserve.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "core/version.h"

#define INPUT_NAME "input"
#define OUTPUT_NAME "output"

static char *dump(json_t *o, size_t *len) {
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(o);
    if (len) *len = s ? strlen(s) : 0;
    return s;
}

char *dlp_kserve_error_json(const char *msg, size_t *len) {
    json_t *s = json_string(msg ? msg : "");
    if (!s) s = json_string("(the message is not UTF-8)");
    return dump(json_pack("{s:o}", "error", s), len);
}

// ---- routes ---------------------------------------------------------------------------------------------------

// Copies the next path segment of *p (up to '/' or the end) into seg; advances *p past it.
static int segment(const char **p, char *seg, size_t cap) {
    const char *s = *p, *e = strchr(s, '/');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (n == 0 || n >= cap) return 0;
    memcpy(seg, s, n);
    seg[n] = '\0';
    *p = e ? e : s + n;
    return 1;
}

dlp_kserve_route dlp_kserve_route_parse(const char *url, const char *model, int *status, char *err, size_t errlen) {
    *status = 0;
    if (strncmp(url, "/v2", 3) != 0 || (url[3] != '\0' && url[3] != '/')) return DLP_KSERVE_NONE;
    const char *p = url + 3;
    if (strcmp(p, "") == 0 || strcmp(p, "/") == 0) return DLP_KSERVE_SERVER_META;
    if (strcmp(p, "/health/live") == 0) return DLP_KSERVE_LIVE;
    if (strcmp(p, "/health/ready") == 0) return DLP_KSERVE_READY;
    *status = 404;
    if (strncmp(p, "/models/", 8) != 0) {
        snprintf(err, errlen, "no such path: %.100s (the /v2 routes: /v2, /v2/health/live, /v2/health/ready, "
                 "/v2/models/%s[/ready|/infer])", url, model);
        return DLP_KSERVE_NOT_FOUND;
    }
    p += 8;
    char name[256], ver[64];
    if (!segment(&p, name, sizeof name)) {
        snprintf(err, errlen, "no model name in %.100s (this server serves '%s')", url, model);
        return DLP_KSERVE_NOT_FOUND;
    }
    if (strcmp(name, model) != 0) {
        snprintf(err, errlen, "unknown model '%.100s': this server serves '%s'", name, model);
        return DLP_KSERVE_NOT_FOUND;
    }
    if (strncmp(p, "/versions/", 10) == 0) {
        p += 10;
        if (!segment(&p, ver, sizeof ver) || strcmp(ver, "1") != 0) {
            snprintf(err, errlen, "unknown version of model '%s' in %.100s: its only version is 1", model, url);
            return DLP_KSERVE_NOT_FOUND;
        }
    }
    dlp_kserve_route r = DLP_KSERVE_NOT_FOUND;
    if (strcmp(p, "") == 0) r = DLP_KSERVE_MODEL_META;
    else if (strcmp(p, "/ready") == 0) r = DLP_KSERVE_MODEL_READY;
    else if (strcmp(p, "/infer") == 0) r = DLP_KSERVE_INFER;
    if (r == DLP_KSERVE_NOT_FOUND)
        snprintf(err, errlen, "no such path: %.100s (model routes: /v2/models/%s, .../ready, .../infer)", url, model);
    else *status = 0;
    return r;
}

// ---- metadata -------------------------------------------------------------------------------------------------

static const char *v2_dtype(int dt) {
    switch (dt) {
    case DLP_DTYPE_F32: return "FP32";
    case DLP_DTYPE_BF16: return "BF16";
    case DLP_DTYPE_F16: return "FP16";
    case DLP_DTYPE_U8: return "UINT8";
    default: return "?";
    }
}

char *dlp_kserve_server_metadata(size_t *len) {
    return dump(json_pack("{s:s, s:s, s:[s,s]}", "name", "dlperf", "version", DLP_VERSION, "extensions",
                          "binary_tensor_data", "classification"),
                len);
}

char *dlp_kserve_model_metadata(const char *model, const char *platform, const dlp_serve_preprocess *fmt,
                                int nclasses, int max_batch, size_t *len) {
    json_t *in;
    if (fmt && fmt->channels > 0) {
        int nhwc = fmt->layout == DLP_LAYOUT_NHWC;
        in = json_pack("{s:s, s:s, s:[i,i,i,i]}", "name", INPUT_NAME, "datatype", v2_dtype(fmt->dtype), "shape", 1,
                       nhwc ? fmt->height : fmt->channels, nhwc ? fmt->width : fmt->height,
                       nhwc ? fmt->channels : fmt->width);
    } else {
        in = json_pack("{s:s, s:s, s:[i]}", "name", INPUT_NAME, "datatype", "BYTES", "shape", 1);
    }
    json_t *o = json_pack("{s:s, s:[s], s:s, s:[o], s:[{s:s, s:s, s:[i,i]}], s:{s:s, s:s, s:i}}", "name", model,
                          "versions", "1", "platform", platform ? platform : "dlperf", "inputs", in, "outputs", "name",
                          OUTPUT_NAME, "datatype", "FP32", "shape", 1, nclasses, "parameters", "native_layout",
                          fmt && fmt->layout == DLP_LAYOUT_NHWC ? "NHWC" : "NCHW", "input_also",
                          "FP32, BF16 (normalized) or UINT8 (pixels) in NCHW [1,C,H,W] or NHWC [1,H,W,C]; BYTES [1] "
                          "holding one JPEG; one image per request (the server batches requests)",
                          "max_batch_size", max_batch);
    return dump(o, len);
}

// ---- requests -------------------------------------------------------------------------------------------------

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return 400;
}

static int b64val(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

// Standard or URL-safe base64, padding optional, no whitespace. Returns the decoded length or -1.
static long b64decode(const char *s, size_t n, uint8_t *out) {
    while (n > 0 && s[n - 1] == '=') n--;
    if (n % 4 == 1) return -1;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64val((unsigned char)s[i]);
        if (v < 0) return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return (long)o;
}

// Flattens nested arrays of numbers into dst (count elements of dt) at *pos.
static int flatten(json_t *a, dlp_dtype dt, uint8_t *dst, size_t count, size_t *pos, char *err, size_t errlen,
                   int depth) {
    if (depth > 8) return fail(err, errlen, "input '" INPUT_NAME "': \"data\" nests arrays more than 8 deep");
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        if (json_is_array(v)) {
            int r = flatten(v, dt, dst, count, pos, err, errlen, depth + 1);
            if (r) return r;
            continue;
        }
        if (!json_is_number(v))
            return fail(err, errlen, "input '" INPUT_NAME "': element %zu of \"data\" is not a number", *pos);
        if (*pos >= count)
            return fail(err, errlen, "input '" INPUT_NAME "': \"data\" has more than the %zu elements its shape says",
                        count);
        double x = json_number_value(v);
        if (dt == DLP_DTYPE_U8) {
            if (!json_is_integer(v) || x < 0 || x > 255)
                return fail(err, errlen, "input '" INPUT_NAME "' (UINT8): element %zu of \"data\" is not an integer in "
                            "0..255", *pos);
            dst[*pos] = (uint8_t)x;
        } else if (dt == DLP_DTYPE_BF16) {
            uint16_t h = dlp_f32_to_bf16((float)x);
            memcpy(dst + 2 * *pos, &h, 2);
        } else {
            float f = (float)x;
            memcpy(dst + 4 * *pos, &f, 4);
        }
        (*pos)++;
    }
    return 0;
}

static int parse_dtype(const char *s, dlp_dtype *dt, int *bytes) {
    *bytes = 0;
    if (strcmp(s, "FP32") == 0) *dt = DLP_DTYPE_F32;
    else if (strcmp(s, "BF16") == 0) *dt = DLP_DTYPE_BF16;
    else if (strcmp(s, "UINT8") == 0) *dt = DLP_DTYPE_U8;
    else if (strcmp(s, "BYTES") == 0) *bytes = 1;
    else return 0;
    return 1;
}

// The tensor's format from its shape: [1,C,H,W] (NCHW) or [1,H,W,C] (NHWC), matched against fmt.
static int tensor_shape(json_t *shape, const dlp_serve_preprocess *fmt, dlp_dtype dt, dlp_serve_tensor *t, char *err,
                        size_t errlen) {
    long long d[4];
    size_t rank = json_array_size(shape);
    if (rank != 4)
        return fail(err, errlen, "input '" INPUT_NAME "': shape of rank %zu; a tensor input is [1,C,H,W] (NCHW) or "
                    "[1,H,W,C] (NHWC)", rank);
    for (size_t i = 0; i < 4; i++) {
        json_t *v = json_array_get(shape, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)
            return fail(err, errlen, "input '" INPUT_NAME "': shape[%zu] is not a dimension (an integer >= 0)", i);
        d[i] = json_integer_value(v);
    }
    if (d[0] != 1)
        return fail(err, errlen, "input '" INPUT_NAME "': a batch of %lld in one request; send one image per request "
                    "(shape [1,...]): the server batches requests itself", d[0]);
    int C = fmt && fmt->channels > 0 ? fmt->channels : 3;
    t->dtype = dt;
    if (d[1] == C && !(d[3] == C && d[1] != d[3])) {
        t->layout = DLP_LAYOUT_NCHW;
        t->c = (int)d[1], t->h = (int)d[2], t->w = (int)d[3];
    } else {
        t->layout = DLP_LAYOUT_NHWC;
        t->h = (int)d[1], t->w = (int)d[2], t->c = (int)d[3];
    }
    char why[300];
    if (dlp_serve_tensor_check(t, fmt, why, sizeof why) != 0)
        return fail(err, errlen, "input '" INPUT_NAME "' of shape [%lld,%lld,%lld,%lld]: %s", d[0], d[1], d[2], d[3], why);
    return 0;
}

static int parse_input(json_t *in, const uint8_t *bin, size_t binlen, size_t *binpos, const dlp_serve_preprocess *fmt,
                       dlp_kserve_req *k, char *err, size_t errlen) {
    if (!json_is_object(in)) return fail(err, errlen, "\"inputs\"[0] is not an object");
    json_t *jn = json_object_get(in, "name"), *jd = json_object_get(in, "datatype"), *js = json_object_get(in, "shape");
    if (!json_is_string(jn)) return fail(err, errlen, "\"inputs\"[0] has no \"name\" (the model's input is '" INPUT_NAME "')");
    if (strcmp(json_string_value(jn), INPUT_NAME) != 0)
        return fail(err, errlen, "unknown input '%.100s': the model's input is '" INPUT_NAME "'", json_string_value(jn));
    if (!json_is_string(jd)) return fail(err, errlen, "input '" INPUT_NAME "' has no \"datatype\"");
    if (!json_is_array(js)) return fail(err, errlen, "input '" INPUT_NAME "' has no \"shape\" array");
    dlp_dtype dt = DLP_DTYPE_F32;
    int bytes;
    if (!parse_dtype(json_string_value(jd), &dt, &bytes))
        return fail(err, errlen, "input '" INPUT_NAME "': datatype '%.40s' is not taken: use FP32, BF16, UINT8 (a tensor) "
                    "or BYTES (a JPEG)", json_string_value(jd));
    json_t *params = json_object_get(in, "parameters"), *jbs = json_object_get(params, "binary_data_size");
    if (params && !json_is_object(params)) return fail(err, errlen, "input '" INPUT_NAME "': \"parameters\" is not an object");
    json_t *data = json_object_get(in, "data");
    if (jbs && (!json_is_integer(jbs) || json_integer_value(jbs) < 0))
        return fail(err, errlen, "input '" INPUT_NAME "': binary_data_size is not a size (an integer >= 0)");
    if (jbs && data) return fail(err, errlen, "input '" INPUT_NAME "' has both \"data\" and binary_data_size");
    if (!jbs && !data)
        return fail(err, errlen, "input '" INPUT_NAME "' has neither \"data\" nor binary_data_size (the binary-data "
                    "extension)");
    const uint8_t *raw = NULL;
    size_t rawlen = 0;
    if (jbs) {
        unsigned long long n = (unsigned long long)json_integer_value(jbs);
        if (n > binlen - *binpos)
            return fail(err, errlen, "input '" INPUT_NAME "': binary_data_size %llu is more than the %zu bytes after the "
                        "JSON header (truncated body, or a wrong Inference-Header-Content-Length?)", n, binlen - *binpos);
        raw = bin + *binpos;
        rawlen = (size_t)n;
        *binpos += rawlen;
    }
    if (bytes) {  // one JPEG
        size_t rank = json_array_size(js);
        json_t *d0 = json_array_get(js, 0), *d1 = json_array_get(js, 1);
        if (!((rank == 1 && json_integer_value(d0) == 1 && json_is_integer(d0)) ||
              (rank == 2 && json_is_integer(d0) && json_is_integer(d1) && json_integer_value(d0) == 1 &&
               json_integer_value(d1) == 1)))
            return fail(err, errlen, "input '" INPUT_NAME "' (BYTES): the shape must be [1] (one JPEG per request)");
        if (raw) {
            uint32_t n;
            if (rawlen < 4) return fail(err, errlen, "input '" INPUT_NAME "' (BYTES): %zu binary bytes, less than the "
                                        "4-byte length of its element", rawlen);
            memcpy(&n, raw, 4);
            if ((size_t)n != rawlen - 4)
                return fail(err, errlen, "input '" INPUT_NAME "' (BYTES): the element says %u bytes, binary_data_size "
                            "leaves %zu after its 4-byte length", n, rawlen - 4);
            k->data = raw + 4;
            k->data_len = n;
        } else {
            json_t *e = json_is_array(data) ? json_array_get(data, 0) : NULL;
            if (json_is_array(e)) e = json_array_get(e, 0);
            if (json_array_size(data) != 1 || !json_is_string(e))
                return fail(err, errlen, "input '" INPUT_NAME "' (BYTES): \"data\" must hold one string, the JPEG's base64");
            size_t n = json_string_length(e);
            uint8_t *b = malloc(n / 4 * 3 + 3);
            if (!b) return fail(err, errlen, "out of memory for the JPEG");
            long m = b64decode(json_string_value(e), n, b);
            if (m < 0) {
                free(b);
                return fail(err, errlen, "input '" INPUT_NAME "' (BYTES): the JSON string is not base64 (a JPEG in JSON is "
                            "sent as its base64; raw bytes use the binary-data extension)");
            }
            k->owned = b;
            k->data = b;
            k->data_len = (size_t)m;
        }
        if (!dlp_serve_is_jpeg(k->data, k->data_len))
            return fail(err, errlen, "input '" INPUT_NAME "' (BYTES): %s", k->data_len ? "not a JPEG: it does not start "
                        "with the SOI marker FF D8 FF" : "empty: one JPEG expected");
        k->kind = DLP_SERVE_IN_JPEG;
        return 0;
    }
    int r = tensor_shape(js, fmt, dt, &k->tensor, err, errlen);
    if (r) return r;
    size_t count = (size_t)k->tensor.c * (size_t)k->tensor.h * (size_t)k->tensor.w, need = count * dlp_dtype_size(dt);
    k->kind = DLP_SERVE_IN_TENSOR;
    if (raw) {
        if (rawlen != need)
            return fail(err, errlen, "input '" INPUT_NAME "': binary_data_size %zu, but shape and datatype %s need %zu "
                        "bytes", rawlen, json_string_value(jd), need);
        k->data = raw;
        k->data_len = rawlen;
        return 0;
    }
    if (!json_is_array(data)) return fail(err, errlen, "input '" INPUT_NAME "': \"data\" is not an array");
    uint8_t *b = malloc(need ? need : 1);
    if (!b) return fail(err, errlen, "out of memory for the tensor");
    k->owned = b;
    size_t pos = 0;
    r = flatten(data, dt, b, count, &pos, err, errlen, 0);
    if (r) return r;
    if (pos != count)
        return fail(err, errlen, "input '" INPUT_NAME "': \"data\" has %zu elements, its shape says %zu", pos, count);
    k->data = b;
    k->data_len = need;
    return 0;
}

static int parse_outputs(json_t *outs, int nclasses, dlp_kserve_req *k, char *err, size_t errlen) {
    if (!outs) return 0;
    if (!json_is_array(outs)) return fail(err, errlen, "\"outputs\" is not an array");
    size_t i;
    json_t *o;
    json_array_foreach(outs, i, o) {
        json_t *n = json_object_get(o, "name");
        if (!json_is_string(n)) return fail(err, errlen, "\"outputs\"[%zu] has no \"name\"", i);
        if (strcmp(json_string_value(n), OUTPUT_NAME) != 0)
            return fail(err, errlen, "unknown output '%.100s': the model's output is '" OUTPUT_NAME "'",
                        json_string_value(n));
        json_t *p = json_object_get(o, "parameters");
        if (p && !json_is_object(p)) return fail(err, errlen, "output '" OUTPUT_NAME "': \"parameters\" is not an object");
        json_t *bd = json_object_get(p, "binary_data"), *cl = json_object_get(p, "classification");
        if (bd && !json_is_boolean(bd)) return fail(err, errlen, "output '" OUTPUT_NAME "': binary_data is not a boolean");
        if (bd) k->binary_out = json_is_true(bd);
        if (cl) {
            if (!json_is_integer(cl) || json_integer_value(cl) < 0 || json_integer_value(cl) > nclasses)
                return fail(err, errlen, "output '" OUTPUT_NAME "': classification must be an integer in 0..%d (the "
                            "model's classes)", nclasses);
            k->classification = (int)json_integer_value(cl);
        }
    }
    return 0;
}

int dlp_kserve_parse(const uint8_t *body, size_t len, const char *header_len, const dlp_serve_preprocess *fmt,
                     int nclasses, dlp_kserve_req *k, char *err, size_t errlen) {
    memset(k, 0, sizeof *k);
    size_t hl = len;
    if (header_len) {
        char *e;
        errno = 0;
        unsigned long long v = strtoull(header_len, &e, 10);
        if (e == header_len || *e || errno || header_len[0] == '-' || v == 0 || v > len)
            return fail(err, errlen, "Inference-Header-Content-Length '%.40s' is not a length in 1..%zu (the body's "
                        "size)", header_len, len);
        hl = (size_t)v;
    }
    if (hl == 0) return fail(err, errlen, "empty body: POST the inference request's JSON");
    json_error_t je;
    json_t *root = json_loadb((const char *)body, hl, 0, &je);
    if (!root)
        return fail(err, errlen, "the inference request%s is not JSON: %s (line %d, column %d)",
                    header_len ? "'s header (Inference-Header-Content-Length bytes)" : "", je.text, je.line, je.column);
    int r = 0;
    json_t *id = json_object_get(root, "id"), *params = json_object_get(root, "parameters"),
           *inputs = json_object_get(root, "inputs");
    if (!json_is_object(root)) r = fail(err, errlen, "the inference request is not a JSON object");
    else if (id && !json_is_string(id)) r = fail(err, errlen, "\"id\" is not a string");
    else if (id && json_string_length(id) >= sizeof k->id) r = fail(err, errlen, "\"id\" is over %zu bytes", sizeof k->id - 1);
    else if (params && !json_is_object(params)) r = fail(err, errlen, "\"parameters\" is not an object");
    else if (!json_is_array(inputs)) r = fail(err, errlen, "no \"inputs\" array");
    else if (json_array_size(inputs) != 1)
        r = fail(err, errlen, "%zu inputs: the model takes one, '" INPUT_NAME "'", json_array_size(inputs));
    if (!r && id) snprintf(k->id, sizeof k->id, "%s", json_string_value(id));
    json_t *bo = json_object_get(params, "binary_data_output");
    if (!r && bo && !json_is_boolean(bo)) r = fail(err, errlen, "binary_data_output is not a boolean");
    if (!r && bo) k->binary_out = json_is_true(bo);
    size_t binpos = 0;
    if (!r) r = parse_input(json_array_get(inputs, 0), body + hl, len - hl, &binpos, fmt, k, err, errlen);
    if (!r && binpos != len - hl)
        r = fail(err, errlen, "%zu bytes follow the JSON header, the inputs' binary_data_size add up to %zu%s", len - hl,
                 binpos, header_len ? "" : " (binary data needs the Inference-Header-Content-Length header)");
    if (!r) r = parse_outputs(json_object_get(root, "outputs"), nclasses, k, err, errlen);
    json_decref(root);
    if (r) dlp_kserve_req_free(k);
    return r;
}

void dlp_kserve_req_free(dlp_kserve_req *k) {
    free(k->owned);
    k->owned = NULL;
    k->data = NULL;
}

// ---- answers --------------------------------------------------------------------------------------------------

char *dlp_kserve_answer(const dlp_kserve_req *k, const dlp_serve_req *r, const char *model, const float *logits,
                        int nclasses, const char *const *labels, int nlabels, size_t *len, size_t *json_len) {
    *json_len = 0;
    if (r->status != 200) return dlp_kserve_error_json(r->error, len);
    json_t *out = json_object();
    json_object_set_new(out, "name", json_string(OUTPUT_NAME));
    uint8_t *bin = NULL;
    size_t binlen = 0;
    json_t *data = json_array();
    if (k->classification > 0) {
        int kk = k->classification, *cls = malloc((size_t)kk * sizeof *cls);
        float *prob = malloc((size_t)kk * sizeof *prob);
        bin = malloc((size_t)kk * 300);
        if (!cls || !prob || !bin) {
            free(cls), free(prob), free(bin);
            json_decref(out), json_decref(data);
            return NULL;
        }
        dlp_stats_topk(logits, nclasses, kk, cls, prob);
        for (int i = 0; i < kk; i++) {
            char s[290];
            int c = cls[i];
            const char *lab = labels && c >= 0 && c < nlabels ? labels[c] : NULL;
            int n = c < 0 ? snprintf(s, sizeof s, "nan:-1")
                          : snprintf(s, sizeof s, lab ? "%f:%d:%.200s" : "%f:%d", (double)logits[c], c, lab);
            if (n < 0) n = 0;
            if ((size_t)n >= sizeof s) n = (int)sizeof s - 1;
            uint32_t n32 = (uint32_t)n;
            memcpy(bin + binlen, &n32, 4);
            memcpy(bin + binlen + 4, s, (size_t)n);
            binlen += 4 + (size_t)n;
            json_t *js = json_stringn(s, (size_t)n);
            json_array_append_new(data, js ? js : json_string("(label is not UTF-8)"));
        }
        free(cls);
        free(prob);
        json_object_set_new(out, "datatype", json_string("BYTES"));
        json_object_set_new(out, "shape", json_pack("[i,i]", 1, kk));
    } else {
        json_object_set_new(out, "datatype", json_string("FP32"));
        json_object_set_new(out, "shape", json_pack("[i,i]", 1, nclasses));
        if (k->binary_out) {
            binlen = (size_t)nclasses * 4;
            bin = malloc(binlen);
            if (bin) memcpy(bin, logits, binlen);
        } else {
            for (int i = 0; i < nclasses; i++)
                json_array_append_new(data, isfinite(logits[i]) ? json_real(logits[i]) : json_null());
        }
    }
    if (k->binary_out) {
        json_decref(data);
        json_object_set_new(out, "parameters", json_pack("{s:I}", "binary_data_size", (json_int_t)binlen));
    } else {
        json_object_set_new(out, "data", data);
    }
    json_t *o = json_object();
    json_object_set_new(o, "model_name", json_string(model));
    json_object_set_new(o, "model_version", json_string("1"));
    if (k->id[0]) {
        json_t *id = json_string(k->id);
        if (id) json_object_set_new(o, "id", id);
    }
    json_object_set_new(o, "outputs", json_pack("[o]", out));
    size_t hl = 0;
    char *head = dump(o, &hl);
    if (!head || !k->binary_out) {
        free(bin);
        *len = hl;
        return head;
    }
    char *b = bin ? malloc(hl + binlen) : NULL;
    if (b) {
        memcpy(b, head, hl);
        memcpy(b + hl, bin, binlen);
        *len = hl + binlen;
        *json_len = hl;
    }
    free(head);
    free(bin);
    return b;
}
