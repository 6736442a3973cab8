// perf/probe: the probe's driver — host facts, then each part in turn, into one validated profile.
#include "perf/probe.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/log.h"
#include "data/source.h"
#include "perf/datastats.h"
#include "core/stats.h"
#include "hw/canary.h"
#include "hw/host.h"
#include "perf/probe_impl.h"

void dlp_probe_cfg_init(dlp_probe_cfg *c) {
    memset(c, 0, sizeof *c);
    c->parts = DLP_PROBE_PART_ALL;
}

// Physical cores among the CPUs this process may use (distinct core ids per package); the CPU count when the
// topology is not readable.
static int count_cores(const cpu_set_t *set, int ncpu) {
    int ids[1024][2], n = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && n < 1024; cpu++) {
        if (!CPU_ISSET(cpu, set)) continue;
        char path[128];
        int core = -1, pkg = -1;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%d", &core) != 1) core = -1;
            fclose(f);
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%d", &pkg) != 1) pkg = -1;
            fclose(f);
        }
        if (core < 0) return ncpu;
        int seen = 0;
        for (int i = 0; i < n; i++)
            if (ids[i][0] == core && ids[i][1] == pkg) seen = 1;
        if (!seen) {
            ids[n][0] = core;
            ids[n][1] = pkg;
            n++;
        }
    }
    return n > 0 ? n : ncpu;
}

static void probe_host(dlp_probe_ctx *c) {
    dlp_host_info h;
    dlp_host_probe(&h);
    dlp_host_profile *hp = &c->p->host;
    cpu_set_t set;
    CPU_ZERO(&set);
    int ncpu = h.cpus_allowed > 0 ? h.cpus_allowed : 1;
    int cores = ncpu;
    if (sched_getaffinity(0, sizeof set, &set) == 0) cores = count_cores(&set, ncpu);
    if (cores > ncpu) cores = ncpu;
    hp->cores = cores;
    hp->threads = ncpu;
    hp->smt_yield = 0;  // measured below when the host has SMT threads (pipeline part)
    hp->core_speed_rel = 1;
    hp->mhz = h.mhz;
    hp->mem_bytes = (double)h.mem_total_bytes;
    snprintf(hp->cpu_model, sizeof hp->cpu_model, "%s", h.cpu_model);
    snprintf(c->p->id, sizeof c->p->id, "%.47s", h.hostname[0] ? h.hostname : "this-host");
    snprintf(c->p->name, sizeof c->p->name, "%.60s (%d cores, %d threads), probed", h.cpu_model, cores, ncpu);
    c->threads = c->cfg->max_threads > 0 && c->cfg->max_threads < ncpu ? c->cfg->max_threads : ncpu;
    json_t *o = dlp_host_to_json(&h);
    json_object_set_new(o, "cores_counted", json_integer(cores));
    json_object_set_new(c->details, "host", o);
    dlp_probe_say(c, "host: %s, %d cores, %d hardware threads, %.0f MHz, %.1f GiB", h.cpu_model, cores, ncpu, h.mhz,
                  (double)h.mem_total_bytes / (1 << 30));
}

// Page cache the dataset can count on: MemAvailable.
static double mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

static int want_backend(const dlp_probe_cfg *cfg, const char *name) {
    if (!cfg->devices) return dlp_backend_kind_of(name) == DLP_BACKEND_KIND_CPU;  // default: what computes here
    const char *s = cfg->devices;
    size_t n = strlen(name);
    while (*s) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == n && strncmp(s, name, n) == 0) return 1;
        if (!e) break;
        s = e + 1;
    }
    return 0;
}

static dlp_status check_devices(const dlp_probe_cfg *cfg) {
    if (!cfg->devices) return DLP_OK;
    const char *s = cfg->devices;
    while (*s) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        char one[32];  // a backend that computes (a CPU or a GPU), named without arguments
        snprintf(one, sizeof one, "%.*s", (int)(len < sizeof one ? len : sizeof one - 1), s);
        const dlp_backend_kind kind = dlp_backend_kind_of(one);
        if (len >= sizeof one || strchr(one, ':') || (kind != DLP_BACKEND_KIND_CPU && kind != DLP_BACKEND_KIND_GPU))
            return DLP_ERR(DLP_ERR_INVALID, "probe --device: '%.*s' is not a backend probe measures (ref, cpu, cuda; "
                           "sim devices are what they are told to be)", (int)len, s);
        if (!e) break;
        s = e + 1;
    }
    return DLP_OK;
}

