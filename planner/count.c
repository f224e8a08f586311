/* count.c - the search at one microbatch count over one device order
 * (count_search), as a sequence of named steps (docs/planner.md, "Candidates
 * and ranking"):
 *
 *   count_prepare   the instance and its cut lattices
 *   count_merge     partition-and-merge for every schedule (cheap; the best
 *                   bounds the exact search)
 *   count_memory    how each schedule's memory depends on depth and devices,
 *                   and the flushing schedules' critical path
 *   count_lower     one least-memory bottleneck bound for every schedule
 *   skip_count      whether this count can beat the best plan at all
 *   count_schedule  per schedule: its exact search (count_exact), then its
 *                   best layout ranked (count_rank)
 *
 * search.c calls count_search for every device order and microbatch count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/measure.h"
#include "core/schedule.h"
#include "cost.h"
#include "exact.h"
#include "instance.h"
#include "merge.h"

/* Most cut-lattice sets a branching model's exact search lists before
 * falling back to one topological order (--max-cuts raises it). */
#define DEFAULT_MAX_DOWNSETS 100000

/* What the steps at one microbatch count hand on to each other.  Arrays
 * are per schedule, indexed like kinds. */
typedef struct count_state {
    const sched_kind *kinds;    /* the schedules; fbp first when all are tried */
    int n_kinds;
    /* count_prepare: the instance, with I.sched set by each step to the
     * schedule it prices */
    plan_inst I;
    plan_lattice pre;           /* prefix cuts: partition-and-merge's view   */
    const plan_lattice *XL;     /* the exact search's cuts: &pre, or the
                                   DAG's downsets (dag_state)                */
    /* count_merge: partition-and-merge's layout per schedule */
    plan_layout ym[SCHED_COUNT];
    plan_eval evm[SCHED_COUNT];
    int okm[SCHED_COUNT];       /* 1: ym fits in memory                      */
    int pfix[SCHED_COUNT];      /* stage count the schedule must use (0: any) */
    double upper;               /* best merge bottleneck on a chain: caps the
                                   least-memory climb                        */
    /* count_memory: what decides whether two schedules' exact searches can
     * be shared (same_memory, shadows) */
    int dep_of[SCHED_COUNT];    /* plan_mem_dependence                       */
    int mono_of[SCHED_COUNT];   /* plan_mem_depth_monotone                   */
    int free_of[SCHED_COUNT];   /* plan_exact_mem_free, -1: not asked yet    */
    int alike;                  /* every device of the order runs at one speed */
    double crit;                /* one microbatch's way through every stage
                                   and back on the fastest device: no flushing
                                   schedule's iteration is shorter            */
    /* count_lower: one bound for every schedule */
    double lower;               /* no layout's bottleneck is below it (0:
                                   unknown; HUGE_VAL: nothing fits)         */
    double skip_lb, skip_at;    /* skip_count: its bound, found under a best
                                   iteration of skip_at (NaN: not yet)      */
    int tentative;              /* lower is the last count's bound, proved
                                   no higher than this count's least-memory
                                   optimum (plan_exact_any_below) but not yet
                                   equal to it: the first exact search
                                   probes it                                 */
    /* count_exact: results kept for later schedules */
    plan_exact_result okk[SCHED_COUNT]; /* plan_exact's answer; GAVE_UP also:
                                   not searched                              */
    plan_layout yk[SCHED_COUNT];  /* its layout, for a twin (same memory)    */
    plan_layout ysh[SCHED_COUNT]; /* found as a shadow of an earlier search  */
    int sh_have[SCHED_COUNT];   /* 1: ysh holds the schedule's layout       */
    int sh_bound[SCHED_COUNT];  /* 1: it shadowed a search where its memory
                                   could bind (count_shadows): used only where
                                   its own search would have run            */
    int64_t sh_steps[SCHED_COUNT]; /* then: its own search's steps          */
    double fail_at[SCHED_COUNT];   /* a bound where its own pass 2 finds
                                      nothing, seen as a shadow (0: none)    */
    int64_t fail_steps[SCHED_COUNT]; /* that pass's steps                     */
    plan_exact_memo memo[SCHED_COUNT]; /* passes its own search would run, run
                                   alongside an earlier schedule's (memo_of) */
    int u_seen;                 /* devices of the first layout of a flushing
                                   schedule ranked here (1f1b, gpipe): zb-h1
                                   searches at that count, as under --for
                                   torch (fbp's and pipedream's layouts, of
                                   another memory, do not set it)          */
    int stop;                   /* the count turned out unable to win: rank
                                   no more schedules                         */
    int lost[SCHED_COUNT];      /* 1: schedule_loses proved that no layout of
                                   this schedule can win here (for 1f1b, and
                                   for gpipe, nor can zb-h1's: zb_h1_loses)  */
} count_state;

/* ------------------------------------------------------------- helpers -- */

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
    int rmax = I->m < I->max_replicas ? I->m : I->max_replicas, N = I->n_dev, same = 1;
    size_t n = (size_t)N + 1;
    int *ia = cl_malloc(4 * n * sizeof *ia), *va = ia + n, *ib = va + n, *vb = ib + n;
    for (int r = 1; r <= N && r <= rmax && same; r++) {
        sched_inflight_depths(a, 0, r, I->m, I->chunks, N, ia, va);
        sched_inflight_depths(b, 0, r, I->m, I->chunks, N, ib, vb);
        for (int depth = r; depth <= N && same; depth++) same = ia[depth] == ib[depth] && va[depth] == vb[depth];
    }
    free(ia);
    return same;
}

