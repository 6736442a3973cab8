// core/fs: files written atomically (temporary file, fsync, rename), never-overwrite creation, whole-file
// reads, directories, and the cache directory.
// Defines: dlp_write_atomic, dlp_pid_alive, dlp_fopen_new, dlp_path_is_stdout, dlp_stdout_claim,
//          dlp_stdout_keep_on_exec, dlp_read_file, dlp_mkdirs, dlp_path_exists, dlp_cache_dir.
#ifndef DLP_CORE_FS_H
#define DLP_CORE_FS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

enum {
    DLP_WRITE_REPLACE = 0,    // replace an existing file atomically
    DLP_WRITE_NOCLOBBER = 1,  // fail with DLP_ERR_EXISTS if the file exists (checked atomically with link())
};

// Every writer below takes "-" (or /dev/stdout) for the standard output, and writes an existing file that is not a
// regular one (/dev/stderr, a FIFO) in place.
int dlp_path_is_stdout(const char *path);  // "-" or /dev/stdout
// Moves what the program prints (printf) to stderr, keeping the real stdout for the files written to "-": called
// by cli/main when an option's value is "-", so a JSON result on stdout is not mixed with the summary.
void dlp_stdout_claim(void);
// Lets the claimed descriptor survive an exec of dlperf itself (it is close-on-exec otherwise).
void dlp_stdout_keep_on_exec(void);
// Writes data to path through path.tmp.<pid>: write, fsync, rename (or link for NOCLOBBER), fsync dir. Then
// removes path.tmp.<pid> files of writers no longer alive (killed mid-write) and untouched for a minute.
dlp_status dlp_write_atomic(const char *path, const void *data, size_t len, int flags);
// Whether a process with this pid exists (one of another user's counts).
int dlp_pid_alive(long pid);
// Opens a new file for writing; fails with DLP_ERR_EXISTS if it exists (O_EXCL). mode "w" semantics.
dlp_status dlp_fopen_new(const char *path, FILE **out);
// Fails with DLP_ERR_EXISTS (clear message naming the option) if path exists: for checking outputs up front.
dlp_status dlp_check_new_output(const char *path, const char *what);
// Reads a whole file (NUL-terminated for convenience; *len excludes the NUL). Caller frees *data.
dlp_status dlp_read_file(const char *path, char **data, size_t *len, size_t max_bytes);
dlp_status dlp_mkdirs(const char *path);  // mkdir -p
int dlp_path_exists(const char *path);
int dlp_is_dir(const char *path);
// Reads a regular file to its end into the page cache (buf: scratch of len bytes); anything else (a device such as
// /dev/zero, a FIFO, a directory) is left alone. Returns the bytes read, -1 when it was not read.
int64_t dlp_warm_file(const char *path, char *buf, size_t len);
// The last non-empty line of a text file (a child's log: what it said before it failed) into buf; "" if none.
void dlp_file_last_line(const char *path, char *buf, size_t len);
// $DLPERF_CACHE, else $XDG_CACHE_HOME/dlperf, else $HOME/.cache/dlperf, else /tmp/dlperf-cache-<uid>.
void dlp_cache_dir(char *buf, size_t len);

#endif
