// dist/comm_nccl: NCCL on device buffers, one rank per GPU. Bootstrapped through the mpi communicator when the
// process was started by mpirun/srun (rank 0's ncclUniqueId broadcast to all; the GPU is the node-local rank);
// otherwise one rank on GPU 0 (a 1-GPU communicator: the real NCCL calls, for the GPU check). The allreduce runs on
// the communicator's own stream, ordered after the producer's stream (an event recorded there, waited for here, as
// llm.c's multi-GPU path does), with ncclAvg; the wait makes the producer's stream wait for it (no host stall), or
// waits on the host when no stream was given. Host-side collectives (broadcast, gather, barrier) go through the
// bootstrap communicator. Copies to and from the device (mem_put/mem_get) go through the communicator's stream, so
// they are ordered with its collectives. Every host wait polls ncclCommGetAsyncError: a peer that failed, or a
// collective that has not finished within DLPERF_NCCL_TIMEOUT_S (300 s), aborts the communicator (which frees the
// kernels waiting for that peer) instead of hanging. Built only with NCCL (a file named *_nccl.c); it has not run
// on a GPU machine yet.
#include <cuda_runtime.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"  // nccl.h declares f() for f(void)
#include <nccl.h>
#pragma GCC diagnostic pop
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "dist/comm_impl.h"
#include "dist/launch.h"

struct dlp_comm_req {
    cudaEvent_t done;
    cudaStream_t consumer;  // NULL: wait on the host
};

typedef struct nccl_comm {
    dlp_comm base;
    dlp_comm *boot;  // mpi (several ranks) or NULL (one rank)
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t ready;  // recorded on the producer's stream
    int device;
} nccl_comm;

#define CU_OK(call, what)                                                                                      \
    do {                                                                                                       \
        cudaError_t e_ = (call);                                                                               \
        if (e_ != cudaSuccess) return DLP_ERR(DLP_ERR_IO, "nccl communicator: %s: %s", what, cudaGetErrorString(e_)); \
    } while (0)
#define NC_OK(call, what)                                                                                      \
    do {                                                                                                       \
        ncclResult_t r_ = (call);                                                                              \
        if (r_ != ncclSuccess) return DLP_ERR(DLP_ERR_IO, "nccl communicator: %s: %s", what, ncclGetErrorString(r_)); \
    } while (0)

static int nccl_launched(void) {
    int n = 0;
    return dlp_launched_by_mpi() && cudaGetDeviceCount(&n) == cudaSuccess && n > 0;  // auto: GPUs and a launcher
}

static void nccl_free(dlp_comm *base);

static double timeout_s(void) {
    const char *s = getenv("DLPERF_NCCL_TIMEOUT_S");
    double v = s && *s ? atof(s) : 300.0;
    return v > 0 ? v : 300.0;
}

// Ends the communicator after an asynchronous error or a timeout: ncclCommAbort stops its kernels, so the streams
// waiting on them drain; the communicator is unusable afterwards.
static void abort_comm(nccl_comm *c, const char *why) {
    if (!c->comm) return;
    DLP_WARN("nccl communicator: rank %d: %s; aborting the communicator", c->base.rank, why);
    ncclCommAbort(c->comm);
    c->comm = NULL;
}

// Waits on the host for an event (or, ev NULL, the communicator's stream), polling for an asynchronous NCCL error
// (a dead peer) and for the timeout; either aborts the communicator and fails.
static dlp_status poll_wait(nccl_comm *c, cudaEvent_t ev, const char *what) {
    const int64_t t0 = dlp_now_ns(), limit = (int64_t)(timeout_s() * 1e9);
    for (int spins = 0;; spins++) {
        cudaError_t e = ev ? cudaEventQuery(ev) : cudaStreamQuery(c->stream);
        if (e == cudaSuccess) return DLP_OK;
        if (e != cudaErrorNotReady) return DLP_ERR(DLP_ERR_IO, "nccl communicator: %s: %s", what, cudaGetErrorString(e));
        if (!c->comm) return DLP_ERR(DLP_ERR_IO, "nccl communicator: %s: the communicator was aborted", what);
        ncclResult_t ar = ncclSuccess;
        ncclResult_t qr = ncclCommGetAsyncError(c->comm, &ar);
        if (qr != ncclSuccess || (ar != ncclSuccess && ar != ncclInProgress)) {
            char why[160];
            snprintf(why, sizeof why, "%s: %s", what, ncclGetErrorString(qr != ncclSuccess ? qr : ar));
            abort_comm(c, why);
            return DLP_ERR(DLP_ERR_IO, "nccl communicator: %s (a peer failed or left)", why);
        }
        if (dlp_now_ns() - t0 > limit) {
            char why[160];
            snprintf(why, sizeof why, "%s: not done after %.0f s (DLPERF_NCCL_TIMEOUT_S)", what, timeout_s());
            abort_comm(c, why);
            return DLP_ERR(DLP_ERR_TIMEOUT, "nccl communicator: %s", why);
        }
        if (spins > 1000) dlp_sleep_ns(50 * 1000);  // a short collective is caught by the spins; then 50 us naps
    }
}

