/* exact_climb.c - which passes the exact search runs (see exact_dp.h):
 * exact_dp_pass sets up one pass (its goal, memory relaxation and bound), and
 * exact_dp_climb finds the optimal bottleneck by pass 1 under growing guesses
 * of the bound, between global lower and upper bounds, checking on the way
 * that anything fits at all.  Pass 2 at the bottleneck found is the entry
 * points' step (exact.c).
 */
#include <string.h>

#include "exact_front.h"

static int exact_dp_pass_run(exact_dp *X, int relaxed, xgoal goal, double bound, plan_exact_stats *st);

/* The pass as the memo answers it (plan_exact_opts.memo_in): its steps
 * counted (and the step budget checked) as the pass would, and its answer
 * as one entry holding the bottleneck (X->memo_y: the layout of pass 2);
 * -2 when the memo does not hold the pass. */
static int memo_answer(exact_dp *X, xgoal goal, double bound, plan_exact_stats *st)
{
    const plan_exact_memo *M = X->memo_in;
    for (int i = 0; i < M->n; i++) {
        const plan_exact_rec *rc = &M->rec[i];
        if (rc->comm != (goal == GOAL_COMM) || rc->bound != bound) continue;
        if (st) {
            st->passes++;
            st->answered++;
            if (goal == GOAL_COMM && (X->c_first_rule ? X->c_first_rule > 0 : exact_dp_free_at(X, bound)))
                st->c_first_passes++;
        }
        X->budget.steps += rc->steps;
        if (X->budget.steps > X->budget.limit) {
            X->budget.over = 1;
            return -1;
        }
        if (!rc->found) return -1;
        X->store.n_ent = 0;
        int id = new_entry(X);
        memset(&X->store.ent[id], 0, sizeof X->store.ent[id]);
        X->store.ent[id].B = rc->B;
        if (rc->comm) X->memo_y = &rc->y;
        return id;
    }
    return -2;
}

/* Record what shadow 0 (memo_sched) found in the pass just run. */
static void memo_record(exact_dp *X, xgoal goal, double bound)
{
    plan_exact_rec *rc = &X->memo_out->rec[X->memo_out->n++];
    int b = X->sh.best[0];
    *rc = (plan_exact_rec){.comm = goal == GOAL_COMM, .bound = bound, .found = b >= 0,
                           .B = b >= 0 ? X->store.ent[b].B : 0, .steps = X->sh.steps[0]};
    if (b >= 0 && rc->comm) exact_dp_rebuild(X, b, &rc->y);
}

int exact_dp_pass(exact_dp *X, int relaxed, xgoal goal, double bound, plan_exact_stats *st)
{
    X->memo_y = NULL;
    int memo_goal = !relaxed && (goal == GOAL_BOTTLENECK || goal == GOAL_COMM);
    if (memo_goal && X->memo_in && !X->sh.n) {
        int b = memo_answer(X, goal, bound, st);
        if (b != -2) return b;
    }
    /* memo_sched rides along (exact.c): shadow 0, its own steps apart */
    int arm = memo_goal && X->memo_on && !X->sh.n && X->memo_out->n < PLAN_EXACT_RECS;
    if (arm) {
        X->sh.n = 1;
        X->sh.split = X->memo_split;
        X->sh.lead_mask = X->memo_lead_mask;
        X->sh.steps[0] = 0;
    }
    int best = exact_dp_pass_run(X, relaxed, goal, bound, st);
    if (arm) {
        /* (a pass the lead's budget stopped is not the shadow's own) */
        if (!X->budget.over) memo_record(X, goal, bound);
        X->sh.n = 0;
        X->sh.split = 0;
    }
    return best;
}

static int exact_dp_pass_run(exact_dp *X, int relaxed, xgoal goal, double bound, plan_exact_stats *st)
{
    X->run.goal = goal;
    X->run.relaxed = relaxed;
    X->run.bound = bound;
    int by_depth = !relaxed && X->tab.dep != PLAN_MEM_FLAT;
    X->run.track_u = by_depth && X->tab.monotone;
    X->run.u_fronts = (by_depth && !X->tab.monotone) || X->dev_fixed > 0;
    /* (tests may force the rule either way: plan_exact_opts.c_first) */
    X->run.c_first = goal == GOAL_COMM && (X->c_first_rule ? X->c_first_rule > 0 : exact_dp_free_at(X, bound));
    X->run.need_coef = bound < HUGE_VAL ? X->I->m / (X->pos.spd_top * bound) * (1 - PLAN_BOUND_SLACK) : 0;
    if (X->sh.n) exact_dp_shadows_pass(X, bound);
    if (st) st->passes++;
    if (st && X->run.c_first) st->c_first_passes++;
    return exact_dp_run_pass(X);
}

