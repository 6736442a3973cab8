// End-to-end tests of the HTTP service on 127.0.0.1 (libmicrohttpd), with the test-double engine of
// serve_fake.c: status codes (400 non-JPEG / corrupt / empty, 413, 404, 405), /metrics accepted by promtool,
// a thousand malformed requests, slow clients that trickle bytes while others are served, load with every
// request answered (our client and wrk), the loadgen's HTTP SUT against it, and SIGTERM with requests in flight.
// Every loop is bounded in count and time; every server stops by itself.
//
// Also a helper mode for the CLI tests: `test_serve_server_mhd --serve-fake PORT_FILE [MAX_BATCH BASE_MS QUEUE]`
// runs the service with the test double until SIGTERM (tests/cli/loadgen_http.sh).
// Main file: src/serve/server_mhd.c; also src/serve/run.c, src/loadgen/sut_http.c and http_client.c (the
// loadgen over HTTP).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "loadgen/http_client.h"
#include "loadgen/loadgen.h"
#include "monitor/monitor.h"
#include "serve/serve.h"
#include "serve_fake.h"
#include "testutil.h"

#define MS 1000000LL

#ifdef DLP_HAVE_MHD

// --- helpers ---------------------------------------------------------------------------------------------
typedef struct srv_fx {
    fake_engine fe;
    dlp_serve_engine eng;
    dlp_serve_preprocess pre;
    dlp_serve_cfg cfg;
    dlp_server *s;
    int port;
    char url[64];
} srv_fx;

static void srv_cfg(srv_fx *f, int max_batch, int64_t base_ns) {
    memset(f, 0, sizeof *f);
    fake_engine_init(&f->fe, max_batch, base_ns, 0);
    f->eng = fake_engine_iface(&f->fe);
    f->pre = fake_preprocess_iface();
    dlp_serve_cfg_default(&f->cfg);
    f->cfg.port = 0;
    f->cfg.max_batch = max_batch;
    f->cfg.max_delay_ns = 2 * MS;
}

static void srv_start(srv_fx *f) {
    assert_int_equal(dlp_server_start(&f->cfg, &f->eng, &f->pre, &f->s), DLP_OK);
    f->port = dlp_server_port(f->s);
    assert_true(f->port > 0);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d/v1/classify", f->port);
}

static void srv_stop(srv_fx *f) {
    assert_int_equal(dlp_server_stop(f->s), DLP_OK);
    dlp_server_free(f->s);
    fake_engine_destroy(&f->fe);
}

// Server stats once nothing is in flight (a client can see its answer a moment before the pipeline counts
// the request out).
// Waits until nothing is in the pipeline AND every admitted request's answer has reached libmicrohttpd (or its
// client was found gone): the pipeline's completion only resumes the connection, and the answer is queued (and
// counted) when MHD's thread next runs the handler, which a loaded machine can delay past the pipeline's idle.
static void stats_idle(dlp_server *s, dlp_serve_stats *st) {
    for (int i = 0; i < 200; i++) {
        dlp_server_stats(s, st);
        int64_t resolved = st->by_status[200] + st->by_status[500] + st->by_status[504] + st->client_gone;
        if (st->inflight == 0 && resolved >= st->admitted) return;
        dlp_sleep_ns(10 * MS);
    }
}

static dlp_http_conn *client(int port) {
    dlp_http_url u;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
    assert_int_equal(dlp_http_url_parse(url, &u), DLP_OK);
    dlp_http_timeouts t = {2000 * MS, 5000 * MS, 10000 * MS};
    dlp_http_conn *c;
    assert_int_equal(dlp_http_conn_open(&u, &t, &c), DLP_OK);
    return c;
}

static int raw_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

static void send_all(int fd, const void *b, size_t n) {
    const char *p = b;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) return;  // the server may close early (413, garbage): fine
        p += k;
        n -= (size_t)k;
    }
}

// Reads until the peer closes or 5 s pass; returns the status of the first response (0 if none).
static int raw_status(int fd) {
    char buf[4096];
    size_t len = 0;
    for (;;) {
        ssize_t k = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (k <= 0) break;
        len += (size_t)k;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n") || len >= sizeof buf - 1) break;
    }
    buf[len] = '\0';
    int st = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &st) != 1) st = 0;
    return st;
}

static uint8_t *g_jpeg[4];
static size_t g_jpeg_len[4];

static int setup_jpegs(void **state) {
    (void)state;
    for (int i = 0; i < 4; i++) fake_make_jpeg(100 + (uint64_t)i, 160 + 16 * i, 120, 90, &g_jpeg[i], &g_jpeg_len[i]);
    return 0;
}

static int teardown_jpegs(void **state) {
    (void)state;
    for (int i = 0; i < 4; i++) free(g_jpeg[i]);
    return 0;
}

static int post(dlp_http_conn *c, const void *b, size_t n, dlp_http_response *r) {
    dlp_http_error e;
    dlp_status st = dlp_http_request(c, "POST", "/v1/classify", "image/jpeg", b, n, NULL, r, &e);
    if (st != DLP_OK) {
        fprintf(stderr, "request failed: %s (%s)\n", dlp_err_msg(), dlp_http_error_name(e));
        dlp_err_clear();
        return -1;
    }
    return r->status;
}

