// Data-parallel training is the average of the ranks' gradients: `mpirun -np 2` of this binary (worker mode, one
// compute thread per rank, each rank on its half of a batch, run/step with the mpi communicator) ends with the same
// weights as one process that runs the two half-batches on two plans (BN statistics per half, as PyTorch DDP keeps
// them per rank), averages their gradients and applies the update to both. Checked on ref (tolerance 0: the same
// arithmetic in the same order) and on cpu/oneDNN (1 thread: deterministic; stated tolerance 1e-6 relative). Also:
// the ranks' shards of an epoch cover it exactly once, for several world sizes. Skipped where the build has no MPI
// or mpirun is missing. The gradients go through MPI_Iallreduce and through comm_mpi's pipelined ring, which is also
// checked alone at 2, 3 and 4 ranks, bit for bit.
// Main file: src/dist/comm_mpi.c; also src/run/step.c, src/data/dataset.c (shards).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "dist/comm.h"
#include "nn/resnet.h"
#include "run/step.h"
#include "testutil.h"

#define HALF 2       // samples per rank
#define RANKS 2
#define CLASSES 4
#define STEPS 3

static const char *g_self;  // argv[0]

typedef struct problem {
    dlp_net net;
    float *params, *bufs;
    float *x;           // RANKS * HALF samples
    int32_t labels[RANKS * HALF];
    int64_t in_numel;   // per sample
} problem;

static void problem_open(problem *p) {
    memset(p, 0, sizeof *p);
    if (dlp_model_build("resnet-mini", CLASSES, 32, &p->net) != DLP_OK) abort();
    p->in_numel = dlp_net_layer_numel(&p->net, 0);
    p->params = malloc((size_t)p->net.param_count * 4);
    p->bufs = malloc((size_t)p->net.buf_count * 4);
    p->x = malloc((size_t)(RANKS * HALF * p->in_numel) * 4);
    if (!p->params || !p->bufs || !p->x) abort();
    dlp_resnet_init_params(&p->net, 11, 0, p->params, p->bufs);
    dlp_rng r;
    dlp_rng_init(&r, 5, 2);
    dlp_step_fill_random(p->x, RANKS * HALF * p->in_numel, DLP_DTYPE_F32, &r);
    for (int i = 0; i < RANKS * HALF; i++) p->labels[i] = (int32_t)dlp_rng_below(&r, CLASSES);
}

static void problem_close(problem *p) {
    free(p->params);
    free(p->bufs);
    free(p->x);
    dlp_net_free(&p->net);
}

static const dlp_sgd k_sgd = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f};

// overlap: gradient buckets of 5000 elements announced during backward and reduced while it goes on.
static dlp_plan *open_plan(problem *p, const char *device, dlp_step_overlap *overlap) {
    const dlp_backend *b = dlp_backend_find(device, NULL);
    dlp_plan_cfg cfg = {.batch = HALF, .train = 1, .precision = DLP_DTYPE_F32, .threads = 1};
    if (overlap) {
        cfg.bucket_elems = 5000;
        cfg.on_bucket = dlp_step_on_bucket;
        cfg.bucket_ctx = overlap;
    }
    dlp_plan *pl = NULL;
    if (!b || dlp_plan_create(b, &p->net, &cfg, &pl) != DLP_OK || dlp_plan_set_params(pl, p->params, p->bufs) != DLP_OK) {
        dlp_err_print(stderr);
        return NULL;
    }
    return pl;
}

// ---- worker: one rank of `mpirun -np 2 <self> --worker DEVICE OUT whole|buckets` --------------------------------

