// hw/host: what this machine is — CPU model, cores, ISA features, memory — and the versions of the libraries
// dlperf was built with, for the record in every result.
// Defines: dlp_host_info, dlp_host_probe, dlp_host_to_json, dlp_host_cpus, dlp_host_cpus_busy_s(_in), dlp_load_meter,
//          dlp_load_meter_start(_in), dlp_load_meter_cores, dlp_versions_to_json, dlp_dnnl_isa_name, dlp_dnnl_isa_name_of, dlp_dnnl_isa_cap,
//          dlp_dnnl_conv_kernels.
#ifndef DLP_HW_HOST_H
#define DLP_HW_HOST_H
#include <jansson.h>
#include <stdint.h>

typedef struct dlp_host_info {
    char cpu_model[128];
    char hostname[64];
    char kernel[64];
    int cpus_online;       // logical CPUs online
    int cpus_allowed;      // in this process's affinity mask
    int avx2, avx512, avx512_bf16, amx_bf16, amx_tile;
    double mhz;            // nominal/current frequency from /proc/cpuinfo (0 if unknown)
    int64_t mem_total_bytes;
} dlp_host_info;

void dlp_host_probe(dlp_host_info *h);
// The CPUs this process may run on (its affinity mask), else the CPUs online, at least 1.
int dlp_host_cpus_allowed(void);
json_t *dlp_host_to_json(const dlp_host_info *h);
// Which CPUs a busy-time reading sums: all of them (/proc/stat's total line), or those the calling thread's affinity
// mask allows, as it reads at each call (its per-CPU lines).
typedef enum { DLP_HOST_CPUS_ALL, DLP_HOST_CPUS_ALLOWED } dlp_host_cpus;
// Busy seconds of the CPUs since boot (/proc/stat: user, nice, system, irq, softirq, steal: anyone's, the
// hypervisor's included); -1 when unreadable. With the process's own CPU time over the same interval it tells how
// busy other work kept the machine. dlp_host_cpus_busy_s: of all CPUs.
double dlp_host_cpus_busy_s_in(dlp_host_cpus which);
double dlp_host_cpus_busy_s(void);

// How busy other processes keep the machine over an interval: dlp_load_meter_start, then dlp_load_meter_cores =
// (the CPUs' busy time - this process's CPU time) / wall time, in cores, at least 0 (NAN when /proc/stat is
// unreadable). dlp_load_meter_start measures all CPUs; dlp_load_meter_start_in the ones `which` says.
typedef struct dlp_load_meter {
    double busy_s;  // at the start; < 0: unreadable
    int64_t own_ns, wall_ns;
    dlp_host_cpus which;
} dlp_load_meter;
void dlp_load_meter_start(dlp_load_meter *m);
void dlp_load_meter_start_in(dlp_load_meter *m, dlp_host_cpus which);
double dlp_load_meter_cores(const dlp_load_meter *m);
// Waits (in half-second looks, at most max_s) until other processes keep at most threshold cores busy; returns the
// last look's figure (NAN when /proc/stat is unreadable: no wait).
double dlp_wait_quiet(double max_s, double threshold_cores);
// {"jansson": "2.14", "libjpeg-turbo": "2.1.5", "oneDNN": "2.6.3", "oneDNN ISA": "avx512_core_amx" (or "avx2 (capped at AVX2)"),
//  "oneDNN kernels": "3x3 conv fp32 jit:avx512_core (...)", ...} for what is compiled in.
json_t *dlp_versions_to_json(void);

// With oneDNN (hw/dnnl_isa_dnnl.c): the ISA oneDNN runs on (honouring ONEDNN_MAX_CPU_ISA), the cap when one is
// set (NULL otherwise), and the convolution kernels it picks for a representative ResNet layer (one line).
const char *dlp_dnnl_isa_name(void);
const char *dlp_dnnl_isa_name_of(int isa);  // a dnnl_cpu_isa_t's name ("avx512_core_amx")
const char *dlp_dnnl_isa_cap(void);
const char *dlp_dnnl_conv_kernels(void);

#endif
