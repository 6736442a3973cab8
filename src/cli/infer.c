// cli/infer: `dlperf infer` — offline throughput over batch sizes and per-call latency percentiles of a ResNet
// inference plan, from preprocessed tensors (MLPerf's way) or from JPEG files (decode timed apart), or the top-5
// classes of given images; a table on stdout and a dlperf.infer/1 JSON result.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/opts.h"
#include "data/source.h"
#include "hw/host.h"
#include "monitor/monitor.h"
#include "run/classify.h"
#include "run/infer.h"
#include "run/infer_sweep.h"

#define MAX_BATCHES 16
#define TOPK DLP_CLASSIFY_TOPK

typedef struct infer_opts {
    const char *model, *weights, *data, *images, *batches, *labels, *json, *mon_csv;
    int classes, size, samples, precision, threads, workers, warmup, from, dct, top5, mon_interval;
    int64_t seed, iters, max_iters;
    double min_duration;
    const char *calib;
    int calib_images, calib_method, int8_first_conv, fp32_first_conv, accuracy, accuracy_images, streams;
    double calib_percentile;
    const char *device;
} infer_opts;



static void print_topk(const char *path, const int *cls, const float *prob, char **labels, int nlabels) {
    printf("%s\n", path);
    for (int j = 0; j < TOPK && cls[j] >= 0; j++)
        printf("  %d. %5d  %7.3f%%  %s\n", j + 1, cls[j], 100.0 * prob[j], cls[j] < nlabels ? labels[cls[j]] : "");
}

// --top5: classify the given images, in batches, and print each one's top-5.
static void on_labels(void *ctx, const char *src) {
    (void)ctx;
    fprintf(stderr, "infer: class names from %s\n", src);
}

static dlp_status run_top5(const infer_opts *o, dlp_infer_model *m, const dlp_infer_engine_cfg *ec, int nfiles_args,
                           char **file_args, json_t *result) {
    char *images[1] = {(char *)o->images};
    dlp_classify_cfg cc = {.paths = nfiles_args || !o->images ? file_args : images,
                           .npaths = nfiles_args || !o->images ? nfiles_args : 1, .labels_path = o->labels,
                           .dct_scaling = o->dct, .on_labels = on_labels};
    dlp_classify_result r;
    dlp_status st = dlp_classify(m, ec, &cc, &r);
    if (st == DLP_OK) {
        if (m->random_init)
            printf("(random weights: these classes mean nothing)\n");
        if (r.nlabels > 0 && r.nlabels != m->net.num_classes)
            DLP_WARN("%s has %d labels for %d classes", r.labels_src, r.nlabels, m->net.num_classes);
        for (int i = 0; i < r.n; i++) print_topk(r.paths[i], r.cls[i], r.prob[i], r.labels, r.nlabels);
        dlp_classify_json(&r, result);
        if (r.skipped) fprintf(stderr, "infer: %d of %d images could not be decoded (skipped)\n", r.skipped, r.nfiles);
    }
    dlp_classify_free(&r);
    return st;
}

static void print_header_row(const infer_opts *o) {
    if (o->from == DLP_INFER_FROM_TENSOR)
        printf("%6s %6s %10s %9s %9s %9s %9s %9s\n", "batch", "calls", "images/s", "GFLOP/s", "p50 ms", "p90 ms",
               "p99 ms", "mean ms");
    else if (o->workers == 0)
        printf("%6s %6s %10s %9s %9s %9s %9s | %8s %8s %8s %8s  (mean ms per call)\n", "batch", "calls", "images/s",
               "GFLOP/s", "p50 ms", "p90 ms", "p99 ms", "read", "decode", "resize", "infer");
    else
        printf("%6s %6s %10s %9s %9s %9s %9s | %8s %8s | %8s %8s %8s  (per call | loader ms per image)\n", "batch",
               "calls", "images/s", "GFLOP/s", "p50 ms", "p90 ms", "p99 ms", "wait", "infer", "read", "decode",
               "resize");
}