/* The bottleneck bound the exact search of schedule ki gets: merge's, on
 * chains (a prefix layout is also a DAG layout only when inert layers sit
 * where the rules put them). */
static double upper_of(const count_state *S, int ki)
{
    return S->okm[ki] && S->XL == &S->pre ? S->evm[ki].bottleneck_s : HUGE_VAL;
}

/* Can a schedule of this memory dependence lead or shadow an exact search
 * (plan_exact_shadowed)? */
static int shadow_kind(int dep, int monotone)
{
    return dep == PLAN_MEM_FLAT || (dep == PLAN_MEM_BY_DEPTH && monotone);
}

/* The least-memory bound at this m (plan_exact_lower): first guess
 * `guess`, climbing from `known` (below the optimum) when > 0.  Not capped
 * at the best predicted iteration: above it the bound decides skip_count,
 * whose own bound (boundaries left out) is weaker, so where the count stays
 * the bound is needed after all, and a capped climb, having learnt only
 * that nothing lies under the best iteration, climbed again from there
 * (resnet50's default question on 32 devices: 13.5 -> 10.9 million
 * steps, the same plans).  Partition-and-merge's bottleneck caps it (a
 * layout that fits, so the climb ends there); the equal-replica searches
 * of an unrestricted request, whose optimum is mostly above it (their
 * layouts are few), get no cap: one pass at partition-and-merge's
 * bottleneck, the guess, which the climb tries only below its upper
 * bound. */
static double lower_bound(search_ctx *c, count_state *S, double guess, double known)
{
    int equal = c->rep > 0 && c->rq->framework == PLAN_FOR_ANY;
    plan_exact_opts lo = {.upper_s = equal ? HUGE_VAL : S->upper, .budget = c->rq->exact_budget, .hint_s = guess,
                          .lower_s = known};
    plan_exact_stats ls = {0};
    cl_err le = {0};
    double lower;
    S->I.sched = S->kinds[0];
    if (plan_exact_lower(&S->I, S->XL, &lo, &lower, &ls, &le) == PLAN_EXACT_GAVE_UP) lower = 0;
    c->res->exact_steps += ls.steps;
    return lower;
}

/* The best partition-and-merge bottleneck at this count (0: none fits): a
 * first guess for a least-memory bound's climb (on a DAG only a guess:
 * its prefix cuts need not be downsets there).  A climb returns the
 * optimum whatever its guesses (plan_exact_lower); a close one saves the
 * passes that miss below it. */
static double merge_guess(const count_state *S)
{
    double guess = 0;
    for (int ki = 0; ki < S->n_kinds; ki++)
        if (S->okm[ki] && (!(guess > 0) || S->evm[ki].bottleneck_s < guess)) guess = S->evm[ki].bottleneck_s;
    return guess;
}

/* Skip this microbatch count?  Only when no iteration here can beat the
 * best plan so far.  The least-memory bottleneck does not prove that: it
 * counts each boundary's transfers both ways on one link, where the
 * simulator gives each direction (and each pair of replicas) its own link
 * and overlaps them (docs/planner.md gives an example).  What does: a
 * device computes its stage's work and, replicated, waits for the ring
 * all-reduce before its update (once per iteration, or per round of r
 * microbatches for the asynchronous kinds), which takes at least the cost
 * model's time; so the least bottleneck with boundaries left out bounds
 * every schedule's iteration (a stage's time counts its slowest device, so
 * only when all devices are alike). */
static int skip_count(search_ctx *c, count_state *S, const search_best *B)
{
    const plan_request *rq = c->rq;
    plan_inst *I = &S->I;
    if (!B->have || !(S->lower > B->pred.iteration_s) || c->no_prune) return 0;
    int skip = 0, alike = 1;
    for (int q = 1; q < I->n_dev; q++) alike &= I->speed[q] == I->speed[0];
    if (alike) {
        /* asked again after a tentative bound was probed and replaced
         * (count_exact_run): the bound, which reads neither, is the same
         * while the best iteration is */
        double lb_c = S->skip_lb;
        if (!(S->skip_at == B->pred.iteration_s)) {
            plan_inst Ic = *I;
            Ic.bnd_off = 1;
            plan_exact_opts lc = {.upper_s = B->pred.iteration_s, .budget = rq->exact_budget};
            plan_exact_stats cs = {0};
            cl_err ce = {0};
            lb_c = 0;
            if (plan_exact_lower(&Ic, S->XL, &lc, &lb_c, &cs, &ce) == PLAN_EXACT_GAVE_UP) lb_c = 0;
            c->res->exact_steps += cs.steps;
            S->skip_lb = lb_c;
            S->skip_at = B->pred.iteration_s;
        }
        skip = lb_c * (1 - PLAN_BOUND_SLACK) > B->pred.iteration_s;
    }
    return skip;
}

/* Can no layout with one replica count r = c->rep for every stage (r
 * divides m) beat the best plan so far?  Every replica runs m / r
 * microbatches of its stage, at best on the fastest device, and then waits
 * for its stage's all-reduce (the bound skip_count also rests on), so the
 * iteration is at least each stage's (m / r) x work / fastest speed plus
 * its all-reduce: at least that of the heaviest layer alone, and at least
 * the average over the most stages r allows (the all-reduce is linear in
 * the bytes, so the average is the all-reduce of the average).  A closed
 * form, priced before anything at this count is searched; it prunes the
 * wide replica counts, whose all-reduce or work per replica is large. */
