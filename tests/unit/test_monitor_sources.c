// Unit tests for monitor/ on captured /proc and /sys fixtures (tests/fixtures/monitor, written by
// make_fixtures.py, which states how each number was chosen): every source's arithmetic, CPUs going offline,
// counters that wrap or go backwards, missing files, unreadable RAPL, NVML absent, the CSV and JSON-lines time
// series parsed back, per-phase summaries, percentiles, and the Prometheus text.
// Main file: src/monitor/sources.c (with src_*.c and source_util.c); also src/monitor/monitor.c,
// store.c, sink_csv.c, sink_jsonl.c, prom.c, monitor_prom.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/stats.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/version.h"
#include "monitor/monitor.h"
#include "monitor/monitor_impl.h"
#include "monitor/prom.h"
#include "monitor/sink.h"
#include "monitor/source.h"
#include "monitor/store.h"
#include "testutil.h"

#define SEC 1000000000LL

// --- fixture helpers ------------------------------------------------------------------------------------------

static char g_fxdir[1024];  // <repo>/tests/fixtures/monitor

static const char *fxdir(void) {
    const char *root = getenv("DLPERF_ROOT");
    snprintf(g_fxdir, sizeof g_fxdir, "%s/tests/fixtures/monitor", root && *root ? root : ".");
    return g_fxdir;
}

// A fresh copy of <case>/s0 in a temporary directory; returns its path in root.
static void fx_setup(const char *name, char *root, size_t len) {
    dlp_test_tmpdir(root, len);
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "cp -R '%s/%s/s0/.' '%s/'", fxdir(), name, root);
    assert_int_equal(system(cmd), 0);
}

static const char *g_step_src;
static const char *g_step_dst;

// Writes a step's file over the same inode (like the kernel's files under an open descriptor).
static int overlay_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    if (flag != FTW_F) return 0;
    const char *rel = path + strlen(g_step_src);
    if (strcmp(rel, "/REMOVE") == 0) return 0;
    char dst[2048];
    snprintf(dst, sizeof dst, "%s%s", g_step_dst, rel);
    char *data;
    size_t n;
    assert_int_equal(dlp_read_file(path, &data, &n, 0), DLP_OK);
    int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    close(fd);
    free(data);
    return 0;
}

// Applies <case>/s<k>: changed files, then the paths in REMOVE (emptied first, as a process's stat reads empty
// once it is gone, then unlinked).
static void fx_step(const char *root, const char *name, int k) {
    char src[1200];
    snprintf(src, sizeof src, "%s/%s/s%d", fxdir(), name, k);
    g_step_src = src;
    g_step_dst = root;
    assert_int_equal(nftw(src, overlay_one, 16, FTW_PHYS), 0);
    char rm[1300];
    snprintf(rm, sizeof rm, "%s/REMOVE", src);
    char *list;
    size_t n;
    if (dlp_read_file(rm, &list, &n, 0) != DLP_OK) {
        dlp_err_clear();
        return;
    }
    for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", root, line);
        assert_int_equal(truncate(p, 0), 0);
        assert_int_equal(unlink(p), 0);
    }
    free(list);
}

// The latest value of a field, by name (white-box: the monitor's current row).
static double val(const dlp_monitor *m, const char *name) {
    for (int i = 0; i < m->fields.n; i++)
        if (strcmp(m->fields.v[i].name, name) == 0) return m->vals[i];
    fail_msg("no field %s", name);
    return NAN;
}

static int has_field(const dlp_monitor *m, const char *name) {
    for (int i = 0; i < m->fields.n; i++)
        if (strcmp(m->fields.v[i].name, name) == 0) return 1;
    return 0;
}

static const char *note_of(const dlp_monitor *m, const char *src, int *available) {
    for (int i = 0; i < m->nsrc; i++)
        if (strcmp(m->src[i].ops->name, src) == 0) {
            *available = m->src[i].state != NULL;
            return m->src[i].note;
        }
    fail_msg("no source %s", src);
    return NULL;
}

static dlp_monitor *open_fixture(const char *root, int pid, const char *sources) {
    dlp_monitor_cfg cfg = {.root = root, .pid = pid, .sources = sources, .interval_ms = 1000,
                           .nvml_lib = "/nonexistent/libnvidia-ml.so.1"};
    dlp_monitor *m = NULL;
    assert_int_equal(dlp_monitor_create(&cfg, &m), DLP_OK);
    return m;
}

