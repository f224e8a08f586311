/* cmd_sim.c - `cleave sim PLAN [options]`: replay a plan's schedule event by
 * event (sim/sim.h) and print the iteration time, throughput, bubble, per
 * device busy/idle/communication-wait fractions, peak memory and bytes per
 * link level; optionally a Chrome trace and the op lists themselves. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/schedule.h"
#include "sim/sim.h"
#include "base/budget.h"
#include "base/escape.h"
#include "cli.h"
#include "layout_cli.h"
#include "base/jsonx.h"
#include "base/units.h"

typedef struct sim_args {
    const char *plan, *schedule, *trace, *dump;
    int64_t micro, iters, max_events;
    double max_wall;
    int comm_off, json;
    int precision, zero;    /* -1: as the plan says */
    int grad_reduce;        /* --grad-reduce-bytes; 0: as the plan says */
    cli_list args;          /* PLAN.json */
    /* --layout instead of PLAN.json (layout_cli.h) */
    const char *layout, *model, *cluster, *device, *bandwidth, *latency;
    int64_t devices, per_node, batch;
    int optimizer, attention, grad_acc; /* grad_acc: --grad-accumulation, 1 separate */
    const char *framework;  /* --for with --layout, as given */
} sim_args;

#define SA sim_args
static const cli_opt sim_table[] = {
    {"schedule", 0, CLI_STR, CLI_FIELD(SA, schedule), .arg = "KIND|FILE",
     .help = "simulate another kind (sequential, gpipe, 1f1b, interleaved,\n"
             "zb-h1, pipedream, fbp) or an explicit schedule file\n"
             "(\"format\": \"cleave-schedule\", docs/formats.md)"},
    {"microbatches", 0, CLI_INT, CLI_FIELD(SA, micro), 1, 1 << 24, .arg = "M",
     .help = "M microbatches of the plan's microbatch size"},
    {"iterations", 0, CLI_INT, CLI_FIELD(SA, iters), 1, 1 << 20, .arg = "N",
     .help = "iterations to simulate (default 1; asynchronous kinds:\n"
             "warm-up + 4, and the steady state is measured after warm-up)"},
    /* comm_off: -1 follows the plan */
    {"comm", 0, CLI_ENUM, CLI_FIELD(SA, comm_off), .words = "on|off", .arg = "on|off",
     .help = "off: transfers and all-reduces take no time (default: as\n"
             "the plan was made, see cleave plan --comm)"},
    /* precision, zero: -1 follows the plan */
    {"precision", 0, CLI_ENUM, CLI_FIELD(SA, precision), .words = "auto|fp32|mixed|fp8",
     .help = "model state in fp32, or mixed (16-bit weights, fp32 gradients,\n"
             "master weights and moments); auto: from the model's element\n"
             "size (default: as the plan says)"},
    {"zero", 0, CLI_INT, CLI_FIELD(SA, zero), 0, PLAN_ZERO_MAX, .arg = "0|1|2",
     .help = "ZeRO stage over each stage's replicas (default: as the plan says)"},
    {"grad-reduce-bytes", 0, CLI_INT, CLI_FIELD(SA, grad_reduce), 2, PLAN_GRAD_REDUCE_MAX, .arg = "2|4",
     .help = "bytes per gradient element of the data-parallel all-reduce\n"
             "(default: as the plan says; see cleave plan)"},
    {"layout", 0, CLI_STR, CLI_FIELD(SA, layout), .arg = "SPEC",
     .help = "simulate this configuration instead of a plan file, as\n"
             "cleave plan --layout evaluates it (with --model and --cluster\n"
             "or --devices N --device TYPE ...)"},
    {"model", 0, CLI_STR, CLI_FIELD(SA, model), .help = NULL},
    {"cluster", 0, CLI_STR, CLI_FIELD(SA, cluster), .help = NULL},
    {"devices", 0, CLI_INT, CLI_FIELD(SA, devices), 1, CLUSTER_MAX_DEVICES, .help = NULL},
    {"per-node", 0, CLI_INT, CLI_FIELD(SA, per_node), 1, CLUSTER_MAX_DEVICES, .help = NULL},
    {"bandwidth", 0, CLI_STR, CLI_FIELD(SA, bandwidth), .help = NULL},
    {"latency", 0, CLI_STR, CLI_FIELD(SA, latency), .help = NULL},
    {"device", 0, CLI_STR, CLI_FIELD(SA, device), .help = NULL},
    {"batch", 0, CLI_INT, CLI_FIELD(SA, batch), 1, 1 << 30, .help = NULL},
    {"optimizer", 0, CLI_ENUM, CLI_FIELD(SA, optimizer), .words = "sgd|momentum|adam", .help = NULL},
    {"attention", 0, CLI_ENUM, CLI_FIELD(SA, attention), .words = "unfused|fused", .help = NULL},
    {"grad-accumulation", 0, CLI_ENUM, CLI_FIELD(SA, grad_acc), .words = "fused|separate", .help = NULL},
    {"for", 0, CLI_STR, CLI_FIELD(SA, framework), .help = NULL},
    {"trace", 0, CLI_STR, CLI_FIELD(SA, trace), .arg = "FILE",
     .help = "write a Chrome trace (open in Perfetto or chrome://tracing)"},
    {"dump-schedule", 0, CLI_STR, CLI_FIELD(SA, dump), .arg = "FILE",
     .help = "write the per-device op lists as a cleave-schedule file"},
    {"json", 0, CLI_FLAG, CLI_FIELD(SA, json), .help = "print the results as JSON"},
    {"max-events", 0, CLI_INT, CLI_FIELD(SA, max_events), 1, INT64_MAX, .arg = "N",
     .help = "stop with an error after N events (default {})"},
    {"max-seconds", 0, CLI_NUM, CLI_FIELD(SA, max_wall), .lo = 0, .hi = 1e7, .arg = "S",
     .help = "stop with an error after S seconds of real time, building the\n"
             "op lists included (default {})"},
};
#undef SA
static const cli_spec sim_spec = {"sim", sim_table, CLI_N(sim_table), CLI_AT(sim_args, args), .help_col = 25};

