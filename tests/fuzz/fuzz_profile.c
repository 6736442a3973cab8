// tests/fuzz/fuzz_profile: a machine profile file (dlperf probe's output, copied between machines) — hw/profile's
// dlp_profile_read through a temporary file: JSON, every field table, devices, rates, contention points, pipeline
// coefficients, dataset statistics, then validation. A profile it accepts must survive the round trip through
// dlp_profile_to_json and dlp_profile_from_json and still validate, and when it carries its dataset's statistics, a
// prediction on its first devices either is refused or is finite and positive (throughput, epoch and total time):
// what validation takes, the model must be able to use (implausible rates once gave "1 nodes at 0 img/s").
#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include <math.h>

#include "hw/profile.h"
#include "perf/model.h"

int dlp_fuzz_profile(const uint8_t *data, size_t size) {
    const char *path = dlp_fuzz_tmpfile("profile.json", data, size);
    static dlp_profile p, q;  // large structs: off the stack
    dlp_profile_init(&p);
    if (dlp_profile_read(path, &p) != DLP_OK) return 0;
    for (int i = 0; i < p.ndevices; i++) DLP_FUZZ_CHECK(dlp_profile_find_device(&p, p.devices[i].name) != NULL);
    json_t *o = dlp_profile_to_json(&p);
    DLP_FUZZ_CHECK(o != NULL);
    dlp_profile_init(&q);
    dlp_status st = dlp_profile_from_json(o, "round trip", &q);
    json_decref(o);
    DLP_FUZZ_CHECK(st == DLP_OK);
    DLP_FUZZ_CHECK(dlp_profile_validate(&q, "round trip") == DLP_OK);
    if (!p.has_stats) return 0;
    for (int i = 0; i < p.ndevices && i < 2; i++) {
        dlp_workload w;
        dlp_workload_init(&w);
        w.stats = p.stats;
        w.samples = 64;  // the crop sampler's expectations: enough to exercise them, fast
        w.prec = p.devices[i].kind == DLP_DEVICE_CPU ? DLP_PREC_FP32 : DLP_PREC_FP16;
        dlp_prediction pr;
        if (dlp_predict(&p, &p.devices[i], &w, &pr) != DLP_OK) continue;
        DLP_FUZZ_CHECK(isfinite(pr.img_per_s) && pr.img_per_s > 0);
        DLP_FUZZ_CHECK(isfinite(pr.epoch_s) && pr.epoch_s > 0 && isfinite(pr.total_s) && pr.total_s > 0);
    }
    return 0;
}
DLP_FUZZ_LIBFUZZER_ENTRY(dlp_fuzz_profile)
