// hw/dnnl_isa: which instruction set oneDNN runs on here and which convolution kernels it picks for a
// representative ResNet layer — recorded in every result (dlp_versions_to_json) and printed by `dlperf version`,
// so a figure can be traced to the kernels behind it. ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) caps the ISA
// below the machine's best; the cap is named when set. Built only with oneDNN (*_dnnl.c).
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw/host.h"

// oneDNN's own name ("cpu_isa_avx512_core_amx") without its prefix.
const char *dlp_dnnl_isa_name_of(int isa) {
    const char *s = dnnl_cpu_isa2str((dnnl_cpu_isa_t)isa);
    if (!s) return "other";
    return strncmp(s, "cpu_isa_", 8) == 0 ? s + 8 : s;
}

const char *dlp_dnnl_isa_name(void) { return dlp_dnnl_isa_name_of((int)dnnl_get_effective_cpu_isa()); }

const char *dlp_dnnl_isa_cap(void) {
    const char *c = getenv("ONEDNN_MAX_CPU_ISA");
    if (!c || !c[0]) c = getenv("DNNL_MAX_CPU_ISA");
    return c && c[0] ? c : NULL;
}

// The implementation oneDNN picks for ResNet-50's layer1 3x3 convolution (batch 32, 64 channels, 56x56) with this
// data type, propagation kind and algorithm, or "none".
static void conv_impl(dnnl_engine_t eng, dnnl_data_type_t dt, dnnl_prop_kind_t prop, dnnl_alg_kind_t alg, char *out,
                      size_t len) {
    snprintf(out, len, "none");
    dnnl_memory_desc_t s = NULL, w = NULL, d = NULL;
    dnnl_dims_t sd = {32, 64, 56, 56}, wd = {64, 64, 3, 3}, st = {1, 1}, dil = {0, 0}, pad = {1, 1};
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_memory_desc_create_with_tag(&s, 4, sd, dt, dnnl_format_tag_any) == dnnl_success &&
        dnnl_memory_desc_create_with_tag(&w, 4, wd, dt, dnnl_format_tag_any) == dnnl_success &&
        dnnl_memory_desc_create_with_tag(&d, 4, sd, dt, dnnl_format_tag_any) == dnnl_success &&
        dnnl_convolution_forward_primitive_desc_create(&pd, eng, prop, alg, s, w, NULL, d, st, dil, pad, pad, NULL) ==
            dnnl_success) {
        const char *impl = NULL;
        if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
            snprintf(out, len, "%s", impl);
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (s) dnnl_memory_desc_destroy(s);
    if (w) dnnl_memory_desc_destroy(w);
    if (d) dnnl_memory_desc_destroy(d);
}

static char g_kernels[512];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void kernels_once(void) {
    dnnl_engine_t eng;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) {
        snprintf(g_kernels, sizeof g_kernels, "unknown (no oneDNN CPU engine)");
        return;
    }
    char f32t[64], f32i[64], wino[64], bf16t[64], bf16i[64];
    conv_impl(eng, dnnl_f32, dnnl_forward_training, dnnl_convolution_direct, f32t, sizeof f32t);
    conv_impl(eng, dnnl_f32, dnnl_forward_inference, dnnl_convolution_direct, f32i, sizeof f32i);
    conv_impl(eng, dnnl_f32, dnnl_forward_inference, dnnl_convolution_winograd, wino, sizeof wino);
    conv_impl(eng, dnnl_bf16, dnnl_forward_training, dnnl_convolution_direct, bf16t, sizeof bf16t);
    conv_impl(eng, dnnl_bf16, dnnl_forward_inference, dnnl_convolution_direct, bf16i, sizeof bf16i);
    dnnl_engine_destroy(eng);
    snprintf(g_kernels, sizeof g_kernels,
             "3x3 conv fp32 %s (forward_inference %s, Winograd %s), bf16 %s (forward_inference %s)", f32t, f32i,
             wino, bf16t, bf16i);
}

const char *dlp_dnnl_conv_kernels(void) {
    pthread_once(&g_once, kernels_once);
    return g_kernels;
}
