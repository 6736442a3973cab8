// hw/steptime: how long one step takes on a device, from its profile. The sim backend waits exactly these
// times and `dlperf predict` computes with them, so the two agree by construction for device-bound runs.
// Defines: dlp_step_request, dlp_step_times, dlp_step_times_compute.
#ifndef DLP_HW_STEPTIME_H
#define DLP_HW_STEPTIME_H
#include "core/status.h"
#include "hw/profile.h"

typedef struct dlp_step_request {
    dlp_task task;
    dlp_prec prec;
    int threads;            // compute threads (cpu device rows); 0: any
    int batch;              // images per step on this device
    double work_ratio;      // model forward FLOPs / ResNet-50 at 224x224 (hw/work)
    double params_ratio;    // model parameters / ResNet-50's
    double input_bytes;     // bytes of one input image as copied to the device
    double h2d_bytes_per_s; // effective host-to-device rate; 0: the device profile's
    const char *model;      // the model and image size, to pick the profile row measured closest (NULL, 0: any)
    int size;
} dlp_step_request;

typedef struct dlp_step_times {
    double h2d_s;           // copy of the batch (0 when the device needs none)
    double fwd_s, bwd_s;    // infer: bwd_s = 0
    double update_s;        // optimizer step (train)
    double compute_s;       // fwd + bwd + update
    double step_s;          // compute + h2d, or max(compute, h2d) when the device overlaps copies
    double cores_busy;      // host cores kept busy while computing
    const dlp_rate *rate;   // the profile row used
} dlp_step_times;

// DLP_ERR_UNSUPPORTED naming the device and what it has when no row matches (task, prec).
dlp_status dlp_step_times_compute(const dlp_device_profile *d, const dlp_step_request *q, dlp_step_times *out);

#endif
