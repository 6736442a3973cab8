// data/dataset: ImageFolder and list-file indexes, epoch permutations and shards.
#include "data/dataset.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
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
    dlp_free_strings(ds->class_names, ds->nclasses);
    DLP_FREE_ALL(ds->labels, ds->path_off, ds->pool, ds->root, ds);
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

// ---- ImageNet's validation folder as shipped: flat (val/ILSVRC2012_val_00000001.JPEG ...), its labels in a file
// beside it: Kaggle's LOC_val_solution.csv ("ImageId,PredictionString": the synset first), or the devkit's
// ILSVRC2012_validation_ground_truth.txt (line i: the devkit ID of ILSVRC2012_val_<i>) with a devkit ID -> synset
// list (ILSVRC2012_mapping.txt: "ID wnid" lines; the devkit keeps it in meta.mat, which is not read).

typedef struct flat_label {
    char id[64];    // "ILSVRC2012_val_00000001"
    char wnid[32];  // "n01751748"
} flat_label;

static int cmp_flat(const void *a, const void *b) { return strcmp(((const flat_label *)a)->id, ((const flat_label *)b)->id); }

// The folders searched for the label files: the val folder, up to 4 above it (Kaggle's root is 4 above
// ILSVRC/Data/CLS-LOC/val), and the devkit's data/ folder in each.
#define FLAT_NDIRS 10
static int flat_dirs(const char *dir, char out[FLAT_NDIRS][4096]) {
    static const char *const up[] = {"", "/..", "/../..", "/../../..", "/../../../.."};
    int n = 0;
    for (int i = 0; i < 5; i++) {
        snprintf(out[n++], 4096, "%s%s", dir, up[i]);
        snprintf(out[n++], 4096, "%s%s/ILSVRC2012_devkit_t12/data", dir, up[i]);
    }
    return n;
}

static int flat_find(char dirs[FLAT_NDIRS][4096], int nd, const char *name, char *path, size_t len) {
    for (int i = 0; i < nd; i++) {
        snprintf(path, len, "%s/%s", dirs[i], name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            char real[PATH_MAX];
            if (realpath(path, real) && strlen(real) < len) snprintf(path, len, "%s", real);  // without the ../..
            return 1;
        }
    }
    return 0;
}

static dlp_status flat_push(flat_label **v, size_t *n, size_t *cap, const char *id, const char *wnid) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        flat_label *nv = realloc(*v, nc * sizeof *nv);
        if (!nv) return DLP_ERR(DLP_ERR_NOMEM, "out of memory reading validation labels");
        *v = nv;
        *cap = nc;
    }
    snprintf((*v)[*n].id, sizeof (*v)[*n].id, "%s", id);
    snprintf((*v)[*n].wnid, sizeof (*v)[*n].wnid, "%s", wnid);
    (*n)++;
    return DLP_OK;
}

static dlp_status flat_read_csv(const char *path, flat_label **v, size_t *n) {
    FILE *f = fopen(path, "r");
    if (!f) return DLP_ERR(DLP_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    char line[8192];
    size_t cap = 0;
    long lineno = 0;
    dlp_status st = DLP_OK;
    while (st == DLP_OK && fgets(line, sizeof line, f)) {
        lineno++;
        if (lineno == 1 && strncmp(line, "ImageId", 7) == 0) continue;
        char *comma = strchr(line, ',');
        if (!comma) {
            if (line[strspn(line, " \t\r\n")] == '\0') continue;
            st = DLP_ERR(DLP_ERR_FORMAT, "%s:%ld: expected 'ImageId,synset ...'", path, lineno);
            break;
        }
        *comma = '\0';
        char *w = comma + 1;
        w[strcspn(w, " \t\r\n")] = '\0';
        if (strlen(line) >= sizeof((flat_label *)0)->id || w[0] == '\0' || strlen(w) >= sizeof((flat_label *)0)->wnid) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s:%ld: expected 'ImageId,synset ...'", path, lineno);
            break;
        }
        st = flat_push(v, n, &cap, line, w);
    }
    fclose(f);
    return st;
}

