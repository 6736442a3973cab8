// nn/schedule: learning-rate schedules.
#include "nn/schedule.h"

#include <math.h>
#include <string.h>

#include "core/fields.h"
#include "core/json.h"

static const char *const k_decay_names[DLP_LR_DECAY_COUNT] = {"constant", "cosine", "step"};

const dlp_opt_choice dlp_lr_decay_choices[] = {
    {"cosine", DLP_LR_COSINE}, {"step", DLP_LR_STEP}, {"constant", DLP_LR_CONSTANT}, {NULL, 0},
};

const char *dlp_lr_decay_name(dlp_lr_decay d) { return (unsigned)d < DLP_LR_DECAY_COUNT ? k_decay_names[d] : "?"; }

void dlp_lr_schedule_default(dlp_lr_schedule *s) {
    *s = (dlp_lr_schedule){.base_lr = 0.1, .scale_by_batch = 1, .batch = 256, .world = 1, .warmup_start = 0.1,
                           .decay = DLP_LR_COSINE, .step_gamma = 0.1, .step_epochs = {30, 60, 80}};
}

double dlp_lr_peak(const dlp_lr_schedule *s) {
    return s->scale_by_batch ? s->base_lr * (double)s->batch * (double)s->world / 256.0 : s->base_lr;
}

int64_t dlp_lr_warmup_steps(const dlp_lr_schedule *s) {
    return s->warmup_steps + (int64_t)llround(s->warmup_epochs * (double)s->steps_per_epoch);
}

dlp_status dlp_lr_schedule_check(const dlp_lr_schedule *s) {
    if (!(s->base_lr > 0) || !isfinite(s->base_lr))
        return DLP_ERR(DLP_ERR_INVALID, "lr schedule: base lr must be positive (got %g)", s->base_lr);
    if (s->scale_by_batch && (s->batch < 1 || s->world < 1))
        return DLP_ERR(DLP_ERR_INVALID, "lr schedule: batch (%d) and world (%d) must be positive", s->batch, s->world);
    if (s->warmup_steps < 0 || s->warmup_epochs < 0 || s->steps_per_epoch < 0 || s->total_steps < 0)
        return DLP_ERR(DLP_ERR_INVALID, "lr schedule: negative warm-up, epoch length or total");
    if (s->warmup_epochs > 0 && s->steps_per_epoch == 0)
        return DLP_ERR(DLP_ERR_INVALID, "lr schedule: warm-up in epochs needs the number of steps per epoch");
    if (!(s->warmup_start >= 0 && s->warmup_start <= 1))
        return DLP_ERR(DLP_ERR_INVALID, "lr schedule: warm-up start factor must be in [0, 1] (got %g)", s->warmup_start);
    if ((unsigned)s->decay >= DLP_LR_DECAY_COUNT) return DLP_ERR(DLP_ERR_INVALID, "lr schedule: unknown decay");
    if (s->decay == DLP_LR_COSINE && s->total_steps <= dlp_lr_warmup_steps(s))
        return DLP_ERR(DLP_ERR_INVALID, "lr schedule: cosine decay needs a total (%lld steps) longer than the warm-up (%lld)",
                       (long long)s->total_steps, (long long)dlp_lr_warmup_steps(s));
    if (s->decay == DLP_LR_COSINE && !(s->final_lr >= 0 && s->final_lr <= dlp_lr_peak(s)))
        return DLP_ERR(DLP_ERR_INVALID, "lr schedule: final lr %g is outside [0, peak %g]", s->final_lr, dlp_lr_peak(s));
    if (s->decay == DLP_LR_STEP) {
        if (s->steps_per_epoch == 0)
            return DLP_ERR(DLP_ERR_INVALID, "lr schedule: step decay needs the number of steps per epoch");
        if (!(s->step_gamma > 0 && s->step_gamma <= 1))
            return DLP_ERR(DLP_ERR_INVALID, "lr schedule: step gamma must be in (0, 1] (got %g)", s->step_gamma);
        for (int i = 1; i < 8 && s->step_epochs[i] > 0; i++)
            if (s->step_epochs[i] <= s->step_epochs[i - 1])
                return DLP_ERR(DLP_ERR_INVALID, "lr schedule: step milestones must ascend");
    }
    return DLP_OK;
}