// --- tests -----------------------------------------------------------------------------------------------
static void test_status_codes(void **state) {
    (void)state;
    srv_fx f;
    srv_cfg(&f, 4, 1 * MS);
    f.cfg.max_body_bytes = 64 * 1024;
    const char *labels[FAKE_CLASSES];
    char names[FAKE_CLASSES][16];
    for (int i = 0; i < FAKE_CLASSES; i++) {
        snprintf(names[i], sizeof names[i], "class-%d", i);
        labels[i] = names[i];
    }
    f.cfg.labels = labels;
    f.cfg.nlabels = FAKE_CLASSES;
    srv_start(&f);
    dlp_http_conn *c = client(f.port);
    dlp_http_response r;

    // A real JPEG: 200 and the top-5 the double computes directly, with labels.
    assert_int_equal(post(c, g_jpeg[0], g_jpeg_len[0], &r), 200);
    json_error_t je;
    json_t *j = json_loads(r.body, 0, &je);
    assert_non_null(j);
    json_t *top = json_object_get(j, "top5");
    assert_int_equal((int)json_array_size(top), 5);
    int cls[5];
    float prob[5];
    assert_int_equal(fake_classify(g_jpeg[0], g_jpeg_len[0], 5, cls, prob), 0);
    for (int k = 0; k < 5; k++) {
        json_t *e = json_array_get(top, (size_t)k);
        assert_int_equal(json_integer_value(json_object_get(e, "class")), cls[k]);
        assert_true(fabs(json_real_value(json_object_get(e, "prob")) - prob[k]) < 1e-6);
        char want[16];
        snprintf(want, sizeof want, "class-%d", cls[k]);
        assert_string_equal(json_string_value(json_object_get(e, "label")), want);
    }
    assert_true(json_integer_value(json_object_get(j, "batch")) >= 1);
    json_decref(j);
    assert_string_equal(r.content_type, "application/json");
    dlp_http_response_free(&r);

    // 400: not a JPEG (PNG signature), corrupt (SOI then garbage), truncated, empty.
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
    uint8_t corrupt[200] = {0xFF, 0xD8, 0xFF};
    for (int i = 3; i < 200; i++) corrupt[i] = (uint8_t)(i * 91 + 7);
    struct { const void *b; size_t n; const char *msg; } bad[] = {
        {png, sizeof png, "SOI"},
        {"hello, world", 12, "SOI"},
        {corrupt, sizeof corrupt, "JPEG"},
        {g_jpeg[1], g_jpeg_len[1] / 2, "JPEG"},
        {"", 0, "empty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(post(c, bad[i].b, bad[i].n, &r), 400);
        assert_non_null(strstr(r.body, bad[i].msg));
        assert_true(r.keep_alive);  // a 400 keeps the connection
        dlp_http_response_free(&r);
    }
    // 413: over the 64 KiB limit (announced by Content-Length: refused before the body is read).
    uint8_t *big = calloc(1, 100 * 1024);
    big[0] = 0xFF, big[1] = 0xD8, big[2] = 0xFF;
    assert_int_equal(post(c, big, 100 * 1024, &r), 413);
    assert_non_null(strstr(r.body, "limit"));
    dlp_http_response_free(&r);
    // Also far over the socket buffers: the server answers and closes while the client is still sending;
    // the client reads the 413 instead of reporting a broken pipe.
    uint8_t *huge = calloc(1, 16 << 20);
    huge[0] = 0xFF, huge[1] = 0xD8, huge[2] = 0xFF;
    assert_int_equal(post(c, huge, 16 << 20, &r), 413);
    dlp_http_response_free(&r);
    free(huge);
    // 413 for a chunked body that grows past the limit (no Content-Length), on a raw connection.
    int fd = raw_connect(f.port);
    const char *h = "POST /v1/classify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    send_all(fd, h, strlen(h));
    char chunk_head[32];
    snprintf(chunk_head, sizeof chunk_head, "%x\r\n", 20000);
    for (int i = 0; i < 5; i++) {
        send_all(fd, chunk_head, strlen(chunk_head));
        send_all(fd, big, 20000);
        send_all(fd, "\r\n", 2);
    }
    send_all(fd, "0\r\n\r\n", 5);
    assert_int_equal(raw_status(fd), 413);
    close(fd);
    free(big);
    // 404 and 405 (with Allow).
    dlp_http_error e;
    assert_int_equal(dlp_http_request(c, "GET", "/nope", NULL, NULL, 0, NULL, &r, &e), DLP_OK);
    assert_int_equal(r.status, 404);
    dlp_http_response_free(&r);
    assert_int_equal(dlp_http_request(c, "GET", "/v1/classify", NULL, NULL, 0, NULL, &r, &e), DLP_OK);
    assert_int_equal(r.status, 405);
    dlp_http_response_free(&r);
    assert_int_equal(dlp_http_request(c, "PUT", "/v1/classify", "image/jpeg", g_jpeg[0], g_jpeg_len[0], NULL, &r, &e),
                     DLP_OK);
    assert_int_equal(r.status, 405);
    dlp_http_response_free(&r);
    assert_int_equal(dlp_http_request(c, "POST", "/healthz", "text/plain", "x", 1, NULL, &r, &e), DLP_OK);
    assert_int_equal(r.status, 405);
    dlp_http_response_free(&r);
    fd = raw_connect(f.port);
    h = "DELETE /v1/classify HTTP/1.1\r\nHost: x\r\n\r\n";
    send_all(fd, h, strlen(h));
    char buf[1024] = {0};
    ssize_t k = recv(fd, buf, sizeof buf - 1, 0);
    assert_true(k > 0);
    assert_non_null(strstr(buf, "405"));
    assert_non_null(strstr(buf, "Allow: POST"));
    close(fd);
    // /healthz (GET, HEAD) and /metrics.
    assert_int_equal(dlp_http_request(c, "GET", "/healthz", NULL, NULL, 0, NULL, &r, &e), DLP_OK);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "ok"));
    dlp_http_response_free(&r);
    assert_int_equal(dlp_http_request(c, "HEAD", "/healthz", NULL, NULL, 0, NULL, &r, &e), DLP_OK);
    assert_int_equal(r.status, 200);
    assert_int_equal((int)r.body_len, 0);
    dlp_http_response_free(&r);
    // Keep-alive throughout, except after the 413s refused before their bodies were read (MHD then closes).
    assert_int_equal(dlp_http_conn_connects(c), 3);

    dlp_serve_stats st;
    dlp_server_stats(f.s, &st);
    assert_int_equal(st.by_status[200], 3);  // classify, healthz GET, HEAD
    assert_int_equal(st.by_status[400], 5);
    assert_int_equal(st.by_status[413], 3);
    assert_int_equal(st.by_status[404], 1);
    assert_int_equal(st.by_status[405], 4);
    assert_int_equal(st.inferred, 0 + 1);
    dlp_http_conn_close(c);
    srv_stop(&f);
}

