// nn/safetensors: a strict reader and a writer for the safetensors format.
#include "nn/safetensors.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "core/tensor.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "nn/safetensors assumes a little-endian host"
#endif

static const char *const k_dtype_names[DLP_ST_DTYPE_COUNT] = {"F64", "F32", "F16", "BF16", "I64",
                                                               "I32", "I16", "I8",  "U8",   "BOOL"};
static const size_t k_dtype_sizes[DLP_ST_DTYPE_COUNT] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 1};

const char *dlp_st_dtype_name(dlp_st_dtype t) { return (unsigned)t < DLP_ST_DTYPE_COUNT ? k_dtype_names[t] : "?"; }
size_t dlp_st_dtype_size(dlp_st_dtype t) { return (unsigned)t < DLP_ST_DTYPE_COUNT ? k_dtype_sizes[t] : 0; }

static int dtype_from_name(const char *s) {
    for (int i = 0; i < DLP_ST_DTYPE_COUNT; i++)
        if (strcmp(s, k_dtype_names[i]) == 0) return i;
    return -1;
}

// ---- reading ----------------------------------------------------------------------------------------------

void dlp_st_close(dlp_st_file *f) {
    for (int i = 0; i < f->ntensors; i++) free(f->tensors[i].name);
    for (int i = 0; i < f->nmeta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_vals[i]);
    }
    free(f->tensors);
    free(f->meta_keys);
    free(f->meta_vals);
    free(f->buf);
    memset(f, 0, sizeof *f);
}

typedef struct span {
    uint64_t begin, end;
    int index;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int tensor_cmp_offset(const void *a, const void *b) {
    const dlp_st_tensor *x = a, *y = b;
    return x->data < y->data ? -1 : x->data > y->data ? 1 : 0;
}

static dlp_status parse_metadata(dlp_st_file *f, json_t *m) {
    if (!json_is_object(m)) return DLP_ERR(DLP_ERR_FORMAT, "%s: __metadata__ is not an object", f->path);
    size_t n = json_object_size(m);
    f->meta_keys = calloc(n ? n : 1, sizeof(char *));
    f->meta_vals = calloc(n ? n : 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_vals) return DLP_ERR(DLP_ERR_NOMEM, "%s: out of memory", f->path);
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        if (!json_is_string(v))
            return DLP_ERR(DLP_ERR_FORMAT, "%s: __metadata__ entry '%s' is not a string", f->path, k);
        f->meta_keys[f->nmeta] = strdup(k);
        f->meta_vals[f->nmeta] = strdup(json_string_value(v));
        if (!f->meta_keys[f->nmeta] || !f->meta_vals[f->nmeta]) {
            f->nmeta++;
            return DLP_ERR(DLP_ERR_NOMEM, "%s: out of memory", f->path);
        }
        f->nmeta++;
    }
    return DLP_OK;
}

static dlp_status parse_tensor(dlp_st_file *f, const char *name, json_t *e, uint64_t data_len, dlp_st_tensor *t,
                               span *s) {
    if (!json_is_object(e)) return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s': entry is not an object", f->path, name);
    json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"), *off = json_object_get(e, "data_offsets");
    if (!json_is_string(dt)) return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s': no dtype", f->path, name);
    int d = dtype_from_name(json_string_value(dt));
    if (d < 0)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s': unsupported dtype '%s'", f->path, name, json_string_value(dt));
    if (!json_is_array(sh)) return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s': no shape", f->path, name);
    if (json_array_size(sh) > DLP_ST_MAX_DIMS)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s': %zu dimensions (at most %d)", f->path, name,
                       json_array_size(sh), DLP_ST_MAX_DIMS);
    t->dtype = (dlp_st_dtype)d;
    t->ndim = (int)json_array_size(sh);
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        json_t *x = json_array_get(sh, (size_t)i);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer", f->path, name, i);
        uint64_t v = (uint64_t)json_integer_value(x);
        if (v != 0 && numel > (UINT64_MAX >> 4) / v)
            return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s': shape overflows", f->path, name);
        numel *= v;
        t->shape[i] = (int64_t)v;
    }
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
        !json_is_integer(json_array_get(off, 1)))
        return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s': data_offsets is not [begin, end]", f->path, name);
    json_int_t b = json_integer_value(json_array_get(off, 0)), en = json_integer_value(json_array_get(off, 1));
    if (b < 0 || en < b || (uint64_t)en > data_len)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s': data_offsets [%lld, %lld] outside the data (%llu bytes)",
                       f->path, name, (long long)b, (long long)en, (unsigned long long)data_len);
    uint64_t want = numel * k_dtype_sizes[d];
    if ((uint64_t)(en - b) != want)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s': %lld bytes of data for %llu %s elements (%llu bytes)",
                       f->path, name, (long long)(en - b), (unsigned long long)numel, k_dtype_names[d],
                       (unsigned long long)want);
    t->numel = (int64_t)numel;
    t->nbytes = (size_t)want;
    s->begin = (uint64_t)b;
    s->end = (uint64_t)en;
    return DLP_OK;
}