double dlp_lr_at(const dlp_lr_schedule *s, int64_t step) {
    const double peak = dlp_lr_peak(s);
    const int64_t w = dlp_lr_warmup_steps(s);
    if (step < 0) step = 0;
    if (step < w) return peak * (s->warmup_start + (1.0 - s->warmup_start) * (double)step / (double)w);
    switch (s->decay) {
    case DLP_LR_COSINE: {
        double span = (double)(s->total_steps - w);
        double t = span > 0 ? (double)(step - w) / span : 1.0;
        if (t > 1) t = 1;
        return s->final_lr + (peak - s->final_lr) * 0.5 * (1.0 + cos(M_PI * t));
    }
    case DLP_LR_STEP: {
        double epoch = s->steps_per_epoch ? (double)step / (double)s->steps_per_epoch : 0;
        double lr = peak;
        for (int i = 0; i < 8 && s->step_epochs[i] > 0; i++)
            if (epoch >= s->step_epochs[i]) lr *= s->step_gamma;
        return lr;
    }
    default: return peak;
    }
}

static json_t *peak_lr_write(const void *rec) { return json_real(dlp_lr_peak(rec)); }

static json_t *step_epochs_write(const void *rec) {
    const dlp_lr_schedule *s = rec;
    json_t *ms = json_array();
    for (int i = 0; i < 8 && s->step_epochs[i] > 0; i++) json_array_append_new(ms, json_real(s->step_epochs[i]));
    return ms;
}

#define SCHED_F(m, t) {DLP_FIELD(dlp_lr_schedule, m, t, 0)}
static const dlp_field_def k_schedule_fields[] = {
    SCHED_F(base_lr, DLP_FT_NUM),
    SCHED_F(scale_by_batch, DLP_FT_BOOL),
    SCHED_F(batch, DLP_FT_INT),
    SCHED_F(world, DLP_FT_INT),
    {DLP_FIELD_CB("peak_lr", NULL, peak_lr_write)},
    SCHED_F(steps_per_epoch, DLP_FT_INT),
    SCHED_F(total_steps, DLP_FT_INT),
    SCHED_F(warmup_epochs, DLP_FT_NUM),
    SCHED_F(warmup_steps, DLP_FT_INT),
    SCHED_F(warmup_start, DLP_FT_NUM),
    {DLP_FIELD(dlp_lr_schedule, decay, DLP_FT_ENUM, 0), .names = k_decay_names, .nnames = DLP_LR_DECAY_COUNT},
    SCHED_F(final_lr, DLP_FT_NUM),
    SCHED_F(step_gamma, DLP_FT_NUM),
    {DLP_FIELD_CB("step_epochs", NULL, step_epochs_write)},
    {0}};

json_t *dlp_lr_schedule_to_json(const dlp_lr_schedule *s) { return dlp_fields_to_json(k_schedule_fields, s); }

dlp_status dlp_lr_schedule_from_json(const json_t *o, dlp_lr_schedule *s, const char *where) {
    dlp_lr_schedule_default(s);
    int64_t v;
    const char *d;
    DLP_CHECK(dlp_json_get_num(o, "base_lr", &s->base_lr, where));
    s->scale_by_batch = json_is_true(json_object_get(o, "scale_by_batch"));
    DLP_CHECK(dlp_json_get_int(o, "batch", &v, where));
    s->batch = (int)v;
    DLP_CHECK(dlp_json_get_int(o, "world", &v, where));
    s->world = (int)v;
    DLP_CHECK(dlp_json_get_int(o, "steps_per_epoch", &s->steps_per_epoch, where));
    DLP_CHECK(dlp_json_get_int(o, "total_steps", &s->total_steps, where));
    DLP_CHECK(dlp_json_get_num(o, "warmup_epochs", &s->warmup_epochs, where));
    DLP_CHECK(dlp_json_get_int(o, "warmup_steps", &s->warmup_steps, where));
    DLP_CHECK(dlp_json_get_num(o, "warmup_start", &s->warmup_start, where));
    DLP_CHECK(dlp_json_get_str(o, "decay", &d, where));
    int found = 0;
    for (int i = 0; i < DLP_LR_DECAY_COUNT; i++)
        if (strcmp(d, k_decay_names[i]) == 0) {
            s->decay = (dlp_lr_decay)i;
            found = 1;
        }
    if (!found) return DLP_ERR(DLP_ERR_FORMAT, "%s: unknown lr decay '%s'", where, d);
    DLP_CHECK(dlp_json_get_num(o, "final_lr", &s->final_lr, where));
    DLP_CHECK(dlp_json_get_num(o, "step_gamma", &s->step_gamma, where));
    json_t *ms = json_object_get(o, "step_epochs");
    memset(s->step_epochs, 0, sizeof s->step_epochs);
    for (size_t i = 0; json_is_array(ms) && i < json_array_size(ms) && i < 8; i++)
        s->step_epochs[i] = json_number_value(json_array_get(ms, i));
    return dlp_lr_schedule_check(s);
}
