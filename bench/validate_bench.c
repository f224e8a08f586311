/* validate_bench.c - `cleave bench validate`: prediction accuracy over a
 * suite of plans on this machine (bench/validate.csv).
 *
 * Suite: the three Fashion-MNIST models (MLP, CNN, vision transformer) x
 * {1 stage, 2 stages} x schedules (gpipe, 1f1b, zb-h1, interleaved with 2
 * chunks per worker, pipedream, fbp) x microbatch counts, and the vision
 * transformer with tensor parallelism 2 on one stage (docs/validation-tp.md:
 * t x p <= 2 threads on the 2 cores), then the vision transformer on 2
 * stages recomputing (full and selective; appended, so the earlier cases
 * keep their numbers), then the vision transformer at t = 2 with its
 * tensor ranks as MPI processes (one worker, and two stages: 4 processes
 * on the 2 cores, time-shared, so outside the targets; run_case_mpi),
 * then the vision transformer at t = 2 with sequence parallelism (one
 * stage on the crew).
 * Each plan is built here, not by the planner (the
 * planner makes no interleaved plans): the model's layers are cut into
 * stages x chunks contiguous stages that balance the work of a profile
 * taken at the start (a min-max DP), stage k on core k mod stages.  Then,
 * per case, what `cleave validate` does: costs from a profile of this
 * machine taken right before the case at its microbatch size, the runtime's
 * extras measured in context, the link and the send cost measured once
 * with the threads backend (fit over 8 B .. 4 MiB, beyond the suite's
 * largest transfer), a simulation, and `runs` real runs of `iters`
 * iterations; the measured figures are those of the run with the median
 * iteration time (the machine is shared: other jobs land on its two cores
 * and a single run can catch one).  The whole suite runs in 3 rounds (each
 * case profiled, predicted and measured once per round) and every case
 * reports its round of median error: a slow spell of the host, seconds
 * long, then falls on one round of a few cases instead of deciding a case.
 *
 * Columns: case, model, schedule, stages, chunks, tensor, microbatches, microbatch,
 * iterations, pred_iter_s, meas_iter_s, iter_error, busy_max_error (largest
 * |error| of per-worker busy time per iteration), mem_pred_bytes /
 * mem_meas_bytes / mem_error (the worker with the largest |error|),
 * meas_iter_min_s / meas_iter_max_s over the runs, meas_iter_p10_s and
 * iter_error_p10 (the 10th percentile of every steady-state iteration of
 * every run, and the prediction's error against it: a diagnostic of how
 * far the model is off in iterations that no other job stalled), load
 * (1-minute load average before the case), notes (the recomputation mode
 * when the plan recomputes, then why a case is off by more than 5%, worked
 * out from the per-worker figures; for the MPI cases, that and how many
 * processes).  A number a case has no measurement of is an empty cell.
 * Summary rows: mean and largest |iteration error| (time-shared cases
 * left out), largest |memory error|, and the targets (mean <= 5%, none
 * above 10%, memory within 10%).
 */
#include <assert.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>

#include "models/model.h"
#include "base/escape.h"
#include "base/fileio.h"
#include "base/jsonx.h"
#include "exec/nn/gemm.h"
#include "exec/probe/linkprof.h"
#include "exec/probe/profile_layers.h"
#include "exec/probe/steady.h"
#include "models/tfm_rank.h"
#include "validate.h"

#define ITER_TARGET_MEAN 0.05
#define ITER_TARGET_MAX 0.10
#define MEM_TARGET 0.10
/* seconds of the host-steadiness probe before and after each case's runs */
#define STEADY_PROBE_S 0.2

typedef struct vcase {
    int model;           /* index into models[] */
    sched_kind kind;
    int stages, chunks, micro;
    int tensor;          /* tensor-parallel ranks per stage; 0 and 1: none */
    int recompute;       /* a tfm_recomp (0: none) */
    int tpm;             /* tensor ranks as MPI processes (cleave validate
                            --backend mpi --tensor-over mpi under mpirun) */
    int seq_par;         /* sequence parallelism (with tensor > 1) */
} vcase;

static const char *const models[] = {"models/fmnist-mlp.json", "models/fmnist-cnn.json",
                                     "models/fmnist-vit.json"};
#define N_MODELS 3
/* microbatch size per model: the MLP's ops are tens of microseconds at 32,
 * the CNN's and the ViT's (attention, MLP blocks, layer norms: issue 18)
 * milliseconds at 16 */
static const int model_mb[N_MODELS] = {32, 16, 16};

