// perf/cost: dollars and kWh per image, epoch and run.
#include "perf/cost.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void dlp_cost_params_init(dlp_cost_params *cp) {
    *cp = (dlp_cost_params){.lifetime_years = 3, .utilization = 1, .usd_per_kwh = 0.15, .pue = 1};
}

dlp_status dlp_cost_compute(const dlp_cost_profile *c, const dlp_cost_params *cp, int nodes, double img_per_s,
                            double epoch_s, double total_s, dlp_cost *out) {
    memset(out, 0, sizeof *out);
    if (!(cp->lifetime_years > 0) || !(cp->utilization > 0 && cp->utilization <= 1) || !(cp->usd_per_kwh >= 0) ||
        !(cp->pue >= 1))
        return DLP_ERR(DLP_ERR_INVALID, "cost: lifetime %g years, utilization %g, %g $/kWh, PUE %g: need lifetime > 0, "
                       "0 < utilization <= 1, price >= 0, PUE >= 1", cp->lifetime_years, cp->utilization,
                       cp->usd_per_kwh, cp->pue);
    if (nodes < 1 || !(img_per_s > 0)) return DLP_ERR(DLP_ERR_INVALID, "cost: %d nodes at %g img/s", nodes, img_per_s);
    out->power_kw = c->power_w * nodes / 1000.0;
    if (c->usd_per_hour > 0) {
        double rate = cp->alt_rate && c->usd_per_hour_alt > 0 ? c->usd_per_hour_alt : c->usd_per_hour;
        out->usd_per_hour = rate * nodes;
        out->capital_usd_per_hour = out->usd_per_hour;
        snprintf(out->basis, sizeof out->basis, "rent: $%.2f/h per node (%s)%s", rate,
                 cp->alt_rate && c->usd_per_hour_alt > 0 ? "alternative rate" : "on-demand",
                 nodes > 1 ? " x nodes" : "");
        out->known = 1;
    } else if (c->price_usd > 0) {
        double hours = cp->lifetime_years * 365.0 * 24.0 * cp->utilization;
        out->capital_usd_per_hour = c->price_usd * nodes / hours;
        out->energy_usd_per_hour = out->power_kw * cp->pue * cp->usd_per_kwh;
        out->usd_per_hour = out->capital_usd_per_hour + out->energy_usd_per_hour;
        snprintf(out->basis, sizeof out->basis, "$%.0f%s over %.1f years at %.0f%% use + %.2f kW x $%.3f/kWh%s",
                 c->price_usd, nodes > 1 ? " per node" : "", cp->lifetime_years, 100 * cp->utilization, out->power_kw,
                 cp->usd_per_kwh, cp->pue > 1 ? " x PUE" : "");
        if (c->power_w <= 0) {
            size_t n = strlen(out->basis);
            snprintf(out->basis + n, sizeof out->basis - n, " (power unknown: energy not counted)");
        }
        out->known = 1;
    } else {
        snprintf(out->basis, sizeof out->basis, "no price or rent in the profile (give --price-usd or --usd-per-hour)");
        return DLP_OK;
    }
    out->usd_per_million_images = out->usd_per_hour / (img_per_s * 3600.0) * 1e6;
    out->usd_per_epoch = out->usd_per_hour * epoch_s / 3600.0;
    out->usd_total = out->usd_per_hour * total_s / 3600.0;
    out->kwh_per_epoch = out->power_kw * cp->pue * epoch_s / 3600.0;
    return DLP_OK;
}

json_t *dlp_cost_to_json(const dlp_cost *c) {
    json_t *o = json_object();
    json_object_set_new(o, "known", json_boolean(c->known));
    json_object_set_new(o, "basis", json_string(c->basis));
    if (!c->known) return o;
    json_object_set_new(o, "usd_per_hour", json_real(c->usd_per_hour));
    json_object_set_new(o, "capital_usd_per_hour", json_real(c->capital_usd_per_hour));
    json_object_set_new(o, "energy_usd_per_hour", json_real(c->energy_usd_per_hour));
    json_object_set_new(o, "power_kw", json_real(c->power_kw));
    json_object_set_new(o, "usd_per_million_images", json_real(c->usd_per_million_images));
    json_object_set_new(o, "usd_per_epoch", json_real(c->usd_per_epoch));
    json_object_set_new(o, "usd_total", json_real(c->usd_total));
    json_object_set_new(o, "kwh_per_epoch", json_real(c->kwh_per_epoch));
    return o;
}
