// Unit tests for data/dataset and data/source: ImageFolder order (torchvision's), list files, errors that name the
// path, epoch permutations (deterministic from seed and epoch) and shards (every sample exactly once per epoch across
// ranks, shard sizes within one, equal lock-step batch counts with drop_last).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/source.h"
#include "testutil.h"

static void touch(const char *dir, const char *rel) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    char *slash = strrchr(p, '/');
    *slash = '\0';
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
    assert_int_equal(system(cmd), 0);
    *slash = '/';
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("x", f);
    fclose(f);
}

static void test_image_folder_order(void **state) {
    (void)state;
    char dir[256];
    dlp_test_tmpdir(dir, sizeof dir);
    // Classes sorted by name (byte order, as Python sorts str); files by (directory, name) like sorted(os.walk()).
    const char *files[] = {"b/z.JPEG", "b/a.jpg", "a/2.jpeg", "a/10.JPEG", "a/sub/x.JPEG", "a/sub-y/q.png",
                           "a/notes.txt", "C/only.JPG", "empty/.keep"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) touch(dir, files[i]);
    dlp_dataset *ds;
    assert_int_equal(dlp_dataset_open(dir, &ds), DLP_OK);
    assert_int_equal(ds->nclasses, 4);  // C, a, b, empty (an empty class keeps its label, as torchvision's)
    assert_string_equal(ds->class_names[0], "C");
    assert_string_equal(ds->class_names[1], "a");
    assert_string_equal(ds->class_names[2], "b");
    assert_string_equal(ds->class_names[3], "empty");
    // (checked against torchvision 0.14 ImageFolder on the same tree, without the empty class it refuses)
    const char *want[] = {"C/only.JPG", "a/10.JPEG", "a/2.jpeg", "a/sub/x.JPEG", "a/sub-y/q.png", "b/a.jpg", "b/z.JPEG"};
    const int want_label[] = {0, 1, 1, 1, 1, 2, 2};
    assert_int_equal(ds->n, 7);
    for (int i = 0; i < 7; i++) {
        assert_string_equal(dlp_dataset_relpath(ds, i), want[i]);
        assert_int_equal(ds->labels[i], want_label[i]);
    }
    char p[512];
    dlp_dataset_path(ds, 0, p, sizeof p);
    assert_non_null(strstr(p, "/C/only.JPG"));
    int64_t dropped = -1;
    assert_int_equal(dlp_dataset_drop_cache(ds, NULL, 0, &dropped), DLP_OK);
    assert_int_equal(dropped, 7);
    dlp_dataset_free(ds);

    // An ImageNet root (train/ and val/) resolves to the split through dlp_data_open.
    char root[300], cmd[700];
    snprintf(root, sizeof root, "%s/root", dir);
    touch(root, "train/n1/a.JPEG");
    touch(root, "train/n2/b.JPEG");
    touch(root, "val/n1/c.JPEG");
    char where[512];
    assert_int_equal(dlp_data_open(root, "val", NULL, &ds, where, sizeof where), DLP_OK);
    assert_int_equal(ds->n, 1);
    assert_non_null(strstr(where, "root/val"));
    dlp_dataset_free(ds);
    assert_int_equal(dlp_data_open(root, "test", NULL, &ds, NULL, 0), DLP_ERR_INVALID);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    dlp_test_rmtree(dir);
}

