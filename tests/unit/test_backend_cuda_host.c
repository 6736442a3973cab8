// Unit tests for the cuda backend's host-side logic (backend/cuda_host.c, backend/cuda_alloc.c), which every build
// has and which needs no GPU: the op list (fusion, BN folding, which backward writes accumulate), parameter
// layouts, BN folding, layout conversion, gradient buckets and segments, the algorithm cache, the graph state
// machine, and the pinned allocator's pageable fallback.
// Main file: src/backend/cuda/cuda_host.c; also src/backend/cuda/cuda_alloc.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_host.h"
#include "nn/resnet.h"
#include "core/rng.h"
#include "testutil.h"

static dlp_status build_resnet(dlp_net *net, int depth, int classes, int size) {
    char name[32];
    snprintf(name, sizeof name, "resnet%d", depth);
    return dlp_model_build(name, classes, size, net);
}

static int find_layer(const dlp_net *net, const char *name) {
    for (int i = 0; i < net->nlayers; i++)
        if (strcmp(net->layers[i].name, name) == 0) return i;
    return -1;
}

static const dlp_cuop *op_with_layer(const dlp_cuda_oplist *o, int layer) {
    for (int j = 0; j < o->nops; j++)
        if (o->ops[j].layer == layer) return &o->ops[j];
    return NULL;
}

static void count_kinds(const dlp_cuda_oplist *o, int *n) {
    memset(n, 0, DLP_CUOP_KIND_COUNT * sizeof *n);
    for (int j = 0; j < o->nops; j++) n[o->ops[j].kind]++;
}

// Every op's inputs are materialized and produced by an earlier op (or are the input).
static void assert_topological(const dlp_net *net, const dlp_cuda_oplist *o) {
    int *done = calloc((size_t)net->nlayers, sizeof *done);
    assert_non_null(done);
    done[0] = 1;
    for (int j = 0; j < o->nops; j++) {
        const dlp_cuop *op = &o->ops[j];
        assert_true(done[op->in]);
        if (op->res >= 0) assert_true(done[op->res]);
        assert_true(o->kept[op->out]);
        done[op->out] = 1;
    }
    assert_true(done[net->nlayers - 1]);
    free(done);
}

static void test_resnet50_train_ops(void **state) {
    (void)state;
    dlp_net net;
    assert_int_equal(build_resnet(&net, 50, 1000, 224), DLP_OK);
    assert_int_equal(net.param_count, 25557032);  // torchvision resnet50: 25,557,032 parameters
    assert_int_equal(net.nparams, 161);
    dlp_cuda_oplist o;
    assert_int_equal(dlp_cuda_ops_plan(&net, 1, 1, &o), DLP_OK);
    int n[DLP_CUOP_KIND_COUNT];
    count_kinds(&o, n);
    assert_int_equal(n[DLP_CUOP_CONV], 53);
    assert_int_equal(n[DLP_CUOP_BN], 53);
    assert_int_equal(n[DLP_CUOP_RELU], 0);  // all fused into BN
    assert_int_equal(n[DLP_CUOP_ADD], 0);   // all fused into bn3
    assert_int_equal(n[DLP_CUOP_MAXPOOL], 1);
    assert_int_equal(n[DLP_CUOP_AVGPOOL], 1);
    assert_int_equal(n[DLP_CUOP_FC], 1);
    assert_topological(&net, &o);
    // layer1.1 (identity shortcut): bn3 fuses the add and the ReLU; its residual is the block input.
    int bn3 = find_layer(&net, "layer1.1.bn3"), c1 = find_layer(&net, "layer1.1.conv1");
    const dlp_cuop *g = op_with_layer(&o, bn3), *conv1 = op_with_layer(&o, c1);
    assert_non_null(g);
    assert_non_null(conv1);
    assert_int_equal(g->kind, DLP_CUOP_BN);
    assert_true(g->relu);
    assert_int_equal(g->res, net.layers[c1].in0);
    assert_int_equal(net.layers[g->add_layer].kind, DLP_LAYER_ADD);
    assert_int_equal(g->out, g->relu_layer);
    // Backward: the fused add writes the block input's gradient first; conv1's data gradient adds to it.
    assert_int_equal(g->acc_res, 0);
    assert_int_equal(conv1->acc_in, 1);
    // layer2.0 (downsample): the shortcut BN is alone, its conv writes the block input's gradient first.
    int ds0 = find_layer(&net, "layer2.0.downsample.0"), ds1 = find_layer(&net, "layer2.0.downsample.1");
    int l2c1 = find_layer(&net, "layer2.0.conv1"), l2bn3 = find_layer(&net, "layer2.0.bn3");
    const dlp_cuop *dsconv = op_with_layer(&o, ds0), *dsbn = op_with_layer(&o, ds1);
    assert_int_equal(dsbn->res, -1);
    assert_false(dsbn->relu);
    assert_int_equal(op_with_layer(&o, l2bn3)->res, ds1);
    assert_int_equal(dsconv->acc_in, 0);
    assert_int_equal(op_with_layer(&o, l2c1)->acc_in, 1);
    // The first conv reads the input: its data gradient is deferred, and nothing else writes it.
    const dlp_cuop *first = op_with_layer(&o, find_layer(&net, "conv1"));
    assert_int_equal(first->in, 0);
    assert_false(first->grad_in);
    assert_int_equal(first->acc_in_deferred, 0);
    // BN of a conv reads a single-consumer tensor: never accumulates (cuDNN BN-Ex cannot).
    for (int j = 0; j < o.nops; j++)
        if (o.ops[j].kind == DLP_CUOP_BN) assert_int_equal(o.ops[j].acc_in, 0);
    dlp_cuda_ops_free(&o);
    dlp_net_free(&net);
}

