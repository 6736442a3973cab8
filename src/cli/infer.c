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

#define MAX_BATCHES 16
#define TOPK DLP_CLASSIFY_TOPK

typedef struct infer_opts {
    const char *model, *weights, *data, *images, *batches, *labels, *json, *mon_csv;
    int classes, size, samples, precision, threads, workers, warmup, from, dct, top5, mon_interval;
    int64_t seed, iters, max_iters;
    double min_duration;
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
        json_t *arr = json_array();
        for (int i = 0; i < r.n; i++) {
            const int *cls = r.cls[i];
            const float *prob = r.prob[i];
            print_topk(r.paths[i], cls, prob, r.labels, r.nlabels);
            json_t *top = json_array();
            for (int j = 0; j < TOPK && cls[j] >= 0; j++) {
                json_t *t = json_pack("{si so}", "class", cls[j], "prob", dlp_json_real_or_null(prob[j]));
                json_t *lab = cls[j] < r.nlabels ? json_string(r.labels[cls[j]]) : NULL;  // NULL: not UTF-8
                if (cls[j] < r.nlabels) json_object_set_new(t, "label", lab ? lab : json_null());
                json_array_append_new(top, t);
            }
            json_t *logit_arr = json_array();
            for (int k = 0; k < r.num_classes; k++)  // keeps every index
                json_array_append_new(logit_arr, dlp_json_real_or_null(r.logits[(size_t)i * r.num_classes + k]));
            json_array_append_new(arr, json_pack("{ss so so}", "path", r.paths[i], "top5", top, "logits", logit_arr));
        }
        json_object_set_new(result, "top5", arr);
        json_object_set_new(result, "labels", r.labels_src[0] ? json_string(r.labels_src) : json_null());
        json_object_set_new(result, "skipped_images", json_integer(r.skipped));
        json_object_set_new(result, "plan", json_incref(r.plan));
        if (r.skipped) fprintf(stderr, "infer: %d of %d images could not be decoded (skipped)\n", r.skipped, r.nfiles);
    }
    dlp_classify_free(&r);
    return st;
}

