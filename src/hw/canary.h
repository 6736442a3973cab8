// hw/canary: the cores' speed at this moment (a fixed multiply-add loop on every allowed CPU at once).
// Defines: dlp_host_canary_gflops.
#ifndef DLP_HW_CANARY_H
#define DLP_HW_CANARY_H

// Runs the loop for about `seconds` on one thread per allowed CPU; returns GFLOP/s summed over them (0 on failure).
// Compare two readings of the same machine only: the figure is not a peak.
double dlp_host_canary_gflops(double seconds);

#endif
