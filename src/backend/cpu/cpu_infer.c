// backend/cpu/cpu_infer: the inference plan. Layers are grouped — conv [+ BN folded into weights and bias]
// [+ residual add as a sum post-op] [+ ReLU post-op]; BN [+ ReLU] with running statistics; add [+ ReLU] —
// and each group runs as one primitive at the position of its last layer. Activations live in pooled
// buffers reused as soon as their last consumer has run; the residual sum writes into the shortcut's buffer.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"

typedef struct group {
    int root;        // first layer (conv, bn, add, relu, pool, fc)
    int bn;          // conv: BN folded in (-1)
    int add;         // conv: the add whose other input is summed in (-1)
    int sum_in;      // the add's other input layer
    int relu;        // ReLU fused as a post-op / flag (-1)
    int last;        // the layer whose output the group produces
} group;

// The only consumer of layer li, or -1 (none, several, or li is the output).
static int sole_consumer(const dlp_net *net, int li) {
    if (dlp_net_consumers(net, li) != 1) return -1;
    for (int j = li + 1; j < net->nlayers; j++)
        if (net->layers[j].in0 == li || net->layers[j].in1 == li) return j;
    return -1;
}

static void plan_groups(const dlp_net *net, group *g, int *owner) {
    for (int i = 0; i < net->nlayers; i++) owner[i] = -1;
    for (int i = 1; i < net->nlayers; i++) {
        if (owner[i] >= 0) continue;
        group *x = &g[i];
        x->root = x->last = i;
        x->bn = x->add = x->sum_in = x->relu = -1;
        owner[i] = i;
        const dlp_layer *l = &net->layers[i];
        int c = i, j;
        if (l->kind == DLP_LAYER_CONV) {
            if ((j = sole_consumer(net, c)) >= 0 && net->layers[j].kind == DLP_LAYER_BN && owner[j] < 0) {
                x->bn = c = j;
                owner[j] = i;
            }
            if ((j = sole_consumer(net, c)) >= 0 && net->layers[j].kind == DLP_LAYER_ADD && owner[j] < 0 &&
                net->layers[j].in0 != net->layers[j].in1) {
                x->sum_in = net->layers[j].in0 == c ? net->layers[j].in1 : net->layers[j].in0;
                x->add = c = j;
                owner[j] = i;
            }
        }
        if (l->kind == DLP_LAYER_CONV || l->kind == DLP_LAYER_BN || l->kind == DLP_LAYER_ADD) {
            if ((j = sole_consumer(net, c)) >= 0 && net->layers[j].kind == DLP_LAYER_RELU && owner[j] < 0) {
                x->relu = c = j;
                owner[j] = i;
            }
        }
        x->last = c;
    }
}

// A conv group's forward step: its arguments (a[na], room for one more) and the bias if any; the step named after
// the layer and what the group fused ("layer1.0.conv2 conv int8+bn+add+relu").
static dlp_status conv_group_step(cpu_plan *p, const group *g, const dlp_layer *l, const char *kind,
                                  dnnl_primitive_desc_t pd, dnnl_exec_arg_t *a, int na, dnnl_memory_t bm) {
    if (bm) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bm};
    char w[64];
    snprintf(w, sizeof w, "%s conv%s%s%s%s", l->name, kind, g->bn >= 0 ? "+bn" : "", g->add >= 0 ? "+add" : "",
             g->relu >= 0 ? "+relu" : "");
    return cpu_step_prim(p, &p->fwd, pd, na, a, w);
}

static void consumed(cpu_plan *p, int v) {
    cpu_value *x = &p->vals[v];
    if (--x->uses_left <= 0 && v != p->out_value && v != p->in_value) cpu_tensor_release(p, x->x);
}

static dlp_status new_out(cpu_plan *p, const_dnnl_memory_desc_t md, int layer, int *out) {
    cpu_tensor *t;
    if (layer == p->net.nlayers - 1) DLP_CHECK(cpu_tensor_new(p, md, NULL, &t));
    else DLP_CHECK(cpu_tensor_pooled(p, md, &t));
    int v = cpu_value_new(p, t, layer);
    if (v < 0) return dlp_err_status();
    *out = v;
    return DLP_OK;
}

// A value whose tensor is the same buffer as another's (in-place ops).
static dlp_status alias_out(cpu_plan *p, cpu_tensor *t, int layer, int *out) {
    cpu_tensor_retain(p, t);
    int v = cpu_value_new(p, t, layer);
    if (v < 0) return dlp_err_status();
    *out = v;
    return DLP_OK;
}

// May a group write its output over value v (v's last use is this group, v is a pooled activation)?
static int can_overwrite(const cpu_plan *p, int v) {
    const cpu_value *x = &p->vals[v];
    return x->uses_left == 1 && v != p->in_value && v != p->out_value && cpu_tensor_exclusive(p, x->x);
}

static dlp_status vec_mem(cpu_plan *p, float *data, int64_t c, dnnl_memory_t *out) {
    const_dnnl_memory_desc_t md;
    DLP_CHECK(cpu_md_plain(p, &md, 1, &c, dnnl_f32));
    return cpu_mem_new(p, md, data, out);
}

