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
#include "perf/validate.h"
#include "perf/validate_sweep.h"

static void progress(void *ctx, const char *line) {
    (void)ctx;
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

// The run's CPU share and the prediction at it (issue 35), after the "at speed" columns.
static void validate_share_cols(const dlp_validate_row *r, char *at, size_t size) {
    size_t l = strlen(at);
    if (isfinite(r->ape_at_share)) {
        char slow[16] = "    -";  // no thread wanted a core a quarter of the run (an emulated device's loader)
        if (isfinite(r->cpu_share_slowest)) snprintf(slow, sizeof slow, "%5.2f", r->cpu_share_slowest);
        snprintf(at + l, size - l, " %5.2f %s %9.1f %6.1f%%", r->cpu_share, slow, r->predicted_at_share_img_per_s,
                 100 * r->ape_at_share);
        l = strlen(at);
        // the work speed around a cpu-device run over the profile's (the prediction at share holds at it)
        if (isfinite(r->work_rel)) snprintf(at + l, size - l, "  work %.2f", r->work_rel);
        l = strlen(at);
        if (isfinite(r->decode_rel)) snprintf(at + l, size - l, "  loader %.2f", r->decode_rel);
    }
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
        char speed[16] = "-", at[128] = "";
        if (isfinite(r->speed)) snprintf(speed, sizeof speed, "%.2f", r->speed);
        if (isfinite(r->ape_at_speed))
            snprintf(at, sizeof at, " %9.1f %6.1f%%", r->predicted_at_speed_img_per_s, 100 * r->ape_at_speed);
        validate_share_cols(r, at, sizeof at);
        printf("%3d  %-52s %-18s %9.1f %9.1f %6.1f%% %6s %5s%s%s\n", i + 1, r->label, reg, r->predicted_img_per_s,
               r->measured_img_per_s, 100 * r->ape, other, speed, at,
               strcmp(r->predicted_regime, r->observed_regime) != 0 ? "  (regime differs)" : "");
    }
    fflush(stdout);
}

// --list: each configuration and its prediction; nothing runs.
static void list_predictions(const dlp_validate_sweep *sw) {
    printf("%3s  %-52s %-18s %9s   %s\n", "#", "configuration", "regime", "predicted", "(bottleneck)");
    for (int i = 0; i < sw->n; i++) {
        char label[160];
        dlp_prediction *pr = malloc(sizeof *pr);
        dlp_validate_config_label(&sw->cfgs[i], label, sizeof label);
        dlp_status ps = pr ? dlp_validate_predict(&sw->vc, &sw->cfgs[i], pr) : DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        if (ps == DLP_OK)
            printf("%3d  %-52s %-18s %9.1f   (%s)\n", i + 1, label, dlp_validate_regime_of_stage(pr->bottleneck),
                   pr->img_per_s, dlp_stage_name(pr->bottleneck));
        else
            printf("%3d  %-52s prediction failed: %s\n", i + 1, label, dlp_err_msg());
        dlp_err_clear();
        free(pr);
    }
}

// The share exponents the probe measured for the profile's cpu rows (issue 35): the predictions at a run's share
// scale those rows by the share ratio to that power, the others linearly.
static void print_share_exps(const char *which, const dlp_profile *p) {
    char buf[512] = "";
    size_t l = 0;
    for (int d = 0; d < p->ndevices; d++)
        for (int i = 0; i < p->devices[d].nrates && l + 64 < sizeof buf; i++) {
            const dlp_rate *r = &p->devices[d].rates[i];
            if (r->share_exp > 0)
                l += (size_t)snprintf(buf + l, sizeof buf - l, "%s%s %s %s %dpx %s %dt %.2f", l ? ", " : "",
                                      p->devices[d].name, r->task == DLP_TASK_TRAIN ? "train" : "infer", r->model,
                                      r->size, dlp_prec_name(r->prec), r->threads, r->share_exp);
        }
    printf("share exponents of %s (step time ~ share^-e, measured by its probe; other rows linear): %s\n", which,
           l ? buf : "none");
}

