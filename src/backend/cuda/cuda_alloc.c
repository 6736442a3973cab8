// backend/cuda/cuda_alloc: the pinned host allocator for batch buffers (cudaHostAlloc), falling back to ordinary
// aligned memory without CUDA or a device. Each block carries a small header saying how it was allocated, so
// free() needs no registry and pinned and pageable blocks can be mixed.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "core/log.h"

#ifdef DLP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define HDR_BYTES 64  // keeps DLP_ALIGN (64) alignment: cudaHostAlloc and posix_memalign return aligned blocks
#define HDR_MAGIC 0x646c7068686f7374ull  // "dlphhost"

typedef struct hdr {
    uint64_t magic;
    uint32_t pinned;
    uint32_t pad;
    uint64_t bytes;
} hdr;

static int64_t g_pinned, g_pageable;

#ifdef DLP_HAVE_CUDA
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_have_device;

static void probe_device(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    g_have_device = e == cudaSuccess && n > 0;
    if (!g_have_device) {
        (void)cudaGetLastError();
        DLP_DEBUG("pinned host memory unavailable (cudaGetDeviceCount: %s); batch buffers are pageable",
                  e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    }
}
#endif

static void *host_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    size_t total = bytes + HDR_BYTES;
    if (total < bytes) return NULL;
    void *raw = NULL;
    int pinned = 0;
#ifdef DLP_HAVE_CUDA
    pthread_once(&g_once, probe_device);
    if (g_have_device) {
        cudaError_t e = cudaHostAlloc(&raw, total, cudaHostAllocPortable);
        if (e == cudaSuccess) {
            pinned = 1;
        } else {
            (void)cudaGetLastError();
            raw = NULL;
            dlp_log_warn_limited("cuda-pinned", 1, "cudaHostAlloc of %zu bytes failed (%s); using pageable memory",
                                 total, cudaGetErrorString(e));
        }
    }
#endif
    if (!raw && posix_memalign(&raw, DLP_ALIGN, total) != 0) return NULL;
    memset(raw, 0, total);
    hdr *h = raw;
    h->magic = HDR_MAGIC;
    h->pinned = (uint32_t)pinned;
    h->bytes = bytes;
    __atomic_add_fetch(pinned ? &g_pinned : &g_pageable, 1, __ATOMIC_RELAXED);
    return (char *)raw + HDR_BYTES;
}

static hdr *header_of(const void *p) {
    if (!p) return NULL;
    hdr *h = (hdr *)((char *)(uintptr_t)p - HDR_BYTES);
    return h->magic == HDR_MAGIC ? h : NULL;
}

static void host_free(void *ctx, void *p) {
    (void)ctx;
    if (!p) return;
    hdr *h = header_of(p);
    if (!h) {
        DLP_ERROR("dlp_cuda_host_allocator: free of a block it did not allocate (%p); leaked", p);
        return;
    }
    h->magic = 0;
#ifdef DLP_HAVE_CUDA
    if (h->pinned) {
        cudaError_t e = cudaFreeHost(h);
        if (e != cudaSuccess) DLP_WARN("cudaFreeHost: %s", cudaGetErrorString(e));
        return;
    }
#endif
    free(h);
}

static const dlp_allocator k_host = {"cuda-pinned", host_alloc, host_free, NULL};

const dlp_allocator *dlp_cuda_host_allocator(void) { return &k_host; }

int dlp_cuda_host_is_pinned(const void *p) {
    const hdr *h = header_of(p);
    return h && h->pinned;
}

void dlp_cuda_host_stats(int64_t *pinned, int64_t *pageable) {
    if (pinned) *pinned = __atomic_load_n(&g_pinned, __ATOMIC_RELAXED);
    if (pageable) *pageable = __atomic_load_n(&g_pageable, __ATOMIC_RELAXED);
}
