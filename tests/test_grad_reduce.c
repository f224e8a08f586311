/* test_grad_reduce.c - the data-parallel gradient reduction's element size
 * (core/plan_grad.c): the defaults frameworks use and the override, the
 * plan file's member, the ring with different bytes in its two halves
 * against the closed form, and the planner's price of the all-reduce
 * against the simulated ring. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonx.h"
#include "core/plan.h"
#include "core/schedule.h"
#include "models/model.h"
#include "models/tfm_model.h"
#include "models/transformer.h"
#include "planner/layout.h"
#include "profiles/cluster.h"
#include "sim/sim.h"
#include "test.h"

static int sim_once(const plan *p, int kind, int m, sim_result *r)
{
    cl_err e = {0};
    sched sc;
    int rc = sched_build(p, (sched_kind)kind, m, 1, &sc, &e);
    if (rc) return rc;
    sim_opts o = {.max_wall_s = 60};
    sim *s = sim_create(p, &sc, &o, &e);
    rc = s ? sim_run(s, r, &e) : (e.code ? e.code : CL_EINPUT);
    if (rc) fprintf(stderr, "\n  %s\n", e.msg);
    sim_destroy(s);
    sched_free(&sc);
    return rc;
}

/* ----------------------------------------------------------- defaults -- */

