/* cmd_compare.c - `cleave compare`: the best plan for one model on each of
 * several clusters, with time and cost per epoch - planning before buying
 * hardware.  A table on stdout, a CSV, and a bar chart (compare.gp).
 *
 * Best plan: study_best - every schedule asked for, with stage replication
 * on and off, planned and simulated; the highest simulated throughput wins.
 *
 * Per epoch (docs/plots.md, "Hardware comparison"):
 *   epoch_s        = dataset size / simulated throughput (samples/s)
 *   price_per_hour = sum of price_per_hour over every device of the cluster
 *                    (renting a cluster pays for all of it, used or not)
 *   cost_per_epoch = price_per_hour x epoch_s / 3600; "n/a" when a device
 *                    type has no price
 *   headroom       = the smallest (memory - simulated peak) over the devices
 *                    the plan uses, also as a fraction of that memory
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "base/fileio.h"
#include "gnuplot.h"
#include "base/progress.h"
#include "study.h"

#define COMPARE_DEFAULT_SCHEDULES "gpipe,1f1b,zb-h1,pipedream,fbp"
#define COMPARE_MAX_CLUSTERS 64

typedef struct compare_args {
    study_args s;           /* the options sweep shares */
    cli_list clusters;      /* --clusters A B C */
    int64_t dataset;
} compare_args;

#define CA compare_args
static const cli_opt compare_opts[] = {
    {"dataset-size", 0, CLI_INT, CLI_FIELD(CA, dataset), 1, (int64_t)1 << 50, .arg = "N",
     .help = "samples per epoch; default: the model's data set when known\n"
             "(ImageNet-1k 1,281,167 for 3x224x224 / 1000 classes, Fashion-MNIST\n"
             "60,000 for 28x28 / 10 classes), else required"},
    STUDY_OPT_OUT(CA, s, "write DIR/compare.csv, DIR/compare.png and DIR/compare.svg"),
    STUDY_OPT_SAVE_PLANS(CA, s, "write each cluster's best plan to D/<cluster name>.json"),
    STUDY_OPT_MAX_SECONDS(CA, s, "stop with an error after S seconds of real time (default 600)"),
    STUDY_OPTS(CA, s),
    {"clusters", 0, CLI_LIST, CLI_FIELD(CA, clusters), .help = NULL},
};
#undef CA
static const cli_spec compare_spec = {"compare", compare_opts, CLI_N(compare_opts), .help_col = 20};

static int help(void)
{
    printf(
        "usage: cleave compare --model M.json --clusters A.json B.json ... [--dataset-size N]\n"
        "                      [--batch B] [--schedules " COMPARE_DEFAULT_SCHEDULES "]\n"
        "                      [--profile P.json [--profiled-on TYPE]] [--no-replication]\n"
        "                      [-o DIR | --csv F.csv --png F.png --svg F.svg] [--save-plans DIR]\n"
        "                      [--for torch|deepspeed|megatron] [--title T] [--quiet] [--max-seconds S]\n"
        "                      [--tensor T|auto [--sequence-parallel]] [--recompute none|selective|full|auto]\n"
        "                      [--attention unfused|fused] [--grad-accumulation fused|separate]\n\n"
        "Finds the best plan for the model on each cluster (every schedule listed, stages\n"
        "replicated or not, ranked by simulated throughput) and prints: devices, device\n"
        "type, best schedule, stages, throughput, time per epoch, cost per epoch (the\n"
        "cluster's price per device-hour x its devices x epoch hours; n/a without a price)\n"
        "and memory headroom (the smallest free memory on a device the plan uses).\n"
        "--for F plans only what framework F runs (its schedules, one data-parallel degree\n"
        "for all stages), as `cleave plan --for F` does.\n\n");
    cli_help(&compare_spec, NULL, stdout);
    printf(
        "Prices are the presets' indicative on-demand list prices (their notes say where each\n"
        "comes from). On a terminal a progress bar shows on stderr; Ctrl-C stops and writes\n"
        "complete files for the clusters done (exit status 130).\n");
    return 0;
}

