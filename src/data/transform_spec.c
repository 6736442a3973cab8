// data/transform_spec: a transform from the commands' option strings (data/transform_spec.h).
#include "data/transform_spec.h"

#include <math.h>
#include <stdio.h>

#include "core/json.h"
#include "core/opts.h"

dlp_status dlp_parse_wh(const char *s, const char *opt, int *w, int *h) {
    char x;
    int a, b;
    if (sscanf(s, "%dx%d%c", &a, &b, &x) == 2 || sscanf(s, "%dX%d%c", &a, &b, &x) == 2) {
        *w = a;
        *h = b;
    } else if (sscanf(s, "%d%c", &a, &x) == 1) {
        *w = *h = a;
    } else {
        return DLP_ERR(DLP_ERR_INVALID, "option --%s: '%s' is not N or WxH", opt, s);
    }
    if (*w < 1 || *h < 1 || *w > 8192 || *h > 8192) return DLP_ERR(DLP_ERR_INVALID, "option --%s: %s out of range", opt, s);
    return DLP_OK;
}

dlp_status dlp_transform_spec_apply(const dlp_transform_spec *o, dlp_transform *t) {
    DLP_CHECK(dlp_parse_wh(o->crop, "crop", &t->out_w, &t->out_h));
    DLP_CHECK(dlp_parse_range(o->scale, "scale", NAN, &t->scale_lo, &t->scale_hi));
    DLP_CHECK(dlp_parse_range(o->ratio, "ratio", NAN, &t->ratio_lo, &t->ratio_hi));
    t->dtype = (dlp_dtype)o->dtype;
    t->layout = (dlp_layout)o->layout;
    if (o->no_dct) {
        t->dct_scales = 1u << 8;
    } else if (o->dct_scales && o->dct_scales[0]) {
        int v[8];
        int n = dlp_parse_int_list(o->dct_scales, v, 8);
        if (n < 1) return DLP_ERR(DLP_ERR_INVALID, "--dct-scales '%s' is not a list like 1,2,4,8", o->dct_scales);
        t->dct_scales = 1u << 8;
        for (int i = 0; i < n; i++) {
            if (v[i] < 1 || v[i] > 8) return DLP_ERR(DLP_ERR_INVALID, "--dct-scales: %d is not in 1..8", v[i]);
            t->dct_scales |= 1u << v[i];
        }
    }
    return dlp_transform_check(t);
}

void dlp_synth_report_load(const char *dir, dlp_synth_report *rep) {
    char meta[4200];
    snprintf(meta, sizeof meta, "%s/dataset.json", dir);
    json_t *j;
    if (dlp_json_load(meta, &j) != DLP_OK) {
        dlp_err_clear();
        return;
    }
    json_t *m = json_object_get(j, "mix");
    rep->images = json_integer_value(json_object_get(j, "images"));
    rep->bytes = json_integer_value(json_object_get(j, "bytes"));
    rep->gray = json_integer_value(json_object_get(m, "gray"));
    rep->sub444 = json_integer_value(json_object_get(m, "sub444"));
    rep->sub422 = json_integer_value(json_object_get(m, "sub422"));
    rep->sub420 = json_integer_value(json_object_get(m, "sub420"));
    rep->progressive = json_integer_value(json_object_get(m, "progressive"));
    rep->over_1000px = json_integer_value(json_object_get(m, "over_1000px"));
    json_decref(j);
}
