// dist/comm_mpi: Open MPI on host buffers — one rank per process as mpirun/srun started them. The allreduce is
// MPI_Iallreduce (sum, in place) divided by the rank count at the wait, Open MPI's non-blocking allreduce set to its
// ring algorithm (the bandwidth-optimal one the model charges); with DLPERF_MPI_ALLREDUCE=pipelined, allreduces of 1
// MiB and more are a pipelined ring of our own over point-to-point messages instead (below: every link busy both
// ways, a segment added and passed on while the next one moves; on the emulated 10 Gbit/s hosts it did not beat
// Open MPI's ring at 64 MiB, docs/scale-out.md, so it is not the default). Each collective call also pokes the
// requests still in flight so they progress while backward goes on (Open MPI moves messages only inside MPI calls
// unless an asynchronous progress thread is configured). Errors come back as statuses (MPI_ERRORS_RETURN) with MPI's
// string; a peer that dies is reported by mpirun, which ends the job.
// No wait blocks forever: every collective is non-blocking and waited for with a deadline, DLPERF_MPI_TIMEOUT_S
// (300 s). MPI itself would wait for ever on a peer whose host dropped off the network (TCP retransmits for ~15
// minutes; mpirun notices a dead process, not a silent one). At the deadline the rank asks every other rank for a
// sign of life (one byte each way on a communicator of its own, a few seconds) and fails naming the ranks and hosts
// that did not answer; the trainer then ends the job (MPI_Abort).
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "dist/comm_impl.h"
#include "dist/launch.h"

#define MAX_PENDING 256  // allreduces in flight at once (gradient buckets of one step)
#define HOST_LEN 64       // a rank's host name, as the messages print it
#define CENSUS_TAG 7301
#define RING_MIN_BYTES (1 << 20)        // the pipelined ring from this size on; MPI_Iallreduce below
#define RING_SEGMENT_BYTES (4 << 20)    // its segment unless DLPERF_MPI_SEGMENT_BYTES says otherwise
#define RING_MAX_SEGS 64                // segments per chunk (larger segments beyond); tag = (seq % 256) x 64 + segment

// The pipelined ring (N ranks, each sends to rank+1 and receives from rank-1): the buffer in N chunks, each chunk in
// nseg segments. Step k (0 .. 2(N-1)-1) sends chunk (rank - k) mod N and receives chunk (rank - k - 1) mod N; the
// first N-1 steps add what arrives (reduce-scatter, through tmp), the rest receive the finished chunks in place
// (all-gather). Every segment runs the steps on its own: once segment j of step k has arrived (and been added), its
// step k+1 leaves at once — so the link carries one segment while the previous one is added, both ways at once.
// A ring's state outlives its allreduce: the communicator keeps the finished ones (spare_rings) for the next, so
// their buffers are allocated once and grown when an allreduce needs more, not per call.
typedef struct ring_state {
    int n, steps, nseg, tag0;
    int64_t seg_elems;
    float *tmp;             // the chunk being added (reduce-scatter), segment j at j x seg_elems
    MPI_Request *sreq;      // step k, segment j: [k x nseg + j]
    int64_t tmp_cap, sreq_cap;  // the elements they hold
    int rstep[RING_MAX_SEGS];   // segment j: the step whose receive is posted (or about to be); steps when done
    MPI_Request rreq[RING_MAX_SEGS];  // segment j's receive (MPI_REQUEST_NULL: not posted yet)
    int segs_done;
    int posted;             // some receive or send was posted
} ring_state;

struct dlp_comm_req {
    float *buf;
    int64_t count;
    int nreq;
    MPI_Request *reqs;  // MPI_Iallreduce: one per segment (segment_count elements; at most INT_MAX)
    ring_state *ring;   // or the pipelined ring (NULL: MPI_Iallreduce)
    int done;
};

