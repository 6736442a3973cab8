// backend/cpu/cpu_peak: the `cpu` backend's measured peak — sustained GFLOP/s of a large, well-shaped
// convolution (ResNet-50's layer2 3x3: 128 -> 128 channels, 28x28, batch 32, 3.7 GFLOP) in the layouts oneDNN
// prefers, at the precision and thread count asked. A training run states its achieved GFLOP/s as a fraction
// of this. Also the work speed (cpu_measure_speed): the same convolution at batch 1 on one oneDNN thread in each of
// N threads, as GFLOP per CPU-second of those threads — how fast the cores do this kind of work now, whatever share
// of them the process gets (a virtual machine's cores move with the host's other tenants without steal showing it;
// the probe and validate read it around each row and run: perf/probe_speed).
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

#include "backend/cpu/cpu.h"
#include "core/clock.h"
#include "core/stats.h"

#define PEAK_N 32
#define PEAK_C 128
#define PEAK_HW 28
#define PEAK_MIN_NS 300000000LL  // time at least this long (after one warm-up run)
#define PEAK_MIN_REPS 3

typedef struct peak_ctx {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst, scratch;
    dnnl_memory_desc_t s, w, d;
} peak_ctx;

static void peak_free(peak_ctx *c) {
    if (c->prim) dnnl_primitive_destroy(c->prim);
    if (c->pd) dnnl_primitive_desc_destroy(c->pd);
    if (c->src) dnnl_memory_destroy(c->src);
    if (c->wei) dnnl_memory_destroy(c->wei);
    if (c->dst) dnnl_memory_destroy(c->dst);
    if (c->scratch) dnnl_memory_destroy(c->scratch);
    if (c->stream) dnnl_stream_destroy(c->stream);
    if (c->eng) dnnl_engine_destroy(c->eng);
    if (c->s) dnnl_memory_desc_destroy(c->s);
    if (c->w) dnnl_memory_desc_destroy(c->w);
    if (c->d) dnnl_memory_desc_destroy(c->d);
}

// Fills a memory with small values (no denormals, no zeros that could shortcut anything).
static void fill(dnnl_memory_t m, dnnl_data_type_t dt) {
    const_dnnl_memory_desc_t md;
    void *h = NULL;
    if (dnnl_memory_get_memory_desc(m, &md) != dnnl_success || dnnl_memory_get_data_handle(m, &h) != dnnl_success || !h)
        return;
    size_t n = dnnl_memory_desc_get_size(md) / dnnl_data_type_size(dt == dnnl_u8 || dt == dnnl_s8 ? dnnl_u8 : dt);
    for (size_t i = 0; i < n; i++) {
        float v = 0.01f * (float)((int)(i % 17) - 8);
        if (dt == dnnl_bf16) ((uint16_t *)h)[i] = dlp_f32_to_bf16(v);
        else if (dt == dnnl_u8) ((uint8_t *)h)[i] = (uint8_t)(i % 17);
        else if (dt == dnnl_s8) ((int8_t *)h)[i] = (int8_t)((int)(i % 17) - 8);
        else ((float *)h)[i] = v;
    }
}

