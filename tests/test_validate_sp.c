/* test_validate_sp.c - `cleave validate` of sequence-parallel plans
 * (bench/validate.c, validate_replay.c): the collectives each stage's net
 * makes, counted as it runs, against the ones Korthikanti et al. 2022
 * (section 4.2.2) place around a split layer, derived here from the
 * layer's neighbours; their ring price; the predicted peak memory per
 * worker equal to the run's with the gathers' scratch in both; the replay
 * measuring all three kinds of collective and the ring's latency fitted to
 * them by hand; and the command.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/validate.h"
#include "core/plan.h"
#include "models/model.h"
#include "models/tfm_rank.h"

#include "test.h"
#include "test_vit.h"

enum { MB = 4, T = 2, TOK = 16, D = 64 };
#define WHOLE ((double)MB * TOK * D) /* floats of a whole (mb, tokens, width) activation */
/* the counts' floats are per sample: a whole activation's, and the layer
 * norm's 2 D gradient floats spread over the microbatch */
#define WHOLE_S ((double)TOK * D)
#define NORM_S (2.0 * D / MB)

static int split_at(const plan *p, int l)
{
    const model_layer *ml = &p->model.layers[l];
    return ml->kind == MODEL_ATTENTION || ml->kind == MODEL_MLP;
}

static void add(prof_coll *c, int n, int steps, double floats)
{
    c->calls += n;
    c->steps += n * steps;
    c->floats += n * steps * floats;
}

/* The collectives of stage s's split layers for one microbatch, derived
 * from each layer's neighbours: i, its input is whole (the stage's input,
 * or a layer before that is not split); o, its output must be whole.
 *  forward: all-gather LN(x) for the column-parallel product, reduce-
 *    scatter the row-parallel product's partial sums, all-gather the output
 *    if o;
 *  input gradient: all-gather the output gradient unless o, reduce-scatter
 *    the column-parallel product's input gradient, all-gather it if i;
 *    full recomputation gathers LN(x) again for the forward it redoes;
 *  weight gradient: all-gather LN(x) again, the output gradient again
 *    unless o or the input gradient's gather is still at hand (fused: the
 *    weight gradient right after it), all-reduce the layer norm's 2 D
 *    gradient floats (each rank holds some tokens' share).
 * fused: the weight gradient's counted with the input gradient's (the
 * simulator's B is both). */
static void derive(const plan *p, int s, int fused, int full, prof_coll c[PROF_PASSES])
{
    memset(c, 0, PROF_PASSES * sizeof *c);
    const plan_stage *st = &p->stages[s];
    prof_coll *w = &c[fused ? PROF_B : PROF_W];
    for (int l = st->first; l <= st->last; l++) {
        if (!split_at(p, l)) continue;
        const int i = l == st->first || !split_at(p, l - 1), o = l == st->last || !split_at(p, l + 1);
        add(&c[PROF_F], 2 + o, 1, WHOLE_S);
        add(&c[PROF_B], !o + 1 + i + full, 1, WHOLE_S);
        add(w, 1 + (!o && !fused), 1, WHOLE_S);
        add(w, 1, 2, NORM_S);
    }
}

/* Without sequence parallelism: one all-reduce of the output in the
 * forward and one of the input gradient in the backward. */
static void derive_tp(const plan *p, int s, prof_coll c[PROF_PASSES])
{
    memset(c, 0, PROF_PASSES * sizeof *c);
    for (int l = p->stages[s].first; l <= p->stages[s].last; l++)
        if (split_at(p, l)) add(&c[PROF_F], 1, 2, WHOLE_S), add(&c[PROF_B], 1, 2, WHOLE_S);
}

/* The ViT plan (kind, 2 microbatches of MB, tensor T, recompute r,
 * sequence parallel sp) costed by bench/validate.c from a profile of this
 * machine; 1 (after a failed assertion) when it cannot be. */
static int costs(plan *p, prof *pf, exec_val_extra *x, sched_kind kind, int r, int sp, int ctx)
{
    if (tv_plan(p, kind, 2, MB, T, r)) return 1;
    p->seq_par = sp;
    cl_err e = {0};
    int rc = exec_val_check(p, TV_PLAN, &e);
    if (!rc) rc = exec_val_profile(p, 3, pf, TV_PLAN, &e);
    if (!rc) {
        rc = exec_val_costs(p, pf, 3, ctx, x, TV_PLAN, &e);
        if (rc) prof_free(pf);
    }
    if (rc) {
        fprintf(stderr, "\n    %s\n", e.msg);
        CU_FAIL("the ViT plan could not be costed");
        plan_free(p);
    }
    return rc != CL_OK;
}

