// backend/cpu/cpu_mem: the oneDNN backend's bookkeeping — owned allocations, tensors and pooled buffers,
// values, primitive descriptors with a shared user scratchpad, step lists, reorders, weight copies.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl_debug.h>

#include "backend/cpu/cpu.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/log.h"

const char *cpu_dnnl_status_str(dnnl_status_t s) {
    switch (s) {
    case dnnl_success: return "success";
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "no implementation for these shapes/types on this CPU";
    case dnnl_last_impl_reached: return "no more implementations";
    case dnnl_runtime_error: return "runtime error";
    case dnnl_not_required: return "not required";
    default: return "unknown oneDNN status";
    }
}

// Grows *arr (elements of size elem) so that index n fits.
static int grow(void **arr, int *cap, int n, size_t elem) {
    if (n < *cap) return 0;
    int nc = *cap ? *cap * 2 : 32;
    while (nc <= n) nc *= 2;
    void *q = realloc(*arr, (size_t)nc * elem);
    if (!q) return -1;
    memset((char *)q + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *arr = q;
    *cap = nc;
    return 0;
}

void *cpu_alloc(cpu_plan *p, size_t bytes) {
    if (grow((void **)&p->allocs, &p->cap_allocs, p->nallocs, sizeof(void *))) return NULL;
    // refuse before touching more memory than the machine has (dlp_alloc_aligned zeroes what it returns, and
    // an overcommitted allocation would meet the OOM killer instead of an error)
    if (p->mem_limit_bytes > 0 && p->alloc_bytes + (int64_t)bytes > p->mem_limit_bytes) {
        p->mem_limit_hit = 1;
        return NULL;
    }
    void *q = dlp_alloc_aligned(bytes ? bytes : 64);
    if (q) {
        p->allocs[p->nallocs++] = q;
        p->alloc_bytes += (int64_t)bytes;
    }
    return q;
}

int64_t cpu_mem_available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    fclose(f);
    return (int64_t)kb * 1024;
}

static dnnl_format_tag_t plain_tag(int ndims) {
    switch (ndims) {
    case 1: return dnnl_a;
    case 2: return dnnl_ab;
    case 3: return dnnl_abc;
    case 4: return dnnl_abcd;
    default: return dnnl_format_tag_undef;
    }
}

// Takes ownership of md (a descriptor the plan made): destroyed at teardown.
static dlp_status md_own(cpu_plan *p, dnnl_memory_desc_t md) {
    if (grow((void **)&p->mds, &p->cap_mds, p->nmds, sizeof(dnnl_memory_desc_t))) {
        dnnl_memory_desc_destroy(md);
        return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    }
    p->mds[p->nmds++] = md;
    return DLP_OK;
}

static dlp_status md_tag(cpu_plan *p, const_dnnl_memory_desc_t *out, int ndims, const int64_t *dims,
                         dnnl_data_type_t dt, dnnl_format_tag_t tag) {
    dnnl_dims_t d;
    for (int i = 0; i < ndims; i++) d[i] = dims[i];
    dnnl_memory_desc_t md;
    CPU_DNNL(dnnl_memory_desc_create_with_tag(&md, ndims, d, dt, tag), "%dD tensor", ndims);
    DLP_CHECK(md_own(p, md));
    *out = md;
    return DLP_OK;
}

dlp_status cpu_md_plain(cpu_plan *p, const_dnnl_memory_desc_t *md, int ndims, const int64_t *dims,
                        dnnl_data_type_t dt) {
    return md_tag(p, md, ndims, dims, dt, plain_tag(ndims));
}

dlp_status cpu_md_any(cpu_plan *p, const_dnnl_memory_desc_t *md, int ndims, const int64_t *dims,
                      dnnl_data_type_t dt) {
    return md_tag(p, md, ndims, dims, dt, dnnl_format_tag_any);
}

const_dnnl_memory_desc_t cpu_md_keep(cpu_plan *p, const_dnnl_memory_desc_t md) {
    dnnl_memory_desc_t c = NULL;
    dnnl_status_t s = dnnl_memory_desc_clone(&c, md);
    if (s != dnnl_success) {
        DLP_ERR(DLP_ERR_NOMEM, "oneDNN: cannot copy a memory descriptor: %s", cpu_dnnl_status_str(s));
        return NULL;
    }
    return md_own(p, c) == DLP_OK ? c : NULL;
}

