/* cmd_sweep.c - `cleave sweep`: plan and simulate a model at several device
 * counts and schedules; a CSV row per point and the predicted speed-up
 * curve (one line per schedule, the ideal line, peak memory per device).
 *
 * Each point takes the first N devices of --cluster (or a uniform cluster
 * of N --device devices), plans with the schedule fixed (plan_search) and
 * replays the plan (sim_predict): the CSV holds the simulator's figures,
 * the ones `cleave sim` prints for the same plan.  Speed-up is throughput
 * over the best one-device plan's (docs/plots.md, "Speed-up curve").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "base/fileio.h"
#include "gnuplot.h"
#include "base/progress.h"
#include "base/units.h"
#include "study.h"

#define SWEEP_DEFAULT_SCHEDULES "gpipe,1f1b,zb-h1,pipedream,fbp"

typedef struct sweep_args {
    study_args s;           /* the options compare shares */
    const char *cluster, *device;
    int64_t per_node, micro;
    int64_t *devices;
    int n_devices;
    double bw[2], lat[2];
    int optimizer;          /* plan_optim */
    int precision, zero;    /* plan_prec, ZeRO stage */
    const char *devices_s, *bandwidth, *latency; /* as given */
} sweep_args;

#define SW sweep_args
static const cli_opt sweep_opts[] = {
    STUDY_OPT_OUT(SW, s, "write DIR/speedup.csv, DIR/speedup.png and DIR/speedup.svg"),
    {"devices", 0, CLI_STR, CLI_FIELD(SW, devices_s),
     .help = "default: 1, 2, 4, ... up to the cluster's size, and the size"},
    /* the defaults are study.h's STUDY_DEF_* */
    {"bandwidth", 0, CLI_STR, CLI_FIELD(SW, bandwidth),
     .help = "links of a --device cluster in bytes/s, inside and between nodes\n"
             "(default 1e+10,1.25e+09); --latency in seconds (default 1e-05,5e-05)"},
    STUDY_OPT_SAVE_PLANS(SW, s, "write every point's plan to D/<N>dev-<schedule>.json and the\n"
                                "one-device baseline to D/baseline-1dev.json"),
    STUDY_OPT_MAX_SECONDS(SW, s, "stop with an error after S seconds of real time (default 600)"),
    STUDY_OPTS(SW, s),
    {"cluster", 0, CLI_STR, CLI_FIELD(SW, cluster), .help = NULL},
    {"device", 0, CLI_STR, CLI_FIELD(SW, device), .help = NULL},
    {"devices-per-node", 0, CLI_INT, CLI_FIELD(SW, per_node), 1, CLUSTER_MAX_DEVICES, .help = NULL},
    {"microbatches", 0, CLI_INT, CLI_FIELD(SW, micro), 1, 1 << 30, .help = NULL},
    {"latency", 0, CLI_STR, CLI_FIELD(SW, latency), .help = NULL},
    {"optimizer", 0, CLI_ENUM, CLI_FIELD(SW, optimizer), .words = "sgd|momentum|adam", .help = NULL},
    {"precision", 0, CLI_ENUM, CLI_FIELD(SW, precision), .words = "auto|fp32|mixed",
     .help = "model state as in cleave plan (default auto: from the model)"},
    {"zero", 0, CLI_INT, CLI_FIELD(SW, zero), 0, PLAN_ZERO_MAX, .arg = "0|1|2",
     .help = "ZeRO stage as in cleave plan (default 0)"},
};
#undef SW
static const cli_spec sweep_spec = {"sweep", sweep_opts, CLI_N(sweep_opts), .help_col = 18};



