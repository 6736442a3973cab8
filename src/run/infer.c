// run/infer: the model and its weights, the inference engine over a backend plan, the JPEG preprocessing into
// the plan's input format, the file lists and preprocessed sample library, labels and top-k. The measurement
// loops are in infer_bench.c.
#include "run/infer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/log.h"
#include "data/walk.h"
#include "nn/resnet.h"
#include "nn/safetensors.h"
#include "nn/state.h"

// ---- model ------------------------------------------------------------------------------------------------

// The rows of the net's last fc weight in the file (its classes), or 0 when the file does not have it.
static int64_t classes_in_file(const dlp_st_file *f, const dlp_net *probe) {
    const dlp_layer *out = &probe->layers[dlp_net_output(probe)];
    if (out->kind != DLP_LAYER_FC || out->nparams < 1) return 0;
    const char *name = probe->params[out->param0].name;
    const dlp_st_tensor *t = dlp_st_find(f, name);
    if (!t) {
        char alt[96];
        snprintf(alt, sizeof alt, "module.%s", name);
        t = dlp_st_find(f, alt);
    }
    return t && t->ndim == 2 ? t->shape[0] : 0;
}

static int st_has(const dlp_st_file *f, const char *name) {
    char alt[128];
    snprintf(alt, sizeof alt, "module.%s", name);
    return dlp_st_find(f, name) || dlp_st_find(f, alt);
}

// The torchvision ResNet a state_dict holds, from its keys: Bottleneck blocks have conv3, and the blocks per
// stage are counted. NULL when it is none of resnet18/34/50/101/152.
static const char *arch_from_keys(const dlp_st_file *f) {
    static const struct { const char *name; int bottleneck, blocks[4]; } k_known[] = {
        {"resnet18", 0, {2, 2, 2, 2}}, {"resnet34", 0, {3, 4, 6, 3}}, {"resnet50", 1, {3, 4, 6, 3}},
        {"resnet101", 1, {3, 4, 23, 3}}, {"resnet152", 1, {3, 8, 36, 3}},
    };
    if (!st_has(f, "conv1.weight") || !st_has(f, "fc.weight")) return NULL;
    int bottleneck = st_has(f, "layer1.0.conv3.weight"), blocks[4];
    for (int s = 0; s < 4; s++) {
        blocks[s] = 0;
        char key[64];
        for (;;) {
            snprintf(key, sizeof key, "layer%d.%d.conv1.weight", s + 1, blocks[s]);
            if (!st_has(f, key) || blocks[s] > 64) break;
            blocks[s]++;
        }
    }
    for (size_t i = 0; i < sizeof k_known / sizeof k_known[0]; i++)
        if (k_known[i].bottleneck == bottleneck && memcmp(k_known[i].blocks, blocks, sizeof blocks) == 0)
            return k_known[i].name;
    return NULL;
}

// A PyTorch .pth (zip archive or a bare pickle) is not safetensors: say how to convert it.
static dlp_status refuse_pth(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return DLP_OK;  // dlp_st_open names the problem
    unsigned char b[4] = {0};
    size_t got = fread(b, 1, sizeof b, fp);
    fclose(fp);
    if ((got >= 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 3 && b[3] == 4) || (got >= 2 && b[0] == 0x80 && b[1] <= 5))
        return DLP_ERR(DLP_ERR_FORMAT, "%s is a PyTorch pickle/zip file, not safetensors; convert it with "
                       "/usr/bin/python3 tools/torchvision_to_safetensors.py %s out.safetensors", path, path);
    return DLP_OK;
}