static int help(void)
{
    sim_args d = {.max_events = (int64_t)SIM_MAX_EVENTS, .max_wall = SIM_MAX_WALL_S};
    printf("usage: cleave sim PLAN.json [options]\n"
           "       cleave sim --layout t=T,p=P,d=D,... --model M.json (--cluster C.json |\n"
           "                  --devices N --device TYPE [--per-node K] [--bandwidth B[,B2]])\n"
           "                  [--batch B] [--optimizer sgd|momentum|adam] [--attention unfused|fused]\n"
           "                  [--grad-accumulation fused|separate] [--for torch|deepspeed|megatron]\n"
           "                  [options]\n\n"
           "Simulates the plan's pipeline schedule event by event (compute streams, links with\n"
           "bandwidth sharing, ring all-reduce of replicated stages, memory over time) and\n"
           "prints the predicted iteration time, throughput, bubble, per-device busy / idle /\n"
           "communication-wait fractions, peak memory and bytes sent per link level.\n\n");
    cli_help(&sim_spec, &d, stdout);
    return 0;
}

static int parse(int argc, char **argv, sim_args *a)
{
    memset(a, 0, sizeof *a);
    a->comm_off = -1; /* follow the plan */
    a->precision = -1;
    a->zero = -1;
    a->max_wall = SIM_MAX_WALL_S;
    int rc = cli_parse(&sim_spec, argc, argv, a, 0);
    if (rc) return rc == CLI_HELP ? help() - 1 : rc;
    if (a->args.n > 1)
        return cli_usage_error("sim", "one plan at a time (got %s and %s)", a->args.v[0], a->args.v[1]);
    int from_layout = a->layout || a->model || a->cluster || a->devices || a->per_node || a->bandwidth ||
                      a->latency || a->device || a->batch || a->optimizer || a->attention || a->grad_acc ||
                      a->framework;
    if (from_layout && (!a->layout || a->args.n))
        return cli_usage_hint("sim", "either PLAN.json, or --layout SPEC with --model and the cluster",
                              "--model, --cluster, --devices, --batch and the other inputs of a layout go with --layout, not a plan file");
    if (a->layout && (a->zero >= 0 || a->micro))
        return cli_usage_hint("sim", "zero= and m= in the layout", "--zero and --microbatches come from the layout");
    if (a->grad_reduce == 3) return cli_usage_error("sim", "--grad-reduce-bytes 3: expected 2 or 4");
    if (a->framework && plan_for_from_name(a->framework) < 0) {
        char *shown = esc_term(a->framework); /* argv: no control byte to the terminal */
        rc = cli_usage_error("sim", "--for: unknown framework \"%s\" (torch, deepspeed, megatron)", shown);
        free(shown);
        return rc;
    }
    if (!a->args.n && !a->layout) return cli_usage_error("sim", "missing PLAN.json");
    a->plan = a->layout ? "--layout" : a->args.v[0];
    /* stdout carries one machine-readable output at most; the table then
     * goes to stderr (cmd_sim) */
    int on_stdout = a->json + (a->trace && !strcmp(a->trace, "-")) + (a->dump && !strcmp(a->dump, "-"));
    if (on_stdout > 1)
        return cli_usage_error("sim", "--json, --trace - and --dump-schedule - each write stdout: give one of them");
    return 0;
}

