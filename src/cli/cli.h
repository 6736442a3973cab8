// cli: one file per subcommand; each parses its options, calls the library and prints. Only cli/ exits.
// Defines: dlp_cli_cmd (the subcommand table entry), the subcommand entry points, dlp_cli_fail.
#ifndef DLP_CLI_H
#define DLP_CLI_H
#include "core/status.h"

typedef struct dlp_cli_cmd {
    const char *name;
    int (*main)(int argc, char **argv);  // argv[0] is the subcommand name
    const char *summary;
} dlp_cli_cmd;

// Prints the error chain for st (unless it is DLP_ERR_CANCELLED from --help) and returns the exit code.
int dlp_cli_fail(dlp_status st);
// Dispatches argv[1] among a table of sub-subcommands (e.g. "data gen"); prints usage on an unknown one.
int dlp_cli_dispatch(const char *prog, const dlp_cli_cmd *cmds, int argc, char **argv);

int dlp_cli_version(int argc, char **argv);
int dlp_cli_data(int argc, char **argv);
int dlp_cli_nn(int argc, char **argv);
int dlp_cli_predict(int argc, char **argv);
int dlp_cli_probe(int argc, char **argv);
int dlp_cli_validate(int argc, char **argv);
int dlp_cli_catalog(int argc, char **argv);
int dlp_cli_monitor(int argc, char **argv);
int dlp_cli_gpu(int argc, char **argv);
int dlp_cli_infer(int argc, char **argv);
int dlp_cli_serve(int argc, char **argv);
int dlp_cli_loadgen(int argc, char **argv);
int dlp_cli_train(int argc, char **argv);
int dlp_cli_run(int argc, char **argv);

#endif
