// perf/validate_sweep: the sweep of `dlperf validate`: configurations, machine, dataset, runs and summary.
#include "perf/validate_sweep.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/fields.h"
#include "core/fs.h"
#include "core/json.h"
#include "dist/launch.h"
#include "data/source.h"
#include "hw/host.h"
#include "perf/datastats.h"
#include "perf/probe.h"

static void say(const dlp_validate_sweep_req *req, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const dlp_validate_sweep_req *req, const char *fmt, ...) {
    if (!req->progress) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    req->progress(req->ctx, line);
}

// The multi-node fields of the configurations file (issue 30): "nodes" (1..64; > 1: ranks per node x nodes
// processes), "hostfile" (the MPI hostfile, naming at least that many hosts; needed then) and "launcher" (the
// mpirun command, "" or absent: mpirun; e.g. tests/netns-hosts.sh's $DLPN_MPIRUN for emulated hosts).
static dlp_status nodes_from_json(const json_t *a, const char *where, dlp_validate_config *cfgs, int n) {
    for (int i = 0; i < n && i < (int)json_array_size(a); i++) {
        const json_t *o = json_array_get(a, i);
        dlp_validate_config *c = &cfgs[i];
        char w[320];
        snprintf(w, sizeof w, "%s: [%d]", where, i);
        int64_t v = 1;
        if (json_object_get(o, "nodes")) DLP_CHECK(dlp_field_int(o, "nodes", 1, 64, &v, w));
        c->nodes = (int)v;
        DLP_CHECK(dlp_field_opt_str(o, "hostfile", c->hostfile, sizeof c->hostfile, w));
        DLP_CHECK(dlp_field_opt_str(o, "launcher", c->launcher, sizeof c->launcher, w));
        if (c->nodes < 2) {
            if (c->hostfile[0] || c->launcher[0])
                return DLP_ERR(DLP_ERR_FORMAT, "%s: 'hostfile' and 'launcher' go with \"nodes\" of 2 or more", w);
            continue;
        }
        if (!c->hostfile[0]) return DLP_ERR(DLP_ERR_FORMAT, "%s: \"nodes\": %d needs a 'hostfile'", w, c->nodes);
        if (strchr(c->hostfile, '\'') || strchr(c->launcher, '\''))
            return DLP_ERR(DLP_ERR_FORMAT, "%s: 'hostfile' and 'launcher' may not contain a quote (')", w);
        const int hosts = dlp_hostfile_hosts(c->hostfile);
        if (hosts < 0) return DLP_ERR(DLP_ERR_IO, "%s: hostfile %s: cannot read it", w, c->hostfile);
        if (hosts < c->nodes)
            return DLP_ERR(DLP_ERR_FORMAT, "%s: \"nodes\": %d but hostfile %s names %d host%s", w, c->nodes, c->hostfile,
                           hosts, hosts == 1 ? "" : "s");
    }
    return DLP_OK;
}

// The configurations: from the file, or the built-in sweep on what this build has (a configuration on a backend
// not built here is left out, said).
static dlp_status load_configs(const dlp_validate_sweep_req *req, dlp_validate_sweep *sw) {
    dlp_validate_config *cfgs = sw->cfgs;
    if (req->configs_path) {
        json_t *a;
        DLP_CHECK(dlp_json_load(req->configs_path, &a));
        dlp_status st = dlp_validate_configs_from_json(a, req->configs_path, cfgs, DLP_VALIDATE_MAX_CONFIGS, &sw->n);
        if (st == DLP_OK) st = nodes_from_json(a, req->configs_path, cfgs, sw->n);
        json_decref(a);
        return st;
    }
    int nb = dlp_validate_builtin(req->quick, cfgs, DLP_VALIDATE_MAX_CONFIGS);
    for (int i = 0; i < nb; i++) {
        const dlp_backend *ops = dlp_backend_find(cfgs[i].device, NULL);
        char why[256] = "";
        if (!ops || dlp_backend_available(ops, why, sizeof why) != DLP_OK) {
            char label[160];
            dlp_validate_config_label(&cfgs[i], label, sizeof label);
            say(req, "validate: left out %s: the %.*s backend is not available here%s%s", label,
                (int)strcspn(cfgs[i].device, ":"), cfgs[i].device, why[0] ? ": " : "", why);
            dlp_err_clear();
            continue;
        }
        cfgs[sw->n++] = cfgs[i];
    }
    return DLP_OK;
}

