// backend/cpu/cpu: the `cpu` backend — ResNet training and inference on oneDNN (fp32, or bf16 compute with
// fp32 master weights, BN statistics, loss and gradients). plan_create builds every primitive and buffer once
// (cpu_build.c for training, cpu_infer.c for inference); the step functions below only walk the
// prepared step lists. docs/cpu-backend.md describes the design and the measurements.
#include <immintrin.h>
#include <jansson.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "hw/host.h"
#include "backend/cpu/cpu.h"
#include "core/clock.h"
#include "core/log.h"

// Every entry point runs inside enter()/leave():
// - oneDNN (OpenMP runtime) parallelizes over omp_get_max_threads() of the calling thread, so the plan's count is
//   set on each entry (a step may run on another thread than plan_create's);
// - denormals are flushed to zero (MXCSR FTZ + DAZ) on the calling thread and the OpenMP workers, and the caller's
//   mode is restored on the way out. Arithmetic on denormals (which tiny gradients deep in a net can reach) is
//   up to ~100x slower on x86; flushing them is what TensorFlow does by default on CPUs, and it changes results
//   only below 1.2e-38.
// Short memory-bound ops run on fewer threads while the machine is busy. oneDNN's batch norm synchronizes its
// threads with spinning barriers (C/16 per call), and a short parallel op loses a scheduler time slice whenever
// one of its threads is preempted: with more runnable threads than CPUs (other processes, loader threads beside
// the compute threads) they stall. Measured on the 2-core machine at load ~7, BN took 4.5-6 s of a ResNet-50 step
// (batch 16) on 2 threads and 0.4 s on 1 (convolutions slowed 2.6x there, BN 40x); on a quiet machine 2 threads
// are faster (BN 256 vs 416 ms of a 4.2 s step). So at most once a second the 1-minute load average is read:
// above the CPU count (+0.5) those ops take half the threads, else all. DLPERF_CPU_SMALL_THREADS=N fixes N.
static void busy_check(cpu_plan *p) {
    if (p->small_fixed || p->small_busy == p->threads) return;
    const int64_t now = dlp_now_ns();
    if (p->load_checked_ns && now - p->load_checked_ns < 1000000000LL) return;
    p->load_checked_ns = now;
    double load = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    int ok = fscanf(f, "%lf", &load) == 1;
    fclose(f);
    if (ok) p->small_now = load > omp_get_num_procs() + 0.5 ? p->small_busy : p->threads;
}

#if defined(__x86_64__) || defined(__i386__)
#define CPU_FTZ_DAZ 0x8040u
typedef unsigned cpu_fpmode;
static cpu_fpmode enter(cpu_plan *p) {
    busy_check(p);
    if (omp_get_max_threads() != p->threads) omp_set_num_threads(p->threads);
    const unsigned old = _mm_getcsr();
    if ((old & CPU_FTZ_DAZ) != CPU_FTZ_DAZ) {
#pragma omp parallel num_threads(p->threads)
        _mm_setcsr(_mm_getcsr() | CPU_FTZ_DAZ);
    }
    return old;
}
static void leave(cpu_plan *p, cpu_fpmode old) {
    if ((old & CPU_FTZ_DAZ) != CPU_FTZ_DAZ) {
#pragma omp parallel num_threads(p->threads)
        _mm_setcsr((_mm_getcsr() & ~CPU_FTZ_DAZ) | (old & CPU_FTZ_DAZ));
    }
}
#else
typedef int cpu_fpmode;
static cpu_fpmode enter(cpu_plan *p) {
    busy_check(p);
    if (omp_get_max_threads() != p->threads) omp_set_num_threads(p->threads);
    return 0;
}
static void leave(cpu_plan *p, cpu_fpmode old) {
    (void)p;
    (void)old;
}
#endif

static dlp_status cpu_available(char *why, size_t why_len) {
    if (why && why_len) why[0] = '\0';
    if (dnnl_engine_get_count(dnnl_cpu) == 0) {
        if (why && why_len) snprintf(why, why_len, "oneDNN reports no CPU engine");
        return DLP_ERR_UNSUPPORTED;
    }
    return DLP_OK;
}

static dlp_status check_net(const dlp_net *net, const dlp_plan_cfg *cfg) {
    if (net->nlayers < 2 || net->layers[0].kind != DLP_LAYER_INPUT)
        return DLP_ERR(DLP_ERR_INVALID, "cpu: net %s has no layers after its input", net->arch);
    for (int i = 1; i < net->nlayers; i++) {
        const dlp_layer *l = &net->layers[i];
        if (l->in0 < 0 || l->in0 >= i || (l->kind == DLP_LAYER_ADD && (l->in1 < 0 || l->in1 >= i)))
            return DLP_ERR(DLP_ERR_INVALID, "cpu: net %s: layer %d (%s) is not in topological order", net->arch, i,
                           l->name);
        if (l->kind <= DLP_LAYER_INPUT || l->kind >= DLP_LAYER_KIND_COUNT)
            return DLP_ERR(DLP_ERR_INVALID, "cpu: net %s: layer %d has kind %d", net->arch, i, (int)l->kind);
        if (l->kind == DLP_LAYER_BN && cfg->train && (int64_t)cfg->batch * l->h * l->w < 2)
            return DLP_ERR(DLP_ERR_INVALID,
                           "cpu: %s: training batch norm needs more than one value per channel (batch %d, %dx%d)",
                           l->name, cfg->batch, l->h, l->w);
    }
    // an fc gives (N, K) values; only ReLUs may follow (the rest wants 4D activations)
    char *flat = calloc((size_t)net->nlayers, 1);
    DLP_TRY_ALLOC(flat);
    dlp_status st = DLP_OK;
    for (int i = 1; i < net->nlayers && !st; i++) {
        const dlp_layer *l = &net->layers[i];
        const int in_flat = flat[l->in0] || (l->kind == DLP_LAYER_ADD && flat[l->in1]);
        flat[i] = l->kind == DLP_LAYER_FC || (l->kind == DLP_LAYER_RELU && in_flat);
        if (in_flat && l->kind != DLP_LAYER_RELU)
            st = DLP_ERR(DLP_ERR_UNSUPPORTED, "cpu: net %s: %s (%s) after an fc layer is not supported", net->arch,
                         l->name, dlp_layer_kind_name(l->kind));
    }
    free(flat);
    return st;
}

