// perf/hwplan_needs: what each part of a machine must deliver to keep its GPUs busy.
#include "perf/hwplan_needs.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/fmt.h"
#include "perf/hwplan_change.h"

static const char *rate(double bps, char *buf, size_t len) {
    if (bps >= 1e9) snprintf(buf, len, "%.1f GB/s", bps / 1e9);
    else snprintf(buf, len, "%.0f MB/s", bps / 1e6);
    return buf;
}

const char *dlp_hwplan_money(double v, int hourly, char *buf, size_t len) {
    char g[32];
    if (hourly) snprintf(buf, len, "$%.2f/h", v);
    else snprintf(buf, len, "$%s", dlp_fmt_grp(v, g, sizeof g));
    return buf;
}

int dlp_hwplan_needs(const dlp_profile *p, const dlp_prediction *o, const dlp_hwplan_cand *c, int n, int chosen,
                     double tol, int hourly, const char *pipe, dlp_hwplan_need *out) {
    char b1[32], b2[32], m[64];
    int N = o->devices, nl = 0;
    double target = o->busy_img_per_s;
    dlp_hwplan_need l;
    int k;
    // GPUs
    memset(&l, 0, sizeof l);
    l.part = "GPUs";
    snprintf(l.need, sizeof l.need, "%s img/s per GPU (%s)", dlp_fmt_grp(o->device_img_per_s / N, b1, sizeof b1),
             o->step.rate ? "the device profile" : "-");
    snprintf(l.has, sizeof l.has, "compute %s img/s per GPU", dlp_fmt_grp(o->stages[DLP_STAGE_COMPUTE].img_per_s / N, b1, sizeof b1));
    out[nl++] = l;
    // CPU cores
    memset(&l, 0, sizeof l);
    l.part = "cores per GPU";
    snprintf(l.need, sizeof l.need, ">= %.1f (%s pipeline, cores %.2fx the dev core)", o->loader_cores_needed / N, pipe,
             p->host.core_speed_rel);
    snprintf(l.has, sizeof l.has, "has %.1f free (%s)", o->loader_cores / N, p->host.cpu_model);
    double head = o->loader_cores / o->loader_cores_needed;
    if (head < 1 - 1e-9) snprintf(l.mark, sizeof l.mark, "SHORT: the GPUs wait for the CPU");
    else if (c && (k = dlp_hwplan_cheaper_part(c, n, chosen, "cpu", tol)) >= 0)
        snprintf(l.mark, sizeof l.mark, "%.1fx; a cheaper part would do: %dx %s saves %s", head, c[k].sockets, c[k].cpu->id,
                 dlp_hwplan_money(c[chosen].budget_cost - c[k].budget_cost, hourly, m, sizeof m));
    else if (head > 1.5)
        snprintf(l.mark, sizeof l.mark, "%.1fx headroom%s", head, !c ? "" : c[chosen].sys ? " (the CPU comes with the system)"
                                                                                       : " (no cheaper CPU this platform takes)");
    else snprintf(l.mark, sizeof l.mark, "ok (%.1fx)", head);
    out[nl++] = l;
    // Storage (cold reads: the first epoch, or every epoch when the dataset does not stay cached)
    memset(&l, 0, sizeof l);
    l.part = "storage";
    snprintf(l.need, sizeof l.need, ">= %s cold", rate(o->storage_bytes_per_s_needed, b1, sizeof b1));
    snprintf(l.has, sizeof l.has, "has %s (%s)", rate(p->storage.cold_read_bytes_per_s, b2, sizeof b2), p->storage.desc);
    head = p->storage.cold_read_bytes_per_s / o->storage_bytes_per_s_needed;
    if (o->stages[DLP_STAGE_READ].present && o->stages[DLP_STAGE_READ].img_per_s < target * (1 - 1e-9))
        snprintf(l.mark, sizeof l.mark, "SHORT: the GPUs wait for storage");
    else if (c && (k = dlp_hwplan_cheaper_part(c, n, chosen, "storage", tol)) >= 0)
        snprintf(l.mark, sizeof l.mark, "%.1fx; a cheaper part would do: %s", head, c[k].stor ? c[k].stor->id : "the base drive");
    else snprintf(l.mark, sizeof l.mark, "%.1fx%s", head, o->storage_cold ? "" : " (read cold in the first epoch only)");
    out[nl++] = l;
    // Memory: the page cache that keeps the dataset warm
    memset(&l, 0, sizeof l);
    l.part = "memory";
    snprintf(l.need, sizeof l.need, ">= %.0f GB page cache to read warm", o->page_cache_bytes_needed / 1e9);
    snprintf(l.has, sizeof l.has, "has %.0f GB (%.0f GB RAM)", p->storage.page_cache_bytes / 1e9, p->host.mem_bytes / 1e9);
    snprintf(l.mark, sizeof l.mark, "%s", o->storage_cold ? "every epoch reads cold: storage must keep up" : "ok");
    out[nl++] = l;
    if (o->stages[DLP_STAGE_HOSTMEM].present) {
        memset(&l, 0, sizeof l);
        l.part = "memory bw";
        double need = p->host.mem_bw_bytes_per_s * target / o->stages[DLP_STAGE_HOSTMEM].img_per_s;
        snprintf(l.need, sizeof l.need, ">= %s", rate(need, b1, sizeof b1));
        snprintf(l.has, sizeof l.has, "has %s", rate(p->host.mem_bw_bytes_per_s, b2, sizeof b2));
        snprintf(l.mark, sizeof l.mark, "%s", need > p->host.mem_bw_bytes_per_s ? "SHORT" : "ok");
        out[nl++] = l;
    }
    // PCIe
    memset(&l, 0, sizeof l);
    l.part = "PCIe";
    snprintf(l.need, sizeof l.need, ">= %s per GPU host-to-device", rate(o->h2d_bytes_per_s_needed, b1, sizeof b1));
    snprintf(l.has, sizeof l.has, "has %s per GPU", rate(o->h2d_bytes_per_s, b2, sizeof b2));
    snprintf(l.mark, sizeof l.mark, "%s", o->h2d_bytes_per_s < o->h2d_bytes_per_s_needed ? "SHORT" : "ok");
    out[nl++] = l;
    // Allreduce
    if (N * o->nodes > 1) {
        memset(&l, 0, sizeof l);
        l.part = "allreduce";
        if (o->busbw_needed > 0) snprintf(l.need, sizeof l.need, ">= %.0f GB/s bus bandwidth", o->busbw_needed / 1e9);
        else snprintf(l.need, sizeof l.need, "hidden under backward");
        snprintf(l.has, sizeof l.has, "has %.0f GB/s in the node%s", p->net.allreduce_busbw_bytes_per_s / 1e9,
                 o->nodes > 1 ? " + the network between nodes" : "");
        if (o->nodes > 1) {
            size_t ln = strlen(l.has);
            snprintf(l.has + ln, sizeof l.has - ln, " (%.1f GB/s)", p->net.nic_bytes_per_s / 1e9);
        }
        // Exposed beyond 2% of the step: the allreduce must get faster by t / (t - exposed) to hide under backward.
        int short_ar = o->allreduce_exposed_s > 0.02 * o->device_step_s;
        double factor = o->allreduce_s > o->allreduce_exposed_s ? o->allreduce_s / (o->allreduce_s - o->allreduce_exposed_s) : 0;
        if (short_ar && o->nodes > 1 && factor > 0)
            snprintf(l.need, sizeof l.need, ">= %.1f GB/s between nodes (%.1fx)", factor * p->net.nic_bytes_per_s / 1e9, factor);
        else if (short_ar && factor > 0)
            snprintf(l.need, sizeof l.need, ">= %.0f GB/s bus bandwidth", factor * p->net.allreduce_busbw_bytes_per_s / 1e9);
        snprintf(l.mark, sizeof l.mark, "%s (%.2f ms exposed per step)", short_ar ? "SHORT" : "ok", o->allreduce_exposed_s * 1e3);
        out[nl++] = l;
    }
    return nl;
}

