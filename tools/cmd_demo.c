/* cmd_demo.c - `cleave demo` (make demo): the main job on built-in defaults.
 *
 * Plans VGG-16 and GPT-2 1.5B on a server of 8 V100 PCIe cards without
 * NVLink (profiles/clusters/v100-8-pcie.json), where data-parallel
 * all-reduce is expensive and the best plans are real pipelines; simulates
 * each plan; and writes into the output folder the plan JSON, its torch
 * export, a simulated trace with its Gantt chart and memory plot (a short
 * run, few microbatches, so the chart is readable), VGG-16's speed-up curve
 * over device counts and schedules, and its time and cost per epoch across
 * four cluster presets.  Every file it lists exists when it is listed.
 */
#include <assert.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "planner/export.h"
#include "core/schedule.h"
#include "cli.h"
#include "base/fileio.h"
#include "base/progress.h"
#include "study.h"
#include "base/measure.h"

#define DEMO_CLUSTER "profiles/clusters/v100-8-pcie.json"
#define DEMO_MAX_FILES 48

static const char *const demo_models[] = {"models/vgg16.json", "models/gpt2-1.5b.json"};
/* the clusters of the comparison: slow links, two nodes, NVLink, newer GPUs */
static const char *const demo_compare[] = {"profiles/clusters/v100-8-pcie.json",
                                           "profiles/clusters/v100-16-ethernet.json",
                                           "profiles/clusters/dgx-a100-1node.json",
                                           "profiles/clusters/h100-8-nvlink.json"};
static const char demo_schedules[] = "gpipe,1f1b,zb-h1,pipedream,fbp";

typedef struct demo_file {
    char path[1100];
    char what[400];
} demo_file;

typedef struct demo {
    const char *dir;
    int quick;
    demo_file files[DEMO_MAX_FILES];
    int n_files;
} demo;

static const cli_opt demo_opts[] = {
    {"quick", 0, CLI_FLAG, CLI_FIELD(demo, quick),
     .help = "VGG-16 only, fewer sweep points and clusters (for tests)"},
    {"out", 'o', CLI_STR, CLI_FIELD(demo, dir), .arg = "DIR", .help = NULL},
};
static const cli_spec demo_spec = {"demo", demo_opts, CLI_N(demo_opts), .help_col = 12};

static int help(void)
{
    printf("usage: cleave demo [-o DIR] [--quick]\n\n"
           "The main job on built-in defaults (make demo): plans VGG-16 and GPT-2 1.5B on\n"
           "8 V100 PCIe cards (profiles/clusters/v100-8-pcie.json), simulates the plans and\n"
           "writes into DIR (default demo/): each plan (JSON), its torch export (of the plan\n"
           "torch runs, when the best plan is not one), a simulated\n"
           "trace with its Gantt chart and memory plot, VGG-16's speed-up curve over device\n"
           "counts and schedules (CSV, PNG, SVG) and its time and cost per epoch on four\n"
           "cluster presets (CSV, PNG, SVG). Prints where each file is.\n\n");
    cli_help(&demo_spec, NULL, stdout);
    return 0;
}

/* A shipped data file: beside an installed binary (<exe>/../share/cleave/),
 * beside a built one (<exe>/../), else relative to the current folder;
 * made absolute and without "..", as it is printed in the CSV files. */
static void data_path(const char *rel, char *buf, size_t cap)
{
    char exe[4096], cand[4200];
    snprintf(cand, sizeof cand, "%s", rel);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(cand, sizeof cand, "%s/../share/cleave/%s", exe, rel);
            if (access(cand, R_OK) != 0) snprintf(cand, sizeof cand, "%s/../%s", exe, rel);
            if (access(cand, R_OK) != 0) snprintf(cand, sizeof cand, "%s", rel);
        }
    }
    char *abs = realpath(cand, NULL);
    snprintf(buf, cap, "%s", abs ? abs : cand);
    free(abs);
}

static void announce(demo *d, const char *path, const char *what)
{
    if (d->n_files == DEMO_MAX_FILES) return; /* a bug: raise DEMO_MAX_FILES */
    demo_file *f = &d->files[d->n_files++];
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->what, sizeof f->what, "%s", what);
}

static void out_path(const demo *d, char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", d->dir, name);
}

/* Run a subcommand with its stdout silenced (its errors still reach stderr). */
static int quietly(int (*cmd)(int, char **), int argc, char **argv)
{
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY);
    if (saved >= 0 && null >= 0) dup2(null, STDOUT_FILENO);
    int rc = cmd(argc, argv);
    fflush(stdout);
    if (saved >= 0) {
        dup2(saved, STDOUT_FILENO);
        close(saved);
    }
    if (null >= 0) close(null);
    return rc;
}