static int64_t value_elems(const_dnnl_memory_desc_t md) {
    int64_t d[DNNL_MAX_NDIMS], n = 1;
    const int nd = cpu_md_dims(md, d);
    for (int i = 1; i < nd; i++) n *= d[i];
    return n;
}

// The fp32 plain (NCHW / NC) twin of a value's descriptor.
static dlp_status plain_twin(cpu_plan *p, const_dnnl_memory_desc_t md, const_dnnl_memory_desc_t *out) {
    int64_t d[DNNL_MAX_NDIMS];
    const int nd = cpu_md_dims(md, d);
    return cpu_md_plain(p, out, nd, d, dnnl_f32);
}

// A plain fp32 view of tensor t: t's own memory when it already is one, else a buffer + reorder (t -> plain
// when to_plain, plain -> t otherwise).
static dlp_status plain_side(cpu_plan *p, cpu_tensor *t, int to_plain, float **plain, cpu_reorder *r,
                             dnnl_memory_t *src, dnnl_memory_t *dst) {
    const_dnnl_memory_desc_t pm;
    DLP_CHECK(plain_twin(p, t->md, &pm));
    if (dnnl_memory_desc_equal(pm, t->md)) {
        *plain = t->data;
        memset(r, 0, sizeof *r);
        return DLP_OK;
    }
    *plain = cpu_alloc(p, dnnl_memory_desc_get_size(pm));
    if (!*plain) return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    dnnl_memory_t m;
    DLP_CHECK(cpu_mem_new(p, pm, *plain, &m));
    if (to_plain) {
        *src = t->mem;
        *dst = m;
        return cpu_reorder_new(p, t->md, pm, r);
    }
    *src = m;
    *dst = t->mem;
    return cpu_reorder_new(p, pm, t->md, r);
}

static void cpu_plan_free(dlp_plan *base);

static dlp_status plan_build(cpu_plan *p, const dlp_net *net, const dlp_plan_cfg *cfg, int force_prop) {
    DLP_CHECK(dlp_net_copy(&p->net, net));
    p->cfg = *cfg;
    p->batch = cfg->batch;
    p->train = cfg->train;
    p->threads = cfg->threads > 0 ? cfg->threads : dlp_host_cpus_allowed();
    omp_set_num_threads(p->threads);
    p->prec = cfg->precision;
    p->dt = cfg->precision == DLP_DTYPE_BF16 ? dnnl_bf16 : dnnl_f32;  // int8: the ops kept in fp32
    p->int8 = cfg->precision == DLP_DTYPE_I8;
    p->fwd_pass = -1;
    p->isa = dnnl_get_effective_cpu_isa();
    p->mem_limit_bytes = cpu_mem_available_bytes() / 10 * 9;
    // Short memory-bound ops (batch norm, weight-sized reorders, the SGD loop) on a busy machine: see busy_check.
    const char *st = getenv("DLPERF_CPU_SMALL_THREADS");
    p->small_fixed = st && st[0];
    p->small_busy = p->small_fixed ? atoi(st) : p->threads / 2;
    if (p->small_busy <= 0 || p->small_busy > p->threads) p->small_busy = p->threads;
    p->small_now = p->small_fixed ? p->small_busy : p->threads;
    const char *wino = getenv("DLPERF_CPU_WINOGRAD");
    p->winograd = !(wino && wino[0] == '0');
    const char *prop = getenv("DLPERF_CPU_INFER_PROP");
    p->infer_prop = -1;
    if (prop && prop[0]) {
        if (!strcmp(prop, "inference")) p->infer_prop = 1;
        else if (!strcmp(prop, "training")) p->infer_prop = 0;
        else if (strcmp(prop, "auto"))
            return DLP_ERR(DLP_ERR_INVALID, "DLPERF_CPU_INFER_PROP=%s: expected inference, training or auto", prop);
    }
    if (force_prop >= 0) p->infer_prop = force_prop;
    const char *prof = getenv("DLPERF_CPU_PROFILE");
    p->profile = prof && prof[0] == '1' ? 1 : prof && !strcmp(prof, "steps") ? 2 : 0;
    CPU_DNNL(dnnl_engine_create(&p->eng, dnnl_cpu, 0), "cpu engine");
    CPU_DNNL(dnnl_stream_create(&p->stream, p->eng, dnnl_stream_default_flags), "cpu stream");
    DLP_CHECK(cpu_attr_new(&p->attr));
    const dlp_net *n = &p->net;
    const size_t pc = (size_t)(n->param_count > 0 ? n->param_count : 1);
    p->params = cpu_alloc(p, pc * sizeof(float));
    p->bufs = cpu_alloc(p, (size_t)(n->buf_count > 0 ? n->buf_count : 1) * sizeof(float));
    if (!p->params || !p->bufs) return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory for %s's parameters", n->arch);
    if (p->train) {
        p->grads = cpu_alloc(p, pc * sizeof(float));
        p->mom = cpu_alloc(p, pc * sizeof(float));
        if (!p->grads || !p->mom) return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory for %s's gradients", n->arch);
        DLP_CHECK(dlp_net_buckets(n, cfg->bucket_elems, &p->buckets, &p->nbuckets));
    }
    // running statistics start at PyTorch's values (mean 0, var 1) until set_params gives others
    for (int i = 0; i < n->nbufs; i++)
        if (strstr(n->bufs[i].name, "running_var"))
            for (int64_t j = 0; j < n->bufs[i].numel; j++) p->bufs[n->bufs[i].offset + j] = 1.0f;
    p->val_of = malloc((size_t)n->nlayers * sizeof(int));
    if (!p->val_of) return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    for (int i = 0; i < n->nlayers; i++) p->val_of[i] = -1;
    // the input batch: fp32 NCHW, as the loader writes it
    const dlp_layer *in = &n->layers[0];
    int64_t d[4] = {p->batch, in->c, in->h, in->w};
    const_dnnl_memory_desc_t imd;
    DLP_CHECK(cpu_md_plain(p, &imd, 4, d, dnnl_f32));
    cpu_tensor *it;
    DLP_CHECK(cpu_tensor_new(p, imd, NULL, &it));
    p->in_value = cpu_value_new(p, it, 0);
    if (p->in_value < 0) return dlp_err_status();
    p->vals[p->in_value].defer = 1;
    p->val_of[0] = p->in_value;
    p->in_elems = (int64_t)in->c * in->h * in->w;
    if (p->train) DLP_CHECK(cpu_build_train(p));
    else DLP_CHECK(cpu_build_infer(p));
    DLP_CHECK(cpu_pool_finish(p, &p->pool_bytes));  // binds pooled tensors: plain_side may alias their data
    cpu_value *o = &p->vals[p->out_value];
    p->out_elems = value_elems(o->x->md);
    DLP_CHECK(plain_side(p, o->x, 1, &p->out_plain, &p->out_reorder, &p->out_reorder_src, &p->out_reorder_dst));
    if (p->train) {
        DLP_CHECK(plain_side(p, o->dx, 0, &p->dout_plain, &p->dout_reorder, &p->dout_reorder_src,
                             &p->dout_reorder_dst));
        cpu_value *iv = &p->vals[p->in_value];
        if (iv->dx) DLP_CHECK(plain_side(p, iv->dx, 1, &p->din_plain, &p->din_reorder, &p->din_reorder_src,
                                         &p->din_reorder_dst));
    }
    DLP_CHECK(cpu_scratch_finish(p));
    p->wcopy_of = cpu_alloc(p, (size_t)(n->nparams + 1));
    if (!p->wcopy_of) return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    for (int i = 0; i < p->nwcopies; i++)
        if (p->wcopies[i].snapshot) p->nsnapshots++;
        else if (p->wcopies[i].reorder.prim) p->wcopy_of[p->wcopies[i].param] = 1;
    DLP_CHECK(cpu_wcopy_refresh(p, -1, CPU_WCOPY_ALL));
    return DLP_OK;
}

