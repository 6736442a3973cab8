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
#include "run/infer.h"
#include "serve/ladder.h"
#include "serve/serve.h"

typedef struct engine_opts {
    const char *model, *device, *weights;
    int precision, threads, max_batch, workers, classes, size, dct, single_plan;
    int64_t seed;
} engine_opts;

// What the engine and the preprocessing are made of: the model and its weights, the plan ladder (serve/ladder),
// the per-worker JPEG transformers.
typedef struct engine_parts {
    dlp_infer_model model;
    dlp_serve_ladder ladder;
    dlp_infer_prep *prep;
    int have_model;
} engine_parts;

static const dlp_dtype k_serve_prec[] = {DLP_DTYPE_F32, DLP_DTYPE_BF16, DLP_DTYPE_F16};

// dlp_serve_preprocess.run: the data module's val transform (shorter side 256, centre crop 224, normalize) of the
// request body, written straight into the request's input slot in the plan's layout and type.
static dlp_status preprocess_run(void *ctx, int worker, const uint8_t *jpeg, size_t len, void *dst) {
    return dlp_infer_prep_run(ctx, worker, jpeg, len, dst, NULL);
}

static void close_engine(engine_parts *ep, dlp_serve_engine *eng, dlp_serve_preprocess *pre) {
    dlp_infer_prep_free(ep->prep);
    dlp_serve_ladder_close(&ep->ladder);  // owns the engine eng copies
    if (ep->have_model) dlp_infer_model_free(&ep->model);
    memset(ep, 0, sizeof *ep);
    memset(eng, 0, sizeof *eng);
    memset(pre, 0, sizeof *pre);
}

