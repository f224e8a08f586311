/* exact.c - the exact partition search's entry points (see exact.h and
 * docs/planner.md); the search itself is spread over the exact_*.c files
 * by pass (exact_dp.h).
 *
 * Two passes.  Pass 1 finds the optimal bottleneck B* (key = bottleneck).
 * Pass 2 keeps only transitions within B* and minimises (communication,
 * -headroom, devices) lexicographically, which every extension preserves.
 * When the schedule's memory depends on a stage's place in the pipeline,
 * pass 1 first runs with each stage's least possible memory (a relaxation,
 * so B_lo <= B*); if pass 2 at B_lo finds a layout that fits, B* = B_lo,
 * otherwise both passes run again with exact memory.  A caller's lower
 * bound (o->lower_s) is tried first by pass 2 alone: reaching it proves
 * optimality.  The layout is then rebuilt from the best final entry.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/schedule.h"
#include "base/budget.h"
#include "exact_dp.h"

/* Why a search stopped early: the command's wall-clock budget (budget.h),
 * or the search's own step budget.  Returns PLAN_EXACT_GAVE_UP. */
static plan_exact_result over_fail(const exact_dp *X, cl_err *e)
{
    if (cl_budget_over()) cl_budget_fail(e, "searching partitions", "--algo merge for large models");
    else
        cl_fail(e, CL_ERUN, "exact search stopped after %lld steps and %lld stage sets tried (its budget: %lld)",
                (long long)X->budget.steps, (long long)X->budget.tries, (long long)X->budget.limit);
    return PLAN_EXACT_GAVE_UP;
}

/* A pass known to find nothing, not run: its steps counted as if it were
 * (fewer.c budgets the searches on fewer devices by the steps), and the
 * step budget checked as the pass would. */
static void skip_pass(exact_dp *X, int64_t steps, plan_exact_stats *st)
{
    X->budget.steps += steps;
    if (X->budget.steps > X->budget.limit) X->budget.over = 1;
    if (st) {
        st->passes++;
        st->skipped++;
    }
}

/* The layout of final entry id: its stages, last to first along the
 * parents, stored first to last (plan_layout_free). */
void exact_dp_rebuild(const exact_dp *X, int id, plan_layout *out)
{
    const dp_entry *ent = X->store.ent;
    int p = 0;
    for (int i = id; i >= 0; i = ent[i].parent)
        if (ent[i].edge == EDGE_STAGE) p++;
    plan_layout_alloc(out, p);
    int s = 0;
    out->cut[0] = 0;
    for (int i = id; i >= 0; i = ent[i].parent) {
        const dp_entry *v = &ent[i];
        if (v->edge != EDGE_STAGE) continue;
        out->pos[s] = X->pos.N - v->d;
        out->r[s] = v->r;
        out->cut[s + 1] = v->from;
        s++;
    }
    assert(s == p && out->cut[p] == X->L->n_sets - 1);
}

plan_exact_result plan_exact_lower(const plan_inst *I, const plan_lattice *L,
                                   const plan_exact_opts *o, double *lb, plan_exact_stats *st,
                                   cl_err *e)
{
    exact_dp X;
    *lb = HUGE_VAL;
    if (exact_dp_setup(&X, I, L, o, st, e)) return PLAN_EXACT_GAVE_UP;
    /* o->lower_s: known to be below the optimum, the climb starts there */
    double known = o && o->lower_s > 0 && o->lower_s < HUGE_VAL ? o->lower_s : 0;
    int best = exact_dp_climb(&X, 2, o ? o->upper_s : HUGE_VAL, o ? o->hint_s : 0, known, st);
    int over = X.budget.over;
    if (!over && best >= 0) *lb = X.store.ent[best].B;
    exact_dp_teardown(&X, st);
    if (over) return over_fail(&X, e);
    return best >= 0 ? PLAN_EXACT_FOUND : PLAN_EXACT_NONE_FITS;
}

