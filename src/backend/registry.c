// backend/registry: the static table of backends compiled in, and lookup by --device name.
// A new backend is one folder backend/<name>/ defining its ops table `const dlp_backend_ops dlp_backend_<name>`
// (backend/backend_impl.h) plus one X(<name>) in DLP_BACKEND_LIST below.
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend_impl.h"

// Every backend a build may have, preferred first, with its device kind: the first entry available here is the
// default device (sim last: never the default; cuda after ref: callers take the first entry as the default device
// without asking available()). One X(<name>, <kind>) per backend, its build switch around it; the compiled ones
// declare backend/<name>/'s `dlp_backend_<name>` table and go into k_backends, and all of them into k_all (the
// message for a device not compiled in, and dlp_backend_kind_of a result written by another build). The kind here
// must match the table's caps.kind (test_backend_ops checks it).
#ifdef DLP_HAVE_DNNL
#define IF_DNNL(x) x
#else
#define IF_DNNL(x)
#endif
#ifdef DLP_HAVE_CUDA
#define IF_CUDA(x) x
#else
#define IF_CUDA(x)
#endif
#define ALWAYS(x) x
#define DLP_BACKEND_LIST(X, IFDNNL, IFCUDA) \
    X(ref, DLP_BACKEND_KIND_CPU) IFDNNL(X(cpu, DLP_BACKEND_KIND_CPU)) IFCUDA(X(cuda, DLP_BACKEND_KIND_GPU)) \
    X(sim, DLP_BACKEND_KIND_SIM)

#define DLP_BACKEND_DECLARE(name, kind) extern const dlp_backend_ops dlp_backend_##name;
#define DLP_BACKEND_ENTRY(name, kind) &dlp_backend_##name,
#define DLP_BACKEND_NAME(name, kind) {#name, kind},
DLP_BACKEND_LIST(DLP_BACKEND_DECLARE, IF_DNNL, IF_CUDA)
static const dlp_backend_ops *const k_backends[] = {DLP_BACKEND_LIST(DLP_BACKEND_ENTRY, IF_DNNL, IF_CUDA) NULL};

static const struct {
    const char *name;
    dlp_backend_kind kind;
} k_all[] = {DLP_BACKEND_LIST(DLP_BACKEND_NAME, ALWAYS, ALWAYS)};

// The length of the backend name in a --device string ("sim:a100" -> 3).
static size_t name_len(const char *device) {
    const char *colon = strchr(device, ':');
    return colon ? (size_t)(colon - device) : strlen(device);
}

dlp_backend_kind dlp_backend_kind_of(const char *device) {
    if (!device || !*device) return DLP_BACKEND_KIND_UNKNOWN;
    size_t len = name_len(device);
    for (const dlp_backend_ops *const *b = k_backends; *b; b++)
        if (strlen((*b)->name) == len && strncmp((*b)->name, device, len) == 0) return (*b)->caps.kind;
    for (size_t i = 0; i < sizeof k_all / sizeof k_all[0]; i++)
        if (strlen(k_all[i].name) == len && strncmp(k_all[i].name, device, len) == 0) return k_all[i].kind;
    return DLP_BACKEND_KIND_UNKNOWN;
}

dlp_dtype dlp_device_default_precision(const char *device) {
    if (!device || !*device) return DLP_DTYPE_F32;
    size_t len = name_len(device);
    for (const dlp_backend_ops *const *b = k_backends; *b; b++)
        if (strlen((*b)->name) == len && strncmp((*b)->name, device, len) == 0) return (*b)->caps.default_precision;
    return DLP_DTYPE_F32;
}

const dlp_backend *const *dlp_backends(void) { return k_backends; }

const dlp_backend *dlp_backend_find(const char *device, const char **arg) {
    if (arg) *arg = NULL;
    if (!device || !*device) {
        DLP_ERR(DLP_ERR_INVALID, "no device given (use --device ref|cpu|cuda|sim:<gpu>)");
        return NULL;
    }
    const char *colon = strchr(device, ':');
    size_t len = name_len(device);
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
    for (size_t i = 0; i < sizeof k_all / sizeof k_all[0]; i++)
        if (strlen(k_all[i].name) == len && strncmp(k_all[i].name, device, len) == 0) {
            DLP_ERR(DLP_ERR_UNSUPPORTED, "device '%.*s' is not compiled into this build (it has: %s)", (int)len,
                    device, list);
            return NULL;
        }
    DLP_ERR(DLP_ERR_NOTFOUND, "unknown device '%.*s' (this build has: %s)", (int)len, device, list);
    return NULL;
}

