/* merge.h - the method's layer-wise partition and merge (docs/planner.md,
 * "Partition and merge").
 *
 * Start with one partition per layer; repeatedly merge the adjacent pair
 * whose merged cost (compute plus the communication at its two outer
 * boundaries: the boundary between them disappears) is the smallest, which
 * raises the slowest partition the least; among equal costs merge across
 * the boundary with the most activation bytes, so cuts stay where
 * activations are small.  A binary heap makes the whole merge sequence
 * O(L log L); the partition into p stages is the state after L - p merges.
 * Then spare devices go, one replica group at a time, to the slowest stage
 * (while that shortens it), and stages are mapped to device blocks so the
 * boundaries crossing nodes carry the fewest bytes.
 */
#ifndef CL_PLAN_MERGE_H
#define CL_PLAN_MERGE_H

#include "cost.h"

typedef struct plan_merge_stats {
    int counts_tried;       /* stage counts evaluated                        */
    int best_p;
} plan_merge_stats;

/* Over the stage counts tried (p_fixed alone when > 0, else 1 .. min(L,
 * devices), thinned geometrically above 64), build the merge layout and keep
 * the best by plan_eval_cmp.  L must be the prefix lattice of I.  Returns 1
 * with *out (plan_layout_free) when some layout fits in memory, 0 when none
 * does (*out then holds the best infeasible one, for diagnosis). */
int plan_merge(const plan_inst *I, const plan_lattice *L, int p_fixed, plan_layout *out,
               plan_merge_stats *st);

#endif
