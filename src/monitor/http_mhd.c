// monitor/http_mhd: the /metrics server on libmicrohttpd (built only when libmicrohttpd is found).
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/http.h"
#include "monitor/prom.h"

#if MHD_VERSION < 0x00097002
typedef int mhd_result;
#else
typedef enum MHD_Result mhd_result;
#endif

#define HTTP_MAX_CONNECTIONS 16
#define HTTP_TIMEOUT_S 10

struct dlp_monitor_http {
    struct MHD_Daemon *d;
    dlp_monitor *mon;
    int port;
};

static mhd_result reply(struct MHD_Connection *c, unsigned code, const char *text, const char *allow) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    mhd_result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static mhd_result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                         const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    (void)upload_data;
    (void)upload_size;
    (void)con_cls;
    dlp_monitor_http *h = cls;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: use GET /metrics\n", "GET, HEAD");
    if (strcmp(url, "/metrics") != 0) return reply(c, MHD_HTTP_NOT_FOUND, "not found: this server has only /metrics\n", NULL);
    dlp_prom_buf b;
    dlp_prom_init(&b);
    if (dlp_monitor_render_prom(h->mon, &b) != DLP_OK || !b.data) {
        dlp_prom_free(&b);
        dlp_err_clear();
        return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot render metrics (out of memory)\n", NULL);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(b.len, b.data, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        dlp_prom_free(&b);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, DLP_PROM_CONTENT_TYPE);
    mhd_result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

dlp_status dlp_monitor_http_start(dlp_monitor *mon, const char *addr, int port, dlp_monitor_http **out) {
    *out = NULL;
    if (!addr || !*addr) addr = "127.0.0.1";
    if (port < 0 || port > 65535) return DLP_ERR(DLP_ERR_INVALID, "--metrics-port %d is not a TCP port", port);
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
    struct sockaddr *sa;
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD;
    memset(&in4, 0, sizeof in4);
    memset(&in6, 0, sizeof in6);
    if (inet_pton(AF_INET, addr, &in4.sin_addr) == 1) {
        in4.sin_family = AF_INET;
        in4.sin_port = htons((uint16_t)port);
        sa = (struct sockaddr *)&in4;
    } else if (inet_pton(AF_INET6, addr, &in6.sin6_addr) == 1) {
        in6.sin6_family = AF_INET6;
        in6.sin6_port = htons((uint16_t)port);
        sa = (struct sockaddr *)&in6;
        flags |= MHD_USE_IPv6;
    } else {
        return DLP_ERR(DLP_ERR_INVALID, "--metrics-addr '%s' is not an IPv4 or IPv6 address", addr);
    }
    dlp_monitor_http *h = calloc(1, sizeof *h);
    DLP_TRY_ALLOC(h);
    h->mon = mon;
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, sa,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)HTTP_TIMEOUT_S, MHD_OPTION_END);
    if (!h->d) {
        free(h);
        return DLP_ERR(DLP_ERR_IO, "cannot serve /metrics on %s port %d (port in use, or not allowed)", addr, port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : port;
    *out = h;
    return DLP_OK;
}

int dlp_monitor_http_port(const dlp_monitor_http *h) { return h ? h->port : 0; }

void dlp_monitor_http_stop(dlp_monitor_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    free(h);
}
