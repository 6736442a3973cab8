// backend/cpu/cpu_build: the training plan. Forward: one node per layer, with BN+ReLU fused
// (dnnl_fuse_norm_relu, the ReLU mask kept as workspace) and add+ReLU fused (binary add with a ReLU post-op);
// activations stay in the layouts the primitives chose (format "any"), converted only where a consumer wants
// another layout or type. Backward: the nodes in reverse, each writing the gradient of its inputs either
// directly (the first writer) or into a scratch tensor added in place (later writers); gradient buffers are
// pooled by lifetime, and an add passes its gradient on without a copy when it can.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"

typedef enum { NODE_CONV, NODE_BN, NODE_RELU, NODE_ADD, NODE_MAXPOOL, NODE_AVGPOOL, NODE_FC, NODE_CONVERT } node_kind;

typedef struct node {
    node_kind kind;
    int layer;          // net layer (the first of a fused group)
    int relu;           // a ReLU fused in (BN, ADD)
    int in[2];          // values (in[1] only for ADD)
    int out;            // value
    dnnl_primitive_desc_t fwd_pd;  // hint for the backward primitives
    dnnl_primitive_desc_t relu_pd; // ADD+ReLU: an eltwise forward pd, hint for the ReLU backward
    dnnl_memory_t w;    // conv/fc: weights as the forward primitive reads them
    cpu_tensor *ws;     // workspace (BN+ReLU mask, maxpool indices)
    dnnl_memory_t mean, var, scale, shift, dscale, dshift, bias, dbias;
    int fc_low;         // fc computed in low precision (bf16 weights, fp32 logits)
    cpu_tensor *dy_low; // bf16 fc: the fp32 logits gradient converted to bf16
} node;

typedef struct build {
    cpu_plan *p;
    node *nodes;
    int nnodes, cap;
    int *param_done;    // backward: gradient of parameter i is written
    int next_bucket;
    int *deferred;      // nodes whose data gradient goes to the input-gradient list
    int ndeferred;
} build;

static dlp_status node_new(build *b, node_kind k, int layer, node **out) {
    if (b->nnodes == b->cap) {
        int nc = b->cap ? b->cap * 2 : 64;
        node *q = realloc(b->nodes, (size_t)nc * sizeof *q);
        if (!q) return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
        b->nodes = q;
        b->cap = nc;
    }
    node *n = &b->nodes[b->nnodes++];
    memset(n, 0, sizeof *n);
    n->kind = k;
    n->layer = layer;
    n->in[0] = n->in[1] = n->out = -1;
    *out = n;
    return DLP_OK;
}

static void use(cpu_plan *p, int v) {
    p->vals[v].nuses++;
    p->vals[v].uses_left++;
}

// Layer `layer`'s output shape (batch, C, H, W) in type dt, layout left to the primitive.
static dlp_status md_any_of_layer(cpu_plan *p, int layer, dnnl_data_type_t dt, const_dnnl_memory_desc_t *md) {
    const dlp_layer *l = &p->net.layers[layer];
    int64_t d[4] = {p->batch, l->c, l->h, l->w};
    return cpu_md_any(p, md, 4, d, dt);
}

// The value v in descriptor want for a node's input; a conversion becomes a node (for its backward).
static dlp_status input_as(build *b, int v, const_dnnl_memory_desc_t want, int *out) {
    cpu_plan *p = b->p;
    int before = p->nvals;
    DLP_CHECK(cpu_value_as(p, v, want, &p->fwd, 1, out));
    if (p->nvals != before) {  // a new converted copy: a node, so backward converts the gradient back
        node *n;
        DLP_CHECK(node_new(b, NODE_CONVERT, p->vals[v].layer, &n));
        n->in[0] = v;
        n->out = *out;
        use(p, v);
    }
    return DLP_OK;
}

static dlp_status out_value(cpu_plan *p, const_dnnl_memory_desc_t md, int layer, int *out) {
    cpu_tensor *t;
    DLP_CHECK(cpu_tensor_new(p, md, NULL, &t));
    int v = cpu_value_new(p, t, layer);
    if (v < 0) return dlp_err_status();
    *out = v;
    return DLP_OK;
}

static void what(char *buf, size_t len, const cpu_plan *p, int layer, const char *op) {
    snprintf(buf, len, "%s %s", layer >= 0 ? p->net.layers[layer].name : "?", op);
}

static void conv_dims(const dlp_layer *l, dnnl_dims_t st, dnnl_dims_t dil, dnnl_dims_t pl, dnnl_dims_t pr) {
    st[0] = st[1] = l->stride;
    dil[0] = dil[1] = 0;
    pl[0] = pl[1] = l->pad;
    pr[0] = pr[1] = l->pad;  // symmetric, as PyTorch; oneDNN floors the output size the same way
}

int cpu_conv_algs(const cpu_plan *p, const dlp_layer *l, int pass, dnnl_alg_kind_t algs[2]) {
    int n = 0;
    const int ok_pass = pass != CPU_CONV_FWD || !p->train;
    // enough 4x4 output tiles to keep the threads busy (at batch 1, ResNet's 7x7 layers run 2.4x slower with it)
    const int64_t tiles = (int64_t)p->batch * ((l->h + 3) / 4) * ((l->w + 3) / 4);
    if (p->winograd && ok_pass && l->k == 3 && l->stride == 1 && p->dt == dnnl_f32 && tiles >= 32)
        algs[n++] = dnnl_convolution_winograd;
    algs[n++] = dnnl_convolution_direct;
    return n;
}

// ---- forward nodes ----

// A convolution's or fc's forward node: its input in the layout pd wants, its output value and its weights' copy in
// pd's format (pd is the node's from here on, destroyed with the plan; destroyed here if the node cannot be made).
static dlp_status weighted_node(build *b, node_kind kind, int li, dnnl_primitive_desc_t pd, node **out) {
    cpu_plan *p = b->p;
    const dlp_layer *l = &p->net.layers[li];
    int xin;
    dlp_status s = input_as(b, p->val_of[l->in0], cpu_pd_md(pd, dnnl_query_src_md, 0), &xin);
    node *n = NULL;
    if (!s) s = node_new(b, kind, li, &n);
    if (s) {
        dnnl_primitive_desc_destroy(pd);
        return s;
    }
    n->fwd_pd = pd;
    n->in[0] = xin;
    use(p, xin);
    *out = n;
    DLP_CHECK(out_value(p, cpu_pd_md(n->fwd_pd, dnnl_query_dst_md, 0), li, &n->out));
    return cpu_wcopy_add(p, l->param0, cpu_pd_md(n->fwd_pd, dnnl_query_weights_md, 0), -1, NULL, 0, &n->w);
}

