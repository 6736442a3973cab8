// cli/probe: `dlperf probe` — measure this machine into a machine profile (dlperf.profile/1) for predict, validate
// and sim devices. Progress on stderr; the profile (with the measurements behind it under "probe") written
// atomically to --out, never over an existing file.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/opts.h"
#include "hw/host.h"
#include "perf/probe.h"

static void progress(void *ctx, const char *line) {
    (void)ctx;
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

static dlp_status parse_parts(const char *skip, unsigned *parts) {
    static const struct { const char *name; unsigned bit; } k[] = {
        {"memory", DLP_PROBE_PART_MEMORY},   {"storage", DLP_PROBE_PART_STORAGE},
        {"pipeline", DLP_PROBE_PART_PIPELINE}, {"compute", DLP_PROBE_PART_COMPUTE},
        {"contention", DLP_PROBE_PART_CONTENTION}, {"loop", DLP_PROBE_PART_LOOP},
        {"interconnect", DLP_PROBE_PART_INTERCONNECT},
    };
    *parts = DLP_PROBE_PART_ALL;
    const char *s = skip;
    while (s && *s) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        size_t i;
        for (i = 0; i < sizeof k / sizeof k[0]; i++)
            if (strlen(k[i].name) == len && strncmp(k[i].name, s, len) == 0) break;
        if (i == sizeof k / sizeof k[0])
            return DLP_ERR(DLP_ERR_INVALID, "--skip: unknown part '%.*s' (memory, storage, pipeline, compute, "
                           "contention, loop, interconnect)", (int)len, s);
        *parts &= ~k[i].bit;
        if (!e) break;
        s = e + 1;
    }
    return DLP_OK;
}

// --repeat N: N probes, --pause apart, merged (perf/probe dlp_probe_merge); the details of each under "repeats".
static dlp_status probe_repeated(const dlp_probe_cfg *cfg, int n, double pause_s, dlp_profile *out, json_t **details) {
    if (n == 1) return dlp_probe_run(cfg, out, details);
    dlp_profile *ps = calloc((size_t)n, sizeof *ps);
    json_t *det[DLP_PROBE_MAX_REPEAT] = {0};
    dlp_status st = ps ? DLP_OK : DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n && st == DLP_OK; i++) {
        if (i > 0 && pause_s > 0) {
            fprintf(stderr, "probe: %d of %d done; the next in %.0f s\n", i, n, pause_s);
            dlp_sleep_ns((int64_t)(pause_s * 1e9));
        }
        fprintf(stderr, "probe: %d of %d\n", i + 1, n);
        st = dlp_probe_run(cfg, &ps[i], &det[i]);
    }
    json_t *summary = NULL;
    if (st == DLP_OK) st = dlp_probe_merge(ps, det, n, out, &summary);
    if (st == DLP_OK) {
        *details = json_object();
        json_t *a = json_array();
        for (int i = 0; i < n; i++) json_array_append(a, det[i]);
        json_object_set_new(*details, "repeats", a);
        json_object_set_new(*details, "merged", summary);
        fprintf(stderr, "probe: %d probes merged at their pooled median speed %.1f GFLOP/s (p10 %.1f, p90 %.1f)\n", n,
                out->host.canary_gflops, out->host.canary_p10_gflops, out->host.canary_p90_gflops);
    }
    for (int i = 0; i < n; i++) json_decref(det[i]);
    free(ps);
    return st;
}

