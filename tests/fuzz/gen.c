/* gen.c - random plans from bytes and the simulator's properties (gen.h).
 *
 * Included by the targets that use it (fuzz_sim.c, fuzz_search.c), so each
 * libFuzzer binary gets one copy and the regression runner, which includes
 * every target in one translation unit (targets.c), gets one too. */
#ifndef CL_FUZZ_GEN_C
#define CL_FUZZ_GEN_C

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"

unsigned gen_u(gen *g, unsigned n)
{
    if (n <= 1) return 0;
    int bytes = n > 65536 ? 4 : n > 256 ? 2 : 1;
    uint32_t v = 0;
    for (int i = 0; i < bytes; i++) v = v << 8 | (g->at < g->n ? g->p[g->at++] : 0);
    return v % n;
}

double gen_real(gen *g, double lo, double hi)
{
    unsigned k = gen_u(g, 4096);
    if (k < 256) return 0;
    return lo * pow(hi / lo, (k - 256) / 3839.0);
}

void gen_links(gen *g, double (*bw)(gen *, double, double), cluster_link *intra, cluster_link *inter)
{
    /* one statement a draw: C leaves the order of initialisers and
     * arguments open, and an input must decode the same under gcc and clang */
    intra->bw_Bps = bw(g, 1e6, 1e12);
    intra->latency_s = gen_real(g, 1e-7, 1e-3);
    inter->bw_Bps = bw(g, 1e5, 1e11);
    inter->latency_s = gen_real(g, 1e-6, 1e-2);
}

void gen_plan_free(plan *p)
{
    for (int k = 0; k < p->n_stages; k++) free(p->stages[k].devices);
    free(p->stages);
    cluster_free(&p->cluster);
    memset(p, 0, sizeof *p);
}