// " (oneDNN avx512_core_bf16, 53 BN folded, 16 residual adds fused)" from the backend's plan_info, when given.
static void plan_summary(json_t *plan, char *out, size_t len) {
    json_t *b = json_object_get(plan, "backend_plan");
    if (!b) return;
    const char *lib = json_string_value(json_object_get(b, "library"));
    const char *isa = json_string_value(json_object_get(b, "isa"));
    json_t *t = json_object_get(b, "conv_prop_timed");
    const char *kind = json_string_value(json_object_get(b, "conv_prop_kind"));
    char timed[128] = "";
    if (t && kind) {  // a batch-1 plan built both ways and timed (backend/cpu: cpu_plan_create)
        const char *other = strcmp(kind, "forward_inference") ? "forward_inference" : "forward_training";
        char kept_key[40], other_key[40];
        snprintf(kept_key, sizeof kept_key, "%s_ms", kind);
        snprintf(other_key, sizeof other_key, "%s_ms", other);
        snprintf(timed, sizeof timed, "; convolutions %s, timed %.1f ms vs %.1f ms %s", kind,
                 json_real_value(json_object_get(t, kept_key)), json_real_value(json_object_get(t, other_key)), other);
    }
    snprintf(out, len, " (%s%s%s, %lld BN folded, %lld residual adds fused%s)", lib ? lib : "", isa ? " " : "",
             isa ? isa : "", (long long)json_integer_value(json_object_get(b, "folded_bn")),
             (long long)json_integer_value(json_object_get(b, "fused_residual_sum")), timed);
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

// The measurement over batch sizes: a plan per batch size, the inputs prepared once in the plans' input format.
static dlp_status run_bench(const infer_opts *o, dlp_infer_model *mp, const dlp_infer_engine_cfg *ec0p,
                            const int *batches, int nb, int threads_used, json_t *result) {
    const dlp_infer_engine_cfg ec0 = *ec0p;
    dlp_status st = DLP_OK;
    // The inputs: a dataset's val split (default: the synthetic ImageNet) or --images.
    dlp_dataset *ds = NULL;
    dlp_infer_files files = {0};
    dlp_infer_prep *prep = NULL;
    dlp_infer_library lib;
    memset(&lib, 0, sizeof lib);
    dlp_monitor *mon = NULL;
    char where[4096] = "";
    json_t *points = json_array();
    json_object_set_new(result, "results", points);
    if (o->images) st = dlp_infer_files_add(&files, o->images);
    else {
        st = dlp_data_open(o->data, "val", NULL, &ds, where, sizeof where);
        if (st == DLP_OK) st = dlp_infer_files_from_dataset(&files, ds, o->samples);
    }
    if (st == DLP_OK && o->mon_interval > 0) {
        dlp_monitor_cfg moc = {.interval_ms = o->mon_interval, .csv_path = o->mon_csv, .initial_phase = "setup"};
        st = dlp_monitor_create(&moc, &mon);
        if (st == DLP_OK) st = dlp_monitor_start(mon);
    }
    const char *src = o->images ? o->images : where;
    const char *where_dec = o->from == DLP_INFER_FROM_TENSOR ? "" : o->workers ? "on loader threads" : "inline";
    if (st == DLP_OK) {
        const dlp_layer *in = &mp->net.layers[0];
        printf("infer: %s, %d classes, %dx%dx%d, %.2f GFLOP/image, %s\n", mp->net.arch, mp->net.num_classes, in->c, in->h,
               in->w, dlp_net_forward_flops(&mp->net) / 1e9, mp->random_init ? "random weights (timing only)" : mp->weights);
        if (o->from == DLP_INFER_FROM_TENSOR)
            printf("inputs: up to %d images of %s, preprocessed into memory first; only inference is timed\n",
                   o->samples, src);
        else
            printf("inputs: JPEG files of %s, read + decoded + resized %s%s%s\n", src, where_dec,
                   o->workers ? " (" : "", o->workers ? "their time is per image, in parallel with inference)" : "");
    }
    int printed_header = 0;
    dlp_layout lib_layout = DLP_LAYOUT_NCHW;
    dlp_dtype lib_dtype = DLP_DTYPE_COUNT;
    for (int bi = 0; st == DLP_OK && bi < nb; bi++) {
        dlp_infer_engine e;
        dlp_infer_engine_cfg ec = ec0;
        ec.batch = batches[bi];
        char phase[32];
        snprintf(phase, sizeof phase, "batch %d", batches[bi]);
        dlp_monitor_phase(mon, phase);
        DLP_CHECK_GOTO(st, dlp_infer_engine_create(mp, &ec, &e), done);
        // The preprocessing writes the plan's input format; redone only if a plan wants another one.
        if (lib_dtype != e.in_dtype || lib_layout != e.layout) {
            dlp_infer_library_free(&lib);
            dlp_infer_prep_free(prep);
            prep = NULL;
            dlp_infer_prep_cfg pc = {.size = mp->size, .layout = e.layout, .dtype = e.in_dtype, .dct_scaling = o->dct,
                                     .workers = 1};
            st = dlp_infer_prep_create(&pc, &prep);
            if (st == DLP_OK && o->from == DLP_INFER_FROM_TENSOR) {
                st = dlp_infer_library_load(prep, &files, o->samples, &lib);
                if (st == DLP_OK) {
                    double per = 1.0 / lib.n;
                    printf("preprocessed %d images (%d skipped): %.2f ms/image (read %.2f, decode %.2f, resize+normalize "
                           "%.2f), %s %s\n", lib.n, lib.skipped,
                           dlp_ns_to_ms(lib.read_ns + lib.decode_ns + lib.resize_ns) * per, dlp_ns_to_ms(lib.read_ns) * per,
                           dlp_ns_to_ms(lib.decode_ns) * per, dlp_ns_to_ms(lib.resize_ns) * per,
                           dlp_layout_name(e.layout), dlp_dtype_name(e.in_dtype));
                    json_object_set_new(result, "samples",
                                        json_pack("{si si ss sf sf sf}", "count", lib.n, "skipped", lib.skipped, "source",
                                                  src, "read_ms_per_image", dlp_ns_to_ms(lib.read_ns) * per,
                                                  "decode_ms_per_image", dlp_ns_to_ms(lib.decode_ns) * per,
                                                  "resize_ms_per_image", dlp_ns_to_ms(lib.resize_ns) * per));
                }
            }
            lib_layout = e.layout;
            lib_dtype = e.in_dtype;
        }
        if (st == DLP_OK && !printed_header) {
            json_t *pj = dlp_infer_engine_plan_json(&e);
            char what[256] = "";
            plan_summary(pj, what, sizeof what);
            printf("plan: %s %s inference plan%s, %d compute threads, input %s %s\n\n", dlp_backend_name(e.ops),
                   dlp_dtype_name(e.precision), what, threads_used, dlp_layout_name(e.layout), dlp_dtype_name(e.in_dtype));
            json_object_set_new(result, "plan", pj);
            print_header_row(o);
            printed_header = 1;
        }
        dlp_infer_point pt;
        if (st == DLP_OK) {
            dlp_infer_bench_cfg bc = {.from = (dlp_infer_from)o->from, .warmup = o->warmup, .iters = o->iters,
                                      .min_duration_s = o->min_duration, .max_iters = o->max_iters, .lib = &lib,
                                      .files = &files, .prep = prep, .dataset = ds, .workers = o->workers,
                                      .dct_scaling = o->dct, .mon = mon};
            st = dlp_infer_bench(&e, &bc, &pt);
        }
        if (st == DLP_OK) {
            print_row(o, &pt);
            json_array_append_new(points, dlp_infer_point_to_json(&pt));
        } else {
            dlp_err_context("batch %d", batches[bi]);
        }
        dlp_infer_engine_free(&e);
    }
done:
    if (mon) {
        dlp_status ms = dlp_monitor_stop(mon);
        if (ms != DLP_OK) dlp_err_print(stderr), dlp_err_clear();
        if (st == DLP_OK) json_object_set_new(result, "monitor", dlp_monitor_summary_json(mon));
        dlp_monitor_destroy(mon);
    }
    dlp_infer_library_free(&lib);
    dlp_infer_prep_free(prep);
    dlp_infer_files_free(&files);
    dlp_dataset_free(ds);
    return st;
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
    if (o.json && (st = dlp_check_new_output(o.json, "--json"))) return dlp_cli_fail(st);
    if (o.mon_csv && (st = dlp_check_new_output(o.mon_csv, "--monitor-csv"))) return dlp_cli_fail(st);
    int batches[MAX_BATCHES];
    int nb = dlp_parse_int_list(o.batches, batches, MAX_BATCHES);
    if (nb < 1) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--batch %s: give sizes like 1,8,32 (at most %d)", o.batches,
                                            MAX_BATCHES));
    for (int i = 0; i < nb; i++)
        if (batches[i] < 1 || batches[i] > 65536)
            return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--batch %d is not in 1..65536", batches[i]));
    if (o.size < 32 || o.size > 4096) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--size %d is not in 32..4096", o.size));
    if (o.samples < 1) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--samples must be >= 1"));
    if (o.threads < 0 || o.workers < 0 || o.warmup < 0 || o.iters < 0 || o.max_iters < 0 || o.min_duration < 0)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--threads, --workers, --warmup, --iters, --max-iters and "
                                    "--min-duration must be >= 0"));
    if (o.mon_interval != 0 && o.mon_interval < 10)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--monitor-interval %d: use 0 (off) or at least 10 ms", o.mon_interval));
    if (dlp_opt_given(opts, "iters") && !dlp_opt_given(opts, "min-duration")) o.min_duration = 0;
    if (o.iters < 1 && o.min_duration <= 0)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "give --iters >= 1 or a --min-duration > 0"));
    if (o.from == DLP_INFER_FROM_JPEG && o.workers > 0 && o.images)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--workers decodes on the loader's threads, which read a dataset: "
                                    "use --data, or --workers 0 (inline) with --images"));

    dlp_infer_model m;
    dlp_infer_model_cfg mc = {.model = o.model, .num_classes = o.classes, .size = o.size, .weights = o.weights,
                              .seed = (uint64_t)o.seed};
    if ((st = dlp_infer_model_load(&mc, &m))) return dlp_cli_fail(st);
    if (m.random_init)
        DLP_WARN("no --weights: %s runs with torchvision's random initialization (seed %lld), so its predictions are "
                 "meaningless; timings are valid", m.net.arch, (long long)o.seed);
    const dlp_dtype prec = dlp_cli_precision(o.precision, o.device);
    const dlp_infer_engine_cfg ec0 = {.device = o.device, .batch = 1, .precision = prec,
                                      .threads = o.threads};
    const int threads_used = o.threads > 0 ? o.threads : dlp_host_cpus_allowed();
    json_t *result = dlp_json_result_new("dlperf.infer/1", 0, NULL);
    json_object_set_new(result, "options", dlp_opts_to_json(opts));
    json_object_set_new(result, "model", dlp_infer_model_to_json(&m));

    if (o.top5) {
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
