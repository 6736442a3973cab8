// backend/cuda/cuda_util: internal to the cuda backend — check macros that record file:line and the library's error
// string into the dlp_status chain for every CUDA runtime, cuDNN and cuBLAS call, the cuBLAS entry points loaded
// at run time (dlopen), and the dtype mappings.
// Defines: DLP_CU, DLP_CU_GOTO, DLP_CUDNN, DLP_CUDNN_GOTO, DLP_CUBLAS, dlp_cuda_fail, dlp_cudnn_fail,
//          dlp_cublas_fail, dlp_cublas_api, dlp_cublas_load, dlp_cuda_no_device, dlp_cudnn_dtype, dlp_cuda_dtype.
#ifndef DLP_BACKEND_CUDA_UTIL_H
#define DLP_BACKEND_CUDA_UTIL_H
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stddef.h>

#include "core/status.h"
#include "core/tensor.h"

dlp_status dlp_cuda_fail(cudaError_t e, const char *file, int line, const char *expr);
dlp_status dlp_cudnn_fail(cudnnStatus_t s, const char *file, int line, const char *expr);
dlp_status dlp_cublas_fail(cublasStatus_t s, const char *file, int line, const char *expr);

#define DLP_CU(expr)                                                                               \
    do {                                                                                           \
        cudaError_t dlp_e_ = (expr);                                                               \
        if (dlp_e_ != cudaSuccess) return dlp_cuda_fail(dlp_e_, __FILE__, __LINE__, #expr);        \
    } while (0)
#define DLP_CU_GOTO(st, expr, label)                                                               \
    do {                                                                                           \
        cudaError_t dlp_e_ = (expr);                                                               \
        if (dlp_e_ != cudaSuccess) {                                                               \
            (st) = dlp_cuda_fail(dlp_e_, __FILE__, __LINE__, #expr);                               \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)
#define DLP_CUDNN(expr)                                                                            \
    do {                                                                                           \
        cudnnStatus_t dlp_s_ = (expr);                                                             \
        if (dlp_s_ != CUDNN_STATUS_SUCCESS) return dlp_cudnn_fail(dlp_s_, __FILE__, __LINE__, #expr); \
    } while (0)
#define DLP_CUDNN_GOTO(st, expr, label)                                                            \
    do {                                                                                           \
        cudnnStatus_t dlp_s_ = (expr);                                                             \
        if (dlp_s_ != CUDNN_STATUS_SUCCESS) {                                                      \
            (st) = dlp_cudnn_fail(dlp_s_, __FILE__, __LINE__, #expr);                              \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)
#define DLP_CUBLAS(expr)                                                                           \
    do {                                                                                           \
        cublasStatus_t dlp_b_ = (expr);                                                            \
        if (dlp_b_ != CUBLAS_STATUS_SUCCESS) return dlp_cublas_fail(dlp_b_, __FILE__, __LINE__, #expr); \
    } while (0)

// "no CUDA device found (cudaGetDeviceCount: <reason>); hint: use --device cpu or sim:h200" as DLP_ERR_UNSUPPORTED,
// or DLP_OK with *count set.
dlp_status dlp_cuda_no_device(int *count);

// cuBLAS, loaded on first use so that processes which never make a cuda plan do not map libcublasLt.
typedef struct dlp_cublas_api {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*set_workspace)(cublasHandle_t, void *, size_t);
    cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
    cublasStatus_t (*get_version)(cublasHandle_t, int *);
    const char *(*status_string)(cublasStatus_t);
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    char path[256];
} dlp_cublas_api;
// Loads libcublas.so.13 (the build's CUDA_HOME/lib64, then the usual search path); error names what was tried.
dlp_status dlp_cublas_load(const dlp_cublas_api **api);
// The loaded API, or NULL if dlp_cublas_load has not succeeded.
const dlp_cublas_api *dlp_cublas_loaded(void);

static inline cudnnDataType_t dlp_cudnn_dtype(dlp_dtype t) {
    return t == DLP_DTYPE_F16 ? CUDNN_DATA_HALF : t == DLP_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}
static inline cudaDataType dlp_cuda_dtype(dlp_dtype t) {
    return t == DLP_DTYPE_F16 ? CUDA_R_16F : t == DLP_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

#endif