static void print_row(const infer_opts *o, const dlp_infer_point *p) {
    printf("%6d %6lld %10.2f %9.1f %9.2f %9.2f %9.2f", p->batch, (long long)p->iters, p->images_per_s, p->gflops_per_s,
           p->latency.p50_ms, p->latency.p90_ms, p->latency.p99_ms);
    if (o->from == DLP_INFER_FROM_TENSOR) printf(" %9.2f\n", p->latency.mean_ms);
    else if (o->workers == 0)
        printf(" | %8.2f %8.2f %8.2f %8.2f\n", p->read_ms, p->decode_ms, p->resize_ms, p->infer_ms);
    else
        printf(" | %8.2f %8.2f | %8.3f %8.2f %8.2f\n", p->wait_ms, p->infer_ms, p->read_ms, p->decode_ms, p->resize_ms);
    fflush(stdout);
}

// The measurement over batch sizes (run/infer_sweep): what it prints as it goes.
typedef struct bench_print {
    const infer_opts *o;
    int threads_used;
} bench_print;

static void on_inputs(void *ctx, const dlp_infer_model *mp, const char *src) {
    const infer_opts *o = ((const bench_print *)ctx)->o;
    const dlp_layer *in = &mp->net.layers[0];
    printf("infer: %s, %d classes, %dx%dx%d, %.2f GFLOP/image, %s\n", mp->net.arch, mp->net.num_classes, in->c, in->h,
           in->w, dlp_net_forward_flops(&mp->net) / 1e9, mp->random_init ? "random weights (timing only)" : mp->weights);
    if (o->from == DLP_INFER_FROM_TENSOR)
        printf("inputs: up to %d images of %s, preprocessed into memory first; only inference is timed\n", o->samples,
               src);
    else
        printf("inputs: JPEG files of %s, read + decoded + resized %s%s%s\n", src,
               o->workers ? "on loader threads" : "inline", o->workers ? " (" : "",
               o->workers ? "their time is per image, in parallel with inference)" : "");
}

static void on_library(void *ctx, const dlp_infer_library *lib, const dlp_infer_engine *e) {
    (void)ctx;
    double per = 1.0 / lib->n;
    printf("preprocessed %d images (%d skipped): %.2f ms/image (read %.2f, decode %.2f, resize+normalize %.2f), %s %s\n",
           lib->n, lib->skipped, dlp_ns_to_ms(lib->read_ns + lib->decode_ns + lib->resize_ns) * per,
           dlp_ns_to_ms(lib->read_ns) * per, dlp_ns_to_ms(lib->decode_ns) * per, dlp_ns_to_ms(lib->resize_ns) * per,
           dlp_layout_name(e->layout), dlp_dtype_name(e->in_dtype));
}

static void on_plan(void *ctx, const dlp_infer_engine *e, json_t *pj) {
    const bench_print *bp = ctx;
    char what[256] = "";
    dlp_infer_plan_summary(pj, what, sizeof what);
    printf("plan: %s %s inference plan%s, %d compute threads, input %s %s\n\n", dlp_backend_name(e->ops),
           dlp_dtype_name(e->precision), what, bp->threads_used, dlp_layout_name(e->layout), dlp_dtype_name(e->in_dtype));
    print_header_row(bp->o);
}

static void on_point(void *ctx, const dlp_infer_point *p) { print_row(((const bench_print *)ctx)->o, p); }

static void on_calib_note(void *ctx, const char *line) {
    (void)ctx;
    fprintf(stderr, "%s\n", line);
}

