// monitor/sources: the registry of monitor sources, in the order they are sampled. A new source is one file and
// one line here.
#include "monitor/source.h"

const dlp_mon_source_ops *const dlp_mon_sources[] = {
    &dlp_mon_src_cpu, &dlp_mon_src_proc, &dlp_mon_src_mem, &dlp_mon_src_disk,
    &dlp_mon_src_net, &dlp_mon_src_rapl, &dlp_mon_src_gpu, NULL,
};