typedef struct mpi_comm {
    dlp_comm base;
    MPI_Comm comm;
    int we_initialized;
    dlp_comm_req *pending[MAX_PENDING];
    int npending;
    MPI_Comm census;         // the sign-of-life exchange after a timeout (apart from the collectives' traffic)
    char (*hosts)[HOST_LEN];  // every rank's host name (MPI_Get_processor_name)
    double timeout_s;        // DLPERF_MPI_TIMEOUT_S
    int64_t segment_count;   // elements per MPI_Iallreduce (DLPERF_MPI_SEGMENT_BYTES / 4)
    int use_ring;            // the pipelined ring for ring_min_bytes and more (DLPERF_MPI_ALLREDUCE=pipelined)
    int64_t ring_seg_elems;  // its segment (DLPERF_MPI_SEGMENT_BYTES / 4, or 4 MiB)
    long long ring_min_bytes;  // the smallest allreduce it takes (DLPERF_MPI_RING_MIN_BYTES, 1 MiB)
    unsigned seq;            // allreduces started (every rank starts them in the same order): the ring's tags
    ring_state *spare_rings[MAX_PENDING];  // rings of finished allreduces, their buffers kept for the next
    int nspare_rings;
} mpi_comm;

static dlp_status mpi_fail(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return DLP_ERR(DLP_ERR_IO, "MPI %s failed: %s", what, msg);
}


static dlp_status mpi_open(dlp_comm **out) {
    // DLPERF_MPI_SEGMENT_BYTES: an allreduce as several MPI_Iallreduce of this size in flight at once, so that one
    // ring's reduction and hand-over between rounds overlap another's transfer (unset or 0: one per INT_MAX elements);
    // with DLPERF_MPI_ALLREDUCE=pipelined, the pipelined ring's segment (unset or 0: 4 MiB)
    const char *seg = getenv("DLPERF_MPI_SEGMENT_BYTES");
    char *seg_end = NULL;
    const long long seg_b = seg && *seg ? strtoll(seg, &seg_end, 10) : 0;
    if (seg && *seg && (*seg_end || (seg_b != 0 && seg_b < 4096))) {
        return DLP_ERR(DLP_ERR_INVALID, "DLPERF_MPI_SEGMENT_BYTES=%s: a size in bytes, at least 4096 (or 0: no "
                       "segments)", seg);
    }
    const char *algo = getenv("DLPERF_MPI_ALLREDUCE");
    if (algo && *algo && strcmp(algo, "pipelined") != 0 && strcmp(algo, "libnbc") != 0)
        return DLP_ERR(DLP_ERR_INVALID, "DLPERF_MPI_ALLREDUCE=%s: libnbc (Open MPI's MPI_Iallreduce, the default) or "
                       "pipelined (a ring of our own from DLPERF_MPI_RING_MIN_BYTES, 1 MiB, on)", algo);
    mpi_comm *c = calloc(1, sizeof *c);
    DLP_TRY_ALLOC(c);
    c->use_ring = algo && strcmp(algo, "pipelined") == 0;
    const char *rmin = getenv("DLPERF_MPI_RING_MIN_BYTES");  // the ring from this size on (1 MiB; tests go lower)
    c->ring_min_bytes = rmin && *rmin ? strtoll(rmin, NULL, 10) : RING_MIN_BYTES;
    if (c->ring_min_bytes < 4) {
        free(c);
        return DLP_ERR(DLP_ERR_INVALID, "DLPERF_MPI_RING_MIN_BYTES=%s: a size in bytes, at least 4", rmin);
    }
    c->ring_seg_elems = (seg_b > 0 ? seg_b : RING_SEGMENT_BYTES) / 4;
    int inited = 0, provided = 0, rc;
    MPI_Initialized(&inited);
    if (!inited) {
        // The gradient allreduce is non-blocking (libnbc). Left to itself libnbc reduces large messages on a small
        // communicator by a binomial tree (reduce, then broadcast): every byte crosses a link twice, one direction at
        // a time, and a 2-host job gets half the link (measured on the emulated network, docs/scale-out.md). The
        // ring keeps both directions of every link busy; a value the user set (environment, mpirun --mca) stands.
        setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) {
            free(c);
            return mpi_fail(rc, "MPI_Init_thread");
        }
        c->we_initialized = 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->comm)) != MPI_SUCCESS) {
        free(c);
        return mpi_fail(rc, "MPI_Comm_dup");
    }
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm, &c->base.rank);
    MPI_Comm_size(c->comm, &c->base.size);
    MPI_Comm node;
    if (MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, c->base.rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &c->base.local_rank);
        MPI_Comm_free(&node);
    }
    const char *to = getenv("DLPERF_MPI_TIMEOUT_S");
    c->timeout_s = to && atof(to) > 0 ? atof(to) : 300.0;
    c->segment_count = seg_b > 0 && seg_b / 4 < INT_MAX ? seg_b / 4 : INT_MAX;
    char me[MPI_MAX_PROCESSOR_NAME] = "?";
    int len = 0;
    MPI_Get_processor_name(me, &len);
    c->hosts = calloc((size_t)c->base.size, sizeof *c->hosts);
    char mine[HOST_LEN];
    snprintf(mine, sizeof mine, "%s", me);
    if (!c->hosts || (rc = MPI_Comm_dup(c->comm, &c->census)) != MPI_SUCCESS ||
        (rc = MPI_Allgather(mine, HOST_LEN, MPI_CHAR, c->hosts, HOST_LEN, MPI_CHAR, c->comm)) != MPI_SUCCESS) {
        dlp_status st = c->hosts ? mpi_fail(rc, "MPI_Comm_dup/MPI_Allgather (host names)")
                                 : DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        free(c->hosts);
        free(c);
        return st;
    }
    MPI_Comm_set_errhandler(c->census, MPI_ERRORS_RETURN);
    *out = &c->base;
    return DLP_OK;
}

