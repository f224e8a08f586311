/* layout.c - a user's configuration priced without search (layout.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/units.h"
#include "planner/export.h"
#include "planner/instance.h"
#include "planner/layout.h"
#include "planner/tensor.h"
#include "profiles/gemm.h"

/* ------------------------------------------------------------- parsing -- */

static const char *const keys_hint = "t, cp, p, d, mb, m, sched, v, recompute, zero, sp, split";

/* A positive int (at most hi) from "12"; 0 on failure. */
static int pos_int(const char *s, size_t n, int hi)
{
    char buf[24];
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (errno || *end || v < 1 || v > hi || buf[0] == '+' || buf[0] == '-') return 0;
    return (int)v;
}

static int parse_split(const char *v, size_t n, const char *what, plan_fixed *fx, cl_err *e)
{
    fx->n_split = 0;
    size_t at = 0;
    while (at <= n) {
        size_t k = at;
        while (k < n && v[k] != '/') k++;
        int x = pos_int(v + at, k - at, 1 << 24);
        if (!x || fx->n_split == PLAN_FIXED_MAX_SPLIT)
            return cl_fail(e, CL_EINPUT, "%s: split: expected up to %d positive layer counts separated by '/' (hint: split=9/8/8/9)",
                           what, PLAN_FIXED_MAX_SPLIT);
        fx->split[fx->n_split++] = x;
        at = k + 1;
    }
    return CL_OK;
}

int plan_fixed_parse(const char *text, const char *what, plan_fixed *fx, cl_err *e)
{
    *fx = (plan_fixed){.sched = -1, .recompute = -1, .zero = -1, .sp = -1};
    size_t len = strlen(text), at = 0;
    if (!len) return cl_fail(e, CL_EINPUT, "%s: empty layout (hint: t=2,p=4,d=1,mb=1)", what);
    while (at <= len) {
        size_t end = at;
        while (end < len && text[end] != ',') end++;
        const char *item = text + at, *eq = memchr(item, '=', end - at);
        if (!eq)
            return cl_fail(e, CL_EINPUT, "%s: expected key=value items separated by commas (hint: the keys are %s; e.g. t=8,p=2)",
                           what, keys_hint);
        size_t kn = (size_t)(eq - item), vn = end - at - kn - 1;
        const char *v = eq + 1;
        char key[16] = "";
        if (kn < sizeof key) memcpy(key, item, kn), key[kn] = 0;
        int *slot = !strcmp(key, "t") ? &fx->t : !strcmp(key, "cp") ? &fx->c : !strcmp(key, "p") ? &fx->p
                  : !strcmp(key, "d") ? &fx->d
                  : !strcmp(key, "mb") ? &fx->mb : !strcmp(key, "m") ? &fx->m : !strcmp(key, "v") ? &fx->v
                  : NULL;
        char val[32] = "";
        if (vn < sizeof val) memcpy(val, v, vn), val[vn] = 0;
        if (slot) {
            if (!(*slot = pos_int(v, vn, 1 << 30)))
                return cl_fail(e, CL_EINPUT, "%s: %s: expected a positive integer (hint: %s=2)", what, key, key);
        } else if (!strcmp(key, "sched")) {
            if ((fx->sched = sched_kind_from_name(val)) < 0)
                return cl_fail(e, CL_EINPUT, "%s: sched: unknown schedule (hint: 1f1b, interleaved, gpipe, zb-h1, fbp, pipedream, sequential)", what);
        } else if (!strcmp(key, "recompute")) {
            if ((fx->recompute = tfm_recomp_from_name(val)) < 0)
                return cl_fail(e, CL_EINPUT, "%s: recompute: expected none, selective or full", what);
        } else if (!strcmp(key, "zero")) {
            if (vn != 1 || v[0] < '0' || v[0] > '0' + PLAN_ZERO_MAX)
                return cl_fail(e, CL_EINPUT, "%s: zero: expected 0, 1 or 2 (the ZeRO stage)", what);
            fx->zero = v[0] - '0';
        } else if (!strcmp(key, "sp")) {
            if (vn != 1 || (v[0] != '0' && v[0] != '1'))
                return cl_fail(e, CL_EINPUT, "%s: sp: expected 0 or 1 (sequence parallelism)", what);
            fx->sp = v[0] - '0';
        } else if (!strcmp(key, "split")) {
            int rc = parse_split(v, vn, what, fx, e);
            if (rc) return rc;
        } else {
            return cl_fail(e, CL_EINPUT, "%s: unknown key (hint: the keys are %s)", what, keys_hint);
        }
        at = end + 1;
    }
    return CL_OK;
}