static const vcase suite[] = {
    {0, SCHED_GPIPE, 1, 1, 4, 1, 0, 0, 0},       {0, SCHED_FBP, 1, 1, 4, 1, 0, 0, 0},
    {0, SCHED_GPIPE, 2, 1, 4, 1, 0, 0, 0},       {0, SCHED_1F1B, 2, 1, 4, 1, 0, 0, 0},
    {0, SCHED_1F1B, 2, 1, 8, 1, 0, 0, 0},        {0, SCHED_ZBH1, 2, 1, 4, 1, 0, 0, 0},
    {0, SCHED_INTERLEAVED, 2, 2, 4, 1, 0, 0, 0}, {0, SCHED_PIPEDREAM, 2, 1, 4, 1, 0, 0, 0},
    {0, SCHED_FBP, 2, 1, 4, 1, 0, 0, 0},         {0, SCHED_FBP, 2, 1, 8, 1, 0, 0, 0},
    {1, SCHED_GPIPE, 1, 1, 4, 1, 0, 0, 0},       {1, SCHED_FBP, 1, 1, 4, 1, 0, 0, 0},
    {1, SCHED_GPIPE, 2, 1, 4, 1, 0, 0, 0},       {1, SCHED_1F1B, 2, 1, 4, 1, 0, 0, 0},
    {1, SCHED_1F1B, 2, 1, 8, 1, 0, 0, 0},        {1, SCHED_ZBH1, 2, 1, 4, 1, 0, 0, 0},
    {1, SCHED_INTERLEAVED, 2, 2, 4, 1, 0, 0, 0}, {1, SCHED_PIPEDREAM, 2, 1, 4, 1, 0, 0, 0},
    {1, SCHED_FBP, 2, 1, 4, 1, 0, 0, 0},         {1, SCHED_FBP, 2, 1, 8, 1, 0, 0, 0},
    {2, SCHED_GPIPE, 1, 1, 4, 1, 0, 0, 0},       {2, SCHED_FBP, 1, 1, 4, 1, 0, 0, 0},
    {2, SCHED_GPIPE, 2, 1, 4, 1, 0, 0, 0},       {2, SCHED_GPIPE, 2, 1, 8, 1, 0, 0, 0},
    {2, SCHED_1F1B, 2, 1, 2, 1, 0, 0, 0},        {2, SCHED_1F1B, 2, 1, 4, 1, 0, 0, 0},
    {2, SCHED_1F1B, 2, 1, 8, 1, 0, 0, 0},        {2, SCHED_ZBH1, 2, 1, 4, 1, 0, 0, 0},
    {2, SCHED_INTERLEAVED, 2, 2, 4, 1, 0, 0, 0}, {2, SCHED_PIPEDREAM, 2, 1, 4, 1, 0, 0, 0},
    {2, SCHED_FBP, 2, 1, 4, 1, 0, 0, 0},         {2, SCHED_FBP, 2, 1, 8, 1, 0, 0, 0},
    /* tensor parallelism, t x p <= 2 threads on the 2 cores (docs/validation.md) */
    {2, SCHED_GPIPE, 1, 1, 4, 2, 0, 0, 0}, {2, SCHED_GPIPE, 1, 1, 8, 2, 0, 0, 0},
    {2, SCHED_FBP, 1, 1, 4, 2, 0, 0, 0},
    /* recomputation (the run's nets, the profile and the replay recompute
     * alike: docs/validation.md) */
    {2, SCHED_1F1B, 2, 1, 4, 1, TFM_RECOMP_FULL, 0, 0}, {2, SCHED_GPIPE, 2, 1, 8, 1, TFM_RECOMP_FULL, 0, 0},
    {2, SCHED_1F1B, 2, 1, 4, 1, TFM_RECOMP_SELECTIVE, 0, 0},
    /* tensor ranks as MPI processes (appended): the ViT whole on one
     * worker at t = 2, 2 processes for the 2 cores; and on 2 stages at
     * t = 2, 4 processes that take turns on the 2 cores, so outside the
     * targets (time-shared: run for its memory and the path, labelled) */
    {2, SCHED_GPIPE, 1, 1, 4, 2, 0, 1, 0}, {2, SCHED_1F1B, 2, 1, 4, 2, 0, 1, 0},
    /* sequence parallelism at t = 2 on the crew (appended): the split
     * layers' all-reduces become all-gathers and reduce-scatters along the
     * sequence, and the weight gradient gathers again */
    {2, SCHED_GPIPE, 1, 1, 4, 2, 0, 0, 1}, {2, SCHED_GPIPE, 1, 1, 8, 2, 0, 0, 1},
    {2, SCHED_FBP, 1, 1, 4, 2, 0, 0, 1},
};
/* `cleave bench validate-tp`: the cases with tensor parallelism, after the
 * same plans with t = 1 (ViT, one stage: gpipe m4 and fbp m4) measured in
 * the same minutes, so the two degrees' errors compare; the crew's, then
 * the processes' */
static const int tp_cases[] = {20, 21, 32, 33, 34, 38, 39, 40, 41, 42};
/* `cleave bench validate-recompute`: the recomputing cases, after the same
 * plans without recomputation (ViT, 2 stages: 1f1b m4 and gpipe m8) */
static const int rc_cases[] = {25, 23, 35, 36, 37};
static const vcase quick_suite[] = {
    {0, SCHED_1F1B, 2, 1, 4, 1, 0, 0, 0},
    {0, SCHED_FBP, 2, 1, 4, 1, 0, 0, 0},
    {2, SCHED_1F1B, 2, 1, 4, 1, 0, 0, 0},
};

/* ------------------------------------------------------------- plans -- */

/* Cut layers 0..n-1 with work[] into S contiguous non-empty groups that
 * minimise the largest group's work; cut[s] = first layer of group s,
 * cut[S] = n.  O(S n^2) DP over prefix sums. */
static void balance(const double *work, int n, int S, int *cut)
{
    assert(S >= 1 && S <= n);
    double *pre = cl_calloc((size_t)n + 1, sizeof *pre);
    for (int i = 0; i < n; i++) pre[i + 1] = pre[i] + work[i];
    /* best[s][j]: least max over s groups of layers 0..j-1; arg: last cut */
    double *best = cl_malloc((size_t)(S + 1) * (size_t)(n + 1) * sizeof *best);
    int *arg = cl_calloc((size_t)(S + 1) * (size_t)(n + 1), sizeof *arg);
#define B_(s, j) best[(size_t)(s) * (size_t)(n + 1) + (size_t)(j)]
#define A_(s, j) arg[(size_t)(s) * (size_t)(n + 1) + (size_t)(j)]
    for (int j = 0; j <= n; j++) B_(0, j) = j == 0 ? 0 : HUGE_VAL;
    for (int s = 1; s <= S; s++)
        for (int j = 0; j <= n; j++) {
            B_(s, j) = HUGE_VAL;
            for (int i = s - 1; i < j; i++) {
                double v = fmax(B_(s - 1, i), pre[j] - pre[i]);
                if (v < B_(s, j)) {
                    B_(s, j) = v;
                    A_(s, j) = i;
                }
            }
        }
    cut[S] = n;
    for (int s = S; s >= 1; s--) cut[s - 1] = A_(s, cut[s]);
#undef B_
#undef A_
    free(pre);
    free(best);
    free(arg);
}