dlp_status dlp_infer_model_load(const dlp_infer_model_cfg *cfg, dlp_infer_model *m) {
    memset(m, 0, sizeof *m);
    m->size = cfg->size > 0 ? cfg->size : 224;
    m->seed = cfg->seed;
    dlp_st_file f;
    memset(&f, 0, sizeof f);
    int have_file = 0;
    dlp_status st = DLP_OK;
    if (cfg->weights) {
        DLP_CHECK(refuse_pth(cfg->weights));
        DLP_CHECK(dlp_st_open(cfg->weights, 0, &f));
        have_file = 1;
        snprintf(m->weights, sizeof m->weights, "%s", cfg->weights);
    }
    const char *arch = cfg->model;
    if (!arch && have_file) arch = dlp_st_meta(&f, "dlperf.arch");
    if (!arch && have_file) arch = arch_from_keys(&f);
    if (!arch) arch = "resnet50";
    int classes = cfg->num_classes;
    if (classes <= 0 && have_file) {
        dlp_net probe;
        memset(&probe, 0, sizeof probe);
        DLP_CHECK_GOTO(st, dlp_model_build(arch, 1000, m->size, &probe), fail);
        int64_t k = classes_in_file(&f, &probe);
        dlp_net_free(&probe);
        if (k > 0 && k <= 1000000) classes = (int)k;
    }
    if (classes <= 0) classes = 1000;
    DLP_CHECK_GOTO(st, dlp_model_build(arch, classes, m->size, &m->net), fail);
    m->params = malloc((size_t)(m->net.param_count ? m->net.param_count : 1) * sizeof(float));
    m->bufs = malloc((size_t)(m->net.buf_count ? m->net.buf_count : 1) * sizeof(float));
    if (!m->params || !m->bufs) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory for the weights of %s (%lld parameters)", arch,
                     (long long)m->net.param_count);
        goto fail;
    }
    if (have_file) {
        st = dlp_state_load_file(&m->net, &f, DLP_STATE_STRICT, m->params, m->bufs, NULL);
        if (st) {
            dlp_err_context("loading --weights %s as %s (%d classes)", cfg->weights, arch, classes);
            goto fail;
        }
        dlp_st_close(&f);
    } else {
        m->random_init = 1;
        dlp_resnet_init_params(&m->net, cfg->seed, 0, m->params, m->bufs);
    }
    return DLP_OK;
fail:
    if (have_file) dlp_st_close(&f);
    dlp_infer_model_free(m);
    return st;
}

void dlp_infer_model_free(dlp_infer_model *m) {
    if (!m) return;
    dlp_net_free(&m->net);
    dlp_quant_free(&m->quant);
    free(m->params);
    free(m->bufs);
    memset(m, 0, sizeof *m);
}

json_t *dlp_infer_model_to_json(const dlp_infer_model *m) {
    json_t *o = json_object();
    const dlp_layer *in = &m->net.layers[0];
    json_object_set_new(o, "arch", json_string(m->net.arch));
    json_object_set_new(o, "classes", json_integer(m->net.num_classes));
    json_object_set_new(o, "input", json_pack("[iii]", in->c, in->h, in->w));
    json_object_set_new(o, "parameters", json_integer(m->net.param_count));
    json_object_set_new(o, "gflop_per_image", json_real(dlp_net_forward_flops(&m->net) / 1e9));
    json_object_set_new(o, "weights", m->random_init ? json_null() : json_string(m->weights));
    json_object_set_new(o, "random_init", json_boolean(m->random_init));
    if (m->random_init) json_object_set_new(o, "seed", json_integer((json_int_t)m->seed));
    return o;
}

// ---- engine -----------------------------------------------------------------------------------------------