static int worker(const char *device, const char *out, int buckets) {
    dlp_comm *c = NULL;
    if (dlp_comm_open("mpi", &c) != DLP_OK) {
        dlp_err_print(stderr);
        return 1;
    }
    const int rank = dlp_comm_rank(c);
    problem p;
    problem_open(&p);
    dlp_step_overlap *ov = NULL;
    if (buckets && dlp_step_overlap_new(c, &ov) != DLP_OK) abort();
    dlp_plan *pl = open_plan(&p, device, ov);
    int rc = pl ? 0 : 1;
    if (pl && ov) dlp_step_overlap_bind(ov, pl);
    const dlp_step_cfg sc = {.plan = pl, .comm = c, .overlap = ov, .train = 1};
    const dlp_step_batch sb = {.input = p.x + (size_t)rank * HALF * p.in_numel, .n = HALF, .labels = p.labels + rank * HALF,
                               .sgd = k_sgd};
    for (int s = 0; !rc && s < STEPS; s++) {
        dlp_step_result r;
        if (dlp_step_run(&sc, &sb, -1, &r) != DLP_OK) {
            dlp_err_print(stderr);
            rc = 1;
        }
    }
    if (!rc && rank == 0) {
        float *w = malloc((size_t)p.net.param_count * 4);
        FILE *f = fopen(out, "wb");
        rc = !w || !f || dlp_plan_get_params(pl, w, NULL) != DLP_OK ||
             fwrite(w, 4, (size_t)p.net.param_count, f) != (size_t)p.net.param_count;
        if (f && fclose(f)) rc = 1;
        free(w);
    }
    int64_t nb = 0, hidden = 0;
    dlp_step_overlap_stats(ov, &nb, &hidden);
    if (!rc && buckets && nb < 2 * STEPS) {
        fprintf(stderr, "only %lld buckets announced in %d steps\n", (long long)nb, STEPS);
        rc = 1;
    }
    dlp_step_overlap_free(ov);
    dlp_plan_free(pl);
    problem_close(&p);
    if (rc) dlp_comm_abort(c, 1);
    dlp_comm_free(c);
    return rc;
}

// ---- ring worker: one rank of `mpirun -np N <self> --ring-worker` under DLPERF_MPI_ALLREDUCE=pipelined --------------
// Allreduces of several sizes through the pipelined ring (4 KiB segments: up to 64 per chunk, larger ones beyond),
// four in flight at once and waited for in the other order, in two rounds (the second on the rings the first left,
// in other sizes: their buffers grown or reused); the chunk and segment lengths leave remainders at every N. The
// values are small integers, so any order of the additions gives the same sum: each result must equal sum x (1/N)
// bit for bit.
#define RING_BUFS 4
static const int64_t k_ring_counts[2][RING_BUFS] = {{1031, 5003, 70001, 20011}, {300007, 1029, 12289, 4099}};

static float ring_value(int rank, int64_t i) { return (float)((i * 7 + rank * 13) % 101) - 50.0f; }

static int ring_worker(void) {
    dlp_comm *c = NULL;
    if (dlp_comm_open("mpi", &c) != DLP_OK) {
        dlp_err_print(stderr);
        return 1;
    }
    const int rank = dlp_comm_rank(c), n = dlp_comm_size(c);
    int rc = 0;
    for (int round = 0; round < 2 && !rc; round++) {
        float *buf[RING_BUFS];
        dlp_comm_req *req[RING_BUFS];
        for (int b = 0; b < RING_BUFS; b++) {
            const int64_t cnt = k_ring_counts[round][b];
            if (!(buf[b] = malloc((size_t)cnt * 4))) abort();
            for (int64_t i = 0; i < cnt; i++) buf[b][i] = ring_value(rank, i);
            req[b] = NULL;
            if (!rc && dlp_comm_allreduce_start(c, buf[b], cnt, NULL, &req[b]) != DLP_OK) rc = 1;
        }
        for (int b = RING_BUFS - 1; b >= 0; b--)
            if (!rc && dlp_comm_wait(c, req[b]) != DLP_OK) rc = 1;
        if (rc) dlp_err_print(stderr);
        for (int b = 0; b < RING_BUFS && !rc; b++)
            for (int64_t i = 0; i < k_ring_counts[round][b]; i++) {
                float sum = 0;
                for (int r = 0; r < n; r++) sum += ring_value(r, i);
                const float want = sum * (1.0f / (float)n);
                if (memcmp(&buf[b][i], &want, sizeof want) != 0) {
                    fprintf(stderr, "rank %d of %d, round %d, allreduce of %lld: element %lld is %.9g, not %.9g\n", rank,
                            n, round, (long long)k_ring_counts[round][b], (long long)i, buf[b][i], want);
                    rc = 1;
                    break;
                }
            }
        for (int b = 0; b < RING_BUFS; b++) free(buf[b]);
    }
    if (rc) dlp_comm_abort(c, 1);
    dlp_comm_free(c);
    return rc;
}