typedef struct compare_row {
    char name[CLUSTER_NAME_MAX], file[512], types[160];
    int n_devices, ok;
    int kind, stages, n_micro, microbatch, used;
    char replicas[96];
    double iteration_s, throughput, epoch_s, price_per_hour, cost, peak_mem_bytes;
    double headroom_bytes, headroom;
    int tensor, recompute;  /* the plan's (t, recomputation) */
    char reason[1100];
} compare_row;

static int parse(int argc, char **argv, compare_args *a)
{
    memset(a, 0, sizeof *a);
    a->s.schedules = COMPARE_DEFAULT_SCHEDULES;
    int rc = cli_parse(&compare_spec, argc, argv, a, 0);
    if (rc) return rc == CLI_HELP ? help() - 1 : rc;
    if (a->clusters.n > COMPARE_MAX_CLUSTERS)
        return cli_usage_error("compare", "--clusters: at most %d clusters", COMPARE_MAX_CLUSTERS);
    if ((rc = study_args_check(&a->s, "compare"))) return rc;
    if (!a->clusters.n) return cli_usage_error("compare", "missing --clusters A.json B.json ...");
    return 0;
}

/* Sum of the devices' prices per hour; 0 when any device has none. */
static double cluster_price(const cluster *c)
{
    double sum = 0;
    for (int d = 0; d < c->n_devices; d++) {
        double p = c->types[c->devices[d].type].price_per_hour;
        if (!(p > 0)) return 0;
        sum += p;
    }
    return sum;
}

static void fill_row(compare_row *r, const study_point *pt, int64_t dataset)
{
    const plan *p = &pt->res.plan;
    r->ok = pt->ok;
    if (!pt->ok) {
        snprintf(r->reason, sizeof r->reason, "%s", pt->reason);
        return;
    }
    r->kind = p->schedule;
    r->tensor = plan_tensor(p);
    r->recompute = p->recompute;
    r->stages = p->n_stages;
    r->n_micro = p->n_micro;
    r->microbatch = p->microbatch;
    r->used = pt->dev_used;
    size_t at = 0;
    r->replicas[0] = '\0';
    for (int s = 0; s < p->n_stages && at + 12 < sizeof r->replicas; s++)
        at += (size_t)snprintf(r->replicas + at, sizeof r->replicas - at, s ? "/%d" : "%d", p->stages[s].n_replicas);
    r->iteration_s = pt->sim.iteration_s;
    r->throughput = pt->sim.throughput;
    r->epoch_s = (double)dataset / pt->sim.throughput;
    r->cost = r->price_per_hour > 0 ? r->price_per_hour * r->epoch_s / 3600.0 : NAN;
    r->peak_mem_bytes = pt->peak_mem_bytes;
    r->headroom_bytes = pt->headroom_bytes;
    r->headroom = pt->headroom;
}

static void num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, ",%.12g", v);
    else fputs(",", f);
}

