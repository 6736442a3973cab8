// dist/bench: allreduce bandwidth over message sizes on a communicator, as nccl-tests' all_reduce_perf measures it:
// per size, warm-up then timed in-place allreduces; time = the slowest rank's mean per operation; algbw =
// bytes / time; busbw = algbw x 2(n-1)/n (what each link carries in a ring, comparable across rank counts);
// #wrong = elements whose result differs from the known mean of the ranks' inputs.
// Defines: dlp_dist_bench_cfg, dlp_dist_bench_point, dlp_dist_bench, dlp_dist_bench_to_json.
#ifndef DLP_DIST_BENCH_H
#define DLP_DIST_BENCH_H
#include <stdint.h>

#include "dist/comm.h"

struct json_t;

typedef struct dlp_dist_bench_cfg {
    int64_t min_bytes, max_bytes;  // message sizes from min to max, multiplied by factor each time (fp32 elements)
    int factor;
    int warmup, iters;             // per size
} dlp_dist_bench_cfg;

typedef struct dlp_dist_bench_point {
    int64_t bytes, count;
    double time_us;       // per allreduce, the slowest rank's mean
    double algbw_gb_s;    // 1e9 bytes/s
    double busbw_gb_s;
    int64_t wrong;        // elements differing from the expected mean (summed over ranks)
} dlp_dist_bench_point;

// Every rank calls it; every rank gets the points (max 64). *n gets how many.
dlp_status dlp_dist_bench(dlp_comm *c, const dlp_dist_bench_cfg *cfg, dlp_dist_bench_point *out, int max, int *n);
struct json_t *dlp_dist_bench_to_json(const dlp_dist_bench_point *p, int n);

#endif
