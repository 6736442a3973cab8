// dist/launch: how a process finds itself in an MPI job, and how dlperf starts one of its own commands as an MPI job
// (the probe's interconnect part, validate's multi-rank configurations, `dlperf run` on a multi-GPU machine).
// Defines: dlp_launched_by_mpi, dlp_mpirun_available, dlp_mpirun_prefix, dlp_mpirun_hosts_prefix, dlp_hostfile_hosts.
#ifndef DLP_DIST_LAUNCH_H
#define DLP_DIST_LAUNCH_H
#include <stddef.h>

// 1 when mpirun (Open MPI) or a PMI/PMIx launcher such as srun started this process.
int dlp_launched_by_mpi(void);
// 1 when `mpirun` is on the PATH.
int dlp_mpirun_available(void);
// The start of a shell command running `ranks` copies of exe (NULL: this program) under mpirun, Open MPI's
// run-as-root switches set, oversubscription allowed (ranks x threads may exceed the cores) and, with timeout_s > 0,
// under timeout(1), into buf: "OMPI_ALLOW_RUN_AS_ROOT=1 ... timeout 120 mpirun --oversubscribe -np 2 '/path/dlperf'".
// The caller appends the arguments (and may put more VAR=value assignments in front). Returns 0, or -1 when this
// program's path cannot be found or buf is too small.
int dlp_mpirun_prefix(char *buf, size_t len, int ranks, const char *exe, int timeout_s);
// The same across hosts: `per_node` ranks on each of `nodes` hosts of the MPI hostfile, started by launcher (NULL or
// "": mpirun; a wrapper such as tests/netns-hosts.sh's DLPN_MPIRUN, which adds its own network options), e.g.
// "OMPI_ALLOW_RUN_AS_ROOT=1 ... timeout 600 '/tmp/dlpn.x/mpirun' -np 4 --hostfile 'h' --npernode 2 '/path/dlperf'".
// The launcher is a command (it may carry options), not quoted. Returns 0, or -1 as dlp_mpirun_prefix.
int dlp_mpirun_hosts_prefix(char *buf, size_t len, const char *launcher, const char *hostfile, int nodes, int per_node,
                            const char *exe, int timeout_s);

// The hosts an MPI hostfile names: its lines that are neither blank nor comments ('#'); -1 when it cannot be read.
int dlp_hostfile_hosts(const char *path);

#endif