static int write_csv(const char *path, const compare_row *rows, int n, int64_t dataset, cl_err *e)
{
    cl_out o;
    int rc = cl_out_open(&o, path, e);
    if (rc) return rc;
    fputs("cluster,file,devices,device_type,feasible,schedule,stages,replicas,devices_used,microbatches,"
          "microbatch,iteration_s,throughput,dataset_size,epoch_s,price_per_hour,cost_per_epoch,"
          "peak_mem_bytes,headroom_bytes,headroom_fraction,reason,tensor,recompute\n", o.f);
    for (int i = 0; i < n; i++) {
        const compare_row *r = &rows[i];
        study_csv_field(o.f, r->name);
        fputc(',', o.f);
        study_csv_field(o.f, r->file);
        fprintf(o.f, ",%d,", r->n_devices);
        study_csv_field(o.f, r->types);
        if (r->ok) {
            fprintf(o.f, ",yes,%s,%d,%s,%d,%d,%d", sched_kind_name((sched_kind)r->kind), r->stages,
                    r->replicas, r->used, r->n_micro, r->microbatch);
            num(o.f, r->iteration_s);
            num(o.f, r->throughput);
            fprintf(o.f, ",%lld", (long long)dataset);
            num(o.f, r->epoch_s);
            num(o.f, r->price_per_hour > 0 ? r->price_per_hour : NAN);
            num(o.f, r->cost);
            num(o.f, r->peak_mem_bytes);
            num(o.f, r->headroom_bytes);
            num(o.f, r->headroom);
        } else {
            fprintf(o.f, ",no,,,,,,,,,%lld,,", (long long)dataset);
            num(o.f, r->price_per_hour > 0 ? r->price_per_hour : NAN);
            fputs(",,,,", o.f);
        }
        fputc(',', o.f);
        study_csv_field(o.f, r->reason);
        if (r->ok) fprintf(o.f, ",%d,%s\n", r->tensor, tfm_recomp_name((tfm_recomp)r->recompute));
        else fputs(",,\n", o.f);
    }
    return cl_out_commit(&o, e);
}

static void unit_of(const compare_row *rows, int n, const char **name, const char **abbr, double *div)
{
    double mx = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].ok) mx = fmax(mx, rows[i].epoch_s);
    if (mx >= 2 * 3600.0) *name = "hours", *abbr = "h", *div = 3600;
    else if (mx >= 120) *name = "minutes", *abbr = "min", *div = 60;
    else *name = "seconds", *abbr = "s", *div = 1;
}

/* 1281167 -> "1,281,167" */
static void thousands(char *buf, size_t cap, int64_t v)
{
    char raw[32];
    snprintf(raw, sizeof raw, "%lld", (long long)v);
    size_t n = strlen(raw), at = 0;
    for (size_t i = 0; i < n && at + 2 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0) buf[at++] = ',';
        buf[at++] = raw[i];
    }
    buf[at] = '\0';
}

static int write_plot(const char *path, const char *title, const compare_row *rows, int n, cl_err *e)
{
    const char *unit, *abbr;
    double div, tmin = HUGE_VAL, tmax = 0, cmin = HUGE_VAL, cmax = 0;
    unit_of(rows, n, &unit, &abbr, &div);
    for (int i = 0; i < n; i++) {
        if (!rows[i].ok) continue;
        tmin = fmin(tmin, rows[i].epoch_s / div);
        tmax = fmax(tmax, rows[i].epoch_s / div);
        if (isfinite(rows[i].cost)) cmin = fmin(cmin, rows[i].cost), cmax = fmax(cmax, rows[i].cost);
    }
    gp_plot *g = gp_new();
    gp_str(g, "title", title);
    gp_str(g, "time_unit", unit);
    gp_str(g, "currency", "USD");
    int unpriced = 0;
    for (int i = 0; i < n; i++) unpriced |= rows[i].ok && !isfinite(rows[i].cost);
    gp_str(g, "cost_note", unpriced ? "; n/a: no price" : "");
    gp_num(g, "nrows", n);
    /* a log axis once the bars span more than 30x, else the short ones vanish */
    gp_num(g, "logy_time", tmax > 30 * tmin);
    gp_num(g, "logy_cost", cmax > 30 * cmin);
    gp_num(g, "tmin", isfinite(tmin) ? tmin : 1);
    gp_num(g, "cmin", isfinite(cmin) ? cmin : 1);
    /* names and labels: values, not data (gnuplot.h); the block holds numbers */
    for (int i = 0; i < n; i++) {
        const compare_row *r = &rows[i];
        char cost[32] = "no plan fits", tlab[32] = "no plan fits";
        if (r->ok) {
            if (isfinite(r->cost)) snprintf(cost, sizeof cost, "$%.2f", r->cost);
            else snprintf(cost, sizeof cost, "n/a");
            double t = r->epoch_s / div;
            snprintf(tlab, sizeof tlab, t < 1000 ? "%.3g %s" : "%.0f %s", t, abbr);
        }
        gp_stri(g, "name", i + 1, r->name);
        gp_stri(g, "tlab", i + 1, tlab);
        gp_stri(g, "clab", i + 1, cost);
    }
    FILE *f = gp_data(g, "bars");
    for (int i = 0; i < n; i++) {
        const compare_row *r = &rows[i];
        if (!r->ok) fputs("-1 -1\n", f);
        else fprintf(f, "%.9g %.9g\n", r->epoch_s / div, isfinite(r->cost) ? r->cost : -1.0);
    }
    int rc = gp_render(g, "compare", path, 1280, 720, e);
    gp_free(g);
    return rc;
}

