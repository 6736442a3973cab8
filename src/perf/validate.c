// perf/validate: configurations (built-in sweep, JSON lists), regimes, the error arithmetic, rows as JSON.
#include "perf/validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/json.h"
#include "core/opts.h"
#include "hw/derive.h"
#include "core/fields.h"

void dlp_validate_config_default(dlp_validate_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->model, sizeof c->model, "resnet50");
    c->size = 224;
    c->batch = 32;
    c->workers = 1;
    c->ranks = 1;
    c->prec = DLP_PREC_FP32;
}

static const char *short_model(const char *m, char *buf, size_t len) {
    if (strncmp(m, "resnet", 6) == 0 && m[6] >= '0' && m[6] <= '9') snprintf(buf, len, "r%s", m + 6);
    else snprintf(buf, len, "%s", m);
    return buf;
}

static const char *size_str(int64_t b, char *buf, size_t len) {
    if (b % (1 << 20) == 0) snprintf(buf, len, "%lldM", (long long)(b >> 20));
    else if (b % (1 << 10) == 0) snprintf(buf, len, "%lldK", (long long)(b >> 10));
    else snprintf(buf, len, "%lld", (long long)b);
    return buf;
}

void dlp_validate_config_label(const dlp_validate_config *c, char *buf, size_t len) {
    if (c->name[0]) {
        snprintf(buf, len, "%s", c->name);
        return;
    }
    char m[32], lim[32] = "", thr[32] = "", rl[40] = "", im[32] = "";
    short_model(c->model, m, sizeof m);
    if (c->threads > 0) snprintf(thr, sizeof thr, " t%d", c->threads);
    if (c->ranks > 1) snprintf(thr + strlen(thr), sizeof thr - strlen(thr), " x%d", c->ranks);
    if (c->nodes > 1) snprintf(thr + strlen(thr), sizeof thr - strlen(thr), " %dnodes", c->nodes);
    if (c->read_limit_bytes_per_s > 0) snprintf(rl, sizeof rl, " lim%s", size_str(c->read_limit_bytes_per_s, lim, sizeof lim));
    if (c->images > 0) snprintf(im, sizeof im, " n%lld", (long long)c->images);
    if (c->balance > 0) snprintf(im + strlen(im), sizeof im - strlen(im), " knee%.2fx", c->balance);
    snprintf(buf, len, "%s %s/%d b%d w%d%s%s %s%s%s", c->device, m, c->size, c->batch, c->workers, thr,
             c->prec != DLP_PREC_FP32 ? (c->prec == DLP_PREC_BF16 ? " bf16" : " fp16") : "", c->cold ? "cold" : "warm", rl,
             im);
}

