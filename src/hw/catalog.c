// hw/catalog: loading and checking catalog/*.json.
#include "hw/catalog.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/fields.h"

enum { F_SOURCES, F_GPUS, F_CPUS, F_SYSTEMS, F_THROUGHPUT, F_DATASETS, F_PIPELINES, F_COUNT };
#define RATE_MIN_GB_S DLP_CATALOG_GB_S_MIN
#define TFLOPS_MIN 1e-3
#define TFLOPS_MAX 1e6

static const char *const k_files[F_COUNT] = {"sources", "gpus", "cpus", "systems", "throughput", "datasets", "pipelines"};
static const char *const k_arrays[F_COUNT] = {"sources", "gpus", "cpus", "systems", "records", "datasets", "pipelines"};

double dlp_pcie_bytes_per_s(int gen, int lanes) {
    // PCI-SIG per-lane rate per direction after line encoding (8b/10b up to Gen2, 128b/130b from Gen3).
    static const double k_lane_gb_s[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.877};
    if (gen < 1 || gen > 6 || lanes < 1) return 0;
    return k_lane_gb_s[gen] * lanes * 1e9;
}

double dlp_gpu_peak(const dlp_gpu_spec *g, dlp_prec prec) {
    switch (prec) {
    case DLP_PREC_FP32: return g->fp32_tflops;
    case DLP_PREC_TF32: return g->tf32_tflops;
    case DLP_PREC_BF16: return g->bf16_tflops;
    case DLP_PREC_FP16: return g->fp16_tflops;
    case DLP_PREC_INT8: return g->int8_tops;
    default: return 0;
    }
}

dlp_status dlp_catalog_default_dir(char *buf, size_t len) {
    const char *env = getenv("DLPERF_CATALOG");
    if (env && env[0]) {
        snprintf(buf, len, "%s", env);
        return DLP_OK;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char probe[PATH_MAX + 64];
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        // PREFIX/bin/dlperf finds PREFIX/share/dlperf/catalog (make install); a build in the source tree, the
        // catalog/ next to or above it
        static const char *const k_up[] = {"/../share/dlperf", "", "/..", "/../..", "/../../.."};
        for (int i = 0; i < 5; i++) {
            snprintf(probe, sizeof probe, "%s%s/catalog/gpus.json", exe, k_up[i]);
            if (dlp_path_exists(probe)) {
                snprintf(probe, sizeof probe, "%s%s/catalog", exe, k_up[i]);
                char real[PATH_MAX];
                snprintf(buf, len, "%s", realpath(probe, real) ? real : probe);
                return DLP_OK;
            }
        }
    }
    if (dlp_path_exists("catalog/gpus.json")) {
        snprintf(buf, len, "catalog");
        return DLP_OK;
    }
    return DLP_ERR(DLP_ERR_NOTFOUND,
                   "no catalog found (looked for ../share/dlperf/catalog/gpus.json from the dlperf executable's "
                   "directory, catalog/gpus.json next to and above it, and in the current directory); hint: "
                   "make install PREFIX=DIR installs it, or set DLPERF_CATALOG=DIR");
}

// --- lookups ---------------------------------------------------------------------------------------------------------

static const dlp_source *find_source(const dlp_catalog *c, const char *id) {
    for (int i = 0; i < c->nsources; i++)
        if (strcmp(c->sources[i].id, id) == 0) return &c->sources[i];
    return NULL;
}

const dlp_source *dlp_catalog_source(const dlp_catalog *c, const char *id) {
    const dlp_source *s = find_source(c, id);
    if (!s) DLP_ERR(DLP_ERR_NOTFOUND, "unknown source '%s' (not in %s/sources.json)", id, c->dir);
    return s;
}

static const dlp_gpu_spec *find_gpu(const dlp_catalog *c, const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < c->ngpus; i++) {
        const dlp_gpu_spec *g = &c->gpus[i];
        if (strcasecmp(g->id, name) == 0) return g;
        const json_t *al = json_object_get(g->json, "aliases");
        for (size_t k = 0; k < json_array_size(al); k++)
            if (strcasecmp(json_string_value(json_array_get(al, k)), name) == 0) return g;
    }
    return NULL;
}