static int cmp_f64(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// An inference plan at batch 1 without AMX, propagation kind left to auto: which kind is faster depends on the
// CPU and the batch (2-core Xeon, AVX-512 VNNI, ResNet-50 fp32: forward_inference's brgemm 1x1 kernels and its
// Winograd F(2x2,3x3) beat forward_training's jit kernels by ~5% at batch 1, while forward_training wins at batch
// 16: docs/cpu-backend.md), so at batch 1 — the latency case, where a pass is short — both are built and timed
// on the plan's own (zeroed) input and the faster one is kept. DLPERF_CPU_INFER_PROP=training|inference skips it.
static int tune_wanted(const cpu_plan *p) {
    const int amx = (p->isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx;
    return !p->train && p->batch == 1 && p->infer_prop < 0 && !amx;
}

// Median forward pass (ms) of plans a and b, alternating: 2 warm-up passes each, then 7 pairs.
static dlp_status tune_time(cpu_plan *a, cpu_plan *b, double ms[2]) {
    cpu_plan *pl[2] = {a, b};
    double t[2][7];
    for (int r = -2; r < 7; r++)
        for (int i = 0; i < 2; i++) {
            int64_t t0 = dlp_now_ns();
            DLP_CHECK(cpu_steps_run(pl[i], &pl[i]->fwd, CPU_MASK_EVAL));
            if (r >= 0) t[i][r] = (double)(dlp_now_ns() - t0) / 1e6;
        }
    for (int i = 0; i < 2; i++) {
        qsort(t[i], 7, sizeof t[i][0], cmp_f64);
        ms[i] = t[i][3];
    }
    // the tuning passes are not the profile's
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < pl[i]->fwd.n; j++) pl[i]->fwd.v[j].ns = pl[i]->fwd.v[j].calls = 0;
    return DLP_OK;
}

static dlp_status plan_new(const dlp_net *net, const dlp_plan_cfg *cfg, int force_prop, cpu_plan **out) {
    *out = NULL;
    cpu_plan *p = calloc(1, sizeof *p);
    DLP_TRY_ALLOC(p);
    p->base.ops = &dlp_backend_cpu;
    dlp_status st = plan_build(p, net, cfg, force_prop);
    if (st && p->mem_limit_hit)
        st = DLP_ERR(DLP_ERR_NOMEM, "the plan needs more than the %.1f GiB of memory available (%.1f GiB); hint: a "
                     "smaller --batch",
                     (double)p->mem_limit_bytes / (1 << 30), (double)p->alloc_bytes / (1 << 30));
    if (st) {
        dlp_err_context("cpu: planning %s (%s, batch %d, %s)", net->arch, cfg->train ? "training" : "inference",
                        cfg->batch, dlp_dtype_name(cfg->precision));
        cpu_plan_destroy(p);
        return st;
    }
    *out = p;
    return DLP_OK;
}

static dlp_status streams_create(const dlp_net *net, const dlp_plan_cfg *cfg, int threads, dlp_plan **out);
static dlp_status streams_info(const cpu_plan *p, json_t *obj);

static dlp_status cpu_plan_create(const dlp_net *net, const dlp_plan_cfg *cfg, dlp_plan **out) {
    *out = NULL;
    if (cfg->batch <= 0) return DLP_ERR(DLP_ERR_INVALID, "cpu: batch must be positive (got %d)", cfg->batch);
    if (cfg->precision == DLP_DTYPE_I8) {
        if (cfg->train)
            return DLP_ERR(DLP_ERR_UNSUPPORTED, "cpu: int8 is for inference only (train in fp32 or bf16)");
        if (!cfg->act_range || !cfg->act_min)
            return DLP_ERR(DLP_ERR_INVALID, "cpu: an int8 plan needs calibrated activation ranges (nn/quant)");
    } else if (cfg->precision != DLP_DTYPE_F32 && cfg->precision != DLP_DTYPE_BF16) {
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "cpu computes in fp32, bf16 or (inference) int8 (asked for %s)",
                       dlp_dtype_name(cfg->precision));
    }
    if (cfg->observe && (cfg->train || cfg->precision != DLP_DTYPE_F32))
        return DLP_ERR(DLP_ERR_INVALID, "cpu: calibration observes fp32 inference plans only");
    DLP_CHECK(check_net(net, cfg));
    if (cfg->streams < 0) return DLP_ERR(DLP_ERR_INVALID, "cpu: %d streams (give 1 or more)", cfg->streams);
    if (cfg->streams > 1) {
        if (cfg->train || cfg->observe)
            return DLP_ERR(DLP_ERR_INVALID, "cpu: streams are for inference plans (not training or calibration)");
        const int threads = cfg->threads > 0 ? cfg->threads : dlp_host_cpus_allowed();
        if (cfg->streams > threads)
            return DLP_ERR(DLP_ERR_INVALID, "cpu: %d streams need at least as many threads (the plan has %d)",
                           cfg->streams, threads);
        // a batch smaller than the streams runs on that many (batch 1: one plan on all the threads)
        if (cfg->batch > 1) return streams_create(net, cfg, threads, out);
    }
    cpu_plan *p;
    DLP_CHECK(plan_new(net, cfg, -2, &p));
    if (tune_wanted(p)) {
        cpu_plan *q;
        if (plan_new(net, cfg, 1, &q) != DLP_OK) {
            dlp_err_clear();  // no forward_inference plan here: keep forward_training
        } else {
            double ms[2] = {0, 0};
            dlp_status st = tune_time(p, q, ms);
            if (st) {
                cpu_plan_destroy(p);
                cpu_plan_destroy(q);
                return st;
            }
            if (ms[1] < ms[0]) {
                cpu_plan *t = p;
                p = q;
                q = t;
            }
            cpu_plan_destroy(q);
            p->prop_tuned = 1;
            p->tune_ms[0] = ms[0];
            p->tune_ms[1] = ms[1];
        }
    }
    *out = &p->base;
    return DLP_OK;
}