/* ---------------------------------------------------------------- output -- */

/* "512 B", "3.13 GiB": up to PiB, two decimals. */
static const cl_bytes_style sim_bytes = {.hi = CL_PIB, .prec = 2};

static const char *time_str(double s, char *buf, size_t cap)
{
    if (s >= 1) snprintf(buf, cap, "%.4g s", s);
    else if (s >= 1e-3) snprintf(buf, cap, "%.4g ms", s * 1e3);
    else snprintf(buf, cap, "%.4g us", s * 1e6);
    return buf;
}

/* The stages held by device d, as "0" or "1,5" (the sequential kind: all). */
static void stages_str(const plan *p, const sched *sc, int d, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (int s = 0; s < p->n_stages && n + 12 < cap; s++) {
        int holds = sc->kind == SCHED_SEQUENTIAL;
        for (int q = 0; q < p->stages[s].n_replicas && !holds; q++) holds = p->stages[s].devices[q] == d;
        if (holds) n += (size_t)snprintf(buf + n, cap - n, n ? ",%d" : "%d", s);
    }
    if (sc->kind == SCHED_SEQUENTIAL && p->n_stages > 3) snprintf(buf, cap, "0-%d", p->n_stages - 1);
}

static const char *kind_str(int kind) { return kind >= 0 ? sched_kind_name((sched_kind)kind) : "explicit"; }

static void print_table(FILE *f, const sim_args *a, const plan *p, const sched *sc, const sim_result *r)
{
    char b1[32], b2[32], b3[32], st[64];
    fprintf(f, "%s: %d stages on %d devices, schedule %s, %d microbatches x %d %s per iteration\n",
           a->plan, p->n_stages, r->n_dev, kind_str(r->kind), r->n_micro,
           p->microbatch > 0 ? p->microbatch : 1, model_unit_plural(p->model.unit));
    if (plan_per_rank(p)) {
        /* the plan is the per-rank question (planner/tensor.h): its devices
         * are tensor-parallel groups, its figures one GPU's */
        char layout[96];
        plan_layout_str(p, layout, sizeof layout);
        fprintf(f, "tensor %d%s, recompute %s: each device is a group of %d GPU%s, figures per GPU; %s\n",
                plan_tensor(p), p->seq_par ? " with sequence parallelism" : "",
                p->recompute == 2 ? "full" : p->recompute == 1 ? "selective" : "none", plan_tensor(p),
                plan_tensor(p) == 1 ? "" : "s", layout);
        char cpl[192];
        plan_cp_str(p, r->throughput, cpl, sizeof cpl);
        if (cpl[0]) fprintf(f, "%s\n", cpl);
    }
    if (r->warmup_iters)
        fprintf(f, "simulated %d iterations; steady state measured over %d (after %d of warm-up%s)\n",
               r->n_iter, r->measured_iters, r->warmup_iters,
               r->n_iter - r->warmup_iters > r->measured_iters ? ", before the drain" : "");
    else
        fprintf(f, "simulated %d iteration%s%s\n", r->n_iter, r->n_iter > 1 ? "s" : "",
               a->comm_off ? ", communication off" : "");
    fprintf(f, "iteration %s   throughput %.6g %s/s   bubble %.2f%%   comm-wait %.2f%%\n",
           time_str(r->iteration_s, b1, sizeof b1), r->throughput, model_unit_plural(p->model.unit),
           100 * r->bubble, 100 * r->comm_wait);
    fprintf(f, "speed-up %.3fx over sequential (%s per iteration on one device)\n", r->speedup,
           time_str(r->sequential_s, b2, sizeof b2));
    char line[256];
    if (plan_state_describe(p, line, sizeof line)) fprintf(f, "model state: %s\n", line);
    if (plan_grad_reduce_describe(p, line, sizeof line)) fprintf(f, "gradient reduction: %s\n", line);
    if (sc->blocking_p2p) /* docs/simulator.md, "Blocking transfers: DeepSpeed's pipeline" */
        fprintf(f, "pipeline transfers: blocking, in DeepSpeed's order (a stage computes nothing while it sends or receives)\n");
    fputc('\n', f);
    fprintf(f, "%-6s %-16s %-8s %7s %7s %7s %12s %11s %6s %8s %12s\n", "device", "id", "stages", "busy",
           "idle", "comm", "peak memory", "at", "stash", "versions", "sent");
    for (int i = 0; i < r->n_dev; i++) {
        const sim_dev_result *d = &r->dev[i];
        stages_str(p, sc, d->device, st, sizeof st);
        fprintf(f, "%-6d %-16.16s %-8.8s %6.2f%% %6.2f%% %6.2f%% %12s %11s %6d %8d %12s\n", d->device,
               p->cluster.devices[d->device].id, st, 100 * d->busy, 100 * d->idle, 100 * d->comm_wait,
               cl_fmt_bytes(b1, sizeof b1, d->peak_mem_bytes, sim_bytes), time_str(d->peak_t_s, b2, sizeof b2),
               d->peak_stash, d->peak_versions, cl_fmt_bytes(b3, sizeof b3, d->sent_bytes, sim_bytes));
    }
    fprintf(f, "\nlinks: %s within nodes, %s between nodes (whole run)\n",
            cl_fmt_bytes(b1, sizeof b1, r->sent_bytes[CLUSTER_INTRA], sim_bytes),
            cl_fmt_bytes(b2, sizeof b2, r->sent_bytes[CLUSTER_INTER], sim_bytes));
    fprintf(f, "%llu events\n", (unsigned long long)r->events);
}

