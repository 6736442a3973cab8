// dist/comm: the communicator a data-parallel run reduces its gradients through — one process per device, each a
// rank. The public calls over a private interface (dist/comm_impl.h), as backend/ does: `local` (one process; its
// collectives are no-ops), and, in builds that have them, `mpi` (Open MPI on host buffers) and `nccl` (device
// buffers). One communicator per run, chosen from how the process was started (`--dist auto`).
// Defines: dlp_comm, dlp_comm_req, dlp_comm_open, dlp_comm_free, dlp_comm_name, dlp_comm_rank, dlp_comm_size,
//          dlp_comm_local_rank, dlp_comm_allreduce_start, dlp_comm_wait, dlp_comm_allreduce, dlp_comm_broadcast,
//          dlp_comm_gather, dlp_comm_barrier, dlp_comm_abort, dlp_comm_mem_*, dlp_comm_sync, dlp_comm_kinds.
#ifndef DLP_DIST_COMM_H
#define DLP_DIST_COMM_H
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct dlp_comm dlp_comm;          // opaque
typedef struct dlp_comm_req dlp_comm_req;  // an allreduce in flight (opaque)

// kind: "auto" (what the launcher set up: mpirun/srun environment -> mpi, else local), "local", "mpi", "nccl".
dlp_status dlp_comm_open(const char *kind, dlp_comm **out);
void dlp_comm_free(dlp_comm *c);  // NULL: nothing
const char *dlp_comm_name(const dlp_comm *c);
int dlp_comm_rank(const dlp_comm *c);
int dlp_comm_size(const dlp_comm *c);
int dlp_comm_local_rank(const dlp_comm *c);  // rank among the processes on this node (picks the device)
// The communicators this build has, comma-separated ("local,mpi").
const char *dlp_comm_kinds(void);

// In-place mean over the ranks of count fp32 values (the gradients: each rank's sum divided by the rank count).
// Asynchronous: the buffer must stay untouched until dlp_comm_wait returns; *req is NULL when nothing was started
// (one rank). stream: the device stream the buffer's producer ran on (nccl orders after it); NULL for host buffers.
dlp_status dlp_comm_allreduce_start(dlp_comm *c, float *buf, int64_t count, void *stream, dlp_comm_req **req);
dlp_status dlp_comm_wait(dlp_comm *c, dlp_comm_req *req);  // NULL req: nothing
dlp_status dlp_comm_allreduce(dlp_comm *c, float *buf, int64_t count, void *stream);  // start + wait
// Buffers the collectives work on (host memory for local and mpi, device memory for nccl), filled and read from the
// host, and a wait for everything queued (a device's collectives run asynchronously).
dlp_status dlp_comm_mem_alloc(dlp_comm *c, size_t bytes, void **out);
void dlp_comm_mem_free(dlp_comm *c, void *p);
dlp_status dlp_comm_mem_put(dlp_comm *c, void *dst, const void *host, size_t bytes);
dlp_status dlp_comm_mem_get(dlp_comm *c, void *host, const void *src, size_t bytes);
dlp_status dlp_comm_sync(dlp_comm *c);
// bytes from root's buf to every rank's buf.
dlp_status dlp_comm_broadcast(dlp_comm *c, void *buf, size_t bytes, int root);
// bytes from every rank's send into root's recv (size x bytes, in rank order); recv is not touched elsewhere.
dlp_status dlp_comm_gather(dlp_comm *c, const void *send, size_t bytes, void *recv, int root);
dlp_status dlp_comm_barrier(dlp_comm *c);
// A rank that cannot go on: with several ranks, ends them all (exit status code) so none waits forever in a
// collective; with one, returns and the caller fails as usual.
void dlp_comm_abort(dlp_comm *c, int code);

#endif
