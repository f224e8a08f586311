/* test_tensor.c - tensor parallelism as the per-rank question
 * (models/tfm_rank, planner/tensor, plan --tensor): per-rank layers against
 * the papers' formulas written out here (Narayanan et al. 2021 Sec. 3 and
 * Eq. 2, Korthikanti et al. 2022 Table 2), a tensor-parallel plan's
 * simulated iteration against a total worked by hand, t = 1 against the
 * model file, and bad --tensor values refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/plan.h"
#include "models/model.h"
#include "models/tfm_model.h"
#include "models/tfm_rank.h"
#include "planner/tensor.h"
#include "test.h"

static const int tps[] = {1, 2, 4, 8};

/* GPT-3 175B's layers per rank for t = 1, 2, 4, 8, SP on and off, each
 * recomputation mode, against (b = 1, bytes of 2-byte activations):
 *   forward FLOPs       (24 s h^2 + 4 s^2 h) / t            (Narayanan Sec. 3)
 *   backward            2 x forward, + forward (full), + 4 s^2 h / t (selective)
 *   parameters          (12 h^2 + 7 h) / t + 6 h: the QKV and first MLP
 *                       biases (3h + 4h) split, the projection and second
 *                       MLP biases (2h) and both LayerNorms (4h) whole
 *   activations         no SP: s h (10 + 24/t + 5 a s/(h t)); SP: s h (34 +
 *                       5 a s/h)/t; selective: without the 5 a s/h terms;
 *                       full: 2 s h (/ t with SP)   (Korthikanti Table 2)
 * and the embedding's (V/t + s) h and the tied head's 2h parameters. */
static void test_rank_gpt3(void)
{
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(&m, "models/gpt3-175b.json", &e), CL_OK);
    CU_ASSERT_FATAL(m.has_tfm);
    const double s = 2048, h = 12288, a = 96, V = 50257;
    for (int k = 0; k < 4; k++)
        for (int sp = 0; sp < 2; sp++)
            for (int r = 0; r < 3; r++) {
                int t = tps[k];
                if (sp && t == 1) continue;
                tfm_rank_opts o = {.t = t, .sp = sp, .recomp = (tfm_recomp)r};
                model q;
                CU_ASSERT_EQUAL_FATAL(tfm_rank_check(&m, &o, "gpt3", &e), CL_OK);
                CU_ASSERT_EQUAL_FATAL(tfm_rank_model(&q, &m, &o, "gpt3", &e), CL_OK);
                const model_layer *b = &q.layers[1];
                double fwd = (24 * s * h * h + 4 * s * s * h) / t;
                double again = r == 2 ? fwd : r == 1 ? 4 * s * s * h / t : 0;
                CU_ASSERT_DOUBLE_EQUAL(b->fwd_flops, fwd, 0);
                CU_ASSERT_DOUBLE_EQUAL(b->bwd_in_flops + b->bwd_w_flops, 2 * fwd + again, 0);
                CU_ASSERT_EQUAL(b->params, (uint64_t)((12 * h * h + 7 * h) / t + 6 * h));
                double act = r == 2 ? 2 * s * h / (sp ? t : 1)
                           : sp ? s * h * (34 + (r ? 0 : 5 * a * s / h)) / t
                                : s * h * (10 + 24.0 / t + (r ? 0 : 5 * a * s / (h * t)));
                CU_ASSERT_DOUBLE_EQUAL((double)b->stash_elems * 2, act, 2);
                CU_ASSERT_EQUAL(b->out_elems, (uint64_t)(s * h / t));
                CU_ASSERT_EQUAL(q.layers[0].params, (uint64_t)((V / t + s) * h));
                CU_ASSERT_EQUAL(q.layers[97].params, (uint64_t)(2 * h));
                CU_ASSERT(!q.has_tfm);
                model_free(&q);
            }
    model_free(&m);
}

/* t = 1, no recomputation: the per-rank model is the model file itself
 * (every layer's costs equal), so the restated question is the old one. */