static void print_summary(const dlp_validate_sweep *sw) {
    const int n = sw->n;
    if (sw->nfinite == 0)
        printf("MAPE: none (no configuration was measured: %d failed); %.1f minutes\n", n - sw->nok, sw->seconds / 60);
    else
        printf("MAPE %.1f%% over %d configuration(s) (%d failed); regime predicted = observed in %d of %d; %.1f "
               "minutes\n", 100 * sw->mape, sw->nfinite, n - sw->nok, sw->agree, sw->nok, sw->seconds / 60);
    if (sw->nfinite > 0 && sw->nprobed < sw->nfinite && sw->vc.at_speed)
        printf("MAPE %.1f%% over the %d configuration(s) whose speed held still (moved less than %.0f%% during the "
               "run); the speed of the other %d moved more\n", 100 * sw->mape_probed, sw->nprobed,
               100 * sw->vc.speed_tolerance, sw->nfinite - sw->nprobed);
    else if (sw->nfinite > 0 && sw->nprobed < sw->nfinite)
        printf("MAPE %.1f%% over the %d configuration(s) that ran on the machine as probed (other <= %.1f cores, speed "
               "within %.0f%%); the other %d ran on a busier, slower or faster machine than the profile describes\n",
               100 * sw->mape_probed, sw->nprobed, sw->vc.disturbed_cores, 100 * sw->vc.speed_tolerance,
               sw->nfinite - sw->nprobed);
    if (sw->nspeed > 0)
        printf("MAPE %.1f%% at the speed each run saw (%d configuration(s); speed %.2f-%.2f of the profile's %.1f "
               "GFLOP/s, steal %.1f%% of the CPUs' time): the model's error with the host's drift taken out\n",
               100 * sw->mape_at_speed, sw->nspeed, sw->speed_min, sw->speed_max, sw->prof->host.canary_gflops,
               isfinite(sw->steal_mean) ? 100 * sw->steal_mean : 0);
    if (sw->nshare > 0)
        printf("MAPE %.1f%% at the CPU share each run's threads got (%d configuration(s); share %.2f-%.2f against the "
               "probe's %.2f; multi-thread cpu compute at its slowest thread's share against the probe's %.2f; %.1f%% "
               "with those by the mean share)\n", 100 * sw->mape_at_share, sw->nshare, sw->share_min, sw->share_max,
               sw->prof->host.cpu_share, sw->prof->host.cpu_share_slowest, 100 * sw->mape_at_mean_share);
    if (sw->nshare > 0) print_share_exps("the profile", sw->prof);
    if (sw->nshare > 0 && sw->prof2) print_share_exps("--also-profile", sw->prof2);
    if (sw->prof2)
        printf("the same runs from --also-profile (speed %.1f GFLOP/s as probed): MAPE %.1f%% at its probed speed, "
               "%.1f%% at the speed each run saw, %.1f%% at the CPU share each run got (%.1f%% by the mean share "
               "alone)\n", sw->prof2->host.canary_gflops, 100 * sw->mape2, 100 * sw->mape2_speed, 100 * sw->mape2_share,
               100 * sw->mape2_mean_share);
    for (int i = 0; i < sw->nsc; i++)
        printf("scaling  %s vs %s: predicted %.2fx, measured %.2fx (APE %.1f%%)\n", sw->rows[sw->sc[i].ranks_row].label,
               sw->rows[sw->sc[i].single_row].label, sw->sc[i].predicted_ratio, sw->sc[i].measured_ratio,
               100 * sw->sc[i].ape);
    printf("(img/s: predicted from the profile alone, measured as the median of the steady windows; other: cores busy "
           "with other processes while measured, which a quiet machine has at ~0, /N: the least disturbed of N runs; "
           "speed: the cores' speed around the run over their speed while probed, 1.00: the same machine; at speed: "
           "the prediction at that speed and its error; share: the CPU share the run's threads got (CPU time over CPU "
           "time plus run-queue wait) and its slowest thread's (a multi-thread cpu step goes at it), then the prediction "
           "at them and its error against the rate over every measured step, the interval the share covers)\n");
    if (sw->busy)
        printf("warning: %d of %d configurations ran while other processes kept more than 0.2 cores busy: their errors "
               "measure the machine's load as much as the model (and so does the profile if it was probed so); run "
               "probe and validate on a quiet machine\n", sw->busy, sw->nok);
}