static void write_text(const char *dir, const char *rel, const char *text) {
    touch(dir, rel);
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

// ImageNet's validation folder as shipped: flat, labelled by Kaggle's LOC_val_solution.csv (4 folders up) or by
// the devkit's ground truth with its ID -> synset list; labels follow the sibling train/ classes when there is one;
// without label files the error names the files it looked for.
static void test_flat_imagenet_val(void **state) {
    (void)state;
    char root[256], val[512], p[600];
    dlp_test_tmpdir(root, sizeof root);
    dlp_dataset *ds = NULL;
    // Kaggle: <root>/ILSVRC/Data/CLS-LOC/{train/<wnid>/, val/ flat}, <root>/LOC_val_solution.csv
    touch(root, "ILSVRC/Data/CLS-LOC/train/n3/a.JPEG");
    touch(root, "ILSVRC/Data/CLS-LOC/train/n1/b.JPEG");
    touch(root, "ILSVRC/Data/CLS-LOC/train/n2/c.JPEG");
    for (int i = 1; i <= 4; i++) {
        snprintf(p, sizeof p, "ILSVRC/Data/CLS-LOC/val/ILSVRC2012_val_%08d.JPEG", i);
        touch(root, p);
    }
    snprintf(val, sizeof val, "%s/ILSVRC/Data/CLS-LOC/val", root);
    assert_int_equal(dlp_dataset_open(val, &ds), DLP_ERR_NOTFOUND);  // no labels yet: what was looked for
    assert_non_null(strstr(dlp_err_msg(), "LOC_val_solution.csv"));
    assert_non_null(strstr(dlp_err_msg(), "ILSVRC2012_validation_ground_truth.txt"));
    write_text(root, "LOC_val_solution.csv",
               "ImageId,PredictionString\nILSVRC2012_val_00000002,n1 1 2 3 4 n1 5 6 7 8\n"
               "ILSVRC2012_val_00000001,n3 1 2 3 4\nILSVRC2012_val_00000003,n2 1 2 3 4\n");  // 4: no label
    if (dlp_dataset_open(val, &ds) != DLP_OK) fail_msg("%s", dlp_err_msg());
    assert_int_equal(ds->n, 3);
    assert_int_equal(ds->nclasses, 3);
    assert_string_equal(ds->class_names[0], "n1");
    assert_string_equal(ds->class_names[2], "n3");
    assert_string_equal(dlp_dataset_relpath(ds, 0), "ILSVRC2012_val_00000001.JPEG");
    assert_int_equal(ds->labels[0], 2);  // n3
    assert_int_equal(ds->labels[1], 0);  // n1
    assert_int_equal(ds->labels[2], 1);  // n2
    dlp_dataset_free(ds);
    ds = NULL;

    // the devkit: IDs in its own order, mapped by ILSVRC2012_mapping.txt; no train/ beside: the synsets sorted
    dlp_test_rmtree(root);
    char root2[256];
    dlp_test_tmpdir(root2, sizeof root2);
    for (int i = 1; i <= 3; i++) {
        snprintf(p, sizeof p, "val/ILSVRC2012_val_%08d.JPEG", i);
        touch(root2, p);
    }
    write_text(root2, "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt", "2\n3\n1\n");
    snprintf(val, sizeof val, "%s/val", root2);
    assert_int_equal(dlp_dataset_open(val, &ds), DLP_ERR_NOTFOUND);  // the ID -> synset list is missing
    assert_non_null(strstr(dlp_err_msg(), "ILSVRC2012_mapping.txt"));
    write_text(root2, "ILSVRC2012_mapping.txt", "1 n9\n2 n5\n3 n7\n");
    assert_int_equal(dlp_dataset_open(val, &ds), DLP_OK);
    assert_int_equal(ds->n, 3);
    assert_string_equal(ds->class_names[0], "n5");
    assert_int_equal(ds->labels[0], 0);  // ID 2 = n5
    assert_int_equal(ds->labels[1], 1);  // ID 3 = n7
    assert_int_equal(ds->labels[2], 2);  // ID 1 = n9
    dlp_dataset_free(ds);
    dlp_test_rmtree(root2);
}

static void test_errors(void **state) {
    (void)state;
    char dir[256], p[512];
    dlp_test_tmpdir(dir, sizeof dir);
    dlp_dataset *ds = NULL;
    snprintf(p, sizeof p, "%s/missing", dir);
    assert_int_equal(dlp_dataset_open(p, &ds), DLP_ERR_NOTFOUND);
    assert_non_null(strstr(dlp_err_msg(), p));
    assert_null(ds);
    // no class folders
    assert_int_equal(dlp_dataset_open(dir, &ds), DLP_ERR_NOTFOUND);
    assert_non_null(strstr(dlp_err_msg(), "no class folders"));
    // class folders without images
    touch(dir, "cls/readme.txt");
    assert_int_equal(dlp_dataset_open(dir, &ds), DLP_ERR_NOTFOUND);
    assert_non_null(strstr(dlp_err_msg(), "no images"));
    // an unreadable class folder (root ignores permissions: then only check it still opens)
    touch(dir, "cls2/a.JPEG");
    snprintf(p, sizeof p, "%s/cls2", dir);
    chmod(p, 0);
    dlp_status st = dlp_dataset_open(dir, &ds);
    if (geteuid() != 0) {
        assert_int_equal(st, DLP_ERR_IO);
        assert_non_null(strstr(dlp_err_msg(), "cls2"));
        assert_non_null(strstr(dlp_err_msg(), "Permission denied"));
    } else {
        assert_int_equal(st, DLP_OK);
        dlp_dataset_free(ds);
    }
    chmod(p, 0755);
    // list files
    snprintf(p, sizeof p, "%s/list.txt", dir);
    FILE *f = fopen(p, "w");
    fputs("# comment\n\ntrain/a b/x.JPEG 3\n  /abs/y.JPEG\t0  \nz.JPEG 1\n", f);
    fclose(f);
    assert_int_equal(dlp_dataset_open(p, &ds), DLP_OK);
    assert_int_equal(ds->n, 3);
    assert_int_equal(ds->nclasses, 4);
    assert_string_equal(dlp_dataset_relpath(ds, 0), "train/a b/x.JPEG");
    assert_int_equal(ds->labels[0], 3);
    char full[600];
    dlp_dataset_path(ds, 1, full, sizeof full);
    assert_string_equal(full, "/abs/y.JPEG");
    dlp_dataset_path(ds, 2, full, sizeof full);
    assert_non_null(strstr(full, dir));
    dlp_dataset_free(ds);
    f = fopen(p, "w");
    fputs("a.JPEG 1\nb.JPEG x\n", f);
    fclose(f);
    assert_int_equal(dlp_dataset_open(p, &ds), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "list.txt:2"));
    f = fopen(p, "w");
    fputs("onlyonefield\n", f);
    fclose(f);
    assert_int_equal(dlp_dataset_open(p, &ds), DLP_ERR_FORMAT);
    f = fopen(p, "w");
    fputs("# nothing\n", f);
    fclose(f);
    assert_int_equal(dlp_dataset_open(p, &ds), DLP_ERR_NOTFOUND);
    assert_non_null(strstr(dlp_err_msg(), "no samples"));
    // hostile lists (issue 18): a NUL byte would have cut the rest of its line away; an endless line
    f = fopen(p, "w");
    fwrite("a.JPEG 1\nb\0c.JPEG 2\n", 1, 20, f);
    fclose(f);
    assert_int_equal(dlp_dataset_open(p, &ds), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "list.txt:2: the line holds a NUL byte"));
    f = fopen(p, "w");
    for (int i = 0; i < 9000; i++) fputc('x', f);
    fputs(" 1\n", f);
    fclose(f);
    assert_int_equal(dlp_dataset_open(p, &ds), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "list.txt:1: line of 9003 bytes"));
    dlp_err_clear();
    dlp_test_rmtree(dir);
}

