// perf/hwplan_report: the plan's figures as text and JSON (perf/hwplan_report.h).
#include "perf/hwplan_report.h"

#include <stdio.h>
#include <string.h>

#include "core/json.h"

void dlp_hwplan_cand_describe(const dlp_hwplan_cand *c, char *buf, size_t len) {
    if (c->sys)
        snprintf(buf, len, "%s: %dx %s, %dx %s (system)", c->sys->id, c->gpus, c->gpu->id, c->sockets, c->cpu->id);
    else
        snprintf(buf, len, "%s: %dx %s, %dx %s, storage %s", c->plat->id, c->gpus, c->gpu->id, c->sockets, c->cpu->id,
                 c->stor ? c->stor->id : "base");
    if (c->nodes > 1) {
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, " x %d nodes", c->nodes);
    }
}

json_t *dlp_hwplan_balance_to_json(const dlp_hwplan_balance_info *b) {
    return json_pack("{s:o, s:f, s:o, s:b, s:s}", "host_img_per_s", dlp_json_real_or_null(b->host_img_per_s),
                     "device_img_per_s", b->device_img_per_s, "ratio", dlp_json_real_or_null(b->ratio), "balanced",
                     b->balanced, "why", b->why);
}

json_t *dlp_hwplan_need_to_json(const dlp_hwplan_need *l) {
    return json_pack("{s:s, s:s, s:s, s:s}", "part", l->part, "need", l->need, "has", l->has, "mark", l->mark);
}

json_t *dlp_hwplan_change_to_json(const dlp_hwplan_change *ch, int with_bottleneck) {
    json_t *e = json_pack("{s:o, s:o, s:f, s:f}", "cpu", ch->cpu ? json_string(ch->cpu->id) : json_null(), "storage",
                          ch->stor ? json_string(ch->stor->id) : json_null(), "delta_usd", ch->delta_usd, "img_per_s",
                          ch->img_per_s);
    if (with_bottleneck) json_object_set_new(e, "bottleneck", json_string(dlp_stage_name(ch->bottleneck)));
    return e;
}

const char *dlp_hwplan_change_text(const dlp_hwplan_change *ch, char *buf, size_t len) {
    snprintf(buf, len, "%s%s%s%s%s", ch->cpu ? "CPU -> " : "", ch->cpu ? ch->cpu->id : "", ch->cpu && ch->stor ? ", " : "",
             ch->stor ? "storage -> " : "", ch->stor ? ch->stor->id : "");
    return buf;
}
