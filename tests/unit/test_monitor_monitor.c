// Unit tests for monitor/ on the real machine: one core kept busy reads as 1/N of the machine's CPU, phases and
// counters with the sampler thread running (totals exact), and the /metrics server answering over loopback.
// Main file: src/monitor/monitor.c (the sampler thread); also src/monitor/src_cpu.c, http_mhd.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/clock.h"
#include "monitor/http.h"
#include "monitor/monitor.h"

static double metric(json_t *summary, int phase, const char *name, const char *stat) {
    json_t *p = phase < 0 ? json_object_get(summary, "total") : json_array_get(json_object_get(summary, "phases"), (size_t)phase);
    json_t *v = json_object_get(json_object_get(json_object_get(p, "metrics"), name), stat);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

typedef struct {
    double wall_s, cpu_s;
} spin_result;

static void *spin(void *arg) {
    spin_result *r = arg;
    int64_t t0 = dlp_now_ns(), c0 = dlp_thread_cpu_ns();
    volatile uint64_t x = 0;
    while (dlp_now_ns() - t0 < 2000000000LL)
        for (int i = 0; i < 10000; i++) x += (uint64_t)i;
    r->wall_s = (double)(dlp_now_ns() - t0) * 1e-9;
    r->cpu_s = (double)(dlp_thread_cpu_ns() - c0) * 1e-9;
    return NULL;
}

// One thread spins for 2 s. On an otherwise idle machine with N CPUs online the total CPU utilization in that
// phase is 100/N % (50% on 2 CPUs). Tolerance: 12 points. The expectation adds the background load measured in
// the idle phases before and after (other work on a shared machine) and scales by the share of a core the
// spinning thread actually got, so it holds on busy machines too, and is capped at 100%.
static void test_one_busy_core(void **state) {
    (void)state;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 2) {
        print_message("skipped: %ld CPU online; the one-busy-core check needs at least 2\n", n);
        skip();
    }
    dlp_monitor_cfg cfg = {.interval_ms = 100, .sources = "cpu,proc", .pid = 0, .initial_phase = "idle before"};
    dlp_monitor *m;
    assert_int_equal(dlp_monitor_create(&cfg, &m), DLP_OK);
    assert_int_equal(dlp_monitor_start(m), DLP_OK);
    dlp_sleep_ns(1000000000LL);
    dlp_monitor_phase(m, "busy");
    spin_result r;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, spin, &r), 0);
    pthread_join(t, NULL);
    dlp_monitor_phase(m, "idle after");
    dlp_sleep_ns(1000000000LL);
    assert_int_equal(dlp_monitor_stop(m), DLP_OK);
    json_t *s = dlp_monitor_summary_json(m);
    double bg0 = metric(s, 0, "cpu.all.util_pct", "mean"), busy = metric(s, 1, "cpu.all.util_pct", "mean");
    double bg1 = metric(s, 2, "cpu.all.util_pct", "mean"), online = metric(s, 1, "cpu.all.online", "max");
    double proc = metric(s, 1, "proc.cpu_pct", "mean");
    // steal (a virtual CPU that wanted to run while the hypervisor ran someone else) counts as busy in util_pct, and
    // it is what takes the spinning thread's share below 1 on an oversubscribed host: seen in CI as a thread that
    // got 63% of a core and a total of 64.5% on 2 CPUs with 1.4% background. So the upper bound adds it.
    double steal = metric(s, 1, "cpu.all.steal_pct", "mean");
    if (!(steal >= 0)) steal = 0;
    double share = r.cpu_s / r.wall_s;
    double lo = fmin(100, 100.0 / online * share + fmin(bg0, bg1)),
           hi = fmin(100, 100.0 / online * share + fmax(bg0, bg1) + steal);
    // A background that was busy before or after may be anything during the phase (another test binary runs beside
    // this one; seen: 32-38% before and after, ~4% during): then only the spinning thread's own part is a floor.
    if (fmax(bg0, bg1) > 10) lo = fmin(lo, 100.0 / online * share), hi = 100;
    const double tol = 12;
    print_message("one core busy for %.2f s (the thread got %.0f%% of a core) on %.0f CPUs: %.1f%% total CPU in that "
                  "phase; expected %.1f..%.1f +- %.0f (100/%.0f = %.1f%% plus %.1f%% / %.1f%% background before / "
                  "after, %.1f%% steal); this process: %.1f%% of one core\n",
                  r.wall_s, 100 * share, online, busy, lo, hi, tol, online, 100.0 / online, bg0, bg1, steal, proc);
    assert_int_equal((long)online, n);
    if (busy < lo - tol || busy > hi + tol) fail_msg("total CPU %.1f%% is outside %.1f..%.1f +- %.0f", busy, lo, hi, tol);
    // The process tree (this process) used about one core: the spinning thread's share, plus a little.
    if (fabs(proc - 100 * share) > 10) fail_msg("process CPU %.1f%% of a core, expected %.1f +- 10", proc, 100 * share);
    json_decref(s);
    dlp_monitor_destroy(m);
}

typedef struct {
    dlp_monitor *m;
    atomic_int stop;
    int64_t counted;
} counter_arg;

static void *count_images(void *arg) {
    counter_arg *a = arg;
    while (!atomic_load(&a->stop)) {
        dlp_monitor_count(a->m, DLP_MONITOR_IMAGES, 3);
        dlp_monitor_count(a->m, DLP_MONITOR_INPUT_BYTES, 1000);
        a->counted += 3;
        if ((a->counted & 1023) == 0) dlp_sleep_ns(10000);
    }
    return NULL;
}

