// monitor/source_util: what every source shares — the field table, paths under the configurable root, files
// kept open and re-read with pread, getdents64 directory listing, and counter differences that survive wraps.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "monitor/source.h"

int dlp_mon_fields_add(dlp_mon_fields *f, const char *set, const char *instance, const char *metric,
                       dlp_mon_unit unit, int flags) {
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 64;
        dlp_mon_field *v = realloc(f->v, (size_t)cap * sizeof *v);
        if (!v) {
            f->oom = 1;
            return -1;
        }
        f->v = v;
        f->cap = cap;
    }
    dlp_mon_field *d = &f->v[f->n];
    memset(d, 0, sizeof *d);
    snprintf(d->set, sizeof d->set, "%s", set);
    snprintf(d->instance, sizeof d->instance, "%s", instance ? instance : "");
    snprintf(d->metric, sizeof d->metric, "%s", metric);
    if (d->instance[0]) snprintf(d->name, sizeof d->name, "%s.%s.%s", d->set, d->instance, d->metric);
    else snprintf(d->name, sizeof d->name, "%s.%s", d->set, d->metric);
    d->unit = unit;
    d->flags = flags;
    return f->n++;
}

const char *dlp_mon_field_total_key(const dlp_mon_field *f, double *scale) {
    *scale = 1.0;
    if (f->flags & DLP_MON_F_CPU_S) {
        *scale = 0.01;
        return "cpu_s";
    }
    if (f->flags & DLP_MON_F_WAIT_S) {
        *scale = 0.01;
        return "wait_s";
    }
    switch (f->unit) {
    case DLP_MON_UNIT_BYTES_PER_S: return "total_bytes";
    case DLP_MON_UNIT_PER_S: return "total";
    case DLP_MON_UNIT_W: return "energy_j";
    default: return NULL;
    }
}

void dlp_mon_path(const dlp_mon_env *env, const char *rel, char *buf, size_t len) {
    snprintf(buf, len, "%s%s", env->root, rel);
}

int dlp_mon_open(const dlp_mon_env *env, const char *rel, int flags) {
    char path[1024];
    dlp_mon_path(env, rel, path, sizeof path);
    if (env->open_fn) return env->open_fn(path, flags | O_CLOEXEC);
    return open(path, flags | O_CLOEXEC);
}

int dlp_mon_file_open(dlp_mon_file *f, const dlp_mon_env *env, const char *rel, size_t initial_cap) {
    memset(f, 0, sizeof *f);
    f->fd = dlp_mon_open(env, rel, O_RDONLY);
    if (f->fd < 0) {
        int e = errno ? errno : EIO;
        f->fd = -1;
        return e;
    }
    f->cap = initial_cap < 256 ? 256 : initial_cap;
    f->buf = malloc(f->cap);
    if (!f->buf) {
        close(f->fd);
        f->fd = -1;
        return ENOMEM;
    }
    f->buf[0] = '\0';
    return 0;
}

int dlp_mon_file_read(dlp_mon_file *f) {
    if (f->fd < 0 || !f->buf) return EBADF;
    for (;;) {
        size_t got = 0;
        int full = 0;
        for (;;) {
            ssize_t r = pread(f->fd, f->buf + got, f->cap - 1 - got, (off_t)got);
            if (r < 0) {
                if (errno == EINTR) continue;
                f->len = 0;
                f->buf[0] = '\0';
                return errno;
            }
            if (r == 0) break;
            got += (size_t)r;
            if (got == f->cap - 1) {
                full = 1;
                break;
            }
        }
        if (!full) {
            f->len = got;
            f->buf[got] = '\0';
            return 0;
        }
        // The file outgrew the buffer (more CPUs online, more devices): double it and read again.
        size_t cap = f->cap * 2;
        if (cap > ((size_t)64 << 20)) return EFBIG;
        char *p = realloc(f->buf, cap);
        if (!p) return ENOMEM;
        f->buf = p;
        f->cap = cap;
    }
}

