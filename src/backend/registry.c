// backend/registry: the static table of backends compiled in, and lookup by --device name.
// A new backend is one folder backend/<name>/ defining its ops table (backend/backend_impl.h) plus one line in
// k_backends (guarded by its build switch).
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend_impl.h"

// Each backend's ops table, defined in its own file (ref/ref.c, cpu/cpu.c, cuda/cuda.c, sim/sim.c).
extern const dlp_backend dlp_backend_ref;
#ifdef DLP_HAVE_DNNL
extern const dlp_backend dlp_backend_cpu;
#endif
#ifdef DLP_HAVE_CUDA
extern const dlp_backend dlp_backend_cuda;  // backend/cuda/: cuDNN/cuBLAS, with USE_CUDA
#endif
extern const dlp_backend dlp_backend_sim;  // backend/sim/: an emulated GPU, always built

// Backends this build may have, for the message when one is asked for that is not compiled in.
static const char *const k_known[] = {"ref", "cpu", "cuda", "sim"};

// Preferred first: the first entry available here is the default device. One line per backend, each under its
// own build switch.
static const dlp_backend_ops *const k_backends[] = {
    &dlp_backend_ref,
#ifdef DLP_HAVE_DNNL
    &dlp_backend_cpu,
#endif
#ifdef DLP_HAVE_CUDA
    &dlp_backend_cuda,  // after ref: callers take the first entry as the default device without asking available()
#endif
    &dlp_backend_sim,  // last: never the default device
    NULL,
};

const dlp_backend *const *dlp_backends(void) { return k_backends; }

const dlp_backend *dlp_backend_find(const char *device, const char **arg) {
    if (arg) *arg = NULL;
    if (!device || !*device) {
        DLP_ERR(DLP_ERR_INVALID, "no device given (use --device ref|cpu|cuda|sim:<gpu>)");
        return NULL;
    }
    const char *colon = strchr(device, ':');
    size_t len = colon ? (size_t)(colon - device) : strlen(device);
    for (const dlp_backend_ops *const *b = k_backends; *b; b++) {
        if (strlen((*b)->name) == len && strncmp((*b)->name, device, len) == 0) {
            if (arg) *arg = colon ? colon + 1 : NULL;
            return *b;
        }
    }
    char list[256] = "";
    size_t used = 0;
    for (const dlp_backend_ops *const *b = k_backends; *b && used + 1 < sizeof list; b++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", (*b)->name);
        if (w < 0) break;
        used += (size_t)w;
    }
    for (size_t i = 0; i < sizeof k_known / sizeof k_known[0]; i++)
        if (strlen(k_known[i]) == len && strncmp(k_known[i], device, len) == 0) {
            DLP_ERR(DLP_ERR_UNSUPPORTED, "device '%.*s' is not compiled into this build (it has: %s)", (int)len,
                    device, list);
            return NULL;
        }
    DLP_ERR(DLP_ERR_NOTFOUND, "unknown device '%.*s' (this build has: %s)", (int)len, device, list);
    return NULL;
}