dlp_status dlp_validate_configs_from_json(const json_t *a, const char *where, dlp_validate_config *out, int max, int *n) {
    *n = 0;
    if (!json_is_array(a)) return DLP_ERR(DLP_ERR_FORMAT, "%s: the configurations must be a JSON array of objects", where);
    if (json_array_size(a) == 0) return DLP_ERR(DLP_ERR_FORMAT, "%s: the list of configurations is empty", where);
    if ((int)json_array_size(a) > max)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: %zu configurations (at most %d)", where, json_array_size(a), max);
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *o = json_array_get(a, i);
        char w[320];
        snprintf(w, sizeof w, "%s: [%zu]", where, i);
        if (!json_is_object(o)) return DLP_ERR(DLP_ERR_FORMAT, "%s: is not an object", w);
        static const char *const k_keys[] = {"name", "device", "model", "size", "batch", "workers", "threads",
                                             "ranks", "precision", "storage", "read_limit", "images", "balance",
                                             "nodes", "hostfile", "launcher", NULL};  // the last 3: validate_sweep
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)o, key, v) {
            int known = 0;
            for (int k = 0; k_keys[k]; k++) known |= strcmp(key, k_keys[k]) == 0;
            if (!known)
                return DLP_ERR(DLP_ERR_FORMAT, "%s: unknown field '%s' (name, device, model, size, batch, workers, "
                               "threads, ranks, precision, storage, read_limit, images, balance, nodes, hostfile, launcher)", w, key);
        }
        dlp_validate_config *c = &out[*n];
        dlp_validate_config_default(c);
        DLP_CHECK(dlp_field_opt_str(o, "name", c->name, sizeof c->name, w));
        if (json_object_get(o, "balance")) {
            DLP_CHECK(dlp_field_range(o, "balance", 0.05, 20, &c->balance, w));
            if (json_object_get(o, "device")) DLP_CHECK(dlp_field_str(o, "device", c->device, sizeof c->device, w));
            else snprintf(c->device, sizeof c->device, "sim:custom");
            if (strcmp(c->device, "sim:custom") != 0)
                return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'balance' sets the device's rate: device must be sim:custom "
                               "(or absent), not '%s'", w, c->device);
        } else {
            DLP_CHECK(dlp_field_str(o, "device", c->device, sizeof c->device, w));
        }
        char s[32] = "";
        DLP_CHECK(dlp_field_opt_str(o, "model", s, sizeof s, w));
        if (s[0]) snprintf(c->model, sizeof c->model, "%s", s);
        int64_t v64;
        if (json_object_get(o, "size")) {
            DLP_CHECK(dlp_field_int(o, "size", 32, 4096, &v64, w));
            c->size = (int)v64;
        }
        if (json_object_get(o, "batch")) {
            DLP_CHECK(dlp_field_int(o, "batch", 1, 4096, &v64, w));
            c->batch = (int)v64;
        }
        if (json_object_get(o, "workers")) {
            DLP_CHECK(dlp_field_int(o, "workers", 1, 256, &v64, w));
            c->workers = (int)v64;
        }
        if (json_object_get(o, "threads")) {
            DLP_CHECK(dlp_field_int(o, "threads", 0, 4096, &v64, w));
            c->threads = (int)v64;
        }
        if (json_object_get(o, "ranks")) {
            DLP_CHECK(dlp_field_int(o, "ranks", 1, 64, &v64, w));
            c->ranks = (int)v64;
        }
        if (json_object_get(o, "images")) DLP_CHECK(dlp_field_int(o, "images", 1, INT64_MAX, &c->images, w));
        s[0] = '\0';
        DLP_CHECK(dlp_field_opt_str(o, "precision", s, sizeof s, w));
        if (s[0]) {
            dlp_prec p;  // the runs train on CPUs: fp32 or bf16
            if (dlp_prec_parse(s, &p) != DLP_OK || (p != DLP_PREC_FP32 && p != DLP_PREC_BF16)) {
                dlp_err_clear();
                return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'precision' is '%s' (fp32|bf16)", w, s);
            }
            c->prec = p;
        }
        s[0] = '\0';
        DLP_CHECK(dlp_field_opt_str(o, "storage", s, sizeof s, w));
        if (s[0]) {
            if (strcmp(s, "cold") == 0) c->cold = 1;
            else if (strcmp(s, "warm") != 0) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'storage' is '%s' (warm|cold)", w, s);
        }
        const json_t *rl = json_object_get(o, "read_limit");
        if (json_is_string(rl)) {
            if (dlp_parse_size(json_string_value(rl), &c->read_limit_bytes_per_s) != DLP_OK || c->read_limit_bytes_per_s < 0)
                return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'read_limit' is '%s' (bytes/s, e.g. 20M)", w,
                               json_string_value(rl));
        } else if (rl && !json_is_null(rl)) {
            DLP_CHECK(dlp_field_int(o, "read_limit", 0, INT64_MAX, &c->read_limit_bytes_per_s, w));
        }
        const dlp_backend_kind kind = dlp_backend_kind_of(c->device);  // validate runs here: a GPU is only emulated
        if ((kind != DLP_BACKEND_KIND_SIM || !strchr(c->device, ':')) && kind != DLP_BACKEND_KIND_CPU)
            return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'device' is '%s' (cpu, ref or sim:<gpu>[,options])", w, c->device);
        (*n)++;
    }
    return DLP_OK;
}

// The built-in sweep, for a 2-core machine whose loader prepares a few hundred 224-px images/s per thread: sim
// devices from 100 to 5,000 img/s (device-bound and pipeline-bound on purpose), read-rate limits and cold reads
// (storage-bound), and the cpu device sharing the cores with the loader.
typedef struct {
    const char *device, *model;
    int size, batch, workers, threads, cold;
    int64_t limit;
    int quick;
    int64_t images;  // a subset of the set: epochs of images/batch steps
    double balance;  // sim:custom at this multiple of the predicted loader rate
} builtin_row;

