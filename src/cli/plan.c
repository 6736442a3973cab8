// cli/plan: `dlperf plan` — under a purchase budget ($) or an hourly one ($/h), or a deadline, the configuration of
// the catalog's parts and systems that trains fastest (perf/hwplan), the next best ones, whether the chosen one is
// balanced, and what each part must deliver to keep its GPUs fed; with --system or --profile, the cheapest change
// that removes a machine's bottleneck.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/opts.h"
#include "hw/catalog.h"
#include "hw/derive.h"
#include "hw/host.h"
#include "hw/parts.h"
#include "perf/hwplan.h"
#include "perf/hwplan_change.h"
#include "perf/hwplan_needs.h"
#include "perf/hwplan_report.h"

typedef struct {
    const char *system, *profile, *device, *model, *dataset, *pipeline, *catalog, *json;
    int classes, batch, size, epochs, precision, storage, cloud, top, max_nodes, devices;
    int64_t images;
    double budget, budget_h, deadline_h, tolerance;
    dlp_cost_params cp;
} opts_t;

static const char *grp(double v, char *buf, size_t len) { return dlp_cli_grp(v, buf, len); }
static const char *dur(double s, char *buf, size_t len) { return dlp_cli_dur(s, 1, buf, len); }

static const char *money(double v, int hourly, char *buf, size_t len) { return dlp_hwplan_money(v, hourly, buf, len); }

// --- what each part must deliver -----------------------------------------------------------------------------------

static void add_line(json_t *arr, const dlp_hwplan_need *l) {
    printf("    %-15s %-50s %s%s%s\n", l->part, l->need, l->has, l->mark[0] ? "; " : "", l->mark);
    if (arr) json_array_append_new(arr, dlp_hwplan_need_to_json(l));
}

static void print_requirements(const dlp_profile *p, const dlp_prediction *o, const dlp_hwplan_cand *c, int n, int chosen,
                               double tol, int hourly, const char *pipe, json_t *arr) {
    char b1[32];
    int N = o->devices;
    printf("  what each part must deliver to keep the %d GPU%s per node busy at %s img/s:\n", N, N > 1 ? "s" : "",
           grp(o->busy_img_per_s, b1, sizeof b1));
    dlp_hwplan_need lines[DLP_HWPLAN_MAX_NEEDS];
    int nl = dlp_hwplan_needs(p, o, c, n, chosen, tol, hourly, pipe, lines);
    for (int i = 0; i < nl; i++) add_line(arr, &lines[i]);
}

// Balance of one prediction: the input pipeline's capacity over the devices'.
static void print_balance(const dlp_prediction *o, const dlp_hwplan_cand *c, int n, int chosen, double tol, int hourly,
                          json_t *res) {
    char b1[32], b2[32];
    dlp_hwplan_balance_info bi;
    dlp_hwplan_balance(o, c, n, chosen, tol, hourly, &bi);
    printf("  balance: CPU input pipeline %s img/s vs GPUs %s img/s per node (%.2fx): %s%s\n",
           grp(bi.host_img_per_s, b1, sizeof b1), grp(bi.device_img_per_s, b2, sizeof b2), bi.ratio,
           bi.balanced ? "balanced (within 10%)" : "not balanced: ", bi.why);
    if (res) json_object_set_new(res, "balance", dlp_hwplan_balance_to_json(&bi));
}

// --- the inverse: a machine's cheapest change (perf/hwplan_change) ----------------------------------------------------

