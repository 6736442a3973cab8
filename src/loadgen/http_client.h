// loadgen/http_client: a small HTTP/1.1 client over sockets — one keep-alive connection per object, deadlines
// on connect, send and receive, Content-Length and chunked bodies, at most one transparent retry when a
// reused keep-alive connection turns out to be closed by the server. No TLS (http:// only).
// Defines: dlp_http_url, dlp_http_url_parse, dlp_http_conn, dlp_http_timeouts, dlp_http_response,
//          dlp_http_conn_open, dlp_http_request, dlp_http_conn_close, dlp_http_response_free, dlp_http_error.
#ifndef DLP_LOADGEN_HTTP_CLIENT_H
#define DLP_LOADGEN_HTTP_CLIENT_H
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct dlp_http_url {
    char host[256];     // without brackets for IPv6 literals
    char port[8];
    char path[1024];    // "/" when the URL has none
    char authority[300];  // for the Host header: host[:port] as written
} dlp_http_url;

// "http://127.0.0.1:8080/v1/classify", "http://[::1]:9000/", "http://localhost/x". Not https.
dlp_status dlp_http_url_parse(const char *url, dlp_http_url *out);

typedef struct dlp_http_timeouts {
    int64_t connect_ns;  // TCP connect
    int64_t send_ns;     // writing the whole request
    int64_t recv_ns;     // from the end of the request to the end of the response
} dlp_http_timeouts;

// Kinds of failure, counted by the HTTP SUT.
typedef enum {
    DLP_HTTP_ERR_NONE = 0,
    DLP_HTTP_ERR_CONNECT,   // refused, unreachable, or the connect timed out
    DLP_HTTP_ERR_SEND,      // reset or timed out while sending
    DLP_HTTP_ERR_RECV,      // reset or closed before a whole response
    DLP_HTTP_ERR_TIMEOUT,   // no whole response within recv_ns
    DLP_HTTP_ERR_PROTOCOL,  // not a valid HTTP/1.x response
    DLP_HTTP_ERR_COUNT
} dlp_http_error;
const char *dlp_http_error_name(dlp_http_error e);

typedef struct dlp_http_response {
    int status;            // 200, 503, ...
    int keep_alive;        // the connection stays open after this response
    int retry_after_s;     // Retry-After in seconds (-1 if absent)
    char *body;            // NUL-terminated; owned (dlp_http_response_free)
    size_t body_len;
    char content_type[64];
} dlp_http_response;

typedef struct dlp_http_conn dlp_http_conn;

// Resolves the URL's host; the first request connects. Nothing is sent yet.
dlp_status dlp_http_conn_open(const dlp_http_url *url, const dlp_http_timeouts *t, dlp_http_conn **out);
// One request/response on the connection (connecting or reconnecting as needed). method "GET"/"POST";
// extra_headers: NULL or complete "Name: value\r\n" lines. On failure returns DLP_ERR_IO / DLP_ERR_TIMEOUT /
// DLP_ERR_FORMAT and sets *err (when err is not NULL) to the kind.
dlp_status dlp_http_request(dlp_http_conn *c, const char *method, const char *path, const char *content_type,
                            const void *body, size_t len, const char *extra_headers, dlp_http_response *resp,
                            dlp_http_error *err);
// Connects now (when not connected), so a caller can tell "nothing listens there" before sending anything.
dlp_status dlp_http_conn_probe(dlp_http_conn *c);
void dlp_http_conn_close(dlp_http_conn *c);
void dlp_http_response_free(dlp_http_response *r);
// Connections opened so far (reconnects included): to check that keep-alive is really used.
int64_t dlp_http_conn_connects(const dlp_http_conn *c);

#endif