// The fused residual sum (its scale and stored type: int8 sums read the shortcut's integers; fp32/bf16 1, undef)
// and ReLU as post-ops.
static dlp_status post_ops(dnnl_primitive_attr_t attr, int sum, float sum_scale, dnnl_data_type_t sum_dt, int relu) {
    if (!sum && !relu) return DLP_OK;
    dnnl_post_ops_t po;
    if (dnnl_post_ops_create(&po) != dnnl_success) return DLP_ERR(DLP_ERR_INTERNAL, "oneDNN: post-ops");
    dlp_status st = DLP_OK;
    if (sum && dnnl_post_ops_append_sum(po, sum_scale, 0, sum_dt) != dnnl_success)
        st = DLP_ERR(DLP_ERR_INTERNAL, "oneDNN: sum post-op");
    if (!st && relu && dnnl_post_ops_append_eltwise(po, dnnl_eltwise_relu, 0.f, 0.f) != dnnl_success)
        st = DLP_ERR(DLP_ERR_INTERNAL, "oneDNN: relu post-op");
    if (!st && dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success)
        st = DLP_ERR(DLP_ERR_INTERNAL, "oneDNN: post-ops");
    dnnl_post_ops_destroy(po);
    return st;
}

// ---- int8 -----------------------------------------------------------------------------------------------
// An int8 plan stores the activations between int8 convolutions as u8 (after a ReLU) or s8, each value with one
// scale (real = stored * scale) from the calibrated range of the layer it holds; the other ops run in fp32 on
// scaled conversions (oneDNN reorders with runtime scales), added only where an int8 value meets an fp32 op.

static int is_q8(dnnl_data_type_t dt) { return dt == dnnl_u8 || dt == dnnl_s8; }

static dlp_status q8_range(const cpu_plan *p, int layer, float *range) {
    const float r = p->cfg.act_range ? p->cfg.act_range[layer] : 0.f;
    if (!(r > 0.f) || !isfinite(r))
        return DLP_ERR(DLP_ERR_INVALID, "cpu: int8: the calibration has no range for the output of %s (layer %d)",
                       p->net.layers[layer].name, layer);
    *range = r;
    return DLP_OK;
}

static float q8_scale(float range, dnnl_data_type_t dt) { return range / (dt == dnnl_u8 ? 255.f : 127.f); }

// The int8 type value v is (or would be) stored in: its own when it is int8, else u8 when its layer's calibrated
// minimum is >= 0, s8 otherwise.
static dnnl_data_type_t q8_type(const cpu_plan *p, int v) {
    const dnnl_data_type_t dt = cpu_md_dt(p->vals[v].x->md);
    if (is_q8(dt)) return dt;
    const int layer = p->vals[v].layer;
    return layer >= 0 && p->cfg.act_min && p->cfg.act_min[layer] >= 0.f ? dnnl_u8 : dnnl_s8;
}

// md's layout with element type dt: plain strided layouts and nChw{4,8,16}c (what oneDNN picks for activations).
static dlp_status md_retype(cpu_plan *p, const_dnnl_memory_desc_t md, dnnl_data_type_t dt,
                            const_dnnl_memory_desc_t *out) {
    int nd = 0, nblks = -1;
    const dnnl_dims_t *dims = NULL, *strides = NULL, *blks = NULL, *idxs = NULL;
    dnnl_memory_desc_query(md, dnnl_query_ndims_s32, &nd);
    dnnl_memory_desc_query(md, dnnl_query_dims, &dims);
    dnnl_memory_desc_query(md, dnnl_query_inner_nblks_s32, &nblks);
    dnnl_memory_desc_query(md, dnnl_query_strides, &strides);
    dnnl_memory_desc_t m = NULL;
    dnnl_status_t st = dnnl_unimplemented;
    if (dims && strides && nblks == 0) {
        st = dnnl_memory_desc_create_with_strides(&m, nd, *dims, dt, *strides);
    } else if (dims && nd == 4 && nblks == 1) {
        dnnl_memory_desc_query(md, dnnl_query_inner_blks, &blks);
        dnnl_memory_desc_query(md, dnnl_query_inner_idxs, &idxs);
        const int64_t b = blks ? (*blks)[0] : 0;
        if (idxs && (*idxs)[0] == 1 && (b == 16 || b == 8 || b == 4))
            st = dnnl_memory_desc_create_with_tag(&m, nd, *dims, dt,
                                                  b == 16 ? dnnl_aBcd16b : b == 8 ? dnnl_aBcd8b : dnnl_aBcd4b);
    }
    if (st != dnnl_success) return DLP_ERR(DLP_ERR_UNSUPPORTED, "cpu: int8: an activation layout with no int8 twin here");
    *out = cpu_md_keep(p, m);
    dnnl_memory_desc_destroy(m);
    return *out ? DLP_OK : dlp_err_status();
}

static dlp_status scale_mem(cpu_plan *p, float v, dnnl_memory_t *out) {
    float *d = cpu_alloc(p, sizeof(float));
    if (!d) return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    *d = v;
    return vec_mem(p, d, 1, out);
}

