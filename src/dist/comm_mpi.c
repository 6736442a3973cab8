// dist/comm_mpi: Open MPI on host buffers — one rank per process as mpirun/srun started them. The allreduce is
// MPI_Iallreduce (sum, in place) divided by the rank count at the wait; each collective call also pokes the
// requests still in flight (MPI_Testall) so they progress while backward goes on (Open MPI moves non-blocking
// collectives only inside MPI calls unless an asynchronous progress thread is configured). Errors come back as
// statuses (MPI_ERRORS_RETURN) with MPI's string; a peer that dies is reported by mpirun, which ends the job.
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/comm_impl.h"
#include "dist/launch.h"

#define MAX_PENDING 256  // allreduces in flight at once (gradient buckets of one step)

struct dlp_comm_req {
    float *buf;
    int64_t count;
    int nreq;
    MPI_Request *reqs;  // one per INT_MAX-sized chunk
    int done;
};

typedef struct mpi_comm {
    dlp_comm base;
    MPI_Comm comm;
    int we_initialized;
    dlp_comm_req *pending[MAX_PENDING];
    int npending;
} mpi_comm;

static dlp_status mpi_fail(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return DLP_ERR(DLP_ERR_IO, "MPI %s failed: %s", what, msg);
}


static dlp_status mpi_open(dlp_comm **out) {
    mpi_comm *c = calloc(1, sizeof *c);
    DLP_TRY_ALLOC(c);
    int inited = 0, provided = 0, rc;
    MPI_Initialized(&inited);
    if (!inited) {
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
    *out = &c->base;
    return DLP_OK;
}

static void req_free(dlp_comm_req *r) {
    if (!r) return;
    free(r->reqs);
    free(r);
}

static void mpi_free(dlp_comm *base) {
    mpi_comm *c = (mpi_comm *)base;
    for (int i = 0; i < c->npending; i++) {  // abandoned requests: complete them before the communicator goes
        MPI_Waitall(c->pending[i]->nreq, c->pending[i]->reqs, MPI_STATUSES_IGNORE);
        req_free(c->pending[i]);
    }
    MPI_Comm_free(&c->comm);
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
        MPI_Testall(c->pending[i]->nreq, c->pending[i]->reqs, &flag, MPI_STATUSES_IGNORE);
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
    r->nreq = (int)((count + INT_MAX - 1) / INT_MAX);
    r->reqs = calloc((size_t)r->nreq, sizeof *r->reqs);
    if (!r->reqs) {
        free(r);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < r->nreq; i++) {
        int64_t off = (int64_t)i * INT_MAX, n = count - off < INT_MAX ? count - off : INT_MAX;
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
    int rc = MPI_Waitall(r->nreq, r->reqs, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
        req_free(r);
        return mpi_fail(rc, "MPI_Iallreduce (wait)");
    }
    const float inv = 1.0f / (float)base->size;
    for (int64_t i = 0; i < r->count; i++) r->buf[i] *= inv;
    req_free(r);
    return DLP_OK;
}

static dlp_status mpi_broadcast(dlp_comm *base, void *buf, size_t bytes, int root) {
    mpi_comm *c = (mpi_comm *)base;
    for (size_t off = 0; off < bytes; off += INT_MAX) {
        size_t n = bytes - off < INT_MAX ? bytes - off : INT_MAX;
        int rc = MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root, c->comm);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Bcast");
    }
    return DLP_OK;
}

static dlp_status mpi_gather(dlp_comm *base, const void *send, size_t bytes, void *recv, int root) {
    mpi_comm *c = (mpi_comm *)base;
    if (bytes > INT_MAX) return DLP_ERR(DLP_ERR_INVALID, "gather of %zu bytes per rank", bytes);
    int rc = MPI_Gather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, root, c->comm);
    return rc == MPI_SUCCESS ? DLP_OK : mpi_fail(rc, "MPI_Gather");
}

static dlp_status mpi_barrier(dlp_comm *base) {
    mpi_comm *c = (mpi_comm *)base;
    int rc = MPI_Barrier(c->comm);
    return rc == MPI_SUCCESS ? DLP_OK : mpi_fail(rc, "MPI_Barrier");
}

static void mpi_abort(dlp_comm *base, int code) { MPI_Abort(MPI_COMM_WORLD, code); }

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