// The machine: read, or measured once (quick) before the sweep.
static dlp_status load_machine(const dlp_validate_sweep_req *req, dlp_validate_sweep *sw) {
    if (req->profile_path) return dlp_profile_read(req->profile_path, sw->prof);
    say(req, "validate: no --profile: probing this machine first (quick)");
    dlp_probe_cfg pc;
    dlp_probe_cfg_init(&pc);
    pc.data = req->data;
    pc.quick = 1;
    pc.progress = req->progress;
    pc.progress_ctx = req->ctx;
    pc.seed = req->seed;
    DLP_CHECK(dlp_probe_run(&pc, sw->prof, &sw->probe_details));
    if (req->save_profile) {
        json_t *o = dlp_profile_to_json(sw->prof);
        json_object_set(o, "probe", sw->probe_details);
        dlp_status st = dlp_json_write(o, req->save_profile, DLP_WRITE_NOCLOBBER);
        json_decref(o);
        if (st) return st;
        say(req, "validate: profile written to %s", req->save_profile);
    }
    return DLP_OK;
}

dlp_status dlp_validate_sweep_open(const dlp_validate_sweep_req *req, dlp_validate_sweep *sw) {
    memset(sw, 0, sizeof *sw);
    sw->cfgs = calloc(DLP_VALIDATE_MAX_CONFIGS, sizeof *sw->cfgs);
    sw->rows = calloc(DLP_VALIDATE_MAX_CONFIGS, sizeof *sw->rows);
    sw->ape = calloc(DLP_VALIDATE_MAX_CONFIGS, sizeof *sw->ape);
    sw->prof = malloc(sizeof *sw->prof);
    sw->stats = malloc(sizeof *sw->stats);
    if (!sw->cfgs || !sw->rows || !sw->ape || !sw->prof || !sw->stats) return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    DLP_CHECK(load_configs(req, sw));
    if (dlp_catalog_load(req->catalog_dir, &sw->cat) != DLP_OK) {  // only sim:<gpu> devices need it
        if (req->catalog_dir) return dlp_err_status();
        dlp_err_clear();
        sw->cat = NULL;
    }
    DLP_CHECK(dlp_data_open(req->data, "train", NULL, &sw->ds, sw->where, sizeof sw->where));
    int skipped = 0;
    DLP_CHECK(dlp_dataset_stats_of(sw->ds, 0, 20000, sw->stats, &skipped));
    DLP_CHECK(load_machine(req, sw));
    if (req->also_profile_path) {
        sw->prof2 = malloc(sizeof *sw->prof2);
        sw->pred2 = calloc(DLP_VALIDATE_MAX_CONFIGS, sizeof *sw->pred2);
        sw->pred2_speed = calloc(DLP_VALIDATE_MAX_CONFIGS, sizeof *sw->pred2_speed);
        sw->pred2_share = calloc(DLP_VALIDATE_MAX_CONFIGS, sizeof *sw->pred2_share);
        sw->pred2_mean_share = calloc(DLP_VALIDATE_MAX_CONFIGS, sizeof *sw->pred2_mean_share);
        if (!sw->prof2 || !sw->pred2 || !sw->pred2_speed || !sw->pred2_share || !sw->pred2_mean_share)
            return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        DLP_CHECK(dlp_profile_read(req->also_profile_path, sw->prof2));
        for (int i = 0; i < DLP_VALIDATE_MAX_CONFIGS; i++) sw->pred2[i] = sw->pred2_speed[i] = sw->pred2_share[i] = sw->pred2_mean_share[i] = NAN;
    }

    dlp_validate_cfg *vc = &sw->vc;
    dlp_validate_cfg_init(vc);
    vc->profile = sw->prof;
    vc->catalog = sw->cat;
    vc->ds = sw->ds;
    vc->stats = sw->stats;
    vc->min_steps = req->steps;
    vc->min_seconds = req->seconds;
    vc->max_seconds = req->max_seconds;
    vc->retries = req->retries < 0 ? 0 : req->retries;
    vc->canary_base_gflops = sw->prof->host.canary_gflops;
    vc->at_speed = sw->prof->host.canary_samples > 0 && sw->prof->host.canary_gflops > 0;
    vc->seed = req->seed;
    for (int i = 0; i < sw->n; i++) {  // devices set at the knee: their rate from the loader's predicted rate
        dlp_status st = dlp_validate_resolve_balance(vc, &sw->cfgs[i]);
        if (st) {
            char label[160], msg[512];
            dlp_validate_config_label(&sw->cfgs[i], label, sizeof label);
            snprintf(msg, sizeof msg, "%s", dlp_err_msg());
            return DLP_ERR(st, "configuration %d (%s): %s", i + 1, label, msg);
        }
    }
    return DLP_OK;
}

