// hw/parts: platforms and storage options for `dlperf plan` (catalog/parts.json).
#include "hw/parts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fields.h"
#include "core/json.h"

static const char *opt_str(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : "";
}

static dlp_status id_list(const json_t *e, const char *key, const char *where, const char **ids, int *n) {
    const json_t *a = json_object_get(e, key);
    if (!json_is_array(a) || json_array_size(a) == 0)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' is missing or not a non-empty array", where, key);
    if (json_array_size(a) > DLP_PLATFORM_MAX_PARTS)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field '%s' has more than %d entries", where, key, DLP_PLATFORM_MAX_PARTS);
    *n = (int)json_array_size(a);
    for (int i = 0; i < *n; i++) {
        const json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_string(v)) return DLP_ERR(DLP_ERR_FORMAT, "%s: %s[%d] is not a string", where, key, i);
        ids[i] = json_string_value(v);
    }
    return DLP_OK;
}

static dlp_status parse_platform(const dlp_catalog *c, const json_t *e, const char *where0, dlp_platform *p) {
    char where[300];
    DLP_CHECK(dlp_json_get_str(e, "id", &p->id, where0));
    snprintf(where, sizeof where, "%s (%s)", where0, p->id);
    DLP_CHECK(dlp_json_get_str(e, "name", &p->name, where));
    p->notes = opt_str(e, "notes");
    const char *base;
    DLP_CHECK(dlp_json_get_str(e, "base_system", &base, where));
    p->base = dlp_catalog_system(c, base);  // the catalog's own lookups: its case rules and aliases
    if (!p->base) return DLP_ERR(DLP_ERR_FORMAT, "%s: base_system '%s' is not a catalog system", where, base);
    if (p->base->kind != DLP_SYSTEM_OWNED) return DLP_ERR(DLP_ERR_FORMAT, "%s: base_system '%s' is a cloud system", where, base);
    int64_t v;
    DLP_CHECK(dlp_field_int(e, "sockets", 1, 8, &v, where));
    p->sockets = (int)v;
    DLP_CHECK(dlp_field_int(e, "max_nodes", 1, 64, &v, where));
    p->max_nodes = (int)v;
    const char *ids[DLP_PLATFORM_MAX_PARTS];
    DLP_CHECK(id_list(e, "cpus", where, ids, &p->ncpus));
    for (int i = 0; i < p->ncpus; i++) {
        p->cpus[i] = dlp_catalog_cpu(c, ids[i]);
        if (!p->cpus[i]) return DLP_ERR(DLP_ERR_FORMAT, "%s: cpus names unknown CPU '%s'", where, ids[i]);
        if (!(p->cpus[i]->price_usd > 0)) return DLP_ERR(DLP_ERR_FORMAT, "%s: CPU '%s' has no price", where, ids[i]);
    }
    DLP_CHECK(id_list(e, "gpus", where, ids, &p->ngpus));
    for (int i = 0; i < p->ngpus; i++) {
        p->gpus[i] = dlp_catalog_gpu(c, ids[i]);
        if (!p->gpus[i]) return DLP_ERR(DLP_ERR_FORMAT, "%s: gpus names unknown GPU '%s'", where, ids[i]);
        if (!(p->gpus[i]->price_usd > 0)) return DLP_ERR(DLP_ERR_FORMAT, "%s: GPU '%s' has no price", where, ids[i]);
    }
    const json_t *gc = json_object_get(e, "gpu_counts");
    if (!json_is_array(gc) || json_array_size(gc) == 0 || json_array_size(gc) > 8)
        return DLP_ERR(DLP_ERR_FORMAT, "%s: field 'gpu_counts' is not an array of 1 to 8 counts", where);
    p->ncounts = (int)json_array_size(gc);
    for (int i = 0; i < p->ncounts; i++) {
        const json_t *x = json_array_get(gc, (size_t)i);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 64)
            return DLP_ERR(DLP_ERR_FORMAT, "%s: gpu_counts[%d] is not an integer in [1, 64]", where, i);
        p->gpu_counts[i] = (int)json_integer_value(x);
    }
    DLP_CHECK(dlp_field_range(e, "price_usd", 1, DLP_CATALOG_USD_MAX, &p->price_usd, where));
    DLP_CHECK(dlp_field_range(e, "power_w", 0, DLP_CATALOG_W_MAX, &p->power_w, where));
    return dlp_catalog_check_sources(c, e, where);
}

