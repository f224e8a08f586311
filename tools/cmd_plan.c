/* cmd_plan.c - `cleave plan`: find the best partition, devices, microbatches
 * and schedule for a model on a cluster; print it as a table and write the
 * plan JSON (docs/planner.md, docs/formats.md "Plan").
 *
 * Inputs: --model and/or --profile (a cleave profile, or a PipeDream
 * graph.txt, which is a whole model and profile by itself), and --cluster or
 * the quick-question flags --devices N [--per-node K] [--bandwidth B[,B2]]
 * [--device TYPE].  Without a profile the costs are derived from the model
 * by the roofline of the device type.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/model.h"
#include "planner/export.h"
#include "planner/layout.h"
#include "planner/cost.h"
#include "planner/search.h"
#include "planner/tensor.h"
#include "profiles/cluster.h"
#include "profiles/pipedream.h"
#include "profiles/profile.h"
#include "profiles/gemm.h"
#include "profiles/tfm_time.h"
#include "base/budget.h"
#include "base/escape.h"
#include "cli.h"
#include "layout_cli.h"
#include "base/fileio.h"
#include "base/units.h"

/* --recompute auto: the word after tfm_recomp's three */
#define RECOMP_AUTO 3

typedef struct plan_args {
    const char *model, *profile, *cluster, *out, *device, *profiled_on;
    const char *bandwidth, *latency, *micro, *schedule, *framework; /* as given */
    int64_t devices, per_node, batch, stages, max_cuts, profile_batch;
    int chunks, algo, optimizer, precision, zero, comm_off, no_replication, json;
    const char *tensor;     /* t or auto, as given */
    const char *layout;     /* --layout, as given */
    int seq_par, recompute; /* recompute: a tfm_recomp, or RECOMP_AUTO */
    int attention;          /* a prof_attn */
    int grad_acc;           /* --grad-accumulation: 0 fused, 1 separate */
    int grad_reduce;        /* --grad-reduce-bytes; 0: the default        */
    double max_seconds;
} plan_args;

/* the enum options' words in their enums' order: the index is the value */
_Static_assert(PLAN_ALGO_AUTO == 0 && PLAN_ALGO_EXACT == 1 && PLAN_ALGO_MERGE == 2, "--algo words");
_Static_assert(OPTIM_SGD == 0 && OPTIM_MOMENTUM == 1 && OPTIM_ADAM == 2, "--optimizer words");
_Static_assert(PREC_AUTO == 0 && PREC_FP32 == 1 && PREC_MIXED == 2 && PREC_FP8 == 3, "--precision words");
_Static_assert(PROF_ATTN_UNFUSED == 0 && PROF_ATTN_FUSED == 1, "--attention words");

/* --attention fused's refusal: a model without its transformer, checked
 * before the per-rank model (which needs it too), or a device without a
 * kernel model, found when its costs are derived */
static const char fused_needs[] = "--attention fused prices a transformer's attention kernel by kernel: it needs a model with a \"transformer\" member and a device type with a \"kernels\" member (docs/compute.md)";