// DLPERF_CPU_PROFILE=1: where the time went, by step (largest first), logged when the plan is freed;
// DLPERF_CPU_PROFILE=steps: also every step in plan order with its output's dimensions (bench/infer_layers.py
// pairs them with another engine's layers).
static int cmp_ns(const void *a, const void *b) {
    const cpu_step *x = *(cpu_step *const *)a, *y = *(cpu_step *const *)b;
    return (y->ns > x->ns) - (y->ns < x->ns);
}

// "1x64x56x56": the dimensions of a step's destination ("-": none, e.g. a function step).
static void step_dst_dims(const cpu_step *s, char *out, size_t len) {
    snprintf(out, len, "-");
    const_dnnl_memory_desc_t md = NULL;
    for (int a = 0; a < s->nargs && !md; a++)
        if (s->args[a].arg == DNNL_ARG_DST && s->args[a].memory &&
            dnnl_memory_get_memory_desc(s->args[a].memory, &md) != dnnl_success)
            md = NULL;
    if (!md) return;
    int64_t dims[DNNL_MAX_NDIMS];
    const int nd = cpu_md_dims(md, dims);
    size_t o = 0;
    for (int d = 0; d < nd && o + 16 < len; d++)
        o += (size_t)snprintf(out + o, len - o, "%s%lld", d ? "x" : "", (long long)dims[d]);
}

static void profile_log(cpu_plan *p) {
    cpu_steps *lists[3] = {&p->fwd, &p->bwd, &p->in_grad};
    int total = 0;
    for (int i = 0; i < 3; i++) total += lists[i]->n;
    cpu_step **v = malloc((size_t)(total ? total : 1) * sizeof *v);
    if (!v) return;
    int k = 0;
    int64_t sum = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < lists[i]->n; j++) {
            v[k++] = &lists[i]->v[j];
            sum += lists[i]->v[j].ns;
        }
    qsort(v, (size_t)k, sizeof *v, cmp_ns);
    dlp_log(DLP_LOG_INFO, "cpu profile (%s %s batch %d, %d threads): %.1f ms in steps", p->net.arch,
            dlp_dtype_name(p->prec), p->batch, p->threads, (double)sum / 1e6);
    // by kind of step (the text after the layer name), then the 25 largest single steps
    struct { char op[48]; int64_t ns; int n; } cat[48];
    int nc = 0;
    for (int i = 0; i < k; i++) {
        const char *op = strchr(v[i]->what, ' ');
        op = op ? op + 1 : v[i]->what;
        int j = 0;
        while (j < nc && strcmp(cat[j].op, op) != 0) j++;
        if (j == nc) {
            if (nc == 48) continue;
            snprintf(cat[nc].op, sizeof cat[nc].op, "%s", op);
            cat[nc].ns = 0;
            cat[nc].n = 0;
            nc++;
        }
        cat[j].ns += v[i]->ns;
        cat[j].n++;
    }
    for (int a = 0; a < nc; a++)
        for (int b = a + 1; b < nc; b++)
            if (cat[b].ns > cat[a].ns) {
                __typeof__(cat[0]) t = cat[a];
                cat[a] = cat[b];
                cat[b] = t;
            }
    const double calls = (double)(p->fwd.n && p->fwd.v[0].calls ? p->fwd.v[0].calls : 1);
    for (int a = 0; a < nc; a++)
        dlp_log(DLP_LOG_INFO, "  %9.1f ms/step %5.1f%%  %-28s (%d steps)", (double)cat[a].ns / 1e6 / calls,
                100.0 * (double)cat[a].ns / (double)(sum ? sum : 1), cat[a].op, cat[a].n);
    if (p->profile == 2)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < lists[i]->n; j++) {
                const cpu_step *s = &lists[i]->v[j];
                char dims[64];
                step_dst_dims(s, dims, sizeof dims);
                dlp_log(DLP_LOG_INFO, "  step %s %3d %9.4f ms/call  %-16s %s", i == 0 ? "fwd" : i == 1 ? "bwd" : "din",
                        j, (double)s->ns / 1e6 / (double)(s->calls ? s->calls : 1), dims, s->what);
                // the fastest call on a line of its own (bench/infer_layers.py parses the line above)
                dlp_log(DLP_LOG_INFO, "  step-min %s %3d %9.4f ms", i == 0 ? "fwd" : i == 1 ? "bwd" : "din", j,
                        (double)s->min_ns / 1e6);
            }
    for (int i = 0; i < k && i < 25 && v[i]->ns > 0; i++)
        dlp_log(DLP_LOG_INFO, "  %8.2f ms/call %5.1f%%  %s", (double)v[i]->ns / 1e6 / (double)(v[i]->calls ? v[i]->calls : 1),
                100.0 * (double)v[i]->ns / (double)(sum ? sum : 1), v[i]->what);
    free(v);
}

