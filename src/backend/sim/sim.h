// backend/sim/sim: an emulated accelerator. Each op takes the time the device would take according to its profile
// (hw/steptime, the same decomposition `dlperf predict` uses) by sleeping to absolute deadlines — no CPU is
// used and nothing is computed: outputs and gradients are zeros, the loss is that of zero logits (ln classes).
// Device string: sim:<gpu>[,scale=X][,img_per_s=N][,t0_ms=X][,pcie_gbps=X][,overlap=0|1][,profile=FILE].
// Defines: dlp_backend_sim (the ops), dlp_sim_plan_times, dlp_sim_plan_device.
#ifndef DLP_BACKEND_SIM_H
#define DLP_BACKEND_SIM_H
#include "backend/backend.h"
#include "hw/profile.h"
#include "hw/steptime.h"

extern const dlp_backend dlp_backend_sim;

// The step times a sim plan waits for a full batch (for tests and for comparing with predict).
dlp_status dlp_sim_plan_times(const dlp_plan *p, dlp_step_times *out);
// The device profile the plan emulates.
const dlp_device_profile *dlp_sim_plan_device(const dlp_plan *p);

#endif