static void test_resnet50_infer_ops(void **state) {
    (void)state;
    dlp_net net;
    assert_int_equal(build_resnet(&net, 50, 1000, 224), DLP_OK);
    dlp_cuda_oplist o;
    assert_int_equal(dlp_cuda_ops_plan(&net, 0, 1, &o), DLP_OK);
    int n[DLP_CUOP_KIND_COUNT];
    count_kinds(&o, n);
    assert_int_equal(n[DLP_CUOP_CONV], 53);
    assert_int_equal(n[DLP_CUOP_BN], 0);  // folded
    assert_int_equal(o.nops, 53 + 3);
    int fused_add = 0, relu = 0;
    for (int j = 0; j < o.nops; j++) {
        const dlp_cuop *op = &o.ops[j];
        assert_false(op->grad_in);
        if (op->kind != DLP_CUOP_CONV) continue;
        assert_true(op->bn >= 0);
        assert_int_equal(net.layers[op->bn].in0, op->layer);
        fused_add += op->res >= 0;
        relu += op->relu;
    }
    assert_int_equal(fused_add, 16);  // one per bottleneck block
    assert_int_equal(relu, 53 - 4);   // all but the four downsample convs
    assert_topological(&net, &o);
    dlp_cuda_ops_free(&o);
    dlp_net_free(&net);
}