int cpu_md_dims(const_dnnl_memory_desc_t md, int64_t dims[DNNL_MAX_NDIMS]) {
    int nd = 0;
    const dnnl_dims_t *d = NULL;
    if (!md || dnnl_memory_desc_query(md, dnnl_query_ndims_s32, &nd) != dnnl_success ||
        dnnl_memory_desc_query(md, dnnl_query_dims, &d) != dnnl_success || !d || nd < 0 || nd > DNNL_MAX_NDIMS)
        return 0;
    for (int i = 0; i < nd; i++) dims[i] = (*d)[i];
    return nd;
}

dnnl_data_type_t cpu_md_dt(const_dnnl_memory_desc_t md) {
    dnnl_data_type_t dt = dnnl_data_type_undef;
    if (md) dnnl_memory_desc_query(md, dnnl_query_data_type, &dt);
    return dt;
}

dlp_status cpu_mem_new(cpu_plan *p, const_dnnl_memory_desc_t md, void *data, dnnl_memory_t *out) {
    if (grow((void **)&p->mems, &p->cap_mems, p->nmems, sizeof(dnnl_memory_t)))
        return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    CPU_DNNL(dnnl_memory_create(out, md, p->eng, data ? data : DNNL_MEMORY_NONE), "memory object");
    p->mems[p->nmems++] = *out;
    return DLP_OK;
}

static dlp_status tensor_register(cpu_plan *p, const_dnnl_memory_desc_t md, void *data, int buf, cpu_tensor **out) {
    if (grow((void **)&p->tensors, &p->cap_tensors, p->ntensors, sizeof(cpu_tensor *)))
        return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    // the tensor's own copy: md may belong to a primitive descriptor that goes before the plan does
    md = cpu_md_keep(p, md);
    if (!md) return dlp_err_status();
    cpu_tensor *t = calloc(1, sizeof *t);
    DLP_TRY_ALLOC(t);
    p->tensors[p->ntensors++] = t;
    t->md = md;
    t->data = data;
    t->buf = buf;
    CPU_DNNL(dnnl_memory_create(&t->mem, md, p->eng, data), "tensor");
    *out = t;
    return DLP_OK;
}

dlp_status cpu_tensor_new(cpu_plan *p, const_dnnl_memory_desc_t md, void *data, cpu_tensor **out) {
    if (data) return tensor_register(p, md, data, -1, out);
    // allocated by cpu_pool_finish, once the whole plan's memory is known
    DLP_CHECK(tensor_register(p, md, NULL, CPU_BUF_OWNED, out));
    (*out)->own_bytes = dnnl_memory_desc_get_size(md);
    p->act_bytes += (int64_t)(*out)->own_bytes;
    return DLP_OK;
}

dlp_status cpu_tensor_pooled(cpu_plan *p, const_dnnl_memory_desc_t md, cpu_tensor **out) {
    size_t bytes = dnnl_memory_desc_get_size(md);
    int best = -1;
    for (int i = 0; i < p->nbufpool; i++) {  // best fit among free buffers; else grow the largest free one
        cpu_buffer *b = &p->bufpool[i];
        if (b->refs || b->pinned) continue;
        if (best < 0) {
            best = i;
            continue;
        }
        size_t cb = p->bufpool[best].bytes;
        int fits = b->bytes >= bytes, bfits = cb >= bytes;
        if ((fits && (!bfits || b->bytes < cb)) || (!fits && !bfits && b->bytes > cb)) best = i;
    }
    if (best < 0) {
        if (grow((void **)&p->bufpool, &p->cap_bufpool, p->nbufpool, sizeof(cpu_buffer)))
            return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
        best = p->nbufpool++;
        memset(&p->bufpool[best], 0, sizeof(cpu_buffer));
    }
    cpu_buffer *b = &p->bufpool[best];
    if (b->bytes < bytes) b->bytes = bytes;  // the memory is allocated (at its largest size) by cpu_pool_finish
    b->refs = 1;
    return tensor_register(p, md, NULL, best, out);
}

void cpu_tensor_retain(cpu_plan *p, cpu_tensor *t) {
    if (t && t->buf >= 0) p->bufpool[t->buf].refs++;
}

