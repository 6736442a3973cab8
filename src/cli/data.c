// cli/data: `dlperf data gen|bench|crop|info` — the synthetic ImageNet, the input pipeline's benchmark, one-image
// transforms (for tests against torchvision and for debugging) and dataset summaries.
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/opts.h"
#include "data/bench.h"
#include "data/check.h"
#include "data/jpeg.h"
#include "data/loader.h"
#include "data/source.h"
#include "data/synth.h"
#include "data/transform.h"
#include "data/transform_spec.h"
#include "hw/host.h"

// The transform options of bench and crop (data/transform_spec); help texts per command where they differ.
#define XFORM_ROWS(xo, no_dct_help)                                                                                    \
    {"crop", 0, DLP_OPT_STR, &(xo).crop, "224", "N|WxH", "output size", NULL, 0},                                     \
    {"scale", 0, DLP_OPT_STR, &(xo).scale, "0.08-1", "LO-HI", "RandomResizedCrop area range", NULL, 0},               \
    {"ratio", 0, DLP_OPT_STR, &(xo).ratio, "0.75-1.3333333", "LO-HI", "RandomResizedCrop aspect ratio range", NULL, 0}, \
    {"dtype", 0, DLP_OPT_ENUM, &(xo).dtype, "fp32", NULL, "output element type", dlp_elem_choices, 0},               \
    {"layout", 0, DLP_OPT_ENUM, &(xo).layout, "NCHW", NULL, "output layout", dlp_layout_choices, 0},                 \
    {"no-dct-scale", 0, DLP_OPT_FLAG, &(xo).no_dct, NULL, NULL, no_dct_help, NULL, 0},                               \
    {"dct-scales", 0, DLP_OPT_STR, &(xo).dct_scales, NULL, "S,S..", "DCT scales s/8 allowed (default: the built-in set)", NULL, 0}

static void add_record(json_t *o, const dlp_opt *opts) {
    dlp_host_info h;
    dlp_host_probe(&h);
    json_object_set_new(o, "options", dlp_opts_to_json(opts));
    json_object_set_new(o, "host", dlp_host_to_json(&h));
    json_object_set_new(o, "versions", dlp_versions_to_json());
}

// ---- data gen -------------------------------------------------------------------------------------------------------

static const char k_gen_usage[] =
    "usage: dlperf data gen [--out DIR] [options]\n\n"
    "Writes a synthetic ImageNet: train/<wnid>/*.JPEG, val/<wnid>/*.JPEG, labels.txt,\n"
    "train.txt and val.txt (path label), dataset.json.";

