// cli/catalog: `dlperf catalog [gpus|cpus|systems|throughput|datasets|pipelines|sources]` — the catalog's entries
// with the source of their figures.
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/json.h"
#include "core/opts.h"
#include "hw/catalog.h"

// "src: * nv-a100-ds; price_usd lambda-bench" for an entry.
static void print_src(const json_t *entry) {
    const json_t *src = json_object_get(entry, "src");
    const char *k;
    json_t *v;
    printf("      sources:");
    int first = 1;
    json_object_foreach((json_t *)src, k, v) {
        printf("%s %s=%s", first ? "" : ",", k, json_string_value(v));
        first = 0;
    }
    printf("\n");
}

static void list_gpus(const dlp_catalog *c) {
    printf("%-10s %-28s %6s %7s %7s %7s %7s %7s %5s %6s %9s\n", "id", "name", "mem GB", "GB/s", "fp32", "tf32", "fp16",
           "bf16", "PCIe", "W", "price $");
    for (int i = 0; i < c->ngpus; i++) {
        const dlp_gpu_spec *g = &c->gpus[i];
        printf("%-10s %-28s %6.0f %7.0f %7.1f %7.1f %7.1f %7.1f %2dx%-2d %6.0f %9.0f (%d)\n", g->id, g->name, g->memory_gb,
               g->mem_bw_gb_s, g->fp32_tflops, g->tf32_tflops, g->fp16_tflops, g->bf16_tflops, g->pcie_gen, g->pcie_lanes,
               g->board_power_w, g->price_usd, g->price_year);
        if (g->notes[0]) printf("      %s\n", g->notes);
        print_src(g->json);
    }
    printf("(dense TFLOPS; 0 = not supported)\n");
}

static void list_cpus(const dlp_catalog *c) {
    printf("%-15s %-32s %5s %7s %6s %6s %7s %6s %6s\n", "id", "name", "cores", "threads", "GHz", "all", "GB/s", "speed",
           "smt");
    for (int i = 0; i < c->ncpus; i++) {
        const dlp_cpu_spec *p = &c->cpus[i];
        printf("%-15s %-32s %5d %7d %6.2f %6.2f %7.1f %6.2f %6.2f\n", p->id, p->name, p->cores, p->threads, p->base_ghz,
               p->allcore_ghz, p->mem_bw_gb_s, p->core_speed_rel, p->smt_yield);
        if (p->notes[0]) printf("      %s\n", p->notes);
        print_src(p->json);
    }
    printf("(speed: per-core pipeline speed relative to the development core; smt: a second thread's yield)\n");
}

static void list_systems(const dlp_catalog *c) {
    printf("%-14s %-44s %-14s %-16s %6s %9s %8s %10s\n", "id", "name", "GPUs", "CPU cores", "RAM GB", "store GB/s",
           "power W", "price");
    for (int i = 0; i < c->nsystems; i++) {
        const dlp_system_spec *s = &c->systems[i];
        char gpus[32], cpu[32], price[32];
        snprintf(gpus, sizeof gpus, "%dx %s", s->gpus, s->gpu->id);
        snprintf(cpu, sizeof cpu, "%dx %d (%s)", s->sockets, s->cpu->cores, s->cpu->id);
        if (s->kind == DLP_SYSTEM_CLOUD) snprintf(price, sizeof price, "$%.2f/h", s->usd_per_hour);
        else snprintf(price, sizeof price, "$%.0f", s->price_usd);
        printf("%-14s %-44s %-14s %-16s %6.0f %9.1f %8.0f %10s\n", s->id, s->name, gpus, cpu, s->ram_gb,
               s->storage_read_gb_s, s->power_w, price);
        printf("      storage: %s; allreduce %.0f GB/s; %d GPU(s) per PCIe Gen%d x16 uplink\n", s->storage_desc,
               s->allreduce_busbw_gb_s, s->pcie_gpus_per_uplink, s->pcie_uplink_gen);
        if (s->notes[0]) printf("      %s\n", s->notes);
        print_src(s->json);
    }
}