void cpu_tensor_release(cpu_plan *p, cpu_tensor *t) {
    if (t && t->buf >= 0 && p->bufpool[t->buf].refs > 0) p->bufpool[t->buf].refs--;
}

int cpu_tensor_exclusive(const cpu_plan *p, const cpu_tensor *t) {
    return t->buf >= 0 && p->bufpool[t->buf].refs == 1 && !p->bufpool[t->buf].pinned;
}

dlp_status cpu_tensor_view(cpu_plan *p, cpu_tensor *t, const_dnnl_memory_desc_t md, cpu_tensor **out) {
    if (t->buf < 0 || dnnl_memory_desc_get_size(md) > dnnl_memory_desc_get_size(t->md))
        return DLP_ERR(DLP_ERR_INTERNAL, "cpu: a view of a tensor that is not a pooled one of that size");
    DLP_CHECK(tensor_register(p, md, NULL, t->buf, out));
    cpu_tensor_retain(p, t);
    return DLP_OK;
}

void cpu_tensor_pin(cpu_plan *p, cpu_tensor *t) {
    if (t && t->buf >= 0) p->bufpool[t->buf].pinned = 1;
}

// Allocates the pooled buffers and binds every pooled tensor to its buffer (sizes are known only at the end).
dlp_status cpu_pool_finish(cpu_plan *p, int64_t *total_bytes) {
    int64_t total = 0, need = p->act_bytes;
    for (int i = 0; i < p->nbufpool; i++) need += (int64_t)p->bufpool[i].bytes;
    if (p->mem_limit_bytes > 0 && p->alloc_bytes + need > p->mem_limit_bytes) {
        p->mem_limit_hit = 1;
        p->alloc_bytes += need;
        return DLP_ERR(DLP_ERR_NOMEM, "activations and gradients need %.1f GiB", (double)need / (1 << 30));
    }
    for (int i = 0; i < p->ntensors; i++) {
        cpu_tensor *t = p->tensors[i];
        if (t->buf != CPU_BUF_OWNED || t->data) continue;
        t->data = cpu_alloc(p, t->own_bytes);
        if (!t->data) return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory allocating a %zu-byte tensor", t->own_bytes);
        CPU_DNNL(dnnl_memory_set_data_handle(t->mem, t->data), "binding a tensor");
    }
    for (int i = 0; i < p->nbufpool; i++) {
        cpu_buffer *b = &p->bufpool[i];
        b->data = cpu_alloc(p, b->bytes);
        if (!b->data) return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory allocating a %zu-byte buffer", b->bytes);
        total += (int64_t)b->bytes;
    }
    for (int i = 0; i < p->ntensors; i++) {
        cpu_tensor *t = p->tensors[i];
        if (t->buf < 0) continue;
        t->data = p->bufpool[t->buf].data;
        CPU_DNNL(dnnl_memory_set_data_handle(t->mem, t->data), "binding a pooled tensor");
    }
    *total_bytes = total;
    return DLP_OK;
}

int cpu_value_new(cpu_plan *p, cpu_tensor *x, int layer) {
    if (grow((void **)&p->vals, &p->cap_vals, p->nvals, sizeof(cpu_value))) {
        DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
        return -1;
    }
    cpu_value *v = &p->vals[p->nvals];
    memset(v, 0, sizeof *v);
    v->x = x;
    v->layer = layer;
    v->src_value = -1;
    v->next_conv = -1;
    return p->nvals++;
}

dlp_status cpu_value_as(cpu_plan *p, int v, const_dnnl_memory_desc_t want, cpu_steps *list, int cache, int *out) {
    if (dnnl_memory_desc_equal(p->vals[v].x->md, want)) {
        *out = v;
        return DLP_OK;
    }
    if (cache)
        for (int c = p->vals[v].next_conv; c >= 0; c = p->vals[c].next_conv)
            if (dnnl_memory_desc_equal(p->vals[c].x->md, want)) {
                *out = c;
                return DLP_OK;
            }
    cpu_tensor *t;
    if (p->train) DLP_CHECK(cpu_tensor_new(p, want, NULL, &t));
    else DLP_CHECK(cpu_tensor_pooled(p, want, &t));
    int c = cpu_value_new(p, t, -1);
    if (c < 0) return dlp_err_status();
    cpu_value *cv = &p->vals[c], *sv = &p->vals[v];
    cv->src_value = v;
    cv->defer = sv->defer;
    if (cache) {
        cv->next_conv = sv->next_conv;
        sv->next_conv = c;
    }
    char what[64];
    snprintf(what, sizeof what, "%s convert", sv->layer >= 0 ? p->net.layers[sv->layer].name : "value");
    p->nconverts++;
    DLP_CHECK(cpu_step_reorder(p, list, sv->x->mem, sv->x->md, t->mem, want, what));
    *out = c;
    return DLP_OK;
}

