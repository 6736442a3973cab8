// test_nn_checkpoint_crash: writes survive SIGKILL at any instant. A child saves a checkpoint (model + state,
// replacing the pair at one path) and writes a JSON result (core/json, replacing one file) in a loop, each round
// with new content; the parent SIGKILLs it at random moments, dozens of times, and after each kill loads what is
// on disk: it must load, be complete (every value of one round) and be a round written no earlier than the one
// seen after the previous kill. Files left besides the results must be temporaries (".tmp.<pid>", ".next"),
// never something a load takes, and a complete save removes them once they are a minute old. Bounded: ~40 kills,
// a few seconds.
// Main file: src/nn/checkpoint.c; also src/nn/ckdir.c, src/core/fs.c and json.c (atomic writes).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/json.h"
#include "nn/checkpoint.h"
#include "nn/ckdir.h"
#include "nn/resnet.h"
#include "nn/schedule.h"
#include "testutil.h"

#define KILLS 40
#define JSON_PAD 20000  // array entries: the JSON file is ~100 KB, so kills land inside its write too

static float pval(int64_t v, int64_t i) { return (float)v + 0.25f * (float)(i % 7); }

static void fill(const dlp_net *net, int64_t v, float *p, float *b, float *m) {
    for (int64_t i = 0; i < net->param_count; i++) p[i] = pval(v, i), m[i] = -(float)v;
    for (int64_t i = 0; i < net->buf_count; i++) b[i] = (float)v;
}

static dlp_status write_round(const char *ck, const char *js, const dlp_net *net, int64_t v, float *p, float *b,
                              float *m) {
    fill(net, v, p, b, m);
    dlp_checkpoint c;
    memset(&c, 0, sizeof c);
    dlp_lr_schedule_default(&c.sched);
    c.sched.batch = 64;
    c.sched.steps_per_epoch = 100;
    c.sched.total_steps = 9000;
    c.pos.step = v;
    c.pos.samples_seen = 64 * v;
    dlp_status st = dlp_checkpoint_save(ck, net, p, b, m, &c);
    if (st) return st;
    json_t *o = json_object(), *a = json_array();
    json_object_set_new(o, "version", json_integer(v));
    for (int i = 0; i < JSON_PAD; i++) json_array_append_new(a, json_integer(v));
    json_object_set_new(o, "pad", a);
    json_object_set_new(o, "end", json_integer(v));
    st = dlp_json_write(o, js, DLP_WRITE_REPLACE);
    json_decref(o);
    return st;
}

// The checkpoint's round, checked complete (-1 if not).
static int64_t check_ck(const char *ck, const dlp_net *net, float *p, float *b, float *m) {
    dlp_checkpoint c;
    if (dlp_checkpoint_load(ck, net, p, b, m, 0, &c) != DLP_OK) {
        dlp_err_print(stderr);
        return -1;
    }
    const int64_t v = c.pos.step;
    dlp_checkpoint_free(&c);
    if (c.num_batches_tracked != v || c.pos.samples_seen != 64 * v) return -1;
    for (int64_t i = 0; i < net->param_count; i++)
        if (p[i] != pval(v, i) || m[i] != -(float)v) return -1;
    for (int64_t i = 0; i < net->buf_count; i++)
        if (b[i] != (float)v) return -1;
    return v;
}

static int64_t check_json(const char *js) {
    json_t *o;
    if (dlp_json_load(js, &o) != DLP_OK) {
        dlp_err_print(stderr);
        return -1;
    }
    int64_t v = json_integer_value(json_object_get(o, "version"));
    json_t *a = json_object_get(o, "pad");
    int ok = json_is_array(a) && json_array_size(a) == JSON_PAD &&
             json_integer_value(json_object_get(o, "end")) == v;
    for (size_t i = 0; ok && i < JSON_PAD; i++) ok = json_integer_value(json_array_get(a, i)) == v;
    json_decref(o);
    return ok ? v : -1;
}

