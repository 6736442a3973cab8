// nn/checkpoint: model + state sidecar, saved atomically and checked on load.
#include "nn/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/rng.h"
#include "nn/safetensors.h"
#include "nn/state.h"

void dlp_checkpoint_state_path(const char *path, char *out, size_t len) {
    const char *ext = ".safetensors";
    size_t pl = strlen(path), el = strlen(ext);
    if (pl > el && strcmp(path + pl - el, ext) == 0) snprintf(out, len, "%.*s.state%s", (int)(pl - el), path, ext);
    else snprintf(out, len, "%s.state%s", path, ext);
}

void dlp_checkpoint_next_path(const char *path, char *out, size_t len) {
    char sp[1100];
    dlp_checkpoint_state_path(path, sp, sizeof sp);
    snprintf(out, len, "%s.next", sp);
}

static void fsync_dir_of(const char *path) {
    char d[1200];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    if (slash == d) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(d, sizeof d, ".");
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

// The checkpoint id in a safetensors file's metadata (out empty when unreadable or none).
static void file_ck_id(const char *path, char *out, size_t len) {
    out[0] = '\0';
    dlp_st_file f;
    if (!dlp_path_exists(path) || dlp_st_open(path, 0, &f) != DLP_OK) {
        dlp_err_clear();
        return;
    }
    const char *id = dlp_st_meta(&f, "dlperf.checkpoint_id");
    if (id) snprintf(out, len, "%s", id);
    dlp_st_close(&f);
}

dlp_status dlp_checkpoint_settle(const char *path, int *settled) {
    if (settled) *settled = 0;
    char sp[1100], np[1200], id_m[64], id_n[64];
    dlp_checkpoint_state_path(path, sp, sizeof sp);
    dlp_checkpoint_next_path(path, np, sizeof np);
    if (!dlp_path_exists(np)) return DLP_OK;
    file_ck_id(path, id_m, sizeof id_m);
    file_ck_id(np, id_n, sizeof id_n);
    if (id_m[0] && strcmp(id_m, id_n) == 0) {
        // the model was published, its state not yet renamed into place: finish that save
        if (rename(np, sp) != 0) return DLP_ERR(DLP_ERR_IO, "cannot rename %s to %s: %s", np, sp, strerror(errno));
    } else if (unlink(np) != 0 && errno != ENOENT) {
        // a save killed before its model was published: the new state is junk
        return DLP_ERR(DLP_ERR_IO, "cannot remove the unpublished state %s: %s", np, strerror(errno));
    }
    fsync_dir_of(path);
    if (settled) *settled = 1;
    return DLP_OK;
}

static char *pos_to_json(const dlp_train_pos *p) {
    json_t *o = json_object(), *rng = json_array();
    char buf[32];
    for (int i = 0; i < 4; i++) {
        snprintf(buf, sizeof buf, "%016" PRIx64, p->rng[i]);
        json_array_append_new(rng, json_string(buf));
    }
    snprintf(buf, sizeof buf, "%" PRIu64, p->seed);
    json_object_set_new(o, "epoch", json_integer(p->epoch));
    json_object_set_new(o, "step_in_epoch", json_integer(p->step_in_epoch));
    json_object_set_new(o, "step", json_integer(p->step));
    json_object_set_new(o, "samples_seen", json_integer(p->samples_seen));
    json_object_set_new(o, "seed", json_string(buf));
    json_object_set_new(o, "rng", rng);
    json_object_set_new(o, "last_loss", dlp_json_real_or_null(p->last_loss));
    json_object_set_new(o, "best_top1", dlp_json_real_or_null(p->best_top1));
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

static dlp_status pos_from_json(const char *text, const char *where, dlp_train_pos *p) {
    memset(p, 0, sizeof *p);
    json_error_t je;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!o) return DLP_ERR(DLP_ERR_FORMAT, "%s: position is not valid JSON (%s)", where, je.text);
    dlp_status st = DLP_OK;
    const char *seed;
    json_t *rng = json_object_get(o, "rng");
    if ((st = dlp_json_get_int(o, "epoch", &p->epoch, where)) || (st = dlp_json_get_int(o, "step_in_epoch", &p->step_in_epoch, where)) ||
        (st = dlp_json_get_int(o, "step", &p->step, where)) ||
        (st = dlp_json_get_int(o, "samples_seen", &p->samples_seen, where)) ||
        (st = dlp_json_get_str(o, "seed", &seed, where)))
        goto out;
    char *end;
    p->seed = strtoull(seed, &end, 10);
    if (*end || !*seed) {
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: position seed '%s' is not a number", where, seed);
        goto out;
    }
    if (!json_is_array(rng) || json_array_size(rng) != 4) {
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: position rng is not 4 hex strings", where);
        goto out;
    }
    for (int i = 0; i < 4; i++) {
        const char *h = json_string_value(json_array_get(rng, (size_t)i));
        if (!h || !*h) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s: position rng[%d] is not a hex string", where, i);
            goto out;
        }
        p->rng[i] = strtoull(h, &end, 16);
        if (*end) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s: position rng[%d] is not a hex string", where, i);
            goto out;
        }
    }
    json_t *v = json_object_get(o, "last_loss");
    p->last_loss = json_is_number(v) ? json_number_value(v) : NAN;
    v = json_object_get(o, "best_top1");
    p->best_top1 = json_is_number(v) ? json_number_value(v) : 0;
    if (p->epoch < 0 || p->step < 0 || p->step_in_epoch < 0 || p->samples_seen < 0)
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: negative counts in the position", where);
out:
    json_decref(o);
    return st;
}