static void known_list(char *buf, size_t len, int n, const void *base, size_t stride) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used + 40 < len; i++) {
        const char *id = *(const char *const *)((const char *)base + (size_t)i * stride);
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", id);
    }
}

// The error of a lookup that found nothing: what was asked for and the ids the catalog has.
static void not_found(const dlp_catalog *c, const char *what, const char *id, int n, const void *base, size_t stride) {
    char known[512];
    known_list(known, sizeof known, n, base, stride);
    DLP_ERR(DLP_ERR_NOTFOUND, "unknown %s '%s' (catalog %s has: %s)", what, id ? id : "(null)", c->dir, known);
}

// The record of an array (n of stride bytes, each starting with its const char *id, as known_list reads them)
// whose id is id, case-insensitively; else NULL and the not_found error.
static const void *find_id(const dlp_catalog *c, const char *what, const char *id, int n, const void *base,
                           size_t stride) {
    for (int i = 0; id && i < n; i++) {
        const void *r = (const char *)base + (size_t)i * stride;
        if (strcasecmp(*(const char *const *)r, id) == 0) return r;
    }
    not_found(c, what, id, n, base, stride);
    return NULL;
}

const dlp_gpu_spec *dlp_catalog_gpu(const dlp_catalog *c, const char *name) {
    const dlp_gpu_spec *g = find_gpu(c, name);
    if (!g) not_found(c, "GPU", name, c->ngpus, c->gpus, sizeof *c->gpus);
    return g;
}

const dlp_cpu_spec *dlp_catalog_cpu(const dlp_catalog *c, const char *id) {
    return find_id(c, "CPU", id, c->ncpus, c->cpus, sizeof *c->cpus);
}

const dlp_system_spec *dlp_catalog_system(const dlp_catalog *c, const char *id) {
    return find_id(c, "system", id, c->nsystems, c->systems, sizeof *c->systems);
}

const dlp_catalog_dataset *dlp_catalog_dataset_find(const dlp_catalog *c, const char *id) {
    return find_id(c, "dataset", id, c->ndatasets, c->datasets, sizeof *c->datasets);
}

const dlp_catalog_pipeline *dlp_catalog_pipeline_find(const dlp_catalog *c, const char *id) {
    return find_id(c, "pipeline", id, c->npipelines, c->pipelines, sizeof *c->pipelines);
}

const dlp_published *dlp_catalog_primary(const dlp_catalog *c, const dlp_gpu_spec *g, dlp_task task, dlp_prec prec) {
    for (int i = 0; i < c->npublished; i++) {
        const dlp_published *p = &c->published[i];
        if (p->primary && p->gpu == g && p->task == task && p->prec == prec) return p;
    }
    return NULL;
}

// --- checking sources --------------------------------------------------------------------------------------------------

static int has_number(const json_t *v) {
    if (json_is_number(v)) return 1;
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            if (has_number(json_array_get(v, i))) return 1;
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) if (has_number(x)) return 1;
    }
    return 0;
}

// Every figure of an entry (a field holding a number, or numbers inside it) must resolve to a known source:
// its own name in "src", or "*" there.
dlp_status dlp_catalog_check_sources(const dlp_catalog *c, const json_t *entry, const char *where) {
    const json_t *src = json_object_get(entry, "src");
    if (!json_is_object(src))
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'src' is missing or not an object (it names each figure's source)", where);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)src, k, v) {
        if (!json_is_string(v)) return DLP_ERR(DLP_ERR_FORMAT, "%s: src['%s'] is not a string", where, k);
        if (strcmp(k, "*") != 0 && !json_object_get(entry, k))
            return DLP_ERR(DLP_ERR_FORMAT, "%s: src names field '%s', which the entry does not have", where, k);
        if (!find_source(c, json_string_value(v)))
            return DLP_ERR(DLP_ERR_FORMAT, "%s: src['%s'] names unknown source '%s' (not in %s/sources.json)", where, k,
                           json_string_value(v), c->dir);
    }
    json_object_foreach((json_t *)entry, k, v) {
        if (strcmp(k, "src") == 0 || !has_number(v)) continue;
        if (!json_object_get(src, k) && !json_object_get(src, "*"))
            return DLP_ERR(DLP_ERR_FORMAT, "%s: figure '%s' has no source (name one in its \"src\")", where, k);
    }
    return DLP_OK;
}

