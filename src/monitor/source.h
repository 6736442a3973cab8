// monitor/source: the plug-in interface each monitor source implements (one file per source, one row in the
// static registry), the fields (derived per-interval values) sources declare, and the allocation-free file
// helpers they share (files opened once and re-read with pread, directories listed with getdents64).
// Defines: dlp_mon_env, dlp_mon_unit, dlp_mon_field, dlp_mon_fields, dlp_mon_source_ops, dlp_mon_sources,
//          DLP_MON_SOURCE_OPS,
//          dlp_mon_file, dlp_mon_file_state_open, dlp_mon_dir, dlp_mon_open, dlp_mon_path, dlp_mon_counter_delta, dlp_mon_find_instance,
//          dlp_mon_parse_*.
#ifndef DLP_MONITOR_SOURCE_H
#define DLP_MONITOR_SOURCE_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/status.h"
#include "monitor/prom.h"

// What a source may look at: the file-system root it reads from (captured fixtures in tests), the process tree,
// and options. Sources only read through dlp_mon_open so tests can inject open errors.
typedef struct dlp_mon_env {
    char root[512];                          // "" reads the real /proc and /sys; else a prefix like "/tmp/fx"
    int (*open_fn)(const char *path, int flags);  // replaces open(2) when set (tests inject EACCES this way)
    int pid;                                 // root of the process tree to account (> 0)
    int all_disks;                           // include partitions, loop, ram and zram devices
    int per_cpu_modes;                       // per-core user/system/iowait... columns, not just util_pct
    int gpu_pcie;                            // query PCIe throughput (NVML blocks ~20 ms per query)
    const char *nvml_lib;                    // library to dlopen for NVML
    int64_t tree_scan_ns;                    // how often the process tree is re-discovered
} dlp_mon_env;

typedef enum {
    DLP_MON_UNIT_PCT,          // percent (CPU: of all CPUs for cpu.all, of one core for processes)
    DLP_MON_UNIT_BYTES,
    DLP_MON_UNIT_BYTES_PER_S,
    DLP_MON_UNIT_PER_S,        // events per second (IOPS, packets, images)
    DLP_MON_UNIT_COUNT,
    DLP_MON_UNIT_W,
    DLP_MON_UNIT_MHZ,
    DLP_MON_UNIT_CELSIUS,
} dlp_mon_unit;

enum {
    DLP_MON_F_SUMMARY = 1,  // kept for per-phase summaries (mean, p50, p95, max)
    DLP_MON_F_CPU_S = 2,    // a CPU percentage whose time integral is CPU seconds (summary "cpu_s")
    DLP_MON_F_WAIT_S = 4,   // a percentage of wall time whose integral is seconds waited (summary "wait_s")
};

// A derived value per sample interval: "disk.vda.read_bytes_per_s" = set "disk", instance "vda",
// metric "read_bytes_per_s". Singletons have instance "" ("mem.available_bytes").
typedef struct dlp_mon_field {
    char name[128];
    char set[16];
    char instance[64];
    char metric[40];
    dlp_mon_unit unit;
    int flags;
} dlp_mon_field;

typedef struct dlp_mon_fields {
    dlp_mon_field *v;
    int n, cap;
    int oom;
} dlp_mon_fields;

// Appends a field; returns its index relative to the first field the current source declared, or -1 on
// allocation failure (then f->oom is set and the monitor reports it).
int dlp_mon_fields_add(dlp_mon_fields *f, const char *set, const char *instance, const char *metric,
                       dlp_mon_unit unit, int flags);
// What the time integral of a field is called in summaries, and the factor applied: "total_bytes" for
// *_bytes_per_s, "total" for *_per_s, "energy_j" for watts, "cpu_s" / "wait_s" for DLP_MON_F_CPU_S /
// DLP_MON_F_WAIT_S percentages (factor 0.01); NULL if none.
const char *dlp_mon_field_total_key(const dlp_mon_field *f, double *scale);

// A source. available() probes and opens what it needs (done once, at dlp_monitor_create), declares its fields
// with dlp_mon_fields_add, and returns DLP_OK with *state set — or anything else with the reason it is not
// available written into note (never an error for the run). On success note may describe what was found.
// sample() re-reads its counters and writes a value per declared field for the interval since the previous call
// (dt_s > 0); dt_s == 0 is the baseline call: record counters, write NaN. NaN means "no value this interval".
// prom() writes its raw counters and gauges (Prometheus naming); optional. close() frees state.
typedef struct dlp_mon_source_ops {
    const char *name;
    const char *help;
    dlp_status (*available)(const dlp_mon_env *env, dlp_mon_fields *fields, void **state, char *note,
                            size_t note_len);
    void (*sample)(void *state, double dt_s, double *vals);
    void (*prom)(void *state, dlp_prom_buf *out);
    void (*close)(void *state);
} dlp_mon_source_ops;

