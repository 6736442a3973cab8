// perf/probe_interconnect: the allreduce bus bandwidth inside this node, measured as a data-parallel run would see
// it: `mpirun -np R <this dlperf> dist bench` (R = 2 ranks on a CPU machine; one rank per GPU with the nccl
// communicator when the probe measured several GPUs), the largest message's bus bandwidth (nccl-tests' busbw) into
// the profile's interconnect.allreduce_busbw_bytes_per_s, which predict uses for --devices > 1. Without mpirun, or
// when the launch fails, the field stays unknown (0) and the probe says why; nothing else depends on it.
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"
#include "dist/launch.h"
#include "perf/model_net.h"
#include "perf/probe_impl.h"

static void cleanup(const char *dir, const char *out, const char *log) {
    unlink(out);
    unlink(log);
    rmdir(dir);
}

static void skip(dlp_probe_ctx *c, json_t *d, const char *why) {
    dlp_probe_say(c, "interconnect: %s: the allreduce bandwidth stays unknown", why);
    json_object_set_new(d, "skipped", json_string(why));
}

// Between nodes (--hostfile): one rank per host, `dist bench` from 1 KiB to 64 MiB; the largest message's bus
// bandwidth into interconnect.nic_bytes_per_s, the quickest message's time per ring step into nic_latency_s (what
// predict --nodes charges; perf/model_net). A failure leaves them unknown and says why.
static void probe_nodes(dlp_probe_ctx *c, json_t *d) {
    const char *hf = c->cfg->hostfile, *launcher = c->cfg->mpirun ? c->cfg->mpirun : "mpirun";
    char self[PATH_MAX], dir[] = "/tmp/dlperf-probe-net.XXXXXX", out[PATH_MAX + 64], log[PATH_MAX + 64],
        cmd[4 * PATH_MAX];
    json_t *nd = json_object();
    json_object_set_new(d, "nodes", nd);
    const int hosts = dlp_hostfile_hosts(hf);
    ssize_t n = c->cfg->self_exe ? 0 : readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) self[n] = '\0';
    const char *why = hosts < 0 ? "cannot read the hostfile" : hosts < 2 ? "the hostfile names fewer than 2 hosts"
                      : n < 0 ? "cannot find this program's path" : !mkdtemp(dir) ? "no temporary directory" : NULL;
    if (why) {
        dlp_probe_say(c, "interconnect between nodes: --hostfile %s: %s", hf, why);
        json_object_set_new(nd, "skipped", json_string(why));
        return;
    }
    snprintf(out, sizeof out, "%s/bench.json", dir);
    snprintf(log, sizeof log, "%s/log", dir);
    snprintf(cmd, sizeof cmd, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 timeout 300 "
             "%s -np %d --hostfile '%s' --npernode 1 '%s' dist bench --dist mpi --min-bytes 1K --max-bytes 64M "
             "--factor 8 --iters %d --warmup 2 --json '%s' >'%s' 2>&1", launcher, hosts, hf,
             c->cfg->self_exe ? c->cfg->self_exe : self, c->cfg->quick ? 5 : 10, out, log);
    dlp_probe_say(c, "interconnect between nodes: %s -np %d --hostfile %s dlperf dist bench (1 KiB to 64 MiB)", launcher,
                  hosts, hf);
    int rc = system(cmd);
    dlp_net_link l;
    int ranks = 0;
    if (rc != 0 || dlp_net_link_from_bench(out, &l, &ranks)) {
        char tail[160], msg[256];
        dlp_file_last_line(log, tail, sizeof tail);
        snprintf(msg, sizeof msg, "dist bench across the hosts failed (exit status %d%s%s)", rc, tail[0] ? ": " : "", tail);
        dlp_probe_say(c, "interconnect between nodes: %s", msg);
        json_object_set_new(nd, "skipped", json_string(msg));
    } else {
        c->p->net.nic_bytes_per_s = l.bytes_per_s;
        c->p->net.nic_latency_s = l.latency_s;
        json_t *r = json_load_file(out, 0, NULL);
        json_object_set_new(nd, "hosts", json_integer(ranks));
        json_object_set_new(nd, "points", json_incref(json_object_get(r, "points")));
        json_decref(r);
        json_object_set_new(nd, "nic_bytes_per_s", json_real(l.bytes_per_s));
        json_object_set_new(nd, "nic_latency_s", json_real(l.latency_s));
        dlp_probe_say(c, "interconnect between nodes: %d hosts: %.3f GB/s bus bandwidth, %.0f us per ring step", ranks,
                      l.bytes_per_s / 1e9, l.latency_s * 1e6);
    }
    unlink(out);
    unlink(log);
    rmdir(dir);
}