static void test_metrics_promtool(void **state) {
    (void)state;
    // With the hardware monitor attached, as `dlperf serve` runs it: its exposition joins /metrics.
    dlp_monitor_cfg mc = {.interval_ms = 100, .initial_phase = "serving"};
    dlp_monitor *mon;
    assert_int_equal(dlp_monitor_create(&mc, &mon), DLP_OK);
    assert_int_equal(dlp_monitor_start(mon), DLP_OK);
    srv_fx f;
    srv_cfg(&f, 4, 1 * MS);
    f.cfg.monitor = mon;
    srv_start(&f);
    dlp_http_conn *c = client(f.port);
    dlp_http_response r;
    for (int i = 0; i < 6; i++) {
        assert_int_equal(post(c, g_jpeg[i % 4], g_jpeg_len[i % 4], &r), 200);
        dlp_http_response_free(&r);
    }
    assert_int_equal(post(c, "nope", 4, &r), 400);
    dlp_http_response_free(&r);
    dlp_http_error e;
    assert_int_equal(dlp_http_request(c, "GET", "/metrics", NULL, NULL, 0, NULL, &r, &e), DLP_OK);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.content_type, "text/plain"));
    assert_non_null(strstr(r.body, "dlperf_serve_requests_total{code=\"200\"} 6\n"));
    assert_non_null(strstr(r.body, "dlperf_serve_requests_total{code=\"400\"} 1\n"));
    assert_non_null(strstr(r.body, "dlperf_serve_request_duration_seconds_count 7\n"));
    assert_non_null(strstr(r.body, "dlperf_serve_images_total 6\n"));
    assert_non_null(strstr(r.body, "dlperf_serve_queue_depth 0\n"));
    assert_non_null(strstr(r.body, "# TYPE dlperf_serve_batch_size histogram"));
    // The monitor's part: its counters were fed by the service (6 images); requests are counted once, by code
    // (dlperf_requests_total duplicated them, with /metrics and /healthz); the build is named.
    assert_non_null(strstr(r.body, "dlperf_images_processed_total 6\n"));
    assert_null(strstr(r.body, "dlperf_requests_total"));
    assert_non_null(strstr(r.body, "dlperf_build_info{version=\""));
    assert_non_null(strstr(r.body, "dlperf_phase_info{phase=\"serving\"} 1\n"));
    // promtool (Debian's prometheus) accepts it.
    if (system("command -v promtool >/dev/null 2>&1") == 0) {
        char dir[256], path[300], cmd[700];
        dlp_test_tmpdir(dir, sizeof dir);
        snprintf(path, sizeof path, "%s/metrics.txt", dir);
        FILE *fp = fopen(path, "w");
        fwrite(r.body, 1, r.body_len, fp);
        fclose(fp);
        snprintf(cmd, sizeof cmd, "promtool check metrics < '%s'", path);
        int rc = system(cmd);
        assert_int_equal(rc, 0);
        dlp_test_rmtree(dir);
    } else {
        fprintf(stderr, "promtool not installed: the /metrics format check is skipped\n");
    }
    dlp_http_response_free(&r);
    dlp_http_conn_close(c);
    srv_stop(&f);
    assert_int_equal(dlp_monitor_stop(mon), DLP_OK);
    dlp_monitor_destroy(mon);
}

// A thousand malformed requests of a dozen kinds, from 4 threads; the server answers each (or closes the
// connection), then still serves a valid request.
typedef struct mal_arg {
    int port, from, to;
    int answered, closed;
    int codes[600];
} mal_arg;