int dlp_cli_validate(int argc, char **argv) {
    const char *profile_path, *configs_path, *data, *json_path, *catalog_dir, *save_profile, *also_profile;
    int quick, steps, list, retries, published;
    double seconds, max_seconds;
    int64_t seed;
    dlp_opt opts[] = {
        {"profile", 0, DLP_OPT_STR, &profile_path, NULL, "FILE", "the machine profile (dlperf probe); none: probe first (--quick)", NULL, 0},
        {"also-profile", 0, DLP_OPT_STR, &also_profile, NULL, "FILE", "predict every run from this profile too (at its probed speed and at the run's): two probes of one machine on the same runs", NULL, 0},
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
    dlp_status st = dlp_cli_parse(
        opts, "usage: dlperf validate [--profile FILE] [--configs FILE] [--quick] [--steps N] [--seconds S] [--json FILE]\n"
              "Runs a sweep of real training configurations (each a short run through the training loop with the real\n"
              "loader), predicts each from the machine profile alone, and prints predicted vs measured img/s, the\n"
              "absolute percentage error and the MAPE.",
        argc, argv);
    if (st) return dlp_cli_fail(st);
    if (steps < 3 || !(seconds >= 0) || !(max_seconds > 0) || max_seconds < seconds)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--steps must be >= 3 and 0 <= --seconds <= --max-seconds"));
    if (json_path && (st = dlp_check_new_output(json_path, "--json"))) return dlp_cli_fail(st);
    if (published) return dlp_cli_fail(dlp_validate_published_run(catalog_dir, json_path));
    if (save_profile && (st = dlp_check_new_output(save_profile, "--save-profile"))) return dlp_cli_fail(st);

    // The runs' sim:<gpu> devices load the catalog themselves (backend/sim, from DLPERF_CATALOG or beside the
    // executable): --catalog reaches them through the environment, as an absolute path (issue 35: a sweep run outside
    // the repository found none).
    if (catalog_dir) {
        char *abs = realpath(catalog_dir, NULL);
        if (!abs) return dlp_cli_fail(DLP_ERR(DLP_ERR_NOTFOUND, "--catalog %s: no such directory", catalog_dir));
        setenv("DLPERF_CATALOG", abs, 1);
        free(abs);
    }
    dlp_validate_sweep_req req = {
        .configs_path = configs_path, .quick = quick, .data = data, .catalog_dir = catalog_dir,
        .profile_path = profile_path, .save_profile = save_profile, .also_profile_path = also_profile, .steps = steps, .retries = retries,
        .seconds = seconds, .max_seconds = max_seconds, .seed = (uint64_t)seed, .progress = progress,
    };
    dlp_validate_sweep sw;
    json_t *res = NULL;
    DLP_CHECK_GOTO(st, dlp_validate_sweep_open(&req, &sw), out);
    if (list) {
        list_predictions(&sw);
        goto out;
    }
    const int n = sw.n;
    fprintf(stderr, "validate: %d configuration(s) on %s (%lld images); each runs a warm-up (>= 1 s and the batches "
            "the ring held), then is measured for >= %d steps and >= %.0f s (at most %.0f s; cold runs end with their "
            "first epoch): about %.0f-%.0f minutes in all\n", n, sw.where, (long long)sw.ds->n, steps, seconds,
            max_seconds, n * (seconds + 4) / 60, n * (max_seconds + 8) / 60);
    printf("%3s  %-52s %-18s %9s %9s %7s %6s %5s%s\n", "#", "configuration", "regime pred/obs", "predicted", "measured",
           "APE", "other", "speed",
           sw.vc.at_speed ? (sw.prof->host.cpu_share > 0 ? "  at speed    APE share  slow  at share    APE" : "  at speed    APE")
                          : "");
    int64_t t0 = dlp_now_ns();
    for (int i = 0; i < n; i++) {
        fprintf(stderr, "validate: [%d/%d] %s\n", i + 1, n, sw.cfgs[i].name[0] ? sw.cfgs[i].name : sw.cfgs[i].device);
        dlp_validate_sweep_run(&sw, i);
        print_row(i, &sw.rows[i]);
    }
    dlp_validate_sweep_summarize(&sw, dlp_ns_to_s(dlp_now_ns() - t0));
    print_summary(&sw);
    if (json_path) {
        res = dlp_json_result_new("dlperf.validate/1", 0, NULL);
        json_object_set_new(res, "options", dlp_opts_to_json(opts));
        dlp_validate_sweep_json(&sw, profile_path ? profile_path : "(probed first, quick)", res);
        DLP_CHECK_GOTO(st, dlp_json_write(res, json_path, DLP_WRITE_NOCLOBBER), out);
    }
    if (sw.nok < n) st = DLP_ERR(DLP_ERR_INTERNAL, "%d of %d configurations failed (see the table)", n - sw.nok, n);
out:
    json_decref(res);
    dlp_validate_sweep_free(&sw);
    return dlp_cli_fail(st);
}
