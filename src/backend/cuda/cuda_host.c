// backend/cuda/cuda_host: the cuda backend's host-side logic (op list, layouts, folding, conversions, buckets, the
// algorithm cache and the graph state machine). No CUDA here: built and tested in every build.
#include "backend/cuda/cuda_host.h"

#include "core/fs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_cuop_names[DLP_CUOP_KIND_COUNT] = {"conv", "bn", "relu", "add", "maxpool", "avgpool", "fc"};

const char *dlp_cuop_kind_name(dlp_cuop_kind k) {
    return (unsigned)k < DLP_CUOP_KIND_COUNT ? k_cuop_names[k] : "?";
}

void dlp_cuda_ops_free(dlp_cuda_oplist *o) {
    if (!o) return;
    free(o->ops);
    free(o->kept);
    free(o->op_of_layer);
    free(o->consumers);
    memset(o, 0, sizeof *o);
}

// The only layer reading `l`, or -1 (none, several, or one reading it twice).
static int sole_consumer(const dlp_net *net, const int *consumers, int l) {
    if (consumers[l] != 1) return -1;
    for (int i = l + 1; i < net->nlayers; i++)
        if (net->layers[i].in0 == l || net->layers[i].in1 == l) return i;
    return -1;
}

// Extends a CONV/BN op over a following residual ADD and/or ReLU, when each is the sole reader of what the op
// has produced so far.
static void extend_op(const dlp_net *net, const int *consumers, int *fused, dlp_cuop *op, int allow_add) {
    int cur = op->out;
    int a = sole_consumer(net, consumers, cur);
    if (allow_add && a >= 0 && !fused[a] && net->layers[a].kind == DLP_LAYER_ADD &&
        net->layers[a].in0 != net->layers[a].in1) {
        op->res = net->layers[a].in0 == cur ? net->layers[a].in1 : net->layers[a].in0;
        op->add_layer = a;
        fused[a] = 1;
        op->out = cur = a;
    }
    int r = sole_consumer(net, consumers, cur);
    if (r >= 0 && !fused[r] && net->layers[r].kind == DLP_LAYER_RELU) {
        op->relu = 1;
        op->relu_layer = r;
        fused[r] = 1;
        op->out = r;
    }
}

static int cmp_op_out(const void *a, const void *b) {
    const dlp_cuop *x = a, *y = b;
    return (x->out > y->out) - (x->out < y->out);
}