const_dnnl_memory_desc_t cpu_pd_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what, int idx) {
    return dnnl_primitive_desc_query_md(pd, what, idx);
}

const char *cpu_pd_impl(const_dnnl_primitive_desc_t pd) {
    const char *s = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s) != dnnl_success || !s) return "?";
    return s;
}

void cpu_kernel_note(cpu_plan *p, const_dnnl_primitive_desc_t pd) {
    dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
    dnnl_primitive_desc_query(pd, dnnl_query_primitive_kind, 0, &kind);
    char name[sizeof p->kernels[0].name];
    snprintf(name, sizeof name, "%s %s", dnnl_prim_kind2str(kind), cpu_pd_impl(pd));
    for (int i = 0; i < p->nkernels; i++)
        if (!strcmp(p->kernels[i].name, name)) {
            p->kernels[i].n++;
            return;
        }
    if (p->nkernels == CPU_MAX_KERNELS) return;  // more kinds than any ResNet plan uses: the rest go uncounted
    snprintf(p->kernels[p->nkernels].name, sizeof name, "%s", name);
    p->kernels[p->nkernels++].n = 1;
}

dlp_status cpu_attr_new(dnnl_primitive_attr_t *attr) {
    CPU_DNNL(dnnl_primitive_attr_create(attr), "attributes");
    dnnl_status_t s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    if (s != dnnl_success) {
        dnnl_primitive_attr_destroy(*attr);
        return DLP_ERR(DLP_ERR_INTERNAL, "oneDNN: cannot set a user scratchpad: %s", cpu_dnnl_status_str(s));
    }
    return DLP_OK;
}

dlp_status cpu_pd_check(dnnl_status_t s, const char *what) {
    if (s != dnnl_success)
        return DLP_ERR(s == dnnl_unimplemented ? DLP_ERR_UNSUPPORTED : DLP_ERR_INTERNAL,
                       "oneDNN cannot create %s: %s", what, cpu_dnnl_status_str(s));
    return DLP_OK;
}

static dlp_status steps_push(cpu_steps *list, cpu_step **out) {
    if (grow((void **)&list->v, &list->cap, list->n, sizeof(cpu_step)))
        return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    *out = &list->v[list->n++];
    memset(*out, 0, sizeof **out);
    return DLP_OK;
}

static dlp_status prim_keep(cpu_plan *p, dnnl_primitive_t prim) {
    if (grow((void **)&p->prims, &p->cap_prims, p->nprims, sizeof(dnnl_primitive_t))) {
        dnnl_primitive_destroy(prim);
        return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    }
    p->prims[p->nprims++] = prim;
    return DLP_OK;
}

// The scratchpad memory of a primitive (NULL if it needs none), bound later to the shared buffer.
static dlp_status scratch_mem(cpu_plan *p, const_dnnl_primitive_desc_t pd, dnnl_memory_t *out) {
    *out = NULL;
    const_dnnl_memory_desc_t md = cpu_pd_md(pd, dnnl_query_scratchpad_md, 0);
    size_t bytes = md ? dnnl_memory_desc_get_size(md) : 0;
    if (!bytes) return DLP_OK;
    if (bytes > p->scratch_bytes) p->scratch_bytes = bytes;
    if (grow((void **)&p->scratch_mems, &p->cap_scratch, p->nscratch, sizeof(dnnl_memory_t)))
        return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    CPU_DNNL(dnnl_memory_create(out, md, p->eng, DNNL_MEMORY_NONE), "scratchpad memory");
    p->scratch_mems[p->nscratch++] = *out;
    return DLP_OK;
}

