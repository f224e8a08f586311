/* test_exec_txp.c - pipelines of tensor-parallel stages (t x p) on threads
 * (exec/run/pipe_tp.c): `cleave train --plan` with a plan of tensor t > 1.
 *
 * The ViT (models/fmnist-vit.json) cut into the two stages of
 * bench/results/pipe/fmnist-vit-2stage-1f1b.json, on synthetic data:
 * - one microbatch per iteration: t = 2 x p = 2 equals the sequential
 *   tensor-parallel trainer (`cleave train --tensor 2`, tp_team.h, written
 *   apart from the pipeline) bit for bit, for every synchronous schedule
 *   (the same shards, the same rank-order all-reduces, the same data order;
 *   a cut reproduces the whole model's bits: suite exec_net);
 * - four microbatches: t = 2 and 4 equal the same plan with t = 1 within
 *   the bound suite exec_tp puts on the reordered row-parallel sums, for
 *   the synchronous and the asynchronous schedules (PipeDream's weight
 *   versions are then every rank's);
 * - bench/validate.c's prediction of such a plan;
 * - the MPI backend (a rank per worker, its crew threads) equal to threads
 *   byte for byte, recomputation accepted (suite exec_recomp runs it),
 *   the command's output, and a run killed and resumed from its
 *   checkpoint.
 * Replicated stages with t > 1: suite exec_txr.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fileio.h"
#include "bench/validate.h"
#include "core/plan.h"
#include "exec/nn/data.h"
#include "exec/nn/gemm.h"
#include "exec/nn/net.h"
#include "exec/run/pipeline.h"
#include "exec/run/train.h"
#include "exec/run/tp_group.h"
#include "test.h"
#include "test_pipe.h"
#include "test_vit.h"

#define VIT_PLAN TV_PLAN

enum { K_IT = 3 }; /* iterations of every run */


/* ------------------------------------- against the sequential trainer -- */

/* One microbatch of 16 per iteration, K_IT iterations = one epoch of the
 * sequential trainer with --tensor 2 over the same 48 samples. */
static void test_txp_equals_trainer(void)
{
    enum { MB = 16 };
    exec_data d = {0};
    exec_data_synthetic(&d, K_IT * MB, 1, 28, 28, 10, 5, 0);
    plan p;
    if (tv_plan(&p, SCHED_GPIPE, 1, MB, 2, 0)) return;
    exec_pipe_opts o;
    tv_opts(&o, &d, K_IT);
    exec_net *ref = tv_trainer(&p, &o, &d, MB, 2, 0);
    cl_err e = {0};
    exec_net *start;
    CU_ASSERT_EQUAL_FATAL(exec_net_create(&start, &p.model, 0, p.model.n_layers, 1, o.seed, 0, "", &e), CL_OK);
    const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_ZBH1, SCHED_SEQUENTIAL};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        p.schedule = kinds[k];
        exec_pipe_result r;
        if (tv_run(&p, &o, &r)) {
            exec_pipe_result_free(&r);
            continue;
        }
        int same = r.n_tensors == exec_net_n_tensors(ref), moved = 0;
        for (int i = 0; same && i < r.n_tensors; i++) {
            const exec_tensor *x = exec_net_tensor(ref, i), *s = exec_net_tensor(start, i);
            const float *got = r.params + r.tensors[i].offset;
            same = x->n == r.tensors[i].n && !strcmp(x->name, r.tensors[i].name) &&
                   memcmp(x->data, got, (size_t)x->n * sizeof(float)) == 0;
            moved |= memcmp(s->data, got, (size_t)x->n * sizeof(float)) != 0;
        }
        printf("\n    %s: %s ", sched_kind_name(kinds[k]), same ? "bit for bit" : "DIFFERS");
        CU_ASSERT(same);
        CU_ASSERT(moved); /* training changed the weights: the comparison saw something */
        CU_ASSERT_EQUAL(r.n_workers, kinds[k] == SCHED_SEQUENTIAL ? 1 : 2);
        exec_pipe_result_free(&r);
    }
    exec_net_destroy(start);
    exec_net_destroy(ref);
    plan_free(&p);
    exec_data_free(&d);
}

/* ------------------------------------------------ against t = 1 -- */

