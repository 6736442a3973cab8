// hw/parts: the parts `dlperf plan` builds machines from, beside the catalog (catalog/parts.json): platforms (the
// chassis, board, memory, power supply and base storage a configuration's GPUs and CPUs go into, with the GPUs and
// CPUs it takes and how many) and storage options. Every figure names a source of catalog/sources.json, checked
// as the catalog checks its own.
// Defines: dlp_platform, dlp_storage_opt, dlp_parts, dlp_parts_load, dlp_parts_free.
#ifndef DLP_HW_PARTS_H
#define DLP_HW_PARTS_H
#include <jansson.h>

#include "core/status.h"
#include "hw/catalog.h"

#define DLP_PLATFORM_MAX_PARTS 16

typedef struct dlp_platform {
    const char *id, *name, *notes;
    const dlp_system_spec *base;   // the catalog system whose memory, storage, links and network it has
    int sockets;
    int ncpus, ngpus, ncounts;
    const dlp_cpu_spec *cpus[DLP_PLATFORM_MAX_PARTS];  // the CPUs it takes (sockets of each)
    const dlp_gpu_spec *gpus[DLP_PLATFORM_MAX_PARTS];
    int gpu_counts[8];             // GPUs per node it is built with
    int max_nodes;                 // 1: no multi-node configurations
    double price_usd;              // without GPUs, CPUs and storage options: chassis, board, memory, PSU, base drive
    double power_w;                // under load, without GPUs and CPUs
} dlp_platform;

typedef struct dlp_storage_opt {
    const char *id, *name, *desc;
    double read_gb_s, stream_gb_s, latency_us, tb;
    double price_usd, power_w;     // added to the platform's (its own drive stays, unused by the dataset)
} dlp_storage_opt;

typedef struct dlp_parts {
    json_t *root;
    int nplatforms, nstorage;
    dlp_platform *platforms;
    dlp_storage_opt *storage;
} dlp_parts;

// Loads <catalog dir>/parts.json against the loaded catalog c.
dlp_status dlp_parts_load(const dlp_catalog *c, dlp_parts **out);
void dlp_parts_free(dlp_parts *p);

#endif