// After a timeout: which ranks still answer? Every rank that reaches this sends one byte to every other and takes
// what comes within a few seconds (ranks that timed out in the same collective meet here); writes the silent ones
// ("rank 2 on node3, ...") into buf, or "every rank answered" when none is.
static void census(mpi_comm *c, char *buf, size_t len) {
    const int n = c->base.size, me = c->base.rank;
    MPI_Request *rq = calloc((size_t)n * 2, sizeof *rq);
    char *in = calloc((size_t)n, 1), one = 1;
    if (!rq || !in) {
        snprintf(buf, len, "(out of memory asking the other ranks)");
        free(rq);
        free(in);
        return;
    }
    for (int r = 0; r < n; r++) {
        rq[r] = rq[n + r] = MPI_REQUEST_NULL;
        if (r == me) continue;
        MPI_Irecv(&in[r], 1, MPI_CHAR, r, CENSUS_TAG, c->census, &rq[r]);
        MPI_Isend(&one, 1, MPI_CHAR, r, CENSUS_TAG, c->census, &rq[n + r]);
    }
    const double window_s = c->timeout_s / 2 < 5 ? c->timeout_s / 2 : 5;
    const int64_t t0 = dlp_now_ns();
    for (;;) {
        int flag = 0;
        MPI_Testall(n, rq, &flag, MPI_STATUSES_IGNORE);  // the receives complete as answers come
        int all = 1;
        for (int r = 0; r < n; r++) all &= r == me || in[r];
        if (all || dlp_ns_to_s(dlp_now_ns() - t0) > window_s) break;
        dlp_sleep_ns(1000 * 1000);
    }
    size_t at = 0;
    buf[0] = '\0';
    for (int r = 0; r < n; r++) {
        if (r != me && !in[r] && at + 1 < len)
            at += (size_t)snprintf(buf + at, len - at, "%srank %d on %s", at ? ", " : "no answer from ", r, c->hosts[r]);
        if (r != me && rq[r] != MPI_REQUEST_NULL) {
            MPI_Cancel(&rq[r]);
            MPI_Request_free(&rq[r]);
        }
        if (rq[n + r] != MPI_REQUEST_NULL) MPI_Request_free(&rq[n + r]);  // a send to a dead peer may never end
    }
    if (!buf[0]) snprintf(buf, len, "every rank answered (a slow rank, or a timeout too short)");
    free(rq);
    free(in);
}