static dlp_status inverse(const dlp_catalog *cat, const dlp_parts *parts, const dlp_hwplan_req *req, const opts_t *op,
                          json_t *res) {
    dlp_hwplan_inverse inv;
    dlp_hwplan_machine_req m = {op->system, op->profile, op->device, op->devices};
    dlp_status st = dlp_hwplan_inverse_run(cat, parts, req, &m, &inv);
    if (st) {
        dlp_hwplan_inverse_free(&inv);
        return st;
    }
    const dlp_profile *p = inv.profile;
    const dlp_prediction *o = inv.pred;
    const dlp_system_spec *s = inv.sys;
    char b1[32], b2[32], mb[64], what[200];
    printf("%s: %s; %d x %s, %s; bottleneck %s; %s img/s (GPUs alone %s img/s)\n", p->id, p->name, o->devices,
           p->devices[0].name, p->host.cpu_model, dlp_stage_name(o->bottleneck), grp(o->img_per_s, b1, sizeof b1),
           grp(o->device_img_per_s, b2, sizeof b2));
    print_balance(o, NULL, 0, -1, req->tolerance, 0, res);
    json_t *reqs = json_array();
    json_object_set_new(res, "requirements", reqs);
    print_requirements(p, o, NULL, 0, -1, req->tolerance, 0, op->profile ? "measured" : op->pipeline, reqs);
    json_t *chj = json_array();
    for (int i = 0; i < inv.nchanges; i++) json_array_append_new(chj, dlp_hwplan_change_to_json(&inv.changes[i], 1));
    json_object_set_new(res, "changes", chj);
    printf("\n");
    const dlp_hwplan_change *best = inv.best >= 0 ? &inv.changes[inv.best] : NULL;
    const dlp_hwplan_change *cheap = inv.cheap >= 0 ? &inv.changes[inv.cheap] : NULL;
    if (inv.host_bound && best) {
        printf("  cheapest change that removes the bottleneck: %s (%s%s): %s -> %s img/s, bottleneck %s\n",
               dlp_hwplan_change_text(best, what, sizeof what), best->delta_usd >= 0 ? "+" : "-",
               money(fabs(best->delta_usd), 0, mb, sizeof mb), grp(o->img_per_s, b1, sizeof b1),
               grp(best->img_per_s, b2, sizeof b2), dlp_stage_name(best->bottleneck));
        json_object_set_new(res, "cheapest_fix", dlp_hwplan_change_to_json(best, 0));
    } else if (inv.host_bound && s && s->kind == DLP_SYSTEM_CLOUD) {
        printf("  %s is a cloud instance: its CPU and storage come with it; another instance is the change (dlperf plan "
               "--budget-usd-h)\n", s->id);
    } else if (inv.host_bound) {
        printf("  no CPU or storage of the catalog (%d change%s tried) feeds the GPUs: the requirement lines above say "
               "what would\n", inv.nchanges, inv.nchanges == 1 ? "" : "s");
    } else {
        printf("  the %s sets the pace, not the CPU input pipeline: more GPU throughput (faster or more GPUs, or a faster "
               "allreduce/PCIe as above) is the change to buy\n", dlp_stage_name(o->bottleneck));
    }
    if (s && !inv.from_platform && (best || cheap))
        printf("  (CPUs of every socket are tried: no platform in parts.json says which CPUs this system's board takes)\n");
    json_object_set_new(res, "cpus_from_platform", json_boolean(inv.from_platform));
    if (cheap)
        printf("  a cheaper part would do: %s saves %s at %s img/s\n", dlp_hwplan_change_text(cheap, what, sizeof what),
               money(-cheap->delta_usd, 0, mb, sizeof mb), grp(cheap->img_per_s, b1, sizeof b1));
    dlp_hwplan_inverse_free(&inv);
    return DLP_OK;
}

// The search's request from the options.
static dlp_status make_request(const opts_t *op, const dlp_catalog *cat, dlp_hwplan_req *r,
                               const dlp_catalog_dataset **cd_out) {
    dlp_hwplan_req_init(r);
    r->mode = op->budget_h > 0 || (op->cloud && !(op->budget > 0)) ? DLP_HWPLAN_HOURLY : DLP_HWPLAN_PURCHASE;
    r->budget = r->mode == DLP_HWPLAN_HOURLY ? op->budget_h : op->budget;
    r->deadline_s = op->deadline_h * 3600;
    r->tolerance = op->tolerance;
    r->max_nodes = op->max_nodes;
    r->pipeline = op->pipeline;
    r->prec_given = op->precision != DLP_PRECISION_AUTO;  // auto: fp16 on the GPUs plans are made of
    r->w.prec = r->prec_given ? (dlp_prec)op->precision : DLP_PREC_FP16;
    snprintf(r->w.model, sizeof r->w.model, "%s", op->model);
    r->w.classes = op->classes;
    r->w.batch = op->batch;
    dlp_img_transform_init(&r->w.tf, 1, op->size);
    r->w.storage = (dlp_storage_state)op->storage;
    r->w.epochs = op->epochs;
    r->cp = op->cp;
    const dlp_catalog_dataset *cd = dlp_catalog_dataset_find(cat, op->dataset);
    *cd_out = cd;
    if (cd) r->w.stats = cd->stats;
    if (op->images > 0) r->w.stats.images = op->images;
    return cd ? DLP_OK : dlp_err_trace(DLP_ERR_NOTFOUND, __FILE__, __LINE__, "--dataset");
}