dlp_status dlp_probe_run(const dlp_probe_cfg *cfg, dlp_profile *out, json_t **details) {
    *details = NULL;
    DLP_CHECK(check_devices(cfg));
    dlp_probe_ctx c;
    memset(&c, 0, sizeof c);
    c.cfg = cfg;
    c.p = out;
    c.t_start_ns = dlp_now_ns();
    c.quiet_budget_s = cfg->quick ? 40 : 120;
    dlp_profile_init(out);
    snprintf(out->source, sizeof out->source, "probe");
    c.details = json_object();
    json_object_set_new(c.details, "quick", json_boolean(cfg->quick));
    unsigned parts = cfg->parts ? cfg->parts : DLP_PROBE_PART_ALL;
    dlp_status st = DLP_OK;
    const double busy0 = dlp_host_cpus_busy_s();
    const int64_t own0 = dlp_cpu_ns();
    probe_host(&c);
    out->storage.page_cache_bytes = mem_available();
    const int need_data = parts & (DLP_PROBE_PART_STORAGE | DLP_PROBE_PART_PIPELINE | DLP_PROBE_PART_CONTENTION |
                                   DLP_PROBE_PART_LOOP);
    if (need_data) {
        DLP_CHECK_GOTO(st, dlp_data_open(cfg->data, "train", NULL, &c.ds, c.data_dir, sizeof c.data_dir), fail);
        c.nsubset = (int)(c.ds->n < (cfg->quick ? 240 : 600) ? c.ds->n : (cfg->quick ? 240 : 600));
        json_object_set_new(c.details, "data", json_string(c.data_dir));
        int skipped = 0;  // the dataset's statistics: predict uses them when not told another dataset
        if (dlp_dataset_stats_of(c.ds, 0, 20000, &out->stats, &skipped) == DLP_OK) out->has_stats = 1;
        dlp_err_clear();
        dlp_probe_say(&c, "data: %s (%lld images; the pipeline parts use %d of them)", c.data_dir, (long long)c.ds->n,
                      c.nsubset);
    }
    // The cores' speed while probed, at the start, after the pipeline part and at the end (the median): validate
    // compares each of its runs with it (a virtual machine's cores vary with the host's other tenants).
    dlp_cpu_ticks ticks0, ticks1;
    dlp_host_cpu_ticks(&ticks0);
    double canary[3] = {dlp_probe_speed(&c, 0), 0, 0};
    if (parts & DLP_PROBE_PART_MEMORY) DLP_CHECK_GOTO(st, dlp_probe_memory(&c), fail);
    if (parts & DLP_PROBE_PART_STORAGE) DLP_CHECK_GOTO(st, dlp_probe_storage(&c), fail);
    if (parts & DLP_PROBE_PART_PIPELINE) {
        DLP_CHECK_GOTO(st, dlp_probe_pipeline(&c), fail);
    } else {
        // A profile needs pipeline coefficients: without the part, say so rather than invent them.
        snprintf(out->pipeline.name, sizeof out->pipeline.name, "unmeasured");
        out->pipeline.decode_per_image_s = 1e-3;
        snprintf(out->notes, sizeof out->notes, "pipeline not probed: its coefficients are placeholders");
    }
    canary[1] = dlp_probe_speed(&c, 0);
    if (parts & DLP_PROBE_PART_COMPUTE) {
        static const char *const k_backends[] = {"ref", "cpu"};
        for (int i = 0; i < 2; i++)
            if (want_backend(cfg, k_backends[i])) DLP_CHECK_GOTO(st, dlp_probe_compute(&c, k_backends[i]), fail);
        if (want_backend(cfg, "cuda")) {
#ifdef DLP_HAVE_CUDA
            DLP_CHECK_GOTO(st, dlp_probe_cuda(&c), fail);
#else
            st = DLP_ERR(DLP_ERR_UNSUPPORTED, "probe --device cuda: this dlperf was built without CUDA");
            goto fail;
#endif
        }
    }
    if ((parts & DLP_PROBE_PART_COMPUTE) && want_backend(cfg, "cpu")) DLP_CHECK_GOTO(st, dlp_probe_infer_rows(&c), fail);
    if ((parts & DLP_PROBE_PART_CONTENTION) && dlp_profile_find_device(out, "cpu"))
        DLP_CHECK_GOTO(st, dlp_probe_contention(&c), fail);
    if (parts & DLP_PROBE_PART_LOOP) DLP_CHECK_GOTO(st, dlp_probe_loop(&c), fail);
    if (parts & DLP_PROBE_PART_INTERCONNECT) DLP_CHECK_GOTO(st, dlp_probe_interconnect(&c), fail);
    if ((parts & DLP_PROBE_PART_PIPELINE) && (parts & DLP_PROBE_PART_STORAGE)) DLP_CHECK_GOTO(st, dlp_probe_checks(&c), fail);
    canary[2] = dlp_probe_speed(&c, 0);
    dlp_probe_say(&c, "host: the cores' speed (a fixed multiply-add loop on every CPU): %.1f, %.1f, %.1f GFLOP/s at the "
                  "start, middle and end", canary[0], canary[1], canary[2]);
    dlp_host_cpu_ticks(&ticks1);
    {
        const double steal = dlp_steal_fraction(&ticks0, &ticks1);
        out->host.steal_fraction = isfinite(steal) ? steal : 0;
        json_object_set_new(c.details, "steal_fraction", json_real(isfinite(steal) ? steal : -1));
        // Every timed row at the reference speed (the readings' median); host.canary_* the distribution.
        json_object_set_new(c.details, "normalisation", dlp_probe_normalise(&c));
        for (int k = 0; k < out->pipeline.nscaling; k++)
            if (out->pipeline.scaling[k].efficiency > 1.5) out->pipeline.scaling[k].efficiency = 1.5;
        const double lo = out->host.canary_p10_gflops, hi = out->host.canary_p90_gflops;
        if (lo > 0 && hi > 1.15 * lo) {  // a virtual machine's neighbours: each row is normalised to its own speed
            dlp_probe_say(&c, "note: the cores' speed moved by %.0f%% during the probe (p10 %.1f to p90 %.1f GFLOP/s; "
                          "steal %.1f%% of the CPUs' time): every timed row was measured against the speed around it "
                          "and normalised to the median, %.1f; predict states the band", 100 * (hi / lo - 1), lo, hi,
                          100 * out->host.steal_fraction, out->host.canary_gflops);
            size_t nn = strlen(out->notes);
            snprintf(out->notes + nn, sizeof out->notes - nn, "%sthe cores' speed moved %.0f%% during the probe "
                     "(normalised)", nn ? "; " : "", 100 * (hi / lo - 1));
        }
    }
    DLP_CHECK_GOTO(st, dlp_profile_validate(out, "probed profile"), fail);
    const double secs = dlp_ns_to_s(dlp_now_ns() - c.t_start_ns);
    json_object_set_new(c.details, "seconds", json_real(secs));
    const double busy1 = dlp_host_cpus_busy_s();
    if (busy0 >= 0 && busy1 >= 0 && secs > 0) {
        double other = (busy1 - busy0 - dlp_ns_to_s(dlp_cpu_ns() - own0)) / secs;
        if (other < 0) other = 0;
        json_object_set_new(c.details, "other_load_cores", json_real(other));
        if (other > 0.2) {
            dlp_probe_say(&c, "warning: other processes kept %.2f cores busy on average during the probe: the wall-clock "
                          "measurements (scaling, contention, cold waits, the loop) describe a busy machine; probe a "
                          "quiet one", other);
            size_t nn = strlen(out->notes);
            snprintf(out->notes + nn, sizeof out->notes - nn, "%sprobed while other processes kept %.2f cores busy",
                     nn ? "; " : "", other);
        }
    }
    dlp_probe_say(&c, "done in %.0f s", dlp_ns_to_s(dlp_now_ns() - c.t_start_ns));
    dlp_dataset_free(c.ds);
    *details = c.details;
    return DLP_OK;
fail:
    free(c.norms);
    dlp_dataset_free(c.ds);
    json_decref(c.details);
    return st;
}