static int help(void)
{
    sweep_args d = {0};
    printf(
        "usage: cleave sweep --model M.json [--profile P.json [--profiled-on TYPE]]\n"
        "                    (--cluster C.json | --device TYPE [--devices-per-node K]\n"
        "                     [--bandwidth B[,B2]] [--latency L[,L2]])\n"
        "                    [--devices 1,2,4,...] [--schedules " SWEEP_DEFAULT_SCHEDULES "]\n"
        "                    [--batch B] [--microbatches M] [--optimizer sgd|momentum|adam]\n"
        "                    [--precision auto|fp32|mixed] [--zero 0|1|2]\n"
        "                    [--no-replication] [-o DIR | --csv F.csv --png F.png --svg F.svg]\n"
        "                    [--save-plans DIR] [--title TEXT] [--quiet] [--max-seconds S]\n"
        "                    [--for torch|deepspeed|megatron]\n"
        "                    [--tensor T|auto [--sequence-parallel]] [--recompute none|selective|full|auto]\n"
        "                    [--attention unfused|fused] [--grad-accumulation fused|separate]\n\n"
        "For every device count N and schedule, plans the model on the first N devices of\n"
        "the cluster (or on N devices of TYPE, K per node) with that schedule and simulates\n"
        "the plan. Prints a row per point and writes:\n"
        "  CSV   devices, schedule, stages, replicas, microbatches, iteration time,\n"
        "        throughput, speed-up, bubble, peak memory per device, feasible, reason\n"
        "  image speed-up against device count per schedule with the ideal line, and peak\n"
        "        memory per device below (PNG and SVG)\n"
        "Speed-up is throughput over the best plan on one device; points that fit nowhere\n"
        "or that the simulator refuses are rows with the reason and stay off the curve.\n"
        "--for F plans only what framework F runs, as `cleave plan --for F` does: the\n"
        "default schedules shrink to F's, and --schedules may name only those.\n\n");
    cli_help(&sweep_spec, &d, stdout);
    printf("On a terminal a progress bar shows on stderr; Ctrl-C stops after the current point\n"
           "and writes complete files for the points done (exit status 130).\n");
    return 0;
}

/* One point's figures, kept after its plan is freed. */
typedef struct sweep_row {
    int devices, kind, ok;
    int stages, n_micro, microbatch, used;
    char replicas[8192];   /* per stage, "4/2/2" (room for 1,024 stages) */
    char replicas_shown[16];/* the table's: the list, "all 4", or "2..16" */
    double iteration_s, throughput, speedup, speedup_seq, bubble, peak_mem_bytes;
    int tensor, recompute;  /* the plan's (t, recomputation): 1, none unless asked */
    char reason[1100];
} sweep_row;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int parse(int argc, char **argv, sweep_args *a)
{
    memset(a, 0, sizeof *a);
    a->bw[0] = STUDY_DEF_INTRA_BPS;
    a->bw[1] = STUDY_DEF_INTER_BPS;
    a->lat[0] = STUDY_DEF_INTRA_LAT;
    a->lat[1] = STUDY_DEF_INTER_LAT;
    a->optimizer = OPTIM_SGD;
    a->s.schedules = SWEEP_DEFAULT_SCHEDULES;
    int rc = cli_parse(&sweep_spec, argc, argv, a, 0);
    if (rc) return rc == CLI_HELP ? help() - 1 : rc;
    int quick_links = a->bandwidth || a->latency, n;
    /* B alone leaves the inter-node default in place (plan's B sets both) */
    if ((a->bandwidth && (rc = cli_num_pair("sweep", "--bandwidth", a->bandwidth, 1e-300, a->bw, &n))) ||
        (a->latency && (rc = cli_num_pair("sweep", "--latency", a->latency, 0, a->lat, &n))) ||
        (a->devices_s && (rc = cli_int_list("sweep", "--devices", a->devices_s, 1, CLUSTER_MAX_DEVICES,
                                            &a->devices, &a->n_devices))))
        return rc;
    if ((rc = study_args_check(&a->s, "sweep"))) return rc;
    if (!a->cluster == !a->device)
        return cli_usage_error("sweep", "give --cluster C.json or --device TYPE (one of them)");
    if (a->cluster && (a->per_node || quick_links))
        return cli_usage_error("sweep", "--devices-per-node, --bandwidth and --latency describe a --device cluster, not --cluster");
    if (a->device && !a->devices)
        return cli_usage_error("sweep", "a --device cluster needs --devices N1,N2,...");
    if (a->devices) { /* ascending, no repeats */
        qsort(a->devices, (size_t)a->n_devices, sizeof *a->devices, cmp_i64);
        int k = 0;
        for (int i = 0; i < a->n_devices; i++)
            if (i == 0 || a->devices[i] != a->devices[k - 1]) a->devices[k++] = a->devices[i];
        a->n_devices = k;
    }
    return 0;
}

/* The cluster of a point: the first n devices of `full`, or n uniform ones. */
static int point_cluster(const sweep_args *a, const cluster *full, const cluster_devtype *type, int n,
                         cluster *out, cl_err *e)
{
    if (full) return study_subcluster(full, n, out, e);
    cluster_link li = {a->bw[0], a->lat[0]}, le = {a->bw[1], a->lat[1]};
    return cluster_uniform(out, type, n, (int)a->per_node, li, le, e);
}

