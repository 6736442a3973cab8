// cli/serve: `dlperf serve` — the HTTP classification service (POST /v1/classify, GET /healthz, GET /metrics)
// with dynamic batching, until SIGINT/SIGTERM; the request counts as JSON at the end.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/opts.h"
#include "hw/host.h"
#include "monitor/monitor.h"
#include "serve/serve.h"

typedef struct engine_opts {
    const char *model, *device, *weights;
    int precision, threads, max_batch;
} engine_opts;

// The inference engine and the JPEG preprocessing behind the service. They come from the engine (a backend
// plan with cfg.train = 0: set_input + forward(DLP_PASS_EVAL) + get_output) and the data module's
// single-image val transform; until those are wired in here, the service cannot classify and says so.
static dlp_status open_engine(const engine_opts *o, dlp_serve_engine *eng, dlp_serve_preprocess *pre) {
    (void)o, (void)eng, (void)pre;
    return DLP_ERR(DLP_ERR_UNSUPPORTED, "no inference engine is wired into `dlperf serve` in this build yet (model "
                   "%s on %s): the ResNet inference plan and the JPEG val transform plug in through dlp_serve_engine "
                   "and dlp_serve_preprocess (docs/serving.md)", o->model, o->device);
}

static void close_engine(dlp_serve_engine *eng, dlp_serve_preprocess *pre) { (void)eng, (void)pre; }