void plan_fixed_str(const plan_fixed *fx, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
#define ADD(...) (at += at < cap ? (size_t)snprintf(buf + at, cap - at, __VA_ARGS__) : 0)
    const struct { const char *k; int v; } num[] = {
        {"t", fx->t}, {"cp", fx->c}, {"p", fx->p}, {"d", fx->d}, {"mb", fx->mb}, {"m", fx->m},
    };
    for (size_t i = 0; i < sizeof num / sizeof num[0]; i++)
        if (num[i].v > 0) ADD("%s%s=%d", at ? "," : "", num[i].k, num[i].v);
    if (fx->sched >= 0) ADD("%ssched=%s", at ? "," : "", sched_kind_name((sched_kind)fx->sched));
    if (fx->v > 0) ADD("%sv=%d", at ? "," : "", fx->v);
    if (fx->recompute >= 0) ADD("%srecompute=%s", at ? "," : "", tfm_recomp_name((tfm_recomp)fx->recompute));
    if (fx->zero >= 0) ADD("%szero=%d", at ? "," : "", fx->zero);
    if (fx->sp >= 0) ADD("%ssp=%d", at ? "," : "", fx->sp);
    for (int i = 0; i < fx->n_split; i++) ADD("%s%d", i ? "/" : at ? ",split=" : "split=", fx->split[i]);
#undef ADD
}

/* ----------------------------------------------------------- resolving -- */

/* The most GPUs any node of c holds. */
static int node_size(const cluster *c)
{
    int *count = cl_calloc((size_t)(c->n_nodes > 0 ? c->n_nodes : 1), sizeof *count), most = 0;
    for (int i = 0; i < c->n_devices; i++)
        if (++count[c->devices[i].node] > most) most = count[c->devices[i].node];
    free(count);
    return most;
}

/* Fill the defaults of *f against the GPUs of c and the batch (0: none):
 * the degrees, mb and m, the schedule and v.  CL_EINPUT for a layout that
 * is not a run. */
