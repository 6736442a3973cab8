// cli: one file per subcommand; each parses its options, calls the library and prints. Only cli/ exits.
// Defines: dlp_cli_cmd (the subcommand table entry), the subcommand entry points, dlp_cli_fail, dlp_cli_parse,
//          dlp_cli_write_result,
//          dlp_cli_engine_opts and its option rows (dlp_cli_engine_opt, dlp_cli_engine_cfg).
#ifndef DLP_CLI_H
#define DLP_CLI_H
#include <stdint.h>

#include "core/dtype.h"
#include "core/opts.h"
#include "core/status.h"
#include "serve/stack.h"

typedef struct dlp_cli_cmd {
    const char *name;
    int (*main)(int argc, char **argv);  // argv[0] is the subcommand name
    const char *summary;
} dlp_cli_cmd;

// Prints the error chain for st (unless it is DLP_ERR_CANCELLED from --help) and returns the exit code.
int dlp_cli_fail(dlp_status st);
// Dispatches argv[1] among a table of sub-subcommands (e.g. "data gen"); prints usage on an unknown one.
int dlp_cli_dispatch(const char *prog, const dlp_cli_cmd *cmds, int argc, char **argv);
// Completes a result with "host" and "versions", writes it to path (never overwriting) and releases it.
struct json_t;
dlp_status dlp_cli_write_result(struct json_t *result, const char *path);
// dlp_opts_parse of a command that takes no arguments besides its options: one left over is DLP_ERR_INVALID.
dlp_status dlp_cli_parse(dlp_opt *opts, const char *usage, int argc, char **argv);

// ---- the serving engine's options (cli/engine_opts), shared by `dlperf serve` and `dlperf loadgen --sut local` --
typedef struct dlp_cli_engine_opts {
    const char *model, *device, *weights;
    int precision, threads, max_batch, classes, size, dct, single_plan;  // precision: dlp_precision_choices' value
    int64_t seed;
    const char *calib, *calib_data;  // --precision int8: the calibration file and the images it is made from
    int calib_images, calib_method;
} dlp_cli_engine_opts;
typedef enum { DLP_CLI_SERVE, DLP_CLI_LOADGEN } dlp_cli_engine_user;
typedef enum {
    DLP_CLI_ENGINE_MODEL, DLP_CLI_ENGINE_DEVICE, DLP_CLI_ENGINE_PRECISION, DLP_CLI_ENGINE_THREADS,
    DLP_CLI_ENGINE_WEIGHTS, DLP_CLI_ENGINE_CLASSES, DLP_CLI_ENGINE_SIZE, DLP_CLI_ENGINE_SEED, DLP_CLI_ENGINE_DCT,
    DLP_CLI_ENGINE_MAX_BATCH, DLP_CLI_ENGINE_SINGLE_PLAN, DLP_CLI_ENGINE_CALIB, DLP_CLI_ENGINE_CALIB_DATA,
    DLP_CLI_ENGINE_CALIB_IMAGES, DLP_CLI_ENGINE_CALIB_METHOD, DLP_CLI_ENGINE_NOPTS
} dlp_cli_engine_opt_id;
// The options-table row of engine option id as `user` offers it (its short flag and help), writing into o.
dlp_opt dlp_cli_engine_opt(dlp_cli_engine_user user, dlp_cli_engine_opt_id id, dlp_cli_engine_opts *o);
// The parsed options as the serving stack's configuration; copies, workers, warm-up, the thread sharing and the
// random-init warning are the caller's to set.
void dlp_cli_engine_cfg(const dlp_cli_engine_opts *o, dlp_serve_stack_cfg *cfg);

// The one default precision rule (--precision auto) of train, infer, serve, loadgen --sut local, predict and plan:
// fp16 on a GPU (cuda, or an emulated sim:<gpu>), as the published figures and MLPerf's runs use; fp32 on the cpu
// and ref devices (where bf16 is a choice to make, not a default: its accuracy differs). `dlperf run` picks for
// speed instead (its own --precision auto).
#define DLP_CLI_PRECISION_HELP "compute precision (auto: fp16 on a GPU, cuda or sim:<gpu>; fp32 on the cpu and ref devices)"
dlp_dtype dlp_cli_auto_precision(const char *device);
// The dtype of a --precision choice (dlp_precision_choices): auto resolved by the rule above.
dlp_dtype dlp_cli_precision(int choice, const char *device);
// A --precision row mapped through dlp_precision_choices (auto|fp32|bf16|fp16), default auto.
#define DLP_CLI_PRECISION_ROW(dst, help) \
    {"precision", 'p', DLP_OPT_ENUM, dst, "auto", NULL, help, dlp_precision_choices, 0}

// The cost options of predict and plan, written into a dlp_cost_params (perf/cost) that dlp_cost_params_init set;
// the defaults are its values.
#define DLP_CLI_COST_ROWS(cp)                                                                                          \
    {"lifetime-years", 0, DLP_OPT_DOUBLE, &(cp).lifetime_years, "3", NULL, "amortization of an owned machine's price", NULL, 0}, \
    {"utilization", 0, DLP_OPT_DOUBLE, &(cp).utilization, "1", NULL, "share of its lifetime the machine works", NULL, 0}, \
    {"kwh-usd", 0, DLP_OPT_DOUBLE, &(cp).usd_per_kwh, "0.15", NULL, "electricity price, $/kWh", NULL, 0},             \
    {"pue", 0, DLP_OPT_DOUBLE, &(cp).pue, "1", NULL, "power usage effectiveness (1: no overhead counted)", NULL, 0},   \
    {"capacity-block", 0, DLP_OPT_FLAG, &(cp).alt_rate, NULL, NULL, "cloud: the capacity-block rate instead of on-demand", NULL, 0}

// cli/fmt: "19,722" ("-" when not finite); "850 ms", "12.3 s", "3 min 04 s", "2 h 05 min", "3.5 days" (coarse:
// no ms, whole minutes below an hour: "54 min").
const char *dlp_cli_grp(double v, char *buf, size_t len);
const char *dlp_cli_dur(double s, int coarse, char *buf, size_t len);

int dlp_cli_version(int argc, char **argv);
int dlp_cli_report(int argc, char **argv);
int dlp_cli_data(int argc, char **argv);
int dlp_cli_nn(int argc, char **argv);
int dlp_cli_predict(int argc, char **argv);
int dlp_cli_plan(int argc, char **argv);
int dlp_cli_probe(int argc, char **argv);
int dlp_cli_validate(int argc, char **argv);
int dlp_cli_catalog(int argc, char **argv);
int dlp_cli_monitor(int argc, char **argv);
int dlp_cli_gpu(int argc, char **argv);
int dlp_cli_dist(int argc, char **argv);
int dlp_cli_infer(int argc, char **argv);
int dlp_cli_serve(int argc, char **argv);
int dlp_cli_loadgen(int argc, char **argv);
int dlp_cli_train(int argc, char **argv);
int dlp_cli_run(int argc, char **argv);

#endif