static dlp_status nccl_open(dlp_comm **out) {
    nccl_comm *c = calloc(1, sizeof *c);
    DLP_TRY_ALLOC(c);
    c->base.size = 1;
    dlp_status st = DLP_OK;
    if (dlp_launched_by_mpi()) {
        st = dlp_comm_open("mpi", &c->boot);
        if (st) {
            free(c);
            return st;
        }
        c->base.rank = dlp_comm_rank(c->boot);
        c->base.size = dlp_comm_size(c->boot);
        c->base.local_rank = dlp_comm_local_rank(c->boot);
    }
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev < 1) {
        st = DLP_ERR(DLP_ERR_UNSUPPORTED, "--dist nccl: no CUDA device (%s)", ce != cudaSuccess ? cudaGetErrorString(ce) : "none");
        goto fail;
    }
    if (c->base.local_rank >= ndev) {
        st = DLP_ERR(DLP_ERR_INVALID, "--dist nccl: node-local rank %d but %d GPU(s) here: one process per GPU",
                     c->base.local_rank, ndev);
        goto fail;
    }
    c->device = c->base.local_rank;
    // Rank 0's id goes to every rank with whether it got one: a rank 0 that failed must not leave the others
    // waiting in the broadcast.
    struct {
        int32_t ok;
        ncclUniqueId id;
    } boot_id;
    memset(&boot_id, 0, sizeof boot_id);
    ncclResult_t ir = ncclSuccess;
    if (c->base.rank == 0) boot_id.ok = (ir = ncclGetUniqueId(&boot_id.id)) == ncclSuccess;
    if (c->boot && (st = dlp_comm_broadcast(c->boot, &boot_id, sizeof boot_id, 0))) goto fail;
    if (!boot_id.ok) {
        st = DLP_ERR(DLP_ERR_IO, "nccl communicator: ncclGetUniqueId on rank 0 failed%s%s",
                     c->base.rank == 0 ? ": " : "", c->base.rank == 0 ? ncclGetErrorString(ir) : "");
        goto fail;
    }
    const ncclUniqueId id = boot_id.id;
    if (cudaSetDevice(c->device) != cudaSuccess || cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming) != cudaSuccess) {
        st = DLP_ERR(DLP_ERR_IO, "nccl communicator: device %d: %s", c->device, cudaGetErrorString(cudaGetLastError()));
        goto fail;
    }
    ncclResult_t nr = ncclCommInitRank(&c->comm, c->base.size, id, c->base.rank);
    if (nr != ncclSuccess) {
        st = DLP_ERR(DLP_ERR_IO, "nccl communicator: ncclCommInitRank (rank %d of %d): %s", c->base.rank, c->base.size,
                     ncclGetErrorString(nr));
        goto fail;
    }
    *out = &c->base;
    return DLP_OK;
fail:
    nccl_free(&c->base);
    return st;
}

static void nccl_free(dlp_comm *base) {
    nccl_comm *c = (nccl_comm *)base;
    if (c->device >= 0 && (c->comm || c->stream)) (void)cudaSetDevice(c->device);
    if (c->comm) {  // flush what was issued (a blocking communicator: it returns when done), then free
        if (c->stream && poll_wait(c, NULL, "the collectives pending at close") != DLP_OK) dlp_err_clear();
        if (c->comm) {
            ncclResult_t fr = ncclCommFinalize(c->comm);
            if (fr != ncclSuccess) {
                DLP_WARN("nccl communicator: ncclCommFinalize: %s; aborting instead", ncclGetErrorString(fr));
                ncclCommAbort(c->comm);
            } else {
                ncclCommDestroy(c->comm);
            }
        }
    }
    if (c->ready) cudaEventDestroy(c->ready);
    if (c->stream) cudaStreamDestroy(c->stream);
    dlp_comm_free(c->boot);
    free(c);
}

static dlp_status nccl_allreduce_start(dlp_comm *base, float *buf, int64_t count, void *stream, dlp_comm_req **req) {
    nccl_comm *c = (nccl_comm *)base;
    if (!c->comm) return DLP_ERR(DLP_ERR_IO, "nccl communicator: allreduce after the communicator was aborted");
    CU_OK(cudaSetDevice(c->device), "cudaSetDevice");  // on_bucket may come from any thread
    if (stream) {  // after the work that produced the buffer
        CU_OK(cudaEventRecord(c->ready, (cudaStream_t)stream), "cudaEventRecord");
        CU_OK(cudaStreamWaitEvent(c->stream, c->ready, 0), "cudaStreamWaitEvent");
    }
    dlp_comm_req *r = calloc(1, sizeof *r);
    DLP_TRY_ALLOC(r);
    r->consumer = (cudaStream_t)stream;
    ncclResult_t nr = ncclAllReduce(buf, buf, (size_t)count, ncclFloat, ncclAvg, c->comm, c->stream);
    if (nr != ncclSuccess) {
        free(r);
        return DLP_ERR(DLP_ERR_IO, "ncclAllReduce of %lld floats: %s", (long long)count, ncclGetErrorString(nr));
    }
    if (cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventRecord(r->done, c->stream) != cudaSuccess) {
        if (r->done) cudaEventDestroy(r->done);
        free(r);
        return DLP_ERR(DLP_ERR_IO, "nccl communicator: event: %s", cudaGetErrorString(cudaGetLastError()));
    }
    *req = r;
    return DLP_OK;
}