static void test_rank_identity(void)
{
    static const char *const files[] = {"models/gpt3-175b.json", "models/gpt2-1.5b.json",
                                        "models/llama2-70b.json", "models/llama3-8b.json"};
    for (int f = 0; f < 4; f++) {
        model m, q;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(model_load(&m, files[f], &e), CL_OK);
        tfm_rank_opts o = {.t = 1, .sp = 0, .recomp = TFM_RECOMP_NONE};
        CU_ASSERT_EQUAL_FATAL(tfm_rank_model(&q, &m, &o, files[f], &e), CL_OK);
        CU_ASSERT_EQUAL_FATAL(q.n_layers, m.n_layers);
        for (int i = 0; i < m.n_layers; i++) {
            const model_layer *x = &m.layers[i], *y = &q.layers[i];
            CU_ASSERT_STRING_EQUAL(x->name, y->name);
            CU_ASSERT_EQUAL(x->fwd_flops, y->fwd_flops);
            CU_ASSERT_EQUAL(x->bwd_in_flops, y->bwd_in_flops);
            CU_ASSERT_EQUAL(x->bwd_w_flops, y->bwd_w_flops);
            CU_ASSERT_EQUAL(x->params, y->params);
            CU_ASSERT_EQUAL(x->out_elems, y->out_elems);
            CU_ASSERT_EQUAL(x->stash_elems, y->stash_elems);
        }
        model_free(&q);
        model_free(&m);
    }
}

/* LLaMA-2 70B (GQA, g = 8, gated f = 28672, no biases, RMSNorm) per rank:
 * Q and the projection h^2/t each, K and V h (h g/a)/t each, the MLP
 * 3 h f / t; the two RMSNorms (2h) whole.  t = 16 does not divide g. */
static void test_rank_gqa(void)
{
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(&m, "models/llama2-70b.json", &e), CL_OK);
    const double h = 8192, f = 28672, kv = 8192.0 / 64 * 8;
    for (int k = 1; k < 4; k++) {
        int t = tps[k];
        tfm_rank_opts o = {.t = t, .sp = 1, .recomp = TFM_RECOMP_NONE};
        model q;
        CU_ASSERT_EQUAL_FATAL(tfm_rank_model(&q, &m, &o, "l", &e), CL_OK);
        CU_ASSERT_EQUAL(q.layers[1].params, (uint64_t)((2 * h * h + 2 * h * kv + 3 * h * f) / t + 2 * h));
        model_free(&q);
    }
    tfm_rank_opts bad = {.t = 16, .sp = 0, .recomp = TFM_RECOMP_NONE};
    CU_ASSERT_EQUAL(tfm_rank_check(&m, &bad, "l", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "hint"));
    model_free(&m);
}

/* Ring collectives: an all-reduce of M bytes on t ranks is 2 (t-1) steps
 * of M/t, an all-gather t - 1 steps. */