dlp_status dlp_cuda_ops_plan(const dlp_net *net, int train, int fuse, dlp_cuda_oplist *o) {
    memset(o, 0, sizeof *o);
    int L = net->nlayers;
    if (L < 2 || net->layers[0].kind != DLP_LAYER_INPUT)
        return DLP_ERR(DLP_ERR_INVALID, "net %s: needs an input layer and at least one more layer", net->arch);
    o->nlayers = L;
    o->ops = calloc((size_t)L, sizeof *o->ops);
    o->kept = calloc((size_t)L, sizeof *o->kept);
    o->op_of_layer = malloc((size_t)L * sizeof *o->op_of_layer);
    o->consumers = calloc((size_t)L, sizeof *o->consumers);
    int *fused = calloc((size_t)L, sizeof *fused);
    if (!o->ops || !o->kept || !o->op_of_layer || !o->consumers || !fused) {
        free(fused);
        dlp_cuda_ops_free(o);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory planning net %s", net->arch);
    }
    dlp_status st = DLP_OK;
    for (int i = 1; i < L; i++) {
        const dlp_layer *l = &net->layers[i];
        if (l->in0 >= 0) o->consumers[l->in0]++;
        if (l->in1 >= 0) o->consumers[l->in1]++;
        if ((l->in0 >= 0 && net->layers[l->in0].kind == DLP_LAYER_FC) ||
            (l->in1 >= 0 && net->layers[l->in1].kind == DLP_LAYER_FC)) {
            st = DLP_ERR(DLP_ERR_UNSUPPORTED,
                         "net %s: layer %d (%s %s) reads the output of an FC layer; the cuda backend keeps FC "
                         "outputs (logits) in fp32 and supports FC only as a last layer",
                         net->arch, i, dlp_layer_kind_name(l->kind), l->name);
            goto fail;
        }
        if (l->kind == DLP_LAYER_MAXPOOL && (l->k < 1 || l->stride < 1 || 2 * l->pad > l->k || l->h < 1 || l->w < 1)) {
            st = DLP_ERR(DLP_ERR_UNSUPPORTED, "net %s: maxpool layer %d: kernel %d, stride %d, pad %d (need pad <= k/2)",
                         net->arch, i, l->k, l->stride, l->pad);
            goto fail;
        }
        if (l->kind == DLP_LAYER_CONV && (l->k < 1 || l->stride < 1 || l->pad < 0)) {
            st = DLP_ERR(DLP_ERR_UNSUPPORTED, "net %s: conv layer %s: kernel %d, stride %d, pad %d", net->arch,
                         l->name, l->k, l->stride, l->pad);
            goto fail;
        }
        if (l->kind == DLP_LAYER_INPUT || (unsigned)l->kind >= DLP_LAYER_KIND_COUNT) {
            st = DLP_ERR(DLP_ERR_UNSUPPORTED, "net %s: layer %d has kind %s, not allowed here", net->arch, i,
                         dlp_layer_kind_name(l->kind));
            goto fail;
        }
    }
    int n = 0;
    for (int i = 1; i < L; i++) {
        if (fused[i]) continue;
        const dlp_layer *l = &net->layers[i];
        dlp_cuop *op = &o->ops[n++];
        memset(op, 0, sizeof *op);
        op->layer = i;
        op->bn = op->res = op->add_layer = op->relu_layer = -1;
        op->in = l->in0;
        op->out = i;
        switch (l->kind) {
        case DLP_LAYER_CONV:
            op->kind = DLP_CUOP_CONV;
            if (!train && fuse) {
                int b = sole_consumer(net, o->consumers, i);
                if (b >= 0 && net->layers[b].kind == DLP_LAYER_BN && net->layers[b].in0 == i) {
                    op->bn = b;
                    fused[b] = 1;
                    op->out = b;
                }
                extend_op(net, o->consumers, fused, op, 1);
            }
            break;
        case DLP_LAYER_BN:
            op->kind = DLP_CUOP_BN;
            if (fuse) extend_op(net, o->consumers, fused, op, 1);
            break;
        case DLP_LAYER_RELU: op->kind = DLP_CUOP_RELU; break;
        case DLP_LAYER_ADD:
            op->kind = DLP_CUOP_ADD;
            op->res = l->in1;
            if (fuse) extend_op(net, o->consumers, fused, op, 0);
            break;
        case DLP_LAYER_MAXPOOL: op->kind = DLP_CUOP_MAXPOOL; break;
        case DLP_LAYER_AVGPOOL: op->kind = DLP_CUOP_AVGPOOL; break;
        case DLP_LAYER_FC: op->kind = DLP_CUOP_FC; break;
        default: break;  // rejected above
        }
    }
    o->nops = n;
    qsort(o->ops, (size_t)n, sizeof *o->ops, cmp_op_out);
    for (int i = 0; i < L; i++) o->op_of_layer[i] = -1;
    o->kept[0] = 1;
    for (int j = 0; j < n; j++) {
        dlp_cuop *op = &o->ops[j];
        o->kept[op->out] = 1;
        o->op_of_layer[op->layer] = j;
        if (op->bn >= 0) o->op_of_layer[op->bn] = j;
        if (op->add_layer >= 0) o->op_of_layer[op->add_layer] = j;
        if (op->relu_layer >= 0) o->op_of_layer[op->relu_layer] = j;
    }
    for (int j = 0; j < n; j++) {  // every input is materialized and produced earlier
        const dlp_cuop *op = &o->ops[j];
        int ins[2] = {op->in, op->res};
        for (int t = 0; t < 2; t++) {
            int x = ins[t];
            if (x < 0) continue;
            if (!o->kept[x] || (x > 0 && o->op_of_layer[x] >= j)) {
                st = DLP_ERR(DLP_ERR_INTERNAL, "net %s: op %d (%s, layer %d) reads layer %d, which is not ready",
                             net->arch, j, dlp_cuop_kind_name(op->kind), op->layer, x);
                goto fail;
            }
        }
    }
    // Backward: which gradient writes come first (ops run in reverse order) and which add.
    int *written = fused;  // reuse as "gradient of layer already written"
    memset(written, 0, (size_t)L * sizeof *written);
    for (int j = n - 1; j >= 0; j--) {
        dlp_cuop *op = &o->ops[j];
        op->grad_in = train && op->in >= 0 && !(op->kind == DLP_CUOP_CONV && op->in == 0);
        op->grad_res = train && op->res >= 0;
        if (op->grad_in) {
            op->acc_in = written[op->in];
            written[op->in] = 1;
        }
        if (op->grad_res) {
            op->acc_res = written[op->res];
            written[op->res] = 1;
        }
    }
    for (int j = n - 1; j >= 0; j--) {
        dlp_cuop *op = &o->ops[j];
        if (train && op->kind == DLP_CUOP_CONV && op->in == 0) {
            op->acc_in_deferred = written[0];
            written[0] = 1;
        }
    }
    free(fused);
    return DLP_OK;
fail:
    free(fused);
    dlp_cuda_ops_free(o);
    return st;
}

