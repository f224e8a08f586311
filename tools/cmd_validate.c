/* cmd_validate.c - `cleave validate --plan plan.json`: predict a plan's
 * iteration time, per-worker busy time and peak memory with the simulator
 * from costs profiled on this machine, run it for real with the pipelined
 * runtime, and print predicted against measured (bench/validate.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>
#include <mpi.h>

#include "exec/probe/linkprof.h"
#include "exec/run/pipeline.h"
#include "exec/run/tp_mpi.h"
#include "bench/validate.h"
#include "profiles/cluster.h"
#include "profiles/profile.h"
#include "cli.h"
#include "base/escape.h"
#include "base/jsonx.h"
#include "base/measure.h"
#include "base/units.h"
#include "models/tfm_rank.h"

#define DEFAULT_ITERS 20
#define DEFAULT_REPS 20

typedef struct val_args {
    const char *plan, *profile, *links, *trace, *sim_trace;
    int64_t iters, reps;
    int json, layer_costs;
    int backend;            /* exec_pipe_backend */
    int tensor_over;        /* 0 threads, 1 mpi (exec_pipe_opts.tensor_mpi) */
    cli_list args;          /* refused with a hint */
} val_args;

_Static_assert(EXEC_PIPE_THREADS == 0 && EXEC_PIPE_MPI == 1, "--backend's words");
#define VA val_args
static const cli_opt val_opts[] = {
    {"plan", 0, CLI_STR, CLI_FIELD(VA, plan), .arg = "FILE",
     .help = "the plan (cleave plan); its model must be one the executor runs"},
    {"profile", 0, CLI_STR, CLI_FIELD(VA, profile), .arg = "FILE",
     .help = "per-layer costs of this model on this machine (cleave profile\n"
             "at the plan's microbatch size); default: profile now"},
    {"links", 0, CLI_STR, CLI_FIELD(VA, links), .arg = "FILE",
     .help = "a cluster file whose intra-node link is used for transfers\n"
             "(cleave profile --links); default: measure the link now"},
    {"iterations", 0, CLI_INT, CLI_FIELD(VA, iters), 1, 100000, .arg = "N",
     .help = "iterations to run and simulate (default {})"},
    {"backend", 0, CLI_ENUM, CLI_FIELD(VA, backend), .words = "threads|mpi", .arg = "B",
     .help = "threads (default) or mpi (one rank per worker; started through\n"
             "mpirun when this process is not in an MPI job)"},
    {"tensor-over", 0, CLI_ENUM, CLI_FIELD(VA, tensor_over), .words = "threads|mpi", .arg = "H",
     .help = "a tensor-parallel plan's ranks: threads (default: a crew\n"
             "of threads per worker) or mpi (with --backend mpi: one\n"
             "rank per tensor rank, workers x tensor ranks in all)"},
    {"json", 0, CLI_FLAG, CLI_FIELD(VA, json), .help = "print {quantity: {predicted, measured, error}} as JSON"},
    {"trace", 0, CLI_STR, CLI_FIELD(VA, trace), .arg = "FILE", .help = "write the measured timeline (Chrome trace)"},
    {"sim-trace", 0, CLI_STR, CLI_FIELD(VA, sim_trace), .arg = "FILE",
     .help = "write the predicted timeline (Chrome trace, same tracks)"},
    {"reps", 0, CLI_INT, CLI_FIELD(VA, reps), 1, 100000, .arg = "N",
     .help = "timed steps per profiled pass and optimiser step (default {})"},
    {"layer-costs", 0, CLI_FLAG, CLI_FIELD(VA, layer_costs),
     .help = "predict from the profile's per-layer sums alone (the planner's\n"
             "cost model) instead of each stage's passes timed whole in the\n"
             "run's context (a stash deeper than the cache slows every pass)"},
};
#undef VA
static const cli_spec val_spec = {"validate", val_opts, CLI_N(val_opts), .args = CLI_AT(val_args, args),
                                  .help_col = 21};

/* The options' values before argv. */
static void defaults(val_args *a)
{
    *a = (val_args){.iters = DEFAULT_ITERS, .reps = DEFAULT_REPS};
}

