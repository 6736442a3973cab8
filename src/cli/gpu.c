// cli/gpu: `dlperf gpu info|bench|probe` — the CUDA device and libraries, ResNet step throughput of the cuda
// backend (training or inference, synthetic data, optionally with the per-step host-to-device copy), and the GPU
// profile (host-to-device bandwidth, step time against batch size). Without CUDA in the build, or without a
// device, each says so and exits non-zero.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/opts.h"
#include "core/tensor.h"
#include "hw/host.h"

#ifdef DLP_HAVE_CUDA
#include "backend/cuda/cuda.h"
#include "perf/probe_steps.h"
#include "hw/catalog.h"
#include "nn/info.h"
#include "nn/resnet.h"

static dlp_status parse_device(const char *device, int *index) {
    *index = 0;
    const char *arg = NULL;
    const dlp_backend *b = dlp_backend_find(device, &arg);
    dlp_err_clear();
    if (!b || dlp_backend_get_caps(b)->kind != DLP_BACKEND_KIND_GPU)
        return DLP_ERR(DLP_ERR_INVALID, "dlperf gpu runs on --device cuda or cuda:N (got '%s')", device);
    if (arg) *index = atoi(arg);
    return DLP_OK;
}


static dlp_status write_json(json_t *o, const char *path) {
    if (!path || !*path) return DLP_OK;
    return dlp_json_write(o, path, DLP_WRITE_NOCLOBBER);
}