/* tp: also the plan's tensor-parallel degree and recomputation */
static void print_row(FILE *f, const compare_row *r, int tp)
{
    if (!r->ok) {
        fprintf(f, "%-18.18s %3d  %-22.22s  no plan: %s\n", r->name, r->n_devices, r->types, r->reason);
        return;
    }
    char ep[32], cost[32], head[48];
    if (r->epoch_s >= 3600) snprintf(ep, sizeof ep, "%.2f h", r->epoch_s / 3600);
    else if (r->epoch_s >= 60) snprintf(ep, sizeof ep, "%.1f min", r->epoch_s / 60);
    else snprintf(ep, sizeof ep, "%.3g s", r->epoch_s);
    if (isfinite(r->cost)) snprintf(cost, sizeof cost, "$%.2f", r->cost);
    else snprintf(cost, sizeof cost, "n/a");
    if (isfinite(r->headroom))
        snprintf(head, sizeof head, "%.0f%% (%.1f GiB)", 100 * r->headroom, r->headroom_bytes / (double)(1ull << 30));
    else snprintf(head, sizeof head, "unknown");
    fprintf(f, "%-18.18s %3d  %-22.22s  %-10s %6d %10.1f %10s %10s  %s", r->name, r->n_devices, r->types,
           sched_kind_name((sched_kind)r->kind), r->stages, r->throughput, ep, cost, head);
    if (tp) fprintf(f, "  t %d %s", r->tensor, tfm_recomp_name((tfm_recomp)r->recompute));
    fputc('\n', f);
}