// Value v in descriptor want, as cpu_value_as; when the element types differ and one is u8/s8, a reorder with
// runtime scales: to int8 with the calibrated scale of v's layer, from int8 with v's scale.
static dlp_status value_as(cpu_plan *p, int v, const_dnnl_memory_desc_t want, int *out) {
    const dnnl_data_type_t from = cpu_md_dt(p->vals[v].x->md), to = cpu_md_dt(want);
    if (from == to || (!is_q8(from) && !is_q8(to))) {
        DLP_CHECK(cpu_value_as(p, v, want, &p->fwd, 0, out));
        p->vals[*out].scale = p->vals[v].scale;
        return DLP_OK;
    }
    // one scaled copy per descriptor, shared by v's later readers (the max-pool output feeds a block's conv1 and its
    // downsample): it lives until v's last reader has consumed it
    for (int c = p->vals[v].next_conv; c >= 0; c = p->vals[c].next_conv)
        if (dnnl_memory_desc_equal(p->vals[c].x->md, want)) {
            *out = c;
            return DLP_OK;
        }
    const int layer = p->vals[v].layer;
    float from_scale = 1.f, to_scale = 1.f;
    if (is_q8(from)) from_scale = p->vals[v].scale;
    if (is_q8(to)) {
        float r;
        if (is_q8(from)) to_scale = from_scale;  // u8 <-> s8: same scale (values beyond the type saturate)
        else {
            if (layer < 0) return DLP_ERR(DLP_ERR_INTERNAL, "cpu: int8: quantizing a value of no layer");
            DLP_CHECK(q8_range(p, layer, &r));
            to_scale = q8_scale(r, to);
        }
    }
    dnnl_primitive_attr_t attr;
    DLP_CHECK(cpu_attr_new(&attr));
    dlp_status s = DLP_OK;
    if (is_q8(from) && dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_SRC, 0) != dnnl_success)
        s = DLP_ERR(DLP_ERR_INTERNAL, "oneDNN: reorder scales");
    if (!s && is_q8(to) && dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_DST, 0) != dnnl_success)
        s = DLP_ERR(DLP_ERR_INTERNAL, "oneDNN: reorder scales");
    dnnl_primitive_desc_t pd = NULL;
    if (!s && dnnl_reorder_primitive_desc_create(&pd, p->vals[v].x->md, p->eng, want, p->eng, attr) != dnnl_success) {
        pd = NULL;
        s = DLP_ERR(DLP_ERR_UNSUPPORTED, "oneDNN cannot reorder with scales here");
    }
    dnnl_primitive_attr_destroy(attr);
    DLP_CHECK(s);
    cpu_tensor *t = NULL;
    dnnl_memory_t sm = NULL, dm = NULL;
    s = cpu_tensor_pooled(p, want, &t);
    int c = s ? -1 : cpu_value_new(p, t, layer);
    if (!s && c < 0) s = dlp_err_status();
    if (!s && is_q8(from)) s = scale_mem(p, from_scale, &sm);
    if (!s && is_q8(to)) s = scale_mem(p, to_scale, &dm);
    if (!s) {
        dnnl_exec_arg_t a[4] = {{DNNL_ARG_FROM, p->vals[v].x->mem}, {DNNL_ARG_TO, t->mem}};
        int na = 2;
        if (sm) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, sm};
        if (dm) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_SCALES | DNNL_ARG_DST, dm};
        char w[64];
        snprintf(w, sizeof w, "%s %s", layer >= 0 ? p->net.layers[layer].name : "value",
                 is_q8(to) ? "quantize" : "dequantize");
        s = cpu_step_prim(p, &p->fwd, pd, na, a, w);
    }
    dnnl_primitive_desc_destroy(pd);
    DLP_CHECK(s);
    p->vals[c].src_value = v;
    p->vals[c].scale = is_q8(to) ? to_scale : 0.f;
    p->vals[c].uses_left = p->vals[v].uses_left;  // each reader consumes both v and the copy
    p->vals[c].next_conv = p->vals[v].next_conv;
    p->vals[v].next_conv = c;
    p->nconverts++;
    p->nq8_converts++;
    *out = c;
    return DLP_OK;
}

// Value v as fp32 in its own layout (itself when it is fp32 or bf16 already).
static dlp_status value_float(cpu_plan *p, int v, int *out) {
    const_dnnl_memory_desc_t md = p->vals[v].x->md;
    if (!is_q8(cpu_md_dt(md))) {
        *out = v;
        return DLP_OK;
    }
    const_dnnl_memory_desc_t fmd;
    DLP_CHECK(md_retype(p, md, dnnl_f32, &fmd));
    return value_as(p, v, fmd, out);
}

static dlp_status q8_attr(dnnl_primitive_attr_t attr, int sum, float sum_scale, dnnl_data_type_t sum_dt, int relu) {
    if (dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_SRC, 0) != dnnl_success ||
        dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_WEIGHTS, 1) != dnnl_success ||
        dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_DST, 0) != dnnl_success)
        return DLP_ERR(DLP_ERR_INTERNAL, "oneDNN: convolution scales");
    // oneDNN 3.x: dst = round(post_ops(src_scale * wei_scale * (src * wei) + bias) / dst_scale), the sum reading
    // the stored integers: its scale is the shortcut's
    return post_ops(attr, sum, sum_scale, sum_dt, relu);
}