void gen_plan(gen *g, plan *p, gen_run *run)
{
    memset(p, 0, sizeof *p);
    memset(run, 0, sizeof *run);
    sched_kind kind = (sched_kind)gen_u(g, SCHED_COUNT);
    /* one plan in 8 is wide: up to 24 replicas on each of up to 3 stages,
     * so more than 64 ring transfers are in flight at once and their slots
     * grow while in use (the case that once corrupted them) */
    int wide = gen_u(g, 8) == 0;
    int P = 1 + (int)gen_u(g, wide ? 3 : 5);
    int v = kind == SCHED_INTERLEAVED ? 1 + (int)gen_u(g, 3) : 1;
    int rep[5], D = 0, m = 1 + (int)gen_u(g, 12);
    for (int j = 0; j < P; j++) {
        rep[j] = 1 + (int)gen_u(g, wide ? 24 : 4);
        /* async kinds update after each round of a stage's replicas, so
         * each count must divide m: the first stage's, or none */
        if (sched_is_async(kind) && j > 0 && rep[j] != rep[0]) rep[j] = 1;
        D += rep[j];
    }
    if (sched_is_async(kind)) m = rep[0] * (1 + (int)gen_u(g, wide ? 2 : 4));
    if (kind == SCHED_INTERLEAVED && v > 1 && m % P) m *= P;
    int extra = (int)gen_u(g, 3), per_node = 1 + (int)gen_u(g, 8);
    cluster_devtype t = {.peak_fp32_flops = 1e12, .mem_bytes = (uint64_t)80 << 30,
                         .mem_bw_Bps = 1e12, .efficiency = 1};
    snprintf(t.name, sizeof t.name, "gen");
    /* one draw per statement, in reading order: C leaves the order of
     * initialisers and arguments open, and gcc and clang differ, so an
     * input would decode to another plan in the regression suite */
    cluster_link intra, inter;
    gen_links(g, gen_real, &intra, &inter);
    if (!(intra.bw_Bps > 0)) intra.bw_Bps = 1e9;
    if (!(inter.bw_Bps > 0)) inter.bw_Bps = 1e8;
    cl_err e = {0};
    if (cluster_uniform(&p->cluster, &t, D + extra, per_node, intra, inter, &e) != CL_OK) abort();
    /* devices shuffled, so replicas and neighbours land within and across nodes */
    int n_dev = D + extra, *perm = cl_malloc((size_t)n_dev * sizeof *perm);
    for (int i = 0; i < n_dev; i++) perm[i] = i;
    for (int i = n_dev - 1; i > 0; i--) {
        int k = (int)gen_u(g, (unsigned)i + 1), x = perm[i];
        perm[i] = perm[k];
        perm[k] = x;
    }
    p->schedule = kind;
    p->chunks = v;
    p->optimizer = (plan_optim)gen_u(g, OPTIM_COUNT);
    p->microbatch = 1;
    p->n_micro = m;
    p->batch = m;
    p->comm_off = gen_u(g, 4) == 0;
    p->n_stages = P * v;
    p->stages = cl_calloc((size_t)p->n_stages, sizeof *p->stages);
    int at = 0;
    for (int k = 0; k < p->n_stages; k++) {
        plan_stage *st = &p->stages[k];
        int pos = k % P;
        st->first = st->last = k;
        st->n_replicas = rep[pos];
        st->devices = cl_malloc((size_t)rep[pos] * sizeof *st->devices);
        if (k < P)
            for (int q = 0; q < rep[pos]; q++) st->devices[q] = perm[at++];
        else
            memcpy(st->devices, p->stages[pos].devices, (size_t)rep[pos] * sizeof *st->devices);
        st->fwd_s = gen_real(g, 1e-6, 1e-1);
        st->bwd_in_s = gen_real(g, 1e-6, 1e-1);
        st->bwd_w_s = gen_real(g, 1e-6, 1e-1);
        st->update_s = gen_u(g, 4) == 0 ? gen_real(g, 1e-6, 1e-2) : 0;
        st->act_out_bytes = k == p->n_stages - 1 ? 0 : gen_real(g, 1, 1e9);
        st->stash_bytes = gen_real(g, 1, 1e9);
        st->param_bytes = gen_real(g, 1, 1e10);
    }
    free(perm);
    run->kind = kind;
    run->micro = m;
    run->iters = 1 + (int)gen_u(g, 3);
    if (sched_is_async(kind)) run->iters += sched_warmup_iters(kind, sched_fill_depth(p), m) * 2;
    run->comm_off = p->comm_off;
    /* the gradient reduction (core/plan_grad.c), drawn last so that older
     * inputs, whose bytes end before these draws, decode as before: fp32,
     * no ZeRO, no framework, the default reduction (both ring halves move
     * the gradients) */
    p->model.dtype = (model_dtype)gen_u(g, MODEL_DTYPE_COUNT);
    p->framework = (plan_for)gen_u(g, PLAN_FOR_COUNT);
    p->zero = (int)gen_u(g, PLAN_ZERO_MAX + 1);
    p->grad_reduce = (int)gen_u(g, 3) * 2; /* 0 (the default), 2 or 4 */
}

/* Compute seconds of one op (the simulator's durations, from the plan):
 * under ZeRO 1/2 and a flushing kind a replica updates 1/r of a stage. */
static double gen_op_s(const plan *p, sched_kind kind, const sched_op *op)
{
    const plan_stage *st = &p->stages[op->stage];
    int split = p->zero >= 1 && (kind == SCHED_GPIPE || kind == SCHED_1F1B ||
                                 kind == SCHED_INTERLEAVED || kind == SCHED_ZBH1);
    switch (op->kind) {
    case SCHED_F: return st->fwd_s;
    case SCHED_B: return (op->flags & SCHED_FUSED_W) ? st->bwd_in_s + st->bwd_w_s : st->bwd_in_s;
    case SCHED_W: return st->bwd_w_s;
    case SCHED_UPDATE: return split && st->n_replicas > 1 ? st->update_s / st->n_replicas : st->update_s;
    default: return 0;
    }
}