static void test_ops_unfused_and_odd_nets(void **state) {
    (void)state;
    dlp_net net;
    assert_int_equal(build_resnet(&net, 18, 10, 64), DLP_OK);
    dlp_cuda_oplist o;
    assert_int_equal(dlp_cuda_ops_plan(&net, 1, 0, &o), DLP_OK);
    assert_int_equal(o.nops, net.nlayers - 1);  // one op per layer
    assert_topological(&net, &o);
    dlp_cuda_ops_free(&o);
    dlp_net_free(&net);

    // x + x: the second write of x's gradient adds to the first; relu(x) also reads x.
    assert_int_equal(dlp_net_init(&net, "xx", 8, 4, 4), DLP_OK);
    int r = dlp_net_relu(&net, 0);
    int a = dlp_net_add(&net, r, r);
    int r2 = dlp_net_relu(&net, a);
    assert_true(r2 > 0);
    assert_int_equal(dlp_cuda_ops_plan(&net, 1, 1, &o), DLP_OK);
    assert_int_equal(o.nops, 2);  // relu; add+relu
    const dlp_cuop *add = op_with_layer(&o, a);
    assert_non_null(add);
    assert_true(add->relu);
    assert_int_equal(add->in, r);
    assert_int_equal(add->res, r);
    assert_int_equal(add->acc_in, 0);
    assert_int_equal(add->acc_res, 1);
    assert_true(op_with_layer(&o, r)->grad_in);  // relu of the input: cheap, computed in backward
    dlp_cuda_ops_free(&o);
    dlp_net_free(&net);

    // A layer reading the FC's output is refused with a message naming it.
    assert_int_equal(dlp_net_init(&net, "fcfc", 4, 2, 2), DLP_OK);
    int f = dlp_net_fc(&net, "fc", 0, 6);
    assert_true(dlp_net_relu(&net, f) > 0);
    assert_int_equal(dlp_cuda_ops_plan(&net, 1, 1, &o), DLP_ERR_UNSUPPORTED);
    assert_non_null(strstr(dlp_err_msg(), "FC"));
    dlp_err_clear();
    dlp_net_free(&net);

    // Two convs reading the input: the later one (in backward order, first) overwrites, the other adds.
    assert_int_equal(dlp_net_init(&net, "two", 3, 8, 8), DLP_OK);
    int c1 = dlp_net_conv(&net, "c1", 0, 4, 3, 1, 1);
    int c2 = dlp_net_conv(&net, "c2", 0, 4, 1, 1, 0);
    assert_true(dlp_net_add(&net, c1, c2) > 0);
    assert_int_equal(dlp_cuda_ops_plan(&net, 1, 1, &o), DLP_OK);
    assert_int_equal(op_with_layer(&o, c2)->acc_in_deferred, 0);
    assert_int_equal(op_with_layer(&o, c1)->acc_in_deferred, 1);
    dlp_cuda_ops_free(&o);
    dlp_net_free(&net);
}

static void test_param_layouts(void **state) {
    (void)state;
    dlp_net net;
    assert_int_equal(dlp_net_init(&net, "lay", 3, 5, 4), DLP_OK);
    int c = dlp_net_conv(&net, "conv", 0, 6, 3, 1, 1);  // weight (6, 3, 3, 3)
    int b = dlp_net_bn(&net, "bn", c);
    assert_true(dlp_net_fc(&net, "fc", b, 7) > 0);      // weight (7, 6*5*4) over a 6x5x4 input
    float *src = malloc((size_t)net.param_count * 4), *dev = malloc((size_t)net.param_count * 4),
          *back = malloc((size_t)net.param_count * 4);
    for (int64_t i = 0; i < net.param_count; i++) src[i] = (float)i;
    dlp_cuda_params_to_device(&net, src, dev);
    dlp_cuda_params_from_device(&net, dev, back);
    assert_memory_equal(src, back, (size_t)net.param_count * 4);
    const dlp_param *cw = dlp_net_find_param(&net, "conv.weight"), *fw = dlp_net_find_param(&net, "fc.weight");
    const dlp_param *bw = dlp_net_find_param(&net, "bn.weight");
    int64_t K, C, S;
    assert_true(dlp_cuda_param_perm(&net, cw, &K, &C, &S));
    assert_int_equal(K, 6);
    assert_int_equal(C, 3);
    assert_int_equal(S, 9);
    // conv weight[k=4][c=2][r=1][s=2] -> device [k][r][s][c]
    int64_t kcrs = ((4 * 3 + 2) * 3 + 1) * 3 + 2, krsc = ((4 * 3 + 1) * 3 + 2) * 3 + 2;
    assert_float_equal(dev[cw->offset + krsc], src[cw->offset + kcrs], 0);
    // fc weight[k=5][c=3][h=2][w=1] (torch flattens NCHW) -> device [k][h][w][c] (our activations are NHWC)
    assert_true(dlp_cuda_param_perm(&net, fw, &K, &C, &S));
    assert_int_equal(C, 6);
    assert_int_equal(S, 20);
    int64_t chw = 5 * 120 + (3 * 5 + 2) * 4 + 1, hwc = 5 * 120 + (2 * 4 + 1) * 6 + 3;
    assert_float_equal(dev[fw->offset + hwc], src[fw->offset + chw], 0);
    assert_false(dlp_cuda_param_perm(&net, bw, NULL, NULL, NULL));
    assert_true(dlp_cuda_param_is_weight(&net, cw));
    assert_true(dlp_cuda_param_is_weight(&net, fw));
    assert_false(dlp_cuda_param_is_weight(&net, bw));
    assert_true(dlp_cuda_param_is_conv_weight(&net, cw));
    assert_false(dlp_cuda_param_is_conv_weight(&net, fw));
    free(src);
    free(dev);
    free(back);
    dlp_net_free(&net);
}