static dlp_status flat_read_devkit(const char *gt, const char *map, flat_label **v, size_t *n) {
    // the mapping: "ID wnid" per line (or "wnid": the line number is the ID)
    char (*wnids)[32] = calloc(100000, sizeof *wnids);
    DLP_TRY_ALLOC(wnids);
    FILE *f = fopen(map, "r");
    if (!f) {
        free(wnids);
        return DLP_ERR(DLP_ERR_IO, "cannot read %s: %s", map, strerror(errno));
    }
    char line[1024];
    long lineno = 0;
    dlp_status st = DLP_OK;
    while (st == DLP_OK && fgets(line, sizeof line, f)) {
        lineno++;
        char a[64] = "", b[64] = "";
        int k = sscanf(line, "%63s %63s", a, b);
        if (k < 1) continue;
        char *end;
        long id = strtol(a, &end, 10);
        const char *w = b;
        if (*end || k < 2) id = lineno, w = a;
        if (id < 1 || id >= 100000 || w[0] != 'n' || strlen(w) >= 32) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s:%ld: expected 'ID wnid' (e.g. '1 n02119789')", map, lineno);
            break;
        }
        snprintf(wnids[id], sizeof wnids[id], "%s", w);
    }
    fclose(f);
    f = NULL;
    if (st == DLP_OK && !(f = fopen(gt, "r"))) st = DLP_ERR(DLP_ERR_IO, "cannot read %s: %s", gt, strerror(errno));
    size_t cap = 0;
    lineno = 0;
    while (st == DLP_OK && fgets(line, sizeof line, f)) {
        lineno++;
        char *end;
        long id = strtol(line, &end, 10);
        if (end == line || id < 1 || id >= 100000 || !wnids[id][0]) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s:%ld: '%.20s' is not a devkit ID that %s maps to a synset", gt, lineno,
                         line, map);
            break;
        }
        char img[64];
        snprintf(img, sizeof img, "ILSVRC2012_val_%08ld", lineno);
        st = flat_push(v, n, &cap, img, wnids[id]);
    }
    if (f) fclose(f);
    free(wnids);
    return st;
}

// Appends a copy of name to out (k of cap used); -1 when out of memory.
static int push_name(char ***out, size_t *k, size_t *cap, const char *name) {
    if (*k == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        char **nn = realloc(*out, nc * sizeof *nn);
        if (!nn) return -1;
        *out = nn;
        *cap = nc;
    }
    if (!((*out)[*k] = strdup(name))) return -1;
    (*k)++;
    return 0;
}

// Class names in label order: the sibling train/ folder's classes (so labels match the training set's), else every
// synset the labels name, sorted (the order of ImageNet's train/ folders).
static dlp_status flat_classes(const char *dir, const flat_label *v, size_t n, char ***names, int *nnames) {
    char train[4096];
    snprintf(train, sizeof train, "%s/../train", dir);
    *names = NULL;
    *nnames = 0;
    DIR *d = opendir(train);
    size_t cap = 0, k = 0;
    char **out = NULL;
    int nomem = 0;
    if (d) {
        struct dirent *e;
        while (!nomem && (e = readdir(d)) != NULL)
            if (e->d_name[0] != '.' && is_dir_entry(train, e)) nomem = push_name(&out, &k, &cap, e->d_name);
        closedir(d);
    }
    const int from_train = k > 0;
    for (size_t i = 0; !from_train && !nomem && i < n; i++) nomem = push_name(&out, &k, &cap, v[i].wnid);
    if (nomem) {  // a shortened class list would give every later label the wrong class
        for (size_t i = 0; i < k; i++) free(out[i]);
        free(out);
        return DLP_ERR(DLP_ERR_NOMEM, "%s: out of memory listing the classes", dir);
    }
    if (k > 1) qsort(out, k, sizeof *out, cmp_str);
    size_t u = 0;  // unique
    for (size_t i = 0; i < k; i++) {
        if (u > 0 && strcmp(out[u - 1], out[i]) == 0) {
            free(out[i]);
            continue;
        }
        out[u++] = out[i];
    }
    if (u == 0 || u > 100000) {
        for (size_t i = 0; i < u; i++) free(out[i]);
        free(out);
        return DLP_ERR(DLP_ERR_FORMAT, "%s: no classes in the validation labels", dir);
    }
    *names = out;
    *nnames = (int)u;
    return DLP_OK;
}

