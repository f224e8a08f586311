/* search.c - candidates, their partitions, their ranking (see search.h). */
#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>

#include "core/schedule.h"
#include "base/budget.h"
#include "cost.h"
#include "exact.h"
#include "merge.h"
#include "instance.h"
#include "search.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define DEFAULT_MAX_DOWNSETS 100000
#define DEFAULT_MAX_PAIRS ((int64_t)20000000)

static const char *const algo_names[] = {"auto", "exact", "merge"};
_Static_assert(sizeof algo_names / sizeof algo_names[0] == PLAN_ALGO_COUNT, "algo names");

const char *plan_algo_name(plan_algo a)
{
    assert((unsigned)a < PLAN_ALGO_COUNT);
    return algo_names[a];
}

int plan_algo_from_name(const char *name)
{
    for (int a = 0; a < PLAN_ALGO_COUNT; a++)
        if (name && strcmp(name, algo_names[a]) == 0) return a;
    return -1;
}

void plan_result_free(plan_result *res)
{
    plan_free(&res->plan);
    memset(res, 0, sizeof *res);
}

void search_note(plan_result *res, const char *fmt, ...)
{
    char buf[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (int i = 0; i < res->n_notes; i++)
        if (strcmp(res->notes[i], buf) == 0) return;
    if (res->n_notes < PLAN_NOTES) snprintf(res->notes[res->n_notes++], sizeof res->notes[0], "%s", buf);
}

/* ------------------------------------------------------------- memory -- */

/* Do schedules a and b keep the same memory at every depth and replica
 * count on this instance (then one exact search serves both)? */
static int same_memory(const plan_inst *I, sched_kind a, sched_kind b)
{
    if (a == b) return 1;
    plan_inst x = *I, y = *I;
    x.sched = a;
    y.sched = b;
    if (plan_mem_dependence(&x) == PLAN_MEM_BY_TOTAL || plan_mem_dependence(&y) == PLAN_MEM_BY_TOTAL)
        return 0;
    int rmax = I->m < I->max_replicas ? I->m : I->max_replicas;
    for (int depth = 1; depth <= I->n_dev; depth++)
        for (int r = 1; r <= depth && r <= rmax; r++)
            if (sched_inflight_rep(a, depth, depth, r, I->m, I->chunks) !=
                    sched_inflight_rep(b, depth, depth, r, I->m, I->chunks) ||
                sched_versions_rep(a, depth, r) != sched_versions_rep(b, depth, r))
                return 0;
    return 1;
}

/* The bottleneck bound the exact search of schedule ki gets: merge's, on
 * chains (a prefix layout is also a DAG layout only when inert layers sit
 * where the rules put them). */
static double upper_of(const int *okm, const plan_eval *evm, int chain, int ki)
{
    return okm[ki] && chain ? evm[ki].bottleneck_s : HUGE_VAL;
}

/* Can a schedule of this memory dependence lead or shadow an exact search
 * (plan_exact_shadowed)? */
static int shadow_kind(int dep, int monotone)
{
    return dep == PLAN_MEM_FLAT || (dep == PLAN_MEM_BY_DEPTH && monotone);
}

/* The command's wall-clock budget (budget.h): polled before each candidate
 * and after each search that may have stopped for it (an exact search or a
 * cut listing over it returns "over budget", which must not turn into a
 * fallback). */
static int budget_out(cl_err *e)
{
    return cl_budget_over() ? cl_budget_fail(e, "searching plans",
                                             "narrow the search: one --schedule, one --microbatches count, or --algo merge in cleave plan")
                            : CL_OK;
}

/* ------------------------------------------------------------- search -- */


static int better(const search_best *B, const plan_pred *a, const plan_eval *ea)
{
    if (!B->have) return 1;
    const plan_pred *b = &B->pred;
    if (a->iteration_s != b->iteration_s) return a->iteration_s < b->iteration_s;
    return plan_eval_cmp(ea, &B->ev) < 0;
}

static void consider(search_ctx *c, search_best *B, const plan_inst *I, const plan_lattice *L,
                     const plan_layout *y, const plan_eval *ev, const char *algo, double exact_s,
                     double merge_s)
{
    plan pl;
    search_layout_plan(c, I, L, y, &pl);
    /* Asynchronous schedules all-reduce a replicated stage once per round of
     * its r replicas (docs/simulator.md), so the simulator and the executor
     * need r to divide the microbatch count; such a layout is not a plan. */
    if (sched_is_async(pl.schedule))
        for (int s = 0; s < pl.n_stages; s++)
            if (pl.n_micro % pl.stages[s].n_replicas != 0) {
                /* no count in the note: it would be a candidate's, which
                 * the chosen plan need not share */
                search_note(c->res, "%s: left out layouts whose replica counts do not divide their microbatch count (an asynchronous stage all-reduces once per round of its replicas)",
                            sched_kind_name(pl.schedule));
                search_free_stages(&pl);
                return;
            }
    plan_pred pr;
    plan_timing tm;
    cl_err e = {0};
    plan_predict_opts po = {.comm = c->rq->comm};
    int rc = plan_predict(&pl, &po, &pr, &tm, &e);
    assert(rc == CL_OK); /* layouts are valid plans by construction */
    (void)rc;
    if (plan_predict_sim(&pl, &pr) != CL_OK) {
        search_note(c->res, "%s: left out layouts the simulator cannot replay", sched_kind_name(pl.schedule));
        search_free_stages(&pl);
        return;
    }
    pl.pred = pr;
    c->res->candidates++;
    if (better(B, &pr, ev)) {
        if (B->have) search_free_stages(&B->pl);
        B->pl = pl;
        B->pred = pr;
        B->tm = tm;
        B->ev = *ev;
        B->algo = algo;
        B->exact_s = exact_s;
        B->merge_s = merge_s;
        B->view_n = c->n_dev;
        B->have = 1;
    } else {
        search_free_stages(&pl);
    }
}

static void consider_bad(search_ctx *c, search_best *B, const plan_inst *I, const plan_lattice *L,
                         const plan_layout *y)
{
    plan_eval ev;
    plan_layout_eval(I, L, y, &ev);
    if (!ev.valid) return;
    double over = ev.worst_need_bytes - ev.worst_cap_bytes;
    if (B->have_bad && over >= B->bad_ev.worst_need_bytes - B->bad_ev.worst_cap_bytes) return;
    if (B->have_bad) search_free_stages(&B->bad_pl);
    search_layout_plan(c, I, L, y, &B->bad_pl);
    B->bad_ev = ev;
    B->have_bad = 1;
}

static void gib(char *buf, size_t cap, double bytes)
{
    if (bytes >= 1e15) snprintf(buf, cap, "%.3g PB", bytes / 1e15);
    else if (bytes >= (double)(1 << 30)) snprintf(buf, cap, "%.2f GiB", bytes / (double)(1 << 30));
    else snprintf(buf, cap, "%.1f MiB", bytes / (double)(1 << 20));
}

/* The least-memory bound at this m (plan_exact_lower): first guess
 * `guess`, climbing from `known` (below the optimum) when > 0.  Past the
 * best predicted iteration the bound only decides skip_count (nothing fits
 * under it: HUGE_VAL), so the climb stops there. */
static double lower_bound(search_ctx *c, plan_inst *I, const plan_lattice *XL, sched_kind k0, double upper,
                          double guess, double known, const search_best *B)
{
    plan_exact_opts lo = {.upper_s = B->have && !c->rq->no_prune ? fmin(upper, B->pred.iteration_s) : upper,
                          .budget = c->rq->exact_budget, .hint_s = guess, .lower_s = known};
    plan_exact_stats ls = {0};
    cl_err le = {0};
    double lower;
    I->sched = k0;
    if (plan_exact_lower(I, XL, &lo, &lower, &ls, &le) == PLAN_EXACT_GAVE_UP) lower = 0;
    c->res->exact_steps += ls.steps;
    return lower;
}

/* Skip this microbatch count?  Only when no iteration here can beat the
 * best plan so far.  The least-memory bottleneck does not prove that: it
 * counts each boundary's transfers both ways on one link, where the
 * simulator gives each direction (and each pair of replicas) its own link
 * and overlaps them (vgg16 on 8 devices: 0.2356 s bottleneck at m = 1,
 * 0.2041 s simulated).  What does: a device computes its stage's work and,
 * replicated, waits for the ring all-reduce before its update (once per
 * iteration, or per round of r microbatches for the asynchronous kinds),
 * which takes at least the cost model's time; so the least bottleneck
 * with boundaries left out bounds every schedule's iteration (a stage's
 * time counts its slowest device, so only when all devices are alike).
 * When the bound's climb stopped at the best iteration (*lower HUGE_VAL)
 * and the count stays, *lower is found from there. */
static int skip_count(search_ctx *c, plan_inst *I, const plan_lattice *XL, sched_kind k0, double upper,
                      double *lower, const search_best *B)
{
    const plan_request *rq = c->rq;
    if (!B->have || !(*lower > B->pred.iteration_s) || rq->no_prune) return 0;
    int skip = 0, alike = 1;
    for (int q = 1; q < I->n_dev; q++) alike &= I->speed[q] == I->speed[0];
    if (alike) {
        plan_inst Ic = *I;
        Ic.bnd_off = 1;
        plan_exact_opts lc = {.upper_s = B->pred.iteration_s, .budget = rq->exact_budget};
        plan_exact_stats cs = {0};
        cl_err ce = {0};
        double lb_c = 0;
        if (plan_exact_lower(&Ic, XL, &lc, &lb_c, &cs, &ce) == PLAN_EXACT_GAVE_UP) lb_c = 0;
        c->res->exact_steps += cs.steps;
        skip = lb_c * (1 - 1e-9) > B->pred.iteration_s;
    }
    if (!skip && *lower == HUGE_VAL) {
        plan_exact_opts lo = {.upper_s = upper, .budget = rq->exact_budget,
                              .lower_s = B->pred.iteration_s};
        plan_exact_stats ls = {0};
        cl_err le = {0};
        I->sched = k0;
        if (plan_exact_lower(I, XL, &lo, lower, &ls, &le) == PLAN_EXACT_GAVE_UP) *lower = 0;
        c->res->exact_steps += ls.steps;
    }
    return skip;
}

/* Interleaved 1F1B: for each device count p (microbatches a multiple of p,
 * as the schedule needs) split the chain view into p x v chunks with
 * plan_chunks_minmax, chunk k on the k mod p-th device of the order, no
 * replication; memory per device adds its chunks (stash: its largest
 * chunk's times the chunk-microbatches in flight). */
static void search_interleaved(search_ctx *c, search_best *B, const int *micro, int n_micro)
{
    const plan_request *rq = c->rq;
    int v = rq->chunks > 0 ? rq->chunks : 2, N = c->n_dev;
    for (int mi = n_micro - 1; mi >= 0; mi--) {
        int m = micro[mi];
        plan_inst I;
        search_inst_build(c, m, &I);
        I.sched = SCHED_INTERLEAVED;
        I.chunks = v;
        plan_lattice L;
        plan_lattice_prefix(&L, &I);
        for (int p = 1; p <= N && p * v <= I.n && !cl_budget_over(); p++) {
            if (m % p != 0 || (rq->stages > 0 && p != rq->stages)) continue;
            int n = p * v;
            int *cut = cl_malloc((size_t)(n + 1) * sizeof(int));
            if (!plan_chunks_minmax(&I, &L, p, n, cut)) {
                free(cut);
                continue;
            }
            plan pl;
            memset(&pl, 0, sizeof pl);
            pl.schedule = SCHED_INTERLEAVED;
            pl.chunks = v;
            pl.optimizer = rq->optimizer;
            pl.comm_off = !rq->comm;
            pl.batch = rq->batch;
            pl.n_micro = m;
            pl.microbatch = rq->batch / m;
            pl.n_stages = n;
            pl.stages = cl_calloc((size_t)n, sizeof *pl.stages);
            pl.model = *rq->model;
            pl.cluster = *rq->cluster;
            plan_eval ev = {.valid = 1, .feasible = 1, .headroom_bytes = HUGE_VAL, .devices = p};
            double *busy = cl_calloc((size_t)p, sizeof(double)), *stat = cl_calloc((size_t)p, sizeof(double));
            double *stash_max = cl_calloc((size_t)p, sizeof(double));
            for (int k = 0; k < n; k++) {
                plan_stage *st = &pl.stages[k];
                int a = cut[k], b = cut[k + 1], q = k % p;
                double spd = I.speed[q];
                st->first = a;
                st->last = b - 1;
                st->n_layers = b - a;
                st->layers = cl_malloc((size_t)(b - a) * sizeof(int));
                for (int i = a; i < b; i++) st->layers[i - a] = i;
                st->n_replicas = 1;
                st->devices = cl_malloc(sizeof(int));
                st->devices[0] = I.dev[q];
                st->fwd_s = (L.fwd[b] - L.fwd[a]) / spd;
                st->bwd_in_s = (L.bwd_in[b] - L.bwd_in[a]) / spd;
                st->bwd_w_s = (L.bwd_w[b] - L.bwd_w[a]) / spd;
                st->update_s = search_stage_update_s(rq->prof, st, spd);
                st->act_out_bytes = k + 1 < n ? L.cut[b] : 0;
                st->stash_bytes = L.stash[b] - L.stash[a];
                st->param_bytes = L.params[b] - L.params[a];
                st->compute_s = plan_stage_time(&I, L.work[b] - L.work[a], 1, spd, 0);
                if (k + 1 < n) {
                    int lv = I.node[q] == I.node[(k + 1) % p] ? CLUSTER_INTRA : CLUSTER_INTER;
                    st->comm_s = plan_boundary_s(&I, L.cut[b], lv);
                    ev.bottleneck_s = fmax(ev.bottleneck_s, st->comm_s);
                    ev.comm_s += st->comm_s;
                }
                busy[q] += st->compute_s;
                stat[q] += st->param_bytes * (2.0 + I.optim_mult) + 2.0 * (L.cut[a] + L.cut[b]);
                stash_max[q] = fmax(stash_max[q], st->stash_bytes);
            }
            for (int q = 0; q < p; q++) {
                ev.bottleneck_s = fmax(ev.bottleneck_s, busy[q]);
                double mem = stat[q] + stash_max[q] * sched_inflight_rep(SCHED_INTERLEAVED, p, p - q, 1, m, v);
                for (int k = q; k < n; k += p) pl.stages[k].mem_bytes = mem;
                double h = I.mem_cap[q] - mem;
                if (h < ev.headroom_bytes) {
                    ev.headroom_bytes = h;
                    ev.worst_stage = q;
                    ev.worst_need_bytes = mem;
                    ev.worst_cap_bytes = I.mem_cap[q];
                }
                if (mem > I.mem_cap[q]) ev.feasible = 0;
            }
            free(busy);
            free(stat);
            free(stash_max);
            free(cut);
            plan_pred pr;
            plan_timing tm;
            cl_err pe = {0};
            plan_predict_opts po = {.comm = rq->comm};
            if (!ev.feasible || plan_predict(&pl, &po, &pr, &tm, &pe) != CL_OK) {
                if (!ev.feasible && (!B->have_bad || ev.worst_need_bytes - ev.worst_cap_bytes <
                                                         B->bad_ev.worst_need_bytes - B->bad_ev.worst_cap_bytes)) {
                    if (B->have_bad) search_free_stages(&B->bad_pl);
                    B->bad_pl = pl;
                    B->bad_ev = ev;
                    B->have_bad = 1;
                } else {
                    search_free_stages(&pl);
                }
                continue;
            }
            pl.pred = pr;
            c->res->candidates++;
            if (better(B, &pr, &ev)) {
                if (B->have) search_free_stages(&B->pl);
                B->pl = pl;
                B->pred = pr;
                B->tm = tm;
                B->ev = ev;
                B->algo = "chunk split";
                B->exact_s = NAN;
                B->merge_s = NAN;
                B->view_n = c->n_dev;
                B->have = 1;
            } else {
                search_free_stages(&pl);
            }
        }
        plan_lattice_free(&L);
        plan_inst_free(&I);
    }
    search_note(c->res, "interleaved plans balance the slowest chunk by a greedy split, without replication (not the exact search)");
}





/* Search the devices of c->view (every device order, microbatch count and
 * schedule), ranking every candidate into *B. */
int search_view(search_ctx *c, search_best *B, dag_state *lt, const int *micro, int n_micro,
                const sched_kind *kinds, int n_kinds, cl_err *e)
{
    const plan_request *rq = c->rq;
    plan_result *res = c->res;
    const model *md = rq->model;
    int N = c->n_dev;
    int *orders[3];
    int n_orders = search_device_orders(c, orders);
    int rc = CL_OK;
    double hint = 0; /* the last least-memory bottleneck: a first guess for the next */
    if (rq->schedule == SCHED_INTERLEAVED) {
        for (int oi = 0; oi < n_orders; oi++) {
            c->order = orders[oi];
            search_interleaved(c, B, micro, n_micro);
        }
        rc = budget_out(e);
    }
    for (int oi = 0; oi < n_orders && !rc && rq->schedule != SCHED_INTERLEAVED; oi++) {
        c->order = orders[oi];
        for (int mi = n_micro - 1; mi >= 0 && !rc; mi--) {
            int m = micro[mi]; /* largest first: it usually wins, and bounds the rest */
            if ((rc = budget_out(e))) break;
            plan_inst I;
            double tq = now_s();
            search_inst_build(c, m, &I);
            plan_lattice pre;
            plan_lattice_prefix(&pre, &I);
            const plan_lattice *XL = &pre;
            if (md->is_dag && rq->algo != PLAN_ALGO_MERGE && !lt->failed) {
                if (!lt->have) {
                    cl_err de = {0};
                    int64_t cap = rq->max_downsets > 0 ? rq->max_downsets : DEFAULT_MAX_DOWNSETS;
                    if (plan_lattice_downsets(&lt->dag, &I, cap, DEFAULT_MAX_PAIRS, &de) == CL_OK) {
                        lt->have = 1;
                    } else if ((rc = budget_out(e))) {
                        plan_lattice_free(&pre);
                        plan_inst_free(&I);
                        break;
                    } else {
                        lt->failed = 1;
                        search_note(res, "WARNING: %s; the exact search falls back to the cuts of one topological order (it may miss better cuts; raise --max-cuts)",
                             de.msg);
                    }
                } else {
                    plan_lattice_sums(&lt->dag, &I);
                }
                if (lt->have) XL = &lt->dag;
            }
            res->time_prep_s += now_s() - tq;
            tq = now_s();
            res->cuts_dag = lt->have;
            res->lattice_sets = XL->n_sets;
            /* partition-and-merge for every schedule first: cheap, and the
             * best of them bounds the exact search */
            plan_layout ym[SCHED_COUNT];
            plan_eval evm[SCHED_COUNT];
            int okm[SCHED_COUNT], pfix[SCHED_COUNT];
            double upper = HUGE_VAL;
            int u_seen = 0; /* devices of the first fitting layout at this m */
            for (int ki = 0; ki < n_kinds; ki++) {
                I.sched = kinds[ki];
                pfix[ki] = rq->stages;
                if (I.sched == SCHED_SEQUENTIAL) pfix[ki] = 1;
                memset(&ym[ki], 0, sizeof ym[ki]);
                memset(&evm[ki], 0, sizeof evm[ki]);
                okm[ki] = 0;
                okm[ki] = plan_merge(&I, &pre, pfix[ki], &ym[ki], NULL);
                if (ym[ki].p) plan_layout_eval(&I, &pre, &ym[ki], &evm[ki]);
                if (okm[ki] && XL == &pre) upper = fmin(upper, evm[ki].bottleneck_s);
            }
            res->time_merge_s += now_s() - tq;
            tq = now_s();
            /* schedules with the same memory share one exact search */
            plan_layout yk[SCHED_COUNT], ysh[SCHED_COUNT];
            plan_exact_result okk[SCHED_COUNT]; /* GAVE_UP also: not searched */
            int dep_of[SCHED_COUNT], mono_of[SCHED_COUNT], free_of[SCHED_COUNT], sh_have[SCHED_COUNT];
            memset(yk, 0, sizeof yk);
            memset(ysh, 0, sizeof ysh);
            for (int ki = 0; ki < n_kinds; ki++) {
                okk[ki] = PLAN_EXACT_GAVE_UP;
                sh_have[ki] = 0;
                free_of[ki] = -1;
                I.sched = kinds[ki];
                dep_of[ki] = plan_mem_dependence(&I);
                mono_of[ki] = plan_mem_depth_monotone(&I);
            }
            /* A flushing schedule's iteration holds one microbatch's way
             * forward through every stage and back (input gradients) on
             * the fastest devices at best: when that alone is slower than
             * the best plan so far, no layout of it can win here. */
            double crit = 0, spd_top = 0;
            for (int i = 0; i < I.n; i++) crit += I.fwd_s[i] + I.bwd_in_s[i];
            for (int q = 0; q < N; q++) spd_top = fmax(spd_top, I.speed[q]);
            crit = crit / spd_top * (1 - 1e-9); /* below any rounding of the sums */
            /* one lower bound for every schedule (least memory) */
            double lower = 0;
            /* tentative: lower is the last m's bound, proved <= this m's
             * optimum by one feasibility pass (nothing strictly below it);
             * the first exact search then probes it, and finding a layout
             * there proves it is the optimum (plan_exact_any_below) */
            int tentative = 0;
            if (rq->algo != PLAN_ALGO_MERGE && hint > 0 && !rq->no_prune) {
                plan_exact_opts lo = {.budget = rq->exact_budget};
                plan_exact_stats ls = {0};
                cl_err le = {0};
                I.sched = kinds[0];
                if (plan_exact_any_below(&I, XL, &lo, hint, &ls, &le) == PLAN_EXACT_NONE_FITS) {
                    lower = hint;
                    tentative = 1;
                }
                res->exact_steps += ls.steps;
            }
            if (rq->algo != PLAN_ALGO_MERGE && !tentative) {
                /* Past the best predicted iteration the bound only decides
                 * skip_m below (nothing fits under it: HUGE_VAL, skipped
                 * just the same), so the search need not climb beyond it.
                 * First guess: the last microbatch count's bound, else the
                 * best partition-and-merge bottleneck (on a DAG only a
                 * guess: its prefix cuts need not be downsets there). */
                double guess = hint;
                if (!(guess > 0))
                    for (int ki = 0; ki < n_kinds; ki++)
                        if (okm[ki] && (!(guess > 0) || evm[ki].bottleneck_s < guess))
                            guess = evm[ki].bottleneck_s;
                lower = lower_bound(c, &I, XL, kinds[0], upper, guess, 0, B);
                if (lower > 0 && lower < HUGE_VAL) hint = lower;
            }
            int skip_m = skip_count(c, &I, XL, kinds[0], upper, &lower, B);
            res->time_lower_s += now_s() - tq;
            for (int ki = 0; ki < n_kinds && !rc && !skip_m; ki++) {
                if ((rc = budget_out(e))) break;
                I.sched = kinds[ki];
                if (B->have && !sched_is_async(kinds[ki]) && crit > B->pred.iteration_s && !rq->no_prune)
                    continue;
                int p_fixed = pfix[ki], dev_fixed = 0;
                if (dep_of[ki] == PLAN_MEM_BY_TOTAL) {
                    /* zb-h1's memory depends on the pipeline's device count:
                     * search at the count the schedules before it chose */
                    dev_fixed = u_seen ? u_seen : okm[ki] ? evm[ki].devices : N;
                }
                plan_layout yx = {0};
                plan_eval evx = {0};
                plan_exact_result okx = PLAN_EXACT_NONE_FITS; /* no exact layout (merge only) */
                if (rq->algo != PLAN_ALGO_MERGE) {
                    /* merge's cuts are prefixes; a prefix layout is also a DAG
                     * layout only when inert layers sit where the rules put
                     * them, so its bound is used only on chains */
                    plan_exact_opts xo = {.p_fixed = p_fixed, .devices_fixed = dev_fixed,
                                          .upper_s = upper_of(okm, evm, XL == &pre, ki),
                                          .budget = rq->exact_budget,
                                          .lower_s = lower};
                    plan_exact_stats xs = {0};
                    cl_err xe = {0};
                    int twin = -1;
                    for (int kj = 0; kj < ki && twin < 0 && !rq->no_prune; kj++)
                        if ((okk[kj] == PLAN_EXACT_FOUND || okk[kj] == PLAN_EXACT_NONE_FITS) && pfix[kj] == p_fixed &&
                            !dev_fixed && same_memory(&I, kinds[kj], kinds[ki]))
                            twin = kj;
                    if (twin >= 0) {
                        okx = okk[twin];
                        if (okx == PLAN_EXACT_FOUND) plan_layout_copy(&yx, &yk[twin]);
                    } else if (sh_have[ki]) {
                        okx = PLAN_EXACT_FOUND; /* found alongside an earlier schedule */
                        plan_layout_copy(&yx, &ysh[ki]);
                    } else {
                        /* later schedules whose memory never binds here ride
                         * along as shadows (plan_exact_shadowed): exactly
                         * their own search's layout whenever every
                         * comparison went the same way for them */
                        int shk[PLAN_EXACT_SHADOWS], n_sh = 0;
                        int at_lower = !rq->no_prune && lower > 0 && lower < HUGE_VAL && lower <= xo.upper_s &&
                                       !dev_fixed && dep_of[ki] != PLAN_MEM_BY_TOTAL;
                        for (int kl = ki + 1; kl < n_kinds && at_lower && n_sh < PLAN_EXACT_SHADOWS; kl++) {
                            if (pfix[kl] != p_fixed || !shadow_kind(dep_of[ki], mono_of[ki]) ||
                                !shadow_kind(dep_of[kl], mono_of[kl]) ||
                                !(lower <= upper_of(okm, evm, XL == &pre, kl)) ||
                                same_memory(&I, kinds[ki], kinds[kl]))
                                continue;
                            if (free_of[ki] < 0) free_of[ki] = plan_exact_mem_free(&I, XL);
                            if (!free_of[ki]) break;
                            if (free_of[kl] < 0) {
                                I.sched = kinds[kl];
                                free_of[kl] = plan_exact_mem_free(&I, XL);
                                I.sched = kinds[ki];
                            }
                            if (free_of[kl]) shk[n_sh++] = kl;
                        }
                        sched_kind shs[PLAN_EXACT_SHADOWS];
                        plan_layout outs[1 + PLAN_EXACT_SHADOWS];
                        int sh_ok[PLAN_EXACT_SHADOWS];
                        for (int j = 0; j < n_sh; j++) shs[j] = kinds[shk[j]];
                        double tx = now_s();
                        xo.probe = tentative;
                        okx = plan_exact_shadowed(&I, XL, &xo, n_sh, shs, outs, sh_ok, &xs, &xe);
                        res->time_exact_s += now_s() - tx;
                        if (okx == PLAN_EXACT_ABOVE_LOWER) {
                            /* the tentative bound is below this m's optimum:
                             * find the optimum (from there), decide the skip
                             * as without it, and search again */
                            tentative = 0;
                            res->exact_steps += xs.steps;
                            lower = lower_bound(c, &I, XL, kinds[0], upper, 0, hint, B);
                            if (lower > 0 && lower < HUGE_VAL) hint = lower;
                            if (skip_count(c, &I, XL, kinds[0], upper, &lower, B)) break;
                            I.sched = kinds[ki];
                            xo.lower_s = lower;
                            xo.probe = 0;
                            memset(&xs, 0, sizeof xs);
                            tx = now_s();
                            okx = plan_exact_shadowed(&I, XL, &xo, n_sh, shs, outs, sh_ok, &xs, &xe);
                            res->time_exact_s += now_s() - tx;
                        }
                        tentative = 0; /* found at it: it is the optimum */
                        yx = outs[0];
                        for (int j = 0; j < n_sh; j++)
                            if (okx == PLAN_EXACT_FOUND && sh_ok[j]) {
                                ysh[shk[j]] = outs[1 + j];
                                sh_have[shk[j]] = 1;
                            } else if (sh_ok[j]) {
                                plan_layout_free(&outs[1 + j]);
                            }
                    }
                    okk[ki] = okx;
                    if (okx == PLAN_EXACT_FOUND) plan_layout_copy(&yk[ki], &yx);
                    res->exact_steps += xs.steps;
                    if (okx == PLAN_EXACT_GAVE_UP && !(rc = budget_out(e))) {
                        if (rq->algo == PLAN_ALGO_EXACT)
                            rc = cl_fail(e, CL_EINPUT, "%s (hint: --algo merge plans large problems quickly)", xe.msg);
                        else
                            search_note(res, "WARNING: %s; this candidate uses partition-and-merge instead (gap to the optimum unknown)", xe.msg);
                    } else if (okx == PLAN_EXACT_FOUND) {
                        plan_layout_eval(&I, XL, &yx, &evx);
                    }
                }
                double xs_b = okx == PLAN_EXACT_FOUND ? evx.bottleneck_s : NAN;
                double ms_b = okm[ki] ? evm[ki].bottleneck_s : NAN;
                double tr = now_s();
                if (!rc) {
                    if (okx == PLAN_EXACT_FOUND) {
                        consider(c, B, &I, XL, &yx, &evx, "exact", xs_b, ms_b);
                        if (!u_seen) u_seen = evx.devices;
                    } else if (okm[ki]) {
                        consider(c, B, &I, &pre, &ym[ki], &evm[ki], "merge", xs_b, ms_b);
                        if (!u_seen) u_seen = evm[ki].devices;
                    } else if (ym[ki].p) {
                        consider_bad(c, B, &I, &pre, &ym[ki]);
                    }
                }
                res->time_rank_s += now_s() - tr;
                if (yx.p) plan_layout_free(&yx);
            }
            for (int ki = 0; ki < n_kinds; ki++) {
                if (ym[ki].p) plan_layout_free(&ym[ki]);
                if (yk[ki].p) plan_layout_free(&yk[ki]);
                if (ysh[ki].p) plan_layout_free(&ysh[ki]);
            }
            plan_lattice_free(&pre);
            plan_inst_free(&I);
        }
    }
    for (int k = 0; k < n_orders; k++) free(orders[k]);
    return rc;
}





int plan_search(const plan_request *rq, plan_result *res, cl_err *e)
{
    memset(res, 0, sizeof *res);
    res->exact_s = res->merge_s = NAN;
    const model *md = rq->model;
    const cluster *cl = rq->cluster;
    if (rq->batch < 1) return cl_fail(e, CL_EINPUT, "batch %d: expected a positive sample count", rq->batch);
    if (rq->microbatches > 0 && rq->batch % rq->microbatches != 0)
        return cl_fail(e, CL_EINPUT,
                       "--microbatches %d does not divide the batch of %d (hint: pick a divisor, or auto)",
                       rq->microbatches, rq->batch);
    if (rq->prof->n_layers != md->n_layers)
        return cl_fail(e, CL_EINPUT, "the profile has %d layers, the model %d (hint: profile this model)",
                       rq->prof->n_layers, md->n_layers);
    int N = cl->n_devices, eb = model_dtype_bytes(md->dtype);
    if (rq->stages > 0 && rq->stages > N)
        return cl_fail(e, CL_EINPUT, "--stages %d: the cluster has only %d devices", rq->stages, N);
    if (rq->stages > 0 && rq->stages > md->n_layers)
        return cl_fail(e, CL_EINPUT, "--stages %d: the model has only %d layers", rq->stages, md->n_layers);
    if (rq->schedule == SCHED_INTERLEAVED && rq->algo == PLAN_ALGO_EXACT)
        return cl_fail(e, CL_EINPUT,
                       "interleaved plans come from a balanced chunk split, not the exact search (hint: --algo auto or merge)");
    if (rq->schedule == SCHED_SEQUENTIAL && rq->stages > 1)
        return cl_fail(e, CL_EINPUT, "--schedule sequential runs one stage, not %d", rq->stages);
    if (rq->floor && !search_floor_ok(rq))
        return cl_fail(e, CL_EINPUT, "plan_search: the floor plan does not answer the same question on fewer devices");

    /* The exact search on a chain tries every stage start for every stage
     * end: quadratic in the layers (10,000 cheap layers: 2 s; 30,000: 100 s).
     * Past PLAN_EXACT_AUTO_MAX_LAYERS, --algo auto keeps to partition-and-
     * merge (n log n) and says so; --algo exact still runs it. */
    plan_request rq_merge;
    if (rq->algo == PLAN_ALGO_AUTO && md->n_layers > PLAN_EXACT_AUTO_MAX_LAYERS) {
        rq_merge = *rq;
        rq_merge.algo = PLAN_ALGO_MERGE;
        rq = &rq_merge;
        search_note(res, "the exact search was skipped: %d layers, more than the %d --algo auto searches exactly (hint: --algo exact runs it, within --max-seconds)",
                    md->n_layers, PLAN_EXACT_AUTO_MAX_LAYERS);
    }
    search_ctx c = {.rq = rq, .res = res, .n_dev = N};
    c.speed = cl_malloc((size_t)N * sizeof(double));
    double ref = rq->ref_type ? cluster_flops(rq->ref_type, eb) : 0;
    int mixed = 0;
    for (int d = 0; d < N; d++) {
        double f = cluster_flops(&cl->types[cl->devices[d].type], eb);
        c.speed[d] = ref > 0 ? f / ref : 1.0;
        if (cl->devices[d].type != cl->devices[0].type) mixed = 1;
    }
    if (!ref && mixed) {
        free(c.speed);
        return cl_fail(e, CL_EINPUT,
                       "the cluster mixes device types but the profile's device (\"%s\") is not one of them or a preset, so its times cannot be scaled (hint: name the profiled device with --profiled-on TYPE)",
                       rq->prof->device);
    }

    int micro[SEARCH_MAX_MICRO + 1];
    int n_micro = search_micro_candidates(rq, micro);
    sched_kind kinds[SCHED_COUNT];
    int n_kinds = 0;
    if (rq->schedule >= 0) kinds[n_kinds++] = (sched_kind)rq->schedule;
    else {
        /* the method's schedule first: it wins ties */
        static const sched_kind auto_kinds[] = {SCHED_FBP, SCHED_1F1B, SCHED_GPIPE, SCHED_ZBH1,
                                                SCHED_PIPEDREAM};
        for (size_t k = 0; k < sizeof auto_kinds / sizeof auto_kinds[0]; k++) kinds[n_kinds++] = auto_kinds[k];
        kinds[n_kinds] = SCHED_SEQUENTIAL; /* tried on one device only */
    }

    if (search_check_costs(&c, micro, n_micro, e)) {
        free(c.speed);
        return e->code;
    }

    /* All N devices first, then fewer (docs/planner.md, "Fewer devices"). */
    search_best B = {0};
    int rc = search_counts(&c, &B, micro, n_micro, kinds, n_kinds, e);
    free(c.speed);
    /* a budget spent during the last candidate (its simulation left it out)
     * must not pass for a complete search */
    if (!rc) rc = budget_out(e);
    if (!rc && !B.have) {
        if (B.have_bad) {
            const plan_stage *st = &B.bad_pl.stages[B.bad_ev.worst_stage];
            char need[32], cap[32], over[32];
            gib(need, sizeof need, B.bad_ev.worst_need_bytes);
            gib(cap, sizeof cap, B.bad_ev.worst_cap_bytes);
            gib(over, sizeof over, B.bad_ev.worst_need_bytes - B.bad_ev.worst_cap_bytes);
            rc = cl_fail(e, CL_EINPUT,
                         "no plan fits in memory: at best, stage %d (layers %s .. %s, %s) needs %s per device but device %s has %s, over by %s (hint: more devices, a smaller batch, fewer microbatches in flight (1f1b, fbp), or replication)",
                         B.bad_ev.worst_stage, md->layers[st->first].name, md->layers[st->last].name,
                         sched_kind_name(B.bad_pl.schedule), need,
                         cl->devices[st->devices[0]].id, cap, over);
        } else {
            rc = cl_fail(e, CL_EINPUT, "no plan fits the cluster (hint: more devices, or allow replication)");
        }
    }
    if (B.have_bad) search_free_stages(&B.bad_pl);
    if (rc) {
        if (B.have) search_free_stages(&B.pl);
        return rc;
    }
    /* the final plan owns its model and cluster */
    plan *pl = &res->plan;
    *pl = B.pl;
    memset(&pl->model, 0, sizeof pl->model);
    memset(&pl->cluster, 0, sizeof pl->cluster);
    if ((rc = search_own_copies(pl, rq, e))) {
        plan_free(pl);
        return rc;
    }
    pl->pred = B.pred;
    if (pl->schedule == SCHED_ZBH1)
        search_note(res, "zb-h1 was searched on as many devices as the schedules before it chose (its memory depends on the device count)");
    res->timing = B.tm;
    res->bottleneck_s = B.ev.bottleneck_s;
    res->bottleneck_stage = B.ev.bottleneck_stage;
    res->bottleneck_is_boundary = B.ev.bottleneck_is_boundary;
    res->exact_s = B.exact_s;
    res->merge_s = B.merge_s;
    res->algo = B.algo;
    res->devices_used = plan_device_count(pl);
    snprintf(pl->idle_why, sizeof pl->idle_why, "%s", B.why);
    rc = plan_validate(pl, "plan", e);
    assert(rc == CL_OK);
    return rc;
}
