// dist/comm: the table of communicators compiled in, the choice by --dist, and the public calls over the interface.
#include <stdlib.h>
#include <string.h>

#include "dist/comm_impl.h"

// Launcher-aware communicators first: `auto` takes the first whose launched() is true; `local` (always launched)
// last. A new communicator is one file dist/comm_<name>.c defining `const dlp_comm_ops dlp_comm_<name>`
// (dist/comm_impl.h) and one X(<name>) here, under its build switch; the X declares it and puts it in k_comms.
#ifdef DLP_HAVE_MPI
#define IF_MPI(x) x
#else
#define IF_MPI(x)
#endif
#ifdef DLP_HAVE_NCCL
#define IF_NCCL(x) x
#else
#define IF_NCCL(x)
#endif
#define DLP_COMM_LIST(X) IF_NCCL(X(nccl)) IF_MPI(X(mpi)) X(local)

#define DLP_COMM_DECLARE(name) extern const dlp_comm_ops dlp_comm_##name;
#define DLP_COMM_ENTRY(name) &dlp_comm_##name,
DLP_COMM_LIST(DLP_COMM_DECLARE)
static const dlp_comm_ops *const k_comms[] = {DLP_COMM_LIST(DLP_COMM_ENTRY) NULL};

const char *dlp_comm_kinds(void) {
    static char list[128];
    if (!list[0]) {
        size_t used = 0;
        for (const dlp_comm_ops *const *c = k_comms; *c && used + 1 < sizeof list; c++) {
            size_t n = strlen((*c)->name);
            if (used + n + 2 >= sizeof list) break;
            if (used) list[used++] = ',';
            memcpy(list + used, (*c)->name, n + 1);
            used += n;
        }
    }
    return list;
}

dlp_status dlp_comm_open(const char *kind, dlp_comm **out) {
    *out = NULL;
    if (!kind || !*kind) kind = "auto";
    const dlp_comm_ops *ops = NULL;
    for (const dlp_comm_ops *const *c = k_comms; *c && !ops; c++)
        if (strcmp(kind, "auto") == 0 ? (*c)->launched() : strcmp(kind, (*c)->name) == 0) ops = *c;
    if (!ops) {
        static const char *const known[] = {"local", "mpi", "nccl"};
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strcmp(kind, known[i]) == 0)
                return DLP_ERR(DLP_ERR_UNSUPPORTED, "--dist %s: this build has no %s communicator (it has: %s)", kind,
                               kind, dlp_comm_kinds());
        return DLP_ERR(DLP_ERR_INVALID, "--dist %s: unknown communicator (use auto or one of: %s)", kind, dlp_comm_kinds());
    }
    DLP_CHECK(ops->open(out));
    (*out)->ops = ops;
    return DLP_OK;
}

void dlp_comm_free(dlp_comm *c) {
    if (c) c->ops->free(c);
}

const char *dlp_comm_name(const dlp_comm *c) { return c->ops->name; }
int dlp_comm_rank(const dlp_comm *c) { return c->rank; }
int dlp_comm_size(const dlp_comm *c) { return c->size; }
int dlp_comm_local_rank(const dlp_comm *c) { return c->local_rank; }

dlp_status dlp_comm_allreduce_start(dlp_comm *c, float *buf, int64_t count, void *stream, dlp_comm_req **req) {
    *req = NULL;
    if (count < 0) return DLP_ERR(DLP_ERR_INVALID, "allreduce of %lld values", (long long)count);
    if (count == 0) return DLP_OK;
    return c->ops->allreduce_start(c, buf, count, stream, req);  // one rank too: a 1-GPU nccl run does the real call
}

dlp_status dlp_comm_mem_alloc(dlp_comm *c, size_t bytes, void **out) {
    if (c->ops->mem_alloc) return c->ops->mem_alloc(c, bytes, out);
    *out = malloc(bytes ? bytes : 1);
    return *out ? DLP_OK : DLP_ERR(DLP_ERR_NOMEM, "out of memory for a %zu-byte buffer", bytes);
}

void dlp_comm_mem_free(dlp_comm *c, void *p) {
    if (!p) return;
    if (c->ops->mem_free) c->ops->mem_free(c, p);
    else free(p);
}

dlp_status dlp_comm_mem_put(dlp_comm *c, void *dst, const void *host, size_t bytes) {
    if (c->ops->mem_put) return c->ops->mem_put(c, dst, host, bytes);
    memmove(dst, host, bytes);
    return DLP_OK;
}

dlp_status dlp_comm_mem_get(dlp_comm *c, void *host, const void *src, size_t bytes) {
    if (c->ops->mem_get) return c->ops->mem_get(c, host, src, bytes);
    memmove(host, src, bytes);
    return DLP_OK;
}

dlp_status dlp_comm_sync(dlp_comm *c) { return c->ops->sync ? c->ops->sync(c) : DLP_OK; }

dlp_status dlp_comm_wait(dlp_comm *c, dlp_comm_req *req) { return req ? c->ops->wait(c, req) : DLP_OK; }

dlp_status dlp_comm_allreduce(dlp_comm *c, float *buf, int64_t count, void *stream) {
    dlp_comm_req *req;
    DLP_CHECK(dlp_comm_allreduce_start(c, buf, count, stream, &req));
    return dlp_comm_wait(c, req);
}

dlp_status dlp_comm_broadcast(dlp_comm *c, void *buf, size_t bytes, int root) {
    if (root < 0 || root >= c->size) return DLP_ERR(DLP_ERR_INVALID, "broadcast from rank %d of %d", root, c->size);
    return c->size == 1 ? DLP_OK : c->ops->broadcast(c, buf, bytes, root);
}

dlp_status dlp_comm_gather(dlp_comm *c, const void *send, size_t bytes, void *recv, int root) {
    if (root < 0 || root >= c->size) return DLP_ERR(DLP_ERR_INVALID, "gather to rank %d of %d", root, c->size);
    return c->ops->gather(c, send, bytes, recv, root);
}

void dlp_comm_abort(dlp_comm *c, int code) {
    if (c && c->size > 1) c->ops->abort(c, code);
}

dlp_status dlp_comm_barrier(dlp_comm *c) { return c->size == 1 ? DLP_OK : c->ops->barrier(c); }