dlp_status dlp_st_parse(const char *path, char *buf, size_t len, dlp_st_file *f) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->buf = buf;
    f->len = len;
    dlp_status st = DLP_OK;
    json_t *root = NULL;
    span *spans = NULL;
    if (len < 8) {
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: not a safetensors file (%zu bytes, shorter than the 8-byte header length)",
                     path, len);
        goto out;
    }
    uint64_t hlen = 0;
    memcpy(&hlen, buf, 8);
    if (hlen > DLP_ST_MAX_HEADER_BYTES || hlen > len - 8) {
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: header length %llu does not fit the file (%zu bytes): not safetensors?", path,
                     (unsigned long long)hlen, len);
        goto out;
    }
    json_error_t je;
    root = json_loadb(buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: header is not valid JSON (%s at byte %d)", path, je.text, je.position);
        goto out;
    }
    if (!json_is_object(root)) {
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: header is not a JSON object", path);
        goto out;
    }
    const uint64_t data_len = len - 8 - hlen;
    const uint8_t *data = (const uint8_t *)buf + 8 + hlen;
    size_t n = json_object_size(root);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    spans = calloc(n ? n : 1, sizeof *spans);
    if (!f->tensors || !spans) {
        st = DLP_ERR(DLP_ERR_NOMEM, "%s: out of memory reading the header", path);
        goto out;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (strcmp(k, "__metadata__") == 0) {
            if ((st = parse_metadata(f, v)) != DLP_OK) goto out;
            continue;
        }
        if (!k[0]) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s: a tensor has an empty name", path);
            goto out;
        }
        dlp_st_tensor *t = &f->tensors[f->ntensors];
        if ((st = parse_tensor(f, k, v, data_len, t, &spans[f->ntensors])) != DLP_OK) goto out;
        t->name = strdup(k);
        if (!t->name) {
            st = DLP_ERR(DLP_ERR_NOMEM, "%s: out of memory", path);
            goto out;
        }
        t->data = data + spans[f->ntensors].begin;
        spans[f->ntensors].index = f->ntensors;
        f->ntensors++;
    }
    // The tensors must tile the data exactly: sorted by offset, each starts where the previous ended.
    qsort(spans, (size_t)f->ntensors, sizeof *spans, cmp_span);
    uint64_t at = 0;
    for (int i = 0; i < f->ntensors; i++) {
        if (spans[i].begin < at) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s' overlaps tensor '%s' (bytes %llu..%llu)", path,
                         f->tensors[spans[i].index].name, f->tensors[spans[i - 1].index].name,
                         (unsigned long long)spans[i].begin, (unsigned long long)at);
            goto out;
        }
        if (spans[i].begin > at) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s: bytes %llu..%llu of the data belong to no tensor (before '%s')", path,
                         (unsigned long long)at, (unsigned long long)spans[i].begin, f->tensors[spans[i].index].name);
            goto out;
        }
        at = spans[i].end;
    }
    if (at != data_len) {
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: the last %llu bytes of the data belong to no tensor (truncated header?)",
                     path, (unsigned long long)(data_len - at));
        goto out;
    }
    qsort(f->tensors, (size_t)f->ntensors, sizeof *f->tensors, tensor_cmp_offset);
out:
    json_decref(root);
    free(spans);
    if (st) dlp_st_close(f);  // frees buf too
    return st;
}