// An int8 convolution group: s8 weights (BN folded, then quantized per output channel), u8/s8 input, bias in
// fp32, the residual sum read from the shortcut's int8 buffer, ReLU, and requantization to the output's
// calibrated scale, in one oneDNN primitive (forward_inference, layouts chosen by oneDNN).
static dlp_status group_conv_q8(cpu_plan *p, const group *g) {
    const dlp_net *net = &p->net;
    const dlp_layer *l = &net->layers[g->root], *xl = &net->layers[l->in0];
    const int64_t K = l->c;
    int64_t sd[4] = {p->batch, xl->c, xl->h, xl->w}, wd[4] = {l->c, xl->c, l->k, l->k};
    int64_t dd[4] = {p->batch, l->c, l->h, l->w};
    const int x = p->val_of[l->in0];
    const dnnl_data_type_t sdt = q8_type(p, x), ddt = g->relu >= 0 ? dnnl_u8 : dnnl_s8;
    float drange;
    DLP_CHECK(q8_range(p, g->last, &drange));
    const float dscale = q8_scale(drange, ddt);
    const int sv = g->add >= 0 ? p->val_of[g->sum_in] : -1;
    dnnl_data_type_t sumdt = ddt;
    float sum_scale = 1.f;
    if (sv >= 0) {
        sumdt = q8_type(p, sv);
        if (is_q8(cpu_md_dt(p->vals[sv].x->md))) {
            sum_scale = p->vals[sv].scale;
        } else {
            float r;
            DLP_CHECK(q8_range(p, g->sum_in, &r));
            sum_scale = q8_scale(r, sumdt);
        }
    }
    const_dnnl_memory_desc_t src, wei, bias, dst;
    DLP_CHECK(cpu_md_any(p, &src, 4, sd, sdt));
    DLP_CHECK(cpu_md_any(p, &wei, 4, wd, dnnl_s8));
    DLP_CHECK(cpu_md_plain(p, &bias, 1, &K, dnnl_f32));
    DLP_CHECK(cpu_md_any(p, &dst, 4, dd, ddt));
    dnnl_dims_t st = {l->stride, l->stride}, dil = {0, 0}, pad = {l->pad, l->pad};
    dnnl_primitive_attr_t attr;
    DLP_CHECK(cpu_attr_new(&attr));
    dlp_status s = q8_attr(attr, sv >= 0, sum_scale, sumdt, g->relu >= 0);
    dnnl_primitive_desc_t pd = NULL;
    if (!s) {
        s = cpu_pd_check(dnnl_convolution_forward_primitive_desc_create(&pd, p->eng, dnnl_forward_inference,
                                                                        dnnl_convolution_direct, src, wei,
                                                                        g->bn >= 0 ? bias : NULL, dst, st, dil, pad,
                                                                        pad, attr),
                         l->name);
        if (s) pd = NULL;
    }
    dnnl_primitive_attr_destroy(attr);
    DLP_CHECK(s);
    if (!p->conv_impl[0] && l->k == 3) snprintf(p->conv_impl, sizeof p->conv_impl, "%s", cpu_pd_impl(pd));
    const_dnnl_memory_desc_t smd = cpu_pd_md(pd, dnnl_query_src_md, 0), dmd = cpu_pd_md(pd, dnnl_query_dst_md, 0);
    int xin = -1, out = -1, sumv = -1;
    dnnl_memory_t wm = NULL, bm = NULL, wsm = NULL, ssm = NULL, dsm = NULL;
    float *fb = NULL, *ws = cpu_alloc(p, (size_t)K * sizeof(float));
    s = ws ? DLP_OK : DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    if (!s) s = value_as(p, x, smd, &xin);
    if (!s && g->bn >= 0) {
        fb = cpu_alloc(p, (size_t)K * sizeof(float));
        if (!fb) s = DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
        if (!s) s = vec_mem(p, fb, K, &bm);
        p->nfolded_bn++;
    }
    if (!s) s = cpu_wcopy_add_q8(p, l->param0, cpu_pd_md(pd, dnnl_query_weights_md, 0), g->bn, fb, ws, &wm);
    if (!s) s = vec_mem(p, ws, K, &wsm);
    if (!s) s = scale_mem(p, p->vals[xin].scale, &ssm);
    if (!s) s = scale_mem(p, dscale, &dsm);
    if (!s && sv >= 0) {
        // the output starts as the shortcut (read as sumdt): its own buffer when this is its last use, else a copy
        const_dnnl_memory_desc_t summd = dmd;
        if (sumdt != ddt) s = md_retype(p, dmd, sumdt, &summd);
        if (!s) s = value_as(p, sv, summd, &sumv);
        if (!s && !((sumv != sv && p->vals[sumv].uses_left <= 1) || (can_overwrite(p, sv) && sv != xin))) {
            int cv = -1;
            s = new_out(p, summd, -1, &cv);
            char w[64];
            snprintf(w, sizeof w, "%s shortcut copy", l->name);
            if (!s) s = cpu_step_reorder(p, &p->fwd, p->vals[sumv].x->mem, p->vals[sumv].x->md, p->vals[cv].x->mem,
                                         summd, w);
            if (!s) sumv = cv;  // released below with the converted copies
        }
        if (!s) {
            cpu_tensor *t = p->vals[sumv].x;
            if (sumdt != ddt) s = cpu_tensor_view(p, t, dmd, &t);
            else cpu_tensor_retain(p, t);
            if (!s) {
                out = cpu_value_new(p, t, g->last);
                if (out < 0) s = dlp_err_status();
            }
        }
        p->nfused_sum++;
    } else if (!s) {
        s = new_out(p, dmd, g->last, &out);
    }
    if (!s) {
        dnnl_exec_arg_t a[8] = {{DNNL_ARG_SRC, p->vals[xin].x->mem}, {DNNL_ARG_WEIGHTS, wm},
                                {DNNL_ARG_DST, p->vals[out].x->mem},
                                {DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, ssm},
                                {DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS, wsm},
                                {DNNL_ARG_ATTR_SCALES | DNNL_ARG_DST, dsm}};
        s = conv_group_step(p, g, l, " int8", pd, a, 6, bm);
    }
    dnnl_primitive_desc_destroy(pd);
    DLP_CHECK(s);
    p->vals[out].scale = dscale;
    p->val_of[g->last] = out;
    p->nq8_convs++;
    if (xin != x) consumed(p, xin);
    consumed(p, x);
    if (sv >= 0) {
        if (sumv != sv) consumed(p, sumv);
        consumed(p, sv);
    }
    return DLP_OK;
}