#define PA plan_args
static const cli_opt plan_opts[] = {
    {"model", 0, CLI_STR, CLI_FIELD(PA, model), .help = NULL},
    {"profile", 0, CLI_STR, CLI_FIELD(PA, profile),
     .help = "a cleave profile, or a PipeDream graph.txt (then no --model)"},
    {"cluster", 0, CLI_STR, CLI_FIELD(PA, cluster), .help = NULL},
    {"devices", 0, CLI_INT, CLI_FIELD(PA, devices), 1, CLUSTER_MAX_DEVICES, .arg = "N",
     .help = "a quick cluster of N devices of --device TYPE (a preset from\n"
             "profiles/devices.json; default: the profile's device), K per\n"
             "node, links B (and B2 between nodes) bytes/s"},
    {"per-node", 0, CLI_INT, CLI_FIELD(PA, per_node), 1, CLUSTER_MAX_DEVICES, .help = NULL},
    {"bandwidth", 0, CLI_STR, CLI_FIELD(PA, bandwidth), .help = NULL},
    {"latency", 0, CLI_STR, CLI_FIELD(PA, latency), .help = NULL},
    {"device", 0, CLI_STR, CLI_FIELD(PA, device), .help = NULL},
    {"profile-batch", 0, CLI_INT, CLI_FIELD(PA, profile_batch), 1, 1 << 30, .arg = "N",
     .help = "the batch size a PipeDream graph.txt was profiled at, when its\n"
             "input does not tell (default: inferred from image inputs; else\n"
             "throughputs count the profiled minibatches)"},
    {"profiled-on", 0, CLI_STR, CLI_FIELD(PA, profiled_on),
     .help = "the device type the profile was measured on (for mixed clusters)"},
    {"batch", 0, CLI_INT, CLI_FIELD(PA, batch), 1, 1 << 30, .help = NULL},
    {"schedule", 0, CLI_STR, CLI_FIELD(PA, schedule), .help = NULL},
    {"microbatches", 0, CLI_STR, CLI_FIELD(PA, micro), .help = NULL},
    {"stages", 0, CLI_INT, CLI_FIELD(PA, stages), 1, CLUSTER_MAX_DEVICES, .help = NULL},
    {"comm", 0, CLI_ENUM, CLI_FIELD(PA, comm_off), .words = "on|off", .arg = "off",
     .help = "leave communication out of every cost (to compare with tools\n"
             "that do)"},
    {"algo", 0, CLI_ENUM, CLI_FIELD(PA, algo), .words = "auto|exact|merge",
     .help = "exact: optimal partition; merge: the method's partition-and-merge;\n"
             "auto (default): both, report the gap, keep the faster"},
    {"chunks", 0, CLI_INT, CLI_FIELD(PA, chunks), 1, 1 << 20, .arg = "v",
     .help = "model chunks per device for interleaved plans (default: the\n"
             "counts of whole layers a chunk, fewest first while the time\n"
             "falls; a balanced chunk split, not the exact search)"},
    {"optimizer", 0, CLI_ENUM, CLI_FIELD(PA, optimizer), .words = "sgd|momentum|adam", .help = NULL},
    {"precision", 0, CLI_ENUM, CLI_FIELD(PA, precision), .words = "auto|fp32|mixed|fp8",
     .help = "model state: fp32, or mixed (16-bit weights, fp32 gradients,\n"
             "master weights and moments); auto (default): mixed for a\n"
             "2-byte model, fp32 for a 4-byte one"},
    {"zero", 0, CLI_INT, CLI_FIELD(PA, zero), 0, PLAN_ZERO_MAX, .arg = "0|1|2",
     .help = "ZeRO stage: 1 shards master weights and moments over each\n"
             "stage's replicas, 2 the gradients too (default 0)"},
    {"for", 0, CLI_STR, CLI_FIELD(PA, framework), .arg = "F",
     .help = "search only what framework F (torch, deepspeed, megatron) runs:\n"
             "its schedules, one data-parallel degree for all stages, stages\n"
             "that are runs of layers; the figure is that run's"},
    {"tensor", 0, CLI_STR, CLI_FIELD(PA, tensor), .arg = "t|auto",
     .help = "tensor-parallel degree inside a node (Megatron-LM; a model with\n"
             "a \"transformer\" member, costs derived): each device of the\n"
             "plan is then a group of t GPUs (default 1); auto: try every t\n"
             "that divides the devices per node and the heads"},
    {"sequence-parallel", 0, CLI_FLAG, CLI_FIELD(PA, seq_par),
     .help = "with --tensor: sequence parallelism (reduce-scatter and\n"
             "all-gather instead of all-reduce, norms and dropout split)"},
    {"recompute", 0, CLI_ENUM, CLI_FIELD(PA, recompute), .words = "none|selective|full|auto",
     .help = "activation recomputation of the transformer blocks (default\n"
             "none); auto: try the three, keep the fastest that fits"},
    {"attention", 0, CLI_ENUM, CLI_FIELD(PA, attention), .words = "unfused|fused",
     .help = "how a transformer's attention core runs on a device with a kernel\n"
             "model (docs/compute.md): unfused (default; batched GEMMs,\n"
             "softmax and dropout kernels) or fused (one flash-attention kernel)"},
    {"grad-reduce-bytes", 0, CLI_INT, CLI_FIELD(PA, grad_reduce), 2, PLAN_GRAD_REDUCE_MAX, .arg = "2|4",
     .help = "bytes per gradient element of the data-parallel all-reduce\n"
             "(docs/simulator.md, \"Gradient reduction\"): 4 (fp32) or 2; default\n"
             "4 for fp32 and for a bfloat16 model --for megatron or deepspeed\n"
             "(as they reduce), else the model's element size"},
    {"grad-accumulation", 0, CLI_ENUM, CLI_FIELD(PA, grad_acc), .words = "fused|separate",
     .help = "how a transformer's weight gradients add up over the microbatches\n"
             "(docs/compute.md, \"Gradient accumulation\"): fused (default; inside\n"
             "the weight-gradient GEMM, as Transformer Engine and APEX's fusion\n"
             "do) or separate (a kernel per parameter tensor and microbatch, as\n"
             "Megatron-LM without gradient-accumulation fusion)"},
    {"layout", 0, CLI_STR, CLI_FIELD(PA, layout), .arg = "SPEC",
     .help = "evaluate this configuration without search, e.g.\n"
             "t=8,p=4,d=2,mb=1,m=16,sched=interleaved,v=2,recompute=full,\n"
             "zero=1,sp=1; cp=C adds context parallelism (docs/planner.md,\n"
             "\"Evaluating a given layout\")"},
    {"no-replication", 0, CLI_FLAG, CLI_FIELD(PA, no_replication), .help = NULL},
    {"max-cuts", 0, CLI_INT, CLI_FIELD(PA, max_cuts), 2, (int64_t)1 << 30, .arg = "N",
     .help = "cap on the cuts listed for a branching model (default 100000)"},
    {"max-seconds", 0, CLI_NUM, CLI_FIELD(PA, max_seconds), .lo = 0, .hi = 1e7, .arg = "S",
     .help = "stop with an error after S seconds of real time (default 600)"},
    {"out", 'o', CLI_STR, CLI_FIELD(PA, out), .arg = "FILE",
     .help = "write the plan JSON to FILE (-: to stdout, the table to stderr)"},
    {"json", 0, CLI_FLAG, CLI_FIELD(PA, json),
     .help = "print the plan JSON on stdout (the table on stderr)"},
};
#undef PA
static const cli_spec plan_spec = {"plan", plan_opts, CLI_N(plan_opts), .help_col = 19};

static int help(void)
{
    printf(
        "usage: cleave plan [--model M.json] [--profile P.json|graph.txt] [--cluster C.json]\n"
        "                   [--devices N [--per-node K] [--bandwidth B[,B2]] [--latency L[,L2]]]\n"
        "                   [--device TYPE] [--profiled-on TYPE] [--batch B]\n"
        "                   [--schedule gpipe|1f1b|interleaved|zb-h1|pipedream|fbp|sequential|auto]\n"
        "                   [--microbatches m|auto] [--stages p] [--chunks v] [--algo auto|exact|merge]\n"
        "                   [--optimizer sgd|momentum|adam] [--precision auto|fp32|mixed|fp8] [--zero 0|1|2]\n"
        "                   [--comm on|off] [--no-replication] [--for torch|deepspeed|megatron]\n"
        "                   [--tensor t|auto [--sequence-parallel]] [--recompute none|selective|full|auto]\n"
        "                   [--layout t=T,cp=C,p=P,d=D,mb=B,m=M,sched=S,v=V,recompute=R,zero=Z,sp=0|1]\n"
        "                   [--attention unfused|fused] [--grad-accumulation fused|separate]\n"
        "                   [--max-cuts N] [--max-seconds S] [-o plan.json] [--json]\n\n"
        "Finds the partition of the layers into pipeline stages, the devices (and\n"
        "replicas) of each stage, the microbatch count and the schedule that train\n"
        "fastest within each device's memory, prints it and writes the plan.\n\n");
    cli_help(&plan_spec, NULL, stdout);
    return 0;
}

