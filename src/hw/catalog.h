// hw/catalog: the catalog of GPUs, CPUs, whole systems, published ResNet-50 throughput, datasets and input
// pipelines (catalog/*.json), every figure with its source (catalog/sources.json). Loading checks every field
// and that every figure names a known source; errors name the file, the entry and the field.
// Defines: dlp_source, dlp_gpu_spec, dlp_cpu_spec, dlp_system_spec, dlp_published, dlp_catalog and lookups.
#ifndef DLP_HW_CATALOG_H
#define DLP_HW_CATALOG_H
#include <jansson.h>
#include <stddef.h>

#include "core/status.h"
#include "hw/profile.h"

typedef struct dlp_source {
    const char *id, *kind, *title, *url;  // url may be ""
    int year;
} dlp_source;

typedef struct dlp_gpu_spec {
    const char *id, *name, *arch, *notes;
    const json_t *json;            // the entry as loaded (for listings with sources)
    int year;
    int sms, boost_mhz;            // 0: not on the datasheet
    double l2_mb;                  // 0: not on the datasheet
    double memory_gb, mem_bw_gb_s;
    double fp32_tflops, tf32_tflops, fp16_tflops, bf16_tflops, int8_tops;  // dense; 0: not supported
    int pcie_gen, pcie_lanes;
    double nvlink_gb_s, board_power_w, price_usd;  // 0: none / unknown
    int price_year;
} dlp_gpu_spec;

typedef struct dlp_cpu_spec {
    const char *id, *name, *arch, *notes;
    const json_t *json;
    int year, cores, threads;
    double base_ghz, boost_ghz, allcore_ghz, mem_bw_gb_s, tdp_w, price_usd;
    double core_speed_rel;   // per-core pipeline speed relative to the development core
    double smt_yield;
} dlp_cpu_spec;

typedef enum { DLP_SYSTEM_OWNED = 0, DLP_SYSTEM_CLOUD } dlp_system_kind;

typedef struct dlp_system_spec {
    const char *id, *name, *notes, *storage_desc;
    const json_t *json;
    dlp_system_kind kind;
    int year;
    const dlp_gpu_spec *gpu;
    int gpus;
    const dlp_cpu_spec *cpu;
    int sockets;
    double ram_gb;
    double storage_tb, storage_read_gb_s, storage_stream_gb_s, storage_latency_us;
    int pcie_gpus_per_uplink, pcie_uplink_gen;
    double allreduce_busbw_gb_s, nic_gb_s;  // 0: none / unknown
    double power_w, price_usd;              // owned
    int price_year;
    double usd_per_hour, usd_per_hour_alt;  // cloud
    const char *stack;                      // the software stack predictions use by default ("": hw/gpumodel's)
} dlp_system_spec;

typedef struct dlp_published {
    const dlp_gpu_spec *gpu;
    dlp_task task;
    dlp_prec prec;
    double img_per_s;        // whole run
    int gpus, batch;         // batch per GPU (0: not stated)
    const char *framework;
    const char *stack;       // the software stack that produced it (dle-pytorch, lambda-pytorch, mlperf, ...)
    const dlp_source *src;
    int primary, estimate;
} dlp_published;

typedef struct dlp_catalog_dataset {
    const char *id;
    const json_t *json;
    dlp_dataset_stats stats;
} dlp_catalog_dataset;

typedef struct dlp_catalog_pipeline {
    const char *id, *name;
    const json_t *json;
    dlp_pipeline_profile prof;  // coefficients on the development core (core_speed_rel 1)
} dlp_catalog_pipeline;

typedef struct dlp_catalog {
    char dir[512];
    json_t *roots[7];        // the loaded files (the structs point into them)
    int nsources, ngpus, ncpus, nsystems, npublished, ndatasets, npipelines;
    dlp_source *sources;
    dlp_gpu_spec *gpus;
    dlp_cpu_spec *cpus;
    dlp_system_spec *systems;
    dlp_published *published;
    dlp_catalog_dataset *datasets;
    dlp_catalog_pipeline *pipelines;
    void *gm_cache;          // hw/gpumodel's fitted stacks (filled on first use, freed with the catalog)
} dlp_catalog;

// Where the catalog is: $DLPERF_CATALOG, else a catalog/ next to or above the running executable (up to
// three levels), else ./catalog. Writes the directory into buf.
dlp_status dlp_catalog_default_dir(char *buf, size_t len);
// Loads and checks dir/{sources,gpus,cpus,systems,throughput,datasets,pipelines}.json (dir NULL: the default).
dlp_status dlp_catalog_load(const char *dir, dlp_catalog **out);
void dlp_catalog_free(dlp_catalog *c);

// Lookups by id (or alias for GPUs; case-insensitive). NULL + a recorded error (naming the known ids) if absent.
// Plausible ranges of catalog figures in the files' units (catalog.c, parts.c): a value outside is a typo or a
// corrupt file, and taken it would print times and prices of 1e300.
#define DLP_CATALOG_GB_S_MIN 1e-6           // 1 KB/s
#define DLP_CATALOG_GB_S_MAX 1e4
#define DLP_CATALOG_TB_MAX 1e5
#define DLP_CATALOG_LATENCY_US_MAX 1e7      // 10 s
#define DLP_CATALOG_USD_MAX 1e9
#define DLP_CATALOG_W_MAX 1e6               // 1 MW

const dlp_gpu_spec *dlp_catalog_gpu(const dlp_catalog *c, const char *name);
const dlp_cpu_spec *dlp_catalog_cpu(const dlp_catalog *c, const char *id);
const dlp_system_spec *dlp_catalog_system(const dlp_catalog *c, const char *id);
const dlp_source *dlp_catalog_source(const dlp_catalog *c, const char *id);
const dlp_catalog_dataset *dlp_catalog_dataset_find(const dlp_catalog *c, const char *id);
const dlp_catalog_pipeline *dlp_catalog_pipeline_find(const dlp_catalog *c, const char *id);
// The primary single-GPU figure for (gpu, task, prec); NULL if none (no error recorded).
const dlp_published *dlp_catalog_primary(const dlp_catalog *c, const dlp_gpu_spec *g, dlp_task task, dlp_prec prec);
// Every figure of a catalog entry (a field holding numbers) must name a known source in its "src" object (its
// own field name or "*"); errors name `where`. Used by the files loaded beside the catalog (hw/parts).
dlp_status dlp_catalog_check_sources(const dlp_catalog *c, const json_t *entry, const char *where);
// Peak dense rate of a GPU at a precision in TFLOPS (TOPS for int8); 0 if not supported.
double dlp_gpu_peak(const dlp_gpu_spec *g, dlp_prec prec);
// Per-direction rate of a PCIe x`lanes` link of generation `gen` in bytes/s (PCI-SIG rates after encoding).
double dlp_pcie_bytes_per_s(int gen, int lanes);

#endif