static dlp_status open_flat_val(const char *dir, dlp_dataset **out) {
    char dirs[FLAT_NDIRS][4096], csv[4200], gt[4200], map[4200];
    const int nd = flat_dirs(dir, dirs);
    const int have_csv = flat_find(dirs, nd, "LOC_val_solution.csv", csv, sizeof csv);
    const int have_gt = !have_csv && flat_find(dirs, nd, "ILSVRC2012_validation_ground_truth.txt", gt, sizeof gt);
    const int have_map = have_gt && flat_find(dirs, nd, "ILSVRC2012_mapping.txt", map, sizeof map);
    if (!have_csv && !have_gt)
        return DLP_ERR(DLP_ERR_NOTFOUND,
                       "%s has no class folders (ImageFolder: <dir>/<class>/<image>.JPEG) and no labels for a flat "
                       "ImageNet val/: looked for LOC_val_solution.csv (Kaggle's ImageNet), or the devkit's "
                       "ILSVRC2012_validation_ground_truth.txt with ILSVRC2012_mapping.txt ('ID wnid' lines), in it, "
                       "the 4 folders above it and their ILSVRC2012_devkit_t12/data/; hint: put one there, or give "
                       "a list file of 'path label' lines", dir);
    if (have_gt && !have_map)
        return DLP_ERR(DLP_ERR_NOTFOUND,
                       "%s is a flat ImageNet val/ with the devkit's labels %s, but their IDs need the devkit ID -> "
                       "synset list: looked for ILSVRC2012_mapping.txt ('ID wnid' lines, e.g. '1 n02119789'; the "
                       "devkit keeps it in meta.mat, which dlperf does not read) in %s, the 4 folders above it and "
                       "their ILSVRC2012_devkit_t12/data/; or use Kaggle's LOC_val_solution.csv", dir, gt, dir);
    flat_label *v = NULL;
    size_t n = 0;
    dlp_status st = have_csv ? flat_read_csv(csv, &v, &n) : flat_read_devkit(gt, map, &v, &n);
    if (st) {
        free(v);
        return st;
    }
    if (n > 1) qsort(v, n, sizeof *v, cmp_flat);
    char **names = NULL;
    int nnames = 0;
    if ((st = flat_classes(dir, v, n, &names, &nnames))) {
        free(v);
        return st;
    }
    // the images: files in the folder, sorted (ImageFolder's order within a class)
    DIR *d = opendir(dir);
    char **files = NULL;
    size_t nf = 0, cap = 0;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL && st == DLP_OK) {
            if (e->d_name[0] == '.' || !has_image_ext(e->d_name) || is_dir_entry(dir, e)) continue;
            if (push_name(&files, &nf, &cap, e->d_name)) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory scanning %s", dir);
        }
        closedir(d);
    }
    if (nf > 1) qsort(files, nf, sizeof *files, cmp_str);
    dlp_dataset *ds = st ? NULL : ds_new(dir);
    if (!st && !ds) st = DLP_ERR(DLP_ERR_NOMEM, "out of memory");
    int64_t unlabeled = 0, unknown = 0;
    for (size_t i = 0; i < nf && st == DLP_OK; i++) {
        flat_label key;
        snprintf(key.id, sizeof key.id, "%.*s", (int)strcspn(files[i], "."), files[i]);
        const flat_label *l = bsearch(&key, v, n, sizeof *v, cmp_flat);
        if (!l) {
            unlabeled++;
            continue;
        }
        const char *wn = l->wnid;
        char **c = bsearch(&wn, names, (size_t)nnames, sizeof *names, cmp_str);
        if (!c) {
            unknown++;
            continue;
        }
        st = ds_add(ds, files[i], (int32_t)(c - names));
    }
    for (size_t i = 0; i < nf; i++) free(files[i]);
    free(files);
    free(v);
    if (st == DLP_OK && ds->n == 0)
        st = DLP_ERR(DLP_ERR_NOTFOUND, "%s: none of its %zu images has a label in %s", dir, nf, have_csv ? csv : gt);
    if (st) {
        for (int i = 0; i < nnames; i++) free(names[i]);
        free(names);
        dlp_dataset_free(ds);
        return st;
    }
    if (unlabeled) DLP_WARN("%s: %lld images have no label in %s; left out", dir, (long long)unlabeled, have_csv ? csv : gt);
    if (unknown) DLP_WARN("%s: %lld images are labelled with a synset %s/../train has no folder for; left out", dir,
                          (long long)unknown, dir);
    ds->class_names = names;
    ds->nclasses = nnames;
    DLP_DEBUG("%s: a flat ImageNet val/ labelled by %s (%lld images, %d classes)", dir, have_csv ? csv : gt,
             (long long)ds->n, nnames);
    *out = ds;
    return DLP_OK;
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
        if (push_name(&names, &n, &cap, e->d_name)) {
            st = DLP_ERR(DLP_ERR_NOMEM, "out of memory scanning %s", dir);
            break;
        }
    }
    closedir(d);
    if (st == DLP_OK && n == 0) {
        free(names);
        return open_flat_val(dir, out);  // ImageNet's val/ as shipped, or an error saying what it looked for
    }
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