static void fill_row(sweep_row *r, const study_point *pt, double base_thr)
{
    r->ok = pt->ok;
    if (pt->planned) {
        const plan *p = &pt->res.plan;
        r->stages = p->n_stages;
        r->n_micro = p->n_micro;
        r->microbatch = p->microbatch;
        r->used = pt->dev_used;
        /* replicas per stage, "4/2/2"; one number when every stage has
         * the same ("all 4"), a range when the list would not fit */
        int lo = p->stages[0].n_replicas, hi = lo;
        for (int s = 1; s < p->n_stages; s++) {
            lo = p->stages[s].n_replicas < lo ? p->stages[s].n_replicas : lo;
            hi = p->stages[s].n_replicas > hi ? p->stages[s].n_replicas : hi;
        }
        size_t at = 0;
        r->replicas[0] = '\0';
        for (int s = 0; s < p->n_stages && at < sizeof r->replicas; s++)
            at += (size_t)snprintf(r->replicas + at, sizeof r->replicas - at, s ? "/%d" : "%d",
                                   p->stages[s].n_replicas);
        r->tensor = plan_tensor(p);
        r->recompute = p->recompute;
        if (p->n_stages > 1 && lo == hi) snprintf(r->replicas_shown, sizeof r->replicas_shown, "all %d", lo);
        else if (at >= sizeof r->replicas_shown) snprintf(r->replicas_shown, sizeof r->replicas_shown, "%d..%d", lo, hi);
        else memcpy(r->replicas_shown, r->replicas, at + 1); /* at < its size: fits */
        /* feasible, but on fewer devices than offered: the plan says why */
        if (pt->ok && p->idle_why[0]) snprintf(r->reason, sizeof r->reason, "%s", p->idle_why);
    }
    if (!pt->ok) {
        snprintf(r->reason, sizeof r->reason, "%s", pt->reason);
        return;
    }
    r->iteration_s = pt->sim.iteration_s;
    r->throughput = pt->sim.throughput;
    r->speedup_seq = pt->sim.speedup;
    r->speedup = base_thr > 0 ? pt->sim.throughput / base_thr : NAN;
    r->bubble = pt->sim.bubble;
    r->peak_mem_bytes = pt->peak_mem_bytes;
}

static void num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, ",%.12g", v);
    else fputs(",", f);
}

static int write_csv(const char *path, const sweep_row *rows, int n, cl_err *e)
{
    cl_out o;
    int rc = cl_out_open(&o, path, e);
    if (rc) return rc;
    fputs("devices,schedule,feasible,stages,replicas,devices_used,microbatches,microbatch,"
          "iteration_s,throughput,speedup,speedup_vs_sequential,bubble,peak_mem_bytes,reason,tensor,recompute\n", o.f);
    for (int i = 0; i < n; i++) {
        const sweep_row *r = &rows[i];
        fprintf(o.f, "%d,%s,%s", r->devices, sched_kind_name((sched_kind)r->kind), r->ok ? "yes" : "no");
        if (r->stages) fprintf(o.f, ",%d,%s,%d,%d,%d", r->stages, r->replicas, r->used, r->n_micro, r->microbatch);
        else fputs(",,,,,", o.f);
        if (r->ok) {
            num(o.f, r->iteration_s);
            num(o.f, r->throughput);
            num(o.f, r->speedup);
            num(o.f, r->speedup_seq);
            num(o.f, r->bubble);
            num(o.f, r->peak_mem_bytes);
        } else {
            fputs(",,,,,,", o.f);
        }
        fputc(',', o.f);
        study_csv_field(o.f, r->reason);
        if (r->stages) fprintf(o.f, ",%d,%s\n", r->tensor, tfm_recomp_name((tfm_recomp)r->recompute));
        else fputs(",,\n", o.f);
    }
    return cl_out_commit(&o, e);
}

/* The curve: a column per schedule with at least one feasible point, a row
 * per device count with at least one point done; NaN leaves a gap. */
