// run/train_peak: default thread counts for a device, and the backend's peak GFLOP/s with a small cache, so a run
// states its achieved GFLOP/s as a fraction of what the backend's best convolution sustains on this machine.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "hw/host.h"
#include "run/train.h"

#define PEAK_TRIES 3


// The rule and the measurements behind it are in docs/training.md ("Threads").
void dlp_train_default_threads(const char *device, int *threads, int *workers) {
    const int cpus = dlp_host_cpus_allowed();
    const int host_computes = !device || !device[0] || dlp_backend_kind_of(device) == DLP_BACKEND_KIND_CPU;
    *threads = cpus;
    if (host_computes) {
        *workers = cpus / 4 > 1 ? cpus / 4 : 1;
    } else {
        *threads = 1;  // the host only feeds the device
        *workers = cpus;
    }
}

static void cache_path(const char *backend, dlp_dtype precision, int threads, char *out, size_t len) {
    char dir[3072];
    dlp_cache_dir(dir, sizeof dir);
    snprintf(out, len, "%s/peak/%s-%s-t%d.json", dir, backend, dlp_dtype_name(precision), threads);
}

static json_t *identity(const char *backend, dlp_dtype precision, int threads) {
    dlp_host_info h;
    dlp_host_probe(&h);
    json_t *o = json_object();
    json_object_set_new(o, "backend", json_string(backend));
    json_object_set_new(o, "precision", json_string(dlp_dtype_name(precision)));
    json_object_set_new(o, "threads", json_integer(threads));
    json_object_set_new(o, "cpu_model", json_string(h.cpu_model));
    json_object_set_new(o, "cpus_online", json_integer(h.cpus_online));
    json_object_set_new(o, "versions", dlp_versions_to_json());
    return o;
}

dlp_status dlp_train_peak(const char *device, dlp_dtype precision, int threads, dlp_train_peak_mode mode,
                          double *gflops, const char **source) {
    *gflops = 0;
    *source = "none";
    const dlp_backend *ops = dlp_backend_find(device, NULL);
    if (!ops) return dlp_err_status();
    if (!dlp_backend_has(ops, DLP_BACKEND_PEAK)) return DLP_ERR(DLP_ERR_UNSUPPORTED, "backend %s has no peak measurement", dlp_backend_name(ops));
    if (mode == DLP_TRAIN_PEAK_OFF) return DLP_OK;
    if (threads <= 0) threads = dlp_host_cpus_allowed();
    char path[4096];
    cache_path(dlp_backend_name(ops), precision, threads, path, sizeof path);
    json_t *id = identity(dlp_backend_name(ops), precision, threads);
    if (mode == DLP_TRAIN_PEAK_CACHED && dlp_path_exists(path)) {
        json_t *j = NULL;
        if (dlp_json_load(path, &j) == DLP_OK) {
            double g = json_real_value(json_object_get(j, "gflop_per_s"));
            if (json_equal(json_object_get(j, "identity"), id) && g > 0) {
                *gflops = g;
                *source = "cached";
                json_decref(j);
                json_decref(id);
                return DLP_OK;
            }
            json_decref(j);
        }
        dlp_err_clear();
    }
    // The best of three measurements: a short measurement that another process interrupted reads low.
    double g = 0, samples[PEAK_TRIES];
    int64_t t0 = dlp_now_ns();
    for (int i = 0; i < PEAK_TRIES; i++) {
        dlp_status st = dlp_backend_measure_peak(ops, precision, threads, &samples[i]);
        if (st) {
            json_decref(id);
            return st;
        }
        if (samples[i] > g) g = samples[i];
    }
    *gflops = g;
    *source = "measured";
    json_t *j = json_object();
    json_object_set_new(j, "identity", id);
    json_object_set_new(j, "gflop_per_s", json_real(g));
    json_object_set_new(j, "measure_ms", json_real(dlp_ns_to_ms(dlp_now_ns() - t0)));
    json_t *sa = json_array();
    for (int i = 0; i < PEAK_TRIES; i++) json_array_append_new(sa, json_real(samples[i]));
    json_object_set_new(j, "samples", sa);
    char when[64];
    json_object_set_new(j, "measured_at", json_string(dlp_wall_iso8601(when, sizeof when)));
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    if (dlp_mkdirs(dir) != DLP_OK || dlp_json_write(j, path, DLP_WRITE_REPLACE) != DLP_OK) {
        DLP_DEBUG("cannot cache the peak in %s: %s", path, dlp_err_msg());
        dlp_err_clear();
    }
    json_decref(j);
    return DLP_OK;
}