#define assert_near(a, b, tol)                                                                          \
    do {                                                                                                \
        double a_ = (a), b_ = (b);                                                                      \
        if (!(fabs(a_ - b_) <= (tol))) fail_msg("%s = %.9g, expected %.9g (+-%g)", #a, a_, b_, (double)(tol)); \
    } while (0)

// --- tests ----------------------------------------------------------------------------------------------------

static void test_counter_delta(void **state) {
    (void)state;
    const uint64_t q = 1ULL << 30, w32 = 1ULL << 32;
    static const struct { uint64_t prev, cur, wrap, want; int anomaly; } rows[] = {
        {100, 150, 0, 50, 0},                          // plain increase
        {4294967000ULL, 200, 0, 496, 0},               // 32-bit wrap: prev in the top quarter, cur in the bottom
        {1000000, 500, 0, 0, 1},                       // went backwards (a reset): 0, flagged
        {50000, 49990, 0, 0, 1},                       // iowait after hotplug
        {5000000000ULL, 10, 0, 0, 1},                  // 64-bit value decreasing: not a 32-bit wrap
        {262133328850ULL, 20000000, 262143328850ULL, 30000000, 0},  // RAPL wrap at max_energy_range_uj
        {7, 7, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int an = 0;
        assert_int_equal(dlp_mon_counter_delta(rows[i].prev, rows[i].cur, rows[i].wrap, &an), rows[i].want);
        assert_int_equal(an, rows[i].anomaly);
    }
    assert_true(3 * q < w32);
}

static void test_percentile(void **state) {
    (void)state;
    float v[5] = {5, 1, 4, 2, 3};
    assert_near(dlp_stats_quantile_f32(v, 5, 0.5), 3, 0);
    assert_near(dlp_stats_quantile_f32(v, 5, 0.95), 4.8, 1e-6);  // between 4 and 5, linear
    assert_near(dlp_stats_quantile_f32(v, 5, 0), 1, 0);
    assert_near(dlp_stats_quantile_f32(v, 5, 1), 5, 0);
    float one = 7;
    assert_near(dlp_stats_quantile_f32(&one, 1, 0.95), 7, 0);
    assert_true(isnan(dlp_stats_quantile_f32(v, 0, 0.5)));
}

// The basic fixture: every source, two intervals of 1 s.
static void test_sources_basic(void **state) {
    (void)state;
    char root[512];
    fx_setup("basic", root, sizeof root);
    dlp_monitor *m = open_fixture(root, 100, NULL);
    int ok;
    static const char *const srcs[] = {"cpu", "proc", "mem", "disk", "net", "rapl"};
    for (size_t i = 0; i < 6; i++) {
        const char *note = note_of(m, srcs[i], &ok);
        if (!ok) fail_msg("source %s not available on the fixture: %s", srcs[i], note);
    }
    assert_string_equal(note_of(m, "cpu", &ok), "2 CPUs online of 2");
    assert_non_null(strstr(note_of(m, "disk", &ok), "vda"));
    // Whole disks only: vda1 is a partition (no /sys/block/vda1), loop and zram are skipped.
    assert_true(has_field(m, "disk.vda.read_bytes_per_s"));
    assert_false(has_field(m, "disk.vda1.read_bytes_per_s"));
    assert_false(has_field(m, "disk.loop0.read_bytes_per_s"));
    assert_false(has_field(m, "disk.zram0.read_bytes_per_s"));

    assert_int_equal(dlp_monitor_sample_at(m, 10 * SEC), DLP_OK);  // baseline
    assert_true(isnan(val(m, "cpu.all.util_pct")));
    fx_step(root, "basic", 1);
    assert_int_equal(dlp_monitor_sample_at(m, 11 * SEC), DLP_OK);
    // CPU: cpu0 60% (user 50, system 10, idle 40 of 100 ticks), cpu1 20% (user 20, idle 75, iowait 5).
    assert_near(val(m, "cpu.0.util_pct"), 60, 1e-9);
    assert_near(val(m, "cpu.1.util_pct"), 20, 1e-9);
    assert_near(val(m, "cpu.all.util_pct"), 40, 1e-9);
    assert_near(val(m, "cpu.all.user_pct"), 35, 1e-9);
    assert_near(val(m, "cpu.all.system_pct"), 5, 1e-9);
    assert_near(val(m, "cpu.all.idle_pct"), 57.5, 1e-9);
    assert_near(val(m, "cpu.all.iowait_pct"), 2.5, 1e-9);
    assert_near(val(m, "cpu.all.busiest_core_pct"), 60, 1e-9);
    assert_near(val(m, "cpu.all.online"), 2, 0);
    // Process tree of 100: 100, 101, 102 and 103 (child of thread 105), not 200. 150 ticks in 1 s.
    double hz = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
    assert_near(val(m, "proc.processes"), 4, 0);
    assert_near(val(m, "proc.threads"), 8 + 2 + 1 + 1, 0);
    assert_near(val(m, "proc.cpu_pct"), 100.0 * 150 / hz, 1e-9);
    assert_near(val(m, "proc.rss_bytes"), (25600 + 12800 + 256 + 1000) * page, 0);
    // Memory (kB * 1024).
    assert_near(val(m, "mem.available_bytes"), 20000000.0 * 1024, 0);
    assert_near(val(m, "mem.used_bytes"), (24576000.0 - 20000000.0) * 1024, 0);
    assert_near(val(m, "mem.cached_bytes"), 1100000.0 * 1024, 0);
    assert_near(val(m, "mem.dirty_bytes"), 2048.0 * 1024, 0);
    // Disk vda: 2048 sectors read (1 MiB), 4096 written, 100 reads, 50 writes, 250 ms busy.
    assert_near(val(m, "disk.vda.read_bytes_per_s"), 1048576, 0);
    assert_near(val(m, "disk.vda.write_bytes_per_s"), 2097152, 0);
    assert_near(val(m, "disk.vda.read_iops"), 100, 0);
    assert_near(val(m, "disk.vda.write_iops"), 50, 0);
    assert_near(val(m, "disk.vda.util_pct"), 25, 1e-9);
    // Network.
    assert_near(val(m, "net.eth0.rx_bytes_per_s"), 1000000, 0);
    assert_near(val(m, "net.eth0.tx_bytes_per_s"), 500000, 0);
    assert_near(val(m, "net.eth0.rx_packets_per_s"), 1000, 0);
    assert_near(val(m, "net.eth0.tx_packets_per_s"), 400, 0);
    assert_near(val(m, "net.lo.rx_bytes_per_s"), 3000, 0);
    // RAPL: sub-zones are named after their package.
    assert_near(val(m, "rapl.package-0.power_w"), 50, 1e-9);
    assert_near(val(m, "rapl.package-0/core.power_w"), 30, 1e-9);
    assert_near(val(m, "rapl.package-0/dram.power_w"), 5, 1e-9);

    fx_step(root, "basic", 2);
    assert_int_equal(dlp_monitor_sample_at(m, 12 * SEC), DLP_OK);
    assert_near(val(m, "cpu.0.util_pct"), 100, 1e-9);
    assert_near(val(m, "cpu.1.util_pct"), 0, 1e-9);
    assert_near(val(m, "cpu.all.util_pct"), 50, 1e-9);
    // 102 exited and 101 reaped it: its ticks moved into 101's cutime, the tree's CPU time did not jump.
    assert_near(val(m, "proc.processes"), 3, 0);
    assert_near(val(m, "proc.cpu_pct"), 0, 1e-9);
    assert_near(val(m, "proc.rss_bytes"), (25600 + 12800 + 1000) * page, 0);
    assert_near(val(m, "disk.vda.read_bytes_per_s"), 0, 0);
    assert_near(val(m, "rapl.package-0.power_w"), 0, 0);

    // The whole-run summary: two full intervals; totals are time integrals.
    json_t *s = dlp_monitor_summary_json(m);
    json_t *tot = json_object_get(json_object_get(s, "total"), "metrics");
    json_t *util = json_object_get(tot, "cpu.all.util_pct");
    assert_near(json_number_value(json_object_get(util, "mean")), 45, 1e-9);
    assert_near(json_number_value(json_object_get(util, "max")), 50, 1e-9);
    assert_near(json_number_value(json_object_get(json_object_get(tot, "rapl.package-0.power_w"), "energy_j")), 50,
                1e-6);
    assert_near(json_number_value(json_object_get(json_object_get(tot, "disk.vda.read_bytes_per_s"), "total_bytes")),
                1048576, 0);
    assert_near(json_number_value(json_object_get(json_object_get(tot, "proc.cpu_pct"), "cpu_s")), 150 / hz, 1e-9);
    assert_int_equal(json_integer_value(json_object_get(s, "samples")), 2);
    json_decref(s);
    dlp_monitor_destroy(m);
    dlp_test_rmtree(root);
}

// A CPU goes offline, comes back with counters lower than before; another CPU's iowait goes backwards.
static void test_cpu_offline(void **state) {
    (void)state;
    char root[512];
    fx_setup("offline", root, sizeof root);
    dlp_monitor *m = open_fixture(root, -1, "cpu");
    assert_int_equal(dlp_monitor_sample_at(m, 1 * SEC), DLP_OK);
    fx_step(root, "offline", 1);  // cpu1 offline
    assert_int_equal(dlp_monitor_sample_at(m, 2 * SEC), DLP_OK);
    assert_near(val(m, "cpu.all.online"), 1, 0);
    assert_near(val(m, "cpu.0.util_pct"), 60, 1e-9);
    assert_true(isnan(val(m, "cpu.1.util_pct")));
    assert_near(val(m, "cpu.all.util_pct"), 60, 1e-9);  // the total covers the CPUs present at both ends
    fx_step(root, "offline", 2);  // cpu1 back (idle 10 lower than before), cpu0 iowait -10
    assert_int_equal(dlp_monitor_sample_at(m, 3 * SEC), DLP_OK);
    assert_near(val(m, "cpu.all.online"), 2, 0);
    assert_true(isnan(val(m, "cpu.1.util_pct")));       // seen once since it came back: baseline only
    assert_near(val(m, "cpu.0.util_pct"), 30, 1e-9);    // user 30 of 100; the backwards iowait counts 0
    assert_near(val(m, "cpu.all.util_pct"), 30, 1e-9);
    fx_step(root, "offline", 3);
    assert_int_equal(dlp_monitor_sample_at(m, 4 * SEC), DLP_OK);
    assert_near(val(m, "cpu.0.util_pct"), 25, 1e-9);
    assert_near(val(m, "cpu.1.util_pct"), 75, 1e-9);
    assert_near(val(m, "cpu.all.util_pct"), 50, 1e-9);
    // The anomaly is counted and exposed.
    dlp_prom_buf b;
    dlp_prom_init(&b);
    assert_int_equal(dlp_monitor_render_prom(m, &b), DLP_OK);
    assert_non_null(strstr(b.data, "dlperf_cpu_time_decreases_total 1\n"));
    assert_non_null(strstr(b.data, "dlperf_cpus_online 2\n"));
    dlp_prom_free(&b);
    dlp_monitor_destroy(m);
    dlp_test_rmtree(root);
}

// RAPL wraps at max_energy_range_uj; 32-bit disk counters wrap; a network counter resets; a CPU counter goes back.
static void test_wraps(void **state) {
    (void)state;
    char root[512];
    fx_setup("wrap", root, sizeof root);
    dlp_monitor *m = open_fixture(root, -1, "cpu,disk,net,rapl");
    assert_int_equal(dlp_monitor_sample_at(m, 1 * SEC), DLP_OK);
    fx_step(root, "wrap", 1);
    assert_int_equal(dlp_monitor_sample_at(m, 3 * SEC), DLP_OK);  // a 2 s interval
    assert_near(val(m, "rapl.package-0.power_w"), 30.0 / 2, 1e-9);   // 30 J across the wrap
    assert_near(val(m, "rapl.package-0/dram.power_w"), 5.0 / 2, 1e-9);
    assert_near(val(m, "disk.vda.read_bytes_per_s"), 496.0 * 512 / 2, 1e-9);
    assert_near(val(m, "disk.vda.read_iops"), 16.0 / 2, 1e-9);
    assert_near(val(m, "disk.vda.write_iops"), 10.0 / 2, 1e-9);
    assert_near(val(m, "net.eth0.rx_bytes_per_s"), 0, 0);             // reset: counted 0, not 2^64
    assert_near(val(m, "net.eth0.tx_bytes_per_s"), 1001.0 / 2, 1e-9); // 32-bit wrap
    assert_near(val(m, "net.eth0.rx_packets_per_s"), 5, 1e-9);
    // cpu0: user went back 10 (counted 0), idle +100: 0% busy. cpu1: user +100: 100%.
    assert_near(val(m, "cpu.0.util_pct"), 0, 1e-9);
    assert_near(val(m, "cpu.1.util_pct"), 100, 1e-9);
    json_t *s = dlp_monitor_summary_json(m);
    json_t *pkg = json_object_get(json_object_get(json_object_get(s, "total"), "metrics"), "rapl.package-0.power_w");
    assert_near(json_number_value(json_object_get(pkg, "energy_j")), 30, 1e-6);
    json_decref(s);
    dlp_monitor_destroy(m);
    dlp_test_rmtree(root);
}

// Only /proc/stat exists: every other source says what it could not read, and the run goes on.
static void test_missing_files(void **state) {
    (void)state;
    char root[512];
    fx_setup("missing", root, sizeof root);
    dlp_monitor *m = open_fixture(root, 100, NULL);
    int ok;
    const char *note = note_of(m, "cpu", &ok);
    assert_true(ok);
    assert_string_equal(note, "2 CPUs online of 2");  // sized from /proc/stat: no sys/devices/system/cpu/possible
    static const struct { const char *src, *want; } rows[] = {
        {"mem", "/proc/meminfo: No such file or directory"},
        {"disk", "/proc/diskstats: No such file or directory"},
        {"net", "/proc/net/dev: No such file or directory"},
        {"rapl", "/sys/class/powercap: no powercap driver"},
        {"proc", "/proc/100/stat"},
        {"gpu", "not found"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        note = note_of(m, rows[i].src, &ok);
        assert_false(ok);
        if (!strstr(note, rows[i].want)) fail_msg("%s: note '%s' lacks '%s'", rows[i].src, note, rows[i].want);
        if (i < 4 && !strstr(note, root)) fail_msg("%s: note '%s' does not name the path", rows[i].src, note);
    }
    assert_false(has_field(m, "mem.available_bytes"));
    assert_int_equal(dlp_monitor_sample_at(m, 1 * SEC), DLP_OK);
    fx_step(root, "missing", 1);
    assert_int_equal(dlp_monitor_sample_at(m, 2 * SEC), DLP_OK);
    assert_near(val(m, "cpu.all.util_pct"), 50, 1e-9);
    json_t *src = dlp_monitor_sources_json(m);
    assert_true(json_is_false(json_object_get(json_object_get(src, "mem"), "available")));
    json_decref(src);
    dlp_monitor_destroy(m);
    dlp_test_rmtree(root);
}

// Files that vanish or turn empty while the monitor runs: values go missing (NaN), nothing crashes.
static void test_files_vanish(void **state) {
    (void)state;
    char root[512], p[1024];
    fx_setup("basic", root, sizeof root);
    dlp_monitor *m = open_fixture(root, 100, "mem,disk,proc");
    assert_int_equal(dlp_monitor_sample_at(m, 1 * SEC), DLP_OK);
    fx_step(root, "basic", 1);
    snprintf(p, sizeof p, "%s/proc/meminfo", root);
    assert_int_equal(truncate(p, 0), 0);  // reads empty
    snprintf(p, sizeof p, "%s/proc/diskstats", root);
    FILE *f = fopen(p, "r+");  // rewrite in place without the vda line: the device is gone
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 0), 0);
    fputs("   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", f);
    fclose(f);
    static const int pids[] = {100, 101, 102, 103};  // the whole tree exits
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/proc/%d/stat", root, pids[i]);
        assert_int_equal(truncate(p, 0), 0);
    }
    assert_int_equal(dlp_monitor_sample_at(m, 2 * SEC), DLP_OK);
    assert_true(isnan(val(m, "mem.available_bytes")));
    assert_true(isnan(val(m, "disk.vda.read_bytes_per_s")));
    assert_true(isnan(val(m, "proc.cpu_pct")));
    assert_true(isnan(val(m, "proc.rss_bytes")));
    dlp_prom_buf b;
    dlp_prom_init(&b);
    assert_int_equal(dlp_monitor_render_prom(m, &b), DLP_OK);  // renders what is left
    assert_null(strstr(b.data, "dlperf_memory_available_bytes "));
    dlp_prom_free(&b);
    dlp_monitor_destroy(m);
    dlp_test_rmtree(root);
}