dlp_status dlp_st_open(const char *path, size_t max_bytes, dlp_st_file *f) {
    memset(f, 0, sizeof *f);
    char *buf;
    size_t len;
    DLP_CHECK(dlp_read_file(path, &buf, &len, max_bytes ? max_bytes : ((size_t)16 << 30)));
    DLP_CHECK(dlp_st_parse(path, buf, len, f));
    return DLP_OK;
}

const dlp_st_tensor *dlp_st_find(const dlp_st_file *f, const char *name) {
    for (int i = 0; i < f->ntensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

const char *dlp_st_meta(const dlp_st_file *f, const char *key) {
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_vals[i];
    return NULL;
}

dlp_status dlp_st_read_f32(const dlp_st_file *f, const dlp_st_tensor *t, float *out) {
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case DLP_ST_F32: memcpy(out, p, t->nbytes); return DLP_OK;
    case DLP_ST_F64:
        for (int64_t i = 0; i < t->numel; i++) {
            double d;
            memcpy(&d, p + 8 * i, 8);
            out[i] = (float)d;
        }
        return DLP_OK;
    case DLP_ST_F16:
    case DLP_ST_BF16:
        for (int64_t i = 0; i < t->numel; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = t->dtype == DLP_ST_F16 ? dlp_f16_to_f32(h) : dlp_bf16_to_f32(h);
        }
        return DLP_OK;
    default:
        return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s' is %s, expected a floating type (F32, F16, BF16, F64)", f->path,
                       t->name, k_dtype_names[t->dtype]);
    }
}

dlp_status dlp_st_read_i64(const dlp_st_file *f, const dlp_st_tensor *t, int64_t *out) {
    const uint8_t *p = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        switch (t->dtype) {
        case DLP_ST_I64: memcpy(&out[i], p + 8 * i, 8); break;
        case DLP_ST_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); out[i] = v; break; }
        case DLP_ST_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); out[i] = v; break; }
        case DLP_ST_I8: out[i] = (int8_t)p[i]; break;
        case DLP_ST_U8: case DLP_ST_BOOL: out[i] = p[i]; break;
        default:
            return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s' is %s, expected an integer type", f->path, t->name,
                           k_dtype_names[t->dtype]);
        }
    }
    return DLP_OK;
}

// ---- writing ----------------------------------------------------------------------------------------------

struct dlp_st_entry {
    char *name;
    dlp_st_dtype dtype;
    int ndim;
    int64_t shape[DLP_ST_MAX_DIMS];
    size_t nbytes;
    const void *data;
};

void dlp_st_writer_init(dlp_st_writer *w) { memset(w, 0, sizeof *w); }

void dlp_st_writer_free(dlp_st_writer *w) {
    for (int i = 0; i < w->n; i++) free(w->entries[i].name);
    for (int i = 0; i < w->nmeta; i++) {
        free(w->meta_keys[i]);
        free(w->meta_vals[i]);
    }
    free(w->entries);
    free(w->meta_keys);
    free(w->meta_vals);
    memset(w, 0, sizeof *w);
}

dlp_status dlp_st_writer_add(dlp_st_writer *w, const char *name, dlp_st_dtype dtype, int ndim, const int64_t *shape,
                             const void *data) {
    if (!name || !name[0] || strcmp(name, "__metadata__") == 0)
        return DLP_ERR(DLP_ERR_INVALID, "safetensors: bad tensor name '%s'", name ? name : "(null)");
    if ((unsigned)dtype >= DLP_ST_DTYPE_COUNT || ndim < 0 || ndim > DLP_ST_MAX_DIMS)
        return DLP_ERR(DLP_ERR_INVALID, "safetensors: tensor '%s': bad dtype or %d dimensions", name, ndim);
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->entries[i].name, name) == 0)
            return DLP_ERR(DLP_ERR_INVALID, "safetensors: tensor '%s' added twice", name);
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return DLP_ERR(DLP_ERR_INVALID, "safetensors: tensor '%s': negative dimension", name);
        numel *= (uint64_t)shape[i];
    }
    if (w->n == w->cap) {
        int nc = w->cap ? 2 * w->cap : 64;
        struct dlp_st_entry *e = realloc(w->entries, (size_t)nc * sizeof *e);
        if (!e) return DLP_ERR(DLP_ERR_NOMEM, "safetensors: out of memory");
        w->entries = e;
        w->cap = nc;
    }
    struct dlp_st_entry *e = &w->entries[w->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name) return DLP_ERR(DLP_ERR_NOMEM, "safetensors: out of memory");
    e->dtype = dtype;
    e->ndim = ndim;
    for (int i = 0; i < ndim; i++) e->shape[i] = shape[i];
    e->nbytes = (size_t)(numel * k_dtype_sizes[dtype]);
    e->data = data;
    w->n++;
    return DLP_OK;
}