static dlp_status fwd_conv(build *b, int li) {
    cpu_plan *p = b->p;
    const dlp_layer *l = &p->net.layers[li], *xl = &p->net.layers[l->in0];
    const_dnnl_memory_desc_t src, wei, dst;
    int64_t wd[4] = {l->c, xl->c, l->k, l->k};
    DLP_CHECK(md_any_of_layer(p, l->in0, p->dt, &src));
    DLP_CHECK(cpu_md_any(p, &wei, 4, wd, p->dt));
    DLP_CHECK(md_any_of_layer(p, li, p->dt, &dst));
    dnnl_dims_t st, dil, pl, pr;
    conv_dims(l, st, dil, pl, pr);
    dnnl_alg_kind_t algs[2];
    const int nalg = cpu_conv_algs(p, l, CPU_CONV_FWD, algs);
    dnnl_primitive_desc_t pd = NULL;
    for (int a = 0; a < nalg && !pd; a++) {
        if (cpu_pd_check(dnnl_convolution_forward_primitive_desc_create(&pd, p->eng, dnnl_forward_training, algs[a], src,
                                                                        wei, NULL, dst, st, dil, pl, pr, p->attr),
                         l->name) == DLP_OK) {
            if (algs[a] == dnnl_convolution_winograd) p->nwinograd++;
        } else {
            pd = NULL;
            if (a == nalg - 1) return dlp_err_status();
            dlp_err_clear();  // no Winograd for this shape here: direct
        }
    }
    if (!p->conv_impl[0] && l->k == 3) snprintf(p->conv_impl, sizeof p->conv_impl, "%s", cpu_pd_impl(pd));
    node *n;
    DLP_CHECK(weighted_node(b, NODE_CONV, li, pd, &n));
    const int xin = n->in[0];
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, p->vals[xin].x->mem}, {DNNL_ARG_WEIGHTS, n->w},
                            {DNNL_ARG_DST, p->vals[n->out].x->mem}};
    char w[64];
    what(w, sizeof w, p, li, "conv fwd");
    return cpu_step_prim(p, &p->fwd, n->fwd_pd, 3, a, w);
}

static dlp_status vec_mem(cpu_plan *p, float *data, int64_t c, dnnl_memory_t *out) {
    const_dnnl_memory_desc_t md;
    DLP_CHECK(cpu_md_plain(p, &md, 1, &c, dnnl_f32));
    return cpu_mem_new(p, md, data, out);
}

static dlp_status fwd_bn_(build *b, int li, int relu_layer);
static dlp_status fwd_bn(build *b, int li, int relu_layer) {
    b->p->build_small = 1;
    dlp_status st = fwd_bn_(b, li, relu_layer);
    b->p->build_small = 0;
    return st;
}
static dlp_status fwd_bn_(build *b, int li, int relu_layer) {
    cpu_plan *p = b->p;
    const dlp_layer *l = &p->net.layers[li];
    const int x = p->val_of[l->in0];
    const_dnnl_memory_desc_t md = p->vals[x].x->md;
    unsigned flags = dnnl_use_scale | dnnl_use_shift | (relu_layer >= 0 ? dnnl_fuse_norm_relu : 0);
    node *n;
    DLP_CHECK(node_new(b, NODE_BN, li, &n));
    n->relu = relu_layer >= 0;
    n->in[0] = x;
    use(p, x);
    DLP_CHECK(cpu_pd_check(dnnl_batch_normalization_forward_primitive_desc_create(
                               &n->fwd_pd, p->eng, dnnl_forward_training, md, md, l->bn_eps, flags, p->attr),
                           l->name));
    dnnl_primitive_desc_t epd;
    DLP_CHECK(cpu_pd_check(dnnl_batch_normalization_forward_primitive_desc_create(
                               &epd, p->eng, dnnl_forward_inference, md, md, l->bn_eps,
                               flags | dnnl_use_global_stats, p->attr),
                           l->name));
    dlp_status st = DLP_OK;
    const int64_t C = l->c;
    const dlp_param *g = &p->net.params[l->param0], *bt = &p->net.params[l->param0 + 1];
    const dlp_param *rm = &p->net.bufs[l->buf0], *rv = &p->net.bufs[l->buf0 + 1];
    float *mean = cpu_alloc(p, (size_t)C * 4), *var = cpu_alloc(p, (size_t)C * 4);
    if (!mean || !var) st = DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    dnnl_memory_t rmm = NULL, rvm = NULL;
    if (!st) st = vec_mem(p, mean, C, &n->mean);
    if (!st) st = vec_mem(p, var, C, &n->var);
    if (!st) st = vec_mem(p, p->params + g->offset, C, &n->scale);
    if (!st) st = vec_mem(p, p->params + bt->offset, C, &n->shift);
    if (!st) st = vec_mem(p, p->grads + g->offset, C, &n->dscale);
    if (!st) st = vec_mem(p, p->grads + bt->offset, C, &n->dshift);
    if (!st) st = vec_mem(p, p->bufs + rm->offset, C, &rmm);
    if (!st) st = vec_mem(p, p->bufs + rv->offset, C, &rvm);
    if (!st) st = out_value(p, cpu_pd_md(n->fwd_pd, dnnl_query_dst_md, 0), relu_layer >= 0 ? relu_layer : li, &n->out);
    if (!st && n->relu) st = cpu_tensor_new(p, cpu_pd_md(n->fwd_pd, dnnl_query_workspace_md, 0), NULL, &n->ws);
    char w[64];
    if (!st) {
        dnnl_exec_arg_t a[8] = {{DNNL_ARG_SRC, p->vals[x].x->mem}, {DNNL_ARG_DST, p->vals[n->out].x->mem},
                                {DNNL_ARG_SCALE, n->scale}, {DNNL_ARG_SHIFT, n->shift},
                                {DNNL_ARG_MEAN, n->mean}, {DNNL_ARG_VARIANCE, n->var}};
        int na = 6;
        if (n->relu) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, n->ws->mem};
        what(w, sizeof w, p, li, n->relu ? "bn+relu fwd" : "bn fwd");
        p->build_mask = CPU_MASK_TRAIN;
        st = cpu_step_prim(p, &p->fwd, n->fwd_pd, na, a, w);
        if (!st) {
            cpu_step s = {0};
            s.a = mean;
            s.b = var;
            s.c = p->bufs + rm->offset;
            s.d = p->bufs + rv->offset;
            s.n = C;
            s.m = (int64_t)p->batch * l->h * l->w;
            s.f = l->bn_momentum;
            what(s.what, sizeof s.what, p, li, "bn running stats");
            st = cpu_step_fn_add(p, &p->fwd, cpu_bn_running_update, &s);
        }
        if (!st) {
            dnnl_exec_arg_t e[6] = {{DNNL_ARG_SRC, p->vals[x].x->mem}, {DNNL_ARG_DST, p->vals[n->out].x->mem},
                                    {DNNL_ARG_SCALE, n->scale}, {DNNL_ARG_SHIFT, n->shift},
                                    {DNNL_ARG_MEAN, rmm}, {DNNL_ARG_VARIANCE, rvm}};
            what(w, sizeof w, p, li, n->relu ? "bn+relu eval" : "bn eval");
            p->build_mask = CPU_MASK_EVAL;
            st = cpu_step_prim(p, &p->fwd, epd, 6, e, w);
        }
        p->build_mask = 0;
    }
    dnnl_primitive_desc_destroy(epd);
    if (!st && n->relu) p->nfused_bn_relu++;
    return st;
}

