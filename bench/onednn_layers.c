// bench/onednn_layers.c: ResNet-50's training step as oneDNN primitives alone, one by one, so that two oneDNN
// versions can be compared kernel by kernel on the same machine. Written against oneDNN 3.x's C API (dlperf's
// one code path: primitive-descriptor constructors, opaque memory descriptors); bench/onednn_versions.sh builds
// it against the 3.x that scripts/setup.sh installs and builds its last dual-API form (commit a8c615c) against
// Debian's oneDNN 2.6 when that is installed, and runs both.
//
// Per convolution of ResNet-50 (torchvision's v1.5 layout, the 53 convolutions, each shape timed once and
// weighted by how often it occurs): forward (forward_training, layouts "any"), backward data and backward
// weights (the forward's activation layouts kept, weights "any"), the batch norm after it (forward training and
// backward, BN+ReLU fused where a ReLU follows, as dlperf does), the weight casts a training step makes (fp32
// OIHW master -> the forward's and the backward-data's weight layout and type; the weight gradient back to fp32
// OIHW) and, per bottleneck block, the residual add with its ReLU (forward) and the ReLU backward.
// Algorithms as dlperf's training plan picks them: direct forward; Winograd for 3x3 stride-1 backward passes
// where the library has it (2.x, fp32), else direct (--no-winograd: direct everywhere).
//
//   onednn_layers [--batch 32] [--size 224] [--precision fp32|bf16] [--reps 3] [--no-winograd] [--json]
//
// Prints one line per (shape, op): milliseconds (median of --reps after one warm-up), the implementation oneDNN
// chose, and for the forward a checksum of the output (the same deterministic inputs in every build: two
// versions must agree to rounding). OMP_NUM_THREADS sets the threads; ONEDNN_MAX_CPU_ISA caps the ISA.
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if DNNL_VERSION_MAJOR < 3
#error "bench/onednn_layers.c is written against oneDNN 3.x's C API (its 2.x form: git show a8c615c:bench/onednn_layers.c)"
#endif
typedef dnnl_memory_desc_t md_t;  // an opaque handle (free_md)
#define CMD(x) (x)

static dnnl_engine_t eng;
static dnnl_stream_t strm;
static int reps = 3;