static int req_test(mpi_comm *c, dlp_comm_req *r, int *done);

// Waits for n requests (or, r given, for that allreduce: the ring moves on in every poll), polling (spins first, then
// 50 us naps, which also leaves the core to others), up to the timeout; then names the ranks that do not answer and
// fails.
static dlp_status wait_deadline(mpi_comm *c, dlp_comm_req *r, int n, MPI_Request *reqs, const char *what) {
    const int64_t t0 = dlp_now_ns(), limit = (int64_t)(c->timeout_s * 1e9);
    for (int spins = 0;; spins++) {
        int flag = 0, rc = r ? req_test(c, r, &flag) : MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, what);
        if (flag) return DLP_OK;
        if (dlp_now_ns() - t0 > limit) {
            char who[512];
            census(c, who, sizeof who);
            return DLP_ERR(DLP_ERR_TIMEOUT, "mpi communicator: rank %d on %s: %s not done after %.0f s "
                           "(DLPERF_MPI_TIMEOUT_S); %s", c->base.rank, c->hosts[c->base.rank], what, c->timeout_s, who);
        }
        if (spins > 1000) dlp_sleep_ns(50 * 1000);
    }
}

static void ring_free(ring_state *g) {
    if (!g) return;
    free(g->tmp);
    free(g->sreq);
    free(g);
}

static void req_free(dlp_comm_req *r) {
    if (!r) return;
    free(r->reqs);
    ring_free(r->ring);
    free(r);
}

// Chunk c of the ring: [lo, hi) of the buffer; segment j of it: [lo + len j / nseg, lo + len (j+1) / nseg) — the
// same cut on every rank, so a segment's sender and receiver agree on its size.
static void ring_seg(const dlp_comm_req *r, int chunk, int j, int64_t *lo, int64_t *cnt) {
    const ring_state *g = r->ring;
    const int64_t clo = r->count * chunk / g->n, len = r->count * (chunk + 1) / g->n - clo;
    *lo = clo + len * j / g->nseg;
    *cnt = clo + len * (j + 1) / g->nseg - *lo;
}

static int ring_chunk(const mpi_comm *c, const ring_state *g, int k, int send) {
    return ((c->base.rank - k - (send ? 0 : 1)) % g->n + g->n) % g->n;
}

// Posts segment j's receive of its current step: into tmp while reducing, in place for the all-gather once the send
// that read that place (step k+1-N) is done (MPI: a send buffer stays untouched until its send completes).
static int ring_post_recv(mpi_comm *c, dlp_comm_req *r, int j) {
    ring_state *g = r->ring;
    const int k = g->rstep[j], chunk = ring_chunk(c, g, k, 0);
    int64_t lo, cnt;
    ring_seg(r, chunk, j, &lo, &cnt);
    float *dst = r->buf + lo;
    if (k < g->n - 1) {
        dst = g->tmp + (int64_t)j * g->seg_elems;
    } else {
        int flag = 0, rc = MPI_Test(&g->sreq[(k + 1 - g->n) * g->nseg + j], &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || !flag) return rc;
    }
    const int prev = (c->base.rank + g->n - 1) % g->n;
    return MPI_Irecv(dst, (int)cnt, MPI_FLOAT, prev, g->tag0 + j, c->comm, &g->rreq[j]);
}