// A source's ops from its functions <name>_available, _sample and _prom, and its close():
// const dlp_mon_source_ops dlp_mon_src_mem = DLP_MON_SOURCE_OPS(mem, "memory ...", dlp_mon_file_state_close);
#define DLP_MON_SOURCE_OPS(name_, help_, close_)                                                               \
    {                                                                                                          \
        .name = #name_, .help = (help_), .available = name_##_available, .sample = name_##_sample,            \
        .prom = name_##_prom, .close = (close_)                                                                \
    }

// The registry (monitor/sources.c): every source in the order they are sampled; NULL-terminated.
extern const dlp_mon_source_ops *const dlp_mon_sources[];

// --- helpers -------------------------------------------------------------------------------------------------
// root + rel into buf (rel starts with "/").
void dlp_mon_path(const dlp_mon_env *env, const char *rel, char *buf, size_t len);
// Opens root + rel through env->open_fn (or open(2)) with O_CLOEXEC added; -1 with errno on failure.
int dlp_mon_open(const dlp_mon_env *env, const char *rel, int flags);

// A file kept open and re-read from offset 0 each sample. The buffer grows (doubling) only when the file
// outgrows it, so after the first samples reads allocate nothing.
typedef struct dlp_mon_file {
    int fd;
    char *buf;
    size_t cap, len;
} dlp_mon_file;
// 0 on success, else errno (the file stays closed).
int dlp_mon_file_open(dlp_mon_file *f, const dlp_mon_env *env, const char *rel, size_t initial_cap);
// Reads the whole file into f->buf (NUL-terminated, f->len bytes); 0 or errno (EISDIR for a directory).
int dlp_mon_file_read(dlp_mon_file *f);
void dlp_mon_file_close(dlp_mon_file *f);
// The state of a source that starts with the file it re-reads (cpu, disk, net, mem): size bytes zeroed, the file
// root + rel opened and read once. NULL with *st = DLP_ERR_NOMEM, or DLP_ERR_UNSUPPORTED and "cannot read
// <root><rel>: <reason>" in note.
void *dlp_mon_file_state_open(size_t size, const dlp_mon_env *env, const char *rel, size_t initial_cap,
                              dlp_status *st, char *note, size_t note_len);
// Closes the file of such a state and frees it (NULL does nothing): the close() of a source that holds nothing else.
void dlp_mon_file_state_close(void *state);
// Opens, reads and closes a small file (e.g. a powercap "name"); trailing newline removed. 0 or errno.
int dlp_mon_read_small(const dlp_mon_env *env, const char *rel, char *buf, size_t len);

// Directory listing with getdents64 into a fixed buffer (no allocation).
typedef struct dlp_mon_dir {
    int fd;
    int pos, len;
    _Alignas(8) char buf[4096];  // struct dirent64 records, 8-byte aligned
} dlp_mon_dir;
int dlp_mon_dir_open(dlp_mon_dir *d, const dlp_mon_env *env, const char *rel);  // 0 or errno
const char *dlp_mon_dir_next(dlp_mon_dir *d);  // next name (skipping . and ..), NULL at the end
void dlp_mon_dir_close(dlp_mon_dir *d);

// The increase of a counter between two readings. wrap > 0: the counter runs from 0 to wrap and then restarts
// (RAPL's max_energy_range_uj). wrap == 0: a decrease is a 32-bit wrap when prev was in the top quarter of the
// 32-bit range and cur in the bottom quarter (old kernels' unsigned long fields); any other decrease (a counter
// that went backwards: iowait after CPU hotplug, a reset) counts 0 and sets *anomaly (if not NULL).
uint64_t dlp_mon_counter_delta(uint64_t prev, uint64_t cur, uint64_t wrap, int *anomaly);

// The index of the instance called name among n records of stride bytes that each start with their name (a char
// array: a disk, an interface), or -1. Instances keep their order from one reading to the next, so the search
// starts at *hint (0 at first), which is then set past the match.
int dlp_mon_find_instance(const void *base, size_t stride, int n, const char *name, int *hint);

// Parsers that stop at the end of a number and never read past a NUL.
int dlp_mon_parse_u64(const char **p, uint64_t *out);   // skips leading blanks; 0 on success
const char *dlp_mon_next_line(const char *p);            // after the next '\n', or at the NUL

#endif