#define CK(call)                                                                           \
    do {                                                                                   \
        dnnl_status_t s_ = (call);                                                         \
        if (s_ != dnnl_success) {                                                          \
            fprintf(stderr, "onednn_layers: %s failed (status %d) at line %d\n", #call, (int)s_, __LINE__); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void md_tag(md_t *md, int nd, const int64_t *dims_, dnnl_data_type_t dt, dnnl_format_tag_t tag) {
    dnnl_dims_t dims = {0};
    for (int i = 0; i < nd; i++) dims[i] = dims_[i];
    CK(dnnl_memory_desc_create_with_tag(md, nd, dims, dt, tag));
}

static const_dnnl_memory_desc_t pd_md(const_dnnl_primitive_desc_t pd, dnnl_query_t q) {
    return dnnl_primitive_desc_query_md(pd, q, 0);
}

static const char *pd_impl(const_dnnl_primitive_desc_t pd) {
    const char *s = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
    return s;
}

static int md_equal(const_dnnl_memory_desc_t a, const_dnnl_memory_desc_t b) { return dnnl_memory_desc_equal(a, b); }

static void md_dims(const_dnnl_memory_desc_t md, int *nd, int64_t *dims) {
    CK(dnnl_memory_desc_query(md, dnnl_query_ndims_s32, nd));
    const dnnl_dims_t *dp;
    CK(dnnl_memory_desc_query(md, dnnl_query_dims, &dp));
    for (int i = 0; i < *nd; i++) dims[i] = (*dp)[i];
}

// A plain fp32 memory (a, ab, abc or abcd) of md's logical shape; *pmd is its descriptor (free_md it).
static dnnl_memory_t plain_like(const_dnnl_memory_desc_t md, md_t *pmd) {
    static const dnnl_format_tag_t plain[] = {dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd};
    int nd;
    int64_t dims[DNNL_MAX_NDIMS];
    md_dims(md, &nd, dims);
    md_tag(pmd, nd, dims, dnnl_f32, plain[nd]);
    dnnl_memory_t pm;
    CK(dnnl_memory_create(&pm, CMD(*pmd), eng, DNNL_MEMORY_ALLOCATE));
    return pm;
}

// from (in fmd) -> to (in tmd), once, waited for.
static void reorder_once(dnnl_memory_t from, const_dnnl_memory_desc_t fmd, dnnl_memory_t to,
                         const_dnnl_memory_desc_t tmd) {
    dnnl_primitive_desc_t rpd;
    CK(dnnl_reorder_primitive_desc_create(&rpd, fmd, eng, tmd, eng, NULL));
    dnnl_primitive_t r;
    CK(dnnl_primitive_create(&r, rpd));
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    CK(dnnl_primitive_execute(r, strm, 2, a));
    CK(dnnl_stream_wait(strm));
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
}

static void free_md(md_t *md) {
    if (*md) dnnl_memory_desc_destroy(*md);
    *md = NULL;
}

// Memory for md, filled with a deterministic pattern (seed) in its logical order through a plain fp32 copy
// (seed 0: zeros).
static dnnl_memory_t mem_new(const_dnnl_memory_desc_t md, unsigned seed, float scale) {
    dnnl_memory_t m;
    CK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
    void *p = NULL;
    CK(dnnl_memory_get_data_handle(m, &p));
    memset(p, 0, dnnl_memory_desc_get_size(md));
    if (seed == 0) return m;
    md_t pmd;
    dnnl_memory_t pm = plain_like(md, &pmd);
    float *pf;
    CK(dnnl_memory_get_data_handle(pm, (void **)&pf));
    size_t n = dnnl_memory_desc_get_size(CMD(pmd)) / 4;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        pf[i] = scale * ((float)(x & 0xffff) / 32768.f - 1.f);
    }
    reorder_once(pm, CMD(pmd), m, md);
    dnnl_memory_destroy(pm);
    free_md(&pmd);
    return m;
}

// Sum of |md's elements| (padding is zero), via a reorder to plain fp32.
static double mem_sum(dnnl_memory_t m, const_dnnl_memory_desc_t md) {
    md_t pmd;
    dnnl_memory_t pm = plain_like(md, &pmd);
    reorder_once(m, md, pm, CMD(pmd));
    float *pf;
    CK(dnnl_memory_get_data_handle(pm, (void **)&pf));
    double s = 0;
    size_t n = dnnl_memory_desc_get_size(CMD(pmd)) / 4;
    for (size_t i = 0; i < n; i++) s += fabs((double)pf[i]);
    dnnl_memory_destroy(pm);
    free_md(&pmd);
    return s;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Runs prim with args: one warm-up, then reps timed runs; returns the median in ms.
static double timeit(dnnl_primitive_desc_t pd, int nargs, dnnl_exec_arg_t *args) {
    dnnl_primitive_t prim;
    CK(dnnl_primitive_create(&prim, pd));
    double t[64];
    int n = reps < 64 ? reps : 64;
    for (int i = -1; i < n; i++) {
        double t0 = now_ms();
        CK(dnnl_primitive_execute(prim, strm, nargs, args));
        CK(dnnl_stream_wait(strm));
        if (i >= 0) t[i] = now_ms() - t0;
    }
    dnnl_primitive_destroy(prim);
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    return t[n / 2];
}

typedef struct {
    const char *name;
    int ic, oc, k, s, in_hw, count, relu;  // relu: a ReLU follows its BN (fused); else an add (+ReLU) does
} conv_t;

// ResNet-50 at 224 px (spatial sizes scale with --size): the distinct shapes and how many times each occurs.
static const conv_t convs[] = {
    {"conv1 7x7/2 3-64", 3, 64, 7, 2, 224, 1, 1},
    {"l1 1x1 64-64", 64, 64, 1, 1, 56, 1, 1},
    {"l1 3x3 64-64", 64, 64, 3, 1, 56, 3, 1},
    {"l1 1x1 64-256", 64, 256, 1, 1, 56, 4, 0},
    {"l1 1x1 256-64", 256, 64, 1, 1, 56, 2, 1},
    {"l2 1x1 256-128", 256, 128, 1, 1, 56, 1, 1},
    {"l2 3x3/2 128-128", 128, 128, 3, 2, 56, 1, 1},
    {"l2 1x1 128-512", 128, 512, 1, 1, 28, 4, 0},
    {"l2 ds 1x1/2 256-512", 256, 512, 1, 2, 56, 1, 0},
    {"l2 1x1 512-128", 512, 128, 1, 1, 28, 3, 1},
    {"l2 3x3 128-128", 128, 128, 3, 1, 28, 3, 1},
    {"l3 1x1 512-256", 512, 256, 1, 1, 28, 1, 1},
    {"l3 3x3/2 256-256", 256, 256, 3, 2, 28, 1, 1},
    {"l3 1x1 256-1024", 256, 1024, 1, 1, 14, 6, 0},
    {"l3 ds 1x1/2 512-1024", 512, 1024, 1, 2, 28, 1, 0},
    {"l3 1x1 1024-256", 1024, 256, 1, 1, 14, 5, 1},
    {"l3 3x3 256-256", 256, 256, 3, 1, 14, 5, 1},
    {"l4 1x1 1024-512", 1024, 512, 1, 1, 14, 1, 1},
    {"l4 3x3/2 512-512", 512, 512, 3, 2, 14, 1, 1},
    {"l4 1x1 512-2048", 512, 2048, 1, 1, 7, 3, 0},
    {"l4 ds 1x1/2 1024-2048", 1024, 2048, 1, 2, 14, 1, 0},
    {"l4 1x1 2048-512", 2048, 512, 1, 1, 7, 2, 1},
    {"l4 3x3 512-512", 512, 512, 3, 1, 7, 2, 1},
};
#define NCONV ((int)(sizeof convs / sizeof convs[0]))

enum { OP_FWD, OP_BWD_D, OP_BWD_W, OP_BN_FWD, OP_BN_BWD, OP_WCAST, OP_WGRAD, OP_ADD_FWD, OP_RELU_BWD, NOPS };
static const char *op_name[NOPS] = {"conv fwd",  "conv bwd data", "conv bwd weights", "bn fwd",  "bn bwd",
                                    "weight casts", "weight grad to fp32", "add+relu fwd", "relu bwd"};
static double total[NOPS];
static int json = 0;

// One timed primitive of c; gflop: its floating-point work (a convolution pass's, for the GFLOP/s), else 0.
static void report_work(const conv_t *c, int op, double ms, const char *impl, double checksum, double gflop) {
    total[op] += ms * c->count;
    if (json)
        printf("{\"layer\":\"%s\",\"count\":%d,\"op\":\"%s\",\"ms\":%.4f,\"impl\":\"%s\",\"checksum\":%.6e,"
               "\"gflop\":%.9g}\n", c->name, c->count, op_name[op], ms, impl, checksum, gflop);
    else
        printf("%-24s x%d  %-20s %9.3f ms %7.0f GFLOP/s  %-30s %.6g\n", c->name, c->count, op_name[op], ms,
               gflop > 0 && ms > 0 ? gflop / ms * 1e3 : 0, impl, checksum);
}

static void report(const conv_t *c, int op, double ms, const char *impl, double checksum) {
    report_work(c, op, ms, impl, checksum, 0);
}

// A reorder src_md -> dst_md timed (NULL-free: returns 0 when the two are equal).
static double time_reorder(const_dnnl_memory_desc_t smd, const_dnnl_memory_desc_t dmd, const char **impl) {
    if (md_equal(smd, dmd)) {
        *impl = "none";
        return 0;
    }
    dnnl_primitive_desc_t rpd;
    CK(dnnl_reorder_primitive_desc_create(&rpd, smd, eng, dmd, eng, NULL));
    dnnl_memory_t s = mem_new(smd, 7, 0.1f), d = mem_new(dmd, 0, 0);
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, s}, {DNNL_ARG_TO, d}};
    double ms = timeit(rpd, 2, a);
    static char buf[16][96];
    static int k;
    snprintf(buf[k % 16], sizeof buf[0], "%s", pd_impl(rpd));
    *impl = buf[k++ % 16];
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(s);
    dnnl_memory_destroy(d);
    return ms;
}