/* Microbatches for a readable chart: about one per stage (at least 4, at
 * most the plan's own), a multiple of every stage's replica count. */
static int readable_micro(const plan *p)
{
    int P = p->n_stages / (p->chunks > 1 ? p->chunks : 1);
    int m = P < 4 ? 4 : P, r = 1;
    if (m > p->n_micro) m = p->n_micro;
    for (int s = 0; s < p->n_stages; s++)
        if (p->stages[s].n_replicas > r) r = p->stages[s].n_replicas;
    if (m % r) m += r - m % r;
    return m;
}

/* Simulate a short run of plan p (few microbatches, the fewest iterations
 * that show the schedule's steady state) with the timeline recorded, and
 * write its trace; *desc says what was simulated. */
static int readable_trace(plan *p, const char *trace, char *desc, size_t cap, cl_err *e)
{
    int m = readable_micro(p), keep_m = p->n_micro, keep_b = p->batch;
    int warm = sched_warmup_iters(p->schedule, sched_fill_depth(p), m);
    int iters = warm ? warm + 1 : 1;
    p->n_micro = m;
    p->batch = m * p->microbatch;
    sched sc = {0};
    sim *s = NULL;
    sim_result r = {0};
    sim_opts o = {.record = 1};
    int rc = sched_build(p, p->schedule, m, iters, &sc, e);
    if (!rc && !(s = sim_create(p, &sc, &o, e))) rc = e->code ? e->code : CL_EINPUT;
    if (!rc) rc = sim_run(s, &r, e);
    if (!rc) rc = sim_write_trace(s, trace, e);
    if (!rc)
        snprintf(desc, cap, "%s, %d microbatch%s of %d, %d iteration%s", sched_kind_name(p->schedule), m,
                 m == 1 ? "" : "es", p->microbatch, iters, iters == 1 ? "" : "s");
    sim_result_free(&r);
    sim_destroy(s);
    sched_free(&sc);
    p->n_micro = keep_m;
    p->batch = keep_b;
    return rc;
}

/* The best plan cannot be exported to torch (stages replicated unevenly,
 * or a schedule torch does not run): plan the run torch does run (`cleave
 * plan --for torch`), say what it costs against the best plan, and write
 * that plan and its export instead, so the demo hands the user a partition
 * they can train with and the price of that choice. */
static int demo_torch_plan(demo *d, const study *st, const cluster *c, const int *kinds, int n_kinds,
                           const study_point *best, int *interrupted, cl_err *e)
{
    const char *name = st->md.name;
    printf("  torch runs whole pipelines replicated (one data-parallel degree) and %s: not this plan\n",
           plan_for_schedules(PLAN_FOR_TORCH));
    int head;
    cl_err me = {0};
    if (plan_target_model(&st->md, plan_for_target(PLAN_FOR_TORCH), name, &head, &me)) {
        printf("  torch: %s\n", me.msg);
        return CL_OK;
    }
    int tk[SCHED_COUNT], refused;
    assert(n_kinds <= SCHED_COUNT); /* demo_schedules names each kind once */
    memcpy(tk, kinds, (size_t)n_kinds * sizeof *tk);
    int n_tk = study_kinds_for(PLAN_FOR_TORCH, tk, n_kinds, &refused);
    if (!n_tk) return CL_OK;
    study ft = *st; /* shallow: the model and profile stay st's */
    ft.framework = PLAN_FOR_TORCH;
    study_point tp;
    prog pg;
    char label[160];
    snprintf(label, sizeof label, "%s --for torch", name);
    prog_begin(&pg, label, study_best_candidates(&ft, n_tk));
    int rc = study_best(&ft, c, tk, n_tk, &pg, &tp, interrupted, e);
    prog_end(&pg);
    if (rc || *interrupted) return rc;
    if (!tp.ok) {
        printf("  torch: no plan torch runs fits %s: %s\n", c->name, tp.reason);
        study_point_free(&tp);
        return CL_OK;
    }
    const plan *p = &tp.res.plan;
    printf("  planned --for torch: %s, %d stage%s x %d replica%s, %d microbatches of %d: %.1f ms per iteration, "
           "%.1f samples/s (%.1f%% below the best plan)\n",
           sched_kind_name(p->schedule), p->n_stages, p->n_stages == 1 ? "" : "s", p->stages[0].n_replicas,
           p->stages[0].n_replicas == 1 ? "" : "s", p->n_micro, p->microbatch, 1e3 * tp.sim.iteration_s,
           tp.sim.throughput, 100 * (1 - tp.sim.throughput / best->sim.throughput));
    char buf[1100], fname[200], what[300];
    snprintf(fname, sizeof fname, "%s-torch-plan.json", name);
    out_path(d, buf, sizeof buf, fname);
    if ((rc = plan_save(p, buf, e))) goto out;
    snprintf(what, sizeof what, "%s planned --for torch (the run the export below describes)", name);
    announce(d, buf, what);
    char *text = NULL;
    if ((rc = plan_export(p, PLAN_TO_TORCH, buf, &text, e))) goto out;
    snprintf(fname, sizeof fname, "%s-torch.py", name);
    out_path(d, buf, sizeof buf, fname);
    rc = cl_write_file(buf, text, strlen(text), e);
    free(text);
    if (!rc) announce(d, buf, "its torch.distributed.pipelining split points (cleave export --to torch)");
out:
    study_point_free(&tp);
    return rc;
}

