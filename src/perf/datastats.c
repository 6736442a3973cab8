// perf/datastats: dataset statistics from JPEG headers.
#include "perf/datastats.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>

#include "core/fs.h"
#include "data/walk.h"

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
} err_mgr;

static void on_error(j_common_ptr cinfo) { longjmp(((err_mgr *)cinfo->err)->jb, 1); }
static void on_message(j_common_ptr cinfo) { (void)cinfo; }

// Header of one file: 0 ok, -1 unreadable or not a JPEG.
static int read_header(const char *path, int *w, int *h, int *progressive, long *bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || sb.st_size <= 0) {
        fclose(f);
        return -1;
    }
    *bytes = (long)sb.st_size;
    struct jpeg_decompress_struct ci;
    err_mgr em;
    ci.err = jpeg_std_error(&em.pub);
    em.pub.error_exit = on_error;
    em.pub.output_message = on_message;
    if (setjmp(em.jb)) {
        jpeg_destroy_decompress(&ci);
        fclose(f);
        return -1;
    }
    jpeg_create_decompress(&ci);
    jpeg_stdio_src(&ci, f);
    jpeg_read_header(&ci, TRUE);
    *w = (int)ci.image_width;
    *h = (int)ci.image_height;
    *progressive = ci.progressive_mode ? 1 : 0;
    jpeg_destroy_decompress(&ci);
    fclose(f);
    return *w > 0 && *h > 0 ? 0 : -1;
}

// Appends a file's header figures to f[*nf], or counts it in *skipped when it is not a readable JPEG.
static void sample_file(const char *path, dlp_file_stat *f, int *nf, int *skipped) {
    int w, h, p;
    long b;
    if (read_header(path, &w, &h, &p, &b) != 0) {
        (*skipped)++;
        return;
    }
    f[*nf].w = w;
    f[*nf].h = h;
    f[*nf].bytes = b;
    f[*nf].progressive = p;
    (*nf)++;
}

typedef struct {
    int w, h;
    long bytes;
} sample;

// Groups samples into buckets of q x q pixels, doubling q until at most `max` buckets remain.
static void bucket(const sample *s, int n, dlp_dataset_stats *out) {
    for (int q = 1;; q *= 2) {
        out->nsizes = 0;
        int overflow = 0;
        for (int i = 0; i < n && !overflow; i++) {
            int bw = s[i].w / q, bh = s[i].h / q, k;
            for (k = 0; k < out->nsizes; k++)
                if (out->sizes[k].w == bw && out->sizes[k].h == bh) break;
            if (k == out->nsizes) {
                if (out->nsizes == DLP_DATASET_MAX_SIZES) {
                    overflow = 1;
                    break;
                }
                memset(&out->sizes[k], 0, sizeof out->sizes[k]);
                out->sizes[k].w = bw;
                out->sizes[k].h = bh;
                out->nsizes++;
            }
        }
        if (overflow) continue;
        // Second pass: the bucket's mean size and bytes (w, h were keys).
        double sw[DLP_DATASET_MAX_SIZES] = {0}, sh[DLP_DATASET_MAX_SIZES] = {0}, sb[DLP_DATASET_MAX_SIZES] = {0};
        int cnt[DLP_DATASET_MAX_SIZES] = {0};
        for (int i = 0; i < n; i++)
            for (int k = 0; k < out->nsizes; k++)
                if (out->sizes[k].w == s[i].w / q && out->sizes[k].h == s[i].h / q) {
                    sw[k] += s[i].w;
                    sh[k] += s[i].h;
                    sb[k] += (double)s[i].bytes;
                    cnt[k]++;
                    break;
                }
        for (int k = 0; k < out->nsizes; k++) {
            out->sizes[k].w = (int)(sw[k] / cnt[k] + 0.5);
            out->sizes[k].h = (int)(sh[k] / cnt[k] + 0.5);
            out->sizes[k].weight = (double)cnt[k] / n;
            out->sizes[k].mean_bytes = sb[k] / cnt[k];
        }
        return;
    }
}

