/* test_exec_recomp.c - pipelined training with recomputation: `cleave
 * train --plan` of a plan whose "recompute" is selective or full
 * (exec/run/pipe_tp.c builds every stage's nets with exec_pipe_net_flags).
 *
 * The ViT (models/fmnist-vit.json) cut into the two stages of
 * bench/results/pipe/fmnist-vit-2stage-1f1b.json, on synthetic data:
 * - recomputing repeats the same calls on the same inputs (suite exec_tp,
 *   test_tp_recompute), so a plan gives the weights of the same plan
 *   without recomputation bit for bit, for every schedule that runs it,
 *   with t = 1 and t = 2;
 * - one microbatch per iteration: the sequential trainer with the same
 *   --recompute (exec/run/train.c, written apart from the pipeline) bit
 *   for bit;
 * - the stash at each worker's peak, worked out from the layer shapes;
 * - bench/validate.c's prediction: the same bytes as the run;
 * - full recomputation on zb-h1 refused; the command on threads and MPI.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "bench/validate.h"
#include "core/plan.h"
#include "exec/nn/data.h"
#include "exec/nn/net.h"
#include "exec/run/pipeline.h"
#include "exec/run/train.h"
#include "models/tfm_rank.h"
#include "test.h"
#include "test_pipe.h"
#include "test_proc.h"
#include "test_vit.h"

enum { K_IT = 3 }; /* iterations of every run */

static int same_params(const exec_pipe_result *a, const exec_pipe_result *b)
{
    return a->n_params == b->n_params && a->n_params > 0 &&
           memcmp(a->params, b->params, (size_t)a->n_params * sizeof(float)) == 0;
}

/* ------------------------------------------- against no recomputation -- */

static void test_rc_same_weights(void)
{
    enum { M = 4, MB = 4 };
    exec_data d = {0};
    exec_data_synthetic(&d, K_IT * M * MB, 1, 28, 28, 10, 5, 0);
    const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_ZBH1, SCHED_FBP, SCHED_PIPEDREAM,
                                SCHED_SEQUENTIAL};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        for (int t = 1; t <= (kinds[k] == SCHED_1F1B || kinds[k] == SCHED_FBP ? 2 : 1); t++) {
            plan p;
            if (tv_plan(&p, kinds[k], M, MB, t, TFM_RECOMP_NONE)) goto out;
            exec_pipe_opts o;
            tv_opts(&o, &d, K_IT);
            exec_pipe_result r0;
            if (!tv_run(&p, &o, &r0)) {
                /* the start, for "training moved the weights" */
                exec_net *start;
                cl_err e = {0};
                CU_ASSERT_EQUAL_FATAL(exec_net_create(&start, &p.model, 0, p.model.n_layers, 1, o.seed, 0, "", &e), CL_OK);
                const exec_tensor *s0 = exec_net_tensor(start, 0);
                CU_ASSERT(memcmp(s0->data, r0.params + r0.tensors[0].offset,
                                 (size_t)s0->n * sizeof(float)) != 0);
                exec_net_destroy(start);
                for (int mode = TFM_RECOMP_SELECTIVE; mode <= TFM_RECOMP_FULL; mode++) {
                    if (mode == TFM_RECOMP_FULL && (kinds[k] == SCHED_ZBH1 || kinds[k] == SCHED_FBP))
                        continue; /* refused: test_rc_refusal */
                    p.recompute = mode;
                    exec_pipe_result r1;
                    if (!tv_run(&p, &o, &r1)) {
                        int same = same_params(&r1, &r0);
                        printf("\n    %s, t = %d, %s: %s ", sched_kind_name(kinds[k]), t,
                               tfm_recomp_name((tfm_recomp)mode), same ? "bit for bit" : "DIFFERS");
                        CU_ASSERT(same);
                        for (int w = 0; w < r0.n_workers; w++) { /* the same op lists */
                            CU_ASSERT_EQUAL(r1.w[w].peak_stash, r0.w[w].peak_stash);
                            CU_ASSERT_EQUAL(r1.w[w].peak_versions, r0.w[w].peak_versions);
                        }
                    }
                    exec_pipe_result_free(&r1);
                }
            }
            exec_pipe_result_free(&r0);
            plan_free(&p);
        }