// ---- the reference: two plans in one process, gradients averaged by hand -----------------------------------------

static void reference(const char *device, float *w) {
    problem p;
    problem_open(&p);
    dlp_plan *pl[RANKS];
    for (int r = 0; r < RANKS; r++) assert_non_null(pl[r] = open_plan(&p, device, NULL));
    const int64_t np = p.net.param_count;
    for (int s = 0; s < STEPS; s++) {
        for (int r = 0; r < RANKS; r++) {
            dlp_loss_out lo;
            assert_int_equal(dlp_plan_set_input(pl[r], p.x + (size_t)r * HALF * p.in_numel, HALF), DLP_OK);
            assert_int_equal(dlp_plan_forward(pl[r], DLP_PASS_TRAIN), DLP_OK);
            assert_int_equal(dlp_plan_loss(pl[r], p.labels + r * HALF, 0.0f, &lo), DLP_OK);
            assert_int_equal(dlp_plan_backward(pl[r], NULL), DLP_OK);
        }
        float *g0 = dlp_plan_grad_buffer(pl[0]), *g1 = dlp_plan_grad_buffer(pl[1]);
        for (int64_t i = 0; i < np; i++) g0[i] = g1[i] = (g0[i] + g1[i]) * (1.0f / RANKS);
        for (int r = 0; r < RANKS; r++) assert_int_equal(dlp_plan_update(pl[r], &k_sgd), DLP_OK);
    }
    assert_int_equal(dlp_plan_get_params(pl[0], w, NULL), DLP_OK);
    for (int r = 0; r < RANKS; r++) dlp_plan_free(pl[r]);
    problem_close(&p);
}

static int have_mpirun(void) {
#ifdef DLP_HAVE_MPI
    return system("command -v mpirun >/dev/null 2>&1") == 0;
#else
    return 0;
#endif
}

// ring: the allreduce through comm_mpi's pipelined ring of its own (from 4 KiB on, 4 KiB segments: resnet-mini's
// gradients are below the 1 MiB where it starts by default) instead of MPI_Iallreduce
static void check_device_algo(const char *device, int buckets, int ring, double tol) {
    if (!have_mpirun()) {
        printf("skipped: this build has no MPI, or mpirun is missing\n");
        skip();
    }
    if (!dlp_backend_find(device, NULL)) {
        dlp_err_clear();
        printf("skipped: no %s backend in this build\n", device);
        return;
    }
    char dir[512], out[600], cmd[2048];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/w.bin", dir);
    // Open MPI as root needs its allow switches; two ranks on two cores may need oversubscription; one thread each.
    // Under the sanitizer pass, leak checking stays off in the workers: Open MPI keeps its allocations to exit.
    snprintf(cmd, sizeof cmd,
             "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:detect_leaks=0\" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
             "OMP_NUM_THREADS=1 %s timeout 120 mpirun --oversubscribe -np %d '%s' --worker %s '%s' %s >'%s/log' 2>&1",
             ring ? "DLPERF_MPI_ALLREDUCE=pipelined DLPERF_MPI_RING_MIN_BYTES=4096 DLPERF_MPI_SEGMENT_BYTES=4096" : "",
             RANKS, g_self, device, out, buckets ? "buckets" : "whole", dir);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "cat '%s/log'", dir);
        (void)system(cmd);
    }
    assert_int_equal(rc, 0);
    problem p;
    problem_open(&p);
    const size_t np = (size_t)p.net.param_count;
    float *got = malloc(np * 4), *want = malloc(np * 4);
    assert_non_null(got);
    assert_non_null(want);
    FILE *f = fopen(out, "rb");
    assert_non_null(f);
    assert_int_equal(fread(got, 4, np, f), np);
    fclose(f);
    reference(device, want);
    double worst = 0;
    size_t changed = 0;
    for (size_t i = 0; i < np; i++) {
        double d = fabs((double)got[i] - want[i]) / fmax(1e-3, fabs((double)want[i]));
        if (d > worst) worst = d;
        changed += got[i] != p.params[i];
    }
    printf("%s (%s, %s): %d ranks x %d samples, %d steps: worst relative difference %.3g over %zu weights (tolerance "
           "%g); %zu weights moved\n", device, buckets ? "buckets during backward" : "whole array after backward",
           ring ? "pipelined ring" : "MPI_Iallreduce", RANKS, HALF, STEPS, worst, np, tol, changed);
    assert_true(worst <= tol);
    assert_true(changed > np / 2);  // the steps did train
    free(got);
    free(want);
    problem_close(&p);
    dlp_test_rmtree(dir);
}