// --- parsing each file -------------------------------------------------------------------------------------------------

static dlp_status str_field(const json_t *o, const char *key, const char **out, const char *where) {
    DLP_CHECK(dlp_json_get_str(o, key, out, where));
    if (!(*out)[0]) return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is empty", where, key);
    return DLP_OK;
}

static const char *opt_str(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : "";
}

static dlp_status int_field(const json_t *o, const char *key, int64_t lo, int64_t hi, int *out, const char *where) {
    int64_t v;
    DLP_CHECK(dlp_field_int(o, key, lo, hi, &v, where));
    *out = (int)v;
    return DLP_OK;
}

static dlp_status opt_int_field(const json_t *o, const char *key, int64_t lo, int64_t hi, int *out, const char *where) {
    *out = 0;
    if (!json_object_get(o, key)) return DLP_OK;
    return int_field(o, key, lo, hi, out, where);
}

static dlp_status opt_bool(const json_t *o, const char *key, int *out, const char *where) {
    const json_t *v = json_object_get(o, key);
    *out = 0;
    if (!v) return DLP_OK;
    if (!json_is_boolean(v)) return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is not true/false", where, key);
    *out = json_is_true(v);
    return DLP_OK;
}

static dlp_status parse_source(dlp_catalog *c, const char *id, const json_t *e, const char *where, dlp_source *s) {
    s->id = id;
    DLP_CHECK(str_field(e, "kind", &s->kind, where));
    static const char *const k_kinds[] = {"datasheet", "published", "list-price", "measured", "estimate"};
    int ok = 0;
    for (size_t i = 0; i < sizeof k_kinds / sizeof k_kinds[0]; i++) ok |= strcmp(s->kind, k_kinds[i]) == 0;
    if (!ok)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'kind' is '%s' (datasheet|published|list-price|measured|estimate)", where,
                       s->kind);
    DLP_CHECK(str_field(e, "title", &s->title, where));
    s->url = opt_str(e, "url");
    DLP_CHECK(int_field(e, "year", 1990, 2100, &s->year, where));
    (void)c;
    return DLP_OK;
}