out:
    exec_data_free(&d);
}

/* ------------------------------------- against the sequential trainer -- */

/* One microbatch of 16 per iteration, K_IT iterations = one epoch of the
 * sequential trainer with the same --recompute (and --tensor) over the
 * same 48 samples. */
static void test_rc_equals_trainer(void)
{
    enum { MB = 16 };
    exec_data d = {0};
    exec_data_synthetic(&d, K_IT * MB, 1, 28, 28, 10, 5, 0);
    for (int run_i = 0; run_i < 3; run_i++) {
        const int mode = run_i == 0 ? TFM_RECOMP_SELECTIVE : TFM_RECOMP_FULL, t = run_i == 2 ? 2 : 1;
        plan p;
        if (tv_plan(&p, SCHED_GPIPE, 1, MB, t, mode)) break;
        exec_pipe_opts o;
        tv_opts(&o, &d, K_IT);
        exec_net *ref = tv_trainer(&p, &o, &d, MB, t, mode);
        const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_SEQUENTIAL, SCHED_ZBH1};
        for (size_t k = 0; k < sizeof kinds / sizeof *kinds - (mode == TFM_RECOMP_FULL); k++) {
            p.schedule = kinds[k];
            exec_pipe_result r;
            if (!tv_run(&p, &o, &r)) {
                int same = tv_same_as(&r, ref);
                printf("\n    %s, t = %d, %s: %s ", sched_kind_name(kinds[k]), t,
                       tfm_recomp_name((tfm_recomp)mode), same ? "bit for bit" : "DIFFERS");
                CU_ASSERT(same);
            }
            exec_pipe_result_free(&r);
        }
        exec_net_destroy(ref);
        plan_free(&p);
    }
    exec_data_free(&d);
}

/* ------------------------------------------------------------ memory -- */

/* Floats per sample an attention / mlp layer of the ViT (16 tokens, width
 * 64, 4 heads, hidden 128) keeps without recomputation, as suite exec_tp
 * works them out: x^, LN(x), q k v, probabilities, ctx, their gradients,
 * dLN(x), 1/sigma, softmax scratch; x^, LN(x), h, GELU(h), its gradient,
 * dLN(x), 1/sigma.  With full recomputation each keeps its input (T D)
 * and the net one scratch of the larger for its batch. */
enum { TK = 16, DW = 64, FH = 128 };
static const double AUX_A = 3 * TK * DW + 7 * TK * DW + 4 * TK * TK + TK + TK * TK;
static const double AUX_M = 3 * TK * DW + 3 * TK * FH + TK;

/* Each stage holds 2 attention and 2 mlp layers; the stash at every
 * worker's peak holds peak_stash microbatches' acts (and full
 * recomputation's scratch): with full recomputation it is smaller by
 * peak_stash x mb x 4 (2 (AUX_A - T D) + 2 (AUX_M - T D)) bytes, less the
 * scratch, mb x 4 max(AUX_A, AUX_M) per stage. */
