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

void dlp_free_all(void *const *ptrs, size_t n) {
    for (size_t i = 0; i < n; i++) free(ptrs[i]);
}

void dlp_free_strings(char **v, int n) {
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

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