// ---- layouts ---------------------------------------------------------------------------------------------------
int dlp_cuda_param_perm(const dlp_net *net, const dlp_param *p, int64_t *k, int64_t *c, int64_t *s) {
    const dlp_layer *l = &net->layers[p->layer];
    int64_t K = 0, C = 0, S = 0;
    if (l->kind == DLP_LAYER_CONV && p->ndim == 4) {
        K = p->shape[0];
        C = p->shape[1];
        S = p->shape[2] * p->shape[3];
    } else if (l->kind == DLP_LAYER_FC && p->ndim == 2 && l->in0 >= 0) {
        const dlp_layer *in = &net->layers[l->in0];
        K = p->shape[0];
        C = in->c;
        S = (int64_t)in->h * in->w;
        if (C * S != p->shape[1]) return 0;
    } else {
        return 0;
    }
    if (S <= 1) return 0;
    if (k) *k = K;
    if (c) *c = C;
    if (s) *s = S;
    return 1;
}

int dlp_cuda_param_is_weight(const dlp_net *net, const dlp_param *p) {
    dlp_layer_kind kind = net->layers[p->layer].kind;
    return (kind == DLP_LAYER_CONV && p->ndim == 4) || (kind == DLP_LAYER_FC && p->ndim == 2);
}

static void perm_params(const dlp_net *net, const float *src, float *dst, int to_device) {
    for (int i = 0; i < net->nparams; i++) {
        const dlp_param *p = &net->params[i];
        const float *a = src + p->offset;
        float *b = dst + p->offset;
        int64_t K, C, S;
        if (!dlp_cuda_param_perm(net, p, &K, &C, &S)) {
            memcpy(b, a, (size_t)p->numel * sizeof *b);
            continue;
        }
        for (int64_t k = 0; k < K; k++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t s = 0; s < S; s++) {
                    int64_t kcs = (k * C + c) * S + s, ksc = (k * S + s) * C + c;
                    if (to_device) b[ksc] = a[kcs];
                    else b[kcs] = a[ksc];
                }
    }
}

void dlp_cuda_params_to_device(const dlp_net *net, const float *src, float *dst) { perm_params(net, src, dst, 1); }
void dlp_cuda_params_from_device(const dlp_net *net, const float *src, float *dst) { perm_params(net, src, dst, 0); }

void dlp_cuda_fold_bn(const float *w, int64_t K, int64_t inner, const float *gamma, const float *beta,
                      const float *mean, const float *var, float eps, float *w_out, float *b_out) {
    for (int64_t k = 0; k < K; k++) {
        double s = (double)gamma[k] / sqrt((double)var[k] + (double)eps);
        for (int64_t i = 0; i < inner; i++) w_out[k * inner + i] = (float)((double)w[k * inner + i] * s);
        b_out[k] = (float)((double)beta[k] - (double)mean[k] * s);
    }
}