// RAPL that cannot be read. As root a mode-000 file is still readable, so unreadable is simulated two ways:
// a directory where energy_uj should be (read fails with EISDIR) and an injected open error (EACCES).
static int g_deny_dram;
static int deny_open(const char *path, int flags) {
    size_t n = strlen(path);
    int energy = n >= 9 && strcmp(path + n - 9, "energy_uj") == 0;
    if (energy && (!g_deny_dram || strstr(path, "intel-rapl:0:1"))) {
        errno = EACCES;
        return -1;
    }
    return open(path, flags);
}

static void test_rapl_unreadable(void **state) {
    (void)state;
    char root[512];
    int ok;
    fx_setup("rapl_unreadable", root, sizeof root);
    dlp_monitor *m = open_fixture(root, -1, "rapl");
    const char *note = note_of(m, "rapl", &ok);
    assert_false(ok);
    if (!strstr(note, "energy_uj: Is a directory")) fail_msg("note: %s", note);
    dlp_monitor_destroy(m);
    dlp_test_rmtree(root);

    fx_setup("basic", root, sizeof root);
    dlp_monitor_cfg cfg = {.root = root, .pid = -1, .sources = "rapl", .open_fn = deny_open};
    g_deny_dram = 0;
    assert_int_equal(dlp_monitor_create(&cfg, &m), DLP_OK);  // not available is not an error
    note = note_of(m, "rapl", &ok);
    assert_false(ok);
    if (!strstr(note, "Permission denied") || !strstr(note, "root only")) fail_msg("note: %s", note);
    assert_int_equal(dlp_monitor_sample_at(m, 1 * SEC), DLP_OK);
    dlp_monitor_destroy(m);

    g_deny_dram = 1;  // only DRAM unreadable: the package is still measured, the note says what is missing
    assert_int_equal(dlp_monitor_create(&cfg, &m), DLP_OK);
    note = note_of(m, "rapl", &ok);
    assert_true(ok);
    if (!strstr(note, "not readable: package-0/dram (Permission denied)")) fail_msg("note: %s", note);
    assert_true(has_field(m, "rapl.package-0.power_w"));
    assert_false(has_field(m, "rapl.package-0/dram.power_w"));
    assert_int_equal(dlp_monitor_sample_at(m, 1 * SEC), DLP_OK);
    fx_step(root, "basic", 1);
    assert_int_equal(dlp_monitor_sample_at(m, 2 * SEC), DLP_OK);
    assert_near(val(m, "rapl.package-0.power_w"), 50, 1e-9);
    dlp_monitor_destroy(m);
    dlp_test_rmtree(root);
}