static int equal_reps_lose(search_ctx *c, const count_state *S, const search_best *B)
{
    const plan_inst *I = &S->I;
    const plan_lattice *L = &S->pre;
    int r = c->rep;
    if (c->rq->framework != PLAN_FOR_ANY || r <= 0 || !B->have || c->no_prune) return 0;
    int q = I->m / r, pmax = I->n_dev / r; /* r > 0 from here on */
    if (pmax > I->n) pmax = I->n;
    if (c->rq->stages > 0) pmax = c->rq->stages * r <= I->n_dev ? c->rq->stages : 0;
    if (pmax < 1) return 1; /* no layout: r blocks do not fit */
    double spd_top = 0;
    for (int d = 0; d < I->n_dev; d++) spd_top = fmax(spd_top, I->speed[d]);
    int all = L->n_sets - 1;
    double lb = q * (L->work[all] / spd_top) / pmax + plan_allreduce_least(I, L->params[all] / pmax, r);
    for (int i = 0; i < I->n; i++)
        lb = fmax(lb, q * (plan_inst_work(I, i) / spd_top) + plan_allreduce_least(I, I->param_bytes[i], r));
    return lb * (1 - PLAN_BOUND_SLACK) > B->pred.iteration_s;
}

/* --------------------------------------------------------------- steps -- */

/* The instance at m over c->order, its prefix lattice and, for a branching
 * model searched exactly, the DAG's downsets (listed at the first count,
 * re-summed at the others).  Nonzero only when the budget ran out while
 * listing (S then holds nothing). */
static int count_prepare(search_ctx *c, dag_state *lt, int m, count_state *S, cl_err *e)
{
    const plan_request *rq = c->rq;
    double tq = cl_now_s();
    instance_build(c, m, &S->I);
    plan_lattice_prefix(&S->pre, &S->I);
    S->XL = &S->pre;
    /* a framework splits a model at points of its layer list: prefixes
     * (so do the equal-replica searches of an unrestricted request, which
     * rank what the --for searches rank) */
    if (rq->model->is_dag && rq->algo != PLAN_ALGO_MERGE && !lt->failed && rq->framework == PLAN_FOR_ANY &&
        c->rep == 0) {
        if (!lt->have) {
            cl_err de = {0};
            int64_t cap = rq->max_downsets > 0 ? rq->max_downsets : DEFAULT_MAX_DOWNSETS;
            if (plan_lattice_downsets(&lt->dag, &S->I, cap, &de) == CL_OK) {
                lt->have = 1;
            } else {
                int rc = search_budget_out(e);
                if (rc) {
                    plan_lattice_free(&S->pre);
                    plan_inst_free(&S->I);
                    return rc;
                }
                lt->failed = 1;
                search_note(c->res, "WARNING: %s; the exact search falls back to the cuts of one topological order (it may miss better cuts)",
                            de.msg);
            }
        } else {
            plan_lattice_sums(&lt->dag, &S->I);
        }
        if (lt->have) S->XL = &lt->dag;
    }
    c->res->time_prep_s += cl_now_s() - tq;
    if (rq->framework != PLAN_FOR_ANY || c->rep == 0) { /* the cuts the plan's search saw */
        c->res->cuts_dag = lt->have;
        c->res->lattice_sets = S->XL->n_sets;
    }
    return CL_OK;
}

/* Partition-and-merge for every schedule first: cheap, and on a chain the
 * best of them bounds the exact search (S->upper). */
static void count_merge(search_ctx *c, count_state *S)
{
    S->upper = HUGE_VAL;
    /* the schedules of the request's stage count together: where memory
     * cannot bind under any, their layouts are made once (plan_merge_multi) */
    sched_kind group[SCHED_COUNT];
    plan_layout out[SCHED_COUNT];
    int ok[SCHED_COUNT], at[SCHED_COUNT], n = 0;
    for (int ki = 0; ki < S->n_kinds; ki++) {
        S->pfix[ki] = c->rq->stages;
        if (S->kinds[ki] == SCHED_SEQUENTIAL) S->pfix[ki] = 1;
        if (S->pfix[ki] == c->rq->stages) {
            at[n] = ki;
            group[n++] = S->kinds[ki];
        }
    }
    plan_merge_multi(&S->I, &S->pre, c->rq->stages, n, group, out, ok);
    for (int j = 0; j < n; j++) {
        S->ym[at[j]] = out[j];
        S->okm[at[j]] = ok[j];
    }
    for (int ki = 0; ki < S->n_kinds; ki++) {
        S->I.sched = S->kinds[ki];
        if (S->pfix[ki] != c->rq->stages) S->okm[ki] = plan_merge(&S->I, &S->pre, S->pfix[ki], &S->ym[ki], NULL);
        if (S->ym[ki].p) plan_layout_eval(&S->I, &S->pre, &S->ym[ki], &S->evm[ki]);
        if (S->okm[ki] && S->XL == &S->pre) S->upper = fmin(S->upper, S->evm[ki].bottleneck_s);
    }
}

/* Each schedule's memory rules (schedules with the same memory share one
 * exact search), and the critical path that prunes flushing schedules. */
