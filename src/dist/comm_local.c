// dist/comm_local: one process, no peers — every collective is a no-op. The communicator of every single-device run,
// so the training loop's allreduce phase always exists and scale-out only swaps the communicator.
#include <stdlib.h>
#include <string.h>

#include "dist/comm_impl.h"

static int local_launched(void) { return 1; }

static dlp_status local_open(dlp_comm **out) {
    dlp_comm *c = calloc(1, sizeof *c);
    DLP_TRY_ALLOC(c);
    c->size = 1;
    *out = c;
    return DLP_OK;
}

static void local_free(dlp_comm *c) { free(c); }

static dlp_status local_allreduce_start(dlp_comm *c, float *buf, int64_t count, void *stream, dlp_comm_req **req) {
    *req = NULL;  // the mean over one rank is the buffer itself
    return DLP_OK;
}

static dlp_status local_wait(dlp_comm *c, dlp_comm_req *req) { return DLP_OK; }
static dlp_status local_broadcast(dlp_comm *c, void *buf, size_t bytes, int root) { return DLP_OK; }
static dlp_status local_barrier(dlp_comm *c) { return DLP_OK; }
static void local_abort(dlp_comm *c, int code) {}
static dlp_status local_gather(dlp_comm *c, const void *send, size_t bytes, void *recv, int root) {
    memcpy(recv, send, bytes);
    return DLP_OK;
}

const dlp_comm_ops dlp_comm_local = {
    .name = "local",
    .launched = local_launched,
    .open = local_open,
    .free = local_free,
    .allreduce_start = local_allreduce_start,
    .wait = local_wait,
    .broadcast = local_broadcast,
    .gather = local_gather,
    .barrier = local_barrier,
    .abort = local_abort,
};
