// cli/train: `dlperf train` — trains a ResNet on a dataset through the real input pipeline (run/train), prints a
// step line on stderr, a summary table on stdout, and writes the "dlperf.train/1" JSON result.
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/opts.h"
#include "backend/backend.h"
#include "nn/resnet.h"
#include "hw/host.h"
#include "run/mllog.h"
#include "run/train.h"
#include "run/train_log.h"
#include "run/train_summary.h"

static volatile sig_atomic_t g_interrupted, g_signal;

static void on_signal(int sig) {
    g_signal = sig;
    g_interrupted++;
    if (g_interrupted >= 2) _exit(128 + sig);  // a second Ctrl-C: stop now
}

// SIGINT and SIGTERM stop the run after the step (a second one at once); old gets the handlers to restore.
static void catch_signals(struct sigaction old[2]) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
}

typedef struct cli_ctx {
    int log_steps;  // print a step line
    const dlp_train_cfg *c;
    dlp_train_mllog ml;  // --mllog (docs/training.md, "MLPerf log")
    FILE *steps;         // --steps-jsonl: one JSON object per optimizer step
    const char *steps_path, *ml_path;
    dlp_status ml_st;  // opening --mllog or --steps-jsonl failed (at the START event)
} cli_ctx;

static void fmt_duration(double s, char *buf, size_t len) {
    if (!(s >= 0) || s > 360000) {
        snprintf(buf, len, "?");
        return;
    }
    long t = lround(s);
    if (t >= 3600) snprintf(buf, len, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60) snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, len, "%lds", t);
}

static int on_event(void *vctx, const dlp_train_event *ev) {
    cli_ctx *ctx = vctx;
    char eta[32];
    if (ev->rank != 0) return g_interrupted != 0;  // data-parallel runs: rank 0 reports
    switch (ev->kind) {
    case DLP_TRAIN_EV_START:
        // the files are rank 0's, opened here (the rank is known once set up)
        if (ctx->steps_path && (ctx->ml_st = dlp_fopen_new(ctx->steps_path, &ctx->steps))) return 1;
        if (ctx->ml_path && (ctx->ml_st = dlp_train_mllog_start(&ctx->ml, ctx->ml_path, ev))) return 1;  // asked for
        break;
    case DLP_TRAIN_EV_STEP:
        dlp_train_mllog_event(&ctx->ml, ev);
        if (ctx->steps) dlp_train_steps_line(ctx->steps, ev, ctx->c->batch);
        break;
    case DLP_TRAIN_EV_EPOCH:
        dlp_train_mllog_event(&ctx->ml, ev);
        break;
    case DLP_TRAIN_EV_LOG:
        if (!ctx->log_steps) break;
        fmt_duration(ev->eta_s, eta, sizeof eta);
        fprintf(stderr, "step %6lld/%-6lld epoch %-3lld loss %.4f  lr %.4g  %7.1f img/s  wait %3.0f%%  %7.1f ms/step  ETA %s\n",
                (long long)ev->step, (long long)ev->total_steps, (long long)ev->epoch + 1, ev->loss, ev->lr,
                ev->img_per_s, 100 * ev->data_wait_frac, ev->ms_per_step, eta);
        break;
    case DLP_TRAIN_EV_EVAL:
        dlp_train_mllog_event(&ctx->ml, ev);
        fprintf(stderr, "eval step %lld (epoch %lld): top-1 %.2f%%  top-5 %.2f%%  loss %.4f  (%lld images)\n",
                (long long)ev->step, (long long)ev->epoch + 1, 100 * ev->top1, 100 * ev->top5, ev->loss,
                (long long)ev->val_images);
        break;
    case DLP_TRAIN_EV_CHECKPOINT:
        fprintf(stderr, "checkpoint step %lld: %s\n", (long long)ev->step, ev->path);
        break;
    default:
        break;
    }
    return g_interrupted != 0;
}