static int gpu_info(int argc, char **argv) {
    const char *device = "cuda", *json = NULL;
    dlp_opt opts[] = {
        {"device", 0, DLP_OPT_STR, &device, "cuda", "cuda[:N]", "the GPU to describe", NULL, 0},
        {"json", 0, DLP_OPT_STR, &json, NULL, "FILE", "also write the facts as JSON", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(opts, "usage: dlperf gpu info [--device cuda[:N]] [--json FILE]", argc, argv);
    if (st) return dlp_cli_fail(st);
    if (json && (st = dlp_check_new_output(json, "--json"))) return dlp_cli_fail(st);
    int idx;
    if ((st = parse_device(device, &idx))) return dlp_cli_fail(st);
    dlp_cuda_device_info d;
    if ((st = dlp_cuda_device_query(idx, &d))) return dlp_cli_fail(st);
    printf("device         %d: %s (compute capability %d.%d, %d SMs, %.1f GiB, L2 %.0f MiB)\n", d.index, d.name,
           d.cc_major, d.cc_minor, d.sms, d.mem_bytes / 1073741824.0, d.l2_bytes / 1048576.0);
    json_t *v = dlp_cuda_versions_to_json();
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) printf("%-14s %s\n", k, json_string_value(x));
    json_t *o = dlp_json_result_new("dlperf.gpu_info/1", 0, NULL);
    json_object_set_new(o, "device", dlp_cuda_device_to_json(&d));
    json_object_set_new(o, "versions", v);
    st = write_json(o, json);
    json_decref(o);
    return dlp_cli_fail(st);
}

static int gpu_bench(int argc, char **argv) {
    const char *device = "cuda", *model = "resnet50", *json = NULL;
    int batch = 256, prec = DLP_DTYPE_F16, steps = 30, warmup = 10, image = 224, classes = 1000, tf32 = 0, h2d = 0, infer = 0;
    dlp_opt opts[] = {
        {"device", 0, DLP_OPT_STR, &device, "cuda", "cuda[:N]", "the GPU", NULL, 0},
        {"model", 'm', DLP_OPT_STR, &model, "resnet50", "NAME", "resnet18|34|50|101|152|resnet-mini", NULL, 0},
        {"batch", 'b', DLP_OPT_INT, &batch, "256", "N", "samples per step", NULL, 0},
        {"precision", 'p', DLP_OPT_ENUM, &prec, "fp16", NULL, "compute type", dlp_dtype_choices, 0},
        {"tf32", 0, DLP_OPT_FLAG, &tf32, NULL, NULL, "allow TF32 for fp32", NULL, 0},
        {"infer", 0, DLP_OPT_FLAG, &infer, NULL, NULL, "time inference (BN folded) instead of training", NULL, 0},
        {"h2d", 0, DLP_OPT_FLAG, &h2d, NULL, NULL, "copy the batch from pinned host memory every step", NULL, 0},
        {"steps", 's', DLP_OPT_INT, &steps, "30", "N", "timed steps", NULL, 0},
        {"warmup", 0, DLP_OPT_INT, &warmup, "10", "N", "untimed steps first (graphs are captured there)", NULL, 0},
        {"image", 0, DLP_OPT_INT, &image, "224", "PX", "image size", NULL, 0},
        {"classes", 0, DLP_OPT_INT, &classes, "1000", "N", "classes", NULL, 0},
        {"json", 0, DLP_OPT_STR, &json, NULL, "FILE", "write the result (dlperf.gpu_bench/1)", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(opts, "usage: dlperf gpu bench [options]   (ResNet steps on synthetic data)", argc,
                                  argv);
    if (st) return dlp_cli_fail(st);
    if (json && (st = dlp_check_new_output(json, "--json"))) return dlp_cli_fail(st);
    int idx;
    if ((st = parse_device(device, &idx))) return dlp_cli_fail(st);
    if (batch < 1 || steps < 1 || warmup < 0)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--batch and --steps must be >= 1, --warmup >= 0"));
    if (idx != 0) return dlp_cli_fail(DLP_ERR(DLP_ERR_UNSUPPORTED, "dlperf gpu bench uses device 0 (CUDA_VISIBLE_DEVICES selects it)"));
    dlp_cuda_device_info d;
    if ((st = dlp_cuda_device_query(idx, &d))) return dlp_cli_fail(st);
    dlp_net net;
    float *params, *bufs;
    if ((st = dlp_model_init(model, classes, image, 1234, 0, &net, &params, &bufs))) return dlp_cli_fail(st);
    dlp_cuda_step_point pt;
    st = dlp_cuda_probe_steps(&net, params, bufs, !infer, (dlp_dtype)prec, tf32, &batch, 1, warmup, steps, h2d, &pt);
    double gflop = dlp_net_forward_flops(&net) * 1e-9 * (infer ? 1 : 3);
    dlp_net_free(&net);
    free(params);
    free(bufs);
    if (st) return dlp_cli_fail(st);
    printf("%s %s %s batch %d on %s: %.0f img/s, %.3f ms/step (p10 %.3f, p90 %.3f), %.0f TFLOP/s, plan %.0f ms, "
           "%.1f GiB, %d graphs",
           model, infer ? "inference" : "training", dlp_dtype_name((dlp_dtype)prec), batch, d.name, pt.images_per_s,
           pt.step_ms, pt.step_ms_p10, pt.step_ms_p90, pt.images_per_s * gflop * 1e-3, pt.plan_ms,
           pt.device_bytes / 1073741824.0, pt.graphs_captured);
    if (h2d) printf(", h2d copy %.3f ms/step, stall %.3f ms/step", pt.copy_ms, pt.stall_ms);
    printf("\n");
    json_t *o = dlp_json_result_new("dlperf.gpu_bench/1", 0, NULL);
    json_object_set_new(o, "options", dlp_opts_to_json(opts));
    json_object_set_new(o, "device", dlp_cuda_device_to_json(&d));
    json_object_set_new(o, "versions", dlp_cuda_versions_to_json());
    json_t *x = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:i, s:f, s:f}", "images_per_s", pt.images_per_s, "step_ms",
                          pt.step_ms, "step_ms_p10", pt.step_ms_p10, "step_ms_p90", pt.step_ms_p90, "gflop_per_image", gflop,
                          "plan_ms", pt.plan_ms, "device_bytes", (json_int_t)pt.device_bytes, "graphs_captured",
                          pt.graphs_captured, "h2d_copy_ms_per_step", pt.copy_ms, "h2d_stall_ms_per_step", pt.stall_ms);
    json_object_update(o, x);
    json_decref(x);
    st = write_json(o, json);
    json_decref(o);
    return dlp_cli_fail(st);
}

static dlp_status write_machine_profile(const char *path, const char *catalog_dir, const char *gpu_id,
                                        const dlp_cuda_device_info *d, const dlp_device_profile *dev, const char *model) {
    dlp_catalog *c = NULL;
    DLP_CHECK(dlp_catalog_load(catalog_dir, &c));
    dlp_profile *p = malloc(sizeof *p);
    dlp_status st = p ? DLP_OK : DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    const dlp_gpu_spec *g = NULL;
    if (st == DLP_OK) {
        g = gpu_id && *gpu_id ? dlp_catalog_gpu(c, gpu_id) : dlp_cuda_catalog_gpu(c, d->name);
        if (!g)
            st = DLP_ERR(DLP_ERR_NOTFOUND, "--profile: which catalog GPU is '%s'? give --gpu ID (dlperf catalog gpus)",
                         gpu_id && *gpu_id ? gpu_id : d->name);
    }
    if (st == DLP_OK) st = dlp_cuda_machine_profile(c, g, d, dev, model, p);
    if (st == DLP_OK) st = dlp_profile_write(p, path);
    free(p);
    dlp_catalog_free(c);
    return st;
}

static int gpu_probe(int argc, char **argv) {
    const char *device = "cuda", *model = "resnet50", *json = NULL, *batches_s = "1,8,32,64,128,256";
    const char *profile = NULL, *gpu_id = NULL, *catalog = NULL;
    int prec = DLP_DTYPE_F16, steps = 15, warmup = 5, image = 224;
    dlp_opt opts[] = {
        {"device", 0, DLP_OPT_STR, &device, "cuda", "cuda[:N]", "the GPU", NULL, 0},
        {"model", 'm', DLP_OPT_STR, &model, "resnet50", "NAME", "resnet18|34|50|101|152|resnet-mini", NULL, 0},
        {"precision", 'p', DLP_OPT_ENUM, &prec, "fp16", NULL, "compute type", dlp_dtype_choices, 0},
        {"batches", 0, DLP_OPT_STR, &batches_s, "1,8,32,64,128,256", "LIST", "batch sizes to time", NULL, 0},
        {"steps", 's', DLP_OPT_INT, &steps, "15", "N", "timed steps per point", NULL, 0},
        {"warmup", 0, DLP_OPT_INT, &warmup, "5", "N", "untimed steps per point", NULL, 0},
        {"image", 0, DLP_OPT_INT, &image, "224", "PX", "image size", NULL, 0},
        {"json", 0, DLP_OPT_STR, &json, NULL, "FILE", "write every measurement (dlperf.gpu_profile/1)", NULL, 0},
        {"profile", 0, DLP_OPT_STR, &profile, NULL, "FILE",
         "write a machine profile (dlperf.profile/1) with this GPU measured, for sim: and predict", NULL, 0},
        {"gpu", 0, DLP_OPT_STR, &gpu_id, NULL, "ID", "the catalog GPU it is (default: guessed from its name)", NULL, 0},
        {"catalog", 0, DLP_OPT_STR, &catalog, NULL, "DIR", "catalog directory (default: found next to dlperf)", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(opts, "usage: dlperf gpu probe [options]   (a GPU profile)", argc, argv);
    if (st) return dlp_cli_fail(st);
    if (json && (st = dlp_check_new_output(json, "--json"))) return dlp_cli_fail(st);
    if (profile && (st = dlp_check_new_output(profile, "--profile"))) return dlp_cli_fail(st);
    int idx, batches[32];
    if ((st = parse_device(device, &idx))) return dlp_cli_fail(st);
    int nb = dlp_parse_int_list(batches_s, batches, 32);
    if (nb <= 0) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--batches %s: expected a list like 1,8,32", batches_s));
    dlp_cuda_device_info d;
    if ((st = dlp_cuda_device_query(idx, &d))) return dlp_cli_fail(st);
    static const int64_t sizes[] = {64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20};
    const int ns = (int)(sizeof sizes / sizeof sizes[0]);
    dlp_cuda_h2d_point h2d[2 * 5];
    if ((st = dlp_cuda_probe_h2d(idx, sizes, ns, 10, h2d))) return dlp_cli_fail(st);
    for (int i = 0; i < 2 * ns; i++)
        printf("h2d %-8s %9lld bytes: %6.2f GB/s to the device, %6.2f GB/s back, %8.1f us\n",
               h2d[i].pinned ? "pinned" : "pageable", (long long)h2d[i].bytes, h2d[i].h2d_gb_per_s, h2d[i].d2h_gb_per_s,
               h2d[i].h2d_latency_us);
    dlp_net net;
    float *params, *bufs;
    if ((st = dlp_model_init(model, 1000, image, 1234, 0, &net, &params, &bufs))) return dlp_cli_fail(st);
    dlp_cuda_step_point pts[64];
    st = dlp_cuda_probe_steps(&net, params, bufs, 1, (dlp_dtype)prec, 0, batches, nb, warmup, steps, 0, pts);
    if (st == DLP_OK)
        st = dlp_cuda_probe_steps(&net, params, bufs, 0, (dlp_dtype)prec, 0, batches, nb, warmup, steps, 0, pts + nb);
    dlp_net_free(&net);
    free(params);
    free(bufs);
    if (st) return dlp_cli_fail(st);
    for (int i = 0; i < 2 * nb; i++)
        printf("%s %s batch %4d: %8.3f ms/step, %8.0f img/s\n", pts[i].train ? "train" : "infer",
               dlp_dtype_name(pts[i].precision), pts[i].batch, pts[i].step_ms, pts[i].images_per_s);
    // The device entry in the model's schema (per image of ResNet-50 224x224 work and its parameter count).
    double work, params_ratio;
    dlp_model_work_ratio(model, image, &work, &params_ratio);
    dlp_device_profile dev;
    dlp_status dst = dlp_cuda_device_profile("gpu", &d, h2d, 2 * ns, pts, 2 * nb, work, params_ratio, &dev);
    json_t *o = dlp_cuda_profile_json(&d, h2d, 2 * ns, pts, 2 * nb, model);
    if (dst == DLP_OK) {
        json_object_set_new(o, "device_profile", dlp_device_to_json(&dev));
        for (int i = 0; i < dev.nrates; i++)
            printf("rate %s %s: %.3f ms + %.4f ms per image, update %.3f ms, forward share %.2f\n",
                   dlp_task_name(dev.rates[i].task), dlp_prec_name(dev.rates[i].prec), dev.rates[i].t0_s * 1e3,
                   dev.rates[i].per_image_s * 1e3, dev.rates[i].update_s * 1e3, dev.fwd_fraction);
    } else {
        dlp_err_print(stderr);  // the measurements are still written
        dlp_err_clear();
    }
    json_object_set_new(o, "options", dlp_opts_to_json(opts));
    dlp_host_info h;
    dlp_host_probe(&h);
    json_object_set_new(o, "host", dlp_host_to_json(&h));
    st = write_json(o, json);
    json_decref(o);
    if (!st && json) printf("GPU measurements written to %s\n", json);
    if (!st && profile) {
        st = dst != DLP_OK ? DLP_ERR(DLP_ERR_NUMERIC, "--profile: the measurements give no device profile")
                           : write_machine_profile(profile, catalog, gpu_id, &d, &dev, model);
        if (!st) printf("machine profile with the measured GPU written to %s (use: --device sim:<gpu>,profile=%s)\n", profile, profile);
    }
    return dlp_cli_fail(st);
}

static const dlp_cli_cmd k_gpu_cmds[] = {
    {"info", gpu_info, "the CUDA device and library versions"},
    {"bench", gpu_bench, "ResNet training/inference throughput on the GPU (synthetic data)"},
    {"probe", gpu_probe, "a GPU profile: host-to-device bandwidth, step time against batch size"},
    {NULL, NULL, NULL},
};

int dlp_cli_gpu(int argc, char **argv) { return dlp_cli_dispatch("dlperf gpu", k_gpu_cmds, argc, argv); }

#else

int dlp_cli_gpu(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return dlp_cli_fail(DLP_ERR(DLP_ERR_UNSUPPORTED,
                                "this dlperf was built without CUDA (no nvcc or cuDNN at build time, or USE_CUDA=0); "
                                "hint: use --device cpu or sim:h200"));
}

#endif
