// core/dtype: the names of element types and compute precisions, spelled once: the choice tables the options
// rows map through, and the one parser of a dtype name.
// Defines: DLP_PRECISION_AUTO, dlp_precision_choices, dlp_dtype_choices, dlp_elem_choices, dlp_layout_choices,
//          dlp_dtype_parse.
#ifndef DLP_CORE_DTYPE_H
#define DLP_CORE_DTYPE_H
#include "core/opts.h"
#include "core/status.h"
#include "core/tensor.h"

// --precision auto: the command's rule picks the dtype (e.g. dlp_cli_auto_precision).
#define DLP_PRECISION_AUTO (-1)
// auto|fp32|bf16|fp16|int8 -> DLP_PRECISION_AUTO, DLP_DTYPE_F32, DLP_DTYPE_BF16, DLP_DTYPE_F16, DLP_DTYPE_I8
// (int8: inference only, on the cpu device; commands that train refuse it).
extern const dlp_opt_choice dlp_precision_choices[];
// fp32|bf16|fp16 -> DLP_DTYPE_*: the compute types (no auto).
extern const dlp_opt_choice dlp_dtype_choices[];
// fp32|bf16|fp16|uint8 -> DLP_DTYPE_*: a batch's element types (the loader's output).
extern const dlp_opt_choice dlp_elem_choices[];
// NCHW|NHWC -> DLP_LAYOUT_*.
extern const dlp_opt_choice dlp_layout_choices[];
// "fp32" -> DLP_DTYPE_F32 (the compute types); DLP_ERR_INVALID naming the choices otherwise.
dlp_status dlp_dtype_parse(const char *name, dlp_dtype *out);

#endif