// The chosen configuration in full: its cost, balance, what each part must deliver, where more money goes best.
static dlp_status print_chosen(const dlp_catalog *cat, const dlp_hwplan_req *req, const opts_t *op,
                               const dlp_hwplan_cand *c, int n, int chosen, json_t *res) {
    const int hourly = req->mode == DLP_HWPLAN_HOURLY;
    char b1[32], b2[32], b3[32], m[64], d[300];
    dlp_profile *p = malloc(sizeof *p);
    dlp_prediction *o = malloc(sizeof *o);
    dlp_status st = p && o ? DLP_OK : DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    dlp_system_spec spec;
    dlp_hwplan_spec(&c[chosen], &spec);
    dlp_workload w;
    dlp_cost cost;
    if (!st) st = dlp_hwplan_predict_spec(cat, &spec, c[chosen].nodes, req, p, &w, o, &cost);
    if (st) goto out;
    dlp_hwplan_cand_describe(&c[chosen], d, sizeof d);
    printf("\n  best: %s\n  %s img/s, %s for %d epochs, $%.3f per million images, $%s for the run; %s", d,
           grp(c[chosen].img_per_s, b1, sizeof b1), dur(c[chosen].total_s, b2, sizeof b2), req->w.epochs,
           c[chosen].usd_per_million, grp(c[chosen].usd_total, b3, sizeof b3), cost.basis);
    printf("%s\n", hourly ? "" : (snprintf(m, sizeof m, "; price $%s", grp(c[chosen].price_usd, b1, sizeof b1)), m));
    if (req->deadline_s > 0)
        printf("  (the %s configuration that meets the deadline)\n", hourly ? "cheapest run of any" : "cheapest");
    else
        printf("  (the cheapest configuration within %.0f%% of the fastest affordable one)\n", 100 * req->tolerance);
    print_balance(o, c, n, chosen, req->tolerance, hourly, res);
    json_t *reqs = json_array();
    json_object_set_new(res, "requirements", reqs);
    print_requirements(p, o, c, n, chosen, req->tolerance, hourly, op->pipeline, reqs);
    const char *part = "";
    int sp = dlp_hwplan_better_spent(c, n, chosen, req->tolerance, &part);
    if (sp >= 0) {
        dlp_hwplan_cand_describe(&c[sp], d, sizeof d);
        printf("  more money is best spent on %s: +%s for %s: %s img/s (+%.0f%%)%s\n", part,
               money(c[sp].budget_cost - c[chosen].budget_cost, hourly, m, sizeof m), d, grp(c[sp].img_per_s, b1, sizeof b1),
               100 * (c[sp].img_per_s / c[chosen].img_per_s - 1), c[sp].feasible ? "" : ", over the budget");
        json_object_set_new(res, "better_spent", dlp_hwplan_cand_to_json(&c[sp]));
    }
    json_object_set_new(res, "best", dlp_hwplan_cand_to_json(&c[chosen]));
out:
    free(p);
    free(o);
    return st;
}