/* One model: best plan on the demo cluster, its files and pictures. */
static int demo_model(demo *d, const char *model_rel, const cluster *c, const int *kinds, int n_kinds,
                      int *interrupted, cl_err *e)
{
    char model_path[4200], buf[1100], what[200];
    data_path(model_rel, model_path, sizeof model_path);
    study st;
    int rc = study_load(&st, model_path, NULL, 64, e);
    if (rc) return rc;
    const char *name = st.md.name;
    study_point best;
    prog pg;
    prog_begin(&pg, name, study_best_candidates(&st, n_kinds));
    rc = study_best(&st, c, kinds, n_kinds, &pg, &best, interrupted, e);
    prog_end(&pg);
    if (rc || *interrupted) goto done;
    if (!best.ok) {
        rc = cl_fail(e, CL_ERUN, "demo: no plan for %s on %s: %s", name, c->name, best.reason);
        goto done;
    }
    plan *p = &best.res.plan;
    char reps[96] = "";
    size_t at = 0;
    for (int s = 0; s < p->n_stages && at + 12 < sizeof reps; s++)
        at += (size_t)snprintf(reps + at, sizeof reps - at, s ? "/%d" : "%d", p->stages[s].n_replicas);
    printf("%s on %s: %s, %d stages (replicas %s), %d microbatch%s of %d per iteration\n", name, c->name,
           sched_kind_name(p->schedule), p->n_stages, reps, p->n_micro, p->n_micro == 1 ? "" : "es", p->microbatch);
    printf("  simulated: %.1f ms per iteration, %.1f samples/s, bubble %.1f%%, peak memory %.2f GiB per device\n",
           1e3 * best.sim.iteration_s, best.sim.throughput, 100 * best.sim.bubble,
           best.peak_mem_bytes / (double)(1ull << 30));

    snprintf(what, sizeof what, "%s plan on %s (input of cleave sim, export, train --plan)", name, c->name);
    char fname[160];
    snprintf(fname, sizeof fname, "%s-plan.json", name);
    out_path(d, buf, sizeof buf, fname);
    if ((rc = plan_save(p, buf, e))) goto done;
    announce(d, buf, what);

    char *text = NULL;
    cl_err xe = {0};
    if (plan_export(p, PLAN_TO_TORCH, buf, &text, &xe) == CL_OK) {
        snprintf(fname, sizeof fname, "%s-torch.py", name);
        out_path(d, buf, sizeof buf, fname);
        rc = cl_write_file(buf, text, strlen(text), e);
        free(text);
        if (rc) goto done;
        announce(d, buf, "its torch.distributed.pipelining split points (cleave export --to torch)");
    } else if ((rc = demo_torch_plan(d, &st, c, kinds, n_kinds, &best, interrupted, e)) || *interrupted) {
        goto done;
    }

    char trace[1100], desc[120], title[400];
    snprintf(fname, sizeof fname, "%s-trace.json", name);
    out_path(d, trace, sizeof trace, fname);
    if ((rc = readable_trace(p, trace, desc, sizeof desc, e))) goto done;
    snprintf(what, sizeof what, "simulated timeline, %s (Chrome trace: ui.perfetto.dev)", desc);
    announce(d, trace, what);
    static const char *const kinds_plot[2] = {"gantt", "memory"};
    for (int k = 0; k < 2; k++) {
        snprintf(fname, sizeof fname, "%s-%s.png", name, kinds_plot[k]);
        out_path(d, buf, sizeof buf, fname);
        snprintf(title, sizeof title, "%s %s on %s: %s (simulated)", name,
                 k ? "memory in use per device" : "pipeline timeline", c->name, desc);
        char *argv[] = {"plot", trace, "--kind", (char *)kinds_plot[k], "--title", title, "-o", buf, NULL};
        if ((rc = quietly(cmd_plot, 8, argv))) goto done_reported;
        announce(d, buf, k ? "memory in use per device over that run" : "Gantt chart of that run: F, B, W, U, transfers, idle");
    }
done:
    if (rc) rc = cli_report(e);
done_reported:
    study_point_free(&best);
    study_free(&st);
    return rc;
}