static int ring_send(mpi_comm *c, dlp_comm_req *r, int k, int j) {
    ring_state *g = r->ring;
    int64_t lo, cnt;
    ring_seg(r, ring_chunk(c, g, k, 1), j, &lo, &cnt);
    return MPI_Isend(r->buf + lo, (int)cnt, MPI_FLOAT, (c->base.rank + 1) % g->n, g->tag0 + j, c->comm,
                     &g->sreq[k * g->nseg + j]);
}

// Moves the ring on as far as what has arrived allows; *done once every segment went through every step and every
// send completed.
static int ring_progress(mpi_comm *c, dlp_comm_req *r, int *done) {
    ring_state *g = r->ring;
    int rc = MPI_SUCCESS;
    *done = 0;
    for (int j = 0; j < g->nseg && rc == MPI_SUCCESS; j++) {
        while (g->rstep[j] < g->steps && rc == MPI_SUCCESS) {
            if (g->rreq[j] == MPI_REQUEST_NULL && ((rc = ring_post_recv(c, r, j)) != MPI_SUCCESS ||
                                                    g->rreq[j] == MPI_REQUEST_NULL))
                break;  // the all-gather's place still being sent from
            int flag = 0;
            if ((rc = MPI_Test(&g->rreq[j], &flag, MPI_STATUS_IGNORE)) != MPI_SUCCESS || !flag) break;
            const int k = g->rstep[j];
            if (k < g->n - 1) {  // reduce-scatter: add the segment that came
                int64_t lo, cnt;
                ring_seg(r, ring_chunk(c, g, k, 0), j, &lo, &cnt);
                float *dst = r->buf + lo;
                const float *src = g->tmp + (int64_t)j * g->seg_elems;
                for (int64_t i = 0; i < cnt; i++) dst[i] += src[i];
            }
            if (++g->rstep[j] < g->steps) rc = ring_send(c, r, k + 1, j);  // what came (and was added) goes on
            else g->segs_done++;
        }
    }
    if (rc == MPI_SUCCESS && g->segs_done == g->nseg)
        rc = MPI_Testall(g->steps * g->nseg, g->sreq, done, MPI_STATUSES_IGNORE);
    return rc;
}

// buf holding at least n elements of elem bytes: itself, or a new buffer (the contents not kept) when its *cap is
// less (*cap then n); NULL when out of memory (buf freed, *cap 0).
static void *ring_grow(void *buf, int64_t *cap, int64_t n, size_t elem) {
    if (n <= *cap) return buf;
    free(buf);
    buf = malloc((size_t)n * elem);
    *cap = buf ? n : 0;
    return buf;
}

static dlp_status ring_start(mpi_comm *c, dlp_comm_req *r) {
    ring_state *g = c->nspare_rings ? c->spare_rings[--c->nspare_rings] : calloc(1, sizeof *g);
    DLP_TRY_ALLOC(g);
    r->ring = g;
    g->n = c->base.size;
    g->steps = 2 * (g->n - 1);
    const int64_t maxlen = (r->count + g->n - 1) / g->n;
    int64_t nseg = (maxlen + c->ring_seg_elems - 1) / c->ring_seg_elems;
    g->nseg = (int)(nseg < 1 ? 1 : nseg > RING_MAX_SEGS ? RING_MAX_SEGS : nseg);
    // seg_elems = ceil(maxlen / nseg) holds the largest segment of any chunk. For integers a >= 0 and m, d > 0,
    // (a + m) / d - a / d <= ceil(m / d) in integer division (the floors of two reals m/d apart differ by an integer
    // below m/d + 1). So chunk c, [count c / N, count (c+1) / N), has len <= ceil(count / N) = maxlen elements, and
    // its segment j, [lo + len j / nseg, lo + len (j+1) / nseg), at most ceil(len / nseg) <= ceil(maxlen / nseg)
    // elements: it fits its place in tmp, [j seg_elems, (j+1) seg_elems), with no padding.
    g->seg_elems = (maxlen + g->nseg - 1) / g->nseg;
    g->tag0 = (int)(c->seq++ % MAX_PENDING) * RING_MAX_SEGS;
    g->segs_done = g->posted = 0;
    g->tmp = ring_grow(g->tmp, &g->tmp_cap, g->seg_elems * g->nseg, sizeof *g->tmp);
    g->sreq = ring_grow(g->sreq, &g->sreq_cap, (int64_t)g->steps * g->nseg, sizeof *g->sreq);
    if (!g->tmp || !g->sreq) return DLP_ERR(DLP_ERR_NOMEM, "out of memory for the ring");
    for (int i = 0; i < g->steps * g->nseg; i++) g->sreq[i] = MPI_REQUEST_NULL;
    for (int j = 0; j < g->nseg; j++) {
        g->rstep[j] = 0;
        g->rreq[j] = MPI_REQUEST_NULL;
        int rc = ring_post_recv(c, r, j);
        if (rc == MPI_SUCCESS) g->posted = 1;  // a receive into tmp is posted: the caller must not free it unwaited
        if (rc == MPI_SUCCESS) rc = ring_send(c, r, 0, j);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Isend/MPI_Irecv (allreduce ring)");
    }
    return DLP_OK;
}