static dlp_status relu_fwd_pd(cpu_plan *p, const_dnnl_memory_desc_t md, dnnl_primitive_desc_t *pd, const char *nm) {
    return cpu_pd_check(dnnl_eltwise_forward_primitive_desc_create(pd, p->eng, dnnl_forward_training,
                                                                   dnnl_eltwise_relu_use_dst_for_bwd, md, md, 0.f, 0.f,
                                                                   p->attr),
                        nm);
}

static dlp_status fwd_relu(build *b, int li) {
    cpu_plan *p = b->p;
    const dlp_layer *l = &p->net.layers[li];
    const int x = p->val_of[l->in0];
    node *n;
    DLP_CHECK(node_new(b, NODE_RELU, li, &n));
    n->in[0] = x;
    use(p, x);
    DLP_CHECK(relu_fwd_pd(p, p->vals[x].x->md, &n->fwd_pd, "relu"));
    DLP_CHECK(out_value(p, cpu_pd_md(n->fwd_pd, dnnl_query_dst_md, 0), li, &n->out));
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_SRC, p->vals[x].x->mem}, {DNNL_ARG_DST, p->vals[n->out].x->mem}};
    char w[64];
    what(w, sizeof w, p, l->in0, "relu fwd");
    return cpu_step_prim(p, &p->fwd, n->fwd_pd, 2, a, w);
}

static dlp_status fwd_add(build *b, int li, int relu_layer) {
    cpu_plan *p = b->p;
    const dlp_layer *l = &p->net.layers[li];
    const int x0 = p->val_of[l->in0];
    const_dnnl_memory_desc_t md = p->vals[x0].x->md;
    int x1;
    DLP_CHECK(input_as(b, p->val_of[l->in1], md, &x1));
    node *n;
    DLP_CHECK(node_new(b, NODE_ADD, li, &n));
    n->relu = relu_layer >= 0;
    n->in[0] = x0;
    n->in[1] = x1;
    use(p, x0);
    use(p, x1);
    dnnl_primitive_attr_t attr;
    DLP_CHECK(cpu_attr_new(&attr));
    dlp_status st = DLP_OK;
    if (n->relu) {
        dnnl_post_ops_t po;
        if (dnnl_post_ops_create(&po) != dnnl_success) st = DLP_ERR(DLP_ERR_INTERNAL, "oneDNN: post-ops");
        if (!st) {
            if (dnnl_post_ops_append_eltwise(po, dnnl_eltwise_relu, 0.f, 0.f) != dnnl_success ||
                dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success)
                st = DLP_ERR(DLP_ERR_INTERNAL, "oneDNN: relu post-op");
            dnnl_post_ops_destroy(po);
        }
    }
    if (!st)
        st = cpu_pd_check(dnnl_binary_primitive_desc_create(&n->fwd_pd, p->eng, dnnl_binary_add, md, md, md, attr), "add");
    dnnl_primitive_attr_destroy(attr);
    DLP_CHECK(st);
    if (n->relu) DLP_CHECK(relu_fwd_pd(p, md, &n->relu_pd, "add+relu"));
    DLP_CHECK(out_value(p, md, relu_layer >= 0 ? relu_layer : li, &n->out));
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC_0, p->vals[x0].x->mem}, {DNNL_ARG_SRC_1, p->vals[x1].x->mem},
                            {DNNL_ARG_DST, p->vals[n->out].x->mem}};
    char w[64];
    what(w, sizeof w, p, l->in0, n->relu ? "add+relu fwd" : "add fwd");
    if (n->relu) p->nfused_add_relu++;
    return cpu_step_prim(p, &p->fwd, n->fwd_pd, 3, a, w);
}

// Strides, window and padding of a pooling layer: maxpool as the layer says; global average pooling over the
// whole input plane.
static void pool_geometry(const dlp_layer *l, const dlp_layer *xl, int max, dnnl_dims_t st, dnnl_dims_t k,
                          dnnl_dims_t pl, dnnl_dims_t pr) {
    if (max) {
        st[0] = st[1] = l->stride;
        k[0] = k[1] = l->k;
        pl[0] = pl[1] = pr[0] = pr[1] = l->pad;
    } else {
        st[0] = st[1] = 1;
        k[0] = xl->h;
        k[1] = xl->w;
        pl[0] = pl[1] = pr[0] = pr[1] = 0;
    }
}

static dlp_status fwd_pool(build *b, int li) {
    cpu_plan *p = b->p;
    const dlp_layer *l = &p->net.layers[li], *xl = &p->net.layers[l->in0];
    const int x = p->val_of[l->in0];
    const int max = l->kind == DLP_LAYER_MAXPOOL;
    const_dnnl_memory_desc_t dst;
    DLP_CHECK(md_any_of_layer(p, li, cpu_md_dt(p->vals[x].x->md), &dst));
    dnnl_dims_t st, k, dil = {0, 0}, pl, pr;
    pool_geometry(l, xl, max, st, k, pl, pr);
    node *n;
    DLP_CHECK(node_new(b, max ? NODE_MAXPOOL : NODE_AVGPOOL, li, &n));
    n->in[0] = x;
    use(p, x);
    DLP_CHECK(cpu_pd_check(dnnl_pooling_forward_primitive_desc_create(
                               &n->fwd_pd, p->eng, dnnl_forward_training,
                               max ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding, p->vals[x].x->md, dst, st, k,
                               dil, pl, pr, p->attr),
                           max ? "maxpool" : "avgpool"));
    DLP_CHECK(out_value(p, cpu_pd_md(n->fwd_pd, dnnl_query_dst_md, 0), li, &n->out));
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, p->vals[x].x->mem}, {DNNL_ARG_DST, p->vals[n->out].x->mem}};
    int na = 2;
    const_dnnl_memory_desc_t wmd = cpu_pd_md(n->fwd_pd, dnnl_query_workspace_md, 0);
    if (wmd && dnnl_memory_desc_get_size(wmd)) {
        DLP_CHECK(cpu_tensor_new(p, wmd, NULL, &n->ws));
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, n->ws->mem};
    }
    char w[64];
    what(w, sizeof w, p, l->in0, max ? "maxpool fwd" : "avgpool fwd");
    return cpu_step_prim(p, &p->fwd, n->fwd_pd, na, a, w);
}

