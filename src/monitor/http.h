// monitor/http: a small HTTP server for the monitor's /metrics (Prometheus text), on libmicrohttpd. Only GET
// /metrics is served (405 for other methods, 404 for other paths); connections are bounded and time out.
// Without libmicrohttpd in the build, start returns DLP_ERR_UNSUPPORTED.
// Defines: dlp_monitor_http, dlp_monitor_http_start, dlp_monitor_http_port, dlp_monitor_http_stop.
#ifndef DLP_MONITOR_HTTP_H
#define DLP_MONITOR_HTTP_H
#include "core/status.h"
#include "monitor/monitor.h"

typedef struct dlp_monitor_http dlp_monitor_http;

// Serves mon's metrics on addr (IPv4 or IPv6 literal; NULL: 127.0.0.1) and port (0: any free port).
dlp_status dlp_monitor_http_start(dlp_monitor *mon, const char *addr, int port, dlp_monitor_http **out);
int dlp_monitor_http_port(const dlp_monitor_http *h);  // the port actually bound
void dlp_monitor_http_stop(dlp_monitor_http *h);       // NULL ok

#endif