// One poll of a request: *done when it has completed.
static int req_test(mpi_comm *c, dlp_comm_req *r, int *done) {
    return r->ring ? ring_progress(c, r, done) : MPI_Testall(r->nreq, r->reqs, done, MPI_STATUSES_IGNORE);
}

static void mpi_free(dlp_comm *base) {
    mpi_comm *c = (mpi_comm *)base;
    for (int i = 0; i < c->npending; i++) {  // abandoned requests: complete them before the communicator goes
        if (c->pending[i]->ring) (void)wait_deadline(c, c->pending[i], 0, NULL, "allreduce");
        else MPI_Waitall(c->pending[i]->nreq, c->pending[i]->reqs, MPI_STATUSES_IGNORE);
        req_free(c->pending[i]);
    }
    for (int i = 0; i < c->nspare_rings; i++) ring_free(c->spare_rings[i]);
    MPI_Comm_free(&c->comm);
    MPI_Comm_free(&c->census);
    free(c->hosts);
    if (c->we_initialized) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) MPI_Finalize();
    }
    free(c);
}

// Lets the requests in flight progress (Open MPI advances them inside MPI calls).
static void poke(mpi_comm *c) {
    for (int i = 0; i < c->npending; i++) {
        int flag = 0;
        (void)req_test(c, c->pending[i], &flag);
    }
}

static dlp_status mpi_allreduce_start(dlp_comm *base, float *buf, int64_t count, void *stream, dlp_comm_req **req) {
    mpi_comm *c = (mpi_comm *)base;
    if (c->npending >= MAX_PENDING)
        return DLP_ERR(DLP_ERR_BUSY, "more than %d allreduces in flight (wait for some first)", MAX_PENDING);
    dlp_comm_req *r = calloc(1, sizeof *r);
    DLP_TRY_ALLOC(r);
    r->buf = buf;
    r->count = count;
    if (c->use_ring && base->size > 1 && count * 4 >= c->ring_min_bytes) {
        dlp_status st = ring_start(c, r);
        if (st) {  // an MPI call failed after others were posted: their buffers stay (the job ends on this error)
            if (!r->ring || !r->ring->posted) req_free(r);
            return st;
        }
        poke(c);
        c->pending[c->npending++] = r;
        *req = r;
        return DLP_OK;
    }
    const int64_t seg = c->segment_count;
    r->nreq = (int)((count + seg - 1) / seg);
    r->reqs = calloc((size_t)r->nreq, sizeof *r->reqs);
    if (!r->reqs) {
        free(r);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < r->nreq; i++) {
        int64_t off = (int64_t)i * seg, n = count - off < seg ? count - off : seg;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, buf + off, (int)n, MPI_FLOAT, MPI_SUM, c->comm, &r->reqs[i]);
        if (rc != MPI_SUCCESS) {
            r->nreq = i;
            MPI_Waitall(r->nreq, r->reqs, MPI_STATUSES_IGNORE);
            req_free(r);
            return mpi_fail(rc, "MPI_Iallreduce");
        }
    }
    poke(c);
    c->pending[c->npending++] = r;
    *req = r;
    return DLP_OK;
}