static int is_pipedream(const char *path)
{
    size_t n = strlen(path);
    return n > 4 && strcmp(path + n - 4, ".txt") == 0;
}

/* The table's memory columns: "812 KiB", "3.4 MiB", "1.25 GiB", "2.1 PB". */
static const cl_bytes_style table_bytes = {.lo = CL_KIB, .hi = CL_GIB, .grow = 1, .pb = 1e15};

/* "3" / "0-3" / "0,2,5" */
static void dev_list(char *buf, size_t cap, const plan_stage *st)
{
    int contiguous = 1;
    for (int r = 1; r < st->n_replicas; r++) contiguous &= st->devices[r] == st->devices[r - 1] + 1;
    if (st->n_replicas == 1) snprintf(buf, cap, "%d", st->devices[0]);
    else if (contiguous) snprintf(buf, cap, "%d-%d", st->devices[0], st->devices[st->n_replicas - 1]);
    else {
        size_t at = 0;
        buf[0] = '\0';
        for (int r = 0; r < st->n_replicas && at + 12 < cap; r++)
            at += (size_t)snprintf(buf + at, cap - at, r ? ",%d" : "%d", st->devices[r]);
    }
}

/* The model state and the runtime reserve, when either differs from what
 * plans meant before they were modelled (fp32 state of a 4-byte model, no
 * ZeRO, no reserve): one line each. */
