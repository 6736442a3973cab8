// data/dataset: ImageFolder and list-file indexes, epoch permutations and shards.
#include "data/dataset.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/rng.h"

static dlp_dataset *ds_new(const char *root) {
    dlp_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return NULL;
    ds->root = strdup(root);
    if (!ds->root) {
        free(ds);
        return NULL;
    }
    return ds;
}

void dlp_dataset_free(dlp_dataset *ds) {
    if (!ds) return;
    for (int c = 0; c < ds->nclasses; c++) free(ds->class_names[c]);
    free(ds->class_names);
    free(ds->labels);
    free(ds->path_off);
    free(ds->pool);
    free(ds->root);
    free(ds);
}

static dlp_status ds_add(dlp_dataset *ds, const char *rel, int32_t label) {
    if (ds->n == ds->cap) {
        int64_t nc = ds->cap ? ds->cap * 2 : 1024;
        int32_t *l = realloc(ds->labels, sizeof(int32_t) * (size_t)nc);
        if (l) ds->labels = l;
        int64_t *o = l ? realloc(ds->path_off, sizeof(int64_t) * (size_t)nc) : NULL;
        if (o) ds->path_off = o;
        if (!l || !o) return DLP_ERR(DLP_ERR_NOMEM, "out of memory indexing %lld samples", (long long)nc);
        ds->cap = nc;
    }
    size_t len = strlen(rel) + 1;
    if (ds->pool_len + len > ds->pool_cap) {
        size_t nc = ds->pool_cap ? ds->pool_cap * 2 : 65536;
        while (nc < ds->pool_len + len) nc *= 2;
        char *p = realloc(ds->pool, nc);
        if (!p) return DLP_ERR(DLP_ERR_NOMEM, "out of memory indexing sample paths");
        ds->pool = p;
        ds->pool_cap = nc;
    }
    memcpy(ds->pool + ds->pool_len, rel, len);
    ds->path_off[ds->n] = (int64_t)ds->pool_len;
    ds->labels[ds->n] = label;
    ds->pool_len += len;
    ds->n++;
    return DLP_OK;
}

int dlp_dataset_path(const dlp_dataset *ds, int64_t i, char *buf, size_t len) {
    const char *rel = dlp_dataset_relpath(ds, i);
    if (rel[0] == '/') return snprintf(buf, len, "%s", rel);
    return snprintf(buf, len, "%s/%s", ds->root, rel);
}

// torchvision's IMG_EXTENSIONS (case-insensitive), so the sample list is the same as ImageFolder's; files that
// are not JPEGs are then counted as bad by the loader.
static int has_image_ext(const char *name) {
    static const char *const ext[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
        if (strcasecmp(dot, ext[i]) == 0) return 1;
    return 0;
}

static int is_dir_entry(const char *parent, const struct dirent *e) {
    if (e->d_type == DT_DIR) return 1;
    if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK) return 0;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", parent, e->d_name);
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);  // follows links, as os.walk(followlinks=True)
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct walk_ent {
    char *dir;   // relative directory ("n01440764" or "n01440764/sub")
    char *name;  // file name
} walk_ent;

typedef struct walk_vec {
    walk_ent *v;
    size_t n, cap;
} walk_vec;

static int cmp_walk(const void *a, const void *b) {
    const walk_ent *x = a, *y = b;
    int c = strcmp(x->dir, y->dir);  // sorted(os.walk(...)): by directory path, then sorted(fnames)
    return c ? c : strcmp(x->name, y->name);
}

static void walk_free(walk_vec *w) {
    for (size_t i = 0; i < w->n; i++) {
        free(w->v[i].dir);
        free(w->v[i].name);
    }
    free(w->v);
    memset(w, 0, sizeof *w);
}

static dlp_status walk(const char *root, const char *rel, int depth, walk_vec *w) {
    char abs[4096];
    snprintf(abs, sizeof abs, "%s/%s", root, rel);
    if (depth > 32) return DLP_ERR(DLP_ERR_INVALID, "%s: directories nested too deep (a symlink loop?)", abs);
    DIR *d = opendir(abs);
    if (!d) return DLP_ERR(errno == ENOENT ? DLP_ERR_NOTFOUND : DLP_ERR_IO, "cannot read directory %s: %s", abs, strerror(errno));
    struct dirent *e;
    dlp_status st = DLP_OK;
    while ((e = readdir(d)) != NULL && st == DLP_OK) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (is_dir_entry(abs, e)) {
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", rel, e->d_name);
            st = walk(root, sub, depth + 1, w);
            continue;
        }
        if (!has_image_ext(e->d_name)) continue;
        if (w->n == w->cap) {
            size_t nc = w->cap ? w->cap * 2 : 256;
            walk_ent *v = realloc(w->v, nc * sizeof *v);
            if (!v) {
                st = DLP_ERR(DLP_ERR_NOMEM, "out of memory scanning %s", abs);
                break;
            }
            w->v = v;
            w->cap = nc;
        }
        w->v[w->n].dir = strdup(rel);
        w->v[w->n].name = strdup(e->d_name);
        if (!w->v[w->n].dir || !w->v[w->n].name) {
            free(w->v[w->n].dir);
            free(w->v[w->n].name);
            st = DLP_ERR(DLP_ERR_NOMEM, "out of memory scanning %s", abs);
            break;
        }
        w->n++;
    }
    closedir(d);
    return st;
}