dlp_status dlp_infer_engine_create(const dlp_infer_model *m, const dlp_infer_engine_cfg *cfg, dlp_infer_engine *e) {
    memset(e, 0, sizeof *e);
    if (cfg->batch < 1) return DLP_ERR(DLP_ERR_INVALID, "batch must be >= 1 (got %d)", cfg->batch);
    const char *arg = NULL;
    const dlp_backend *ops = dlp_backend_find(cfg->device ? cfg->device : "cpu", &arg);
    if (!ops) return dlp_err_status() ? dlp_err_status() : DLP_ERR(DLP_ERR_NOTFOUND, "unknown device %s", cfg->device);
    char why[256] = "";
    if (dlp_backend_available(ops, why, sizeof why) != DLP_OK)
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "device %s is not available here: %s", cfg->device, why);
    dlp_plan_cfg pc;
    memset(&pc, 0, sizeof pc);
    pc.batch = cfg->batch;
    pc.train = 0;
    pc.precision = cfg->precision;
    pc.threads = cfg->threads;
    pc.streams = cfg->streams;
    pc.arg = arg;
    if (cfg->precision == DLP_DTYPE_I8) {
        if (m->quant.nlayers != m->net.nlayers)
            return DLP_ERR(DLP_ERR_INVALID, "int8 needs the model's activation ranges: calibrate first "
                           "(dlp_infer_model_quantize; dlperf infer --precision int8 --calib-images N)");
        pc.act_range = m->quant.range;
        pc.act_min = m->quant.min;
        pc.int8_first_conv = cfg->int8_first_conv;
    }
    pc.observe = cfg->observe;
    pc.observe_ctx = cfg->observe_ctx;
    int64_t t0 = dlp_now_ns();
    dlp_status st = dlp_plan_create(ops, &m->net, &pc, &e->plan);
    if (st) {
        dlp_err_context("creating the %s %s inference plan of %s, batch %d", dlp_backend_name(ops), dlp_dtype_name(cfg->precision),
                        m->net.arch, cfg->batch);
        return st;
    }
    st = dlp_plan_set_params(e->plan, m->params, m->bufs);
    if (st) {
        dlp_plan_free(e->plan);
        e->plan = NULL;
        return st;
    }
    e->create_ms = dlp_ns_to_ms(dlp_now_ns() - t0);
    e->ops = ops;
    e->net = &m->net;
    e->batch = cfg->batch;
    e->precision = cfg->precision;
    e->threads = cfg->threads;
    e->num_classes = m->net.num_classes;
    dlp_plan_input_format(e->plan, &e->layout, &e->in_dtype);
    e->sample_bytes = (size_t)dlp_net_layer_numel(&m->net, 0) * dlp_dtype_size(e->in_dtype);
    return DLP_OK;
}

dlp_status dlp_infer_engine_run(dlp_infer_engine *e, const void *batch, int n, float *logits) {
    if (n < 1 || n > e->batch) return DLP_ERR(DLP_ERR_INVALID, "%d samples for a plan of batch %d", n, e->batch);
    return dlp_infer_plan_run(e->plan, batch, n, logits);
}

dlp_status dlp_infer_plan_run(dlp_plan *plan, const void *batch, int n, float *logits) {
    DLP_CHECK(dlp_plan_set_input(plan, batch, n));
    DLP_CHECK(dlp_plan_forward(plan, DLP_PASS_EVAL));
    DLP_CHECK(dlp_plan_get_output(plan, logits));
    DLP_CHECK(dlp_plan_sync(plan));
    return DLP_OK;
}

void dlp_infer_engine_free(dlp_infer_engine *e) {
    if (!e) return;
    if (e->plan) dlp_plan_free(e->plan);
    memset(e, 0, sizeof *e);
}

json_t *dlp_infer_engine_plan_json(const dlp_infer_engine *e) {
    json_t *o = json_object();
    json_object_set_new(o, "backend", json_string(dlp_backend_name(e->ops)));
    json_object_set_new(o, "batch", json_integer(e->batch));
    json_object_set_new(o, "precision", json_string(dlp_dtype_name(e->precision)));
    json_object_set_new(o, "input_layout", json_string(dlp_layout_name(e->layout)));
    json_object_set_new(o, "input_dtype", json_string(dlp_dtype_name(e->in_dtype)));
    json_object_set_new(o, "create_ms", json_real(e->create_ms));
    json_t *info = dlp_plan_info_json(e->plan);  // what the backend chose: fusions, kernels, ISA
    if (info) json_object_set_new(o, "backend_plan", info);
    return o;
}

// ---- preprocessing ----------------------------------------------------------------------------------------

struct dlp_infer_prep {
    dlp_infer_prep_cfg cfg;
    dlp_transform t;
    dlp_transformer **x;  // (workers)
};