static dlp_status parse_gpu(dlp_catalog *c, const json_t *e, const char *where0, dlp_gpu_spec *g) {
    char where[400];
    DLP_CHECK(str_field(e, "id", &g->id, where0));
    snprintf(where, sizeof where, "%s (%s)", where0, g->id);
    g->json = e;
    DLP_CHECK(str_field(e, "name", &g->name, where));
    DLP_CHECK(str_field(e, "arch", &g->arch, where));
    g->notes = opt_str(e, "notes");
    const json_t *al = json_object_get(e, "aliases");
    if (al && !json_is_array(al)) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'aliases' is not an array", where);
    for (size_t i = 0; i < json_array_size(al); i++)
        if (!json_is_string(json_array_get(al, i)))
            return DLP_ERR(DLP_ERR_FORMAT, "%s: aliases[%zu] is not a string", where, i);
    DLP_CHECK(int_field(e, "year", 1990, 2100, &g->year, where));
    DLP_CHECK(dlp_field_range(e, "memory_gb", 0.001, 1e5, &g->memory_gb, where));
    DLP_CHECK(dlp_field_range(e, "mem_bw_gb_s", 0.1, 1e6, &g->mem_bw_gb_s, where));
    DLP_CHECK(dlp_field_range(e, "fp32_tflops", TFLOPS_MIN, TFLOPS_MAX, &g->fp32_tflops, where));
    DLP_CHECK(dlp_field_range(e, "fp16_tflops", TFLOPS_MIN, TFLOPS_MAX, &g->fp16_tflops, where));
    DLP_CHECK(dlp_field_opt_range(e, "tf32_tflops", 0, TFLOPS_MIN, TFLOPS_MAX, &g->tf32_tflops, where));
    DLP_CHECK(dlp_field_opt_range(e, "bf16_tflops", 0, TFLOPS_MIN, TFLOPS_MAX, &g->bf16_tflops, where));
    DLP_CHECK(dlp_field_opt_range(e, "int8_tops", 0, TFLOPS_MIN, TFLOPS_MAX, &g->int8_tops, where));
    DLP_CHECK(opt_int_field(e, "sms", 1, 100000, &g->sms, where));
    DLP_CHECK(opt_int_field(e, "boost_mhz", 1, 100000, &g->boost_mhz, where));
    DLP_CHECK(dlp_field_opt_range(e, "l2_mb", 0, 0.001, 1e5, &g->l2_mb, where));
    DLP_CHECK(int_field(e, "pcie_gen", 1, 6, &g->pcie_gen, where));
    DLP_CHECK(int_field(e, "pcie_lanes", 1, 32, &g->pcie_lanes, where));
    DLP_CHECK(dlp_field_opt_range(e, "nvlink_gb_s", 0, RATE_MIN_GB_S, 1e5, &g->nvlink_gb_s, where));
    DLP_CHECK(dlp_field_range(e, "board_power_w", 1, 1e5, &g->board_power_w, where));
    DLP_CHECK(dlp_field_opt_range(e, "price_usd", 0, 1, 1e8, &g->price_usd, where));
    DLP_CHECK(opt_int_field(e, "price_year", 1990, 2100, &g->price_year, where));
    return dlp_catalog_check_sources(c, e, where);
}

static dlp_status parse_cpu(dlp_catalog *c, const json_t *e, const char *where0, dlp_cpu_spec *p) {
    char where[400];
    DLP_CHECK(str_field(e, "id", &p->id, where0));
    snprintf(where, sizeof where, "%s (%s)", where0, p->id);
    p->json = e;
    DLP_CHECK(str_field(e, "name", &p->name, where));
    DLP_CHECK(str_field(e, "arch", &p->arch, where));
    p->notes = opt_str(e, "notes");
    DLP_CHECK(int_field(e, "year", 1990, 2100, &p->year, where));
    DLP_CHECK(int_field(e, "cores", 1, 4096, &p->cores, where));
    DLP_CHECK(int_field(e, "threads", 1, 8192, &p->threads, where));
    if (p->threads < p->cores) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'threads' (%d) is below 'cores' (%d)", where, p->threads, p->cores);
    DLP_CHECK(dlp_field_range(e, "base_ghz", 0.1, 20, &p->base_ghz, where));
    DLP_CHECK(dlp_field_range(e, "boost_ghz", 0.1, 20, &p->boost_ghz, where));
    DLP_CHECK(dlp_field_range(e, "allcore_ghz", 0.1, 20, &p->allcore_ghz, where));
    DLP_CHECK(dlp_field_range(e, "mem_bw_gb_s", 0.1, 1e5, &p->mem_bw_gb_s, where));
    DLP_CHECK(dlp_field_range(e, "tdp_w", 1, 1e5, &p->tdp_w, where));
    DLP_CHECK(dlp_field_opt_range(e, "price_usd", 0, 1, 1e8, &p->price_usd, where));
    DLP_CHECK(dlp_field_range(e, "core_speed_rel", 0.01, 100, &p->core_speed_rel, where));
    DLP_CHECK(dlp_field_frac(e, "smt_yield", &p->smt_yield, where));
    return dlp_catalog_check_sources(c, e, where);
}