static dlp_status mpi_wait(dlp_comm *base, dlp_comm_req *r) {
    mpi_comm *c = (mpi_comm *)base;
    int at = -1;
    for (int i = 0; i < c->npending; i++)
        if (c->pending[i] == r) at = i;
    if (at < 0) return DLP_ERR(DLP_ERR_INVALID, "wait on an allreduce this communicator did not start");
    c->pending[at] = c->pending[--c->npending];
    dlp_status st = wait_deadline(c, r, 0, NULL, "allreduce");
    if (st) {
        req_free(r);
        return st;
    }
    const float inv = 1.0f / (float)base->size;
    for (int64_t i = 0; i < r->count; i++) r->buf[i] *= inv;
    if (r->ring && c->nspare_rings < MAX_PENDING) {  // every request of it completed: its buffers serve the next
        c->spare_rings[c->nspare_rings++] = r->ring;
        r->ring = NULL;
    }
    req_free(r);
    return DLP_OK;
}

static dlp_status mpi_broadcast(dlp_comm *base, void *buf, size_t bytes, int root) {
    mpi_comm *c = (mpi_comm *)base;
    for (size_t off = 0; off < bytes; off += INT_MAX) {
        size_t n = bytes - off < INT_MAX ? bytes - off : INT_MAX;
        MPI_Request rq;
        int rc = MPI_Ibcast((char *)buf + off, (int)n, MPI_BYTE, root, c->comm, &rq);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Ibcast");
        DLP_CHECK(wait_deadline(c, NULL, 1, &rq, "broadcast"));
    }
    return DLP_OK;
}

static dlp_status mpi_gather(dlp_comm *base, const void *send, size_t bytes, void *recv, int root) {
    mpi_comm *c = (mpi_comm *)base;
    if (bytes > INT_MAX) return DLP_ERR(DLP_ERR_INVALID, "gather of %zu bytes per rank", bytes);
    MPI_Request rq;
    int rc = MPI_Igather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, root, c->comm, &rq);
    return rc == MPI_SUCCESS ? wait_deadline(c, NULL, 1, &rq, "gather") : mpi_fail(rc, "MPI_Igather");
}

static dlp_status mpi_barrier(dlp_comm *base) {
    mpi_comm *c = (mpi_comm *)base;
    MPI_Request rq;
    int rc = MPI_Ibarrier(c->comm, &rq);
    return rc == MPI_SUCCESS ? wait_deadline(c, NULL, 1, &rq, "barrier") : mpi_fail(rc, "MPI_Ibarrier");
}

// The message the caller printed travels through mpirun's I/O forwarding; MPI_Abort at once can lose it (seen on
// the emulated hosts: the rank's last line never arrived), so it gets half a second first.
static void mpi_abort(dlp_comm *base, int code) {
    fflush(stdout);
    fflush(stderr);
    dlp_sleep_ns(500 * 1000 * 1000);
    MPI_Abort(MPI_COMM_WORLD, code);
}

const dlp_comm_ops dlp_comm_mpi = {
    .name = "mpi",
    .launched = dlp_launched_by_mpi,
    .open = mpi_open,
    .free = mpi_free,
    .allreduce_start = mpi_allreduce_start,
    .wait = mpi_wait,
    .broadcast = mpi_broadcast,
    .gather = mpi_gather,
    .barrier = mpi_barrier,
    .abort = mpi_abort,
};