dlp_status dlp_st_writer_meta(dlp_st_writer *w, const char *key, const char *value) {
    for (int i = 0; i < w->nmeta; i++)
        if (strcmp(w->meta_keys[i], key) == 0) {
            char *v = strdup(value);
            if (!v) return DLP_ERR(DLP_ERR_NOMEM, "safetensors: out of memory");
            free(w->meta_vals[i]);
            w->meta_vals[i] = v;
            return DLP_OK;
        }
    char **k = realloc(w->meta_keys, (size_t)(w->nmeta + 1) * sizeof *k);
    if (!k) return DLP_ERR(DLP_ERR_NOMEM, "safetensors: out of memory");
    w->meta_keys = k;
    char **v = realloc(w->meta_vals, (size_t)(w->nmeta + 1) * sizeof *v);
    if (!v) return DLP_ERR(DLP_ERR_NOMEM, "safetensors: out of memory");
    w->meta_vals = v;
    w->meta_keys[w->nmeta] = strdup(key);
    w->meta_vals[w->nmeta] = strdup(value);
    w->nmeta++;
    if (!w->meta_keys[w->nmeta - 1] || !w->meta_vals[w->nmeta - 1])
        return DLP_ERR(DLP_ERR_NOMEM, "safetensors: out of memory");
    return DLP_OK;
}

dlp_status dlp_st_writer_write(const dlp_st_writer *w, const char *path, int flags) {
    json_t *root = json_object();
    if (!root) return DLP_ERR(DLP_ERR_NOMEM, "safetensors: out of memory");
    if (w->nmeta) {
        json_t *m = json_object();
        for (int i = 0; i < w->nmeta; i++) json_object_set_new(m, w->meta_keys[i], json_string(w->meta_vals[i]));
        json_object_set_new(root, "__metadata__", m);
    }
    size_t off = 0;
    for (int i = 0; i < w->n; i++) {
        const struct dlp_st_entry *e = &w->entries[i];
        json_t *o = json_object(), *sh = json_array(), *offs = json_array();
        for (int d = 0; d < e->ndim; d++) json_array_append_new(sh, json_integer(e->shape[d]));
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_array_append_new(offs, json_integer((json_int_t)(off + e->nbytes)));
        json_object_set_new(o, "dtype", json_string(k_dtype_names[e->dtype]));
        json_object_set_new(o, "shape", sh);
        json_object_set_new(o, "data_offsets", offs);
        json_object_set_new(root, e->name, o);
        off += e->nbytes;
    }
    char *hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!hdr) return DLP_ERR(DLP_ERR_NOMEM, "safetensors: out of memory writing %s", path);
    size_t hlen = strlen(hdr), padded = (hlen + 7) & ~(size_t)7;
    size_t total = 8 + padded + off;
    char *buf = malloc(total);
    if (!buf) {
        free(hdr);
        return DLP_ERR(DLP_ERR_NOMEM, "safetensors: out of memory writing %s (%zu bytes)", path, total);
    }
    uint64_t h64 = padded;
    memcpy(buf, &h64, 8);
    memcpy(buf + 8, hdr, hlen);
    memset(buf + 8 + hlen, ' ', padded - hlen);
    free(hdr);
    char *p = buf + 8 + padded;
    for (int i = 0; i < w->n; i++) {
        if (w->entries[i].nbytes) memcpy(p, w->entries[i].data, w->entries[i].nbytes);
        p += w->entries[i].nbytes;
    }
    dlp_status st = dlp_write_atomic(path, buf, total, flags);
    free(buf);
    return st;
}