static int same(const prof_coll *a, const prof_coll *b)
{
    return a->calls == b->calls && a->steps == b->steps && a->floats == b->floats;
}

/* The counted collectives equal the derived ones, pass by pass, under a
 * fused backward (gpipe), a separate weight pass (zb-h1), full
 * recomputation, and without sequence parallelism; exec_val_tp_comm adds
 * each pass's ring price, worked out here per collective. */
static void test_vsp_counts(void)
{
    static const struct { sched_kind kind; int r, sp; } cases[] = {
        {SCHED_GPIPE, TFM_RECOMP_NONE, 1}, {SCHED_ZBH1, TFM_RECOMP_NONE, 1},
        {SCHED_GPIPE, TFM_RECOMP_FULL, 1}, {SCHED_1F1B, TFM_RECOMP_SELECTIVE, 1},
        {SCHED_GPIPE, TFM_RECOMP_NONE, 0},
    };
    const double bw = 3e9, lat = 20e-6;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        plan p;
        prof pf;
        exec_val_extra x[2];
        if (costs(&p, &pf, x, cases[k].kind, cases[k].r, cases[k].sp, 0)) return;
        CU_ASSERT_EQUAL(p.model.layers[2].out_elems, TOK * D);
        double before[2][3];
        for (int s = 0; s < 2; s++) {
            prof_coll want[PROF_PASSES];
            if (cases[k].sp)
                derive(&p, s, cases[k].kind != SCHED_ZBH1, cases[k].r == TFM_RECOMP_FULL, want);
            else
                derive_tp(&p, s, want);
            for (int q = 0; q < PROF_PASSES; q++) {
                if (!same(&x[s].coll[q], &want[q]))
                    printf("\n    case %zu stage %d pass %d: counted %g calls %g steps %g floats, "
                           "derived %g %g %g ", k, s, q, x[s].coll[q].calls, x[s].coll[q].steps,
                           x[s].coll[q].floats, want[q].calls, want[q].steps, want[q].floats);
                CU_ASSERT(same(&x[s].coll[q], &want[q]));
            }
            CU_ASSERT(want[PROF_F].calls > 0); /* both stages hold split layers */
            CU_ASSERT_EQUAL(x[s].seq_bytes > 0, cases[k].sp);
            before[s][0] = p.stages[s].fwd_s;
            before[s][1] = p.stages[s].bwd_in_s;
            before[s][2] = p.stages[s].bwd_w_s;
        }
        exec_val_tp_comm(&p, x, &(cluster_link){bw, lat});
        for (int s = 0; s < 2; s++) {
            /* per collective: an all-gather or a reduce-scatter of the
             * whole activation t - 1 steps of a t-th of it, the layer
             * norm's all-reduce 2 (t - 1) steps of a t-th of 2 D floats */
            const double big = (T - 1) * (lat + 4 * WHOLE / T / bw);
            const double small = 2 * (T - 1) * (lat + 4 * 2.0 * D / T / bw);
            const double ar = 2 * (T - 1) * (lat + 4 * WHOLE / T / bw);
            double want[3] = {0, 0, 0};
            for (int l = p.stages[s].first; l <= p.stages[s].last; l++) {
                if (!split_at(&p, l)) continue;
                const int i = l == p.stages[s].first || !split_at(&p, l - 1);
                const int o = l == p.stages[s].last || !split_at(&p, l + 1);
                const int zb = cases[k].kind == SCHED_ZBH1, full = cases[k].r == TFM_RECOMP_FULL;
                if (!cases[k].sp) {
                    want[0] += ar, want[1] += ar;
                    continue;
                }
                want[0] += (2 + o) * big;
                want[1] += (!o + 1 + i + full) * big;
                want[zb ? 2 : 1] += (1 + (!o && zb)) * big + small;
            }
            CU_ASSERT_DOUBLE_EQUAL(p.stages[s].fwd_s - before[s][0], want[0], 1e-15);
            CU_ASSERT_DOUBLE_EQUAL(p.stages[s].bwd_in_s - before[s][1], want[1], 1e-15);
            CU_ASSERT_DOUBLE_EQUAL(p.stages[s].bwd_w_s - before[s][2], want[2], 1e-15);
        }
        prof_free(&pf);
        plan_free(&p);
    }
}

/* Predicted peak memory per worker equal to the run's rank 0 (weights,
 * gradients, momentum of its shard, its stash, the gathers' scratch). */