static void cpu_plan_free(dlp_plan *base) {
    cpu_plan *p = (cpu_plan *)base;
    if (!p) return;
    if (p->profile) profile_log(p);
    for (int i = 0; i < p->nsub; i++) cpu_plan_free(&p->sub[i]->base);
    free(p->sub);
    cpu_plan_destroy(p);
}

static void cpu_input_format(const dlp_plan *p, dlp_layout *layout, dlp_dtype *dtype) {
    (void)p;
    *layout = DLP_LAYOUT_NCHW;
    *dtype = DLP_DTYPE_F32;
}

static dlp_status need_train(const cpu_plan *p, const char *what) {
    if (!p->train) return DLP_ERR(DLP_ERR_INVALID, "cpu: %s needs a training plan (this one is inference-only)", what);
    return DLP_OK;
}

static dlp_status do_set_params(dlp_plan *base, const float *params, const float *bufs) {
    cpu_plan *p = (cpu_plan *)base;
    if (params) memcpy(p->params, params, (size_t)p->net.param_count * sizeof(float));
    if (bufs) memcpy(p->bufs, bufs, (size_t)p->net.buf_count * sizeof(float));
    return cpu_wcopy_refresh(p, -1, CPU_WCOPY_ALL);
}

static dlp_status cpu_get_params(dlp_plan *base, float *params, float *bufs) {
    cpu_plan *p = (cpu_plan *)base;
    if (p->nsub) p = p->sub[0];  // streams: every plan has the same weights
    if (params) memcpy(params, p->params, (size_t)p->net.param_count * sizeof(float));
    if (bufs) memcpy(bufs, p->bufs, (size_t)p->net.buf_count * sizeof(float));
    return DLP_OK;
}

static dlp_status cpu_get_grads(dlp_plan *base, float *grads) {
    cpu_plan *p = (cpu_plan *)base;
    DLP_CHECK(need_train(p, "get_grads"));
    memcpy(grads, p->grads, (size_t)p->net.param_count * sizeof(float));
    return DLP_OK;
}

static dlp_status cpu_set_momentum(dlp_plan *base, const float *v) {
    cpu_plan *p = (cpu_plan *)base;
    DLP_CHECK(need_train(p, "set_momentum"));
    memcpy(p->mom, v, (size_t)p->net.param_count * sizeof(float));
    return DLP_OK;
}

static dlp_status cpu_get_momentum(dlp_plan *base, float *v) {
    cpu_plan *p = (cpu_plan *)base;
    DLP_CHECK(need_train(p, "get_momentum"));
    memcpy(v, p->mom, (size_t)p->net.param_count * sizeof(float));
    return DLP_OK;
}

static float *cpu_grad_buffer(dlp_plan *base) { return ((cpu_plan *)base)->grads; }

static dlp_status do_set_input(dlp_plan *base, const void *batch, int n) {
    cpu_plan *p = (cpu_plan *)base;
    if (n <= 0 || n > p->batch)
        return DLP_ERR(DLP_ERR_INVALID, "cpu: set_input with %d samples (the plan's batch is %d)", n, p->batch);
    float *x = p->vals[p->in_value].x->data;
    memcpy(x, batch, (size_t)((int64_t)n * p->in_elems) * sizeof(float));
    if (n < p->batch) memset(x + (int64_t)n * p->in_elems, 0, (size_t)((int64_t)(p->batch - n) * p->in_elems) * sizeof(float));
    p->n = n;
    p->fwd_pass = -1;
    p->have_dlogits = 0;
    p->out_ready = 0;
    return DLP_OK;
}

static dlp_status do_forward(dlp_plan *base, dlp_pass pass) {
    cpu_plan *p = (cpu_plan *)base;
    if (p->n <= 0) return DLP_ERR(DLP_ERR_INVALID, "cpu: forward before set_input");
    if (pass == DLP_PASS_TRAIN) {
        DLP_CHECK(need_train(p, "a training forward pass"));
        if (p->n != p->batch)
            return DLP_ERR(DLP_ERR_INVALID, "cpu: a training step needs a full batch (%d of %d samples)", p->n, p->batch);
    }
    p->fwd_pass = -1;
    DLP_CHECK(cpu_steps_run(p, &p->fwd, pass == DLP_PASS_TRAIN ? CPU_MASK_TRAIN : CPU_MASK_EVAL));
    p->fwd_pass = (int)pass;
    p->have_dlogits = 0;
    p->out_ready = 0;
    return DLP_OK;
}

static dlp_status output_ready(cpu_plan *p) {
    if (p->fwd_pass < 0) return DLP_ERR(DLP_ERR_INVALID, "cpu: the output is asked for before forward");
    // (streams: gathered by streams_forward, which sets out_ready)
    if (!p->out_ready) DLP_CHECK(cpu_reorder_run(p, &p->out_reorder, p->out_reorder_src, p->out_reorder_dst, 1, "the output"));
    p->out_ready = 1;
    return DLP_OK;
}

static dlp_status do_get_output(dlp_plan *base, float *out) {
    cpu_plan *p = (cpu_plan *)base;
    DLP_CHECK(output_ready(p));
    memcpy(out, p->out_plain, (size_t)((int64_t)p->n * p->out_elems) * sizeof(float));
    return DLP_OK;
}

static dlp_status do_loss(dlp_plan *base, const int32_t *labels, float label_smoothing, dlp_loss_out *out) {
    cpu_plan *p = (cpu_plan *)base;
    DLP_CHECK(output_ready(p));
    DLP_CHECK(cpu_kernel_xent(p->out_plain, p->n, p->batch, p->out_elems, labels, label_smoothing,
                              p->train ? p->dout_plain : NULL, out));
    p->have_dlogits = p->train;
    return DLP_OK;
}