// The inference engine behind the service: the model with its weights on a ladder of backend inference plans
// (cfg.train = 0: BN folded and ReLU/add fused where the backend does it) of batches 1, 2, 4, ... up to --max-batch
// (--single-plan: --max-batch only), each batch the batcher forms running on the smallest plan that holds it
// (serve/ladder), so a lone request costs one image, not --max-batch. The preprocessing writes the plans' input
// format. One warm-up call per plan at start so the first requests do not pay for first-touch costs.
static dlp_status open_engine(const engine_opts *o, engine_parts *ep, dlp_serve_engine *eng, dlp_serve_preprocess *pre) {
    memset(ep, 0, sizeof *ep);
    dlp_infer_model_cfg mc = {.model = o->model, .num_classes = o->classes, .size = o->size, .weights = o->weights,
                              .seed = (uint64_t)o->seed};
    DLP_CHECK(dlp_infer_model_load(&mc, &ep->model));
    ep->have_model = 1;
    if (ep->model.random_init)
        DLP_WARN("no --weights: %s serves with torchvision's random initialization (seed %lld): its answers are "
                 "meaningless (give --weights for real predictions)", ep->model.net.arch, (long long)o->seed);
    dlp_serve_ladder_cfg lc = {.model = &ep->model, .device = o->device, .precision = k_serve_prec[o->precision],
                               .threads = o->threads, .max_batch = o->max_batch, .single_plan = o->single_plan};
    dlp_status st = dlp_serve_ladder_open(&lc, &ep->ladder);
    if (st == DLP_OK) *eng = ep->ladder.engine;
    const dlp_infer_engine *e0 = &ep->ladder.plans[0];
    if (st == DLP_OK) {
        dlp_infer_prep_cfg pc = {.size = ep->model.size, .layout = e0->layout, .dtype = e0->in_dtype,
                                 .dct_scaling = o->dct, .workers = o->workers > 0 ? o->workers : 1};
        st = dlp_infer_prep_create(&pc, &ep->prep);
    }
    if (st == DLP_OK && dlp_infer_prep_sample_bytes(ep->prep) != eng->sample_bytes)
        st = DLP_ERR(DLP_ERR_INTERNAL, "preprocess writes %zu bytes per sample, the engine takes %zu",
                     dlp_infer_prep_sample_bytes(ep->prep), eng->sample_bytes);
    if (st == DLP_OK) st = dlp_serve_ladder_warm(&ep->ladder);
    if (st) {
        close_engine(ep, eng, pre);
        return st;
    }
    pre->name = "val transform (Resize 256, CenterCrop 224, Normalize)";
    pre->ctx = ep->prep;
    pre->run = preprocess_run;
    const dlp_layer *in = &ep->model.net.layers[0];
    char ladder[96];
    dlp_serve_ladder_describe(&ep->ladder, ladder, sizeof ladder);
    DLP_INFO("serve: %s (%d classes, %dx%d) on %s %s, plans of batch %s ready in %.0f ms; input %s %s; weights %s",
             ep->model.net.arch, ep->model.net.num_classes, in->h, in->w, dlp_backend_name(e0->ops), dlp_dtype_name(e0->precision),
             ladder, ep->ladder.create_ms, dlp_layout_name(e0->layout), dlp_dtype_name(e0->in_dtype),
             ep->model.random_init ? "random (seeded init)" : ep->model.weights);
    return DLP_OK;
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
    engine_opts eo = {0};
    const char *labels_path = NULL, *port_file = NULL, *json_path = NULL, *mon_csv = NULL, *mon_jsonl = NULL;
    int mon_interval = 500;
    double delay_ms = 2, timeout_ms = 5000, read_timeout_s = 30, drain_s = 30;
    int64_t max_body = 8 << 20;
    dlp_opt opts[] = {
        {"host", 0, DLP_OPT_STR, &cfg.host, "127.0.0.1", "ADDR", "address to listen on (0.0.0.0 or :: for every interface)", NULL, 0},
        {"port", 'p', DLP_OPT_INT, &cfg.port, "8080", "N", "TCP port (0: any free port; see --port-file)", NULL, 0},
        {"port-file", 0, DLP_OPT_STR, &port_file, NULL, "FILE", "write the port here once listening", NULL, 0},
        {"model", 'm', DLP_OPT_STR, &eo.model, NULL, "NAME", "model (default: the weights' arch, else resnet50)", NULL, 0},
        {"device", 'd', DLP_OPT_STR, &eo.device, "cpu", "DEV", "backend: cpu | ref | cuda | sim:<gpu>", NULL, 0},
        {"precision", 0, DLP_OPT_CHOICE, &eo.precision, "fp32", NULL, "compute precision", "fp32|bf16|fp16", 0},
        {"threads", 't', DLP_OPT_INT, &eo.threads, "0", "N", "compute threads (0: all allowed CPUs)", NULL, 0},
        {"weights", 'w', DLP_OPT_STR, &eo.weights, NULL, "FILE", "weights: a dlperf checkpoint or torchvision safetensors (none: seeded random init, meaningless answers)", NULL, 0},
        {"classes", 0, DLP_OPT_INT, &eo.classes, "0", "N", "classes (0: from the weights, else 1000)", NULL, 0},
        {"size", 0, DLP_OPT_INT, &eo.size, "224", "PX", "input side (the shorter side is resized to size*256/224 first)", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &eo.seed, "1", "N", "seed of the random init (without --weights)", NULL, 0},
        {"dct-scale", 0, DLP_OPT_FLAG, &eo.dct, NULL, NULL, "let the JPEG decoder downscale by a DCT factor where the crop allows (faster; not bit-exact with Pillow)", NULL, 0},
        {"labels", 'l', DLP_OPT_STR, &labels_path, NULL, "FILE", "class names, one per line (answers then carry labels)", NULL, 0},
        {"max-batch", 'b', DLP_OPT_INT, &cfg.max_batch, "8", "N", "dynamic batching: largest batch (plans of batch 1, 2, 4, .. up to it; each batch runs on the smallest that holds it)", NULL, 0},
        {"single-plan", 0, DLP_OPT_FLAG, &eo.single_plan, NULL, NULL, "one plan of batch --max-batch only (less memory; a lone request then costs a whole batch)", NULL, 0},
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
    // NaN fails every comparison; the upper bounds keep the nanosecond arithmetic (now + timeout) far from overflow.
    if (!(delay_ms >= 0 && delay_ms <= 60e3) || !(timeout_ms > 0 && timeout_ms <= 86400e3) ||
        !(read_timeout_s > 0 && read_timeout_s <= 86400) || !(drain_s >= 0 && drain_s <= 86400))
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--max-delay must be in [0, 60000] ms; --timeout in (0, 86400000] "
                                    "ms; --read-timeout in (0, 86400] s; --drain-timeout in [0, 86400] s"));
    cfg.max_delay_ns = (int64_t)(delay_ms * 1e6);
    cfg.timeout_ns = (int64_t)(timeout_ms * 1e6);
    cfg.read_timeout_ns = (int64_t)(read_timeout_s * 1e9);
    cfg.drain_timeout_ns = (int64_t)(drain_s * 1e9);
    cfg.max_body_bytes = max_body;
    eo.max_batch = cfg.max_batch;
    eo.workers = cfg.workers;
    if (eo.size < 32 || eo.size > 4096) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--size %d is not in 32..4096", eo.size));
    if (cfg.max_batch < 1 || cfg.workers < 1)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--max-batch and --workers must be >= 1"));

    char **labels = NULL;
    int nlabels = 0;
    if (labels_path && (st = dlp_serve_labels_load(labels_path, &labels, &nlabels))) return dlp_cli_fail(st);
    cfg.labels = (const char *const *)labels;
    cfg.nlabels = nlabels;

    dlp_serve_engine eng;
    dlp_serve_preprocess pre;
    engine_parts parts;
    memset(&parts, 0, sizeof parts);
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
    st = open_engine(&eo, &parts, &eng, &pre);
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
            if (parts.have_model) json_object_set_new(j, "model", dlp_infer_model_to_json(&parts.model));
            if (parts.ladder.n)
                json_object_set_new(j, "plan", dlp_infer_engine_plan_json(&parts.ladder.plans[parts.ladder.n - 1]));
            json_object_set_new(j, "plan_calls", plan_calls_json(&eng));
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
    close_engine(&parts, &eng, &pre);
    dlp_serve_labels_free(labels, nlabels);
    return dlp_cli_fail(st);
}
