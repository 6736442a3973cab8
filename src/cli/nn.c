// cli/nn: `dlperf nn` — the model and its backends up close.
//   nn info   the layer list, parameter count and FLOPs of a model
//   nn bench  times the plan's phases (forward, loss, backward, update) on random tensors
//   nn step   one forward/backward/SGD step on given weights and inputs, everything written out (for tests
//             against torchvision and between backends)
//   nn init   writes torchvision-initialized weights (safetensors, torchvision names)
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/opts.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "hw/host.h"
#include "nn/checkpoint.h"
#include "nn/convert.h"
#include "nn/info.h"
#include "nn/resnet.h"
#include "nn/safetensors.h"
#include "nn/state.h"
#include "run/step.h"
#include "run/step_file.h"
#include "run/net_bench.h"


static const char *default_device(void) { return dlp_backend_name(dlp_backends()[0]); }

static void shape_text(char *buf, size_t len, const dlp_layer *l) {
    if (l->h == 1 && l->w == 1) snprintf(buf, len, "%d", l->c);
    else snprintf(buf, len, "%dx%dx%d", l->c, l->h, l->w);
}

// ---- nn info ----------------------------------------------------------------------------------------------

static int cmd_info(int argc, char **argv) {
    const char *model, *json_path;
    int classes, size, layers;
    dlp_opt opts[] = {
        {"model", 'm', DLP_OPT_STR, &model, "resnet50", "NAME", dlp_model_names(), NULL, 0},
        {"classes", 0, DLP_OPT_INT, &classes, "1000", "N", "number of classes (fc outputs)", NULL, 0},
        {"size", 0, DLP_OPT_INT, &size, "224", "PX", "input height and width (at least 32)", NULL, 0},
        {"layers", 0, DLP_OPT_FLAG, &layers, NULL, NULL, "print every layer", NULL, 0},
        {"json", 0, DLP_OPT_STR, &json_path, NULL, "FILE", "write the result as JSON (dlperf.nn-info/1)", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(opts, "usage: dlperf nn info [--model resnet50] [--classes N] [--size PX] [--layers]",
                                  argc, argv);
    if (st) return dlp_cli_fail(st);
    if (json_path && (st = dlp_check_new_output(json_path, "--json"))) return dlp_cli_fail(st);
    dlp_net net;
    if ((st = dlp_model_build(model, classes, size, &net))) return dlp_cli_fail(st);
    dlp_net_info ni;
    dlp_net_info_of(&net, &ni);
    if (layers) {
        printf("%4s %-8s %-26s %-14s %12s %10s\n", "#", "kind", "name", "output", "params", "MFLOP");
        for (int i = 0; i < net.nlayers; i++) {
            const dlp_layer *l = &net.layers[i];
            char shp[48];
            shape_text(shp, sizeof shp, l);
            char nm[64];
            dlp_net_layer_label(&net, i, nm, sizeof nm);
            printf("%4d %-8s %-26s %-14s %12lld %10.1f\n", i, dlp_layer_kind_name(l->kind), nm, shp,
                   (long long)dlp_net_layer_params(&net, i), dlp_net_layer_flops(&net, i) * 1e-6);
        }
        printf("\n");
    }
    const dlp_layer *in = &net.layers[0];
    printf("model          %s (ResNet v1.5, torchvision names)\n", net.arch);
    printf("input          %dx%dx%d, %d classes\n", in->c, in->h, in->w, net.num_classes);
    printf("layers         %d (%d conv, %d batch norm)\n", net.nlayers - 1, ni.conv_layers, ni.bn_layers);
    printf("parameters     %lld in %d tensors; BN running stats %lld\n", (long long)net.param_count, net.nparams,
           (long long)net.buf_count);
    printf("forward        %.3f GFLOP per image (conv + fc, multiply-add = 2)\n", ni.forward_gflop);
    printf("training step  %.3f GFLOP per image (3x forward)\n", 3 * ni.forward_gflop);
    printf("activations    %.1f MiB per image (every layer's output, fp32)\n", (double)ni.activation_bytes / (1 << 20));
    if (json_path) {
        json_t *o = dlp_json_result_new("dlperf.nn-info/1", 0, NULL);
        json_object_set_new(o, "config", dlp_opts_to_json(opts));
        json_object_set_new(o, "versions", dlp_versions_to_json());
        dlp_net_info_json(&net, &ni, o);
        st = dlp_json_write(o, json_path, DLP_WRITE_NOCLOBBER);
        json_decref(o);
    }
    dlp_net_free(&net);
    return dlp_cli_fail(st);
}

// ---- nn bench ---------------------------------------------------------------------------------------------

// The stderr line before the timed steps.
static void bench_ready(void *ctx, const char *arch, const char *backend) {
    const dlp_net_bench_cfg *c = ctx;
    fprintf(stderr, "nn bench: %s batch %d %dx%d on %s (%s, %s), %d warm-up + %d timed steps\n", arch, c->batch, c->size,
            c->size, backend, dlp_dtype_name(c->precision), c->infer ? "inference" : "training", c->warmup, c->steps);
}

// dlperf.nn-bench/1
static dlp_status write_bench_json(const char *path, const dlp_opt *opts, const dlp_net_bench_cfg *c,
                                   const dlp_net_bench_result *r) {
    json_t *res = dlp_json_result_new("dlperf.nn-bench/1", 0, NULL);
    json_object_set_new(res, "config", dlp_opts_to_json(opts));
    dlp_net_bench_json(c, r, res);
    return dlp_cli_write_result(res, path);
}

static const char k_bench_usage[] =
    "usage: dlperf nn bench [--model resnet50] [--batch 32] [--size 224] [--device cpu] [--precision fp32]\n"
    "                       [--threads N] [--steps N] [--warmup N] [--infer] [--json FILE]\n"
    "Times each phase of the backend's plan on random tensors (no data loading).";

static int cmd_bench(int argc, char **argv) {
    const char *model, *device, *json_path;
    int classes, size, batch, prec, threads, steps, warmup, infer, peak;
    int64_t seed;
    dlp_opt opts[] = {
        {"model", 'm', DLP_OPT_STR, &model, "resnet50", "NAME", dlp_model_names(), NULL, 0},
        {"batch", 'b', DLP_OPT_INT, &batch, "32", "N", "samples per step", NULL, 0},
        {"size", 0, DLP_OPT_INT, &size, "224", "PX", "input height and width", NULL, 0},
        {"classes", 0, DLP_OPT_INT, &classes, "1000", "N", "number of classes", NULL, 0},
        {"device", 0, DLP_OPT_STR, &device, default_device(), "DEV", "backend: cpu|ref|cuda|sim:<gpu>", NULL, 0},
        {"precision", 'p', DLP_OPT_ENUM, &prec, "fp32", NULL, "compute type", dlp_dtype_choices, 0},
        {"threads", 't', DLP_OPT_INT, &threads, "0", "N", "compute threads (0: all allowed CPUs)", NULL, 0},
        {"steps", 's', DLP_OPT_INT, &steps, "10", "N", "timed steps", NULL, 0},
        {"warmup", 0, DLP_OPT_INT, &warmup, "2", "N", "untimed steps first", NULL, 0},
        {"infer", 0, DLP_OPT_FLAG, &infer, NULL, NULL, "inference plan: forward only, BN with running stats", NULL, 0},
        {"peak", 0, DLP_OPT_FLAG, &peak, NULL, NULL, "also measure the backend's convolution peak GFLOP/s", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &seed, "1", "N", "seed of the weights and random inputs", NULL, 0},
        {"json", 0, DLP_OPT_STR, &json_path, NULL, "FILE", "write the result as JSON (dlperf.nn-bench/1)", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(opts, k_bench_usage, argc, argv);
    if (st) return dlp_cli_fail(st);
    if (batch < 1 || steps < 1 || warmup < 0 || threads < 0)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--batch and --steps must be positive, --warmup and --threads not negative"));
    if (json_path && (st = dlp_check_new_output(json_path, "--json"))) return dlp_cli_fail(st);
    dlp_net_bench_cfg bc = {.model = model, .device = device, .classes = classes, .size = size, .batch = batch,
                            .threads = threads, .steps = steps, .warmup = warmup, .precision = (dlp_dtype)prec,
                            .infer = infer, .peak = peak, .seed = (uint64_t)seed, .on_ready = bench_ready, .ctx = &bc};
    dlp_net_bench_result r;
    if ((st = dlp_net_bench(&bc, &r))) {
        dlp_net_bench_free(&r);
        return dlp_cli_fail(st);
    }
    const dlp_step_bench_result *br = &r.phases;
    printf("%-10s %s batch %d %dx%d, %s %s, %s\n", "config", r.arch, batch, size, size, r.backend,
           dlp_dtype_name(bc.precision), infer ? "inference" : "training");
    printf("%-10s %.2f img/s, %.1f ms per step, %.1f GFLOP/s achieved (%.2f GFLOP per image)\n", "throughput",
           r.img_per_s, r.step_ms, r.gflop_per_s, r.gflop_per_image);
    for (int p = 0; p < DLP_STEP_NPHASES; p++)
        if (!infer || p <= DLP_STEP_FORWARD)
            printf("%-10s %9.2f ms per step (%4.1f%%)\n", dlp_step_phase_name((dlp_step_phase)p), br->phase[p].mean_ms,
                   100.0 * br->phase[p].mean_ms / r.step_ms);
    if (!infer) printf("%-10s %.4f at the first step, %.4f at the last\n", "loss", br->loss_first, br->loss_last);
    if (r.peak_gflop_per_s > 0) printf("%-10s %.1f GFLOP/s convolution peak; achieved %.0f%% of it\n", "peak",
                                       r.peak_gflop_per_s, 100 * r.gflop_per_s / r.peak_gflop_per_s);
    if (json_path) st = write_bench_json(json_path, opts, &bc, &r);
    dlp_net_bench_free(&r);
    return dlp_cli_fail(st);
}

// ---- nn step ----------------------------------------------------------------------------------------------

// --out, and --checkpoint with its state file, must not exist.
static dlp_status check_step_outputs(const char *out_path, const char *ck_path) {
    DLP_CHECK(dlp_check_new_output(out_path, "--out"));
    if (!ck_path) return DLP_OK;
    char sp[1100];
    dlp_checkpoint_state_path(ck_path, sp, sizeof sp);
    DLP_CHECK(dlp_check_new_output(ck_path, "--checkpoint"));
    return dlp_check_new_output(sp, "--checkpoint's state");
}

static const char k_step_usage[] =
    "usage: dlperf nn step --input batch.safetensors --out result.safetensors [--model resnet18] [--classes N]\n"
    "                      [--weights w.safetensors] [--device ref] [--eval] [--lr X --momentum X --wd X]\n"
    "One training step (forward in training mode, softmax cross-entropy, backward, one SGD update; or with --eval\n"
    "a forward pass in inference mode) on the given weights and batch. The input size comes from the batch.\n"
    "--out gets: logits (N, classes), loss (F64 scalar), correct_top1 / correct_top5 (I64); and for a training\n"
    "step input_grad (N, C, H, W), grad.<param> for every parameter, and updated.<name> for every parameter and\n"
    "buffer after the step (num_batches_tracked included): the state_dict after optimizer.step().";

static int cmd_step(int argc, char **argv) {
    const char *model, *device, *weights, *input_path, *out_path, *ck_path;
    int classes, prec, threads, eval, nesterov, no_decay_bn, plan_batch, zero_init;
    double lr, momentum, wd, smoothing;
    int64_t seed;
    dlp_opt opts[] = {
        {"model", 'm', DLP_OPT_STR, &model, "resnet18", "NAME", dlp_model_names(), NULL, 0},
        {"classes", 0, DLP_OPT_INT, &classes, "1000", "N", "number of classes", NULL, 0},
        {"weights", 0, DLP_OPT_STR, &weights, NULL, "FILE",
         "safetensors state_dict with torchvision names (default: torchvision's init from --seed)", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &seed, "1", "N", "seed of the initialization when no --weights", NULL, 0},
        {"zero-init-residual", 0, DLP_OPT_FLAG, &zero_init, NULL, NULL, "with --seed: zero each block's last BN gamma", NULL, 0},
        {"input", 0, DLP_OPT_STR, &input_path, NULL, "FILE",
         "safetensors with 'input' (N, 3, H, W) F32 and 'labels' (N) integer (required)", NULL, 0},
        {"out", 'o', DLP_OPT_STR, &out_path, NULL, "FILE", "safetensors to write (required; never overwritten)", NULL, 0},
        {"checkpoint", 0, DLP_OPT_STR, &ck_path, NULL, "FILE", "also save a checkpoint after the step (never overwritten)", NULL, 0},
        {"device", 0, DLP_OPT_STR, &device, "ref", "DEV", "backend: ref|cpu|cuda|sim:<gpu>", NULL, 0},
        {"precision", 'p', DLP_OPT_ENUM, &prec, "fp32", NULL, "compute type", dlp_dtype_choices, 0},
        {"threads", 't', DLP_OPT_INT, &threads, "0", "N", "compute threads (0: all allowed CPUs)", NULL, 0},
        {"eval", 0, DLP_OPT_FLAG, &eval, NULL, NULL, "inference plan: logits and loss only, BN with running stats", NULL, 0},
        {"plan-batch", 0, DLP_OPT_INT, &plan_batch, "0", "N", "with --eval: the plan's batch (>= N: a partial batch)", NULL, 0},
        {"lr", 0, DLP_OPT_DOUBLE, &lr, "0.1", "X", "SGD learning rate", NULL, 0},
        {"momentum", 0, DLP_OPT_DOUBLE, &momentum, "0.9", "X", "SGD momentum (buffers start at zero)", NULL, 0},
        {"wd", 0, DLP_OPT_DOUBLE, &wd, "0.0001", "X", "weight decay", NULL, 0},
        {"nesterov", 0, DLP_OPT_FLAG, &nesterov, NULL, NULL, "Nesterov momentum", NULL, 0},
        {"no-decay-bn-bias", 0, DLP_OPT_FLAG, &no_decay_bn, NULL, NULL, "no weight decay on BN parameters and biases", NULL, 0},
        {"smoothing", 0, DLP_OPT_DOUBLE, &smoothing, "0", "X", "label smoothing of the cross-entropy", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(opts, k_step_usage, argc, argv);
    if (st) return dlp_cli_fail(st);
    if (!input_path || !out_path)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "nn step needs --input and --out (see --help)"));
    if ((st = check_step_outputs(out_path, ck_path))) return dlp_cli_fail(st);
    dlp_step_file_cfg sc = {
        .model = model, .classes = classes, .weights = weights, .seed = (uint64_t)seed, .zero_init_residual = zero_init,
        .input_path = input_path, .out_path = out_path, .checkpoint_path = ck_path, .device = device,
        .precision = (dlp_dtype)prec, .threads = threads, .eval = eval, .plan_batch = plan_batch, .lr = lr,
        .momentum = momentum, .weight_decay = wd, .label_smoothing = smoothing, .nesterov = nesterov,
        .no_bn_decay = no_decay_bn,
    };
    dlp_step_file_result r;
    if ((st = dlp_step_file_run(&sc, &r))) return dlp_cli_fail(st);
    printf("%s on %s: %d samples, loss %.6f, top-1 %lld, top-5 %lld -> %s\n", eval ? "eval" : "train step", r.backend,
           r.n, r.loss, (long long)r.top1, (long long)r.top5, out_path);
    return 0;
}

// ---- nn init ----------------------------------------------------------------------------------------------

static int cmd_init(int argc, char **argv) {
    const char *model, *out_path;
    int classes, size, zero_init;
    int64_t seed;
    dlp_opt opts[] = {
        {"model", 'm', DLP_OPT_STR, &model, "resnet50", "NAME", dlp_model_names(), NULL, 0},
        {"classes", 0, DLP_OPT_INT, &classes, "1000", "N", "number of classes", NULL, 0},
        {"size", 0, DLP_OPT_INT, &size, "224", "PX", "input size the model is built for", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &seed, "1", "N", "seed", NULL, 0},
        {"zero-init-residual", 0, DLP_OPT_FLAG, &zero_init, NULL, NULL, "zero each block's last BN gamma", NULL, 0},
        {"out", 'o', DLP_OPT_STR, &out_path, NULL, "FILE", "safetensors to write (required; never overwritten)", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(opts,
                                  "usage: dlperf nn init --out w.safetensors [--model resnet50] [--classes N] [--seed N]\n"
                                  "Writes torchvision's initialization (kaiming_normal_ fan_out for convs, BN 1/0, "
                                  "nn.Linear's default for fc)\nas a safetensors state_dict with torchvision's names.",
                                  argc, argv);
    if (st) return dlp_cli_fail(st);
    if (!out_path) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "nn init needs --out FILE"));
    if ((st = dlp_check_new_output(out_path, "--out"))) return dlp_cli_fail(st);
    dlp_net net;
    float *p, *b;
    if ((st = dlp_model_init(model, classes, size, (uint64_t)seed, zero_init, &net, &p, &b))) return dlp_cli_fail(st);
    st = dlp_state_save(&net, out_path, p, b, 0, DLP_WRITE_NOCLOBBER);
    if (!st) printf("%s: %s, %d classes, %lld parameters\n", out_path, net.arch, net.num_classes, (long long)net.param_count);
    free(p);
    free(b);
    dlp_net_free(&net);
    return dlp_cli_fail(st);
}

int dlp_cli_nn(int argc, char **argv) {
    static const dlp_cli_cmd cmds[] = {
        {"info", cmd_info, "layers, parameter count and FLOPs of a model"},
        {"bench", cmd_bench, "time a backend's forward/loss/backward/update on random tensors"},
        {"step", cmd_step, "one training (or eval) step on given weights and batch, everything written out"},
        {"init", cmd_init, "write torchvision-initialized weights as safetensors"},
        {NULL, NULL, NULL},
    };
    return dlp_cli_dispatch("dlperf nn", cmds, argc, argv);
}
