/* exact.h - optimal partitions by dynamic programming (docs/planner.md,
 * "Exact search").
 *
 * Over every layout the cost model allows (stage sets from the lattice, any
 * stage count, replicas per stage up to the instance's limit and m, blocks
 * in pipeline order with gaps, each inside a node or whole nodes), find the
 * one that minimises, lexicographically: the bottleneck, the total
 * communication, minus the smallest memory headroom, the devices used.
 * Infeasible layouts (memory) are never returned.
 *
 * Sources: exact.c (these entry points), exact_climb.c (which passes run),
 * exact_pass.c (one pass), exact_front.h (the Pareto fronts),
 * exact_shadow.c (shadow schedules), exact_setup.c (positions and tables);
 * exact_dp.h describes the search and its state.
 */
#ifndef CL_PLAN_EXACT_H
#define CL_PLAN_EXACT_H

#include <stdint.h>

#include "cost.h"

#define PLAN_EXACT_SHADOWS 3

/* What a search concluded.  Every caller names the outcome it tests. */
typedef enum plan_exact_result {
    PLAN_EXACT_FOUND,       /* the answer is there: a layout, a bound       */
    PLAN_EXACT_NONE_FITS,   /* no layout fits in memory within o->upper_s    */
    PLAN_EXACT_ABOVE_LOWER, /* o->probe: no layout at o->lower_s, so the
                               optimum lies above it; nothing returned     */
    PLAN_EXACT_GAVE_UP      /* over the step budget or the command's time
                               budget, or too many positions: e says which;
                               the caller must say what it does instead    */
} plan_exact_result;

/* A pass a schedule's own search would run, run instead alongside another
 * schedule's search with it riding along as a shadow (plan_exact_opts.
 * memo_out): the pass (pass 1, least bottleneck, or pass 2, the layout, at
 * `bound`, exact memory), what that schedule's own run of it finds, and its
 * own steps in it.  Its own search then counts the steps and takes the
 * answer instead of running the pass (memo_in). */
typedef struct plan_exact_rec {
    int comm;               /* 0: pass 1; 1: pass 2                          */
    double bound;
    int found;
    double B;               /* pass 1: the least bottleneck found            */
    plan_layout y;          /* pass 2: the layout found (owned)              */
    int64_t steps;
} plan_exact_rec;

#define PLAN_EXACT_RECS 24

typedef struct plan_exact_memo {
    int n;
    plan_exact_rec rec[PLAN_EXACT_RECS];
} plan_exact_memo;

void plan_exact_memo_free(plan_exact_memo *m);