void dlp_validate_sweep_run(dlp_validate_sweep *sw, int i) {
    dlp_validate_run_config(&sw->vc, &sw->cfgs[i], &sw->rows[i]);
    sw->ape[i] = sw->rows[i].ok ? sw->rows[i].ape : NAN;
    if (sw->prof2) {
        dlp_validate_cfg v2 = sw->vc;
        v2.profile = sw->prof2;
        v2.canary_base_gflops = sw->prof2->host.canary_gflops;
        dlp_validate_predict_other(&v2, &sw->rows[i], sw->prof->host.canary_gflops, sw->prof->host.canary1_gflops,
                                   &sw->pred2[i], &sw->pred2_speed[i]);
        sw->pred2_share[i] = dlp_validate_predict_other_share(&v2, &sw->rows[i]);
        sw->pred2_mean_share[i] = dlp_validate_predict_other_mean_share(&v2, &sw->rows[i]);
    }
}

void dlp_validate_sweep_summarize(dlp_validate_sweep *sw, double seconds) {
    const int n = sw->n;
    sw->seconds = seconds;
    sw->nok = sw->agree = sw->nfinite = sw->nprobed = sw->busy = 0;
    for (int i = 0; i < n; i++) {
        const dlp_validate_row *r = &sw->rows[i];
        if (r->ok) {
            sw->nok++;
            sw->agree += strcmp(r->predicted_regime, r->observed_regime) == 0;
        }
        sw->busy += r->ok && isfinite(r->other_load_cores) && r->other_load_cores > 0.2;
    }
    sw->mape = dlp_validate_mape(sw->ape, n);
    double *ape_probed = calloc((size_t)n + 1, sizeof *ape_probed);  // the runs on the machine as probed
    for (int i = 0; i < n; i++) {
        sw->nfinite += isfinite(sw->ape[i]) != 0;
        if (ape_probed && isfinite(sw->ape[i]) && dlp_validate_disturbance(&sw->vc, &sw->rows[i]) <= 1)
            ape_probed[sw->nprobed++] = sw->ape[i];
    }
    sw->mape_probed = ape_probed && sw->nprobed ? dlp_validate_mape(ape_probed, sw->nprobed) : NAN;
    // at the speed each run saw, and the machine's figures over the runs
    sw->nspeed = 0;
    double steal = 0, spd[DLP_VALIDATE_MAX_CONFIGS];
    int nsteal = 0, nspd = 0;
    for (int i = 0; ape_probed && i < n; i++) {
        const dlp_validate_row *r = &sw->rows[i];
        if (r->ok && isfinite(r->ape_at_speed)) ape_probed[sw->nspeed++] = r->ape_at_speed;
        if (r->ok && isfinite(r->steal)) steal += r->steal, nsteal++;
        if (r->ok && isfinite(r->speed)) spd[nspd++] = r->speed;
    }
    sw->mape_at_speed = ape_probed && sw->nspeed ? dlp_validate_mape(ape_probed, sw->nspeed) : NAN;
    // at the CPU share each run's threads got
    sw->nshare = 0;
    sw->share_min = sw->share_max = NAN;
    for (int i = 0; ape_probed && i < n; i++) {
        const dlp_validate_row *r = &sw->rows[i];
        if (!r->ok || !isfinite(r->ape_at_share)) continue;
        ape_probed[sw->nshare++] = r->ape_at_share;
        if (!(r->cpu_share >= sw->share_min)) sw->share_min = r->cpu_share;
        if (!(r->cpu_share <= sw->share_max)) sw->share_max = r->cpu_share;
    }
    sw->mape_at_share = ape_probed && sw->nshare ? dlp_validate_mape(ape_probed, sw->nshare) : NAN;
    int nmean = 0;
    for (int i = 0; ape_probed && i < n; i++)
        if (sw->rows[i].ok && isfinite(sw->rows[i].ape_at_mean_share)) ape_probed[nmean++] = sw->rows[i].ape_at_mean_share;
    sw->mape_at_mean_share = ape_probed && nmean ? dlp_validate_mape(ape_probed, nmean) : NAN;
    sw->steal_mean = nsteal ? steal / nsteal : NAN;
    sw->speed_min = sw->speed_max = NAN;
    for (int i = 0; i < nspd; i++) {
        if (!(spd[i] >= sw->speed_min)) sw->speed_min = spd[i];
        if (!(spd[i] <= sw->speed_max)) sw->speed_max = spd[i];
    }
    free(ape_probed);
    if (sw->prof2) {
        double a[DLP_VALIDATE_MAX_CONFIGS], b[DLP_VALIDATE_MAX_CONFIGS], c[DLP_VALIDATE_MAX_CONFIGS];
        double d[DLP_VALIDATE_MAX_CONFIGS];
        int nd = 0;
        sw->n2 = sw->n2_speed = sw->n2_share = 0;
        for (int i = 0; i < n; i++) {
            const dlp_validate_row *r = &sw->rows[i];
            if (!r->ok) continue;
            const double x = dlp_validate_ape(sw->pred2[i], r->measured_img_per_s);
            const double y = dlp_validate_ape(sw->pred2_speed[i], r->measured_img_per_s);
            if (isfinite(x)) a[sw->n2++] = x;
            if (isfinite(y)) b[sw->n2_speed++] = y;
            const double z = dlp_validate_ape(sw->pred2_share[i], dlp_validate_measured_at_share(r));
            if (isfinite(z)) c[sw->n2_share++] = z;
            const double zm = dlp_validate_ape(sw->pred2_mean_share[i], dlp_validate_measured_at_share(r));
            if (isfinite(zm)) d[nd++] = zm;
        }
        sw->mape2_share = sw->n2_share ? dlp_validate_mape(c, sw->n2_share) : NAN;
        sw->mape2_mean_share = nd ? dlp_validate_mape(d, nd) : NAN;
        sw->mape2 = sw->n2 ? dlp_validate_mape(a, sw->n2) : NAN;
        sw->mape2_speed = sw->n2_speed ? dlp_validate_mape(b, sw->n2_speed) : NAN;
    }
    sw->nsc = dlp_validate_scaling_pairs(sw->rows, n, sw->sc, DLP_VALIDATE_MAX_CONFIGS);
}

