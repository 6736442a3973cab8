// core/fs: atomic writes and small file helpers.
#include "core/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void fsync_parent(const char *path) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    int fd = open(dirname(tmp), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int dlp_pid_alive(long pid) { return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM); }

// Removes "<name>.tmp.<pid>" beside path whose writer is gone (killed mid-write): each kill would otherwise leave a
// file as large as the result until someone deletes it by hand. Live writers' (another process saving the same
// path) are left alone, and so is any temporary written to in the last minute: on a shared file system the pid may
// be another host's, whose writer this host cannot see (a writer's temporary changes while it writes).
#define DEAD_TEMP_AGE_S 60
static void remove_dead_temps(const char *path) {
    char dirbuf[4096], basebuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", path);
    snprintf(basebuf, sizeof basebuf, "%s", path);
    const char *base = basename(basebuf);
    const size_t bl = strlen(base);
    DIR *d = opendir(dirname(dirbuf));
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, base, bl) != 0 || strncmp(e->d_name + bl, ".tmp.", 5) != 0) continue;
        char *end;
        const long pid = strtol(e->d_name + bl + 5, &end, 10);
        if (*end || end == e->d_name + bl + 5 || pid == (long)getpid() || dlp_pid_alive(pid)) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || time(NULL) - st.st_mtime < DEAD_TEMP_AGE_S)
            continue;
        unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

static int g_stdout_fd = -1;  // where "-" goes once dlp_stdout_claim moved the human-readable output

void dlp_stdout_claim(void) {
    if (g_stdout_fd >= 0) return;
    // dlperf train runs itself again (exec): the new process finds the claimed descriptor in the environment,
    // "fd:dev:ino", taken only if that descriptor is still the same file (a child that did not inherit it may
    // have another file at that number).
    const char *env = getenv("DLPERF_STDOUT_FD");
    int efd = -1;
    unsigned long long edev = 0, eino = 0;
    struct stat st;
    if (env && sscanf(env, "%d:%llu:%llu", &efd, &edev, &eino) == 3 && efd > 2 && fstat(efd, &st) == 0 &&
        (unsigned long long)st.st_dev == edev && (unsigned long long)st.st_ino == eino) {
        g_stdout_fd = efd;
        fcntl(efd, F_SETFD, FD_CLOEXEC);
        return;
    }
    fflush(stdout);
    int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);  // children (mpirun, system()) do not get it
    if (fd < 0) return;
    if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0 || fstat(fd, &st) != 0) {
        close(fd);
        return;
    }
    g_stdout_fd = fd;
    char buf[80];
    snprintf(buf, sizeof buf, "%d:%llu:%llu", fd, (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    setenv("DLPERF_STDOUT_FD", buf, 1);
}

void dlp_stdout_keep_on_exec(void) {
    if (g_stdout_fd >= 0) fcntl(g_stdout_fd, F_SETFD, 0);
}

int dlp_path_is_stdout(const char *path) { return path && (strcmp(path, "-") == 0 || strcmp(path, "/dev/stdout") == 0); }

// An existing file that is not a regular one (/dev/stderr, a FIFO, a terminal): written in place.
static int is_special(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

static dlp_status write_all(int fd, const char *what, const void *data, size_t len) {
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return DLP_ERR(DLP_ERR_IO, "cannot write %s: %s", what, strerror(errno));
        }
        p += w;
        len -= (size_t)w;
    }
    return DLP_OK;
}

