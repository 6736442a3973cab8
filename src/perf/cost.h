// perf/cost: what an image costs — an owned machine's price amortized over a stated lifetime and utilization plus
// its power at a stated electricity price, or a cloud machine's hourly rent — per hour, per million images, per
// epoch and per training run.
// Defines: dlp_cost_params, dlp_cost_params_init, dlp_cost, dlp_cost_compute, dlp_cost_to_json.
#ifndef DLP_PERF_COST_H
#define DLP_PERF_COST_H
#include <jansson.h>

#include "core/status.h"
#include "hw/profile.h"

typedef struct dlp_cost_params {
    double lifetime_years;  // 3: amortization period of a purchase
    double utilization;     // 1: share of the lifetime the machine does this work
    double usd_per_kwh;     // 0.15
    double pue;             // 1: data-center overhead on power (1.0 = none counted)
    int alt_rate;           // cloud: use usd_per_hour_alt (e.g. capacity blocks) instead of on-demand
} dlp_cost_params;

void dlp_cost_params_init(dlp_cost_params *cp);

typedef struct dlp_cost {
    int known;                  // 0: the profile has neither a price nor a rent
    double usd_per_hour;        // all nodes
    double capital_usd_per_hour, energy_usd_per_hour;
    double power_kw;            // all nodes (0: unknown)
    double usd_per_million_images;
    double usd_per_epoch, usd_total;
    double kwh_per_epoch;
    char basis[400];
} dlp_cost;

// img_per_s for all nodes; epoch_s and total_s as predicted.
dlp_status dlp_cost_compute(const dlp_cost_profile *c, const dlp_cost_params *cp, int nodes, double img_per_s,
                            double epoch_s, double total_s, dlp_cost *out);
json_t *dlp_cost_to_json(const dlp_cost *c);

#endif