int cmd_compare(int argc, char **argv)
{
    compare_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    int *kinds = NULL, n_kinds = 0;
    if ((rc = study_args_schedules(&a.s, "compare", &kinds, &n_kinds))) return rc;
    cl_err e = {0};
    study st;
    int have_study = 0, n_done = 0, interrupted = 0;
    compare_row *rows = cl_calloc((size_t)a.clusters.n, sizeof *rows);
    cluster *cls = cl_calloc((size_t)a.clusters.n, sizeof *cls);
    int n_loaded = 0;
    char csv[1024] = "", png[1024] = "", svg[1024] = "";
    if ((rc = study_args_load(&a.s, &st, &e))) goto fail;
    have_study = 1;
    const char *dsname = "";
    int64_t dataset = a.dataset;
    if (!dataset) dataset = study_dataset_size(&st.md, &dsname);
    if (!dataset) {
        rc = cl_fail(&e, CL_EINPUT, "%s: the data set of model \"%s\" is not known (hint: --dataset-size N, the samples per epoch)",
                     a.s.model, st.md.name);
        goto fail;
    }
    /* every cluster file is read before any planning, so a typo fails fast */
    for (; n_loaded < a.clusters.n; n_loaded++)
        if ((rc = cluster_load(&cls[n_loaded], a.clusters.v[n_loaded], &e))) goto fail;
    if ((rc = study_args_outputs(&a.s, "compare", csv, png, svg, sizeof csv, &e))) goto fail;
    if (!a.s.quiet) {
        fprintf(a.s.msg, "compare: %s, batch %d, epoch = %lld samples%s%s%s\n\n", st.md.name, st.batch,
               (long long)dataset, dsname[0] ? " (" : "", dsname, dsname[0] ? " training set)" : "");
        fprintf(a.s.msg, "%-18s %3s  %-22s  %-10s %6s %10s %10s %10s  %s\n", "cluster", "dev", "device type",
               "schedule", "stages", st.md.unit == MODEL_UNIT_SAMPLE ? "samples/s" : "minibatch/s", "epoch",
               "cost", "memory headroom");
    }
    prog pg;
    prog_catch_sigint();
    prog_begin(&pg, "compare", a.clusters.n * study_best_candidates(&st, n_kinds));
    for (int i = 0; i < a.clusters.n && !rc; i++) {
        compare_row *r = &rows[i];
        snprintf(r->name, sizeof r->name, "%s", cls[i].name);
        snprintf(r->file, sizeof r->file, "%s", a.clusters.v[i]);
        study_devices_str(&cls[i], r->types, sizeof r->types);
        r->n_devices = cls[i].n_devices;
        r->price_per_hour = cluster_price(&cls[i]);
        study_point best;
        rc = study_best(&st, &cls[i], kinds, n_kinds, &pg, &best, &interrupted, &e);
        if (!rc && !interrupted) fill_row(r, &best, dataset);
        if (!rc && !interrupted && best.ok && a.s.save_plans) {
            char path[1200];
            char base[CLUSTER_NAME_MAX];
            snprintf(base, sizeof base, "%s", cls[i].name);
            for (char *c = base; *c; c++) if (*c == '/') *c = '_';
            snprintf(path, sizeof path, "%s/%s.json", a.s.save_plans, base);
            rc = plan_save(&best.res.plan, path, &e);
        }
        study_point_free(&best);
        if (rc || interrupted) break;
        n_done++;
        if (!a.s.quiet) print_row(a.s.msg, r, st.t_auto || st.r_auto || st.per_rank);
        fflush(stdout);
        if ((interrupted = prog_interrupted())) break;
    }
    prog_end(&pg);
    interrupted |= prog_interrupted();
    if (!rc && !a.s.quiet) fprintf(a.s.msg, "\n");
    if (!rc && csv[0] && (rc = write_csv(csv, rows, n_done, dataset, &e)) == CL_OK && !a.s.quiet)
        fprintf(a.s.msg, "wrote %s\n", csv);
    char title[256], ds[32];
    thousands(ds, sizeof ds, dataset);
    if (a.s.title) snprintf(title, sizeof title, "%s", a.s.title);
    else snprintf(title, sizeof title, "Training %s for one epoch (%s samples%s%s, batch %d): time and cost per cluster",
                  st.md.name, ds, dsname[0] ? " of " : "", dsname, st.batch);
    const char *imgs[2] = {png, svg};
    for (int i = 0; i < 2 && !rc; i++)
        if (imgs[i][0] && n_done > 0) {
            rc = write_plot(imgs[i], title, rows, n_done, &e);
            if (!rc && !a.s.quiet) fprintf(a.s.msg, "wrote %s\n", imgs[i]);
        }
    prog_release_sigint();
    if (rc) goto fail;
    if (interrupted) {
        fprintf(stderr, "cleave compare: interrupted after %d of %d clusters; the files hold those clusters\n",
                n_done, a.clusters.n);
        rc = PROG_EXIT_INTERRUPTED;
    }
    goto done;
fail:
    rc = cli_report(&e);
done:
    for (int i = 0; i < n_loaded; i++) cluster_free(&cls[i]);
    free(cls);
    free(rows);
    free(kinds);
    if (have_study) study_free(&st);
    return rc;
}