static dlp_status parse_system(dlp_catalog *c, const json_t *e, const char *where0, dlp_system_spec *s) {
    char where[400];
    DLP_CHECK(str_field(e, "id", &s->id, where0));
    snprintf(where, sizeof where, "%s (%s)", where0, s->id);
    s->json = e;
    DLP_CHECK(str_field(e, "name", &s->name, where));
    s->notes = opt_str(e, "notes");
    const char *kind, *gpu, *cpu;
    DLP_CHECK(str_field(e, "kind", &kind, where));
    if (strcmp(kind, "owned") == 0) s->kind = DLP_SYSTEM_OWNED;
    else if (strcmp(kind, "cloud") == 0) s->kind = DLP_SYSTEM_CLOUD;
    else return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'kind' is '%s' (owned|cloud)", where, kind);
    DLP_CHECK(int_field(e, "year", 1990, 2100, &s->year, where));
    DLP_CHECK(str_field(e, "gpu", &gpu, where));
    s->gpu = find_gpu(c, gpu);
    if (!s->gpu) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'gpu' names unknown GPU '%s' (not in %s/gpus.json)", where, gpu, c->dir);
    DLP_CHECK(int_field(e, "gpus", 1, 1024, &s->gpus, where));
    DLP_CHECK(str_field(e, "cpu", &cpu, where));
    for (int i = 0; i < c->ncpus && !s->cpu; i++)
        if (strcmp(c->cpus[i].id, cpu) == 0) s->cpu = &c->cpus[i];
    if (!s->cpu) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'cpu' names unknown CPU '%s' (not in %s/cpus.json)", where, cpu, c->dir);
    DLP_CHECK(int_field(e, "sockets", 1, 64, &s->sockets, where));
    DLP_CHECK(dlp_field_range(e, "ram_gb", 0.001, 1e5, &s->ram_gb, where));
    DLP_CHECK(str_field(e, "storage_desc", &s->storage_desc, where));
    DLP_CHECK(dlp_field_range(e, "storage_tb", 0.001, DLP_CATALOG_TB_MAX, &s->storage_tb, where));
    DLP_CHECK(dlp_field_range(e, "storage_read_gb_s", RATE_MIN_GB_S, DLP_CATALOG_GB_S_MAX, &s->storage_read_gb_s, where));
    DLP_CHECK(dlp_field_range(e, "storage_stream_gb_s", RATE_MIN_GB_S, DLP_CATALOG_GB_S_MAX, &s->storage_stream_gb_s,
                              where));
    DLP_CHECK(dlp_field_range(e, "storage_latency_us", 0, DLP_CATALOG_LATENCY_US_MAX, &s->storage_latency_us, where));
    DLP_CHECK(int_field(e, "pcie_gpus_per_uplink", 1, 64, &s->pcie_gpus_per_uplink, where));
    DLP_CHECK(int_field(e, "pcie_uplink_gen", 1, 6, &s->pcie_uplink_gen, where));
    DLP_CHECK(dlp_field_opt_range(e, "allreduce_busbw_gb_s", 0, RATE_MIN_GB_S, 1e5, &s->allreduce_busbw_gb_s, where));
    if (s->gpus > 1 && s->allreduce_busbw_gb_s == 0)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'allreduce_busbw_gb_s' is missing (needed for its %d GPUs)", where, s->gpus);
    DLP_CHECK(dlp_field_opt_range(e, "nic_gb_s", 0, RATE_MIN_GB_S, 1e5, &s->nic_gb_s, where));
    s->stack = opt_str(e, "stack");
    if (s->kind == DLP_SYSTEM_OWNED) {
        DLP_CHECK(dlp_field_range(e, "power_w", 1, DLP_CATALOG_W_MAX, &s->power_w, where));
        DLP_CHECK(dlp_field_range(e, "price_usd", 1, DLP_CATALOG_USD_MAX, &s->price_usd, where));
        DLP_CHECK(int_field(e, "price_year", 1990, 2100, &s->price_year, where));
    } else {
        DLP_CHECK(dlp_field_range(e, "usd_per_hour", 1e-4, 1e5, &s->usd_per_hour, where));
        DLP_CHECK(dlp_field_opt_range(e, "usd_per_hour_alt", 0, 1e-4, 1e5, &s->usd_per_hour_alt, where));
        DLP_CHECK(dlp_field_opt_range(e, "power_w", 0, 1, 1e6, &s->power_w, where));
    }
    return dlp_catalog_check_sources(c, e, where);
}