dlp_status dlp_infer_prep_create(const dlp_infer_prep_cfg *cfg, dlp_infer_prep **out) {
    *out = NULL;
    if (cfg->workers < 1) return DLP_ERR(DLP_ERR_INVALID, "preprocess: workers must be >= 1 (got %d)", cfg->workers);
    if (cfg->size < 1) return DLP_ERR(DLP_ERR_INVALID, "preprocess: size must be >= 1 (got %d)", cfg->size);
    dlp_infer_prep *p = calloc(1, sizeof *p);
    DLP_TRY_ALLOC(p);
    p->cfg = *cfg;
    dlp_transform_defaults(&p->t, DLP_XFORM_VAL);
    p->t.out_w = p->t.out_h = cfg->size;
    p->t.layout = cfg->layout;
    p->t.dtype = cfg->dtype;
    p->t.dct_scales = cfg->dct_scaling ? 0 : 1u << 8;
    dlp_status st = dlp_transform_check(&p->t);
    if (st == DLP_OK) {
        p->x = calloc((size_t)cfg->workers, sizeof *p->x);
        if (!p->x) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory for %d transformers", cfg->workers);
    }
    for (int i = 0; st == DLP_OK && i < cfg->workers; i++) st = dlp_transformer_create(&p->t, &p->x[i]);
    if (st) {
        dlp_infer_prep_free(p);
        return st;
    }
    *out = p;
    return DLP_OK;
}

void dlp_infer_prep_free(dlp_infer_prep *p) {
    if (!p) return;
    if (p->x)
        for (int i = 0; i < p->cfg.workers; i++) dlp_transformer_free(p->x[i]);
    free(p->x);
    free(p);
}

size_t dlp_infer_prep_sample_bytes(const dlp_infer_prep *p) { return dlp_transform_sample_bytes(&p->t); }

dlp_status dlp_infer_prep_run(dlp_infer_prep *p, int worker, const uint8_t *jpg, size_t len, void *dst,
                              dlp_sample_info *info) {
    if (worker < 0 || worker >= p->cfg.workers)
        return DLP_ERR(DLP_ERR_INVALID, "preprocess worker %d is not in [0, %d)", worker, p->cfg.workers);
    dlp_sample_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    dlp_status st = dlp_transformer_run(p->x[worker], jpg, len, NULL, NULL, dst, info);
    if (st == DLP_OK) return DLP_OK;
    if (info->bad == DLP_BAD_UNSUPPORTED) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", dlp_err_msg());
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "%s", msg);
    }
    if (info->bad != DLP_BAD_NONE && st != DLP_ERR_NOMEM) {
        if (st == DLP_ERR_FORMAT) return st;
        char msg[512];
        snprintf(msg, sizeof msg, "%s", dlp_err_msg());
        return DLP_ERR(DLP_ERR_FORMAT, "%s", msg);
    }
    return st;
}

// ---- files ------------------------------------------------------------------------------------------------

static dlp_status files_push(dlp_infer_files *f, const char *path, int32_t label) {
    if (f->n == f->cap) {
        int nc = f->cap ? f->cap * 2 : 64;
        char **np = realloc(f->paths, (size_t)nc * sizeof *np);
        if (!np) return DLP_ERR(DLP_ERR_NOMEM, "out of memory listing files");
        f->paths = np;
        int32_t *nl = realloc(f->labels, (size_t)nc * sizeof *nl);
        if (!nl) return DLP_ERR(DLP_ERR_NOMEM, "out of memory listing files");
        f->labels = nl;
        f->cap = nc;
    }
    char *s = strdup(path);
    DLP_TRY_ALLOC(s);
    f->paths[f->n] = s;
    f->labels[f->n] = label;
    f->n++;
    return DLP_OK;
}

// The JPEG files under dir (data/walk: depth-first, sorted by name), unlabelled.
static dlp_status collect_dir(dlp_infer_files *f, const char *dir) {
    dlp_path_list l = {0};
    dlp_status st = dlp_jpeg_walk(dir, 8, 0, &l);
    for (size_t i = 0; st == DLP_OK && i < l.n; i++) st = files_push(f, l.paths[i], -1);
    dlp_path_list_free(&l);
    return st;
}

dlp_status dlp_infer_files_add(dlp_infer_files *f, const char *path) {
    if (!dlp_path_exists(path)) return DLP_ERR(DLP_ERR_NOTFOUND, "%s: no such file or directory", path);
    if (!dlp_is_dir(path)) return files_push(f, path, -1);
    int before = f->n;
    DLP_CHECK(collect_dir(f, path));
    if (f->n == before) return DLP_ERR(DLP_ERR_NOTFOUND, "no *.jpg or *.jpeg files under %s", path);
    return DLP_OK;
}