int dlp_cli_plan(int argc, char **argv) {
    opts_t op;
    memset(&op, 0, sizeof op);
    dlp_cost_params_init(&op.cp);
    dlp_opt table[] = {
        {"budget-usd", 0, DLP_OPT_DOUBLE, &op.budget, "0", NULL, "purchase budget in $ (all nodes)", NULL, 0},
        {"budget-usd-h", 0, DLP_OPT_DOUBLE, &op.budget_h, "0", NULL, "hourly budget in $ per hour: rent the catalog's cloud systems", NULL, 0},
        {"deadline-h", 0, DLP_OPT_DOUBLE, &op.deadline_h, "0", NULL, "train within this many hours: the cheapest configuration that does", NULL, 0},
        {"cloud", 0, DLP_OPT_FLAG, &op.cloud, NULL, NULL, "with --deadline-h alone: rent (cloud systems) instead of buying", NULL, 0},
        {"system", 0, DLP_OPT_STR, &op.system, NULL, "ID", "inverse: the cheapest change that removes this catalog system's bottleneck", NULL, 0},
        {"profile", 0, DLP_OPT_STR, &op.profile, NULL, "FILE", "inverse: the same for a machine profile (storage changes)", NULL, 0},
        {"device", 0, DLP_OPT_STR, &op.device, NULL, "GPU", "with --profile: put this catalog GPU (or sim:<gpu>[,...]) in the machine", NULL, 0},
        {"devices", 0, DLP_OPT_INT, &op.devices, "0", NULL, "with --profile: GPUs per node (0: the profile's, at least 1)", NULL, 0},
        {"model", 0, DLP_OPT_STR, &op.model, "resnet50", "M", "resnet18|resnet34|resnet50|resnet101|resnet152", NULL, 0},
        {"classes", 0, DLP_OPT_INT, &op.classes, "1000", NULL, "output classes", NULL, 0},
        {"batch", 'b', DLP_OPT_INT, &op.batch, "0", NULL, "batch per GPU (0: each GPU's published figure's batch)", NULL, 0},
        {"size", 0, DLP_OPT_INT, &op.size, "224", NULL, "image size after crop (square)", NULL, 0},
        {"precision", 0, DLP_OPT_ENUM, &op.precision, "auto", NULL, DLP_CLI_PRECISION_HELP " (plans are for GPUs: fp16)", dlp_prec_train_choices, 0},
        {"epochs", 0, DLP_OPT_INT, &op.epochs, "90", NULL, "epochs to train", NULL, 0},
        {"dataset", 0, DLP_OPT_STR, &op.dataset, "imagenet-train", "ID", "catalog dataset", NULL, 0},
        {"images", 0, DLP_OPT_I64, &op.images, "0", NULL, "images per epoch (0: the dataset's)", NULL, 0},
        {"pipeline", 0, DLP_OPT_STR, &op.pipeline, "dlperf", "ID", "input pipeline: dlperf|torchvision", NULL, 0},
        {"storage", 0, DLP_OPT_CHOICE, &op.storage, "auto", NULL, "page cache state (auto: warm if the dataset fits)", "auto|warm|cold", 0},
        {"tolerance", 0, DLP_OPT_DOUBLE, &op.tolerance, "0.02", NULL, "throughputs within this fraction of the fastest count as as fast (the cheapest is chosen)", NULL, 0},
        {"max-nodes", 0, DLP_OPT_INT, &op.max_nodes, "4", NULL, "most nodes of one configuration (1, 2, 4, ...)", NULL, 0},
        {"top", 0, DLP_OPT_INT, &op.top, "5", NULL, "configurations to list", NULL, 0},
        DLP_CLI_COST_ROWS(op.cp),
        {"catalog", 0, DLP_OPT_STR, &op.catalog, NULL, "DIR", "catalog directory with parts.json (default: found next to dlperf, or $DLPERF_CATALOG)", NULL, 0},
        {"json", 0, DLP_OPT_STR, &op.json, NULL, "FILE", "write the result (schema dlperf.plan/1)", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(table, "usage: dlperf plan (--budget-usd $ | --budget-usd-h $/h | --deadline-h H) [options]\n"
                                  "       dlperf plan (--system ID | --profile FILE) [options]\n\n"
                                  "Searches the catalog's parts and systems for the configuration that trains fastest within "
                                  "a budget\n(or the cheapest within a deadline), and says what each part must deliver to "
                                  "keep its GPUs fed\n(docs/model.md, \"Plan\").", argc, argv);
    if (st) return dlp_cli_fail(st);
    int inv = op.system || op.profile;
    if (op.system && op.profile) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "plan: give --system or --profile, not both"));
    if ((op.device || op.devices) && !op.profile)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "plan: --device and --devices go with --profile (a catalog system has its GPUs)"));
    if (!inv && !(op.budget > 0) && !(op.budget_h > 0) && !(op.deadline_h > 0))
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "plan: give a budget (--budget-usd $ or --budget-usd-h $/h), a deadline "
                                    "(--deadline-h H), or a machine (--system ID, --profile FILE)"));
    if (op.budget > 0 && op.budget_h > 0)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "plan: --budget-usd (buy) and --budget-usd-h (rent) exclude each other"));
    if (op.budget < 0 || op.budget_h < 0 || op.deadline_h < 0 || !(op.tolerance >= 0 && op.tolerance < 0.5) ||
        op.max_nodes < 1 || op.max_nodes > 64 || op.top < 1 || op.epochs < 1 || op.size < 32 || op.batch < 0)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "plan: budgets and deadline >= 0, --tolerance in [0, 0.5), --max-nodes in "
                                    "[1, 64], --top >= 1, --epochs >= 1, --size >= 32, --batch >= 0"));
    if (op.json && (st = dlp_check_new_output(op.json, "--json"))) return dlp_cli_fail(st);
    dlp_catalog *cat = NULL;
    dlp_parts *parts = NULL;
    st = dlp_catalog_load(op.catalog, &cat);
    char parts_path[700] = "";
    if (!st) snprintf(parts_path, sizeof parts_path, "%s/parts.json", cat->dir);
    if (!st && access(parts_path, F_OK) == 0) st = dlp_parts_load(cat, &parts);
    else if (!st) fprintf(stderr, "plan: %s does not exist: whole catalog systems only, nothing built from parts\n", parts_path);
    if (st) {
        dlp_parts_free(parts);
        dlp_catalog_free(cat);
        return dlp_cli_fail(st);
    }
    dlp_hwplan_req req;
    const dlp_catalog_dataset *cd = NULL;
    st = make_request(&op, cat, &req, &cd);
    int hourly = req.mode == DLP_HWPLAN_HOURLY;

    json_t *res = dlp_json_result_new("dlperf.plan/1", 0, NULL);
    json_object_set_new(res, "options", dlp_opts_to_json(table));
    json_object_set_new(res, "versions", dlp_versions_to_json());
    dlp_hwplan_cand *c = NULL;
    int n = 0;
    if (!st && inv) {
        st = inverse(cat, parts, &req, &op, res);
        goto done;
    }
    if (!st) st = dlp_hwplan_enumerate(cat, parts, &req, &c, &n);
    if (st) goto done;
    int chosen = dlp_hwplan_choose(c, n, &req);
    int nfeas = 0;
    for (int i = 0; i < n; i++) nfeas += c[i].feasible;
    char b1[32], b2[32], m[64], d[300];
    printf("plan: %s", hourly ? "rent (cloud systems)" : "buy (platforms x GPUs x CPUs x storage, and whole systems)");
    if (req.budget > 0) printf(", budget %s", money(req.budget, hourly, m, sizeof m));
    if (req.deadline_s > 0) printf(", deadline %s", dur(req.deadline_s, b1, sizeof b1));
    printf("\n  workload %s train %s, %s: %s images x %d epochs; pipeline %s\n", req.w.model, dlp_prec_name(req.w.prec),
           cd->id, grp((double)req.w.stats.images, b1, sizeof b1), req.w.epochs, op.pipeline);
    printf("  %d configurations, %d within the %s\n", n, nfeas,
           req.budget > 0 && req.deadline_s > 0 ? "budget and the deadline" : req.budget > 0 ? "budget" : "deadline");
    json_object_set_new(res, "mode", json_string(hourly ? "hourly" : "purchase"));
    json_object_set_new(res, "budget", json_real(req.budget));
    json_object_set_new(res, "deadline_s", json_real(req.deadline_s));
    json_object_set_new(res, "tolerance", json_real(req.tolerance));
    json_object_set_new(res, "chosen", chosen >= 0 ? json_string(c[chosen].id) : json_null());
    if (chosen < 0) {
        printf("\n  no configuration fits: the cheapest one costs ");
        int cheapest = -1;
        for (int i = 0; i < n; i++)
            if (c[i].ok && c[i].budget_cost > 0 && (cheapest < 0 || c[i].budget_cost < c[cheapest].budget_cost)) cheapest = i;
        if (cheapest >= 0) {
            dlp_hwplan_cand_describe(&c[cheapest], d, sizeof d);
            printf("%s (%s, %s)\n", money(c[cheapest].budget_cost, hourly, m, sizeof m), d, dur(c[cheapest].total_s, b1, sizeof b1));
        } else {
            printf("- (none could be predicted)\n");
        }
    } else {
        int idx[64], k = dlp_hwplan_frontier(c, n, chosen, idx, op.top < 64 ? op.top : 64);
        printf("\n  %-4s %-58s %11s %9s %13s %9s %-15s %9s\n", "", "configuration", hourly ? "$/h" : "price", "img/s",
               "time to train", "$/1M img", "bottleneck", "CPU/GPU");
        json_t *top = json_array();
        for (int i = 0; i < k; i++) {
            const dlp_hwplan_cand *x = &c[idx[i]];
            dlp_hwplan_cand_describe(x, d, sizeof d);
            printf("  %-4s %-58.58s %11s %9s %13s %9.3f %-15s %8.2fx\n", i == 0 ? "best" : "", d,
                   money(x->budget_cost, hourly, m, sizeof m), grp(x->img_per_s, b1, sizeof b1),
                   dur(x->total_s, b2, sizeof b2), x->usd_per_million, dlp_stage_name(x->bottleneck), x->ratio);
            json_array_append_new(top, dlp_hwplan_cand_to_json(x));
        }
        json_object_set_new(res, "top", top);
        st = print_chosen(cat, &req, &op, c, n, chosen, res);
        if (st) goto done;
    }
    json_t *all = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(all, dlp_hwplan_cand_to_json(&c[i]));
    json_object_set_new(res, "configurations", all);
done:
    if (st == DLP_OK && op.json) st = dlp_json_write(res, op.json, DLP_WRITE_NOCLOBBER);
    json_decref(res);
    free(c);
    dlp_parts_free(parts);
    dlp_catalog_free(cat);
    return dlp_cli_fail(st);
}