plan_exact_result plan_exact(const plan_inst *I, const plan_lattice *L, const plan_exact_opts *o,
                             plan_layout *out, plan_exact_stats *st, cl_err *e)
{
    return plan_exact_shadowed(I, L, o, 0, NULL, out, NULL, st, e);
}

plan_exact_result plan_exact_shadowed(const plan_inst *I, const plan_lattice *L,
                                      const plan_exact_opts *o, int n_sh, const sched_kind *sh,
                                      plan_layout *out, int *sh_ok, plan_exact_stats *st,
                                      cl_err *e)
{
    assert(n_sh >= 0 && n_sh <= PLAN_EXACT_SHADOWS);
    for (int j = 0; j <= n_sh; j++) memset(&out[j], 0, sizeof out[j]);
    for (int j = 0; j < n_sh; j++) sh_ok[j] = 0;
    exact_dp X;
    if (exact_dp_setup(&X, I, L, o, st, e)) return PLAN_EXACT_GAVE_UP;
    int dep = X.tab.dep;
    assert(dep != PLAN_MEM_BY_TOTAL || X.dev_fixed > 0); /* the caller fixes the devices */
    double upper = o ? o->upper_s : HUGE_VAL;
    int best = -1;
    /* pass 2 at a bound where it found nothing (and its lead's own steps):
     * a repeat finds nothing again, at the same cost */
    double fail_bound = NAN;
    int64_t fail_lead = 0;
    /* a known lower bound first: reaching it proves optimality */
    int sh_set = 0; /* shadow tables made (for sh[0..n_sh)) */
    X.memo_in = o ? o->memo_in : NULL;
    if (o && o->lower_s > 0 && o->lower_s < HUGE_VAL && o->lower_s <= upper) {
        int ok_sh = n_sh > 0 && !X.dev_fixed && exact_dp_shadows_setup(&X, n_sh, sh);
        sh_set = ok_sh;
        int64_t s0 = X.budget.steps;
        X.sh.lead_own = 0;
        if (o->lower_failed > 0 && !o->no_skip) {
            /* the caller's own search found nothing here (probe): the same
             * pass again would too */
            skip_pass(&X, o->lower_failed, st);
            X.sh.lead_own = o->lower_failed_lead;
            ok_sh = 0;
        } else {
            best = exact_dp_pass(&X, 0, GOAL_COMM, o->lower_s, st);
        }
        if (best < 0 && !X.budget.over) {
            fail_bound = o->lower_s;
            fail_lead = ok_sh || (o->lower_failed > 0 && !o->no_skip) ? X.sh.lead_own : X.budget.steps - s0;
            if (st) {
                st->lower_fail = X.budget.steps - s0;
                st->lower_fail_lead = fail_lead;
            }
        }
        /* (a shadow over its own step budget: its own search gave up) */
        for (int j = 0; ok_sh && j < n_sh; j++)
            if (best >= 0 && !X.budget.over && X.sh.best[j] >= 0 && X.sh.steps[j] <= X.budget.limit) {
                exact_dp_rebuild(&X, X.sh.best[j], &out[1 + j]);
                sh_ok[j] = 1;
                if (st) st->sh_steps[j] = X.sh.steps[j];
            }
        for (int j = 0; ok_sh && j < n_sh; j++)
            if (st && !X.budget.over && X.sh.best[j] < 0 && !(X.sh.lead_mask & (1 << j)))
                st->sh_fail[j] = X.sh.steps[j];
        X.sh.n = 0;
        X.sh.split = 0;
        if (best < 0 && !X.budget.over && o->probe) {
            exact_dp_teardown(&X, st);
            return PLAN_EXACT_ABOVE_LOWER;
        }
    }
    /* from here, memo_sched rides along every exact pass (exact_climb.c,
     * exact_dp_pass): its tables are shadow 0's, made above when it was the
     * only shadow there, else now when there was none; only where its
     * memory can bind (its steps are its own, sh.steps) */
    if (o && o->memo_out && !X.dev_fixed && !X.p_fixed && !X.budget.over) {
        int ok = n_sh == 1 && sh[0] == o->memo_sched ? sh_set : n_sh == 0 && exact_dp_shadows_setup(&X, 1, &o->memo_sched);
        X.sh.n = 0;
        if (ok && X.sh.lead_mask == LEAD_BIT) {
            X.memo_out = o->memo_out;
            X.memo_on = 1;
            X.memo_split = 1; /* (lead_mask without the shadow: split) */
            X.memo_lead_mask = LEAD_BIT;
        }
        X.sh.split = 0;
    }
    /* pass 1 with this schedule's least memory when its memory depends on
     * the stage's place (a relaxation), then pass 2 at that bottleneck; if
     * nothing fits there, both passes again with exact memory */
    int relax = dep != PLAN_MEM_FLAT && X.tab.monotone && !X.p_fixed && !X.dev_fixed;
    for (int round = 0; round < 2 && best < 0 && !X.budget.over; round++) {
        int relaxed = round == 0 && relax;
        if (round == 1 && !relax) break;
        /* o->lower_s bounds this optimum from below (a relaxation of it):
         * the climb starts there */
        double known = o && o->lower_s > 0 && o->lower_s < HUGE_VAL ? o->lower_s : 0;
        int b1 = exact_dp_climb(&X, relaxed, upper, o ? o->hint_s : 0, known, st);
        if (X.budget.over || b1 < 0) break; /* over budget, or nothing fits */
        if (X.store.ent[b1].B == fail_bound && !(o && o->no_skip)) skip_pass(&X, fail_lead, st); /* (best stays -1) */
        else best = exact_dp_pass(&X, 0, GOAL_COMM, X.store.ent[b1].B, st);
    }
    int over = X.budget.over;
    if (!over && best >= 0 && X.memo_y) plan_layout_copy(out, X.memo_y); /* (answered by memo_in) */
    else if (!over && best >= 0) exact_dp_rebuild(&X, best, out);
    exact_dp_teardown(&X, st);
    if (over) return over_fail(&X, e);
    return best >= 0 ? PLAN_EXACT_FOUND : PLAN_EXACT_NONE_FITS;
}
int plan_exact_mem_free(const plan_inst *I, const plan_lattice *L)
{
    dp_mem_most w;
    if (!exact_dp_mem_most(I, L, &w)) return 0;
    int all = L->n_sets - 1;
    return exact_dp_mem_most_fits(I, &w, L->params[all], L->stash[all]);
}