/* Can any layout of zb-h1 on exactly F = X->dev_fixed devices fit?  On
 * every stage of r replicas, at any depth D, zb-h1 keeps min(ceil(D / r) +
 * ceil((F - D) / r), ceil(m / r)) >= ceil(min(F, m) / r) microbatches in
 * flight (a sum of ceilings is at least the ceiling of the sum; test
 * sim_closed), which is GPipe's count with min(F, m) microbatches and no
 * depth changes; its versions are GPipe's (one).  So where no layout fits
 * under that GPipe's memory (one feasibility pass whose fronts hold spans
 * only, with no fixed device count: a superset of zb-h1's layouts on F),
 * none of zb-h1's does: a pass far cheaper than zb-h1's own, whose fronts
 * keep the devices below as well as the span, one front per device count
 * (GPT-3's tensor and recomputation question: its 105 zb-h1 searches where
 * nothing fits took 11.0 of its 42.3 million steps, 1.3 million with this
 * check).  0: none fits; the pass's steps are the search's. */
static int zbh1_may_fit(exact_dp *X)
{
    plan_inst g = *X->I;
    g.sched = SCHED_GPIPE;
    if (X->dev_fixed < g.m) g.m = X->dev_fixed;
    plan_exact_opts go = {.p_fixed = X->p_fixed, .budget = X->budget.limit};
    plan_exact_stats gs = {0};
    cl_err ge = {0};
    exact_dp Y;
    if (exact_dp_setup(&Y, &g, X->L, &go, &gs, &ge)) return 1; /* (cannot tell) */
    int fits = exact_dp_pass(&Y, 0, GOAL_FITS, HUGE_VAL, &gs) >= 0 || Y.budget.over;
    exact_dp_teardown(&Y, &gs);
    X->budget.steps += gs.steps;
    if (X->budget.steps > X->budget.limit) X->budget.over = 1;
    return fits;
}

/* Does any layout fit in memory (with this relaxation)?  Cheap: with no
 * times to compare, fronts keep only span and devices.  A witness first:
 * the whole model as one stage on one device is a layout whenever the
 * stage, device and replica counts are free (or 1), and any position can hold it
 * (positions mode reaches each through gaps; the other modes have one
 * kind of device). */
static int feasible(exact_dp *X, int relaxed, plan_exact_stats *st)
{
    const plan_lattice *L = X->L;
    int all = L->n_sets - 1;
    if (X->p_fixed <= 1 && X->dev_fixed <= 1 && X->I->rep_fixed <= 1 && all > 0) {
        int keep = X->run.relaxed;
        X->run.relaxed = relaxed;
        xstage g;
        stage_sums(X, &g, L->params[all], L->stash[all], L->cut[0], L->cut[all]);
        double mem = mem_of(X, &g, 1, 1);
        X->run.relaxed = keep;
        if (mem <= X->tab.cap_top) return 1;
    }
    if (!relaxed && X->I->sched == SCHED_ZBH1 && X->dev_fixed > 0 && !zbh1_may_fit(X)) return 0;
    return exact_dp_pass(X, relaxed, GOAL_FITS, HUGE_VAL, st) >= 0;
}

/* A bottleneck no layout beats: the work spread perfectly over every
 * device, and the heaviest layer on its best replica count. */
static double global_lower(const exact_dp *X)
{
    const plan_inst *I = X->I;
    const plan_lattice *L = X->L;
    double spd_sum = 0;
    for (int d = 0; d < X->pos.N; d++) spd_sum += I->speed[d];
    double lb = I->m * L->work[L->n_sets - 1] / spd_sum;
    int rmax = I->m < I->max_replicas ? I->m : I->max_replicas;
    if (rmax > X->pos.N) rmax = X->pos.N;
    int qmin = (I->m + rmax - 1) / rmax;
    for (int i = 0; i < I->n; i++)
        lb = fmax(lb, qmin * (plan_inst_work(I, i) / X->pos.spd_top));
    return lb * (1 - PLAN_BOUND_SLACK);
}

/* A bottleneck every layout stays under: all the work on the slowest
 * device, the largest all-reduce, the largest boundary. */
static double global_upper(const exact_dp *X)
{
    const plan_inst *I = X->I;
    const plan_lattice *L = X->L;
    double spd_min = HUGE_VAL, cut_max = 0;
    for (int d = 0; d < X->pos.N; d++) spd_min = fmin(spd_min, I->speed[d]);
    for (int t = 0; t < L->n_sets; t++) cut_max = fmax(cut_max, L->cut[t]);
    int r = I->m < I->max_replicas ? I->m : I->max_replicas;
    if (r > X->pos.N) r = X->pos.N;
    double P = L->params[L->n_sets - 1];
    double ar = fmax(plan_allreduce_s(I, P, r, CLUSTER_INTRA), plan_allreduce_s(I, P, r, CLUSTER_INTER));
    double bnd = fmax(plan_boundary_s(I, cut_max, CLUSTER_INTRA), plan_boundary_s(I, cut_max, CLUSTER_INTER));
    return fmax(I->m * (L->work[L->n_sets - 1] / spd_min) + ar, bnd) * (1 + PLAN_BOUND_SLACK);
}