static inline void put_dt(void *dst, int64_t i, dlp_dtype dt, float v) {
    if (dt == DLP_DTYPE_F32) ((float *)dst)[i] = v;
    else if (dt == DLP_DTYPE_BF16) ((uint16_t *)dst)[i] = dlp_f32_to_bf16(v);
    else ((uint16_t *)dst)[i] = dlp_f32_to_f16(v);
}
static inline float get_dt(const void *src, int64_t i, dlp_dtype dt) {
    if (dt == DLP_DTYPE_F32) return ((const float *)src)[i];
    if (dt == DLP_DTYPE_BF16) return dlp_bf16_to_f32(((const uint16_t *)src)[i]);
    return dlp_f16_to_f32(((const uint16_t *)src)[i]);
}

void dlp_cuda_nchw_to_nhwc(const float *src, int64_t n, int64_t c, int64_t hw, dlp_dtype dt, void *dst) {
    for (int64_t b = 0; b < n; b++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t i = 0; i < hw; i++) put_dt(dst, (b * hw + i) * c + ch, dt, src[(b * c + ch) * hw + i]);
}

void dlp_cuda_nhwc_to_nchw(const void *src, int64_t n, int64_t c, int64_t hw, dlp_dtype dt, float *dst) {
    for (int64_t b = 0; b < n; b++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t i = 0; i < hw; i++) dst[(b * c + ch) * hw + i] = get_dt(src, (b * hw + i) * c + ch, dt);
}

// ---- buckets ---------------------------------------------------------------------------------------------------
void dlp_cuda_buckets_free(dlp_cuda_bucket *b, int n) {
    if (!b) return;
    for (int i = 0; i < n; i++) free(b[i].segs);
    free(b);
}

int dlp_cuda_param_is_conv_weight(const dlp_net *net, const dlp_param *p) {
    return net->layers[p->layer].kind == DLP_LAYER_CONV && p->ndim == 4;
}

int64_t dlp_cuda_copy_offsets(const dlp_net *net, int64_t *coff) {
    int64_t total = 0;
    for (int i = 0; i < net->nparams; i++) {
        if (!dlp_cuda_param_is_weight(net, &net->params[i])) {
            coff[i] = -1;
            continue;
        }
        coff[i] = total;
        total += (net->params[i].numel + 7) / 8 * 8;  // 16 bytes in fp16/bf16, 32 in fp32
    }
    return total;
}

