// hw/derive: profiles derived from the catalog — a GPU's device profile from its published ResNet-50 throughput
// (a GPU profile measured by `dlperf probe --device cuda` replaces it when one is found), a whole system's
// machine profile, and emulated devices from a sim spec ("a100,scale=0.1", "custom,img_per_s=500").
// Defines: dlp_sim_spec, dlp_sim_spec_parse, dlp_sim_device, dlp_derive_gpu, dlp_derive_gpu_measured,
//          dlp_derive_gpu_stack, dlp_derive_system, dlp_derive_system_stack, DLP_GPU_T0_INFER_S.
#ifndef DLP_HW_DERIVE_H
#define DLP_HW_DERIVE_H
#include "core/status.h"
#include "hw/catalog.h"
#include "hw/profile.h"

#define DLP_GPU_T0_INFER_S 0.002   // ... per inference step
#define DLP_GPU_UPDATE_BYTES_PER_PARAM 22.0  // optimizer traffic per parameter (fp32 w, g, v + fp16 copy)
#define DLP_H2D_EFFICIENCY 0.8     // pinned copies reach 80% of the link's per-direction rate (est-h2d)

// A GPU's device profile from the catalog alone: training rows from its datasheet and a software stack's fitted
// efficiencies (hw/gpumodel; stack NULL: DLP_GM_DEFAULT_STACK), inference rows from the primary published
// inference figure or derived from the training row (rows say which, and how, in `basis`).
dlp_status dlp_derive_gpu_stack(const dlp_catalog *c, const dlp_gpu_spec *g, const char *stack, dlp_device_profile *out);
dlp_status dlp_derive_gpu(const dlp_catalog *c, const dlp_gpu_spec *g, dlp_device_profile *out);
// A measured GPU profile for g, if one exists: `file` if given, else $DLPERF_PROFILES/<id>.json, else
// <catalog>/profiles/<id>.json. *found = 0 (and DLP_OK) when there is none; errors only for a bad file.
dlp_status dlp_derive_gpu_measured(const dlp_catalog *c, const dlp_gpu_spec *g, const char *file,
                                   dlp_device_profile *out, int *found);
// A catalog system as a machine profile: host and storage from its parts, the input pipeline `pipeline`
// (NULL: "dlperf") scaled by the CPU's per-core speed, its GPU (measured if a profile is found, else derived).
dlp_status dlp_derive_system(const dlp_catalog *c, const dlp_system_spec *s, const char *pipeline, dlp_profile *out);
// The same with the GPU modelled under `stack` (NULL: the system's default, dlp_gm_stack_default).
dlp_status dlp_derive_system_stack(const dlp_catalog *c, const dlp_system_spec *s, const char *pipeline, const char *stack,
                                   dlp_profile *out);

// The argument of a sim device: "<gpu>[,key=value...]" with keys
//   scale=X        compute runs X times as fast as the profile says (0.1: ten times slower)
//   img_per_s=N    sim:custom only: training images/s at the reference work (ResNet-50, 224x224)
//   t0_ms=X        fixed time per training step (inference: x fwd_fraction)
//   pcie_gbps=X    host-to-device copy rate in GB/s (custom: none unless given)
//   overlap=0|1    copies overlap the previous step's compute (default: the device's, 1 for GPUs)
//   profile=FILE   a measured GPU profile to use instead of the catalog's
//   stack=NAME     the software stack the GPU is modelled with (default DLP_GM_DEFAULT_STACK)
typedef struct dlp_sim_spec {
    char gpu[48];          // catalog GPU name or alias, or "custom"
    double scale;          // 1
    double img_per_s;      // 0: not given
    double t0_s;           // < 0: not given
    double pcie_bytes_per_s;  // 0: not given
    int overlap;           // -1: not given
    char profile[256];     // "": none
    char stack[32];        // "": the default stack
} dlp_sim_spec;

dlp_status dlp_sim_spec_parse(const char *arg, dlp_sim_spec *out);
// The emulated device: resolves the GPU (c may be NULL for custom), then applies the options.
dlp_status dlp_sim_device(const dlp_sim_spec *s, const dlp_catalog *c, dlp_device_profile *out);

#endif