// A backward convolution (weights: 0 data, 1 weights) with the forward pd as hint: Winograd first when asked and
// the library has it, else direct. Exits when neither exists.
static dnnl_primitive_desc_t conv_bwd_pd(int weights, int wino, const_dnnl_memory_desc_t xmd, const_dnnl_memory_desc_t wmd,
                                         const_dnnl_memory_desc_t ymd, const dnnl_dims_t st, const dnnl_dims_t pl,
                                         const_dnnl_primitive_desc_t fpd, const char *name) {
    dnnl_primitive_desc_t pd = NULL;
    for (int alg = wino ? 0 : 1; alg < 2 && !pd; alg++) {
        dnnl_alg_kind_t ak = alg == 0 ? dnnl_convolution_winograd : dnnl_convolution_direct;
        dnnl_status_t s;
        const dnnl_dims_t dil = {0, 0};
        s = weights ? dnnl_convolution_backward_weights_primitive_desc_create(&pd, eng, ak, xmd, wmd, NULL, ymd, st, dil,
                                                                               pl, pl, fpd, NULL)
                    : dnnl_convolution_backward_data_primitive_desc_create(&pd, eng, ak, xmd, wmd, ymd, st, dil, pl, pl,
                                                                           fpd, NULL);
        if (s != dnnl_success) pd = NULL;
    }
    if (!pd) {
        fprintf(stderr, "onednn_layers: no backward-%s convolution for %s\n", weights ? "weights" : "data", name);
        exit(1);
    }
    return pd;
}