// libgomp reads OMP_WAIT_POLICY once, when the library is loaded (before main). When the CPU computes and the user
// did not choose a policy, dlperf train runs itself again with OMP_WAIT_POLICY=passive: idle compute threads then
// sleep instead of spinning for ~0.3 ms at every barrier, so the loader threads on the same cores get that time
// (docs/training.md, "Threads", has the measurements). DLPERF_OMP_REEXEC=0 turns this off.
static void maybe_reexec(int argc, char **argv, const char *device) {
    const char *off = getenv("DLPERF_OMP_REEXEC");
    if (getenv("OMP_WAIT_POLICY") || (off && strcmp(off, "0") == 0)) return;
    if (device && device[0] && dlp_backend_kind_of(device) != DLP_BACKEND_KIND_CPU) return;
    char **nargv = calloc((size_t)argc + 2, sizeof *nargv);
    if (!nargv) return;
    nargv[0] = "dlperf";
    for (int i = 0; i < argc; i++) nargv[i + 1] = argv[i];
    setenv("OMP_WAIT_POLICY", "passive", 1);
    setenv("DLPERF_OMP_WAIT_POLICY_SET", "dlperf train (re-exec with OMP_WAIT_POLICY=passive)", 1);
    fflush(NULL);
    dlp_stdout_keep_on_exec();
    execv("/proc/self/exe", nargv);
    // Could not: go on with the current policy.
    DLP_DEBUG("re-exec with OMP_WAIT_POLICY=passive failed; continuing with libgomp's default policy");
    unsetenv("OMP_WAIT_POLICY");
    unsetenv("DLPERF_OMP_WAIT_POLICY_SET");
    free(nargv);
}

// --classes, --crop-scale and --step-epochs into the config.
static dlp_status parse_shapes(dlp_train_cfg *c, const char *classes_s, const char *crop_scale, const char *step_epochs) {
    if (strcmp(classes_s, "auto") == 0) {
        c->classes = 0;
    } else {
        char *end;
        long v = strtol(classes_s, &end, 10);
        if (*end || v < 1 || v > 1000000)
            return DLP_ERR(DLP_ERR_INVALID, "--classes '%s' is not a positive number or auto", classes_s);
        c->classes = (int)v;
    }
    DLP_CHECK(dlp_parse_range(crop_scale, "crop-scale", 1.0, &c->crop_scale_lo, &c->crop_scale_hi));
    int ms[8];
    int nm = dlp_parse_int_list(step_epochs, ms, 8);
    if (nm < 0) return DLP_ERR(DLP_ERR_INVALID, "--step-epochs '%s' is not a list like 30,60,80", step_epochs);
    for (int i = 0; i < 8; i++) c->sched.step_epochs[i] = i < nm ? ms[i] : 0;
    return DLP_OK;
}

// Outputs are checked before anything runs.
static dlp_status check_outputs(const dlp_train_cfg *c, const char *json_path, const char *mllog_path,
                                const char *steps_path) {
    if (json_path) DLP_CHECK(dlp_check_new_output(json_path, "--json"));
    if (c->monitor_csv) DLP_CHECK(dlp_check_new_output(c->monitor_csv, "--monitor-csv"));
    if (c->monitor_jsonl) DLP_CHECK(dlp_check_new_output(c->monitor_jsonl, "--monitor-jsonl"));
    if (mllog_path) DLP_CHECK(dlp_check_new_output(mllog_path, "--mllog"));
    if (steps_path) DLP_CHECK(dlp_check_new_output(steps_path, "--steps-jsonl"));
    if ((c->monitor_csv || c->monitor_jsonl) && !c->monitor)
        return DLP_ERR(DLP_ERR_INVALID, "--monitor-csv/--monitor-jsonl need the monitor (drop --no-monitor)");
    return DLP_OK;
}

