// data/source: what a command's --data means — "synthetic[:key=value,...]" (or nothing): the cached synthetic
// ImageNet, generated on first use; a directory holding train/ and val/: that split; an ImageFolder directory; a
// list file of "path label" lines.
// Defines: dlp_data_open.
#ifndef DLP_DATA_SOURCE_H
#define DLP_DATA_SOURCE_H
#include <stddef.h>

#include "core/status.h"
#include "data/dataset.h"
#include "data/synth.h"

// spec: NULL, "", "synthetic..." or a path. split: "train" or "val". synth_defaults: the synthetic parameters the
// caller wants when spec does not say (NULL: dlp_synth_defaults). where (optional) gets the directory or file used.
dlp_status dlp_data_open(const char *spec, const char *split, const dlp_synth_params *synth_defaults, dlp_dataset **out,
                         char *where, size_t where_len);

#endif
