/* cmd_export.c - `cleave export PLAN --to torch|deepspeed|megatron [-o FILE]`:
 * print (or write atomically) a plan's partition as a framework's settings
 * (planner/export.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../planner/export.h"
#include "cli.h"
#include "fileio.h"

static int help(void)
{
    printf("usage: cleave export PLAN.json --to torch|deepspeed|megatron [-o FILE]\n\n"
           "Turns a plan's stages into the settings a training framework takes:\n"
           "  torch      torch.distributed.pipelining split_spec (SplitPoint.BEGINNING)\n"
           "  deepspeed  PipelineModule layer boundaries (parts)\n"
           "  megatron   --pipeline-model-parallel-layout (transformer models)\n"
           "A target that cannot express the plan says why and writes nothing.\n");
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
                return cli_usage_error("export", "--to: expected torch, deepspeed or megatron, got \"%s\"", v);
        } else if (a[0] == '-' && a[1]) return cli_usage_error("export", "unknown option %s", a);
        else if (path) return cli_usage_error("export", "one plan at a time (got %s and %s)", path, a);
        else path = a;
    }
    if (!path) return cli_usage_error("export", "missing PLAN.json");
    if (target < 0) return cli_usage_error("export", "missing --to torch|deepspeed|megatron");
    cl_err e = {0};
    plan p;
    if (plan_load(&p, path, &e)) return cli_report(&e);
    char *text = NULL;
    int rc = plan_export(&p, (plan_target)target, path, &text, &e);
    plan_free(&p);
    if (rc) return cli_report(&e);
    if (out) rc = cl_write_file(out, text, strlen(text), &e);
    else fputs(text, stdout);
    free(text);
    if (rc) return cli_report(&e);
    return 0;
}
