// monitor/command: a command run under the monitor, with signals passed on to it.
#include "monitor/command.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "monitor/http.h"

static volatile sig_atomic_t g_child = 0;
static volatile sig_atomic_t g_pending_sig = 0;
static const int k_forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// Passes a signal on to the command. One the terminal sent (si_code SI_KERNEL, e.g. Ctrl-C) reached the command's
// process group already: sending it again would deliver it twice.
static void forward_signal(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    if (si && si->si_code == SI_KERNEL) return;
    if (g_child > 0) kill((pid_t)g_child, sig);
    else g_pending_sig = sig;
}

static void set_forwarding(int on) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    if (on) {
        sa.sa_sigaction = forward_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
    } else {
        sa.sa_handler = SIG_DFL;
    }
    for (size_t i = 0; i < sizeof k_forwarded / sizeof k_forwarded[0]; i++) sigaction(k_forwarded[i], &sa, NULL);
}

// The child: waits on `go` until the monitor has its baseline, then execs; `err` carries an exec failure.
static void child(char **cmd, const int go[2], const int err[2]) {
    set_forwarding(0);
    close(go[1]);
    close(err[0]);
    char c;
    ssize_t r;
    do r = read(go[0], &c, 1);
    while (r < 0 && errno == EINTR);
    if (r != 1) _exit(125);  // dlperf gave up before starting the command
    execvp(cmd[0], cmd);
    int e = errno;
    ssize_t w = write(err[1], &e, sizeof e);
    (void)w;
    _exit(e == ENOENT ? 127 : 126);
}

// Lets the command run, then waits for it to end without reaping it, so its tree can be read one last time.
static void run_and_wait(dlp_monitor *mon, pid_t pid, const int go[2], const int err[2], dlp_monitor_command_result *out) {
    int64_t t0 = dlp_now_ns();
    ssize_t w = write(go[1], "g", 1);
    (void)w;
    close(go[1]);
    ssize_t r;
    do r = read(err[0], &out->exec_errno, sizeof out->exec_errno);
    while (r < 0 && errno == EINTR);
    if (r != (ssize_t)sizeof out->exec_errno) out->exec_errno = 0;  // EOF: exec succeeded and closed the pipe
    close(err[0]);
    siginfo_t si;
    int wr;
    do wr = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT);
    while (wr != 0 && errno == EINTR);
    if (dlp_monitor_stop(mon) != DLP_OK) {
        dlp_err_print(stderr);
        dlp_err_clear();
        out->monitor_failed = 1;
    }
    int status = 0;
    while (wait4(pid, &status, 0, &out->ru) < 0 && errno == EINTR) {
    }
    out->wall_s = (double)(dlp_now_ns() - t0) * 1e-9;
    if (WIFEXITED(status)) out->exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) {
        out->signal = WTERMSIG(status);
        out->exit_code = 128 + out->signal;
    }
}

dlp_status dlp_monitor_run_command(const dlp_monitor_command_cfg *cfg, dlp_monitor_command_result *out) {
    memset(out, 0, sizeof *out);
    int go[2], err[2];
    if (pipe2(go, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return DLP_ERR(DLP_ERR_IO, "pipe: %s", strerror(errno));
    set_forwarding(1);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return DLP_ERR(DLP_ERR_IO, "fork: %s", strerror(errno));
    if (pid == 0) child(cfg->cmd, go, err);
    g_child = pid;
    if (g_pending_sig) kill(pid, g_pending_sig);
    close(go[0]);
    close(err[1]);

    dlp_monitor_cfg mc = cfg->mon;
    mc.pid = pid;
    dlp_monitor *mon = NULL;
    dlp_monitor_http *http = NULL;
    dlp_status st = dlp_monitor_create(&mc, &mon);
    if (st == DLP_OK && cfg->metrics_port >= 0) st = dlp_monitor_http_start(mon, cfg->metrics_addr, cfg->metrics_port, &http);
    if (st == DLP_OK) st = dlp_monitor_start(mon);
    if (st != DLP_OK) {
        close(go[1]);  // the child reads EOF and exits without running the command
        close(err[0]);
        waitpid(pid, NULL, 0);
        set_forwarding(0);
        dlp_monitor_http_stop(http);
        dlp_monitor_destroy(mon);
        return st;
    }
    if (http && cfg->on_serving) cfg->on_serving(cfg->ctx, cfg->metrics_addr, dlp_monitor_http_port(http));
    run_and_wait(mon, pid, go, err, out);
    g_child = 0;
    set_forwarding(0);
    dlp_monitor_http_stop(http);
    out->summary = dlp_monitor_summary_json(mon);
    dlp_monitor_destroy(mon);
    return DLP_OK;
}

void dlp_monitor_command_result_free(dlp_monitor_command_result *r) {
    json_decref(r->summary);
    r->summary = NULL;
}

void dlp_monitor_command_json(const dlp_monitor_command_result *r, char **cmd, int ncmd, json_t *res) {
    json_t *c = json_array();
    for (int i = 0; i < ncmd; i++) json_array_append_new(c, json_string(cmd[i]));
    json_object_set_new(res, "command", c);
    json_object_set_new(res, "exit_code", json_integer(r->exit_code));
    json_object_set_new(res, "signal", r->signal ? json_integer(r->signal) : json_null());
    if (r->exec_errno) json_object_set_new(res, "exec_error", json_string(strerror(r->exec_errno)));
    json_object_set_new(res, "wall_s", json_real(r->wall_s));
    const struct rusage *ru = &r->ru;
    json_object_set_new(res, "rusage", json_pack("{s:f, s:f, s:I}", "user_s",
                                                 (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec * 1e-6, "system_s",
                                                 (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec * 1e-6,
                                                 "max_rss_bytes", (json_int_t)ru->ru_maxrss * 1024));
}