static void count_memory(count_state *S)
{
    plan_inst *I = &S->I;
    for (int ki = 0; ki < S->n_kinds; ki++) {
        S->okk[ki] = PLAN_EXACT_GAVE_UP;
        S->free_of[ki] = -1;
        I->sched = S->kinds[ki];
        S->dep_of[ki] = plan_mem_dependence(I);
        S->mono_of[ki] = plan_mem_depth_monotone(I);
    }
    /* A flushing schedule's iteration holds one microbatch's way forward
     * through every stage and back (input gradients) on the fastest devices
     * at best: when that alone is slower than the best plan so far, no
     * layout of it can win here. */
    double crit = 0, spd_top = 0;
    S->alike = 1;
    for (int q = 1; q < I->n_dev; q++) S->alike &= I->speed[q] == I->speed[0];
    for (int i = 0; i < I->n; i++) crit += I->fwd_s[i] + I->bwd_in_s[i];
    for (int q = 0; q < I->n_dev; q++) spd_top = fmax(spd_top, I->speed[q]);
    S->crit = crit / spd_top * (1 - PLAN_BOUND_SLACK); /* below any rounding of the sums */
}

/* One lower bound for every schedule (least memory).  When the last count
 * left one (*hint) and one feasibility pass proves nothing lies strictly
 * below it, it is taken tentatively (plan_exact_any_below): the first exact
 * search then probes it, and a layout found there proves it the optimum.
 * Otherwise plan_exact_lower climbs to it.  *hint carries the bound to the
 * next count. */
static void count_lower(search_ctx *c, count_state *S, double *hint)
{
    const plan_request *rq = c->rq;
    /* (not across the replica counts of an unrestricted request's
     * equal-replica searches: another count's bound is a poor guess, and
     * partition-and-merge's is a good one, lower_bound) */
    int equal = c->rep > 0 && rq->framework == PLAN_FOR_ANY;
    if (rq->algo != PLAN_ALGO_MERGE && *hint > 0 && !c->no_prune && !equal) {
        plan_exact_opts lo = {.budget = rq->exact_budget};
        plan_exact_stats ls = {0};
        cl_err le = {0};
        S->I.sched = S->kinds[0];
        if (plan_exact_any_below(&S->I, S->XL, &lo, *hint, &ls, &le) == PLAN_EXACT_NONE_FITS) {
            S->lower = *hint;
            S->tentative = 1;
        }
        c->res->exact_steps += ls.steps;
    }
    if (rq->algo != PLAN_ALGO_MERGE && !S->tentative) {
        /* First guess: the last microbatch count's bound, else the best
         * partition-and-merge bottleneck (on a DAG only a guess: its prefix
         * cuts need not be downsets there). */
        double guess = equal ? 0 : *hint;
        if (!(guess > 0)) guess = merge_guess(S);
        S->lower = lower_bound(c, S, guess, 0);
        if (S->lower > 0 && S->lower < HUGE_VAL) *hint = S->lower;
    }
}

/* Does schedule ki, searched on exactly F = dev_fixed devices, keep
 * gpipe's memory there?  zb-h1 on F >= m devices does: each stage of r
 * replicas at depth D keeps min(ceil(D / r) + ceil((F - D) / r),
 * ceil(m / r)) microbatches in flight, and the sum is at least
 * ceil(F / r) >= ceil(m / r), so every stage keeps all ceil(m / r),
 * as under gpipe, with one weight version (test sim_closed); on fewer
 * devices it keeps no more than that.  So gpipe's optimum, searched with
 * no device count fixed, is a zb-h1 layout that fits, and no worse than
 * zb-h1's on exactly F (test plan_exact, brute force): its layout serves
 * (count_twin), and where no gpipe layout can win, none of these can
 * (zb_h1_loses).  The search on exactly F keeps a front per device count
 * and, with positions to spare, every gap (1,000 layers on 1,016 devices:
 * 877 million steps at 256 microbatches, 85 s). */
static int keeps_gpipe_memory(const count_state *S, int ki, int dev_fixed)
{
    return S->kinds[ki] == SCHED_ZBH1 && dev_fixed >= S->I.m;
}

/* An earlier schedule with the same memory whose exact search serves ki
 * too, or -1 (for zb-h1 where keeps_gpipe_memory: gpipe's). */
static int count_twin(search_ctx *c, count_state *S, int ki, int p_fixed, int dev_fixed)
{
    sched_kind kind = S->kinds[ki];
    /* (not a prune: the search zb-h1 gets, also when nothing is pruned) */
    int as_gpipe = keeps_gpipe_memory(S, ki, dev_fixed);
    if (as_gpipe) {
        kind = SCHED_GPIPE;
        dev_fixed = 0;
    }
    for (int kj = 0; kj < ki && (!c->no_prune || as_gpipe); kj++)
        if ((S->okk[kj] == PLAN_EXACT_FOUND || S->okk[kj] == PLAN_EXACT_NONE_FITS) && S->pfix[kj] == p_fixed && !dev_fixed &&
            same_memory(&S->I, S->kinds[kj], kind))
            return kj;
    return -1;
}

/* Later schedules whose memory never binds here ride along ki's search as
 * shadows (plan_exact_shadowed): exactly their own search's layout whenever
 * every comparison went the same way for them.  Fills shk; returns how
 * many. */
