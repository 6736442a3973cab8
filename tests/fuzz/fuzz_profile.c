// tests/fuzz/fuzz_profile: a machine profile file (dlperf probe's output, copied between machines) — hw/profile's
// dlp_profile_read through a temporary file: JSON, every field table, devices, rates, contention points, pipeline
// coefficients, dataset statistics, then validation. A profile it accepts must survive the round trip through
// dlp_profile_to_json and dlp_profile_from_json and still validate.
#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "hw/profile.h"

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
    return 0;
}
DLP_FUZZ_LIBFUZZER_ENTRY(dlp_fuzz_profile)
