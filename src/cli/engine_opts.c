// cli/engine_opts: the serving engine's option rows (serve/stack), written once for `dlperf serve` and for
// `dlperf loadgen --sut local`; each command places the rows in its own table, in its own order. Name, type,
// default and argument name are common; the short flag and the help differ only where the commands say so.
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "core/dtype.h"
#include "core/log.h"
#include "nn/quant.h"

typedef struct engine_row {
    const char *name;
    dlp_opt_type type;
    const char *def, *meta;
    const dlp_opt_choice *choices;  // value-mapped choices (precision)
    size_t off;                // where the value goes in dlp_cli_engine_opts
    int short_name[2];         // [DLP_CLI_SERVE], [DLP_CLI_LOADGEN]
    const char *help[2];       // NULL: the command has no such option
} engine_row;

#define OFF(f) offsetof(dlp_cli_engine_opts, f)
static const engine_row k_rows[DLP_CLI_ENGINE_NOPTS] = {
    [DLP_CLI_ENGINE_MODEL] = {"model", DLP_OPT_STR, NULL, "NAME", NULL, OFF(model), {'m', 'm'},
        {"model (default: the weights' arch, else resnet50)", "local: model (default: the weights' arch, else resnet50)"}},
    [DLP_CLI_ENGINE_DEVICE] = {"device", DLP_OPT_STR, "cpu", "DEV", NULL, OFF(device), {0, 0},
        {"backend: cpu | ref | cuda | sim:<gpu>", "local: backend: cpu | ref | cuda | sim:<gpu>"}},
    // one meaning per short option across commands: -p is --precision, -w --workers, -b --batch, -d --data
    [DLP_CLI_ENGINE_PRECISION] = {"precision", DLP_OPT_ENUM, "auto", NULL, dlp_precision_choices, OFF(precision),
        {'p', 'p'}, {DLP_CLI_PRECISION_HELP, "local: " DLP_CLI_PRECISION_HELP}},
    [DLP_CLI_ENGINE_THREADS] = {"threads", DLP_OPT_INT, "0", "N", NULL, OFF(threads), {'t', 't'},
        {"compute threads (0: all allowed CPUs)", "local: compute threads, shared by the SUT threads' plans (0: all)"}},
    [DLP_CLI_ENGINE_WEIGHTS] = {"weights", DLP_OPT_STR, NULL, "FILE", NULL, OFF(weights), {0, 0},
        {"weights: a dlperf checkpoint or torchvision safetensors (none: seeded random init, meaningless answers)",
         "local: safetensors weights (none: seeded random init)"}},
    [DLP_CLI_ENGINE_CLASSES] = {"classes", DLP_OPT_INT, "0", "N", NULL, OFF(classes), {0, 0},
        {"classes (0: from the weights, else 1000)", "local: classes (0: from the weights, else 1000)"}},
    [DLP_CLI_ENGINE_SIZE] = {"size", DLP_OPT_INT, "224", "PX", NULL, OFF(size), {0, 0},
        {"input side (the shorter side is resized to size*256/224 first)", "local: input side"}},
    [DLP_CLI_ENGINE_SEED] = {"seed", DLP_OPT_I64, "1", "N", NULL, OFF(seed), {0, 0},
        {"seed of the random init (without --weights)", NULL}},  // loadgen's --seed is its schedule's
    [DLP_CLI_ENGINE_DCT] = {"dct-scale", DLP_OPT_FLAG, NULL, NULL, NULL, OFF(dct), {0, 0},
        {"let the JPEG decoder downscale by a DCT factor where the crop allows (faster; not bit-exact with Pillow)",
         "local: allow DCT-scaled JPEG decoding (not bit-exact with Pillow)"}},
    [DLP_CLI_ENGINE_MAX_BATCH] = {"max-batch", DLP_OPT_INT, "8", "N", NULL, OFF(max_batch), {0, 0},
        {"dynamic batching: largest batch (plans of batch 1, 2, 4, .. up to it; each batch runs on the smallest that holds it)",
         "local: samples per call at most (plans of batch 1, 2, 4, .. up to it; each call runs on the smallest that holds it)"}},
    [DLP_CLI_ENGINE_SINGLE_PLAN] = {"single-plan", DLP_OPT_FLAG, NULL, NULL, NULL, OFF(single_plan), {0, 0},
        {"one plan of batch --max-batch only (less memory; a lone request then costs a whole batch)", NULL}},
    // int8 (infer's --calib* options, for a served model)
    [DLP_CLI_ENGINE_CALIB] = {"calib", DLP_OPT_STR, NULL, "FILE", NULL, OFF(calib), {0, 0},
        {"--precision int8: the calibration file (used when it exists, else made from --calib-data and written; "
         "default: beside --weights)", "local: --precision int8: the calibration file (default: beside --weights)"}},
    [DLP_CLI_ENGINE_CALIB_DATA] = {"calib-data", DLP_OPT_STR, "synthetic", "DIR|synthetic", NULL, OFF(calib_data),
        {0, 0}, {"--precision int8: dataset whose train split calibrates the activation ranges",
                 "local: --precision int8: dataset calibrating the activation ranges"}},
    [DLP_CLI_ENGINE_CALIB_IMAGES] = {"calib-images", DLP_OPT_INT, "256", "N", NULL, OFF(calib_images), {0, 0},
        {"--precision int8: images calibrated on", "local: --precision int8: images calibrated on"}},
    [DLP_CLI_ENGINE_CALIB_METHOD] = {"calib-method", DLP_OPT_ENUM, "percentile", NULL, dlp_calib_method_choices,
        OFF(calib_method), {0, 0}, {"--precision int8: activation range method",
                                    "local: --precision int8: activation range method"}},
};
#undef OFF

dlp_opt dlp_cli_engine_opt(dlp_cli_engine_user user, dlp_cli_engine_opt_id id, dlp_cli_engine_opts *o) {
    const engine_row *r = &k_rows[id];
    if (!r->help[user]) {  // a table without the row would end early or parse into nothing: a programming error
        DLP_ERROR("cli: option --%s is not one of this command's engine options", r->name);
        abort();
    }
    return (dlp_opt){r->name, r->short_name[user], r->type, (char *)o + r->off, r->def, r->meta, r->help[user],
                     r->choices, 0};
}

dlp_dtype dlp_cli_auto_precision(const char *device) {
    return dlp_device_default_precision(device);
}

dlp_dtype dlp_cli_precision(int choice, const char *device) {
    return choice == DLP_PRECISION_AUTO ? dlp_cli_auto_precision(device) : (dlp_dtype)choice;
}

static void calib_note(void *ctx, const char *line) {
    (void)ctx;
    DLP_INFO("%s", line);
}

void dlp_cli_engine_cfg(const dlp_cli_engine_opts *o, dlp_serve_stack_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->model = (dlp_infer_model_cfg){.model = o->model, .num_classes = o->classes, .size = o->size,
                                       .weights = o->weights, .seed = (uint64_t)o->seed};
    cfg->device = o->device;
    cfg->precision = dlp_cli_precision(o->precision, o->device);
    cfg->threads = o->threads;
    cfg->max_batch = o->max_batch;
    cfg->single_plan = o->single_plan;
    cfg->dct_scaling = o->dct;
    cfg->calib = (dlp_infer_calib_cfg){.device = o->device, .threads = o->threads, .data = o->calib_data,
                                       .images = o->calib_images, .method = (dlp_calib_method)o->calib_method,
                                       .path = o->calib, .dct_scaling = o->dct, .on_note = calib_note};
}