dlp_status cpu_step_prim(cpu_plan *p, cpu_steps *list, dnnl_primitive_desc_t pd, int nargs,
                         const dnnl_exec_arg_t *args, const char *what) {
    if (nargs + 1 > CPU_MAX_ARGS) return DLP_ERR(DLP_ERR_INTERNAL, "cpu: too many arguments for %s", what);
    dnnl_primitive_t prim;
    dnnl_status_t cs = dnnl_primitive_create(&prim, pd);
    if (cs != dnnl_success)
        return DLP_ERR(DLP_ERR_INTERNAL, "oneDNN cannot create the primitive for %s: %s", what, cpu_dnnl_status_str(cs));
    DLP_CHECK(prim_keep(p, prim));
    cpu_kernel_note(p, pd);
    dnnl_memory_t sm;
    DLP_CHECK(scratch_mem(p, pd, &sm));
    cpu_step *s;
    DLP_CHECK(steps_push(list, &s));
    s->kind = CPU_STEP_PRIM;
    s->prim = prim;
    s->mask = p->build_mask;
    s->small = p->build_small;
    for (int i = 0; i < nargs; i++) s->args[s->nargs++] = args[i];
    if (sm) s->args[s->nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, sm};
    snprintf(s->what, sizeof s->what, "%s", what);
    return DLP_OK;
}

dlp_status cpu_step_fn_add(cpu_plan *p, cpu_steps *list, cpu_step_fn fn, const cpu_step *proto) {
    cpu_step *s;
    DLP_CHECK(steps_push(list, &s));
    *s = *proto;
    s->kind = CPU_STEP_FN;
    s->fn = fn;
    s->mask = p->build_mask;
    return DLP_OK;
}

static dlp_status reorder_pd(cpu_plan *p, const_dnnl_memory_desc_t smd, const_dnnl_memory_desc_t dmd,
                             dnnl_primitive_desc_t *pd) {
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(pd, smd, p->eng, dmd, p->eng, p->attr);
    if (s != dnnl_success) return DLP_ERR(DLP_ERR_UNSUPPORTED, "oneDNN cannot reorder: %s", cpu_dnnl_status_str(s));
    return DLP_OK;
}

dlp_status cpu_step_reorder(cpu_plan *p, cpu_steps *list, dnnl_memory_t src, const_dnnl_memory_desc_t smd,
                            dnnl_memory_t dst, const_dnnl_memory_desc_t dmd, const char *what) {
    dnnl_primitive_desc_t pd;
    DLP_CHECK(reorder_pd(p, smd, dmd, &pd));
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    dlp_status st = cpu_step_prim(p, list, pd, 2, a, what);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

// A standalone reorder (run outside step lists: output, input gradient, weight copies). Its scratchpad, if any,
// is the shared one, bound like the others (a Winograd weight transform wants one).
dlp_status cpu_reorder_new(cpu_plan *p, const_dnnl_memory_desc_t smd, const_dnnl_memory_desc_t dmd,
                           cpu_reorder *out) {
    memset(out, 0, sizeof *out);
    dnnl_primitive_desc_t pd;
    DLP_CHECK(reorder_pd(p, smd, dmd, &pd));
    dlp_status st = scratch_mem(p, pd, &out->scratch);
    if (st == DLP_OK) {
        dnnl_status_t s = dnnl_primitive_create(&out->prim, pd);
        if (s != dnnl_success) {
            out->prim = NULL;
            st = DLP_ERR(DLP_ERR_INTERNAL, "oneDNN: reorder: %s", cpu_dnnl_status_str(s));
        } else {
            st = prim_keep(p, out->prim);
            if (st) out->prim = NULL;  // prim_keep destroyed it
        }
    }
    if (st == DLP_OK) cpu_kernel_note(p, pd);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

dlp_status cpu_reorder_run(cpu_plan *p, const cpu_reorder *r, dnnl_memory_t src, dnnl_memory_t dst, int wait,
                           const char *what) {
    if (!r->prim) return DLP_OK;
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}, {DNNL_ARG_SCRATCHPAD, r->scratch}};
    dnnl_status_t s = dnnl_primitive_execute(r->prim, p->stream, r->scratch ? 3 : 2, a);
    if (s != dnnl_success) return DLP_ERR(DLP_ERR_INTERNAL, "oneDNN: reordering %s: %s", what, cpu_dnnl_status_str(s));
    if (wait) CPU_DNNL(dnnl_stream_wait(p->stream), "waiting for the stream");
    return DLP_OK;
}