static void test_defaults(void)
{
    /* Megatron-LM's validate_args: bf16 reduces in fp32, fp16 in fp16;
     * DeepSpeed's bf16 optimizer likewise; no framework: the model's size */
    static const struct {
        model_dtype dt;
        plan_prec prec;
        plan_for fw;
        int want;
    } rows[] = {
        {MODEL_BF16, PREC_MIXED, PLAN_FOR_MEGATRON, 4}, {MODEL_BF16, PREC_MIXED, PLAN_FOR_DEEPSPEED, 4},
        {MODEL_BF16, PREC_FP8, PLAN_FOR_MEGATRON, 4},   {MODEL_BF16, PREC_MIXED, PLAN_FOR_ANY, 2},
        {MODEL_BF16, PREC_MIXED, PLAN_FOR_TORCH, 2},    {MODEL_F16, PREC_MIXED, PLAN_FOR_MEGATRON, 2},
        {MODEL_F16, PREC_MIXED, PLAN_FOR_DEEPSPEED, 2}, {MODEL_F32, PREC_FP32, PLAN_FOR_ANY, 4},
        {MODEL_F32, PREC_FP32, PLAN_FOR_MEGATRON, 4},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        CU_ASSERT_EQUAL(plan_grad_reduce_default(rows[i].dt, rows[i].prec, rows[i].fw), rows[i].want);

    /* a plan: its default, then the user's override either way */
    plan p = {0};
    p.model.dtype = MODEL_BF16;
    p.framework = PLAN_FOR_MEGATRON;
    CU_ASSERT_EQUAL(plan_grad_reduce_bytes(&p), 4);
    p.grad_reduce = 2;
    CU_ASSERT_EQUAL(plan_grad_reduce_bytes(&p), 2);
    p.framework = PLAN_FOR_ANY;
    CU_ASSERT_EQUAL(plan_grad_reduce_bytes(&p), 2);
    p.grad_reduce = 4;
    CU_ASSERT_EQUAL(plan_grad_reduce_bytes(&p), 4);

    /* the halves per param byte: a 2-byte model reducing in fp32 moves
     * twice its bytes in the reduce-scatter; under a ZeRO split the
     * all-gather moves the 16-bit weights, and DeepSpeed's bf16 optimizer
     * all-reduces the fp32 gradients before that all-gather */
    plan_ar_f f = plan_ar_factors(MODEL_BF16, 4, 0, PLAN_FOR_MEGATRON);
    CU_ASSERT(f.reduce == 2 && f.gather == 2);
    f = plan_ar_factors(MODEL_BF16, 4, 1, PLAN_FOR_MEGATRON);
    CU_ASSERT(f.reduce == 2 && f.gather == 1);
    f = plan_ar_factors(MODEL_BF16, 4, 1, PLAN_FOR_DEEPSPEED);
    CU_ASSERT(f.reduce == 2 && f.gather == 3);
    /* DeepSpeed of 2022: the bf16 optimizer's all-reduce cast to 16 bits */
    f = plan_ar_factors(MODEL_BF16, 2, 1, PLAN_FOR_DEEPSPEED);
    CU_ASSERT(f.reduce == 1 && f.gather == 2);
    /* fp16 under DeepSpeed: its ZeRO optimizer's reduce-scatter and all-gather */
    f = plan_ar_factors(MODEL_F16, 2, 1, PLAN_FOR_DEEPSPEED);
    CU_ASSERT(f.reduce == 1 && f.gather == 1);
    f = plan_ar_factors(MODEL_F32, 4, 0, PLAN_FOR_ANY);
    CU_ASSERT(f.reduce == 1 && f.gather == 1);
    /* ZeRO splits only the flushing kinds' all-reduce */
    CU_ASSERT(plan_zero_splits(1, SCHED_1F1B) && plan_zero_splits(2, SCHED_INTERLEAVED));
    CU_ASSERT(!plan_zero_splits(0, SCHED_1F1B) && !plan_zero_splits(1, SCHED_PIPEDREAM) &&
              !plan_zero_splits(1, -1));
}

/* ---------------------------------------------------------- plan file -- */

/* A plan of 2 stages on a 2-device cluster, written and read back. */
static void test_plan_file(void)
{
    cl_err e = {0};
    plan p;
    sim_uniform u = {.stages = 1, .replicas = 2, .micro = 2, .per_node = 2, .schedule = SCHED_1F1B,
                     .fwd_s = 1e-3, .bwd_in_s = 1e-3, .bwd_w_s = 1e-3, .param_bytes = 1e6,
                     .intra = {1e9, 1e-6}, .inter = {1e9, 1e-6}};
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), CL_OK);
    p.model.n_layers = 0; /* uniform plans carry no layers: save the members only */
    for (int g = 0; g <= 4; g += 2) {
        p.grad_reduce = g;
        cJSON *j = plan_to_json(&p);
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "grad_reduce_bytes");
        if (g == 0) CU_ASSERT_PTR_NULL(m); /* the default is not written: older plans keep their bytes */
        if (g > 0) CU_ASSERT(m && m->valuedouble == g);
        /* the reader: a bad value names the member */
        if (g == 4) {
            cJSON_ReplaceItemInObject(j, "grad_reduce_bytes", cJSON_CreateNumber(3));
            plan q;
            CU_ASSERT_NOT_EQUAL(plan_from_json(&q, j, "p.json", &e), CL_OK);
            CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "grad_reduce_bytes"));
            cl_err_clear(&e);
        }
        cJSON_Delete(j);
    }
    sim_uniform_free(&p);
}

/* ---------------------------------------------------------- the ring -- */

/* One stage on k x n replicas (k a node), one microbatch each, of a
 * bfloat16 model under Megatron-LM (reduce in fp32: R = 2 P) with ZeRO
 * `zero` (1: the all-gather moves the weights, G = P; 0: G = R) or
 * DeepSpeed (ZeRO 1: G = R + P), or reduced in 2 bytes (R = P).  Uncontended, the ring takes
 *   (k - 1) (R / k / bw_in + lat_in) + (k - 1) (G / k / bw_in + lat_in)
 *   + (n - 1) (R / (k n) / bw_x + lat_x) + (n - 1) (G / (k n) / bw_x + lat_x)
 * after the 3 ms of compute; a flat ring (n = 1, or k = 1 on the link
 * between nodes) the same with k = r and one level. */
