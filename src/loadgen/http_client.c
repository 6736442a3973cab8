// loadgen/http_client: HTTP/1.1 over non-blocking sockets with poll() deadlines.
#include "loadgen/http_client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/clock.h"

#define HTTP_MAX_HEADER (64 * 1024)
#define HTTP_MAX_BODY ((size_t)64 << 20)

struct dlp_http_conn {
    dlp_http_url url;
    dlp_http_timeouts t;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int fd;
    int64_t requests_on_fd;
    int64_t connects;
    char *buf;  // receive buffer: bytes read past the last response stay here for the next one
    size_t cap, len;
};

const char *dlp_http_error_name(dlp_http_error e) {
    static const char *const n[DLP_HTTP_ERR_COUNT] = {"none", "connect", "send", "recv", "timeout", "protocol"};
    return (unsigned)e < DLP_HTTP_ERR_COUNT ? n[e] : "?";
}

dlp_status dlp_http_url_parse(const char *url, dlp_http_url *u) {
    memset(u, 0, sizeof *u);
    if (!url || strncasecmp(url, "http://", 7) != 0) {
        if (url && strncasecmp(url, "https://", 8) == 0)
            return DLP_ERR(DLP_ERR_UNSUPPORTED, "URL '%s': https is not supported (plain http:// only)", url);
        return DLP_ERR(DLP_ERR_INVALID, "URL '%s' must start with http://", url ? url : "");
    }
    const char *p = url + 7;
    const char *slash = strchr(p, '/');
    size_t alen = slash ? (size_t)(slash - p) : strlen(p);
    if (alen == 0 || alen >= sizeof u->authority) return DLP_ERR(DLP_ERR_INVALID, "URL '%s' has no valid host", url);
    memcpy(u->authority, p, alen);
    const char *path = slash ? slash : "/";
    if (strlen(path) >= sizeof u->path) return DLP_ERR(DLP_ERR_INVALID, "URL '%s': path too long", url);
    snprintf(u->path, sizeof u->path, "%s", path);
    const char *port = NULL;
    if (u->authority[0] == '[') {  // [v6]:port
        char *rb = strchr(u->authority, ']');
        if (!rb) return DLP_ERR(DLP_ERR_INVALID, "URL '%s': unterminated [IPv6] host", url);
        size_t hl = (size_t)(rb - u->authority - 1);
        memcpy(u->host, u->authority + 1, hl);
        u->host[hl] = '\0';
        if (rb[1] == ':') port = rb + 2;
        else if (rb[1] != '\0') return DLP_ERR(DLP_ERR_INVALID, "URL '%s': junk after the IPv6 host", url);
    } else {
        char *colon = strrchr(u->authority, ':');
        size_t hl = colon ? (size_t)(colon - u->authority) : strlen(u->authority);
        memcpy(u->host, u->authority, hl);
        u->host[hl] = '\0';
        if (colon) port = colon + 1;
    }
    if (!u->host[0]) return DLP_ERR(DLP_ERR_INVALID, "URL '%s' has an empty host", url);
    if (port) {
        char *end;
        long v = strtol(port, &end, 10);
        if (end == port || *end || v < 1 || v > 65535) return DLP_ERR(DLP_ERR_INVALID, "URL '%s': bad port", url);
        snprintf(u->port, sizeof u->port, "%ld", v);
    } else {
        snprintf(u->port, sizeof u->port, "80");
    }
    return DLP_OK;
}