static void *malformed_main(void *p) {
    mal_arg *a = p;
    char req[512];
    static char bigheader[40000];
    memset(bigheader, 'a', sizeof bigheader - 1);
    for (int i = a->from; i < a->to; i++) {
        int fd = raw_connect(a->port);
        if (fd < 0) continue;
        int kind = i % 12;
        switch (kind) {
        case 0: {  // binary garbage
            uint8_t g[256];
            for (int k = 0; k < 256; k++) g[k] = (uint8_t)(k * 131 + i);
            send_all(fd, g, sizeof g);
            shutdown(fd, SHUT_WR);
            break;
        }
        case 1: snprintf(req, sizeof req, "GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n"); send_all(fd, req, strlen(req)); break;
        case 2: snprintf(req, sizeof req, "BLAH\r\n\r\n"); send_all(fd, req, strlen(req)); break;
        case 3:
            snprintf(req, sizeof req, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
            send_all(fd, req, strlen(req));
            send_all(fd, bigheader, sizeof bigheader - 1);
            send_all(fd, "\r\n\r\n", 4);
            break;
        case 4:
            snprintf(req, sizeof req, "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world");
            send_all(fd, req, strlen(req));
            break;
        case 5: {
            uint8_t c[64] = {0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x02};
            snprintf(req, sizeof req, "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: 64\r\n\r\n");
            send_all(fd, req, strlen(req));
            send_all(fd, c, sizeof c);
            break;
        }
        case 6:  // announces 1000 bytes, sends 10, hangs up
            snprintf(req, sizeof req, "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789");
            send_all(fd, req, strlen(req));
            shutdown(fd, SHUT_WR);
            break;
        case 7: snprintf(req, sizeof req, "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"); send_all(fd, req, strlen(req)); break;
        case 8:
            snprintf(req, sizeof req, "POST /v1/classify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n");
            send_all(fd, req, strlen(req));
            break;
        case 9: snprintf(req, sizeof req, "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"); send_all(fd, req, strlen(req)); break;
        case 10: snprintf(req, sizeof req, "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n"); send_all(fd, req, strlen(req)); break;
        default:  // a header line without a colon
            snprintf(req, sizeof req, "GET /healthz HTTP/1.1\r\nHost: x\r\nBadHeader\r\n\r\n");
            send_all(fd, req, strlen(req));
            break;
        }
        if (kind == 0 || kind == 6) {  // incomplete and half-closed: MHD holds these until its idle timeout
            struct timeval tv = {0, 100000};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        }
        int st = raw_status(fd);
        if (st > 0 && st < 600) {
            a->answered++;
            a->codes[st]++;
        } else {
            a->closed++;
        }
        close(fd);
    }
    return NULL;
}

static void test_malformed_thousand(void **state) {
    (void)state;
    srv_fx f;
    srv_cfg(&f, 4, 1 * MS);
    f.cfg.max_body_bytes = 1 << 20;
    f.cfg.idle_timeout_s = 2;  // the incomplete ones are dropped 2 s after their last byte
    srv_start(&f);
    mal_arg a[4];
    pthread_t th[4];
    int64_t t0 = dlp_now_ns();
    for (int i = 0; i < 4; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].port = f.port;
        a[i].from = i * 250;
        a[i].to = (i + 1) * 250;
        pthread_create(&th[i], NULL, malformed_main, &a[i]);
    }
    int answered = 0, closed = 0, codes[600] = {0};
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        answered += a[i].answered;
        closed += a[i].closed;
        for (int c = 0; c < 600; c++) codes[c] += a[i].codes[c];
    }
    fprintf(stderr, "  1000 malformed requests in %.1f s: %d answered (400: %d, 404: %d, 413: %d, 431: %d), %d closed\n",
            dlp_ns_to_s(dlp_now_ns() - t0), answered, codes[400], codes[404], codes[413], codes[431], closed);
    assert_int_equal(answered + closed, 1000);
    // Every kind that is a complete request gets a 4xx; nothing is ever answered 2xx or 5xx.
    for (int c = 200; c < 300; c++) assert_int_equal(codes[c], 0);
    for (int c = 500; c < 600; c++) assert_int_equal(codes[c], 0);
    assert_true(codes[400] >= 6 * 83);  // kinds 4, 5, 7, 8, 9, 11 (our 400s and MHD's)
    assert_true(codes[404] >= 83);      // kind 1
    assert_true(codes[413] >= 83);      // kind 10
    assert_true(codes[431] >= 83);      // kind 3: header over the connection's memory limit
    assert_true(answered >= 750);
    // The incomplete ones do not linger: within the idle timeout (+ margin) every connection is gone.
    dlp_serve_stats st;
    for (int i = 0; i < 100; i++) {
        dlp_server_stats(f.s, &st);
        if (st.open_connections == 0) break;
        dlp_sleep_ns(50 * MS);
    }
    if (st.open_connections != 0) fprintf(stderr, "  %d connections still open\n", st.open_connections);
    assert_int_equal(st.open_connections, 0);
    // Still healthy: a valid request works.
    dlp_http_conn *c = client(f.port);
    dlp_http_response r;
    assert_int_equal(post(c, g_jpeg[2], g_jpeg_len[2], &r), 200);
    dlp_http_response_free(&r);
    dlp_http_conn_close(c);
    stats_idle(f.s, &st);
    assert_int_equal(st.inferred, 1);
    assert_int_equal(st.inflight, 0);
    srv_stop(&f);
}

// Slow clients: trickle one byte every 100 ms, some in the header, some in the body.
typedef struct slow_arg {
    int port, in_body;
    int64_t closed_after_ns;  // when the server cut it off (0: never within the test)
} slow_arg;