// --accuracy: top-1/top-5 on the val split at the asked precision, and (another precision than fp32) the fp32
// answers beside them: their accuracy and the top-1 agreement.
static dlp_status run_accuracy(const infer_opts *o, dlp_infer_model *m, const dlp_infer_engine_cfg *ec0, int batch,
                               json_t *result) {
    dlp_infer_engine_cfg ec = *ec0;
    ec.batch = batch;
    dlp_infer_accuracy a, f;
    memset(&f, 0, sizeof f);
    DLP_CHECK(dlp_infer_accuracy_run(m, &ec, o->data, o->accuracy_images, o->dct, &a));
    dlp_status st = DLP_OK;
    const int vs_fp32 = ec.precision != DLP_DTYPE_F32;
    if (vs_fp32) {
        ec.precision = DLP_DTYPE_F32;
        st = dlp_infer_accuracy_run(m, &ec, o->data, o->accuracy_images, o->dct, &f);
        if (!st && f.n != a.n) st = DLP_ERR(DLP_ERR_INTERNAL, "the fp32 pass read %d images, the %s one %d", f.n,
                                            dlp_dtype_name(ec0->precision), a.n);
    }
    if (!st) {
        json_t *j = json_object();
        printf("accuracy on %d val images of %s (%d unreadable skipped), batch %d:\n", a.n, o->data, a.skipped, batch);
        printf("  %-5s top-1 %6.2f%%  top-5 %6.2f%%\n", dlp_dtype_name(ec0->precision), 100.0 * a.top1 / a.n,
               100.0 * a.top5 / a.n);
        json_object_set_new(j, "images", json_integer(a.n));
        json_object_set_new(j, "top1", json_real((double)a.top1 / a.n));
        json_object_set_new(j, "top5", json_real((double)a.top5 / a.n));
        if (vs_fp32) {
            int agree = 0;
            for (int i = 0; i < a.n; i++) agree += a.pred[i] == f.pred[i];
            printf("  fp32  top-1 %6.2f%%  top-5 %6.2f%%\n", 100.0 * f.top1 / f.n, 100.0 * f.top5 / f.n);
            printf("  %s vs fp32: top-1 %+.2f points, top-1 agreement %.2f%% (%d of %d images)\n",
                   dlp_dtype_name(ec0->precision), 100.0 * (a.top1 - f.top1) / a.n, 100.0 * agree / a.n, agree, a.n);
            json_object_set_new(j, "fp32_top1", json_real((double)f.top1 / f.n));
            json_object_set_new(j, "fp32_top5", json_real((double)f.top5 / f.n));
            json_object_set_new(j, "top1_agreement_with_fp32", json_real((double)agree / a.n));
        }
        json_object_set_new(result, "accuracy", j);
    }
    dlp_infer_accuracy_free(&a);
    dlp_infer_accuracy_free(&f);
    return st;
}

static dlp_status run_bench(const infer_opts *o, dlp_infer_model *mp, const dlp_infer_engine_cfg *ec0,
                            const int *batches, int nb, int threads_used, json_t *result) {
    bench_print bp = {o, threads_used};
    dlp_infer_sweep_cfg c = {
        .data = o->data, .images = o->images, .samples = o->samples, .batches = batches, .nbatches = nb,
        .bench = {.from = (dlp_infer_from)o->from, .warmup = o->warmup, .iters = o->iters,
                  .min_duration_s = o->min_duration, .max_iters = o->max_iters, .workers = o->workers,
                  .dct_scaling = o->dct},
        .mon_interval_ms = o->mon_interval, .mon_csv = o->mon_csv, .on_inputs = on_inputs, .on_library = on_library,
        .on_plan = on_plan, .on_point = on_point, .ctx = &bp};
    return dlp_infer_sweep(mp, ec0, &c, result);
}