/* Plan c on cluster cl for model m with profile pf (deep copies of m and
 * cl go into the plan).  Costs are left to exec_val_costs. */
static int build_plan(plan *p, const vcase *c, int mb, const model *m, const cluster *cl,
                      const prof *pf, cl_err *e)
{
    memset(p, 0, sizeof *p);
    int S = c->stages * c->chunks, n = m->n_layers;
    double *work = cl_malloc((size_t)n * sizeof *work);
    for (int l = 0; l < n; l++)
        work[l] = prof_fwd_s(&pf->layers[l], mb) + prof_bwd_in_s(&pf->layers[l], mb) +
                  prof_bwd_w_s(&pf->layers[l], mb);
    int *cut = cl_malloc((size_t)(S + 1) * sizeof *cut);
    balance(work, n, S, cut);
    free(work);
    cJSON *mj = model_to_json(m), *cj = cluster_to_json(cl);
    int rc = model_from_json(&p->model, mj, "model", e);
    if (!rc) rc = cluster_from_json(&p->cluster, cj, "cluster", e);
    cJSON_Delete(mj);
    cJSON_Delete(cj);
    p->schedule = c->kind;
    p->chunks = c->chunks;
    p->tensor = c->tensor > 1 ? c->tensor : 1;
    p->recompute = c->recompute;
    p->seq_par = c->seq_par;
    p->optimizer = OPTIM_MOMENTUM;
    p->microbatch = mb;
    p->n_micro = c->micro;
    p->batch = mb * c->micro;
    p->n_stages = S;
    p->stages = cl_calloc((size_t)S, sizeof *p->stages);
    for (int s = 0; s < S; s++) {
        plan_stage *st = &p->stages[s];
        st->first = cut[s];
        st->last = cut[s + 1] - 1;
        st->n_layers = cut[s + 1] - cut[s];
        st->layers = cl_malloc((size_t)st->n_layers * sizeof(int));
        for (int k = 0; k < st->n_layers; k++) st->layers[k] = cut[s] + k;
        st->n_replicas = 1;
        st->devices = cl_malloc(sizeof(int));
        st->devices[0] = s % c->stages;
    }
    free(cut);
    if (!rc) rc = plan_validate(p, "bench plan", e);
    if (rc) plan_free(p);
    return rc;
}

/* ----------------------------------------------------------- one case -- */

typedef struct vres {
    double pred, meas, err, busy_err, mem_pred, mem_meas, mem_err, meas_min, meas_max, load;
    double p10, err_p10;   /* 10th percentile of every window iteration of every run */
    double pred_layers, err_layers; /* predicted from the layer sums (exec_val_layer_costs) */
    double post_s, handoff_s; /* the case's message probe: the sender's share and the rest */
    double host_slow50, host_slow90; /* exec_steady right before and after the runs, the worse */
    double ar_s, ar_lat_s;  /* tensor parallelism: one all-reduce in the replay on the crew
                               or over the processes (rank 0's mean), and the ring
                               latency a step fitted to it */
    int shared;             /* more threads or processes than cores: time-shared,
                               outside the targets */
    char notes[400];
} vres;

static double loadavg(void)
{
    double l = NAN;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = NAN;
        fclose(f);
    }
    return l;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Why the iteration time is off, from the per-worker figures: the worker
 * whose busy time is furthest off, and the measured waiting. */
static void explain(const plan *p, const exec_val_report *r, const exec_pipe_result *m,
                    vres *v)
{
    v->notes[0] = 0;
    if (!(fabs(v->err) > 0.05)) return;
    int wb = 0;
    for (int i = 1; i < r->n_workers; i++)
        if (fabs(r->w[i].busy_s.error) > fabs(r->w[wb].busy_s.error)) wb = i;
    int k = r->last_iter - r->first_iter + 1;
    double wait = k > 0 ? m->w[wb].wait_s / m->n_iter : 0;
    snprintf(v->notes, sizeof v->notes,
             "iteration %+.1f%%: worker %d (stage %d) busy %+.1f%% (predicted %.3g ms, measured %.3g ms per iteration), it waited %.3g ms per iteration; %s",
             100 * v->err, wb, r->w[wb].stage, 100 * r->w[wb].busy_s.error,
             r->w[wb].busy_s.predicted * 1e3, r->w[wb].busy_s.measured * 1e3, wait * 1e3,
             fabs(r->w[wb].busy_s.error) > 0.5 * fabs(v->err)
                 ? "compute ran at another speed than profiled"
                 : (v->err > 0 ? "the run spent less time waiting than simulated"
                               : "the run waited longer than simulated (hand-offs, scheduling)"));
    (void)p;
}

/* obj's number `key`, NAN when it has none (null: not measured). */
static double vnum(const cJSON *obj, const char *key)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(n) ? n->valuedouble : NAN;
}

/* A case whose tensor ranks are MPI processes: `cleave validate --plan
 * --backend mpi --tensor-over mpi --json` of the case's plan under mpirun
 * (workers x t processes), this program run again, its JSON read back.
 * That command profiles, replays the passes over the tensor processes
 * (exec_val_replay_procs), predicts and measures in its own processes,
 * which this one cannot be part of; it makes one run of `iters`
 * iterations, so the columns of the runs' spread, the 10th percentile, the
 * layer sums and the message probe are left empty (NAN). */