static dlp_status parse_published(dlp_catalog *c, const json_t *e, const char *where, dlp_published *p) {
    const char *gpu, *s;
    DLP_CHECK(str_field(e, "gpu", &gpu, where));
    p->gpu = find_gpu(c, gpu);
    if (!p->gpu) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'gpu' names unknown GPU '%s' (not in %s/gpus.json)", where, gpu, c->dir);
    DLP_CHECK(str_field(e, "task", &s, where));
    if (strcmp(s, "train") == 0) p->task = DLP_TASK_TRAIN;
    else if (strcmp(s, "infer") == 0) p->task = DLP_TASK_INFER;
    else return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'task' is '%s' (train|infer)", where, s);
    DLP_CHECK(str_field(e, "precision", &s, where));
    if (dlp_prec_parse(s, &p->prec) != DLP_OK)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'precision' is '%s' (fp32|tf32|bf16|fp16|int8)", where, s);
    DLP_CHECK(dlp_field_range(e, "img_per_s", 0.01, 1e7, &p->img_per_s, where));  // per record: 1e7 img/s is a cluster
    DLP_CHECK(int_field(e, "gpus", 1, 65536, &p->gpus, where));
    DLP_CHECK(int_field(e, "batch", 0, 1 << 20, &p->batch, where));
    DLP_CHECK(str_field(e, "framework", &p->framework, where));
    DLP_CHECK(str_field(e, "stack", &p->stack, where));
    DLP_CHECK(str_field(e, "src", &s, where));
    p->src = find_source(c, s);
    if (!p->src) return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'src' names unknown source '%s' (not in %s/sources.json)", where, s, c->dir);
    DLP_CHECK(opt_bool(e, "primary", &p->primary, where));
    DLP_CHECK(opt_bool(e, "estimate", &p->estimate, where));
    if (p->primary && p->gpus != 1) return DLP_ERR(DLP_ERR_FORMAT, "%s: a primary figure must be for 1 GPU (gpus is %d)", where, p->gpus);
    if ((strcmp(p->src->kind, "estimate") == 0) != p->estimate)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'estimate' must be %s since source '%s' is of kind '%s'", where,
                       p->estimate ? "false" : "true", p->src->id, p->src->kind);
    if (p->task == DLP_TASK_TRAIN && p->prec == DLP_PREC_INT8)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: int8 is an inference precision only", where);
    return DLP_OK;
}

static dlp_status parse_dataset(dlp_catalog *c, const json_t *e, const char *where0, dlp_catalog_dataset *d) {
    char where[400];
    DLP_CHECK(str_field(e, "id", &d->id, where0));
    snprintf(where, sizeof where, "%s (%s)", where0, d->id);
    d->json = e;
    DLP_CHECK(dlp_dataset_stats_from_json(e, where, &d->stats));
    return dlp_catalog_check_sources(c, e, where);
}

static dlp_status parse_pipeline(dlp_catalog *c, const json_t *e, const char *where0, dlp_catalog_pipeline *p) {
    char where[400];
    DLP_CHECK(str_field(e, "id", &p->id, where0));
    snprintf(where, sizeof where, "%s (%s)", where0, p->id);
    p->json = e;
    DLP_CHECK(str_field(e, "name", &p->name, where));
    memset(&p->prof, 0, sizeof p->prof);
    snprintf(p->prof.name, sizeof p->prof.name, "%s", p->id);
    DLP_CHECK(dlp_pipeline_coeffs_from_json(e, where, &p->prof));
    return dlp_catalog_check_sources(c, e, where);
}