dlp_status dlp_probe_interconnect(dlp_probe_ctx *c) {
    json_t *d = json_object();
    json_object_set_new(c->details, "interconnect", d);
    if (c->cfg->hostfile && dlp_mpirun_available()) probe_nodes(c, d);
    if (!dlp_mpirun_available()) {
        skip(c, d, "no mpirun on this machine");
        return DLP_OK;
    }
    const dlp_device_profile *gpu = dlp_profile_find_device(c->p, "cuda");
    int ranks = 2;
    const char *dist = "mpi";
    if (gpu && c->gpus > 1) {
        ranks = c->gpus;
        dist = "nccl";
    }
    char dir[] = "/tmp/dlperf-probe-ic.XXXXXX";
    if (!mkdtemp(dir)) {
        skip(c, d, "no temporary directory");
        return DLP_OK;
    }
    char out[PATH_MAX + 64], log[PATH_MAX + 64], mpirun[PATH_MAX + 128], cmd[3 * PATH_MAX];
    snprintf(out, sizeof out, "%s/bench.json", dir);
    snprintf(log, sizeof log, "%s/log", dir);
    const char *max = c->cfg->quick ? "16M" : "64M";
    if (dlp_mpirun_prefix(mpirun, sizeof mpirun, ranks, c->cfg->self_exe, 120)) {
        cleanup(dir, out, log);
        skip(c, d, "cannot find this program's path");
        return DLP_OK;
    }
    snprintf(cmd, sizeof cmd,
             "OMP_NUM_THREADS=1 %s dist bench --dist %s --min-bytes 64K --max-bytes %s --iters %d --warmup 2 "
             "--json '%s' >'%s' 2>&1", mpirun, dist, max, c->cfg->quick ? 5 : 10, out, log);
    dlp_probe_say(c, "interconnect: mpirun -np %d dlperf dist bench --dist %s (64 KiB to %s)", ranks, dist, max);
    int rc = system(cmd);
    json_error_t je;
    json_t *r = rc == 0 ? json_load_file(out, 0, &je) : NULL;
    const json_t *pts = json_object_get(r, "points");
    const json_t *last = json_array_get(pts, json_array_size(pts) ? json_array_size(pts) - 1 : 0);
    const double busbw = json_number_value(json_object_get(last, "busbw_gb_s"));
    if (!r || !(busbw > 0) || json_integer_value(json_object_get(r, "wrong")) != 0) {
        char why[256];
        char tail[160];
        dlp_file_last_line(log, tail, sizeof tail);  // what mpirun or dlperf said last
        snprintf(why, sizeof why, "mpirun -np %d dist bench %s (exit status %d%s%s)", ranks,
                 r ? "gave no usable figure" : "failed", rc, tail[0] ? ": " : "", tail);
        skip(c, d, why);
        json_decref(r);
        cleanup(dir, out, log);
        return DLP_OK;
    }
    c->p->net.allreduce_busbw_bytes_per_s = busbw * 1e9;
    json_object_set_new(d, "ranks", json_integer(ranks));
    json_object_set_new(d, "communicator", json_string(dist));
    json_object_set_new(d, "points", json_incref((json_t *)pts));
    json_object_set_new(d, "allreduce_busbw_bytes_per_s", json_real(busbw * 1e9));
    dlp_probe_say(c, "interconnect: %d ranks (%s): %.2f GB/s bus bandwidth at %lld MiB", ranks, dist, busbw,
                  (long long)(json_integer_value(json_object_get(last, "bytes")) >> 20));
    json_decref(r);
    cleanup(dir, out, log);
    return DLP_OK;
}
