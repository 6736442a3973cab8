// dist/launch: MPI job detection and the mpirun command line dlperf starts its own commands with (dist/launch.h).
#include "dist/launch.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int dlp_launched_by_mpi(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

int dlp_mpirun_available(void) { return system("command -v mpirun >/dev/null 2>&1") == 0; }

// exe, or this program's path when NULL, into self; NULL when it cannot be found.
static const char *exe_path(const char *exe, char *self, size_t len) {
    if (exe) return exe;
    ssize_t n = readlink("/proc/self/exe", self, len - 1);
    if (n <= 0) return NULL;
    self[n] = '\0';
    return self;
}

int dlp_mpirun_prefix(char *buf, size_t len, int ranks, const char *exe, int timeout_s) {
    char self[PATH_MAX];
    if (!(exe = exe_path(exe, self, sizeof self))) return -1;
    char to[32] = "";
    if (timeout_s > 0) snprintf(to, sizeof to, "timeout %d ", timeout_s);
    int w = snprintf(buf, len, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 %smpirun --oversubscribe -np %d "
                     "'%s'", to, ranks, exe);
    return w > 0 && (size_t)w < len ? 0 : -1;
}

int dlp_mpirun_hosts_prefix(char *buf, size_t len, const char *launcher, const char *hostfile, int nodes, int per_node,
                            const char *exe, int timeout_s) {
    char self[PATH_MAX];
    if (!(exe = exe_path(exe, self, sizeof self)) || !hostfile || nodes < 1 || per_node < 1) return -1;
    char to[32] = "";
    if (timeout_s > 0) snprintf(to, sizeof to, "timeout %d ", timeout_s);
    int w = snprintf(buf, len, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 %s%s -np %d --hostfile '%s' "
                     "--npernode %d '%s'", to, launcher && launcher[0] ? launcher : "mpirun", nodes * per_node, hostfile,
                     per_node, exe);
    return w > 0 && (size_t)w < len ? 0 : -1;
}

int dlp_hostfile_hosts(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int hosts = 0;
    while (fgets(line, sizeof line, f)) hosts += line[strspn(line, " \t")] != '#' && line[strspn(line, " \t\r\n")];
    fclose(f);
    return hosts;
}