static int run_case_mpi(const vcase *c, const plan *p, int iters, int reps, vres *v, cl_err *e)
{
    char dir[] = "/tmp/cleave-bench-XXXXXX", path[64], out[64], err[64], its[16], rps[16];
    if (!mkdtemp(dir)) return cl_fail(e, CL_ERUN, "cannot make a temporary directory in /tmp");
    snprintf(path, sizeof path, "%s/plan.json", dir);
    snprintf(out, sizeof out, "%s/out.json", dir);
    snprintf(err, sizeof err, "%s/err.txt", dir);
    const int np = plan_device_count(p) * plan_tensor(p);
    snprintf(its, sizeof its, "%d", iters);
    snprintf(rps, sizeof rps, "%d", reps);
    int rc = plan_save(p, path, e);
    /* argv[0] is the subcommand's own, skipped (exec_link_mpirun) */
    char *av[] = {"validate", "--plan", path, "--backend", "mpi", "--tensor-over", "mpi",
                  "--iterations", its, "--reps", rps, "--json", NULL};
    exec_steady st[2];
    if (!rc && exec_steady_measure(STEADY_PROBE_S, np, &st[0])) memset(&st[0], 0, sizeof st[0]);
    int ws = rc ? 0 : exec_link_mpirun_wait(np, "validate", (int)(sizeof av / sizeof *av) - 1, av, out, err);
    if (!rc && exec_steady_measure(STEADY_PROBE_S, np, &st[1])) memset(&st[1], 0, sizeof st[1]);
    char *text = NULL;
    if (!rc && (ws == -1 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0))
        rc = cl_fail(e, CL_ERUN, "case %s: mpirun -np %d cleave validate --backend mpi --tensor-over mpi failed (hint: install openmpi-bin; its output: %s, %s)",
                     sched_kind_name(c->kind), np, out, err);
    if (!rc) rc = cl_read_file(out, 1 << 22, &text, NULL, e);
    /* stdout only (its warnings go to err): the JSON starts at the first
     * line that opens an object */
    const char *j = NULL;
    for (const char *q = text; !rc && q && *q; q = strchr(q, '\n') ? strchr(q, '\n') + 1 : NULL)
        if (*q == '{') {
            j = q;
            break;
        }
    cJSON *root = j ? cJSON_ParseWithOpts(j, NULL, 0) : NULL;
    const cJSON *it = root ? cJSON_GetObjectItemCaseSensitive(root, "iteration_s") : NULL;
    const cJSON *ws_a = root ? cJSON_GetObjectItemCaseSensitive(root, "workers") : NULL;
    if (!rc && (!it || !cJSON_IsArray(ws_a)))
        rc = cl_fail(e, CL_ERUN, "case %s: no validation document in %s", sched_kind_name(c->kind), out);
    if (!rc) {
        v->pred = vnum(it, "predicted");
        v->meas = vnum(it, "measured");
        v->err = exec_val_error(v->pred, v->meas);
        v->meas_min = v->meas_max = v->p10 = v->err_p10 = NAN;
        v->pred_layers = v->err_layers = v->post_s = v->handoff_s = NAN;
        double worst_mem = -1;
        for (int i = 0; i < cJSON_GetArraySize(ws_a); i++) {
            const cJSON *w = cJSON_GetArrayItem(ws_a, i);
            const cJSON *b = cJSON_GetObjectItemCaseSensitive(w, "busy_s"),
                        *m = cJSON_GetObjectItemCaseSensitive(w, "peak_mem_bytes");
            double be = exec_val_error(vnum(b, "predicted"), vnum(b, "measured"));
            if (fabs(be) > v->busy_err) v->busy_err = fabs(be);
            double mp = vnum(m, "predicted"), mm = vnum(m, "measured"), me = exec_val_error(mp, mm);
            if (fabs(me) > worst_mem) {
                worst_mem = fabs(me);
                v->mem_pred = mp, v->mem_meas = mm, v->mem_err = me;
            }
        }
        v->ar_s = vnum(root, "allreduce_s");
        v->ar_lat_s = vnum(root, "allreduce_latency_s");
        v->host_slow50 = fmax(st[0].slow50, st[1].slow50);
        v->host_slow90 = fmax(st[0].slow90, st[1].slow90);
    }
    cJSON_Delete(root);
    free(text);
    if (rc) return rc; /* the files named in the message stay */
    remove(out);
    remove(err);
    remove(path);
    rmdir(dir);
    return rc;
}

