/* export.h - a plan's partition in the words of training frameworks
 * (docs/planner.md, "Exports").
 *
 *   torch      torch.distributed.pipelining split_spec: SplitPoint.BEGINNING
 *              at the first layer of every stage after the first
 *   deepspeed  the layer boundaries PipelineModule keeps in `parts`
 *              (stage s owns layers parts[s] .. parts[s+1] - 1)
 *   megatron   --pipeline-model-parallel-layout for transformer models
 *              (E embedding, t transformer layer, L loss, stages split by |)
 *
 * Each target states what it cannot express, and the export refuses with a
 * message instead of writing something that silently differs: stages that
 * are not contiguous runs of layers, stages with different replica counts
 * (the frameworks replicate whole pipelines), interleaving where a target
 * has none, and for Megatron a model that is not embedding + transformer
 * layers + head.
 */
#ifndef CL_PLAN_EXPORT_H
#define CL_PLAN_EXPORT_H

#include "plan.h"

typedef enum plan_target { PLAN_TO_TORCH, PLAN_TO_DEEPSPEED, PLAN_TO_MEGATRON, PLAN_TO_COUNT } plan_target;
/* "torch", "deepspeed", "megatron"; -1 when unknown */
const char *plan_target_name(plan_target t);
int plan_target_from_name(const char *name);

/* The export text (caller frees), or CL_EINPUT with one line saying why the
 * target cannot take this plan.  `file` names the plan in messages. */
int plan_export(const plan *p, plan_target t, const char *file, char **text, cl_err *e);

#endif