static dlp_status group_conv(cpu_plan *p, const group *g) {
    const dlp_net *net = &p->net;
    const dlp_layer *l = &net->layers[g->root], *xl = &net->layers[l->in0];
    const_dnnl_memory_desc_t src, wei, bias, dst;
    int64_t sd[4] = {p->batch, xl->c, xl->h, xl->w}, wd[4] = {l->c, xl->c, l->k, l->k}, K = l->c;
    int64_t dd[4] = {p->batch, l->c, l->h, l->w};
    DLP_CHECK(cpu_md_any(p, &src, 4, sd, p->dt));
    DLP_CHECK(cpu_md_any(p, &wei, 4, wd, p->dt));
    DLP_CHECK(cpu_md_plain(p, &bias, 1, &K, dnnl_f32));
    DLP_CHECK(cpu_md_any(p, &dst, 4, dd, p->dt));
    dnnl_dims_t st = {l->stride, l->stride}, dil = {0, 0}, pad = {l->pad, l->pad};
    // Without AMX, oneDNN 2.6 sends forward_inference to its brgemm convolutions (NHWC), 2-4x slower on an
    // avx512_core_bf16 CPU (measured on Zen 4: bf16 13.8 vs 43 img/s, fp32 19 vs 25 img/s for ResNet-50 at batch
    // 32) than the direct jit kernels it picks for forward_training — with the same post-ops. With AMX the brgemm
    // kernels are the fast path, so forward_inference there.
    // DLPERF_CPU_INFER_PROP=inference|training forces one (the tests reach both paths on any CPU this way: the
    // forward_inference kernels, and the Winograd weight format only forward_inference uses, whose weight reorder
    // wants a scratchpad, are otherwise reached only on an AMX machine).
    const int amx = (p->isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx;
    const int inference_prop = p->infer_prop >= 0 ? p->infer_prop : amx;
    const dnnl_prop_kind_t prop = inference_prop ? dnnl_forward_inference : dnnl_forward_training;
    p->infer_conv_training_prop = !inference_prop;
    dnnl_primitive_attr_t attr;
    DLP_CHECK(cpu_attr_new(&attr));
    dlp_status s = post_ops(attr, g->add >= 0, 1.f, dnnl_data_type_undef, g->relu >= 0);
    dnnl_primitive_desc_t pd = NULL;
    dnnl_alg_kind_t algs[2];
    const int nalg = cpu_conv_algs(p, l, CPU_CONV_FWD, algs);
    for (int a = 0; a < nalg && !s && !pd; a++) {
        if (cpu_pd_check(dnnl_convolution_forward_primitive_desc_create(&pd, p->eng, prop, algs[a], src, wei,
                                                                        g->bn >= 0 ? bias : NULL, dst, st, dil, pad,
                                                                        pad, attr),
                         l->name) == DLP_OK) {
            if (algs[a] == dnnl_convolution_winograd) p->nwinograd++;
        } else {
            pd = NULL;
            if (a == nalg - 1) s = dlp_err_status();
            else dlp_err_clear();  // no Winograd for this shape and post-ops here: direct
        }
    }
    dnnl_primitive_attr_destroy(attr);
    DLP_CHECK(s);
    if (!p->conv_impl[0] && l->k == 3) snprintf(p->conv_impl, sizeof p->conv_impl, "%s", cpu_pd_impl(pd));
    const_dnnl_memory_desc_t smd = cpu_pd_md(pd, dnnl_query_src_md, 0), dmd = cpu_pd_md(pd, dnnl_query_dst_md, 0);
    int xin = -1, out = -1, sumv = -1;
    dnnl_memory_t wm = NULL, bm = NULL;
    float *fb = NULL;
    s = value_as(p, p->val_of[l->in0], smd, &xin);
    if (!s && g->bn >= 0) {
        fb = cpu_alloc(p, (size_t)K * sizeof(float));
        if (!fb) s = DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
        if (!s) s = vec_mem(p, fb, K, &bm);
        p->nfolded_bn++;
    }
    if (!s) s = cpu_wcopy_add(p, l->param0, cpu_pd_md(pd, dnnl_query_weights_md, 0), g->bn, fb, 0, &wm);
    if (!s && g->add >= 0) {
        // the output starts as the shortcut: its own buffer when this is its last use, else a copy
        int sv = p->val_of[g->sum_in];
        s = value_as(p, sv, dmd, &sumv);
        if (!s) {
            if ((sumv != sv && p->vals[sumv].uses_left <= 1) || (can_overwrite(p, sv) && sv != xin)) {
                s = alias_out(p, p->vals[sumv].x, g->last, &out);
            } else {
                s = new_out(p, dmd, g->last, &out);
                char w[64];
                snprintf(w, sizeof w, "%s shortcut copy", l->name);
                if (!s) s = cpu_step_reorder(p, &p->fwd, p->vals[sumv].x->mem, p->vals[sumv].x->md,
                                             p->vals[out].x->mem, dmd, w);
            }
        }
        p->nfused_sum++;
    } else if (!s) {
        s = new_out(p, dmd, g->last, &out);
    }
    if (!s) {
        dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, p->vals[xin].x->mem}, {DNNL_ARG_WEIGHTS, wm},
                                {DNNL_ARG_DST, p->vals[out].x->mem}};
        s = conv_group_step(p, g, l, "", pd, a, 3, bm);
    }
    dnnl_primitive_desc_destroy(pd);
    DLP_CHECK(s);
    p->val_of[g->last] = out;
    if (xin != p->val_of[l->in0]) consumed(p, xin);
    consumed(p, p->val_of[l->in0]);
    if (g->add >= 0) {
        if (sumv != p->val_of[g->sum_in]) consumed(p, sumv);
        consumed(p, p->val_of[g->sum_in]);
    }
    return DLP_OK;
}