static void test_vsp_memory(void)
{
    plan p;
    prof pf;
    exec_val_extra x[2];
    if (costs(&p, &pf, x, SCHED_GPIPE, TFM_RECOMP_NONE, 1, 0)) return;
    sim_result pred;
    exec_pipe_result meas;
    exec_val_report rep;
    if (tv_val_run(&p, x, TV_PLAN, &pred, &meas, &rep)) {
        prof_free(&pf);
        plan_free(&p);
        CU_FAIL_FATAL("no prediction or run to compare");
    }
    for (int w = 0; w < rep.n_workers; w++) {
        printf("\n    worker %d: peak memory predicted %.0f, measured %.0f bytes (scratch %.0f) ", w,
               rep.w[w].peak_mem.predicted, rep.w[w].peak_mem.measured, x[w].seq_bytes);
        CU_ASSERT(fabs(rep.w[w].peak_mem.error) < 1e-9);
        CU_ASSERT(meas.w[w].at_peak.stash >= x[w].seq_bytes && x[w].seq_bytes > 0);
    }
    exec_val_report_free(&rep);
    exec_pipe_result_free(&meas);
    sim_result_free(&pred);
    prof_free(&pf);
    plan_free(&p);
}

/* The replay on the crew times every collective (ar_ctx_s > 0), and
 * exec_val_tp_link, worked out by hand: the latency a step that makes the
 * rings cost, over both stages, exactly the calls counted times their
 * measured mean. */
static void test_vsp_replay(void)
{
    plan p;
    prof pf;
    exec_val_extra x[2];
    if (costs(&p, &pf, x, SCHED_GPIPE, TFM_RECOMP_NONE, 1, EXEC_VAL_CTX_REPLAY)) return;
    double meas = 0, bytes = 0, steps = 0;
    const double bw = 2e9, mean[2] = {40e-6, 70e-6};
    for (int s = 0; s < 2; s++) {
        CU_ASSERT(x[s].ar_ctx_s > 0);
        CU_ASSERT(x[s].fwd_ctx_s > 0 && x[s].bwd_in_ctx_s > 0);
        x[s].ar_ctx_s = mean[s];
        prof_coll want[PROF_PASSES];
        derive(&p, s, 1, 0, want);
        for (int q = 0; q < PROF_PASSES; q++) {
            meas += want[q].calls * mean[s];
            bytes += (T - 1) * 4 * want[q].floats * MB / (T * bw);
            steps += (T - 1) * want[q].steps;
        }
    }
    cluster_link link = {bw, 1e-3};
    CU_ASSERT_EQUAL(exec_val_tp_link(&p, x, &link), 1);
    CU_ASSERT_DOUBLE_EQUAL(link.latency_s, (meas - bytes) / steps, 1e-15);
    double before = 0, after = 0;
    for (int s = 0; s < 2; s++) before += p.stages[s].fwd_s + p.stages[s].bwd_in_s + p.stages[s].bwd_w_s;
    exec_val_tp_comm(&p, x, &link);
    for (int s = 0; s < 2; s++) after += p.stages[s].fwd_s + p.stages[s].bwd_in_s + p.stages[s].bwd_w_s;
    CU_ASSERT_DOUBLE_EQUAL(after - before, meas, 1e-12);
    prof_free(&pf);
    plan_free(&p);
}

/* `cleave validate` of a sequence-parallel plan runs and says how it
 * priced the collectives; --json marks the plan. */
static void test_vsp_cli(void)
{
    char pl[512], sp[512], args[2048];
    char *dir = test_scratch(sizeof pl, "t2.json", pl, "t2-sp.json", sp, NULL);
    tv_write_plan(pl, NULL, 2, NULL, 1);
    tv_write_seq_par(pl, sp);
    char *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "validate --plan %s --iterations 3", sp);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "tensor 2: each collective (all-gathers and reduce-scatters along the sequence, all-reduces) priced as a ring at "));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "sequence parallel: the gathers' scratch (up to "));
    if (err && *err) printf("\n    %s", err);
    free(out);
    free(err);
    snprintf(args, sizeof args, "validate --plan %s --iterations 3 --json", sp);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\"sequence_parallel\":\ttrue"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\"tensor\":\t2"));
    free(out);
    free(err);
    test_rmtree(dir);
}

TEST_SUITE(validate_sp)
{
    test_add_suite("validate_sp");
    test_add("the collectives counted on each stage's net are the derived ones; their ring price",
             test_vsp_counts);
    test_add("predicted peak memory per worker is the run's, the gathers' scratch in both",
             test_vsp_memory);
    test_add("the replay times every collective; the ring's latency fitted to them by hand",
             test_vsp_replay);
    test_add("cleave validate of a sequence-parallel plan", test_vsp_cli);
}