static const builtin_row k_sweep[] = {
    // pipeline-bound: a device faster than the loader
    {"sim:custom,img_per_s=5000", "resnet50", 224, 32, 1, 0, 0, 0, 1, 0, 0},
    {"sim:custom,img_per_s=5000", "resnet50", 224, 32, 2, 0, 0, 0, 1, 0, 0},
    {"sim:custom,img_per_s=5000", "resnet50", 112, 64, 1, 0, 0, 0, 0, 0, 0},
    {"sim:custom,img_per_s=5000", "resnet50", 160, 16, 2, 0, 0, 0, 0, 0, 0},
    {"sim:custom,img_per_s=2000", "resnet50", 224, 64, 2, 0, 0, 0, 0, 0, 0},
    {"sim:a100,scale=0.5", "resnet50", 224, 32, 1, 0, 0, 0, 0, 0, 0},
    // device-bound: slower devices
    {"sim:custom,img_per_s=100", "resnet50", 224, 32, 1, 0, 0, 0, 1, 0, 0},
    {"sim:custom,img_per_s=400", "resnet50", 224, 32, 2, 0, 0, 0, 0, 0, 0},
    {"sim:custom,img_per_s=400", "resnet50", 224, 16, 1, 0, 0, 0, 0, 0, 0},
    {"sim:custom,img_per_s=2000", "resnet50", 112, 32, 2, 0, 0, 0, 0, 0, 0},
    {"sim:t4", "resnet50", 224, 32, 2, 0, 0, 0, 0, 0, 0},
    {"sim:t4,scale=2", "resnet18", 112, 64, 1, 0, 0, 0, 0, 0, 0},
    // storage-bound: read-rate limits, cold reads
    {"sim:custom,img_per_s=2000", "resnet50", 224, 32, 1, 0, 0, 5 << 20, 1, 0, 0},
    {"sim:custom,img_per_s=2000", "resnet50", 224, 32, 2, 0, 0, 20 << 20, 0, 0, 0},
    {"sim:custom,img_per_s=2000", "resnet50", 112, 32, 1, 0, 0, 20 << 20, 0, 0, 0},
    {"sim:custom,img_per_s=5000", "resnet50", 224, 32, 1, 0, 1, 0, 1, 0, 0},
    {"sim:custom,img_per_s=5000", "resnet50", 224, 32, 2, 0, 1, 0, 0, 0, 0},
    {"sim:custom,img_per_s=400", "resnet50", 224, 32, 2, 0, 1, 0, 0, 0, 0},
    // the cpu device: compute and the loader share the 2 cores
    {"cpu", "resnet18", 64, 32, 1, 0, 0, 0, 1, 0, 0},
    {"cpu", "resnet18", 64, 32, 2, 0, 0, 0, 0, 0, 0},
    {"cpu", "resnet18", 64, 16, 1, 0, 0, 0, 0, 0, 0},
    {"cpu", "resnet50", 64, 32, 1, 0, 0, 0, 0, 0, 0},
    {"cpu", "resnet18", 112, 32, 2, 0, 0, 0, 0, 0, 0},
    {"cpu", "resnet18", 64, 32, 1, 1, 0, 0, 0, 0, 0},
    // epochs of a few steps (a subset of the set): the loader goes on into the next epoch's batches
    {"sim:custom,img_per_s=5000", "resnet50", 224, 256, 2, 0, 0, 0, 0, 1000, 0},
    {"sim:custom,img_per_s=5000", "resnet50", 224, 128, 1, 0, 0, 0, 0, 1000, 0},
    {"sim:custom,img_per_s=5000", "resnet50", 112, 64, 2, 0, 0, 0, 0, 256, 0},
    {"sim:a100,scale=0.4", "resnet50", 224, 128, 2, 0, 0, 0, 0, 1000, 0},
    {"sim:custom,img_per_s=400", "resnet50", 224, 128, 2, 0, 0, 0, 0, 1000, 0},
    // near the balance point: devices as fast as the loader (x0.9, x1, x1.1)
    {"sim:custom", "resnet50", 224, 32, 1, 0, 0, 0, 0, 0, 0.9},
    {"sim:custom", "resnet50", 224, 32, 1, 0, 0, 0, 0, 0, 1.0},
    {"sim:custom", "resnet50", 224, 32, 1, 0, 0, 0, 0, 0, 1.1},
    {"sim:custom", "resnet50", 224, 64, 2, 0, 0, 0, 0, 0, 1.0},
    {"sim:custom", "resnet50", 112, 32, 2, 0, 0, 0, 0, 1000, 1.0},
    // the cpu device at the size users ask about
    {"cpu", "resnet50", 224, 16, 1, 0, 0, 0, 0, 0, 0},
    {"cpu", "resnet18", 224, 32, 1, 0, 0, 0, 0, 0, 0},
    {"cpu", "resnet50", 224, 32, 2, 0, 0, 0, 0, 0, 0},
};