static dlp_status do_backward(dlp_plan *base, const float *dy) {
    cpu_plan *p = (cpu_plan *)base;
    DLP_CHECK(need_train(p, "backward"));
    if (p->fwd_pass != DLP_PASS_TRAIN)
        return DLP_ERR(DLP_ERR_INVALID, "cpu: backward needs a training forward pass first");
    if (!dy && !p->have_dlogits) return DLP_ERR(DLP_ERR_INVALID, "cpu: backward from the loss, but loss() was not called");
    if (dy) memcpy(p->dout_plain, dy, (size_t)((int64_t)p->batch * p->out_elems) * sizeof(float));
    DLP_CHECK(cpu_reorder_run(p, &p->dout_reorder, p->dout_reorder_src, p->dout_reorder_dst, 1, "the output gradient"));
    p->in_grad_done = 0;
    if (p->nsnapshots) DLP_CHECK(cpu_wcopy_refresh(p, -1, CPU_WCOPY_SNAPSHOT));
    DLP_CHECK(cpu_steps_run(p, &p->bwd, CPU_MASK_TRAIN));
    p->bwd_done = 1;
    return DLP_OK;
}

static dlp_status do_get_input_grad(dlp_plan *base, float *dx) {
    cpu_plan *p = (cpu_plan *)base;
    DLP_CHECK(need_train(p, "get_input_grad"));
    if (!p->bwd_done || p->fwd_pass != DLP_PASS_TRAIN)
        return DLP_ERR(DLP_ERR_INVALID, "cpu: get_input_grad before backward");
    const size_t bytes = (size_t)((int64_t)p->n * p->in_elems) * sizeof(float);
    if (!p->din_plain) {  // nothing flows back into the input
        memset(dx, 0, bytes);
        return DLP_OK;
    }
    if (!p->in_grad_done) {
        DLP_CHECK(cpu_steps_run(p, &p->in_grad, CPU_MASK_TRAIN));
        DLP_CHECK(cpu_reorder_run(p, &p->din_reorder, p->din_reorder_src, p->din_reorder_dst, 1, "the input gradient"));
        p->in_grad_done = 1;
    }
    memcpy(dx, p->din_plain, bytes);
    return DLP_OK;
}

// torch.optim.SGD on the flat arrays, one parameter tensor at a time; each conv/fc weight's compute copies
// (blocked layout, bf16 in a bf16 plan) are refreshed right after its update, while it is still in cache.
static dlp_status do_update(dlp_plan *base, const dlp_sgd *hp) {
    cpu_plan *p = (cpu_plan *)base;
    DLP_CHECK(need_train(p, "update"));
    for (int i = 0; i < p->net.nparams; i++) {
        const dlp_param *prm = &p->net.params[i];
        const float wd = prm->no_decay && !hp->decay_no_decay_params ? 0.0f : hp->weight_decay;
        cpu_kernel_sgd(p->params + prm->offset, p->mom + prm->offset, p->grads + prm->offset, prm->numel, hp->lr,
                       hp->momentum, wd, hp->nesterov, p->small_now);
        if (p->wcopy_of[i]) DLP_CHECK(cpu_wcopy_refresh(p, i, CPU_WCOPY_LIVE));
    }
    return DLP_OK;
}

static dlp_status cpu_plan_info(const dlp_plan *base, json_t *obj) {
    const cpu_plan *p = (const cpu_plan *)base;
    if (p->nsub) return streams_info(p, obj);
    const dnnl_version_t *v = dnnl_version();
    char ver[32];
    snprintf(ver, sizeof ver, "%d.%d.%d", v->major, v->minor, v->patch);
    json_object_set_new(obj, "library", json_string("oneDNN"));
    json_object_set_new(obj, "library_version", json_string(ver));
    json_object_set_new(obj, "isa", json_string(dlp_dnnl_isa_name_of((int)p->isa)));
    json_object_set_new(obj, "threads", json_integer(p->threads));
    json_object_set_new(obj, "threading", json_string("OpenMP"));
    json_object_set_new(obj, "short_op_threads_busy", json_integer(p->small_busy));
    json_object_set_new(obj, "short_op_threads_now", json_integer(p->small_now));
    json_object_set_new(obj, "precision", json_string(dlp_dtype_name(p->prec)));
    json_object_set_new(obj, "train", json_boolean(p->train));
    json_object_set_new(obj, "batch", json_integer(p->batch));
    json_object_set_new(obj, "conv_impl", json_string(p->conv_impl[0] ? p->conv_impl : "none"));
    if (!p->train)
        json_object_set_new(obj, "conv_prop_kind",
                            json_string(p->infer_conv_training_prop ? "forward_training" : "forward_inference"));
    if (p->prop_tuned) {
        json_t *t = json_object();
        json_object_set_new(t, "forward_training_ms", json_real(p->tune_ms[0]));
        json_object_set_new(t, "forward_inference_ms", json_real(p->tune_ms[1]));
        json_object_set_new(obj, "conv_prop_timed", t);
    }
    json_object_set_new(obj, "winograd_convs", json_integer(p->nwinograd));
    if (p->int8) {
        json_object_set_new(obj, "int8_convs", json_integer(p->nq8_convs));
        json_object_set_new(obj, "int8_conversions", json_integer(p->nq8_converts));
        json_object_set_new(obj, "int8_first_conv", json_string(p->cfg.int8_first_conv >= 0 ? "int8" : "fp32"));
    }
    json_t *k = json_object();
    for (int i = 0; i < p->nkernels; i++) json_object_set_new(k, p->kernels[i].name, json_integer(p->kernels[i].n));
    json_object_set_new(obj, "kernels", k);
    json_object_set_new(obj, "fused_bn_relu", json_integer(p->nfused_bn_relu));
    json_object_set_new(obj, "fused_add_relu", json_integer(p->nfused_add_relu));
    json_object_set_new(obj, "folded_bn", json_integer(p->nfolded_bn));
    json_object_set_new(obj, "fused_residual_sum", json_integer(p->nfused_sum));
    json_object_set_new(obj, "activation_conversions", json_integer(p->nconverts));
    if (p->train) json_object_set_new(obj, "gradient_copies", json_integer(p->ngrad_copies));
    if (p->train) json_object_set_new(obj, "shortcut_gradient_aliases", json_integer(p->nshortcut_aliases));
    if (p->train) json_object_set_new(obj, "fused_accumulate_relu_bwd", json_integer(p->nfused_acc_relu));
    json_object_set_new(obj, "steps_forward", json_integer(p->fwd.n));
    json_object_set_new(obj, "steps_backward", json_integer(p->bwd.n));
    json_object_set_new(obj, "activation_bytes", json_integer(p->act_bytes));
    json_object_set_new(obj, "pooled_bytes", json_integer(p->pool_bytes));
    json_object_set_new(obj, "weight_copy_bytes", json_integer(p->weight_bytes));
    json_object_set_new(obj, "scratchpad_bytes", json_integer((json_int_t)p->scratch_bytes));
    return DLP_OK;
}