// The options' values checked (and --iters alone meaning no minimum duration); the batch sizes parsed into batches;
// *threads: the compute threads the run uses (--threads, 0: every allowed CPU).
static dlp_status check_opts(infer_opts *o, const dlp_opt *opts, int *batches, int *nb, int *threads) {
    dlp_status st;
    if (o->json && (st = dlp_check_new_output(o->json, "--json"))) return st;
    if (o->mon_csv && (st = dlp_check_new_output(o->mon_csv, "--monitor-csv"))) return st;
    *nb = dlp_parse_int_list(o->batches, batches, MAX_BATCHES);
    if (*nb < 1) return DLP_ERR(DLP_ERR_INVALID, "--batch %s: give sizes like 1,8,32 (at most %d)", o->batches,
                                 MAX_BATCHES);
    for (int i = 0; i < *nb; i++)
        if (batches[i] < 1 || batches[i] > 65536)
            return DLP_ERR(DLP_ERR_INVALID, "--batch %d is not in 1..65536", batches[i]);
    if (o->size < 32 || o->size > 4096) return DLP_ERR(DLP_ERR_INVALID, "--size %d is not in 32..4096", o->size);
    if (o->samples < 1) return DLP_ERR(DLP_ERR_INVALID, "--samples must be >= 1");
    if (o->threads < 0 || o->workers < 0 || o->warmup < 0 || o->iters < 0 || o->max_iters < 0 || o->min_duration < 0)
        return DLP_ERR(DLP_ERR_INVALID, "--threads, --workers, --warmup, --iters, --max-iters and "
                       "--min-duration must be >= 0");
    *threads = o->threads > 0 ? o->threads : dlp_host_cpus_allowed();
    if (o->streams < 1 || o->streams > *threads)
        return DLP_ERR(DLP_ERR_INVALID, "--streams %d: give 1..%d (each stream needs a compute thread of "
                       "--threads %d)", o->streams, *threads, *threads);
    if (o->streams > 1 && strcmp(o->device, "cpu") != 0)
        return DLP_ERR(DLP_ERR_INVALID, "--streams %d: only the cpu device runs streams (got --device %s)",
                       o->streams, o->device);
    if (o->int8_first_conv && o->fp32_first_conv)
        return DLP_ERR(DLP_ERR_INVALID, "--int8-first-conv and --fp32-first-conv: give one");
    if (o->mon_interval != 0 && o->mon_interval < 10)
        return DLP_ERR(DLP_ERR_INVALID, "--monitor-interval %d: use 0 (off) or at least 10 ms", o->mon_interval);
    if (dlp_opt_given(opts, "iters") && !dlp_opt_given(opts, "min-duration")) o->min_duration = 0;
    if (o->iters < 1 && o->min_duration <= 0)
        return DLP_ERR(DLP_ERR_INVALID, "give --iters >= 1 or a --min-duration > 0");
    if (o->from == DLP_INFER_FROM_JPEG && o->workers > 0 && o->images)
        return DLP_ERR(DLP_ERR_INVALID, "--workers decodes on the loader's threads, which read a dataset: "
                       "use --data, or --workers 0 (inline) with --images");
    return DLP_OK;
}