// NVML is loaded at run time: without the library the GPU source is "not available", cleanly.
static void test_nvml_absent(void **state) {
    (void)state;
    dlp_monitor_cfg cfg = {.pid = -1, .sources = "gpu", .nvml_lib = "/nonexistent/libnvidia-ml.so.1"};
    dlp_monitor *m;
    int ok;
    assert_int_equal(dlp_monitor_create(&cfg, &m), DLP_OK);
    const char *note = note_of(m, "gpu", &ok);
    assert_false(ok);
    if (strncmp(note, "/nonexistent/libnvidia-ml.so.1 not found", 40) != 0) fail_msg("note: %s", note);
    assert_int_equal(m->fields.n, 5);  // only the built-in run and monitor fields
    assert_int_equal(dlp_monitor_start(m), DLP_OK);
    assert_int_equal(dlp_monitor_stop(m), DLP_OK);
    dlp_monitor_destroy(m);
    // The default library name: on a machine without the NVIDIA driver the message is the documented one.
    cfg.nvml_lib = NULL;
    unsetenv("DLPERF_NVML_LIB");
    assert_int_equal(dlp_monitor_create(&cfg, &m), DLP_OK);
    note = note_of(m, "gpu", &ok);
    if (!ok && strncmp(note, "libnvidia-ml.so.1 not found", 27) != 0) fail_msg("note: %s", note);
    if (ok) print_message("NVML present here: %s\n", note);
    dlp_monitor_destroy(m);
}