static void list_throughput(const dlp_catalog *c) {
    printf("%-10s %-5s %-5s %9s %4s %6s  %-22s %s\n", "gpu", "task", "prec", "img/s", "gpus", "batch", "source", "conditions");
    for (int i = 0; i < c->npublished; i++) {
        const dlp_published *p = &c->published[i];
        printf("%-10s %-5s %-5s %9.0f %4d %6d  %-22s %s%s%s\n", p->gpu->id, dlp_task_name(p->task), dlp_prec_name(p->prec),
               p->img_per_s, p->gpus, p->batch, p->src->id, p->framework, p->primary ? " [primary]" : "",
               p->estimate ? " [estimate]" : "");
    }
    printf("(batch 0: not stated; primary: the single-GPU figure a GPU's profile is built from)\n");
}

static void list_datasets(const dlp_catalog *c) {
    for (int i = 0; i < c->ndatasets; i++) {
        const dlp_dataset_stats *s = &c->datasets[i].stats;
        printf("%-16s %-36s %9lld images, %.0f KB mean, sizes:", c->datasets[i].id, s->name, (long long)s->images,
               s->mean_bytes / 1e3);
        for (int k = 0; k < s->nsizes; k++) printf(" %dx%d (%.0f%%)", s->sizes[k].w, s->sizes[k].h, 100 * s->sizes[k].weight);
        printf("\n");
        print_src(c->datasets[i].json);
    }
}

static void list_pipelines(const dlp_catalog *c) {
    for (int i = 0; i < c->npipelines; i++) {
        const dlp_catalog_pipeline *p = &c->pipelines[i];
        const dlp_pipeline_profile *q = &p->prof;
        printf("%-12s %s\n      read %.1f us + %.2f ns/B; decode %.1f us + %.2f ns/px + %.2f ns/B; augment %.1f us + "
               "%.2f ns/in px + %.2f ns/out px; dct_scaling %d, crop_window %d\n", p->id, p->name,
               q->read_per_file_s * 1e6, q->read_per_byte_s * 1e9, q->decode_per_image_s * 1e6, q->decode_per_pixel_s * 1e9,
               q->decode_per_byte_s * 1e9, q->augment_per_image_s * 1e6, q->augment_per_in_pixel_s * 1e9,
               q->augment_per_out_pixel_s * 1e9, q->dct_scaling, q->crop_window);
        print_src(p->json);
    }
}

static void list_sources(const dlp_catalog *c) {
    for (int i = 0; i < c->nsources; i++) {
        const dlp_source *s = &c->sources[i];
        printf("%-22s %-10s %d  %s%s%s\n", s->id, s->kind, s->year, s->title, s->url[0] ? "\n                                   " : "",
               s->url);
    }
}

int dlp_cli_catalog(int argc, char **argv) {
    const char *dir = NULL;
    int as_json = 0;
    dlp_opt opts[] = {
        {"catalog", 0, DLP_OPT_STR, &dir, NULL, "DIR", "catalog directory (default: found next to dlperf, or $DLPERF_CATALOG)", NULL, 0},
        {"json", 0, DLP_OPT_FLAG, &as_json, NULL, NULL, "print the section's JSON as loaded", NULL, 0},
        {0},
    };
    int rest;
    dlp_status st = dlp_opts_parse(opts, "usage: dlperf catalog [gpus|cpus|systems|throughput|datasets|pipelines|sources] "
                                   "[--json]", argc, argv, &rest);
    if (st) return dlp_cli_fail(st);
    const char *what = rest < argc ? argv[rest] : "systems";
    if (rest + 1 < argc) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "catalog: one section at a time"));
    // In the order of dlp_catalog.roots (the files as loaded).
    static const char *const k_sections[] = {"sources", "gpus", "cpus", "systems", "throughput", "datasets", "pipelines"};
    int sec = -1;
    for (int i = 0; i < 7; i++)
        if (strcmp(what, k_sections[i]) == 0) sec = i;
    if (sec < 0)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "catalog: unknown section '%s' (gpus|cpus|systems|throughput|datasets|"
                                    "pipelines|sources)", what));
    dlp_catalog *c;
    st = dlp_catalog_load(dir, &c);
    if (st) return dlp_cli_fail(st);
    if (as_json) {
        json_dumpf(c->roots[sec], stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        putchar('\n');
    } else {
        printf("catalog %s: %s (every figure's source: dlperf catalog sources)\n\n", c->dir, what);
        switch (sec) {
        case 0: list_sources(c); break;
        case 1: list_gpus(c); break;
        case 2: list_cpus(c); break;
        case 3: list_systems(c); break;
        case 4: list_throughput(c); break;
        case 5: list_datasets(c); break;
        default: list_pipelines(c); break;
        }
    }
    dlp_catalog_free(c);
    return 0;
}
