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

/* Step 2 (merge_pack.c): bisection on the bottleneck bound from `hi` (a
 * bottleneck reached, HUGE_VAL when none) down; kmax > 0 asks for exactly
 * that many stages.  Replaces *best (and *best_ev, *have = 1) with a
 * packing's layout whenever that evaluates better; does nothing when the
 * packing would need too many states. */
void plan_merge_pack(const plan_inst *I, const plan_lattice *L, int kmax, double hi,
                     plan_layout *best, plan_eval *best_ev, int *have);

#endif
