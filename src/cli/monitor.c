// cli/monitor: `dlperf monitor [options] -- COMMAND ARGS...` — runs a command (like `perf stat`), monitors the
// machine and the command's process tree while it runs, passes its exit status through (128+N when a signal
// killed it), prints a summary on stderr and writes the time series and the result JSON.
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/opts.h"
#include "hw/host.h"
#include "monitor/command.h"
#include "monitor/monitor.h"

static const char k_usage[] =
    "usage: dlperf monitor [options] -- COMMAND [ARGS...]\n"
    "Runs COMMAND and monitors CPU, memory, disk, network, RAPL power and NVIDIA GPUs (if present) and COMMAND's\n"
    "process tree while it runs. Exits with COMMAND's exit status (128+N if signal N killed it). SIGINT, SIGTERM,\n"
    "SIGHUP and SIGQUIT sent to dlperf are passed on to COMMAND.\n"
    "       dlperf monitor --list        which sources work on this machine, and why not";

// --- the summary table --------------------------------------------------------------------------------------

typedef struct {
    const char *suffix;  // metric name ending
    const char *unit;    // shown
    double scale;
    int strip;           // drop the suffix from the label
} unit_row;

static const unit_row k_units[] = {
    {"_bytes_per_s", "MiB/s", 1.0 / 1048576, 1}, {"_bytes", "MiB", 1.0 / 1048576, 1}, {"_per_s", "/s", 1, 1},
    {"_iops", "IO/s", 1, 0},  {"_pct", "%", 1, 1},  {"_w", "W", 1, 1},  {"_mhz", "MHz", 1, 1},
    {"_celsius", "C", 1, 1},
};

static void fmt_num(char *buf, size_t len, double v) {
    if (!isfinite(v)) snprintf(buf, len, "-");
    else if (fabs(v) >= 1e5) snprintf(buf, len, "%.3g", v);
    else if (fabs(v) >= 100 || v == floor(v)) snprintf(buf, len, "%.0f", v);
    else snprintf(buf, len, "%.1f", v);
}

