// monitor/src_gpu: NVIDIA GPUs through NVML, loaded with dlopen("libnvidia-ml.so.1") at run time — no build-time
// dependency, and a clean "not available" without a driver. Per GPU: utilization, memory used, power, total
// energy, SM and memory clocks, temperature, PCIe TX/RX throughput. A query a GPU does not support is asked once
// and then left out. The NVML types below are the few this file needs, declared as in nvml.h.
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "monitor/source.h"

#define MAX_GPUS 64
typedef int nvml_ret;  // nvmlReturn_t: 0 = NVML_SUCCESS
typedef struct nvml_device_st *nvml_device;
typedef struct { unsigned int gpu, memory; } nvml_utilization;            // percent over the driver's window
typedef struct { unsigned long long total, free, used; } nvml_memory;     // bytes
enum { NVML_OK = 0, NVML_NOT_SUPPORTED = 3, NVML_FUNCTION_NOT_FOUND = 13 };
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_TEMPERATURE_GPU = 0 };
enum { NVML_PCIE_TX = 0, NVML_PCIE_RX = 1 };

typedef struct {
    void *lib;
    nvml_ret (*init)(void);
    nvml_ret (*shutdown)(void);
    const char *(*error_string)(nvml_ret);
    nvml_ret (*count)(unsigned int *);
    nvml_ret (*handle)(unsigned int, nvml_device *);
    nvml_ret (*name)(nvml_device, char *, unsigned int);
    nvml_ret (*uuid)(nvml_device, char *, unsigned int);
    nvml_ret (*util)(nvml_device, nvml_utilization *);
    nvml_ret (*mem)(nvml_device, nvml_memory *);
    nvml_ret (*power)(nvml_device, unsigned int *);                 // milliwatts
    nvml_ret (*energy)(nvml_device, unsigned long long *);          // millijoules since the driver loaded
    nvml_ret (*clock)(nvml_device, int, unsigned int *);            // MHz
    nvml_ret (*temp)(nvml_device, int, unsigned int *);             // degrees C
    nvml_ret (*pcie)(nvml_device, int, unsigned int *);             // KB/s over a 20 ms window
} nvml_api;

// Per-GPU queries, each switched off after the first "not supported".
enum { Q_UTIL, Q_MEM, Q_POWER, Q_ENERGY, Q_SM, Q_MEMCLK, Q_TEMP, Q_PCIE, NQ };
enum { F_UTIL, F_MEMUTIL, F_MEMUSED, F_POWER, F_SM, F_MEMCLK, F_TEMP, F_TX, F_RX, NF };

typedef struct {
    nvml_device dev;
    char name[96], uuid[96];
    int ok[NQ];
    unsigned long long prev_mj;
    int have_prev;
    double v[NF];              // latest values (NaN: none)
    double mem_total_bytes;
    double energy_j;           // NVML's counter, or the integral of power where it has none
    double power_now_w;        // nvmlDeviceGetPowerUsage
} gpu_dev;

typedef struct {
    nvml_api api;
    gpu_dev g[MAX_GPUS];
    int n;
    int pcie;
} gpu_state;

static const char *err_str(const nvml_api *a, nvml_ret r) {
    static char buf[32];
    if (a->error_string) return a->error_string(r);
    snprintf(buf, sizeof buf, "NVML error %d", r);
    return buf;
}

static void *sym(void *lib, const char *a, const char *b) {
    void *p = dlsym(lib, a);
    if (!p && b) p = dlsym(lib, b);
    return p;
}

static void gpu_close(void *state) {
    gpu_state *s = state;
    if (!s) return;
    if (s->api.lib) {
        if (s->api.shutdown) s->api.shutdown();
        dlclose(s->api.lib);
    }
    free(s);
}

