/* export.h - a plan's partition in the words of training frameworks
 * (docs/planner.md, "Exports").
 *
 *   torch      torch.distributed.pipelining split_spec: SplitPoint.BEGINNING
 *              at the first layer of every stage after the first, and the
 *              batch as the schedule and data parallelism take it
 *   deepspeed  ds_config.json: train_batch_size,
 *              train_micro_batch_size_per_gpu, gradient_accumulation_steps
 *   deepspeed-module
 *              a PipelineModule whose layers are the plan's stages, one
 *              nn.Sequential each, split by the public partition_method
 *              "uniform" (one layer per stage)
 *   megatron   --pipeline-model-parallel-layout for transformer models
 *              (E embedding, t transformer layer, L loss, stages split by |),
 *              and the same split with --decoder-first/last-pipeline-num-layers
 *              where older Megatron versions can express it
 *
 * Every export states the plan's run: global batch = the plan's batch, the
 * plan's microbatch size per device, and microbatches / replicas gradient
 * accumulation steps per data-parallel replica (microbatch i runs on
 * replica i mod r, docs/formats.md "Plan").
 *
 * Each target states what it cannot express, and the export refuses with a
 * message instead of writing something that silently differs: stages that
 * are not contiguous runs of layers, stages with different replica counts
 * (the frameworks replicate whole pipelines), microbatches that do not
 * divide evenly among the replicas, interleaving where a target has none,
 * and for Megatron a model that is not embedding + transformer layers + head.
 *
 * A schedule the target does not run (pipedream and fbp everywhere, gpipe
 * and zb-h1 outside torch) is exported as the synchronous run the target
 * has (plan_export_schedule), simulated, and the export's header says both
 * figures, so no export silently promises another run's figure.
 */
#ifndef CL_PLAN_EXPORT_H
#define CL_PLAN_EXPORT_H

#include "core/plan.h"

typedef enum plan_target {
    PLAN_TO_TORCH,
    PLAN_TO_DEEPSPEED,
    PLAN_TO_DEEPSPEED_MODULE,
    PLAN_TO_MEGATRON,
    PLAN_TO_COUNT
} plan_target;
/* "torch", "deepspeed", "deepspeed-module", "megatron"; -1 when unknown */
const char *plan_target_name(plan_target t);
int plan_target_from_name(const char *name);

/* Does target t run schedule k (the sequential kind, one stage, always)? */
int plan_target_runs(plan_target t, sched_kind k);

/* The target that runs plans made for framework f (torch, deepspeed,
 * megatron; f != PLAN_FOR_ANY). */
plan_target plan_for_target(plan_for f);

/* Does framework f run schedule k (plan_target_runs of its target)? */
int plan_for_runs(plan_for f, sched_kind k);
/* The schedules framework f runs, for hints: "1f1b or interleaved"
 * (static text). */
const char *plan_for_schedules(plan_for f);

/* Can target t take a plan of model m at all?  Only Megatron asks: an
 * embedding, transformer layers, then head or loss layers, which stay
 * together on the last stage.  CL_OK with *head the first head layer's
 * index (m->n_layers for the other targets: no layer is a head), or
 * CL_EINPUT with one line naming `file`. */
int plan_target_model(const model *m, plan_target t, const char *file, int *head, cl_err *e);

/* The schedule target t runs for p: p's own when t has it, else the
 * synchronous kind it falls back to (1f1b; interleaved keeps its chunks). */
sched_kind plan_export_schedule(const plan *p, plan_target t);

/* The export text (caller frees), or CL_EINPUT with one line saying why the
 * target cannot take this plan.  `file` names the plan in messages.  When
 * the target does not run p's schedule, p is simulated under
 * plan_export_schedule (sim_predict) and the header gives that run's figure
 * next to the plan's. */
int plan_export(const plan *p, plan_target t, const char *file, char **text, cl_err *e);

#endif