// fc: y (N, K) fp32 = x (N, C, H, W) . W (K, C, H, W) + b. In a bf16 plan x and W are bf16 when oneDNN has
// the whole set (forward, backward data, backward weights with fp32 weight gradients); else fp32.
typedef struct fc_mds {
    const_dnnl_memory_desc_t src, wei, bias, dst, dwei, dbias, ddst;
} fc_mds;

static dlp_status fc_descs(cpu_plan *p, int li, dnnl_data_type_t dt, fc_mds *m) {
    const dlp_layer *l = &p->net.layers[li], *xl = &p->net.layers[l->in0];
    int64_t wdims[4] = {l->c, xl->c, xl->h, xl->w}, bd = l->c, od[2] = {p->batch, l->c};
    DLP_CHECK(md_any_of_layer(p, l->in0, dt, &m->src));
    DLP_CHECK(cpu_md_any(p, &m->wei, 4, wdims, dt));
    DLP_CHECK(cpu_md_plain(p, &m->bias, 1, &bd, dnnl_f32));
    DLP_CHECK(cpu_md_plain(p, &m->dst, 2, od, dnnl_f32));
    DLP_CHECK(cpu_md_any(p, &m->dwei, 4, wdims, dnnl_f32));
    DLP_CHECK(cpu_md_plain(p, &m->dbias, 1, &bd, dnnl_f32));
    DLP_CHECK(cpu_md_plain(p, &m->ddst, 2, od, dt));
    return DLP_OK;
}

static dnnl_status_t fc_fwd_pd(cpu_plan *p, const fc_mds *m, dnnl_primitive_desc_t *pd) {
    return dnnl_inner_product_forward_primitive_desc_create(pd, p->eng, dnnl_forward_training, m->src, m->wei, m->bias,
                                                            m->dst, p->attr);
}

static dnnl_status_t fc_bwd_data_pd(cpu_plan *p, const fc_mds *m, const_dnnl_primitive_desc_t hint,
                                    dnnl_primitive_desc_t *pd) {
    return dnnl_inner_product_backward_data_primitive_desc_create(pd, p->eng, m->src, m->wei, m->ddst, hint, p->attr);
}

static dnnl_status_t fc_bwd_weights_pd(cpu_plan *p, const fc_mds *m, const_dnnl_primitive_desc_t hint,
                                       dnnl_primitive_desc_t *pd) {
    return dnnl_inner_product_backward_weights_primitive_desc_create(pd, p->eng, m->src, m->dwei, m->dbias, m->ddst,
                                                                     hint, p->attr);
}

static int fc_low_ok(cpu_plan *p, int li) {
    fc_mds m;
    if (fc_descs(p, li, dnnl_bf16, &m)) return 0;
    dnnl_primitive_desc_t f = NULL, d = NULL, w = NULL;
    int ok = fc_fwd_pd(p, &m, &f) == dnnl_success && fc_bwd_data_pd(p, &m, f, &d) == dnnl_success &&
             fc_bwd_weights_pd(p, &m, f, &w) == dnnl_success;
    if (f) dnnl_primitive_desc_destroy(f);
    if (d) dnnl_primitive_desc_destroy(d);
    if (w) dnnl_primitive_desc_destroy(w);
    return ok;
}

static dlp_status fwd_fc(build *b, int li) {
    cpu_plan *p = b->p;
    const dlp_layer *l = &p->net.layers[li];
    const int low = p->dt == dnnl_bf16 && fc_low_ok(p, li);
    dlp_err_clear();
    fc_mds m;
    DLP_CHECK(fc_descs(p, li, low ? dnnl_bf16 : dnnl_f32, &m));
    dnnl_primitive_desc_t pd;
    DLP_CHECK(cpu_pd_check(fc_fwd_pd(p, &m, &pd), l->name));
    node *n;
    DLP_CHECK(weighted_node(b, NODE_FC, li, pd, &n));
    n->fc_low = low;
    const int xin = n->in[0];
    const dlp_param *bp = &p->net.params[l->param0 + 1];
    DLP_CHECK(vec_mem(p, p->params + bp->offset, l->c, &n->bias));
    DLP_CHECK(vec_mem(p, p->grads + bp->offset, l->c, &n->dbias));
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, p->vals[xin].x->mem}, {DNNL_ARG_WEIGHTS, n->w}, {DNNL_ARG_BIAS, n->bias},
                            {DNNL_ARG_DST, p->vals[n->out].x->mem}};
    char w[64];
    what(w, sizeof w, p, li, "fc fwd");
    return cpu_step_prim(p, &p->fwd, n->fwd_pd, 4, a, w);
}

// ---- backward ----

// Where a node writes the gradient of value u: u's own gradient tensor if this is the first write (backward
// overwrites), else a scratch tensor that grad_commit adds in.
static dlp_status grad_target(cpu_plan *p, int u, cpu_tensor **t, int *acc) {
    cpu_value *v = &p->vals[u];
    if (!v->dx) {
        DLP_CHECK(cpu_tensor_pooled(p, v->x->md, &v->dx));
        if (v->defer) cpu_tensor_pin(p, v->dx);
    }
    if (!v->dx_started) {
        v->dx_started = 1;
        *t = v->dx;
        *acc = 0;
        return DLP_OK;
    }
    *acc = 1;
    return cpu_tensor_pooled(p, v->x->md, t);
}

// Adds a value's pending gradient contribution into its gradient now (a binary add step in the main backward).
static dlp_status flush_pending(cpu_plan *p, int u) {
    cpu_value *v = &p->vals[u];
    if (!v->pending) return DLP_OK;
    char w[64];
    what(w, sizeof w, p, v->layer, "grad accumulate");
    DLP_CHECK(cpu_step_accumulate(p, &p->bwd, v->dx, v->pending, w));
    cpu_tensor_release(p, v->pending);
    v->pending = NULL;
    return DLP_OK;
}

// The node whose output is value u (-1: none, e.g. the input batch).
static int producer_of(const build *b, int u) {
    for (int i = b->nnodes - 1; i >= 0; i--)
        if (b->nodes[i].out == u) return i;
    return -1;
}