static int resolve(plan_fixed *f, const cluster *c, int batch, const char *what, cl_err *e)
{
    int N = c->n_devices, K = node_size(c), cp = f->c > 1 ? f->c : 1;
    /* the degrees as said in messages: context parallelism named only when
     * given, so the messages of other layouts keep their words */
    char deg[32], val[48];
    if (cp > 1) snprintf(deg, sizeof deg, "t x cp x p"), snprintf(val, sizeof val, "%d x %d x %d", f->t ? f->t : 1, cp, f->p ? f->p : 1);
    else snprintf(deg, sizeof deg, "t x p"), snprintf(val, sizeof val, "%d x %d", f->t ? f->t : 1, f->p ? f->p : 1);
    if (!f->t) f->t = 1;
    if (!f->p) f->p = 1;
    if (f->t > K)
        return cl_fail(e, CL_EINPUT, "%s: t %d is more than the %d GPUs of a node (hint: a tensor-parallel group stays inside a node; t at most %d)",
                       what, f->t, K, K);
    /* in double: up to 2^30 each, the products overflow 64 bits; exact
     * while below 2^53, and any larger cannot equal N anyway */
    double tcp = (double)f->t * cp * f->p;
    if (!f->d && (tcp > N || N % (int)tcp))
        return cl_fail(e, CL_EINPUT, "%s: %s = %s does not divide the cluster's %d GPUs (hint: degrees whose product is %d)",
                       what, deg, val, N, N);
    if (!f->d) f->d = (int)(N / tcp);
    if (f->sp > 0 && f->t == 1)
        return cl_fail(e, CL_EINPUT, "%s: sp=1 with t 1 (hint: sequence parallelism splits the sequence over tensor-parallel ranks; drop sp or give t)",
                       what);
    if (tcp * f->d != N)
        return cl_fail(e, CL_EINPUT, "%s: %s x d = %s x %d = %.0f GPUs, but the cluster has %d (hint: degrees whose product is %d)",
                       what, deg, val, f->d, tcp * f->d, N, N);
    if (f->sched < 0) f->sched = f->v > 1 ? SCHED_INTERLEAVED : SCHED_1F1B;
    if (!f->v) f->v = f->sched == SCHED_INTERLEAVED ? 2 : 1;
    if (f->v > 1 && f->sched != SCHED_INTERLEAVED)
        return cl_fail(e, CL_EINPUT, "%s: v %d model chunks per device need sched=interleaved, not %s", what, f->v,
                       sched_kind_name((sched_kind)f->sched));
    if (f->sched == SCHED_SEQUENTIAL && f->p > 1)
        return cl_fail(e, CL_EINPUT, "%s: sched=sequential runs one stage, not p %d (hint: p=1, or sched=1f1b)", what, f->p);
    long long per = (long long)f->d * (f->mb ? f->mb : 1);
    if (batch > 0) {
        if (!f->mb && f->m) {
            if (batch % ((long long)f->m * f->d))
                return cl_fail(e, CL_EINPUT, "%s: m %d microbatches on each of d %d replicas do not divide the batch of %d (hint: a batch that is a multiple of m x d)",
                               what, f->m, f->d, batch);
            f->mb = (int)(batch / ((long long)f->m * f->d));
        }
        if (!f->mb) f->mb = 1;
        per = (long long)f->d * f->mb;
        if (!f->m) {
            if (batch % per)
                return cl_fail(e, CL_EINPUT, "%s: mb %d x d %d does not divide the batch of %d (hint: a batch that is a multiple of mb x d)",
                               what, f->mb, f->d, batch);
            f->m = (int)(batch / per);
        }
        if ((long long)f->mb * f->m * f->d != batch)
            return cl_fail(e, CL_EINPUT, "%s: mb x m x d = %d x %d x %d is not the batch of %d (hint: drop --batch or m)",
                           what, f->mb, f->m, f->d, batch);
    } else {
        if (!f->mb) f->mb = 1;
        if (!f->m)
            return cl_fail(e, CL_EINPUT, "%s: no batch: give --batch, or m (microbatches per replica) in the layout", what);
        if ((long long)f->mb * f->m * f->d > 1 << 30)
            return cl_fail(e, CL_EINPUT, "%s: mb x m x d is more than 2^30 samples", what);
    }
    if (f->sched == SCHED_INTERLEAVED && f->m % f->p)
        return cl_fail(e, CL_EINPUT, "%s: interleaved needs the %d microbatches per replica to be a multiple of p %d (hint: m a multiple of %d)",
                       what, f->m, f->p, f->p);
    return CL_OK;
}

/* Chunk boundaries cut[0..n] (layer indices of md) for n chunks: the
 * split= counts, or Megatron's even split of the transformer blocks with
 * the embedding on the first chunk and the head on the last (blocks > 0:
 * layers 1..blocks are the blocks), or of all layers for other models.
 * When the blocks do not divide, the first blocks mod n chunks hold one
 * more (as DeepSpeed's uniform partition), said in *uneven. */
static int chunk_cuts(const plan_fixed *f, const model *md, int blocks, int n, int *cut, int *uneven,
                      int *blocky, const char *what, cl_err *e)
{
    int L = md->n_layers;
    cut[0] = 0;
    if (f->n_split) {
        if (f->n_split != n)
            return cl_fail(e, CL_EINPUT, "%s: split lists %d chunks, the layout has p x v = %d", what, f->n_split, n);
        long long sum = 0;
        for (int k = 0; k < n; k++) {
            sum += f->split[k];
            cut[k + 1] = sum < L ? (int)sum : L;
        }
        if (sum != L)
            return cl_fail(e, CL_EINPUT, "%s: split counts %lld layers, the model has %d (embedding and head included)",
                           what, sum, L);
        return CL_OK;
    }
    int first = 0, units = L;
    if (blocks > 0 && blocks + 2 == L) first = 1, units = blocks;
    if (n > units)
        return cl_fail(e, CL_EINPUT, "%s: p x v = %d pipeline chunks for %d %s (hint: p x v at most %d)", what, n,
                       units, first ? "transformer layers" : "layers", units);
    int q = units / n, rem = units % n;
    *uneven = rem;
    *blocky = first;
    for (int k = 1; k < n; k++) cut[k] = first + k * q + (k < rem ? k : rem);
    cut[n] = L;
    return CL_OK;
}

/* The simulator's budget for one layout (plan --layout, bench fidelity):
 * ops as plan_predict_sim estimates them (about 40 bytes of simulator
 * memory each) and events (about 1 us each): GPT-3 on 2,048 H100s,
 * interleaved, is 2.4 M ops, 2 s. */
