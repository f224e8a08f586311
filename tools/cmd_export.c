/* cmd_export.c - `cleave export PLAN --to TARGET [-o FILE]`: print (or write
 * atomically) a plan's partition and batch as a framework's settings
 * (planner/export.h).  When the target does not run the plan's schedule,
 * the plan is simulated under the schedule it does run, and the export
 * states that run's figure next to the plan's own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/export.h"
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

int cmd_export(int argc, char **argv)
{
    const char *path = NULL, *out = NULL;
    int target = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return help();
        else if (!strcmp(a, "--to") || !strcmp(a, "-o")) {
            if (i + 1 >= argc) return cli_usage_error("export", "%s needs a value", a);
            const char *v = argv[++i];
            if (a[1] == 'o') out = v;
            else if ((target = plan_target_from_name(v)) < 0)
                return cli_usage_error("export", "--to: expected torch, deepspeed, deepspeed-module or megatron, got \"%s\"", v);
        } else if (a[0] == '-' && a[1]) return cli_usage_error("export", "unknown option %s", a);
        else if (path) return cli_usage_error("export", "one plan at a time (got %s and %s)", path, a);
        else path = a;
    }
    if (!path) return cli_usage_error("export", "missing PLAN.json");
    if (target < 0) return cli_usage_error("export", "missing --to torch|deepspeed|deepspeed-module|megatron");
    cl_err e = {0};
    plan p;
    if (plan_load(&p, path, &e)) return cli_report(&e);
    plan_target t = (plan_target)target;
    sched_kind kind = plan_export_schedule(&p, t);
    char *text = NULL;
    int rc = plan_export(&p, t, path, &text, &e);
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
