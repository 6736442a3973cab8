// nn/ckdir: the checkpoint directory of a run killed and resumed by several processes — which pairs count as
// complete, what cleaning removes (a dead writer's temporaries, unpublished state files) and keeps (a live writer's
// newer temporaries, other files), retention across writers, and the writer lock.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fs.h"
#include "nn/ckdir.h"
#include "testutil.h"

static void touch(const char *dir, const char *name) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("x", f);
    fclose(f);
}

static int exists(const char *dir, const char *name) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return dlp_path_exists(p);
}

// A PID that is certainly not alive: a child that has exited and been reaped.
static long dead_pid(void) {
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) _exit(0);
    assert_int_equal(waitpid(c, NULL, 0), c);
    return (long)c;
}

static void test_list_clean_retain(void **state) {
    (void)state;
    char dir[512];
    dlp_test_tmpdir(dir, sizeof dir);
    char name[128];
    const long dead = dead_pid(), me = (long)getpid(), parent = (long)getppid();
    // complete pairs 3, 5, 7; an unpublished state 8 (its model never renamed); a model without state 9 (not ours to
    // judge: kept); a dead writer's temporaries at 8; a live writer's (the parent) newer temporary at 10 and older
    // one at 4; our own temporary at 11; files that are not dlperf's
    for (int s = 3; s <= 7; s += 2) {
        snprintf(name, sizeof name, "step-%08d.safetensors", s);
        touch(dir, name);
        snprintf(name, sizeof name, "step-%08d.state.safetensors", s);
        touch(dir, name);
    }
    touch(dir, "step-00000008.state.safetensors");
    touch(dir, "step-00000009.safetensors");
    snprintf(name, sizeof name, "step-00000008.safetensors.tmp.%ld", dead);
    touch(dir, name);
    snprintf(name, sizeof name, "step-00000008.state.safetensors.tmp.%ld", dead);
    touch(dir, name);
    snprintf(name, sizeof name, "step-00000010.safetensors.tmp.%ld", parent);
    touch(dir, name);
    snprintf(name, sizeof name, "step-00000004.safetensors.tmp.%ld", parent);
    touch(dir, name);
    snprintf(name, sizeof name, "step-00000011.safetensors.tmp.%ld", me);
    touch(dir, name);
    touch(dir, "notes.txt");
    touch(dir, "step-00000012.safetensors.tmp.x");

    int64_t *steps;
    int n = dlp_ckdir_list(dir, &steps);
    assert_int_equal(n, 3);
    assert_true(steps[0] == 3 && steps[1] == 5 && steps[2] == 7);
    free(steps);

    int removed = -1;
    assert_int_equal(dlp_ckdir_clean(dir, &removed), DLP_OK);
    assert_int_equal(removed, 4);  // the dead writer's 2 temporaries, the live writer's older one, the state at 8
    assert_false(exists(dir, "step-00000008.state.safetensors"));
    snprintf(name, sizeof name, "step-00000008.safetensors.tmp.%ld", dead);
    assert_false(exists(dir, name));
    snprintf(name, sizeof name, "step-00000004.safetensors.tmp.%ld", parent);
    assert_false(exists(dir, name));  // not newer than the newest complete checkpoint (7)
    snprintf(name, sizeof name, "step-00000010.safetensors.tmp.%ld", parent);
    assert_true(exists(dir, name));  // a live process's, newer: kept
    snprintf(name, sizeof name, "step-00000011.safetensors.tmp.%ld", me);
    assert_true(exists(dir, name));  // ours
    assert_true(exists(dir, "step-00000009.safetensors") && exists(dir, "notes.txt") &&
                exists(dir, "step-00000012.safetensors.tmp.x"));

    // retention over the directory: the newest 2 complete pairs, model and state both gone for the others
    assert_int_equal(dlp_ckdir_retain(dir, 2, &removed), DLP_OK);
    assert_int_equal(removed, 1);
    assert_false(exists(dir, "step-00000003.safetensors") || exists(dir, "step-00000003.state.safetensors"));
    assert_true(exists(dir, "step-00000005.safetensors") && exists(dir, "step-00000007.state.safetensors"));
    assert_int_equal(dlp_ckdir_retain(dir, 0, &removed), DLP_OK);  // 0: keep all
    assert_int_equal(removed, 0);
    n = dlp_ckdir_list(dir, &steps);
    assert_int_equal(n, 2);
    free(steps);
    char p[600];
    dlp_ckdir_path(dir, 42, p, sizeof p);
    assert_non_null(strstr(p, "/step-00000042.safetensors"));
    // an absent directory: nothing listed, nothing to clean
    snprintf(p, sizeof p, "%s/absent", dir);
    assert_int_equal(dlp_ckdir_list(p, &steps), 0);
    assert_null(steps);
    assert_int_equal(dlp_ckdir_clean(p, &removed), DLP_OK);
    assert_int_equal(removed, 0);
    dlp_test_rmtree(dir);
}

static void test_lock(void **state) {
    (void)state;
    char dir[512], sub[600];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/new/ck", dir);
    int a = -1, b = -1;
    assert_int_equal(dlp_ckdir_lock(sub, &a), DLP_OK);  // creates the directory
    assert_true(a >= 0 && dlp_is_dir(sub));
    // a second writer (another open file description: as another process would be) is refused, naming the holder
    assert_int_equal(dlp_ckdir_lock(sub, &b), DLP_ERR_EXISTS);
    assert_int_equal(b, -1);
    char pid[32];
    snprintf(pid, sizeof pid, "pid %ld", (long)getpid());
    assert_non_null(strstr(dlp_err_msg(), pid));
    dlp_err_clear();
    dlp_ckdir_unlock(a);  // as the kernel does when the holder dies
    assert_int_equal(dlp_ckdir_lock(sub, &b), DLP_OK);
    dlp_ckdir_unlock(b);
    dlp_test_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_clean_retain),
        cmocka_unit_test(test_lock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