#define LAYOUT_SIM_MAX_OPS 8e6
#define LAYOUT_SIM_MAX_EVENTS 40000000ull

/* ---------------------------------------------------------- evaluating -- */

/* The link the context-parallel ring of key/value blocks crosses, on the
 * cluster g of tensor-parallel groups: the node's when every ring (c
 * consecutive groups, Megatron placing context next to tensor) lies in one
 * node, else the link between nodes (a ring step waits for its slowest
 * hop).  Without context parallelism, the node's (unused). */
static int cp_across(const cluster *g, int c)
{
    for (int i = 0; c > 1 && i < g->n_devices; i++)
        if (g->devices[i].node != g->devices[i - i % c].node) return 1;
    return 0;
}

static cluster_link cp_link(const cluster *g, int c)
{
    return g->links[cp_across(g, c) ? CLUSTER_INTER : CLUSTER_INTRA];
}

/* The fixed layout on the per-rank request rq: built as the search builds
 * its candidates and predicted by plan_predict and the simulator. */
static int price(const plan_request *rq, const plan_fixed *f, const int *cut, const char *what, plan_result *res,
                 char *nofit, size_t nofit_cap, cl_err *e)
{
    /* a stage's replicas: the d data-parallel ones, each of cp context
     * ranks (Megatron's order, tensor then context then data: consecutive) */
    int D = f->d * (f->c > 1 ? f->c : 1);
    search_ctx c = {.rq = rq, .res = res, .view = rq->cluster, .n_dev = rq->cluster->n_devices,
                    .cut_max = rq->model->n_layers};
    c.cut_head = c.cut_max;
    int rc = search_speeds(&c, e);
    if (rc) return rc;
    int *orders[3], n_orders = instance_device_orders(&c, orders);
    c.order = orders[0]; /* the cluster's order, node by node: the search's first */
    plan_inst I;
    instance_build(&c, f->m * D, &I);
    I.sched = (sched_kind)f->sched;
    I.chunks = f->v;
    plan_lattice L;
    plan_lattice_prefix(&L, &I);
    search_best B = {0};
    plan_eval ev;
    ev.valid = 1;
    for (int q = 0; q < f->p && f->sched == SCHED_INTERLEAVED; q++) ev.valid &= plan_block_ok(&I, q * D, D);
    if (f->sched == SCHED_INTERLEAVED && ev.valid) {
        plan pl;
        search_interleaved_plan(&c, &I, &L, f->p, D, cut, &pl, &ev);
        plan_pred pr;
        plan_timing tm;
        plan_predict_opts po = {.comm = rq->comm};
        if (plan_predict(&pl, &po, &pr, &tm, e) == CL_OK && plan_predict_sim(&pl, &pr) == CL_OK) {
            pl.pred = pr;
            search_take(&B, &pl, &pr, &tm, &ev, "layout", NAN, NAN, c.n_dev);
        } else {
            instance_free_stages(&pl);
        }
    } else if (f->sched != SCHED_INTERLEAVED) {
        plan_layout y;
        plan_layout_alloc(&y, f->p);
        for (int s = 0; s <= f->p; s++) y.cut[s] = cut[s];
        for (int s = 0; s < f->p; s++) y.pos[s] = s * D, y.r[s] = D;
        plan_layout_eval(&I, &L, &y, &ev);
        if (ev.valid) search_consider(&c, &B, &I, &L, &y, &ev, "layout", NAN, NAN);
        plan_layout_free(&y);
    }
    res->candidates = B.have;
    plan_lattice_free(&L);
    plan_inst_free(&I);
    for (int k = 0; k < n_orders; k++) free(orders[k]);
    free(c.speed);
    if (!ev.valid && D != f->d)
        return cl_fail(e, CL_EINPUT, "%s: the d x cp = %d replicas of a stage are neither inside one node nor whole nodes (hint: d x cp dividing, or a multiple of, the %d tensor-parallel groups of a node)",
                       what, D, node_size(rq->cluster));
    if (!ev.valid)
        return cl_fail(e, CL_EINPUT, "%s: the d %d replicas of a stage are neither inside one node nor whole nodes (hint: d dividing, or a multiple of, the %d tensor-parallel groups of a node)",
                       what, f->d, node_size(rq->cluster));
    if (!B.have)
        return cl_fail(e, CL_EINPUT, "%s: the simulator cannot replay this layout (%s)", what,
                       res->n_notes ? res->notes[0] : "its prediction failed");
    nofit[0] = 0;
    if (!ev.feasible) {
        const plan_stage *st = &B.pl.stages[ev.worst_stage];
        char need[24], cap[24], over[24];
        const cl_bytes_style gib = {.lo = CL_MIB, .hi = CL_GIB, .prec = 2};
        cl_fmt_bytes(need, sizeof need, ev.worst_need_bytes, gib);
        cl_fmt_bytes(cap, sizeof cap, ev.worst_cap_bytes, gib);
        cl_fmt_bytes(over, sizeof over, ev.worst_need_bytes - ev.worst_cap_bytes, gib);
        snprintf(nofit, nofit_cap, "does not fit: stage %d (layers %d-%d) needs %s per GPU, usable %s, over by %s",
                 ev.worst_stage, st->first, st->last, need, cap, over);
    }
    /* One layout is one replay: the search's budget, which keeps the closed
     * form for large candidates so that a search stays fast, would give the
     * user a figure `cleave sim` does not print for the same plan (GPT-3 on
     * 512 H100s, interleaved: 4.3% faster).  A larger budget of its own for
     * a layout the search did not replay, and a note when even that is not
     * enough. */
    plan_sim_budget big = {LAYOUT_SIM_MAX_OPS, LAYOUT_SIM_MAX_EVENTS};
    if (!B.pred.simulated && (rc = plan_predict_sim_in(&B.pl, &B.pred, &big))) {
        instance_free_stages(&B.pl);
        if (B.have_bad) instance_free_stages(&B.bad_pl);
        return cl_fail(e, rc, "%s: the simulator cannot replay this layout", what);
    }
    B.pl.pred = B.pred;
    if (!B.pred.simulated)
        search_note(res, "predicted by the closed form of docs/planner.md: replaying this layout is over the simulator budget of %.0f ops and %llu events (`cleave sim` replays it)",
                    big.max_ops, big.max_events);
    return search_result(rq, &B, res, e);
}