dlp_status dlp_dataset_open_folder(const char *dir, dlp_dataset **out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        return DLP_ERR(e == ENOENT ? DLP_ERR_NOTFOUND : DLP_ERR_IO, "cannot read dataset directory %s: %s", dir, strerror(e));
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    dlp_status st = DLP_OK;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (!is_dir_entry(dir, e)) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                st = DLP_ERR(DLP_ERR_NOMEM, "out of memory scanning %s", dir);
                break;
            }
            names = nn;
        }
        if (!(names[n] = strdup(e->d_name))) {
            st = DLP_ERR(DLP_ERR_NOMEM, "out of memory scanning %s", dir);
            break;
        }
        n++;
    }
    closedir(d);
    if (st == DLP_OK && n == 0)
        st = DLP_ERR(DLP_ERR_NOTFOUND, "%s has no class folders: expected ImageFolder layout <dir>/<class>/<image>.JPEG "
                     "(for ImageNet give the train or val folder)", dir);
    if (st) {
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
        return st;
    }
    qsort(names, n, sizeof *names, cmp_str);
    dlp_dataset *ds = ds_new(dir);
    if (!ds) {
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    ds->class_names = names;
    ds->nclasses = (int)n;
    int empty = 0;
    for (size_t c = 0; c < n && st == DLP_OK; c++) {
        walk_vec w = {0};
        st = walk(dir, names[c], 0, &w);
        if (st == DLP_OK) {
            if (w.n > 1) qsort(w.v, w.n, sizeof *w.v, cmp_walk);
            char rel[4096];
            for (size_t i = 0; i < w.n && st == DLP_OK; i++) {
                snprintf(rel, sizeof rel, "%s/%s", w.v[i].dir, w.v[i].name);
                st = ds_add(ds, rel, (int32_t)c);
            }
            if (w.n == 0 && empty++ < 5) DLP_WARN("class folder %s/%s has no images", dir, names[c]);
        }
        walk_free(&w);
    }
    if (st == DLP_OK && ds->n == 0)
        st = DLP_ERR(DLP_ERR_NOTFOUND, "%s: no images found in its %d class folders (looked for .jpg/.jpeg/.png/...)", dir,
                     ds->nclasses);
    if (st) {
        dlp_dataset_free(ds);
        return st;
    }
    *out = ds;
    return DLP_OK;
}