/* Growth of the guesses: failed passes below the optimum cost more the
 * closer they get, the successful one more the looser it is; 1.15 was the
 * best of 1.05, 1.15 and 1.3 on `cleave bench plan`'s chains and on
 * resnet50 over 32 devices.  A climb that keeps missing is one whose
 * schedule's memory binds far above the least-memory bound it starts from
 * (fbp at 256 microbatches on GPT-3's 256 groups of 4: from 15.9 to 116 s,
 * 15 misses of up to 1.3 million steps each), so after 4 misses the
 * guesses grow by 1.3 and after 8 they double: on GPT-3 over every
 * schedule (`--tensor auto --recompute auto`) 70.7 -> 56.0 million steps,
 * the same plan; the PipeDream and synthetic questions of `cleave bench
 * plan`, whose climbs end within 4 misses, within 1% either way.  The fine
 * climb (plan_exact_opts.fine_climb, every search of plan_search) first
 * grows a miss by 2%, then 5%: an optimum often lies just above a miss
 * (one more replica round on the slowest stage), and a pass 15% above it
 * costs many times one near it (10,000 layers on 64 devices, fbp at 4
 * microbatches: a miss 0.011% below the optimum, then 691 million steps at
 * +15% against 40 million at +2%; the whole question 1.90 -> 0.60 billion
 * steps, bench plan's other chains and PipeDream questions the same
 * steps but 300 x 64, +11%). */
#define GROW 1.15
static double grow(int misses, int fine)
{
    if (fine && misses <= 2) return misses == 1 ? 1.02 : 1.05;
    return misses < 4 ? GROW : misses < 8 ? 1.3 : 2;
}
/* A pass under bound g is exact whenever the optimum is <= g, and far
 * cheaper than one under a loose bound, because partial layouts that cannot
 * finish within g on the devices left are cut early (need_coef).  Guesses
 * grow from a lower bound until they pass the caller's bound or one every
 * layout meets. */
int exact_dp_climb(exact_dp *X, int relaxed, double upper, double hint, double known_lb,
              plan_exact_stats *st)
{
    double lb = fmax(global_lower(X), known_lb), U = fmin(upper, global_upper(X));
    if (hint > lb && hint < U) {
        /* a good guess ends the climb at once; a miss still proves the
         * optimum is above it */
        int b = exact_dp_pass(X, relaxed, GOAL_BOTTLENECK, hint, st);
        if (X->budget.over || b >= 0) return b;
        lb = hint;
    }
    double g = lb;
    for (int k = 0; lb > 0 && k < 200; k++) {
        /* (fine: 2% and 5% first; the optimum is often just above a miss,
         * and a pass under a loose guess costs many times one near it) */
        g = k == 0 ? lb * 1.02 : g * grow(k, X->fine_climb);
        /* a guess within 5% of U (a bound some layout meets: often
         * partition-and-merge's, the optimum itself) costs about what the
         * pass at U does, and a miss there would be followed by that pass:
         * take U at once (1,000 layers on 256 devices: 141 -> 127 million
         * steps; the PipeDream questions unchanged; bench plan's other
         * chains 7 to 9% fewer) */
        if (!(g * 1.05 < U)) break;
        int b = exact_dp_pass(X, relaxed, GOAL_BOTTLENECK, g, st);
        if (X->budget.over || b >= 0) return b;
        /* after a few misses, check that anything fits at all, so that an
         * instance where nothing does is not climbed all the way up: after
         * three (six until 2026-11-29: GPT-3's tensor and recomputation
         * question spent 14 of its 56 million steps in the misses of
         * climbs where nothing fits, 42.3 million in all after three; the
         * PipeDream and synthetic questions of bench plan within 0.4%); a
         * fine climb's first misses sit closer together, so it checks after
         * four (after three, 300 layers on 64 devices took 2.49 million
         * steps instead of 2.02, checking where the climb was about to take
         * partition-and-merge's bound; after five, GPT-3's question 12.4
         * million instead of 11.4) */
        if (k == (X->fine_climb ? 3 : 2) && !feasible(X, relaxed, st)) return -1;
    }
    return exact_dp_pass(X, relaxed, GOAL_BOTTLENECK, U, st);
}

/* A feasibility pass costs the more the looser its bound, as pass 1 does:
 * where the least bottleneck lies far below g, a pass under a guess near
 * it answers for g.  So up to three guesses grow as a fine climb's from
 * `from` (2%, then 5%), then g; one within 5% of g is g, as in the climb.
 * 10,000 layers on 64 devices, fbp and pipedream at 4 microbatches under
 * the best iteration 0.116 s: one pass there took 150 million steps each;
 * from 2% above the count's least-memory bound, a miss at 0.0961 s (10
 * million) and a layout at 0.0980 s (25 million).  Where nothing lies
 * within g the guesses below it are extra (GPT-3's question: 0.48 million
 * steps more, 4%, over 1,400 such checks); guesses all the way up, as a
 * climb's, cost twice that. */
int exact_dp_below(exact_dp *X, double from, double g, plan_exact_stats *st)
{
    double h = from > 0 && from < g ? from : g;
    for (int k = 1;; k++) {
        int b = exact_dp_pass(X, 0, GOAL_BELOW, h, st);
        if (X->budget.over || b >= 0 || !(h < g)) return b;
        h = k < 3 ? h * grow(k, 1) : g;
        if (!(h * 1.05 < g)) h = g;
    }
}