static int run_case(const vcase *c, const model *m, const prof *pf, const cluster *cl,
                    const exec_link_fit *fit, int runs, int iters, int reps, vres *v, cl_err *e)
{
    memset(v, 0, sizeof *v);
    int mb = model_mb[c->model];
    plan p;
    int rc = build_plan(&p, c, mb, m, cl, pf, e);
    if (rc) return rc;
    /* the cuts come from the suite's profile, so every run of the bench
     * validates the same plans; the costs from a profile taken right now,
     * so profile and run see the machine in the same state */
    prof now;
    int64_t b = mb;
    v->load = loadavg();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    v->shared = cores > 0 && (long)plan_device_count(&p) * plan_tensor(&p) > cores;
    if (c->tpm) {
        rc = run_case_mpi(c, &p, iters, reps, v, e);
        snprintf(v->notes, sizeof v->notes, "tensor ranks as MPI processes (%d)%s",
                 plan_device_count(&p) * plan_tensor(&p),
                 v->shared ? "; more processes than cores take turns on them: outside the targets" : "");
        plan_free(&p);
        return rc;
    }
    rc = exec_profile_net(m, models[c->model], &b, 1, 3, reps, 1, plan_tensor(&p),
                          exec_pipe_net_flags(&p), &now, e);
    if (rc) {
        plan_free(&p);
        return rc;
    }
    exec_val_extra *ex = cl_calloc((size_t)p.n_stages, sizeof *ex);
    rc = exec_val_costs(&p, &now, reps, EXEC_VAL_CTX_REPLAY | EXEC_VAL_CTX_XCORE, ex, "bench plan",
                        e);
    prof_free(&now);
    /* what a message costs, measured right before the runs, so with the
     * wait behaviour they will have (spinning, or asleep when other jobs
     * take the cores: exec_val_post_s) */
    double post_s = 0, handoff_s = 0;
    const int tp = plan_tensor(&p) > 1;
    if (!rc && (p.n_stages > 1 || tp)) rc = exec_val_post_s(EXEC_PIPE_THREADS, &post_s, &handoff_s, e);
    exec_val_add_posts(&p, ex, post_s);
    cluster_link link =
        exec_val_link(&(cluster_link){fit->bw_Bps, post_s + handoff_s}, EXEC_PIPE_THREADS, post_s);
    v->post_s = post_s;
    v->handoff_s = p.n_stages > 1 || tp ? link.latency_s : 0;
    exec_val_set_link(&p, &link);
    /* the tensor-parallel all-reduces: two rendezvous of the ranks through
     * shared memory around their copies (tp_group.h), priced as the planner
     * prices them, a ring on the link fit's copy bandwidth, with the
     * latency a step that makes the ring cost what the all-reduces cost
     * rank 0 in the replay on the crew (exec_val_tp_link: a sleeping
     * partner's wake-up and its compute's spread, which the message probe
     * between spinning threads does not see); the probe's whole cost when
     * the replay measured none */
    if (!rc && tp) {
        cluster_link tl = {fit->bw_Bps, post_s + handoff_s};
        for (int s = 0; s < p.n_stages && !(v->ar_s > 0); s++) v->ar_s = ex[s].ar_ctx_s;
        exec_val_tp_link(&p, ex, &tl);
        v->ar_lat_s = tl.latency_s;
        exec_val_tp_comm(&p, ex, &tl);
    }
    sim_result pred;
    memset(&pred, 0, sizeof pred);
    if (!rc) rc = exec_val_predict(&p, iters, NULL, &pred, e);
    /* how steady the host computes around the runs (exec/probe/steady.h):
     * the same fixed work timed on as many threads as the plan has workers */
    exec_steady st[2];
    const int threads = c->stages * plan_tensor(&p);
    if (!rc && exec_steady_measure(STEADY_PROBE_S, threads, &st[0])) memset(&st[0], 0, sizeof st[0]);
    exec_pipe_result *meas = cl_calloc((size_t)runs, sizeof *meas);
    double *its = cl_malloc((size_t)runs * sizeof *its);
    double *all = cl_malloc((size_t)runs * (size_t)iters * sizeof *all);
    int n_all = 0;
    for (int r = 0; r < runs && !rc; r++) {
        rc = exec_val_measure(&p, EXEC_PIPE_THREADS, 0, iters, "bench plan", NULL, &meas[r], e);
        if (rc) break;
        its[r] = exec_val_measured_iteration_median(&p, &meas[r]);
        int first, last;
        exec_val_measured_iteration(&p, &meas[r], &first, &last);
        for (int k = first; k <= last; k++) all[n_all++] = meas[r].iter_s[k];
    }
    if (!rc && exec_steady_measure(STEADY_PROBE_S, threads, &st[1])) memset(&st[1], 0, sizeof st[1]);
    if (!rc) {
        v->host_slow50 = fmax(st[0].slow50, st[1].slow50);
        v->host_slow90 = fmax(st[0].slow90, st[1].slow90);
    }
    if (!rc && n_all > 0) {
        qsort(all, (size_t)n_all, sizeof *all, cmp_dbl);
        v->p10 = all[(n_all - 1) / 10];
    }
    free(all);
    sim_result pred_l;
    memset(&pred_l, 0, sizeof pred_l);
    if (!rc) { /* the planner's cost model: layer sums with the same extras */
        exec_val_layer_costs(&p, ex);
        rc = exec_val_predict(&p, iters, NULL, &pred_l, e);
        if (!rc) v->pred_layers = pred_l.iteration_s;
        sim_result_free(&pred_l);
    }
    if (!rc) {
        double *sorted = cl_malloc((size_t)runs * sizeof *sorted);
        memcpy(sorted, its, (size_t)runs * sizeof *sorted);
        qsort(sorted, (size_t)runs, sizeof *sorted, cmp_dbl);
        double med = sorted[(runs - 1) / 2];
        int pick = 0;
        for (int r = 0; r < runs; r++)
            if (its[r] == med) pick = r;
        v->meas_min = sorted[0];
        v->meas_max = sorted[runs - 1];
        free(sorted);
        exec_val_report rep;
        rc = exec_val_compare(&p, ex, &pred, &meas[pick], &rep, e);
        if (!rc) {
            v->pred = rep.iteration_s.predicted;
            v->meas = rep.iteration_s.measured;
            v->err = rep.iteration_s.error;
            v->err_p10 = exec_val_error(v->pred, v->p10);
            v->err_layers = exec_val_error(v->pred_layers, v->meas);
            v->busy_err = rep.max_busy_error;
            int wm = 0;
            for (int i = 1; i < rep.n_workers; i++)
                if (fabs(rep.w[i].peak_mem.error) > fabs(rep.w[wm].peak_mem.error)) wm = i;
            v->mem_pred = rep.w[wm].peak_mem.predicted;
            v->mem_meas = rep.w[wm].peak_mem.measured;
            v->mem_err = rep.w[wm].peak_mem.error;
            explain(&p, &rep, &meas[pick], v);
            if (p.recompute || p.seq_par) { /* the modes, as the columns have no place for them */
                char why[sizeof v->notes], mode[64];
                snprintf(why, sizeof why, "%s", v->notes);
                snprintf(mode, sizeof mode, "%s%s%s", p.recompute ? "recompute " : "",
                         p.recompute ? tfm_recomp_name((tfm_recomp)p.recompute) : "",
                         p.seq_par ? (p.recompute ? ", sequence parallel" : "sequence parallel") : "");
                snprintf(v->notes, sizeof v->notes, "%s%s%.300s", mode, why[0] ? "; " : "", why);
            }
            exec_val_report_free(&rep);
        }
    }
    for (int r = 0; r < runs; r++) exec_pipe_result_free(&meas[r]);
    free(meas);
    free(its);
    sim_result_free(&pred);
    free(ex);
    plan_free(&p);
    return rc;
}