// With a consumer stream the wait is queued there (no host stall); a dead peer then shows at the next host wait
// (nccl_sync, mem_get, close), which polls. Without one the host polls here.
static dlp_status nccl_wait(dlp_comm *base, dlp_comm_req *r) {
    nccl_comm *c = (nccl_comm *)base;
    dlp_status st = DLP_OK;
    if (r->consumer) {
        cudaError_t e = cudaStreamWaitEvent(r->consumer, r->done, 0);
        if (e != cudaSuccess) st = DLP_ERR(DLP_ERR_IO, "nccl communicator: waiting for the allreduce: %s", cudaGetErrorString(e));
        ncclResult_t ar = ncclSuccess;
        if (st == DLP_OK && c->comm && ncclCommGetAsyncError(c->comm, &ar) == ncclSuccess && ar != ncclSuccess &&
            ar != ncclInProgress) {
            abort_comm(c, ncclGetErrorString(ar));
            st = DLP_ERR(DLP_ERR_IO, "nccl communicator: the allreduce failed: %s (a peer failed or left)",
                         ncclGetErrorString(ar));
        }
    } else {
        st = poll_wait(c, r->done, "waiting for the allreduce");
    }
    cudaEventDestroy(r->done);
    free(r);
    return st;
}

static dlp_status nccl_broadcast(dlp_comm *base, void *buf, size_t bytes, int root) {
    nccl_comm *c = (nccl_comm *)base;
    return c->boot ? dlp_comm_broadcast(c->boot, buf, bytes, root) : DLP_OK;
}

static dlp_status nccl_gather(dlp_comm *base, const void *send, size_t bytes, void *recv, int root) {
    nccl_comm *c = (nccl_comm *)base;
    if (c->boot) return dlp_comm_gather(c->boot, send, bytes, recv, root);
    memcpy(recv, send, bytes);
    return DLP_OK;
}

static dlp_status nccl_barrier(dlp_comm *base) {
    nccl_comm *c = (nccl_comm *)base;
    return c->boot ? dlp_comm_barrier(c->boot) : DLP_OK;
}

static void nccl_abort(dlp_comm *base, int code) {
    nccl_comm *c = (nccl_comm *)base;
    abort_comm(c, "dlp_comm_abort");
    dlp_comm_abort(c->boot, code);
}

static dlp_status nccl_mem_alloc(dlp_comm *base, size_t bytes, void **out) {
    nccl_comm *c = (nccl_comm *)base;
    CU_OK(cudaSetDevice(c->device), "cudaSetDevice");
    CU_OK(cudaMalloc(out, bytes ? bytes : 4), "cudaMalloc");
    return DLP_OK;
}

static void nccl_mem_free(dlp_comm *base, void *p) { cudaFree(p); }

// Copies on the communicator's stream: after the collectives queued on it (the legacy default stream would not
// order with a non-blocking stream), waited for by polling (a pageable copy may return before its DMA is done).
static dlp_status nccl_mem_put(dlp_comm *base, void *dst, const void *host, size_t bytes) {
    nccl_comm *c = (nccl_comm *)base;
    CU_OK(cudaSetDevice(c->device), "cudaSetDevice");
    CU_OK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, c->stream), "cudaMemcpyAsync to the device");
    return poll_wait(c, NULL, "the copy to the device");
}

static dlp_status nccl_mem_get(dlp_comm *base, void *host, const void *src, size_t bytes) {
    nccl_comm *c = (nccl_comm *)base;
    CU_OK(cudaSetDevice(c->device), "cudaSetDevice");
    CU_OK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, c->stream), "cudaMemcpyAsync from the device");
    return poll_wait(c, NULL, "the copy from the device");
}

static dlp_status nccl_sync(dlp_comm *base) {
    nccl_comm *c = (nccl_comm *)base;
    CU_OK(cudaSetDevice(c->device), "cudaSetDevice");
    return poll_wait(c, NULL, "the queued collectives");
}

const dlp_comm_ops dlp_comm_nccl = {
    .name = "nccl",
    .launched = nccl_launched,
    .open = nccl_open,
    .free = nccl_free,
    .allreduce_start = nccl_allreduce_start,
    .wait = nccl_wait,
    .broadcast = nccl_broadcast,
    .gather = nccl_gather,
    .barrier = nccl_barrier,
    .abort = nccl_abort,
    .mem_alloc = nccl_mem_alloc,
    .mem_free = nccl_mem_free,
    .mem_put = nccl_mem_put,
    .mem_get = nccl_mem_get,
    .sync = nccl_sync,
};