static int count_shadows(search_ctx *c, count_state *S, int ki, int p_fixed, int dev_fixed,
                         double upper_s, const search_best *B, int *shk)
{
    plan_inst *I = &S->I;
    int n_sh = 0;
    int at_lower = !c->no_prune && S->lower > 0 && S->lower < HUGE_VAL && S->lower <= upper_s &&
                   !dev_fixed && S->dep_of[ki] != PLAN_MEM_BY_TOTAL;
    /* first the schedules whose memory never binds, with a lead whose
     * memory never binds either: they always rode along (the steps of
     * their own searches counted in the lead's); then, up to the limit,
     * those whose memory can bind: each keeps its own run's prunes and
     * steps in the pass (plan_exact_shadowed), and its layout stands in
     * for its own search only where that search would have run
     * (count_exact) */
    for (int pass = 0; pass < 2; pass++)
        for (int kl = ki + 1; kl < S->n_kinds && at_lower && n_sh < PLAN_EXACT_SHADOWS; kl++) {
            if (S->pfix[kl] != p_fixed || !shadow_kind(S->dep_of[ki], S->mono_of[ki]) ||
                !shadow_kind(S->dep_of[kl], S->mono_of[kl]) || !(S->lower <= upper_of(S, kl)) ||
                same_memory(I, S->kinds[ki], S->kinds[kl]))
                continue;
            if (S->free_of[ki] < 0) S->free_of[ki] = plan_exact_mem_free(I, S->XL);
            if (S->free_of[kl] < 0) {
                I->sched = S->kinds[kl];
                S->free_of[kl] = plan_exact_mem_free(I, S->XL);
                I->sched = S->kinds[ki];
            }
            int always = S->free_of[ki] && S->free_of[kl];
            if (pass == 0 && always) shk[n_sh++] = kl;
            /* (a schedule whose memory never binds, under a lead whose
             * memory can: searched on its own, as ever; nor one whose
             * critical path already loses, count_schedule: its search would
             * not run, and the best plan only gets faster; nor one that has
             * its layout from an earlier search already) */
            int loses = B->have && !sched_is_async(S->kinds[kl]) && S->crit > B->pred.iteration_s;
            if (pass == 1 && !S->free_of[kl] && !loses && !S->sh_have[kl] && !c->no_sched_share) shk[n_sh++] = kl;
        }
    return n_sh;
}

/* The schedule whose own exact passes ride along schedule ki's search
 * (plan_exact_opts.memo_out), or -1: pipedream along fbp, which on long
 * chains climb the same guesses and differ only in memory (one weight
 * version or one per microbatch in flight), when pipedream's search is
 * still to come at this count and would run with no stage count fixed;
 * fbp's shadows at the bound, if any, are pipedream alone. */
static int memo_of(const search_ctx *c, const count_state *S, int ki, int p_fixed, int dev_fixed, int n_sh,
                   const int *shk)
{
    if (c->no_sched_share || c->no_prune || p_fixed || dev_fixed || S->kinds[ki] != SCHED_FBP) return -1;
    for (int kj = ki + 1; kj < S->n_kinds; kj++)
        if (S->kinds[kj] == SCHED_PIPEDREAM) {
            if (S->sh_have[kj] || S->pfix[kj] || !shadow_kind(S->dep_of[kj], S->mono_of[kj])) return -1;
            return n_sh == 0 || (n_sh == 1 && shk[0] == kj) ? kj : -1;
        }
    return -1;
}

/* Schedule ki's own exact search, with its shadows shk[0..n_sh), into
 * *yx; returns plan_exact's answer.  A tentative lower bound is probed
 * first: when nothing lies at it, it was below this count's optimum, so the
 * optimum is found (from there), the skip decided again as without it
 * (S->stop when the count cannot win: nothing is returned then) and the
 * search run again. */
