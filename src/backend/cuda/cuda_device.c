// backend/cuda/cuda_device: error reporting for CUDA/cuDNN/cuBLAS calls, the device query, library versions, and the
// run-time loading of cuBLAS.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_util.h"

#define DLP_STR2(x) #x
#define DLP_STR(x) DLP_STR2(x)

static dlp_status cuda_status(cudaError_t e) {
    switch (e) {
    case cudaErrorMemoryAllocation: return DLP_ERR_NOMEM;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorNotSupported: return DLP_ERR_UNSUPPORTED;
    default: return DLP_ERR_INTERNAL;
    }
}

dlp_status dlp_cuda_fail(cudaError_t e, const char *file, int line, const char *expr) {
    (void)cudaGetLastError();  // clear a non-sticky error so later calls are not blamed for it
    return dlp_err_set(cuda_status(e), file, line, "%s failed: %s (%s)", expr, cudaGetErrorString(e),
                       cudaGetErrorName(e));
}

dlp_status dlp_cudnn_fail(cudnnStatus_t s, const char *file, int line, const char *expr) {
    char detail[512] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    dlp_status st = s == CUDNN_STATUS_NOT_SUPPORTED ? DLP_ERR_UNSUPPORTED
                    : s == CUDNN_STATUS_ALLOC_FAILED ? DLP_ERR_NOMEM
                    : s == CUDNN_STATUS_BAD_PARAM    ? DLP_ERR_INVALID
                                                     : DLP_ERR_INTERNAL;
    return dlp_err_set(st, file, line, "%s failed: %s%s%s", expr, cudnnGetErrorString(s), detail[0] ? ": " : "",
                       detail);
}

dlp_status dlp_cublas_fail(cublasStatus_t s, const char *file, int line, const char *expr) {
    const dlp_cublas_api *b = dlp_cublas_loaded();
    return dlp_err_set(s == CUBLAS_STATUS_ALLOC_FAILED ? DLP_ERR_NOMEM : DLP_ERR_INTERNAL, file, line,
                       "%s failed: %s (cublasStatus %d)", expr, b ? b->status_string(s) : "?", (int)s);
}

dlp_status dlp_cuda_no_device(int *count) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (count) *count = e == cudaSuccess ? n : 0;
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return DLP_ERR(DLP_ERR_UNSUPPORTED,
                       "no CUDA device found (cudaGetDeviceCount: %s); hint: use --device cpu or sim:h200",
                       cudaGetErrorString(e));
    }
    if (n == 0)
        return DLP_ERR(DLP_ERR_UNSUPPORTED,
                       "no CUDA device found (cudaGetDeviceCount: 0 devices); hint: use --device cpu or sim:h200");
    return DLP_OK;
}

dlp_status dlp_cuda_device_query(int index, dlp_cuda_device_info *d) {
    memset(d, 0, sizeof *d);
    int n = 0;
    DLP_CHECK(dlp_cuda_no_device(&n));
    if (index < 0 || index >= n)
        return DLP_ERR(DLP_ERR_NOTFOUND, "CUDA device %d does not exist (this machine has %d)", index, n);
    struct cudaDeviceProp p;
    DLP_CU(cudaGetDeviceProperties(&p, index));
    d->index = index;
    snprintf(d->name, sizeof d->name, "%s", p.name);
    d->cc_major = p.major;
    d->cc_minor = p.minor;
    d->sms = p.multiProcessorCount;
    d->mem_bytes = (int64_t)p.totalGlobalMem;
    d->l2_bytes = p.l2CacheSize;
    d->mem_bus_bits = p.memoryBusWidth;
    d->pci_bus = p.pciBusID;
    d->pci_device = p.pciDeviceID;
    d->pci_domain = p.pciDomainID;
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, index) == cudaSuccess) d->clock_mhz = khz / 1000.0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, index) == cudaSuccess) d->mem_clock_mhz = khz / 1000.0;
    (void)cudaGetLastError();
    cudaDriverGetVersion(&d->driver_version);
    cudaRuntimeGetVersion(&d->runtime_version);
    d->cudnn_version = (int)cudnnGetVersion();
    return DLP_OK;
}