// After the run: the logs closed, and on rank 0 (data-parallel runs: it prints and writes the result) the summary
// and the result written (a partial one when the run failed).
static dlp_status finish(cli_ctx *ctx, const dlp_train_cfg *c, const dlp_train_result *r, dlp_status st,
                         const char *json_path) {
    const int reporter = r->rank == 0;  // data-parallel runs: rank 0 prints and writes the result
    dlp_status cst = dlp_train_mllog_stop(&ctx->ml, st == DLP_OK && !g_interrupted);  // run_stop: rank 0's
    if (st == DLP_OK) st = cst;
    if (ctx->steps) {
        const int bad = ferror(ctx->steps);
        if ((fclose(ctx->steps) != 0 || bad) && st == DLP_OK)
            st = DLP_ERR(DLP_ERR_IO, "cannot write the per-step file %s: it is incomplete", ctx->steps_path);
    }
    if (st == DLP_OK && reporter) {
        char *text = dlp_train_summary_text(c, r, json_path);
        if (text) fputs(text, stdout);
        free(text);
    }
    if (json_path && r->json && reporter) {
        dlp_status wst = dlp_json_write(r->json, json_path, DLP_WRITE_NOCLOBBER);
        if (st == DLP_OK) st = wst;
        else if (wst == DLP_OK) fprintf(stderr, "partial result (the run failed): %s\n", json_path);
    }
    return st;
}