plan_exact_result plan_exact_any_below(const plan_inst *I, const plan_lattice *L,
                                       const plan_exact_opts *o, double g, plan_exact_stats *st,
                                       cl_err *e)
{
    exact_dp X;
    if (exact_dp_setup(&X, I, L, o, st, e)) return PLAN_EXACT_GAVE_UP;
    int b = exact_dp_pass(&X, 2, GOAL_BELOW, nextafter(g, 0), st);
    int over = X.budget.over;
    exact_dp_teardown(&X, st);
    if (over) return over_fail(&X, e);
    return b >= 0 ? PLAN_EXACT_FOUND : PLAN_EXACT_NONE_FITS;
}

plan_exact_result plan_exact_fits_within(const plan_inst *I, const plan_lattice *L,
                                         const plan_exact_opts *o, double from, double g,
                                         plan_exact_stats *st, cl_err *e)
{
    exact_dp X;
    if (exact_dp_setup(&X, I, L, o, st, e)) return PLAN_EXACT_GAVE_UP;
    assert(!X.dev_fixed); /* memory counted at each depth, not at a device total */
    int b = exact_dp_below(&X, from, g, st);
    int over = X.budget.over;
    exact_dp_teardown(&X, st);
    if (over) return over_fail(&X, e);
    return b >= 0 ? PLAN_EXACT_FOUND : PLAN_EXACT_NONE_FITS;
}

void plan_exact_memo_free(plan_exact_memo *m)
{
    for (int i = 0; i < m->n; i++)
        if (m->rec[i].y.p) plan_layout_free(&m->rec[i].y);
    m->n = 0;
}