static void test_rc_memory(void)
{
    enum { M = 4, MB = 4 };
    exec_data d = {0};
    exec_data_synthetic(&d, K_IT * M * MB, 1, 28, 28, 10, 5, 0);
    const double kept = MB * 4.0 * (2 * (AUX_A - TK * DW) + 2 * (AUX_M - TK * DW));
    const double scratch = MB * 4.0 * fmax(AUX_A, AUX_M);
    const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_PIPEDREAM};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        plan p;
        if (tv_plan(&p, kinds[k], M, MB, 1, TFM_RECOMP_NONE)) break;
        exec_pipe_opts o;
        tv_opts(&o, &d, K_IT);
        exec_pipe_result r0, r2;
        int ok = !tv_run(&p, &o, &r0);
        p.recompute = TFM_RECOMP_FULL;
        ok = !tv_run(&p, &o, &r2) && ok;
        for (int w = 0; ok && w < r0.n_workers; w++) {
            const double saved = r0.w[w].at_peak.stash - r2.w[w].at_peak.stash;
            const double want = r0.w[w].peak_stash * kept - scratch;
            printf("\n    %s, worker %d: %d microbatches stashed, %.0f -> %.0f bytes, %.0f saved (closed form %.0f) ",
                   sched_kind_name(kinds[k]), w, r0.w[w].peak_stash, r0.w[w].at_peak.stash,
                   r2.w[w].at_peak.stash, saved, want);
            CU_ASSERT_EQUAL(r2.w[w].peak_stash, r0.w[w].peak_stash);
            CU_ASSERT_EQUAL(saved, want);
            CU_ASSERT(want > 0); /* it pays here: 1 to 4 microbatches outweigh one scratch */
            /* the rest of the peak is the same */
            CU_ASSERT_EQUAL(r2.w[w].at_peak.weights, r0.w[w].at_peak.weights);
            CU_ASSERT_EQUAL(r2.w[w].at_peak.optim, r0.w[w].at_peak.optim);
        }
        /* selective: one sample's probabilities per attention layer, not mb */
        p.recompute = TFM_RECOMP_SELECTIVE;
        exec_pipe_result r1;
        if (ok && !tv_run(&p, &o, &r1))
            for (int w = 0; w < r0.n_workers; w++)
                CU_ASSERT_EQUAL(r0.w[w].at_peak.stash - r1.w[w].at_peak.stash,
                                r0.w[w].peak_stash * 2.0 * (MB - 1) * 4 * TK * TK * 4);
        exec_pipe_result_free(&r1);
        exec_pipe_result_free(&r0);
        exec_pipe_result_free(&r2);
        plan_free(&p);
    }
    exec_data_free(&d);
}

/* ------------------------------------------------------- validation -- */

/* bench/validate.c on the full-recomputation plan (gpipe, 2 microbatches
 * of 4): the profile's stash for the blocks is their input alone, the
 * stage extras hold the scratch worked out above, the predicted peak
 * memory per worker is the simulator's plus the scratch, and it is the
 * run's up to the messages in flight. */