int dlp_cli_train(int argc, char **argv) {
    dlp_train_cfg c;
    dlp_train_cfg_defaults(&c);
    // argv as given, before getopt reorders it (for the re-exec)
    char **orig = calloc((size_t)argc + 1, sizeof *orig);
    if (!orig) return dlp_cli_fail(DLP_ERR(DLP_ERR_NOMEM, "out of memory"));
    memcpy(orig, argv, sizeof *orig * (size_t)argc);
    const char *classes_s, *json_path, *crop_scale, *device, *step_epochs, *val_data, *data;
    const char *mllog_path, *steps_path, *ml_org, *ml_platform;
    int ml_status;
    int prec, no_eval, no_monitor, no_lr_scale, quiet;
    int64_t seed;
    const char *def_device = dlp_backend_find("cpu", NULL) ? "cpu" : "ref";
    dlp_err_clear();
    char step_def[64] = "";  // the step milestones' default, from the schedule's
    for (int i = 0; i < 8 && c.sched.step_epochs[i] > 0; i++)
        snprintf(step_def + strlen(step_def), sizeof step_def - strlen(step_def), "%s%g", i ? "," : "", c.sched.step_epochs[i]);
    dlp_opt opts[] = {
        {"data", 'd', DLP_OPT_STR, &data, "synthetic", "DIR|LIST|synthetic[:k=v,..]",
         "training data: an ImageNet root (train/, val/), an ImageFolder, a list file of 'path label' lines, or the "
         "synthetic ImageNet (generated and cached on first use)", NULL, 0},
        {"val-data", 0, DLP_OPT_STR, &val_data, NULL, "DIR|LIST|none",
         "validation set (default: the root's val/, the synthetic set's val split)", NULL, 0},
        {"model", 'm', DLP_OPT_STR, &c.model, DLP_OPT_FROM_DST, "NAME", dlp_model_names(), NULL, 0},
        {"classes", 0, DLP_OPT_STR, &classes_s, "auto", "N|auto", "fc outputs (auto: the training set's classes)", NULL, 0},
        {"size", 0, DLP_OPT_INT, &c.size, DLP_OPT_FROM_DST, "PX", "crop size = input height and width", NULL, 0},
        {"crop-scale", 0, DLP_OPT_STR, &crop_scale, "0.08-1", "LO-HI", "RandomResizedCrop area range", NULL, 0},
        {"val-resize", 0, DLP_OPT_INT, &c.val_resize, "0", "PX", "validation: shorter side before the centre crop (0: size*256/224)", NULL, 0},
        {"batch", 'b', DLP_OPT_INT, &c.batch, DLP_OPT_FROM_DST, "N", "images per step", NULL, 0},
        {"epochs", 'e', DLP_OPT_I64, &c.epochs, "0", "N", "epochs to train (default 1 when --steps is not given)", NULL, 0},
        {"steps", 's', DLP_OPT_I64, &c.steps, "0", "N", "optimizer steps to train (overrides --epochs)", NULL, 0},
        {"time-limit", 0, DLP_OPT_DOUBLE, &c.time_limit_s, "0", "SECONDS",
         "stop training after this long (from the first step; a final evaluation follows)", NULL, 0},
        {"stop-at-step", 0, DLP_OPT_I64, &c.stop_at_step, "0", "N",
         "stop after step N as if interrupted (the schedule still spans --steps/--epochs)", NULL, 0},
        {"target-top1", 0, DLP_OPT_DOUBLE, &c.target_top1, "0", "PCT",
         "stop at the first evaluation whose validation top-1 reaches PCT (MLPerf's quality target; 0: off)", NULL, 0},
        {"device", 0, DLP_OPT_STR, &device, def_device, "DEV", "cpu|ref|cuda|sim:<gpu>[,...]", NULL, 0},
        DLP_CLI_PRECISION_ROW(&prec, DLP_CLI_PRECISION_HELP),
        {"threads", 't', DLP_OPT_INT, &c.threads, "0", "N", "compute threads (0: the default rule, docs/training.md)", NULL, 0},
        {"workers", 'w', DLP_OPT_INT, &c.workers, "0", "N", "loader threads (0: the default rule)", NULL, 0},
        {"prefetch", 0, DLP_OPT_INT, &c.prefetch, "0", "N", "batches the loader may prepare ahead (0: 2 x workers)", NULL, 0},
        {"lr", 0, DLP_OPT_DOUBLE, &c.sched.base_lr, DLP_OPT_FROM_DST, "X", "base learning rate per 256 images (peak = X * batch / 256)", NULL, 0},
        {"no-lr-scaling", 0, DLP_OPT_FLAG, &no_lr_scale, NULL, NULL, "--lr is the peak learning rate itself", NULL, 0},
        {"warmup", 0, DLP_OPT_DOUBLE, &c.sched.warmup_epochs, DLP_OPT_FROM_DST, "EPOCHS", "linear warm-up length in epochs", NULL, 0},
        {"warmup-steps", 0, DLP_OPT_I64, &c.sched.warmup_steps, DLP_OPT_FROM_DST, "N", "warm-up length in steps (added to --warmup)", NULL, 0},
        {"schedule", 0, DLP_OPT_ENUM, &c.sched.decay, DLP_OPT_FROM_DST, NULL, "decay after the warm-up", dlp_lr_decay_choices, 0},
        {"final-lr", 0, DLP_OPT_DOUBLE, &c.sched.final_lr, DLP_OPT_FROM_DST, "X", "cosine: the learning rate at the last step", NULL, 0},
        {"step-epochs", 0, DLP_OPT_STR, &step_epochs, step_def, "E,E,..", "step: decay milestones in epochs", NULL, 0},
        {"step-gamma", 0, DLP_OPT_DOUBLE, &c.sched.step_gamma, DLP_OPT_FROM_DST, "X", "step: factor at each milestone", NULL, 0},
        {"momentum", 0, DLP_OPT_DOUBLE, &c.momentum, DLP_OPT_FROM_DST, "X", "SGD momentum", NULL, 0},
        {"nesterov", 0, DLP_OPT_FLAG, &c.nesterov, NULL, NULL, "Nesterov momentum", NULL, 0},
        {"wd", 0, DLP_OPT_DOUBLE, &c.weight_decay, DLP_OPT_FROM_DST, "X", "weight decay", NULL, 0},
        {"no-bn-decay", 0, DLP_OPT_FLAG, &c.no_bn_decay, NULL, NULL, "no weight decay on BN parameters and biases", NULL, 0},
        {"label-smoothing", 0, DLP_OPT_DOUBLE, &c.label_smoothing, "0", "X", "label smoothing of the cross-entropy", NULL, 0},
        {"zero-init-residual", 0, DLP_OPT_FLAG, &c.zero_init_residual, NULL, NULL, "zero each residual block's last BN gamma", NULL, 0},
        {"no-eval", 0, DLP_OPT_FLAG, &no_eval, NULL, NULL, "no validation (default: at every epoch end and at the end)", NULL, 0},
        {"eval-every", 0, DLP_OPT_I64, &c.eval_every, "0", "N", "also validate every N steps", NULL, 0},
        {"limit-samples", 0, DLP_OPT_I64, &c.limit_samples, "0", "N", "train on N samples only (spread over the set)", NULL, 0},
        {"val-limit", 0, DLP_OPT_I64, &c.val_limit_samples, "0", "N", "validate on N samples only", NULL, 0},
        {"checkpoint", 0, DLP_OPT_STR, &c.checkpoint_dir, NULL, "DIR", "write checkpoints here (step-N.safetensors + .state)", NULL, 0},
        {"checkpoint-every", 0, DLP_OPT_I64, &c.checkpoint_every, "0", "N", "checkpoint every N steps (0: at epoch ends)", NULL, 0},
        {"keep-checkpoints", 0, DLP_OPT_INT, &c.keep_checkpoints, DLP_OPT_FROM_DST, "N", "keep the newest N (0: all)", NULL, 0},
        {"resume", 0, DLP_OPT_STR, &c.resume, NULL, "FILE|DIR", "continue from a checkpoint (a directory: its newest)", NULL, 0},
        {"read-limit", 0, DLP_OPT_SIZE, &c.read_limit_bytes_per_s, "0", "SIZE", "emulate storage reading at most SIZE bytes/s (e.g. 50M)", NULL, 0},
        {"drop-cache", 0, DLP_OPT_FLAG, &c.drop_cache, NULL, NULL, "cold reads: drop the dataset from the page cache first", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &seed, "0", "N", "weights, data order and augmentation", NULL, 0},
        {"json", 'j', DLP_OPT_STR, &json_path, NULL, "FILE", "write the result (dlperf.train/1); never overwritten", NULL, 0},
        {"mllog", 0, DLP_OPT_STR, &mllog_path, NULL, "FILE",
         "MLPerf Training log (:::MLLOG lines, ResNet's keys; new file or - for stdout)", NULL, 0},
        {"mllog-org", 0, DLP_OPT_STR, &ml_org, "dlperf", "NAME", "--mllog: submission_org", NULL, 0},
        {"mllog-platform", 0, DLP_OPT_STR, &ml_platform, NULL, "NAME",
         "--mllog: submission_platform (default: the device and this host's CPU)", NULL, 0},
        {"mllog-status", 0, DLP_OPT_ENUM, &ml_status, "onprem", NULL, "--mllog: submission_status",
         dlp_train_mllog_status_choices, 0},
        {"steps-jsonl", 0, DLP_OPT_STR, &steps_path, NULL, "FILE",
         "one JSON line per optimizer step: loss, lr, phase times (new file or - for stdout)", NULL, 0},
        {"monitor-csv", 0, DLP_OPT_STR, &c.monitor_csv, NULL, "FILE", "hardware time series as CSV (new file)", NULL, 0},
        {"monitor-jsonl", 0, DLP_OPT_STR, &c.monitor_jsonl, NULL, "FILE", "hardware time series as JSON lines (new file)", NULL, 0},
        {"monitor-interval", 0, DLP_OPT_INT, &c.monitor_interval_ms, "500", "MS", "monitor sampling interval", NULL, 0},
        {"no-monitor", 0, DLP_OPT_FLAG, &no_monitor, NULL, NULL, "do not run the hardware monitor", NULL, 0},
        {"log-every", 0, DLP_OPT_I64, &c.log_every, "0", "N", "a step line every N steps (0: about every 5 s)", NULL, 0},
        {"quiet", 'q', DLP_OPT_FLAG, &quiet, NULL, NULL, "no step lines", NULL, 0},
        {"measure-warmup", 0, DLP_OPT_INT, &c.measure_warmup_steps, DLP_OPT_FROM_DST, "N",
         "steps left out of the steady-state figures (-1: min(10, steps/10))", NULL, 0},
        {"peak", 0, DLP_OPT_ENUM, &c.peak, DLP_OPT_FROM_DST, NULL,
         "the backend's peak GFLOP/s: measured at the start (under the run's conditions), from the cache of an "
         "earlier measurement on this machine and build, or none", dlp_train_peak_choices, 0},
        {"sync-phases", 0, DLP_OPT_FLAG, &c.sync_phases, NULL, NULL, "asynchronous devices: wait after each phase (exact split)", NULL, 0},
        {"bucket-elems", 0, DLP_OPT_I64, &c.bucket_elems, "0", "N", "gradient bucket size in elements (0: one bucket)", NULL, 0},
        {"dist", 0, DLP_OPT_STR, &c.dist, "auto", "KIND", "communicator: auto (mpi when started by mpirun/srun, else local), local, mpi; each rank trains on its shard", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(
        opts,
        "usage: dlperf train [--data DIR|synthetic] [--model resnet50] [--batch 32] [--epochs N | --steps N]\n"
        "                    [--device cpu|ref|cuda|sim:<gpu>] [--precision auto|fp32|bf16|fp16] [--threads N] [--workers N]\n"
        "                    [--lr X --warmup E --schedule cosine] [--checkpoint DIR] [--resume DIR] [--json FILE]\n"
        "Trains a ResNet through the real input pipeline: step lines on stderr, a summary on stdout, the result as\n"
        "JSON (dlperf.train/1). docs/training.md describes the loop, the timing and the result.",
        argc, argv);
    if (st) {
        free(orig);
        return dlp_cli_fail(st);
    }
    maybe_reexec(argc, orig, device);
    free(orig);
    c.device = device;
    c.data = data;
    c.val_data = val_data;
    c.precision = dlp_cli_precision(prec, device);  // int8: refused by dlp_train_run (inference only)
    c.eval = !no_eval;
    c.monitor = !no_monitor;
    c.sched.scale_by_batch = !no_lr_scale;
    if (seed < 0) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--seed must be >= 0"));
    c.seed = (uint64_t)seed;
    if ((st = parse_shapes(&c, classes_s, crop_scale, step_epochs))) return dlp_cli_fail(st);
    if ((st = check_outputs(&c, json_path, mllog_path, steps_path))) return dlp_cli_fail(st);

    cli_ctx ctx = {.log_steps = !quiet, .c = &c, .steps_path = steps_path, .ml_path = mllog_path};
    ctx.ml = (dlp_train_mllog){.c = &c, .org = ml_org, .platform = ml_platform, .status = ml_status,
                               .t_init_ms = dlp_mllog_now_ms()};  // init_start: rank 0 writes it, known once set up
    json_t *echo = dlp_opts_to_json(opts);
    c.callback = on_event;
    c.callback_ctx = &ctx;
    c.options = echo;
    struct sigaction old[2];
    catch_signals(old);

    dlp_train_result r;
    st = dlp_train_run(&c, &r);
    if (ctx.ml_st) st = ctx.ml_st;
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGTERM, &old[1], NULL);
    if (g_interrupted && r.json) {
        json_object_set_new(json_object_get(r.json, "run"), "stopped_by", json_string("interrupted"));
        snprintf(r.stopped_by, sizeof r.stopped_by, "interrupted");
    }
    st = finish(&ctx, &c, &r, st, json_path);
    dlp_train_result_free(&r);
    json_decref(echo);
    if (st == DLP_OK && g_interrupted) return 128 + (g_signal ? g_signal : SIGINT);  // 130 for Ctrl-C, 143 for SIGTERM
    return dlp_cli_fail(st);
}
