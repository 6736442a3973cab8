// monitor/http_none: the /metrics server when dlperf is built without libmicrohttpd (http_mhd.c otherwise).
#include "monitor/http.h"

#ifndef DLP_HAVE_MHD
dlp_status dlp_monitor_http_start(dlp_monitor *mon, const char *addr, int port, dlp_monitor_http **out) {
    (void)mon;
    (void)addr;
    (void)port;
    *out = NULL;
    return DLP_ERR(DLP_ERR_UNSUPPORTED,
                   "this dlperf was built without libmicrohttpd: no /metrics server (install libmicrohttpd-dev and "
                   "rebuild)");
}
int dlp_monitor_http_port(const dlp_monitor_http *h) {
    (void)h;
    return 0;
}
void dlp_monitor_http_stop(dlp_monitor_http *h) { (void)h; }
#endif