static void test_ring_halves(void)
{
    const int shapes[][2] = {{4, 1}, {2, 2}, {4, 3}, {1, 4}};
    const double P = 6e6;
    const cluster_link in = {3e9, 2e-6}, x = {5e8, 3e-5};
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++)
        for (int mode = 0; mode < 5; mode++) {
            int k = shapes[t][0], n = shapes[t][1], r = k * n;
            cl_err e = {0};
            plan p;
            sim_uniform u = {.stages = 1, .replicas = r, .micro = r, .per_node = k, .schedule = SCHED_1F1B,
                             .fwd_s = 1e-3, .bwd_in_s = 1e-3, .bwd_w_s = 1e-3, .param_bytes = P,
                             .intra = in, .inter = x};
            CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), CL_OK);
            p.model.dtype = MODEL_BF16;
            p.precision = PREC_MIXED;
            /* 0: Megatron, ZeRO 0; 1: Megatron, ZeRO 1; 2: DeepSpeed,
             * ZeRO 1; 3: the user's 2 bytes under Megatron, ZeRO 0; 4:
             * DeepSpeed, ZeRO 1, the user's 2 bytes (DeepSpeed of 2022) */
            p.framework = mode == 2 || mode == 4 ? PLAN_FOR_DEEPSPEED : PLAN_FOR_MEGATRON;
            p.zero = mode == 1 || mode == 2 || mode == 4;
            p.grad_reduce = mode >= 3 ? 2 : 0;
            double R = mode >= 3 ? P : 2 * P;
            double G = mode == 0 ? R : mode == 1 ? P : mode == 2 || mode == 4 ? R + P : P;
            sim_result res;
            CU_ASSERT_EQUAL_FATAL(sim_once(&p, SCHED_1F1B, r, &res), CL_OK);
            int kk = n == 1 ? r : k == 1 ? 1 : k, nn = n == 1 ? 1 : k == 1 ? r : n;
            double want = (kk - 1) * (R / kk / in.bw_Bps + in.latency_s) + (kk - 1) * (G / kk / in.bw_Bps + in.latency_s);
            if (k == 1) /* a flat ring between nodes */
                want = (r - 1) * (R / r / x.bw_Bps + x.latency_s) + (r - 1) * (G / r / x.bw_Bps + x.latency_s);
            else if (nn > 1)
                want += (nn - 1) * (R / kk / nn / x.bw_Bps + x.latency_s) + (nn - 1) * (G / kk / nn / x.bw_Bps + x.latency_s);
            double ok = test_rel(res.iteration_s, 3e-3 + want) < 1e-12;
            CU_ASSERT(ok);
            if (!ok)
                fprintf(stderr, "\n  k %d n %d mode %d: %.17g s, want %.17g\n", k, n, mode, res.iteration_s,
                        3e-3 + want);
            /* every member sends (r - 1) / r of both halves in all */
            double sent = k > 1 && n > 1 ? (k - 1) * (R + G) / k + (n - 1) * (R + G) / k / n
                                         : (r - 1) * (R + G) / r;
            CU_ASSERT(test_rel(res.dev[0].sent_bytes, sent) < 1e-12);
            sim_result_free(&res);
            sim_uniform_free(&p);
        }
}

/* ------------------------------------------------- planner = simulator -- */

/* A small GPT laid out as one stage on d replicas (t = 1, p = 1): the
 * stage's comm_s is the planner's price of its all-reduce
 * (plan_allreduce_s).  The same plan simulated with its compute and update
 * taken out is the ring alone: the two agree, for bf16 under Megatron-LM
 * (fp32 reduction) with and without ZeRO, the user's 2 bytes, and no
 * framework (the model's 2 bytes), inside a node and across two. */