static void run_conv(const conv_t *c, int batch, int size, dnnl_data_type_t dt, int winograd) {
    const int64_t ihw = (int64_t)c->in_hw * size / 224, pad = c->k / 2;
    const int64_t ohw = (ihw + 2 * pad - c->k) / c->s + 1;
    int64_t sd[4] = {batch, c->ic, ihw, ihw}, wd[4] = {c->oc, c->ic, c->k, c->k}, dd[4] = {batch, c->oc, ohw, ohw};
    dnnl_dims_t st = {c->s, c->s}, pl = {pad, pad}, dil = {0, 0};
    // each of forward, backward data and backward weights: 2 FLOPs per multiply-add
    const double gflop = 2e-9 * (double)batch * (double)(ohw * ohw) * c->oc * c->ic * c->k * c->k;
    md_t src, wei, dst, wplain;
    md_tag(&src, 4, sd, dt, dnnl_format_tag_any);
    md_tag(&wei, 4, wd, dt, dnnl_format_tag_any);
    md_tag(&dst, 4, dd, dt, dnnl_format_tag_any);
    md_tag(&wplain, 4, wd, dnnl_f32, dnnl_abcd);
    const int wino_ok = winograd && c->k == 3 && c->s == 1 && dt == dnnl_f32;
    // forward
    dnnl_primitive_desc_t fpd;
    CK(dnnl_convolution_forward_primitive_desc_create(&fpd, eng, dnnl_forward_training, dnnl_convolution_direct,
                                                      CMD(src), CMD(wei), NULL, CMD(dst), st, dil, pl, pl, NULL));
    const_dnnl_memory_desc_t xmd = pd_md(fpd, dnnl_query_src_md), fwmd = pd_md(fpd, dnnl_query_weights_md),
                             ymd = pd_md(fpd, dnnl_query_dst_md);
    dnnl_memory_t x = mem_new(xmd, 1, 1.f), w = mem_new(fwmd, 2, 0.05f), y = mem_new(ymd, 0, 0);
    dnnl_memory_t dy = mem_new(ymd, 3, 0.01f), dx = mem_new(xmd, 0, 0);
    {
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}};
        double ms = timeit(fpd, 3, a);
        report_work(c, OP_FWD, ms, pd_impl(fpd), mem_sum(y, ymd), gflop);
    }
    // backward data (not for the first layer: nothing flows into the image)
    const_dnnl_memory_desc_t bwmd = NULL;
    dnnl_primitive_desc_t bdpd = NULL;
    if (c->ic != 3) {
        bdpd = conv_bwd_pd(0, wino_ok, xmd, CMD(wei), ymd, st, pl, fpd, c->name);
        bwmd = pd_md(bdpd, dnnl_query_weights_md);
        dnnl_memory_t bw = mem_new(bwmd, 2, 0.05f);
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, bw}, {DNNL_ARG_DIFF_SRC, dx}};
        report_work(c, OP_BWD_D, timeit(bdpd, 3, a), pd_impl(bdpd), 0, gflop);
        dnnl_memory_destroy(bw);
    }
    // backward weights
    {
        dnnl_primitive_desc_t bwpd = conv_bwd_pd(1, wino_ok, xmd, CMD(wei), ymd, st, pl, fpd, c->name);
        const_dnnl_memory_desc_t dwmd = pd_md(bwpd, dnnl_query_diff_weights_md);
        dnnl_memory_t dw = mem_new(dwmd, 0, 0);
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_WEIGHTS, dw}};
        report_work(c, OP_BWD_W, timeit(bwpd, 3, a), pd_impl(bwpd), 0, gflop);
        // the weight gradient back to the fp32 master's layout, the casts of the updated master
        const char *impl;
        double ms = time_reorder(dwmd, CMD(wplain), &impl);
        report(c, OP_WGRAD, ms, impl, 0);
        const char *i1, *i2 = "none";
        double m1 = time_reorder(CMD(wplain), fwmd, &i1), m2 = 0;
        if (bwmd && !md_equal(bwmd, fwmd)) m2 = time_reorder(CMD(wplain), bwmd, &i2);
        char both[160];
        snprintf(both, sizeof both, "%s+%s", i1, i2);
        report(c, OP_WCAST, m1 + m2, both, 0);
        dnnl_memory_destroy(dw);
        dnnl_primitive_desc_destroy(bwpd);
    }
    // batch norm on the output (+ ReLU fused where one follows), forward training and backward
    {
        unsigned flags = dnnl_use_scale | dnnl_use_shift | (c->relu ? dnnl_fuse_norm_relu : 0);
        dnnl_primitive_desc_t bfpd, bbpd;
        CK(dnnl_batch_normalization_forward_primitive_desc_create(&bfpd, eng, dnnl_forward_training, ymd, ymd, 1e-5f,
                                                                  flags, NULL));
        CK(dnnl_batch_normalization_backward_primitive_desc_create(&bbpd, eng, dnnl_backward, ymd, ymd, ymd, 1e-5f,
                                                                   flags, bfpd, NULL));
        md_t vmd;
        int64_t C = c->oc;
        md_tag(&vmd, 1, &C, dnnl_f32, dnnl_a);
        dnnl_memory_t scale = mem_new(CMD(vmd), 4, 1.f), shift = mem_new(CMD(vmd), 5, 1.f),
                      mean = mem_new(CMD(vmd), 0, 0), var = mem_new(CMD(vmd), 0, 0),
                      dscale = mem_new(CMD(vmd), 0, 0), dshift = mem_new(CMD(vmd), 0, 0);
        dnnl_memory_t z = mem_new(ymd, 0, 0), dz = mem_new(ymd, 6, 0.01f), ws = NULL;
        if (c->relu) ws = mem_new(pd_md(bfpd, dnnl_query_workspace_md), 0, 0);
        dnnl_exec_arg_t a[7] = {{DNNL_ARG_SRC, y},   {DNNL_ARG_DST, z},       {DNNL_ARG_SCALE, scale},
                                {DNNL_ARG_SHIFT, shift}, {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var},
                                {DNNL_ARG_WORKSPACE, ws}};
        report(c, OP_BN_FWD, timeit(bfpd, c->relu ? 7 : 6, a), pd_impl(bfpd), 0);
        dnnl_exec_arg_t b[10] = {{DNNL_ARG_SRC, y},      {DNNL_ARG_MEAN, mean},         {DNNL_ARG_VARIANCE, var},
                                {DNNL_ARG_DIFF_DST, dz}, {DNNL_ARG_SCALE, scale},       {DNNL_ARG_DIFF_SRC, z},
                                {DNNL_ARG_DIFF_SCALE, dscale}, {DNNL_ARG_DIFF_SHIFT, dshift}, {DNNL_ARG_WORKSPACE, ws}};
        int nb = c->relu ? 9 : 8;
        report(c, OP_BN_BWD, timeit(bbpd, nb, b), pd_impl(bbpd), 0);
        dnnl_memory_t ms_[] = {scale, shift, mean, var, dscale, dshift, z, dz};
        for (size_t i = 0; i < sizeof ms_ / sizeof ms_[0]; i++) dnnl_memory_destroy(ms_[i]);
        if (ws) dnnl_memory_destroy(ws);
        dnnl_primitive_desc_destroy(bfpd);
        dnnl_primitive_desc_destroy(bbpd);
        free_md(&vmd);
    }
    // a bottleneck's last convolution: its BN output + the shortcut, then ReLU (forward: binary add with a ReLU
    // post-op; backward: the ReLU backward from its output)
    if (!c->relu && !strstr(c->name, " ds ")) {
        dnnl_primitive_attr_t attr;
        dnnl_post_ops_t po;
        CK(dnnl_primitive_attr_create(&attr));
        CK(dnnl_post_ops_create(&po));
        CK(dnnl_post_ops_append_eltwise(po, dnnl_eltwise_relu, 0.f, 0.f));
        CK(dnnl_primitive_attr_set_post_ops(attr, po));
        dnnl_primitive_desc_t apd, rpd, rfpd;
        CK(dnnl_binary_primitive_desc_create(&apd, eng, dnnl_binary_add, ymd, ymd, ymd, attr));
        CK(dnnl_eltwise_forward_primitive_desc_create(&rfpd, eng, dnnl_forward_training,
                                                      dnnl_eltwise_relu_use_dst_for_bwd, ymd, ymd, 0.f, 0.f, NULL));
        CK(dnnl_eltwise_backward_primitive_desc_create(&rpd, eng, dnnl_eltwise_relu_use_dst_for_bwd, ymd, ymd, ymd,
                                                       0.f, 0.f, rfpd, NULL));
        dnnl_memory_t z = mem_new(ymd, 0, 0);
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC_0, y}, {DNNL_ARG_SRC_1, dy}, {DNNL_ARG_DST, z}};
        report(c, OP_ADD_FWD, timeit(apd, 3, a), pd_impl(apd), 0);
        dnnl_exec_arg_t b[3] = {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DST, y}, {DNNL_ARG_DIFF_SRC, z}};
        report(c, OP_RELU_BWD, timeit(rpd, 3, b), pd_impl(rpd), 0);
        dnnl_memory_destroy(z);
        dnnl_primitive_desc_destroy(apd);
        dnnl_primitive_desc_destroy(rpd);
        dnnl_primitive_desc_destroy(rfpd);
        dnnl_post_ops_destroy(po);
        dnnl_primitive_attr_destroy(attr);
    }
    dnnl_memory_t mm[] = {x, w, y, dy, dx};
    for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++) dnnl_memory_destroy(mm[i]);
    if (bdpd) dnnl_primitive_desc_destroy(bdpd);
    dnnl_primitive_desc_destroy(fpd);
    free_md(&src);
    free_md(&wei);
    free_md(&dst);
    free_md(&wplain);
}