void dlp_mon_file_close(dlp_mon_file *f) {
    if (f->fd >= 0) close(f->fd);
    free(f->buf);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

void *dlp_mon_file_state_open(size_t size, const dlp_mon_env *env, const char *rel, size_t initial_cap,
                              dlp_status *st, char *note, size_t note_len) {
    *st = DLP_ERR_NOMEM;
    dlp_mon_file *f = calloc(1, size);
    if (!f) return NULL;
    int e = dlp_mon_file_open(f, env, rel, initial_cap);
    if (e == 0) e = dlp_mon_file_read(f);
    if (e != 0) {
        snprintf(note, note_len, "cannot read %s%s: %s", env->root, rel, strerror(e));
        dlp_mon_file_state_close(f);
        *st = DLP_ERR_UNSUPPORTED;
        return NULL;
    }
    *st = DLP_OK;
    return f;
}

void dlp_mon_file_state_close(void *state) {
    if (!state) return;
    dlp_mon_file_close(state);
    free(state);
}

int dlp_mon_find_instance(const void *base, size_t stride, int n, const char *name, int *hint) {
    for (int k = 0; k < n; k++) {
        int i = (*hint + k) % n;
        if (strcmp((const char *)base + (size_t)i * stride, name) == 0) {
            *hint = i + 1;
            return i;
        }
    }
    return -1;
}

int dlp_mon_read_small(const dlp_mon_env *env, const char *rel, char *buf, size_t len) {
    buf[0] = '\0';
    int fd = dlp_mon_open(env, rel, O_RDONLY);
    if (fd < 0) return errno ? errno : EIO;
    ssize_t r;
    do r = read(fd, buf, len - 1);
    while (r < 0 && errno == EINTR);
    int e = r < 0 ? errno : 0;
    close(fd);
    if (r < 0) {
        buf[0] = '\0';
        return e;
    }
    buf[r] = '\0';
    while (r > 0 && (buf[r - 1] == '\n' || buf[r - 1] == ' ')) buf[--r] = '\0';
    return 0;
}

int dlp_mon_dir_open(dlp_mon_dir *d, const dlp_mon_env *env, const char *rel) {
    d->pos = d->len = 0;
    d->fd = dlp_mon_open(env, rel, O_RDONLY | O_DIRECTORY);
    if (d->fd < 0) return errno ? errno : EIO;
    return 0;
}

const char *dlp_mon_dir_next(dlp_mon_dir *d) {
    for (;;) {
        if (d->pos >= d->len) {
            if (d->fd < 0) return NULL;
            ssize_t n = getdents64(d->fd, d->buf, sizeof d->buf);
            if (n <= 0) return NULL;
            d->len = (int)n;
            d->pos = 0;
        }
        struct dirent64 *e = (struct dirent64 *)(void *)(d->buf + d->pos);
        d->pos += e->d_reclen;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        return e->d_name;
    }
}

void dlp_mon_dir_close(dlp_mon_dir *d) {
    if (d->fd >= 0) close(d->fd);
    d->fd = -1;
}

uint64_t dlp_mon_counter_delta(uint64_t prev, uint64_t cur, uint64_t wrap, int *anomaly) {
    if (cur >= prev) return cur - prev;
    if (wrap > 0) {
        if (prev <= wrap) return (wrap - prev) + cur;
    } else {
        const uint64_t q = (uint64_t)1 << 30;  // a quarter of the 32-bit range
        if (prev <= UINT32_MAX && prev >= 3 * q && cur < q) return ((uint64_t)1 << 32) - prev + cur;
    }
    if (anomaly) *anomaly = 1;
    return 0;
}

int dlp_mon_parse_u64(const char **p, uint64_t *out) {
    const char *s = *p;
    while (*s == ' ' || *s == '\t') s++;
    if (*s < '0' || *s > '9') return -1;
    uint64_t v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (uint64_t)(*s - '0');
        s++;
    }
    *out = v;
    *p = s;
    return 0;
}

const char *dlp_mon_next_line(const char *p) {
    const char *nl = strchr(p, '\n');
    return nl ? nl + 1 : p + strlen(p);
}