static void test_txp_vs_t1(void)
{
    enum { M = 4, MB = 4 };
    exec_data d = {0};
    exec_data_synthetic(&d, K_IT * M * MB, 1, 28, 28, 10, 5, 0);
    const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_ZBH1, SCHED_SEQUENTIAL,
                                SCHED_FBP, SCHED_PIPEDREAM};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        plan p;
        if (tv_plan(&p, kinds[k], M, MB, 1, 0)) break;
        exec_pipe_opts o;
        tv_opts(&o, &d, K_IT);
        exec_pipe_result r1;
        if (tv_run(&p, &o, &r1)) {
            exec_pipe_result_free(&r1);
            plan_free(&p);
            continue;
        }
        const int updates = sched_is_async(kinds[k]) ? K_IT * M : K_IT;
        for (int t = 2; t <= (kinds[k] == SCHED_1F1B ? 4 : 2); t *= 2) {
            p.tensor = t;
            exec_pipe_result rt;
            if (!tv_run(&p, &o, &rt)) {
                char label[64];
                snprintf(label, sizeof label, "%s, t = %d", sched_kind_name(kinds[k]), t);
                tv_check_vs_t1(&rt, &r1, updates, label);
            }
            exec_pipe_result_free(&rt);
        }
        exec_pipe_result_free(&r1);
        plan_free(&p);
    }
    exec_data_free(&d);
}

/* ------------------------------------------------------- validation -- */

/* The two-stage ViT plan (gpipe, 2 microbatches of 4, tensor t) costed by
 * bench/validate.c from a profile of this machine (exec_val_costs with
 * ctx); 1 (after a failed assertion) when it cannot be. */
static int vit_costs(plan *p, prof *pf, exec_val_extra *x, int t, int ctx)
{
    if (tv_plan(p, SCHED_GPIPE, 2, 4, t, 0)) return 1;
    cl_err e = {0};
    int rc = exec_val_profile(p, 3, pf, VIT_PLAN, &e);
    CU_ASSERT_EQUAL(rc, CL_OK);
    if (!rc) {
        rc = exec_val_costs(p, pf, 3, ctx, x, VIT_PLAN, &e);
        CU_ASSERT_EQUAL(rc, CL_OK);
        if (rc) prof_free(pf);
    }
    if (rc) plan_free(p);
    return rc != CL_OK;
}

/* bench/validate.c on a t = 2 plan: stage costs of one rank's share, the
 * all-reduces priced as a ring (worked out here from the layer shapes: one
 * of each attention and mlp layer's (mb, T, D) output in the forward, one
 * in the input gradient, 2 (t - 1) steps of latency + bytes / (t
 * bandwidth)), and predicted peak memory per worker equal to the run's
 * rank 0 (weights, gradients, momentum of its shard, its stash). */