static dlp_status parse_storage(const dlp_catalog *c, const json_t *e, const char *where0, dlp_storage_opt *s) {
    char where[300];
    DLP_CHECK(dlp_json_get_str(e, "id", &s->id, where0));
    snprintf(where, sizeof where, "%s (%s)", where0, s->id);
    DLP_CHECK(dlp_json_get_str(e, "name", &s->name, where));
    DLP_CHECK(dlp_json_get_str(e, "storage_desc", &s->desc, where));
    DLP_CHECK(dlp_field_range(e, "storage_tb", 0.001, DLP_CATALOG_TB_MAX, &s->tb, where));
    DLP_CHECK(dlp_field_range(e, "storage_read_gb_s", DLP_CATALOG_GB_S_MIN, DLP_CATALOG_GB_S_MAX, &s->read_gb_s, where));
    DLP_CHECK(dlp_field_range(e, "storage_stream_gb_s", DLP_CATALOG_GB_S_MIN, DLP_CATALOG_GB_S_MAX, &s->stream_gb_s,
                              where));
    DLP_CHECK(dlp_field_range(e, "storage_latency_us", 0, DLP_CATALOG_LATENCY_US_MAX, &s->latency_us, where));
    DLP_CHECK(dlp_field_range(e, "price_usd", 1, DLP_CATALOG_USD_MAX, &s->price_usd, where));
    DLP_CHECK(dlp_field_range(e, "power_w", 0, DLP_CATALOG_W_MAX, &s->power_w, where));
    return dlp_catalog_check_sources(c, e, where);
}

dlp_status dlp_parts_load(const dlp_catalog *c, dlp_parts **out) {
    *out = NULL;
    dlp_parts *p = calloc(1, sizeof *p);
    if (!p) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    char path[640], where[700];
    snprintf(path, sizeof path, "%s/parts.json", c->dir);
    dlp_status st = dlp_json_load(path, &p->root);
    const char *schema = NULL;
    if (!st) st = dlp_json_get_str(p->root, "schema", &schema, path);
    if (!st && strcmp(schema, "dlperf.catalog.parts/1") != 0)
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: schema '%s' is not supported (this dlperf reads dlperf.catalog.parts/1)", path, schema);
    const json_t *pl = st ? NULL : json_object_get(p->root, "platforms");
    const json_t *so = st ? NULL : json_object_get(p->root, "storage");
    if (!st && (!json_is_array(pl) || !json_is_array(so)))
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: fields 'platforms' and 'storage' must be arrays", path);
    if (!st) {
        p->platforms = calloc(json_array_size(pl) + 1, sizeof *p->platforms);
        p->storage = calloc(json_array_size(so) + 1, sizeof *p->storage);
        if (!p->platforms || !p->storage) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; !st && i < json_array_size(pl); i++) {
        snprintf(where, sizeof where, "%s: platforms[%zu]", path, i);
        st = parse_platform(c, json_array_get(pl, i), where, &p->platforms[i]);
        for (int k = 0; !st && k < (int)i; k++)
            if (strcmp(p->platforms[k].id, p->platforms[i].id) == 0)
                st = DLP_ERR(DLP_ERR_FORMAT, "%s: id '%s' is used twice", where, p->platforms[i].id);
        p->nplatforms = (int)i + 1;
    }
    for (size_t i = 0; !st && i < json_array_size(so); i++) {
        snprintf(where, sizeof where, "%s: storage[%zu]", path, i);
        st = parse_storage(c, json_array_get(so, i), where, &p->storage[i]);
        for (int k = 0; !st && k < (int)i; k++)
            if (strcmp(p->storage[k].id, p->storage[i].id) == 0)
                st = DLP_ERR(DLP_ERR_FORMAT, "%s: id '%s' is used twice", where, p->storage[i].id);
        p->nstorage = (int)i + 1;
    }
    if (st) {
        dlp_parts_free(p);
        return st;
    }
    *out = p;
    return DLP_OK;
}

void dlp_parts_free(dlp_parts *p) {
    if (!p) return;
    json_decref(p->root);
    free(p->platforms);
    free(p->storage);
    free(p);
}
