// perf/hwplan_report: the plan's figures as `dlperf plan` prints them and as dlperf.plan/1 records them — a
// candidate in one line of text, the balance, a part's need and a machine's change as JSON and text.
// Defines: dlp_hwplan_cand_describe, dlp_hwplan_balance_to_json, dlp_hwplan_need_to_json, dlp_hwplan_change_to_json,
//          dlp_hwplan_change_text.
#ifndef DLP_PERF_HWPLAN_REPORT_H
#define DLP_PERF_HWPLAN_REPORT_H
#include <jansson.h>
#include <stddef.h>

#include "perf/hwplan.h"
#include "perf/hwplan_change.h"
#include "perf/hwplan_needs.h"

// "plat: 8x a100, 2x epyc-7763, storage nvme-4 x 2 nodes" or "sys: 8x a100, 2x epyc-7742 (system)".
void dlp_hwplan_cand_describe(const dlp_hwplan_cand *c, char *buf, size_t len);
json_t *dlp_hwplan_balance_to_json(const dlp_hwplan_balance_info *b);
json_t *dlp_hwplan_need_to_json(const dlp_hwplan_need *l);
json_t *dlp_hwplan_change_to_json(const dlp_hwplan_change *ch, int with_bottleneck);
// "CPU -> x, storage -> y"
const char *dlp_hwplan_change_text(const dlp_hwplan_change *ch, char *buf, size_t len);

#endif