dlp_status cpu_step_accumulate(cpu_plan *p, cpu_steps *list, cpu_tensor *acc, cpu_tensor *src, const char *what) {
    dnnl_primitive_desc_t pd;
    DLP_CHECK(cpu_pd_check(
        dnnl_binary_primitive_desc_create(&pd, p->eng, dnnl_binary_add, acc->md, src->md, acc->md, p->attr), what));
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC_0, acc->mem}, {DNNL_ARG_SRC_1, src->mem}, {DNNL_ARG_DST, acc->mem}};
    dlp_status st = cpu_step_prim(p, list, pd, 3, a, what);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

dlp_status cpu_steps_run(cpu_plan *p, cpu_steps *list, int mask) {
    int cur = p->threads;
    for (int i = 0; i < list->n; i++) {
        cpu_step *s = &list->v[i];
        if (s->mask && !(s->mask & mask)) continue;
        const int want = s->small ? p->small_now : p->threads;
        if (want != cur) {
            omp_set_num_threads(want);
            cur = want;
        }
        int64_t t0 = p->profile ? dlp_now_ns() : 0;
        if (s->kind == CPU_STEP_PRIM) {
            dnnl_status_t st = dnnl_primitive_execute(s->prim, p->stream, s->nargs, s->args);
            if (st != dnnl_success) {
                if (cur != p->threads) omp_set_num_threads(p->threads);
                return DLP_ERR(DLP_ERR_INTERNAL, "oneDNN: executing %s: %s", s->what, cpu_dnnl_status_str(st));
            }
        } else {
            s->fn(p, s);
        }
        if (p->profile) {
            dnnl_stream_wait(p->stream);
            const int64_t dt = dlp_now_ns() - t0;
            s->ns += dt;
            if (!s->calls || dt < s->min_ns) s->min_ns = dt;
            s->calls++;
        }
    }
    if (cur != p->threads) omp_set_num_threads(p->threads);
    CPU_DNNL(dnnl_stream_wait(p->stream), "waiting for the stream");
    return DLP_OK;
}

dlp_status cpu_scratch_finish(cpu_plan *p) {
    if (p->scratch_bytes) {
        p->scratch = cpu_alloc(p, p->scratch_bytes);
        if (!p->scratch) return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory for a %zu-byte scratchpad", p->scratch_bytes);
    }
    for (int i = 0; i < p->nscratch; i++)
        CPU_DNNL(dnnl_memory_set_data_handle(p->scratch_mems[i], p->scratch), "binding the scratchpad");
    return DLP_OK;
}

// ---- weight copies ----

// A new weight copy record at the end of p->wcopies (counted by the caller once it is complete).
static dlp_status wcopy_new(cpu_plan *p, int param, int fold_bn, float *fold_bias, int64_t numel, cpu_wcopy **out) {
    if (grow((void **)&p->wcopies, &p->cap_wcopies, p->nwcopies, sizeof(cpu_wcopy)))
        return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    cpu_wcopy *c = &p->wcopies[p->nwcopies];
    memset(c, 0, sizeof *c);
    c->param = param;
    c->fold_bn = fold_bn;
    c->fold_bias = fold_bias;
    c->numel = numel;
    *out = c;
    return DLP_OK;
}

