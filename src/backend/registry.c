// backend/registry: the static table of backends compiled in, and lookup by --device name.
// A new backend is one folder backend/<name>/ defining its ops table `const dlp_backend_ops dlp_backend_<name>`
// (backend/backend_impl.h) plus one X(<name>) in DLP_BACKEND_LIST below.
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend_impl.h"

// The backends compiled in, preferred first: the first entry available here is the default device (sim last: never
// the default; cuda after ref: callers take the first entry as the default device without asking available()).
// One X(<name>) per backend, under its build switch; it declares backend/<name>/'s `dlp_backend_<name>` table and
// puts it in k_backends.
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
#define DLP_BACKEND_LIST(X) X(ref) IF_DNNL(X(cpu)) IF_CUDA(X(cuda)) X(sim)

#define DLP_BACKEND_DECLARE(name) extern const dlp_backend_ops dlp_backend_##name;
#define DLP_BACKEND_ENTRY(name) &dlp_backend_##name,
DLP_BACKEND_LIST(DLP_BACKEND_DECLARE)
static const dlp_backend_ops *const k_backends[] = {DLP_BACKEND_LIST(DLP_BACKEND_ENTRY) NULL};

// Backends this build may have, for the message when one is asked for that is not compiled in.
static const char *const k_known[] = {"ref", "cpu", "cuda", "sim"};

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

