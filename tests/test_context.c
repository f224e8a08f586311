/* test_context.c - context parallelism (models/tfm_rank, profiles/tfm_time,
 * planner/tensor, `--layout cp=C`): per-rank FLOPs, tokens and activation
 * bytes against the closed forms written out here, the key/value ring's
 * bytes and its overlap with the attention core counted by hand, a layout
 * with cp on t x cp x p x d GPUs, cp = 1 byte for byte no cp, bad cp values
 * refused, and faster links never slowing a context-parallel layout. */
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

/* GPT-3 175B (s 2048, h 12288, a 96, V 50257 as in the model file) per
 * rank for c = 2, 4 with t = 1, 8, SP on and off (with t > 1) and each
 * recomputation mode.  A rank holds s/c tokens and its queries meet all s
 * keys, so (b = 1, 2-byte activations):
 *   block forward FLOPs  (24 (s/c) h^2 + 4 (s/c) s h) / t
 *                        = (24 s h^2 + 4 s^2 h) / (t c)
 *   block backward       2 x forward, + forward (full), + 4 (s/c) s h / t
 *                        (selective)
 *   block activations    Korthikanti's Table 2 with s/c tokens and (s/c) x s
 *                        scores: no SP (s/c) h (10 + 24/t + 5 a s/(h t));
 *                        SP (s/c) h (34 + 5 a s/h) / t; selective without
 *                        the 5 a s/h terms; full 2 (s/c) h (/ t with SP)
 *   block output         (s/c) h / t elements
 *   embedding forward    (s/c) h (the position add; / t with SP)
 *   head forward         2 (s/c) h V / t + 7 (s/c) h (/ t with SP)
 *                        + 5 (s/c) V / t
 *   parameters           as without cp: the weights are replicated */
static void test_rank_cp_gpt3(void)
{
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(&m, "models/gpt3-175b.json", &e), CL_OK);
    const double s = 2048, h = 12288, a = 96, V = 50257;
    static const int cs[] = {2, 4}, ts[] = {1, 8};
    for (int ci = 0; ci < 2; ci++)
        for (int ti = 0; ti < 2; ti++)
            for (int sp = 0; sp < 2; sp++)
                for (int r = 0; r < 3; r++) {
                    int c = cs[ci], t = ts[ti];
                    if (sp && t == 1) continue;
                    double sc = s / c, tsp = sp ? t : 1;
                    tfm_rank_opts o = {.t = t, .sp = sp, .recomp = (tfm_recomp)r, .c = c};
                    tfm_rank_opts o1 = {.t = t, .sp = sp, .recomp = (tfm_recomp)r, .c = 1};
                    model q, q1;
                    CU_ASSERT_EQUAL_FATAL(tfm_rank_check(&m, &o, "gpt3", &e), CL_OK);
                    CU_ASSERT_EQUAL_FATAL(tfm_rank_model(&q, &m, &o, "gpt3", &e), CL_OK);
                    CU_ASSERT_EQUAL_FATAL(tfm_rank_model(&q1, &m, &o1, "gpt3", &e), CL_OK);
                    const model_layer *b = &q.layers[1];
                    double fwd = (24 * sc * h * h + 4 * sc * s * h) / t;
                    CU_ASSERT_DOUBLE_EQUAL(fwd, (24 * s * h * h + 4 * s * s * h) / (t * c), 1e-3);
                    double again = r == 2 ? fwd : r == 1 ? 4 * sc * s * h / t : 0;
                    CU_ASSERT_DOUBLE_EQUAL(b->fwd_flops, fwd, 1e-3);
                    CU_ASSERT_DOUBLE_EQUAL(b->bwd_in_flops + b->bwd_w_flops, 2 * fwd + again, 1e-3);
                    double act = r == 2 ? 2 * sc * h / tsp
                               : sp ? sc * h * (34 + (r ? 0 : 5 * a * s / h)) / t
                                    : sc * h * (10 + 24.0 / t + (r ? 0 : 5 * a * s / (h * t)));
                    CU_ASSERT_DOUBLE_EQUAL((double)b->stash_elems * 2, act, 2);
                    /* and so 1/c of the rank's activations without cp */
                    CU_ASSERT_DOUBLE_EQUAL((double)b->stash_elems * c, (double)q1.layers[1].stash_elems, c);
                    CU_ASSERT_EQUAL(b->out_elems, (uint64_t)(sc * h / t));
                    CU_ASSERT_DOUBLE_EQUAL(q.layers[0].fwd_flops, sc * h / tsp, 1e-6);
                    CU_ASSERT_DOUBLE_EQUAL(q.layers[97].fwd_flops,
                                           2 * sc * h * V / t + 7 * sc * h / tsp + 5 * sc * V / t, 1e-3);
                    for (int i = 0; i < q.n_layers; i++) CU_ASSERT_EQUAL(q.layers[i].params, q1.layers[i].params);
                    model_free(&q);
                    model_free(&q1);
                }
    model_free(&m);
}