static void *slow_main(void *p) {
    slow_arg *a = p;
    int fd = raw_connect(a->port);
    if (fd < 0) return NULL;
    int64_t t0 = dlp_now_ns();
    const char *h = "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\nContent-Length: 5000\r\n\r\n";
    size_t hl = strlen(h), sent = 0;
    if (a->in_body) {
        send_all(fd, h, hl);
        sent = hl;
    }
    for (int i = 0; i < 80; i++) {  // at most 8 s
        char b = sent < hl ? h[sent] : (char)0xFF;
        ssize_t k = send(fd, &b, 1, MSG_NOSIGNAL);
        sent++;
        if (k <= 0) break;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 100) > 0) {  // readable: closed (EOF) or an answer
            char buf[512];
            ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (r <= 0 || r > 0) break;
        }
    }
    a->closed_after_ns = dlp_now_ns() - t0;
    close(fd);
    return NULL;
}

static void measure(int port, int n, int64_t *lat_out) {
    dlp_http_conn *c = client(port);
    for (int i = 0; i < n; i++) {
        dlp_http_response r;
        int64_t t0 = dlp_now_ns();
        assert_int_equal(post(c, g_jpeg[i % 4], g_jpeg_len[i % 4], &r), 200);
        lat_out[i] = dlp_now_ns() - t0;
        dlp_http_response_free(&r);
    }
    dlp_http_conn_close(c);
}

static void test_slow_clients(void **state) {
    (void)state;
    srv_fx f;
    srv_cfg(&f, 4, 1 * MS);
    f.cfg.read_timeout_ns = 2000 * MS;  // a whole request must arrive within 2 s
    srv_start(&f);
    enum { N = 40, SLOW = 8 };
    int64_t base[N], during[N];
    measure(f.port, N, base);
    slow_arg sa[SLOW];
    pthread_t th[SLOW];
    for (int i = 0; i < SLOW; i++) {
        sa[i] = (slow_arg){.port = f.port, .in_body = i % 2};
        pthread_create(&th[i], NULL, slow_main, &sa[i]);
    }
    dlp_sleep_ns(300 * MS);  // the slow ones are connected and trickling
    dlp_serve_stats st;
    dlp_server_stats(f.s, &st);
    assert_true(st.open_connections >= SLOW);
    int64_t t_during = dlp_now_ns();
    measure(f.port, N, during);
    double during_s = dlp_ns_to_s(dlp_now_ns() - t_during);
    for (int i = 0; i < SLOW; i++) pthread_join(th[i], NULL);
    dlp_lg_latency lb, ld;
    dlp_lg_latency_summarize(base, N, &lb);
    dlp_lg_latency_summarize(during, N, &ld);
    fprintf(stderr, "  %d requests alone: p50 %.2f ms, max %.2f ms; with %d slow clients: p50 %.2f ms, max %.2f ms "
            "(%.2f s for all)\n", N, dlp_ns_to_ms(lb.p50_ns), dlp_ns_to_ms(lb.max_ns), SLOW, dlp_ns_to_ms(ld.p50_ns),
            dlp_ns_to_ms(ld.max_ns), during_s);
    // The others are not delayed: their median is within 20 ms of the baseline, none waits anywhere near the
    // slow clients' seconds, and they finish while the slow clients are still connected.
    assert_true(ld.p50_ns < lb.p50_ns + 20 * MS);
    assert_true(ld.max_ns < 1000 * MS);
    // The slow ones were cut off by the 2 s read timeout (not by finishing: 5000 bytes at 10/s take 500 s).
    for (int i = 0; i < SLOW; i++) {
        fprintf(stderr, "  slow client %d (%s): closed by the server after %.2f s\n", i,
                sa[i].in_body ? "body" : "header", dlp_ns_to_s(sa[i].closed_after_ns));
        assert_true(sa[i].closed_after_ns > 1500 * MS && sa[i].closed_after_ns < 4500 * MS);
    }
    assert_true(during_s < 1.5);
    dlp_server_stats(f.s, &st);
    assert_true(st.reaped >= SLOW);
    srv_stop(&f);
}

// Load with our own client: 12 keep-alive connections for 2 s against a queue of 4; every request gets an
// answer (200 or 503), and the server's counts match the clients' exactly.
typedef struct load_arg {
    int port;
    int64_t until_ns;
    int sent, errors;
    int codes[600];
} load_arg;

static void *load_main(void *p) {
    load_arg *a = p;
    dlp_http_conn *c = client(a->port);
    for (int i = 0; i < 1500 && dlp_now_ns() < a->until_ns; i++) {
        dlp_http_response r;
        a->sent++;
        int st = post(c, g_jpeg[i % 4], g_jpeg_len[i % 4], &r);
        if (st > 0 && st < 600) a->codes[st]++;
        else a->errors++;
        dlp_http_response_free(&r);
    }
    dlp_http_conn_close(c);
    return NULL;
}