// Children found by a scan of /proc/*/stat parent ids when the kernel has no children files.
static void test_proc_tree_fallback(void **state) {
    (void)state;
    char root[512], cmd[1200];
    fx_setup("basic", root, sizeof root);
    snprintf(cmd, sizeof cmd, "find '%s/proc' -name children -delete", root);
    assert_int_equal(system(cmd), 0);
    dlp_monitor *m = open_fixture(root, 100, "proc");
    int ok;
    const char *note = note_of(m, "proc", &ok);
    assert_true(ok);
    assert_non_null(strstr(note, "a scan of /proc/*/stat"));
    assert_int_equal(dlp_monitor_sample_at(m, 1 * SEC), DLP_OK);
    fx_step(root, "basic", 1);
    assert_int_equal(dlp_monitor_sample_at(m, 2 * SEC), DLP_OK);
    assert_near(val(m, "proc.processes"), 4, 0);  // 100, 101, 102, 103; not 200
    assert_near(val(m, "proc.cpu_pct"), 100.0 * 150 / (double)sysconf(_SC_CLK_TCK), 1e-9);
    dlp_monitor_destroy(m);
    dlp_test_rmtree(root);
}

// --- the time series, parsed back ------------------------------------------------------------------------------

// Splits a CSV line (RFC 4180 quoting) into at most max cells; returns the count. Modifies line.
static int csv_split(char *line, char **cells, int max) {
    int n = 0;
    char *p = line;
    while (n < max) {
        if (*p == '"') {
            char *w = ++p;
            cells[n++] = w;
            for (;;) {
                if (*p == '"' && p[1] == '"') {
                    *w++ = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    *w++ = *p++;
                }
            }
            *w = '\0';
        } else {
            cells[n++] = p;
            p += strcspn(p, ",\n");
        }
        if (*p != ',') {
            *p = '\0';
            break;
        }
        *p++ = '\0';
    }
    return n;
}