// A contribution t written for value u: nothing to do when it was the first write (t is u's gradient), else
// added in. In the main backward, a value produced by an add+ReLU keeps its contribution pending instead: the
// add's backward then adds it and applies the ReLU mask in one pass (cpu_kernel_add_relu_bwd), one pass over the
// activation fewer than an add followed by the ReLU backward.
static dlp_status grad_commit(build *b, cpu_steps *list, int u, cpu_tensor *t, int acc) {
    cpu_plan *p = b->p;
    if (!acc) return DLP_OK;
    if (list == &p->bwd) {
        const int k = producer_of(b, u);
        if (k >= 0 && b->nodes[k].kind == NODE_ADD && b->nodes[k].relu) {
            DLP_CHECK(flush_pending(p, u));  // a second late contribution: the first one goes in now
            p->vals[u].pending = t;
            return DLP_OK;
        }
    }
    char w[64];
    what(w, sizeof w, p, p->vals[u].layer, "grad accumulate");
    DLP_CHECK(cpu_step_accumulate(p, list, p->vals[u].dx, t, w));
    cpu_tensor_release(p, t);
    return DLP_OK;
}

static dlp_status bucket_check(build *b, int layer) {
    cpu_plan *p = b->p;
    const dlp_layer *l = &p->net.layers[layer];
    for (int i = 0; i < l->nparams; i++) b->param_done[l->param0 + i] = 1;
    int first = b->next_bucket;
    while (b->next_bucket < p->nbuckets) {
        const dlp_bucket *bk = &p->buckets[b->next_bucket];
        int ready = 1;
        for (int i = bk->param_lo; i < bk->param_hi && ready; i++) ready = b->param_done[i];
        if (!ready) break;
        b->next_bucket++;
    }
    if (b->next_bucket == first || !p->cfg.on_bucket) return DLP_OK;
    cpu_step s = {0};
    s.n = first;
    s.m = b->next_bucket;
    snprintf(s.what, sizeof s.what, "buckets %d..%d ready", first, b->next_bucket - 1);
    return cpu_step_fn_add(p, &p->bwd, cpu_bucket_fire, &s);
}

// conv / fc weight gradients (and fc bias): backward-weights primitive, then the reorder into the flat array.
// A backward convolution's primitive descriptor, the weights' gradient (data 0: src, diff weights, diff dst) or the
// data gradient (data 1: diff src, weights, diff dst): Winograd first where the plan allows it, then direct.
static dlp_status conv_bwd_pd(cpu_plan *p, const dlp_layer *l, const node *n, int data, const_dnnl_memory_desc_t x,
                              const_dnnl_memory_desc_t w, const_dnnl_memory_desc_t dy, dnnl_primitive_desc_t *pd) {
    dnnl_dims_t st, dil, pl, pr;
    conv_dims(l, st, dil, pl, pr);
    dnnl_alg_kind_t algs[2];
    const int nalg = cpu_conv_algs(p, l, CPU_CONV_BWD, algs);
    for (int a = 0; a < nalg; a++) {
        const dnnl_status_t r =
            data ? dnnl_convolution_backward_data_primitive_desc_create(pd, p->eng, algs[a], x, w, dy, st, dil, pl, pr,
                                                                        n->fwd_pd, p->attr)
                 : dnnl_convolution_backward_weights_primitive_desc_create(pd, p->eng, algs[a], x, w, NULL, dy, st, dil,
                                                                           pl, pr, n->fwd_pd, p->attr);
        if (cpu_pd_check(r, l->name) == DLP_OK) {
            p->nwinograd += algs[a] == dnnl_convolution_winograd;
            return DLP_OK;
        }
        if (a == nalg - 1) return dlp_err_status();
        dlp_err_clear();
    }
    return DLP_ERR(DLP_ERR_INTERNAL, "%s: no convolution algorithm to try", l->name);
}

static dlp_status bwd_weights(build *b, node *n) {
    cpu_plan *p = b->p;
    const dlp_layer *l = &p->net.layers[n->layer];
    cpu_value *x = &p->vals[n->in[0]], *y = &p->vals[n->out];
    dnnl_primitive_desc_t pd;
    const_dnnl_memory_desc_t dy_md = y->dx->md;
    dnnl_memory_t dy_mem = y->dx->mem;
    cpu_tensor *dy_low = NULL;
    if (n->kind == NODE_CONV) {
        const_dnnl_memory_desc_t dw;
        int64_t wd[4] = {l->c, p->net.layers[l->in0].c, l->k, l->k};
        DLP_CHECK(cpu_md_any(p, &dw, 4, wd, dnnl_f32));
        DLP_CHECK(conv_bwd_pd(p, l, n, 0, x->x->md, dw, dy_md, &pd));
    } else {
        fc_mds m;
        DLP_CHECK(fc_descs(p, n->layer, n->fc_low ? dnnl_bf16 : dnnl_f32, &m));
        DLP_CHECK(cpu_pd_check(fc_bwd_weights_pd(p, &m, n->fwd_pd, &pd), l->name));
        const_dnnl_memory_desc_t want = cpu_pd_md(pd, dnnl_query_diff_dst_md, 0);
        if (!dnnl_memory_desc_equal(want, dy_md)) {  // bf16 fc: the fp32 logits gradient in bf16
            DLP_CHECK(cpu_tensor_new(p, want, NULL, &dy_low));
            char w[64];
            what(w, sizeof w, p, n->layer, "fc grad to bf16");
            DLP_CHECK(cpu_step_reorder(p, &p->bwd, dy_mem, dy_md, dy_low->mem, want, w));
            dy_mem = dy_low->mem;
            n->dy_low = dy_low;  // kept for the backward-data primitive
        }
    }
    const_dnnl_memory_desc_t dwmd = cpu_pd_md(pd, dnnl_query_diff_weights_md, 0);
    // the weight gradient lands in a scratch tensor reordered into the flat array, or in the flat array itself
    const dlp_param *prm = &p->net.params[l->param0];
    int64_t dims[DNNL_MAX_NDIMS];
    const int nd = cpu_md_dims(dwmd, dims);
    const_dnnl_memory_desc_t plain;
    dlp_status st = cpu_md_plain(p, &plain, nd, dims, dnnl_f32);
    dnnl_memory_t flat = NULL, dwm = NULL;
    cpu_tensor *tmp = NULL;
    if (!st) st = cpu_mem_new(p, plain, p->grads + prm->offset, &flat);
    if (!st) {
        if (dnnl_memory_desc_equal(plain, dwmd)) dwm = flat;
        else if (!(st = cpu_tensor_pooled(p, dwmd, &tmp))) dwm = tmp->mem;
    }
    char w[64];
    if (!st) {
        dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, x->x->mem}, {DNNL_ARG_DIFF_DST, dy_mem}, {DNNL_ARG_DIFF_WEIGHTS, dwm}};
        int na = 3;
        if (n->kind == NODE_FC) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_BIAS, n->dbias};
        what(w, sizeof w, p, n->layer, n->kind == NODE_FC ? "fc bwd weights" : "conv bwd weights");
        st = cpu_step_prim(p, &p->bwd, pd, na, a, w);
    }
    if (!st && tmp) {
        what(w, sizeof w, p, n->layer, "weight grad to flat");
        p->build_small = 1;
        st = cpu_step_reorder(p, &p->bwd, tmp->mem, dwmd, flat, plain, w);
        p->build_small = 0;
        cpu_tensor_release(p, tmp);
    }
    dnnl_primitive_desc_destroy(pd);
    return st;
}

