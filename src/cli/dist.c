// cli/dist: `dlperf dist bench` — allreduce bandwidth over message sizes on the run's communicator (nccl-tests'
// all_reduce_perf columns). Under mpirun every rank runs it; rank 0 prints and writes the result.
#include <jansson.h>
#include <stdio.h>

#include "cli/cli.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/opts.h"
#include "dist/bench.h"

static int cmd_bench(int argc, char **argv) {
    const char *dist, *json_path;
    int64_t min_bytes, max_bytes;
    int factor, iters, warmup;
    dlp_opt opts[] = {
        {"dist", 0, DLP_OPT_STR, &dist, "auto", "KIND", "communicator: auto (mpi under mpirun/srun, else local), local, mpi", NULL, 0},
        {"min-bytes", 0, DLP_OPT_SIZE, &min_bytes, "8", NULL, "smallest message", NULL, 0},
        {"max-bytes", 0, DLP_OPT_SIZE, &max_bytes, "64M", NULL, "largest message", NULL, 0},
        {"factor", 0, DLP_OPT_INT, &factor, "2", "N", "size multiplier between messages", NULL, 0},
        {"iters", 'n', DLP_OPT_INT, &iters, "20", "N", "timed allreduces per size", NULL, 0},
        {"warmup", 0, DLP_OPT_INT, &warmup, "5", "N", "untimed allreduces per size", NULL, 0},
        {"json", 0, DLP_OPT_STR, &json_path, NULL, "FILE", "write the result (dlperf.dist-bench/1; rank 0, never overwritten)", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(opts, "usage: dlperf dist bench [--dist auto] [--min-bytes 8] [--max-bytes 64M] [--factor 2] [-n 20] [--json FILE]\n"
                                        "In-place allreduce (mean of fp32) over message sizes, as nccl-tests' all_reduce_perf:\n"
                                        "time per operation (slowest rank), algbw = bytes/time, busbw = algbw x 2(n-1)/n, #wrong.\n"
                                        "Run it under mpirun (mpirun -np 2 dlperf dist bench) to measure the interconnect.",
                                  argc, argv);
    if (st) return dlp_cli_fail(st);
    dlp_comm *c = NULL;
    if ((st = dlp_comm_open(dist, &c))) return dlp_cli_fail(st);
    const int rank = dlp_comm_rank(c), size = dlp_comm_size(c);
    // rank 0 writes the result; every rank learns whether it may, or the others would wait in the first
    // allreduce for the deadline (DLPERF_MPI_TIMEOUT_S) after rank 0 left
    int32_t taken = json_path && rank == 0 && (st = dlp_check_new_output(json_path, "--json"));
    dlp_status bst = size > 1 ? dlp_comm_broadcast(c, &taken, sizeof taken, 0) : DLP_OK;
    if (!st) st = bst;
    if (taken || st) {
        if (!st) st = DLP_ERR(DLP_ERR_EXISTS, "rank 0 cannot write --json %s", json_path);
        dlp_comm_free(c);
        return dlp_cli_fail(st);
    }
    const dlp_dist_bench_cfg cfg = {.min_bytes = min_bytes, .max_bytes = max_bytes, .factor = factor, .warmup = warmup,
                                    .iters = iters};
    dlp_dist_bench_point pts[64];
    int n = 0;
    st = dlp_dist_bench(c, &cfg, pts, 64, &n);
    int64_t wrong = 0;
    if (rank == 0) {
        printf("# dlperf dist bench: %s communicator, %d rank%s, in-place allreduce (mean) of float, %d warm-up + %d "
               "timed per size\n", dlp_comm_name(c), size, size > 1 ? "s" : "", warmup, iters);
        printf("#%13s %12s %7s %10s %9s %9s %7s\n", "size", "count", "type", "time", "algbw", "busbw", "#wrong");
        printf("#%13s %12s %7s %10s %9s %9s %7s\n", "(B)", "(elements)", "", "(us)", "(GB/s)", "(GB/s)", "");
        for (int i = 0; i < n; i++) {
            printf(" %13lld %12lld %7s %10.2f %9.3f %9.3f %7lld\n", (long long)pts[i].bytes, (long long)pts[i].count,
                   "float", pts[i].time_us, pts[i].algbw_gb_s, pts[i].busbw_gb_s, (long long)pts[i].wrong);
            wrong += pts[i].wrong;
        }
        double bus = 0;
        for (int i = 0; i < n; i++) bus += pts[i].busbw_gb_s;
        if (n) printf("# out of bounds values : %lld %s\n# avg bus bandwidth    : %.3f GB/s\n", (long long)wrong,
                      wrong ? "FAILED" : "OK", bus / n);
        if (st == DLP_OK && json_path) {
            json_t *res = dlp_json_result_new("dlperf.dist-bench/1", argc, argv);
            json_object_set_new(res, "config", dlp_opts_to_json(opts));
            json_object_set_new(res, "communicator", json_string(dlp_comm_name(c)));
            json_object_set_new(res, "ranks", json_integer(size));
            json_object_set_new(res, "points", dlp_dist_bench_to_json(pts, n));
            json_object_set_new(res, "wrong", json_integer(wrong));
            st = dlp_cli_write_result(res, json_path);
        }
    }
    dlp_comm_free(c);
    if (st == DLP_OK && wrong > 0) st = DLP_ERR(DLP_ERR_NUMERIC, "dist bench: %lld elements were wrong", (long long)wrong);
    return dlp_cli_fail(st);
}

int dlp_cli_dist(int argc, char **argv) {
    static const dlp_cli_cmd cmds[] = {
        {"bench", cmd_bench, "allreduce bandwidth over message sizes (nccl-tests' algbw/busbw, #wrong)"},
        {NULL, NULL, NULL},
    };
    return dlp_cli_dispatch("dlperf dist", cmds, argc, argv);
}
