// monitor/sources: the registry of monitor sources, in the order they are sampled. A new source is one file
// monitor/src_<name>.c defining `const dlp_mon_source_ops dlp_mon_src_<name>` (monitor/source.h) and one X(<name>)
// in the list below, which declares it and puts it in the table.
#include "monitor/source.h"

#define DLP_MON_SOURCE_LIST(X) X(cpu) X(proc) X(mem) X(disk) X(net) X(rapl) X(gpu)

#define DLP_MON_DECLARE(name) extern const dlp_mon_source_ops dlp_mon_src_##name;
#define DLP_MON_ENTRY(name) &dlp_mon_src_##name,
DLP_MON_SOURCE_LIST(DLP_MON_DECLARE)

const dlp_mon_source_ops *const dlp_mon_sources[] = {DLP_MON_SOURCE_LIST(DLP_MON_ENTRY) NULL};