static cJSON *mem_json(const sim_mem *m)
{
    const cli_json_num v[] = {
        {"weights_bytes", m->weights},   {"grads_bytes", m->grads}, {"optimizer_bytes", m->optim},
        {"versions_bytes", m->versions}, {"stash_bytes", m->stash}, {"buffers_bytes", m->buffers},
    };
    return cli_json_add_numbers(cJSON_CreateObject(), v, CLI_N(v));
}

static int print_json(const sim_args *a, const plan *p, const sched *sc, const sim_result *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", "cleave-sim");
    cJSON_AddNumberToObject(o, "version", 1);
    cJSON_AddStringToObject(o, "plan", a->plan);
    cJSON_AddStringToObject(o, "schedule", kind_str(r->kind));
    const cli_json_num counts[] = {
        {"microbatches", r->n_micro},            {"iterations", r->n_iter},
        {"warmup_iterations", r->warmup_iters}, {"measured_iterations", r->measured_iters},
    };
    cli_json_add_numbers(o, counts, CLI_N(counts));
    cJSON_AddBoolToObject(o, "comm", !a->comm_off);
    if (plan_per_rank(p)) {
        /* the per-rank question: devices are groups of t GPUs */
        cJSON_AddNumberToObject(o, "tensor", plan_tensor(p));
        cJSON_AddBoolToObject(o, "sequence_parallel", p->seq_par);
        if (plan_context(p) > 1) cJSON_AddNumberToObject(o, "context", plan_context(p));
        cJSON_AddNumberToObject(o, "gpus", (double)plan_tensor(p) * plan_device_count(p));
    }
    const cli_json_num figures[] = {
        {"samples_per_iteration", r->samples}, {"iteration_s", r->iteration_s},
        {"throughput", r->throughput},         {"bubble", r->bubble},
        {"comm_wait", r->comm_wait},           {"sequential_s", r->sequential_s},
        {"speedup", r->speedup},               {"makespan_s", r->makespan_s},
    };
    cli_json_add_numbers(o, figures, CLI_N(figures));
    cJSON *sent = cJSON_AddObjectToObject(o, "sent_bytes");
    cJSON_AddNumberToObject(sent, "intra", r->sent_bytes[CLUSTER_INTRA]);
    cJSON_AddNumberToObject(sent, "inter", r->sent_bytes[CLUSTER_INTER]);
    cJSON_AddNumberToObject(o, "events", (double)r->events);
    cJSON *devs = cJSON_AddArrayToObject(o, "devices");
    for (int i = 0; i < r->n_dev; i++) {
        const sim_dev_result *d = &r->dev[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "device", d->device);
        cJSON_AddStringToObject(x, "id", p->cluster.devices[d->device].id);
        cJSON *st = cJSON_AddArrayToObject(x, "stages");
        for (int s = 0; s < p->n_stages; s++) {
            int holds = sc->kind == SCHED_SEQUENTIAL;
            for (int q = 0; q < p->stages[s].n_replicas && !holds; q++) holds = p->stages[s].devices[q] == d->device;
            if (holds) cJSON_AddItemToArray(st, cJSON_CreateNumber(s));
        }
        const cli_json_num load[] = {
            {"busy", d->busy},         {"idle", d->idle},         {"comm_wait", d->comm_wait},
            {"busy_s", d->busy_s},     {"idle_s", d->idle_s},     {"comm_wait_s", d->comm_wait_s},
            {"peak_mem_bytes", d->peak_mem_bytes}, {"peak_t_s", d->peak_t_s},
        };
        cli_json_add_numbers(x, load, CLI_N(load));
        cJSON_AddItemToObject(x, "memory_at_peak", mem_json(&d->at_peak));
        const cli_json_num peaks[] = {
            {"peak_stash", d->peak_stash}, {"peak_versions", d->peak_versions}, {"sent_bytes", d->sent_bytes},
        };
        cli_json_add_numbers(x, peaks, CLI_N(peaks));
        cJSON_AddItemToArray(devs, x);
    }
    return jx_puts(o);
}