static void test_load_none_lost(void **state) {
    (void)state;
    srv_fx f;
    srv_cfg(&f, 4, 3 * MS);
    f.cfg.queue_capacity = 4;
    srv_start(&f);
    enum { C = 12 };
    load_arg a[C];
    pthread_t th[C];
    int64_t until = dlp_now_ns() + 2000 * MS;
    for (int i = 0; i < C; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].port = f.port;
        a[i].until_ns = until;
        pthread_create(&th[i], NULL, load_main, &a[i]);
    }
    int sent = 0, errors = 0, codes[600] = {0};
    for (int i = 0; i < C; i++) {
        pthread_join(th[i], NULL);
        sent += a[i].sent;
        errors += a[i].errors;
        for (int c = 0; c < 600; c++) codes[c] += a[i].codes[c];
    }
    dlp_serve_stats st;
    stats_idle(f.s, &st);
    fprintf(stderr, "  %d requests sent: %d answered 200, %d answered 503, %d transport errors; server: %lld answered "
            "(200: %lld, 503: %lld), %lld admitted, %lld inferred in %lld batches\n", sent, codes[200], codes[503], errors,
            (long long)st.requests, (long long)st.by_status[200], (long long)st.by_status[503], (long long)st.admitted,
            (long long)st.inferred, (long long)st.batches);
    assert_int_equal(errors, 0);
    assert_int_equal(codes[200] + codes[503], sent);
    assert_true(codes[503] > 0);  // the queue did fill up
    assert_true(codes[200] > 50);
    // The server answered exactly what the clients received, and every admitted request ran.
    assert_int_equal(st.requests, sent);
    assert_int_equal(st.by_status[200], codes[200]);
    assert_int_equal(st.by_status[503], codes[503]);
    assert_int_equal(st.admitted, codes[200]);
    assert_int_equal(st.inferred, codes[200]);
    assert_int_equal(st.inflight, 0);
    assert_true((double)st.inferred / (double)st.batches > 1.0);  // batching happened
    srv_stop(&f);
}

// wrk (Debian) with a Lua script POSTing a JPEG: 3 s, 16 connections, loopback.
static void test_wrk_load(void **state) {
    (void)state;
    if (system("command -v wrk >/dev/null 2>&1") != 0) {
        fprintf(stderr, "wrk is not installed (scripts/setup.sh test): skipped\n");
        skip();
    }
    srv_fx f;
    srv_cfg(&f, 8, 2 * MS);
    f.cfg.queue_capacity = 8;
    srv_start(&f);
    char dir[256], body[300], lua[300], cmd[1200];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(body, sizeof body, "%s/img.jpg", dir);
    snprintf(lua, sizeof lua, "%s/post.lua", dir);
    FILE *fp = fopen(body, "wb");
    fwrite(g_jpeg[0], 1, g_jpeg_len[0], fp);
    fclose(fp);
    fp = fopen(lua, "w");
    fprintf(fp,
            "local f = assert(io.open(\"%s\", \"rb\"))\n"
            "wrk.method = \"POST\"\nwrk.body = f:read(\"*a\")\nf:close()\n"
            "wrk.headers[\"Content-Type\"] = \"image/jpeg\"\n"
            "local threads = {}\n"
            "function setup(thread) table.insert(threads, thread) end\n"
            "function init(args) counts = {} end\n"
            "function response(status, headers, body) counts[status] = (counts[status] or 0) + 1 end\n"
            "function done(summary, latency, requests)\n"
            "  local total = {}\n"
            "  for _, t in ipairs(threads) do\n"
            "    for k, v in pairs(t:get(\"counts\")) do total[k] = (total[k] or 0) + v end\n"
            "  end\n"
            "  for k, v in pairs(total) do io.write(string.format(\"status %%d %%d\\n\", k, v)) end\n"
            "  local e = summary.errors\n"
            "  io.write(string.format(\"completed %%d\\nerrors %%d %%d %%d %%d %%d\\n\", summary.requests, e.connect, "
            "e.read, e.write, e.status, e.timeout))\n"
            "end\n",
            body);
    fclose(fp);
    snprintf(cmd, sizeof cmd, "timeout 20 wrk -t2 -c16 -d3s --timeout 5s -s '%s' 'http://127.0.0.1:%d/v1/classify' 2>&1",
             lua, f.port);
    FILE *pp = popen(cmd, "r");
    assert_non_null(pp);
    char line[512];
    long codes[600] = {0}, completed = -1, econn = -1, eread = -1, ewrite = -1, estatus = -1, etimeout = -1;
    while (fgets(line, sizeof line, pp)) {
        fputs("  wrk: ", stderr);
        fputs(line, stderr);
        int code;
        long v;
        if (sscanf(line, "status %d %ld", &code, &v) == 2 && code > 0 && code < 600) codes[code] = v;
        sscanf(line, "completed %ld", &completed);
        sscanf(line, "errors %ld %ld %ld %ld %ld", &econn, &eread, &ewrite, &estatus, &etimeout);
    }
    assert_int_equal(pclose(pp), 0);
    // Let the requests wrk cut off at its deadline finish on the server.
    dlp_serve_stats st;
    stats_idle(f.s, &st);
    long wrk_total = 0;
    for (int c = 0; c < 600; c++) wrk_total += codes[c];
    fprintf(stderr, "  wrk received %ld (200: %ld, 503: %ld); server answered %lld (200: %lld, 503: %lld), "
            "admitted %lld, inferred %lld in %lld batches, %lld answers undeliverable (wrk hung up)\n", wrk_total,
            codes[200], codes[503], (long long)st.requests, (long long)st.by_status[200], (long long)st.by_status[503],
            (long long)st.admitted, (long long)st.inferred, (long long)st.batches, (long long)st.client_gone);
    assert_true(completed > 100);
    assert_int_equal(wrk_total, completed);
    assert_int_equal(econn, 0);
    assert_int_equal(eread, 0);
    assert_int_equal(ewrite, 0);
    assert_int_equal(etimeout, 0);
    assert_int_equal(codes[200] + codes[503], wrk_total);
    // Everything wrk got, the server sent; the only extra answers are those in flight when wrk stopped
    // (at most one per connection), which wrk does not count.
    assert_true(st.by_status[200] >= codes[200] && st.by_status[503] >= codes[503]);
    assert_true(st.requests - wrk_total <= 16);
    assert_int_equal(st.requests, st.by_status[200] + st.by_status[503]);
    // None lost: every admitted request was run and answered; the only answers not delivered are those whose
    // connection wrk closed at its deadline (at most one per connection), and the server counted them.
    assert_int_equal(st.inflight, 0);
    assert_int_equal(st.admitted, st.by_status[200] + st.client_gone);
    assert_true(st.client_gone <= 16);
    assert_int_equal(st.inferred, st.admitted);
    dlp_test_rmtree(dir);
    srv_stop(&f);
}

