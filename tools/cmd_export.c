/* cmd_export.c - `cleave export PLAN --to TARGET [-o FILE]`: print (or write
 * atomically) a plan's partition and batch as a framework's settings
 * (planner/export.h).  When the target does not run the plan's schedule,
 * the plan is simulated under the schedule it does run, and the export
 * states that run's figure next to the plan's own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/export.h"
#include "models/tfm_rank.h"
#include "cli.h"
#include "base/fileio.h"

static int help(void)
{
    printf("usage: cleave export PLAN.json --to TARGET [-o FILE]\n\n"
           "Turns a plan's stages and batch into the settings a training framework takes:\n"
           "  torch             torch.distributed.pipelining split_spec (SplitPoint.BEGINNING),\n"
           "                    microbatches per pipeline, data-parallel degree, schedule class\n"
           "  deepspeed         ds_config.json: train_batch_size, train_micro_batch_size_per_gpu,\n"
           "                    gradient_accumulation_steps\n"
           "  deepspeed-module  a PipelineModule holding the plan's stages (partition_method uniform)\n"
           "  megatron          --pipeline-model-parallel-layout, and --decoder-first/last-pipeline-\n"
           "                    num-layers for older versions (transformer models), batch flags\n"
           "Every export states the plan's batch: global batch = microbatch x microbatches per\n"
           "replica x data-parallel degree.  A schedule the target does not run (pipedream, fbp;\n"
           "gpipe and zb-h1 outside torch) is exported as its 1f1b run, simulated, and the header\n"
           "gives both figures.  A target that cannot express the plan says why and writes nothing.\n");
    return 0;
}

typedef struct export_args {
    const char *out;
    int target;             /* plan_target, -1 until --to */
    cli_list args;          /* PLAN.json */
} export_args;

_Static_assert(PLAN_TO_TORCH == 0 && PLAN_TO_DEEPSPEED == 1 && PLAN_TO_DEEPSPEED_MODULE == 2 &&
                   PLAN_TO_MEGATRON == 3 && PLAN_TO_COUNT == 4,
               "--to's words are in plan_target's order");
static const cli_opt export_opts[] = {
    {"to", 0, CLI_ENUM, CLI_FIELD(export_args, target), .words = "torch|deepspeed|deepspeed-module|megatron",
     .help = NULL},
    {"out", 'o', CLI_STR, CLI_FIELD(export_args, out), .help = NULL},
};
static const cli_spec export_spec = {"export", export_opts, CLI_N(export_opts), .args = CLI_AT(export_args, args)};

int cmd_export(int argc, char **argv)
{
    export_args x = {.target = -1};
    int rc = cli_parse(&export_spec, argc, argv, &x, 0);
    if (rc) return rc == CLI_HELP ? help() : rc;
    if (x.args.n > 1)
        return cli_usage_error("export", "one plan at a time (got %s and %s)", x.args.v[0], x.args.v[1]);
    const char *path = x.args.n ? x.args.v[0] : NULL, *out = x.out;
    int target = x.target;
    if (!path) return cli_usage_error("export", "missing PLAN.json");
    if (target < 0) return cli_usage_error("export", "missing --to torch|deepspeed|deepspeed-module|megatron");
    cl_err e = {0};
    plan p;
    if (plan_load(&p, path, &e)) return cli_report(&e);
    plan_target t = (plan_target)target;
    /* Megatron-LM runs tensor parallelism and recomputation (flags in the
     * export); the other targets do not */
    if (t != PLAN_TO_MEGATRON && plan_per_rank(&p)) {
        if (plan_context(&p) > 1)
            cl_fail(&e, CL_EINPUT,
                    "%s: the plan has context parallelism %d, which only --to megatron writes (hint: cleave "
                    "export PLAN --to megatron, or a layout without cp for --to %s)",
                    path, plan_context(&p), plan_target_name(t));
        else
            cl_fail(&e, CL_EINPUT,
                "%s: the plan has tensor %d and recompute %s, which only --to megatron writes (hint: cleave "
                "export PLAN --to megatron, or plan without --tensor and --recompute for --to %s)",
                path, plan_tensor(&p), tfm_recomp_name((tfm_recomp)p.recompute), plan_target_name(t));
        plan_free(&p);
        return cli_report(&e);
    }
    sched_kind kind = plan_export_schedule(&p, t);
    char *text = NULL;
    rc = plan_export(&p, t, path, &text, &e);
    if (rc == CL_OK && kind != p.schedule) /* said in the header too, but JSON has none */
        fprintf(stderr, "cleave: note: %s does not run schedule %s; the export is the plan's %s run (its figure: cleave sim PLAN --schedule %s)\n",
                plan_target_name(t), sched_kind_name(p.schedule), sched_kind_name(kind), sched_kind_name(kind));
    plan_free(&p);
    if (rc) return cli_report(&e);
    if (out) rc = cl_write_file(out, text, strlen(text), &e);
    else fputs(text, stdout);
    free(text);
    if (rc) return cli_report(&e);
    return 0;
}