int dlp_cli_probe(int argc, char **argv) {
    const char *data, *device, *out, *skip, *models, *sizes, *hostfile, *mpirun;
    int quick, threads, repeat;
    double pause_s;
    int64_t seed;
    dlp_opt opts[] = {
        {"data", 'd', DLP_OPT_STR, &data, "synthetic", "DIR", "dataset whose storage and images are measured", NULL, 0},
        {"out", 'o', DLP_OPT_STR, &out, NULL, "FILE", "write the profile here (required; never overwritten)", NULL, 0},
        {"quick", 0, DLP_OPT_FLAG, &quick, NULL, NULL, "fewer points: about a minute instead of 3-5", NULL, 0},
        {"device", 0, DLP_OPT_STR, &device, NULL, "LIST", "compute backends to measure: ref,cpu (default), cuda", NULL, 0},
        {"threads", 't', DLP_OPT_INT, &threads, "0", "N", "loader and compute threads up to N (0: all allowed CPUs)", NULL, 0},
        {"models", 0, DLP_OPT_STR, &models, NULL, "LIST", "models of the step-time fits, each at every --sizes (default: ResNet-18 at 64 and 112 px, ResNet-50 at 64 and 224; --quick: resnet18 at 64)", NULL, 0},
        {"sizes", 0, DLP_OPT_STR, &sizes, NULL, "LIST", "image sizes of the step-time fits (default: see --models)", NULL, 0},
        {"skip", 0, DLP_OPT_STR, &skip, NULL, "LIST", "parts to leave out: memory,storage,pipeline,compute,contention,loop,interconnect", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &seed, "1", "N", "seed of the crops, inputs and weights", NULL, 0},
        {"hostfile", 0, DLP_OPT_STR, &hostfile, NULL, "FILE", "also measure the network between these hosts (one rank each; docs/scale-out.md)", NULL, 0},
        {"mpirun", 0, DLP_OPT_STR, &mpirun, "mpirun", "CMD", "the launcher --hostfile runs under", NULL, 0},
        {"repeat", 0, DLP_OPT_INT, &repeat, "1", "N", "probe N times (--pause apart) into one profile: each timed row the median at the pooled median speed, the speed's band over all of them", NULL, 0},
        {"pause", 0, DLP_OPT_DOUBLE, &pause_s, "0", "S", "with --repeat: wait S seconds between the probes (an afternoon's variation)", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(
        opts, "usage: dlperf probe --out FILE [--data DIR|synthetic] [--quick] [--device ref,cpu|cuda] [--threads N]\n"
              "Measures this machine into a machine profile (dlperf.profile/1): cores, memory bandwidth, storage warm and\n"
              "cold, the input pipeline's cost per image (fitted from its stages) and scaling, each backend's step time\n"
              "against batch and image size, compute/loader contention, the training loop's overhead.",
        argc, argv);
    if (st) return dlp_cli_fail(st);
    if (!out) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--out FILE is required (the profile is written there; an "
                                                           "existing file is never overwritten)"));
    if (threads < 0) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--threads must be >= 0"));
    if (repeat < 1 || repeat > DLP_PROBE_MAX_REPEAT || !(pause_s >= 0) || pause_s > 86400)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--repeat must be 1..%d and --pause 0..86400 s",
                                    DLP_PROBE_MAX_REPEAT));
    if ((st = dlp_check_new_output(out, "--out"))) return dlp_cli_fail(st);
    dlp_probe_cfg cfg;
    dlp_probe_cfg_init(&cfg);
    cfg.data = data;
    cfg.quick = quick;
    cfg.devices = device;
    cfg.max_threads = threads;
    cfg.models = models;
    cfg.sizes = sizes;
    cfg.seed = (uint64_t)seed;
    cfg.progress = progress;
    cfg.hostfile = hostfile;
    cfg.mpirun = mpirun;
    if ((st = parse_parts(skip, &cfg.parts))) return dlp_cli_fail(st);
    dlp_profile p;
    json_t *details = NULL;
    if ((st = probe_repeated(&cfg, repeat, pause_s, &p, &details))) return dlp_cli_fail(st);
    // The loader's modelled cost per image at 224 px on one thread (every fitted term, the loader's scale), as the
    // pipeline probe computed it for the dataset's files; "not measured" when that part was skipped.
    const json_t *pd = json_object_get(details, "pipeline");
    const json_t *mr = pd ? json_object_get(pd, "model_img_per_s_1thread_224") : NULL;
    char loader[64] = "loader not measured";
    if (mr && json_is_number(mr) && json_number_value(mr) > 0)
        snprintf(loader, sizeof loader, "loader %.2f ms per image at 224 px (1 thread)", 1e3 / json_number_value(mr));
    json_t *o = dlp_profile_to_json(&p);
    json_object_set_new(details, "options", dlp_opts_to_json(opts));
    json_object_set_new(details, "versions", dlp_versions_to_json());  // oneDNN's ISA and kernels behind the figures
    json_object_set_new(o, "probe", details);
    st = dlp_json_write(o, out, DLP_WRITE_NOCLOBBER);
    json_decref(o);
    if (st) return dlp_cli_fail(st);
    printf("profile %s: %d cores, memory %.1f GB/s, cold storage %.1f MB/s (%.2f ms per file), %s, devices:", out,
           p.host.cores, p.host.mem_bw_bytes_per_s / 1e9, p.storage.cold_read_bytes_per_s / 1e6,
           p.storage.cold_latency_s * 1e3, loader);
    for (int i = 0; i < p.ndevices; i++) printf(" %s (%d rows)", p.devices[i].name, p.devices[i].nrates);
    printf("\n");
    return 0;
}