dlp_status dlp_http_conn_open(const dlp_http_url *url, const dlp_http_timeouts *t, dlp_http_conn **out) {
    *out = NULL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(url->host, url->port, &hints, &res);
    if (rc != 0 || !res)
        return DLP_ERR(DLP_ERR_NOTFOUND, "cannot resolve '%s': %s", url->host, gai_strerror(rc));
    dlp_http_conn *c = calloc(1, sizeof *c);
    if (!c) {
        freeaddrinfo(res);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    c->url = *url;
    c->t = *t;
    memcpy(&c->addr, res->ai_addr, res->ai_addrlen);
    c->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    c->fd = -1;
    c->cap = 16384;
    c->buf = malloc(c->cap);
    if (!c->buf) {
        free(c);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    *out = c;
    return DLP_OK;
}

static void drop_fd(dlp_http_conn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->len = 0;
    c->requests_on_fd = 0;
}

void dlp_http_conn_close(dlp_http_conn *c) {
    if (!c) return;
    drop_fd(c);
    free(c->buf);
    free(c);
}

int64_t dlp_http_conn_connects(const dlp_http_conn *c) { return c->connects; }

static dlp_status do_connect(dlp_http_conn *c, dlp_http_error *err);

dlp_status dlp_http_conn_probe(dlp_http_conn *c) {
    if (c->fd >= 0) return DLP_OK;
    dlp_http_error err = DLP_HTTP_ERR_NONE;
    return do_connect(c, &err);
}

void dlp_http_response_free(dlp_http_response *r) {
    if (!r) return;
    free(r->body);
    memset(r, 0, sizeof *r);
}

// Waits for fd to be ready for `events` until deadline. 1 ready, 0 timeout, -1 error.
static int wait_fd(int fd, short events, int64_t deadline_ns) {
    for (;;) {
        int64_t left = deadline_ns - dlp_now_ns();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int ms = (int)((left + 999999) / 1000000);
        int rc = poll(&p, 1, ms);
        if (rc > 0) return 1;
        if (rc == 0) continue;  // re-check the clock
        if (errno == EINTR) continue;
        return -1;
    }
}

static dlp_status do_connect(dlp_http_conn *c, dlp_http_error *err) {
    int fd = socket(c->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err = DLP_HTTP_ERR_CONNECT;
        return DLP_ERR(DLP_ERR_IO, "socket: %s", strerror(errno));
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->connects++;
    if (connect(fd, (struct sockaddr *)&c->addr, c->addrlen) != 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            *err = DLP_HTTP_ERR_CONNECT;
            return DLP_ERR(DLP_ERR_IO, "cannot connect to %s: %s", c->url.authority, strerror(e));
        }
        int w = wait_fd(fd, POLLOUT, dlp_now_ns() + c->t.connect_ns);
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (w == 1) getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        if (w != 1 || soerr != 0) {
            close(fd);
            *err = DLP_HTTP_ERR_CONNECT;
            if (w == 0) return DLP_ERR(DLP_ERR_TIMEOUT, "connecting to %s timed out", c->url.authority);
            return DLP_ERR(DLP_ERR_IO, "cannot connect to %s: %s", c->url.authority, strerror(soerr ? soerr : errno));
        }
    }
    c->fd = fd;
    c->len = 0;
    c->requests_on_fd = 0;
    return DLP_OK;
}

static dlp_status send_all(dlp_http_conn *c, struct iovec *iov, int niov, int64_t deadline, dlp_http_error *err) {
    while (niov > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
        ssize_t n = sendmsg(c->fd, &m, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int w = wait_fd(c->fd, POLLOUT, deadline);
                if (w == 1) continue;
                *err = w == 0 ? DLP_HTTP_ERR_TIMEOUT : DLP_HTTP_ERR_SEND;
                return w == 0 ? DLP_ERR(DLP_ERR_TIMEOUT, "sending to %s timed out", c->url.authority)
                              : DLP_ERR(DLP_ERR_IO, "sending to %s: %s", c->url.authority, strerror(errno));
            }
            *err = DLP_HTTP_ERR_SEND;
            return DLP_ERR(DLP_ERR_IO, "sending to %s: %s", c->url.authority, strerror(errno));
        }
        size_t left = (size_t)n;
        while (niov > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++, niov--;
        }
        if (niov > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return DLP_OK;
}

// Reads more bytes into c->buf. Returns bytes read (>0), 0 on EOF; errors as status.
static dlp_status fill(dlp_http_conn *c, int64_t deadline, size_t *got, dlp_http_error *err) {
    if (c->len == c->cap) {
        if (c->cap >= HTTP_MAX_HEADER + HTTP_MAX_BODY + 65536) {
            *err = DLP_HTTP_ERR_PROTOCOL;
            return DLP_ERR(DLP_ERR_FORMAT, "response from %s is too large", c->url.authority);
        }
        char *nb = realloc(c->buf, c->cap * 2);
        if (!nb) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        c->buf = nb;
        c->cap *= 2;
    }
    for (;;) {
        ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (n > 0) {
            c->len += (size_t)n;
            *got = (size_t)n;
            return DLP_OK;
        }
        if (n == 0) {
            *got = 0;
            return DLP_OK;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = wait_fd(c->fd, POLLIN, deadline);
            if (w == 1) continue;
            *err = w == 0 ? DLP_HTTP_ERR_TIMEOUT : DLP_HTTP_ERR_RECV;
            return w == 0 ? DLP_ERR(DLP_ERR_TIMEOUT, "no response from %s in time", c->url.authority)
                          : DLP_ERR(DLP_ERR_IO, "receiving from %s: %s", c->url.authority, strerror(errno));
        }
        *err = DLP_HTTP_ERR_RECV;
        return DLP_ERR(DLP_ERR_IO, "receiving from %s: %s", c->url.authority, strerror(errno));
    }
}

static const char *find_crlfcrlf(const char *b, size_t n) {
    for (size_t i = 0; i + 3 < n; i++)
        if (b[i] == '\r' && b[i + 1] == '\n' && b[i + 2] == '\r' && b[i + 3] == '\n') return b + i;
    return NULL;
}

// Parses the status line and headers in [b, end). Fills resp and the framing.
static dlp_status parse_head(const char *b, const char *end, dlp_http_response *resp, int64_t *content_length,
                             int *chunked, int *http10) {
    *content_length = -1;
    *chunked = 0;
    resp->retry_after_s = -1;
    const char *eol = memchr(b, '\n', (size_t)(end - b));
    int minor = 1, status = 0;
    char sl[64];
    size_t sll = eol ? (size_t)(eol - b) : 0;
    if (sll >= sizeof sl) sll = sizeof sl - 1;
    memcpy(sl, b, sll);
    sl[sll] = '\0';
    if (!eol || sscanf(sl, "HTTP/1.%d %d", &minor, &status) != 2 || status < 100 || status > 999)
        return DLP_ERR(DLP_ERR_FORMAT, "not an HTTP/1.x status line");
    *http10 = minor == 0;
    resp->status = status;
    resp->keep_alive = !*http10;
    const char *line = eol + 1;
    while (line < end) {
        const char *le = memchr(line, '\n', (size_t)(end - line));
        if (!le) le = end;
        size_t ll = (size_t)(le - line);
        if (ll > 0 && line[ll - 1] == '\r') ll--;
        const char *colon = memchr(line, ':', ll);
        if (colon) {
            size_t kl = (size_t)(colon - line);
            const char *v = colon + 1;
            while (v < line + ll && (*v == ' ' || *v == '\t')) v++;
            size_t vl = (size_t)(line + ll - v);
            char val[128];
            if (vl >= sizeof val) vl = sizeof val - 1;
            memcpy(val, v, vl);
            val[vl] = '\0';
            if (kl == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
                char *e;
                long long x = strtoll(val, &e, 10);
                if (e == val || x < 0) return DLP_ERR(DLP_ERR_FORMAT, "bad Content-Length '%s'", val);
                *content_length = x;
            } else if (kl == 17 && strncasecmp(line, "Transfer-Encoding", 17) == 0) {
                if (strcasestr(val, "chunked")) *chunked = 1;
            } else if (kl == 10 && strncasecmp(line, "Connection", 10) == 0) {
                if (strcasestr(val, "close")) resp->keep_alive = 0;
                else if (strcasestr(val, "keep-alive")) resp->keep_alive = 1;
            } else if (kl == 11 && strncasecmp(line, "Retry-After", 11) == 0) {
                resp->retry_after_s = atoi(val);
            } else if (kl == 12 && strncasecmp(line, "Content-Type", 12) == 0) {
                snprintf(resp->content_type, sizeof resp->content_type, "%s", val);
            }
        }
        line = le + 1;
    }
    return DLP_OK;
}

// Reads one response. *fresh_eof is set when the connection closed before any byte of it arrived.
static dlp_status read_response(dlp_http_conn *c, const char *method, int64_t deadline, dlp_http_response *resp,
                                dlp_http_error *err, int *fresh_eof) {
    *fresh_eof = 0;
    const char *hend;
    size_t got;
    while (!(hend = find_crlfcrlf(c->buf, c->len))) {
        if (c->len > HTTP_MAX_HEADER) {
            *err = DLP_HTTP_ERR_PROTOCOL;
            return DLP_ERR(DLP_ERR_FORMAT, "response header from %s is too large", c->url.authority);
        }
        size_t before = c->len;
        DLP_CHECK(fill(c, deadline, &got, err));
        if (got == 0) {
            *fresh_eof = before == 0;
            *err = DLP_HTTP_ERR_RECV;
            return DLP_ERR(DLP_ERR_IO, "%s closed the connection before a whole response", c->url.authority);
        }
    }
    int64_t clen;
    int chunked, http10;
    dlp_status st = parse_head(c->buf, hend + 2, resp, &clen, &chunked, &http10);
    if (st != DLP_OK) {
        *err = DLP_HTTP_ERR_PROTOCOL;
        return st;
    }
    size_t off = (size_t)(hend + 4 - c->buf);
    int no_body = strcmp(method, "HEAD") == 0 || resp->status == 204 || resp->status == 304 || resp->status < 200;
    size_t cap = 256, blen = 0;
    char *body = malloc(cap);
    if (!body) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
#define ENSURE_BODY(extra)                                                           \
    do {                                                                             \
        if (blen + (extra) + 1 > cap) {                                              \
            while (blen + (extra) + 1 > cap) cap *= 2;                               \
            char *nb_ = realloc(body, cap);                                          \
            if (!nb_) { free(body); return DLP_ERR(DLP_ERR_NOMEM, "out of memory"); } \
            body = nb_;                                                              \
        }                                                                            \
    } while (0)
    if (no_body) {
        // nothing
    } else if (chunked) {
        for (;;) {
            const char *le;
            while (!(le = memchr(c->buf + off, '\n', c->len - off))) {
                st = fill(c, deadline, &got, err);
                if (st == DLP_OK && got == 0) {
                    *err = DLP_HTTP_ERR_RECV;
                    st = DLP_ERR(DLP_ERR_IO, "%s closed the connection inside a chunked body", c->url.authority);
                }
                if (st != DLP_OK) { free(body); return st; }
            }
            char *e;
            unsigned long long csz = strtoull(c->buf + off, &e, 16);
            if (e == c->buf + off || csz > HTTP_MAX_BODY) {
                free(body);
                *err = DLP_HTTP_ERR_PROTOCOL;
                return DLP_ERR(DLP_ERR_FORMAT, "bad chunk size from %s", c->url.authority);
            }
            off = (size_t)(le + 1 - c->buf);
            if (csz == 0) {  // trailers until an empty line
                for (;;) {
                    while (!(le = memchr(c->buf + off, '\n', c->len - off))) {
                        st = fill(c, deadline, &got, err);
                        if (st == DLP_OK && got == 0) { *err = DLP_HTTP_ERR_RECV; st = DLP_ERR(DLP_ERR_IO, "closed in trailers"); }
                        if (st != DLP_OK) { free(body); return st; }
                    }
                    size_t ll = (size_t)(le - (c->buf + off));
                    off = (size_t)(le + 1 - c->buf);
                    if (ll == 0 || (ll == 1 && c->buf[off - 2] == '\r')) break;
                }
                break;
            }
            while (c->len - off < csz + 2) {
                st = fill(c, deadline, &got, err);
                if (st == DLP_OK && got == 0) { *err = DLP_HTTP_ERR_RECV; st = DLP_ERR(DLP_ERR_IO, "closed inside a chunk"); }
                if (st != DLP_OK) { free(body); return st; }
            }
            if (blen + csz > HTTP_MAX_BODY) {
                free(body);
                *err = DLP_HTTP_ERR_PROTOCOL;
                return DLP_ERR(DLP_ERR_FORMAT, "response body from %s is too large", c->url.authority);
            }
            ENSURE_BODY(csz);
            memcpy(body + blen, c->buf + off, csz);
            blen += csz;
            off += csz + 2;
        }
    } else if (clen >= 0) {
        if ((size_t)clen > HTTP_MAX_BODY) {
            free(body);
            *err = DLP_HTTP_ERR_PROTOCOL;
            return DLP_ERR(DLP_ERR_FORMAT, "response body of %lld bytes from %s is too large", (long long)clen,
                           c->url.authority);
        }
        while (c->len - off < (size_t)clen) {
            st = fill(c, deadline, &got, err);
            if (st == DLP_OK && got == 0) {
                *err = DLP_HTTP_ERR_RECV;
                st = DLP_ERR(DLP_ERR_IO, "%s closed the connection inside the body", c->url.authority);
            }
            if (st != DLP_OK) { free(body); return st; }
        }
        ENSURE_BODY((size_t)clen);
        memcpy(body, c->buf + off, (size_t)clen);
        blen = (size_t)clen;
        off += (size_t)clen;
    } else {  // read to EOF
        for (;;) {
            st = fill(c, deadline, &got, err);
            if (st != DLP_OK) { free(body); return st; }
            if (got == 0) break;
        }
        size_t n = c->len - off;
        if (n > HTTP_MAX_BODY) { free(body); *err = DLP_HTTP_ERR_PROTOCOL; return DLP_ERR(DLP_ERR_FORMAT, "body too large"); }
        ENSURE_BODY(n);
        memcpy(body, c->buf + off, n);
        blen = n;
        off = c->len;
        resp->keep_alive = 0;
    }
#undef ENSURE_BODY
    body[blen] = '\0';
    resp->body = body;
    resp->body_len = blen;
    memmove(c->buf, c->buf + off, c->len - off);  // keep pipelined bytes (none expected)
    c->len -= off;
    return DLP_OK;
}

dlp_status dlp_http_request(dlp_http_conn *c, const char *method, const char *path, const char *content_type,
                            const void *body, size_t len, const char *extra_headers, dlp_http_response *resp,
                            dlp_http_error *err_out) {
    dlp_http_error err_local = DLP_HTTP_ERR_NONE, *err = err_out ? err_out : &err_local;
    *err = DLP_HTTP_ERR_NONE;
    memset(resp, 0, sizeof *resp);
    char head[2048];
    int hl;
    if (body || len > 0 || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0)
        hl = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n",
                      method, path ? path : c->url.path, c->url.authority,
                      content_type ? content_type : "application/octet-stream", len, extra_headers ? extra_headers : "");
    else
        hl = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", method, path ? path : c->url.path,
                      c->url.authority, extra_headers ? extra_headers : "");
    if (hl < 0 || (size_t)hl >= sizeof head) return DLP_ERR(DLP_ERR_INVALID, "request header too long");

    for (int attempt = 0; attempt < 2; attempt++) {
        int reused = c->fd >= 0 && c->requests_on_fd > 0;
        if (c->fd < 0) {
            dlp_status st = do_connect(c, err);
            if (st != DLP_OK) return st;
        }
        struct iovec iov[2] = {{head, (size_t)hl}, {(void *)body, len}};
        dlp_status st = send_all(c, iov, len ? 2 : 1, dlp_now_ns() + c->t.send_ns, err);
        if (st != DLP_OK && *err == DLP_HTTP_ERR_SEND) {
            // The server may have answered and closed before taking the whole body (413 from Content-Length):
            // read that answer if there is one.
            dlp_http_error e2 = DLP_HTTP_ERR_NONE;
            int fresh = 0;
            dlp_status st2 = read_response(c, method, dlp_now_ns() + 1000000000LL, resp, &e2, &fresh);
            if (st2 == DLP_OK) {
                drop_fd(c);
                resp->keep_alive = 0;
                dlp_err_clear();
                *err = DLP_HTTP_ERR_NONE;
                return DLP_OK;
            }
            dlp_err_clear();
            st = DLP_ERR(DLP_ERR_IO, "sending to %s: the connection was closed", c->url.authority);
        }
        if (st != DLP_OK) {
            drop_fd(c);
            if (reused && *err == DLP_HTTP_ERR_SEND) {  // the server closed an idle keep-alive connection
                dlp_err_clear();
                continue;
            }
            return st;
        }
        int fresh_eof = 0;
        st = read_response(c, method, dlp_now_ns() + c->t.recv_ns, resp, err, &fresh_eof);
        if (st != DLP_OK) {
            drop_fd(c);
            if (reused && fresh_eof) {  // closed before answering: the request was not taken; retry once
                dlp_err_clear();
                continue;
            }
            return st;
        }
        c->requests_on_fd++;
        if (!resp->keep_alive) drop_fd(c);
        *err = DLP_HTTP_ERR_NONE;
        return DLP_OK;
    }
    return DLP_ERR(DLP_ERR_IO, "%s closed the connection twice in a row", c->url.authority);
}