json_t *dlp_cuda_device_to_json(const dlp_cuda_device_info *d) {
    json_t *o = json_object();
    char buf[64];
    json_object_set_new(o, "index", json_integer(d->index));
    json_object_set_new(o, "name", json_string(d->name));
    snprintf(buf, sizeof buf, "%d.%d", d->cc_major, d->cc_minor);
    json_object_set_new(o, "compute_capability", json_string(buf));
    json_object_set_new(o, "sms", json_integer(d->sms));
    json_object_set_new(o, "memory_bytes", json_integer(d->mem_bytes));
    json_object_set_new(o, "l2_bytes", json_integer(d->l2_bytes));
    json_object_set_new(o, "clock_mhz", json_real(d->clock_mhz));
    json_object_set_new(o, "memory_clock_mhz", json_real(d->mem_clock_mhz));
    json_object_set_new(o, "memory_bus_bits", json_integer(d->mem_bus_bits));
    snprintf(buf, sizeof buf, "%04x:%02x:%02x", d->pci_domain, d->pci_bus, d->pci_device);
    json_object_set_new(o, "pci", json_string(buf));
    return o;
}

static void version_str(char *buf, size_t len, int v) {  // 13000 -> "13.0"
    if (v <= 0) snprintf(buf, len, "none");
    else snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

json_t *dlp_cuda_versions_to_json(void) {
    json_t *o = json_object();
    char buf[64];
    int v = 0;
    cudaRuntimeGetVersion(&v);
    version_str(buf, sizeof buf, v);
    json_object_set_new(o, "cuda_runtime", json_string(buf));
    v = 0;
    if (cudaDriverGetVersion(&v) != cudaSuccess) v = 0;
    (void)cudaGetLastError();
    version_str(buf, sizeof buf, v);
    json_object_set_new(o, "cuda_driver", json_string(buf));
    size_t cv = cudnnGetVersion();  // 91900
    snprintf(buf, sizeof buf, "%zu.%zu.%zu", cv / 10000, (cv % 10000) / 100, cv % 100);
    json_object_set_new(o, "cudnn", json_string(buf));
    snprintf(buf, sizeof buf, "%d.%d.%d", CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL);
    json_object_set_new(o, "cudnn_headers", json_string(buf));
    const dlp_cublas_api *b = dlp_cublas_loaded();
    json_object_set_new(o, "cublas", json_string(b ? b->path : "not loaded"));
    return o;
}

// ---- cuBLAS at run time --------------------------------------------------------------------------------------
static pthread_once_t g_blas_once = PTHREAD_ONCE_INIT;
static dlp_cublas_api g_blas;
static int g_blas_ok;
static char g_blas_err[1024];

#ifndef DLP_CUDA_LIBDIR
#define DLP_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif
#define BLAS_SONAME "libcublas.so." DLP_STR(CUBLAS_VER_MAJOR)

static void blas_load(void) {
    const char *tries[] = {BLAS_SONAME, DLP_CUDA_LIBDIR "/" BLAS_SONAME, "libcublas.so"};
    void *lib = NULL;
    size_t used = 0;
    for (size_t i = 0; i < sizeof tries / sizeof tries[0] && !lib; i++) {
        lib = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            snprintf(g_blas.path, sizeof g_blas.path, "%s", tries[i]);
        } else {
            const char *e = dlerror();
            int w = snprintf(g_blas_err + used, sizeof g_blas_err - used, "%s%s", used ? "; " : "", e ? e : tries[i]);
            if (w > 0 && (size_t)w < sizeof g_blas_err - used) used += (size_t)w;
        }
    }
    if (!lib) return;
    struct {
        void **dst;
        const char *name;
    } syms[] = {
        {(void **)&g_blas.create, "cublasCreate_v2"},
        {(void **)&g_blas.destroy, "cublasDestroy_v2"},
        {(void **)&g_blas.set_stream, "cublasSetStream_v2"},
        {(void **)&g_blas.set_workspace, "cublasSetWorkspace_v2"},
        {(void **)&g_blas.set_math_mode, "cublasSetMathMode"},
        {(void **)&g_blas.get_version, "cublasGetVersion_v2"},
        {(void **)&g_blas.status_string, "cublasGetStatusString"},
        {(void **)&g_blas.gemm_ex, "cublasGemmEx"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].dst = dlsym(lib, syms[i].name);
        if (!*syms[i].dst) {
            snprintf(g_blas_err, sizeof g_blas_err, "%s has no symbol %s", g_blas.path, syms[i].name);
            dlclose(lib);
            return;
        }
    }
    g_blas_ok = 1;
}

dlp_status dlp_cublas_load(const dlp_cublas_api **api) {
    pthread_once(&g_blas_once, blas_load);
    if (!g_blas_ok) {
        if (api) *api = NULL;
        return DLP_ERR(DLP_ERR_UNSUPPORTED,
                       "cannot load cuBLAS, which the cuda backend needs for FC layers (%s); hint: put the directory "
                       "of " BLAS_SONAME " on LD_LIBRARY_PATH",
                       g_blas_err);
    }
    if (api) *api = &g_blas;
    return DLP_OK;
}

const dlp_cublas_api *dlp_cublas_loaded(void) { return g_blas_ok ? &g_blas : NULL; }