// conv / fc data gradient into list (the main backward, or the input-gradient list).
static dlp_status bwd_data(build *b, node *n, cpu_steps *list) {
    cpu_plan *p = b->p;
    const dlp_layer *l = &p->net.layers[n->layer];
    cpu_value *y = &p->vals[n->out];
    const int u = n->in[0];
    const_dnnl_memory_desc_t xmd = p->vals[u].x->md;
    dnnl_primitive_desc_t pd;
    const_dnnl_memory_desc_t dy_md = n->dy_low ? n->dy_low->md : y->dx->md;
    dnnl_memory_t dy_mem = n->dy_low ? n->dy_low->mem : y->dx->mem;
    if (n->kind == NODE_CONV) {
        const_dnnl_memory_desc_t wei;
        int64_t wd[4] = {l->c, p->net.layers[l->in0].c, l->k, l->k};
        DLP_CHECK(cpu_md_any(p, &wei, 4, wd, p->dt));
        DLP_CHECK(conv_bwd_pd(p, l, n, 1, xmd, wei, dy_md, &pd));
    } else {
        fc_mds m;
        DLP_CHECK(fc_descs(p, n->layer, n->fc_low ? dnnl_bf16 : dnnl_f32, &m));
        // the data gradient in the input's own layout
        m.src = xmd;
        m.ddst = dy_md;
        DLP_CHECK(cpu_pd_check(fc_bwd_data_pd(p, &m, n->fwd_pd, &pd), l->name));
    }
    dnnl_memory_t wm;
    const int snapshot = list == &p->in_grad;  // run on demand, possibly after update: the step's weights
    dlp_status st = cpu_wcopy_add(p, l->param0, cpu_pd_md(pd, dnnl_query_weights_md, 0), -1, NULL, snapshot, &wm);
    cpu_tensor *t = NULL;
    int acc = 0;
    if (!st) st = grad_target(p, u, &t, &acc);
    if (!st) {
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_DIFF_DST, dy_mem}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DIFF_SRC, t->mem}};
        char w[64];
        what(w, sizeof w, p, n->layer, n->kind == NODE_FC ? "fc bwd data" : "conv bwd data");
        st = cpu_step_prim(p, list, pd, 3, a, w);
    }
    if (!st) st = grad_commit(b, list, u, t, acc);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

static dlp_status bwd_bn_(build *b, node *n);
static dlp_status bwd_bn(build *b, node *n) {
    b->p->build_small = 1;
    dlp_status st = bwd_bn_(b, n);
    b->p->build_small = 0;
    return st;
}
static dlp_status bwd_bn_(build *b, node *n) {
    cpu_plan *p = b->p;
    const dlp_layer *l = &p->net.layers[n->layer];
    const int u = n->in[0];
    cpu_value *x = &p->vals[u], *y = &p->vals[n->out];
    unsigned flags = dnnl_use_scale | dnnl_use_shift | (n->relu ? dnnl_fuse_norm_relu : 0);
    dnnl_primitive_desc_t pd;
    DLP_CHECK(cpu_pd_check(dnnl_batch_normalization_backward_primitive_desc_create(&pd, p->eng, dnnl_backward, x->x->md,
                                                                                  y->dx->md, x->x->md, l->bn_eps, flags,
                                                                                  n->fwd_pd, p->attr),
                           l->name));
    cpu_tensor *t;
    int acc;
    dlp_status st = grad_target(p, u, &t, &acc);
    if (!st) {
        // (oneDNN 3.x checks the argument count: the shift is no input of the backward pass)
        dnnl_exec_arg_t a[10] = {{DNNL_ARG_SRC, x->x->mem},   {DNNL_ARG_MEAN, n->mean},
                                 {DNNL_ARG_VARIANCE, n->var}, {DNNL_ARG_DIFF_DST, y->dx->mem},
                                 {DNNL_ARG_SCALE, n->scale},  {DNNL_ARG_DIFF_SRC, t->mem},
                                 {DNNL_ARG_DIFF_SCALE, n->dscale}, {DNNL_ARG_DIFF_SHIFT, n->dshift}};
        int na = 8;
        if (n->relu) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, n->ws->mem};
        char w[64];
        what(w, sizeof w, p, n->layer, n->relu ? "bn+relu bwd" : "bn bwd");
        st = cpu_step_prim(p, &p->bwd, pd, na, a, w);
    }
    if (!st) st = grad_commit(b, &p->bwd, u, t, acc);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

static dlp_status relu_bwd_step(cpu_plan *p, cpu_steps *list, const dnnl_primitive_desc_t hint, cpu_tensor *dy,
                                cpu_tensor *y, cpu_tensor *dx, const char *w) {
    dnnl_primitive_desc_t pd;
    DLP_CHECK(cpu_pd_check(dnnl_eltwise_backward_primitive_desc_create(&pd, p->eng, dnnl_eltwise_relu_use_dst_for_bwd,
                                                                       dx->md, dy->md, y->md, 0.f, 0.f, hint, p->attr),
                           w));
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_DIFF_DST, dy->mem}, {DNNL_ARG_DST, y->mem}, {DNNL_ARG_DIFF_SRC, dx->mem}};
    dlp_status st = cpu_step_prim(p, list, pd, 3, a, w);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

static dlp_status bwd_relu(build *b, node *n) {
    cpu_plan *p = b->p;
    const int u = n->in[0];
    cpu_value *y = &p->vals[n->out];
    cpu_tensor *t;
    int acc;
    DLP_CHECK(grad_target(p, u, &t, &acc));
    char w[64];
    what(w, sizeof w, p, p->net.layers[n->layer].in0, "relu bwd");
    DLP_CHECK(relu_bwd_step(p, &p->bwd, n->fwd_pd, y->dx, y->x, t, w));
    return grad_commit(b, &p->bwd, u, t, acc);
}