static dlp_status group_bn(cpu_plan *p, const group *g) {
    const dlp_layer *l = &p->net.layers[g->root];
    int x;
    DLP_CHECK(value_float(p, p->val_of[l->in0], &x));  // int8 plans: BN in fp32
    const_dnnl_memory_desc_t md = p->vals[x].x->md;
    unsigned flags = dnnl_use_scale | dnnl_use_shift | dnnl_use_global_stats | (g->relu >= 0 ? dnnl_fuse_norm_relu : 0);
    dnnl_primitive_desc_t pd;
    DLP_CHECK(cpu_pd_check(dnnl_batch_normalization_forward_primitive_desc_create(&pd, p->eng, dnnl_forward_inference, md,
                                                                                 md, l->bn_eps, flags, p->attr),
                           l->name));
    const int64_t C = l->c;
    const dlp_param *ga = &p->net.params[l->param0], *be = &p->net.params[l->param0 + 1];
    const dlp_param *rm = &p->net.bufs[l->buf0], *rv = &p->net.bufs[l->buf0 + 1];
    dnnl_memory_t sc, sh, mm, vm;
    int out = -1;
    dlp_status s = vec_mem(p, p->params + ga->offset, C, &sc);
    if (!s) s = vec_mem(p, p->params + be->offset, C, &sh);
    if (!s) s = vec_mem(p, p->bufs + rm->offset, C, &mm);
    if (!s) s = vec_mem(p, p->bufs + rv->offset, C, &vm);
    if (!s) s = can_overwrite(p, x) ? alias_out(p, p->vals[x].x, g->last, &out) : new_out(p, md, g->last, &out);
    if (!s) {
        dnnl_exec_arg_t a[6] = {{DNNL_ARG_SRC, p->vals[x].x->mem}, {DNNL_ARG_DST, p->vals[out].x->mem},
                                {DNNL_ARG_SCALE, sc}, {DNNL_ARG_SHIFT, sh}, {DNNL_ARG_MEAN, mm}, {DNNL_ARG_VARIANCE, vm}};
        char w[64];
        snprintf(w, sizeof w, "%s bn%s", l->name, g->relu >= 0 ? "+relu" : "");
        s = cpu_step_prim(p, &p->fwd, pd, 6, a, w);
    }
    dnnl_primitive_desc_destroy(pd);
    DLP_CHECK(s);
    p->val_of[g->last] = out;
    if (x != p->val_of[l->in0]) consumed(p, p->val_of[l->in0]);
    consumed(p, x);
    return DLP_OK;
}

static dlp_status group_eltwise(cpu_plan *p, const group *g) {
    const dlp_layer *l = &p->net.layers[g->root];
    const int x0src = p->val_of[l->in0];
    int x0;
    DLP_CHECK(value_float(p, x0src, &x0));  // int8 plans: in fp32
    const_dnnl_memory_desc_t md = p->vals[x0].x->md;
    const int add = l->kind == DLP_LAYER_ADD;
    int x1 = -1, x1src = add ? p->val_of[l->in1] : -1, out = -1;
    if (add) DLP_CHECK(value_as(p, x1src, md, &x1));
    dnnl_primitive_desc_t pd = NULL;
    dlp_status s = DLP_OK;
    if (add) {
        dnnl_primitive_attr_t attr;
        DLP_CHECK(cpu_attr_new(&attr));
        s = post_ops(attr, 0, 1.f, dnnl_data_type_undef, g->relu >= 0);
        if (!s) s = cpu_pd_check(dnnl_binary_primitive_desc_create(&pd, p->eng, dnnl_binary_add, md, md, md, attr), "add");
        dnnl_primitive_attr_destroy(attr);
    } else {
        s = cpu_pd_check(dnnl_eltwise_forward_primitive_desc_create(&pd, p->eng, dnnl_forward_inference, dnnl_eltwise_relu,
                                                                    md, md, 0.f, 0.f, p->attr),
                         "relu");
    }
    DLP_CHECK(s);
    s = can_overwrite(p, x0) && x0 != x1 ? alias_out(p, p->vals[x0].x, g->last, &out) : new_out(p, md, g->last, &out);
    if (!s) {
        dnnl_exec_arg_t a[3];
        int na = 0;
        a[na++] = (dnnl_exec_arg_t){add ? DNNL_ARG_SRC_0 : DNNL_ARG_SRC, p->vals[x0].x->mem};
        if (add) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC_1, p->vals[x1].x->mem};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, p->vals[out].x->mem};
        char w[64];
        snprintf(w, sizeof w, "%s %s", p->net.layers[l->in0].name, add ? (g->relu >= 0 ? "add+relu" : "add") : "relu");
        s = cpu_step_prim(p, &p->fwd, pd, na, a, w);
    }
    dnnl_primitive_desc_destroy(pd);
    DLP_CHECK(s);
    p->val_of[g->last] = out;
    if (x0 != x0src) consumed(p, x0src);
    consumed(p, x0);
    if (add) {
        if (x1 != x1src) consumed(p, x1);
        consumed(p, x1src);
    }
    return DLP_OK;
}