int main(int argc, char **argv) {
    int batch = 32, size = 224, winograd = 1;
    dnnl_data_type_t dt = dnnl_f32;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--batch") && v) batch = atoi(argv[++i]);
        else if (!strcmp(a, "--size") && v) size = atoi(argv[++i]);
        else if (!strcmp(a, "--reps") && v) reps = atoi(argv[++i]);
        else if (!strcmp(a, "--only") && v) only = argv[++i];
        else if (!strcmp(a, "--precision") && v) {
            ++i;
            if (!strcmp(v, "bf16")) dt = dnnl_bf16;
            else if (strcmp(v, "fp32")) {
                fprintf(stderr, "onednn_layers: --precision %s: expected fp32 or bf16\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--no-winograd")) winograd = 0;
        else if (!strcmp(a, "--json")) json = 1;
        else {
            fprintf(stderr,
                    "usage: onednn_layers [--batch 32] [--size 224] [--precision fp32|bf16] [--reps 3] "
                    "[--no-winograd] [--only SUBSTRING] [--json]\n");
            return 2;
        }
    }
    if (batch < 1 || size < 32 || size % 32 || reps < 1) {
        fprintf(stderr, "onednn_layers: --batch >= 1, --size a multiple of 32, --reps >= 1\n");
        return 2;
    }
    const dnnl_version_t *ver = dnnl_version();
    CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    const char *isa = getenv("ONEDNN_MAX_CPU_ISA");
    if (json)
        printf("{\"onednn\":\"%d.%d.%d\",\"batch\":%d,\"size\":%d,\"precision\":\"%s\",\"max_isa\":\"%s\"}\n",
               ver->major, ver->minor, ver->patch, batch, size, dt == dnnl_bf16 ? "bf16" : "fp32", isa ? isa : "");
    else
        printf("oneDNN %d.%d.%d, ResNet-50 training step, batch %d, %dx%d, %s, median of %d\n", ver->major, ver->minor,
               ver->patch, batch, size, size, dt == dnnl_bf16 ? "bf16" : "fp32", reps);
    for (int i = 0; i < NCONV; i++)
        if (!only || strstr(convs[i].name, only)) run_conv(&convs[i], batch, size, dt, winograd);
    double all = 0;
    for (int o = 0; o < NOPS; o++) all += total[o];
    for (int o = 0; o < NOPS; o++) {
        if (json) printf("{\"total\":\"%s\",\"ms\":%.3f}\n", op_name[o], total[o]);
        else printf("total %-20s %9.1f ms\n", op_name[o], total[o]);
    }
    if (json) printf("{\"total\":\"step\",\"ms\":%.3f}\n", all);
    else printf("total %-20s %9.1f ms\n", "step", all);
    dnnl_stream_destroy(strm);
    dnnl_engine_destroy(eng);
    return 0;
}