// The loadgen's HTTP SUT against the service: Server, SingleStream and Offline; counts on both sides agree.
static void test_loadgen_over_http(void **state) {
    (void)state;
    srv_fx f;
    srv_cfg(&f, 8, 1 * MS);
    f.cfg.queue_capacity = 64;
    srv_start(&f);
    const void *bodies[4] = {g_jpeg[0], g_jpeg[1], g_jpeg[2], g_jpeg[3]};
    dlp_lg_http_cfg hc = {.url = f.url, .bodies = bodies, .body_lens = g_jpeg_len, .nbodies = 4,
                          .content_type = "image/jpeg", .connections = 8};
    dlp_lg_sut sut;
    assert_int_equal(dlp_lg_sut_http_create(&hc, &sut), DLP_OK);
    dlp_lg_settings s;
    dlp_lg_settings_default(&s, DLP_LG_SERVER);
    s.target_qps = 300;
    s.target_latency_ns = 250 * MS;  // loose: this machine is shared
    s.min_duration_ns = 1000 * MS;
    s.min_query_count = 500;
    s.idle_timeout_ns = 10000 * MS;
    dlp_lg_result r;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    char *txt = dlp_lg_summary_text(&r);
    fputs(txt, stderr);
    free(txt);
    assert_true(r.valid);
    assert_int_equal(r.samples_by_outcome[DLP_LG_OK], r.samples_issued);
    json_t *ss = r.sut_stats;
    assert_int_equal(json_integer_value(json_object_get(json_object_get(ss, "status"), "200")), r.samples_issued);
    assert_true(json_integer_value(json_object_get(ss, "tcp_connects")) <= 8);  // keep-alive
    dlp_serve_stats st;
    dlp_server_stats(f.s, &st);
    assert_int_equal(st.by_status[200], r.samples_issued);
    int64_t served = st.by_status[200];
    dlp_lg_result_free(&r);

    dlp_lg_settings_default(&s, DLP_LG_SINGLE_STREAM);
    s.min_duration_ns = 0;
    s.min_query_count = 64;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_true(r.valid);
    assert_int_equal(r.queries_issued, 64);
    dlp_lg_result_free(&r);

    dlp_lg_settings_default(&s, DLP_LG_OFFLINE);
    s.target_qps = 100;
    s.min_duration_ns = 0;
    s.min_query_count = 300;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_int_equal(r.samples_by_outcome[DLP_LG_OK], 300);
    assert_true(r.metric_value > 10);
    dlp_lg_result_free(&r);
    dlp_server_stats(f.s, &st);
    assert_int_equal(st.by_status[200], served + 64 + 300);
    dlp_lg_sut_destroy(&sut);
    srv_stop(&f);

    // With the server gone every sample fails (connection refused), counted, and the run is INVALID.
    assert_int_equal(dlp_lg_sut_http_create(&hc, &sut), DLP_OK);
    dlp_lg_settings_default(&s, DLP_LG_SINGLE_STREAM);
    s.min_duration_ns = 0;
    s.min_query_count = 10;
    s.early_stopping = 0;
    assert_int_equal(dlp_lg_run(&s, &sut, &r), DLP_OK);
    assert_false(r.valid);
    assert_int_equal(r.samples_by_outcome[DLP_LG_ERROR], 10);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r.sut_stats, "errors"), "connect")), 10);
    dlp_lg_result_free(&r);
    dlp_lg_sut_destroy(&sut);
}

// SIGTERM with requests in flight: a child runs the service (dlp_serve_run, as `dlperf serve` does) with a slow
// engine; 8 requests are sent, then SIGTERM: every one is answered 200, new connections are refused, exit 0.
typedef struct one_arg {
    int port;
    int status;
    int64_t t_done;
} one_arg;

static void *one_main(void *p) {
    one_arg *a = p;
    dlp_http_conn *c = client(a->port);
    dlp_http_response r;
    a->status = post(c, g_jpeg[1], g_jpeg_len[1], &r);
    a->t_done = dlp_now_ns();
    dlp_http_response_free(&r);
    dlp_http_conn_close(c);
    return NULL;
}

