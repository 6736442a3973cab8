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
#include "monitor/monitor.h"
#include "run/infer.h"
#include "serve/serve.h"
#include "serve/stack.h"

// The engine's start-up line: the model, the backend, the plans ready and the input format.
static void print_ready(const dlp_serve_stack *sk) {
    const dlp_infer_engine *e0 = &sk->ladders[0].plans[0];
    const dlp_layer *in = &sk->model.net.layers[0];
    char ladder[96];
    dlp_serve_ladder_describe(&sk->ladders[0], ladder, sizeof ladder);
    DLP_INFO("serve: %s (%d classes, %dx%d) on %s %s, plans of batch %s ready in %.0f ms; input %s %s; weights %s",
             sk->model.net.arch, sk->model.net.num_classes, in->h, in->w, dlp_backend_name(e0->ops), dlp_dtype_name(e0->precision),
             ladder, sk->ladders[0].create_ms, dlp_layout_name(e0->layout), dlp_dtype_name(e0->in_dtype),
             sk->model.random_init ? "random (seeded init)" : sk->model.weights);
}

// {"batch": calls, ...} of the plan ladder.
static json_t *plan_calls_json(const dlp_serve_engine *eng) {
    json_t *o = json_object();
    int b;
    int64_t n;
    for (int i = 0; (n = dlp_serve_engine_plan_calls(eng, i, &b)) >= 0; i++) {
        char k[16];
        snprintf(k, sizeof k, "%d", b);
        json_object_set_new(o, k, json_integer(n));
    }
    return o;
}