dlp_status dlp_infer_files_from_dataset(dlp_infer_files *f, const dlp_dataset *ds, int max) {
    if (ds->n < 1) return DLP_ERR(DLP_ERR_NOTFOUND, "the dataset %s has no samples", ds->root);
    int64_t take = max <= 0 || max >= ds->n ? ds->n : max;
    for (int64_t k = 0; k < take; k++) {
        int64_t i = k * ds->n / take;  // spread evenly: every class of a sorted ImageFolder is represented
        char p[4096];
        dlp_dataset_path(ds, i, p, sizeof p);
        DLP_CHECK(files_push(f, p, ds->labels[i]));
    }
    return DLP_OK;
}

void dlp_infer_files_free(dlp_infer_files *f) {
    if (!f) return;
    dlp_free_strings(f->paths, f->n);
    free(f->labels);
    memset(f, 0, sizeof *f);
}

// ---- sample library ---------------------------------------------------------------------------------------

dlp_status dlp_infer_library_load(dlp_infer_prep *p, const dlp_infer_files *files, int max, dlp_infer_library *lib) {
    memset(lib, 0, sizeof *lib);
    int want = max <= 0 || max > files->n ? files->n : max;
    if (want < 1) return DLP_ERR(DLP_ERR_INVALID, "no images to preprocess");
    lib->sample_bytes = dlp_infer_prep_sample_bytes(p);
    lib->data = dlp_alloc_aligned((size_t)want * lib->sample_bytes);
    lib->file = malloc((size_t)want * sizeof *lib->file);
    if (!lib->data || !lib->file) {
        dlp_infer_library_free(lib);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory for %d preprocessed samples (%zu bytes each)", want,
                       lib->sample_bytes);
    }
    for (int i = 0; i < files->n && lib->n < want; i++) {
        char *data = NULL;
        size_t len = 0;
        int64_t t0 = dlp_now_ns();
        dlp_status st = dlp_read_file(files->paths[i], &data, &len, (size_t)64 << 20);
        lib->read_ns += dlp_now_ns() - t0;
        dlp_sample_info info;
        memset(&info, 0, sizeof info);
        if (st == DLP_OK) {
            lib->bytes_read += (int64_t)len;
            st = dlp_infer_prep_run(p, 0, (const uint8_t *)data, len, lib->data + (size_t)lib->n * lib->sample_bytes,
                                    &info);
            lib->decode_ns += info.decode_ns;
            lib->resize_ns += info.augment_ns;
        }
        free(data);
        if (st == DLP_ERR_NOMEM) {
            dlp_infer_library_free(lib);
            return st;
        }
        if (st) {
            dlp_log_warn_limited("infer-bad-file", 20, "%s: %s; skipped", files->paths[i], dlp_err_msg());
            dlp_err_clear();
            lib->skipped++;
            continue;
        }
        lib->file[lib->n++] = i;
    }
    if (lib->n == 0) {
        int skipped = lib->skipped;
        dlp_infer_library_free(lib);
        return DLP_ERR(DLP_ERR_FORMAT, "none of the %d images could be decoded (first: %s)", skipped, files->paths[0]);
    }
    return DLP_OK;
}

void dlp_infer_library_free(dlp_infer_library *lib) {
    if (!lib) return;
    dlp_free_aligned(lib->data);
    free(lib->file);
    memset(lib, 0, sizeof *lib);
}

// ---- labels and top-k -------------------------------------------------------------------------------------

// "<index> <wnid> <description>" with the expected index: the label is what follows the index.
static const char *indexed_label(const char *line, int expect) {
    char *end;
    long v = strtol(line, &end, 10);
    if (end == line || v != expect || *end != ' ') return NULL;
    while (*end == ' ') end++;
    return *end ? end : NULL;
}

