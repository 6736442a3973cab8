// perf/model_net: the network term of a multi-node prediction — the gradient allreduce as a ring over the nodes'
// slowest link (alpha-beta cost per bucket), what of it the trainer's bucket overlap hides, the link rate that would
// make compute the bottleneck, and the link figures measured by `dlperf dist bench` across hosts.
// Defines: dlp_net_link, dlp_net_ring_s, dlp_net_exposed_s, dlp_net_rate_for_exposed, dlp_net_link_from_bench.
#ifndef DLP_PERF_MODEL_NET_H
#define DLP_PERF_MODEL_NET_H
#include "core/status.h"

#define DLP_NET_CURVE_MAX 32
#define DLP_NET_BUCKET_BYTES (25.0 * 1024 * 1024)  // the trainer's gradient bucket (run/train.c: 25 MiB of fp32)

typedef struct dlp_net_link {
    double bytes_per_s;  // the slowest node's link, each direction, as the ring's bus bandwidth sees it
    double latency_s;    // one ring step's fixed cost (the network's one-way latency plus the MPI/NCCL step)
    // Measured allreduce times by message size (dist bench across `ranks` hosts, bytes ascending; npts 0: none): a
    // ring over that many nodes charges each bucket the time measured at its size (interpolated) instead of the
    // alpha-beta line, which one rate cannot fit where large and mid-sized messages move at different rates.
    int npts, ranks;
    double pt_bytes[DLP_NET_CURVE_MAX], pt_s[DLP_NET_CURVE_MAX];
} dlp_net_link;

// Ring allreduce of bytes over nodes, cut into buckets of bucket_bytes (0: one; the trainer's cut: full buckets from
// the last layer back, the rest in the first): every bucket is 2(N-1) steps of bucket/N bytes over the link, each
// step paying the latency — or, with a measured curve over as many ranks as nodes, the bucket's measured time. 0 for
// one node.
double dlp_net_ring_s(double bytes, double bucket_bytes, int nodes, const dlp_net_link *l);

// One allreduce of bytes as the curve measured it: linear between the two measured sizes around it, at the largest
// message's rate above them, the smallest message's time below (l->npts > 0).
double dlp_net_curve_s(const dlp_net_link *l, double bytes);

// The allreduce time left after backward (t_ar: the whole allreduce; f: the last bucket's share of the gradients;
// bwd_s: backward). With device collectives that progress on their own (nccl) the buckets run under backward and
// only what outlasts it shows: max(t_ar f, t_ar - bwd (1 - f)). Host collectives over MPI progress only inside MPI
// calls, which the trainer makes between steps of backward only when a bucket starts: nothing is hidden (measured
// on the emulated hosts: 44.7 MB of ResNet-18 gradients, 2 buckets, exposed 467 ms of a 399 ms ring, docs/scale-out.md).
double dlp_net_exposed_s(double t_ar, double f, double bwd_s, int host_progress);

// The link rate (bytes/s) at which the exposed allreduce is exposed_target_s (bisection over the rate; the other
// arguments as above). 0 when no rate gets there (the latency alone is longer).
double dlp_net_rate_for_exposed(double bytes, double bucket_bytes, int nodes, double latency_s, double bwd_s,
                                int host_progress, double exposed_target_s);

// The link as `dlperf dist bench --json` measured it across hosts: the quickest message's time per ring step (time /
// 2(N-1)) as the latency, and the rate that with it gives the time measured at the trainer's bucket size
// (DLP_NET_BUCKET_BYTES, interpolated on the curve; the largest message's rate when the bench stopped below it); the
// points as the curve.
dlp_status dlp_net_link_from_bench(const char *path, dlp_net_link *out, int *ranks);

#endif