static dlp_status gpu_available(const dlp_mon_env *env, dlp_mon_fields *fl, void **state, char *note,
                                size_t note_len) {
    const char *libname = env->nvml_lib && env->nvml_lib[0] ? env->nvml_lib : "libnvidia-ml.so.1";
    void *lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        if (!why || strstr(why, "No such file"))
            snprintf(note, note_len, "%s not found (no NVIDIA driver here)", libname);
        else
            snprintf(note, note_len, "%s cannot be loaded: %s", libname, why);
        return DLP_ERR_UNSUPPORTED;
    }
    gpu_state *s = calloc(1, sizeof *s);
    if (!s) {
        dlclose(lib);
        return DLP_ERR_NOMEM;
    }
    nvml_api *a = &s->api;
    a->lib = lib;
    *(void **)&a->init = sym(lib, "nvmlInit_v2", "nvmlInit");
    *(void **)&a->shutdown = sym(lib, "nvmlShutdown", NULL);
    *(void **)&a->error_string = sym(lib, "nvmlErrorString", NULL);
    *(void **)&a->count = sym(lib, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    *(void **)&a->handle = sym(lib, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    *(void **)&a->name = sym(lib, "nvmlDeviceGetName", NULL);
    *(void **)&a->uuid = sym(lib, "nvmlDeviceGetUUID", NULL);
    *(void **)&a->util = sym(lib, "nvmlDeviceGetUtilizationRates", NULL);
    *(void **)&a->mem = sym(lib, "nvmlDeviceGetMemoryInfo", NULL);
    *(void **)&a->power = sym(lib, "nvmlDeviceGetPowerUsage", NULL);
    *(void **)&a->energy = sym(lib, "nvmlDeviceGetTotalEnergyConsumption", NULL);
    *(void **)&a->clock = sym(lib, "nvmlDeviceGetClockInfo", NULL);
    *(void **)&a->temp = sym(lib, "nvmlDeviceGetTemperature", NULL);
    *(void **)&a->pcie = sym(lib, "nvmlDeviceGetPcieThroughput", NULL);
    if (!a->init || !a->shutdown || !a->count || !a->handle) {
        snprintf(note, note_len, "%s lacks nvmlInit/nvmlDeviceGetCount/nvmlDeviceGetHandleByIndex", libname);
        a->shutdown = NULL;
        gpu_close(s);
        return DLP_ERR_UNSUPPORTED;
    }
    nvml_ret r = a->init();
    if (r != NVML_OK) {
        snprintf(note, note_len, "nvmlInit failed: %s", err_str(a, r));
        a->shutdown = NULL;
        gpu_close(s);
        return DLP_ERR_UNSUPPORTED;
    }
    unsigned int count = 0;
    r = a->count(&count);
    if (r != NVML_OK || count == 0) {
        snprintf(note, note_len, "%s", r != NVML_OK ? err_str(a, r) : "NVML found no GPU");
        gpu_close(s);
        return DLP_ERR_UNSUPPORTED;
    }
    s->pcie = env->gpu_pcie;
    void *const fn[NQ] = {(void *)a->util, (void *)a->mem,   (void *)a->power, (void *)a->energy,
                          (void *)a->clock, (void *)a->clock, (void *)a->temp,  (void *)a->pcie};
    for (unsigned int i = 0; i < count && s->n < MAX_GPUS; i++) {
        gpu_dev *g = &s->g[s->n];
        if (a->handle(i, &g->dev) != NVML_OK) continue;
        snprintf(g->name, sizeof g->name, "GPU %u", i);
        if (a->name) a->name(g->dev, g->name, sizeof g->name);
        g->name[sizeof g->name - 1] = '\0';
        if (a->uuid && a->uuid(g->dev, g->uuid, sizeof g->uuid) != NVML_OK) g->uuid[0] = '\0';
        g->uuid[sizeof g->uuid - 1] = '\0';
        for (int q = 0; q < NQ; q++) g->ok[q] = fn[q] != NULL;
        if (!s->pcie) g->ok[Q_PCIE] = 0;
        for (int k = 0; k < NF; k++) g->v[k] = NAN;
        g->mem_total_bytes = g->power_now_w = NAN;
        s->n++;
    }
    if (s->n == 0) {
        snprintf(note, note_len, "NVML lists %u GPUs but none could be opened", count);
        gpu_close(s);
        return DLP_ERR_UNSUPPORTED;
    }
    static const char *const metric[NF] = {"util_pct",     "mem_util_pct",      "mem_used_bytes",
                                           "power_w",      "sm_clock_mhz",      "mem_clock_mhz",
                                           "temp_celsius", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"};
    static const dlp_mon_unit unit[NF] = {DLP_MON_UNIT_PCT,         DLP_MON_UNIT_PCT, DLP_MON_UNIT_BYTES,
                                          DLP_MON_UNIT_W,           DLP_MON_UNIT_MHZ, DLP_MON_UNIT_MHZ,
                                          DLP_MON_UNIT_CELSIUS,     DLP_MON_UNIT_BYTES_PER_S,
                                          DLP_MON_UNIT_BYTES_PER_S};
    size_t w = 0;
    for (int i = 0; i < s->n; i++) {
        char inst[16];
        snprintf(inst, sizeof inst, "%d", i);
        for (int k = 0; k < NF; k++) dlp_mon_fields_add(fl, "gpu", inst, metric[k], unit[k], DLP_MON_F_SUMMARY);
        if (w < note_len) w += (size_t)snprintf(note + w, note_len - w, "%s%d: %s", i ? ", " : "", i, s->g[i].name);
    }
    *state = s;
    return DLP_OK;
}

// Calls a query; on "not supported" switches it off for this GPU. Returns 1 when the value is good.
static int query_ok(gpu_dev *g, int q, nvml_ret r, int gpu_index) {
    if (r == NVML_OK) return 1;
    if (r == NVML_NOT_SUPPORTED || r == NVML_FUNCTION_NOT_FOUND) g->ok[q] = 0;
    else
        dlp_log_warn_limited("monitor.gpu.query", 5, "monitor: NVML query %d on GPU %d failed (error %d)", q,
                             gpu_index, r);
    return 0;
}

static void gpu_sample(void *state, double dt_s, double *vals) {
    gpu_state *s = state;
    const nvml_api *a = &s->api;
    for (int i = 0; i < s->n; i++) {
        gpu_dev *g = &s->g[i];
        for (int k = 0; k < NF; k++) g->v[k] = NAN;
        if (g->ok[Q_UTIL]) {
            nvml_utilization u;
            if (query_ok(g, Q_UTIL, a->util(g->dev, &u), i)) {
                g->v[F_UTIL] = u.gpu;
                g->v[F_MEMUTIL] = u.memory;
            }
        }
        if (g->ok[Q_MEM]) {
            nvml_memory m;
            if (query_ok(g, Q_MEM, a->mem(g->dev, &m), i)) {
                g->v[F_MEMUSED] = (double)m.used;
                g->mem_total_bytes = (double)m.total;
            }
        }
        g->power_now_w = NAN;
        if (g->ok[Q_POWER]) {
            unsigned int mw;
            if (query_ok(g, Q_POWER, a->power(g->dev, &mw), i)) g->power_now_w = mw * 1e-3;
        }
        int have_energy = 0;
        if (g->ok[Q_ENERGY]) {
            unsigned long long mj;
            if (query_ok(g, Q_ENERGY, a->energy(g->dev, &mj), i)) {
                have_energy = 1;
                // The mean power over the interval from the energy counter; instantaneous power otherwise.
                if (g->have_prev && dt_s > 0 && mj >= g->prev_mj) g->v[F_POWER] = (double)(mj - g->prev_mj) * 1e-3 / dt_s;
                g->prev_mj = mj;
                g->have_prev = 1;
                g->energy_j = (double)mj * 1e-3;
            }
        }
        if (!have_energy) {
            g->have_prev = 0;
            g->v[F_POWER] = dt_s > 0 ? g->power_now_w : NAN;
            if (!isnan(g->power_now_w) && dt_s > 0) g->energy_j += g->power_now_w * dt_s;
        }
        unsigned int x;
        if (g->ok[Q_SM] && query_ok(g, Q_SM, a->clock(g->dev, NVML_CLOCK_SM, &x), i)) g->v[F_SM] = x;
        if (g->ok[Q_MEMCLK] && query_ok(g, Q_MEMCLK, a->clock(g->dev, NVML_CLOCK_MEM, &x), i)) g->v[F_MEMCLK] = x;
        if (g->ok[Q_TEMP] && query_ok(g, Q_TEMP, a->temp(g->dev, NVML_TEMPERATURE_GPU, &x), i)) g->v[F_TEMP] = x;
        if (g->ok[Q_PCIE]) {
            if (query_ok(g, Q_PCIE, a->pcie(g->dev, NVML_PCIE_TX, &x), i)) g->v[F_TX] = x * 1024.0;
            if (g->ok[Q_PCIE] && query_ok(g, Q_PCIE, a->pcie(g->dev, NVML_PCIE_RX, &x), i)) g->v[F_RX] = x * 1024.0;
        }
        for (int k = 0; k < NF; k++) vals[i * NF + k] = dt_s > 0 ? g->v[k] : NAN;
    }
}

static void gpu_prom(void *state, dlp_prom_buf *b) {
    gpu_state *s = state;
    char id[MAX_GPUS][16];
    for (int i = 0; i < s->n; i++) snprintf(id[i], sizeof id[i], "%d", i);
    dlp_prom_family(b, "dlperf_gpu_info", "gauge", "GPUs seen through NVML (value 1), with name and UUID.");
    for (int i = 0; i < s->n; i++)
        dlp_prom_sample(b, "dlperf_gpu_info", 1, "gpu", id[i], "name", s->g[i].name, "uuid", s->g[i].uuid,
                        (char *)NULL);
    static const struct { int k; double scale; const char *name, *type, *help; } rows[] = {
        {F_UTIL, 0.01, "dlperf_gpu_utilization_ratio", "gauge", "Fraction of time a kernel ran on the GPU."},
        {F_MEMUTIL, 0.01, "dlperf_gpu_memory_utilization_ratio", "gauge",
         "Fraction of time GPU memory was read or written."},
        {F_MEMUSED, 1, "dlperf_gpu_memory_used_bytes", "gauge", "GPU memory allocated."},
        {F_SM, 1e6, "dlperf_gpu_sm_clock_hertz", "gauge", "SM clock."},
        {F_MEMCLK, 1e6, "dlperf_gpu_memory_clock_hertz", "gauge", "Memory clock."},
        {F_TEMP, 1, "dlperf_gpu_temperature_celsius", "gauge", "GPU temperature."},
        {F_TX, 1, "dlperf_gpu_pcie_transmit_bytes_per_second", "gauge", "PCIe transmit throughput (20 ms window)."},
        {F_RX, 1, "dlperf_gpu_pcie_receive_bytes_per_second", "gauge", "PCIe receive throughput (20 ms window)."},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        dlp_prom_family(b, rows[r].name, rows[r].type, rows[r].help);
        for (int i = 0; i < s->n; i++)
            if (!isnan(s->g[i].v[rows[r].k]))
                dlp_prom_sample(b, rows[r].name, s->g[i].v[rows[r].k] * rows[r].scale, "gpu", id[i], (char *)NULL);
    }
    dlp_prom_family(b, "dlperf_gpu_memory_total_bytes", "gauge", "GPU memory size.");
    for (int i = 0; i < s->n; i++)
        if (!isnan(s->g[i].mem_total_bytes))
            dlp_prom_sample(b, "dlperf_gpu_memory_total_bytes", s->g[i].mem_total_bytes, "gpu", id[i], (char *)NULL);
    dlp_prom_family(b, "dlperf_gpu_power_watts", "gauge", "GPU power draw (nvmlDeviceGetPowerUsage).");
    for (int i = 0; i < s->n; i++)
        if (!isnan(s->g[i].power_now_w))
            dlp_prom_sample(b, "dlperf_gpu_power_watts", s->g[i].power_now_w, "gpu", id[i], (char *)NULL);
    dlp_prom_family(b, "dlperf_gpu_energy_joules_total", "counter",
                    "GPU energy since the driver loaded (NVML), or integrated power since the monitor started.");
    for (int i = 0; i < s->n; i++)
        dlp_prom_sample(b, "dlperf_gpu_energy_joules_total", s->g[i].energy_j, "gpu", id[i], (char *)NULL);
}

const dlp_mon_source_ops dlp_mon_src_gpu =
    DLP_MON_SOURCE_OPS(gpu,
                       "NVIDIA GPUs through NVML (dlopen libnvidia-ml.so.1): utilization, memory, power, energy, "
                       "clocks, temperature, PCIe",
                       gpu_close);
