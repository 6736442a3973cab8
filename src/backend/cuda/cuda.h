// backend/cuda/cuda.h: what the cuda backend offers beyond backend.h — the pinned host allocator for batch buffers (in
// every build; pageable memory where there is no CUDA or no device), device facts and library versions, the plan's
// compute stream for a communicator, and the probe measurements behind a GPU profile.
// Defines: dlp_cuda_host_allocator, dlp_cuda_host_is_pinned, dlp_cuda_host_stats, dlp_backend_cuda,
//          dlp_cuda_device_info, dlp_cuda_device_query, dlp_cuda_device_to_json, dlp_cuda_versions_to_json,
//          dlp_cuda_plan_stream, dlp_cuda_plan_describe, dlp_cuda_h2d_point, dlp_cuda_probe_h2d,
//          dlp_cuda_step_point, dlp_cuda_events_*, dlp_cuda_device_profile, dlp_cuda_catalog_gpu,
//          dlp_cuda_machine_profile, dlp_cuda_profile_json.
#ifndef DLP_BACKEND_CUDA_H
#define DLP_BACKEND_CUDA_H
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/alloc.h"
#include "core/status.h"

// Batch buffers for the loader: page-locked (cudaHostAlloc) so host-to-device copies run at full PCIe speed and
// asynchronously; falls back to ordinary aligned memory when the build has no CUDA, there is no device, or the
// pinned allocation fails (logged once). Memory comes zeroed and DLP_ALIGN-aligned. Thread-safe.
const dlp_allocator *dlp_cuda_host_allocator(void);
// 1 if p (from the allocator above) is page-locked.
int dlp_cuda_host_is_pinned(const void *p);
// Allocations served so far: pinned and pageable (fallback) counts.
void dlp_cuda_host_stats(int64_t *pinned, int64_t *pageable);

#ifdef DLP_HAVE_CUDA
#include <jansson.h>

#include "hw/catalog.h"
#include "hw/profile.h"

extern const dlp_backend dlp_backend_cuda;

typedef struct dlp_cuda_device_info {
    int index;
    char name[256];
    int cc_major, cc_minor;
    int sms;
    int64_t mem_bytes;
    int64_t l2_bytes;
    double clock_mhz, mem_clock_mhz;
    int mem_bus_bits;
    int pci_bus, pci_device, pci_domain;
    int driver_version, runtime_version;  // 13000 = 13.0
    int cudnn_version;                     // 91900 = 9.19.0
} dlp_cuda_device_info;

// Facts about device `index`; DLP_ERR_UNSUPPORTED with "no CUDA device found (...)" when there is none.
dlp_status dlp_cuda_device_query(int index, dlp_cuda_device_info *info);
json_t *dlp_cuda_device_to_json(const dlp_cuda_device_info *d);
// {"cuda_runtime": "13.0", "cuda_driver": "13.0" or "none", "cudnn": "9.19.0", "cublas": "13.0.0" or "not loaded"}
json_t *dlp_cuda_versions_to_json(void);

// The stream a cuda plan runs its step on: a communicator enqueues its allreduce there (in on_bucket) so it is
// ordered after the bucket's gradients and before the update. NULL if p is not a cuda plan.
void *dlp_cuda_plan_stream(dlp_plan *p);
// What the plan chose: ops and fusions, convolution algorithms, workspace and memory, graph states (JSON).
json_t *dlp_cuda_plan_describe(dlp_plan *p);

// ---- probes (a GPU profile's measurements) ----------------------------------------------------------------------
typedef struct dlp_cuda_h2d_point {
    int64_t bytes;
    int pinned;           // 1 page-locked source, 0 pageable
    double h2d_gb_per_s;  // host to device, 1e9 bytes/s (median of the repeats)
    double d2h_gb_per_s;
    double h2d_latency_us;  // median time of one copy of `bytes`
} dlp_cuda_h2d_point;

