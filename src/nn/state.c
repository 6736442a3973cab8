// nn/state: state_dict <-> flat parameter arrays, by name.
#include "nn/state.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "core/log.h"

static const dlp_st_tensor *find_key(const dlp_st_file *f, const char *name) {
    const dlp_st_tensor *t = dlp_st_find(f, name);
    if (t) return t;
    char alt[96];
    snprintf(alt, sizeof alt, "module.%s", name);
    return dlp_st_find(f, alt);
}

static void shape_str(char *buf, size_t len, int ndim, const int64_t *shape) {
    size_t at = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < ndim && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < len) snprintf(buf + at, len - at, ")");
}

// Appends name to a comma-separated list (at most 5 names, then a count).
static void list_add(char *list, size_t len, int *count, const char *name) {
    (*count)++;
    size_t at = strlen(list);
    if (*count <= 5) snprintf(list + at, len - at, "%s%s", at ? ", " : "", name);
}

static int is_nbt_of_bn(const dlp_net *net, const char *key) {
    const char *suffix = ".num_batches_tracked";
    size_t kl = strlen(key), sl = strlen(suffix);
    if (kl <= sl || strcmp(key + kl - sl, suffix) != 0) return 0;
    if (strncmp(key, "module.", 7) == 0) {
        key += 7;
        kl -= 7;
    }
    for (int i = 0; i < net->nlayers; i++)
        if (net->layers[i].kind == DLP_LAYER_BN && strlen(net->layers[i].name) == kl - sl &&
            strncmp(net->layers[i].name, key, kl - sl) == 0)
            return 1;
    return 0;
}

static int is_net_key(const dlp_net *net, const char *key) {
    if (strncmp(key, "module.", 7) == 0 && dlp_net_find_param(net, key + 7)) return 1;
    return dlp_net_find_param(net, key) != NULL || is_nbt_of_bn(net, key);
}

dlp_status dlp_state_load_file(const dlp_net *net, const dlp_st_file *f, int flags, float *params, float *bufs,
                               int64_t *num_batches_tracked) {
    char missing[512] = "", unexpected[512] = "";
    int nmissing = 0, nunexpected = 0, nmismatch = 0;
    const int partial = flags & DLP_STATE_PARTIAL;
    for (int pass = 0; pass < 2; pass++) {
        const int count = pass ? net->nbufs : net->nparams;
        const dlp_param *arr = pass ? net->bufs : net->params;
        float *dst = pass ? bufs : params;
        if (!dst) continue;
        for (int i = 0; i < count; i++) {
            const dlp_param *p = &arr[i];
            const dlp_st_tensor *t = find_key(f, p->name);
            if (!t) {
                list_add(missing, sizeof missing, &nmissing, p->name);
                continue;
            }
            int same = t->ndim == p->ndim;
            for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
            if (!same) {
                char a[96], b[96];
                shape_str(a, sizeof a, t->ndim, t->shape);
                shape_str(b, sizeof b, p->ndim, p->shape);
                if (!partial)
                    return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s' has shape %s but net %s (%d classes) needs %s",
                                   f->path, p->name, a, net->arch, net->num_classes, b);
                DLP_WARN("%s: skipping '%s': shape %s, the net needs %s", f->path, p->name, a, b);
                nmismatch++;
                continue;
            }
            DLP_CHECK(dlp_st_read_f32(f, t, dst + p->offset));
            int64_t bad = 0;  // NaN or Inf weights train and serve garbage without a word: refuse them here
            for (int64_t k = 0; k < p->numel; k++) bad += !isfinite(dst[p->offset + k]);
            if (bad)
                return DLP_ERR(DLP_ERR_FORMAT, "%s: tensor '%s' holds %lld NaN or infinite value(s) of %lld", f->path,
                               p->name, (long long)bad, (long long)p->numel);
        }
    }
    int64_t nbt = 0;
    for (int i = 0; i < f->ntensors; i++) {
        const dlp_st_tensor *t = &f->tensors[i];
        if (is_nbt_of_bn(net, t->name)) {
            if (t->numel != 1)
                return DLP_ERR(DLP_ERR_FORMAT, "%s: '%s' has %lld elements (a scalar expected)", f->path, t->name,
                               (long long)t->numel);
            int64_t v;
            DLP_CHECK(dlp_st_read_i64(f, t, &v));
            if (v > nbt) nbt = v;
        } else if (!is_net_key(net, t->name)) {
            list_add(unexpected, sizeof unexpected, &nunexpected, t->name);
        }
    }
    if (num_batches_tracked) *num_batches_tracked = nbt;
    if ((nmissing || nunexpected) && !partial) {
        char msg[1400] = "";
        size_t at = 0;
        if (nmissing)
            at += (size_t)snprintf(msg + at, sizeof msg - at, " %d missing key(s): %s%s", nmissing, missing,
                                   nmissing > 5 ? ", ..." : "");
        if (nunexpected && at < sizeof msg)
            snprintf(msg + at, sizeof msg - at, "%s %d unexpected key(s): %s%s", at ? ";" : "", nunexpected,
                     unexpected, nunexpected > 5 ? ", ..." : "");
        return DLP_ERR(DLP_ERR_FORMAT, "%s does not match net %s:%s (a checkpoint of another model?)", f->path,
                       net->arch, msg);
    }
    if (nmissing || nunexpected || nmismatch)
        DLP_WARN("%s: loaded partially into %s: %d missing, %d unexpected, %d with another shape", f->path, net->arch,
                 nmissing, nunexpected, nmismatch);
    return DLP_OK;
}