void dlp_hwplan_balance(const dlp_prediction *o, const dlp_hwplan_cand *c, int n, int chosen, double tol, int hourly,
                        dlp_hwplan_balance_info *b) {
    char m[64], *why = b->why;
    double host = dlp_hwplan_host_cap(o), dev = o->device_img_per_s, r = host / dev;
    int balanced = fabs(r - 1) <= 0.10;
    why[0] = '\0';
    *b = (dlp_hwplan_balance_info){.host_img_per_s = host, .device_img_per_s = dev, .ratio = r, .balanced = balanced};
    if (!balanced && !c) {  // a given machine: its changes are listed after the requirements
        snprintf(why, sizeof b->why, "%s", r > 1 ? "the CPU pipeline has spare capacity (see 'a cheaper part would do' below)"
                                              : "the GPUs wait for the CPU input pipeline or storage (see the change below)");
    } else if (!balanced && r > 1) {
        int k = c ? dlp_hwplan_cheaper_part(c, n, chosen, "cpu", tol) : -1;
        if (k >= 0)
            snprintf(why, sizeof b->why, "the CPU pipeline has %.2fx what the GPUs take: a cheaper part would do (%dx %s, %s "
                     "less)", r, c[k].sockets, c[k].cpu->id, dlp_hwplan_money(c[chosen].budget_cost - c[k].budget_cost, hourly, m, sizeof m));
        else if (c[chosen].sys)
            snprintf(why, sizeof b->why, "the CPU pipeline has %.2fx what the GPUs take: %s is a whole catalog system (a "
                     "cloud instance or a fixed build), its CPU comes with it", r, c[chosen].sys->id);
        else
            snprintf(why, sizeof b->why, "the CPU pipeline has %.2fx what the GPUs take, and no cheaper CPU or storage the "
                     "platform takes keeps them fed: the spare cores are the price of the cheapest part that does", r);
    } else if (!balanced) {
        snprintf(why, sizeof b->why, "the GPUs wait for %s (the CPU pipeline delivers %.2fx what they take)",
                 dlp_stage_name(o->bottleneck), r);
        int best = -1;
        for (int i = 0; c && i < n; i++) {
            const char *what;
            if (!c[i].ok || !dlp_hwplan_neighbor(&c[chosen], &c[i], &what) || (strcmp(what, "cpu") && strcmp(what, "storage")))
                continue;
            if (c[i].ratio >= 0.9 && (best < 0 || c[i].budget_cost < c[best].budget_cost)) best = i;
        }
        size_t ln = strlen(why);
        if (best >= 0)
            snprintf(why + ln, sizeof b->why - ln, "; buy %s (%s more%s)", c[best].stor != c[chosen].stor
                     ? (c[best].stor ? c[best].stor->id : "the base drive") : c[best].cpu->id,
                     dlp_hwplan_money(c[best].budget_cost - c[chosen].budget_cost, hourly, m, sizeof m),
                     c[best].feasible ? "" : ", over the budget");
        else
            snprintf(why + ln, sizeof b->why - ln, "%s", c[chosen].sys
                     ? "; a whole catalog system's CPU and storage come with it: the requirement lines say what would feed them"
                     : "; no CPU or storage this platform takes feeds them: the requirement lines say what would");
    }
}