int dlp_validate_builtin(int quick, dlp_validate_config *out, int max) {
    int n = 0;
    for (size_t i = 0; i < sizeof k_sweep / sizeof k_sweep[0] && n < max; i++) {
        const builtin_row *r = &k_sweep[i];
        if (quick && !r->quick) continue;
        dlp_validate_config *c = &out[n++];
        dlp_validate_config_default(c);
        snprintf(c->device, sizeof c->device, "%s", r->device);
        snprintf(c->model, sizeof c->model, "%s", r->model);
        c->size = r->size;
        c->batch = r->batch;
        c->workers = r->workers;
        c->threads = r->threads;
        c->cold = r->cold;
        c->read_limit_bytes_per_s = r->limit;
        c->images = r->images;
        c->balance = r->balance;
    }
    return n;
}

const char *dlp_validate_regime_of_stage(dlp_stage s) {
    switch (s) {
    case DLP_STAGE_READ: case DLP_STAGE_IOWAIT: return "storage";
    case DLP_STAGE_PREP: case DLP_STAGE_HOSTMEM: return "pipeline";
    default: return "device";
    }
}

const char *dlp_validate_observed_regime(double data_wait_frac, double read_share_of_worker_time) {
    if (!(data_wait_frac >= 0.10)) return "device";
    return read_share_of_worker_time >= 0.25 ? "storage" : "pipeline";
}

double dlp_validate_measured_at_share(const dlp_validate_row *r) {
    return isfinite(r->measured_mean_img_per_s) && r->measured_mean_img_per_s > 0 ? r->measured_mean_img_per_s
                                                                                 : r->measured_img_per_s;
}

double dlp_validate_ape(double predicted, double measured) {
    if (!(measured > 0) || !isfinite(predicted)) return NAN;
    return fabs(predicted - measured) / measured;
}

double dlp_validate_mape(const double *ape, int n) {
    double s = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(ape[i])) {
            s += ape[i];
            k++;
        }
    return k ? s / k : NAN;
}

void dlp_validate_cfg_init(dlp_validate_cfg *c) {
    memset(c, 0, sizeof *c);
    c->min_steps = 8;
    c->min_seconds = 10;
    c->max_seconds = 30;
    c->retries = 2;
    c->disturbed_cores = 0.2;
    c->quiet_wait_s = 20;
    c->speed_tolerance = 0.08;
}

static dlp_status device_for(const dlp_validate_cfg *vc, const dlp_validate_config *c, dlp_device_profile *d) {
    const char *colon = strchr(c->device, ':');
    if (dlp_backend_kind_of(c->device) == DLP_BACKEND_KIND_SIM && colon) {  // an emulated GPU: its spec follows ':'
        dlp_sim_spec s;
        DLP_CHECK(dlp_sim_spec_parse(colon + 1, &s));
        return dlp_sim_device(&s, vc->catalog, d);
    }
    const dlp_device_profile *pd = dlp_profile_find_device(vc->profile, c->device);
    if (!pd)
        return DLP_ERR(DLP_ERR_NOTFOUND, "the profile has no measured '%s' device (run dlperf probe with --device %s)",
                       c->device, c->device);
    *d = *pd;
    return DLP_OK;
}

dlp_status dlp_validate_predict(const dlp_validate_cfg *vc, const dlp_validate_config *c, dlp_prediction *out) {
    dlp_device_profile dev;
    DLP_CHECK(device_for(vc, c, &dev));
    dlp_workload w;
    dlp_workload_init(&w);
    snprintf(w.model, sizeof w.model, "%s", c->model);
    w.classes = vc->ds ? vc->ds->nclasses : 1000;
    w.task = DLP_TASK_TRAIN;
    w.prec = c->prec;
    w.batch = c->batch;
    w.devices = c->ranks > 1 ? c->ranks : 1;  // data-parallel ranks: devices on this node
    w.nodes = c->nodes > 1 ? c->nodes : 1;    // across hosts: the profile's link (probe --hostfile)
    w.workers = c->workers;
    w.threads = c->threads;
    dlp_img_transform_init(&w.tf, 1, c->size);
    w.storage = c->cold ? DLP_STORAGE_COLD : DLP_STORAGE_WARM;
    w.read_limit_bytes_per_s = (double)c->read_limit_bytes_per_s;
    if (vc->stats) w.stats = *vc->stats;
    else if (vc->profile->has_stats) w.stats = vc->profile->stats;
    else return DLP_ERR(DLP_ERR_INVALID, "validate: no dataset statistics for the predictions");
    if (c->images > 0 && c->images < w.stats.images) w.stats.images = c->images;
    w.epochs = 1;
    w.seed = vc->seed + 1;
    DLP_CHECK(dlp_predict(vc->profile, &dev, &w, out));
    if (w.nodes > 1) out->img_per_s = out->cluster_img_per_s;  // the job's rate, as measured (rank 0's x ranks)
    return DLP_OK;
}


