// tests/fuzz/fuzz_catalog: the hardware catalog (catalog/*.json, maintained by hand and fetched with the tool) —
// hw/catalog's dlp_catalog_load, which has no single-file entry: the harness keeps a copy of the real catalog in
// a temporary directory and replaces ONE of its seven files with the input. The first input byte picks which
// (byte % 7, in the order below); the rest is that file's content. Every reference the loader accepts
// (published rows to GPUs, sources) is then looked up again, and the first system, made into a machine profile
// as `dlperf predict --system` does, either is refused or predicts finite, positive figures on the ImageNet
// training set (a catalog the loader takes must not print "inf" or "0 img/s").
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "hw/catalog.h"
#include "hw/derive.h"
#include "perf/model.h"

static const char *const k_files[7] = {"sources.json", "gpus.json",     "cpus.json",     "systems.json",
                                       "throughput.json", "datasets.json", "pipelines.json"};
static char *g_orig[7];
static size_t g_orig_len[7];
static char g_dir[600];

static void load_originals(void) {
    const char *src = getenv("DLPERF_CATALOG");
    char base[512];
    if (src && *src) snprintf(base, sizeof base, "%s", src);
    else {
        const char *root = getenv("DLPERF_ROOT");
        snprintf(base, sizeof base, "%s/catalog", root && *root ? root : ".");
    }
    for (int i = 0; i < 7; i++) {
        char p[700];
        snprintf(p, sizeof p, "%s/%s", base, k_files[i]);
        FILE *f = fopen(p, "rb");
        if (!f) {
            fprintf(stderr, "fuzz_catalog: cannot read %s (run from the repository root or set DLPERF_CATALOG)\n", p);
            abort();
        }
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        g_orig[i] = malloc((size_t)n + 1);
        if (!g_orig[i] || fread(g_orig[i], 1, (size_t)n, f) != (size_t)n) abort();
        g_orig_len[i] = (size_t)n;
        fclose(f);
    }
    snprintf(g_dir, sizeof g_dir, "%s", dlp_fuzz_tmpdir());
    for (int i = 0; i < 7; i++) dlp_fuzz_tmpfile(k_files[i], (const uint8_t *)g_orig[i], g_orig_len[i]);
}

int dlp_fuzz_catalog(const uint8_t *data, size_t size) {
    if (!g_orig[0]) load_originals();
    if (size < 1) return 0;
    int which = data[0] % 7;
    dlp_fuzz_tmpfile(k_files[which], data + 1, size - 1);
    dlp_catalog *c = NULL;
    if (dlp_catalog_load(g_dir, &c) == DLP_OK) {
        for (int i = 0; i < c->nsources; i++) DLP_FUZZ_CHECK(dlp_catalog_source(c, c->sources[i].id) != NULL);
        for (int i = 0; i < c->ngpus; i++) DLP_FUZZ_CHECK(dlp_catalog_gpu(c, c->gpus[i].id) != NULL);
        for (int i = 0; i < c->ncpus; i++) DLP_FUZZ_CHECK(dlp_catalog_cpu(c, c->cpus[i].id) != NULL);
        for (int i = 0; i < c->nsystems; i++) {
            DLP_FUZZ_CHECK(dlp_catalog_system(c, c->systems[i].id) != NULL);
            DLP_FUZZ_CHECK(c->systems[i].gpus == 0 || c->systems[i].gpu != NULL);
        }
        for (int i = 0; i < c->ndatasets; i++) DLP_FUZZ_CHECK(dlp_catalog_dataset_find(c, c->datasets[i].id) != NULL);
        for (int i = 0; i < c->npipelines; i++) DLP_FUZZ_CHECK(dlp_catalog_pipeline_find(c, c->pipelines[i].id) != NULL);
        for (int i = 0; i < c->npublished; i++) {
            const dlp_published *r = &c->published[i];
            DLP_FUZZ_CHECK(r->gpu != NULL && r->src != NULL);
            (void)dlp_catalog_primary(c, r->gpu, r->task, r->prec);
        }
        for (int i = 0; i < c->ngpus; i++)
            for (int p = 0; p < DLP_PREC_COUNT; p++) (void)dlp_gpu_peak(&c->gpus[i], (dlp_prec)p);
        const dlp_catalog_dataset *ds = dlp_catalog_dataset_find(c, "imagenet-train");
        static dlp_profile prof;  // large: off the stack
        if (c->nsystems > 0 && ds && dlp_derive_system(c, &c->systems[0], "dlperf", &prof) == DLP_OK &&
            prof.ndevices > 0) {
            dlp_workload w;
            dlp_workload_init(&w);
            w.stats = ds->stats;
            w.samples = 64;
            w.prec = DLP_PREC_FP16;
            w.batch = 256;
            dlp_prediction pr;
            if (dlp_predict(&prof, &prof.devices[0], &w, &pr) == DLP_OK) {
                DLP_FUZZ_CHECK(isfinite(pr.img_per_s) && pr.img_per_s > 0);
                DLP_FUZZ_CHECK(isfinite(pr.epoch_s) && pr.epoch_s > 0 && isfinite(pr.total_s) && pr.total_s > 0);
            }
        }
        dlp_catalog_free(c);
    }
    dlp_fuzz_tmpfile(k_files[which], (const uint8_t *)g_orig[which], g_orig_len[which]);  // restore
    return 0;
}
DLP_FUZZ_LIBFUZZER_ENTRY(dlp_fuzz_catalog)