static void test_epoch_order(void **state) {
    (void)state;
    const int64_t n = 1000;
    int64_t *a = malloc(sizeof(int64_t) * n), *b = malloc(sizeof(int64_t) * n);
    assert_int_equal(dlp_epoch_order(n, 42, 3, 1, 0, 1, a), DLP_OK);
    assert_int_equal(dlp_epoch_order(n, 42, 3, 1, 0, 1, b), DLP_OK);
    assert_memory_equal(a, b, sizeof(int64_t) * n);  // deterministic
    char *seen = calloc(n, 1);
    int fixed = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_true(a[i] >= 0 && a[i] < n && !seen[a[i]]);
        seen[a[i]] = 1;
        fixed += a[i] == i;
    }
    assert_true(fixed < 20);  // shuffled
    assert_int_equal(dlp_epoch_order(n, 42, 4, 1, 0, 1, b), DLP_OK);
    assert_true(memcmp(a, b, sizeof(int64_t) * n) != 0);  // another epoch, another order
    assert_int_equal(dlp_epoch_order(n, 43, 3, 1, 0, 1, b), DLP_OK);
    assert_true(memcmp(a, b, sizeof(int64_t) * n) != 0);  // another seed, another order
    assert_int_equal(dlp_epoch_order(n, 42, 3, 0, 0, 1, b), DLP_OK);
    for (int64_t i = 0; i < n; i++) assert_int_equal(b[i], i);  // no shuffle
    assert_int_equal(dlp_epoch_order(n, 42, 3, 1, 2, 2, b), DLP_ERR_INVALID);
    free(seen);
    free(a);
    free(b);
}

static void test_shards(void **state) {
    (void)state;
    static const int64_t ns[] = {1, 7, 10, 97, 1000, 1001};
    static const int worlds[] = {1, 2, 3, 4, 8};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t k = 0; k < sizeof worlds / sizeof worlds[0]; k++) {
            int64_t n = ns[i];
            int w = worlds[k];
            int *count = calloc((size_t)n, sizeof(int));
            int64_t *buf = malloc(sizeof(int64_t) * (size_t)n);
            int64_t smin = n, smax = 0, total = 0;
            for (int r = 0; r < w; r++) {
                int64_t s = dlp_shard_size(n, r, w);
                assert_int_equal(dlp_epoch_order(n, 5, 1, 1, r, w, buf), DLP_OK);
                for (int64_t j = 0; j < s; j++) count[buf[j]]++;
                total += s;
                if (s < smin) smin = s;
                if (s > smax) smax = s;
                assert_true(r >= n % w || n % w == 0 || s == n / w + 1);  // the first n % w ranks get the extra one
            }
            assert_int_equal(total, n);
            assert_true(smax - smin <= 1);
            for (int64_t j = 0; j < n; j++)
                if (count[j] != 1) fail_msg("n %lld world %d: sample %lld seen %d times", (long long)n, w, (long long)j, count[j]);
            for (int batch = 1; batch <= 4; batch++) {
                int64_t b0 = dlp_shard_batches(n, 0, w, batch, 1);
                for (int r = 1; r < w; r++) assert_int_equal(dlp_shard_batches(n, r, w, batch, 1), b0);
                for (int r = 0; r < w; r++) {
                    int64_t s = dlp_shard_size(n, r, w);
                    assert_int_equal(dlp_shard_batches(n, r, w, batch, 0), (s + batch - 1) / batch);
                }
            }
            free(count);
            free(buf);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_image_folder_order),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_flat_imagenet_val),
        cmocka_unit_test(test_epoch_order),
        cmocka_unit_test(test_shards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