static void help(void)
{
    val_args d;
    defaults(&d);
    printf("usage: cleave validate --plan PLAN.json [--profile P.json] [--links CLUSTER.json]\n"
           "                       [--iterations N] [--backend threads|mpi]\n"
           "                       [--tensor-over threads|mpi] [--json]\n"
           "                       [--trace FILE] [--sim-trace FILE] [--reps N] [--layer-costs]\n\n"
           "Predicts the plan's iteration time, per-worker busy time and peak memory with the\n"
           "simulator, from costs of this machine, then trains the plan for N iterations with\n"
           "the pipelined runtime (synthetic data of the model's shape) and prints predicted\n"
           "against measured with the relative error (predicted - measured) / measured.\n\n");
    cli_help(&val_spec, &d, stdout);
}

static int parse(int argc, char **argv, val_args *a)
{
    const char *cmd = "validate";
    defaults(a);
    int rc = cli_parse(&val_spec, argc, argv, a, 0);
    if (rc == CLI_HELP) help();
    if (rc) return rc;
    if (a->args.n) return cli_usage_error(cmd, "unexpected argument \"%s\" (hint: --plan FILE)", a->args.v[0]);
    if (!a->plan) return cli_usage_error(cmd, "--plan FILE is required");
    if (a->tensor_over && a->backend != EXEC_PIPE_MPI)
        return cli_usage_error(cmd, "--tensor-over mpi runs tensor ranks as MPI processes; add --backend mpi");
    return 0;
}

/* ------------------------------------------------------------- output -- */

static const char *time_str(double s, char *buf, size_t cap)
{
    if (!isfinite(s)) snprintf(buf, cap, "-");
    else if (fabs(s) >= 1) snprintf(buf, cap, "%.4g s", s);
    else if (fabs(s) >= 1e-3) snprintf(buf, cap, "%.4g ms", s * 1e3);
    else snprintf(buf, cap, "%.4g us", s * 1e6);
    return buf;
}

/* "512 B", "1.234 MiB": up to TiB, three decimals. */
static const cl_bytes_style val_bytes = {.hi = CL_TIB, .prec = 3};

static void row(const char *name, const exec_val_qty *q, int bytes)
{
    char p[32], m[32];
    if (bytes) {
        cl_fmt_bytes(p, sizeof p, q->predicted, val_bytes);
        cl_fmt_bytes(m, sizeof m, q->measured, val_bytes);
    } else {
        time_str(q->predicted, p, sizeof p);
        time_str(q->measured, m, sizeof m);
    }
    printf("  %-34s %14s %14s %+9.2f%%\n", name, p, m, 100 * q->error);
}

/* What the prediction was built from, for the table's header. */
typedef struct val_ctx {
    const val_args *a;
    const plan *p;
    const exec_val_extra *extra;
    exec_val_extra *extra_rw;  /* the same array, filled by get_link      */
    int link_measured, link_used;
    exec_link_fit fit;
    double fit_max_bytes;
    cluster_link link, sim_link, tp_link; /* tp_link: the all-reduces' ring (t > 1) */
    double tp_ar_s;         /* t > 1: one all-reduce's cost to rank 0 in the
                               replay (the first stage that measured it), 0: none */
    const char *plan_shown; /* the plan's path as the terminal may show it */
    double post_s;          /* a SEND's cost on the sender's stream      */
    double handoff_s;       /* post to the receiver holding it (probe)  */
    char why[1024];         /* why the link fit is poor ("" when it is not) */
    double others_load;     /* the machine's CPU other processes took while the
                               plan ran, 0..1 (cl_load_others); NAN unknown */
    const char *cost_source;
    int tpm;                /* the run's tensor ranks are MPI processes */
} val_ctx;