static void test_rc_validate(void)
{
    enum { MB = 4 };
    plan p;
    if (tv_plan(&p, SCHED_GPIPE, 2, MB, 1, TFM_RECOMP_FULL)) return;
    prof pf;
    exec_val_extra x[2];
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_val_profile(&p, 3, &pf, TV_PLAN, &e), CL_OK);
    for (int l = 0; l < p.model.n_layers; l++)
        if (p.model.layers[l].kind == MODEL_ATTENTION || p.model.layers[l].kind == MODEL_MLP)
            CU_ASSERT_EQUAL(pf.layers[l].stash_bytes, TK * DW * 4.0);
    CU_ASSERT_EQUAL_FATAL(exec_val_costs(&p, &pf, 3, EXEC_VAL_CTX_REPLAY, x, TV_PLAN, &e), CL_OK);
    for (int s = 0; s < 2; s++) {
        CU_ASSERT_EQUAL(x[s].recompute_bytes, MB * 4.0 * fmax(AUX_A, AUX_M));
        CU_ASSERT(x[s].fwd_ctx_s > 0 && x[s].bwd_in_ctx_s > 0 && x[s].bwd_w_ctx_s > 0);
    }
    sim_result pred;
    exec_pipe_result meas;
    exec_val_report rep;
    tv_validate(&p, x, &pred, &meas, &rep);
    /* The stash follows the op lists (the same in both); the message
     * buffers are where the two differ, with or without recomputation
     * (`cleave validate` on this plan without it: worker 0's measured peak
     * holds one 16 KiB activation more than the simulated one), so the
     * peaks may differ by the 2 activations (or gradients) of an
     * iteration, no more. */
    const double msgs = 2 * p.stages[0].act_out_bytes;
    CU_ASSERT_EQUAL(msgs, 2.0 * MB * TK * DW * 4);
    for (int w = 0; w < rep.n_workers; w++) {
        printf("\n    worker %d: peak memory predicted %.0f, measured %.0f bytes ", w,
               rep.w[w].peak_mem.predicted, rep.w[w].peak_mem.measured);
        CU_ASSERT(fabs(rep.w[w].peak_mem.predicted - rep.w[w].peak_mem.measured) <= msgs);
        CU_ASSERT_EQUAL(pred.dev[w].peak_stash, meas.w[w].peak_stash);
        CU_ASSERT_EQUAL(pred.dev[w].at_peak.weights + pred.dev[w].at_peak.grads + pred.dev[w].at_peak.optim,
                        meas.w[w].at_peak.weights + meas.w[w].at_peak.grads + meas.w[w].at_peak.optim);
        CU_ASSERT_EQUAL(rep.w[w].peak_mem.predicted - pred.dev[w].peak_mem_bytes, x[w].recompute_bytes);
    }
    /* without x nothing is added */
    CU_ASSERT_EQUAL(exec_val_held(&p, NULL, 0), 0);
    exec_val_report_free(&rep);
    exec_pipe_result_free(&meas);
    sim_result_free(&pred);
    prof_free(&pf);
    plan_free(&p);
}

/* --------------------------------------------------- refusal, command -- */

static void test_rc_refusal(void)
{
    plan p;
    if (tv_plan(&p, SCHED_ZBH1, 4, 4, 1, TFM_RECOMP_FULL)) return;
    cl_err e = {0};
    CU_ASSERT_EQUAL(exec_pipe_check(&p, "x.json", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "x.json: recompute: full recomputation needs each layer's weight gradient right after its input gradient, and schedule zb-h1 runs them apart (hint: "));
    CU_ASSERT_PTR_NULL(strchr(e.msg, '\n'));
    p.recompute = TFM_RECOMP_SELECTIVE;
    e = (cl_err){0};
    CU_ASSERT_EQUAL(exec_pipe_check(&p, "x.json", &e), CL_OK);
    /* fbp's backward runs on weights updated since its forward: the rerun
     * forward would not be the forward (the weights differ from none's,
     * as a run without this check showed) */
    p.recompute = TFM_RECOMP_FULL;
    p.schedule = SCHED_FBP;
    CU_ASSERT_EQUAL(exec_pipe_check(&p, "x.json", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "x.json: recompute: full recomputation reruns each block's forward in its backward, and schedule fbp runs that backward on weights updated since the forward"));
    CU_ASSERT_PTR_NULL(strchr(e.msg, '\n'));
    p.recompute = TFM_RECOMP_SELECTIVE;
    e = (cl_err){0};
    CU_ASSERT_EQUAL(exec_pipe_check(&p, "x.json", &e), CL_OK);
    p.recompute = TFM_RECOMP_FULL;
    p.schedule = SCHED_PIPEDREAM;
    CU_ASSERT_EQUAL(exec_pipe_check(&p, "x.json", &e), CL_OK);
    p.tensor = 2;
    p.schedule = SCHED_1F1B;
    CU_ASSERT_EQUAL(exec_pipe_check(&p, "x.json", &e), CL_OK);
    CU_ASSERT_EQUAL(exec_pipe_net_flags(&p), EXEC_NET_RECOMPUTE_FULL);
    p.recompute = TFM_RECOMP_NONE;
    CU_ASSERT_EQUAL(exec_pipe_net_flags(&p), 0);
    plan_free(&p);
}