static int write_plot(const char *path, const char *title, const sweep_row *rows,
                      int n, const int *kinds, int n_kinds, int use_seq, cl_err *e)
{
    int *col = cl_calloc((size_t)n_kinds, sizeof *col), ncols = 1;
    double maxb = 0;
    for (int k = 0; k < n_kinds; k++)
        for (int i = 0; i < n; i++)
            if (rows[i].kind == kinds[k] && rows[i].ok) {
                col[k] = 1;
                maxb = fmax(maxb, rows[i].peak_mem_bytes);
            }
    for (int k = 0; k < n_kinds; k++) ncols += col[k];
    if (ncols == 1) {
        free(col);
        return cl_fail(e, CL_EINPUT, "%s: no feasible point to draw (hint: the CSV gives each point's reason)", path);
    }
    double unit = maxb >= (double)(1ull << 30) ? (double)(1ull << 30) : (double)(1 << 20);
    gp_plot *g = gp_new();
    gp_str(g, "title", title);
    gp_num(g, "ncols", ncols);
    gp_str(g, "mem_unit", unit > (1 << 20) ? "GiB" : "MiB");
    /* device counts that double (1, 2, 4, ...) read best on log axes,
     * consecutive ones (1, 2, 3, ...) on linear axes */
    int lo = rows[0].devices, hi = rows[n - 1].devices, counts = 0;
    for (int i = 0; i < n; i++) counts += i == 0 || rows[i].devices != rows[i - 1].devices;
    gp_num(g, "logx", hi >= 4 * lo && counts <= log2((double)hi / lo) + 2);
    gp_str(g, "speedup_label", use_seq ? "speed-up over the same microbatches on one device"
                                       : "speed-up over the best one-device plan");
    for (int k = 0, c = 2; k < n_kinds; k++) /* column names: values, not data (gnuplot.h) */
        if (col[k]) gp_stri(g, "col", c++, sched_kind_name((sched_kind)kinds[k]));
    for (int which = 0; which < 2; which++) {
        FILE *f = gp_data(g, which ? "memory" : "speedup");
        for (int i = 0; i < n; i++) {
            if (i > 0 && rows[i].devices == rows[i - 1].devices) continue;
            fprintf(f, "%d", rows[i].devices);
            for (int k = 0; k < n_kinds; k++) {
                if (!col[k]) continue;
                double v = NAN;
                for (int j = i; j < n && rows[j].devices == rows[i].devices; j++)
                    if (rows[j].kind == kinds[k] && rows[j].ok)
                        v = which ? rows[j].peak_mem_bytes / unit : use_seq ? rows[j].speedup_seq : rows[j].speedup;
                if (isfinite(v)) fprintf(f, " %.9g", v);
                else fputs(" NaN", f);
            }
            fputc('\n', f);
        }
    }
    int rc = gp_render(g, "speedup", path, 1280, 720, e);
    gp_free(g);
    free(col);
    return rc;
}

static int save_plan(const char *dir, const char *name, const plan *p, cl_err *e)
{
    size_t n = strlen(dir) + strlen(name) + 8;
    char *path = cl_malloc(n);
    snprintf(path, n, "%s/%s.json", dir, name);
    int rc = plan_save(p, path, e);
    free(path);
    return rc;
}

/* tp: also the row's tensor-parallel degree and recomputation (auto) */
static void print_row(FILE *f, const sweep_row *r, int tp)
{
    if (!r->ok) {
        fprintf(f, "%7d %5s  %-10s  infeasible: %s\n", r->devices, "", sched_kind_name((sched_kind)r->kind), r->reason);
        return;
    }
    char mem[32];
    cl_fmt_bytes(mem, sizeof mem, r->peak_mem_bytes,
                 (cl_bytes_style){.lo = CL_MIB, .hi = CL_GIB, .grow = 1});
    fprintf(f, "%7d %5d  %-10s %6d %-15s %5d x %-4d %12.6g %11.5g %8.2fx %7.1f%% %11s", r->devices,
           r->used, sched_kind_name((sched_kind)r->kind), r->stages, r->replicas_shown, r->n_micro,
           r->microbatch, r->iteration_s, r->throughput,
           isfinite(r->speedup) ? r->speedup : r->speedup_seq, 100 * r->bubble, mem);
    if (tp) fprintf(f, "  t %d %s", r->tensor, tfm_recomp_name((tfm_recomp)r->recompute));
    fputc('\n', f);
}

