// cli/version: `dlperf version` — dlperf's version, the libraries compiled in, and this host.
#include <stdio.h>

#include "cli/cli.h"
#include "core/json.h"
#include "core/opts.h"
#include "hw/host.h"

int dlp_cli_version(int argc, char **argv) {
    int as_json = 0;
    dlp_opt opts[] = {
        {"json", 0, DLP_OPT_FLAG, &as_json, NULL, NULL, "print JSON instead of text", NULL, 0},
        {0},
    };
    dlp_status st = dlp_cli_parse(opts, "usage: dlperf version [--json]", argc, argv);
    if (st) return dlp_cli_fail(st);
    dlp_host_info h;
    dlp_host_probe(&h);
    json_t *o = json_object();
    json_object_set_new(o, "versions", dlp_versions_to_json());
    json_object_set_new(o, "host", dlp_host_to_json(&h));
    if (as_json) {
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        putchar('\n');
    } else {
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(o, "versions"), k, v) printf("%-14s %s\n", k, json_string_value(v));
        printf("%-14s %s, %d CPUs (%d allowed), %.1f GiB\n", "host", h.cpu_model, h.cpus_online, h.cpus_allowed,
               (double)h.mem_total_bytes / (1 << 30));
    }
    json_decref(o);
    return 0;
}