static double jnum(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void print_table(FILE *f, const json_t *summary) {
    const json_t *metrics = json_object_get(json_object_get(summary, "total"), "metrics");
    fprintf(f, "%-34s %-6s %9s %9s %9s %12s\n", "metric (whole run)", "unit", "mean", "p95", "max", "total");
    const char *name;
    const json_t *e;
    int hidden = 0;
    json_object_foreach((json_t *)metrics, name, e) {
        double mean = jnum(e, "mean"), p95 = jnum(e, "p95"), max = jnum(e, "max");
        int main_metric = strcmp(name, "cpu.all.util_pct") == 0 || strncmp(name, "proc.", 5) == 0 ||
                          strcmp(name, "mem.available_bytes") == 0 || strcmp(name, "monitor.cpu_pct") == 0;
        if (!main_metric && (mean == 0 || isnan(mean)) && (max == 0 || isnan(max))) {
            hidden++;
            continue;
        }
        char label[64], unit[16] = "", total[32] = "";
        snprintf(label, sizeof label, "%s", name);
        double scale = 1;
        for (size_t u = 0; u < sizeof k_units / sizeof k_units[0]; u++) {
            size_t nl = strlen(label), sl = strlen(k_units[u].suffix);
            if (nl > sl && strcmp(label + nl - sl, k_units[u].suffix) == 0) {
                if (k_units[u].strip) label[nl - sl] = '\0';
                snprintf(unit, sizeof unit, "%s", k_units[u].unit);
                scale = k_units[u].scale;
                break;
            }
        }
        if (strncmp(name, "proc.", 5) == 0 && strcmp(unit, "%") == 0) snprintf(unit, sizeof unit, "%%core");
        if (strcmp(name, "monitor.cpu_pct") == 0) snprintf(unit, sizeof unit, "%%core");
        char a[24], b[24], c[24];
        fmt_num(a, sizeof a, mean * scale);
        fmt_num(b, sizeof b, p95 * scale);
        fmt_num(c, sizeof c, max * scale);
        double t;
        if (!isnan(t = jnum(e, "total_bytes"))) {
            fmt_num(total, sizeof total, t / 1048576);
            strcat(total, " MiB");
        } else if (!isnan(t = jnum(e, "energy_j"))) {
            fmt_num(total, sizeof total, t);
            strcat(total, " J");
        } else if (!isnan(t = jnum(e, "cpu_s"))) {
            snprintf(total, sizeof total, "%.2f CPU-s", t);
        } else if (!isnan(t = jnum(e, "wait_s"))) {
            snprintf(total, sizeof total, "%.2f s", t);
        } else if (!isnan(t = jnum(e, "total"))) {
            fmt_num(total, sizeof total, t);
        }
        char line[160];
        int n = snprintf(line, sizeof line, "%-34s %-6s %9s %9s %9s %12s", label, unit, a, b, c, total);
        while (n > 0 && line[n - 1] == ' ') line[--n] = '\0';  // no trailing blanks when there is no total
        fprintf(f, "%s\n", line);
    }
    if (hidden) fprintf(f, "(%d metrics that stayed at 0 are not shown; the JSON has them all)\n", hidden);
}

static void print_summary(FILE *f, const json_t *summary, char **cmd, int ncmd, int status_code, int sig,
                          double wall_s) {
    fprintf(f, "\ndlperf monitor: '");
    for (int i = 0; i < ncmd && i < 6; i++) fprintf(f, "%s%s", i ? " " : "", cmd[i]);
    if (ncmd > 6) fprintf(f, " ...");
    if (sig) fprintf(f, "' was killed by signal %d (%s) after %.2f s", sig, strsignal(sig), wall_s);
    else fprintf(f, "' exited with status %d after %.2f s", status_code, wall_s);
    fprintf(f, "; %lld samples every %lld ms\n", (long long)json_integer_value(json_object_get(summary, "samples")),
            (long long)json_integer_value(json_object_get(summary, "interval_ms")));
    print_table(f, summary);
    const json_t *metrics = json_object_get(json_object_get(summary, "total"), "metrics");
    const json_t *cpu = json_object_get(metrics, "cpu.all.util_pct");
    const json_t *online = json_object_get(metrics, "cpu.all.online");
    const json_t *proc = json_object_get(metrics, "proc.cpu_pct");
    if (cpu)
        fprintf(f, "CPU: %.1f%% of %.0f CPUs busy on average (p95 %.1f%%)", jnum(cpu, "mean"), jnum(online, "max"),
                jnum(cpu, "p95"));
    if (proc) fprintf(f, "; the command's tree used %.2f CPU-s (%.1f%% of one core)", jnum(proc, "cpu_s"), jnum(proc, "mean"));
    if (cpu || proc) fputc('\n', f);
    // Energy: RAPL domains and GPUs.
    const char *name;
    const json_t *e;
    int energy = 0;
    json_object_foreach((json_t *)metrics, name, e) {
        double j = jnum(e, "energy_j");
        if (isnan(j)) continue;
        char what[64];
        snprintf(what, sizeof what, "%s", name);
        char *dot = strstr(what, ".power_w");
        if (dot) *dot = '\0';
        fprintf(f, "%s %s %.1f J (%.1f W mean)", energy ? "," : "energy:", what, j, jnum(e, "mean"));
        energy = 1;
    }
    if (energy) fputc('\n', f);
    const json_t *ov = json_object_get(summary, "overhead");
    fprintf(f, "monitor overhead: %.3f CPU-s = %.2f%% of one core\n", jnum(ov, "cpu_s"), jnum(ov, "pct_of_one_core"));
    const json_t *sources = json_object_get(summary, "sources");
    int first = 1;
    json_object_foreach((json_t *)sources, name, e) {
        if (json_is_true(json_object_get(e, "available"))) continue;
        fprintf(f, "%s %s (%s)", first ? "not available:" : ";", name, json_string_value(json_object_get(e, "note")));
        first = 0;
    }
    if (!first) fputc('\n', f);
}

// --- the command ----------------------------------------------------------------------------------------------

static void on_serving(void *ctx, const char *addr, int port) {
    (void)ctx;
    int v6 = strchr(addr, ':') != NULL;
    fprintf(stderr, "dlperf monitor: serving http://%s%s%s:%d/metrics\n", v6 ? "[" : "", addr, v6 ? "]" : "", port);
}

// The result (dlperf.monitor/1).
static dlp_status write_result(const char *json_path, const dlp_opt *opts, char **cmd, int ncmd,
                               const dlp_monitor_command_result *r) {
    json_t *res = dlp_json_result_new("dlperf.monitor/1", 0, NULL);
    json_object_set_new(res, "options", dlp_opts_to_json(opts));
    json_object_set_new(res, "versions", dlp_versions_to_json());
    dlp_monitor_command_json(r, cmd, ncmd, res);
    dlp_host_info h;
    dlp_host_probe(&h);
    json_object_set_new(res, "host", dlp_host_to_json(&h));
    json_object_set_new(res, "monitor", json_incref(r->summary));
    dlp_status st = dlp_json_write(res, json_path, DLP_WRITE_NOCLOBBER);
    json_decref(res);
    return st;
}

int dlp_cli_monitor(int argc, char **argv) {
    int interval_ms = 500, metrics_port = -1, all_disks = 0, per_cpu = 0, no_pcie = 0, list = 0, quiet = 0;
    const char *csv = NULL, *jsonl = NULL, *json_path = NULL, *metrics_addr = NULL, *sources = NULL, *root = NULL,
               *nvml_lib = NULL;
    dlp_opt opts[] = {
        {"interval", 0, DLP_OPT_INT, &interval_ms, "500", "MS", "sampling interval in milliseconds", NULL, 0},
        {"csv", 0, DLP_OPT_STR, &csv, NULL, "FILE", "time series as CSV, one row per sample (new file)", NULL, 0},
        {"jsonl", 0, DLP_OPT_STR, &jsonl, NULL, "FILE", "time series as JSON lines, one per sample per metric set",
         NULL, 0},
        {"json", 0, DLP_OPT_STR, &json_path, NULL, "FILE", "result with per-phase summaries (dlperf.monitor/1)", NULL,
         0},
        {"metrics-port", 0, DLP_OPT_INT, &metrics_port, "-1", "N",
         "serve Prometheus /metrics on this port while COMMAND runs (0: any free port, -1: off)", NULL, 0},
        {"metrics-addr", 0, DLP_OPT_STR, &metrics_addr, "127.0.0.1", "ADDR", "address the /metrics server binds",
         NULL, 0},
        {"sources", 0, DLP_OPT_STR, &sources, NULL, "LIST", "only these sources: cpu,proc,mem,disk,net,rapl,gpu",
         NULL, 0},
        {"all-disks", 0, DLP_OPT_FLAG, &all_disks, NULL, NULL, "also partitions, loop, ram and zram devices", NULL, 0},
        {"per-cpu-modes", 0, DLP_OPT_FLAG, &per_cpu, NULL, NULL, "per-core user/system/iowait... columns", NULL, 0},
        {"no-gpu-pcie", 0, DLP_OPT_FLAG, &no_pcie, NULL, NULL, "skip NVML PCIe throughput (20 ms per query per GPU)",
         NULL, 0},
        {"nvml-lib", 0, DLP_OPT_STR, &nvml_lib, NULL, "PATH", "NVML library to load (default libnvidia-ml.so.1)",
         NULL, 0},
        {"root", 0, DLP_OPT_STR, &root, "/", "DIR", "read /proc and /sys under DIR (captured fixtures)", NULL, 0},
        {"list", 0, DLP_OPT_FLAG, &list, NULL, NULL, "list the sources, whether each works here and why not", NULL,
         0},
        {"quiet", 'q', DLP_OPT_FLAG, &quiet, NULL, NULL, "no summary on stderr", NULL, 0},
        {0},
    };
    // Options end at "--"; everything after it is the command, untouched by option parsing.
    int dash = -1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) {
            dash = i;
            break;
        }
    int nopt = dash >= 0 ? dash : argc, rest;
    dlp_status st = dlp_opts_parse(opts, k_usage, nopt, argv, &rest);
    if (st == DLP_ERR_INVALID && dash < 0)
        dlp_err_context("options of the command go after --, as in dlperf monitor [options] -- COMMAND ARGS");
    if (st) return dlp_cli_fail(st);
    char **cmd;
    int ncmd;
    if (dash >= 0) {
        if (rest < nopt) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "unexpected '%s' before --", argv[rest]));
        cmd = argv + dash + 1;
        ncmd = argc - dash - 1;
    } else {
        cmd = argv + rest;
        ncmd = nopt - rest;
    }
    dlp_monitor_cfg cfg = {
        .interval_ms = interval_ms, .root = root, .sources = sources, .nvml_lib = nvml_lib,
        .all_disks = all_disks, .per_cpu_modes = per_cpu, .no_gpu_pcie = no_pcie, .initial_phase = "command",
    };
    if (interval_ms < 10) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--interval %d: use at least 10 ms", interval_ms));
    if (list) {
        dlp_monitor *mon;
        cfg.pid = 0;
        if ((st = dlp_monitor_create(&cfg, &mon))) return dlp_cli_fail(st);
        json_t *src = dlp_monitor_sources_json(mon);
        const char *name;
        json_t *e;
        json_object_foreach(src, name, e) {
            int ok = json_is_true(json_object_get(e, "available"));
            printf("%-6s %-14s %s\n", name, ok ? "available" : "not available", json_string_value(json_object_get(e, "note")));
        }
        json_decref(src);
        dlp_monitor_destroy(mon);
        return 0;
    }
    if (ncmd == 0)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "no command to run: dlperf monitor [options] -- COMMAND [ARGS...]"));
    if ((st = dlp_check_new_output(json_path, "--json"))) return dlp_cli_fail(st);
    if ((json_path && csv && strcmp(json_path, csv) == 0) || (json_path && jsonl && strcmp(json_path, jsonl) == 0) ||
        (csv && jsonl && strcmp(csv, jsonl) == 0))
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--csv, --jsonl and --json must name different files"));

    cfg.csv_path = csv;
    cfg.jsonl_path = jsonl;
    dlp_monitor_command_cfg cc = {.mon = cfg, .cmd = cmd, .metrics_addr = metrics_addr, .metrics_port = metrics_port,
                                  .on_serving = on_serving};
    dlp_monitor_command_result r;
    if ((st = dlp_monitor_run_command(&cc, &r))) return dlp_cli_fail(st);
    if (r.exec_errno) fprintf(stderr, "dlperf monitor: cannot run '%s': %s\n", cmd[0], strerror(r.exec_errno));
    if (!quiet && !r.exec_errno) print_summary(stderr, r.summary, cmd, ncmd, r.exit_code, r.signal, r.wall_s);
    int out_failed = r.monitor_failed;
    if (json_path && write_result(json_path, opts, cmd, ncmd, &r) != DLP_OK) {
        dlp_err_print(stderr);
        dlp_err_clear();
        out_failed = 1;
    }
    dlp_monitor_command_result_free(&r);
    // The command's status passes through; if it succeeded but an output file is incomplete, say so with 1.
    if (r.exit_code == 0 && out_failed) return 1;
    return r.exit_code;
}