// Passes gradient g (descriptor of value u) on to u: u's gradient becomes g itself when g is u's only
// contribution, else a copy (first write) or an in-place add.
static dlp_status pass_grad(cpu_plan *p, int u, cpu_tensor *g, const char *nm) {
    cpu_value *v = &p->vals[u];
    char w[64];
    if (!v->dx && !v->dx_started && v->nuses == 1 && dnnl_memory_desc_equal(g->md, v->x->md) && !v->defer) {
        v->dx = g;
        v->dx_started = 1;
        cpu_tensor_retain(p, g);
        return DLP_OK;
    }
    cpu_tensor *t;
    int acc;
    DLP_CHECK(grad_target(p, u, &t, &acc));
    if (!acc) {
        snprintf(w, sizeof w, "%s grad copy", nm);
        p->ngrad_copies++;
        return cpu_step_reorder(p, &p->bwd, g->mem, g->md, t->mem, t->md, w);
    }
    cpu_tensor_release(p, t);  // no scratch needed: add g in directly
    snprintf(w, sizeof w, "%s grad accumulate", nm);
    return cpu_step_accumulate(p, &p->bwd, v->dx, g, w);
}

// An add's second input that is used elsewhere too — a residual block's input x, read by the block's first
// convolution as well — would get a copy of the add's gradient g as the start of its own (pass_grad), into which
// the first convolution's data gradient is later added. g itself can serve instead when every other reader of g
// is done before anything writes into x's gradient: g also went (aliased) to the add's first input, whose
// producer is the node right before the add (the branch's last BN) and reads it first in the backward order;
// that node writes its own input's gradient elsewhere (it is not a consumer of x), and every other consumer of x
// comes earlier in the forward order, so its write (an in-place accumulation) comes later. (Only a BN: a
// convolution's data gradient may be put off to get_input_grad, which would read g after those writes.)
static int shortcut_alias_ok(const build *b, const node *n, const cpu_tensor *g) {
    const cpu_plan *p = b->p;
    const int k = (int)(n - b->nodes), u0 = n->in[0], u1 = n->in[1];
    if (k < 1 || u0 == u1 || p->vals[u0].dx != g) return 0;
    const node *prev = &b->nodes[k - 1];
    if (prev->out != u0 || prev->kind != NODE_BN) return 0;
    if (prev->in[0] == u1 || prev->in[1] == u1) return 0;
    const cpu_value *v = &p->vals[u1];
    return !v->dx && !v->dx_started && !v->defer && v->nuses > 1 && dnnl_memory_desc_equal(g->md, v->x->md);
}

static dlp_status bwd_add(build *b, node *n) {
    cpu_plan *p = b->p;
    cpu_value *y = &p->vals[n->out];
    const char *nm = p->net.layers[p->net.layers[n->layer].in0].name;
    cpu_tensor *g = y->dx;
    int own = 0;
    if (n->relu) {
        if (!cpu_tensor_exclusive(p, y->dx)) {
            DLP_CHECK(cpu_tensor_pooled(p, y->dx->md, &g));
            own = 1;
        }
        char w[64];
        if (y->pending) {  // the last contribution to y's gradient, added here with the ReLU mask applied
            cpu_step s = {0};
            s.a = g;
            s.b = y->dx;
            s.c = y->pending;
            s.d = y->x;
            s.m = p->dt == dnnl_bf16;
            s.n = (int64_t)(dnnl_memory_desc_get_size(y->x->md) / (s.m ? 2 : 4));
            s.small = 1;
            snprintf(s.what, sizeof s.what, "%s grad accumulate+add+relu bwd", nm);
            DLP_CHECK(cpu_step_fn_add(p, &p->bwd, cpu_kernel_add_relu_bwd, &s));
            cpu_tensor_release(p, y->pending);
            y->pending = NULL;
            p->nfused_acc_relu++;
        } else {
            snprintf(w, sizeof w, "%s add+relu bwd", nm);
            DLP_CHECK(relu_bwd_step(p, &p->bwd, n->relu_pd, y->dx, y->x, g, w));
        }
    }
    DLP_CHECK(pass_grad(p, n->in[0], g, nm));
    if (shortcut_alias_ok(b, n, g)) {
        // a residual block's shortcut: x's gradient starts as g itself (no copy); see shortcut_alias_ok
        cpu_value *v = &p->vals[n->in[1]];
        v->dx = g;
        v->dx_started = 1;
        cpu_tensor_retain(p, g);
        p->nshortcut_aliases++;
    } else {
        DLP_CHECK(pass_grad(p, n->in[1], g, nm));
    }
    if (own) cpu_tensor_release(p, g);
    return DLP_OK;
}

static dlp_status bwd_pool(build *b, node *n) {
    cpu_plan *p = b->p;
    const dlp_layer *l = &p->net.layers[n->layer], *xl = &p->net.layers[l->in0];
    const int u = n->in[0];
    cpu_value *x = &p->vals[u], *y = &p->vals[n->out];
    const int max = n->kind == NODE_MAXPOOL;
    dnnl_dims_t st, k, dil = {0, 0}, pl, pr;
    pool_geometry(l, xl, max, st, k, pl, pr);
    dnnl_primitive_desc_t pd;
    DLP_CHECK(cpu_pd_check(dnnl_pooling_backward_primitive_desc_create(
                               &pd, p->eng, max ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding, x->x->md,
                               y->dx->md, st, k, dil, pl, pr, n->fwd_pd, p->attr),
                           "pool backward"));
    cpu_tensor *t;
    int acc;
    dlp_status s = grad_target(p, u, &t, &acc);
    if (!s) {
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_DIFF_DST, y->dx->mem}, {DNNL_ARG_DIFF_SRC, t->mem}};
        int na = 2;
        if (n->ws) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, n->ws->mem};
        char w[64];
        what(w, sizeof w, p, l->in0, max ? "maxpool bwd" : "avgpool bwd");
        s = cpu_step_prim(p, &p->bwd, pd, na, a, w);
    }
    if (!s) s = grad_commit(b, &p->bwd, u, t, acc);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

static dlp_status bwd_convert(build *b, node *n, cpu_steps *list) {
    cpu_plan *p = b->p;
    const int u = n->in[0];
    cpu_value *c = &p->vals[n->out], *v = &p->vals[u];
    cpu_tensor *t;
    int acc;
    DLP_CHECK(grad_target(p, u, &t, &acc));
    char w[64];
    what(w, sizeof w, p, v->layer, "grad convert back");
    DLP_CHECK(cpu_step_reorder(p, list, c->dx->mem, c->dx->md, t->mem, t->md, w));
    return grad_commit(b, list, u, t, acc);
}

