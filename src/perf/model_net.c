// perf/model_net: the network term of a multi-node prediction (perf/model_net.h).
#include "perf/model_net.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "core/json.h"

double dlp_net_curve_s(const dlp_net_link *l, double bytes) {
    const int n = l->npts;
    if (n < 1) return 0;
    if (bytes <= l->pt_bytes[0]) return l->pt_s[0];
    for (int i = 0; i + 1 < n; i++)
        if (bytes <= l->pt_bytes[i + 1]) {
            const double x = (bytes - l->pt_bytes[i]) / (l->pt_bytes[i + 1] - l->pt_bytes[i]);
            return l->pt_s[i] + x * (l->pt_s[i + 1] - l->pt_s[i]);
        }
    return l->pt_s[n - 1] * bytes / l->pt_bytes[n - 1];
}

double dlp_net_ring_s(double bytes, double bucket_bytes, int nodes, const dlp_net_link *l) {
    if (nodes < 2 || bytes <= 0) return 0;
    if (l->npts > 0 && l->ranks == nodes) {  // the measured time of each bucket
        if (!(bucket_bytes > 0) || bucket_bytes >= bytes) return dlp_net_curve_s(l, bytes);
        const double full = floor(bytes / bucket_bytes), rest = bytes - full * bucket_bytes;
        return full * dlp_net_curve_s(l, bucket_bytes) + (rest > 0 ? dlp_net_curve_s(l, rest) : 0);
    }
    const double buckets = bucket_bytes > 0 ? ceil(bytes / bucket_bytes) : 1;
    const double steps = 2.0 * (nodes - 1);
    return steps / nodes * bytes / l->bytes_per_s + buckets * steps * l->latency_s;
}

double dlp_net_exposed_s(double t_ar, double f, double bwd_s, int host_progress) {
    if (t_ar <= 0) return 0;
    if (host_progress) return t_ar;
    return fmax(t_ar * f, t_ar - bwd_s * (1 - f));
}

double dlp_net_rate_for_exposed(double bytes, double bucket_bytes, int nodes, double latency_s, double bwd_s,
                                int host_progress, double exposed_target_s) {
    const double f = bucket_bytes > 0 ? fmin(1.0, bucket_bytes / bytes) : 1.0;
    double lo = 1e6, hi = 1e13;  // 8 Mbit/s .. 80 Tbit/s
    dlp_net_link l = {.bytes_per_s = hi, .latency_s = latency_s};
    if (dlp_net_exposed_s(dlp_net_ring_s(bytes, bucket_bytes, nodes, &l), f, bwd_s, host_progress) > exposed_target_s)
        return 0;
    for (int i = 0; i < 100 && hi / lo > 1.001; i++) {
        l.bytes_per_s = sqrt(lo * hi);
        double e = dlp_net_exposed_s(dlp_net_ring_s(bytes, bucket_bytes, nodes, &l), f, bwd_s, host_progress);
        if (e > exposed_target_s) lo = l.bytes_per_s;
        else hi = l.bytes_per_s;
    }
    return hi;
}

dlp_status dlp_net_link_from_bench(const char *path, dlp_net_link *out, int *ranks) {
    json_error_t err;
    json_t *r = json_load_file(path, 0, &err);
    if (!r) return DLP_ERR(DLP_ERR_FORMAT, "--net-bench %s: %s (line %d)", path, err.text, err.line);
    const char *schema = json_string_value(json_object_get(r, "schema"));
    const json_t *pts = json_object_get(r, "points");
    const int n = (int)json_integer_value(json_object_get(r, "ranks"));
    dlp_status st = DLP_OK;
    if (!schema || strcmp(schema, "dlperf.dist-bench/1") != 0 || !json_is_array(pts) || json_array_size(pts) < 1 || n < 2)
        st = DLP_ERR(DLP_ERR_FORMAT, "--net-bench %s: expected a `dlperf dist bench --json` result (dlperf.dist-bench/1) "
                     "of at least 2 ranks with points", path);
    if (!st) {
        memset(out, 0, sizeof *out);
        double t0 = INFINITY;
        for (size_t i = 0; i < json_array_size(pts) && !st; i++) {
            const json_t *pt = json_array_get(pts, i);
            const double b = json_number_value(json_object_get(pt, "bytes")),
                         t = json_number_value(json_object_get(pt, "time_us")) * 1e-6;
            if (!(b > 0) || !(t > 0) || (out->npts > 0 && b <= out->pt_bytes[out->npts - 1]))
                st = DLP_ERR(DLP_ERR_FORMAT, "--net-bench %s: points[%zu]: expected a positive time_us and bytes above "
                             "the point before", path, i);
            else if (out->npts < DLP_NET_CURVE_MAX) {
                out->pt_bytes[out->npts] = b;
                out->pt_s[out->npts++] = t;
            }
            if (t > 0 && t < t0) t0 = t;  // the quickest message: the first may pay a warm-up
        }
        if (!st) {
            // the rate that, with the per-step latency, gives the time measured at the trainer's bucket size
            const double steps = 2.0 * (n - 1), b = DLP_NET_BUCKET_BYTES, tb = dlp_net_curve_s(out, b);
            out->ranks = n;
            out->latency_s = t0 / steps;
            const double wire = tb - steps * out->latency_s;
            out->bytes_per_s = steps / n * b / (wire > 0.5 * tb ? wire : tb);
            *ranks = n;
        }
    }
    json_decref(r);
    return st;
}