// The sampler thread with phases changing under it and a thread counting as fast as it can: every image is
// counted in exactly one phase (the totals add up to the counter), phases start where they were marked.
static void test_thread_phases_counters(void **state) {
    (void)state;
    dlp_monitor_cfg cfg = {.interval_ms = 20, .sources = "cpu,mem", .pid = -1, .initial_phase = "warm-up"};
    dlp_monitor *m;
    assert_int_equal(dlp_monitor_create(&cfg, &m), DLP_OK);
    assert_int_equal(dlp_monitor_start(m), DLP_OK);
    counter_arg a = {.m = m};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, count_images, &a), 0);
    int64_t t0 = dlp_now_ns();
    dlp_sleep_ns(150000000LL);
    double mark1 = (double)(dlp_now_ns() - t0) * 1e-9;
    dlp_monitor_phase(m, "epoch 1");
    dlp_sleep_ns(150000000LL);
    dlp_monitor_phase(m, "eval");
    dlp_sleep_ns(150000000LL);
    atomic_store(&a.stop, 1);
    pthread_join(t, NULL);
    assert_int_equal(dlp_monitor_stop(m), DLP_OK);
    json_t *s = dlp_monitor_summary_json(m);
    json_t *ph = json_object_get(s, "phases");
    assert_int_equal(json_array_size(ph), 3);
    double sum = 0;
    for (int i = 0; i < 3; i++) {
        json_t *p = json_array_get(ph, (size_t)i);
        assert_true(json_integer_value(json_object_get(p, "samples")) >= 3);
        sum += metric(s, i, "run.images_per_s", "total");
    }
    assert_true(a.counted > 0);
    assert_true(fabs(sum - (double)a.counted) <= 1e-6 * (double)a.counted + 1e-3);
    assert_true(fabs(metric(s, -1, "run.images_per_s", "total") - (double)a.counted) <= 1e-6 * (double)a.counted + 1e-3);
    assert_true(fabs(metric(s, -1, "run.input_bytes_per_s", "total_bytes") - 1000.0 * (double)a.counted / 3) < 1);
    double start1 = json_number_value(json_object_get(json_array_get(ph, 1), "start_s"));
    if (fabs(start1 - mark1) > 0.1) fail_msg("phase 'epoch 1' starts at %.3f s, marked at %.3f s", start1, mark1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ph, 2), "name")), "eval");
    json_t *ov = json_object_get(s, "overhead");
    assert_true(json_number_value(json_object_get(ov, "cpu_s")) > 0);
    json_decref(s);
    dlp_monitor_destroy(m);
}

// Sends a raw HTTP/1.0 request to 127.0.0.1:port; returns the whole reply (malloc'd) or NULL.
static char *http_request(int port, const char *req) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return NULL;
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
        close(fd);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (ssize_t r; buf && (r = read(fd, buf + len, cap - 1 - len)) > 0;) {
        len += (size_t)r;
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    close(fd);
    if (buf) buf[len] = '\0';
    return buf;
}

static void test_metrics_http(void **state) {
    (void)state;
    dlp_monitor_cfg cfg = {.interval_ms = 50, .sources = "cpu,mem,net", .pid = 0};
    dlp_monitor *m;
    assert_int_equal(dlp_monitor_create(&cfg, &m), DLP_OK);
    dlp_monitor_http *h = NULL;
    dlp_status st = dlp_monitor_http_start(m, "127.0.0.1", 0, &h);
#ifndef DLP_HAVE_MHD
    assert_int_equal(st, DLP_ERR_UNSUPPORTED);
    dlp_err_clear();
    dlp_monitor_destroy(m);
    print_message("skipped: built without libmicrohttpd\n");
    skip();
#endif
    assert_int_equal(st, DLP_OK);
    int port = dlp_monitor_http_port(h);
    assert_true(port > 0);
    assert_int_equal(dlp_monitor_start(m), DLP_OK);
    dlp_sleep_ns(120000000LL);
    dlp_monitor_count(m, DLP_MONITOR_REQUESTS, 7);
    char *r = http_request(port, "GET /metrics HTTP/1.0\r\n\r\n");
    assert_non_null(r);
    assert_int_equal(strncmp(r, "HTTP/1.", 7), 0);
    assert_int_equal(strncmp(r + 8, " 200", 4), 0);
    assert_non_null(strstr(r, "text/plain; version=0.0.4"));
    assert_non_null(strstr(r, "\r\n\r\n# HELP dlperf_"));
    assert_null(strstr(r, "dlperf_requests_total"));  // the service's own: dlperf_serve_requests_total{code}
    assert_non_null(strstr(r, "dlperf_build_info{version=\""));
    assert_non_null(strstr(r, "dlperf_cpu_seconds_total{cpu=\"0\",mode=\"user\"} "));
    assert_non_null(strstr(r, "dlperf_memory_available_bytes "));
    free(r);
    r = http_request(port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    assert_non_null(r);
    assert_int_equal(strncmp(r + 8, " 405", 4), 0);
    assert_non_null(strstr(r, "Allow: GET"));
    free(r);
    r = http_request(port, "GET /other HTTP/1.0\r\n\r\n");
    assert_non_null(r);
    assert_int_equal(strncmp(r + 8, " 404", 4), 0);
    free(r);
    dlp_monitor_http_stop(h);
    assert_int_equal(dlp_monitor_stop(m), DLP_OK);
    json_t *s = dlp_monitor_summary_json(m);
    assert_true(json_number_value(json_object_get(json_object_get(s, "overhead"), "metrics_http_cpu_s")) > 0);
    json_decref(s);
    dlp_monitor_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_busy_core),
        cmocka_unit_test(test_thread_phases_counters),
        cmocka_unit_test(test_metrics_http),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
