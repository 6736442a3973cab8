// Unit tests for loadgen/http_client.c: URL parsing.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/http_client.h"

static void test_url_parse(void **state) {
    (void)state;
    static const struct { const char *url; int ok; const char *host, *port, *path; } rows[] = {
        {"http://127.0.0.1:8080/v1/classify", 1, "127.0.0.1", "8080", "/v1/classify"},
        {"http://localhost/x", 1, "localhost", "80", "/x"},
        {"http://[::1]:9000", 1, "::1", "9000", "/"},
        {"HTTP://host:1/", 1, "host", "1", "/"},
        {"https://host/", 0, NULL, NULL, NULL},
        {"ftp://host/", 0, NULL, NULL, NULL},
        {"http://host:0/", 0, NULL, NULL, NULL},
        {"http://host:99999/", 0, NULL, NULL, NULL},
        {"http://:80/", 0, NULL, NULL, NULL},
        {"http://[::1/", 0, NULL, NULL, NULL},
        {"http://", 0, NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dlp_http_url u;
        dlp_status st = dlp_http_url_parse(rows[i].url, &u);
        assert_int_equal(st == DLP_OK, rows[i].ok);
        if (rows[i].ok) {
            assert_string_equal(u.host, rows[i].host);
            assert_string_equal(u.port, rows[i].port);
            assert_string_equal(u.path, rows[i].path);
        }
    }
    dlp_err_clear();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