int dlp_cli_serve(int argc, char **argv) {
    dlp_serve_cfg cfg;
    dlp_serve_cfg_default(&cfg);
    dlp_cli_engine_opts eo = {0};
    const char *labels_path = NULL, *port_file = NULL, *json_path = NULL, *mon_csv = NULL, *mon_jsonl = NULL;
    int mon_interval = 500;
    double delay_ms = 2, timeout_ms = 5000, read_timeout_s = 30, header_timeout_s = 10, drain_s = 30;
    int64_t max_body = 8 << 20;
    dlp_opt opts[] = {
        {"host", 0, DLP_OPT_STR, &cfg.host, "127.0.0.1", "ADDR", "address to listen on (0.0.0.0 or :: for every interface)", NULL, 0},
        {"port", 0, DLP_OPT_INT, &cfg.port, "8080", "N", "TCP port (0: any free port; see --port-file)", NULL, 0},
        {"port-file", 0, DLP_OPT_STR, &port_file, NULL, "FILE", "write the port here once listening", NULL, 0},
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_MODEL, &eo),
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_DEVICE, &eo),
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_PRECISION, &eo),
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_THREADS, &eo),
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_WEIGHTS, &eo),
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_CLASSES, &eo),
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_SIZE, &eo),
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_SEED, &eo),
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_DCT, &eo),
        {"labels", 'l', DLP_OPT_STR, &labels_path, NULL, "FILE", "class names, one per line (answers then carry labels)", NULL, 0},
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_MAX_BATCH, &eo),
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_SINGLE_PLAN, &eo),
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_CALIB, &eo),
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_CALIB_DATA, &eo),
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_CALIB_IMAGES, &eo),
        dlp_cli_engine_opt(DLP_CLI_SERVE, DLP_CLI_ENGINE_CALIB_METHOD, &eo),
        {"max-delay", 0, DLP_OPT_DOUBLE, &delay_ms, "2", "MS", "dynamic batching: longest wait of a batch's oldest request", NULL, 0},
        {"queue", 'Q', DLP_OPT_INT, &cfg.queue_capacity, "64", "N", "requests admitted at once; beyond: 503 with Retry-After", NULL, 0},
        {"workers", 'w', DLP_OPT_INT, &cfg.workers, "2", "N", "JPEG decode/resize threads", NULL, 0},
        {"timeout", 0, DLP_OPT_DOUBLE, &timeout_ms, "5000", "MS", "per-request deadline; expired requests get 504 unrun", NULL, 0},
        {"max-body", 0, DLP_OPT_SIZE, &max_body, "8M", NULL, "largest request body (413 beyond)", NULL, 0},
        {"max-conns", 0, DLP_OPT_INT, &cfg.max_connections, "256", "N", "open connections at most; a new one beyond evicts the oldest still sending its header", NULL, 0},
        {"max-conns-per-ip", 0, DLP_OPT_INT, &cfg.max_conns_per_ip, "0", "N", "open connections per client address (0: no limit; clients behind a proxy share one)", NULL, 0},
        {"header-timeout", 0, DLP_OPT_DOUBLE, &header_timeout_s, "10", "S", "a request's header must arrive within this (slow-header clients are cut off)", NULL, 0},
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
    dlp_status st = dlp_cli_parse(opts, "usage: dlperf serve [options]\n"
                                        "HTTP/1.1: POST /v1/classify (JPEG body) -> top-5 JSON; GET /healthz; GET /metrics;\n"
                                        "KServe v2 (Open Inference Protocol): /v2/health/{live,ready}, /v2/models/<arch>[/ready|/infer].\n"
                                        "SIGINT/SIGTERM: stop accepting, finish the requests in flight, exit 0.",
                                  argc, argv);
    if (st) return dlp_cli_fail(st);
    cfg.max_batch = eo.max_batch;
    if (json_path && (st = dlp_check_new_output(json_path, "--json"))) return dlp_cli_fail(st);
    if (mon_interval != 0 && mon_interval < 10)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--monitor-interval %d: use 0 (off) or at least 10 ms", mon_interval));
    // NaN fails every comparison; the upper bounds keep the nanosecond arithmetic (now + timeout) far from overflow.
    if (!(delay_ms >= 0 && delay_ms <= 60e3) || !(timeout_ms > 0 && timeout_ms <= 86400e3) ||
        !(read_timeout_s > 0 && read_timeout_s <= 86400) || !(header_timeout_s > 0 && header_timeout_s <= 86400) ||
        !(drain_s >= 0 && drain_s <= 86400))
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--max-delay must be in [0, 60000] ms; --timeout in (0, 86400000] "
                                    "ms; --read-timeout and --header-timeout in (0, 86400] s; --drain-timeout in "
                                    "[0, 86400] s"));
    cfg.max_delay_ns = (int64_t)(delay_ms * 1e6);
    cfg.timeout_ns = (int64_t)(timeout_ms * 1e6);
    cfg.read_timeout_ns = (int64_t)(read_timeout_s * 1e9);
    cfg.header_timeout_ns = (int64_t)(header_timeout_s * 1e9);
    cfg.drain_timeout_ns = (int64_t)(drain_s * 1e9);
    cfg.max_body_bytes = max_body;
    if (eo.size < 32 || eo.size > 4096) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--size %d is not in 32..4096", eo.size));
    if (cfg.max_batch < 1 || cfg.workers < 1)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--max-batch and --workers must be >= 1"));

    char **labels = NULL;
    int nlabels = 0;
    if (labels_path && (st = dlp_infer_labels_load(labels_path, &labels, &nlabels))) return dlp_cli_fail(st);
    cfg.labels = (const char *const *)labels;
    cfg.nlabels = nlabels;

    // The inference engine behind the service (serve/stack): the model with its weights on a ladder of backend
    // inference plans of batches 1, 2, 4, ... up to --max-batch (--single-plan: --max-batch only), each batch the
    // batcher forms running on the smallest plan that holds it; the preprocessing writes the plans' input format;
    // one warm-up call per plan so the first requests do not pay for first-touch costs.
    dlp_serve_stack_cfg sc;
    dlp_cli_engine_cfg(&eo, &sc);
    sc.workers = cfg.workers;
    sc.warm = 1;
    sc.random_init_warning = "no --weights: %s serves with torchvision's random initialization (seed %lld): its "
                             "answers are meaningless (give --weights for real predictions)";
    dlp_serve_stack stack;
    dlp_serve_engine eng;
    memset(&stack, 0, sizeof stack);
    memset(&eng, 0, sizeof eng);
    // The stop signals are blocked before any thread starts (the engine's, the monitor's, the server's), so
    // only the sigwait in dlp_serve_run receives them.
    sigset_t stop_set, old_mask;
    dlp_serve_block_stop_signals(&stop_set, &old_mask);
    dlp_monitor *mon = NULL;
    st = dlp_serve_stack_open(&sc, &stack);
    if (st == DLP_OK) {
        eng = stack.ladders[0].engine;
        cfg.model_name = stack.model.net.arch;  // KServe v2: /v2/models/<arch>
        print_ready(&stack);
    }
    if (st == DLP_OK) st = dlp_serve_cfg_check(&cfg, &eng);
    if (st == DLP_OK && nlabels > 0 && nlabels != eng.num_classes)
        DLP_WARN("%s has %d names for the model's %d classes", labels_path, nlabels, eng.num_classes);
    if (st == DLP_OK && mon_interval > 0) {
        dlp_monitor_cfg mc = {.interval_ms = mon_interval, .csv_path = mon_csv, .jsonl_path = mon_jsonl,
                              .initial_phase = "serving"};
        st = dlp_monitor_create(&mc, &mon);
        if (st == DLP_OK) st = dlp_monitor_start(mon);
        cfg.monitor = mon;
    }
    dlp_serve_stats stats;
    int sig = 0;
    if (st == DLP_OK) st = dlp_serve_run(&cfg, &eng, &stack.preprocess, port_file, &stats, &sig);
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
            if (stack.have_model) json_object_set_new(j, "model", dlp_infer_model_to_json(&stack.model));
            const dlp_serve_ladder *l0 = stack.copies ? &stack.ladders[0] : NULL;
            if (l0 && l0->n) json_object_set_new(j, "plan", dlp_infer_engine_plan_json(&l0->plans[l0->n - 1]));
            json_object_set_new(j, "plan_calls", plan_calls_json(&eng));
            json_object_set_new(j, "stats", dlp_serve_stats_to_json(&stats));
            if (mon) json_object_set_new(j, "monitor", dlp_monitor_summary_json(mon));
            st = dlp_cli_write_result(j, json_path);
        }
    }
    dlp_monitor_destroy(mon);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    dlp_serve_stack_close(&stack);
    dlp_infer_labels_free(labels, nlabels);
    return dlp_cli_fail(st);
}