static dlp_status cpu_set_params(dlp_plan *base, const float *params, const float *bufs);

// ---- streams ---------------------------------------------------------------------------------------------------
// Inference with cfg.streams = S > 1 (OpenVINO's throughput streams): the batch is split over S plans of its own,
// each built for threads/S threads (oneDNN sizes its kernels' work split by the thread count it sees at creation),
// and a forward pass runs them side by side — plan 0 on the calling thread, the others on threads started for the
// call — then gathers their outputs. With one thread per stream no primitive opens an OpenMP team: no fork-join
// barrier between the primitives of a pass and no load imbalance inside them (a 7x7 layer4 convolution split over
// two cores), at the price of S copies of the weights. Samples are spread evenly (n/S each, the first n%S one more).
static dlp_status streams_create(const dlp_net *net, const dlp_plan_cfg *cfg, int threads, dlp_plan **out) {
    *out = NULL;
    const int s = cfg->streams < cfg->batch ? cfg->streams : cfg->batch;
    cpu_plan *p = calloc(1, sizeof *p);
    DLP_TRY_ALLOC(p);
    p->base.ops = &dlp_backend_cpu;
    p->cfg = *cfg;
    p->batch = cfg->batch;
    p->threads = threads;
    p->prec = cfg->precision;
    p->int8 = cfg->precision == DLP_DTYPE_I8;
    p->fwd_pass = -1;
    p->sub = calloc((size_t)s, sizeof *p->sub);
    dlp_status st = p->sub ? DLP_OK : DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    for (int i = 0; i < s && !st; i++) {
        dlp_plan_cfg c = *cfg;
        c.batch = cfg->batch / s + (i < cfg->batch % s);
        c.threads = threads / s + (i < threads % s);
        c.streams = 1;
        st = plan_new(net, &c, -2, &p->sub[i]);
        if (!st) p->nsub = i + 1;
        else dlp_err_context("cpu: stream %d of %d (batch %d, %d threads)", i + 1, s, c.batch, c.threads);
    }
    omp_set_num_threads(threads);  // plan_build set the calling thread's count to a stream's
    if (!st) {
        p->in_elems = p->sub[0]->in_elems;
        p->out_elems = p->sub[0]->out_elems;
        p->out_plain = cpu_alloc(p, (size_t)((int64_t)p->batch * p->out_elems) * sizeof(float));
        if (!p->out_plain) st = DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    }
    if (st) {
        cpu_plan_free(&p->base);
        return st;
    }
    *out = &p->base;
    return DLP_OK;
}

// the samples of stream i when a call has n
static int stream_n(const cpu_plan *p, int i, int n) { return n / p->nsub + (i < n % p->nsub); }

static dlp_status streams_set_params(dlp_plan *base, const float *params, const float *bufs) {
    cpu_plan *p = (cpu_plan *)base;
    for (int i = 0; i < p->nsub; i++) DLP_CHECK(cpu_set_params(&p->sub[i]->base, params, bufs));
    omp_set_num_threads(p->threads);
    return DLP_OK;
}

static dlp_status streams_set_input(dlp_plan *base, const void *batch, int n) {
    cpu_plan *p = (cpu_plan *)base;
    if (n <= 0 || n > p->batch)
        return DLP_ERR(DLP_ERR_INVALID, "cpu: set_input with %d samples (the plan's batch is %d)", n, p->batch);
    const float *x = batch;
    for (int i = 0, off = 0; i < p->nsub; i++) {
        cpu_plan *q = p->sub[i];
        const int k = stream_n(p, i, n);
        if (k > 0) DLP_CHECK(do_set_input(&q->base, x + (int64_t)off * p->in_elems, k));
        else q->n = 0;  // idle this call
        off += k;
    }
    p->n = n;
    p->fwd_pass = -1;
    p->out_ready = 0;
    return DLP_OK;
}

typedef struct stream_job {
    cpu_plan *p;
    dlp_pass pass;
    int place;  // >= 0: bind the stream's thread to this OpenMP place's CPUs (see stream_bind)
    dlp_status st;
    char err[512];
} stream_job;

// Under OMP_PROC_BIND (true, close, spread) libgomp binds the calling thread to the first place, and binds any other
// thread to that place too at its first parallel region: every stream would share one CPU (measured: --streams 2
// with OMP_PROC_BIND=true at half the images/s of one plan, 42 against 84 img/s on 2 cores). So with binding on,
// a started stream's thread binds itself to OpenMP place i (stream 0 stays on the caller's) after its first parallel
// regions (enter()'s; checked: bound before them, it ended the pass on place 0). The place of stream i, or -1 when
// threads are not bound.
static int stream_place(int i) {
    if (omp_get_proc_bind() == omp_proc_bind_false || omp_get_num_places() < 2) return -1;
    return i % omp_get_num_places();
}

static void stream_bind(int place) {
    const int n = omp_get_place_num_procs(place);
    if (n < 1 || n > CPU_SETSIZE) return;
    int ids[n];
    omp_get_place_proc_ids(place, ids);
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int k = 0; k < n; k++)
        if (ids[k] >= 0 && ids[k] < CPU_SETSIZE) CPU_SET(ids[k], &set);