// --- loading -----------------------------------------------------------------------------------------------------------

static dlp_status load_file(dlp_catalog *c, int f, const json_t **arr) {
    char path[640], schema[96];
    snprintf(path, sizeof path, "%s/%s.json", c->dir, k_files[f]);
    DLP_CHECK(dlp_json_load(path, &c->roots[f]));
    const char *got;
    DLP_CHECK(dlp_json_get_str(c->roots[f], "schema", &got, path));
    snprintf(schema, sizeof schema, "dlperf.catalog.%s/1", k_files[f]);
    if (strcmp(got, schema) != 0)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: schema '%s' is not supported (this dlperf reads %s)", path, got, schema);
    *arr = json_object_get(c->roots[f], k_arrays[f]);
    int want_obj = f == F_SOURCES;
    if (want_obj ? !json_is_object(*arr) : !json_is_array(*arr))
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is missing or not an %s", path, k_arrays[f], want_obj ? "object" : "array");
    return DLP_OK;
}

#define ALLOC_N(ptr, n)                                                     \
    do {                                                                    \
        (ptr) = calloc((n) ? (size_t)(n) : 1, sizeof *(ptr));               \
        if (!(ptr)) return DLP_ERR(DLP_ERR_NOMEM, "out of memory loading the catalog"); \
    } while (0)

static dlp_status check_unique(const dlp_catalog *c, const char *file, int n, const void *base, size_t stride) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) {
            const char *a = *(const char *const *)((const char *)base + (size_t)i * stride);
            const char *b = *(const char *const *)((const char *)base + (size_t)j * stride);
            if (strcasecmp(a, b) == 0)
                return DLP_ERR(DLP_ERR_FORMAT, "%s/%s.json: id '%s' appears twice (entries %d and %d)", c->dir, file, a, j, i);
        }
    return DLP_OK;
}