dlp_status dlp_write_atomic(const char *path, const void *data, size_t len, int flags) {
    if (dlp_path_is_stdout(path)) {
        fflush(stdout);
        return write_all(g_stdout_fd >= 0 ? g_stdout_fd : STDOUT_FILENO, "the standard output", data, len);
    }
    if (is_special(path)) {
        int sfd = open(path, O_WRONLY | O_CLOEXEC);
        if (sfd < 0) return DLP_ERR(DLP_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        dlp_status st = write_all(sfd, path, data, len);
        close(sfd);
        return st;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    // O_EXCL | O_NOFOLLOW: never write through a link planted at the temporary name. A file already there has
    // our PID, so its writer is dead (a killed run whose PID came round again): it is junk, removed once.
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return DLP_ERR(DLP_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    dlp_status ws = write_all(fd, tmp, data, len);
    if (ws != DLP_OK) {
        close(fd);
        unlink(tmp);
        return ws;
    }
    int synced = fsync(fd) == 0, sync_errno = errno;
    if (close(fd) != 0 && synced) synced = 0, sync_errno = errno;  // the descriptor is closed either way
    if (!synced) {
        unlink(tmp);
        return DLP_ERR(DLP_ERR_IO, "cannot sync %s: %s", tmp, strerror(sync_errno));
    }
    if (flags & DLP_WRITE_NOCLOBBER) {
        if (link(tmp, path) != 0) {
            int e = errno;
            unlink(tmp);
            if (e == EEXIST) return DLP_ERR(DLP_ERR_EXISTS, "%s already exists; not overwriting it", path);
            return DLP_ERR(DLP_ERR_IO, "cannot create %s: %s", path, strerror(e));
        }
        unlink(tmp);
    } else if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return DLP_ERR(DLP_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    fsync_parent(path);
    remove_dead_temps(path);
    return DLP_OK;
}

dlp_status dlp_fopen_new(const char *path, FILE **out) {
    int fd;
    if (dlp_path_is_stdout(path)) {
        fflush(stdout);
        fd = fcntl(g_stdout_fd >= 0 ? g_stdout_fd : STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    } else if (is_special(path)) {
        fd = open(path, O_WRONLY | O_CLOEXEC);
    } else {
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    }
    if (fd < 0) {
        if (errno == EEXIST) return DLP_ERR(DLP_ERR_EXISTS, "%s already exists; not overwriting it", path);
        return DLP_ERR(DLP_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    }
    *out = fdopen(fd, "w");
    if (!*out) {
        close(fd);
        return DLP_ERR(DLP_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    }
    return DLP_OK;
}

dlp_status dlp_check_new_output(const char *path, const char *what) {
    if (path && path[0] && !dlp_path_is_stdout(path) && !is_special(path) && dlp_path_exists(path))
        return DLP_ERR(DLP_ERR_EXISTS, "%s %s already exists; dlperf never overwrites results: choose another name",
                       what, path);
    return DLP_OK;
}

dlp_status dlp_read_file(const char *path, char **data, size_t *len, size_t max_bytes) {
    *data = NULL;
    if (len) *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return DLP_ERR(errno == ENOENT ? DLP_ERR_NOTFOUND : DLP_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return DLP_ERR(DLP_ERR_IO, "%s is not a regular file", path);
    }
    if (max_bytes && (size_t)st.st_size > max_bytes) {
        close(fd);
        return DLP_ERR(DLP_ERR_FORMAT, "%s is %lld bytes, more than the %zu allowed", path, (long long)st.st_size, max_bytes);
    }
    size_t cap = (size_t)st.st_size;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory reading %s", path);
    }
    size_t got = 0;
    while (got < cap) {
        ssize_t r = read(fd, buf + got, cap - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            free(buf);
            close(fd);
            return DLP_ERR(DLP_ERR_IO, "cannot read %s: %s", path, strerror(e));
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    *data = buf;
    if (len) *len = got;
    return DLP_OK;
}

int dlp_path_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int dlp_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

dlp_status dlp_mkdirs(const char *path) {
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp) return DLP_ERR(DLP_ERR_INVALID, "bad directory path '%s'", path);
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return DLP_ERR(DLP_ERR_IO, "cannot create directory %s: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return DLP_ERR(DLP_ERR_IO, "cannot create directory %s: %s", tmp, strerror(errno));
    if (!dlp_is_dir(tmp)) return DLP_ERR(DLP_ERR_IO, "%s exists and is not a directory", tmp);
    return DLP_OK;
}

void dlp_cache_dir(char *buf, size_t len) {
    const char *e = getenv("DLPERF_CACHE");
    if (e && e[0]) {
        snprintf(buf, len, "%s", e);
        return;
    }
    e = getenv("XDG_CACHE_HOME");
    if (e && e[0]) {
        snprintf(buf, len, "%s/dlperf", e);
        return;
    }
    e = getenv("HOME");
    if (e && e[0]) {
        snprintf(buf, len, "%s/.cache/dlperf", e);
        return;
    }
    snprintf(buf, len, "/tmp/dlperf-cache-%ld", (long)getuid());
}

int64_t dlp_warm_file(const char *path, char *buf, size_t len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {  // /dev/zero would never end
        close(fd);
        return -1;
    }
    int64_t total = 0;
    ssize_t n;
    while (total <= st.st_size && (n = read(fd, buf, len)) > 0) total += n;  // a file growing meanwhile stops too
    close(fd);
    return total;
}

void dlp_file_last_line(const char *path, char *buf, size_t len) {
    if (!len) return;
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0]) snprintf(buf, len, "%s", line);
    }
    fclose(f);
}