dlp_status dlp_validate_resolve_balance(const dlp_validate_cfg *vc, dlp_validate_config *c) {
    if (!(c->balance > 0)) return DLP_OK;
    dlp_validate_config fast = *c;
    snprintf(fast.device, sizeof fast.device, "sim:custom,img_per_s=1000000");
    fast.balance = 0;
    dlp_prediction *pr = malloc(sizeof *pr);
    if (!pr) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    dlp_status st = dlp_validate_predict(vc, &fast, pr);
    // The loader's own rate, whatever else would bound the run (the loop's time per step with a tiny model).
    const double loader = st == DLP_OK ? pr->loader_img_per_s : 0;
    free(pr);
    if (st) return st;
    if (!(loader > 0) || !isfinite(loader))
        return DLP_ERR(DLP_ERR_INVALID, "validate: no loader rate predicted for the knee configuration");
    snprintf(c->device, sizeof c->device, "sim:custom,img_per_s=%.0f", c->balance * loader);
    return DLP_OK;
}

static int same_but_parallelism(const dlp_validate_config *a, const dlp_validate_config *b) {
    return strcmp(a->device, b->device) == 0 && strcmp(a->model, b->model) == 0 && a->size == b->size &&
           a->batch == b->batch && a->workers == b->workers && a->prec == b->prec && a->cold == b->cold &&
           a->read_limit_bytes_per_s == b->read_limit_bytes_per_s && a->images == b->images;
}

int dlp_validate_scaling_pairs(const dlp_validate_row *rows, int n, dlp_validate_scaling *out, int max) {
    int k = 0;
    for (int i = 0; i < n && k < max; i++) {
        const dlp_validate_config *a = &rows[i].cfg;
        if (a->ranks < 2 || a->threads < 1) continue;
        for (int j = 0; j < n && k < max; j++) {
            const dlp_validate_config *b = &rows[j].cfg;
            if (b->ranks > 1 || b->threads != a->ranks * a->threads || !same_but_parallelism(a, b)) continue;
            dlp_validate_scaling *s = &out[k++];
            s->ranks_row = i;
            s->single_row = j;
            s->predicted_ratio = rows[i].predicted_img_per_s / rows[j].predicted_img_per_s;
            s->measured_ratio = rows[i].ok && rows[j].ok ? rows[i].measured_img_per_s / rows[j].measured_img_per_s : NAN;
            s->ape = dlp_validate_ape(s->predicted_ratio, s->measured_ratio);
            break;
        }
    }
    return k;
}

json_t *dlp_validate_scaling_to_json(const dlp_validate_row *rows, const dlp_validate_scaling *s, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:s,s:s,s:o,s:o,s:o}", "ranks", rows[s[i].ranks_row].label, "single",
                                           rows[s[i].single_row].label, "predicted_ratio",
                                           dlp_json_real_or_null(s[i].predicted_ratio), "measured_ratio",
                                           dlp_json_real_or_null(s[i].measured_ratio), "ape",
                                           dlp_json_real_or_null(s[i].ape)));
    return a;
}