void dlp_validate_sweep_json(const dlp_validate_sweep *sw, const char *profile_label, json_t *res) {
    json_object_set_new(res, "profile", json_string(profile_label));
    json_object_set_new(res, "machine", dlp_profile_to_json(sw->prof));
    json_object_set_new(res, "dataset", dlp_dataset_stats_to_json(sw->stats));
    json_t *a = json_array();
    for (int i = 0; i < sw->n; i++) json_array_append_new(a, dlp_validate_row_to_json(&sw->rows[i]));
    json_object_set_new(res, "rows", a);
    json_object_set_new(res, "mape", dlp_json_real_or_null(sw->mape));
    json_object_set_new(res, "mape_as_probed", dlp_json_real_or_null(sw->mape_probed));
    json_object_set_new(res, "configurations_as_probed", json_integer(sw->nprobed));
    json_object_set_new(res, "mape_at_speed", dlp_json_real_or_null(sw->mape_at_speed));
    json_object_set_new(res, "configurations_at_speed", json_integer(sw->nspeed));
    json_object_set_new(res, "mape_at_share", dlp_json_real_or_null(sw->mape_at_share));
    json_object_set_new(res, "mape_at_mean_share", dlp_json_real_or_null(sw->mape_at_mean_share));
    json_object_set_new(res, "configurations_at_share", json_integer(sw->nshare));
    json_object_set_new(res, "cpu_share_min", dlp_json_real_or_null(sw->share_min));
    json_object_set_new(res, "cpu_share_max", dlp_json_real_or_null(sw->share_max));
    json_object_set_new(res, "steal_mean", dlp_json_real_or_null(sw->steal_mean));
    json_object_set_new(res, "speed_min", dlp_json_real_or_null(sw->speed_min));
    json_object_set_new(res, "speed_max", dlp_json_real_or_null(sw->speed_max));
    json_object_set_new(res, "scaling", dlp_validate_scaling_to_json(sw->rows, sw->sc, sw->nsc));
    if (sw->prof2) {
        json_t *o = json_object(), *pa = json_array();
        for (int i = 0; i < sw->n; i++)
            json_array_append_new(pa, json_pack("{s:o, s:o, s:o, s:o}", "predicted_img_per_s",
                                                dlp_json_real_or_null(sw->pred2[i]), "predicted_at_speed_img_per_s",
                                                dlp_json_real_or_null(sw->pred2_speed[i]), "predicted_at_share_img_per_s",
                                                dlp_json_real_or_null(sw->pred2_share[i]),
                                                "predicted_at_mean_share_img_per_s",
                                                dlp_json_real_or_null(sw->pred2_mean_share[i])));
        json_object_set_new(o, "machine", dlp_profile_to_json(sw->prof2));
        json_object_set_new(o, "rows", pa);
        json_object_set_new(o, "mape", dlp_json_real_or_null(sw->mape2));
        json_object_set_new(o, "mape_at_speed", dlp_json_real_or_null(sw->mape2_speed));
        json_object_set_new(o, "mape_at_share", dlp_json_real_or_null(sw->mape2_share));
        json_object_set_new(o, "mape_at_mean_share", dlp_json_real_or_null(sw->mape2_mean_share));
        json_object_set_new(res, "also_profile", o);
    }
    json_object_set_new(res, "configurations_ok", json_integer(sw->nok));
    json_object_set_new(res, "regime_agree", json_integer(sw->agree));
    json_object_set_new(res, "seconds", json_real(sw->seconds));
    dlp_host_info h;
    dlp_host_probe(&h);
    json_object_set_new(res, "host", dlp_host_to_json(&h));
    json_object_set_new(res, "versions", dlp_versions_to_json());
}

void dlp_validate_sweep_free(dlp_validate_sweep *sw) {
    json_decref(sw->probe_details);
    dlp_dataset_free(sw->ds);
    dlp_catalog_free(sw->cat);
    free(sw->cfgs);
    free(sw->rows);
    free(sw->ape);
    free(sw->prof);
    free(sw->prof2);
    free(sw->pred2);
    free(sw->pred2_speed);
    free(sw->pred2_share);
    free(sw->pred2_mean_share);
    free(sw->stats);
    memset(sw, 0, sizeof *sw);
}
