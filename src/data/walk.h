// data/walk: the JPEG files under a directory — one walker for `infer --top5 DIR`, `loadgen --images DIR` and the
// dataset statistics: depth-first, each directory's entries in byte order (so the order never depends on the
// file system), hidden entries skipped, linked directories followed, *.jpg / *.jpeg in any case.
// Defines: dlp_path_list, dlp_path_list_free, dlp_is_jpeg_name, dlp_jpeg_walk.
#ifndef DLP_DATA_WALK_H
#define DLP_DATA_WALK_H
#include <stddef.h>

#include "core/status.h"

typedef struct dlp_path_list {
    char **paths;  // (n) malloc'ed "dir/sub/name.jpg"
    size_t n, cap;
} dlp_path_list;

void dlp_path_list_free(dlp_path_list *l);
int dlp_is_jpeg_name(const char *name);  // ends in .jpg or .jpeg, any case
// Appends to out the JPEG files under dir, descending at most max_depth directories below it, stopping after
// max_files (0: no limit). An unreadable dir is an error naming it; unreadable subdirectories are skipped.
dlp_status dlp_jpeg_walk(const char *dir, int max_depth, size_t max_files, dlp_path_list *out);

#endif