json_t *dlp_validate_row_to_json(const dlp_validate_row *r) {
    const dlp_validate_config *c = &r->cfg;
    json_t *o = json_object();
    json_object_set_new(o, "config", json_string(r->label));
    json_t *cf = json_object();
    json_object_set_new(cf, "device", json_string(c->device));
    json_object_set_new(cf, "model", json_string(c->model));
    json_object_set_new(cf, "size", json_integer(c->size));
    json_object_set_new(cf, "batch", json_integer(c->batch));
    json_object_set_new(cf, "workers", json_integer(c->workers));
    json_object_set_new(cf, "threads", json_integer(c->threads));
    json_object_set_new(cf, "ranks", json_integer(c->ranks > 1 ? c->ranks : 1));
    if (c->nodes > 1) json_object_set_new(cf, "nodes", json_integer(c->nodes));
    json_object_set_new(cf, "precision", json_string(dlp_prec_name(c->prec)));
    json_object_set_new(cf, "storage", json_string(c->cold ? "cold" : "warm"));
    json_object_set_new(cf, "read_limit", json_integer(c->read_limit_bytes_per_s));
    json_object_set_new(cf, "images", json_integer(c->images));
    json_object_set_new(cf, "balance", c->balance > 0 ? json_real(c->balance) : json_null());
    json_object_set_new(o, "settings", cf);
    json_object_set_new(o, "ok", json_boolean(r->ok));
    if (!r->ok) json_object_set_new(o, "error", json_string(r->error));
    json_object_set_new(o, "predicted_img_per_s", dlp_json_real_or_null(r->predicted_img_per_s));
    json_object_set_new(o, "predicted_bottleneck", json_string(r->predicted_bottleneck));
    json_object_set_new(o, "predicted_regime", json_string(r->predicted_regime ? r->predicted_regime : ""));
    json_object_set_new(o, "predicted_stall", dlp_json_real_or_null(r->predicted_stall));
    json_object_set_new(o, "measured_img_per_s", dlp_json_real_or_null(r->measured_img_per_s));
    json_object_set_new(o, "measured_mean_img_per_s", dlp_json_real_or_null(r->measured_mean_img_per_s));
    json_object_set_new(o, "window_spread", dlp_json_real_or_null(r->window_spread));
    json_object_set_new(o, "windows", json_integer(r->windows));
    json_object_set_new(o, "steps_measured", json_integer(r->steps_measured));
    json_object_set_new(o, "warmup_steps", json_integer(r->warmup_steps));
    json_object_set_new(o, "measured_s", dlp_json_real_or_null(r->measured_s));
    json_object_set_new(o, "run_s", dlp_json_real_or_null(r->run_s));
    json_object_set_new(o, "observed_stall", dlp_json_real_or_null(r->observed_stall));
    json_object_set_new(o, "read_share", dlp_json_real_or_null(r->read_share));
    json_object_set_new(o, "observed_regime", json_string(r->observed_regime ? r->observed_regime : ""));
    json_object_set_new(o, "other_load_cores", dlp_json_real_or_null(r->other_load_cores));
    json_object_set_new(o, "runs", json_integer(r->runs));
    json_object_set_new(o, "speed", dlp_json_real_or_null(r->speed));
    json_object_set_new(o, "speed_drift", dlp_json_real_or_null(r->speed_drift));
    json_object_set_new(o, "speed_one_thread", dlp_json_real_or_null(r->speed_one));
    json_object_set_new(o, "steal", dlp_json_real_or_null(r->steal));
    json_object_set_new(o, "work_gflops_per_cpu_s", dlp_json_real_or_null(r->work));
    json_object_set_new(o, "work_rel", dlp_json_real_or_null(r->work_rel));
    json_object_set_new(o, "decode_work_img_per_cpu_s", dlp_json_real_or_null(r->decode_work));
    json_object_set_new(o, "decode_rel", dlp_json_real_or_null(r->decode_rel));
    json_object_set_new(o, "predicted_at_speed_img_per_s", dlp_json_real_or_null(r->predicted_at_speed_img_per_s));
    json_object_set_new(o, "ape_at_speed", dlp_json_real_or_null(r->ape_at_speed));
    json_object_set_new(o, "cpu_share", dlp_json_real_or_null(r->cpu_share));
    json_object_set_new(o, "predicted_at_share_img_per_s", dlp_json_real_or_null(r->predicted_at_share_img_per_s));
    json_object_set_new(o, "ape_at_share", dlp_json_real_or_null(r->ape_at_share));
    json_object_set_new(o, "cpu_share_slowest", dlp_json_real_or_null(r->cpu_share_slowest));
    json_object_set_new(o, "cpu_runnable", dlp_json_real_or_null(r->cpu_runnable));
    json_object_set_new(o, "predicted_at_mean_share_img_per_s",
                        dlp_json_real_or_null(r->predicted_at_mean_share_img_per_s));
    json_object_set_new(o, "ape_at_mean_share", dlp_json_real_or_null(r->ape_at_mean_share));
    json_object_set_new(o, "ape", dlp_json_real_or_null(r->ape));
    return o;
}