dlp_status dlp_infer_labels_load(const char *path, char ***labels, int *n) {
    *labels = NULL;
    *n = 0;
    char *data = NULL;
    size_t len = 0;
    DLP_CHECK(dlp_read_file(path, &data, &len, (size_t)64 << 20));
    if (memchr(data, '\0', len)) {
        size_t at = (size_t)((char *)memchr(data, '\0', len) - data);
        int line = 1;
        for (size_t i = 0; i < at; i++) line += data[i] == '\n';
        free(data);
        return DLP_ERR(DLP_ERR_FORMAT, "%s: line %d contains a NUL byte (not a text file?)", path, line);
    }
    // Lines, with CR LF handled; the synthetic ImageNet's format is recognized by its header line.
    int nlines = 0;
    for (size_t i = 0; i < len; i++) nlines += data[i] == '\n';
    char **lines = malloc((size_t)(nlines + 1) * sizeof *lines);
    if (!lines) {
        free(data);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory reading %s", path);
    }
    int cnt = 0;
    for (char *p = data, *end = data + len; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        if (le > p && le[-1] == '\r') le[-1] = '\0';
        *le = '\0';
        lines[cnt++] = p;
        p = nl ? nl + 1 : end;
    }
    int indexed = cnt > 1 && strncmp(lines[0], "# index wnid", 12) == 0;
    int first = indexed ? 1 : 0, count = 0;
    if (indexed) {
        while (cnt > first && lines[cnt - 1][0] == '\0') cnt--;  // trailing blank lines
        for (int i = first; i < cnt; i++)
            if (!indexed_label(lines[i], i - first)) {
                char bad[64];
                snprintf(bad, sizeof bad, "%.60s", lines[i]);
                free(lines);
                free(data);
                return DLP_ERR(DLP_ERR_FORMAT, "%s: line %d '%s' is not '%d <wnid> <name>' (the synthetic ImageNet's "
                               "labels.txt format, announced by its '# index wnid' header)", path, i + 1, bad, i - first);
            }
    }
    count = cnt - first;
    if (count <= 0) {
        free(lines);
        free(data);
        return DLP_ERR(DLP_ERR_FORMAT, "%s: no labels (empty file)", path);
    }
    char **out = calloc((size_t)count, sizeof *out);
    dlp_status st = out ? DLP_OK : DLP_ERR(DLP_ERR_NOMEM, "out of memory reading %s", path);
    for (int i = 0; st == DLP_OK && i < count; i++) {
        const char *s = indexed ? indexed_label(lines[first + i], i) : lines[first + i];
        if (!(out[i] = strdup(s))) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory reading %s", path);
    }
    free(lines);
    free(data);
    if (st) {
        dlp_infer_labels_free(out, count);
        return st;
    }
    *labels = out;
    *n = count;
    return DLP_OK;
}

void dlp_infer_labels_free(char **labels, int n) {
    if (!labels) return;
    for (int i = 0; i < n; i++) free(labels[i]);
    free(labels);
}

void dlp_infer_topk(const float *logits, int n, int k, int *cls, float *prob) {
    dlp_stats_topk(logits, n, k, cls, prob);  // the service's too: the same answer over HTTP and here
}

// ---- latency statistics -----------------------------------------------------------------------------------

void dlp_infer_lat_from(int64_t *ns, size_t n, dlp_infer_lat *out) {
    memset(out, 0, sizeof *out);
    if (n == 0) return;
    dlp_stats_sort_i64(ns, n);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (double)ns[i];
    out->count = (int64_t)n;
    out->min_ms = dlp_ns_to_ms(ns[0]);
    out->max_ms = dlp_ns_to_ms(ns[n - 1]);
    out->mean_ms = sum / (double)n * 1e-6;
    out->p50_ms = dlp_ns_to_ms(dlp_stats_rank_i64(ns, n, 0.50));
    out->p90_ms = dlp_ns_to_ms(dlp_stats_rank_i64(ns, n, 0.90));
    out->p95_ms = dlp_ns_to_ms(dlp_stats_rank_i64(ns, n, 0.95));
    out->p99_ms = dlp_ns_to_ms(dlp_stats_rank_i64(ns, n, 0.99));
}

json_t *dlp_infer_lat_to_json(const dlp_infer_lat *l) {
    return json_pack("{sI sf sf sf sf sf sf sf}", "count", (json_int_t)l->count, "min", l->min_ms, "mean", l->mean_ms,
                     "p50", l->p50_ms, "p90", l->p90_ms, "p95", l->p95_ms, "p99", l->p99_ms, "max", l->max_ms);
}