/* The bytes of stage st's all-reduce, from the rules of docs/simulator.md
 * ("Gradient reduction") restated here: R, the gradients the reduce-scatter
 * half moves, param_bytes in the reduction's element size (as set, else 4
 * for fp32 and for bfloat16 under Megatron-LM or DeepSpeed, else the
 * model's); G, what the all-gather half moves: the gradients again, or
 * under a ZeRO split (stage >= 1, a flushing kind) the updated weights in
 * the model's element size, plus, for DeepSpeed's bfloat16 optimizer, its
 * whole all-reduce's second half. */
static void gen_ar_halves(const plan *p, sched_kind kind, int st, double *R, double *G)
{
    double P = p->stages[st].param_bytes, e = p->model.dtype == MODEL_F32 ? 4 : 2;
    int bf16 = p->model.dtype == MODEL_BF16;
    double g = p->grad_reduce > 0 ? p->grad_reduce
               : e == 4 || (bf16 && (p->framework == PLAN_FOR_MEGATRON || p->framework == PLAN_FOR_DEEPSPEED)) ? 4
                                                                                                                  : e;
    int split = p->zero >= 1 && (kind == SCHED_GPIPE || kind == SCHED_1F1B || kind == SCHED_INTERLEAVED ||
                                 kind == SCHED_ZBH1);
    *R = P * g / e;
    *G = !split ? *R : P + (bf16 && p->framework == PLAN_FOR_DEEPSPEED ? *R : 0);
}

/* The all-reduce's shape (sim/ring.c, docs/simulator.md): k replicas on
 * each of n >= 2 nodes with k >= 2 make it hierarchical; else one flat ring
 * (k = r, n = 1).  Worked out here from the plan on its own. */
static void gen_ring_kn(const plan *p, int stage, int *k, int *n)
{
    const plan_stage *st = &p->stages[stage];
    int r = st->n_replicas, nodes = 0, even = 1, per = -1;
    for (int q = 0; q < r; q++) {
        int nd = p->cluster.devices[st->devices[q]].node, seen = 0, cnt = 0;
        for (int j = 0; j < r; j++) cnt += p->cluster.devices[st->devices[j]].node == nd;
        for (int j = 0; j < q; j++) seen |= p->cluster.devices[st->devices[j]].node == nd;
        if (!seen) nodes++;
        if (per < 0) per = cnt;
        even &= cnt == per;
    }
    *k = r;
    *n = 1;
    if (nodes >= 2 && per >= 2 && even) {
        *k = per;
        *n = nodes;
    }
}

static int gen_close(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)) + 1e-300; }

