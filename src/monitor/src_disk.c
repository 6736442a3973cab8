// monitor/src_disk: bytes, IOPS and busy time per block device from /proc/diskstats. Whole disks only by default:
// partitions (no /sys/block/<name>), loop, ram and zram devices are skipped unless all_disks is set. The device
// list is fixed when the monitor starts; a device that disappears gets no values.
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "monitor/source.h"

#define MAX_DISKS 128
enum { D_RD, D_RD_SECT, D_WR, D_WR_SECT, D_IO_MS, ND };  // reads, sectors read, writes, sectors written, ms busy
enum { NF = 5 };                                          // fields per device

typedef struct {
    char name[48];
    uint64_t raw[ND];
    int present, have_prev;
} disk_dev;
_Static_assert(offsetof(disk_dev, name) == 0, "dlp_mon_find_instance: the name comes first");

typedef struct {
    dlp_mon_file f;
    disk_dev dev[MAX_DISKS];
    int n;
    int64_t anomalies;
} disk_state;

// One diskstats line: "major minor name reads merged sectors ms writes merged sectors ms inflight io_ms ...".
static int parse_line(const char *p, char *name, size_t name_len, uint64_t *raw) {
    uint64_t f[10];
    const char *q = p;
    uint64_t maj, min;
    if (dlp_mon_parse_u64(&q, &maj) || dlp_mon_parse_u64(&q, &min)) return -1;
    while (*q == ' ' || *q == '\t') q++;
    size_t i = 0;
    while (*q && *q != ' ' && *q != '\t' && *q != '\n') {
        if (i + 1 < name_len) name[i++] = *q;
        q++;
    }
    name[i] = '\0';
    if (i == 0) return -1;
    for (int k = 0; k < 10; k++)
        if (dlp_mon_parse_u64(&q, &f[k]) != 0) return -1;
    raw[D_RD] = f[0];
    raw[D_RD_SECT] = f[2];
    raw[D_WR] = f[4];
    raw[D_WR_SECT] = f[6];
    raw[D_IO_MS] = f[9];
    return 0;
}

static int skipped_by_name(const char *n) {
    return strncmp(n, "loop", 4) == 0 || strncmp(n, "ram", 3) == 0 || strncmp(n, "zram", 4) == 0;
}

// Without /sys/block (a fixture without sysfs), a name is a partition when another device's name prefixes it
// followed by digits ("sda1" after "sda") or by 'p' and digits after a name ending in a digit ("nvme0n1p1").
static int partition_by_name(const char *name, const char *names, size_t names_len) {
    size_t len = strlen(name);
    for (size_t off = 0; off < names_len; off += strlen(names + off) + 1) {
        const char *p = names + off;
        size_t pl = strlen(p);
        if (pl == 0 || pl >= len || strncmp(p, name, pl) != 0) continue;
        const char *rest = name + pl;
        if (*rest == 'p' && p[pl - 1] >= '0' && p[pl - 1] <= '9') rest++;
        int digits = *rest != '\0';
        for (const char *r = rest; *r; r++)
            if (*r < '0' || *r > '9') digits = 0;
        if (digits) return 1;
    }
    return 0;
}