static void test_sinks_parse_back(void **state) {
    (void)state;
    char root[512], out[512], csv[1024], jsonl[1024];
    fx_setup("basic", root, sizeof root);
    dlp_test_tmpdir(out, sizeof out);
    snprintf(csv, sizeof csv, "%s/m.csv", out);
    snprintf(jsonl, sizeof jsonl, "%s/m.jsonl", out);
    dlp_monitor_cfg cfg = {.root = root, .pid = 100, .interval_ms = 1000, .csv_path = csv, .jsonl_path = jsonl,
                           .nvml_lib = "/nonexistent/libnvidia-ml.so.1", .initial_phase = "warm-up"};
    dlp_monitor *m;
    assert_int_equal(dlp_monitor_create(&cfg, &m), DLP_OK);
    assert_int_equal(dlp_monitor_add_sink(m, &dlp_mon_sink_null, NULL), DLP_OK);  // the trivial sink counts rows
    assert_int_equal(dlp_monitor_sample_at(m, 5 * SEC), DLP_OK);
    fx_step(root, "basic", 1);
    assert_int_equal(dlp_monitor_sample_at(m, 6 * SEC), DLP_OK);
    dlp_monitor_phase(m, "epoch 1, \"quoted\"");
    fx_step(root, "basic", 2);
    assert_int_equal(dlp_monitor_sample_at(m, 7 * SEC), DLP_OK);
    assert_int_equal(m->nsinks, 3);
    assert_int_equal(*(long *)m->sinks[2].state, 2);
    int nfields = m->fields.n;
    assert_int_equal(dlp_monitor_stop(m), DLP_OK);
    dlp_monitor_destroy(m);

    // CSV: a header, then one row per interval; empty cells for missing values.
    char *data;
    size_t len;
    assert_int_equal(dlp_read_file(csv, &data, &len, 0), DLP_OK);
    char *save = NULL, *lines[4];
    int nl = 0;
    for (char *l = strtok_r(data, "\n", &save); l && nl < 4; l = strtok_r(NULL, "\n", &save)) lines[nl++] = l;
    assert_int_equal(nl, 3);
    char *hdr[512], *row[512];
    int nh = csv_split(lines[0], hdr, 512);
    assert_int_equal(nh, 4 + nfields);
    assert_string_equal(hdr[0], "t_s");
    assert_string_equal(hdr[3], "phase");
    int c_util = -1, c_rapl = -1, c_read = -1;
    for (int i = 0; i < nh; i++) {
        if (strcmp(hdr[i], "cpu.all.util_pct") == 0) c_util = i;
        if (strcmp(hdr[i], "rapl.package-0.power_w") == 0) c_rapl = i;
        if (strcmp(hdr[i], "disk.vda.read_bytes_per_s") == 0) c_read = i;
    }
    assert_true(c_util > 0 && c_rapl > 0 && c_read > 0);
    assert_int_equal(csv_split(lines[1], row, 512), nh);
    assert_near(strtod(row[0], NULL), 1.0, 1e-9);  // t_s: end of the first interval
    assert_near(strtod(row[1], NULL), 1.0, 1e-9);  // dt_s
    assert_string_equal(row[3], "warm-up");
    assert_near(strtod(row[c_util], NULL), 40, 1e-6);
    assert_near(strtod(row[c_rapl], NULL), 50, 1e-6);
    assert_near(strtod(row[c_read], NULL), 1048576, 1e-3);
    assert_int_equal(csv_split(lines[2], row, 512), nh);
    assert_string_equal(row[3], "epoch 1, \"quoted\"");  // quoted and unquoted back
    assert_near(strtod(row[c_util], NULL), 50, 1e-6);
    free(data);

    // JSON lines: one object per interval per metric set; null for a missing value.
    assert_int_equal(dlp_read_file(jsonl, &data, &len, 0), DLP_OK);
    int n = 0, seen_cpu_all = 0, seen_mem = 0, seen_disk = 0;
    save = NULL;
    for (char *l = strtok_r(data, "\n", &save); l; l = strtok_r(NULL, "\n", &save), n++) {
        json_error_t err;
        json_t *o = json_loads(l, 0, &err);
        if (!o) fail_msg("JSON line %d does not parse: %s: %s", n + 1, err.text, l);
        const char *set = json_string_value(json_object_get(o, "set"));
        const char *inst = json_string_value(json_object_get(o, "instance"));
        assert_non_null(set);
        assert_true(json_is_number(json_object_get(o, "t_s")));
        if (strcmp(set, "cpu") == 0 && inst && strcmp(inst, "all") == 0 && !seen_cpu_all++)
            assert_near(json_number_value(json_object_get(o, "util_pct")), 40, 1e-6);
        if (strcmp(set, "mem") == 0 && !seen_mem++) {
            assert_null(inst);  // a singleton has no instance
            assert_near(json_number_value(json_object_get(o, "available_bytes")), 20000000.0 * 1024, 0);
        }
        if (strcmp(set, "disk") == 0 && !seen_disk++) {
            assert_string_equal(inst, "vda");
            assert_near(json_number_value(json_object_get(o, "write_iops")), 50, 1e-9);
        }
        json_decref(o);
    }
    assert_int_equal(seen_cpu_all, 2);
    assert_int_equal(seen_mem, 2);
    // The sets per sample: cpu all/0/1, proc, mem, disk vda, net lo/ifb0/ifb1/eth0, rapl x3, run, monitor.
    assert_int_equal(n % 2, 0);
    free(data);

    // Never overwrite: a second monitor with the same files fails before touching either.
    dlp_status st = dlp_monitor_create(&cfg, &m);
    assert_int_equal(st, DLP_ERR_EXISTS);
    assert_non_null(strstr(dlp_err_msg(), "m.csv"));
    dlp_err_clear();
    char other[1024];
    snprintf(other, sizeof other, "%s/new.csv", out);
    cfg.csv_path = other;  // the CSV is new but the JSONL exists: neither is created
    assert_int_equal(dlp_monitor_create(&cfg, &m), DLP_ERR_EXISTS);
    dlp_err_clear();
    assert_false(dlp_path_exists(other));
    dlp_test_rmtree(out);
    dlp_test_rmtree(root);
}