// Times copies of each size in `bytes` (n sizes) from pinned and from pageable memory (2n points, pinned first).
dlp_status dlp_cuda_probe_h2d(int device, const int64_t *bytes, int n, int repeats, dlp_cuda_h2d_point *out);

typedef struct dlp_cuda_step_point {
    int batch;
    int train;              // 1: forward+loss+backward+update; 0: inference forward
    dlp_dtype precision;
    double step_ms;         // median over the timed steps
    double step_ms_p10, step_ms_p90;
    double images_per_s;    // batch / median step time
    double plan_ms;         // plan creation (algorithm search, memory)
    int64_t device_bytes;   // device memory the plan holds
    int graphs_captured;
    double copy_ms, stall_ms;  // h2d: mean input copy per step, and mean time compute waited for it
    double fwd_ms, bwd_ms, update_ms;  // train: medians of the forward, loss + backward, and update phases
} dlp_cuda_step_point;

// Events recorded on a plan's stream, for device-side timing (run/step's timer in perf/probe_steps_cuda.c):
// n events, event i recorded after the work queued so far, the time between two recorded events once both are done.
typedef struct dlp_cuda_events dlp_cuda_events;
dlp_status dlp_cuda_events_create(int n, dlp_cuda_events **out);
dlp_status dlp_cuda_events_record(dlp_cuda_events *e, int i, dlp_plan *p);
dlp_status dlp_cuda_events_elapsed_ms(dlp_cuda_events *e, int i, int j, double *ms);
void dlp_cuda_events_free(dlp_cuda_events *e);

// The measured GPU as a device entry of a machine profile (hw/profile.h, dlperf.profile/1), which `sim:` and
// `predict` read: per (task, precision) probed, t0_s and per_image_s from the least-squares line of step time
// against batch (per image of ResNet-50 224x224 work: per_image / work_ratio, work_ratio = the net's forward
// FLOPs over ResNet-50's), training rows without the update, whose median goes to update_s (scaled to ResNet-50's
// parameters by param_ratio = net parameters / ResNet-50's); fwd_fraction from the timed phases; copy rates from
// the largest pinned and pageable copies, overlapped (the copy stream). name: the catalog GPU id ("h200-sxm").
dlp_status dlp_cuda_device_profile(const char *name, const dlp_cuda_device_info *dev, const dlp_cuda_h2d_point *h2d,
                                   int nh2d, const dlp_cuda_step_point *steps, int nsteps, double work_ratio,
                                   double param_ratio, dlp_device_profile *out);

// The catalog GPU a device is: the id or alias found in its lowercased name, the longest match ("NVIDIA H200" ->
// h200-sxm through its alias "h200"; "NVIDIA A100-SXM4-80GB" -> a100-80gb). NULL if none.
const dlp_gpu_spec *dlp_cuda_catalog_gpu(const dlp_catalog *c, const char *device_name);
// A machine profile (dlperf.profile/1) whose GPU is the measured device `dev` (renamed to g's id, with g's
// price and power), for `sim:<gpu>,profile=FILE`, $DLPERF_PROFILES or catalog/profiles/<gpu>.json. The probe
// measures only the GPU: host, storage and pipeline come from the first catalog system with that GPU, and
// `notes` says so. Validated.
dlp_status dlp_cuda_machine_profile(const dlp_catalog *c, const dlp_gpu_spec *g, const dlp_cuda_device_info *d,
                                    const dlp_device_profile *dev, const char *model, dlp_profile *out);

// A GPU profile: {"schema": "dlperf.gpu_profile/1", "device": {...}, "versions": {...}, "h2d": [...],
// "steps": [...], "fits": {"train_<prec>": {"fixed_ms", "ms_per_image"}, ...}} (the fits: least squares of step
// time against batch).
json_t *dlp_cuda_profile_json(const dlp_cuda_device_info *dev, const dlp_cuda_h2d_point *h2d, int nh2d,
                              const dlp_cuda_step_point *steps, int nsteps, const char *model);
#endif

#endif
