// cli/validate: `dlperf validate` — a sweep of real training runs, each predicted from a machine profile alone:
// the table of regimes, predicted and measured images/s and errors, the MAPE; JSON (dlperf.validate/1) too.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/opts.h"
#include "backend/backend.h"
#include "data/source.h"
#include "hw/host.h"
#include "perf/datastats.h"
#include "perf/probe.h"
#include "perf/validate.h"

static void progress(void *ctx, const char *line) {
    (void)ctx;
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

static void print_row(int i, const dlp_validate_row *r) {
    char reg[40];
    snprintf(reg, sizeof reg, "%s/%s", r->predicted_regime ? r->predicted_regime : "-",
             r->observed_regime ? r->observed_regime : "-");
    if (!r->ok) {
        printf("%3d  %-52s %-18s %9.1f %9s %7s  failed: %s\n", i + 1, r->label, reg, r->predicted_img_per_s, "-", "-",
               r->error);
    } else {
        char other[24] = "-";
        if (isfinite(r->other_load_cores))
            snprintf(other, sizeof other, r->runs > 1 ? "%.2f/%d" : "%.2f", r->other_load_cores, r->runs);
        char speed[16] = "-";
        if (isfinite(r->speed)) snprintf(speed, sizeof speed, "%.2f", r->speed);
        printf("%3d  %-52s %-18s %9.1f %9.1f %6.1f%% %6s %5s%s\n", i + 1, r->label, reg, r->predicted_img_per_s,
               r->measured_img_per_s, 100 * r->ape, other, speed,
               strcmp(r->predicted_regime, r->observed_regime) != 0 ? "  (regime differs)" : "");
    }
    fflush(stdout);
}

int dlp_cli_validate(int argc, char **argv) {
    const char *profile_path, *configs_path, *data, *json_path, *catalog_dir, *save_profile;
    int quick, steps, list, retries, published;
    double seconds, max_seconds;
    int64_t seed;
    dlp_opt opts[] = {
        {"profile", 0, DLP_OPT_STR, &profile_path, NULL, "FILE", "the machine profile (dlperf probe); none: probe first (--quick)", NULL, 0},
        {"configs", 0, DLP_OPT_STR, &configs_path, NULL, "FILE", "a JSON list of configurations (default: the built-in sweep)", NULL, 0},
        {"data", 'd', DLP_OPT_STR, &data, "synthetic", "DIR", "the training set every run reads", NULL, 0},
        {"quick", 0, DLP_OPT_FLAG, &quick, NULL, NULL, "the built-in sweep's short version (and a quick probe)", NULL, 0},
        {"steps", 's', DLP_OPT_INT, &steps, "8", "N", "measured steps per configuration at least (after the warm-up)", NULL, 0},
        {"seconds", 0, DLP_OPT_DOUBLE, &seconds, "10", "S", "measured seconds per configuration at least", NULL, 0},
        {"max-seconds", 0, DLP_OPT_DOUBLE, &max_seconds, "30", "S", "measured seconds per configuration at most", NULL, 0},
        {"retries", 0, DLP_OPT_INT, &retries, "2", "N", "run a configuration again (up to N times) while other processes kept more than 0.2 cores busy or the cores ran more than 8% off their speed while probed; the run closest to the probed machine counts", NULL, 0},
        {"list", 0, DLP_OPT_FLAG, &list, NULL, NULL, "print the configurations and their predictions; run nothing (without --profile a quick probe runs first)", NULL, 0},
        {"save-profile", 0, DLP_OPT_STR, &save_profile, NULL, "FILE", "when probing first, keep the profile here", NULL, 0},
        {"catalog", 0, DLP_OPT_STR, &catalog_dir, NULL, "DIR", "catalog directory for sim:<gpu> devices", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &seed, "1", "N", "data order and augmentation seed of the runs", NULL, 0},
        {"json", 'j', DLP_OPT_STR, &json_path, NULL, "FILE", "write the result (dlperf.validate/1)", NULL, 0},
        {"published", 0, DLP_OPT_FLAG, &published, NULL, NULL, "instead of a sweep: the GPU model against the catalog's published figures, each GPU held out (docs/model.md)", NULL, 0},
        {0},
    };
    int rest;
    dlp_status st = dlp_opts_parse(
        opts, "usage: dlperf validate [--profile FILE] [--configs FILE] [--quick] [--steps N] [--seconds S] [--json FILE]\n"
              "Runs a sweep of real training configurations (each a short run through the training loop with the real\n"
              "loader), predicts each from the machine profile alone, and prints predicted vs measured img/s, the\n"
              "absolute percentage error and the MAPE.",
        argc, argv, &rest);
    if (st) return dlp_cli_fail(st);
    if (steps < 3 || !(seconds >= 0) || !(max_seconds > 0) || max_seconds < seconds)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--steps must be >= 3 and 0 <= --seconds <= --max-seconds"));
    if (json_path && (st = dlp_check_new_output(json_path, "--json"))) return dlp_cli_fail(st);
    if (published) return dlp_cli_fail(dlp_validate_published_run(catalog_dir, json_path));
    if (save_profile && (st = dlp_check_new_output(save_profile, "--save-profile"))) return dlp_cli_fail(st);

    dlp_validate_config *cfgs = calloc(DLP_VALIDATE_MAX_CONFIGS, sizeof *cfgs);
    dlp_validate_row *rows = calloc(DLP_VALIDATE_MAX_CONFIGS, sizeof *rows);
    double *ape = calloc(DLP_VALIDATE_MAX_CONFIGS, sizeof *ape);
    dlp_profile *prof = malloc(sizeof *prof);
    dlp_dataset_stats *stats = malloc(sizeof *stats);
    dlp_dataset *ds = NULL;
    dlp_catalog *cat = NULL;
    json_t *res = NULL, *probe_details = NULL;
    int n = 0;
    if (!cfgs || !rows || !ape || !prof || !stats) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (configs_path) {
        json_t *a;
        DLP_CHECK_GOTO(st, dlp_json_load(configs_path, &a), out);
        st = dlp_validate_configs_from_json(a, configs_path, cfgs, DLP_VALIDATE_MAX_CONFIGS, &n);
        json_decref(a);
        if (st) goto out;
    } else {
        // The built-in sweep on what this build has: a configuration on a backend not built here is left out, said.
        int nb = dlp_validate_builtin(quick, cfgs, DLP_VALIDATE_MAX_CONFIGS);
        for (int i = 0; i < nb; i++) {
            const dlp_backend *ops = dlp_backend_find(cfgs[i].device, NULL);
            char why[256] = "";
            if (!ops || dlp_backend_available(ops, why, sizeof why) != DLP_OK) {
                char label[160];
                dlp_validate_config_label(&cfgs[i], label, sizeof label);
                fprintf(stderr, "validate: left out %s: the %.*s backend is not available here%s%s\n", label,
                        (int)strcspn(cfgs[i].device, ":"), cfgs[i].device, why[0] ? ": " : "", why);
                dlp_err_clear();
                continue;
            }
            cfgs[n++] = cfgs[i];
        }
    }
    if (dlp_catalog_load(catalog_dir, &cat) != DLP_OK) {  // only sim:<gpu> devices need it
        if (catalog_dir) goto out_err;
        dlp_err_clear();
        cat = NULL;
    }
    char where[4096];
    DLP_CHECK_GOTO(st, dlp_data_open(data, "train", NULL, &ds, where, sizeof where), out);
    int skipped = 0;
    DLP_CHECK_GOTO(st, dlp_dataset_stats_of(ds, 0, 20000, stats, &skipped), out);

    // The machine: measured once, before the sweep.
    if (profile_path) {
        DLP_CHECK_GOTO(st, dlp_profile_read(profile_path, prof), out);
    } else {
        fprintf(stderr, "validate: no --profile: probing this machine first (quick)\n");
        dlp_probe_cfg pc;
        dlp_probe_cfg_init(&pc);
        pc.data = data;
        pc.quick = 1;
        pc.progress = progress;
        pc.seed = (uint64_t)seed;
        DLP_CHECK_GOTO(st, dlp_probe_run(&pc, prof, &probe_details), out);
        if (save_profile) {
            json_t *o = dlp_profile_to_json(prof);
            json_object_set(o, "probe", probe_details);
            st = dlp_json_write(o, save_profile, DLP_WRITE_NOCLOBBER);
            json_decref(o);
            if (st) goto out;
            fprintf(stderr, "validate: profile written to %s\n", save_profile);
        }
    }

    dlp_validate_cfg vc;
    dlp_validate_cfg_init(&vc);
    vc.profile = prof;
    vc.catalog = cat;
    vc.ds = ds;
    vc.stats = stats;
    vc.min_steps = steps;
    vc.min_seconds = seconds;
    vc.max_seconds = max_seconds;
    vc.retries = retries < 0 ? 0 : retries;
    vc.canary_base_gflops = prof->host.canary_gflops;
    vc.seed = (uint64_t)seed;
    for (int i = 0; i < n; i++)  // devices set at the knee: their rate from the loader's predicted rate
        if ((st = dlp_validate_resolve_balance(&vc, &cfgs[i]))) {
            char label[160], msg[512];
            dlp_validate_config_label(&cfgs[i], label, sizeof label);
            snprintf(msg, sizeof msg, "%s", dlp_err_msg());
            st = DLP_ERR(st, "configuration %d (%s): %s", i + 1, label, msg);
            goto out;
        }
    if (list) {
        printf("%3s  %-52s %-18s %9s   %s\n", "#", "configuration", "regime", "predicted", "(bottleneck)");
    } else {
        fprintf(stderr, "validate: %d configuration(s) on %s (%lld images); each runs a warm-up (>= 1 s and the batches "
                "the ring held), then is measured for >= %d steps and >= %.0f s (at most %.0f s; cold runs end with their "
                "first epoch): about %.0f-%.0f minutes in all\n", n, where, (long long)ds->n, steps, seconds, max_seconds,
                n * (seconds + 4) / 60, n * (max_seconds + 8) / 60);
        printf("%3s  %-52s %-18s %9s %9s %7s %6s %5s\n", "#", "configuration", "regime pred/obs", "predicted", "measured",
               "APE", "other", "speed");
    }
    int64_t t0 = dlp_now_ns();
    int agree = 0, nok = 0;
    for (int i = 0; i < n; i++) {
        if (list) {
            dlp_prediction *pr = malloc(sizeof *pr);
            rows[i].cfg = cfgs[i];
            dlp_validate_config_label(&cfgs[i], rows[i].label, sizeof rows[i].label);
            dlp_status ps = pr ? dlp_validate_predict(&vc, &cfgs[i], pr) : DLP_ERR(DLP_ERR_NOMEM, "out of memory");
            if (ps == DLP_OK)
                printf("%3d  %-52s %-18s %9.1f   (%s)\n", i + 1, rows[i].label, dlp_validate_regime_of_stage(pr->bottleneck),
                       pr->img_per_s, dlp_stage_name(pr->bottleneck));
            else
                printf("%3d  %-52s prediction failed: %s\n", i + 1, rows[i].label, dlp_err_msg());
            dlp_err_clear();
            free(pr);
            continue;
        }
        fprintf(stderr, "validate: [%d/%d] %s\n", i + 1, n, cfgs[i].name[0] ? cfgs[i].name : cfgs[i].device);
        dlp_validate_run_config(&vc, &cfgs[i], &rows[i]);
        ape[i] = rows[i].ok ? rows[i].ape : NAN;
        if (rows[i].ok) {
            nok++;
            agree += strcmp(rows[i].predicted_regime, rows[i].observed_regime) == 0;
        }
        print_row(i, &rows[i]);
    }
    if (list) goto out;
    double mape = dlp_validate_mape(ape, n);
    double secs = dlp_ns_to_s(dlp_now_ns() - t0);
    int nfinite = 0, nprobed = 0;
    double *ape_probed = calloc((size_t)n + 1, sizeof *ape_probed);  // the runs on the machine as probed
    for (int i = 0; i < n; i++) {
        nfinite += isfinite(ape[i]) != 0;
        if (ape_probed && isfinite(ape[i]) && dlp_validate_disturbance(&vc, &rows[i]) <= 1) ape_probed[nprobed++] = ape[i];
    }
    const double mape_probed = ape_probed && nprobed ? dlp_validate_mape(ape_probed, nprobed) : NAN;
    free(ape_probed);
    if (nfinite == 0)
        printf("MAPE: none (no configuration was measured: %d failed); %.1f minutes\n", n - nok, secs / 60);
    else
        printf("MAPE %.1f%% over %d configuration(s) (%d failed); regime predicted = observed in %d of %d; %.1f "
               "minutes\n", 100 * mape, nfinite, n - nok, agree, nok, secs / 60);
    if (nfinite > 0 && nprobed < nfinite)
        printf("MAPE %.1f%% over the %d configuration(s) that ran on the machine as probed (other <= %.1f cores, speed "
               "within %.0f%%); the other %d ran on a busier, slower or faster machine than the profile describes\n",
               100 * mape_probed, nprobed, vc.disturbed_cores, 100 * vc.speed_tolerance, nfinite - nprobed);
    dlp_validate_scaling sc[DLP_VALIDATE_MAX_CONFIGS];
    const int nsc = dlp_validate_scaling_pairs(rows, n, sc, DLP_VALIDATE_MAX_CONFIGS);
    for (int i = 0; i < nsc; i++)
        printf("scaling  %s vs %s: predicted %.2fx, measured %.2fx (APE %.1f%%)\n", rows[sc[i].ranks_row].label,
               rows[sc[i].single_row].label, sc[i].predicted_ratio, sc[i].measured_ratio, 100 * sc[i].ape);
    printf("(img/s: predicted from the profile alone, measured as the median of the steady windows; other: cores busy "
           "with other processes while measured, which a quiet machine has at ~0, /N: the least disturbed of N runs; "
           "speed: the cores' speed around the run over their speed while probed, 1.00: the same machine)\n");
    int busy = 0;
    for (int i = 0; i < n; i++) busy += rows[i].ok && isfinite(rows[i].other_load_cores) && rows[i].other_load_cores > 0.2;
    if (busy)
        printf("warning: %d of %d configurations ran while other processes kept more than 0.2 cores busy: their errors "
               "measure the machine's load as much as the model (and so does the profile if it was probed so); run "
               "probe and validate on a quiet machine\n", busy, nok);
    if (json_path) {
        res = dlp_json_result_new("dlperf.validate/1", 0, NULL);
        json_object_set_new(res, "options", dlp_opts_to_json(opts));
        json_object_set_new(res, "profile", json_string(profile_path ? profile_path : "(probed first, quick)"));
        json_object_set_new(res, "machine", dlp_profile_to_json(prof));
        json_object_set_new(res, "dataset", dlp_dataset_stats_to_json(stats));
        json_t *a = json_array();
        for (int i = 0; i < n; i++) json_array_append_new(a, dlp_validate_row_to_json(&rows[i]));
        json_object_set_new(res, "rows", a);
        json_object_set_new(res, "mape", dlp_json_real_or_null(mape));
        json_object_set_new(res, "mape_as_probed", dlp_json_real_or_null(mape_probed));
        json_object_set_new(res, "configurations_as_probed", json_integer(nprobed));
        json_object_set_new(res, "scaling", dlp_validate_scaling_to_json(rows, sc, nsc));
        json_object_set_new(res, "configurations_ok", json_integer(nok));
        json_object_set_new(res, "regime_agree", json_integer(agree));
        json_object_set_new(res, "seconds", json_real(secs));
        dlp_host_info h;
        dlp_host_probe(&h);
        json_object_set_new(res, "host", dlp_host_to_json(&h));
        json_object_set_new(res, "versions", dlp_versions_to_json());
        DLP_CHECK_GOTO(st, dlp_json_write(res, json_path, DLP_WRITE_NOCLOBBER), out);
    }
    if (nok < n) st = DLP_ERR(DLP_ERR_INTERNAL, "%d of %d configurations failed (see the table)", n - nok, n);
    goto out;
out_err:
    st = dlp_err_status();
out:
    json_decref(res);
    json_decref(probe_details);
    dlp_dataset_free(ds);
    dlp_catalog_free(cat);
    free(cfgs);
    free(rows);
    free(ape);
    free(prof);
    free(stats);
    return dlp_cli_fail(st);
}