static void test_coll_time(void)
{
    tfm_rank_coll ar = {.ar = 1, .msg = 800}, ag = {.ag = 1, .msg = 800};
    /* t = 4, b = 2, 100 B/s, 1 s per step: 6 steps x (1 + 400 / 100) = 30 */
    CU_ASSERT_DOUBLE_EQUAL(tfm_rank_coll_s(&ar, 4, 2, 100, 1), 30, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(tfm_rank_coll_s(&ag, 4, 2, 100, 1), 15, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(tfm_rank_coll_s(&ar, 1, 2, 100, 1), 0, 0);
}

/* Groups of a cluster: 2 nodes of 8 become 2 nodes of 2 at t = 4. */
static void test_tp_cluster(void)
{
    cluster c, q;
    cl_err e = {0};
    cluster_devtype dt = {.name = "x", .peak_fp32_flops = 1e12, .mem_bytes = 1 << 30,
                          .mem_bw_Bps = 1e12, .efficiency = 1};
    cluster_link li = {1e9, 0}, le = {1e8, 0};
    CU_ASSERT_EQUAL_FATAL(cluster_uniform(&c, &dt, 16, 8, li, le, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(tp_cluster(&q, &c, 4, "c", &e), CL_OK);
    CU_ASSERT_EQUAL(q.n_devices, 4);
    CU_ASSERT_EQUAL(q.devices[1].node, 0);
    CU_ASSERT_EQUAL(q.devices[2].node, 1);
    CU_ASSERT_STRING_EQUAL(q.devices[1].id, c.devices[4].id);
    cluster_free(&q);
    CU_ASSERT_EQUAL(tp_cluster(&q, &c, 3, "c", &e), CL_EINPUT);
    cluster_free(&c);
}

/* The fp32 model of d, named name, written to path. */
static void save_gpt(const tfm_desc *d, const char *name, const char *path)
{
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(tfm_model_build(&m, d, MODEL_F32, name, name, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(model_save(&m, path, &e), CL_OK);
    model_free(&m);
}

/* One stage, t = 2, a tiny float32 GPT (L 1, h 8, a 2, s 4, V 16) on a
 * 1 GFLOP/s device whose memory bandwidth is no limit, the node link 1 MB/s
 * with 1 ms per step.  By hand, per rank, FLOPs:
 *   block   forward (24 s h^2 + 4 s^2 h)/2 = 3328, backward 6656
 *   embed   forward s h = 32 (position add), backward 2 s h = 64
 *   head    forward 2 s h V/2 + 7 s h + 5 s V/2 = 512 + 224 + 160 = 896,
 *           backward 2 x 512 + s V/2 = 1056
 *   total 12032 FLOPs = 12.032 us.
 * Collectives (msg = 4 s h = 128 bytes; an all-reduce on 2 ranks is 2
 * steps of (1 ms + 64 B / 1 MB/s) = 2.128 ms): block 2 forward + 2
 * backward = 8.512 ms, embedding 1 forward = 2.128 ms, head 1 backward =
 * 2.128 ms plus 3 loss all-reduces of 4 s = 16 bytes, 3 x 2 x (1 ms + 8 us)
 * = 6.048 ms; in all 18.816 ms.  Iteration 18.828032 ms. */
static void test_plan_sim_by_hand(void)
{
    char mpath[512], cpath[512], ppath[512], args[2000];
    char *dir = test_scratch(sizeof mpath, "m.json", mpath, "c.json", cpath, "p.json", ppath, NULL);
    tfm_desc d = tfm_gpt(1, 8, 2, 4, 16);
    save_gpt(&d, "tiny", mpath);
    cl_err e = {0};
    FILE *f = fopen(cpath, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "{\"format\": \"cleave-cluster\", \"version\": 1, \"name\": \"two\",\n"
               " \"device_types\": [{\"name\": \"g\", \"peak_fp32_flops\": 1e9, \"memory_bytes\": 1e9,\n"
               "   \"memory_bw_Bps\": 1e18, \"efficiency\": 1}],\n"
               " \"nodes\": [{\"name\": \"n\", \"devices\": [{\"id\": \"a\", \"type\": \"g\"}, {\"id\": \"b\", \"type\": \"g\"}]}],\n"
               " \"links\": {\"intra_node\": {\"bandwidth_Bps\": 1e6, \"latency_s\": 1e-3}}}\n");
    fclose(f);
    snprintf(args, sizeof args, "plan --model %s --cluster %s --tensor 2 --batch 1 --schedule sequential -o %s",
             mpath, cpath, ppath);
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    if (err && *err) fprintf(stderr, "%s", err);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "t x p x d = 2 x 1 x 1 = 2 GPUs"));
    free(out), free(err);
    plan p;
    CU_ASSERT_EQUAL_FATAL(plan_load(&p, ppath, &e), CL_OK);
    CU_ASSERT_EQUAL(plan_tensor(&p), 2);
    CU_ASSERT_EQUAL(p.cluster.n_devices, 1);
    CU_ASSERT_DOUBLE_EQUAL(p.pred.iteration_s, 18.828032e-3, 1e-12);
    plan_free(&p);
    snprintf(args, sizeof args, "sim --json %s", ppath);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    const char *it = out ? strstr(out, "\"iteration_s\"") : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(it);
    double v = strtod(strchr(it, ':') + 1, NULL);
    CU_ASSERT_DOUBLE_EQUAL(v, 18.828032e-3, 1e-12);
    free(out), free(err);
    test_rmtree(dir);
}

/* --tensor auto --recompute auto against brute force: every fixed
 * (t, mode) asked one at a time; auto must return the fastest of those
 * that fit (the first of equals), with its t and mode recorded.  The
 * 1.6 MB devices make memory bind (t = 1 without recomputation plans
 * slower than with more memory), and the winner (t = 2) is neither the
 * first nor the last candidate. */
static void test_auto_brute(void)
{
    char mpath[512], cpath[512], ppath[512], args[2000];
    char *dir = test_scratch(sizeof mpath, "m.json", mpath, "c.json", cpath, "p.json", ppath, NULL);
    tfm_desc d = tfm_gpt(4, 64, 4, 32, 64);
    save_gpt(&d, "small", mpath);
    cl_err e = {0};
    FILE *f = fopen(cpath, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "{\"format\": \"cleave-cluster\", \"version\": 1, \"name\": \"four\",\n"
               " \"device_types\": [{\"name\": \"g\", \"peak_fp32_flops\": 1e9, \"memory_bytes\": 1.6e6,\n"
               "   \"memory_bw_Bps\": 1e12, \"efficiency\": 1}],\n"
               " \"nodes\": [{\"name\": \"n\", \"devices\": [{\"id\": \"a\", \"type\": \"g\"}, {\"id\": \"b\", \"type\": \"g\"},\n"
               "   {\"id\": \"c\", \"type\": \"g\"}, {\"id\": \"d\", \"type\": \"g\"}]}],\n"
               " \"links\": {\"intra_node\": {\"bandwidth_Bps\": 1e9, \"latency_s\": 1e-6}}}\n");
    fclose(f);
#define AUTO_Q "plan --cluster %s --model %s --batch 8 --schedule 1f1b %s -o %s"
    double best = HUGE_VAL, got[3][3];
    int best_t = 0, best_r = -1, fits = 0;
    static const char *const modes[] = {"none", "selective", "full"};
    for (int t = 1; t <= 4; t *= 2)
        for (int r = 0; r < 3; r++) {
            char extra[64];
            snprintf(extra, sizeof extra, "--tensor %d --recompute %s", t, modes[r]);
            snprintf(args, sizeof args, AUTO_Q, cpath, mpath, extra, ppath);
            remove(ppath);
            got[t / 2][r] = HUGE_VAL;
            if (test_run_cli(args, NULL, NULL) != 0) continue;
            plan p;
            CU_ASSERT_EQUAL_FATAL(plan_load(&p, ppath, &e), CL_OK);
            fits++;
            got[t / 2][r] = p.pred.iteration_s;
            if (p.pred.iteration_s < best) best = p.pred.iteration_s, best_t = t, best_r = r;
            plan_free(&p);
        }
    CU_ASSERT_FATAL(fits >= 2);
    snprintf(args, sizeof args, AUTO_Q, cpath, mpath, "--tensor auto --recompute auto", ppath);
    remove(ppath);
    char *out = NULL;
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, NULL), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "tensor and recomputation search (9 candidates"));
    /* a candidate left out for its bound: the bound is below what its own
     * search finds (brute force above), and not below the plan chosen */
    int bounded = 0;
    for (const char *at = out; at && (at = strstr(at, " (at least ")) != NULL; at++, bounded++) {
        const char *q = at;
        while (q > out + 1 && !(q[-1] == 't' && q[-2] == ' ')) q--; /* back to the "t N mode" it ends */
        int t = 0;
        char mode[16] = "";
        double lb = 0;
        CU_ASSERT_FATAL(sscanf(q, " %d %15s (at least %lf", &t, mode, &lb) == 3);
        int r = !strcmp(mode, "none") ? 0 : !strcmp(mode, "selective") ? 1 : 2;
        CU_ASSERT(lb <= got[t / 2][r]);
        CU_ASSERT(lb >= best);
    }
    CU_ASSERT(bounded > 0); /* 6 of the 9 when this was written */
    free(out);
    plan p;
    CU_ASSERT_EQUAL_FATAL(plan_load(&p, ppath, &e), CL_OK);
    CU_ASSERT_EQUAL(p.pred.iteration_s, best);
    CU_ASSERT_EQUAL(plan_tensor(&p), best_t);
    CU_ASSERT_EQUAL(p.recompute, best_r);
    plan_free(&p);
    test_rmtree(dir);
#undef AUTO_Q
}

/* Bad --tensor, --sequence-parallel and --recompute requests: exit 2, one
 * line with a hint, no plan file; --tensor 1 is byte for byte no flag. */
static void test_refused(void)
{
    char ppath[512], qpath[512], args[2000];
    char *dir = test_scratch(sizeof ppath, "p.json", ppath, "q.json", qpath, NULL);
    static const char *const bad[] = {
        "--model models/gpt3-175b.json --tensor 0",
        "--model models/gpt3-175b.json --tensor 3",  /* not a divisor of 8 per node */
        "--model models/gpt3-175b.json --tensor 16", /* more than a node */
        "--model models/gpt2-1.5b.json --tensor 2",  /* 25 heads */
        "--model models/bert-large.json --tensor 2", /* no transformer member */
        "--model models/bert-large.json --recompute full",
        "--model models/gpt3-175b.json --sequence-parallel",
        "--model models/gpt3-175b.json --recompute partly",
    };
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        snprintf(args, sizeof args, "plan %s --device A100-80GB --devices 16 --per-node 8 --batch 16 -o %s",
                 bad[i], ppath);
        char *err = NULL;
        CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
        CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "hint"));
        if (!(err && strstr(err, "hint"))) fprintf(stderr, "no hint for %s: %s\n", bad[i], err ? err : "");
        free(err);
        CU_ASSERT_PTR_NULL(test_slurp(ppath));
    }
    const char *q = "plan --model models/gpt2-1.5b.json --device A100-80GB --devices 8 --batch 16 -o";
    snprintf(args, sizeof args, "%s %s", q, ppath);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    snprintf(args, sizeof args, "%s %s --tensor 1 --recompute none", q, qpath);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    char *a = test_slurp(ppath), *b = test_slurp(qpath);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_STRING_EQUAL(a, b);
    CU_ASSERT_PTR_NULL(strstr(a, "\"tensor\""));
    free(a), free(b);
    test_rmtree(dir);
}