static int cmd_gen(int argc, char **argv) {
    dlp_synth_params p;
    dlp_synth_defaults(&p);
    const char *out = NULL, *size = "imagenet";
    int64_t seed = 0;
    char def_classes[16], def_pc[16], def_vpc[16];
    snprintf(def_classes, sizeof def_classes, "%d", p.classes);
    snprintf(def_pc, sizeof def_pc, "%d", p.per_class);
    snprintf(def_vpc, sizeof def_vpc, "%d", p.val_per_class);
    dlp_opt opts[] = {
        {"out", 'o', DLP_OPT_STR, &out, NULL, "DIR", "write here (must not exist); default: the cache, printed", NULL, 0},
        {"classes", 'c', DLP_OPT_INT, &p.classes, def_classes, "N", "number of classes", NULL, 0},
        {"per-class", 0, DLP_OPT_INT, &p.per_class, def_pc, "N", "training images per class", NULL, 0},
        {"val-per-class", 0, DLP_OPT_INT, &p.val_per_class, def_vpc, "N", "validation images per class", NULL, 0},
        {"size", 0, DLP_OPT_STR, &size, "imagenet", "MIN-MAX", "shorter side range in pixels, or imagenet", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &seed, "0", NULL, "random seed (same seed, same files)", NULL, 0},
        {"workers", 'w', DLP_OPT_INT, &p.workers, "0", "N", "generator threads (0: all CPUs; output is the same)", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(opts, k_gen_usage, argc, argv);
    if (st) return dlp_cli_fail(st);
    if (seed < 0) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--seed must be >= 0"));
    p.seed = (uint64_t)seed;
    if ((st = dlp_synth_parse_size(size, &p))) return dlp_cli_fail(st);
    if (p.classes < 1 || p.per_class < 1 || p.val_per_class < 0 || p.workers < 0)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--classes and --per-class must be >= 1, --val-per-class >= 0"));
    char dir[4096];
    dlp_synth_report rep = {0};
    if (out) {
        snprintf(dir, sizeof dir, "%s", out);
        if ((st = dlp_synth_generate(&p, dir, &rep))) return dlp_cli_fail(st);
    } else {
        if ((st = dlp_synth_ensure(&p, dir, sizeof dir))) return dlp_cli_fail(st);
        dlp_synth_report_load(dir, &rep);
    }
    double n = rep.images ? (double)rep.images : 1.0;
    printf("%s\n", dir);
    printf("  %lld images (%lld train, %lld val) in %d classes, %.1f MB, %.1f KB per file on average\n",
           (long long)rep.images, (long long)p.classes * p.per_class, (long long)p.classes * p.val_per_class, p.classes,
           rep.bytes / 1e6, rep.bytes / 1e3 / n);
    printf("  4:2:0 %.1f%%, 4:4:4 %.1f%%, 4:2:2 %.1f%%, grayscale %.1f%%, progressive %.1f%%, over 1000 px %.1f%%\n",
           100 * rep.sub420 / n, 100 * rep.sub444 / n, 100 * rep.sub422 / n, 100 * rep.gray / n,
           100 * rep.progressive / n, 100 * rep.over_1000px / n);
    if (rep.seconds > 0) printf("  generated in %.1f s (%.0f images/s)\n", rep.seconds, rep.images / rep.seconds);
    return 0;
}

// ---- data bench -----------------------------------------------------------------------------------------------------

static const char k_bench_usage[] =
    "usage: dlperf data bench [--data DIR|synthetic] [--workers 1,2] [options]\n\n"
    "The input pipeline alone (read, decode, augment into batches; no model): img/s,\n"
    "MB/s and worker time per image per stage, for each worker count.";

static int cmd_bench(int argc, char **argv) {
    const char *data = "synthetic", *split = "train", *workers_s = NULL, *json = NULL;
    int batch = 32, prefetch = 0, repeat = 1, transform_val = 0, drop_cache = 0;
    int64_t images = 0, read_limit = 0, seed = 0;
    dlp_transform_spec xo = {0};
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1) ncpu = 1;
    char def_workers[64];
    if (ncpu > 1) snprintf(def_workers, sizeof def_workers, "1,%d", ncpu);
    else snprintf(def_workers, sizeof def_workers, "1");
    dlp_opt opts[] = {
        {"data", 'd', DLP_OPT_STR, &data, "synthetic", "DIR|synthetic", "dataset: ImageNet root, ImageFolder, list file, synthetic[:k=v,..]", NULL, 0},
        {"split", 0, DLP_OPT_STR, &split, "train", "train|val", "which folder of an ImageNet root", NULL, 0},
        {"val", 0, DLP_OPT_FLAG, &transform_val, NULL, NULL, "validation transform (resize 256, centre crop) instead of training", NULL, 0},
        {"batch", 'b', DLP_OPT_INT, &batch, "32", NULL, "batch size", NULL, 0},
        {"workers", 'w', DLP_OPT_STR, &workers_s, def_workers, "N[,N..]", "loader threads; a list measures scaling", NULL, 0},
        {"prefetch", 0, DLP_OPT_INT, &prefetch, "0", NULL, "batch slots in the ring (0: 2 x workers)", NULL, 0},
        {"images", 0, DLP_OPT_I64, &images, "0", NULL, "images per measurement (0: the whole dataset once)", NULL, 0},
        {"repeat", 'r', DLP_OPT_INT, &repeat, "1", NULL, "measurements per worker count (median reported)", NULL, 0},
        XFORM_ROWS(xo, "decode at full size (no DCT scaling)"),
        {"read-limit", 0, DLP_OPT_SIZE, &read_limit, "0", "SIZE", "emulate storage reading at most SIZE bytes/s (e.g. 200M)", NULL, 0},
        {"drop-cache", 0, DLP_OPT_FLAG, &drop_cache, NULL, NULL, "cold reads: drop the files from the page cache before each run", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &seed, "0", NULL, "shuffle and augmentation seed", NULL, 0},
        {"json", 'j', DLP_OPT_STR, &json, NULL, "FILE", "write the versioned JSON result here (never overwritten)", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(opts, k_bench_usage, argc, argv);
    if (st) return dlp_cli_fail(st);
    if ((st = dlp_check_new_output(json, "--json"))) return dlp_cli_fail(st);
    dlp_data_bench_cfg bc;
    memset(&bc, 0, sizeof bc);
    bc.nworkers = dlp_parse_int_list(workers_s, bc.workers, DLP_DATA_BENCH_MAX_RUNS);
    if (bc.nworkers < 1) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--workers '%s' is not a list like 1,2,4", workers_s));
    for (int i = 0; i < bc.nworkers; i++)
        if (bc.workers[i] < 1 || bc.workers[i] > 1024)
            return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--workers: %d is not in 1..1024", bc.workers[i]));
    if (batch < 1 || repeat < 1 || images < 0 || prefetch < 0 || seed < 0)
        return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--batch and --repeat must be >= 1; --images, --prefetch, --seed >= 0"));
    dlp_dataset *ds;
    char where[4096];
    if ((st = dlp_data_open(data, split, NULL, &ds, where, sizeof where))) return dlp_cli_fail(st);
    dlp_loader_cfg_defaults(&bc.loader, ds, transform_val ? DLP_XFORM_VAL : DLP_XFORM_TRAIN);
    if ((st = dlp_transform_spec_apply(&xo, &bc.loader.transform))) {
        dlp_dataset_free(ds);
        return dlp_cli_fail(st);
    }
    bc.loader.batch = batch;
    bc.loader.prefetch = prefetch;
    bc.loader.seed = (uint64_t)seed;
    bc.loader.read_limit_bytes_per_s = read_limit;
    bc.loader.drop_cache = drop_cache;
    bc.images = images;
    bc.repeat = repeat;
    const dlp_transform *t = &bc.loader.transform;
    int64_t n_used = images > 0 && images < ds->n ? images : ds->n;
    fprintf(stderr, "data bench: %s (%lld of %lld images, %d classes); %s transform -> %dx%d %s %s, batch %d; %s%s\n",
            where, (long long)n_used, (long long)ds->n, ds->nclasses, transform_val ? "val" : "train", t->out_w, t->out_h,
            dlp_dtype_name(t->dtype), dlp_layout_name(t->layout), batch, drop_cache ? "cold (page cache dropped)" : "warm",
            t->dct_scales == (1u << 8) ? ", no DCT scaling" : "");
    dlp_data_bench_run runs[DLP_DATA_BENCH_MAX_RUNS];
    st = dlp_data_bench(&bc, runs);
    if (st) {
        dlp_dataset_free(ds);
        return dlp_cli_fail(st);
    }
    printf("%7s %9s %8s %9s %9s %10s %8s %7s %9s %6s\n", "workers", "img/s", "MB/s", "read ms", "decode ms", "augment ms",
           "cpu/img", "wait%", "decoded", "bad");
    for (int k = 0; k < bc.nworkers; k++) {
        const dlp_data_bench_run *r = &runs[k];
        double n = r->images ? (double)r->images : 1.0;
        const dlp_loader_stats *s = &r->stats;
        printf("%7d %9.1f %8.1f %9.3f %9.3f %10.3f %8.3f %7.1f %8.0f%% %6lld\n", r->workers, r->img_per_s, r->mb_per_s,
               dlp_ns_to_ms(s->read_ns) / n, dlp_ns_to_ms(s->decode_ns) / n, dlp_ns_to_ms(s->augment_ns) / n,
               r->cpu_seconds * 1e3 / n, r->seconds > 0 ? 100.0 * dlp_ns_to_s(s->wait_ns) / r->seconds : 0.0,
               s->source_pixels ? 100.0 * s->decoded_pixels / s->source_pixels : 0.0, (long long)s->bad);
    }
    printf("(read/decode/augment/cpu: ms per image of worker time and of process CPU; wait%%: time the consumer waited\n"
           " for batches, ~100%% with no model to feed; decoded: pixels decoded at the DCT scale vs full size)\n");
    for (int k = 1; k < bc.nworkers; k++)
        if (runs[0].img_per_s > 0)
            printf("speed-up %d -> %d workers: %.2fx\n", runs[0].workers, runs[k].workers, runs[k].img_per_s / runs[0].img_per_s);
    int rc = 0;
    if (json) {
        json_t *o = dlp_json_result_new("dlperf.data_bench/1", 0, NULL);
        add_record(o, opts);
        json_object_set_new(o, "dataset", json_pack("{s:s, s:I, s:I, s:i}", "path", where, "images", (json_int_t)ds->n,
                                                    "images_used", (json_int_t)n_used, "classes", ds->nclasses));
        json_object_set_new(o, "cold", json_boolean(drop_cache));
        json_t *arr = json_array();
        for (int k = 0; k < bc.nworkers; k++) json_array_append_new(arr, dlp_data_bench_run_to_json(&runs[k]));
        json_object_set_new(o, "runs", arr);
        st = dlp_json_write(o, json, DLP_WRITE_NOCLOBBER);
        json_decref(o);
        if (st) rc = dlp_cli_fail(st);
        else fprintf(stderr, "wrote %s\n", json);
    }
    dlp_dataset_free(ds);
    return rc;
}

// ---- data crop ------------------------------------------------------------------------------------------------------

static const char k_crop_usage[] =
    "usage: dlperf data crop --in FILE --out FILE [--box X,Y,W,H | --val] [options]\n\n"
    "Decodes and transforms one JPEG into a raw tensor (for comparisons with\n"
    "torchvision and for debugging); prints what it did as JSON on stdout.";

static int cmd_crop(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *box = NULL;
    int val = 0, flip = 0;
    int64_t seed = 0;
    dlp_transform_spec xo = {0};
    dlp_opt opts[] = {
        {"in", 0, DLP_OPT_STR, &in, NULL, "FILE", "JPEG file", NULL, 0},
        {"out", 'o', DLP_OPT_STR, &out, NULL, "FILE", "raw tensor output (3 x H x W or H x W x 3; never overwritten)", NULL, 0},
        {"box", 0, DLP_OPT_STR, &box, NULL, "X,Y,W,H", "crop this box (image pixels), then resize (RandomResizedCrop's op)", NULL, 0},
        {"val", 0, DLP_OPT_FLAG, &val, NULL, NULL, "validation transform: resize shorter side to 256 (x crop/224), centre crop", NULL, 0},
        {"flip", 0, DLP_OPT_FLAG, &flip, NULL, NULL, "mirror horizontally (with --box)", NULL, 0},
        {"seed", 0, DLP_OPT_I64, &seed, "0", NULL, "random crop seed (without --box or --val)", NULL, 0},
        XFORM_ROWS(xo, "decode at full size (exactly torchvision's pixels)"),
        {0},
    };
    dlp_status st = dlp_cli_parse(opts, k_crop_usage, argc, argv);
    if (st) return dlp_cli_fail(st);
    if (!in || !out) return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--in and --out are required (see --help)"));
    if ((st = dlp_check_new_output(out, "--out"))) return dlp_cli_fail(st);
    dlp_transform t;
    dlp_transform_defaults(&t, val ? DLP_XFORM_VAL : DLP_XFORM_TRAIN);
    if ((st = dlp_transform_spec_apply(&xo, &t))) return dlp_cli_fail(st);
    dlp_crop c, *cp = NULL;
    if (box) {
        memset(&c, 0, sizeof c);
        char x;
        if (sscanf(box, "%d,%d,%d,%d%c", &c.x, &c.y, &c.w, &c.h, &x) != 4 || c.w < 1 || c.h < 1 || c.x < 0 || c.y < 0)
            return dlp_cli_fail(DLP_ERR(DLP_ERR_INVALID, "--box '%s' is not X,Y,W,H with W,H >= 1", box));
        c.flip = flip;
        cp = &c;
    }
    void *dst;
    size_t nbytes;
    dlp_sample_info info;
    if ((st = dlp_transform_file(&t, in, cp, (uint64_t)seed, &dst, &nbytes, &info))) return dlp_cli_fail(st);
    st = dlp_write_atomic(out, dst, nbytes, DLP_WRITE_NOCLOBBER);
    if (st == DLP_OK) {
        json_t *o = dlp_sample_info_to_json(&info, &t, nbytes);
        json_dumpf(o, stdout, JSON_PRESERVE_ORDER | JSON_COMPACT);
        putchar('\n');
        json_decref(o);
    }
    free(dst);
    return dlp_cli_fail(st);
}

// ---- data info ------------------------------------------------------------------------------------------------------

static void print_bad(void *ctx, const char *path, dlp_bad_kind kind, const char *why) {
    (void)ctx;
    printf("  bad: %s: %s (%s)\n", path, dlp_bad_kind_name(kind), why);
}

static int cmd_info(int argc, char **argv) {
    const char *data = "synthetic", *split = "train";
    int check = 0;
    dlp_opt opts[] = {
        {"data", 'd', DLP_OPT_STR, &data, "synthetic", "DIR|synthetic", "dataset", NULL, 0},
        {"split", 0, DLP_OPT_STR, &split, "train", "train|val", "which folder of an ImageNet root", NULL, 0},
        {"check", 0, DLP_OPT_FLAG, &check, NULL, NULL, "decode every file (at 1/8 scale) and list the bad ones", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(opts, "usage: dlperf data info [--data DIR|synthetic] [--check]", argc, argv);
    if (st) return dlp_cli_fail(st);
    dlp_dataset *ds;
    char where[4096];
    if ((st = dlp_data_open(data, split, NULL, &ds, where, sizeof where))) return dlp_cli_fail(st);
    printf("%s: %lld images in %d classes\n", where, (long long)ds->n, ds->nclasses);
    for (int c = 0; c < ds->nclasses && c < 5; c++) printf("  class %d: %s\n", c, ds->class_names[c]);
    if (ds->nclasses > 5) printf("  ... class %d: %s\n", ds->nclasses - 1, ds->class_names[ds->nclasses - 1]);
    int rc = 0;
    if (check) {
        dlp_dataset_check_result r;
        if ((st = dlp_dataset_check(ds, print_bad, NULL, &r))) {
            dlp_dataset_free(ds);
            return dlp_cli_fail(st);
        }
        printf("checked %lld files, %.1f MB: %lld bad", (long long)r.files, r.bytes / 1e6, (long long)r.bad);
        for (int k = 1; k < DLP_BAD_KIND_COUNT; k++)
            if (r.kinds[k]) printf(", %s %lld", dlp_bad_kind_name((dlp_bad_kind)k), (long long)r.kinds[k]);
        printf("\n");
        rc = r.bad ? 1 : 0;
    }
    dlp_dataset_free(ds);
    return rc;
}

int dlp_cli_data(int argc, char **argv) {
    static const dlp_cli_cmd cmds[] = {
        {"gen", cmd_gen, "write a synthetic ImageNet (deterministic from --seed)"},
        {"bench", cmd_bench, "the input pipeline alone: img/s, MB/s, time per stage, scaling over threads"},
        {"crop", cmd_crop, "decode + transform one JPEG into a raw tensor (tests, debugging)"},
        {"info", cmd_info, "summarize a dataset; --check decodes every file"},
        {NULL, NULL, NULL},
    };
    return dlp_cli_dispatch("dlperf data", cmds, argc, argv);
}