/* ------------------------------------------------------------------ run -- */

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The schedule builder and the simulator do not know the files: their
 * messages begin with what they are about ("plan: ", "cluster: ",
 * "schedule: ").  Put the file in front: the plan's for the plan and its
 * cluster (and for op lists built from it), the schedule file's for the op
 * lists of an explicit schedule. */
static void name_file(cl_err *e, const char *plan_file, const char *sched_file)
{
    const char *file = NULL;
    size_t skip = 0;
    if (!strncmp(e->msg, "plan: ", 6)) file = plan_file, skip = 6;
    else if (!strncmp(e->msg, "cluster: ", 9)) file = plan_file;
    else if (!strncmp(e->msg, "schedule: ", 10)) {
        file = sched_file ? sched_file : plan_file;
        skip = sched_file ? 10 : 0;
    }
    if (!file) { /* the run's own messages (budgets): about the plan simulated */
        size_t n = strlen(plan_file);
        if (!strncmp(e->msg, plan_file, n) && e->msg[n] == ':') return; /* named already */
        file = plan_file;
    }
    char buf[sizeof e->msg];
    snprintf(buf, sizeof buf, "%s: %s", file, e->msg + skip);
    memcpy(e->msg, buf, sizeof buf);
}

/* Build or load the op lists the options ask for. */
static int get_schedule(const sim_args *a, plan *p, sched *sc, cl_err *e)
{
    if (a->micro) {
        p->n_micro = (int)a->micro;
        p->batch = (p->microbatch > 0 ? p->microbatch : 1) * p->n_micro;
    }
    int kind = p->schedule;
    if (a->schedule) {
        kind = sched_kind_from_name(a->schedule);
        if (kind < 0) {
            if (a->micro || a->iters)
                return cl_fail(e, CL_EINPUT, "--microbatches and --iterations come from the schedule "
                               "file %s (hint: edit the file, or give a kind name)", a->schedule);
            return sched_load(p, a->schedule, sc, e);
        }
        p->schedule = (sched_kind)kind;
    }
    int depth = sched_fill_depth(p); /* positions x widest replicas */
    int iters = a->iters ? (int)a->iters : sched_default_iters((sched_kind)kind, depth, p->n_micro);
    int warm = sched_warmup_iters((sched_kind)kind, depth, p->n_micro);
    if (a->iters && warm && iters <= warm)
        return cl_fail(e, CL_EINPUT, "--iterations: %s needs more than %d iterations to reach a steady "
                       "state with %d stages and %d microbatches (hint: --iterations %d or more)",
                       sched_kind_name((sched_kind)kind), warm, p->n_stages / (p->chunks > 1 ? p->chunks : 1),
                       p->n_micro, warm + 1);
    return sched_build(p, (sched_kind)kind, p->n_micro, iters, sc, e);
}