dlp_status dlp_state_load(const dlp_net *net, const char *path, int flags, float *params, float *bufs,
                          int64_t *num_batches_tracked) {
    dlp_st_file f;
    DLP_CHECK(dlp_st_open(path, 0, &f));
    dlp_status st = dlp_state_load_file(net, &f, flags, params, bufs, num_batches_tracked);
    dlp_st_close(&f);
    if (st) return dlp_err_trace(st, __FILE__, __LINE__, "dlp_state_load_file");
    return DLP_OK;
}

dlp_status dlp_state_add(dlp_st_writer *w, const dlp_net *net, const float *params, const float *bufs,
                         const int64_t *nbt) {
    for (int li = 0; li < net->nlayers; li++) {
        const dlp_layer *l = &net->layers[li];
        for (int i = l->param0; i < l->param0 + l->nparams; i++) {
            const dlp_param *p = &net->params[i];
            DLP_CHECK(dlp_st_writer_add(w, p->name, DLP_ST_F32, p->ndim, p->shape, params + p->offset));
        }
        for (int i = l->buf0; bufs && i < l->buf0 + l->nbufs; i++) {
            const dlp_param *p = &net->bufs[i];
            DLP_CHECK(dlp_st_writer_add(w, p->name, DLP_ST_F32, p->ndim, p->shape, bufs + p->offset));
        }
        if (l->kind == DLP_LAYER_BN && nbt) {
            char name[96];
            snprintf(name, sizeof name, "%s.num_batches_tracked", l->name);
            DLP_CHECK(dlp_st_writer_add(w, name, DLP_ST_I64, 0, NULL, nbt));
        }
    }
    return DLP_OK;
}

dlp_status dlp_state_save(const dlp_net *net, const char *path, const float *params, const float *bufs,
                          int64_t num_batches_tracked, int flags) {
    dlp_st_writer w;
    dlp_st_writer_init(&w);
    char classes[32];
    snprintf(classes, sizeof classes, "%d", net->num_classes);
    dlp_status st;
    if ((st = dlp_st_writer_meta(&w, "format", "pt")) || (st = dlp_st_writer_meta(&w, "dlperf.arch", net->arch)) ||
        (st = dlp_st_writer_meta(&w, "dlperf.num_classes", classes)) ||
        (st = dlp_state_add(&w, net, params, bufs, &num_batches_tracked)) ||
        (st = dlp_st_writer_write(&w, path, flags))) {
        dlp_st_writer_free(&w);
        return dlp_err_trace(st, __FILE__, __LINE__, "dlp_state_save");
    }
    dlp_st_writer_free(&w);
    return DLP_OK;
}