dlp_status cpu_wcopy_add(cpu_plan *p, int param, const_dnnl_memory_desc_t md, int fold_bn, float *fold_bias,
                         int snapshot, dnnl_memory_t *out) {
    const dlp_param *prm = &p->net.params[param];
    // The master is OIHW (or OI) fp32; an fc over a (C, H, W) input is (K, C, H, W) in the same memory.
    int64_t dims[DNNL_MAX_NDIMS];
    const int nd = cpu_md_dims(md, dims);
    int64_t numel = 1;
    for (int i = 0; i < nd; i++) numel *= dims[i];
    if (numel != prm->numel) return DLP_ERR(DLP_ERR_INTERNAL, "cpu: weight %s has %lld elements, the primitive wants %lld",
                                            prm->name, (long long)prm->numel, (long long)numel);
    const_dnnl_memory_desc_t plain;
    DLP_CHECK(cpu_md_plain(p, &plain, nd, dims, dnnl_f32));
    float *master = p->params + prm->offset;
    // reuse an existing copy in the same descriptor
    for (int i = 0; i < p->nwcopies; i++) {
        cpu_wcopy *c = &p->wcopies[i];
        if (c->param != param || c->fold_bn != fold_bn || c->snapshot != snapshot) continue;
        const_dnnl_memory_desc_t cmd;
        CPU_DNNL(dnnl_memory_get_memory_desc(c->dst, &cmd), "weight copy");
        if (dnnl_memory_desc_equal(cmd, md)) {
            *out = c->dst;
            return DLP_OK;
        }
    }
    cpu_wcopy *c;
    DLP_CHECK(wcopy_new(p, param, fold_bn, fold_bias, numel, &c));
    c->snapshot = snapshot;
    const float *src = master;
    if (fold_bn >= 0) {
        c->folded = cpu_alloc(p, (size_t)numel * sizeof(float));
        if (!c->folded) return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
        src = c->folded;
    }
    DLP_CHECK(cpu_mem_new(p, plain, (void *)src, &c->src));
    if (fold_bn < 0 && !snapshot && dnnl_memory_desc_equal(plain, md)) {
        c->dst = c->src;  // the master itself
    } else {
        size_t bytes = dnnl_memory_desc_get_size(md);
        void *d = cpu_alloc(p, bytes);
        if (!d) return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
        p->weight_bytes += (int64_t)bytes;
        DLP_CHECK(cpu_mem_new(p, md, d, &c->dst));
        DLP_CHECK(cpu_reorder_new(p, plain, md, &c->reorder));
    }
    p->nwcopies++;
    *out = c->dst;
    return DLP_OK;
}

dlp_status cpu_wcopy_add_q8(cpu_plan *p, int param, const_dnnl_memory_desc_t md, int fold_bn, float *fold_bias,
                            float *qscale, dnnl_memory_t *out) {
    const dlp_param *prm = &p->net.params[param];
    int64_t dims[DNNL_MAX_NDIMS];
    const int nd = cpu_md_dims(md, dims);
    int64_t numel = 1;
    for (int i = 0; i < nd; i++) numel *= dims[i];
    if (numel != prm->numel || nd < 1)
        return DLP_ERR(DLP_ERR_INTERNAL, "cpu: weight %s has %lld elements, the primitive wants %lld", prm->name,
                       (long long)prm->numel, (long long)numel);
    const_dnnl_memory_desc_t plain;
    DLP_CHECK(cpu_md_plain(p, &plain, nd, dims, dnnl_s8));
    cpu_wcopy *c;
    DLP_CHECK(wcopy_new(p, param, fold_bn, fold_bias, numel, &c));
    c->qscale = qscale;
    c->qk = dims[0];
    c->q = cpu_alloc(p, (size_t)numel);
    if (fold_bn >= 0) c->folded = cpu_alloc(p, (size_t)numel * sizeof(float));
    const size_t bytes = dnnl_memory_desc_get_size(md);
    void *d = cpu_alloc(p, bytes);
    if (!c->q || (fold_bn >= 0 && !c->folded) || !d) return DLP_ERR(DLP_ERR_NOMEM, "cpu: out of memory");
    p->weight_bytes += (int64_t)bytes;
    DLP_CHECK(cpu_mem_new(p, plain, c->q, &c->src));
    DLP_CHECK(cpu_mem_new(p, md, d, &c->dst));
    DLP_CHECK(cpu_reorder_new(p, plain, md, &c->reorder));
    p->nwcopies++;
    *out = c->dst;
    return DLP_OK;
}

// Symmetric per-output-channel int8 of copy c's fp32 weights (folded or the master): q = round(w / s[k]) with
// s[k] = max |w[k]| / 127 (1 for an all-zero channel), so q stays in [-127, 127].
static void quantize(cpu_plan *p, cpu_wcopy *c) {
    const float *w = c->fold_bn >= 0 ? c->folded : p->params + p->net.params[c->param].offset;
    const int64_t K = c->qk, per = c->numel / K;
    for (int64_t k = 0; k < K; k++) {
        float m = 0.f;
        for (int64_t j = 0; j < per; j++) m = fmaxf(m, fabsf(w[k * per + j]));
        const float s = m > 0.f ? m / 127.f : 1.f;
        c->qscale[k] = s;
        for (int64_t j = 0; j < per; j++) {
            float q = nearbyintf(w[k * per + j] / s);
            c->q[k * per + j] = (int8_t)(q > 127.f ? 127.f : q < -127.f ? -127.f : q);
        }
    }
}

