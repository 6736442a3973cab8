// perf/hwplan_change: a machine's prediction and the changes of its CPU or storage, predicted.
#include "perf/hwplan_change.h"

#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "hw/derive.h"

// The machine of m and its prediction into inv.
static dlp_status predict_machine(const dlp_catalog *cat, const dlp_hwplan_req *req, const dlp_hwplan_machine_req *m,
                                  dlp_hwplan_inverse *inv) {
    dlp_profile *p = inv->profile;
    dlp_cost cost;
    if (m->system) {
        inv->sys = dlp_catalog_system(cat, m->system);
        if (!inv->sys) return dlp_err_trace(DLP_ERR_NOTFOUND, __FILE__, __LINE__, "--system");
        return dlp_hwplan_predict_spec(cat, inv->sys, 1, req, p, &inv->w, inv->pred, &cost);
    }
    DLP_CHECK(dlp_profile_read(m->profile, p));
    if (m->device) {  // a catalog GPU put into the measured host
        dlp_sim_spec sim;
        const char *colon = strchr(m->device, ':');  // "sim:<gpu>" or a bare catalog GPU name
        const int sim_prefix = colon && dlp_backend_kind_of(m->device) == DLP_BACKEND_KIND_SIM;
        DLP_CHECK(dlp_sim_spec_parse(sim_prefix ? colon + 1 : m->device, &sim));
        DLP_CHECK(dlp_sim_device(&sim, cat, &p->devices[0]));
        p->ndevices = 1;
        p->devices_per_node = m->devices > 0 ? m->devices : p->devices_per_node > 0 ? p->devices_per_node : 1;
    } else {  // the profile's GPU first
        for (int i = 1; i < p->ndevices; i++)
            if (p->devices[i].kind == DLP_DEVICE_GPU && p->devices[0].kind != DLP_DEVICE_GPU) p->devices[0] = p->devices[i];
    }
    if (p->ndevices == 0 || p->devices[0].kind != DLP_DEVICE_GPU)
        return DLP_ERR(DLP_ERR_INVALID, "plan: profile %s has no GPU device (plan sizes GPU machines): give --device <gpu> "
                       "(e.g. --device a100) to put a catalog GPU into it, or measure one with dlperf probe --device cuda",
                       p->id);
    dlp_workload *w = &inv->w;
    *w = req->w;
    w->devices = m->devices;
    w->nodes = 1;
    if (!req->prec_given) w->prec = DLP_PREC_FP16;
    if (w->batch <= 0) {
        const dlp_rate *r = dlp_device_find_rate(&p->devices[0], w->task, w->prec, 0);
        w->batch = r && r->batch_ref > 0 ? r->batch_ref : 256;
    }
    return dlp_predict(p, &p->devices[0], w, inv->pred);
}

// The CPUs a platform built on this system takes, else every priced CPU of the catalog (which board takes which
// CPU is recorded only for platforms); none for a profile (its CPU is measured, not a part) or a cloud instance.
static int cpus_to_try(const dlp_catalog *cat, const dlp_parts *parts, dlp_hwplan_inverse *inv,
                       const dlp_cpu_spec **cpus, int max) {
    const dlp_system_spec *s = inv->sys;
    int ncpu = 0;
    for (int i = 0; s && parts && i < parts->nplatforms; i++)
        if (parts->platforms[i].base == s && parts->platforms[i].sockets == s->sockets) {
            for (int k = 0; k < parts->platforms[i].ncpus && ncpu < max; k++) cpus[ncpu++] = parts->platforms[i].cpus[k];
            inv->from_platform = 1;
            break;
        }
    for (int i = 0; s && s->kind == DLP_SYSTEM_OWNED && !inv->from_platform && i < cat->ncpus && ncpu < max; i++)
        cpus[ncpu++] = &cat->cpus[i];
    return ncpu;
}

// One change predicted into ch (its price difference too); an error when the model cannot predict it.
static dlp_status predict_change(const dlp_catalog *cat, const dlp_hwplan_req *req, const dlp_hwplan_inverse *inv,
                                 const dlp_cpu_spec *cpu, const dlp_storage_opt *so, dlp_profile *p2, dlp_prediction *o2,
                                 dlp_hwplan_change *ch) {
    const dlp_system_spec *s = inv->sys;
    double dusd = 0;
    if (s) {
        dlp_system_spec spec = *s;
        if (cpu) {
            spec.cpu = cpu;
            dusd += spec.sockets * (cpu->price_usd - s->cpu->price_usd);
        }
        if (so) {
            spec.storage_desc = so->desc;
            spec.storage_read_gb_s = so->read_gb_s;
            spec.storage_stream_gb_s = so->stream_gb_s;
            spec.storage_latency_us = so->latency_us;
            spec.storage_tb = so->tb;
        }
        dlp_workload w2;
        dlp_cost cost;
        DLP_CHECK(dlp_hwplan_predict_spec(cat, &spec, 1, req, p2, &w2, o2, &cost));
    } else {
        *p2 = *inv->profile;
        snprintf(p2->storage.desc, sizeof p2->storage.desc, "%s", so->desc);
        p2->storage.cold_read_bytes_per_s = so->read_gb_s * 1e9;
        p2->storage.cold_stream_bytes_per_s = so->stream_gb_s * 1e9;
        p2->storage.cold_latency_s = so->latency_us * 1e-6;
        DLP_CHECK(dlp_predict(p2, &p2->devices[0], &inv->w, o2));
    }
    if (so) dusd += so->price_usd;
    *ch = (dlp_hwplan_change){cpu, so, dusd, o2->img_per_s, o2->bottleneck};
    return DLP_OK;
}

