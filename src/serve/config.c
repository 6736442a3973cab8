// serve/config: the service's defaults and their checks.
#include <string.h>

#include "serve/serve.h"

void dlp_serve_cfg_default(dlp_serve_cfg *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->max_batch = 8;
    c->max_delay_ns = 2000000;          // 2 ms
    c->queue_capacity = 64;
    c->workers = 2;
    c->timeout_ns = 5000000000LL;       // 5 s: ResNet-50 batches take ~1 s on 2 cores
    c->max_body_bytes = 8 << 20;        // 8 MiB: far above any ImageNet JPEG
    c->max_connections = 256;
    c->max_conns_per_ip = 0;            // off: clients behind one proxy / NAT (and loopback) share an address
    c->idle_timeout_s = 10;
    c->header_timeout_ns = 10000000000LL; // 10 s for a header (a real client sends it in one packet)
    c->read_timeout_ns = 30000000000LL; // 30 s for a whole request to arrive
    c->conn_memory_bytes = 32 * 1024;
    c->http_threads = 1;
    c->drain_timeout_ns = 30000000000LL;
    c->topk = 5;
}

dlp_status dlp_serve_cfg_check(const dlp_serve_cfg *c, const dlp_serve_engine *e) {
    if (!e || !e->infer) return DLP_ERR(DLP_ERR_INVALID, "the service needs an inference engine");
    if (e->max_batch < 1 || e->sample_bytes == 0 || e->num_classes < 1)
        return DLP_ERR(DLP_ERR_INVALID, "engine '%s': max batch %d, sample bytes %zu and classes %d must be > 0",
                       e->name ? e->name : "?", e->max_batch, e->sample_bytes, e->num_classes);
    if (c->max_batch < 1 || c->max_batch > e->max_batch)
        return DLP_ERR(DLP_ERR_INVALID, "--max-batch %d must be in [1, %d] (the engine's batch)", c->max_batch,
                       e->max_batch);
    if (c->max_delay_ns < 0) return DLP_ERR(DLP_ERR_INVALID, "--max-delay must be >= 0");
    if (c->queue_capacity < 1 || c->queue_capacity > 65536)
        return DLP_ERR(DLP_ERR_INVALID, "--queue %d must be in [1, 65536]", c->queue_capacity);
    if (c->workers < 1 || c->workers > 256) return DLP_ERR(DLP_ERR_INVALID, "--workers %d must be in [1, 256]", c->workers);
    if (c->timeout_ns <= 0) return DLP_ERR(DLP_ERR_INVALID, "--timeout must be > 0");
    if (c->max_body_bytes < 4 || c->max_body_bytes > ((int64_t)1 << 30))
        return DLP_ERR(DLP_ERR_INVALID, "--max-body must be in [4 bytes, 1 GiB]");
    if (c->max_connections < 1) return DLP_ERR(DLP_ERR_INVALID, "--max-conns must be >= 1");
    // Each connection may hold one body while it arrives: bound what they can hold together.
    if ((uint64_t)c->max_connections * (uint64_t)c->max_body_bytes > ((uint64_t)32 << 30))
        return DLP_ERR(DLP_ERR_INVALID, "--max-conns %d x --max-body %lld bytes may buffer more than 32 GiB of request "
                       "bodies: lower one of them", c->max_connections, (long long)c->max_body_bytes);
    if (c->idle_timeout_s < 1) return DLP_ERR(DLP_ERR_INVALID, "--idle-timeout must be >= 1 s");
    if (c->read_timeout_ns <= 0) return DLP_ERR(DLP_ERR_INVALID, "--read-timeout must be > 0");
    if (c->header_timeout_ns <= 0) return DLP_ERR(DLP_ERR_INVALID, "--header-timeout must be > 0");
    if (c->max_conns_per_ip < 0) return DLP_ERR(DLP_ERR_INVALID, "--max-conns-per-ip must be >= 0 (0: no limit)");
    if (c->http_threads < 1 || c->http_threads > 64) return DLP_ERR(DLP_ERR_INVALID, "--http-threads must be in [1, 64]");
    if (c->port < 0 || c->port > 65535) return DLP_ERR(DLP_ERR_INVALID, "--port %d must be in [0, 65535]", c->port);
    if (c->topk < 1 || c->topk > DLP_SERVE_MAX_TOPK) return DLP_ERR(DLP_ERR_INVALID, "top-k must be in [1, %d]", DLP_SERVE_MAX_TOPK);
    if ((size_t)c->queue_capacity * e->sample_bytes > ((size_t)16 << 30))
        return DLP_ERR(DLP_ERR_INVALID, "--queue %d x %zu-byte samples is more than 16 GiB", c->queue_capacity, e->sample_bytes);
    if (c->labels && c->nlabels != e->num_classes)
        return DLP_ERR(DLP_ERR_INVALID, "the labels file has %d classes but the model has %d", c->nlabels, e->num_classes);
    return DLP_OK;
}
