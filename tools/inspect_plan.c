/* inspect_plan.c - `cleave inspect plan.json`: the plan's stages, devices,
 * costs and predictions as a table; --json re-prints the validated plan. */
#include <stdio.h>
#include <stdlib.h>

#include "core/plan.h"
#include "cli.h"
#include "inspect.h"
#include "base/jsonx.h"
#include "base/units.h"

/* "0.5 KiB", "3.4 MiB", "1.25 GiB". */
static const cl_bytes_style plan_bytes = {.lo = CL_KIB, .hi = CL_GIB, .prec = 1, .grow = 1};

int inspect_plan(const char *path, int as_json)
{
    plan p;
    cl_err e = {0};
    if (plan_load(&p, path, &e)) return cli_report(&e);
    if (as_json) {
        int rc = jx_puts(plan_to_json(&p));
        plan_free(&p);
        return rc;
    }
    printf("plan: %s on %s (%d devices), schedule %s", p.model.name, p.cluster.name,
           plan_device_count(&p), sched_kind_name(p.schedule));
    if (p.chunks > 1) printf(" with %d chunks per device", p.chunks);
    printf(", optimiser %s%s", plan_optim_name(p.optimizer), p.comm_off ? ", communication left out" : "");
    if (p.framework != PLAN_FOR_ANY) printf(", planned for %s", plan_for_name(p.framework));
    printf("\n");
    if (plan_per_rank(&p)) {
        char layout[96], cpl[192];
        plan_layout_str(&p, layout, sizeof layout);
        printf("tensor %d%s, recompute %s: each device is a group of %d GPUs, figures per GPU; %s\n",
               plan_tensor(&p), p.seq_par ? " with sequence parallelism" : "",
               p.recompute == 2 ? "full" : p.recompute == 1 ? "selective" : "none", plan_tensor(&p), layout);
        plan_cp_str(&p, p.pred.throughput, cpl, sizeof cpl);
        if (cpl[0]) printf("%s\n", cpl);
    }
    printf("batch %d = %d microbatches of %d\n", p.batch, p.n_micro, p.microbatch);
    char line[256];
    if (plan_state_describe(&p, line, sizeof line)) printf("model state: %s\n", line);
    if (plan_grad_reduce_describe(&p, line, sizeof line)) printf("gradient reduction: %s\n", line);
    putchar('\n');
    printf("%-6s %-12s %-10s %12s %12s %12s %11s %11s %11s\n", "stage", "layers", "devices",
           "fwd_s/mb", "bwd_in_s/mb", "bwd_w_s/mb", "compute_s", "comm_s", "memory");
    for (int s = 0; s < p.n_stages; s++) {
        const plan_stage *st = &p.stages[s];
        char layers[32], devs[32], mem[32];
        snprintf(layers, sizeof layers, "%d-%d", st->layers[0], st->layers[st->n_layers - 1]);
        if (st->n_replicas == 1) snprintf(devs, sizeof devs, "%d", st->devices[0]);
        else snprintf(devs, sizeof devs, "%d (x%d)", st->devices[0], st->n_replicas);
        printf("%-6d %-12s %-10s %12.6f %12.6f %12.6f %11.6f %11.6f %11s\n", s, layers, devs,
               st->fwd_s, st->bwd_in_s, st->bwd_w_s, st->compute_s, st->comm_s,
               cl_fmt_bytes(mem, sizeof mem, st->mem_bytes, plan_bytes));
    }
    printf("\npredicted: iteration %.6f s, throughput %.1f %s/s, bubble %.1f%%, speed-up %.2fx\n",
           p.pred.iteration_s, p.pred.throughput, model_unit_plural(p.model.unit), 100 * p.pred.bubble,
           p.pred.speedup);
    plan_free(&p);
    return 0;
}
