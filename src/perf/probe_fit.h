// perf/probe_fit: how the probe turns measurements into profile fields — the pipeline's per-sample cost fits, a
// backend's step-time line, the loader's scaling efficiencies, the contention shares — apart from the measuring,
// so each can be checked on synthetic measurements with known coefficients.
// Defines: dlp_pipeline_sample, dlp_probe_fit_pipeline, dlp_probe_fit_step, dlp_probe_scaling,
//          dlp_probe_contention_shares.
#ifndef DLP_PERF_PROBE_FIT_H
#define DLP_PERF_PROBE_FIT_H
#include "core/status.h"
#include "hw/profile.h"
#include "perf/lsq.h"

// One prepared image: its decode and augment CPU seconds and the work it did.
typedef struct dlp_pipeline_sample {
    double dec_s, aug_s;
    double dec_px;     // pixels the IDCT produced (the window at the chosen DCT scale)
    double ent_bytes;  // compressed bytes entropy-decoded (up to the window's last row; all for progressive files)
    double rsz_px;     // pixels of the crop at that scale (what the resize reads)
    double out_px;     // output pixels
} dlp_pipeline_sample;

// Least squares (non-negative) over the samples:
//   decode  = decode_per_image + decode_per_pixel x dec_px + decode_per_byte x ent_bytes
//   augment = augment_per_image + augment_per_in_pixel x rsz_px + augment_per_out_pixel x out_px
// into the six coefficients of pp; fd, fa (optional) get the fits with their residuals.
dlp_status dlp_probe_fit_pipeline(const dlp_pipeline_sample *s, int n, dlp_pipeline_profile *pp, dlp_lsq_fit *fd,
                                  dlp_lsq_fit *fa);

// A step-time line over batch sizes, t = t0 + b x t_img (non-negative; when noise leaves no positive slope, the
// largest batch alone with t0 = 0). per_image_s = t_img / work_ratio (per image of reference work).
dlp_status dlp_probe_fit_step(const int *batch, const double *t_s, int n, double work_ratio, double *t0_s,
                              double *per_image_s, dlp_lsq_fit *f);

// Scaling from the loader's rates at worker counts workers[0..n) (workers[0] = 1): efficiency points up to the
// cores, and what each thread beyond the cores adds (a fraction of a core, 0..1). With cost_s > 0 (the model's CPU
// seconds per image for the images measured) the efficiency at k threads is rate x cost_s / k, so the model gives
// back the measured rates, the one-thread point included (the loader's wall time beyond its CPU time); with
// cost_s = 0 it is rate / (k x rate at 1).
void dlp_probe_scaling(const int *workers, const double *img_per_s, int n, int cores, double cost_s,
                       dlp_pipeline_profile *pp);

// The shares of a contention point from the rates alone and together (clamped to (0.01, 1.2]).
void dlp_probe_contention_shares(double compute_alone, double compute_shared, double loader_alone, double loader_shared,
                                 int threads, int workers, dlp_contention_point *pt);

#endif