dlp_status dlp_cuda_buckets_plan(const dlp_net *net, const dlp_cuda_oplist *ops, const int64_t *coff,
                                 int64_t bucket_elems, int *nbuckets, dlp_cuda_bucket **out) {
    *nbuckets = 0;
    *out = NULL;
    dlp_bucket *nb_list = NULL;
    int nb = 0;
    DLP_CHECK(dlp_net_buckets(net, bucket_elems, &nb_list, &nb));
    if (nb == 0) {
        free(nb_list);
        return DLP_OK;
    }
    dlp_cuda_bucket *b = calloc((size_t)nb, sizeof *b);
    if (!b) {
        free(nb_list);
        return DLP_ERR(DLP_ERR_NOMEM, "out of memory planning %d gradient buckets", nb);
    }
    dlp_status st = DLP_OK;
    for (int i = 0; i < nb && st == DLP_OK; i++) {
        const dlp_bucket *nbk = &nb_list[i];
        b[i].offset = nbk->offset;
        b[i].count = nbk->count;
        b[i].after_op = ops ? ops->nops : 0;
        b[i].segs = calloc((size_t)(nbk->param_hi - nbk->param_lo), sizeof *b[i].segs);
        if (!b[i].segs) {
            st = DLP_ERR(DLP_ERR_NOMEM, "out of memory planning gradient buckets");
            break;
        }
        for (int pi = nbk->param_lo; pi < nbk->param_hi; pi++) {
            const dlp_param *p = &net->params[pi];
            if (ops) {
                int j = ops->op_of_layer[p->layer];
                if (j < 0) {
                    st = DLP_ERR(DLP_ERR_INTERNAL, "parameter %s belongs to no op", p->name);
                    break;
                }
                if (j < b[i].after_op) b[i].after_op = j;
            }
            int copy = coff[pi] >= 0, half = copy && dlp_cuda_param_is_conv_weight(net, p);
            dlp_cuda_seg *last = b[i].nsegs ? &b[i].segs[b[i].nsegs - 1] : NULL;
            if (!copy && last && !last->copy && !last->half && last->offset + last->count == p->offset) {
                last->count += p->numel;
            } else {
                dlp_cuda_seg *s = &b[i].segs[b[i].nsegs++];
                s->offset = p->offset;
                s->count = p->numel;
                s->coffset = copy ? coff[pi] : -1;
                s->half = half;
                s->copy = copy;
            }
        }
        // In order: bucket i is announced no earlier than bucket i-1 (ops run backward, so "earlier" = higher op).
        if (i > 0 && b[i].after_op > b[i - 1].after_op) b[i].after_op = b[i - 1].after_op;
    }
    free(nb_list);
    if (st != DLP_OK) {
        dlp_cuda_buckets_free(b, nb);
        return st;
    }
    *nbuckets = nb;
    *out = b;
    return DLP_OK;
}

// ---- algorithm cache ---------------------------------------------------------------------------------------
int dlp_cuda_algo_cache_find(dlp_cuda_algo_cache *c, const dlp_cuda_conv_key *key, const dlp_cuda_algo_row **row) {
    for (int i = 0; i < c->n; i++)
        if (memcmp(&c->rows[i].key, key, sizeof *key) == 0) {
            c->hits++;
            if (row) *row = &c->rows[i];
            return 1;
        }
    c->misses++;
    return 0;
}

dlp_status dlp_cuda_algo_cache_put(dlp_cuda_algo_cache *c, const dlp_cuda_conv_key *key, int algo, int math_type,
                                   int64_t workspace_bytes, float ms) {
    for (int i = 0; i < c->n; i++)
        if (memcmp(&c->rows[i].key, key, sizeof *key) == 0) {
            c->rows[i].algo = algo;
            c->rows[i].math_type = math_type;
            c->rows[i].workspace_bytes = workspace_bytes;
            c->rows[i].ms = ms;
            return DLP_OK;
        }
    if (c->n == c->cap) {
        int nc = c->cap ? 2 * c->cap : 32;
        dlp_cuda_algo_row *r = realloc(c->rows, (size_t)nc * sizeof *r);
        if (!r) return DLP_ERR(DLP_ERR_NOMEM, "out of memory growing the algorithm cache");
        c->rows = r;
        c->cap = nc;
    }
    dlp_cuda_algo_row *r = &c->rows[c->n++];
    memset(r, 0, sizeof *r);
    r->key = *key;
    r->algo = algo;
    r->math_type = math_type;
    r->workspace_bytes = workspace_bytes;
    r->ms = ms;
    return DLP_OK;
}

void dlp_cuda_algo_cache_free(dlp_cuda_algo_cache *c) {
    free(c->rows);
    memset(c, 0, sizeof *c);
}