// The convolution (PEAK_C -> PEAK_C, 3x3, PEAK_HW x PEAK_HW) at batch n in src/weights/dst types, with its memories.
static dlp_status conv_setup(peak_ctx *c, int n, dnnl_data_type_t ts, dnnl_data_type_t tw, dnnl_data_type_t td) {
    CPU_DNNL(dnnl_engine_create(&c->eng, dnnl_cpu, 0), "peak engine");
    CPU_DNNL(dnnl_stream_create(&c->stream, c->eng, dnnl_stream_default_flags), "peak stream");
    dnnl_dims_t sd = {n, PEAK_C, PEAK_HW, PEAK_HW}, wd = {PEAK_C, PEAK_C, 3, 3};
    CPU_DNNL(dnnl_memory_desc_create_with_tag(&c->s, 4, sd, ts, dnnl_format_tag_any), "peak src");
    CPU_DNNL(dnnl_memory_desc_create_with_tag(&c->w, 4, wd, tw, dnnl_format_tag_any), "peak weights");
    CPU_DNNL(dnnl_memory_desc_create_with_tag(&c->d, 4, sd, td, dnnl_format_tag_any), "peak dst");
    dnnl_dims_t st = {1, 1}, dil = {0, 0}, pad = {1, 1};
    dnnl_primitive_attr_t attr;
    CPU_DNNL(dnnl_primitive_attr_create(&attr), "peak attributes");
    dnnl_status_t ds = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (ds == dnnl_success)
        ds = dnnl_convolution_forward_primitive_desc_create(&c->pd, c->eng, ts == dnnl_u8 ? dnnl_forward_inference
                                                                                            : dnnl_forward_training,
                                                            dnnl_convolution_direct, c->s, c->w, NULL, c->d, st, dil,
                                                            pad, pad, attr);
    dnnl_primitive_attr_destroy(attr);
    if (ds != dnnl_success) {
        c->pd = NULL;
        return DLP_ERR(ds == dnnl_unimplemented ? DLP_ERR_UNSUPPORTED : DLP_ERR_INTERNAL,
                       "oneDNN has no %s convolution here: %s", ts == dnnl_bf16 ? "bf16" : ts == dnnl_u8 ? "int8" : "fp32",
                       cpu_dnnl_status_str(ds));
    }
    CPU_DNNL(dnnl_primitive_create(&c->prim, c->pd), "peak primitive");
    CPU_DNNL(dnnl_memory_create(&c->src, dnnl_primitive_desc_query_md(c->pd, dnnl_query_src_md, 0), c->eng,
                                DNNL_MEMORY_ALLOCATE), "peak src");
    CPU_DNNL(dnnl_memory_create(&c->wei, dnnl_primitive_desc_query_md(c->pd, dnnl_query_weights_md, 0), c->eng,
                                DNNL_MEMORY_ALLOCATE), "peak weights");
    CPU_DNNL(dnnl_memory_create(&c->dst, dnnl_primitive_desc_query_md(c->pd, dnnl_query_dst_md, 0), c->eng,
                                DNNL_MEMORY_ALLOCATE), "peak dst");
    CPU_DNNL(dnnl_memory_create(&c->scratch, dnnl_primitive_desc_query_md(c->pd, dnnl_query_scratchpad_md, 0), c->eng,
                                DNNL_MEMORY_ALLOCATE), "peak scratchpad");
    fill(c->src, ts);
    fill(c->wei, tw);
    return DLP_OK;
}

static dlp_status conv_exec(peak_ctx *c, const char *what) {
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, c->src}, {DNNL_ARG_WEIGHTS, c->wei}, {DNNL_ARG_DST, c->dst},
                            {DNNL_ARG_SCRATCHPAD, c->scratch}};
    CPU_DNNL(dnnl_primitive_execute(c->prim, c->stream, 4, a), "%s", what);
    CPU_DNNL(dnnl_stream_wait(c->stream), "%s", what);
    return DLP_OK;
}

static double conv_flops(int n) { return 2.0 * n * PEAK_C * PEAK_HW * PEAK_HW * PEAK_C * 9; }

static dlp_status peak_run(peak_ctx *c, dnnl_data_type_t dt, double *gflops) {
    DLP_CHECK(conv_setup(c, PEAK_N, dt, dt, dt));
    DLP_CHECK(conv_exec(c, "peak warm-up"));
    int64_t t0 = dlp_now_ns(), t = t0;
    int reps = 0;
    while (t - t0 < PEAK_MIN_NS || reps < PEAK_MIN_REPS) {
        DLP_CHECK(conv_exec(c, "peak run"));
        reps++;
        t = dlp_now_ns();
    }
    *gflops = conv_flops(PEAK_N) * reps / (double)(t - t0);
    return DLP_OK;
}

dlp_status cpu_measure_peak(dlp_dtype precision, int threads, double *gflops) {
    *gflops = 0;
    if (precision != DLP_DTYPE_F32 && precision != DLP_DTYPE_BF16)
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "cpu computes in fp32 or bf16 (asked for %s)", dlp_dtype_name(precision));
    if (threads <= 0) {
        cpu_set_t set;
        threads = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : omp_get_num_procs();
    }
    omp_set_num_threads(threads);
    peak_ctx c = {0};
    dlp_status st = peak_run(&c, precision == DLP_DTYPE_BF16 ? dnnl_bf16 : dnnl_f32, gflops);
    peak_free(&c);
    return st;
}

// --- the work speed: the same convolution at batch 1 on one oneDNN thread per pthread, timed by CPU time ----------

