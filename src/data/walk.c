// data/walk: the JPEG files under a directory (see walk.h).
#include "data/walk.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/fs.h"

void dlp_path_list_free(dlp_path_list *l) {
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) free(l->paths[i]);
    free(l->paths);
    memset(l, 0, sizeof *l);
}

int dlp_is_jpeg_name(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static dlp_status push(dlp_path_list *l, char *p) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 256;
        char **q = realloc(l->paths, nc * sizeof *q);
        if (!q) {
            free(p);
            return DLP_ERR(DLP_ERR_NOMEM, "out of memory listing files");
        }
        l->paths = q;
        l->cap = nc;
    }
    l->paths[l->n++] = p;
    return DLP_OK;
}

static dlp_status walk(const char *dir, int depth, int max_depth, size_t max_files, dlp_path_list *out) {
    DIR *d = opendir(dir);
    if (!d) {
        if (depth > 0) return DLP_OK;  // an unreadable subdirectory: skipped
        return DLP_ERR(DLP_ERR_IO, "cannot read the directory %s", dir);
    }
    // names first, sorted
    dlp_path_list names = {0};
    dlp_status st = DLP_OK;
    struct dirent *e;
    while (st == DLP_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *s = strdup(e->d_name);
        st = s ? push(&names, s) : DLP_ERR(DLP_ERR_NOMEM, "out of memory listing %s", dir);
    }
    closedir(d);
    if (st == DLP_OK && names.n > 1) qsort(names.paths, names.n, sizeof *names.paths, cmp_str);
    for (size_t i = 0; st == DLP_OK && i < names.n && (max_files == 0 || out->n < max_files); i++) {
        size_t len = strlen(dir) + strlen(names.paths[i]) + 2;
        char *p = malloc(len);
        if (!p) {
            st = DLP_ERR(DLP_ERR_NOMEM, "out of memory listing %s", dir);
            break;
        }
        snprintf(p, len, "%s/%s", dir, names.paths[i]);
        if (dlp_is_dir(p)) {
            if (depth < max_depth) st = walk(p, depth + 1, max_depth, max_files, out);
            free(p);
        } else if (dlp_is_jpeg_name(names.paths[i])) {
            st = push(out, p);
        } else {
            free(p);
        }
    }
    dlp_path_list_free(&names);
    return st;
}

dlp_status dlp_jpeg_walk(const char *dir, int max_depth, size_t max_files, dlp_path_list *out) {
    return walk(dir, 0, max_depth, max_files, out);
}