typedef struct plan_exact_opts {
    int p_fixed;            /* 0: any stage count; else exactly this many   */
    int devices_fixed;      /* 0: any; else exactly this many devices (needed
                               when memory depends on the pipeline's device
                               count: plan_mem_dependence BY_TOTAL)         */
    double upper_s;         /* a bottleneck some feasible layout reaches
                               (prunes the search); HUGE_VAL when unknown    */
    int64_t budget;         /* inner steps before giving up; 0 = default    */
    double hint_s;          /* > 0: a guess of the optimal bottleneck (from a
                               similar instance) tried first; any value is
                               safe, a close one saves passes              */
    double lower_s;         /* > 0: a bottleneck no layout beats (from
                               plan_exact_lower); plan_exact first tries to
                               reach it, which is cheap when it can;
                               plan_exact_lower starts its search there    */
    int probe;              /* plan_exact only: when the pass at lower_s finds
                               nothing, return PLAN_EXACT_ABOVE_LOWER at once
                               (the caller then learns a better lower bound) */
    int64_t lower_failed;   /* > 0: plan_exact_shadowed's pass at lower_s is
                               known to find nothing (this instance, schedule
                               and shadows found nothing there before:
                               plan_exact_stats.lower_fail): it is not run
                               again, its steps (this) counted as if it were */
    int64_t lower_failed_lead; /* with it: that pass's steps of the lead alone */
    int no_skip;            /* tests only: run such passes (lower_failed, and
                               pass 2 at a bound where it found nothing in
                               this search) instead of counting them        */
    int fine_climb;         /* the climb's guesses after a miss grow by 2%,
                               then 5%, before the usual 15% (exact_climb.c):
                               the same layout, found in fewer steps where the
                               optimum lies just above a missed guess, more
                               where it lies far above (count.c: every
                               search of plan_search)                       */
    /* plan_exact_shadowed only, with no device or stage count fixed:
     * memo_out (with memo_sched): past its pass at lower_s, every exact
     * pass of this search (its climbs with exact memory and pass 2) carries
     * schedule memo_sched as a shadow and records what that schedule's own
     * run of the pass finds (when memo_sched is this call's only shadow at
     * lower_s, or it has none); memo_in: this search's own exact passes
     * take a recorded answer and steps there instead of running */
    plan_exact_memo *memo_out;
    sched_kind memo_sched;
    const plan_exact_memo *memo_in;
    int positions;          /* tests only: price every position on its own
                               (the classes of mixed devices and uneven
                               nodes) where equal nodes would take K      */
    int c_first;            /* tests only: 0 (the search's rule), or 1 always
                               and -1 never let pass 2's strictly smaller
                               communication dominate regardless of the
                               devices below (docs/planner.md, "Exact search":
                               valid only where no stage can overflow) */
} plan_exact_opts;

typedef struct plan_exact_stats {
    int64_t entries;        /* DP entries created                           */
    int64_t steps;          /* inner steps (transitions priced)             */
    int passes;             /* DP passes run (2 or 4)                       */
    int classes;            /* position classes per set                    */
    int c_first_passes;     /* passes 2 where communication came first
                               (no stage could overflow a device)         */
    const char *mode;       /* "flat", "periodic" or "positions"            */
    int skipped;            /* passes known to find nothing, not run          */
    int answered;           /* passes answered by plan_exact_opts.memo_in     */
    int tabs_kept;          /* the lead's memory-count tables were the
                               instance's, kept from an earlier search      */
    int64_t lower_fail, lower_fail_lead; /* plan_exact_shadowed: when its pass at
                               o->lower_s found nothing, that pass's steps
                               (as `steps` counts them) and the lead's alone;
                               else 0 (see plan_exact_opts.lower_failed)   */
    int64_t sh_fail[PLAN_EXACT_SHADOWS]; /* plan_exact_shadowed: > 0 when shadow
                               j's own pass at o->lower_s would find nothing
                               (whatever the lead found): its steps, which its
                               own search may take as lower_failed          */
    int64_t sh_steps[PLAN_EXACT_SHADOWS]; /* plan_exact_shadowed: the steps of
                               shadow j's own search (0 for a shadow whose
                               memory never binds with the lead's: its steps
                               are in `steps`, as they always were)         */
} plan_exact_stats;

/* PLAN_EXACT_FOUND fills *out (plan_layout_free) with an optimal layout;
 * any other outcome leaves *out empty (PLAN_EXACT_GAVE_UP with e).  st may
 * be NULL. */
plan_exact_result plan_exact(const plan_inst *I, const plan_lattice *L, const plan_exact_opts *o,
                             plan_layout *out, plan_exact_stats *st, cl_err *e);

/* Is there a layout whose bottleneck is strictly below g when every stage
 * needs only its least memory?  PLAN_EXACT_FOUND: there is;
 * PLAN_EXACT_NONE_FITS: there is none, which proves g <= the optimum of
 * plan_exact_lower, so g may serve as o->lower_s (probe first: a pass at g
 * that finds a layout also proves g is that optimum); or
 * PLAN_EXACT_GAVE_UP (e).  A feasibility pass: far cheaper than
 * plan_exact_lower. */