// The reading is cut into SPEED_PARTS equal stretches of wall time, each thread's work and CPU time summed per
// stretch, and the median stretch taken: on this VM the cores' speed per CPU-second halves for well under a second
// now and then (about one 0.1 s reading in eight), which a step of several seconds only feels in proportion.
#define SPEED_PARTS 5

typedef struct speed_arg {
    dnnl_data_type_t ts, tw, td;
    int64_t start_ns, end_ns;
    double flop[SPEED_PARTS], cpu_s[SPEED_PARTS], wall_s;
    dlp_status st;
} speed_arg;

static double thread_cpu_s(void) {
    struct timespec ts;
    return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0 ? (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec : 0;
}

static void *speed_thread(void *p) {
    speed_arg *a = p;
    omp_set_num_threads(1);  // this thread's own OpenMP team: oneDNN runs the convolution on it alone
    peak_ctx c = {0};
    a->st = conv_setup(&c, 1, a->ts, a->tw, a->td);
    if (a->st == DLP_OK) a->st = conv_exec(&c, "speed warm-up");
    const int64_t w0 = dlp_now_ns();
    double c0 = thread_cpu_s(), cpu = 0;
    int64_t now = w0;
    for (int calls = 0; a->st == DLP_OK && (calls < 2 || now < a->end_ns); calls++) {
        a->st = conv_exec(&c, "speed run");
        now = dlp_now_ns();
        const double c1 = thread_cpu_s();
        int part = (int)((now - a->start_ns) * SPEED_PARTS / (a->end_ns - a->start_ns));
        part = part < 0 ? 0 : part >= SPEED_PARTS ? SPEED_PARTS - 1 : part;  // the call that ended in that stretch
        a->flop[part] += conv_flops(1);
        a->cpu_s[part] += c1 - c0;
        cpu += c1 - c0;
        c0 = c1;
    }
    a->wall_s = cpu > 0 ? dlp_ns_to_s(now - w0) : 0;
    peak_free(&c);
    return NULL;
}

dlp_status cpu_measure_speed(dlp_dtype precision, int threads, double seconds, double *gflops_per_cpu_s, double *share) {
    *gflops_per_cpu_s = 0;
    if (share) *share = 0;
    dnnl_data_type_t ts, tw, td;
    switch (precision) {
    case DLP_DTYPE_F32: ts = tw = td = dnnl_f32; break;
    case DLP_DTYPE_BF16: ts = tw = td = dnnl_bf16; break;
    case DLP_DTYPE_I8: ts = td = dnnl_u8, tw = dnnl_s8; break;
    default:
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "cpu: no work speed at %s (fp32, bf16 or int8)", dlp_dtype_name(precision));
    }
    if (threads <= 0) {
        cpu_set_t set;
        threads = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : omp_get_num_procs();
    }
    if (threads > 64) threads = 64;
    speed_arg a[64];
    pthread_t t[64];
    // the stretches start after a set-up allowance (the primitive from oneDNN's cache, the memories, a warm-up call)
    const int64_t start = dlp_now_ns() + 20000000, end = start + (int64_t)(seconds * 1e9);
    int started = 0;
    for (int i = 0; i < threads; i++) {
        a[i] = (speed_arg){.ts = ts, .tw = tw, .td = td, .start_ns = start, .end_ns = end, .st = DLP_OK};
        if (pthread_create(&t[i], NULL, speed_thread, &a[i]) != 0) break;
        started++;
    }
    double flop[SPEED_PARTS] = {0}, cpu[SPEED_PARTS] = {0}, cpu_all = 0, wall = 0;
    dlp_status st = started ? DLP_OK : DLP_ERR(DLP_ERR_IO, "cpu work speed: no thread could start");
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        if (a[i].st != DLP_OK && st == DLP_OK) st = a[i].st;
        for (int k = 0; k < SPEED_PARTS; k++) {
            flop[k] += a[i].flop[k];
            cpu[k] += a[i].cpu_s[k];
            cpu_all += a[i].cpu_s[k];
        }
        wall += a[i].wall_s;
    }
    double rate[SPEED_PARTS];
    int n = 0;
    for (int k = 0; k < SPEED_PARTS; k++)
        if (cpu[k] > 0) rate[n++] = flop[k] / cpu[k] / 1e9;
    if (st == DLP_OK && n) *gflops_per_cpu_s = dlp_stats_median_f64(rate, (size_t)n);
    if (st == DLP_OK && share && wall > 0) *share = cpu_all / wall;
    return st;
}