static int read_port_file(const char *path, int64_t wait_ns) {
    int64_t until = dlp_now_ns() + wait_ns;
    while (dlp_now_ns() < until) {
        FILE *fp = fopen(path, "r");
        int port = 0;
        if (fp) {
            if (fscanf(fp, "%d", &port) != 1) port = 0;
            fclose(fp);
        }
        if (port > 0) return port;
        dlp_sleep_ns(20 * MS);
    }
    return 0;
}

static void test_sigterm_graceful(void **state) {
    (void)state;
    char dir[256], pf[300];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(pf, sizeof pf, "%s/port", dir);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fake_engine fe;
        fake_engine_init(&fe, 4, 250 * MS, 0);  // 8 requests = 2 batches = ~0.5 s of work
        dlp_serve_engine eng = fake_engine_iface(&fe);
        dlp_serve_preprocess pre = fake_preprocess_iface();
        dlp_serve_cfg cfg;
        dlp_serve_cfg_default(&cfg);
        cfg.port = 0;
        cfg.max_batch = 4;
        cfg.max_delay_ns = 50 * MS;
        cfg.drain_timeout_ns = 10000 * MS;
        dlp_serve_stats st;
        int sig = 0;
        dlp_status s = dlp_serve_run(&cfg, &eng, &pre, pf, &st, &sig);
        fprintf(stderr, "  child: stopped by signal %d after %lld answers (200: %lld)\n", sig, (long long)st.requests,
                (long long)st.by_status[200]);
        _exit(s == DLP_OK && sig == SIGTERM && st.by_status[200] == 8 ? 0 : 3);
    }
    int port = read_port_file(pf, 10000 * MS);
    assert_true(port > 0);
    one_arg a[8];
    pthread_t th[8];
    for (int i = 0; i < 8; i++) {
        a[i] = (one_arg){.port = port};
        pthread_create(&th[i], NULL, one_main, &a[i]);
    }
    dlp_sleep_ns(150 * MS);  // all 8 are in: decoding, queued or in the first batch
    int64_t t_term = dlp_now_ns();
    assert_int_equal(kill(pid, SIGTERM), 0);
    dlp_sleep_ns(60 * MS);
    int fd = raw_connect(port);  // the listening socket is closed while the 8 are still being served
    int refused = fd < 0;
    if (fd >= 0) close(fd);
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    int wst = 0;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    double took = dlp_ns_to_s(dlp_now_ns() - t_term);
    int late = 0;
    for (int i = 0; i < 8; i++) {
        assert_int_equal(a[i].status, 200);
        late += a[i].t_done > t_term + 100 * MS;
    }
    fprintf(stderr, "  SIGTERM: 8/8 answered 200 (%d of them after the signal), new connection %s, exit %d after "
            "%.2f s\n", late, refused ? "refused" : "accepted", WIFEXITED(wst) ? WEXITSTATUS(wst) : -1, took);
    assert_true(late >= 1);  // they really were in flight
    assert_true(refused);
    assert_true(WIFEXITED(wst));
    assert_int_equal(WEXITSTATUS(wst), 0);
    assert_true(took < 10);
    assert_true(raw_connect(port) < 0);
    dlp_test_rmtree(dir);
}

// --serve-fake PORT_FILE [MAX_BATCH BASE_MS QUEUE]: the service with the test double, until SIGTERM.
static int serve_fake_main(int argc, char **argv) {
    fake_engine fe;
    int mb = argc > 3 ? atoi(argv[3]) : 8;
    int base_ms = argc > 4 ? atoi(argv[4]) : 2;
    fake_engine_init(&fe, mb, (int64_t)base_ms * MS, 0);
    dlp_serve_engine eng = fake_engine_iface(&fe);
    dlp_serve_preprocess pre = fake_preprocess_iface();
    dlp_serve_cfg cfg;
    dlp_serve_cfg_default(&cfg);
    cfg.port = 0;
    cfg.max_batch = mb;
    cfg.queue_capacity = argc > 5 ? atoi(argv[5]) : 64;
    dlp_serve_stats st;
    int sig;
    dlp_status s = dlp_serve_run(&cfg, &eng, &pre, argv[2], &st, &sig);
    if (s != DLP_OK) dlp_err_print(stderr);
    json_t *j = dlp_serve_stats_to_json(&st);
    json_dumpf(j, stdout, JSON_COMPACT);
    putchar('\n');
    json_decref(j);
    fake_engine_destroy(&fe);
    return s == DLP_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "--serve-fake") == 0) return serve_fake_main(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_codes),
        cmocka_unit_test(test_metrics_promtool),
        cmocka_unit_test(test_malformed_thousand),
        cmocka_unit_test(test_slow_clients),
        cmocka_unit_test(test_load_none_lost),
        cmocka_unit_test(test_wrk_load),
        cmocka_unit_test(test_loadgen_over_http),
        cmocka_unit_test(test_sigterm_graceful),
    };
    return cmocka_run_group_tests(tests, setup_jpegs, teardown_jpegs);
}

#else  // built without libmicrohttpd

static void test_no_mhd(void **state) {
    (void)state;
    fprintf(stderr, "built without libmicrohttpd: the HTTP service tests are skipped\n");
    skip();
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--serve-fake") == 0) {
        fprintf(stderr, "built without libmicrohttpd: no HTTP service\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_mhd)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
