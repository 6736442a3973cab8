// dist/comm_impl.h: the interface a communicator implements (private to dist/). A new communicator is one file
// dist/comm_<name>.c defining `const dlp_comm_ops dlp_comm_<name>` plus one line in comm.c's k_comms (guarded by
// its build switch; a file named *_mpi.c or *_nccl.c is compiled only when that library is found).
#ifndef DLP_DIST_COMM_IMPL_H
#define DLP_DIST_COMM_IMPL_H
#include "dist/comm.h"

typedef struct dlp_comm_ops {
    const char *name;
    // 1 when the process was started so that this communicator applies (auto picks the first such entry).
    int (*launched)(void);
    dlp_status (*open)(dlp_comm **out);
    void (*free)(dlp_comm *c);
    dlp_status (*allreduce_start)(dlp_comm *c, float *buf, int64_t count, void *stream, dlp_comm_req **req);
    dlp_status (*wait)(dlp_comm *c, dlp_comm_req *req);
    dlp_status (*broadcast)(dlp_comm *c, void *buf, size_t bytes, int root);
    dlp_status (*gather)(dlp_comm *c, const void *send, size_t bytes, void *recv, int root);
    dlp_status (*barrier)(dlp_comm *c);
    void (*abort)(dlp_comm *c, int code);  // ends every rank's process (a rank that failed alone would hang the rest)
    // Optional (NULL: host memory — malloc, memcpy; nothing queued): the buffers the collectives reduce.
    dlp_status (*mem_alloc)(dlp_comm *c, size_t bytes, void **out);
    void (*mem_free)(dlp_comm *c, void *p);
    dlp_status (*mem_put)(dlp_comm *c, void *dst, const void *host, size_t bytes);
    dlp_status (*mem_get)(dlp_comm *c, void *host, const void *src, size_t bytes);
    dlp_status (*sync)(dlp_comm *c);  // waits for the collectives queued so far
} dlp_comm_ops;

// Every communicator's state starts with this.
struct dlp_comm {
    const dlp_comm_ops *ops;
    int rank, size, local_rank;
};

#endif