plan_exact_result plan_exact_any_below(const plan_inst *I, const plan_lattice *L,
                                       const plan_exact_opts *o, double g, plan_exact_stats *st,
                                       cl_err *e);

/* Is there a layout that fits in memory under I's own schedule (its exact
 * memory, not the least) whose bottleneck is at most g?  PLAN_EXACT_FOUND:
 * there is; PLAN_EXACT_NONE_FITS: every layout plan_exact could return (o's
 * stage count, no fixed device count) has a bottleneck above g; or
 * PLAN_EXACT_GAVE_UP (e).  Feasibility passes under guesses from `from` up
 * to g (from <= 0 or >= g: one pass at g), the first that finds a layout
 * ending it: cheap when g is tight, or the least bottleneck near `from`,
 * where the climb of plan_exact to an optimum far above g is not (count.c,
 * schedule_loses, runs it with boundaries left out). */
plan_exact_result plan_exact_fits_within(const plan_inst *I, const plan_lattice *L,
                                         const plan_exact_opts *o, double from, double g,
                                         plan_exact_stats *st, cl_err *e);

/* plan_exact for I and, alongside, for n_sh <= PLAN_EXACT_SHADOWS "shadow"
 * schedules sh[j] (I with sched = sh[j]): out[0] is plan_exact's result;
 * when sh_ok[j] is 1, out[1 + j] (plan_layout_free) is exactly the layout
 * plan_exact with the same options would return for sh[j]; the outcome is
 * plan_exact's for I.  The shadows follow the pass at o->lower_s, each with
 * its own memory (an entry is kept for it only where its stages fit), its
 * own headroom, its own prunes and its own dominance rule, marking which
 * entries its own run would keep (the pass keeps an entry while the lead's
 * or any shadow's own run would); one is ok when that pass found a layout
 * for the lead and for it, which is where its own search stops too.  The
 * caller guarantees what makes the runs otherwise identical: no
 * devices_fixed, and o->lower_s <= the upper_s the shadow's own run would
 * get.  A schedule whose memory is BY_TOTAL, or BY_DEPTH but not monotone,
 * is never ok (nor are shadows of such an I).  st->steps counts the lead's
 * own steps and, as it always did, those of the shadows whose memory never
 * binds with the lead's (plan_exact_mem_free of both); st->sh_steps[j] the
 * other shadows' own.  out has 1 + n_sh entries. */
plan_exact_result plan_exact_shadowed(const plan_inst *I, const plan_lattice *L,
                                      const plan_exact_opts *o, int n_sh, const sched_kind *sh,
                                      plan_layout *out, int *sh_ok, plan_exact_stats *st,
                                      cl_err *e);

/* 1 when no stage of any layout can overflow a device on this instance:
 * the whole model as one stage, with the most in-flight microbatches and
 * weight versions any depth and replica count gives and the largest cut
 * on both sides, fits the smallest device (depth = pipeline devices, so
 * for schedules whose memory is not BY_TOTAL).  Then memory enters the
 * exact search only through the headroom, which only breaks ties of
 * communication (see plan_exact_shadowed). */
int plan_exact_mem_free(const plan_inst *I, const plan_lattice *L);

/* The optimal bottleneck when every stage needs only its least memory (one
 * microbatch in flight, one weight version): a lower bound for every
 * schedule at this microbatch count, so one call serves them all (pass
 * o->lower_s = *lb to plan_exact).  PLAN_EXACT_FOUND with *lb;
 * PLAN_EXACT_NONE_FITS when nothing fits even so (within o->upper_s, which
 * here may be below the optimum), *lb = HUGE_VAL; or PLAN_EXACT_GAVE_UP (e
 * says why), *lb = HUGE_VAL. */
plan_exact_result plan_exact_lower(const plan_inst *I, const plan_lattice *L,
                                   const plan_exact_opts *o, double *lb, plan_exact_stats *st,
                                   cl_err *e);

#endif