static void print_memory_terms(FILE *f, const plan *p)
{
    char line[256];
    if (plan_state_describe(p, line, sizeof line)) fprintf(f, "model state: %s\n", line);
    if (plan_grad_reduce_describe(p, line, sizeof line)) fprintf(f, "gradient reduction: %s\n", line);
    uint64_t lo = UINT64_MAX, hi = 0;
    const cluster *c = &p->cluster;
    for (int s = 0; s < p->n_stages; s++)
        for (int r = 0; r < p->stages[s].n_replicas; r++) {
            uint64_t v = c->types[c->devices[p->stages[s].devices[r]].type].reserve_bytes;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    if (hi > 0) {
        char a[24], b[24];
        cl_fmt_bytes(a, sizeof a, (double)lo, table_bytes);
        cl_fmt_bytes(b, sizeof b, (double)hi, table_bytes);
        if (lo == hi)
            fprintf(f, "capacity: device memory less a runtime reserve of %s per device (reserve_bytes)\n", a);
        else
            fprintf(f, "capacity: device memory less a runtime reserve of %s to %s per device (reserve_bytes)\n", a, b);
    }
}

static void print_plan(FILE *f, const plan_request *rq, const plan_result *res, const char *quick_links)
{
    const plan *p = &res->plan;
    const model *m = &p->model;
    const cluster *c = &p->cluster;
    int given = !strcmp(res->algo, "layout");
    fprintf(f, "plan: %s on %s (%d device%s in %d node%s), batch %d = %d microbatch%s of %d, schedule %s, %s%s\n",
           m->name, c->name, c->n_devices, c->n_devices == 1 ? "" : "s", c->n_nodes,
           c->n_nodes == 1 ? "" : "s", p->batch, p->n_micro, p->n_micro == 1 ? "" : "es",
           p->microbatch, sched_kind_name(p->schedule), given ? "the layout given (no search)" : res->algo,
           given ? "" : " search");
    if (quick_links) fprintf(f, "links: %s\n", quick_links);
    if (p->framework != PLAN_FOR_ANY)
        fprintf(f, "for: %s, data-parallel degree %d (%d microbatch%s per replica): the run `cleave export --to %s` describes%s\n",
                plan_for_name(p->framework), p->stages[0].n_replicas, p->n_micro / p->stages[0].n_replicas,
                p->n_micro / p->stages[0].n_replicas == 1 ? "" : "es", plan_for_name(p->framework),
                !plan_per_rank(p) ? ""
                : p->framework == PLAN_FOR_MEGATRON ? ", tensor parallelism and recomputation included"
                                                     : "; it refuses tensor parallelism and recomputation (only --to megatron writes them)");
    if (!rq->comm) fprintf(f, "communication: left out (--comm off)\n");
    if (plan_per_rank(p)) {
        char layout[96], cpl[192];
        plan_layout_str(p, layout, sizeof layout);
        fprintf(f, "tensor: %d%s, recompute %s: every device below is a group of %d GPU%s "
                   "(one rank's figures); %s\n",
                plan_tensor(p), p->seq_par ? " with sequence parallelism" : "",
                tfm_recomp_name((tfm_recomp)p->recompute), plan_tensor(p), plan_tensor(p) == 1 ? "" : "s",
                layout);
        plan_cp_str(p, p->pred.throughput, cpl, sizeof cpl);
        if (cpl[0]) fprintf(f, "%s\n", cpl);
    }
    fprintf(f, "\n%-5s  %-44s %-8s %11s %11s %10s %10s %5s\n", "stage", "layers", "devices",
           "compute_s", "comm_s", "memory", "capacity", "util");
    for (int s = 0; s < p->n_stages; s++) {
        const plan_stage *st = &p->stages[s];
        char lay[96], dv[48], mem[24], cap[24];
        const char *a = m->layers[st->first].name, *b = m->layers[st->last].name;
        if (st->last - st->first + 1 == st->n_layers)
            snprintf(lay, sizeof lay, "%d-%d %.16s..%.16s", st->first, st->last, a, b);
        else
            snprintf(lay, sizeof lay, "%d layers %.16s..%.16s", st->n_layers, a, b);
        dev_list(dv, sizeof dv, st);
        cl_fmt_bytes(mem, sizeof mem, st->mem_bytes, table_bytes);
        double capb = HUGE_VAL;
        for (int r = 0; r < st->n_replicas; r++)
            capb = fmin(capb, (double)cluster_usable_bytes(&c->types[c->devices[st->devices[r]].type]));
        if (capb >= 9e15) snprintf(cap, sizeof cap, "unknown");
        else cl_fmt_bytes(cap, sizeof cap, capb, table_bytes);
        double busy = (double)p->n_micro / st->n_replicas * (st->fwd_s + st->bwd_in_s + st->bwd_w_s);
        double util = p->pred.iteration_s > 0 ? busy / p->pred.iteration_s : 0;
        fprintf(f, "%-5d  %-44s %-8s %11.6f %11.6f %10s %10s %4.0f%%\n", s, lay, dv, st->compute_s,
               st->comm_s, mem, cap, 100 * util);
    }
    fputc('\n', f);
    print_memory_terms(f, p);
    fprintf(f, "slowest stage: %.6f s per iteration (%s %d)\n", res->bottleneck_s,
           res->bottleneck_is_boundary ? "boundary after stage" : "stage", res->bottleneck_stage);
    fprintf(f, "predicted: iteration %.6f s, throughput %.1f %s/s, bubble %.1f%%, speed-up %.2fx over one device\n",
           p->pred.iteration_s, p->pred.throughput, model_unit_plural(p->model.unit), 100 * p->pred.bubble,
           p->pred.speedup);
    if (!p->pred.simulated && !given)
        fprintf(f, "note: the figures above are the closed form of docs/planner.md: the plan is too large for the search to replay (\"Ranking by the simulator\"); `cleave sim` of the plan file replays it\n");
    if (p->model.unit == MODEL_UNIT_MINIBATCH)
        fprintf(f, "units: the profile does not tell its batch size, so a batch counts its profiled minibatches (hint: --profile-batch N states it)\n");
    if (p->idle_why[0])
        fprintf(f, "devices: uses %d of %d: %s\n", res->devices_used, c->n_devices, p->idle_why);
    if (!isnan(res->exact_s) && !isnan(res->merge_s))
        fprintf(f, "exact search: slowest stage %.6f s; partition-and-merge: %.6f s (gap %+.2f%%)\n",
               res->exact_s, res->merge_s,
               /* a model of no work at all: both 0, no gap */
               res->exact_s > 0 ? 100 * (res->merge_s - res->exact_s) / res->exact_s : 0.0);
    else if (!isnan(res->exact_s))
        fprintf(f, "exact search: slowest stage %.6f s (partition-and-merge found nothing that fits)\n", res->exact_s);
    else if (!isnan(res->merge_s))
        fprintf(f, "partition-and-merge: slowest stage %.6f s (exact search not run)\n", res->merge_s);
    if (m->is_dag)
        fprintf(f, "cuts: %s (%d)\n", res->cuts_dag ? "every downset of the layer graph" : "prefixes of one topological order",
               res->lattice_sets);
    for (int i = 0; i < res->n_notes; i++) fprintf(f, "note: %s\n", res->notes[i]);
}

/* --layout: evaluate pa->layout (layout_cli.h), print it like a plan and
 * write it; a layout that does not fit is printed with its numbers,
 * written nowhere, and ends with status 1. */
static int run_layout(const plan_args *pa, FILE *msg)
{
    layout_inputs in = {.cmd = "plan", .layout = pa->layout, .model = pa->model, .cluster = pa->cluster,
                        .device = pa->device, .bandwidth = pa->bandwidth, .latency = pa->latency,
                        .devices = pa->devices, .per_node = pa->per_node, .batch = pa->batch,
                        .optimizer = pa->optimizer, .precision = pa->precision, .zero = -1, .comm = !pa->comm_off,
                        .attention = pa->attention, .grad_acc = pa->grad_acc,
                        .grad_reduce = pa->grad_reduce,
                        /* checked where the options are read */
                        .framework = pa->framework ? plan_for_from_name(pa->framework) : PLAN_FOR_ANY};
    plan_result res;
    plan_request rq = {.comm = in.comm};
    char nofit[320], links[256];
    cl_err e = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = layout_cli_eval(&in, &res, links, sizeof links, nofit, sizeof nofit, &e);
    if (rc) return e.code ? cli_report(&e) : rc;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    print_plan(msg, &rq, &res, links[0] ? links : NULL);
    fprintf(msg, "evaluated in %.3f s\n",
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    fflush(msg);
    if (nofit[0]) {
        fprintf(stderr, "cleave: plan: --layout %s (hint: more GPUs, a larger t or p, recompute=full, zero=1 or 2, or a smaller mb)\n",
                nofit);
        plan_result_free(&res);
        return 1;
    }
    const char *out = pa->out;
    if (out) {
        rc = plan_save(&res.plan, out, &e);
        if (!rc) fprintf(msg, "wrote %s\n", out);
    }
    if (!rc && pa->json && !(out && !strcmp(out, "-"))) rc = plan_save(&res.plan, "-", &e);
    plan_result_free(&res);
    return rc ? cli_report(&e) : CL_OK;
}

int cmd_plan(int argc, char **argv)
{
    plan_args pa = {.max_seconds = CL_BUDGET_DEFAULT_S};
    int rc = cli_parse(&plan_spec, argc, argv, &pa, 0);
    if (rc) return rc == CLI_HELP ? help() : rc;
    const char *model_path = pa.model, *prof_path = pa.profile, *cluster_path = pa.cluster, *out = pa.out;
    const char *device = pa.device, *profiled_on = pa.profiled_on;
    int64_t devices = pa.devices, per_node = pa.per_node, batch = pa.batch, micro = 0, stages = pa.stages,
            max_cuts = pa.max_cuts;
    double bw[2] = {DEF_INTRA_BPS, DEF_INTER_BPS}, lat[2] = {DEF_INTRA_LAT, DEF_INTER_LAT};
    double max_seconds = pa.max_seconds;
    int bw_given = pa.bandwidth != NULL, lat_given = pa.latency != NULL;
    plan_request rq = {.schedule = -1, .algo = (plan_algo)pa.algo, .optimizer = (plan_optim)pa.optimizer,
                       .precision = (plan_prec)pa.precision, .zero = pa.zero,
                       .comm = !pa.comm_off, .replication = !pa.no_replication, .chunks = pa.chunks,
                       .grad_reduce = pa.grad_reduce};
    int n_bw = 0, n_lat = 0;
    if ((bw_given && (rc = cli_num_pair("plan", "--bandwidth", pa.bandwidth, 1e-300, bw, &n_bw))) ||
        (lat_given && (rc = cli_num_pair("plan", "--latency", pa.latency, 0, lat, &n_lat))) ||
        (pa.micro && strcmp(pa.micro, "auto") != 0 &&
         (rc = cli_int("plan", "--microbatches", pa.micro, 1, 1 << 30, &micro))))
        return rc;
    if (n_bw == 1) bw[1] = bw[0]; /* B alone: the same between nodes */
    if (n_lat == 1) lat[1] = lat[0];
    if (pa.schedule && strcmp(pa.schedule, "auto") != 0) {
        rq.schedule = sched_kind_from_name(pa.schedule);
        if (rq.schedule < 0)
            return cli_usage_error("plan", "--schedule: unknown schedule \"%s\" (gpipe, 1f1b, interleaved, zb-h1, pipedream, fbp, sequential, auto)", pa.schedule);
    }
    if (pa.framework) {
        int f = plan_for_from_name(pa.framework);
        if (f < 0) {
            char *shown = esc_term(pa.framework); /* argv: no control byte to the terminal */
            rc = cli_usage_error("plan", "--for: unknown framework \"%s\" (torch, deepspeed, megatron)", shown);
            free(shown);
            return rc;
        }
        rq.framework = (plan_for)f;
        if (rq.schedule >= 0 && !plan_for_runs(rq.framework, (sched_kind)rq.schedule)) {
            char hint[128];
            snprintf(hint, sizeof hint, "--schedule %s, or auto", plan_for_schedules(rq.framework));
            return cli_usage_hint("plan", hint, "--schedule %s: %s does not run it",
                                  sched_kind_name((sched_kind)rq.schedule), plan_for_name(rq.framework));
        }
    }
    /* machine-readable stdout: with --json or -o -, the plan JSON is all
     * stdout carries; the table, notes and "wrote" go to stderr */
    int json_out = pa.json || (out && !strcmp(out, "-"));
    FILE *msg = json_out ? stderr : stdout;
    if (!model_path && !prof_path)
        return cli_usage_error("plan", "give --model and/or --profile");
    if (!cluster_path && !devices)
        return cli_usage_error("plan", "give --cluster C.json or --devices N");
    if (cluster_path && (devices || per_node || bw_given || lat_given || device))
        return cli_usage_error("plan", "--cluster and the quick-cluster flags (--devices, --per-node, --bandwidth, --latency, --device) exclude each other");
    if (!devices && (per_node || bw_given || lat_given))
        return cli_usage_error("plan", "--per-node, --bandwidth and --latency describe a --devices cluster");
    if (prof_path && model_path && is_pipedream(prof_path))
        return cli_usage_error("plan", "a PipeDream profile is the model too: drop --model");
    if (pa.profile_batch && !(prof_path && is_pipedream(prof_path)))
        return cli_usage_error("plan", "--profile-batch states a PipeDream graph.txt's batch size (a cleave profile names its own)");
    if (pa.grad_reduce == 3)
        return cli_usage_error("plan", "--grad-reduce-bytes 3: expected 2 or 4 (bytes per gradient element)");

    if (pa.layout && (pa.tensor || pa.seq_par || pa.recompute || pa.schedule || pa.micro || pa.stages ||
                      pa.chunks || pa.zero || pa.algo || pa.no_replication))
        return cli_usage_hint("plan", "give them in the layout (t, sp, recompute, sched, m, p, v, zero), or drop --layout",
                              "--layout is one configuration: it excludes --tensor, --sequence-parallel, --recompute, --schedule, --microbatches, --stages, --chunks, --zero, --algo and --no-replication");
    if (pa.layout && (pa.profile || pa.profiled_on || pa.profile_batch || pa.max_cuts))
        return cli_usage_hint("plan", "drop them: a layout's costs are derived from the model",
                              "--layout excludes --profile, --profiled-on, --profile-batch and --max-cuts");
    if (pa.layout) return run_layout(&pa, json_out ? stderr : stdout);
    /* tensor parallelism and recomputation: the per-rank question
     * (planner/tensor.h), priced from the model's transformer member */
    int64_t tp64 = 1;
    int t_auto = pa.tensor && !strcmp(pa.tensor, "auto"), r_auto = pa.recompute == RECOMP_AUTO;
    if (pa.tensor && !t_auto && (rc = cli_int("plan", "--tensor", pa.tensor, 1, 1024, &tp64))) return rc;
    int tp = (int)tp64;
    int restate = tp > 1 || pa.seq_par || pa.recompute || t_auto;
    if (pa.seq_par && tp == 1 && !t_auto)
        return cli_usage_hint("plan", "--tensor 2 or more", "--sequence-parallel splits the sequence over tensor-parallel ranks, and --tensor is 1");
    if (pa.attention == PROF_ATTN_FUSED && prof_path)
        return cli_usage_hint("plan", "drop --profile, or --attention",
                              "--attention fused prices a transformer's attention kernel by kernel, which a profile measured whole");
    if (pa.grad_acc && prof_path)
        return cli_usage_hint("plan", "drop --profile, or --grad-accumulation",
                              "--grad-accumulation separate prices a transformer's parameter tensors, which a profile measured whole");
    if ((t_auto || r_auto) && prof_path)
        return cli_usage_hint("plan", "drop --profile, or give --tensor and --recompute",
                              "--tensor auto and --recompute auto re-price a transformer's layers, which a profile measured at one degree");
    cl_err e = {0};
    cl_budget_start(max_seconds, "--max-seconds"); /* loading, search and ranking */
    model md = {0}, mdr = {0};
    cluster clr = {0};
    prof pf = {0};
    cluster cl = {0};
    cluster_devtype dev_type, ref_type, *ref = NULL;
    int have_prof = 0;
    char links[256] = "", *quick = NULL, derived_from[CLUSTER_NAME_MAX + 384] = "";
    /* model and profile */
    if (prof_path && is_pipedream(prof_path)) {
        if ((rc = pipedream_import(prof_path, (double)pa.profile_batch, &md, &pf, NULL, &e))) goto fail;
        have_prof = 1;
    } else {
        if (!model_path) {
            rc = cli_usage_error("plan", "a cleave profile needs its --model");
            goto done;
        }
        if ((rc = model_load(&md, model_path, &e))) goto fail;
        if (prof_path) {
            if ((rc = prof_load(&pf, prof_path, &e))) goto fail;
            if ((rc = prof_check_model(&pf, &md, prof_path, &e))) goto fail;
            have_prof = 1;
        }
    }
    /* a rank profile (cleave profile --tensor t) is the per-rank question's
     * costs already: its degree, sequence parallelism and recomputation are
     * the plan's; a whole-model profile cannot answer a restated one */
    const int rank_prof = have_prof && (pf.tensor > 1 || pf.recompute);
    if (have_prof && !rank_prof && restate) {
        rc = cli_usage_hint("plan", "drop --profile: the costs are derived from the model's \"transformer\" member; or profile one rank's share: cleave profile --tensor T",
                            "--tensor and --recompute re-price a transformer's layers, which %s measured whole", prof_path);
        goto done;
    }
    if (rank_prof) {
        if ((pa.tensor && tp != (pf.tensor > 1 ? pf.tensor : 1)) || (pa.seq_par && !pf.seq_par) ||
            (pa.recompute && pa.recompute != pf.recompute)) {
            rc = cli_usage_hint("plan", "give the profile's options, or none of them",
                                "%s is rank 0's share at --tensor %d%s, recompute %s: the plan's are the profile's",
                                prof_path, pf.tensor > 1 ? pf.tensor : 1, pf.seq_par ? " --sequence-parallel" : "",
                                tfm_recomp_name((tfm_recomp)pf.recompute));
            goto done;
        }
        tp = pf.tensor > 1 ? pf.tensor : 1;
        pa.seq_par = pf.seq_par;
        pa.recompute = pf.recompute;
    }
    /* the device type of a quick cluster */
    if (devices) {
        if (device) {
            if ((rc = cluster_devtype_preset(NULL, device, &dev_type, &e))) goto fail;
        } else if (have_prof && cluster_devtype_preset(NULL, pf.device, &dev_type, &(cl_err){0}) == CL_OK) {
            /* the profile's device is a preset */
        } else if (have_prof) {
            /* the device the profile was taken on, memory unknown */
            memset(&dev_type, 0, sizeof dev_type);
            snprintf(dev_type.name, sizeof dev_type.name, "%s", pf.device[0] ? pf.device : "profiled");
            dev_type.peak_fp32_flops = 1e12;
            dev_type.mem_bytes = (uint64_t)1 << 53;
            dev_type.mem_bw_Bps = 1e12;
            dev_type.efficiency = 1;
            snprintf(dev_type.note, sizeof dev_type.note,
                     "the device the profile was measured on; its memory is unknown, so memory is not limited (give --device TYPE to check it)");
        } else {
            rc = cli_usage_error("plan", "without a profile, --devices needs --device TYPE (a preset from profiles/devices.json) to derive costs");
            goto done;
        }
        if ((rc = layout_quick_cluster(&cl, &dev_type, (int)devices, (int)per_node, bw, lat, bw_given, links,
                                       sizeof links, &e)))
            goto fail;
        quick = links;
    } else {
        if ((rc = cluster_load(&cl, cluster_path, &e))) goto fail;
    }
    /* the reference device: --profiled-on, the profile's device if the
     * cluster has it or it is a preset; without a profile, the type the
     * costs are derived for */
    if (profiled_on) {
        const cluster_devtype *t = cluster_devtype_find(cl.types, cl.n_types, profiled_on);
        if (t) ref_type = *t;
        else if ((rc = cluster_devtype_preset(NULL, profiled_on, &ref_type, &e))) goto fail;
        ref = &ref_type;
    } else if (have_prof) {
        const cluster_devtype *t = cluster_devtype_find(cl.types, cl.n_types, pf.device);
        if (t) {
            ref_type = *t;
            ref = &ref_type;
        } else if (cluster_devtype_preset(NULL, pf.device, &ref_type, &(cl_err){0}) == CL_OK) {
            ref = &ref_type;
        }
    }
    if (batch == 0) {
        int b = 0;
        if (have_prof && (rc = prof_default_batch(&pf, prof_path, &b, &e))) goto fail;
        batch = b;
        if (batch < 1) batch = 64;
    }
    if (!have_prof && micro && batch % micro) { /* no microbatch size to derive costs at */
        rc = cli_usage_error("plan", "--microbatches %lld does not divide the batch of %lld (pick a divisor, or auto)",
                             (long long)micro, (long long)batch);
        goto done;
    }
    /* the (t, recomputation) candidates: one, or with auto every t up to a
     * node that the model and nodes allow (tfm_rank_check, tp_cluster) and
     * every mode; each is a whole search of the per-rank question */
    int cand_t[1025], n_t = 0, cand_r[3], n_r = 0;
    if (pa.precision == PREC_FP8 && !md.has_tfm) {
        rc = cli_usage_error("plan", "--precision fp8 prices a transformer's linear layers as FP8 GEMMs: it needs a model with a \"transformer\" member and a device type with an FP8 kernel model (docs/compute.md, \"FP8\")");
        goto done;
    }
    if (pa.attention == PROF_ATTN_FUSED && !md.has_tfm) { /* before the per-rank model, which needs it too */
        rc = cli_usage_error("plan", "%s", fused_needs);
        goto done;
    }
    if (pa.grad_acc && !md.has_tfm) {
        rc = cli_usage_error("plan", "%s", PLAN_GRAD_ACC_NEEDS);
        goto done;
    }
    const double wgrad_acc =
        pa.grad_acc ? plan_grad_acc_bytes(md.dtype, (plan_prec)pa.precision,
                                          pa.framework ? (plan_for)plan_for_from_name(pa.framework) : PLAN_FOR_ANY,
                                          pa.grad_reduce)
                    : 0;
    if (t_auto) {
        tfm_rank_opts o1 = {.t = 1, .sp = 0, .recomp = TFM_RECOMP_NONE};
        if ((rc = tfm_rank_check(&md, &o1, model_path, &e))) goto fail;
        for (int t = 1; t <= 1024 && t <= cl.n_devices; t++) cand_t[n_t++] = t;
    } else cand_t[n_t++] = tp;
    if (r_auto) for (int r = 0; r < 3; r++) cand_r[n_r++] = r;
    else cand_r[n_r++] = pa.recompute;
    plan_result res;
    int have_best = 0, n_tried = 0, n_bounded = 0;
    /* the parts of every search the tensor and recomputation loop ran
     * (res keeps only the winner's) */
    plan_result sum = {0};
    char tried[1024] = "";
    size_t tried_at = 0;
    cl_err last = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int ti = 0; ti < n_t; ti++)
        for (int ri = 0; ri < n_r; ri++) {
            tfm_rank_opts tro = {.t = cand_t[ti], .sp = pa.seq_par && cand_t[ti] > 1,
                                 .recomp = (tfm_recomp)cand_r[ri], .fused_attn = pa.attention == PROF_ATTN_FUSED,
                                 .fp8 = pa.precision == PREC_FP8, .wgrad_acc = wgrad_acc};
            int rs = tfm_rank_reprices(&tro);
            if (rank_prof) {
                /* the model stays whole (the executor splits it as the
                 * profile did); the cluster becomes groups of t, and each
                 * layer waits for the collectives it was counted making,
                 * priced on the node's link */
                if ((rc = tp_cluster(&clr, &cl, tro.t, cluster_path ? cluster_path : "--devices", &e))) goto fail;
                tp_add_counted(&pf, tro.t, cl.links[CLUSTER_INTRA]);
            } else if (rs) {
                cl_err ce = {0};
                if ((rc = tfm_rank_check(&md, &tro, model_path, &ce)) ||
                    (rc = tp_cluster(&clr, &cl, tro.t, cluster_path ? cluster_path : "--devices", &ce))) {
                    if (t_auto) continue; /* not a t this model and these nodes allow */
                    e = ce;
                    goto fail;
                }
                if ((rc = tfm_rank_model(&mdr, &md, &tro, model_path, &e))) goto fail;
            }
            if (!have_prof) {
                /* derive at every microbatch size the search may try */
                const cluster_devtype *t = &cl.types[cl.devices[0].type];
                if (device) t = &dev_type;
                double pts[PROF_MAX_POINTS];
                int np = 0;
                for (int64_t d = 1; d <= batch && np < PROF_MAX_POINTS; d++)
                    if (batch % d == 0 && (micro == 0 || d == batch / micro)) pts[np++] = (double)d;
                prof_free(&pf);
                int shaped;
                if ((rc = tp_derive(&pf, &md, rs ? &mdr : &md, &tro, rs, (prof_attn)pa.attention, t,
                                    cl.links[CLUSTER_INTRA], cl.links[CLUSTER_INTRA], pts, np, &shaped, &e)))
                    goto fail;
                /* a transformer on a device with a kernel model: every
                 * layer priced kernel by kernel from its shapes */
                if (pa.precision == PREC_FP8 && !(shaped && prof_fp8(t))) {
                    rc = cli_usage_error("plan", "--precision fp8 needs a device type with an FP8 peak (peak_fp8_flops) and an FP8 kernel model (kernels.fp8_gemm_efficiency), as the H100-80GB preset has (docs/compute.md, \"FP8\")");
                    goto done;
                }
                if (pa.attention == PROF_ATTN_FUSED && !shaped) {
                    rc = cli_usage_error("plan", "%s", fused_needs);
                    goto done;
                }
                if (wgrad_acc > 0 && !shaped) {
                    rc = cli_usage_error("plan", "%s", PLAN_GRAD_ACC_NEEDS);
                    goto done;
                }
                ref_type = *t;
                ref = &ref_type;
                if (shaped)
                    snprintf(derived_from, sizeof derived_from,
                             "%s: device type \"%s\" (%d SMs, GEMM efficiency %g, memory_bw_Bps %g, %s attention; the layer costs are priced kernel by kernel from their shapes, docs/compute.md)",
                             cluster_path ? cluster_path : "--device", t->name, t->kernels.sms,
                             t->kernels.gemm_efficiency, t->mem_bw_Bps,
                             pa.attention == PROF_ATTN_FUSED ? "fused" : "unfused");
                else
                    snprintf(derived_from, sizeof derived_from,
                             "%s: device type \"%s\" (peak_fp32_flops %g, efficiency %g, memory_bw_Bps %g; the layer costs are derived from it)",
                             cluster_path ? cluster_path : "--device", t->name, t->peak_fp32_flops, t->efficiency,
                             t->mem_bw_Bps);
            }
            rq.prof_origin = have_prof ? prof_path : derived_from;
            rq.model_origin = model_path ? model_path : prof_path;
            rq.cluster_origin = cluster_path ? cluster_path : "the --devices cluster (--device, --bandwidth, --latency)";
            rq.model = rs && !rank_prof ? &mdr : &md;
            rq.prof = &pf;
            rq.cluster = rs ? &clr : &cl;
            rq.ref_type = ref;
            rq.batch = (int)batch;
            rq.microbatches = (int)micro;
            rq.stages = (int)stages;
            rq.max_downsets = max_cuts;
            /* a candidate whose every plan is slower than one in hand is
             * not searched (plan_search_bound: exact, so the answer is the
             * same) */
            if (have_best) {
                double lb = plan_search_bound(&rq);
                if (lb * (1 - PLAN_BOUND_SLACK) >= res.plan.pred.iteration_s) {
                    if (tried_at + 64 < sizeof tried)
                        tried_at += (size_t)snprintf(tried + tried_at, sizeof tried - tried_at, "%st %d %s (at least %.4g s: not searched)",
                                                     tried_at ? ", " : "", tro.t, tfm_recomp_name(tro.recomp), lb);
                    model_free(&mdr);
                    cluster_free(&clr);
                    n_bounded++;
                    continue;
                }
            }
            plan_result r1;
            rc = plan_search(&rq, &r1, &e);
            if (rc) last = e;
            model_free(&mdr);
            cluster_free(&clr);
            n_tried++;
            if (n_t * n_r > 1 && tried_at + 64 < sizeof tried)
                tried_at += (size_t)snprintf(tried + tried_at, sizeof tried - tried_at, "%st %d %s %s",
                                             tried_at ? ", " : "", tro.t, tfm_recomp_name(tro.recomp),
                                             rc ? "(nothing fits)" : "");
            if (rc && (n_t * n_r == 1 || rc != CL_EINPUT)) goto fail;
            if (rc) continue;
            sum.candidates += r1.candidates;
            sum.exact_steps += r1.exact_steps;
            sum.time_prep_s += r1.time_prep_s;
            sum.time_exact_s += r1.time_exact_s;
            sum.time_lower_s += r1.time_lower_s;
            sum.time_merge_s += r1.time_merge_s;
            sum.time_rank_s += r1.time_rank_s;
            sum.time_chunks_s += r1.time_chunks_s;
            if (n_t * n_r > 1 && tried_at + 32 < sizeof tried)
                tried_at += (size_t)snprintf(tried + tried_at, sizeof tried - tried_at, "%.4g s",
                                             r1.plan.pred.iteration_s);
            r1.plan.tensor = tro.t;
            r1.plan.seq_par = tro.sp;
            r1.plan.recompute = tro.recomp;
            if (!have_best || r1.plan.pred.iteration_s < res.plan.pred.iteration_s) {
                if (have_best) plan_result_free(&res);
                res = r1;
                have_best = 1;
            } else plan_result_free(&r1);
        }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!have_best) {
        e = last;
        rc = e.code ? e.code : CL_EINPUT;
        goto fail;
    }
    rc = CL_OK; /* a candidate that found nothing does not fail the question */
    if (n_t * n_r > 1 && n_bounded)
        fprintf(msg, "tensor and recomputation search (%d candidates, %d not searched: no plan of theirs can beat one found): %s\n",
                n_tried + n_bounded, n_bounded, tried);
    else if (n_t * n_r > 1)
        fprintf(msg, "tensor and recomputation search (%d candidates): %s\n", n_tried, tried);
    print_plan(msg, &rq, &res, quick);
    /* every part of the search the clock can tell apart, listing a DAG's
     * cuts (which can take seconds) included; over a tensor and
     * recomputation search, the sums over its searches and what the parts
     * leave out (deriving each candidate's costs, failed searches) */
    double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    const plan_result *shown = n_t * n_r > 1 ? &sum : &res;
    char over[64] = "";
    if (n_t * n_r > 1) snprintf(over, sizeof over, "%d searches: ", n_tried);
    fprintf(msg, "planned in %.3f s (%s%d candidates, %lld exact-search steps; cuts %.3f s, exact %.3f s, "
           "bounds %.3f s, merge %.3f s, ranking %.3f s",
           wall, over, shown->candidates, (long long)shown->exact_steps, shown->time_prep_s, shown->time_exact_s,
           shown->time_lower_s, shown->time_merge_s, shown->time_rank_s);
    if (shown->time_chunks_s > 0) fprintf(msg, ", chunk splits %.3f s", shown->time_chunks_s);
    if (n_t * n_r > 1)
        fprintf(msg, ", the rest %.3f s",
                fmax(0, wall - shown->time_prep_s - shown->time_exact_s - shown->time_lower_s -
                            shown->time_merge_s - shown->time_rank_s - shown->time_chunks_s));
    fprintf(msg, ")\n");
    fflush(msg);
    if (out) {
        rc = plan_save(&res.plan, out, &e);
        if (!rc) fprintf(msg, "wrote %s\n", out);
    }
    if (!rc && pa.json && !(out && !strcmp(out, "-"))) rc = plan_save(&res.plan, "-", &e);
    plan_result_free(&res);
    if (rc) goto fail;
    goto done;
fail:
    rc = cli_report(&e);
done:
    model_free(&md);
    model_free(&mdr);
    prof_free(&pf);
    cluster_free(&cl);
    cluster_free(&clr);
    return rc;
}
