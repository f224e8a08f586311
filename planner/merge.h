/* merge.h - the method's layer-wise partition and merge (docs/planner.md,
 * "Partition and merge").
 *
 * 1. The merge sequence: start with one partition per layer; repeatedly
 *    merge the adjacent pair whose merged compute is the smallest, among
 *    equal costs across the boundary with the most activation bytes.  The
 *    state after L - p merges, with spare devices on the slowest stages and
 *    stages packed into nodes so that node boundaries carry few bytes, is a
 *    candidate for each stage count p; the best brackets step 2.
 * 2. Merging under a bound: for a bottleneck bound B, layers are merged
 *    into stages from the model's end, each stage taking as many layers as
 *    its time, boundary and memory allow within B, on the replica count and
 *    block (node rules) that leave the most devices; a bisection on B finds
 *    the smallest bound under which every layer fits the cluster.  Every
 *    price goes through cost.h, so what it accepts is what plan_layout_eval
 *    reports.
 */
#ifndef CL_PLAN_MERGE_H
#define CL_PLAN_MERGE_H

#include "cost.h"

typedef struct plan_merge_stats {
    int counts_tried;       /* stage counts evaluated                        */
    int best_p;
} plan_merge_stats;

/* The best by plan_eval_cmp of the merge sequence's layouts over the stage
 * counts tried (p_fixed alone when > 0, else 1 .. min(L, devices), thinned
 * geometrically above 32) and the bisection's (exactly p_fixed stages when
 * > 0).  L must be the prefix lattice of I.  Returns 1
 * with *out (plan_layout_free) when some layout fits in memory, 0 when none
 * does (*out then holds the best infeasible one, for diagnosis). */
int plan_merge(const plan_inst *I, const plan_lattice *L, int p_fixed, plan_layout *out,
               plan_merge_stats *st);

/* plan_merge for each schedule sched[j] (I with that schedule) at once,
 * into out[j] and ok[j] (its return); the same answers as n calls.  Where
 * no stage of any layout can overflow a device under any of them
 * (plan_exact_mem_free, and none is zb-h1, whose memory depends on the
 * device total), the method makes the same layouts for all (memory is
 * what tells the schedules apart), so it runs once and only the choice
 * among its layouts (plan_eval_cmp, whose headroom is each schedule's) is
 * made per schedule; otherwise one plan_merge per schedule. */
void plan_merge_multi(const plan_inst *I, const plan_lattice *L, int p_fixed, int n, const sched_kind *sched,
                      plan_layout *out, int *ok);

/* The best layout so far under each of n schedules (sched NULL: I's own,
 * n = 1): every layout the method makes is offered in turn
 * (merge_sel_offer) and kept under a schedule when plan_eval_cmp prefers it
 * to that schedule's best (the first of equals stays). */
typedef struct merge_sel {
    const plan_inst *I;
    const plan_lattice *L;
    int n;
    const sched_kind *sched;
    plan_layout *best;      /* n each */
    plan_eval *best_ev;
    int *have;
    /* tests (test_plan_merge.c): 1 runs the packings the bisection skips as
     * failures it already knows (merge_pack.c, pk_try), counting them in
     * rechecked and those that did not fail in recheck_wrong */
    int recheck;
    long rechecked, recheck_wrong;
} merge_sel;

/* Offer layout y (owned; freed here) to every schedule of S; returns y's
 * bottleneck. */
double merge_sel_offer(merge_sel *S, plan_layout *y);

/* Step 2 (merge_pack.c): bisection on the bottleneck bound from `hi` (a
 * bottleneck reached, HUGE_VAL when none) down; kmax > 0 asks for exactly
 * that many stages.  Offers every packing's layout to S; does nothing when
 * the packing would need too many states. */
void plan_merge_pack(const plan_inst *I, const plan_lattice *L, int kmax, double hi, merge_sel *S);

/* plan_merge_pack for the n schedules of S at once (I has S->sched[0];
 * each schedule's memory can bind, none is zb-h1, and they price
 * all-reduces alike and bring the same hi): one bisection whose packings
 * check memory under each schedule.  While every such check comes out the
 * same under all of them, so does every packing, and the offers to S are
 * the ones n calls of plan_merge_pack would make.  Returns 1 when that held
 * to the end; 0 when the schedules' checks differed somewhere (S has then
 * had some of the offers: the caller starts those schedules again from
 * before the call, one plan_merge_pack each). */
int plan_merge_pack_group(const plan_inst *I, const plan_lattice *L, int kmax, double hi, merge_sel *S);

#endif
