// Unit tests for core/opts' value-mapped choices (DLP_OPT_ENUM) and core/dtype's tables: a name stores its value,
// the default too, --help and the JSON echo spell the names, a wrong name is refused naming the choices.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/json.h"
#include "core/opts.h"

typedef struct {
    const char *args[4];
    int argc, rc, value;
} enum_case;

static void test_enum_cases(void **state) {
    (void)state;
    static const enum_case cases[] = {
        {{"x"}, 1, DLP_OK, DLP_PRECISION_AUTO},  // the default
        {{"x", "--precision", "fp32"}, 3, DLP_OK, DLP_DTYPE_F32},
        {{"x", "-p", "bf16"}, 3, DLP_OK, DLP_DTYPE_BF16},
        {{"x", "--precision=fp16"}, 2, DLP_OK, DLP_DTYPE_F16},
        {{"x", "--precision", "int8"}, 3, DLP_OK, DLP_DTYPE_I8},  // inference only: the commands that train refuse it
        {{"x", "--precision", "int4"}, 3, DLP_ERR_INVALID, 0},
        {{"x", "--precision", "FP32"}, 3, DLP_ERR_INVALID, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int v = 12345;
        dlp_opt t[] = {{"precision", 'p', DLP_OPT_ENUM, &v, "auto", NULL, "precision", dlp_precision_choices, 0}, {0}};
        char *argv[4];
        for (int k = 0; k < cases[i].argc; k++) argv[k] = (char *)cases[i].args[k];
        int rest;
        dlp_status st = dlp_opts_parse(t, NULL, cases[i].argc, argv, &rest);
        assert_int_equal(st, cases[i].rc);
        if (st) {
            assert_non_null(strstr(dlp_err_msg(), "auto|fp32|bf16|fp16"));
            dlp_err_clear();
            continue;
        }
        assert_int_equal(v, cases[i].value);
        json_t *j = dlp_opts_to_json(t);
        assert_string_equal(json_string_value(json_object_get(j, "precision")),
                            dlp_opt_choice_name(dlp_precision_choices, cases[i].value));
        json_decref(j);
    }
}

static void test_enum_help(void **state) {
    (void)state;
    int v = 0;
    dlp_opt t[] = {{"precision", 'p', DLP_OPT_ENUM, &v, "fp32", NULL, "compute type", dlp_dtype_choices, 0}, {0}};
    char buf[4096] = "";
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    assert_non_null(f);
    dlp_opts_help(f, "usage: x", t);
    fclose(f);
    assert_non_null(strstr(buf, "-p, --precision fp32|bf16|fp16"));
    assert_non_null(strstr(buf, "(default fp32)"));
}

// DLP_OPT_FROM_DST: the default is what the config's *_default() put in dst; --help prints it; a value given wins.
static void test_from_dst(void **state) {
    (void)state;
    double lr = 0.1;
    int batch = 32, decay = 2;
    static const dlp_opt_choice decays[] = {{"cosine", 1}, {"step", 2}, {NULL, 0}};
    dlp_opt t[] = {
        {"lr", 0, DLP_OPT_DOUBLE, &lr, DLP_OPT_FROM_DST, "X", "learning rate", NULL, 0},
        {"batch", 'b', DLP_OPT_INT, &batch, DLP_OPT_FROM_DST, "N", "batch", NULL, 0},
        {"schedule", 0, DLP_OPT_ENUM, &decay, DLP_OPT_FROM_DST, NULL, "decay", decays, 0},
        {0},
    };
    char *argv[] = {"x", "-b", "8"};
    int rest;
    assert_int_equal(dlp_opts_parse(t, NULL, 3, argv, &rest), DLP_OK);
    assert_true(lr == 0.1);
    assert_int_equal(batch, 8);
    assert_int_equal(decay, 2);
    char buf[4096] = "";
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    assert_non_null(f);
    dlp_opts_help(f, NULL, t);
    fclose(f);
    assert_non_null(strstr(buf, "learning rate (default 0.1)"));
    assert_non_null(strstr(buf, "batch (default 8)"));  // what dst holds now
    assert_non_null(strstr(buf, "--schedule cosine|step"));
    assert_non_null(strstr(buf, "decay (default step)"));
}

static void test_dtype_parse(void **state) {
    (void)state;
    dlp_dtype d = DLP_DTYPE_U8;
    assert_int_equal(dlp_dtype_parse("bf16", &d), DLP_OK);
    assert_int_equal(d, DLP_DTYPE_BF16);
    for (int i = 0; dlp_dtype_choices[i].name; i++) {  // the names round-trip through dlp_dtype_name
        assert_int_equal(dlp_dtype_parse(dlp_dtype_name((dlp_dtype)dlp_dtype_choices[i].value), &d), DLP_OK);
        assert_int_equal(d, dlp_dtype_choices[i].value);
    }
    assert_int_equal(dlp_dtype_parse("auto", &d), DLP_ERR_INVALID);
    assert_non_null(strstr(dlp_err_msg(), "'auto' is not one of fp32|bf16|fp16"));
    dlp_err_clear();
    assert_int_equal(dlp_dtype_parse(NULL, &d), DLP_ERR_INVALID);
    dlp_err_clear();
    assert_string_equal(dlp_opt_choice_name(dlp_dtype_choices, 99), "?");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enum_cases),
        cmocka_unit_test(test_enum_help),
        cmocka_unit_test(test_from_dst),
        cmocka_unit_test(test_dtype_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