// Folds BN layer `bn` (running statistics) into the conv weights of copy c: w'[k] = w[k] s[k] with
// s = gamma / sqrt(running_var + eps), bias b[k] = beta[k] - running_mean[k] s[k].
static void fold(cpu_plan *p, cpu_wcopy *c) {
    const dlp_layer *bl = &p->net.layers[c->fold_bn];
    const dlp_param *g = &p->net.params[bl->param0], *b = &p->net.params[bl->param0 + 1];
    const dlp_param *rm = &p->net.bufs[bl->buf0], *rv = &p->net.bufs[bl->buf0 + 1];
    const int64_t K = bl->c, per = c->numel / K;
    const float *w = p->params + p->net.params[c->param].offset;
    for (int64_t k = 0; k < K; k++) {
        const float s = p->params[g->offset + k] / sqrtf(p->bufs[rv->offset + k] + bl->bn_eps);
        if (c->fold_bias) c->fold_bias[k] = p->params[b->offset + k] - p->bufs[rm->offset + k] * s;
        for (int64_t j = 0; j < per; j++) c->folded[k * per + j] = w[k * per + j] * s;
    }
}

dlp_status cpu_wcopy_refresh(cpu_plan *p, int param, int which) {
    // weight-sized reorders: short memory-bound ops (see small_now)
    if (p->small_now != p->threads) omp_set_num_threads(p->small_now);
    dlp_status st = DLP_OK;
    for (int i = 0; i < p->nwcopies && !st; i++) {
        cpu_wcopy *c = &p->wcopies[i];
        if (param >= 0 && c->param != param) continue;
        if ((which == CPU_WCOPY_LIVE && c->snapshot) || (which == CPU_WCOPY_SNAPSHOT && !c->snapshot)) continue;
        if (c->fold_bn >= 0) fold(p, c);
        if (c->qscale) quantize(p, c);
        st = cpu_reorder_run(p, &c->reorder, c->src, c->dst, 0, p->net.params[c->param].name);
    }
    if (p->small_now != p->threads) omp_set_num_threads(p->threads);
    if (st) return st;
    CPU_DNNL(dnnl_stream_wait(p->stream), "waiting for the stream");
    return DLP_OK;
}

// ---- teardown ----

static void steps_free(cpu_steps *l) {
    free(l->v);
    memset(l, 0, sizeof *l);
}

void cpu_plan_destroy(cpu_plan *p) {
    if (!p) return;
    for (int i = 0; i < p->nprims; i++) dnnl_primitive_destroy(p->prims[i]);
    for (int i = 0; i < p->ntensors; i++) {
        if (p->tensors[i]->mem) dnnl_memory_destroy(p->tensors[i]->mem);
        free(p->tensors[i]);
    }
    for (int i = 0; i < p->nmems; i++) dnnl_memory_destroy(p->mems[i]);
    for (int i = 0; i < p->nscratch; i++) dnnl_memory_destroy(p->scratch_mems[i]);
    for (int i = 0; i < p->nallocs; i++) dlp_free_aligned(p->allocs[i]);
    for (int i = 0; i < p->nmds; i++) dnnl_memory_desc_destroy(p->mds[i]);
    free(p->mds);
    if (p->attr) dnnl_primitive_attr_destroy(p->attr);
    free(p->prims);
    free(p->tensors);
    free(p->mems);
    free(p->scratch_mems);
    free(p->allocs);
    free(p->vals);
    free(p->val_of);
    free(p->bufpool);
    free(p->wcopies);
    free(p->buckets);
    steps_free(&p->fwd);
    steps_free(&p->bwd);
    steps_free(&p->in_grad);
    if (p->stream) dnnl_stream_destroy(p->stream);
    if (p->eng) dnnl_engine_destroy(p->eng);
    dlp_net_free(&p->net);
    free(p);
}