static plan_exact_result count_exact_run(search_ctx *c, count_state *S, int ki, plan_exact_opts *xo, int n_sh,
                           const int *shk_in, double *hint, const search_best *B, plan_layout *yx,
                           plan_exact_stats *xs, cl_err *xe)
{
    plan_result *res = c->res;
    sched_kind shs[PLAN_EXACT_SHADOWS];
    plan_layout outs[1 + PLAN_EXACT_SHADOWS];
    int sh_ok[PLAN_EXACT_SHADOWS], shk[PLAN_EXACT_SHADOWS];
    for (int j = 0; j < n_sh; j++) shk[j] = shk_in[j], shs[j] = S->kinds[shk[j]];
    double tx = cl_now_s();
    xo->probe = S->tentative;
    plan_exact_result okx = plan_exact_shadowed(&S->I, S->XL, xo, n_sh, shs, outs, sh_ok, xs, xe);
    res->time_exact_s += cl_now_s() - tx;
    for (int j = 0; j < n_sh; j++)
        if (xs->sh_fail[j] > 0) {
            S->fail_at[shk[j]] = xo->lower_s;
            S->fail_steps[shk[j]] = xs->sh_fail[j];
        }
    if (okx == PLAN_EXACT_ABOVE_LOWER) {
        S->tentative = 0;
        res->exact_steps += xs->steps;
        double probed = xo->lower_s;
        int64_t fail = xs->lower_fail, fail_lead = xs->lower_fail_lead;
        S->lower = lower_bound(c, S, merge_guess(S), *hint);
        if (S->lower > 0 && S->lower < HUGE_VAL) *hint = S->lower;
        if (skip_count(c, S, B)) {
            S->stop = 1;
            return okx;
        }
        S->I.sched = S->kinds[ki];
        xo->lower_s = S->lower;
        xo->probe = 0;
        /* a shadow whose memory can bind rides along only where its own
         * search would start with the pass at the new bound */
        int k = 0;
        for (int j = 0; j < n_sh; j++)
            if ((S->free_of[ki] && S->free_of[shk[j]]) || S->lower <= upper_of(S, shk[j])) {
                shk[k] = shk[j];
                shs[k++] = shs[j];
            }
        n_sh = k;
        /* the bound found is often the one probed: the pass there found
         * nothing and would again (the same pass: the shadows whose steps
         * count with the lead's are the same ones) */
        if (S->lower == probed && fail > 0) {
            xo->lower_failed = fail;
            xo->lower_failed_lead = fail_lead;
        }
        xo->no_skip = c->no_sched_share;
        memset(xs, 0, sizeof *xs);
        tx = cl_now_s();
        okx = plan_exact_shadowed(&S->I, S->XL, xo, n_sh, shs, outs, sh_ok, xs, xe);
        res->time_exact_s += cl_now_s() - tx;
        for (int j = 0; j < n_sh; j++)
            if (xs->sh_fail[j] > 0) {
                S->fail_at[shk[j]] = xo->lower_s;
                S->fail_steps[shk[j]] = xs->sh_fail[j];
            }
    }
    S->tentative = 0; /* found at it: it is the optimum */
    c->passes_skipped += xs->skipped;
    c->passes_answered += xs->answered;
    *yx = outs[0];
    for (int j = 0; j < n_sh; j++)
        if (okx == PLAN_EXACT_FOUND && sh_ok[j]) {
            if (S->ysh[shk[j]].p) plan_layout_free(&S->ysh[shk[j]]); /* (carried twice: the same layout) */
            S->ysh[shk[j]] = outs[1 + j];
            S->sh_have[shk[j]] = 1;
            S->sh_bound[shk[j]] = !(S->free_of[ki] && S->free_of[shk[j]]);
            S->sh_steps[shk[j]] = xs->sh_steps[j];
        } else if (sh_ok[j]) {
            plan_layout_free(&outs[1 + j]);
        }
    return okx;
}

/* Can no zb-h1 layout win at this count because no 1f1b layout can
 * (schedule_loses), or, searched on F = dev_fixed devices where it keeps
 * gpipe's memory (keeps_gpipe_memory), because no gpipe layout can?
 * zb-h1 keeps min(ceil(D / r) + ceil((F - D) / r), ceil(m / r)) >= 1f1b's
 * min(ceil(D / r), ceil(m / r)) microbatches in flight at every depth D,
 * on any F devices, with the same weights and one version, so every
 * zb-h1 layout that fits is a 1f1b layout that fits; and schedule_loses's
 * bound (each stage's work and all-reduce, boundaries left out) holds for
 * every flushing schedule's iteration.  So where 1f1b lost, zb-h1's
 * search would rank nothing that wins: it is left out, and 1f1b's device
 * count, which zb-h1 would have waited for, is not needed (GPT-3's tensor
 * question: 1f1b at 256 microbatches climbed to 116 s where 18.6 s is the
 * best, for zb-h1's count). */
static int zb_h1_loses(const count_state *S, int ki, int dev_fixed)
{
    if (S->kinds[ki] != SCHED_ZBH1) return 0;
    for (int k = 0; k < S->n_kinds; k++)
        if (S->lost[k] && S->pfix[k] == S->pfix[ki] &&
            (S->kinds[k] == SCHED_1F1B || (S->kinds[k] == SCHED_GPIPE && keeps_gpipe_memory(S, ki, dev_fixed))))
            return 1;
    return 0;
}

/* Can no layout of schedule ki beat the best plan so far, so that its exact
 * search (and the ranking of what it returns) can be left out?  The bound
 * skip_count rests on, per layout: with all devices alike, every schedule's
 * simulated iteration holds each stage's ceil(m / r) microbatches of work
 * and then its all-reduce, i.e. the layout's bottleneck with the boundaries
 * left out (bnd_off).  skip_count takes the least of it under each stage's
 * least memory, for every schedule at once; here it is taken under ki's own
 * memory, where a schedule whose memory binds (fbp or pipedream at one
 * microbatch: every microbatch of the pipeline in flight) has its optimum
 * far above the least-memory one and its exact search climbs to it in
 * dozens of passes (1,000 layers on 256 devices: 35 million steps each)
 * although nothing it can return would win.  One feasibility pass under
 * the best iteration decides it.  Only where what would be ranked lies in
 * the pass's layouts: a chain's prefix cuts (partition-and-merge's layout,
 * ranked when the exact search finds none, is one of them), memory counted
 * per depth (not zb-h1's total device count), and, for a flushing
 * schedule, not while a later zb-h1 still waits for the device count of
 * its layout (u_seen), unless that zb-h1 loses with this 1f1b or lost
 * with an earlier one (zb_h1_loses). */
