// serve/run: running the service as a command — until SIGINT/SIGTERM, then a graceful stop — and the stats
// as JSON. Without libmicrohttpd the server functions say how to get it.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "core/fs.h"
#include "core/log.h"
#include "serve/serve.h"

#ifndef DLP_HAVE_MHD
struct dlp_server {
    int unused;
};
dlp_status dlp_server_start(const dlp_serve_cfg *cfg, const dlp_serve_engine *engine,
                            const dlp_serve_preprocess *pre, dlp_server **out) {
    (void)cfg, (void)engine, (void)pre;
    *out = NULL;
    return DLP_ERR(DLP_ERR_UNSUPPORTED, "this dlperf was built without libmicrohttpd: install libmicrohttpd-dev "
                   "(scripts/setup.sh build) and rebuild");
}
int dlp_server_port(const dlp_server *s) { return s ? 0 : 0; }
dlp_status dlp_server_stop(dlp_server *s) { return s ? DLP_OK : DLP_OK; }
void dlp_server_free(dlp_server *s) { (void)s; }
void dlp_server_stats(dlp_server *s, dlp_serve_stats *out) {
    (void)s;
    memset(out, 0, sizeof *out);
}
char *dlp_server_metrics_text(dlp_server *s) { return s ? NULL : NULL; }
#endif

json_t *dlp_serve_stats_to_json(const dlp_serve_stats *st) {
    json_t *o = json_object(), *by = json_object();
    for (int c = 0; c < 600; c++)
        if (st->by_status[c]) {
            char k[8];
            snprintf(k, sizeof k, "%d", c);
            json_object_set_new(by, k, json_integer(st->by_status[c]));
        }
    json_object_set_new(o, "requests", json_integer(st->requests));
    json_object_set_new(o, "by_status", by);
    json_object_set_new(o, "admitted", json_integer(st->admitted));
    json_object_set_new(o, "images_inferred", json_integer(st->inferred));
    json_object_set_new(o, "batches", json_integer(st->batches));
    json_object_set_new(o, "mean_batch", json_real(st->batches ? (double)st->inferred / (double)st->batches : 0));
    json_object_set_new(o, "connections", json_integer(st->connections_total));
    json_object_set_new(o, "connections_reaped", json_integer(st->reaped));
    json_object_set_new(o, "aborted_by_client", json_integer(st->aborted));
    json_object_set_new(o, "answer_undeliverable", json_integer(st->client_gone));
    return o;
}

void dlp_serve_block_stop_signals(sigset_t *set, sigset_t *old) {
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, set, old);
}

dlp_status dlp_serve_run(const dlp_serve_cfg *cfg, const dlp_serve_engine *engine, const dlp_serve_preprocess *pre,
                         const char *port_file, dlp_serve_stats *stats, int *signo) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (signo) *signo = 0;
    // Block the stop signals before any thread exists, so every thread inherits the mask and sigwait below
    // is the one place they arrive.
    sigset_t set, old;
    dlp_serve_block_stop_signals(&set, &old);
    dlp_server *s = NULL;
    dlp_status st = dlp_server_start(cfg, engine, pre, &s);
    if (st != DLP_OK) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return st;
    }
    int port = dlp_server_port(s);
    const char *host = cfg->host ? cfg->host : "127.0.0.1";
    int v6 = strchr(host, ':') != NULL;
    DLP_INFO("serving on http://%s%s%s:%d (POST /v1/classify, GET /healthz, GET /metrics; KServe v2 under /v2); engine %s, max batch %d, "
             "max delay %.1f ms, queue %d; SIGINT/SIGTERM stops", v6 ? "[" : "", host, v6 ? "]" : "", port,
             engine->name ? engine->name : "?", cfg->max_batch, (double)cfg->max_delay_ns * 1e-6, cfg->queue_capacity);
    if (port_file) {
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%d\n", port);
        st = dlp_write_atomic(port_file, buf, (size_t)n, DLP_WRITE_REPLACE);
        if (st != DLP_OK) {
            dlp_server_free(s);
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            return st;
        }
    }
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    DLP_INFO("got %s: finishing the requests in flight (up to %.0f s), then stopping", sig == SIGINT ? "SIGINT" : "SIGTERM",
             (double)cfg->drain_timeout_ns * 1e-9);
    st = dlp_server_stop(s);
    if (st != DLP_OK) {
        DLP_WARN("%s", dlp_err_msg());
        dlp_err_clear();
        st = DLP_OK;  // a drain cut short is reported, not a failure of the run
    }
    if (stats) dlp_server_stats(s, stats);
    dlp_server_free(s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (signo) *signo = sig;
    return DLP_OK;
}