/* Sweep every point; rows[] gets one entry per point done (*n_done). */
static int run_points(const sweep_args *a, const study *st, const study *cs, int nc, const cluster *full,
                      const cluster_devtype *type, const int *kinds, int n_kinds, double base_thr, sweep_row *rows,
                      int *n_done, cl_err *e)
{
    prog pg;
    int total = a->n_devices * n_kinds, rc = CL_OK;
    prog_begin(&pg, "sweep", total);
    *n_done = 0;
    /* the (t, recomputation) candidates (one without --tensor auto or
     * --recompute auto), and each kind's and candidate's last planned
     * point: the planner starts from it (study_run_after), so each
     * candidate's curve never falls, nor does the best of them */
    int tp = st->t_auto || st->r_auto || st->per_rank;
    study_point *prev = cl_calloc((size_t)(n_kinds * (nc ? nc : 1)), sizeof *prev);
    for (int i = 0; i < a->n_devices && !rc && !prog_interrupted(); i++) {
        cluster c;
        if ((rc = point_cluster(a, full, type, (int)a->devices[i], &c, e))) break;
        for (int k = 0; k < n_kinds && !rc; k++) {
            sweep_row *r = &rows[*n_done];
            memset(r, 0, sizeof *r);
            r->devices = (int)a->devices[i];
            r->kind = kinds[k];
            int win;
            rc = study_run_cands(cs, nc, &c, kinds[k], &prev[k * nc], &win, r->reason, sizeof r->reason, e);
            if (!rc && win >= 0) {
                r->reason[0] = '\0'; /* another candidate's failure is not this row's */
                fill_row(r, &prev[k * nc + win], base_thr);
            }
            if (!rc && a->s.save_plans && win >= 0) {
                char name[64];
                snprintf(name, sizeof name, "%ddev-%s", r->devices, sched_kind_name((sched_kind)kinds[k]));
                rc = save_plan(a->s.save_plans, name, &prev[k * nc + win].res.plan, e);
            }
            if (rc) break;
            (*n_done)++;
            if (!a->s.quiet) print_row(a->s.msg, r, tp);
            fflush(stdout);
            char label[64];
            snprintf(label, sizeof label, "%d devices, %s", r->devices, sched_kind_name((sched_kind)kinds[k]));
            prog_step(&pg, label);
            if (prog_interrupted()) break;
        }
        cluster_free(&c);
    }
    for (int j = 0; j < n_kinds * nc; j++) study_point_free(&prev[j]);
    free(prev);
    prog_end(&pg);
    return rc;
}

