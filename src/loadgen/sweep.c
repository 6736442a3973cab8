// loadgen/sweep: perf_analyzer's --concurrency-range / --request-rate-range — each level measured in windows
// until three in a row agree on throughput and mean latency within ±stability, then reported as
// perf_analyzer's CSV. Drives any dlp_lg_sut; the windows and the stability rule are here, the CSV in
// dlp_lg_sweep_csv.
//
// Threads: the calling thread is the driver (keeps `concurrency` requests out, or issues at the rate's times);
// answers arrive on the SUT's threads and take one lock. A request is counted in the window in which its answer
// arrived; its latency runs from its issue to its answer.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/stats.h"
#include "loadgen/scenario.h"

#define SW_MAX_WINDOW_RECORDS (1 << 22)

typedef struct sw_rec {
    int64_t lat_ns, queue_ns, infer_ns;
    char ok, has_server;
} sw_rec;

typedef struct sw_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t *issue_ns;   // (cap) by request id % cap
    int64_t cap;
    int64_t outstanding;
    sw_rec *win;         // answers in the current window
    int64_t nwin, win_cap;
    int64_t dropped;     // answers beyond the window's record capacity
} sw_state;

static void sw_done(void *ctx, const dlp_lg_response *r, size_t n) {
    sw_state *st = ctx;
    int64_t now = dlp_now_ns();
    pthread_mutex_lock(&st->mu);
    for (size_t k = 0; k < n; k++) {
        st->outstanding--;
        if (st->nwin >= st->win_cap) {
            st->dropped++;
            continue;
        }
        sw_rec *w = &st->win[st->nwin++];
        w->lat_ns = now - st->issue_ns[r[k].id % (uint64_t)st->cap];
        w->ok = r[k].outcome == DLP_LG_OK;
        w->has_server = (char)r[k].has_server_times;
        w->queue_ns = r[k].server_queue_ns;
        w->infer_ns = r[k].server_infer_ns;
    }
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

typedef struct sw_window {
    double tput, avg_ns;
    sw_rec *recs;  // owned
    int64_t n;
    int64_t dur_ns;
} sw_window;

static int within(const double *v, int n, double tol) {
    double mean = 0;
    for (int i = 0; i < n; i++) mean += v[i] / n;
    if (mean <= 0) return 0;
    for (int i = 0; i < n; i++)
        if (fabs(v[i] - mean) > tol * mean) return 0;
    return 1;
}

// Folds windows [from, from + k) into a point.
static dlp_status fold(const sw_window *w, int from, int k, dlp_lg_sweep_point *p) {
    int64_t n = 0, dur = 0;
    for (int i = from; i < from + k; i++) n += w[i].n, dur += w[i].dur_ns;
    int64_t *lat = malloc((size_t)(n ? n : 1) * sizeof *lat);
    DLP_TRY_ALLOC(lat);
    int64_t nok = 0;
    double sum = 0, q = 0, inf = 0;
    for (int i = from; i < from + k; i++)
        for (int64_t j = 0; j < w[i].n; j++) {
            const sw_rec *r = &w[i].recs[j];
            if (!r->ok) {
                p->failed++;
                continue;
            }
            lat[nok++] = r->lat_ns;
            sum += (double)r->lat_ns;
            if (r->has_server) {
                p->server_count++;
                q += (double)r->queue_ns;
                inf += (double)r->infer_ns;
            }
        }
    p->count = nok;
    p->infer_per_s = dur > 0 ? (double)nok / dlp_ns_to_s(dur) : 0;
    dlp_lg_latency l;
    dlp_lg_latency_summarize(lat, (size_t)nok, &l);
    p->avg_ns = nok ? sum / (double)nok : 0;
    p->p50_ns = (double)l.p50_ns, p->p90_ns = (double)l.p90_ns, p->p95_ns = (double)l.p95_ns;
    p->p99_ns = (double)l.p99_ns;
    if (p->server_count) p->server_queue_ns = q / (double)p->server_count, p->server_infer_ns = inf / (double)p->server_count;
    free(lat);
    return DLP_OK;
}

static dlp_status sweep_level(const dlp_lg_sweep_cfg *cfg, const dlp_lg_sut *sut, sw_state *st, double level,
                              uint64_t *next_id, dlp_lg_sweep_point *p) {
    memset(p, 0, sizeof *p);
    p->level = level;
    dlp_lg_done done = {sw_done, st};
    sw_window *w = calloc((size_t)cfg->max_windows, sizeof *w);
    DLP_TRY_ALLOC(w);
    dlp_status ret = DLP_OK;
    int64_t conc = cfg->by_rate ? 0 : (int64_t)level;
    double gap_ns = cfg->by_rate ? 1e9 / level : 0;
    int64_t t_next = dlp_now_ns();
    int nw = 0, stable_at = -1;
    for (; nw < cfg->max_windows && stable_at < 0 && ret == DLP_OK; nw++) {
        int64_t w_start = dlp_now_ns(), w_end = w_start + cfg->window_ns;
        pthread_mutex_lock(&st->mu);
        st->nwin = 0;
        pthread_mutex_unlock(&st->mu);
        for (;;) {
            int64_t now = dlp_now_ns();
            if (now >= w_end) break;
            pthread_mutex_lock(&st->mu);
            int issue = 0;
            if (!cfg->by_rate) {
                while (st->outstanding >= conc && dlp_now_ns() < w_end) {
                    struct timespec ts;
                    clock_gettime(CLOCK_REALTIME, &ts);
                    int64_t at = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + 2000000;  // re-check the clock
                    ts.tv_sec = at / 1000000000LL, ts.tv_nsec = at % 1000000000LL;
                    pthread_cond_timedwait(&st->cv, &st->mu, &ts);
                }
                issue = st->outstanding < conc;
            } else if (now >= t_next) {
                issue = st->outstanding < cfg->max_outstanding;
                t_next += (int64_t)gap_ns;
                if (!issue) st->dropped++;
            }
            uint64_t id = 0;
            if (issue) {
                // Ids index issue_ns modulo cap: fine while fewer than cap are outstanding (at most 4096 here).
                id = (*next_id)++;
                st->issue_ns[id % (uint64_t)st->cap] = dlp_now_ns();
                st->outstanding++;
            }
            pthread_mutex_unlock(&st->mu);
            if (issue) {
                dlp_lg_sample s = {id, (uint32_t)(id % (uint64_t)cfg->sample_count)};
                if (sut->issue_query(sut->ctx, &s, 1, &done) != DLP_OK) {  // not taken: answer it as failed
                    dlp_err_clear();
                    dlp_lg_response r = {.id = id, .outcome = DLP_LG_ERROR, .top1 = -1};
                    sw_done(st, &r, 1);
                }
            } else if (cfg->by_rate) {
                int64_t until = t_next < w_end ? t_next : w_end;
                dlp_sleep_until_ns(until);
            }
        }
        pthread_mutex_lock(&st->mu);
        w[nw].n = st->nwin;
        w[nw].recs = malloc((size_t)(st->nwin ? st->nwin : 1) * sizeof(sw_rec));
        if (w[nw].recs) memcpy(w[nw].recs, st->win, (size_t)st->nwin * sizeof(sw_rec));
        st->nwin = 0;
        pthread_mutex_unlock(&st->mu);
        if (!w[nw].recs) {
            ret = DLP_ERR(DLP_ERR_NOMEM, "out of memory for a measurement window");
            break;
        }
        w[nw].dur_ns = dlp_now_ns() - w_start;
        double sum = 0;
        int64_t ok = 0;
        for (int64_t j = 0; j < w[nw].n; j++)
            if (w[nw].recs[j].ok) sum += (double)w[nw].recs[j].lat_ns, ok++;
        w[nw].tput = (double)ok / dlp_ns_to_s(w[nw].dur_ns);
        w[nw].avg_ns = ok ? sum / (double)ok : 0;
        if (nw + 1 >= cfg->windows) {
            double tp[16], lt[16];
            int k = cfg->windows < 16 ? cfg->windows : 16;
            for (int i = 0; i < k; i++) tp[i] = w[nw + 1 - k + i].tput, lt[i] = w[nw + 1 - k + i].avg_ns;
            if (within(tp, k, cfg->stability) && within(lt, k, cfg->stability)) stable_at = nw + 1 - k;
        }
    }
    p->windows = nw;
    p->stable = stable_at >= 0;
    int k = cfg->windows < nw ? cfg->windows : nw;
    if (ret == DLP_OK) ret = fold(w, p->stable ? stable_at : nw - k, k, p);
    for (int i = 0; i < cfg->max_windows; i++) free(w[i].recs);
    free(w);
    // Drain: the next level starts with nothing outstanding.
    pthread_mutex_lock(&st->mu);
    int64_t give_up = dlp_now_ns() + 30 * 1000000000LL;
    while (st->outstanding > 0 && dlp_now_ns() < give_up) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&st->cv, &st->mu, &ts);
    }
    int64_t left = st->outstanding;
    pthread_mutex_unlock(&st->mu);
    if (left > 0 && ret == DLP_OK)
        ret = DLP_ERR(DLP_ERR_TIMEOUT, "%lld requests still unanswered 30 s after the level %g ended",
                      (long long)left, level);
    return ret;
}