int cmd_sim(int argc, char **argv)
{
    sim_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    cl_err e = {0};
    /* the real-time budget covers building the op lists as well as the run */
    double budget = a.max_wall, t0 = wall_now();
    cl_budget_start(budget, "--max-seconds");
    plan p;
    char nofit[320] = "";
    if (a.layout) {
        layout_inputs in = {.cmd = "sim", .layout = a.layout, .model = a.model, .cluster = a.cluster,
                            .device = a.device, .bandwidth = a.bandwidth, .latency = a.latency,
                            .devices = a.devices, .per_node = a.per_node, .batch = a.batch,
                            .optimizer = a.optimizer, .precision = a.precision > 0 ? a.precision : 0,
                            .zero = -1, .comm = a.comm_off != 1, .attention = a.attention,
                            .grad_acc = a.grad_acc, .grad_reduce = a.grad_reduce,
                            .framework = a.framework ? plan_for_from_name(a.framework) : PLAN_FOR_ANY};
        plan_result res;
        char links[256];
        if ((rc = layout_cli_eval(&in, &res, links, sizeof links, nofit, sizeof nofit, &e)))
            return e.code ? cli_report(&e) : rc;
        p = res.plan; /* the notes stay behind: sim prints its own figures */
    } else if ((rc = plan_load(&p, a.plan, &e))) return cli_report(&e);
    /* a plan file's stage times were priced when it was planned: fp8 (or
     * back from it) would change only the name beside them */
    if (!a.layout && a.precision >= 0 && (a.precision == PREC_FP8) != (p.precision == PREC_FP8)) {
        plan_free(&p);
        return cli_usage_error("sim", "--precision fp8 re-prices the GEMMs, which a plan file holds already priced: plan with --precision fp8, or give sim a --layout");
    }
    if (a.comm_off < 0) a.comm_off = p.comm_off;
    if (a.precision >= 0) p.precision = (plan_prec)a.precision;
    if (a.zero >= 0) p.zero = a.zero;
    if (a.grad_reduce > 0) p.grad_reduce = a.grad_reduce;
    sched sc = {0};
    sim *s = NULL;
    sim_result r = {0};
    rc = get_schedule(&a, &p, &sc, &e);
    double left = budget - (wall_now() - t0);
    if (!rc && !(left > 0)) /* the op lists were done just as it ran out */
        rc = cl_fail(&e, CL_EINPUT, "%s: building the op lists took %.3g s: wall-time budget "
                     "exhausted (hint: raise --max-seconds, or simulate fewer microbatches or "
                     "iterations)", a.plan, wall_now() - t0);
    if (!rc) {
        sim_opts o = {.comm_off = a.comm_off, .record = a.trace != NULL,
                      .max_events = (uint64_t)a.max_events, .max_wall_s = left};
        s = sim_create(&p, &sc, &o, &e);
        if (!s) rc = e.code ? e.code : CL_EINPUT;
    }
    if (!rc) rc = sim_run(s, &r, &e);
    if (!rc && a.trace) rc = sim_write_trace(s, a.trace, &e);
    if (!rc && a.dump) rc = sched_save(&sc, a.dump, &e);
    FILE *msg = (a.trace && !strcmp(a.trace, "-")) || (a.dump && !strcmp(a.dump, "-")) ? stderr : stdout;
    if (!rc) rc = a.json ? print_json(&a, &p, &sc, &r) : (print_table(msg, &a, &p, &sc, &r), CL_OK);
    if (rc && e.code) {
        int explicit = a.schedule && sched_kind_from_name(a.schedule) < 0;
        name_file(&e, a.plan, explicit ? a.schedule : NULL);
        cli_report(&e);
    }
    else if (rc) fprintf(stderr, "cleave: out of memory printing the results\n");
    if (!rc && nofit[0]) {
        fprintf(stderr, "cleave: sim: --layout %s (hint: more GPUs, a larger t or p, recompute=full, zero=1 or 2, or a smaller mb)\n",
                nofit);
        rc = 1;
    }
    sim_result_free(&r);
    sim_destroy(s);
    sched_free(&sc);
    plan_free(&p);
    return rc;
}