int cmd_sweep(int argc, char **argv)
{
    sweep_args a;
    int rc = parse(argc, argv, &a);
    if (rc) {
        free(a.devices);
        return rc < 0 ? 0 : rc;
    }
    int *kinds = NULL, n_kinds = 0;
    if ((rc = study_args_schedules(&a.s, "sweep", &kinds, &n_kinds))) {
        free(a.devices);
        return rc;
    }
    cl_err e = {0};
    study st;
    study *cs = NULL; /* the candidate studies (study_with), nc of them */
    int nc = 0;
    cluster full = {0};
    cluster_devtype type;
    int have_full = 0, have_study = 0;
    sweep_row *rows = NULL;
    int n_done = 0;
    char csv[1024] = "", png[1024] = "", svg[1024] = "";
    a.s.precision = a.precision;
    if ((rc = study_args_load(&a.s, &st, &e))) goto fail;
    have_study = 1;
    st.microbatches = (int)a.micro;
    st.optimizer = (plan_optim)a.optimizer;
    st.precision = (plan_prec)a.precision;
    st.zero = a.zero;
    if (a.cluster) {
        if ((rc = cluster_load(&full, a.cluster, &e))) goto fail;
        have_full = 1;
        if (!a.devices) { /* 1, 2, 4, ... and the cluster's size */
            a.devices = cl_malloc(32 * sizeof *a.devices);
            for (int64_t d = 1; d < full.n_devices; d *= 2) a.devices[a.n_devices++] = d;
            a.devices[a.n_devices++] = full.n_devices;
        }
        for (int i = 0; i < a.n_devices; i++)
            if (a.devices[i] > full.n_devices) {
                rc = cl_fail(&e, CL_EINPUT, "%s: --devices %lld: the cluster has only %d devices",
                             a.cluster, (long long)a.devices[i], full.n_devices);
                goto fail;
            }
    } else if ((rc = cluster_devtype_preset(NULL, a.device, &type, &e))) {
        goto fail;
    }
    if ((rc = study_args_outputs(&a.s, "speedup", csv, png, svg, sizeof csv, &e))) goto fail;

    /* the (t, recomputation) questions of every point: one, or with
     * --tensor auto / --recompute auto every candidate (study_cands) */
    if ((rc = study_cand_studies(&st, (int)a.devices[a.n_devices - 1], &cs, &nc, &e))) goto fail;

    prog_catch_sigint();
    /* the baseline: the best plan on one device, any schedule */
    double base_thr = 0;
    char base_desc[400] = "";
    {
        cluster one;
        study_point *bp = cl_calloc((size_t)(nc ? nc : 1), sizeof *bp);
        char why[1100];
        int win;
        if ((rc = point_cluster(&a, have_full ? &full : NULL, &type, 1, &one, &e))) {
            free(bp);
            goto fail_sig;
        }
        rc = study_run_cands(cs, nc, &one, -1, bp, &win, why, sizeof why, &e);
        cluster_free(&one);
        study_point pt = {0};
        if (!rc && win >= 0) {
            pt = bp[win];
            bp[win] = (study_point){0};
        } else snprintf(pt.reason, sizeof pt.reason, "%s", why);
        for (int j = 0; j < nc; j++) study_point_free(&bp[j]);
        free(bp);
        if (!rc && pt.ok) {
            base_thr = pt.sim.throughput;
            snprintf(base_desc, sizeof base_desc, "one device, %s, %d x %d: %.6g %s/s",
                     sched_kind_name(pt.res.plan.schedule), pt.res.plan.n_micro, pt.res.plan.microbatch, base_thr,
                     model_unit_plural(st.md.unit));
        } else if (!rc) {
            snprintf(base_desc, sizeof base_desc, "none (%.200s); speed-up is over the same microbatches run on one device", pt.reason);
        }
        if (!rc && a.s.save_plans && pt.planned) rc = save_plan(a.s.save_plans, "baseline-1dev", &pt.res.plan, &e);
        study_point_free(&pt);
        if (rc) goto fail_sig;
    }
    if (!a.s.quiet) {
        fprintf(a.s.msg, "sweep: %s on %s, batch %d, %d device counts x %d schedules\n", st.md.name,
               have_full ? full.name : a.device, st.batch, a.n_devices, n_kinds);
        fprintf(a.s.msg, "baseline: %s\n\n", base_desc);
        fprintf(a.s.msg, "%7s %5s  %-10s %6s %-15s %12s %12s %11s %9s %8s %11s\n", "devices", "used", "schedule",
               "stages", "replicas", "micro x size", "iteration_s",
               st.md.unit == MODEL_UNIT_SAMPLE ? "samples/s" : "minibatch/s", "speed-up", "bubble",
               "peak mem");
    }
    rows = cl_calloc((size_t)(a.n_devices * n_kinds), sizeof *rows);
    rc = run_points(&a, &st, cs, nc, have_full ? &full : NULL, &type, kinds, n_kinds, base_thr, rows, &n_done, &e);
    int interrupted = prog_interrupted();
    /* outputs for the points done, also after Ctrl-C */
    if (!rc && csv[0] && (rc = write_csv(csv, rows, n_done, &e)) == CL_OK && !a.s.quiet) fprintf(a.s.msg, "wrote %s\n", csv);
    char title[256];
    if (a.s.title) snprintf(title, sizeof title, "%s", a.s.title);
    else if (have_full)
        snprintf(title, sizeof title, "Predicted speed-up: %s on %s, batch %d", st.md.name, full.name, st.batch);
    else
        snprintf(title, sizeof title, "Predicted speed-up: %s on %s devices, batch %d", st.md.name, a.device, st.batch);
    const char *imgs[2] = {png, svg};
    for (int i = 0; i < 2 && !rc; i++)
        if (imgs[i][0] && n_done > 0) {
            rc = write_plot(imgs[i], title, rows, n_done, kinds, n_kinds, base_thr <= 0, &e);
            if (!rc && !a.s.quiet) fprintf(a.s.msg, "wrote %s\n", imgs[i]);
        }
    prog_release_sigint();
    if (rc) goto fail;
    if (interrupted) {
        fprintf(stderr, "cleave sweep: interrupted after %d of %d points; the files hold those points\n",
                n_done, a.n_devices * n_kinds);
        rc = PROG_EXIT_INTERRUPTED;
    }
    goto done;
fail_sig:
    prog_release_sigint();
fail:
    rc = cli_report(&e);
done:
    study_cands_free(cs, nc);
    free(rows);
    free(kinds);
    free(a.devices);
    if (have_full) cluster_free(&full);
    if (have_study) study_free(&st);
    return rc;
}
