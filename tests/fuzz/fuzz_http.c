// tests/fuzz/fuzz_http: the serve path over HTTP — the real server (serve/server_mhd.c on libmicrohttpd, the
// request pipeline, fuzz_serve's fake engine and the real val transform) listening on a loopback port, started once
// per process. Each input is written as-is on a fresh connection (request line, headers, chunked or sized bodies,
// several requests pipelined: whatever the bytes say), the client half-closes, and the harness reads until the
// server closes. It then checks what a client relies on:
//   - the server answers with an HTTP/1.x status line (or closes without a word: a request it could not parse),
//     never a 500 (the fake engine cannot fail: a 500 is a bug in the front end), and closes within 5 s — half the
//     server's 10-s header timeout, so a connection held open until the reaper cuts it fails here;
//   - the server still serves: GET /healthz on a new connection answers 200.
// The routes are /v1/classify and the KServe v2 ones (/v2, /v2/health/*, /v2/models/model[/ready|/infer]: JSON
// tensors, the binary-data extension with Inference-Header-Content-Length, BYTES JPEGs, classification); the fake
// engine takes 3x16x16 FP32 NCHW samples, so the seeds' tensors are that shape. A v2 request must never get a 500
// either: parse errors are 400 with the protocol's {"error"}.
// libmicrohttpd itself is a system library (not instrumented): afl's coverage is dlperf's handlers around it.
// Without libmicrohttpd in the build the harness does nothing (the server cannot start).
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "fuzz.h"
#include "serve/serve.h"

#define DEADLINE_NS ((int64_t)5 * 1000000000)
#define MAX_ANSWER (1 << 20)

static dlp_server *g_srv;
static int g_port;
static int g_unavailable;

static void stop_server(void) {
    if (!g_srv) return;
    dlp_server_stop(g_srv);
    dlp_server_free(g_srv);
    g_srv = NULL;
}

static int start_server(void) {
    if (g_srv) return 1;
    if (g_unavailable) return 0;
    static dlp_serve_cfg cfg;  // the server keeps a copy of cfg but the engine and preprocess must outlive it
    const dlp_serve_engine *e;
    const dlp_serve_preprocess *p;
    dlp_fuzz_serve_parts(&cfg, &e, &p);
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.max_body_bytes = 256 * 1024;
    cfg.max_conns_per_ip = 0;
    cfg.http_threads = 1;
    cfg.drain_timeout_ns = 1000000000;
    dlp_status st = dlp_server_start(&cfg, e, p, &g_srv);
    if (st != DLP_OK) {  // built without libmicrohttpd, or no loopback: nothing to fuzz
        fprintf(stderr, "fuzz_http: the server does not start (%s): inputs are not run\n", dlp_err_msg());
        g_unavailable = 1;
        return 0;
    }
    g_port = dlp_server_port(g_srv);
    atexit(stop_server);
    return 1;
}

static int wait_fd(int fd, short ev, int64_t deadline) {
    int64_t left = deadline - dlp_now_ns();
    if (left <= 0) return 0;
    struct pollfd p = {fd, ev, 0};
    int r = poll(&p, 1, (int)(left / 1000000) + 1);
    return r > 0 ? 1 : (r < 0 && errno == EINTR ? wait_fd(fd, ev, deadline) : 0);
}

// Sends req, half-closes, reads the answer until the server closes (at most MAX_ANSWER bytes kept); returns the
// bytes read, -1 when the deadline passed first.
static ssize_t exchange(const uint8_t *req, size_t len, char *ans, size_t cap) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    DLP_FUZZ_CHECK(fd >= 0);
    // Reset rather than TIME_WAIT when this side closes: millions of connections must not run out of ports.
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)g_port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int64_t deadline = dlp_now_ns() + DEADLINE_NS;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        DLP_FUZZ_CHECK(errno == EINPROGRESS);
        DLP_FUZZ_CHECK(wait_fd(fd, POLLOUT, deadline));
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        DLP_FUZZ_CHECK(err == 0);  // the server listens: a refused connection means it is gone
    }
    size_t off = 0, got = 0;
    int wr_open = 1, timed_out = 0;
    if (len == 0) { shutdown(fd, SHUT_WR); wr_open = 0; }
    for (;;) {
        short ev = POLLIN | (wr_open ? POLLOUT : 0);
        if (!wait_fd(fd, ev, deadline)) { timed_out = 1; break; }
        if (wr_open) {
            ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
            if (w > 0) off += (size_t)w;
            // The server may answer and close before the whole input is read (an early 413, a bad request line).
            if ((w < 0 && errno != EAGAIN) || off == len) { shutdown(fd, SHUT_WR); wr_open = 0; }
        }
        char tmp[16384];
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r == 0) break;
        if (r < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            break;  // reset by the server: an answer may have come before it
        }
        size_t keep = got + (size_t)r > cap ? cap - got : (size_t)r;
        memcpy(ans + got, tmp, keep);
        got += keep;
    }
    close(fd);
    return timed_out ? -1 : (ssize_t)got;
}

static int status_of(const char *ans, size_t n) {
    if (n < 12 || (memcmp(ans, "HTTP/1.1 ", 9) != 0 && memcmp(ans, "HTTP/1.0 ", 9) != 0)) return -1;
    int code = 0;
    for (int i = 9; i < 12; i++) {
        if (ans[i] < '0' || ans[i] > '9') return -1;
        code = code * 10 + (ans[i] - '0');
    }
    return code;
}

int dlp_fuzz_http(const uint8_t *data, size_t size) {
    if (!start_server()) return 0;
    static char *ans;
    if (!ans) DLP_FUZZ_CHECK((ans = malloc(MAX_ANSWER)) != NULL);
    ssize_t n = exchange(data, size, ans, MAX_ANSWER);
    if (n < 0) fprintf(stderr, "fuzz_http: no answer and no close within 5 s\n");
    DLP_FUZZ_CHECK(n >= 0);
    if (n > 0) {
        int code = status_of(ans, (size_t)n);
        if (code < 100 || code > 599 || code == 500)
            fprintf(stderr, "fuzz_http: answer begins \"%.*s\"\n", (int)(n < 80 ? n : 80), ans);
        DLP_FUZZ_CHECK(code >= 100 && code <= 599);
        DLP_FUZZ_CHECK(code != 500);
    }
    static const char health[] = "GET /healthz HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n";
    n = exchange((const uint8_t *)health, sizeof health - 1, ans, MAX_ANSWER);
    DLP_FUZZ_CHECK(n > 0 && status_of(ans, (size_t)n) == 200);
    return 0;
}
DLP_FUZZ_LIBFUZZER_ENTRY(dlp_fuzz_http)