dlp_status dlp_cuda_algo_cache_load(dlp_cuda_algo_cache *c, const char *path, const char *header, int *loaded) {
    if (loaded) *loaded = 0;
    FILE *f = fopen(path, "r");
    if (!f) return DLP_OK;
    char line[512];
    int ln = 0, n = 0;
    dlp_status st = DLP_OK;
    if (!fgets(line, sizeof line, f) || strncmp(line, header, strlen(header)) != 0 || line[strlen(header)] != '\n') {
        fclose(f);
        return DLP_OK;  // another cuDNN or GPU (or not our file): search again
    }
    ln = 1;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (line[0] == '#' || line[0] == '\n') continue;
        dlp_cuda_conv_key k;
        int algo, mt;
        long long ws;
        float ms;
        memset(&k, 0, sizeof k);
        if (sscanf(line, "%d %d %d %d %d %d %d %d %d %d %d %d %d %d %lld %f", &k.dir, &k.n, &k.c, &k.h, &k.w, &k.k,
                   &k.r, &k.s, &k.stride, &k.pad, &k.dtype, &k.math, &algo, &mt, &ws, &ms) != 16 ||
            k.dir < 0 || k.dir > DLP_CUCONV_FWD_FUSED || ws < 0 || algo < 0 || mt < 0) {
            st = DLP_ERR(DLP_ERR_FORMAT, "%s:%d: not an algorithm cache row (16 numbers)", path, ln);
            break;
        }
        if ((st = dlp_cuda_algo_cache_put(c, &k, algo, mt, ws, ms)) != DLP_OK) break;
        n++;
    }
    fclose(f);
    if (loaded) *loaded = n;
    return st;
}

dlp_status dlp_cuda_algo_cache_save(const dlp_cuda_algo_cache *c, const char *path, const char *header) {
    size_t cap = 256 + (size_t)c->n * 128, used = 0;
    char *buf = malloc(cap);
    if (!buf) return DLP_ERR(DLP_ERR_NOMEM, "out of memory saving %s", path);
    used += (size_t)snprintf(buf + used, cap - used, "%s\n# dir n c h w k r s stride pad dtype math algo math_type workspace_bytes ms\n", header);
    for (int i = 0; i < c->n && used < cap; i++) {
        const dlp_cuda_algo_row *r = &c->rows[i];
        const dlp_cuda_conv_key *k = &r->key;
        used += (size_t)snprintf(buf + used, cap - used, "%d %d %d %d %d %d %d %d %d %d %d %d %d %d %lld %.4f\n", k->dir,
                                 k->n, k->c, k->h, k->w, k->k, k->r, k->s, k->stride, k->pad, k->dtype, k->math, r->algo,
                                 r->math_type, (long long)r->workspace_bytes, r->ms);
    }
    dlp_status st = used < cap ? dlp_write_atomic(path, buf, used, DLP_WRITE_REPLACE)
                               : DLP_ERR(DLP_ERR_INTERNAL, "algorithm cache text overflow");
    free(buf);
    return st;
}

void dlp_cuda_conv_key_str(const dlp_cuda_conv_key *k, char *buf, size_t len) {
    static const char *const dirs[] = {"fwd", "bwd-data", "bwd-filter", "fwd-fused"};
    snprintf(buf, len, "%s n%d c%d %dx%d k%d %dx%d s%d p%d %s %s", (unsigned)k->dir < 4 ? dirs[k->dir] : "?", k->n,
             k->c, k->h, k->w, k->k, k->r, k->s, k->stride, k->pad, dlp_dtype_name((dlp_dtype)k->dtype),
             k->math ? (k->dtype == DLP_DTYPE_F32 ? "tf32" : "tc") : "fma");
}

// ---- graph state machine ---------------------------------------------------------------------------------------
dlp_cugraph_action dlp_cugraph_next(const dlp_cugraph_slot *s, int enabled, int warmup) {
    if (!enabled || s->state == DLP_CUGRAPH_FAILED) return DLP_CUGRAPH_EAGER;
    if (s->state == DLP_CUGRAPH_READY) return DLP_CUGRAPH_REPLAY;
    return s->runs < warmup ? DLP_CUGRAPH_EAGER : DLP_CUGRAPH_CAPTURE;
}

void dlp_cugraph_done(dlp_cugraph_slot *s, dlp_cugraph_action a, int ok) {
    switch (a) {
    case DLP_CUGRAPH_EAGER:
        if (ok) s->runs++;
        break;
    case DLP_CUGRAPH_CAPTURE: s->state = ok ? DLP_CUGRAPH_READY : DLP_CUGRAPH_FAILED; break;
    case DLP_CUGRAPH_REPLAY:
        if (ok) s->replays++;
        break;
    }
}