dlp_status dlp_dataset_stats_from_files(const dlp_file_stat *f, int n, int64_t images, const char *name,
                                        dlp_dataset_stats *out) {
    memset(out, 0, sizeof *out);
    if (n < 1) return DLP_ERR(DLP_ERR_INVALID, "dataset %s: no files to take statistics from", name);
    sample *s = calloc((size_t)n, sizeof *s);
    if (!s) return DLP_ERR(DLP_ERR_NOMEM, "out of memory for the statistics of %s", name);
    double bytes = 0;
    int prog = 0;
    for (int i = 0; i < n; i++) {
        s[i].w = f[i].w;
        s[i].h = f[i].h;
        s[i].bytes = (long)f[i].bytes;
        bytes += (double)f[i].bytes;
        prog += f[i].progressive != 0;
    }
    snprintf(out->name, sizeof out->name, "%.90s", name);
    out->images = images;
    out->mean_bytes = bytes / n;
    out->progressive_fraction = (double)prog / n;
    bucket(s, n, out);
    free(s);
    return dlp_dataset_stats_normalize(out, name);
}

dlp_status dlp_dataset_stats_of(const dlp_dataset *ds, int64_t limit_samples, int max_samples, dlp_dataset_stats *out,
                                int *skipped) {
    memset(out, 0, sizeof *out);
    *skipped = 0;
    int64_t used = limit_samples > 0 && limit_samples < ds->n ? limit_samples : ds->n;
    if (max_samples <= 0) max_samples = 2000;
    int want = used < max_samples ? (int)used : max_samples;
    dlp_file_stat *f = calloc((size_t)want, sizeof *f);
    if (!f) return DLP_ERR(DLP_ERR_NOMEM, "out of memory scanning %s", ds->root);
    int nf = 0;
    char path[4096];
    for (int i = 0; i < want; i++) {
        int64_t k = (int64_t)((double)i * used / want);                        // evenly spaced over the used samples
        int64_t idx = used < ds->n ? (int64_t)((double)k * ds->n / used) : k;  // the loader's subset rule
        dlp_dataset_path(ds, idx, path, sizeof path);
        sample_file(path, f, &nf, skipped);
    }
    dlp_status st = nf > 0 ? dlp_dataset_stats_from_files(f, nf, used, ds->root, out)
                           : DLP_ERR(DLP_ERR_FORMAT, "dataset %s: none of %d sampled files is a readable JPEG", ds->root, want);
    free(f);
    return st;
}

dlp_status dlp_dataset_scan(const char *dir, int max_samples, dlp_dataset_stats *out, int *skipped) {
    memset(out, 0, sizeof *out);
    *skipped = 0;
    if (!dlp_is_dir(dir)) return DLP_ERR(DLP_ERR_NOTFOUND, "dataset %s: not a directory", dir);
    char root[1024];
    snprintf(root, sizeof root, "%s/train", dir);
    if (!dlp_is_dir(root)) snprintf(root, sizeof root, "%s", dir);
    dlp_path_list pl = {0};
    dlp_status st = dlp_jpeg_walk(root, 3, 0, &pl);
    if (st == DLP_OK && pl.n == 0) st = DLP_ERR(DLP_ERR_NOTFOUND, "dataset %s: no .JPEG/.jpg files found", root);
    dlp_file_stat *f = NULL;
    int nf = 0;
    if (st == DLP_OK) {
        if (max_samples <= 0) max_samples = 2000;
        size_t want = pl.n < (size_t)max_samples ? pl.n : (size_t)max_samples;
        f = calloc(want, sizeof *f);
        if (!f) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory scanning %s", root);
        for (size_t i = 0; st == DLP_OK && i < want; i++) {
            size_t idx = i * pl.n / want;  // evenly spaced over the sorted list
            sample_file(pl.paths[idx], f, &nf, skipped);
        }
        if (st == DLP_OK && nf == 0) st = DLP_ERR(DLP_ERR_FORMAT, "dataset %s: none of %zu sampled files is a readable JPEG", root, want);
        if (st == DLP_OK) st = dlp_dataset_stats_from_files(f, nf, (int64_t)pl.n, root, out);
    }
    dlp_path_list_free(&pl);
    free(f);
    return st;
}