static dlp_status group_pool(cpu_plan *p, const group *g) {
    const dlp_layer *l = &p->net.layers[g->root], *xl = &p->net.layers[l->in0];
    const int xsrc = p->val_of[l->in0], max = l->kind == DLP_LAYER_MAXPOOL;
    int x = xsrc;
    if (!max) DLP_CHECK(value_float(p, xsrc, &x));  // int8 plans: max pooling keeps u8/s8 (and the scale), average in fp32
    const_dnnl_memory_desc_t dst;
    int64_t dd[4] = {p->batch, l->c, l->h, l->w};
    DLP_CHECK(cpu_md_any(p, &dst, 4, dd, cpu_md_dt(p->vals[x].x->md)));
    dnnl_dims_t st, k, dil = {0, 0}, pad;
    if (max) {
        st[0] = st[1] = l->stride;
        k[0] = k[1] = l->k;
        pad[0] = pad[1] = l->pad;
    } else {
        st[0] = st[1] = 1;
        k[0] = xl->h;
        k[1] = xl->w;
        pad[0] = pad[1] = 0;
    }
    dnnl_primitive_desc_t pd;
    DLP_CHECK(cpu_pd_check(dnnl_pooling_forward_primitive_desc_create(
                               &pd, p->eng, dnnl_forward_inference,
                               max ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding, p->vals[x].x->md, dst, st, k,
                               dil, pad, pad, p->attr),
                           "pool"));
    int out = -1;
    dlp_status s = new_out(p, cpu_pd_md(pd, dnnl_query_dst_md, 0), g->last, &out);
    if (!s) {
        dnnl_exec_arg_t a[2] = {{DNNL_ARG_SRC, p->vals[x].x->mem}, {DNNL_ARG_DST, p->vals[out].x->mem}};
        char w[64];
        snprintf(w, sizeof w, "%s %s", xl->name, max ? "maxpool" : "avgpool");
        s = cpu_step_prim(p, &p->fwd, pd, 2, a, w);
    }
    dnnl_primitive_desc_destroy(pd);
    DLP_CHECK(s);
    p->vals[out].scale = p->vals[x].scale;
    p->val_of[g->last] = out;
    if (x != xsrc) consumed(p, xsrc);
    consumed(p, x);
    return DLP_OK;
}

static dlp_status group_fc(cpu_plan *p, const group *g) {
    const dlp_layer *l = &p->net.layers[g->root], *xl = &p->net.layers[l->in0];
    const_dnnl_memory_desc_t src, wei, bias, dst;
    int64_t sd[4] = {p->batch, xl->c, xl->h, xl->w}, wd[4] = {l->c, xl->c, xl->h, xl->w}, K = l->c,
            od[2] = {p->batch, l->c};
    dnnl_primitive_desc_t pd = NULL;
    // bf16 weights and input with fp32 logits when oneDNN has it, else fp32
    for (int attempt = p->dt == dnnl_bf16 ? 0 : 1; attempt < 2 && !pd; attempt++) {
        dnnl_data_type_t dt = attempt == 0 ? dnnl_bf16 : dnnl_f32;
        DLP_CHECK(cpu_md_any(p, &src, 4, sd, dt));
        DLP_CHECK(cpu_md_any(p, &wei, 4, wd, dt));
        DLP_CHECK(cpu_md_plain(p, &bias, 1, &K, dnnl_f32));
        DLP_CHECK(cpu_md_plain(p, &dst, 2, od, dnnl_f32));
        if (cpu_pd_check(dnnl_inner_product_forward_primitive_desc_create(&pd, p->eng, dnnl_forward_inference, src, wei,
                                                                          bias, dst, p->attr),
                         l->name)) {
            pd = NULL;
            if (attempt == 1) return dlp_err_status();
            dlp_err_clear();
        }
    }
    int xin = -1, out = -1;
    dnnl_memory_t wm = NULL, bm = NULL;
    const int x = p->val_of[l->in0];
    dlp_status s = value_as(p, x, cpu_pd_md(pd, dnnl_query_src_md, 0), &xin);
    if (!s) s = cpu_wcopy_add(p, l->param0, cpu_pd_md(pd, dnnl_query_weights_md, 0), -1, NULL, 0, &wm);
    if (!s) s = vec_mem(p, p->params + p->net.params[l->param0 + 1].offset, K, &bm);
    if (!s) s = new_out(p, cpu_pd_md(pd, dnnl_query_dst_md, 0), g->last, &out);
    if (!s) {
        dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, p->vals[xin].x->mem}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, bm},
                                {DNNL_ARG_DST, p->vals[out].x->mem}};
        char w[64];
        snprintf(w, sizeof w, "%s fc", l->name);
        s = cpu_step_prim(p, &p->fwd, pd, 4, a, w);
    }
    dnnl_primitive_desc_destroy(pd);
    DLP_CHECK(s);
    p->val_of[g->last] = out;
    if (xin != x) consumed(p, xin);
    consumed(p, x);
    return DLP_OK;
}

