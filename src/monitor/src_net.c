// monitor/src_net: bytes and packets per network interface from /proc/net/dev (this process's network
// namespace). The interface list is fixed when the monitor starts (up to 64); loopback is kept, since a
// serving benchmark on one machine talks over it.
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "monitor/source.h"

#define MAX_IFS 64
enum { N_RXB, N_RXP, N_RXE, N_RXD, N_TXB, N_TXP, N_TXE, N_TXD, NN };
enum { NF = 4 };  // fields per interface

typedef struct {
    char name[32];
    uint64_t raw[NN];
    int present, have_prev;
} net_if;
_Static_assert(offsetof(net_if, name) == 0, "dlp_mon_find_instance: the name comes first");

typedef struct {
    dlp_mon_file f;
    net_if ifs[MAX_IFS];
    int n;
    int64_t anomalies;
} net_state;

// "  eth0: rxbytes rxpackets errs drop fifo frame compressed multicast txbytes txpackets errs drop ..."
// (old kernels write "eth0:123" without a blank after the colon).
static int parse_line(const char *p, char *name, size_t name_len, uint64_t *raw) {
    while (*p == ' ' || *p == '\t') p++;
    const char *colon = p;
    while (*colon && *colon != ':' && *colon != '\n' && *colon != '|') colon++;
    if (*colon != ':' || colon == p) return -1;
    size_t len = (size_t)(colon - p);
    if (len >= name_len) len = name_len - 1;
    memcpy(name, p, len);
    name[len] = '\0';
    const char *q = colon + 1;
    uint64_t f[16];
    for (int k = 0; k < 16; k++)
        if (dlp_mon_parse_u64(&q, &f[k]) != 0) return -1;
    raw[N_RXB] = f[0];
    raw[N_RXP] = f[1];
    raw[N_RXE] = f[2];
    raw[N_RXD] = f[3];
    raw[N_TXB] = f[8];
    raw[N_TXP] = f[9];
    raw[N_TXE] = f[10];
    raw[N_TXD] = f[11];
    return 0;
}

static dlp_status net_available(const dlp_mon_env *env, dlp_mon_fields *fl, void **state, char *note,
                                size_t note_len) {
    dlp_status st;
    net_state *s = dlp_mon_file_state_open(sizeof *s, env, "/proc/net/dev", 4096, &st, note, note_len);
    if (!s) return st;
    uint64_t raw[NN];
    char name[32];
    int more = 0;
    for (const char *p = s->f.buf; *p; p = dlp_mon_next_line(p)) {
        if (parse_line(p, name, sizeof name, raw) != 0) continue;
        if (s->n == MAX_IFS) {
            more++;
            continue;
        }
        snprintf(s->ifs[s->n].name, sizeof s->ifs[s->n].name, "%s", name);
        s->n++;
    }
    if (s->n == 0) {
        snprintf(note, note_len, "no interface in %s/proc/net/dev", env->root);
        dlp_mon_file_state_close(s);
        return DLP_ERR_UNSUPPORTED;
    }
    size_t w = 0;
    for (int i = 0; i < s->n; i++) {
        const char *in = s->ifs[i].name;
        dlp_mon_fields_add(fl, "net", in, "rx_bytes_per_s", DLP_MON_UNIT_BYTES_PER_S, DLP_MON_F_SUMMARY);
        dlp_mon_fields_add(fl, "net", in, "tx_bytes_per_s", DLP_MON_UNIT_BYTES_PER_S, DLP_MON_F_SUMMARY);
        dlp_mon_fields_add(fl, "net", in, "rx_packets_per_s", DLP_MON_UNIT_PER_S, DLP_MON_F_SUMMARY);
        dlp_mon_fields_add(fl, "net", in, "tx_packets_per_s", DLP_MON_UNIT_PER_S, DLP_MON_F_SUMMARY);
        if (w < note_len) w += (size_t)snprintf(note + w, note_len - w, "%s%s", i ? " " : "", in);
    }
    if (more && w < note_len) snprintf(note + w, note_len - w, " (%d more not monitored)", more);
    *state = s;
    return DLP_OK;
}

static void net_sample(void *state, double dt_s, double *vals) {
    net_state *s = state;
    for (int i = 0; i < s->n * NF; i++) vals[i] = NAN;
    for (int i = 0; i < s->n; i++) s->ifs[i].present = 0;
    if (dlp_mon_file_read(&s->f) != 0) {
        dlp_log_warn_limited("monitor.net.read", 3, "monitor: cannot re-read /proc/net/dev; network values missing");
        for (int i = 0; i < s->n; i++) s->ifs[i].have_prev = 0;
        return;
    }
    uint64_t raw[NN];
    char name[32];
    int hint = 0;
    for (const char *p = s->f.buf; *p; p = dlp_mon_next_line(p)) {
        if (parse_line(p, name, sizeof name, raw) != 0) continue;
        int idx = dlp_mon_find_instance(s->ifs, sizeof s->ifs[0], s->n, name, &hint);
        if (idx < 0) continue;
        net_if *d = &s->ifs[idx];
        d->present = 1;
        if (d->have_prev && dt_s > 0) {
            int bad = 0;
            double *v = vals + idx * NF;
            v[0] = (double)dlp_mon_counter_delta(d->raw[N_RXB], raw[N_RXB], 0, &bad) / dt_s;
            v[1] = (double)dlp_mon_counter_delta(d->raw[N_TXB], raw[N_TXB], 0, &bad) / dt_s;
            v[2] = (double)dlp_mon_counter_delta(d->raw[N_RXP], raw[N_RXP], 0, &bad) / dt_s;
            v[3] = (double)dlp_mon_counter_delta(d->raw[N_TXP], raw[N_TXP], 0, &bad) / dt_s;
            if (bad) s->anomalies++;
        }
        memcpy(d->raw, raw, sizeof raw);
        d->have_prev = 1;
    }
    for (int i = 0; i < s->n; i++)
        if (!s->ifs[i].present) s->ifs[i].have_prev = 0;
}

static void net_prom(void *state, dlp_prom_buf *b) {
    net_state *s = state;
    static const struct { int k; const char *name, *help; } rows[] = {
        {N_RXB, "dlperf_network_receive_bytes_total", "Bytes received by the interface since it came up (/proc/net/dev)."},
        {N_TXB, "dlperf_network_transmit_bytes_total", "Bytes transmitted by the interface."},
        {N_RXP, "dlperf_network_receive_packets_total", "Packets received by the interface."},
        {N_TXP, "dlperf_network_transmit_packets_total", "Packets transmitted by the interface."},
        {N_RXE, "dlperf_network_receive_errors_total", "Receive errors on the interface."},
        {N_TXE, "dlperf_network_transmit_errors_total", "Transmit errors on the interface."},
        {N_RXD, "dlperf_network_receive_drop_total", "Received packets dropped."},
        {N_TXD, "dlperf_network_transmit_drop_total", "Transmitted packets dropped."},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        dlp_prom_family(b, rows[r].name, "counter", rows[r].help);
        for (int i = 0; i < s->n; i++)
            if (s->ifs[i].present && s->ifs[i].have_prev)
                dlp_prom_sample(b, rows[r].name, (double)s->ifs[i].raw[rows[r].k], "device", s->ifs[i].name,
                                (char *)NULL);
    }
}

const dlp_mon_source_ops dlp_mon_src_net =
    DLP_MON_SOURCE_OPS(net, "bytes and packets per network interface (/proc/net/dev)", dlp_mon_file_state_close);
