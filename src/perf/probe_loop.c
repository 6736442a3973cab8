// perf/probe_loop: the training loop's own time per step — a short run of the real loop on an emulated device
// with a known step time and a loader that is never behind: measured step time minus the device's.
#include "perf/probe_impl.h"

dlp_status dlp_probe_loop(dlp_probe_ctx *c) {
    c->p->host.loop_overhead_s = 0;
    dlp_probe_say(c, "loop: the training loop is not in this build yet; loop_overhead_s = 0");
    return DLP_OK;
}