// Calibration: hands the output of layer s->n (tensor s->a, fp32) to the plan's observer after every forward. The
// first p->n samples' elements when the layout keeps the batch outermost (oneDNN's activation layouts do), else all.
static void observe_step(cpu_plan *p, const cpu_step *s) {
    const cpu_tensor *t = s->a;
    const int64_t total = (int64_t)(dnnl_memory_desc_get_size(t->md) / sizeof(float)), per = total / p->batch;
    int nblks = -1;
    const dnnl_dims_t *strides = NULL, *idxs = NULL;
    dnnl_memory_desc_query(t->md, dnnl_query_strides, &strides);
    dnnl_memory_desc_query(t->md, dnnl_query_inner_nblks_s32, &nblks);
    if (nblks > 0) dnnl_memory_desc_query(t->md, dnnl_query_inner_idxs, &idxs);
    int outer = strides && (*strides)[0] == per;
    for (int i = 0; outer && idxs && i < nblks; i++)
        if ((*idxs)[i] == 0) outer = 0;  // the batch blocked
    p->cfg.observe(p->cfg.observe_ctx, (int)s->n, t->data, outer ? (int64_t)p->n * per : total);
}

static dlp_status add_observe(cpu_plan *p, int v, int layer) {
    if (cpu_md_dt(p->vals[v].x->md) != dnnl_f32)
        return DLP_ERR(DLP_ERR_UNSUPPORTED, "cpu: calibration observes fp32 plans only");
    // the step runs right after the one that wrote the value: no later step has reused its buffer yet
    cpu_step proto;
    memset(&proto, 0, sizeof proto);
    proto.a = p->vals[v].x;
    proto.n = layer;
    snprintf(proto.what, sizeof proto.what, "%s observe", p->net.layers[layer].name);
    return cpu_step_fn_add(p, &p->fwd, observe_step, &proto);
}

dlp_status cpu_build_infer(cpu_plan *p) {
    const dlp_net *net = &p->net;
    const int L = net->nlayers;
    group *g = calloc((size_t)L, sizeof *g);
    int *owner = calloc((size_t)L, sizeof *owner);
    if (!g || !owner) {
        free(g);
        free(owner);
        return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    }
    plan_groups(net, g, owner);
    // uses: how many groups read each layer's output (a value is released after its last reader)
    int *reads = calloc((size_t)L, sizeof *reads);
    dlp_status s = reads ? DLP_OK : DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    for (int i = 1; i < L && !s; i++) {
        if (owner[i] != i) continue;
        const group *x = &g[i];
        reads[net->layers[x->root].in0]++;
        if (net->layers[x->root].kind == DLP_LAYER_ADD) reads[net->layers[x->root].in1]++;
        if (x->add >= 0) reads[x->sum_in]++;
    }
    p->vals[p->in_value].uses_left = reads ? reads[0] : 0;
    int first_conv = -1;  // int8 plans: the first convolution is int8 too unless cfg.int8_first_conv < 0
    for (int i = 1; i < L && first_conv < 0; i++)
        if (net->layers[i].kind == DLP_LAYER_CONV) first_conv = i;
    if (!s && p->cfg.observe) s = add_observe(p, p->in_value, 0);
    // groups run at their last layer: by then every input exists (inputs come from lower layers, and a group's
    // other members consume only its own chain)
    for (int i = 1; i < L && !s; i++) {
        int gi = -1;
        for (int r = 1; r <= i; r++)
            if (owner[r] == r && g[r].last == i) gi = r;
        if (gi < 0) continue;
        const group *x = &g[gi];
        const dlp_layer *l = &net->layers[x->root];
        if (l->kind == DLP_LAYER_ADD || x->add >= 0) {
            int other = l->kind == DLP_LAYER_ADD ? l->in1 : x->sum_in;
            if (p->val_of[other] < 0) s = DLP_ERR(DLP_ERR_INTERNAL, "cpu: %s runs before its input", l->name);
        }
        if (s) break;
        switch (l->kind) {
        case DLP_LAYER_CONV:
            s = p->int8 && (x->root != first_conv || p->cfg.int8_first_conv >= 0) ? group_conv_q8(p, x) : group_conv(p, x);
            break;
        case DLP_LAYER_BN: s = group_bn(p, x); break;
        case DLP_LAYER_ADD:
        case DLP_LAYER_RELU: s = group_eltwise(p, x); break;
        case DLP_LAYER_MAXPOOL:
        case DLP_LAYER_AVGPOOL: s = group_pool(p, x); break;
        case DLP_LAYER_FC: s = group_fc(p, x); break;
        default: s = DLP_ERR(DLP_ERR_INVALID, "cpu: layer %d (%s) has kind %d", x->root, l->name, (int)l->kind);
        }
        if (s) {
            dlp_err_context("inference plan, layer %s", l->name);
            break;
        }
        p->vals[p->val_of[x->last]].uses_left = reads[x->last];
        if (p->cfg.observe && (s = add_observe(p, p->val_of[x->last], x->last))) break;
    }
    if (!s) p->out_value = p->val_of[L - 1];
    // int8: the output the interface gives is fp32 (a u8/s8 last layer is dequantized, with its scale)
    if (!s && is_q8(cpu_md_dt(p->vals[p->out_value].x->md))) s = value_float(p, p->out_value, &p->out_value);
    free(g);
    free(owner);
    free(reads);
    return s;
}