static void test_price_is_ring(void)
{
    tfm_desc d = tfm_gpt(4, 512, 8, 256, 1024);
    cl_err e = {0};
    model md = {0};
    CU_ASSERT_EQUAL_FATAL(tfm_check(&d, NULL, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(tfm_model_build(&md, &d, MODEL_BF16, "tiny", "test", &e), CL_OK);
    cluster_devtype dt;
    CU_ASSERT_EQUAL_FATAL(cluster_devtype_preset(NULL, "A100-80GB", &dt, &e), CL_OK);
    const int gpus[] = {8, 16};
    double price_of[2][4] = {{0}};
    for (int g = 0; g < 2; g++)
        for (int mode = 0; mode < 4; mode++) {
            cluster cl = {0};
            cluster_link li = {230e9, 5e-6}, le = {24e9, 10e-6};
            CU_ASSERT_EQUAL_FATAL(cluster_uniform(&cl, &dt, gpus[g], 8, li, le, &e), CL_OK);
            plan_fixed fx = {.t = 1, .p = 1, .d = gpus[g], .mb = 1, .sched = SCHED_1F1B, .recompute = -1,
                             .zero = mode == 1, .sp = -1};
            plan_request rq = {.model = &md, .cluster = &cl, .ref_type = &dt, .batch = 2 * gpus[g],
                               .optimizer = OPTIM_ADAM, .precision = PREC_MIXED, .comm = 1, .replication = 1,
                               .framework = mode == 3 ? PLAN_FOR_ANY : PLAN_FOR_MEGATRON,
                               .grad_reduce = mode == 2 ? 2 : 0, .model_origin = "tiny", .cluster_origin = "test"};
            plan_result res;
            char nofit[320];
            CU_ASSERT_EQUAL_FATAL(plan_fixed_eval(&rq, &fx, "test", &res, nofit, sizeof nofit, &e), CL_OK);
            plan *p = &res.plan;
            CU_ASSERT_EQUAL_FATAL(p->n_stages, 1);
            double price = p->stages[0].comm_s;
            price_of[g][mode] = price;
            p->stages[0].fwd_s = p->stages[0].bwd_in_s = p->stages[0].bwd_w_s = p->stages[0].update_s = 0;
            sim_result r;
            CU_ASSERT_EQUAL_FATAL(sim_once(p, p->schedule, p->n_micro, &r), CL_OK);
            double ok = price > 0 && test_rel(r.iteration_s, price) < 1e-9;
            CU_ASSERT(ok);
            if (!ok)
                fprintf(stderr, "\n  %d GPUs mode %d: priced %.17g s, simulated %.17g s\n", gpus[g], mode, price,
                        r.iteration_s);
            sim_result_free(&r);
            plan_result_free(&res);
            cluster_free(&cl);
        }
    /* fp32 reduction of a 2-byte model doubles the bandwidth term, ZeRO
     * 1's weights in the all-gather make it 1.5 times; the latencies stay
     * (2 (8 - 1) inside the node, 2 (2 - 1) between the two); the user's 2
     * bytes and no framework agree */
    for (int g = 0; g < 2; g++) {
        double lat = 2 * 7 * 5e-6 + (g ? 2 * 1 * 10e-6 : 0), bw2 = price_of[g][2] - lat;
        CU_ASSERT(bw2 > 0);
        CU_ASSERT(test_rel(price_of[g][0] - lat, 2 * bw2) < 1e-9);
        CU_ASSERT(test_rel(price_of[g][1] - lat, 1.5 * bw2) < 1e-9);
        CU_ASSERT_EQUAL(price_of[g][2], price_of[g][3]);
    }
    model_free(&md);
}

/* ------------------------------------------------------------- the CLI -- */

/* --grad-reduce-bytes on `plan --layout` (a bfloat16 LLaMA-3 8B, ZeRO 1):
 * 4 reduces in fp32, says so and is slower than the default (the model's
 * 2 bytes, no framework named); 3 is a usage error naming the option. */
static void test_cli(void)
{
    const char *base = "plan --model models/llama3-8b.json --device A100-80GB --devices 16 --per-node 8 --batch 64 "
                       "--optimizer adam --layout t=2,p=2,d=4,mb=1,recompute=full,zero=1";
    char cmd[512], *out[2] = {0}, *err = NULL;
    double it[2] = {0};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "%s%s", base, k ? " --grad-reduce-bytes 4" : "");
        CU_ASSERT_EQUAL(test_run_cli(cmd, &out[k], &err), 0);
        free(err);
        const char *at = out[k] ? strstr(out[k], "predicted: iteration ") : NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(at);
        it[k] = strtod(at + strlen("predicted: iteration "), NULL);
    }
    CU_ASSERT(it[1] > it[0]);
    CU_ASSERT_PTR_NULL(strstr(out[0], "gradient reduction:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out[1], "gradient reduction: fp32, 4 bytes per parameter where the weights have 2 (as set)"));
    free(out[0]);
    free(out[1]);
    snprintf(cmd, sizeof cmd, "%s --grad-reduce-bytes 3", base);
    char *o = NULL;
    CU_ASSERT_EQUAL(test_run_cli(cmd, &o, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "--grad-reduce-bytes 3: expected 2 or 4"));
    free(o);
    free(err);
}

/* --for on `plan --layout` (the same bfloat16 layout, ZeRO 1): the run is
 * that framework's.  Megatron-LM reduces bf16 gradients in fp32 and its
 * distributed optimizer gathers the 16-bit weights, exactly what
 * --grad-reduce-bytes 4 with no framework prices; torch keeps the model's
 * 2 bytes (the default's figure); DeepSpeed's bf16 optimizer gathers its
 * gradients as well as the weights, so it is slower than Megatron; the plan
 * file says "for"; a schedule the framework does not run is refused, with
 * no file written. */
static double layout_iter(const char *args, char **outp)
{
    char *out = NULL, *err = NULL;
    double it = -1;
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    const char *at = out ? strstr(out, "predicted: iteration ") : NULL;
    CU_ASSERT_PTR_NOT_NULL(at);
    if (at) it = strtod(at + strlen("predicted: iteration "), NULL);
    free(err);
    if (outp) *outp = out;
    else free(out);
    return it;
}

static void test_cli_for(void)
{
    const char *base = "plan --model models/llama3-8b.json --device A100-80GB --devices 16 --per-node 8 --batch 64 "
                       "--optimizer adam --layout t=2,p=2,d=4,mb=1,recompute=full,zero=1";
    char cmd[1536], f[600], *o = NULL, *err = NULL;
    char *dir = test_scratch(sizeof f, "ds.json", f, NULL);
    snprintf(cmd, sizeof cmd, "%s", base);
    double none = layout_iter(cmd, NULL);
    snprintf(cmd, sizeof cmd, "%s --grad-reduce-bytes 4", base);
    double fp32 = layout_iter(cmd, NULL);
    snprintf(cmd, sizeof cmd, "%s --for torch", base);
    double torch = layout_iter(cmd, NULL);
    snprintf(cmd, sizeof cmd, "%s --for megatron", base);
    double megatron = layout_iter(cmd, &o);
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "gradient reduction: fp32, 4 bytes per parameter where the weights have 2 (megatron's default for bfloat16)"));
    free(o);
    snprintf(cmd, sizeof cmd, "%s --for deepspeed -o %s", base, f);
    double ds = layout_iter(cmd, NULL);
    CU_ASSERT_DOUBLE_EQUAL(torch, none, 0);
    CU_ASSERT_DOUBLE_EQUAL(megatron, fp32, 0);
    CU_ASSERT(megatron > none);
    CU_ASSERT(ds > megatron);
    char *text = test_slurp(f);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "\"for\":\t\"deepspeed\""));
    free(text);
    remove(f);
    snprintf(cmd, sizeof cmd,
             "plan --model models/llama3-8b.json --device A100-80GB --devices 16 --per-node 8 --batch 64 --optimizer adam "
             "--layout t=2,p=2,d=4,mb=1,m=16,sched=interleaved,v=2,recompute=full,zero=1 --for deepspeed -o %s", f);
    o = err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(cmd, &o, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "sched=interleaved: deepspeed does not run it"));
    CU_ASSERT_PTR_NULL(test_slurp(f));
    free(o);
    free(err);
    test_rmtree(dir);
}

TEST_SUITE(grad_reduce)
{
    test_add_suite("grad_reduce");
    test_add("the reduction's element size: framework defaults and the override", test_defaults);
    test_add("grad_reduce_bytes in the plan file", test_plan_file);
    test_add("a ring with different bytes in its halves matches the closed form", test_ring_halves);
    test_add("the planner's price of the all-reduce is the simulated ring", test_price_is_ring);
    test_add("--grad-reduce-bytes on plan --layout", test_cli);
    test_add("--for on plan --layout: the framework's reduction, and its schedules only", test_cli_for);
}