/* ------------------------------------------------------------- driver -- */

/* The CPU for the CSV: its model name and, as a virtual CPU's name can be
 * as vague as "AMD EPYC", the vendor's family and model numbers. */
static void cpu_label(char *buf, size_t cap)
{
    char name[128];
    exec_cpu_name(name, sizeof name);
    int fam = -1, mod = -1;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f) && (fam < 0 || mod < 0)) {
            const char *c = strchr(line, ':');
            if (!c) continue;
            if (!strncmp(line, "cpu family", 10)) fam = atoi(c + 1);
            else if (!strncmp(line, "model\t", 6) || !strncmp(line, "model ", 6)) mod = atoi(c + 1);
        }
        fclose(f);
    }
    if (fam >= 0 && mod >= 0) snprintf(buf, cap, "%s, family %d model %d", name, fam, mod);
    else snprintf(buf, cap, "%s", name);
}

static void csv_text(FILE *f, const char *s)
{
    char *q = esc_csv(s);
    fputs(q, f);
    free(q);
}

/* "+1.23%" in 8 columns, "-" when x is not a number (not measured). */
static void pct_cell(char *buf, size_t cap, double x)
{
    if (isfinite(x)) snprintf(buf, cap, "%+7.2f%%", 100 * x);
    else snprintf(buf, cap, "-");
}

/* which: 0 the iteration error, 1 against the 10th percentile, 2 from the
 * layer sums */
static void summary(const vres *v, int n, int which, double *mean, double *max, double *mem)
{
    double *err = cl_malloc((size_t)n * sizeof *err), mm = 0;
    for (int i = 0; i < n; i++) {
        /* a time-shared case measures the scheduler, not the model: not in the
         * time targets (its memory is) */
        err[i] = v[i].shared ? NAN : which == 1 ? v[i].err_p10 : which == 2 ? v[i].err_layers : v[i].err;
        if (fabs(v[i].mem_err) > mm) mm = fabs(v[i].mem_err);
    }
    exec_val_abs_stats(err, n, mean, max);
    *mem = mm;
    free(err);
}

/* The suite (quick: quick_suite), or its cases sub[0..n_sub) (the
 * tensor-parallel or recomputing ones) into <name>.csv. */