static dlp_status load_all(dlp_catalog *c) {
    const json_t *arr;
    char where[640];
    // sources
    DLP_CHECK(load_file(c, F_SOURCES, &arr));
    ALLOC_N(c->sources, json_object_size(arr));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)arr, k, v) {
        snprintf(where, sizeof where, "%s/sources.json: sources['%s']", c->dir, k);
        if (!json_is_object(v)) return DLP_ERR(DLP_ERR_FORMAT, "%s: is not an object", where);
        DLP_CHECK(parse_source(c, k, v, where, &c->sources[c->nsources++]));
    }
    // gpus, cpus
    DLP_CHECK(load_file(c, F_GPUS, &arr));
    ALLOC_N(c->gpus, json_array_size(arr));
    for (size_t i = 0; i < json_array_size(arr); i++) {
        snprintf(where, sizeof where, "%s/gpus.json: gpus[%zu]", c->dir, i);
        DLP_CHECK(parse_gpu(c, json_array_get(arr, i), where, &c->gpus[c->ngpus]));
        c->ngpus++;
    }
    DLP_CHECK(check_unique(c, "gpus", c->ngpus, c->gpus, sizeof *c->gpus));
    for (int i = 0; i < c->ngpus; i++) {  // an alias must not name another GPU
        const json_t *al = json_object_get(c->gpus[i].json, "aliases");
        for (size_t a = 0; a < json_array_size(al); a++) {
            const dlp_gpu_spec *g = find_gpu(c, json_string_value(json_array_get(al, a)));
            if (g != &c->gpus[i])
                return DLP_ERR(DLP_ERR_FORMAT, "%s/gpus.json: alias '%s' of %s also names %s", c->dir,
                               json_string_value(json_array_get(al, a)), c->gpus[i].id, g->id);
        }
    }
    DLP_CHECK(load_file(c, F_CPUS, &arr));
    ALLOC_N(c->cpus, json_array_size(arr));
    for (size_t i = 0; i < json_array_size(arr); i++) {
        snprintf(where, sizeof where, "%s/cpus.json: cpus[%zu]", c->dir, i);
        DLP_CHECK(parse_cpu(c, json_array_get(arr, i), where, &c->cpus[c->ncpus]));
        c->ncpus++;
    }
    DLP_CHECK(check_unique(c, "cpus", c->ncpus, c->cpus, sizeof *c->cpus));
    // systems
    DLP_CHECK(load_file(c, F_SYSTEMS, &arr));
    ALLOC_N(c->systems, json_array_size(arr));
    for (size_t i = 0; i < json_array_size(arr); i++) {
        snprintf(where, sizeof where, "%s/systems.json: systems[%zu]", c->dir, i);
        DLP_CHECK(parse_system(c, json_array_get(arr, i), where, &c->systems[c->nsystems]));
        c->nsystems++;
    }
    DLP_CHECK(check_unique(c, "systems", c->nsystems, c->systems, sizeof *c->systems));
    // published throughput
    DLP_CHECK(load_file(c, F_THROUGHPUT, &arr));
    ALLOC_N(c->published, json_array_size(arr));
    for (size_t i = 0; i < json_array_size(arr); i++) {
        snprintf(where, sizeof where, "%s/throughput.json: records[%zu]", c->dir, i);
        dlp_published *p = &c->published[c->npublished];
        DLP_CHECK(parse_published(c, json_array_get(arr, i), where, p));
        if (p->primary && dlp_catalog_primary(c, p->gpu, p->task, p->prec))
            return DLP_ERR(DLP_ERR_FORMAT, "%s: a second primary figure for %s %s %s", where, p->gpu->id,
                           dlp_task_name(p->task), dlp_prec_name(p->prec));
        c->npublished++;
    }
    // datasets, pipelines
    DLP_CHECK(load_file(c, F_DATASETS, &arr));
    ALLOC_N(c->datasets, json_array_size(arr));
    for (size_t i = 0; i < json_array_size(arr); i++) {
        snprintf(where, sizeof where, "%s/datasets.json: datasets[%zu]", c->dir, i);
        DLP_CHECK(parse_dataset(c, json_array_get(arr, i), where, &c->datasets[c->ndatasets]));
        c->ndatasets++;
    }
    DLP_CHECK(check_unique(c, "datasets", c->ndatasets, c->datasets, sizeof *c->datasets));
    DLP_CHECK(load_file(c, F_PIPELINES, &arr));
    ALLOC_N(c->pipelines, json_array_size(arr));
    for (size_t i = 0; i < json_array_size(arr); i++) {
        snprintf(where, sizeof where, "%s/pipelines.json: pipelines[%zu]", c->dir, i);
        DLP_CHECK(parse_pipeline(c, json_array_get(arr, i), where, &c->pipelines[c->npipelines]));
        c->npipelines++;
    }
    DLP_CHECK(check_unique(c, "pipelines", c->npipelines, c->pipelines, sizeof *c->pipelines));
    return DLP_OK;
}

dlp_status dlp_catalog_load(const char *dir, dlp_catalog **out) {
    *out = NULL;
    dlp_catalog *c = calloc(1, sizeof *c);
    DLP_TRY_ALLOC(c);
    dlp_status st = DLP_OK;
    if (dir) snprintf(c->dir, sizeof c->dir, "%s", dir);
    else st = dlp_catalog_default_dir(c->dir, sizeof c->dir);
    if (st == DLP_OK) st = load_all(c);
    if (st != DLP_OK) {
        dlp_catalog_free(c);
        return dlp_err_trace(st, __FILE__, __LINE__, "loading the catalog");
    }
    *out = c;
    return DLP_OK;
}

void dlp_catalog_free(dlp_catalog *c) {
    if (!c) return;
    for (int i = 0; i < F_COUNT; i++) json_decref(c->roots[i]);
    DLP_FREE_ALL(c->sources, c->gpus, c->cpus, c->systems, c->published, c->datasets, c->pipelines, c->gm_cache, c);
}