static int whole_disk_in_sysfs(const dlp_mon_env *env, const char *name) {
    char rel[128];
    snprintf(rel, sizeof rel, "/sys/block/%s", name);
    int fd = dlp_mon_open(env, rel, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return 0;
    close(fd);
    return 1;
}

static dlp_status disk_available(const dlp_mon_env *env, dlp_mon_fields *fl, void **state, char *note,
                                 size_t note_len) {
    dlp_status st;
    disk_state *s = dlp_mon_file_state_open(sizeof *s, env, "/proc/diskstats", 8192, &st, note, note_len);
    if (!s) return st;
    // All names first (NUL-separated), for the name-based partition test.
    size_t names_len = 0;
    char *names = malloc(s->f.len + 1);
    if (!names) {
        dlp_mon_file_state_close(s);
        return DLP_ERR_NOMEM;
    }
    uint64_t raw[ND];
    char name[48];
    for (const char *p = s->f.buf; *p; p = dlp_mon_next_line(p))
        if (parse_line(p, name, sizeof name, raw) == 0) {
            memcpy(names + names_len, name, strlen(name) + 1);
            names_len += strlen(name) + 1;
        }
    dlp_mon_dir d;
    int have_sys_block = dlp_mon_dir_open(&d, env, "/sys/block") == 0;
    if (have_sys_block) dlp_mon_dir_close(&d);
    int skipped = 0;
    for (const char *p = s->f.buf; *p && s->n < MAX_DISKS; p = dlp_mon_next_line(p)) {
        if (parse_line(p, name, sizeof name, raw) != 0) continue;
        if (!env->all_disks) {
            int part = have_sys_block ? !whole_disk_in_sysfs(env, name) : partition_by_name(name, names, names_len);
            if (part || skipped_by_name(name)) {
                skipped++;
                continue;
            }
        }
        snprintf(s->dev[s->n].name, sizeof s->dev[s->n].name, "%s", name);
        s->n++;
    }
    free(names);
    if (s->n == 0) {
        snprintf(note, note_len, "no disk in %s/proc/diskstats (%d partitions, loop or ram devices skipped)", env->root,
                 skipped);
        dlp_mon_file_state_close(s);
        return DLP_ERR_UNSUPPORTED;
    }
    const int S = DLP_MON_F_SUMMARY;
    size_t w = 0;
    for (int i = 0; i < s->n; i++) {
        const char *dn = s->dev[i].name;
        dlp_mon_fields_add(fl, "disk", dn, "read_bytes_per_s", DLP_MON_UNIT_BYTES_PER_S, S);
        dlp_mon_fields_add(fl, "disk", dn, "write_bytes_per_s", DLP_MON_UNIT_BYTES_PER_S, S);
        dlp_mon_fields_add(fl, "disk", dn, "read_iops", DLP_MON_UNIT_PER_S, S);
        dlp_mon_fields_add(fl, "disk", dn, "write_iops", DLP_MON_UNIT_PER_S, S);
        dlp_mon_fields_add(fl, "disk", dn, "util_pct", DLP_MON_UNIT_PCT, S);
        if (w < note_len) w += (size_t)snprintf(note + w, note_len - w, "%s%s", i ? " " : "", dn);
    }
    if (skipped && w < note_len)
        snprintf(note + w, note_len - w, " (%d partitions, loop or ram devices skipped)", skipped);
    *state = s;
    return DLP_OK;
}

static void disk_sample(void *state, double dt_s, double *vals) {
    disk_state *s = state;
    for (int i = 0; i < s->n * NF; i++) vals[i] = NAN;
    for (int i = 0; i < s->n; i++) s->dev[i].present = 0;
    if (dlp_mon_file_read(&s->f) != 0) {
        dlp_log_warn_limited("monitor.disk.read", 3, "monitor: cannot re-read /proc/diskstats; disk values missing");
        for (int i = 0; i < s->n; i++) s->dev[i].have_prev = 0;
        return;
    }
    uint64_t raw[ND];
    char name[48];
    int hint = 0;
    for (const char *p = s->f.buf; *p; p = dlp_mon_next_line(p)) {
        if (parse_line(p, name, sizeof name, raw) != 0) continue;
        int idx = dlp_mon_find_instance(s->dev, sizeof s->dev[0], s->n, name, &hint);
        if (idx < 0) continue;
        disk_dev *d = &s->dev[idx];
        d->present = 1;
        if (d->have_prev && dt_s > 0) {
            int bad = 0;
            double dd[ND];
            for (int k = 0; k < ND; k++) dd[k] = (double)dlp_mon_counter_delta(d->raw[k], raw[k], 0, &bad);
            if (bad) s->anomalies++;
            double *v = vals + idx * NF;
            v[0] = dd[D_RD_SECT] * 512.0 / dt_s;  // diskstats sectors are always 512 bytes
            v[1] = dd[D_WR_SECT] * 512.0 / dt_s;
            v[2] = dd[D_RD] / dt_s;
            v[3] = dd[D_WR] / dt_s;
            v[4] = fmin(100.0, dd[D_IO_MS] / 1000.0 / dt_s * 100.0);
        }
        memcpy(d->raw, raw, sizeof raw);
        d->have_prev = 1;
    }
    for (int i = 0; i < s->n; i++)
        if (!s->dev[i].present) s->dev[i].have_prev = 0;
}

static void disk_prom(void *state, dlp_prom_buf *b) {
    disk_state *s = state;
    static const struct { int k; double scale; const char *name, *help; } rows[] = {
        {D_RD_SECT, 512.0, "dlperf_disk_read_bytes_total", "Bytes read from the device since boot (/proc/diskstats)."},
        {D_WR_SECT, 512.0, "dlperf_disk_written_bytes_total", "Bytes written to the device since boot."},
        {D_RD, 1.0, "dlperf_disk_reads_completed_total", "Reads completed since boot."},
        {D_WR, 1.0, "dlperf_disk_writes_completed_total", "Writes completed since boot."},
        {D_IO_MS, 1e-3, "dlperf_disk_io_time_seconds_total", "Seconds the device had I/O in flight since boot."},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        dlp_prom_family(b, rows[r].name, "counter", rows[r].help);
        for (int i = 0; i < s->n; i++)
            if (s->dev[i].present && s->dev[i].have_prev)
                dlp_prom_sample(b, rows[r].name, (double)s->dev[i].raw[rows[r].k] * rows[r].scale, "device",
                                s->dev[i].name, (char *)NULL);
    }
}

const dlp_mon_source_ops dlp_mon_src_disk =
    DLP_MON_SOURCE_OPS(disk, "bytes, IOPS and busy % per block device (/proc/diskstats)", dlp_mon_file_state_close);