static dlp_status backward_node(build *b, int i) {
    cpu_plan *p = b->p;
    node *n = &b->nodes[i];
    cpu_value *y = &p->vals[n->out];
    if (y->pending && !(n->kind == NODE_ADD && n->relu)) DLP_CHECK(flush_pending(p, n->out));
    if (n->kind == NODE_CONVERT && p->vals[n->in[0]].defer) {  // a converted input batch: get_input_grad's work
        b->deferred[b->ndeferred++] = i;
        return DLP_OK;
    }
    if (!y->dx) return DLP_OK;  // nothing flows back into this node (its output is unused)
    int deferred = 0;
    switch (n->kind) {
    case NODE_CONV:
    case NODE_FC:
        DLP_CHECK(bwd_weights(b, &b->nodes[i]));
        DLP_CHECK(bucket_check(b, n->layer));
        if (p->vals[n->in[0]].defer) deferred = 1;
        else DLP_CHECK(bwd_data(b, &b->nodes[i], &p->bwd));
        break;
    case NODE_BN:
        DLP_CHECK(bwd_bn(b, n));
        DLP_CHECK(bucket_check(b, n->layer));
        break;
    case NODE_RELU: DLP_CHECK(bwd_relu(b, n)); break;
    case NODE_ADD: DLP_CHECK(bwd_add(b, n)); break;
    case NODE_MAXPOOL:
    case NODE_AVGPOOL: DLP_CHECK(bwd_pool(b, n)); break;
    case NODE_CONVERT: DLP_CHECK(bwd_convert(b, n, &p->bwd)); break;
    }
    n = &b->nodes[i];
    if (deferred) {
        b->deferred[b->ndeferred++] = i;
        cpu_tensor_pin(p, p->vals[n->out].dx);
    } else {
        cpu_tensor_release(p, p->vals[n->out].dx);
    }
    return DLP_OK;
}

// ---- the plan ----

static dlp_status build_forward(build *b) {
    cpu_plan *p = b->p;
    const dlp_net *net = &p->net;
    for (int li = 1; li < net->nlayers; li++) {
        const dlp_layer *l = &net->layers[li];
        if (p->val_of[li] != -1) continue;  // fused into an earlier node
        // a ReLU that is the only consumer of this BN/ADD is fused into it
        int relu = -1;
        if ((l->kind == DLP_LAYER_BN || l->kind == DLP_LAYER_ADD) && dlp_net_consumers(net, li) == 1)
            for (int j = li + 1; j < net->nlayers; j++)
                if (net->layers[j].in0 == li || net->layers[j].in1 == li) {
                    if (net->layers[j].kind == DLP_LAYER_RELU) relu = j;
                    break;
                }
        int before = b->nnodes;
        switch (l->kind) {
        case DLP_LAYER_CONV: DLP_CHECK(fwd_conv(b, li)); break;
        case DLP_LAYER_BN: DLP_CHECK(fwd_bn(b, li, relu)); break;
        case DLP_LAYER_RELU: DLP_CHECK(fwd_relu(b, li)); break;
        case DLP_LAYER_ADD: DLP_CHECK(fwd_add(b, li, relu)); break;
        case DLP_LAYER_MAXPOOL:
        case DLP_LAYER_AVGPOOL: DLP_CHECK(fwd_pool(b, li)); break;
        case DLP_LAYER_FC: DLP_CHECK(fwd_fc(b, li)); break;
        default: return DLP_ERR(DLP_ERR_INVALID, "cpu: layer %d (%s) has kind %d", li, l->name, (int)l->kind);
        }
        int outv = b->nodes[b->nnodes - 1].out;
        (void)before;
        if (outv < 0) return DLP_ERR(DLP_ERR_INTERNAL, "cpu: layer %s has no output", l->name);
        p->val_of[li] = outv;
        if (relu >= 0) {
            p->val_of[relu] = outv;
            if (l->kind == DLP_LAYER_BN) p->val_of[li] = -2;  // the pre-ReLU BN output does not exist
        }
        if (l->kind == DLP_LAYER_ADD && relu >= 0) p->val_of[li] = -2;
    }
    return DLP_OK;
}

dlp_status cpu_build_train(cpu_plan *p) {
    build b = {.p = p};
    dlp_status st = DLP_OK;
    b.param_done = calloc((size_t)(p->net.nparams + 1), sizeof(int));
    b.deferred = calloc((size_t)(p->net.nlayers * 4 + 8), sizeof(int));
    if (!b.param_done || !b.deferred) st = DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    if (!st) st = build_forward(&b);
    if (st) goto done;
    p->out_value = p->val_of[p->net.nlayers - 1];
    // The output and its gradient (set from the loss or from a given dy) start the backward pass.
    cpu_value *o = &p->vals[p->out_value];
    st = cpu_tensor_new(p, o->x->md, NULL, &o->dx);
    if (st) goto done;
    o->dx_started = 1;
    p->build_mask = 0;
    for (int i = b.nnodes - 1; i >= 0 && !st; i--) {
        st = backward_node(&b, i);
        if (st) dlp_err_context("backward of %s", p->net.layers[b.nodes[i].layer > 0 ? b.nodes[i].layer : 0].name);
    }
    if (st) goto done;
    // buckets whose parameters never got a gradient (unused layers) are final at the end
    if (b.next_bucket < p->nbuckets && p->cfg.on_bucket) {
        cpu_step s = {0};
        s.n = b.next_bucket;
        s.m = p->nbuckets;
        snprintf(s.what, sizeof s.what, "remaining buckets");
        st = cpu_step_fn_add(p, &p->bwd, cpu_bucket_fire, &s);
    }
    // data gradients into the input batch: only when asked for (get_input_grad)
    for (int k = 0; k < b.ndeferred && !st; k++) {
        node *n = &b.nodes[b.deferred[k]];
        if (!p->vals[n->out].dx) continue;  // nothing flowed into this converted copy
        if (n->kind == NODE_CONVERT) st = bwd_convert(&b, n, &p->in_grad);
        else st = bwd_data(&b, n, &p->in_grad);
    }
done:
    for (int i = 0; i < b.nnodes; i++) {
        if (b.nodes[i].fwd_pd) dnnl_primitive_desc_destroy(b.nodes[i].fwd_pd);
        if (b.nodes[i].relu_pd) dnnl_primitive_desc_destroy(b.nodes[i].relu_pd);
    }
    free(b.nodes);
    free(b.param_done);
    free(b.deferred);
    return st;
}