// Each CPU of the catalog with a price (a catalog system only) and each storage option, alone and together.
static dlp_status try_changes(const dlp_catalog *cat, const dlp_parts *parts, const dlp_hwplan_req *req,
                              dlp_hwplan_inverse *inv, dlp_profile *p2, dlp_prediction *o2) {
    const dlp_system_spec *s = inv->sys;
    const dlp_cpu_spec *cpus[64];
    int nst = parts ? parts->nstorage : 0;
    if (s && s->kind == DLP_SYSTEM_CLOUD) nst = 0;  // an instance comes as it is: another instance is the change
    int ncpu = cpus_to_try(cat, parts, inv, cpus, 64);
    inv->changes = calloc((size_t)(ncpu + 1) * (size_t)(nst + 1), sizeof *inv->changes);
    if (!inv->changes) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    double orig = inv->pred->img_per_s, dev = inv->pred->device_img_per_s;
    for (int ic = -1; ic < ncpu; ic++) {
        const dlp_cpu_spec *cpu = ic < 0 ? NULL : cpus[ic];
        if (cpu && (cpu == s->cpu || !(cpu->price_usd > 0))) continue;
        for (int is = -1; is < nst; is++) {
            const dlp_storage_opt *so = is < 0 ? NULL : &parts->storage[is];
            if (!cpu && !so) continue;
            dlp_hwplan_change *ch = &inv->changes[inv->nchanges];
            if (predict_change(cat, req, inv, cpu, so, p2, o2, ch)) {
                dlp_err_clear();
                continue;
            }
            int k = inv->nchanges++;
            // Removes a host-side bottleneck: the GPUs are fed (within the tolerance of their own rate).
            if (inv->host_bound && ch->img_per_s >= dev * (1 - req->tolerance) &&
                (inv->best < 0 || ch->delta_usd < inv->changes[inv->best].delta_usd))
                inv->best = k;
            // Keeps the throughput for less money.
            if (ch->img_per_s >= orig * (1 - req->tolerance) && ch->delta_usd < 0 &&
                (inv->cheap < 0 || ch->delta_usd < inv->changes[inv->cheap].delta_usd))
                inv->cheap = k;
        }
    }
    return DLP_OK;
}

dlp_status dlp_hwplan_inverse_run(const dlp_catalog *cat, const dlp_parts *parts, const dlp_hwplan_req *req,
                                  const dlp_hwplan_machine_req *m, dlp_hwplan_inverse *inv) {
    memset(inv, 0, sizeof *inv);
    inv->best = inv->cheap = -1;
    inv->profile = malloc(sizeof *inv->profile);
    inv->pred = malloc(sizeof *inv->pred);
    dlp_profile *p2 = malloc(sizeof *p2);
    dlp_prediction *o2 = malloc(sizeof *o2);
    dlp_status st = inv->profile && inv->pred && p2 && o2 ? DLP_OK : DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    if (!st) st = predict_machine(cat, req, m, inv);
    if (!st) {
        inv->host_bound = dlp_hwplan_host_cap(inv->pred) < inv->pred->device_img_per_s * (1 - req->tolerance);
        st = try_changes(cat, parts, req, inv, p2, o2);
    }
    free(p2);
    free(o2);
    return st;
}

// The cheapest neighbor of `chosen` (one part swapped, `what`) that is about as fast (a cheaper part would do), or
// the one with the most images/s per extra dollar among those faster (money better spent here).
int dlp_hwplan_cheaper_part(const dlp_hwplan_cand *c, int n, int chosen, const char *part, double tol) {
    int best = -1;
    for (int i = 0; i < n; i++) {
        const char *what;
        if (!c[i].ok || !dlp_hwplan_neighbor(&c[chosen], &c[i], &what) || strcmp(what, part)) continue;
        if (c[i].budget_cost < c[chosen].budget_cost && c[i].img_per_s >= (1 - tol) * c[chosen].img_per_s &&
            (best < 0 || c[i].budget_cost < c[best].budget_cost))
            best = i;
    }
    return best;
}

int dlp_hwplan_better_spent(const dlp_hwplan_cand *c, int n, int chosen, double tol, const char **part) {
    int best = -1;
    double best_gain = 0;
    for (int i = 0; i < n; i++) {
        const char *what;
        if (!c[i].ok || !dlp_hwplan_neighbor(&c[chosen], &c[i], &what)) continue;
        double dcost = c[i].budget_cost - c[chosen].budget_cost, dimg = c[i].img_per_s - c[chosen].img_per_s;
        if (dimg <= tol * c[chosen].img_per_s || dcost <= 0) continue;
        if (dimg / dcost > best_gain) {
            best_gain = dimg / dcost;
            best = i;
            *part = what;
        }
    }
    return best;
}

void dlp_hwplan_inverse_free(dlp_hwplan_inverse *inv) {
    free(inv->profile);
    free(inv->pred);
    free(inv->changes);
    memset(inv, 0, sizeof *inv);
}