/* c = 1 is no context parallelism: the same per-rank model to the bit, and
 * the tensor-parallel collectives carry the rank's s/c tokens. */
static void test_cp_one(void)
{
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(&m, "models/llama3-8b.json", &e), CL_OK);
    tfm_rank_opts o0 = {.t = 4, .sp = 1, .recomp = TFM_RECOMP_SELECTIVE, .c = 0};
    tfm_rank_opts o1 = {.t = 4, .sp = 1, .recomp = TFM_RECOMP_SELECTIVE, .c = 1},
                  o2 = {.t = 4, .sp = 1, .recomp = TFM_RECOMP_SELECTIVE, .c = 2};
    model a, b;
    CU_ASSERT_EQUAL_FATAL(tfm_rank_model(&a, &m, &o0, "l", &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(tfm_rank_model(&b, &m, &o1, "l", &e), CL_OK);
    for (int i = 0; i < a.n_layers; i++) {
        CU_ASSERT_EQUAL(a.layers[i].fwd_flops, b.layers[i].fwd_flops);
        CU_ASSERT_EQUAL(a.layers[i].bwd_in_flops, b.layers[i].bwd_in_flops);
        CU_ASSERT_EQUAL(a.layers[i].stash_elems, b.layers[i].stash_elems);
        CU_ASSERT_EQUAL(a.layers[i].out_elems, b.layers[i].out_elems);
    }
    model_free(&a);
    model_free(&b);
    /* with a fused kernel's log-sum-exp too, the block's stash is 1/c of
     * the rank's without cp (to the byte rounding of the model format) */
    tfm_rank_opts f1 = {.t = 4, .recomp = TFM_RECOMP_NONE, .fused_attn = 1, .c = 1};
    tfm_rank_opts f4 = {.t = 4, .recomp = TFM_RECOMP_NONE, .fused_attn = 1, .c = 4};
    CU_ASSERT_EQUAL_FATAL(tfm_rank_model(&a, &m, &f1, "l", &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(tfm_rank_model(&b, &m, &f4, "l", &e), CL_OK);
    CU_ASSERT_DOUBLE_EQUAL((double)b.layers[1].stash_elems * 4, (double)a.layers[1].stash_elems, 4);
    CU_ASSERT(a.layers[1].stash_elems > 0);
    model_free(&a);
    model_free(&b);
    tfm_rank_comm c1 = tfm_rank_layer_comm(&m.tfm, m.dtype, &o1, 1);
    tfm_rank_comm c2 = tfm_rank_layer_comm(&m.tfm, m.dtype, &o2, 1);
    CU_ASSERT_EQUAL(c1.fwd.msg, 2.0 * 8192 * 4096); /* bf16 s h */
    CU_ASSERT_EQUAL(c2.fwd.msg, 2.0 * 4096 * 4096); /* bf16 (s/2) h */
    CU_ASSERT_EQUAL(tfm_rank_kv_ring(&m.tfm, m.dtype, &o1).steps, 0);
    model_free(&m);
}

/* The ring by hand: LLaMA-2 70B (h 8192, a 64, g 8 key/value heads, s 4096,
 * bf16) at t = 4, c = 4.  A rank holds 4096 / 4 = 1024 tokens; its
 * tensor-parallel share of K (and of V) is h g / a / t = 8192 x 8 / 64 / 4
 * = 256 elements per token.  A forward step sends K and V: 2 x 1024 x 256
 * x 2 bytes = 1,048,576 bytes; a backward step those and their gradients,
 * 2,097,152; c - 1 = 3 steps each way. */
static void test_kv_ring_bytes(void)
{
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(&m, "models/llama2-70b.json", &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(m.tfm.seq, 4096);
    tfm_rank_opts o = {.t = 4, .sp = 0, .recomp = TFM_RECOMP_NONE, .c = 4};
    tfm_rank_ring r = tfm_rank_kv_ring(&m.tfm, m.dtype, &o);
    CU_ASSERT_EQUAL(r.steps, 3);
    CU_ASSERT_EQUAL(r.fwd_bytes, 1048576.0);
    CU_ASSERT_EQUAL(r.bwd_bytes, 2097152.0);
    model_free(&m);
}

/* The ring priced beside the attention core, by hand: a float32 GPT (L 1,
 * h 8, a 2, s 8, V 16) at t = 1, c = 2 on a 1 GFLOP/s device whose memory
 * is no limit, the ring's link 1 MB/s with 1 ms per step.  Per rank:
 *   block forward  (24 (s/2) h^2 + 4 (s/2) s h) = 6144 + 1024 = 7168 FLOPs,
 *                  7.168 us, of which the attention core 1024 (1.024 us)
 *   input gradient 2 x 7168 - 6144 (the weight gradients) = 8192 FLOPs,
 *                  8.192 us, of which the core 2 x 1024 (2.048 us)
 *   ring           1 step; forward K, V of 4 tokens x 8 x 4 bytes x 2 =
 *                  256 bytes: 1 ms + 256 us = 1.256 ms beside half the
 *                  core (0.512 us): 1.256 ms - 0.512 us = 1.255488 ms
 *                  exposed; backward 512 bytes: 1.512 ms - 1.024 us =
 *                  1.510976 ms exposed
 * With full recomputation the backward runs the forward's ring again. */
static void test_ring_overlap(void)
{
    tfm_desc d = tfm_gpt(1, 8, 2, 8, 16);
    model md, mr;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(tfm_model_build(&md, &d, MODEL_F32, "tiny", "tiny", &e), CL_OK);
    cluster_devtype dt = {.name = "g", .peak_fp32_flops = 1e9, .mem_bytes = 1 << 30,
                          .mem_bw_Bps = 1e18, .efficiency = 1};
    cluster_link intra = {1e9, 0}, ring = {1e6, 1e-3};
    for (int r = 0; r <= 2; r += 2) {
        double pt = 1;
        int shaped;
        prof base, pf;
        tfm_rank_opts o = {.t = 1, .sp = 0, .recomp = (tfm_recomp)r, .c = 2};
        CU_ASSERT_EQUAL_FATAL(tfm_rank_model(&mr, &md, &o, "tiny", &e), CL_OK);
        CU_ASSERT_EQUAL_FATAL(prof_derive(&base, &mr, &dt, &pt, 1, &e), CL_OK);
        CU_ASSERT_EQUAL_FATAL(tp_derive(&pf, &md, &mr, &o, 1, PROF_ATTN_UNFUSED, &dt, intra, ring, &pt, 1, &shaped, &e),
                              CL_OK);
        CU_ASSERT_FALSE(shaped);
        double f0 = base.layers[1].fwd_s[0], b0 = base.layers[1].bwd_in_s[0];
        CU_ASSERT_DOUBLE_EQUAL(f0, 7.168e-6, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(b0, r ? 8.192e-6 + 7.168e-6 : 8.192e-6, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(pf.layers[1].fwd_s[0] - f0, 1.255488e-3, 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(pf.layers[1].bwd_in_s[0] - b0, 1.510976e-3 + (r ? 1.255488e-3 : 0), 1e-12);
        /* the embedding and head have no ring */
        CU_ASSERT_EQUAL(pf.layers[0].fwd_s[0], base.layers[0].fwd_s[0]);
        CU_ASSERT_EQUAL(pf.layers[2].bwd_in_s[0], base.layers[2].bwd_in_s[0]);
        prof_free(&base);
        prof_free(&pf);
        model_free(&mr);
    }
    model_free(&md);
}

/* The fused attention core on a kernel-model device: c ring steps, each a
 * flash kernel over a c-th of the rank's causal FLOPs, which are the whole
 * causal attention / c: per step F / c^2 with F = 0.5 x 4 b (a/t) s^2 (h/a)
 * (the causal half), time F / c^2 / (peak x attention efficiency) + one
 * launch; the backward 2.5 times the FLOPs. */
static void test_fused_core(void)
{
    model m;
    cl_err e = {0};
    cluster_devtype dt;
    CU_ASSERT_EQUAL_FATAL(model_load(&m, "models/llama3-8b.json", &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(cluster_devtype_preset(NULL, "H100-80GB", &dt, &e), CL_OK);
    const double s = 8192, h = 4096, a = 32, t = 2;
    double F = 0.5 * 4 * (a / t) * s * s * (h / a), rate = dt.peak_fp16_flops * dt.kernels.attention_efficiency;
    for (int c = 1; c <= 4; c *= 2) {
        tfm_rank_opts o = {.t = 2, .sp = 0, .recomp = TFM_RECOMP_NONE, .c = c};
        prof_tfm_pass p = prof_tfm_core_s(&m.tfm, 2, &o, PROF_ATTN_FUSED, &dt, 1);
        CU_ASSERT_DOUBLE_EQUAL(p.fwd_s, c * (F / c / c / rate + dt.kernels.launch_s), 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(p.bwd_in_s, c * (2.5 * F / c / c / rate + dt.kernels.launch_s), 1e-12);
        CU_ASSERT_EQUAL(p.kernels, 2 * c);
    }
    model_free(&m);
}

/* LLaMA-3 8B on 4 H100 nodes of 8 */
#define LQ "--model models/llama3-8b.json --device H100-80GB --devices 32 --per-node 8 --batch 32 --optimizer adam --attention fused"

static double layout_iter(const char *bw, const char *lay, const char *path)
{
    char args[1200];
    snprintf(args, sizeof args, "plan " LQ " --bandwidth %s --layout %s -o %s", bw, lay, path);
    char *out = NULL, *err = NULL;
    int rc = test_run_cli(args, &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) fprintf(stderr, "%s: %s", args, err ? err : "");
    free(out), free(err);
    plan p;
    cl_err e = {0};
    if (plan_load(&p, path, &e)) return NAN;
    double it = p.pred.iteration_s;
    plan_free(&p);
    return it;
}

/* A layout with cp: t x cp x p x d GPUs, each stage on d x cp
 * tensor-parallel groups (Megatron-core's data-parallel group with context,
 * over which it reduces gradients and shards ZeRO), the batch counted in
 * c-ths of a sequence; sim replays it to the same iteration; export --to
 * megatron writes the degree and the batch in sequences. */
static void test_layout_cp(void)
{
    char pp[512], args[1600];
    char *dir = test_scratch(sizeof pp, "p.json", pp, NULL);
    snprintf(args, sizeof args, "plan " LQ " --bandwidth 450e9,50e9 --layout t=2,cp=2,p=2,d=4,zero=1 -o %s", pp);
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "t x cp x p x d = 2 x 2 x 2 x 4 = 32 GPUs"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "batch 32 sequences"));
    free(out), free(err);
    plan p;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(plan_load(&p, pp, &e), CL_OK);
    CU_ASSERT_EQUAL(plan_context(&p), 2);
    CU_ASSERT_EQUAL(p.n_stages, 2);
    CU_ASSERT_EQUAL(p.stages[0].n_replicas, 8);
    CU_ASSERT_EQUAL((long long)plan_tensor(&p) * plan_device_count(&p), 32);
    CU_ASSERT_EQUAL(p.batch, 64);
    CU_ASSERT_EQUAL(p.n_micro, 64);
    snprintf(args, sizeof args, "sim --json %s", pp);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    const char *it = out ? strstr(out, "\"iteration_s\"") : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(it);
    CU_ASSERT_DOUBLE_EQUAL(strtod(strchr(it, ':') + 1, NULL), p.pred.iteration_s, 1e-9 * p.pred.iteration_s);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"context\""));
    free(out), free(err);
    snprintf(args, sizeof args, "export %s --to megatron", pp);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "--context-parallel-size 2"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "--global-batch-size 32\n"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "run on 32 GPUs"));
    free(out), free(err);
    snprintf(args, sizeof args, "export %s --to torch", pp);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "hint"));
    free(out), free(err);
    plan_free(&p);
    test_rmtree(dir);
}

/* cp=1 is byte for byte the layout without cp (plan file and output);
 * bad cp values: exit 2, one line with a hint, no file. */
static void test_cp_refused_and_one(void)
{
    char pp[512], args[1600];
    char *dir = test_scratch(sizeof pp, "p.json", pp, NULL);
    char *o[2] = {NULL, NULL}, *f[2] = {NULL, NULL};
    static const char *const same[] = {"t=2,p=2,d=8,recompute=full", "t=2,cp=1,p=2,d=8,recompute=full"};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "plan " LQ " --bandwidth 450e9,50e9 --layout %s -o %s", same[k], pp);
        CU_ASSERT_EQUAL(test_run_cli(args, &o[k], NULL), 0);
        f[k] = test_slurp(pp);
        CU_ASSERT_PTR_NOT_NULL_FATAL(o[k]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f[k]);
        char *ev = strstr(o[k], "evaluated in "); /* the one wall-clock line */
        CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
        memmove(ev, strchr(ev, '\n'), strlen(strchr(ev, '\n')) + 1);
    }
    CU_ASSERT_STRING_EQUAL(f[0], f[1]);
    CU_ASSERT_STRING_EQUAL(o[0], o[1]);
    CU_ASSERT_PTR_NULL(strstr(f[0], "\"context\""));
    for (int k = 0; k < 2; k++) free(o[k]), free(f[k]);
    static const char *const bad[] = {
        "t=2,cp=0,p=2",  /* not a positive integer */
        "t=2,cp=x,p=2",
        "t=2,cp=3,p=2",  /* 3 x 2 x 2 does not divide 32 GPUs */
        "t=2,cp=64,p=1",
        "t=4,cp=2,p=2,d=4,sp=1,mb=1", /* 64 GPUs, not 32 */
    };
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        snprintf(args, sizeof args, "plan " LQ " --layout %s -o %s", bad[i], pp);
        remove(pp);
        char *err = NULL;
        CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
        CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "hint"));
        CU_ASSERT_PTR_NOT_NULL(err && !strchr(strchr(err, '\n') ? strchr(err, '\n') + 1 : "", '\n'));
        if (!(err && strstr(err, "hint"))) fprintf(stderr, "no hint for %s: %s\n", bad[i], err ? err : "");
        free(err);
        CU_ASSERT_PTR_NULL(test_slurp(pp));
    }
    /* the sequence must split into 2 cp chunks: 8192 does not into 6 */
    snprintf(args, sizeof args, "plan --model models/llama3-8b.json --device H100-80GB --devices 24 --per-node 8 "
                                "--batch 24 --layout t=2,cp=3,p=4 -o %s", pp);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "not a multiple of 2 x cp = 6") && strstr(err, "hint"));
    free(err);
    CU_ASSERT_PTR_NULL(test_slurp(pp));
    /* and a GPT of s 12 takes cp 3 but not cp 4 */
    tfm_desc d = tfm_gpt(2, 8, 2, 12, 16);
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(tfm_model_build(&m, &d, MODEL_F32, "s12", "s12", &e), CL_OK);
    tfm_rank_opts four = {.t = 1, .recomp = TFM_RECOMP_NONE, .c = 4}, ok = {.t = 1, .recomp = TFM_RECOMP_NONE, .c = 3};
    CU_ASSERT_EQUAL(tfm_rank_check(&m, &four, "s12", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "hint"));
    CU_ASSERT_EQUAL(tfm_rank_check(&m, &ok, "s12", &e), CL_OK);
    model_free(&m);
    test_rmtree(dir);
}