static int schedule_loses(search_ctx *c, count_state *S, int ki, int p_fixed, int dev_fixed, const search_best *B)
{
    if (!B->have || c->no_prune || c->no_sched_prune || !S->alike || dev_fixed || S->XL != &S->pre ||
        S->dep_of[ki] == PLAN_MEM_BY_TOTAL)
        return 0;
    /* the pass costs about one of the search's: asked only where the search
     * climbs above the best iteration (the count's least-memory optimum is
     * above it) or has no partition-and-merge layout within it to stop at */
    if (!(S->lower > B->pred.iteration_s) && upper_of(S, ki) <= B->pred.iteration_s) return 0;
    for (int kl = ki + 1; kl < S->n_kinds && !S->u_seen && !sched_is_async(S->kinds[ki]); kl++)
        if (S->dep_of[kl] == PLAN_MEM_BY_TOTAL && !(!sched_is_async(S->kinds[kl]) && S->crit > B->pred.iteration_s) &&
            !(S->kinds[ki] == SCHED_1F1B && S->kinds[kl] == SCHED_ZBH1 && S->pfix[kl] == S->pfix[ki]) &&
            !zb_h1_loses(S, kl, 0)) /* (kl's device count not chosen yet) */
            return 0;
    plan_inst Ic = S->I;
    Ic.sched = S->kinds[ki];
    Ic.bnd_off = 1;
    plan_exact_opts lo = {.p_fixed = p_fixed, .budget = c->rq->exact_budget};
    plan_exact_stats ls = {0};
    cl_err le = {0};
    /* above g, a layout's bound times (1 - slack) is above the best; the
     * guesses start 2% above the count's least-memory bound, as a climb
     * (plan_exact_fits_within) */
    double g = B->pred.iteration_s * (1 + 4 * PLAN_BOUND_SLACK);
    double from = S->lower > 0 && S->lower < HUGE_VAL ? S->lower * 1.02 : 0;
    plan_exact_result r = plan_exact_fits_within(&Ic, S->XL, &lo, from, g, &ls, &le);
    c->res->exact_steps += ls.steps;
    if (!(c->rep > 0 && c->rq->framework == PLAN_FOR_ANY)) c->sched_prune_steps += ls.steps; /* (fewer.c) */
    return r == PLAN_EXACT_NONE_FITS;
}

/* Schedule ki's exact layout into *yx and *evx: from a twin's search, from
 * an earlier search it shadowed, or from its own (count_exact_run).  Sets
 * *okx to PLAN_EXACT_FOUND, or NONE_FITS (merge's layout stands in), or
 * GAVE_UP when schedule_loses proved nothing of ki can win (nothing is
 * ranked then); returns nonzero
 * when the search must stop (budget, or --algo exact over its limits). */
static int count_exact(search_ctx *c, count_state *S, int ki, int p_fixed, int dev_fixed, double *hint,
                       const search_best *B, plan_layout *yx, plan_eval *evx, plan_exact_result *okx_out,
                       cl_err *e)
{
    const plan_request *rq = c->rq;
    /* merge's cuts are prefixes; a prefix layout is also a DAG layout only
     * when inert layers sit where the rules put them, so its bound is used
     * only on chains */
    /* every search climbs finely (exact_climb.c) unless a test says none */
    plan_exact_opts xo = {.p_fixed = p_fixed, .devices_fixed = dev_fixed, .upper_s = upper_of(S, ki),
                          .budget = rq->exact_budget, .lower_s = S->lower, .no_skip = c->no_sched_share,
                          .fine_climb = c->fine >= 0};
    plan_exact_stats xs = {0};
    cl_err xe = {0};
    plan_exact_result okx;
    int rc = CL_OK;
    int twin = count_twin(c, S, ki, p_fixed, dev_fixed);
    if (twin >= 0) {
        okx = S->okk[twin];
        if (okx == PLAN_EXACT_FOUND) plan_layout_copy(yx, &S->yk[twin]);
    } else if (S->sh_have[ki] && !S->sh_bound[ki]) {
        okx = PLAN_EXACT_FOUND; /* alongside an earlier schedule */
        plan_layout_copy(yx, &S->ysh[ki]);
    } else if (schedule_loses(c, S, ki, p_fixed, dev_fixed, B)) {
        c->sched_pruned++;
        S->lost[ki] = 1;
        *okx_out = PLAN_EXACT_GAVE_UP; /* nothing to rank */
        return CL_OK;
    } else if (S->sh_have[ki]) {
        /* alongside an earlier schedule, where its memory could bind: the
         * layout and the steps of its own search, which would run here */
        okx = PLAN_EXACT_FOUND;
        plan_layout_copy(yx, &S->ysh[ki]);
        xs.steps = S->sh_steps[ki];
        c->sched_shared++;
    } else {
        int shk[PLAN_EXACT_SHADOWS];
        int n_sh = count_shadows(c, S, ki, p_fixed, dev_fixed, xo.upper_s, B, shk);
        /* its pass at the bound, run as a shadow of an earlier search, found
         * nothing: the same pass here would not either (it has no shadows
         * whose steps count with its own: its memory can bind) */
        if (S->fail_at[ki] > 0 && S->fail_at[ki] == S->lower && !S->tentative && !c->no_sched_share) {
            xo.lower_failed = xo.lower_failed_lead = S->fail_steps[ki];
        }
        /* a later schedule's passes ride along; this one's may have ridden
         * along an earlier search (made with no stage count fixed either) */
        int mk = memo_of(c, S, ki, p_fixed, dev_fixed, n_sh, shk);
        if (mk >= 0) {
            xo.memo_out = &S->memo[mk];
            xo.memo_sched = S->kinds[mk];
        }
        if (S->memo[ki].n && !p_fixed && !dev_fixed && !c->no_sched_share) xo.memo_in = &S->memo[ki];
        okx = count_exact_run(c, S, ki, &xo, n_sh, shk, hint, B, yx, &xs, &xe);
        if (S->stop) return CL_OK;
    }
    S->okk[ki] = okx;
    if (okx == PLAN_EXACT_FOUND) plan_layout_copy(&S->yk[ki], yx);
    c->res->exact_steps += xs.steps;
    if (okx == PLAN_EXACT_GAVE_UP && (rc = search_budget_out(e))) {
        okx = PLAN_EXACT_NONE_FITS;
    } else if (okx == PLAN_EXACT_GAVE_UP) {
        if (rq->algo == PLAN_ALGO_EXACT)
            rc = cl_fail(e, CL_EINPUT, "%s (hint: --algo merge plans large problems quickly)", xe.msg);
        else
            search_note(c->res, "WARNING: %s; this candidate uses partition-and-merge instead (gap to the optimum unknown)", xe.msg);
        okx = PLAN_EXACT_NONE_FITS;
    } else if (okx == PLAN_EXACT_FOUND) {
        plan_layout_eval(&S->I, S->XL, yx, evx);
    }
    *okx_out = okx;
    return rc;
}

