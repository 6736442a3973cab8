// perf/probe_cuda: the CUDA GPU as a device of the machine profile — host-to-device copy rates (pinned and
// pageable) and ResNet-50 step time against batch size for training and inference, through the cuda backend's
// probes (backend/cuda/cuda.h, perf/probe_steps.h), turned into a device entry by dlp_cuda_device_profile. Built only with CUDA.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "hw/catalog.h"
#include "nn/resnet.h"
#include "perf/probe_impl.h"
#include "perf/probe_steps.h"

dlp_status dlp_probe_cuda(dlp_probe_ctx *c) {
    dlp_cuda_device_info d;
    DLP_CHECK(dlp_cuda_device_query(0, &d));
    int count = 1;
    for (int i = 1; i < 64; i++) {
        dlp_cuda_device_info e;
        if (dlp_cuda_device_query(i, &e) != DLP_OK) break;
        count++;
    }
    dlp_err_clear();
    c->gpus = count;
    if (c->p->ndevices >= DLP_PROFILE_MAX_DEVICES) return DLP_ERR(DLP_ERR_INVALID, "probe: too many devices");
    const int quick = c->cfg->quick;
    dlp_probe_say(c, "cuda: %s (%d device(s)): copy rates", d.name, count);
    static const int64_t sizes[] = {1 << 20, 16 << 20, 64 << 20};
    dlp_cuda_h2d_point h2d[6];
    DLP_CHECK(dlp_cuda_probe_h2d(0, sizes, 3, quick ? 5 : 10, h2d));
    for (int i = 0; i < 6; i++)
        dlp_probe_say(c, "cuda: %s copy of %lld bytes: %.2f GB/s to the device", h2d[i].pinned ? "pinned" : "pageable",
                      (long long)h2d[i].bytes, h2d[i].h2d_gb_per_s);
    dlp_net net;
    DLP_CHECK(dlp_model_build("resnet50", 1000, 224, &net));
    float *params = malloc(sizeof(float) * (size_t)net.param_count), *bufs = malloc(sizeof(float) * (size_t)net.buf_count);
    dlp_status st = DLP_OK;
    dlp_cuda_step_point pts[32];
    int np = 0;
    if (!params || !bufs) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    static const int k_batches[] = {32, 64, 128, 256}, k_batches_quick[] = {64, 256};
    const int *bs = quick ? k_batches_quick : k_batches;
    const int nb = quick ? 2 : 4;
    static const dlp_dtype k_prec[] = {DLP_DTYPE_F16, DLP_DTYPE_F32};
    if (st == DLP_OK) dlp_resnet_init_params(&net, c->cfg->seed, 0, params, bufs);
    for (int ip = 0; ip < 2 && st == DLP_OK; ip++)
        for (int train = 1; train >= 0 && st == DLP_OK; train--) {
            dlp_probe_say(c, "cuda: resnet50 224px %s %s, batches %d..%d", train ? "training" : "inference",
                          dlp_dtype_name(k_prec[ip]), bs[0], bs[nb - 1]);
            st = dlp_cuda_probe_steps(&net, params, bufs, train, k_prec[ip], ip == 1, bs, nb, quick ? 3 : 5,
                                      quick ? 8 : 15, 0, pts + np);
            if (st == DLP_OK) np += nb;
        }
    free(params);
    free(bufs);
    dlp_net_free(&net);
    DLP_CHECK(st);
    for (int i = 0; i < np; i++)
        dlp_probe_say(c, "cuda: %s %s batch %d: %.2f ms per step, %.0f img/s", pts[i].train ? "train" : "infer",
                      dlp_dtype_name(pts[i].precision), pts[i].batch, pts[i].step_ms, pts[i].images_per_s);
    char name[48] = "gpu";
    dlp_catalog *cat = NULL;
    if (dlp_catalog_load(NULL, &cat) == DLP_OK) {
        const dlp_gpu_spec *g = dlp_cuda_catalog_gpu(cat, d.name);
        if (g) snprintf(name, sizeof name, "%s", g->id);
    }
    dlp_catalog_free(cat);
    dlp_err_clear();
    dlp_device_profile *dev = &c->p->devices[c->p->ndevices];
    DLP_CHECK(dlp_cuda_device_profile(name, &d, h2d, 6, pts, np, 1.0, 1.0, dev));
    c->p->ndevices++;
    c->p->devices_per_node = count;
    json_t *o = dlp_cuda_profile_json(&d, h2d, 6, pts, np, "resnet50");
    json_t *devs = json_object_get(c->details, "devices");
    if (!devs) {
        devs = json_object();
        json_object_set_new(c->details, "devices", devs);
    }
    json_object_set_new(devs, "cuda", o);
    return DLP_OK;
}
