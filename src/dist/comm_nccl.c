// dist/comm_nccl: NCCL on device buffers, one rank per GPU. Bootstrapped through the mpi communicator when the
// process was started by mpirun/srun (rank 0's ncclUniqueId broadcast to all; the GPU is the node-local rank);
// otherwise one rank on GPU 0 (a 1-GPU communicator: the real NCCL calls, for the GPU check). The allreduce runs on
// the communicator's own stream, ordered after the producer's stream (an event recorded there, waited for here, as
// llm.c's multi-GPU path does), with ncclAvg; the wait makes the producer's stream wait for it (no host stall), or
// waits on the host when no stream was given. Host-side collectives (broadcast, gather, barrier) go through the
// bootstrap communicator. Built only with NCCL (a file named *_nccl.c); it has not run on a GPU machine yet.
#include <cuda_runtime.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"  // nccl.h declares f() for f(void)
#include <nccl.h>
#pragma GCC diagnostic pop
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->base.rank == 0 && (st = ncclGetUniqueId(&id) == ncclSuccess ? DLP_OK : DLP_ERR(DLP_ERR_IO, "ncclGetUniqueId failed")))
        goto fail;
    if (c->boot && (st = dlp_comm_broadcast(c->boot, &id, sizeof id, 0))) goto fail;
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
    if (c->comm) ncclCommDestroy(c->comm);
    if (c->ready) cudaEventDestroy(c->ready);
    if (c->stream) cudaStreamDestroy(c->stream);
    dlp_comm_free(c->boot);
    free(c);
}

static dlp_status nccl_allreduce_start(dlp_comm *base, float *buf, int64_t count, void *stream, dlp_comm_req **req) {
    nccl_comm *c = (nccl_comm *)base;
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
        free(r);
        return DLP_ERR(DLP_ERR_IO, "nccl communicator: event: %s", cudaGetErrorString(cudaGetLastError()));
    }
    *req = r;
    return DLP_OK;
}

static dlp_status nccl_wait(dlp_comm *base, dlp_comm_req *r) {
    cudaError_t e = r->consumer ? cudaStreamWaitEvent(r->consumer, r->done, 0) : cudaEventSynchronize(r->done);
    cudaEventDestroy(r->done);
    free(r);
    CU_OK(e, "waiting for the allreduce");
    return DLP_OK;
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
    if (c->comm) ncclCommAbort(c->comm);
    c->comm = NULL;
    dlp_comm_abort(c->boot, code);
}

static dlp_status nccl_mem_alloc(dlp_comm *base, size_t bytes, void **out) {
    nccl_comm *c = (nccl_comm *)base;
    CU_OK(cudaSetDevice(c->device), "cudaSetDevice");
    CU_OK(cudaMalloc(out, bytes ? bytes : 4), "cudaMalloc");
    return DLP_OK;
}

static void nccl_mem_free(dlp_comm *base, void *p) { cudaFree(p); }

static dlp_status nccl_mem_put(dlp_comm *base, void *dst, const void *host, size_t bytes) {
    CU_OK(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
    return DLP_OK;
}

static dlp_status nccl_mem_get(dlp_comm *base, void *host, const void *src, size_t bytes) {
    CU_OK(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy from the device");
    return DLP_OK;
}

static dlp_status nccl_sync(dlp_comm *base) {
    nccl_comm *c = (nccl_comm *)base;
    CU_OK(cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
    return DLP_OK;
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
