// cli/main: the dlperf command — dispatches to one file per subcommand.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "hw/host.h"

static const dlp_cli_cmd k_cmds[] = {
    {"run", dlp_cli_run, "the whole flow on this machine: data preparation, monitored training, inference, bottleneck, cost, catalog"},
    {"report", dlp_cli_report, "the evaluation report of saved run directories: one HTML page with charts, runs side by side"},
    {"version", dlp_cli_version, "versions of dlperf and the libraries it was built with"},
    {"data", dlp_cli_data, "synthetic ImageNet, the input pipeline benchmark, one-image transforms"},
    {"train", dlp_cli_train, "train a ResNet through the real input pipeline: phases, stall, accuracy, checkpoints"},
    {"nn", dlp_cli_nn, "the model and its backends: info, bench, step, init"},
    {"predict", dlp_cli_predict, "predict throughput, bottleneck, stall, epoch time and cost (catalog system or profile)"},
    {"plan", dlp_cli_plan, "under a budget or deadline, the configuration that trains fastest and what each part must deliver"},
    {"probe", dlp_cli_probe, "measure this machine into a machine profile (storage, pipeline, compute, contention)"},
    {"validate", dlp_cli_validate, "run real training configurations and compare each with its prediction (MAPE)"},
    {"catalog", dlp_cli_catalog, "list the catalog: GPUs, CPUs, systems, published throughput, with sources"},
    {"monitor", dlp_cli_monitor, "run a command and monitor CPU, memory, disk, network, power and GPUs"},
    {"dist", dlp_cli_dist, "data-parallel communicators: allreduce bandwidth (dist bench, under mpirun)"},
    {"gpu", dlp_cli_gpu, "the CUDA GPU: info, bench (ResNet throughput), probe (GPU profile)"},
    {"infer", dlp_cli_infer, "inference throughput over batch sizes, latency percentiles, top-5 of given images"},
    {"serve", dlp_cli_serve, "HTTP classification service with dynamic batching (POST /v1/classify)"},
    {"loadgen", dlp_cli_loadgen, "MLPerf LoadGen scenarios (SingleStream, MultiStream, Server, Offline) against a service"},
    {NULL, NULL, NULL},
};

int dlp_cli_fail(dlp_status st) {
    if (st == DLP_OK) return 0;
    if (st == DLP_ERR_CANCELLED && dlp_err_msg()[0] == '\0') return 0;  // --help
    dlp_err_print(stderr);
    return st == DLP_ERR_INVALID ? 2 : 1;
}

dlp_status dlp_cli_parse(dlp_opt *opts, const char *usage, int argc, char **argv) {
    int rest;
    dlp_status st = dlp_opts_parse(opts, usage, argc, argv, &rest);  // no trace: --help returns an empty message
    if (st == DLP_ERR_CANCELLED && dlp_opts_parse_only() && rest < argc) st = DLP_OK;  // parse-only: still a stray
    if (st) return st;
    if (rest < argc) return DLP_ERR(DLP_ERR_INVALID, "unexpected argument '%s' (see --help)", argv[rest]);
    return DLP_OK;
}

dlp_status dlp_cli_write_result(json_t *result, const char *path) {
    dlp_host_info h;
    dlp_host_probe(&h);
    json_object_set_new(result, "host", dlp_host_to_json(&h));
    json_object_set_new(result, "versions", dlp_versions_to_json());
    dlp_status st = dlp_json_write(result, path, DLP_WRITE_NOCLOBBER);
    json_decref(result);
    return st;
}

int dlp_cli_dispatch(const char *prog, const dlp_cli_cmd *cmds, int argc, char **argv) {
    if (argc >= 2) {
        for (const dlp_cli_cmd *c = cmds; c->name; c++)
            if (strcmp(c->name, argv[1]) == 0) return c->main(argc - 1, argv + 1);
    }
    int help = argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0);
    FILE *f = help ? stdout : stderr;
    if (argc >= 2 && !help) fprintf(stderr, "%s: unknown command '%s'\n\n", prog, argv[1]);
    fprintf(f, "usage: %s <command> [options]   (%s <command> --help for its options)\n\ncommands:\n", prog, prog);
    for (const dlp_cli_cmd *c = cmds; c->name; c++) fprintf(f, "  %-10s %s\n", c->name, c->summary);
    if (cmds == k_cmds)
        fprintf(f, "\noptions (before the command):\n  -V, --version  dlperf's version and the libraries it was built "
                   "with\n  -v, --verbose  errors name the source places they passed through (every command also "
                   "takes -v)\n  --parse-only   parse the command's options and exit (0 if they parse); also "
                   "DLPERF_PARSE_ONLY=1\n");
    return help ? 0 : 2;
}

// `dlperf --version`: the first line is "dlperf X.Y.Z", as scripts expect; then the libraries (dlperf version
// --json has them as JSON, with the host).
static int print_version(void) {
    json_t *v = dlp_versions_to_json();
    printf("dlperf %s\n", json_string_value(json_object_get(v, "dlperf")));
    const char *k;
    json_t *x;
    int first = 1;
    json_object_foreach(v, k, x) {
        if (strcmp(k, "dlperf") == 0 || strncmp(k, "oneDNN ", 7) == 0) continue;  // ISA, kernels: dlperf version
        printf("%s%s %s", first ? "built with: " : ", ", k, json_string_value(x));
        first = 0;
    }
    if (!first) putchar('\n');
    json_decref(v);
    return 0;
}

int main(int argc, char **argv) {
    dlp_json_set_argv(argc, argv);
    const char *q = getenv("DLPERF_LOG");
    if (q && strcmp(q, "debug") == 0) dlp_log_set_level(DLP_LOG_DEBUG), dlp_err_set_verbose(1);
    if (q && strcmp(q, "quiet") == 0) dlp_log_set_level(DLP_LOG_WARN);
    // Options before the command: -v/--verbose (kept for commands that run dlperf again, through the environment),
    // -V/--version.
    // --parse-only (or DLPERF_PARSE_ONLY=1): the command's options are parsed by its own table, then nothing runs.
    const char *po = getenv("DLPERF_PARSE_ONLY");
    if (po && *po && strcmp(po, "0") != 0) dlp_opts_set_parse_only(1);
    while (argc >= 2 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--verbose") == 0 ||
                         strcmp(argv[1], "--parse-only") == 0)) {
        if (strcmp(argv[1], "--parse-only") == 0) dlp_opts_set_parse_only(1);
        else setenv("DLPERF_VERBOSE", "1", 1);
        argv++, argc--;  // dispatch reads argv[1] on; the argv recorded in results stays whole
    }
    // An output named "-" (or /dev/stdout) gets the real standard output; what the command prints for people then
    // goes to stderr.
    for (int i = 2; i < argc && strcmp(argv[i], "--") != 0; i++) {  // not into a wrapped command's arguments
        const char *eq = strncmp(argv[i], "--", 2) == 0 ? strchr(argv[i], '=') : NULL;  // --json=-
        if ((argv[i - 1][0] == '-' && dlp_path_is_stdout(argv[i])) || (eq && dlp_path_is_stdout(eq + 1)))
            dlp_stdout_claim();
    }
    const char *vb = getenv("DLPERF_VERBOSE");
    if (vb && strcmp(vb, "1") == 0) dlp_err_set_verbose(1);
    if (argc >= 2 && (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0)) return print_version();
    return dlp_cli_dispatch("dlperf", k_cmds, argc, argv);
}