int plan_fixed_eval(const plan_request *rq0, const plan_fixed *fx, const char *what, plan_result *res,
                    char *nofit, size_t nofit_cap, cl_err *e)
{
    memset(res, 0, sizeof *res);
    res->exact_s = res->merge_s = NAN;
    plan_fixed f = *fx;
    int rc = resolve(&f, rq0->cluster, rq0->batch, what, e);
    if (rc) return rc;
    const model *md = rq0->model;
    if (rq0->framework != PLAN_FOR_ANY) {
        /* the run is that framework's (`--for`): it must run the layout's
         * schedule and the model, as the search requires (search_check) */
        const char *fw = plan_for_name(rq0->framework);
        int head;
        cl_err me = {0};
        if (!plan_for_runs(rq0->framework, (sched_kind)f.sched))
            return cl_fail(e, CL_EINPUT, "%s: sched=%s: %s does not run it (hint: sched=%s, or another --for)", what,
                           sched_kind_name((sched_kind)f.sched), fw, plan_for_schedules(rq0->framework));
        if (plan_target_model(md, plan_for_target(rq0->framework),
                              rq0->model_origin ? rq0->model_origin : "the model", &head, &me))
            return cl_fail(e, CL_EINPUT, "%s: --for %s: %s (hint: --for torch or deepspeed)", what, fw, me.msg);
    }
    tfm_rank_opts tro = {.t = f.t, .sp = f.sp > 0,
                         .recomp = f.recompute > 0 ? (tfm_recomp)f.recompute : TFM_RECOMP_NONE,
                         .fused_attn = f.attn == PROF_ATTN_FUSED, .fp8 = rq0->precision == PREC_FP8,
                         .c = f.c > 1 ? f.c : 1, .wgrad_acc = rq0->wgrad_acc};
    int cp = tro.c, rs = tfm_rank_reprices(&tro);
    if (tro.fp8 && !md->has_tfm)
        return cl_fail(e, CL_EINPUT, "%s: --precision fp8 needs a model with a \"transformer\" member and a device type with an FP8 kernel model (docs/compute.md, \"FP8\")", what);
    if (tro.fused_attn && !md->has_tfm)
        return cl_fail(e, CL_EINPUT, "%s: --attention fused needs a model with a \"transformer\" member and a device type with a \"kernels\" member (docs/compute.md)", what);
    if (tro.wgrad_acc > 0 && !md->has_tfm)
        return cl_fail(e, CL_EINPUT, "%s: %s", what, PLAN_GRAD_ACC_NEEDS);
    if (rs && rq0->prof)
        return cl_fail(e, CL_EINPUT, "%s: t, sp, recompute, fused attention and a separate gradient accumulation re-price a transformer's layers, which a profile measured whole (hint: drop --profile)", what);
    if (!rq0->prof && !rq0->ref_type)
        return cl_fail(e, CL_EINPUT, "%s: no profile and no device type to derive the costs for (hint: --device TYPE)", what);
    model mdr = {0};
    cluster clr = {0};
    prof pf = {0};
    const char *mfile = rq0->model_origin ? rq0->model_origin : "the model";
    const char *cfile = rq0->cluster_origin ? rq0->cluster_origin : "the cluster";
    if (rs && ((rc = tfm_rank_check(md, &tro, mfile, e)) || (rc = tp_cluster(&clr, rq0->cluster, tro.t, cfile, e)) ||
               (rc = tfm_rank_model(&mdr, md, &tro, mfile, e))))
        goto done;
    const model *mr = rs ? &mdr : md;
    int n = f.p * f.v, uneven = 0, blocky = 0;
    int *cut = cl_malloc((size_t)(n + 1) * sizeof(int));
    if ((rc = chunk_cuts(&f, mr, md->has_tfm ? (int)md->tfm.layers : 0, n, cut, &uneven, &blocky, what, e))) {
        free(cut);
        goto done;
    }
    if (!rq0->prof) {
        double pt = f.mb;
        int shaped;
        if ((rc = tp_derive(&pf, md, mr, &tro, rs, (prof_attn)f.attn, rq0->ref_type, rq0->cluster->links[CLUSTER_INTRA],
                            cp_link(rs ? &clr : rq0->cluster, cp), &pt, 1, &shaped, e))) {
            free(cut);
            goto done;
        }
        if (tro.fp8 && !(shaped && prof_fp8(rq0->ref_type))) {
            free(cut);
            rc = cl_fail(e, CL_EINPUT, "%s: --precision fp8 needs a device type with an FP8 peak (peak_fp8_flops) and an FP8 kernel model (kernels.fp8_gemm_efficiency), as the H100-80GB preset has (docs/compute.md, \"FP8\")", what);
            goto done;
        }
        if (f.attn == PROF_ATTN_FUSED && !shaped) {
            free(cut);
            rc = cl_fail(e, CL_EINPUT, "%s: --attention fused needs a model with a \"transformer\" member and a device type with a \"kernels\" member (docs/compute.md)", what);
            goto done;
        }
        if (tro.wgrad_acc > 0 && !shaped) {
            free(cut);
            rc = cl_fail(e, CL_EINPUT, "%s: %s", what, PLAN_GRAD_ACC_NEEDS);
            goto done;
        }
    }
    plan_request rq = *rq0;
    rq.model = mr;
    rq.cluster = rs ? &clr : rq0->cluster;
    rq.prof = rq0->prof ? rq0->prof : &pf;
    /* the per-rank question counts a sequence's c chunks as c samples */
    rq.batch = f.mb * f.m * f.d * cp;
    rq.microbatches = f.m * f.d * cp;
    rq.schedule = f.sched;
    rq.chunks = f.v;
    rq.stages = f.p;
    rq.algo = PLAN_ALGO_AUTO;
    rq.floor = NULL;
    if (f.zero >= 0) rq.zero = f.zero;
    if (!(rc = search_check(&rq, e))) rc = price(&rq, &f, cut, what, res, nofit, nofit_cap, e);
    free(cut);
    if (!rc) {
        res->plan.tensor = tro.t;
        res->plan.seq_par = tro.sp;
        res->plan.recompute = tro.recomp;
        res->plan.context = cp;
        if (cp > 1)
            search_note(res, "context parallelism: each ring of %d x %d GPUs %s, its key/value steps priced on the link %s",
                        cp, tro.t, cp_across(&clr, cp) ? "spans nodes" : "lies inside a node",
                        cp_across(&clr, cp) ? "between nodes" : "inside a node");
        if (uneven)
            search_note(res, "the %lld %s do not divide into p x v = %d chunks: the first %d hold one more (Megatron-LM refuses such a run; split= gives the counts)",
                        blocky ? (long long)md->tfm.layers : (long long)mr->n_layers,
                        blocky ? "transformer layers" : "layers", n, uneven);
    }
done:
    model_free(&mdr);
    cluster_free(&clr);
    prof_free(&pf);
    return rc;
}