// Phases and counters in manual mode: per-phase summaries and exact totals.
static void test_phases_and_counters(void **state) {
    (void)state;
    char root[512];
    fx_setup("basic", root, sizeof root);
    dlp_monitor_cfg cfg = {.root = root, .pid = -1, .sources = "cpu", .interval_ms = 1000};
    dlp_monitor *m;
    assert_int_equal(dlp_monitor_create(&cfg, &m), DLP_OK);
    dlp_monitor_phase(m, "warm-up");  // before anything was sampled: replaces the empty initial phase "run"
    assert_int_equal(dlp_monitor_sample_at(m, 0), DLP_OK);
    dlp_monitor_count(m, DLP_MONITOR_IMAGES, 100);
    dlp_monitor_count(m, DLP_MONITOR_DATA_WAIT_NS, SEC / 4);
    fx_step(root, "basic", 1);
    assert_int_equal(dlp_monitor_sample_at(m, 1 * SEC), DLP_OK);
    dlp_monitor_phase(m, "epoch 1");
    static const int images[] = {200, 400, 600};
    for (int i = 0; i < 3; i++) {
        dlp_monitor_count(m, DLP_MONITOR_IMAGES, images[i]);
        dlp_monitor_count(m, DLP_MONITOR_REQUESTS, 1);
        assert_int_equal(dlp_monitor_sample_at(m, (2 + i) * SEC), DLP_OK);
    }
    dlp_monitor_phase(m, "eval");
    dlp_monitor_count(m, DLP_MONITOR_IMAGES, 50);
    assert_int_equal(dlp_monitor_sample_at(m, 4 * SEC + SEC / 10), DLP_OK);  // a short (0.1 s) interval only
    dlp_monitor_count(NULL, DLP_MONITOR_IMAGES, 1);  // no monitor: a no-op
    dlp_monitor_phase(NULL, "x");
    json_t *s = dlp_monitor_summary_json(m);
    json_t *ph = json_object_get(s, "phases");
    assert_int_equal(json_array_size(ph), 3);
    const char *names[] = {"warm-up", "epoch 1", "eval"};
    const int samples[] = {1, 3, 1};
    for (int i = 0; i < 3; i++) {
        json_t *p = json_array_get(ph, (size_t)i);
        assert_string_equal(json_string_value(json_object_get(p, "name")), names[i]);
        assert_int_equal(json_integer_value(json_object_get(p, "samples")), samples[i]);
    }
    json_t *warm = json_object_get(json_object_get(json_array_get(ph, 0), "metrics"), "run.images_per_s");
    assert_near(json_number_value(json_object_get(warm, "total")), 100, 1e-9);
    json_t *wait = json_object_get(json_object_get(json_array_get(ph, 0), "metrics"), "run.data_wait_pct");
    assert_near(json_number_value(json_object_get(wait, "mean")), 25, 1e-9);
    assert_near(json_number_value(json_object_get(wait, "wait_s")), 0.25, 1e-9);
    json_t *ep = json_object_get(json_object_get(json_array_get(ph, 1), "metrics"), "run.images_per_s");
    assert_near(json_number_value(json_object_get(ep, "mean")), 400, 1e-9);
    assert_near(json_number_value(json_object_get(ep, "p50")), 400, 1e-9);
    assert_near(json_number_value(json_object_get(ep, "p95")), 580, 1e-6);  // linear between 400 and 600
    assert_near(json_number_value(json_object_get(ep, "max")), 600, 1e-9);
    assert_near(json_number_value(json_object_get(ep, "total")), 1200, 1e-9);
    json_t *ev = json_object_get(json_object_get(json_array_get(ph, 2), "metrics"), "run.images_per_s");
    assert_near(json_number_value(json_object_get(ev, "mean")), 500, 1e-6);  // 50 images in 0.1 s
    assert_near(json_number_value(json_object_get(ev, "total")), 50, 1e-6);
    json_t *p1 = json_array_get(ph, 1);
    assert_near(json_number_value(json_object_get(p1, "start_s")), 1, 1e-9);
    assert_near(json_number_value(json_object_get(p1, "end_s")), 4, 1e-9);
    // The whole run: totals add up exactly; the short interval is out of max/percentiles.
    json_t *tot = json_object_get(json_object_get(json_object_get(s, "total"), "metrics"), "run.images_per_s");
    assert_near(json_number_value(json_object_get(tot, "total")), 1350, 1e-6);
    assert_near(json_number_value(json_object_get(tot, "max")), 600, 1e-9);
    json_t *ctr = json_object_get(s, "counters");
    assert_int_equal(json_integer_value(json_object_get(ctr, "images")), 1350);
    assert_int_equal(json_integer_value(json_object_get(ctr, "requests")), 3);
    json_decref(s);
    dlp_monitor_destroy(m);
    dlp_test_rmtree(root);
}

// The store keeps memory bounded: a long phase is thinned evenly and its percentiles stay right.
static void test_store_thinning(void **state) {
    (void)state;
    dlp_mon_field f = {.name = "x.v", .set = "x", .metric = "v", .unit = DLP_MON_UNIT_COUNT, .flags = DLP_MON_F_SUMMARY};
    dlp_mon_store s;
    assert_int_equal(dlp_mon_store_init(&s, &f, 1, 1.0, "long"), DLP_OK);
    const int n = 100000;  // a ramp 0 .. n-1, one per second
    for (int i = 0; i < n; i++) {
        double v = i;
        dlp_mon_store_add(&s, i + 1, 1.0, &v);
    }
    assert_true(s.phases[0].res_n <= DLP_MON_PHASE_ROWS);
    assert_true(s.total.res_n <= DLP_MON_TOTAL_ROWS);
    json_t *j = dlp_mon_store_json(&s, &f, n);
    json_t *m = json_object_get(json_object_get(json_array_get(json_object_get(j, "phases"), 0), "metrics"), "x.v");
    assert_near(json_number_value(json_object_get(m, "mean")), (n - 1) / 2.0, 1e-6 * n);
    assert_near(json_number_value(json_object_get(m, "max")), n - 1, 0);
    assert_near(json_number_value(json_object_get(m, "p50")), 0.50 * n, 0.01 * n);  // within 1% of the range
    assert_near(json_number_value(json_object_get(m, "p95")), 0.95 * n, 0.01 * n);
    json_decref(j);
    dlp_mon_store_free(&s);
}

// --- Prometheus text ---------------------------------------------------------------------------------------------

// Checks the exposition's structure: every sample belongs to the family announced by the latest TYPE line,
// each family is announced once with HELP then TYPE, names are valid, counters end in _total.
static void check_exposition(const char *text) {
    char fam[128] = "", seen[256][128];
    int nseen = 0;
    char *copy = strdup(text), *save = NULL;
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (strncmp(l, "# HELP ", 7) == 0) {
            sscanf(l + 7, "%127s", fam);
            for (int i = 0; i < nseen; i++)
                if (strcmp(seen[i], fam) == 0) fail_msg("family %s announced twice", fam);
            if (nseen < 256) snprintf(seen[nseen++], sizeof seen[0], "%s", fam);
            assert_true(dlp_prom_valid_name(fam, 0));
            assert_int_equal(strncmp(fam, "dlperf_", 7), 0);
            continue;
        }
        if (strncmp(l, "# TYPE ", 7) == 0) {
            char name[128], type[32];
            assert_int_equal(sscanf(l + 7, "%127s %31s", name, type), 2);
            assert_string_equal(name, fam);
            size_t n = strlen(name);
            int is_total = n > 6 && strcmp(name + n - 6, "_total") == 0;
            if (strcmp(type, "counter") == 0 && !is_total) fail_msg("counter %s lacks _total", name);
            if (strcmp(type, "counter") != 0 && is_total) fail_msg("%s %s ends in _total", type, name);
            continue;
        }
        char name[128];
        size_t k = strcspn(l, "{ ");
        assert_true(k < sizeof name);
        memcpy(name, l, k);
        name[k] = '\0';
        if (strcmp(name, fam) != 0) fail_msg("sample '%s' outside its family (%s)", l, fam);
        const char *v = strrchr(l, ' ');
        assert_non_null(v);
        char *end;
        strtod(v + 1, &end);
        if (*end && strcmp(v + 1, "NaN") != 0) fail_msg("bad value in '%s'", l);
    }
    free(copy);
}