static void test_txp_validate(void)
{
    enum { MB = 4, T = 2 };
    plan p;
    prof pf;
    exec_val_extra x[2];
    if (vit_costs(&p, &pf, x, T, 0)) return;
    double before[2][2], whole[2];
    for (int s = 0; s < 2; s++) {
        before[s][0] = p.stages[s].fwd_s;
        before[s][1] = p.stages[s].bwd_in_s;
        whole[s] = 0;
        for (int l = p.stages[s].first; l <= p.stages[s].last; l++)
            whole[s] += (double)p.model.layers[l].params * 4;
        /* a shard: the split layers' weights halve, the rest is whole */
        CU_ASSERT(p.stages[s].param_bytes < 0.75 * whole[s] && p.stages[s].param_bytes > 0.4 * whole[s]);
        CU_ASSERT(x[s].crew_s > 0);
    }
    const cluster_link link = {2e9, 15e-6};
    exec_val_tp_comm(&p, x, &link);
    for (int s = 0; s < 2; s++) {
        double ar = 0;
        for (int l = p.stages[s].first; l <= p.stages[s].last; l++) {
            const model_layer *ml = &p.model.layers[l];
            if (ml->kind != MODEL_ATTENTION && ml->kind != MODEL_MLP) continue;
            const double bytes = (double)MB * 16 * 64 * 4; /* (mb, 16 tokens, width 64) floats */
            CU_ASSERT_EQUAL(ml->out_elems, 16 * 64);
            ar += 2 * (T - 1) * (15e-6 + bytes / T / 2e9);
        }
        CU_ASSERT(ar > 0); /* both stages hold blocks */
        CU_ASSERT_DOUBLE_EQUAL(p.stages[s].fwd_s - before[s][0], ar, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(p.stages[s].bwd_in_s - before[s][1], ar, 1e-15);
    }
    sim_result pred;
    exec_pipe_result meas;
    exec_val_report rep;
    if (tv_val_run(&p, x, VIT_PLAN, &pred, &meas, &rep)) {
        prof_free(&pf);
        plan_free(&p);
        CU_FAIL_FATAL("no prediction or run to compare");
    }
    for (int w = 0; w < rep.n_workers; w++) {
        printf("\n    worker %d: peak memory predicted %.0f, measured %.0f bytes ", w,
               rep.w[w].peak_mem.predicted, rep.w[w].peak_mem.measured);
        CU_ASSERT(fabs(rep.w[w].peak_mem.error) < 1e-9);
        CU_ASSERT_EQUAL(meas.w[w].at_peak.weights, p.stages[w].param_bytes);
    }
    exec_val_report_free(&rep);
    exec_pipe_result_free(&meas);
    sim_result_free(&pred);
    prof_free(&pf);
    plan_free(&p);
}

/* The replay on the crew (bench/validate_replay.c): a split stage's ops run
 * on t ranks with the real all-reduces, rank 0's time in them measured
 * apart (ar_ctx_s > 0 on both stages of a t = 2 plan, 0 at t = 1); and
 * exec_val_tp_link, worked out by hand: the ring's latency a step that
 * makes exec_val_tp_comm add, over both stages, exactly the measured
 * all-reduces (n per stage, each ar_ctx_s), with the bytes terms of the
 * ring at bandwidth bw (2 (t - 1) steps of msg / (t bw) each). */
static void test_txp_validate_ar(void)
{
    enum { MB = 4, T = 2 };
    plan p;
    prof pf;
    exec_val_extra x[2];
    if (vit_costs(&p, &pf, x, T, EXEC_VAL_CTX_REPLAY)) return;
    int n[2] = {0, 0};
    for (int s = 0; s < 2; s++) {
        CU_ASSERT(x[s].ar_ctx_s > 0);
        CU_ASSERT(x[s].fwd_ctx_s > 0 && x[s].bwd_in_ctx_s > 0);
        for (int l = p.stages[s].first; l <= p.stages[s].last; l++)
            n[s] += 2 * (p.model.layers[l].kind == MODEL_ATTENTION || p.model.layers[l].kind == MODEL_MLP);
        CU_ASSERT(n[s] > 0); /* both stages hold blocks */
    }
    /* by hand: 2 stages with measured all-reduces of 40 and 70 us */
    const double bw = 2e9, msg = (double)MB * 16 * 64 * 4, bytes_term = 2.0 * (T - 1) * msg / T / bw;
    x[0].ar_ctx_s = 40e-6;
    x[1].ar_ctx_s = 70e-6;
    const double want_lat = (n[0] * (40e-6 - bytes_term) + n[1] * (70e-6 - bytes_term)) /
                            (2.0 * (T - 1) * (n[0] + n[1]));
    cluster_link link = {bw, 123e-6};
    CU_ASSERT_EQUAL(exec_val_tp_link(&p, x, &link), 1);
    CU_ASSERT_DOUBLE_EQUAL(link.latency_s, want_lat, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(link.bw_Bps, bw, 0);
    double before = 0, after = 0;
    for (int s = 0; s < 2; s++) before += p.stages[s].fwd_s + p.stages[s].bwd_in_s;
    exec_val_tp_comm(&p, x, &link);
    for (int s = 0; s < 2; s++) after += p.stages[s].fwd_s + p.stages[s].bwd_in_s;
    CU_ASSERT_DOUBLE_EQUAL(after - before, n[0] * 40e-6 + n[1] * 70e-6, 1e-12);
    /* all-reduces faster than their bytes: latency 0, not negative */
    x[0].ar_ctx_s = x[1].ar_ctx_s = 0.5 * bytes_term;
    CU_ASSERT_EQUAL(exec_val_tp_link(&p, x, &link), 1);
    CU_ASSERT_EQUAL(link.latency_s, 0);
    /* nothing measured: the link is left alone */
    x[0].ar_ctx_s = x[1].ar_ctx_s = 0;
    link.latency_s = 5e-6;
    CU_ASSERT_EQUAL(exec_val_tp_link(&p, x, &link), 0);
    CU_ASSERT_EQUAL(link.latency_s, 5e-6);
    prof_free(&pf);
    plan_free(&p);
    /* t = 1: no crew, no all-reduce, and the link is the caller's */
    if (vit_costs(&p, &pf, x, 1, EXEC_VAL_CTX_REPLAY)) return;
    for (int s = 0; s < 2; s++) CU_ASSERT_EQUAL(x[s].ar_ctx_s, 0);
    CU_ASSERT_EQUAL(exec_val_tp_link(&p, x, &link), 0);
    prof_free(&pf);
    plan_free(&p);
}

/* The replay over tensor ranks that are processes (exec_val_replay_procs),
 * with two threads standing in for the two processes of a t = 2 group: each
 * calls it with its own view of a tp_group (the crew's all-reduce), wrapped
 * so that every call is counted and lasts at least PAD_S.  Both ranks make
 * the same number of all-reduces (else the replay would hang), a whole
 * number of microbatches' worth (two per split layer per F and B), and
 * rank 0's price of one, ar_ctx_s, is the mean over them, so at least PAD_S;
 * ranks other than 0 report nothing.  Then exec_val_costs with
 * EXEC_VAL_CTX_REPLAYED keeps figures injected into x (no replay of its
 * own): each stage's times are the injected passes plus the extras, in
 * closed form, and no crew (EXEC_VAL_CTX_TP_MPI). */
#define PAD_S 50e-6
typedef struct padcomm {
    exec_tp_comm c;
    const exec_tp_comm *inner;
    int64_t calls;
} padcomm;

static void pad_allreduce(void *ctx, int rank, float *buf, int64_t n)
{
    padcomm *pc = ctx;
    pc->inner->allreduce(pc->inner->ctx, rank, buf, n);
    pc->calls++;
    double t0 = exec_now();
    while (exec_now() - t0 < PAD_S) {
    }
}

typedef struct procjob {
    const plan *p;
    padcomm pc;
    exec_val_extra x[2];
    int rc;
} procjob;

static void *procs_main(void *arg)
{
    procjob *j = arg;
    cl_err e = {0};
    memset(j->x, 0, sizeof j->x);
    j->rc = exec_val_replay_procs(j->p, 3, &j->pc.c, j->x, VIT_PLAN, &e);
    return NULL;
}

static void test_txp_validate_procs(void)
{
    enum { MB = 4, T = 2, M = 2 };
    plan p;
    if (tv_plan(&p, SCHED_GPIPE, M, MB, T, 0)) return;
    exec_tp_group *g = exec_tp_group_create(T, (int64_t)MB * 16 * 64);
    procjob j[T];
    pthread_t th[T];
    for (int r = 0; r < T; r++) {
        memset(&j[r], 0, sizeof j[r]);
        j[r].p = &p;
        j[r].pc.inner = exec_tp_group_comm(g, r);
        j[r].pc.c = (exec_tp_comm){.rank = r, .size = T, .allreduce = pad_allreduce, .ctx = &j[r].pc};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[r], NULL, procs_main, &j[r]), 0);
    }
    for (int r = 0; r < T; r++) pthread_join(th[r], NULL);
    exec_tp_group_destroy(g);
    int split = 0; /* split layers over both stages */
    for (int l = 0; l < p.model.n_layers; l++)
        split += p.model.layers[l].kind == MODEL_ATTENTION || p.model.layers[l].kind == MODEL_MLP;
    CU_ASSERT(split > 0);
    CU_ASSERT_EQUAL(j[0].rc, CL_OK);
    CU_ASSERT_EQUAL(j[1].rc, CL_OK);
    CU_ASSERT(j[0].pc.calls > 0);
    CU_ASSERT_EQUAL(j[0].pc.calls, j[1].pc.calls);
    CU_ASSERT_EQUAL(j[0].pc.calls % (2 * split * M), 0);
    for (int s = 0; s < 2; s++) {
        CU_ASSERT(j[0].x[s].ar_ctx_s >= PAD_S);
        CU_ASSERT(j[0].x[s].fwd_ctx_s > 0 && j[0].x[s].bwd_in_ctx_s > 0);
        CU_ASSERT_EQUAL(j[1].x[s].ar_ctx_s, 0);
        CU_ASSERT_EQUAL(j[1].x[s].fwd_ctx_s, 0);
    }
    /* the prediction takes the injected figures as they are */
    prof pf;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_val_profile(&p, 3, &pf, VIT_PLAN, &e), CL_OK);
    exec_val_extra x[2];
    memset(x, 0, sizeof x);
    const double f[2] = {1e-3, 2e-3}, bi[2] = {3e-3, 4e-3}, bw[2] = {5e-4, 6e-4}, ar[2] = {40e-6, 70e-6};
    for (int s = 0; s < 2; s++) {
        x[s].fwd_ctx_s = f[s];
        x[s].bwd_in_ctx_s = bi[s];
        x[s].bwd_w_ctx_s = bw[s];
        x[s].ar_ctx_s = ar[s];
    }
    CU_ASSERT_EQUAL_FATAL(exec_val_costs(&p, &pf, 3,
                                         EXEC_VAL_CTX_REPLAY | EXEC_VAL_CTX_TP_MPI | EXEC_VAL_CTX_REPLAYED,
                                         x, VIT_PLAN, &e),
                          CL_OK);
    for (int s = 0; s < 2; s++) {
        const plan_stage *st = &p.stages[s];
        CU_ASSERT_EQUAL(x[s].ar_ctx_s, ar[s]);
        CU_ASSERT_EQUAL(x[s].crew_s, 0);
        CU_ASSERT_DOUBLE_EQUAL(st->fwd_s, f[s] + x[s].copy_s + x[s].input_s, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(st->bwd_in_s, bi[s] + x[s].swap_s, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(st->bwd_w_s, bw[s], 1e-15);
        CU_ASSERT(x[s].update_s > 0); /* the extras were measured around them */
    }
    prof_free(&pf);
    plan_free(&p);
}

/* --------------------------------------------------- refusals, command -- */

static void test_txp_refusals(void)
{
    plan p;
    if (tv_plan(&p, SCHED_1F1B, 4, 4, 2, 0)) return;
    cl_err e = {0};
    /* heads 4: t = 3 splits nothing evenly */
    p.tensor = 3;
    e = (cl_err){0};
    CU_ASSERT_EQUAL(exec_pipe_check(&p, "x.json", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--tensor 3 does not divide its 4 heads"));
    p.tensor = 2;
    p.recompute = 1; /* runs now (suite exec_recomp) */
    e = (cl_err){0};
    CU_ASSERT_EQUAL(exec_pipe_check(&p, "x.json", &e), CL_OK);
    p.recompute = 0;
    e = (cl_err){0};
    CU_ASSERT_EQUAL(exec_pipe_check(&p, "x.json", &e), CL_OK);
    CU_ASSERT_EQUAL(exec_pipe_ckpt_check(&p, "x.json", &e), CL_OK);
    /* sequence parallelism runs (suites exec_sp, validate_sp); context
     * parallelism does not, and is refused naming the key, where it would
     * otherwise train the plan without it */
    p.seq_par = 1;
    e = (cl_err){0};
    CU_ASSERT_EQUAL(exec_pipe_check(&p, "x.json", &e), CL_OK);
    CU_ASSERT_EQUAL(plan_exec_refuse(&p, "x.json", "cleave validate", &e), CL_OK);
    p.seq_par = 0;
    p.context = 2;
    e = (cl_err){0};
    CU_ASSERT_EQUAL(exec_pipe_check(&p, "x.json", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "x.json: context: "));
    e = (cl_err){0};
    CU_ASSERT_EQUAL(plan_exec_refuse(&p, "x.json", "cleave validate", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "x.json: context: "));
    p.context = 0;
    e = (cl_err){0};
    CU_ASSERT_EQUAL(plan_exec_refuse(&p, "x.json", "cleave validate", &e), CL_OK);
    plan_free(&p);
}

/* A plan file with "sequence_parallel": true: `train --plan` trains it,
 * saying so, and writes the weights file, the MPI backend (tensor ranks as
 * threads or as processes) the same bytes as threads, killed and resumed
 * the uninterrupted run's (`validate` of it: suite validate_sp). */
static void test_txp_seq_par_cli(void)
{
    char pl[512], sp[512], w[512], args[2048];
    char *dir = test_scratch(sizeof pl, "t2.json", pl, "t2-sp.json", sp, "w.bin", w, NULL);
    tv_write_plan(pl, NULL, 2, NULL, 1);
    tv_write_seq_par(pl, sp);
    char *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --iterations 2 --save-weights %s", sp, w);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "x 2 tensor-parallel threads (threads), schedule 1f1b, batch 64 = 4 x 16, sequence parallel\n"));
    CU_ASSERT(access(w, F_OK) == 0);
    free(out);
    free(err);
    tv_mpi_same(sp, 2, 2, 1, dir);
    /* t = 4, a process per tensor rank: the reduce-scatter's sums of four
     * in rank order are the crew's */
    char sp4[600];
    snprintf(sp4, sizeof sp4, "%s/t4-sp.json", dir);
    tv_write_plan(sp4, NULL, 4, NULL, 1);
    tv_write_seq_par(sp4, sp4); /* read whole before it is rewritten */
    tv_mpi_same(sp4, 2, 4, 0, dir);
    /* killed and resumed: the checkpoint holds the shards gathered, as
     * without sequence parallelism, which changes no parameter layout */
    tv_kill_resume(sp, dir);
    test_rmtree(dir);
}

static void test_txp_cli(void)
{
    char pl[512], rc_plan[512], w[512], args[2048];
    char *dir = test_scratch(sizeof pl, "t2.json", pl, "t2-recompute.json", rc_plan, "w.bin", w, NULL);
    tv_write_plan(pl, NULL, 2, NULL, 1);
    tv_write_plan(rc_plan, NULL, 2, "selective", 1);
    char *out, *err;
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --iterations 2 --save-weights %s", pl, w);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    char head[700];
    snprintf(head, sizeof head, "train fmnist-vit with %s: 2 stages on 2 workers x 2 tensor-parallel threads (threads), schedule 1f1b, batch 64 = 4 x 16\n", pl);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, head));
    char *wf = test_slurp(w);
    CU_ASSERT(wf && !strncmp(wf, "cleave-weights 1 ", 17));
    free(wf);
    free(out);
    free(err);
    tv_mpi_same(pl, 2, 2, 1, dir);
    tv_mpi_tensor_refusals(pl, 2, 2);
    tv_mpi_ckpt(pl, 2, 2, dir);
    /* t = 4: eight processes, whose sums in rank order are the crew's */
    char pl4[600];
    snprintf(pl4, sizeof pl4, "%s/t4.json", dir);
    tv_write_plan(pl4, NULL, 4, NULL, 1);
    tv_mpi_same(pl4, 2, 4, 0, dir);
    /* killed and resumed: each stage's checkpoint is its whole net, the
     * shards gathered and split again */
    tv_kill_resume(pl, dir);
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --iterations 2", rc_plan);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "x 2 tensor-parallel threads (threads), schedule 1f1b, batch 64 = 4 x 16, selective recomputation\n"));
    free(out);
    free(err);
    test_rmtree(dir);
}

TEST_SUITE(exec_txp)
{
    test_add_suite("exec_txp");
    test_add("t = 2 x p = 2, one microbatch: the sequential --tensor 2 trainer bit for bit",
             test_txp_equals_trainer);
    test_add("t = 2 and 4 x p = 2, four microbatches: t = 1 within the reordered sums' bound",
             test_txp_vs_t1);
    test_add("validate: one rank's costs, the all-reduces as the planner's ring, memory per rank",
             test_txp_validate);
    test_add("validate: the replay on the crew measures the all-reduces; the ring's latency fitted to them",
             test_txp_validate_ar);
    test_add("validate: the replay over tensor processes prices every all-reduce; the prediction keeps it",
             test_txp_validate_procs);
    test_add("indivisible t refused; recomputation and checkpoints allowed",
             test_txp_refusals);
    test_add("sequence parallelism: train --plan runs it (MPI the threads' bytes), kill and resume",
             test_txp_seq_par_cli);
    test_add("cleave train --plan with tensor 2: the run, the weights, MPI equal to threads, kill and resume, recomputing",
             test_txp_cli);
}