static void print_table(const val_ctx *c, const exec_val_report *r)
{
    const plan *p = c->p;
    char b1[32], b2[64];
    int P = p->n_stages / (p->chunks > 1 ? p->chunks : 1);
    printf("%s: %s, %d stage%s (%d chunk%s) on %d workers, schedule %s, %d microbatches x %d samples\n",
           c->plan_shown, p->model.name, P, P > 1 ? "s" : "", p->chunks, p->chunks > 1 ? "s" : "",
           r->n_workers, sched_kind_name(p->schedule), p->n_micro, p->microbatch);
    printf("run: %s backend%s, %d iterations; steady state over iterations %d..%d\n",
           exec_pipe_backend_name(c->a->backend), c->tpm ? ", a process per tensor rank" : "",
           r->n_iter, r->first_iter, r->last_iter);
    printf("costs: layers from %s; %sthe runtime's extras measured in context:\n", c->cost_source,
           c->a->layer_costs ? "" : "each stage's passes and ");
    for (int s = 0; s < p->n_stages; s++) {
        const exec_val_extra *x = &c->extra[s];
        char b3[32], b4[32];
        printf("  stage %d: optimiser step %s, output copy %s, input gather %s", s,
               time_str(x->update_s, b1, sizeof b1), time_str(x->copy_s, b2, sizeof b2),
               time_str(x->input_s, b3, sizeof b3));
        if (x->version_s > 0 || x->swap_s > 0)
            printf(", weight version copy %s, swaps per B %s", time_str(x->version_s, b1, sizeof b1),
                   time_str(x->swap_s, b2, sizeof b2));
        printf("\n           forward, input gradient, weight gradient: layer sums %s, %s, %s",
               time_str(x->fwd_layers_s, b1, sizeof b1), time_str(x->bwd_in_layers_s, b2, sizeof b2),
               time_str(x->bwd_w_layers_s, b3, sizeof b3));
        if (x->fwd_ctx_s > 0)
            printf("; in context %s, %s, %s (used)", time_str(x->fwd_ctx_s, b1, sizeof b1),
                   time_str(x->bwd_in_ctx_s, b2, sizeof b2), time_str(x->bwd_w_ctx_s, b4, sizeof b4));
        printf("\n");
    }
    if (!c->link_used) printf("link: not used (one stage)\n");
    else if (c->link_measured) {
        printf("link: measured now (%s): latency %s, bandwidth %.3f GB/s (fit over 8 B..%s, R^2 %.4f, residuals rms %.1f%%)\n",
               exec_pipe_backend_name(c->a->backend), time_str(c->link.latency_s, b1, sizeof b1),
               c->link.bw_Bps * 1e-9, cl_fmt_bytes(b2, sizeof b2, c->fit_max_bytes, val_bytes), c->fit.r2,
               100 * c->fit.rms_rel);
        if (c->why[0]) printf("      the fit is %s\n", c->why);
    } else
        printf("link: from %s: latency %s, bandwidth %.3f GB/s\n", c->a->links,
               time_str(c->link.latency_s, b1, sizeof b1), c->link.bw_Bps * 1e-9);
    if (c->link_used) {
        printf("      a small message to a waiting receiver (measured now): %s one way, of which the send costs its sender %s, added to the F or B before it;\n",
               time_str(c->post_s + c->handoff_s, b2, sizeof b2), time_str(c->post_s, b1, sizeof b1));
        if (c->sim_link.bw_Bps >= EXEC_VAL_HANDOFF_BPS)
            printf("      the rest of the latency, %s, is simulated as a hand-off: the per-byte cost is the copy inside F\n",
                   time_str(c->sim_link.latency_s, b1, sizeof b1));
        else
            printf("      the rest of the latency, %s, and the bandwidth are simulated as a link\n",
                   time_str(c->sim_link.latency_s, b1, sizeof b1));
    }
    if (plan_tensor(p) > 1) {
        double ar = c->tp_ar_s;
        /* the collectives each stage's net made, counted
         * (exec_val_extra.coll): all-reduces, and with sequence
         * parallelism all-gathers and reduce-scatters */
        const char *what = p->seq_par ? "collective (all-gathers and reduce-scatters along the sequence, all-reduces)"
                                      : "all-reduce";
        const char *ring = p->seq_par ? "a ring" : "the planner's ring";
        printf("tensor %d: each %s priced as %s at %.3f GB/s, latency %s a step", plan_tensor(p), what,
               ring, c->tp_link.bw_Bps * 1e-9, time_str(c->tp_link.latency_s, b1, sizeof b1));
        if (ar > 0) printf(" (set so the ring costs the %s each %s cost rank 0 in the replay %s)\n",
                           time_str(ar, b2, sizeof b2), p->seq_par ? "collective" : "all-reduce",
                           c->tpm ? "over the tensor processes" : "on the crew");
        else if (c->tpm) printf(" (the MPI link's; no replay measured the %ss)\n", p->seq_par ? "collective" : "all-reduce");
        else printf(" (the message probe's; no replay measured the %ss)\n", p->seq_par ? "collective" : "all-reduce");
        double seq = 0;
        for (int s = 0; s < p->n_stages; s++) seq = fmax(seq, c->extra[s].seq_bytes);
        if (seq > 0)
            printf("sequence parallel: the gathers' scratch (up to %s a stage) is added to the predicted memory\n",
                   cl_fmt_bytes(b1, sizeof b1, seq, val_bytes));
    }
    if (p->recompute) {
        double held = 0;
        for (int s = 0; s < p->n_stages; s++) held = fmax(held, c->extra[s].recompute_bytes);
        printf("recompute %s: the costs are measured on nets that recompute as the run's do, in their input gradients",
               tfm_recomp_name((tfm_recomp)p->recompute));
        if (held > 0)
            printf("; full recomputation's scratch (up to %s a stage) is added to the predicted memory",
                   cl_fmt_bytes(b1, sizeof b1, held, val_bytes));
        printf("\n");
    }
    printf("\n  %-34s %14s %14s %10s\n", "quantity", "predicted", "measured", "error");
    row("iteration time", &r->iteration_s, 0);
    char name[128];
    for (int i = 0; i < r->n_workers; i++) {
        const exec_val_worker *w = &r->w[i];
        snprintf(name, sizeof name, "worker %d (%s) busy / iteration", i,
                 p->cluster.devices[w->device].id);
        row(name, &w->busy_s, 0);
    }
    for (int i = 0; i < r->n_workers; i++) {
        const exec_val_worker *w = &r->w[i];
        snprintf(name, sizeof name, "worker %d (%s) peak memory", i, p->cluster.devices[w->device].id);
        row(name, &w->peak_mem, 1);
    }
    printf("  %-34s %14.6g %14.6g %+9.2f%%\n", "throughput (samples/s)", r->throughput.predicted,
           r->throughput.measured, 100 * r->throughput.error);
}