dlp_status dlp_dataset_open_list(const char *file, dlp_dataset **out) {
    *out = NULL;
    FILE *f = fopen(file, "r");
    if (!f) {
        int e = errno;
        return DLP_ERR(e == ENOENT ? DLP_ERR_NOTFOUND : DLP_ERR_IO, "cannot read list file %s: %s", file, strerror(e));
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    dlp_dataset *ds = ds_new(dir);
    if (!ds) {
        fclose(f);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    }
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int32_t maxlabel = -1;
    dlp_status st = DLP_OK;
    ssize_t got;
    while (st == DLP_OK && (got = getline(&line, &cap, f)) != -1) {
        lineno++;
        if (memchr(line, '\0', (size_t)got)) {  // a NUL would silently cut the line (and the path) short
            st = DLP_ERR(DLP_ERR_FORMAT, "%s:%ld: the line holds a NUL byte (a binary file given as a list?)", file, lineno);
            break;
        }
        if (got > 8192) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s:%ld: line of %zd bytes (at most 8192: a path and a label)", file, lineno, got);
            break;
        }
        char *p = line;
        while (*p && isspace((unsigned char)*p)) p++;
        size_t n = strlen(p);
        while (n > 0 && isspace((unsigned char)p[n - 1])) p[--n] = '\0';
        if (n == 0 || p[0] == '#') continue;
        char *sp = p + n;
        while (sp > p && !isspace((unsigned char)sp[-1])) sp--;  // start of the last field
        char *lab = sp;
        while (sp > p && isspace((unsigned char)sp[-1])) sp--;
        if (sp == p) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s:%ld: expected 'path label', got '%s'", file, lineno, p);
            break;
        }
        *sp = '\0';
        char *end;
        errno = 0;
        long v = strtol(lab, &end, 10);
        // 100,000 classes is 4.5x ImageNet-21k's; each class up to the largest label gets a name (a 12-byte list
        // asking for label 10,000,000 cost 390 MB and 1.6 s)
        if (*end || errno || v < 0 || v >= 100000) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s:%ld: label '%s' is not an integer in 0..99999", file, lineno, lab);
            break;
        }
        if ((int32_t)v > maxlabel) maxlabel = (int32_t)v;
        st = ds_add(ds, p, (int32_t)v);
    }
    if (st == DLP_OK && ferror(f)) st = DLP_ERR(DLP_ERR_IO, "error reading list file %s", file);
    free(line);
    fclose(f);
    if (st == DLP_OK && ds->n == 0) st = DLP_ERR(DLP_ERR_NOTFOUND, "list file %s has no samples", file);
    if (st == DLP_OK) {
        ds->nclasses = maxlabel + 1;
        ds->class_names = calloc((size_t)ds->nclasses, sizeof(char *));
        if (!ds->class_names) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        for (int c = 0; st == DLP_OK && c < ds->nclasses; c++) {
            char b[16];
            snprintf(b, sizeof b, "%d", c);
            if (!(ds->class_names[c] = strdup(b))) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
        }
        if (st && ds->class_names) {
            for (int c = 0; c < ds->nclasses; c++) free(ds->class_names[c]);
            free(ds->class_names);
            ds->class_names = NULL;
        }
        if (st) ds->nclasses = 0;
    }
    if (st) {
        dlp_dataset_free(ds);
        return st;
    }
    *out = ds;
    return DLP_OK;
}

dlp_status dlp_dataset_open(const char *path, dlp_dataset **out) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        return DLP_ERR(e == ENOENT ? DLP_ERR_NOTFOUND : DLP_ERR_IO, "dataset %s: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) return dlp_dataset_open_folder(path, out);
    if (S_ISREG(st.st_mode)) return dlp_dataset_open_list(path, out);
    return DLP_ERR(DLP_ERR_INVALID, "dataset %s is neither a directory nor a list file", path);
}

int64_t dlp_shard_size(int64_t n, int rank, int world) {
    if (world < 1 || rank < 0 || rank >= world || n <= rank) return 0;
    return (n - rank + world - 1) / world;
}

int64_t dlp_shard_batches(int64_t n, int rank, int world, int batch, int drop_last) {
    if (batch < 1) return 0;
    if (drop_last) {
        int64_t smallest = world > 1 ? n / world : n;  // the last rank's shard
        return smallest / batch;
    }
    int64_t s = dlp_shard_size(n, rank, world);
    return (s + batch - 1) / batch;
}

dlp_status dlp_epoch_order(int64_t n, uint64_t seed, int64_t epoch, int shuffle, int rank, int world, int64_t *out) {
    if (world < 1 || rank < 0 || rank >= world) return DLP_ERR(DLP_ERR_INVALID, "rank %d of world %d", rank, world);
    if (!shuffle) {
        for (int64_t p = rank, k = 0; p < n; p += world) out[k++] = p;
        return DLP_OK;
    }
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    DLP_TRY_ALLOC(perm);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    dlp_rng r;
    dlp_rng_init(&r, seed, 0x6570000000000000ULL ^ (uint64_t)epoch);  // "ep": a stream per epoch
    for (int64_t i = n - 1; i > 0; i--) {  // Fisher-Yates
        int64_t j = (int64_t)dlp_rng_below(&r, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int64_t p = rank, k = 0; p < n; p += world) out[k++] = perm[p];
    free(perm);
    return DLP_OK;
}

dlp_status dlp_dataset_drop_cache(const dlp_dataset *ds, const int64_t *idx, int64_t count, int64_t *dropped) {
    int64_t ok = 0, failed = 0;
    char path[4096];
    if (!idx) count = ds->n;
    for (int64_t k = 0; k < count; k++) {
        int64_t i = idx ? idx[k] : k;
        dlp_dataset_path(ds, i, path, sizeof path);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) {
            failed++;
            continue;
        }
        if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0) ok++;
        else failed++;
        close(fd);
    }
    if (dropped) *dropped = ok;
    if (failed) DLP_WARN("could not drop %lld of %lld files from the page cache", (long long)failed, (long long)count);
    return DLP_OK;
}