static void check_device(const char *device, int buckets, double tol) { check_device_algo(device, buckets, 0, tol); }

// The pipelined ring alone at 2, 3 and 4 ranks (ring_worker: from 4 KiB on, 4 KiB segments).
static void test_ring_exact(void **state) {
    (void)state;
    if (!have_mpirun()) {
        printf("skipped: this build has no MPI, or mpirun is missing\n");
        skip();
    }
    char dir[512], cmd[2048];
    dlp_test_tmpdir(dir, sizeof dir);
    for (int np = 2; np <= 4; np++) {
        snprintf(cmd, sizeof cmd,
                 "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:detect_leaks=0\" OMPI_ALLOW_RUN_AS_ROOT=1 "
                 "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 DLPERF_MPI_ALLREDUCE=pipelined "
                 "DLPERF_MPI_RING_MIN_BYTES=4096 DLPERF_MPI_SEGMENT_BYTES=4096 timeout 120 mpirun --oversubscribe -np %d "
                 "'%s' --ring-worker >'%s/log' 2>&1", np, g_self, dir);
        int rc = system(cmd);
        if (rc != 0) {
            snprintf(cmd, sizeof cmd, "cat '%s/log'", dir);
            (void)system(cmd);
        }
        assert_int_equal(rc, 0);
        printf("pipelined ring, %d ranks: %d allreduces of %lld..%lld elements, 4 in flight: the exact means\n", np,
               2 * RING_BUFS, (long long)k_ring_counts[1][1], (long long)k_ring_counts[1][0]);
    }
    dlp_test_rmtree(dir);
}

static void test_ref_equals_averaged_gradients(void **state) {
    (void)state;
    check_device("ref", 0, 0.0);
    check_device("ref", 1, 0.0);
    check_device_algo("ref", 1, 1, 0.0);
}

static void test_cpu_equals_averaged_gradients(void **state) {
    (void)state;
    check_device("cpu", 0, 1e-6);
    check_device("cpu", 1, 1e-6);
}

// The ranks' shards of an epoch cover it exactly once (DistributedSampler's stride, no padding).
static void test_shards_cover_epoch(void **state) {
    (void)state;
    const int64_t n = 1001;
    int *seen = calloc((size_t)n, sizeof *seen);
    int64_t *order = malloc((size_t)n * sizeof *order);
    assert_non_null(seen);
    assert_non_null(order);
    for (int world = 1; world <= 8; world++) {
        memset(seen, 0, (size_t)n * sizeof *seen);
        int64_t total = 0;
        for (int r = 0; r < world; r++) {
            int64_t k = dlp_shard_size(n, r, world);
            assert_int_equal(dlp_epoch_order(n, 9, 3, 1, r, world, order), DLP_OK);
            for (int64_t i = 0; i < k; i++) seen[order[i]]++;
            total += k;
            // drop_last: every rank yields the same number of batches
            assert_int_equal(dlp_shard_batches(n, r, world, 16, 1), dlp_shard_batches(n, 0, world, 16, 1));
        }
        assert_int_equal(total, n);
        for (int64_t i = 0; i < n; i++) assert_int_equal(seen[i], 1);
    }
    free(seen);
    free(order);
}

int main(int argc, char **argv) {
    g_self = argv[0];
    if (argc == 5 && strcmp(argv[1], "--worker") == 0) return worker(argv[2], argv[3], strcmp(argv[4], "buckets") == 0);
    if (argc == 2 && strcmp(argv[1], "--ring-worker") == 0) return ring_worker();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shards_cover_epoch),
        cmocka_unit_test(test_ref_equals_averaged_gradients),
        cmocka_unit_test(test_cpu_equals_averaged_gradients),
        cmocka_unit_test(test_ring_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