static void test_fold_bn(void **state) {
    (void)state;
    const int K = 3, inner = 4;
    float w[12], wf[12], bf[3];
    for (int i = 0; i < 12; i++) w[i] = 0.1f * (float)(i - 5);
    const float gamma[3] = {1.5f, -0.5f, 2.0f}, beta[3] = {0.1f, 0.2f, -0.3f}, mean[3] = {0.5f, -1.0f, 0.0f},
                var[3] = {4.0f, 0.25f, 1.0f};
    dlp_cuda_fold_bn(w, K, inner, gamma, beta, mean, var, 1e-5f, wf, bf);
    // BN(conv(x)) == conv'(x) + b' for any conv output value y: check on y = sum_i w_i * x_i with x_i = 1.
    for (int k = 0; k < K; k++) {
        double y = 0, y2 = 0;
        for (int i = 0; i < inner; i++) y += w[k * inner + i], y2 += wf[k * inner + i];
        double bn = gamma[k] * (y - mean[k]) / sqrt(var[k] + 1e-5) + beta[k];
        assert_float_equal(y2 + bf[k], bn, 1e-5);
    }
}

static void test_layout_conversion(void **state) {
    (void)state;
    const int n = 2, c = 3, hw = 5;
    float src[30], back[30];
    for (int i = 0; i < 30; i++) src[i] = (float)i * 0.25f - 3.0f;  // exact in fp16 and bf16
    dlp_dtype dts[3] = {DLP_DTYPE_F32, DLP_DTYPE_BF16, DLP_DTYPE_F16};
    for (int d = 0; d < 3; d++) {
        uint8_t buf[30 * 4];
        dlp_cuda_nchw_to_nhwc(src, n, c, hw, dts[d], buf);
        dlp_cuda_nhwc_to_nchw(buf, n, c, hw, dts[d], back);
        assert_memory_equal(src, back, sizeof src);
        // element (n=1, c=2, p=3) lives at NHWC index (1*5 + 3)*3 + 2
        float v = dts[d] == DLP_DTYPE_F32   ? ((float *)buf)[(1 * 5 + 3) * 3 + 2]
                  : dts[d] == DLP_DTYPE_F16 ? dlp_f16_to_f32(((uint16_t *)buf)[(1 * 5 + 3) * 3 + 2])
                                            : dlp_bf16_to_f32(((uint16_t *)buf)[(1 * 5 + 3) * 3 + 2]);
        assert_float_equal(v, src[(1 * 3 + 2) * 5 + 3], 0);
    }
}