/* A run is trusted when other processes took at most this share of the
 * machine's CPU while it ran: beyond it they preempt the workers and the
 * measured times are theirs as much as the plan's (bench validate on a
 * 2-core machine: errors of -58% and -69% at a load of 2 and more). */
#define VAL_OTHERS_LOAD_MAX 0.10
/* Shortest window that tells (ticks of 10 ms, a few of them off either way). */
#define VAL_LOAD_MIN_WINDOW_S 1.0

static int val_trustworthy(double others_load)
{
    return isfinite(others_load) && others_load <= VAL_OTHERS_LOAD_MAX;
}

static cJSON *qty_json(const exec_val_qty *q)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "predicted", q->predicted);
    cJSON_AddNumberToObject(o, "measured", q->measured);
    /* JSON has no infinity: an error against a zero measurement is null */
    if (isfinite(q->error)) cJSON_AddNumberToObject(o, "error", q->error);
    else cJSON_AddNullToObject(o, "error");
    return o;
}

/* docs/formats.md, "Validation results". */
static int print_json(const val_ctx *c, const exec_val_report *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", "cleave-validation");
    cJSON_AddNumberToObject(o, "version", 1);
    cJSON_AddStringToObject(o, "plan", c->a->plan);
    cJSON_AddStringToObject(o, "model", c->p->model.name);
    cJSON_AddStringToObject(o, "schedule", sched_kind_name(c->p->schedule));
    cJSON_AddStringToObject(o, "backend", exec_pipe_backend_name(c->a->backend));
    cJSON_AddNumberToObject(o, "tensor", plan_tensor(c->p));
    if (plan_tensor(c->p) > 1) cJSON_AddStringToObject(o, "tensor_over", c->tpm ? "mpi" : "threads");
    if (c->p->recompute) cJSON_AddStringToObject(o, "recompute", tfm_recomp_name((tfm_recomp)c->p->recompute));
    if (c->p->seq_par) cJSON_AddBoolToObject(o, "sequence_parallel", 1);
    /* what a collective (all-reduce; with sequence parallelism also an
     * all-gather or a reduce-scatter) cost rank 0 in the replay, on average
     * (null: not measured), and its ring */
    if (plan_tensor(c->p) > 1) {
        double ar = c->tp_ar_s;
        if (ar > 0) cJSON_AddNumberToObject(o, "allreduce_s", ar);
        else cJSON_AddNullToObject(o, "allreduce_s");
        cJSON_AddNumberToObject(o, "allreduce_bandwidth_Bps", c->tp_link.bw_Bps);
        cJSON_AddNumberToObject(o, "allreduce_latency_s", c->tp_link.latency_s);
    }
    if (isfinite(c->others_load)) cJSON_AddNumberToObject(o, "others_load", c->others_load);
    else cJSON_AddNullToObject(o, "others_load");
    if (isfinite(c->others_load)) cJSON_AddBoolToObject(o, "trustworthy", val_trustworthy(c->others_load));
    else cJSON_AddNullToObject(o, "trustworthy"); /* too short a run to tell */
    cJSON_AddItemToObject(o, "iteration_s", qty_json(&r->iteration_s));
    cJSON_AddItemToObject(o, "throughput", qty_json(&r->throughput));
    cJSON *ws = cJSON_AddArrayToObject(o, "workers");
    for (int i = 0; i < r->n_workers; i++) {
        cJSON *w = cJSON_CreateObject();
        cJSON_AddNumberToObject(w, "worker", i);
        cJSON_AddStringToObject(w, "device", c->p->cluster.devices[r->w[i].device].id);
        cJSON_AddNumberToObject(w, "stage", r->w[i].stage);
        cJSON_AddItemToObject(w, "busy_s", qty_json(&r->w[i].busy_s));
        cJSON_AddItemToObject(w, "peak_mem_bytes", qty_json(&r->w[i].peak_mem));
        cJSON_AddItemToArray(ws, w);
    }
    return jx_puts(o);
}

