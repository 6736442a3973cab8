// data/transform_spec: a transform as the commands' options write it — "224" or "224x160" for the output,
// "0.08-1" ranges, "1,2,4,8" for the DCT scales — applied onto a dlp_transform and checked. Also what
// data gen reports of a cached synthetic ImageNet (its dataset.json).
// Defines: dlp_transform_spec, dlp_transform_spec_apply, dlp_parse_wh, dlp_synth_report_load.
#ifndef DLP_DATA_TRANSFORM_SPEC_H
#define DLP_DATA_TRANSFORM_SPEC_H
#include "core/status.h"
#include "data/synth.h"
#include "data/transform.h"

typedef struct dlp_transform_spec {
    const char *crop, *scale, *ratio;  // "N" or "WxH"; "LO-HI"; "LO-HI"
    const char *dct_scales;            // NULL or "": the built-in set
    int dtype, layout, no_dct;         // dtype, layout: dlp_elem_choices', dlp_layout_choices' values
} dlp_transform_spec;
dlp_status dlp_transform_spec_apply(const dlp_transform_spec *o, dlp_transform *t);
// "N" (w = h = N) or "WxH" for option --opt, each side in 1..8192.
dlp_status dlp_parse_wh(const char *s, const char *opt, int *w, int *h);
// The counts a synthetic ImageNet's dataset.json records (left as they are when it cannot be read).
void dlp_synth_report_load(const char *dir, dlp_synth_report *rep);

#endif