static void test_buckets(void **state) {
    (void)state;
    dlp_net net;
    assert_int_equal(build_resnet(&net, 50, 1000, 224), DLP_OK);
    dlp_cuda_oplist o;
    assert_int_equal(dlp_cuda_ops_plan(&net, 1, 1, &o), DLP_OK);
    int64_t *coff = malloc((size_t)net.nparams * sizeof *coff);
    int64_t ncopy = dlp_cuda_copy_offsets(&net, coff);
    int64_t weights = 0;
    for (int i = 0; i < net.nparams; i++) {
        if (coff[i] < 0) {
            assert_false(dlp_cuda_param_is_weight(&net, &net.params[i]));
            continue;
        }
        assert_int_equal(coff[i] % 8, 0);  // 16-byte aligned in fp16/bf16
        weights += net.params[i].numel;
    }
    assert_true(ncopy >= weights && ncopy < weights + 8 * net.nparams);
    const int64_t be = 1000000;
    int nb, nref;
    dlp_cuda_bucket *b;
    dlp_bucket *ref;
    assert_int_equal(dlp_net_buckets(&net, be, &ref, &nref), DLP_OK);
    assert_int_equal(dlp_cuda_buckets_plan(&net, &o, coff, be, &nb, &b), DLP_OK);
    assert_int_equal(nb, nref);  // the same cut as every backend (parameter boundaries, from the end)
    int64_t expect_end = net.param_count;
    int prev_after = o.nops;
    for (int i = 0; i < nb; i++) {
        assert_int_equal(b[i].offset, ref[i].offset);
        assert_int_equal(b[i].count, ref[i].count);
        assert_int_equal(b[i].offset + b[i].count, expect_end);  // last elements first, contiguous
        expect_end = b[i].offset;
        int64_t covered = 0, pos = b[i].offset;
        int min_op = o.nops;
        for (int s = 0; s < b[i].nsegs; s++) {
            const dlp_cuda_seg *sg = &b[i].segs[s];
            assert_int_equal(sg->offset, pos);
            pos += sg->count;
            covered += sg->count;
            for (int pi = 0; pi < net.nparams; pi++) {
                const dlp_param *p = &net.params[pi];
                if (sg->offset >= p->offset + p->numel || sg->offset + sg->count <= p->offset) continue;
                if (o.op_of_layer[p->layer] < min_op) min_op = o.op_of_layer[p->layer];
                if (sg->copy) {  // a segment with a copy is exactly one weight
                    assert_int_equal(sg->offset, p->offset);
                    assert_int_equal(sg->count, p->numel);
                    assert_int_equal(sg->coffset, coff[pi]);
                    assert_int_equal(sg->half, dlp_cuda_param_is_conv_weight(&net, p));
                } else {
                    assert_false(sg->half);
                    assert_false(dlp_cuda_param_is_weight(&net, p));
                }
            }
        }
        assert_int_equal(covered, b[i].count);
        // announced when its last gradient is done, but never before the bucket preceding it
        int want = min_op < prev_after ? min_op : prev_after;
        assert_int_equal(b[i].after_op, want);
        prev_after = b[i].after_op;
    }
    assert_int_equal(expect_end, 0);
    assert_true(b[0].after_op > b[nb - 1].after_op);  // the FC's bucket is final before conv1's
    free(ref);
    dlp_cuda_buckets_free(b, nb);
    // One bucket: after the first op (the last to run backward)
    assert_int_equal(dlp_cuda_buckets_plan(&net, &o, coff, 0, &nb, &b), DLP_OK);
    assert_int_equal(nb, 1);
    assert_int_equal(b[0].count, net.param_count);
    assert_int_equal(b[0].after_op, 0);
    dlp_cuda_buckets_free(b, nb);
    free(coff);
    dlp_cuda_ops_free(&o);
    dlp_net_free(&net);
}

