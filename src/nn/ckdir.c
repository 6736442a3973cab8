// nn/ckdir: a run's checkpoint directory across processes — lock, list, clean, retain (see ckdir.h).
#include "nn/ckdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/stats.h"
#include "nn/checkpoint.h"

#define LOCK_NAME ".dlperf-train.lock"

dlp_status dlp_ckdir_lock(const char *dir, int *fd) {
    *fd = -1;
    DLP_CHECK(dlp_mkdirs(dir));
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, LOCK_NAME);
    int f = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0) return DLP_ERR(DLP_ERR_IO, "cannot open the checkpoint lock %s: %s", p, strerror(errno));
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(f, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(f);
        if (e == EWOULDBLOCK)
            return DLP_ERR(DLP_ERR_EXISTS, "--checkpoint %s is being written by another dlperf train (pid %s); one run "
                           "writes a checkpoint directory at a time", dir, pid[0] ? pid : "?");
        return DLP_ERR(DLP_ERR_IO, "cannot lock %s: %s", p, strerror(e));
    }
    char me[32];
    int n = snprintf(me, sizeof me, "%ld\n", (long)getpid());
    if (ftruncate(f, 0) != 0 || pwrite(f, me, (size_t)n, 0) != n) {
        // the PID is only for the message above: the lock itself holds
    }
    *fd = f;
    return DLP_OK;
}

void dlp_ckdir_unlock(int fd) {
    if (fd >= 0) close(fd);  // releases the flock
}

void dlp_ckdir_path(const char *dir, int64_t step, char *out, size_t len) {
    snprintf(out, len, "%s/step-%08lld.safetensors", dir, (long long)step);
}

// "step-<digits><rest>": the step, and where <rest> starts; -1 if name does not start so.
static int64_t name_step(const char *name, const char **rest) {
    if (strncmp(name, "step-", 5) != 0) return -1;
    const char *p = name + 5;
    if (*p < '0' || *p > '9') return -1;
    int64_t s = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (s > (INT64_MAX - 9) / 10) return -1;
        s = s * 10 + (*p - '0');
    }
    *rest = p;
    return s;
}

int dlp_ckdir_list(const char *dir, int64_t **steps) {
    *steps = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *rest;
        int64_t s = name_step(e->d_name, &rest);
        if (s < 0 || strcmp(rest, ".safetensors") != 0) continue;
        char p[4200], sp[4300];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        dlp_checkpoint_state_path(p, sp, sizeof sp);
        if (!dlp_path_exists(sp)) continue;
        if (n == cap) {
            int nc = cap ? 2 * cap : 16;
            int64_t *q = realloc(*steps, (size_t)nc * sizeof(int64_t));
            if (!q) break;
            *steps = q;
            cap = nc;
        }
        (*steps)[n++] = s;
    }
    closedir(d);
    dlp_stats_sort_i64(*steps, (size_t)n);
    return n;
}

dlp_status dlp_ckdir_clean(const char *dir, int *removed) {
    if (removed) *removed = 0;
    int64_t *steps;
    const int n = dlp_ckdir_list(dir, &steps);
    const int64_t newest = n > 0 ? steps[n - 1] : -1;
    free(steps);
    DIR *d = opendir(dir);
    if (!d) return DLP_OK;
    struct dirent *e;
    dlp_status st = DLP_OK;
    while ((e = readdir(d))) {
        const char *rest;
        int64_t s = name_step(e->d_name, &rest);
        if (s < 0) continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        int gone = 0;
        const size_t tmp = strncmp(rest, ".safetensors.tmp.", 17) == 0              ? 17
                           : strncmp(rest, ".state.safetensors.tmp.", 23) == 0      ? 23
                           : strncmp(rest, ".state.safetensors.next.tmp.", 28) == 0 ? 28
                                                                                    : 0;
        if (tmp) {
            char *end;
            long pid = strtol(rest + tmp, &end, 10);
            if (*end != '\0' || end == rest + tmp) continue;  // not core/fs's name
            gone = pid != (long)getpid() && (!dlp_pid_alive(pid) || s <= newest);
        } else if (strcmp(rest, ".state.safetensors.next") == 0) {
            // a replacing save killed half-way: finish it (model published) or drop its state (not published)
            char mp[4200];
            dlp_ckdir_path(dir, s, mp, sizeof mp);
            int settled = 0;
            dlp_status ss = dlp_checkpoint_settle(mp, &settled);
            if (ss && !st) st = ss;
            if (settled && removed) (*removed)++;
            continue;
        } else if (strcmp(rest, ".state.safetensors") == 0) {
            char mp[4200];
            dlp_ckdir_path(dir, s, mp, sizeof mp);
            gone = !dlp_path_exists(mp);  // its model was never published (or was pruned first)
        }
        if (!gone) continue;
        if (unlink(p) != 0 && errno != ENOENT) {
            if (!st) st = DLP_ERR(DLP_ERR_IO, "cannot remove the stale checkpoint file %s: %s", p, strerror(errno));
            continue;
        }
        if (removed) (*removed)++;
    }
    closedir(d);
    return st;
}

dlp_status dlp_ckdir_retain(const char *dir, int keep, int *removed) {
    if (removed) *removed = 0;
    if (keep <= 0) return DLP_OK;
    int64_t *steps;
    const int n = dlp_ckdir_list(dir, &steps);
    dlp_status st = DLP_OK;
    for (int i = 0; i < n - keep; i++) {
        char mp[4200], sp[4300];
        dlp_ckdir_path(dir, steps[i], mp, sizeof mp);
        dlp_checkpoint_state_path(mp, sp, sizeof sp);
        // the model first: a state file without its model is never taken for complete
        if (unlink(mp) != 0 && errno != ENOENT) {
            st = DLP_ERR(DLP_ERR_IO, "cannot remove the old checkpoint %s: %s", mp, strerror(errno));
            break;
        }
        if (unlink(sp) != 0 && errno != ENOENT) {
            st = DLP_ERR(DLP_ERR_IO, "cannot remove %s: %s", sp, strerror(errno));
            break;
        }
        if (removed) (*removed)++;
    }
    free(steps);
    return st;
}
