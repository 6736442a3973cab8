// core/alloc: aligned allocation and the default allocator.
#include "core/alloc.h"

#include <stdlib.h>
#include <string.h>

void *dlp_alloc_aligned(size_t bytes) {
    void *p = NULL;
    if (bytes == 0) bytes = DLP_ALIGN;
    bytes = (bytes + DLP_ALIGN - 1) / DLP_ALIGN * DLP_ALIGN;
    if (posix_memalign(&p, DLP_ALIGN, bytes) != 0) return NULL;
    memset(p, 0, bytes);
    return p;
}

void dlp_free_aligned(void *p) { free(p); }

static void *default_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    return dlp_alloc_aligned(bytes);
}
static void default_free(void *ctx, void *p) {
    (void)ctx;
    dlp_free_aligned(p);
}

static const dlp_allocator k_default = {"host", default_alloc, default_free, NULL};
const dlp_allocator *dlp_allocator_default(void) { return &k_default; }