static void test_algo_cache(void **state) {
    (void)state;
    dlp_cuda_algo_cache c;
    memset(&c, 0, sizeof c);
    dlp_cuda_conv_key k1 = {DLP_CUCONV_FWD, 256, 64, 56, 56, 64, 3, 3, 1, 1, DLP_DTYPE_F16, 1};
    dlp_cuda_conv_key k2 = k1, k3 = k1;
    k2.dir = DLP_CUCONV_BWD_DATA;  // same shape, other direction: another entry
    k3.n = 128;                    // same layer at another batch: another entry
    const dlp_cuda_algo_row *r;
    assert_false(dlp_cuda_algo_cache_find(&c, &k1, &r));
    assert_int_equal(dlp_cuda_algo_cache_put(&c, &k1, 1, 1, 1 << 20, 0.5f), DLP_OK);
    assert_int_equal(dlp_cuda_algo_cache_put(&c, &k2, 4, 1, 0, 0.7f), DLP_OK);
    assert_true(dlp_cuda_algo_cache_find(&c, &k1, &r));
    assert_int_equal(r->algo, 1);
    assert_int_equal(r->workspace_bytes, 1 << 20);
    assert_true(dlp_cuda_algo_cache_find(&c, &k2, &r));
    assert_int_equal(r->algo, 4);
    assert_false(dlp_cuda_algo_cache_find(&c, &k3, &r));
    for (int i = 0; i < 100; i++) {  // growth
        dlp_cuda_conv_key k = k1;
        k.c = 1000 + i;
        assert_int_equal(dlp_cuda_algo_cache_put(&c, &k, i, 0, 0, 0), DLP_OK);
    }
    assert_int_equal(c.n, 102);
    assert_int_equal(dlp_cuda_algo_cache_put(&c, &k1, 7, 0, 0, 0), DLP_OK);  // update in place
    assert_int_equal(c.n, 102);
    assert_true(dlp_cuda_algo_cache_find(&c, &k1, &r));
    assert_int_equal(r->algo, 7);
    assert_int_equal(c.hits, 3);
    assert_int_equal(c.misses, 2);
    char s[160];
    dlp_cuda_conv_key_str(&k1, s, sizeof s);
    assert_string_equal(s, "fwd n256 c64 56x56 k64 3x3 s1 p1 fp16 tc");
    dlp_cuda_algo_cache_free(&c);
    // The ResNet-50 training plan searches each distinct (shape, direction) once.
    dlp_net net;
    assert_int_equal(build_resnet(&net, 50, 1000, 224), DLP_OK);
    int distinct = 0;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < net.nlayers; i++) {
        const dlp_layer *l = &net.layers[i], *x;
        if (l->kind != DLP_LAYER_CONV) continue;
        x = &net.layers[l->in0];
        dlp_cuda_conv_key k = {DLP_CUCONV_FWD, 256, x->c, x->h, x->w, l->c, l->k, l->k, l->stride, l->pad, DLP_DTYPE_F16, 1};
        if (!dlp_cuda_algo_cache_find(&c, &k, &r)) {
            distinct++;
            assert_int_equal(dlp_cuda_algo_cache_put(&c, &k, 0, 0, 0, 0), DLP_OK);
        }
    }
    assert_int_equal(distinct, 23);  // of 53 convolutions: conv1, 4 in layer1, 6 in each later stage
    dlp_cuda_algo_cache_free(&c);
    dlp_net_free(&net);
}

static void test_algo_cache_file(void **state) {
    (void)state;
    char dir[512], path[600];
    dlp_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/algos.txt", dir);
    const char *hdr = "dlperf-cuda-algos/1 cudnn 91900 gpu NVIDIA H200 cc 9.0";
    dlp_cuda_algo_cache a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    int n = -1;
    assert_int_equal(dlp_cuda_algo_cache_load(&b, path, hdr, &n), DLP_OK);  // no file yet: nothing, no error
    assert_int_equal(n, 0);
    for (int i = 0; i < 5; i++) {
        dlp_cuda_conv_key k = {i % 3, 256, 64 + i, 56, 56, 64, 3, 3, 1, 1, DLP_DTYPE_F16, 1};
        assert_int_equal(dlp_cuda_algo_cache_put(&a, &k, i, 1, (int64_t)i << 30, 0.25f * i), DLP_OK);
    }
    assert_int_equal(dlp_cuda_algo_cache_save(&a, path, hdr), DLP_OK);
    assert_int_equal(dlp_cuda_algo_cache_load(&b, path, hdr, &n), DLP_OK);
    assert_int_equal(n, 5);
    for (int i = 0; i < 5; i++) {
        const dlp_cuda_algo_row *r;
        assert_true(dlp_cuda_algo_cache_find(&b, &a.rows[i].key, &r));
        assert_int_equal(r->algo, i);
        assert_int_equal(r->math_type, 1);
        assert_int_equal(r->workspace_bytes, (int64_t)i << 30);
        assert_float_equal(r->ms, 0.25f * i, 1e-4);
    }
    dlp_cuda_algo_cache_free(&b);
    // another GPU or cuDNN: ignored
    assert_int_equal(dlp_cuda_algo_cache_load(&b, path, "dlperf-cuda-algos/1 cudnn 91900 gpu NVIDIA A100 cc 8.0", &n), DLP_OK);
    assert_int_equal(n, 0);
    assert_int_equal(b.n, 0);
    // a damaged row: an error naming the file and line
    FILE *f = fopen(path, "a");
    fputs("0 256 64 56\n", f);
    fclose(f);
    assert_int_equal(dlp_cuda_algo_cache_load(&b, path, hdr, &n), DLP_ERR_FORMAT);
    assert_non_null(strstr(dlp_err_msg(), "algos.txt:8:"));
    dlp_err_clear();
    dlp_cuda_algo_cache_free(&a);
    dlp_cuda_algo_cache_free(&b);
    dlp_test_rmtree(dir);
}

