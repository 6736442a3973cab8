// monitor/command: runs a command under the monitor (`dlperf monitor -- COMMAND`): the command starts once the
// monitor has its baseline, signals sent to this process are passed on to it, and its tree is read one last time
// after it ends; its exit status, signal, resource use and the monitor's summary come back.
// Defines: dlp_monitor_command_cfg, dlp_monitor_command_result, dlp_monitor_run_command,
//          dlp_monitor_command_result_free, dlp_monitor_command_json.
#ifndef DLP_MONITOR_COMMAND_H
#define DLP_MONITOR_COMMAND_H
#include <jansson.h>
#include <sys/resource.h>

#include "core/status.h"
#include "monitor/monitor.h"

typedef struct dlp_monitor_command_cfg {
    dlp_monitor_cfg mon;     // pid is set to the command's
    char **cmd;              // argv of the command (NULL-terminated), run with execvp
    const char *metrics_addr;
    int metrics_port;        // >= 0: serve Prometheus /metrics while it runs (0: any free port)
    void (*on_serving)(void *ctx, const char *addr, int port);  // the /metrics server is up (before the command)
    void *ctx;
} dlp_monitor_command_cfg;

typedef struct dlp_monitor_command_result {
    int exit_code;       // the command's, 128 + signal when a signal killed it
    int signal;          // 0: it exited
    int exec_errno;      // != 0: the command could not be started (exit_code 127 or 126)
    double wall_s;
    struct rusage ru;    // the command's tree
    int monitor_failed;  // the monitor's outputs are incomplete (its stop failed: the error was printed)
    json_t *summary;     // the monitor's per-phase summary
} dlp_monitor_command_result;

// An error only when the command could not be set up (pipes, fork, the monitor); the command's own failure is in
// the result.
dlp_status dlp_monitor_run_command(const dlp_monitor_command_cfg *cfg, dlp_monitor_command_result *out);
void dlp_monitor_command_result_free(dlp_monitor_command_result *r);
// The run into a dlperf.monitor/1 object: the command (ncmd words), exit code, signal, exec error, wall time,
// resource use and the monitor's summary.
void dlp_monitor_command_json(const dlp_monitor_command_result *r, char **cmd, int ncmd, json_t *res);

#endif