dlp_status dlp_checkpoint_save(const char *path, const dlp_net *net, const float *params, const float *bufs,
                               const float *momentum, const dlp_checkpoint *ck) {
    char state_path[1100], id[32];
    dlp_checkpoint_state_path(path, state_path, sizeof state_path);
    snprintf(id, sizeof id, "%016" PRIx64,
             dlp_hash64((uint64_t)dlp_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)ck->pos.step));
    dlp_status st = DLP_OK;
    float *zeros = NULL;
    char *pos = NULL, *sched = NULL, *cfg = NULL;
    dlp_st_writer w;
    dlp_st_writer_init(&w);
    if (!momentum) {
        zeros = calloc((size_t)(net->param_count ? net->param_count : 1), sizeof(float));
        if (!zeros) return DLP_ERR(DLP_ERR_NOMEM, "out of memory saving %s", path);
        momentum = zeros;
    }
    // 0. a save killed half-way at this path is finished or discarded first, so that the earlier checkpoint
    //    loads on its own. The earlier pair then stays in place until the new one is published: a kill at any
    //    point leaves either it or the new pair loadable, never neither (nor a mixed pair).
    if ((st = dlp_checkpoint_settle(path, NULL))) goto out;
    char next_path[1200];
    dlp_checkpoint_next_path(path, next_path, sizeof next_path);
    const int replacing = dlp_path_exists(path);
    // 1. the state sidecar: in place when no model is published at path; else beside it, as <state>.next (the
    //    old model still pairs with the old state until step 2)
    json_t *sj = dlp_lr_schedule_to_json(&ck->sched);
    pos = pos_to_json(&ck->pos);
    sched = json_dumps(sj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(sj);
    cfg = ck->config ? json_dumps(ck->config, JSON_COMPACT | JSON_PRESERVE_ORDER) : strdup("{}");
    if (!pos || !sched || !cfg) {
        st = DLP_ERR(DLP_ERR_NOMEM, "out of memory saving %s", path);
        goto out;
    }
    if ((st = dlp_st_writer_meta(&w, "dlperf.checkpoint_id", id)) || (st = dlp_st_writer_meta(&w, "dlperf.arch", net->arch)) ||
        (st = dlp_st_writer_meta(&w, "dlperf.position", pos)) || (st = dlp_st_writer_meta(&w, "dlperf.schedule", sched)) ||
        (st = dlp_st_writer_meta(&w, "dlperf.config", cfg)))
        goto out;
    for (int i = 0; i < net->nparams; i++) {
        char name[96];
        snprintf(name, sizeof name, "momentum.%s", net->params[i].name);
        if ((st = dlp_st_writer_add(&w, name, DLP_ST_F32, net->params[i].ndim, net->params[i].shape,
                                    momentum + net->params[i].offset)))
            goto out;
    }
    if ((st = dlp_st_writer_write(&w, replacing ? next_path : state_path, DLP_WRITE_REPLACE))) goto out;
    dlp_st_writer_free(&w);
    dlp_st_writer_init(&w);
    // 2. the model, torchvision-compatible (its rename completes the checkpoint)
    char classes[32], step[32];
    snprintf(classes, sizeof classes, "%d", net->num_classes);
    snprintf(step, sizeof step, "%lld", (long long)ck->pos.step);
    const int64_t nbt = ck->pos.step;
    if ((st = dlp_st_writer_meta(&w, "format", "pt")) || (st = dlp_st_writer_meta(&w, "dlperf.arch", net->arch)) ||
        (st = dlp_st_writer_meta(&w, "dlperf.num_classes", classes)) ||
        (st = dlp_st_writer_meta(&w, "dlperf.checkpoint_id", id)) || (st = dlp_st_writer_meta(&w, "dlperf.step", step)) ||
        (st = dlp_state_add(&w, net, params, bufs, &nbt)) || (st = dlp_st_writer_write(&w, path, DLP_WRITE_REPLACE)))
        goto out;
    // 3. the new state into its place (until then a load takes <state>.next, whose id the new model carries)
    if (replacing) {
        if (rename(next_path, state_path) != 0) {
            st = DLP_ERR(DLP_ERR_IO, "cannot rename %s to %s: %s", next_path, state_path, strerror(errno));
            goto out;
        }
        fsync_dir_of(path);
    }
out:
    if (st) dlp_err_context("saving checkpoint %s", path);
    dlp_st_writer_free(&w);
    free(zeros);
    free(pos);
    free(sched);
    free(cfg);
    return st;
}