/* ---------------------------------------------------------------- run -- */

/* The profiled link (a file, or measured now: ranks other than 0 take
 * part in the MPI measurement), and what the simulator uses of it. */
static int get_link(val_ctx *c, plan *p, cl_err *e)
{
    /* stages exchange messages; a tensor-parallel stage's ranks all-reduce */
    c->link_used = p->n_stages > 1 || plan_tensor(p) > 1;
    if (c->a->links) {
        cluster cl;
        int rc = cluster_load(&cl, c->a->links, e);
        if (rc) return rc;
        c->link = cl.links[CLUSTER_INTRA];
        cluster_free(&cl);
    } else if (c->link_used) {
        /* fit over the sizes the plan sends: 8 B up to the power of two at
         * or above its largest transfer (at least 1 MiB, so the line has a
         * span) */
        exec_link_opts o;
        exec_link_opts_default(&o);
        o.backend = c->a->backend == EXEC_PIPE_MPI ? EXEC_LINK_MPI : EXEC_LINK_THREADS;
        uint64_t mx = (uint64_t)1 << 20;
        while ((double)mx < exec_val_max_transfer(p) && mx < EXEC_LINK_MAX_BYTES) mx *= 2;
        o.max_bytes = mx;
        o.seconds_per_size = 0.02;
        exec_link_sample s[EXEC_LINK_MAX_SIZES];
        int n = 0;
        int rc = exec_link_measure(&o, s, &n, e);
        if (rc) return rc;
        double b[EXEC_LINK_MAX_SIZES], t[EXEC_LINK_MAX_SIZES];
        for (int i = 0; i < n; i++) b[i] = s[i].bytes, t[i] = s[i].time_s;
        if ((rc = exec_link_fit_ls(b, t, NULL, n, &c->fit, e))) return rc;
        exec_link_explain(s, n, &c->fit, c->why, sizeof c->why);
        exec_link_fit_slopeless(b, t, n, &c->fit, c->why, sizeof c->why);
        c->link_measured = 1;
        c->fit_max_bytes = (double)mx;
        c->link = (cluster_link){c->fit.bw_Bps, c->fit.latency_s};
    }
    if (c->link_used) {
        int rc = exec_val_post_s(c->a->backend, &c->post_s, &c->handoff_s, e);
        if (rc) return rc;
        exec_val_add_posts(p, c->extra_rw, c->post_s);
    }
    /* threads: the hand-off is the probe's, measured with the waits the run
     * will have (a receiver spinning or asleep: exec_val_post_s); a fit
     * over all sizes mixes the two into one latency */
    cluster_link l = c->link;
    if (c->link_used && c->a->backend == EXEC_PIPE_THREADS) l.latency_s = c->post_s + c->handoff_s;
    c->sim_link = exec_val_link(&l, c->a->backend, c->post_s);
    exec_val_set_link(p, &c->sim_link);
    /* the tensor-parallel all-reduces, priced as `cleave bench validate`
     * prices them (bench/validate_bench.c, docs/validation-tp.md): the
     * planner's ring on the link's bandwidth, its latency a step set so the
     * ring costs what the all-reduces cost rank 0 in the replay on the crew
     * (exec_val_tp_link; the probe's hand-off when nothing was replayed) */
    if (plan_tensor(p) > 1) {
        /* with the ranks as processes the all-reduce is an MPI_Allgather
         * (tp_mpi.h) between ranks of the profiled MPI link: the ring on it,
         * its latency set by the replay over the processes as the crew's
         * sets it (the link's own when nothing was replayed: --layer-costs) */
        cluster_link tl = {c->link.bw_Bps, c->tpm ? c->link.latency_s : l.latency_s};
        exec_val_tp_link(p, c->extra, &tl);
        c->tp_link = tl;
        for (int s = 0; s < p->n_stages && !(c->tp_ar_s > 0); s++)
            c->tp_ar_s = c->extra[s].ar_ctx_s;
        exec_val_tp_comm(p, c->extra, &tl);
    }
    return CL_OK;
}