static void test_prom_text(void **state) {
    (void)state;
    dlp_prom_buf b;
    dlp_prom_init(&b);
    dlp_prom_family(&b, "dlperf_x_total", "counter", "Help with a \\ backslash\nand a newline.");
    dlp_prom_sample(&b, "dlperf_x_total", 3, "a", "q\"uo\\te\nnl", "b", "", (char *)NULL);
    dlp_prom_sample(&b, "dlperf_x_total", 0.5, (char *)NULL);
    dlp_prom_sample(&b, "dlperf_x_total", NAN, (char *)NULL);
    dlp_prom_sample(&b, "dlperf_x_total", INFINITY, (char *)NULL);
    dlp_prom_sample(&b, "dlperf_x_total", 123456789012.0, (char *)NULL);
    assert_string_equal(b.data,
                        "# HELP dlperf_x_total Help with a \\\\ backslash\\nand a newline.\n"
                        "# TYPE dlperf_x_total counter\n"
                        "dlperf_x_total{a=\"q\\\"uo\\\\te\\nnl\",b=\"\"} 3\n"
                        "dlperf_x_total 0.5\n"
                        "dlperf_x_total NaN\n"
                        "dlperf_x_total +Inf\n"
                        "dlperf_x_total 123456789012\n");
    dlp_prom_reset(&b);
    assert_int_equal(b.len, 0);
    dlp_prom_free(&b);
    assert_true(dlp_prom_valid_name("dlperf_a:b_1", 0));
    assert_false(dlp_prom_valid_name("1abc", 0));
    assert_false(dlp_prom_valid_name("a:b", 1));
    assert_false(dlp_prom_valid_name("a-b", 0));
}

static void test_prom_monitor(void **state) {
    (void)state;
    char root[512];
    fx_setup("basic", root, sizeof root);
    dlp_monitor *m = open_fixture(root, 100, NULL);
    assert_int_equal(dlp_monitor_sample_at(m, 1 * SEC), DLP_OK);
    fx_step(root, "basic", 1);
    assert_int_equal(dlp_monitor_sample_at(m, 2 * SEC), DLP_OK);
    dlp_monitor_count(m, DLP_MONITOR_IMAGES, 256);
    dlp_monitor_count(m, DLP_MONITOR_DATA_WAIT_NS, 1500000000);
    dlp_monitor_phase(m, "epoch 1");
    dlp_prom_buf b;
    dlp_prom_init(&b);
    assert_int_equal(dlp_monitor_render_prom(m, &b), DLP_OK);
    check_exposition(b.data);
    double hz = (double)sysconf(_SC_CLK_TCK);
    char want[256];
    snprintf(want, sizeof want, "dlperf_cpu_seconds_total{cpu=\"0\",mode=\"user\"} %.15g\n", 1050 / hz);
    if (!strstr(b.data, want)) fail_msg("missing %s in:\n%s", want, b.data);
    static const char *const lines[] = {
        "dlperf_images_processed_total 256\n",
        "dlperf_data_wait_seconds_total 1.5\n",
        "dlperf_build_info{version=\"" DLP_VERSION "\",",
        "dlperf_memory_available_bytes 20480000000\n",
        "dlperf_disk_read_bytes_total{device=\"vda\"} 2280252416\n",  // 4453618 sectors * 512
        "dlperf_network_receive_bytes_total{device=\"eth0\"} 152311590\n",  // node_exporter's label
        "dlperf_rapl_energy_joules_total{domain=\"package-0\"} 50\n",  // since the monitor started
        "dlperf_rapl_energy_joules_total{domain=\"package-0/dram\"} 5\n",
        "dlperf_monitor_source_available{source=\"gpu\"} 0\n",
        "dlperf_phase_info{phase=\"epoch 1\"} 1\n",
        "# TYPE dlperf_monitor_cpu_seconds_total counter\n",
        "# TYPE dlperf_process_resident_memory_bytes gauge\n",
        "# TYPE dlperf_process_cpu_seconds_total counter\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(b.data, lines[i])) {
            fputs(b.data, stderr);
            fail_msg("missing '%s' in the text above", lines[i]);
        }
    snprintf(want, sizeof want, "dlperf_process_cpu_seconds_total %.15g\n", 150 / hz);
    if (!strstr(b.data, want)) fail_msg("missing %s", want);
    dlp_prom_free(&b);
    dlp_monitor_destroy(m);
    dlp_test_rmtree(root);
}

static void test_bad_config(void **state) {
    (void)state;
    dlp_monitor *m = NULL;
    dlp_monitor_cfg cfg = {.sources = "cpu,gpus"};
    assert_int_equal(dlp_monitor_create(&cfg, &m), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "unknown monitor source 'gpus'"));
    dlp_err_clear();
    cfg = (dlp_monitor_cfg){.interval_ms = 5};
    assert_int_equal(dlp_monitor_create(&cfg, &m), DLP_ERR_INVALID);
    dlp_err_clear();
    assert_null(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_delta),      cmocka_unit_test(test_percentile),
        cmocka_unit_test(test_sources_basic),      cmocka_unit_test(test_cpu_offline),
        cmocka_unit_test(test_wraps),              cmocka_unit_test(test_missing_files),
        cmocka_unit_test(test_files_vanish),       cmocka_unit_test(test_rapl_unreadable),
        cmocka_unit_test(test_nvml_absent),        cmocka_unit_test(test_proc_tree_fallback),
        cmocka_unit_test(test_sinks_parse_back),   cmocka_unit_test(test_phases_and_counters),
        cmocka_unit_test(test_store_thinning),     cmocka_unit_test(test_prom_text),
        cmocka_unit_test(test_prom_monitor),       cmocka_unit_test(test_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