/* The command: the header names the mode; threads and MPI (2 ranks) write
 * the weights file of the plan without recomputation byte for byte;
 * zb-h1 with full is one line, exit 2, nothing on stdout. */
static void test_rc_cli(void)
{
    char none[512], full[512], zb[512], w0[512], w1[512], w2[512], args[2048];
    char *dir = test_scratch(sizeof none, "none.json", none, "full.json", full, "zb.json", zb,
                             "w0.bin", w0, "w1.bin", w1, "w2.bin", w2, NULL);
    tv_write_plan(none, "1f1b", 0, NULL, 1);
    tv_write_plan(full, "1f1b", 0, "full", 1);
    tv_write_plan(zb, "zb-h1", 0, "full", 1);
    const char *common = "--synthetic 256 --iterations 3";
    char *out, *err;
    snprintf(args, sizeof args, "train --plan %s %s --save-weights %s", none, common, w0);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    snprintf(args, sizeof args, "train --plan %s %s --save-weights %s", full, common, w1);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    char head[700];
    snprintf(head, sizeof head, "train fmnist-vit with %s: 2 stages on 2 workers (threads), schedule 1f1b, batch 64 = 4 x 16, full recomputation\n", full);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, head));
    free(out);
    free(err);
    char *a = test_slurp(w0), *b = test_slurp(w1);
    CU_ASSERT(a && b && !strncmp(a, "cleave-weights 1 ", 17));
    free(a);
    free(b);
    CU_ASSERT(tproc_same_file(w0, w1));
    snprintf(args, sizeof args, "train --plan %s %s --backend mpi --save-weights %s", full, common, w2);
    if (tp_mpirun(2, args, &out, &err) == 0) {
        CU_ASSERT(tproc_same_file(w0, w2));
    } else {
        fprintf(stderr, "\n    %s", err);
        CU_FAIL("the MPI run failed");
    }
    free(out);
    free(err);
    /* validate: the recomputing plan predicted and measured (the mode in
     * the JSON), and a profile file refused: it timed layers that do not
     * recompute */
    snprintf(args, sizeof args, "validate --plan %s --iterations 3 --reps 3 --json", full);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    cJSON *v = cJSON_Parse(out);
    CU_ASSERT_PTR_NOT_NULL(v);
    const cJSON *rk = cJSON_GetObjectItem(v, "recompute"), *ws = cJSON_GetObjectItem(v, "workers");
    CU_ASSERT(cJSON_IsString(rk) && !strcmp(rk->valuestring, "full"));
    CU_ASSERT_EQUAL(cJSON_GetArraySize(ws), 2);
    cJSON_Delete(v);
    free(out);
    free(err);
    snprintf(args, sizeof args, "validate --plan %s --profile %s", full, none);
    test_cli_refused(args, ": recompute: the plan recomputes (full), and a profile file times layers that do not (hint: drop --profile");
    snprintf(args, sizeof args, "train --plan %s %s", zb, common);
    test_cli_refused(args, "recompute: full recomputation needs each layer's weight gradient right after its input gradient");
    test_rmtree(dir);
}

TEST_SUITE(exec_recomp)
{
    test_add_suite("exec_recomp");
    test_add("selective and full: the weights without recomputation bit for bit, six schedules, t = 1 and 2",
             test_rc_same_weights);
    test_add("one microbatch: the sequential trainer with the same --recompute bit for bit",
             test_rc_equals_trainer);
    test_add("the stash at each worker's peak: what the recomputing layers do not keep, worked out",
             test_rc_memory);
    test_add("validate: the profile, the extras and the replay recompute; predicted memory is the run's",
             test_rc_validate);
    test_add("full recomputation on zb-h1 refused; selective runs; the flags", test_rc_refusal);
    test_add("cleave train --plan recomputing: the header, threads and MPI weights, the refusal",
             test_rc_cli);
}