/* A tensor and recomputation search whose last candidates cannot run (t 5
 * and 6 do not divide LLaMA-2 7B's 32 heads) and whose t = 1 finds nothing
 * that fits on one stage: the question still succeeds with the t = 2 plan,
 * without -o too (it printed the plan, then a t = 1 failure, exit 2). */
static void test_auto_failed_candidates(void)
{
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli("plan --model models/llama2-7b.json --device A100-80GB --devices 6 --per-node 6 "
                                 "--batch 6 --optimizer adam --stages 1 --tensor auto --recompute auto", &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "t 1 none (nothing fits)"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "tensor: 2"));
    CU_ASSERT(err && !err[0]);
    free(out);
    free(err);
}

TEST_SUITE(tensor)
{
    test_add_suite("tensor");
    test_add("GPT-3 per-rank layers match Narayanan and Korthikanti", test_rank_gpt3);
    test_add("t = 1 per-rank model is the model file", test_rank_identity);
    test_add("GQA + SwiGLU per-rank parameters by hand", test_rank_gqa);
    test_add("ring collective times by hand", test_coll_time);
    test_add("tensor-parallel groups of a cluster", test_tp_cluster);
    test_add("t = 2 plan and sim iteration by hand", test_plan_sim_by_hand);
    test_add("--tensor auto --recompute auto is the best fixed choice", test_auto_brute);
    test_add("bad --tensor refused, --tensor 1 changes nothing", test_refused);
    test_add("auto search: candidates that fail do not fail the question", test_auto_failed_candidates);
}