int dlp_cli_infer(int argc, char **argv) {
    infer_opts o;
    memset(&o, 0, sizeof o);
    dlp_opt opts[] = {
        {"model", 'm', DLP_OPT_STR, &o.model, NULL, "NAME", "model: resnet18|34|50|101|152|resnet-mini... (default: the "
         "weights' arch, else resnet50)", NULL, 0},
        {"weights", 0, DLP_OPT_STR, &o.weights, NULL, "FILE", "safetensors weights: a dlperf checkpoint or torchvision "
         "weights converted by tools/torchvision_to_safetensors.py (none: seeded random init, meaningless answers)", NULL, 0},
        {"classes", 0, DLP_OPT_INT, &o.classes, "0", "N", "classes (0: from the weights, else 1000)", NULL, 0},
        {"size", 0, DLP_OPT_INT, &o.size, "224", "PX", "input side (the shorter side is resized to size*256/224 first)", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &o.seed, "1", "N", "seed of the random init (without --weights)", NULL, 0},
        {"data", 0, DLP_OPT_STR, &o.data, "synthetic", "DIR|synthetic", "dataset whose val split feeds the runs", NULL, 0},
        {"images", 'i', DLP_OPT_STR, &o.images, NULL, "PATH", "a JPEG or a directory of them instead of --data", NULL, 0},
        {"samples", 0, DLP_OPT_INT, &o.samples, "64", "N", "images preprocessed into memory (--from tensor) or cycled "
         "through (--from jpeg inline)", NULL, 0},
        {"batch", 'b', DLP_OPT_STR, &o.batches, "1,8,32", "LIST", "batch sizes to measure, e.g. 1,8,32", NULL, 0},
        DLP_CLI_PRECISION_ROW(&o.precision, DLP_CLI_PRECISION_HELP),
        {"device", 0, DLP_OPT_STR, &o.device, "cpu", "DEV", "backend: cpu | ref | cuda | sim:<gpu>", NULL, 0},
        {"threads", 't', DLP_OPT_INT, &o.threads, "0", "N", "compute threads (0: all allowed CPUs)", NULL, 0},
        {"streams", 0, DLP_OPT_INT, &o.streams, "1", "N", "--device cpu: split each batch over N plans of "
         "threads/N threads each, run side by side (throughput; no barrier between them; a batch below N uses fewer)",
         NULL, 0},
        {"workers", 'w', DLP_OPT_INT, &o.workers, "0", "N", "--from jpeg: loader threads decoding ahead (0: decode "
         "inline, on the calling thread, before each call)", NULL, 0},
        {"from", 0, DLP_OPT_CHOICE, &o.from, "tensor", NULL, "inputs: tensor (preprocessed once into memory, inference "
         "timed alone) or jpeg (read + decode + resize each call, timed apart)", "tensor|jpeg", 0},
        {"warmup", 0, DLP_OPT_INT, &o.warmup, "2", "N", "untimed calls per batch size", NULL, 0},
        {"iters", 'n', DLP_OPT_I64, &o.iters, "5", "N", "timed calls per batch size (at least)", NULL, 0},
        {"min-duration", 0, DLP_OPT_DOUBLE, &o.min_duration, "5", "S", "timed seconds per batch size (at least; 0 when only "
         "--iters is given)", NULL, 0},
        {"max-iters", 0, DLP_OPT_I64, &o.max_iters, "0", "N", "stop a batch size after this many calls (0: no cap)", NULL, 0},
        {"dct-scale", 0, DLP_OPT_FLAG, &o.dct, NULL, NULL, "let the JPEG decoder downscale by a DCT factor where the crop "
         "allows (faster; not bit-exact with Pillow)", NULL, 0},
        {"top5", 0, DLP_OPT_FLAG, &o.top5, NULL, NULL, "classify the images given as arguments (or --images) and print "
         "each one's top-5", NULL, 0},
        {"labels", 'l', DLP_OPT_STR, &o.labels, NULL, "FILE", "class names (imagenet_classes.txt, or a synthetic "
         "dataset's labels.txt)", NULL, 0},
        {"monitor-interval", 0, DLP_OPT_INT, &o.mon_interval, "500", "MS", "hardware monitor period (0: off)", NULL, 0},
        {"monitor-csv", 0, DLP_OPT_STR, &o.mon_csv, NULL, "FILE", "the monitor's time series as CSV", NULL, 0},
        {"calib", 0, DLP_OPT_STR, &o.calib, NULL, "FILE", "--precision int8: the calibration (activation ranges, "
         "safetensors): used when it exists, else made and written there (default: beside --weights as "
         "<weights>.int8-<method>.safetensors, reused when its image count matches)", NULL, 0},
        {"calib-images", 0, DLP_OPT_INT, &o.calib_images, "256", "N", "--precision int8: images of --data's train split "
         "(its val split when it has none) the activation ranges are calibrated on", NULL, 0},
        {"calib-method", 0, DLP_OPT_ENUM, &o.calib_method, "percentile", NULL, "--precision int8: activation range: the "
         "largest |x| seen (minmax) or its --calib-percentile", dlp_calib_method_choices, 0},
        {"calib-percentile", 0, DLP_OPT_DOUBLE, &o.calib_percentile, "99.99", "P", "--calib-method percentile: the "
         "percentile of |x| kept", NULL, 0},
        {"int8-first-conv", 0, DLP_OPT_FLAG, &o.int8_first_conv, NULL, NULL, "--precision int8: quantize the first "
         "convolution too (the default)", NULL, 0},
        {"fp32-first-conv", 0, DLP_OPT_FLAG, &o.fp32_first_conv, NULL, NULL, "--precision int8: keep the first "
         "convolution in fp32 (its input is the signed image)", NULL, 0},
        {"accuracy", 0, DLP_OPT_FLAG, &o.accuracy, NULL, NULL, "top-1/top-5 on --data's val split at the first --batch "
         "size instead of timing (with another precision than fp32: fp32's beside it and the top-1 agreement)", NULL, 0},
        {"accuracy-images", 0, DLP_OPT_INT, &o.accuracy_images, "0", "N", "--accuracy: images of the val split (0: all)",
         NULL, 0},
        {"json", 0, DLP_OPT_STR, &o.json, NULL, "FILE", "write the result here (dlperf.infer/1; never overwritten)", NULL, 0},
        {0},
    };
    int rest;
    dlp_status st = dlp_opts_parse(opts, "usage: dlperf infer [options]\n"
                                         "       dlperf infer --top5 [--weights W --labels L] IMAGE|DIR...\n"
                                         "Inference throughput over batch sizes and per-call latency (p50/p90/p99), from "
                                         "preprocessed tensors or from JPEG; or the top-5 classes of given images.",
                                   argc, argv, &rest);
    if (st) return dlp_cli_fail(st);
    if (rest < argc && !o.top5)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "unexpected argument '%s' (image arguments go with --top5)", argv[rest]));
    int batches[MAX_BATCHES], nb = 0, threads_used = 0;
    if ((st = check_opts(&o, opts, batches, &nb, &threads_used))) return dlp_cli_fail(st);

    dlp_infer_model m;
    dlp_infer_model_cfg mc = {.model = o.model, .num_classes = o.classes, .size = o.size, .weights = o.weights,
                              .seed = (uint64_t)o.seed};
    if ((st = dlp_infer_model_load(&mc, &m))) return dlp_cli_fail(st);
    if (m.random_init)
        DLP_WARN("no --weights: %s runs with torchvision's random initialization (seed %lld), so its predictions are "
                 "meaningless; timings are valid", m.net.arch, (long long)o.seed);
    const dlp_dtype prec = dlp_cli_precision(o.precision, o.device);
    const dlp_infer_engine_cfg ec0 = {.device = o.device, .batch = 1, .precision = prec,
                                      .threads = o.threads, .int8_first_conv = o.fp32_first_conv ? -1 : 1,
                                      .streams = o.streams};
    if (o.accuracy && (o.top5 || o.images)) {
        dlp_infer_model_free(&m);
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--accuracy reads --data's val split (labels): not with --top5 or "
                                    "--images"));
    }
    if (prec == DLP_DTYPE_I8) {
        dlp_infer_calib_cfg cc = {.device = o.device, .threads = o.threads, .data = o.data, .images = o.calib_images,
                                  .method = (dlp_calib_method)o.calib_method, .percentile = o.calib_percentile,
                                  .path = o.calib, .dct_scaling = o.dct, .on_note = on_calib_note};
        if ((st = dlp_infer_model_quantize(&m, &cc))) {
            dlp_infer_model_free(&m);
            return dlp_cli_fail(st);
        }
    }
    json_t *result = dlp_json_result_new("dlperf.infer/1", 0, NULL);
    json_object_set_new(result, "options", dlp_opts_to_json(opts));
    json_object_set_new(result, "model", dlp_infer_model_to_json(&m));
    if (prec == DLP_DTYPE_I8) json_object_set_new(result, "int8_calibration", dlp_infer_quant_to_json(&m));

    if (o.accuracy) {
        st = run_accuracy(&o, &m, &ec0, batches[0], result);
    } else if (o.top5) {
        dlp_infer_engine_cfg ec = ec0;
        ec.batch = 4;  // a few images per call: small plans (ref keeps every layer's output)
        st = run_top5(&o, &m, &ec, argc - rest, argv + rest, result);
    } else {
        st = run_bench(&o, &m, &ec0, batches, nb, threads_used, result);
    }
    json_t *cfg = json_object();
    json_object_set_new(cfg, "device", json_string(o.device));
    json_object_set_new(cfg, "precision", json_string(dlp_dtype_name(prec)));
    json_object_set_new(cfg, "threads", json_integer(threads_used));
    json_object_set_new(cfg, "streams", json_integer(o.streams));
    json_object_set_new(cfg, "from", json_string(o.from == DLP_INFER_FROM_JPEG ? "jpeg" : "tensor"));
    json_object_set_new(cfg, "decode", json_string(o.from == DLP_INFER_FROM_TENSOR ? "once, before timing"
                                                   : o.workers ? "loader threads" : "inline"));
    json_object_set_new(cfg, "workers", json_integer(o.workers));
    json_object_set_new(cfg, "dct_scaling", json_boolean(o.dct));
    json_t *barr = json_array();
    for (int i = 0; i < nb; i++) json_array_append_new(barr, json_integer(batches[i]));
    json_object_set_new(cfg, "batches", barr);
    json_object_set_new(result, "config", cfg);
    if (st == DLP_OK && o.json) {
        dlp_host_info h;
        dlp_host_probe(&h);
        json_object_set_new(result, "host", dlp_host_to_json(&h));
        json_object_set_new(result, "versions", dlp_versions_to_json());
        st = dlp_json_write(result, o.json, DLP_WRITE_NOCLOBBER);
        if (st == DLP_OK) fprintf(stderr, "infer: result written to %s\n", o.json);
    }
    json_decref(result);
    dlp_infer_model_free(&m);
    return dlp_cli_fail(st);
}