int cmd_demo(int argc, char **argv)
{
    demo d = {.dir = "demo"};
    int rc = cli_parse(&demo_spec, argc, argv, &d, 0);
    if (rc) return rc == CLI_HELP ? help() : rc;
    double t0 = cl_now_s();
    cl_err e = {0};
    int interrupted = 0;
    char cpath[4200];
    data_path(DEMO_CLUSTER, cpath, sizeof cpath);
    cluster c;
    if ((rc = study_mkdir(d.dir, &e)) || (rc = cluster_load(&c, cpath, &e))) return cli_report(&e);
    int *kinds = NULL, n_kinds = 0;
    if ((rc = study_schedules("demo", demo_schedules, &kinds, &n_kinds))) {
        cluster_free(&c);
        return rc;
    }
    printf("cleave demo: %s on %s\n%s\n", d.quick ? "vgg16" : "vgg16 and gpt2-1.5b", c.name, c.note);
    printf("best plan: the fastest in simulation of the planner's plans for %s, stages replicated or not\n\n",
           demo_schedules);
    prog_catch_sigint();
    int n_models = d.quick ? 1 : 2;
    for (int i = 0; i < n_models && !rc && !interrupted; i++) {
        rc = demo_model(&d, demo_models[i], &c, kinds, n_kinds, &interrupted, &e);
        if (rc == CL_OK && !interrupted) printf("\n");
        interrupted |= prog_interrupted();
    }
    prog_release_sigint();
    cluster_free(&c);
    free(kinds);

    /* VGG-16: speed-up curve over device counts and schedules */
    char vgg[4200], csv[1100], png[1100], svg[1100];
    data_path(demo_models[0], vgg, sizeof vgg);
    if (!rc && !interrupted) {
        out_path(&d, csv, sizeof csv, "speedup-vgg16.csv");
        out_path(&d, png, sizeof png, "speedup-vgg16.png");
        out_path(&d, svg, sizeof svg, "speedup-vgg16.svg");
        char *av[] = {"sweep", "--model", vgg, "--cluster", cpath, "--devices",
                      d.quick ? "1,2,4" : "1,2,3,4,5,6,7,8", "--schedules",
                      d.quick ? "gpipe,fbp" : "gpipe,1f1b,zb-h1,fbp", "--csv", csv, "--png", png,
                      "--svg", svg, "--quiet", NULL};
        printf("speed-up of vgg16 on the first 1 to 8 devices of v100-8-pcie, per schedule\n\n");
        rc = cmd_sweep((int)(sizeof av / sizeof av[0]) - 1, av);
        if (!rc) {
            announce(&d, csv, "vgg16 speed-up sweep: a row per device count and schedule");
            announce(&d, png, "speed-up curve and peak memory per device (also .svg)");
            announce(&d, svg, "the same curve as SVG");
        }
    }
    /* VGG-16: time and cost per ImageNet epoch on four presets */
    if (!rc && !interrupted) {
        char paths[4][4200];
        int n_cl = d.quick ? 2 : 4;
        for (int i = 0; i < n_cl; i++) data_path(demo_compare[i], paths[i], sizeof paths[i]);
        out_path(&d, csv, sizeof csv, "compare-vgg16.csv");
        out_path(&d, png, sizeof png, "compare-vgg16.png");
        out_path(&d, svg, sizeof svg, "compare-vgg16.svg");
        char *av[32];
        int n = 0;
        av[n++] = "compare";
        av[n++] = "--model";
        av[n++] = vgg;
        av[n++] = "--clusters";
        for (int i = 0; i < n_cl; i++) av[n++] = paths[i];
        char *tail[] = {"--schedules", (char *)demo_schedules, "--csv", csv, "--png", png, "--svg", svg};
        for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++) av[n++] = tail[i];
        av[n] = NULL;
        printf("time and cost of one ImageNet epoch of vgg16 on %d cluster presets\n\n", n_cl);
        rc = cmd_compare(n, av);
        if (!rc) {
            announce(&d, csv, "vgg16 per cluster: best schedule, throughput, time and cost per epoch, headroom");
            announce(&d, png, "time and cost per epoch as bar charts (also .svg)");
            announce(&d, svg, "the same chart as SVG");
        }
    }
    if (rc == PROG_EXIT_INTERRUPTED || interrupted) {
        fprintf(stderr, "cleave demo: interrupted; the files listed below are complete\n");
        rc = PROG_EXIT_INTERRUPTED;
    }
    printf("\nfiles (%d):\n", d.n_files);
    for (int i = 0; i < d.n_files; i++) printf("  %-36s %s\n", d.files[i].path, d.files[i].what);
    if (!rc) printf("\ndone in %.1f s; docs/plots.md explains how to read each picture\n", cl_now_s() - t0);
    return rc;
}
