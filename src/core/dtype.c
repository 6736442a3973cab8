// core/dtype: the precision and dtype choice tables and the dtype parser.
#include "core/dtype.h"

const dlp_opt_choice dlp_precision_choices[] = {
    {"auto", DLP_PRECISION_AUTO}, {"fp32", DLP_DTYPE_F32}, {"bf16", DLP_DTYPE_BF16}, {"fp16", DLP_DTYPE_F16},
    {"int8", DLP_DTYPE_I8}, {NULL, 0},
};

const dlp_opt_choice dlp_dtype_choices[] = {
    {"fp32", DLP_DTYPE_F32}, {"bf16", DLP_DTYPE_BF16}, {"fp16", DLP_DTYPE_F16}, {NULL, 0},
};

const dlp_opt_choice dlp_elem_choices[] = {
    {"fp32", DLP_DTYPE_F32}, {"bf16", DLP_DTYPE_BF16}, {"fp16", DLP_DTYPE_F16}, {"uint8", DLP_DTYPE_U8}, {NULL, 0},
};

const dlp_opt_choice dlp_layout_choices[] = {{"NCHW", DLP_LAYOUT_NCHW}, {"NHWC", DLP_LAYOUT_NHWC}, {NULL, 0}};

dlp_status dlp_dtype_parse(const char *name, dlp_dtype *out) {
    int v = 0;
    dlp_status st = dlp_opt_choice_parse(dlp_dtype_choices, "precision", name, &v);
    if (!st) *out = (dlp_dtype)v;
    return st;
}