dlp_status dlp_lg_sweep(const dlp_lg_sweep_cfg *cfg, const dlp_lg_sut *sut, dlp_lg_sweep_point **out, int *n_out) {
    *out = NULL;
    *n_out = 0;
    if (!(cfg->start > 0 && cfg->end >= cfg->start && cfg->step > 0))
        return DLP_ERR(DLP_ERR_INVALID, "a range must be start:end:step with 0 < start <= end and step > 0");
    if (!cfg->by_rate && (cfg->start != floor(cfg->start) || cfg->step != floor(cfg->step) || cfg->end > 4096))
        return DLP_ERR(DLP_ERR_INVALID, "concurrency levels are whole numbers up to 4096");
    if (cfg->by_rate && !(cfg->max_outstanding >= 1 && cfg->max_outstanding <= 4096))
        return DLP_ERR(DLP_ERR_INVALID, "the outstanding requests must be capped at 1..4096");
    if (cfg->window_ns <= 0 || cfg->windows < 1 || cfg->max_windows < cfg->windows || cfg->sample_count < 1 ||
        !(cfg->stability > 0))
        return DLP_ERR(DLP_ERR_INVALID, "bad sweep settings (window, stability, windows <= max windows)");
    int n = (int)floor((cfg->end - cfg->start) / cfg->step + 1e-9) + 1;
    if (n > 1000) return DLP_ERR(DLP_ERR_INVALID, "%d levels: at most 1000", n);
    dlp_lg_sweep_point *pts = calloc((size_t)n, sizeof *pts);
    DLP_TRY_ALLOC(pts);
    sw_state st = {0};
    st.cap = 1 << 16;
    st.win_cap = SW_MAX_WINDOW_RECORDS;
    st.issue_ns = calloc((size_t)st.cap, sizeof *st.issue_ns);
    st.win = malloc((size_t)st.win_cap * sizeof *st.win);
    if (!st.issue_ns || !st.win) {
        free(st.issue_ns), free(st.win), free(pts);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory for the sweep");
    }
    pthread_mutex_init(&st.mu, NULL);
    pthread_cond_init(&st.cv, NULL);
    uint64_t next_id = 0;
    dlp_status ret = DLP_OK;
    int done_n = 0;
    for (int i = 0; i < n && ret == DLP_OK; i++) {
        ret = sweep_level(cfg, sut, &st, cfg->start + i * cfg->step, &next_id, &pts[i]);
        if (ret == DLP_OK) {
            done_n++;
            if (cfg->on_point) cfg->on_point(cfg->on_point_ctx, &pts[i]);
        }
    }
    // Every answer is in (sweep_level drained, or failed saying so) before the state goes away.
    if (ret != DLP_OK) {
        pthread_mutex_lock(&st.mu);
        int64_t left = st.outstanding;
        pthread_mutex_unlock(&st.mu);
        if (left > 0) {  // the SUT still holds requests pointing at st: leak it rather than free it under them
            *out = pts;
            *n_out = done_n;
            return ret;
        }
    }
    pthread_mutex_destroy(&st.mu);
    pthread_cond_destroy(&st.cv);
    free(st.issue_ns);
    free(st.win);
    *out = pts;
    *n_out = done_n;
    return ret;
}