int dlp_cli_serve(int argc, char **argv) {
    dlp_serve_cfg cfg;
    dlp_serve_cfg_default(&cfg);
    engine_opts eo = {0};
    const char *labels_path = NULL, *port_file = NULL, *json_path = NULL, *mon_csv = NULL, *mon_jsonl = NULL;
    int mon_interval = 500;
    double delay_ms = 2, timeout_ms = 5000, read_timeout_s = 30, drain_s = 30;
    int64_t max_body = 8 << 20;
    dlp_opt opts[] = {
        {"host", 0, DLP_OPT_STR, &cfg.host, "127.0.0.1", "ADDR", "address to listen on (0.0.0.0 or :: for every interface)", NULL, 0},
        {"port", 'p', DLP_OPT_INT, &cfg.port, "8080", "N", "TCP port (0: any free port; see --port-file)", NULL, 0},
        {"port-file", 0, DLP_OPT_STR, &port_file, NULL, "FILE", "write the port here once listening", NULL, 0},
        {"model", 'm', DLP_OPT_STR, &eo.model, "resnet50", "NAME", "model", NULL, 0},
        {"device", 'd', DLP_OPT_STR, &eo.device, "cpu", "DEV", "backend: cpu | ref | cuda | sim:<gpu>", NULL, 0},
        {"precision", 0, DLP_OPT_CHOICE, &eo.precision, "fp32", NULL, "compute precision", "fp32|bf16|fp16", 0},
        {"threads", 't', DLP_OPT_INT, &eo.threads, "0", "N", "compute threads (0: all allowed CPUs)", NULL, 0},
        {"weights", 'w', DLP_OPT_STR, &eo.weights, NULL, "FILE", "weights: a dlperf checkpoint or torchvision safetensors", NULL, 0},
        {"labels", 'l', DLP_OPT_STR, &labels_path, NULL, "FILE", "class names, one per line (answers then carry labels)", NULL, 0},
        {"max-batch", 'b', DLP_OPT_INT, &cfg.max_batch, "8", "N", "dynamic batching: largest batch", NULL, 0},
        {"max-delay", 0, DLP_OPT_DOUBLE, &delay_ms, "2", "MS", "dynamic batching: longest wait of a batch's oldest request", NULL, 0},
        {"queue", 'Q', DLP_OPT_INT, &cfg.queue_capacity, "64", "N", "requests admitted at once; beyond: 503 with Retry-After", NULL, 0},
        {"workers", 'j', DLP_OPT_INT, &cfg.workers, "2", "N", "JPEG decode/resize threads", NULL, 0},
        {"timeout", 0, DLP_OPT_DOUBLE, &timeout_ms, "5000", "MS", "per-request deadline; expired requests get 504 unrun", NULL, 0},
        {"max-body", 0, DLP_OPT_SIZE, &max_body, "8M", NULL, "largest request body (413 beyond)", NULL, 0},
        {"max-conns", 0, DLP_OPT_INT, &cfg.max_connections, "256", "N", "open connections at most", NULL, 0},
        {"idle-timeout", 0, DLP_OPT_INT, &cfg.idle_timeout_s, "10", "S", "close connections idle this long", NULL, 0},
        {"read-timeout", 0, DLP_OPT_DOUBLE, &read_timeout_s, "30", "S", "a whole request must arrive within this (slow clients are cut off)", NULL, 0},
        {"http-threads", 0, DLP_OPT_INT, &cfg.http_threads, "1", "N", "HTTP polling threads", NULL, 0},
        {"drain-timeout", 0, DLP_OPT_DOUBLE, &drain_s, "30", "S", "on SIGTERM, how long requests in flight may take", NULL, 0},
        {"monitor-interval", 0, DLP_OPT_INT, &mon_interval, "500", "MS", "hardware monitor period (0: no monitor); its metrics join /metrics", NULL, 0},
        {"monitor-csv", 0, DLP_OPT_STR, &mon_csv, NULL, "FILE", "the monitor's time series as CSV (never overwritten)", NULL, 0},
        {"monitor-jsonl", 0, DLP_OPT_STR, &mon_jsonl, NULL, "FILE", "the monitor's time series as JSON lines (never overwritten)", NULL, 0},
        {"json", 0, DLP_OPT_STR, &json_path, NULL, "FILE", "write the request counts and monitor summary here at exit (never overwritten)", NULL, 0},
        {0},
    };
    int rest;
    dlp_status st = dlp_opts_parse(opts, "usage: dlperf serve [options]\n"
                                         "HTTP/1.1: POST /v1/classify (JPEG body) -> top-5 JSON; GET /healthz; GET /metrics.\n"
                                         "SIGINT/SIGTERM: stop accepting, finish the requests in flight, exit 0.",
                                   argc, argv, &rest);
    if (st) return dlp_cli_fail(st);
    if (rest < argc) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "unexpected argument '%s' (see --help)", argv[rest]));
    if (json_path && (st = dlp_check_new_output(json_path, "--json"))) return dlp_cli_fail(st);
    if (mon_interval != 0 && mon_interval < 10)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--monitor-interval %d: use 0 (off) or at least 10 ms", mon_interval));
    if (delay_ms < 0 || timeout_ms <= 0 || read_timeout_s <= 0 || drain_s < 0)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--max-delay must be >= 0; --timeout, --read-timeout > 0; "
                                    "--drain-timeout >= 0"));
    cfg.max_delay_ns = (int64_t)(delay_ms * 1e6);
    cfg.timeout_ns = (int64_t)(timeout_ms * 1e6);
    cfg.read_timeout_ns = (int64_t)(read_timeout_s * 1e9);
    cfg.drain_timeout_ns = (int64_t)(drain_s * 1e9);
    cfg.max_body_bytes = max_body;
    eo.max_batch = cfg.max_batch;

    char **labels = NULL;
    int nlabels = 0;
    if (labels_path && (st = dlp_serve_labels_load(labels_path, &labels, &nlabels))) return dlp_cli_fail(st);
    cfg.labels = (const char *const *)labels;
    cfg.nlabels = nlabels;

    dlp_serve_engine eng;
    dlp_serve_preprocess pre;
    memset(&eng, 0, sizeof eng);
    memset(&pre, 0, sizeof pre);
    // The stop signals are blocked before any thread starts (the engine's, the monitor's, the server's), so
    // only the sigwait in dlp_serve_run receives them.
    sigset_t stop_set, old_mask;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_set, &old_mask);
    dlp_monitor *mon = NULL;
    st = open_engine(&eo, &eng, &pre);
    if (st == DLP_OK) st = dlp_serve_cfg_check(&cfg, &eng);
    if (st == DLP_OK && mon_interval > 0) {
        dlp_monitor_cfg mc = {.interval_ms = mon_interval, .csv_path = mon_csv, .jsonl_path = mon_jsonl,
                              .initial_phase = "serving"};
        st = dlp_monitor_create(&mc, &mon);
        if (st == DLP_OK) st = dlp_monitor_start(mon);
        cfg.monitor = mon;
    }
    dlp_serve_stats stats;
    int sig = 0;
    if (st == DLP_OK) st = dlp_serve_run(&cfg, &eng, &pre, port_file, &stats, &sig);
    if (mon) {
        dlp_status ms = dlp_monitor_stop(mon);
        if (ms != DLP_OK) dlp_err_print(stderr), dlp_err_clear();
    }
    if (st == DLP_OK) {
        fprintf(stderr, "serve: stopped; %lld requests answered (200: %lld, 4xx: %lld, 503: %lld, 504: %lld), %lld images "
                "in %lld batches\n", (long long)stats.requests, (long long)stats.by_status[200],
                (long long)(stats.by_status[400] + stats.by_status[404] + stats.by_status[405] + stats.by_status[413] +
                            stats.by_status[415]),
                (long long)stats.by_status[503], (long long)stats.by_status[504], (long long)stats.inferred,
                (long long)stats.batches);
        if (json_path) {
            json_t *j = dlp_json_result_new("dlperf.serve/1", 0, NULL);
            json_object_set_new(j, "options", dlp_opts_to_json(opts));
            json_object_set_new(j, "engine", json_string(eng.name ? eng.name : ""));
            json_object_set_new(j, "stats", dlp_serve_stats_to_json(&stats));
            if (mon) json_object_set_new(j, "monitor", dlp_monitor_summary_json(mon));
            dlp_host_info h;
            dlp_host_probe(&h);
            json_object_set_new(j, "host", dlp_host_to_json(&h));
            json_object_set_new(j, "versions", dlp_versions_to_json());
            st = dlp_json_write(j, json_path, DLP_WRITE_NOCLOBBER);
            json_decref(j);
        }
    }
    dlp_monitor_destroy(mon);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    close_engine(&eng, &pre);
    dlp_serve_labels_free(labels, nlabels);
    return dlp_cli_fail(st);
}