static void test_kill_during_writes(void **state) {
    (void)state;
    char dir[512], ck[600], js[600];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(ck, sizeof ck, "%s/ck.safetensors", dir);
    snprintf(js, sizeof js, "%s/result.json", dir);
    dlp_net net;
    assert_int_equal(dlp_model_build("resnet-mini", 7, 32, &net), DLP_OK);
    float *p = malloc((size_t)net.param_count * sizeof(float)), *m = malloc((size_t)net.param_count * sizeof(float));
    float *b = malloc((size_t)(net.buf_count ? net.buf_count : 1) * sizeof(float));
    assert_non_null(p);
    assert_non_null(m);
    assert_non_null(b);
    assert_int_equal(write_round(ck, js, &net, 1, p, b, m), DLP_OK);  // round 1: there is always a previous file

    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    int64_t last_ck = 1, last_js = 1, next = 2;
    int pending = 0, junk = 0, advanced = 0;
    for (int k = 0; k < KILLS; k++) {
        const int64_t first = next;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            for (int64_t v = first;; v++)
                if (write_round(ck, js, &net, v, p, b, m) != DLP_OK) _exit(3);
        }
        usleep((useconds_t)(2000 + rand() % 60000));  // 2..62 ms: a few rounds, cut anywhere
        kill(pid, SIGKILL);
        int ws;
        assert_int_equal(waitpid(pid, &ws, 0), pid);
        assert_true(WIFSIGNALED(ws));  // not an early exit (3: a write failed)

        char np[700];
        dlp_checkpoint_next_path(ck, np, sizeof np);
        pending += dlp_path_exists(np);
        const int64_t vc = check_ck(ck, &net, p, b, m), vj = check_json(js);
        if (vc < 0 || vj < 0) fail_msg("kill %d: checkpoint round %lld, JSON round %lld (-1: torn or unloadable)", k,
                                       (long long)vc, (long long)vj);
        // one of the rounds written: not older than what was on disk before, not newer than the child reached
        assert_true(vc >= last_ck && vj >= last_js);
        advanced += vc > last_ck;
        last_ck = vc;
        last_js = vj;
        next = (vc > vj ? vc : vj) + 2;  // the next child writes rounds never written before
        // everything else in the directory is a temporary a load never takes
        DIR *d = opendir(dir);
        struct dirent *e;
        while ((e = readdir(d))) {
            const char *n = e->d_name;
            if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, "ck.safetensors") ||
                !strcmp(n, "ck.state.safetensors") || !strcmp(n, "result.json"))
                continue;
            if (strstr(n, ".tmp.") || !strcmp(n, "ck.state.safetensors.next")) {
                junk += strstr(n, ".tmp.") != NULL;
                continue;
            }
            fail_msg("unexpected file %s after kill %d", n, k);
        }
        closedir(d);
    }
    // a save after the kills finishes or drops what they left of their own pair; the killed writers' temporaries,
    // once a minute old (set back here: as if the kills were a while ago), go with it
    DIR *dt = opendir(dir);
    struct dirent *et;
    while ((et = readdir(dt)))
        if (strstr(et->d_name, ".tmp.")) {
            const struct timespec old[2] = {{time(NULL) - 120, 0}, {time(NULL) - 120, 0}};
            assert_int_equal(utimensat(dirfd(dt), et->d_name, old, 0), 0);
        }
    closedir(dt);
    assert_int_equal(write_round(ck, js, &net, next, p, b, m), DLP_OK);
    char np[700];
    dlp_checkpoint_next_path(ck, np, sizeof np);
    assert_false(dlp_path_exists(np));
    assert_int_equal(check_ck(ck, &net, p, b, m), next);
    assert_int_equal(check_json(js), next);
    // ...and removes the temporaries the killed writers left beside each file it wrote: nothing else is left
    DIR *d = opendir(dir);
    struct dirent *e;
    int left = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (strcmp(e->d_name, "ck.safetensors") && strcmp(e->d_name, "ck.state.safetensors") &&
            strcmp(e->d_name, "result.json")) {
            fprintf(stderr, "left after the last save: %s\n", e->d_name);
            left++;
        }
    }
    closedir(d);
    assert_int_equal(left, 0);
    fprintf(stderr, "crash_write: %d kills; checkpoint advanced after %d, reached round %lld; %d left a .next to "
            "resolve, %d temporaries seen (cumulative)\n", KILLS, advanced, (long long)last_ck, pending, junk);
    assert_true(advanced > 0);  // the kills did land while rounds were completing
    free(p);
    free(b);
    free(m);
    dlp_net_free(&net);
    dlp_test_rmtree(dir);
}

// The two states a replacing save can be killed in, made by hand, then resolved by dlp_ckdir_clean: killed after
// the model's rename (new model, old state, new .next: loads the new round, clean finishes the save) and before it
// (old pair, new .next: loads the old round, clean drops the .next).
static void test_settle_leftovers(void **state) {
    (void)state;
    char dir[512], a[700], b[700], as[800], an[800], bs[800], junk[800];
    dlp_test_tmpdir(dir, sizeof dir);
    dlp_ckdir_path(dir, 5, a, sizeof a);
    snprintf(b, sizeof b, "%s/other.safetensors", dir);
    dlp_checkpoint_state_path(a, as, sizeof as);
    dlp_checkpoint_next_path(a, an, sizeof an);
    dlp_checkpoint_state_path(b, bs, sizeof bs);
    dlp_net net;
    assert_int_equal(dlp_model_build("resnet-mini", 7, 32, &net), DLP_OK);
    float *p = malloc((size_t)net.param_count * sizeof(float)), *m = malloc((size_t)net.param_count * sizeof(float));
    float *bf = malloc((size_t)(net.buf_count ? net.buf_count : 1) * sizeof(float));
    char js[700];
    snprintf(js, sizeof js, "%s/r.json", dir);
    // killed between the renames
    assert_int_equal(write_round(a, js, &net, 1, p, bf, m), DLP_OK);
    assert_int_equal(write_round(b, js, &net, 2, p, bf, m), DLP_OK);
    assert_int_equal(rename(bs, an), 0);
    assert_int_equal(rename(b, a), 0);
    assert_int_equal(check_ck(a, &net, p, bf, m), 2);
    int removed = 0;
    assert_int_equal(dlp_ckdir_clean(dir, &removed), DLP_OK);
    assert_false(dlp_path_exists(an));
    assert_int_equal(check_ck(a, &net, p, bf, m), 2);
    // killed before the model's rename
    assert_int_equal(write_round(b, js, &net, 3, p, bf, m), DLP_OK);
    assert_int_equal(rename(bs, an), 0);
    snprintf(junk, sizeof junk, "%s.tmp.999999999", an);  // a dead writer's temporary of the .next
    FILE *f = fopen(junk, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(check_ck(a, &net, p, bf, m), 2);
    assert_int_equal(dlp_ckdir_clean(dir, &removed), DLP_OK);
    assert_false(dlp_path_exists(an));
    assert_false(dlp_path_exists(junk));
    assert_true(dlp_path_exists(as));
    assert_int_equal(check_ck(a, &net, p, bf, m), 2);
    free(p);
    free(bf);
    free(m);
    dlp_net_free(&net);
    dlp_test_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settle_leftovers),
        cmocka_unit_test(test_kill_during_writes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