/* Faster links never make a context-parallel layout slower: t = 4, cp = 4
 * puts each ring across two nodes (16 GPUs), so its steps wait on the
 * link between nodes; t = 2, cp = 4 keeps it inside one.  Raising either
 * bandwidth, one at a time over a grid, never raises the iteration, and
 * with a slow network the ring that crosses nodes costs more than inside
 * a node at the same bandwidths. */
static void test_links_monotone(void)
{
    char pp[512];
    char *dir = test_scratch(sizeof pp, "p.json", pp, NULL);
    static const char *const lays[] = {"t=4,cp=4,p=2,d=1", "t=2,cp=4,p=2,d=2"};
    static const double bws[] = {1e9, 1e10, 1e11, 1e12};
    for (int l = 0; l < 2; l++) {
        double grid[4][4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                char bw[64];
                snprintf(bw, sizeof bw, "%g,%g", bws[i], bws[j]);
                grid[i][j] = layout_iter(bw, lays[l], pp);
            }
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                if (i + 1 < 4) CU_ASSERT(grid[i + 1][j] <= grid[i][j]);
                if (j + 1 < 4) CU_ASSERT(grid[i][j + 1] <= grid[i][j]);
            }
        /* across nodes, the ring feels the inter-node bandwidth */
        if (l == 0) CU_ASSERT(grid[3][0] > grid[3][3]);
    }
    test_rmtree(dir);
}

TEST_SUITE(context)
{
    test_add_suite("context");
    test_add("GPT-3 per-rank layers with cp 2 and 4 against the closed forms", test_rank_cp_gpt3);
    test_add("cp 1 is no context parallelism", test_cp_one);
    test_add("key/value ring bytes by hand", test_kv_ring_bytes);
    test_add("ring overlapped with the attention core, by hand", test_ring_overlap);
    test_add("fused attention core in c ring steps", test_fused_core);
    test_add("a layout with cp on t x cp x p x d GPUs", test_layout_cp);
    test_add("cp=1 changes nothing, bad cp refused", test_cp_refused_and_one);
    test_add("faster links never slow a cp layout", test_links_monotone);
}