int cmd_validate(int argc, char **argv)
{
    val_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    cl_err e = {0};
    plan p;
    if ((rc = plan_load(&p, a.plan, &e))) return cli_report(&e);
    /* tensor and sequence parallelism run (exec_pipe_check refuses what of
     * them does not); context parallelism does not: refused before any
     * profiling, with validate's name */
    if ((rc = plan_exec_refuse(&p, a.plan, "cleave validate", &e))) {
        plan_free(&p);
        return cli_report(&e);
    }
    prof pf;
    memset(&pf, 0, sizeof pf);
    int have_prof = 0;
    rc = exec_val_check(&p, a.plan, &e);
    if (!rc && a.profile && p.recompute) {
        char *sp = esc_term(a.profile);
        rc = cl_fail(&e, CL_EINPUT, "%s: recompute: the plan recomputes (%s), and a profile file times layers that do not (hint: drop --profile; validate then profiles the recomputing layers itself)",
                     sp, tfm_recomp_name((tfm_recomp)p.recompute));
        free(sp);
    }
    if (!rc && a.profile) {
        rc = prof_load(&pf, a.profile, &e);
        have_prof = !rc;
        if (!rc) rc = prof_check_model(&pf, &p.model, a.profile, &e);
    }
    if (!rc && a.links) {
        cluster cl; /* read early: a bad file is refused before anything runs */
        rc = cluster_load(&cl, a.links, &e);
        if (!rc) cluster_free(&cl);
    }
    int workers = rc ? 0 : plan_device_count(&p);
    /* processes under MPI: one per worker, or one per tensor rank of each */
    const int tpm = !rc && a.tensor_over && plan_tensor(&p) > 1;
    const int ranks = tpm ? workers * plan_tensor(&p) : workers;
    char *shown = esc_term(a.plan); /* freed before every return below */
    /* every rank of every worker is a thread (or a process) that computes
     * at the same time as the others; with more of them than cores the run
     * measures time-sharing, which the simulator does not model */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int crowded = !rc && cores > 0 && (long)workers * plan_tensor(&p) > cores;
    if (!rc && a.backend == EXEC_PIPE_MPI && !exec_link_in_mpi_job()) {
        if (have_prof) prof_free(&pf);
        plan_free(&p);
        free(shown);
        return exec_link_mpirun(ranks, "validate", argc, argv);
    }
    int rank = 0, size = 1;
    if (!rc && a.backend == EXEC_PIPE_MPI) rc = exec_pipe_mpi_world(&rank, &size, &e);
    if (!rc && a.backend == EXEC_PIPE_MPI) /* before profiling, not after */
        rc = exec_pipe_mpi_size_check(size, workers, tpm ? plan_tensor(&p) : 1, "validate", a.plan, &e);
    if (!rc && crowded && rank == 0) /* once: under mpirun, not by the process that starts it */
        fprintf(stderr, "cleave validate: warning: %s runs %d worker%s x tensor %d = %d %s on %ld cores: they take turns on the cores, which the prediction does not model (hint: validate plans with workers x tensor <= %ld here)\n",
                shown, workers, workers == 1 ? "" : "s", plan_tensor(&p), workers * plan_tensor(&p),
                tpm ? "processes" : "threads", cores, cores);
    /* other load over profiling and the run: /proc/stat counts in ticks
     * of 10 ms, so the window must be long enough to tell */
    cl_loadmeter lm;
    cl_load_start(&lm);
    exec_val_extra *extra = cl_calloc((size_t)p.n_stages, sizeof *extra);
    val_ctx c = {.a = &a, .p = &p, .extra = extra, .extra_rw = extra, .plan_shown = shown, .tpm = tpm};
    /* tensor ranks as processes: the stages' passes replayed by the first
     * worker's group of processes, each rank its share, through the run's
     * own all-reduce (tp_mpi.h), so an all-reduce's price holds the wait
     * for a partner process as the crew's replay holds a partner thread's
     * (exec_val_replay_procs); the other workers' ranks wait */
    const int replay_procs = !rc && tpm && !a.layer_costs;
    if (replay_procs) {
        exec_tp_mpi *g = exec_tp_mpi_create(plan_tensor(&p)); /* collective over the world */
        if (rank < plan_tensor(&p))
            rc = exec_val_replay_procs(&p, (int)a.reps, exec_tp_mpi_comm(g), extra, a.plan, &e);
        exec_tp_mpi_destroy(g, 1);
    }
    /* costs: rank 0 times the layers and the optimiser steps alone */
    if (!rc && rank == 0) {
        if (!have_prof) {
            rc = exec_val_profile(&p, (int)a.reps, &pf, a.plan, &e);
            have_prof = !rc;
            c.cost_source = "a profile taken now at the plan's microbatch size";
        } else c.cost_source = a.profile;
        if (!rc) rc = exec_val_costs(&p, &pf, (int)a.reps,
                                      a.layer_costs ? 0
                                      : a.backend == EXEC_PIPE_THREADS
                                          ? EXEC_VAL_CTX_REPLAY | EXEC_VAL_CTX_XCORE
                                          : EXEC_VAL_CTX_REPLAY |
                                                (tpm ? EXEC_VAL_CTX_TP_MPI | EXEC_VAL_CTX_REPLAYED : 0),
                                      extra, a.plan, &e);
    }
    if (a.backend == EXEC_PIPE_MPI && size > 1) {
        /* every rank learns whether rank 0 failed, then they go on together */
        int bad = rc != 0;
        MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (bad && !rc) rc = cl_fail(&e, CL_ERUN, "rank 0 failed while profiling");
    }
    if (!rc) rc = get_link(&c, &p, &e);
    sim_result pred;
    memset(&pred, 0, sizeof pred);
    if (!rc && rank == 0) rc = exec_val_predict(&p, (int)a.iters, a.sim_trace, &pred, &e);
    exec_pipe_result meas;
    memset(&meas, 0, sizeof meas);
    if (!rc) rc = exec_val_measure(&p, a.backend, tpm, (int)a.iters, a.plan, a.trace, &meas, &e);
    /* under MPI the other ranks are the run too, not other load */
    double ours = cl_load_ours_s(&lm);
    if (a.backend == EXEC_PIPE_MPI && size > 1) MPI_Allreduce(MPI_IN_PLACE, &ours, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    c.others_load = cl_now_s() - lm.t >= VAL_LOAD_MIN_WINDOW_S ? cl_load_others(&lm, ours, NULL) : NAN;
    if (!rc && rank == 0 && !isfinite(c.others_load))
        fprintf(stderr, "cleave validate: note: %s ran too briefly (under %.0f s with its profiling) to tell whether other processes took the CPU meanwhile (hint: more --iterations)\n",
                shown, VAL_LOAD_MIN_WINDOW_S);
    else if (!rc && rank == 0 && !val_trustworthy(c.others_load))
        fprintf(stderr, "cleave validate: warning: other processes took %.0f%% of the machine's CPU while %s ran, so the measured times are partly theirs; the comparison is not to be trusted (hint: validate on a quiet machine)\n",
                100 * c.others_load, shown);
    exec_val_report rep;
    memset(&rep, 0, sizeof rep);
    if (!rc && rank == 0) rc = exec_val_compare(&p, extra, &pred, &meas, &rep, &e);
    if (!rc && rank == 0) {
        if (a.json) rc = print_json(&c, &rep);
        else print_table(&c, &rep);
    }
    exec_val_report_free(&rep);
    exec_pipe_result_free(&meas);
    sim_result_free(&pred);
    free(extra);
    if (have_prof) prof_free(&pf);
    plan_free(&p);
    free(shown);
    /* report before finalising: the ranks leave MPI_Finalize together, and
     * once one has exited with an error mpirun may end rank 0 before its
     * message is out (seen in CI: the world-size refusal's line lost) */
    const int status = rc && rank == 0 ? cli_report(&e) : rc;
    if (a.backend == EXEC_PIPE_MPI) exec_pipe_mpi_finalize();
    return status;
}