static void test_graph_state_machine(void **state) {
    (void)state;
    static const struct {
        int enabled, warmup;
        int capture_ok;
        const char *expect;  // actions over 6 calls: E eager, C capture, R replay
    } rows[] = {
        {1, 2, 1, "EECRRR"},
        {1, 0, 1, "CRRRRR"},
        {1, 2, 0, "EECEEE"},  // a failed capture stays eager
        {0, 2, 1, "EEEEEE"},  // DLPERF_CUDA_GRAPHS=0
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        dlp_cugraph_slot s;
        memset(&s, 0, sizeof s);
        char got[7] = "";
        for (int i = 0; i < 6; i++) {
            dlp_cugraph_action a = dlp_cugraph_next(&s, rows[r].enabled, rows[r].warmup);
            got[i] = a == DLP_CUGRAPH_EAGER ? 'E' : a == DLP_CUGRAPH_CAPTURE ? 'C' : 'R';
            dlp_cugraph_done(&s, a, a == DLP_CUGRAPH_CAPTURE ? rows[r].capture_ok : 1);
        }
        assert_string_equal(got, rows[r].expect);
    }
    dlp_cugraph_slot s;
    memset(&s, 0, sizeof s);
    dlp_cugraph_done(&s, DLP_CUGRAPH_EAGER, 0);  // a failed eager run does not count as warm-up
    assert_int_equal(s.runs, 0);
}

static void test_pinned_allocator_fallback(void **state) {
    (void)state;
    const dlp_allocator *a = dlp_cuda_host_allocator();
    assert_non_null(a);
    assert_string_equal(a->name, "cuda-pinned");
    int64_t p0, g0, p1, g1;
    dlp_cuda_host_stats(&p0, &g0);
    void *blocks[4];
    size_t sizes[4] = {1, 100, 4096, 3 << 20};
    for (int i = 0; i < 4; i++) {
        blocks[i] = a->alloc(a->ctx, sizes[i]);
        assert_non_null(blocks[i]);
        assert_int_equal((uintptr_t)blocks[i] % DLP_ALIGN, 0);
        const unsigned char *b = blocks[i];
        for (size_t j = 0; j < sizes[i]; j += 997) assert_int_equal(b[j], 0);  // zeroed
        memset(blocks[i], 0xab, sizes[i]);
    }
    dlp_cuda_host_stats(&p1, &g1);
    assert_int_equal((p1 - p0) + (g1 - g0), 4);
    // Without a device (or without CUDA in the build) every block is pageable, and says so.
    int ndev_pinned = (int)(p1 - p0);
    for (int i = 0; i < 4; i++) assert_int_equal(dlp_cuda_host_is_pinned(blocks[i]), ndev_pinned > 0);
    for (int i = 0; i < 4; i++) a->free(a->ctx, blocks[i]);
    a->free(a->ctx, NULL);
    assert_false(dlp_cuda_host_is_pinned(NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet50_train_ops),
        cmocka_unit_test(test_resnet50_infer_ops),
        cmocka_unit_test(test_ops_unfused_and_odd_nets),
        cmocka_unit_test(test_param_layouts),
        cmocka_unit_test(test_fold_bn),
        cmocka_unit_test(test_layout_conversion),
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_algo_cache),
        cmocka_unit_test(test_algo_cache_file),
        cmocka_unit_test(test_graph_state_machine),
        cmocka_unit_test(test_pinned_allocator_fallback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