/* Rank schedule ki's best layout: the exact one when found, else
 * partition-and-merge's, else (nothing fits) merge's as the least bad for
 * the message. */
static void count_rank(search_ctx *c, search_best *B, count_state *S, int ki, const plan_layout *yx,
                       const plan_eval *evx, plan_exact_result okx)
{
    double xs_b = okx == PLAN_EXACT_FOUND ? evx->bottleneck_s : NAN;
    double ms_b = S->okm[ki] ? S->evm[ki].bottleneck_s : NAN;
    double tr = cl_now_s();
    int flush = !sched_is_async(S->kinds[ki]);
    if (okx == PLAN_EXACT_FOUND) {
        search_consider(c, B, &S->I, S->XL, yx, evx, "exact", xs_b, ms_b);
        if (!S->u_seen && flush) S->u_seen = evx->devices;
    } else if (S->okm[ki]) {
        search_consider(c, B, &S->I, &S->pre, &S->ym[ki], &S->evm[ki], "merge", xs_b, ms_b);
        if (!S->u_seen && flush) S->u_seen = S->evm[ki].devices;
    } else if (S->ym[ki].p) {
        search_consider_bad(c, B, &S->I, &S->pre, &S->ym[ki]);
    }
    c->res->time_rank_s += cl_now_s() - tr;
}

/* Schedule ki at this count: pruned when its critical path alone loses,
 * else its exact search and the ranking of its best layout. */
static int count_schedule(search_ctx *c, search_best *B, count_state *S, int ki, double *hint, cl_err *e)
{
    const plan_request *rq = c->rq;
    int rc = search_budget_out(e);
    if (rc) return rc;
    S->I.sched = S->kinds[ki];
    if (B->have && !sched_is_async(S->kinds[ki]) && S->crit > B->pred.iteration_s && !c->no_prune)
        return CL_OK;
    int p_fixed = S->pfix[ki], dev_fixed = 0;
    if (S->dep_of[ki] == PLAN_MEM_BY_TOTAL) {
        /* zb-h1's memory depends on the pipeline's device count: search at
         * the count the schedules before it chose */
        dev_fixed = S->u_seen ? S->u_seen : S->okm[ki] ? S->evm[ki].devices : c->n_dev;
    }
    if (zb_h1_loses(S, ki, dev_fixed)) {
        c->sched_pruned++;
        return CL_OK;
    }
    plan_layout yx = {0};
    plan_eval evx = {0};
    plan_exact_result okx = PLAN_EXACT_NONE_FITS; /* no exact layout (merge only) */
    if (rq->algo != PLAN_ALGO_MERGE) {
        rc = count_exact(c, S, ki, p_fixed, dev_fixed, hint, B, &yx, &evx, &okx, e);
        if (S->stop || okx == PLAN_EXACT_GAVE_UP) return rc; /* (schedule_loses) */
    }
    if (!rc) count_rank(c, B, S, ki, &yx, &evx, okx);
    if (yx.p) plan_layout_free(&yx);
    return rc;
}

static void count_free(count_state *S)
{
    for (int ki = 0; ki < S->n_kinds; ki++) {
        plan_exact_memo_free(&S->memo[ki]);
        if (S->ym[ki].p) plan_layout_free(&S->ym[ki]);
        if (S->yk[ki].p) plan_layout_free(&S->yk[ki]);
        if (S->ysh[ki].p) plan_layout_free(&S->ysh[ki]);
    }
    plan_lattice_free(&S->pre);
    plan_inst_free(&S->I);
}

/* See instance.h. */
int count_search(search_ctx *c, search_best *B, dag_state *lt, int m, const sched_kind *kinds, int n_kinds,
                 double *hint, cl_err *e)
{
    count_state S;
    memset(&S, 0, sizeof S);
    S.kinds = kinds;
    S.n_kinds = n_kinds;
    S.skip_at = NAN;
    int rc = count_prepare(c, lt, m, &S, e);
    if (rc) return rc;
    if (equal_reps_lose(c, &S, B)) {
        count_free(&S);
        return CL_OK;
    }
    double tq = cl_now_s();
    count_merge(c, &S);
    c->res->time_merge_s += cl_now_s() - tq;
    tq = cl_now_s();
    count_memory(&S);
    count_lower(c, &S, hint);
    int skip = skip_count(c, &S, B);
    c->res->time_lower_s += cl_now_s() - tq;
    for (int ki = 0; ki < n_kinds && !rc && !skip && !S.stop; ki++) rc = count_schedule(c, B, &S, ki, hint, e);
    count_free(&S);
    return rc;
}