static int val_bench(const char *outdir, int quick, const int *sub, int n_sub, const char *name)
{
    cl_err e = {0};
    const int n_suite = (int)(sizeof suite / sizeof *suite);
    int n = quick ? (int)(sizeof quick_suite / sizeof *quick_suite) : sub ? n_sub : n_suite;
    vcase *cs = cl_malloc((size_t)n * sizeof *cs);
    int *num = cl_malloc((size_t)n * sizeof *num); /* each case's number in the suite */
    for (int i = 0; i < n; i++) {
        num[i] = quick ? i : sub ? sub[i] : i;
        cs[i] = quick ? quick_suite[i] : suite[num[i]];
    }
    int runs = quick ? 1 : 3, iters = quick ? 6 : 30, reps = quick ? 5 : 30, rounds = quick ? 1 : 3;
    model md[N_MODELS];
    prof pf[N_MODELS];
    int have[N_MODELS] = {0}, rc = CL_OK;
    for (int i = 0; i < N_MODELS && !rc; i++) {
        int need = 0;
        for (int k = 0; k < n; k++) need |= cs[k].model == i;
        if (!need) continue;
        if ((rc = model_load(&md[i], models[i], &e))) break;
        int64_t b = model_mb[i];
        rc = exec_profile(&md[i], models[i], &b, 1, 3, reps, 1, &pf[i], &e);
        if (rc) model_free(&md[i]);
        else have[i] = 1;
    }
    /* the link: threads backend, 8 B .. 4 MiB (the suite's largest message,
     * the CNN's conv1 output at microbatch 16, is 3.2 MB) */
    exec_link_fit fit;
    memset(&fit, 0, sizeof fit);
    char why[1024] = "";
    double post_s = 0;
    cluster_link link = {1e10, 0};
    cluster cl;
    memset(&cl, 0, sizeof cl);
    if (!rc) {
        exec_link_opts o;
        exec_link_opts_default(&o);
        o.max_bytes = (uint64_t)4 << 20;
        o.seconds_per_size = quick ? 0.005 : 0.05;
        exec_link_sample s[EXEC_LINK_MAX_SIZES];
        int ns = 0;
        rc = exec_link_measure(&o, s, &ns, &e);
        double b[EXEC_LINK_MAX_SIZES], t[EXEC_LINK_MAX_SIZES];
        for (int i = 0; i < ns; i++) b[i] = s[i].bytes, t[i] = s[i].time_s;
        if (!rc) rc = exec_link_fit_ls(b, t, NULL, ns, &fit, &e);
        if (!rc) exec_link_explain(s, ns, &fit, why, sizeof why);
        if (!rc) exec_link_fit_slopeless(b, t, ns, &fit, why, sizeof why);
        if (!rc) rc = exec_val_post_s(EXEC_PIPE_THREADS, &post_s, NULL, &e);
        if (!rc) {
            cluster_link prof_link = {fit.bw_Bps, fit.latency_s};
            link = exec_val_link(&prof_link, EXEC_PIPE_THREADS, post_s);
            /* device figures do not enter: the stage times come from the profile */
            cluster_devtype dt = {.name = "cpu-core", .peak_fp32_flops = 1e11,
                                 .mem_bytes = (uint64_t)8 << 30, .mem_bw_Bps = 1e10,
                                 .efficiency = 1};
            rc = cluster_uniform(&cl, &dt, 2, 0, link, (cluster_link){0, 0}, &e);
        }
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.csv", outdir, name);
    cl_out out = {0};
    if (!rc) rc = cl_out_open(&out, path, &e);
    vres *v = cl_calloc((size_t)n, sizeof *v);
    char cpu[192]; /* so results from different machines can be told apart */
    cpu_label(cpu, sizeof cpu);
    if (!rc) {
        printf("  cpu: %s, OpenBLAS kernel %s\n", cpu, exec_blas_corename());
        int pol = sched_getscheduler(0);
        printf("  scheduling: %s%s\n",
               pol == SCHED_FIFO ? "SCHED_FIFO" : pol == SCHED_RR ? "SCHED_RR" : "SCHED_OTHER",
               pol == SCHED_FIFO || pol == SCHED_RR
                   ? " (other processes cannot take the workers' cores)"
                   : " (other processes can take the workers' cores mid-iteration; on a shared machine run it as chrt -f 1 cleave bench validate)");
        printf("  link (threads, 8 B..4 MiB): latency %.2f us, bandwidth %.2f GB/s, R^2 %.4f; a small message's send cost its sender %.2f us now\n",
               fit.latency_s * 1e6, fit.bw_Bps * 1e-9, fit.r2, post_s * 1e6);
        if (why[0]) printf("  the link fit is %s\n", why);
        printf("  each case measures what a small message costs right before its runs, with the wait behaviour the runs will have: the sender's share (post_s, added to F/B) and the rest, the hand-off (handoff_s; the copy is in F)\n");
        printf("  %-4s %-10s %-12s %3s %3s %3s %3s %11s %11s %8s %8s %8s %8s %8s %5s  %-16s %s\n", "case", "model",
               "schedule", "p", "v", "m", "t", "predicted", "measured", "error", "vs p10", "layers",
               "busy", "memory", "load", "post/hand-off us", "host");
        fprintf(out.f, "case,model,schedule,stages,chunks,tensor,microbatches,microbatch,iterations,pred_iter_s,meas_iter_s,iter_error,busy_max_error,mem_pred_bytes,mem_meas_bytes,mem_error,meas_iter_min_s,meas_iter_max_s,meas_iter_p10_s,iter_error_p10,pred_layers_iter_s,iter_error_layers,load,post_s,handoff_s,host_slow50,host_slow90,cpu,blas_kernel,notes\n");
    }
    /* Rounds: every case profiled, predicted and measured once per round,
     * round after round, so a slow spell of the machine (seconds long on a
     * shared host) falls on one round of several cases rather than on every
     * repeat of one; each case reports its median round (by error), a whole
     * validation in itself. */
    vres *all = cl_calloc((size_t)n * (size_t)rounds, sizeof *all);
    for (int k = 0; k < rounds && !rc; k++) {
        if (rounds > 1) {
            printf("  round %d of %d ...\n", k + 1, rounds);
            fflush(stdout);
        }
        for (int i = 0; i < n && !rc; i++) {
            const vcase *c = &cs[i];
            rc = run_case(c, &md[c->model], &pf[c->model], &cl, &fit, runs, iters, reps,
                          &all[(size_t)i * (size_t)rounds + (size_t)k], &e);
        }
    }
    for (int i = 0; i < n && !rc; i++) {
        const vcase *c = &cs[i];
        vres *r = &all[(size_t)i * (size_t)rounds];
        int pick = 0; /* the round of median error */
        for (int k = 0; k < rounds; k++) {
            int below = 0, equal_before = 0;
            for (int j = 0; j < rounds; j++) {
                below += r[j].err < r[k].err;
                equal_before += j < k && r[j].err == r[k].err;
            }
            if (below + equal_before == (rounds - 1) / 2) pick = k;
        }
        v[i] = r[pick];
        char p10[16], lay[16], ph[16];
        pct_cell(p10, sizeof p10, v[i].err_p10);
        pct_cell(lay, sizeof lay, v[i].err_layers);
        if (isfinite(v[i].post_s)) snprintf(ph, sizeof ph, "%5.2f/%5.2f", v[i].post_s * 1e6, v[i].handoff_s * 1e6);
        else snprintf(ph, sizeof ph, "%11s", "-");
        printf("  %-4d %-10s %-12s %3d %3d %3d %3d %9.3f ms %9.3f ms %+7.2f%% %8s %8s %7.2f%% %+7.2f%% %5.2f  %s  %+5.1f%%%s\n",
               num[i], md[c->model].name, sched_kind_name(c->kind), c->stages, c->chunks, c->micro,
               c->tensor > 1 ? c->tensor : 1, v[i].pred * 1e3, v[i].meas * 1e3, 100 * v[i].err, p10,
               lay, 100 * v[i].busy_err, 100 * v[i].mem_err, v[i].load, ph, 100 * v[i].host_slow90,
               v[i].shared ? "  (time-shared)" : fabs(v[i].err) > 0.05 ? "  (over 5%)" : "");
        if (c->recompute) printf("       recompute %s\n", tfm_recomp_name((tfm_recomp)c->recompute));
        if (c->seq_par) printf("       sequence parallel\n");
        if (c->tpm) printf("       %s\n", v[i].notes);
        if (v[i].ar_s > 0 && c->tpm)
            printf("       all-reduce: %.1f us each in the replay over the tensor processes; ring latency %.2f us a step\n",
                   v[i].ar_s * 1e6, v[i].ar_lat_s * 1e6);
        else if (v[i].ar_s > 0)
            printf("       %s: %.1f us each in the replay on the crew; ring latency %.2f us a step (the message probe's: %.2f us)\n",
                   c->seq_par ? "collective" : "all-reduce", v[i].ar_s * 1e6, v[i].ar_lat_s * 1e6, (v[i].post_s + v[i].handoff_s) * 1e6);
        fflush(stdout);
        /* numbers a case has no measurement of (NAN) are empty cells */
        fprintf(out.f, "%d,%s,%s,%d,%d,%d,%d,%d,%d,", num[i], md[c->model].name,
                sched_kind_name(c->kind), c->stages, c->chunks, c->tensor > 1 ? c->tensor : 1,
                c->micro, model_mb[c->model], iters);
        const double cells[] = {v[i].pred, v[i].meas, v[i].err, v[i].busy_err, v[i].mem_pred,
                                v[i].mem_meas, v[i].mem_err, v[i].meas_min, v[i].meas_max,
                                v[i].p10, v[i].err_p10, v[i].pred_layers, v[i].err_layers,
                                v[i].load, v[i].post_s, v[i].handoff_s, v[i].host_slow50,
                                v[i].host_slow90};
        /* digits of each: N >= 0 as %.Nf, N < 0 as %.-Ng (significant digits) */
        const int prec[] = {-9, -9, 5, 5, 0, 0, 5, -9, -9, -9, 5, -9, 5, 2, -4, -4, 4, 4};
        _Static_assert(sizeof cells / sizeof *cells == sizeof prec / sizeof *prec, "digits per cell");
        for (size_t k = 0; k < sizeof cells / sizeof *cells; k++) {
            if (isfinite(cells[k]) && prec[k] < 0) fprintf(out.f, "%.*g", -prec[k], cells[k]);
            else if (isfinite(cells[k])) fprintf(out.f, "%.*f", prec[k], cells[k]);
            fputc(',', out.f);
        }
        csv_text(out.f, cpu);
        fputc(',', out.f);
        csv_text(out.f, exec_blas_corename());
        fputc(',', out.f);
        csv_text(out.f, v[i].notes);
        fputc('\n', out.f);
    }
    free(all);
    if (!rc) {
        double mean, max, mem, mean10, max10, meanl, maxl;
        summary(v, n, 0, &mean, &max, &mem);
        summary(v, n, 1, &mean10, &max10, &mem);
        summary(v, n, 2, &meanl, &maxl, &mem);
        int ok = mean <= ITER_TARGET_MEAN && max <= ITER_TARGET_MAX && mem <= MEM_TARGET;
        fprintf(out.f, "summary,,,,,,,,,,,%.5f,,,,%.5f,,,,%.5f,,%.5f,,,,,,,,", mean, mem, mean10, meanl);
        csv_text(out.f, "mean |iteration error| (iter_error, iter_error_p10, iter_error_layers), largest |memory error| (mem_error)");
        fprintf(out.f, "\nsummary_max,,,,,,,,,,,%.5f,,,,,,,,%.5f,,%.5f,,,,,,,,", max, max10, maxl);
        csv_text(out.f, "largest |iteration error| (iter_error, iter_error_p10, iter_error_layers)");
        fputc('\n', out.f);
        rc = cl_out_commit(&out, &e);
        int unsteady = 0;
        double worst = 0;
        for (int i = 0; i < n; i++) {
            unsteady += !(v[i].host_slow90 <= EXEC_STEADY_MAX_SLOW90);
            worst = fmax(worst, v[i].host_slow90);
        }
        int shared = 0;
        for (int i = 0; i < n; i++) shared += v[i].shared;
        printf("  %d plans: iteration time error mean %.2f%%, largest %.2f%% (targets 5%%, 10%%); peak memory error largest %.2f%% (target 10%%): %s\n",
               n, 100 * mean, 100 * max, 100 * mem, ok ? "met" : "NOT met");
        if (shared)
            printf("  %d time-shared case%s (more threads or processes than cores) outside the time figures and targets, its memory in them\n",
                   shared, shared == 1 ? "" : "s");
        if (unsteady)
            printf("  the host was unsteady around %d of %d cases: a fixed FMA loop ran up to %+.0f%% slower than its fastest in one slice of ten (column host; steady is at most %+.0f%%), so these errors measure the host's other work as much as the model; judge the targets on a steady host\n",
                   unsteady, n, 100 * worst, 100 * EXEC_STEADY_MAX_SLOW90);
        printf("  against the 10th percentile of the measured iterations (a diagnostic: iterations a neighbour did not stall): mean %.2f%%, largest %.2f%%\n",
               100 * mean10, 100 * max10);
        printf("  predicted from the per-layer profile's sums instead (the planner's cost model, a diagnostic): mean %.2f%%, largest %.2f%%\n",
               100 * meanl, 100 * maxl);
        if (!rc) printf("  wrote %s\n", path);
    } else {
        cl_out_abort(&out);
    }
    if (rc) fprintf(stderr, "bench validate: %s\n", e.msg);
    free(v);
    free(cs);
    free(num);
    for (int i = 0; i < N_MODELS; i++)
        if (have[i]) {
            prof_free(&pf[i]);
            model_free(&md[i]);
        }
    cluster_free(&cl);
    return rc;
}

int exec_val_bench(const char *outdir, int quick) { return val_bench(outdir, quick, NULL, 0, "validate"); }
int exec_val_bench_tp(const char *outdir, int quick)
{
    return val_bench(outdir, quick, tp_cases, (int)(sizeof tp_cases / sizeof *tp_cases), "validate-tp");
}
int exec_val_bench_recompute(const char *outdir, int quick)
{
    return val_bench(outdir, quick, rc_cases, (int)(sizeof rc_cases / sizeof *rc_cases),
                     "validate-recompute");
}
