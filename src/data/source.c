// data/source: resolving --data into a dataset.
#include "data/source.h"

#include <stdio.h>
#include <string.h>

#include "core/fs.h"
#include "core/log.h"

dlp_status dlp_data_open(const char *spec, const char *split, const dlp_synth_params *synth_defaults, dlp_dataset **out,
                         char *where, size_t where_len) {
    *out = NULL;
    if (!split || (strcmp(split, "train") != 0 && strcmp(split, "val") != 0))
        return DLP_ERR(DLP_ERR_INVALID, "split '%s' must be train or val", split ? split : "(null)");
    char path[4096];
    if (!spec || !spec[0] || strncmp(spec, "synthetic", 9) == 0) {
        dlp_synth_params p;
        if (synth_defaults) p = *synth_defaults;
        else dlp_synth_defaults(&p);
        DLP_CHECK(dlp_synth_parse_spec(spec && spec[0] ? spec : "synthetic", &p));
        char dir[4096];
        DLP_CHECK(dlp_synth_ensure(&p, dir, sizeof dir));
        if (strcmp(split, "val") == 0 && p.val_per_class == 0)
            return DLP_ERR(DLP_ERR_INVALID, "the synthetic dataset has no validation images (val-per-class=0)");
        snprintf(path, sizeof path, "%s/%s", dir, split);
    } else {
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/%s", spec, split);
        if (dlp_is_dir(spec) && dlp_is_dir(sub)) snprintf(path, sizeof path, "%s", sub);  // an ImageNet root
        else snprintf(path, sizeof path, "%s", spec);
    }
    if (where) snprintf(where, where_len, "%s", path);
    dlp_status st = dlp_dataset_open(path, out);
    if (st) dlp_err_context("--data %s", spec && spec[0] ? spec : "synthetic");
    return st;
}
