/* layout.h - one configuration given by the user, evaluated without search
 * (`cleave plan --layout`, `cleave sim --layout`, `cleave bench fidelity`;
 * issue 15 item 6; docs/planner.md, "Evaluating a given layout").
 *
 * A layout names the Megatron-LM degrees and settings of a run:
 *
 *   t=8,p=16,d=8,mb=1,m=96,sched=interleaved,v=2,recompute=full,zero=1,sp=1
 *
 * t tensor-parallel GPUs per group (inside a node), cp context-parallel
 * groups sharing each sequence (cp=C; models/tfm_rank.h), p pipeline stages, d
 * data-parallel replicas, mb sequences per microbatch, m microbatches per
 * data-parallel replica and iteration (Megatron's number of microbatches:
 * the batch is mb x m x d), the schedule (a kind of core/plan.h) with v
 * model chunks per device for interleaved, the recomputation mode, the ZeRO
 * stage and sequence parallelism.  split=a/b/c gives the layers of each
 * pipeline chunk instead of Megatron's even split.
 *
 * The configuration is priced by the planner's own machinery: the per-rank
 * question of planner/tensor.h, the instance and the stage prices of
 * cost.h, and plan_predict refined by the simulator (predict.h), exactly as
 * the search prices the candidate with the same stages, so a layout equal
 * to the search's choice gets the search's figure to the bit.
 */
#ifndef CL_PLAN_LAYOUT_H
#define CL_PLAN_LAYOUT_H

#include "planner/search.h"

/* Most chunks split= may list. */
#define PLAN_FIXED_MAX_SPLIT 1024

typedef struct plan_fixed {
    int t, p, d;            /* degrees; 0: not given (t, p: 1; d: the rest)  */
    int c;                  /* context-parallel degree (key cp); 0: 1         */
    int mb, m;              /* microbatch size, microbatches per replica;
                               0: not given (from the batch; mb 1)          */
    int sched;              /* a sched_kind; -1: 1f1b, interleaved with v > 1 */
    int v;                  /* chunks per device; 0: 1 (2 for interleaved)   */
    int recompute;          /* a tfm_recomp; -1: none                        */
    int zero;               /* ZeRO stage; -1: the request's                 */
    int sp;                 /* sequence parallelism 0/1; -1: off             */
    int attn;               /* a prof_attn (not a key: `--attention`)         */
    int n_split;            /* split=: layers per chunk, 0: even            */
    int split[PLAN_FIXED_MAX_SPLIT];
} plan_fixed;

/* Parse text ("t=8,p=16,...") into *fx.  `what` names it in messages
 * ("--layout", "runs.csv:12").  CL_EINPUT with one line and a hint. */
int plan_fixed_parse(const char *text, const char *what, plan_fixed *fx, cl_err *e);

/* The canonical text of fx ("t=8,p=16,d=8,mb=1,m=96,sched=1f1b,..."),
 * listing what was given or resolved (fields at their "not given" value
 * are left out). */
void plan_fixed_str(const plan_fixed *fx, char *buf, size_t cap);

/* Evaluate fx on the request rq: rq->model is the whole model (with its
 * transformer member when t > 1, sequence parallelism or recomputation
 * re-price it), rq->cluster its GPUs, rq->prof NULL to derive the costs
 * for rq->ref_type (required then), rq->batch 0 or the batch the layout
 * must match; optimizer, precision, zero, comm and the origins as for
 * plan_search.  The layout's degrees must multiply to the GPU count
 * (t x cp x p x d).  With context parallelism the plan is the per-rank
 * question of s/c tokens per sample: its stages hold d x c replicas (the
 * data-parallel group of Megatron-core, which reduces gradients and shards
 * ZeRO over d x cp ranks) and its batch counts c samples per sequence.
 *
 * CL_OK and *res (plan_result_free releases it; res->plan.tensor,
 * seq_par, recompute and context set, res->algo "layout") when it can be priced;
 * nofit then holds "" or, when a device's memory overflows, one line
 * "does not fit: stage 3 (layers ...) needs 92.10 GiB per GPU, usable
 * 75.00 GiB, over by 17.10 GiB".  CL_EINPUT with one line naming `what`
 * and a hint for a layout that is not a run (degrees, batch, schedule,
 * a t beyond a node, p beyond the layers). */
int plan_fixed_eval(const plan_request *rq, const plan_fixed *fx, const char *what, plan_result *res,
                    char *nofit, size_t nofit_cap, cl_err *e);

#endif