int gen_sim_check(const plan *p, const gen_run *run, sim_result *out, const char **broken,
                  cl_err *e)
{
    static char why[1600];
    *broken = NULL;
    if (out) memset(out, 0, sizeof *out);
    sched sc;
    int rc = sched_build(p, run->kind, run->micro, run->iters, &sc, e);
    if (rc) return rc;
    /* what the op lists say must happen, independent of the simulator */
    double *busy = cl_calloc((size_t)sc.n_dev, sizeof *busy);
    double *sent_on = cl_calloc((size_t)sc.n_dev, sizeof *sent_on);
    double *sent_off = cl_calloc((size_t)sc.n_dev, sizeof *sent_off);
    double total_on = 0, total_off = 0;
    uint64_t transfers = 0;
    for (int w = 0; w < sc.n_dev; w++)
        for (int64_t i = sc.off[w]; i < sc.off[w + 1]; i++) {
            const sched_op *op = &sc.ops[i];
            busy[w] += gen_op_s(p, (sched_kind)run->kind, op);
            if (op->kind == SCHED_SEND) {
                sent_on[w] += op->bytes;
                sent_off[w] += op->bytes;
                transfers++;
            } else if (op->kind == SCHED_ALLREDUCE) {
                int k, n;
                double R, G;
                gen_ring_kn(p, op->stage, &k, &n);
                gen_ar_halves(p, (sched_kind)run->kind, op->stage, &R, &G);
                if (!gen_close(op->bytes, R)) {
                    snprintf(why, sizeof why, "an ALLREDUCE of stage %d carries %.17g bytes, the gradients in their reduction size %.17g",
                             op->stage, (double)op->bytes, R);
                    *broken = why;
                }
                /* each half: k - 1 steps of 1/k inside the node, n - 1 of 1/(k n) between */
                sent_on[w] += (k - 1) * (R / k) + (n - 1) * (R / k / n) + (k - 1) * (G / k) + (n - 1) * (G / k / n);
                transfers += 2 * (uint64_t)(k - 1) + 2 * (uint64_t)(n - 1);
            }
        }
    for (int w = 0; w < sc.n_dev; w++) {
        total_on += sent_on[w];
        total_off += sent_off[w];
    }
    uint64_t bound = 2 * ((uint64_t)sc.n_ops + transfers) + 16;
    sim_result r[2];
    memset(r, 0, sizeof r);
    int runs = run->comm_off ? 1 : 2;
    for (int k = 0; k < runs && !rc && !*broken; k++) {
        sim_opts o = {.comm_off = k == 1 || run->comm_off,
                      .max_events = run->max_events ? run->max_events : bound, .max_wall_s = 60};
        sim *s = sim_create(p, &sc, &o, e);
        rc = s ? sim_run(s, &r[k], e) : (e->code ? e->code : CL_EINPUT);
        sim_destroy(s);
        if (rc && !run->max_events) {
            snprintf(why, sizeof why, "%s on %s, %d microbatches, %d iterations, comm %s (bound %llu events): %s",
                     rc == CL_EINPUT ? "refused" : "failed", sched_kind_name(run->kind), run->micro,
                     run->iters, o.comm_off ? "off" : "on", (unsigned long long)bound, e->msg);
            *broken = why;
        }
    }
    for (int k = 0; k < runs && !rc && !*broken; k++) {
        const sim_result *x = &r[k];
        int off = k == 1 || run->comm_off;
        const double *want = off ? sent_off : sent_on;
        double sum = x->sent_bytes[CLUSTER_INTRA] + x->sent_bytes[CLUSTER_INTER];
        const char *what = NULL;
        if (!isfinite(x->makespan_s) || !isfinite(x->iteration_s) || !(x->iteration_s >= 0) ||
            !(x->bubble >= -1e-9 && x->bubble <= 1 + 1e-9))
            what = "a result is not finite or out of range";
        else if (x->events > bound)
            what = "more events than the bound";
        else if (!gen_close(sum, off ? total_off : total_on))
            what = "bytes sent per run differ from the op lists";
        for (int w = 0; w < x->n_dev && !what; w++) {
            const sim_dev_result *d = &x->dev[w];
            if (!off && !gen_close(d->sent_bytes, want[w])) what = "bytes sent by a device differ from its op list";
            else if (x->makespan_s < busy[w] * (1 - 1e-9)) what = "makespan below a device's compute";
            else if (!x->warmup_iters && d->busy_s + d->comm_wait_s > x->iteration_s * (1 + 1e-9) + 1e-300)
                what = "busy + comm-wait exceed the iteration";
        }
        if (!what && k == 1 && r[0].makespan_s < r[1].makespan_s * (1 - 1e-9))
            what = "communication made the run faster";
        if (what) {
            snprintf(why, sizeof why, "%s: %s, %d microbatches, %d iterations, %d devices, comm %s: "
                     "makespan %.17g s (without comm %.17g), %llu events, sent %.17g bytes (op lists %.17g)",
                     what, sched_kind_name(run->kind), run->micro, run->iters, sc.n_dev, off ? "off" : "on",
                     x->makespan_s, runs > 1 ? r[1].makespan_s : x->makespan_s,
                     (unsigned long long)x->events, sum, off ? total_off : total_on);
            *broken = why;
        }
    }
    if (out && !rc) {
        *out = r[0];
        r[0].dev = NULL;
    }
    sim_result_free(&r[0]);
    sim_result_free(&r[1]);
    free(busy);
    free(sent_on);
    free(sent_off);
    sched_free(&sc);
    return rc;
}

#endif