static int by_tput(const void *a, const void *b) {
    double x = ((const dlp_lg_sweep_point *)a)->infer_per_s, y = ((const dlp_lg_sweep_point *)b)->infer_per_s;
    return (x > y) - (x < y);
}

char *dlp_lg_sweep_csv(const dlp_lg_sweep_point *pin, int n, int by_rate) {
    dlp_lg_sweep_point *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    if (!p) return NULL;
    memcpy(p, pin, (size_t)n * sizeof *p);
    qsort(p, (size_t)n, sizeof *p, by_tput);
    dlp_lg_text t = {0};  // grows as needed: a row's width depends on its numbers
    dlp_lg_text_printf(&t, "%s,Inferences/Second,Client Send,Network+Server Send/Recv,"
                       "Server Queue,Server Compute Input,Server Compute Infer,Server Compute Output,"
                       "Client Recv,p50 latency,p90 latency,p95 latency,p99 latency\n",
                       by_rate ? "Request Rate" : "Concurrency");
    for (int i = 0; i < n; i++) {
        // Microseconds, as perf_analyzer writes them. The service's own queue and inference times come from its
        // answers (dlperf serve's queue_ms / infer_ms); the rest of the mean latency is network + server
        // send/receive. dlperf sends prebuilt bodies: client send and receive are not timed apart (0).
        double q = p[i].server_count ? p[i].server_queue_ns : 0, inf = p[i].server_count ? p[i].server_infer_ns : 0;
        double net = p[i].avg_ns - q - inf;
        if (net < 0) net = 0;
        dlp_lg_text_printf(&t, by_rate ? "%.1f" : "%.0f", p[i].level);
        dlp_lg_text_printf(&t, ",%.1f,0,%.0f,%.0f,0,%.0f,0,0,%.0f,%.0f,%.0f,%.0f\n", p[i].infer_per_s, net / 1e3,
                           q / 1e3, inf / 1e3, p[i].p50_ns / 1e3, p[i].p90_ns / 1e3, p[i].p95_ns / 1e3,
                           p[i].p99_ns / 1e3);
    }
    free(p);
    return t.p;  // NULL when an allocation failed
}