#pragma omp parallel num_threads(1)
    {
    }  // libgomp binds the thread (to place 0) at its first parallel regions: enter() opened one, this one too
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *stream_run(void *arg) {
    stream_job *j = arg;
    cpu_fpmode fm = enter(j->p);
    if (j->place >= 0) stream_bind(j->place);
    j->st = do_forward(&j->p->base, j->pass);
    if (!j->st) j->st = output_ready(j->p);
    leave(j->p, fm);
    if (j->st) snprintf(j->err, sizeof j->err, "%s", dlp_err_msg());
    return NULL;
}

static dlp_status streams_forward(dlp_plan *base, dlp_pass pass) {
    cpu_plan *p = (cpu_plan *)base;
    if (p->n <= 0) return DLP_ERR(DLP_ERR_INVALID, "cpu: forward before set_input");
    if (pass == DLP_PASS_TRAIN) return need_train(p, "a training forward pass");
    p->fwd_pass = -1;
    stream_job jobs[p->nsub];
    pthread_t tid[p->nsub];
    int started[p->nsub];
    for (int i = 0; i < p->nsub; i++) {
        jobs[i] = (stream_job){.p = p->sub[i], .pass = pass, .place = -1};
        started[i] = 0;
    }
    // streams 1.. on threads of their own; stream 0 (or, if a thread cannot start, its stream) here
    for (int i = 1; i < p->nsub; i++)
        if (p->sub[i]->n > 0) {
            jobs[i].place = stream_place(i);
            started[i] = pthread_create(&tid[i], NULL, stream_run, &jobs[i]) == 0;
        }
    for (int i = 1; i < p->nsub; i++)
        if (p->sub[i]->n > 0 && !started[i]) {
            jobs[i].place = -1;  // on the caller's thread: its binding stays
            stream_run(&jobs[i]);
        }
    stream_run(&jobs[0]);
    for (int i = 1; i < p->nsub; i++)
        if (started[i]) pthread_join(tid[i], NULL);
    omp_set_num_threads(p->threads);
    for (int i = 0; i < p->nsub; i++)
        if (jobs[i].st) return DLP_ERR(jobs[i].st, "cpu: stream %d of %d: %s", i + 1, p->nsub, jobs[i].err);
    for (int i = 0, off = 0; i < p->nsub; i++) {
        const int k = p->sub[i]->n;
        memcpy(p->out_plain + (int64_t)off * p->out_elems, p->sub[i]->out_plain,
               (size_t)((int64_t)k * p->out_elems) * sizeof(float));
        off += k;
    }
    p->fwd_pass = (int)pass;
    p->out_ready = 1;
    return DLP_OK;
}

static dlp_status streams_info(const cpu_plan *p, json_t *obj) {
    DLP_CHECK(cpu_plan_info(&p->sub[0]->base, obj));
    json_object_set_new(obj, "threads", json_integer(p->threads));
    json_object_set_new(obj, "batch", json_integer(p->batch));
    json_object_set_new(obj, "streams", json_integer(p->nsub));
    json_t *b = json_array(), *t = json_array();
    for (int i = 0; i < p->nsub; i++) {
        json_array_append_new(b, json_integer(p->sub[i]->batch));
        json_array_append_new(t, json_integer(p->sub[i]->threads));
    }
    json_object_set_new(obj, "stream_batches", b);
    json_object_set_new(obj, "stream_threads", t);
    return DLP_OK;
}

// The entry points: each runs its do_ function inside enter()/leave(). A streams plan runs streams_fn instead: the
// streams_ function that drives its sub-plans, or the do_ function itself, outside enter()/leave(), for the entries
// that only read the plan's own state (the output is gathered into it at forward; it never trains, so the training
// entries refuse).
#define CPU_ENTRY(name, streams_fn, params, args) \
    static dlp_status cpu_##name params {         \
        cpu_plan *cp_ = (cpu_plan *)base;         \
        if (cp_->nsub) return streams_fn args;    \
        cpu_fpmode fm_ = enter(cp_);              \
        dlp_status st_ = do_##name args;          \
        leave(cp_, fm_);                          \
        return st_;                               \
    }
CPU_ENTRY(set_params, streams_set_params, (dlp_plan * base, const float *params, const float *bufs),
          (base, params, bufs))
CPU_ENTRY(forward, streams_forward, (dlp_plan * base, dlp_pass pass), (base, pass))
CPU_ENTRY(get_output, do_get_output, (dlp_plan * base, float *out), (base, out))
CPU_ENTRY(loss, do_loss, (dlp_plan * base, const int32_t *labels, float smoothing, dlp_loss_out *out),
          (base, labels, smoothing, out))
CPU_ENTRY(backward, do_backward, (dlp_plan * base, const float *dy), (base, dy))
CPU_ENTRY(get_input_grad, do_get_input_grad, (dlp_plan * base, float *dx), (base, dx))
CPU_ENTRY(update, do_update, (dlp_plan * base, const dlp_sgd *hp), (base, hp))

static dlp_status cpu_set_input(dlp_plan *base, const void *batch, int n) {
    cpu_plan *p = (cpu_plan *)base;
    return p->nsub ? streams_set_input(base, batch, n) : do_set_input(base, batch, n);
}

const dlp_backend_ops dlp_backend_cpu = {
    .name = "cpu",
    .summary = "oneDNN: fp32, or bf16 compute with fp32 master weights; blocked layouts, fused BN/ReLU/add",
    .caps = {.kind = DLP_BACKEND_KIND_CPU, .default_precision = DLP_DTYPE_F32, .host_bf16 = 1},
    .available = cpu_available,
    .plan_create = cpu_plan_create,
    .plan_free = cpu_plan_free,
    .input_format = cpu_input_format,
    .set_params = cpu_set_params,
    .get_params = cpu_get_params,
    .get_grads = cpu_get_grads,
    .set_momentum = cpu_set_momentum,
    .get_momentum = cpu_get_momentum,
    .grad_buffer = cpu_grad_buffer,
    .set_input = cpu_set_input,
    .forward = cpu_forward,
    .get_output = cpu_get_output,
    .loss = cpu_loss,
    .backward = cpu_backward,
    .get_input_grad = cpu_get_input_grad,
    .update = cpu_update,
    .sync = NULL,
    .measure_peak = cpu_measure_peak,
    .measure_speed = cpu_measure_speed,
    .plan_info = cpu_plan_info,
};