void dlp_checkpoint_free(dlp_checkpoint *ck) {
    json_decref(ck->config);
    ck->config = NULL;
}

dlp_status dlp_checkpoint_load(const char *path, const dlp_net *net, float *params, float *bufs, float *momentum,
                               int allow_model_only, dlp_checkpoint *ck) {
    memset(ck, 0, sizeof *ck);
    dlp_lr_schedule_default(&ck->sched);
    char state_path[1100];
    dlp_checkpoint_state_path(path, state_path, sizeof state_path);
    dlp_st_file model, state;
    memset(&state, 0, sizeof state);
    DLP_CHECK(dlp_st_open(path, 0, &model));
    dlp_status st = dlp_state_load_file(net, &model, DLP_STATE_STRICT, params, bufs, &ck->num_batches_tracked);
    if (st) goto out;
    // the state whose checkpoint id the model carries: <state>, or <state>.next while a save that replaced the
    // pair was stopped between publishing the model and renaming its state (see dlp_checkpoint_save)
    const char *id_m = dlp_st_meta(&model, "dlperf.checkpoint_id");
    char next_path[1200], id_n[64];
    dlp_checkpoint_next_path(path, next_path, sizeof next_path);
    file_ck_id(next_path, id_n, sizeof id_n);
    const char *use = state_path;
    if (id_m && id_n[0] && strcmp(id_m, id_n) == 0) use = next_path;
    if (!dlp_path_exists(use)) {
        if (!allow_model_only)
            st = DLP_ERR(DLP_ERR_NOTFOUND, "checkpoint %s has no state file %s (momentum and position): cannot resume",
                         path, state_path);
        else if (momentum)
            memset(momentum, 0, (size_t)net->param_count * sizeof(float));
        goto out;
    }
    if ((st = dlp_st_open(use, 0, &state))) goto out;
    const char *id_s = dlp_st_meta(&state, "dlperf.checkpoint_id");
    if (!id_m || !id_s || strcmp(id_m, id_s) != 0) {
        st = DLP_ERR(DLP_ERR_FORMAT, "%s and %s come from different saves (checkpoint ids %s and %s): not resuming",
                     path, state_path, id_m ? id_m : "none", id_s ? id_s : "none");
        goto out;
    }
    const char *pos = dlp_st_meta(&state, "dlperf.position"), *sched = dlp_st_meta(&state, "dlperf.schedule"),
               *cfg = dlp_st_meta(&state, "dlperf.config");
    if (!pos || !sched) {
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: no dlperf.position / dlperf.schedule in its metadata", state_path);
        goto out;
    }
    if ((st = pos_from_json(pos, state_path, &ck->pos))) goto out;
    json_error_t je;
    json_t *sj = json_loads(sched, JSON_REJECT_DUPLICATES, &je);
    if (!sj) {
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: schedule is not valid JSON (%s)", state_path, je.text);
        goto out;
    }
    st = dlp_lr_schedule_from_json(sj, &ck->sched, state_path);
    json_decref(sj);
    if (st) goto out;
    if (cfg && !(ck->config = json_loads(cfg, JSON_REJECT_DUPLICATES, &je))) {
        st = DLP_ERR(DLP_ERR_FORMAT, "%s: config is not valid JSON (%s)", state_path, je.text);
        goto out;
    }
    for (int i = 0; momentum && i < net->nparams; i++) {
        const dlp_param *p = &net->params[i];
        char name[96];
        snprintf(name, sizeof name, "momentum.%s", p->name);
        const dlp_st_tensor *t = dlp_st_find(&state, name);
        if (!t) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s: no tensor '%s'", state_path, name);
            goto out;
        }
        if (t->numel != p->numel) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s: '%s' has %lld elements, the net's parameter %lld", state_path, name,
                         (long long)t->numel, (long long)p->numel);
            goto out;
        }
        if ((st = dlp_st_read_f32(&state, t, momentum + p->offset))) goto out;
    }
out:
    if (st) {
        dlp_err_context("loading checkpoint %s", path);
        dlp_checkpoint_free(ck);
    }
    dlp_st_close(&model);
    dlp_st_close(&state);
    return st;
}
