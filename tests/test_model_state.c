/* test_model_state.c - bytes of model state (weights, gradients, master
 * weights, optimiser moments) by precision, optimiser and ZeRO stage, in
 * the planner and in the simulator, and the runtime reserve that plans fit
 * against.
 *
 * References are independent of the code: bytes per parameter from the
 * Megatron-LM distributed-optimizer table (README, "Distributed
 * Optimizer": "bf16 param, fp32 grads" 18 replicated, 6 + 12/d sharded;
 * "fp16 param, fp16 grads" 20, 4 + 16/d; "fp32 param, fp32 grads" 16,
 * 8 + 8/d), DeepSpeed's own estimate for ZeRO 1 and 2 (4 + 16/d), the ZeRO
 * paper's accounting (Rajbhandari et al. 2020, Sec. 3.1: 2 + 2 + K with
 * K = 12 for Adam, to which the implementations add an fp32 copy of 16-bit
 * gradients, or keep fp32 ones: 2 + 4 + K), and totals of small
 * configurations worked by hand in the comments.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/schedule.h"
#include "planner/predict.h"
#include "planner/search.h"
#include "sim/sim.h"
#include "test.h"
#include "test_chain.h"

/* ---------------------------------------------------- per parameter -- */

/* Bytes per parameter of f (per parameter byte x element size) on d replicas. */
static double per_param(const plan_state_f *f, int elem, int d)
{
    return (f->rep + f->shard / d) * elem;
}

/* One optimiser step's memory traffic, counted tensor by tensor per
 * parameter: it reads the fp32 gradient (4); with master weights it reads
 * and writes them (4 + 4) and writes the 16-bit weight (2), without them it
 * reads and writes the fp32 weight (4 + 4); each moment is read and written
 * (4 + 4).  plan_update_traffic gives it per byte of the model's element. */
static void test_update_traffic(void)
{
    for (int o = 0; o < OPTIM_COUNT; o++)
        for (int mixed = 0; mixed < 2; mixed++) {
            int elem = mixed ? 2 : 4;
            double bytes = 4 + (mixed ? 4 + 4 + 2 : 4 + 4) + 8.0 * plan_optim_state_mult((plan_optim)o);
            for (int z = 0; z <= PLAN_ZERO_MAX; z++) {
                plan_state_f f = plan_state_factors(elem, mixed ? PREC_MIXED : PREC_FP32, (plan_optim)o, z, 4);
                CU_ASSERT_EQUAL(plan_update_traffic(&f) * elem, bytes);
            }
            /* 16-bit gradients (mixed only): read (2), their fp32 copy
             * written and read (4 + 4), then as above */
            if (mixed) {
                plan_state_f f = plan_state_factors(2, PREC_MIXED, (plan_optim)o, 1, 2);
                CU_ASSERT_EQUAL(plan_update_traffic(&f) * 2,
                                2 + 4 + 4 + 4 + 4 + 2 + 8.0 * plan_optim_state_mult((plan_optim)o));
            }
        }
    /* mixed-precision Adam: 30 bytes per parameter; FP8 keeps the same state */
    plan_state_f f = plan_state_factors(2, PREC_FP8, OPTIM_ADAM, 1, 4);
    CU_ASSERT_EQUAL(plan_update_traffic(&f) * 2, 30);
}

static void test_published_per_param(void)
{
    /* Megatron-LM, distributed optimizer, Adam: float16 param + fp32 grads */
    plan_state_f f = plan_state_factors(2, PREC_MIXED, OPTIM_ADAM, 0, 4);
    CU_ASSERT_EQUAL(per_param(&f, 2, 1), 18);
    CU_ASSERT_EQUAL(per_param(&f, 2, 64), 18); /* ZeRO 0: d changes nothing */
    f = plan_state_factors(2, PREC_MIXED, OPTIM_ADAM, 1, 4);
    for (int d = 1; d <= 64; d *= 2) CU_ASSERT_EQUAL(per_param(&f, 2, d), 6 + 12.0 / d);
    CU_ASSERT_EQUAL(f.rep * 2, 6);
    CU_ASSERT_EQUAL(f.shard * 2, 12);
    /* fp32 param + fp32 grads: 16 and 8 + 8/d */
    f = plan_state_factors(4, PREC_FP32, OPTIM_ADAM, 0, 4);
    CU_ASSERT_EQUAL(per_param(&f, 4, 8), 16);
    f = plan_state_factors(4, PREC_FP32, OPTIM_ADAM, 1, 4);
    for (int d = 1; d <= 64; d *= 2) CU_ASSERT_EQUAL(per_param(&f, 4, d), 8 + 8.0 / d);
    /* ZeRO 2 (the ZeRO paper's P_os+g, with 4-byte gradients): only the
     * 16-bit weights stay whole, 2 + (4 + 12)/d */
    f = plan_state_factors(2, PREC_MIXED, OPTIM_ADAM, 2, 4);
    for (int d = 1; d <= 64; d *= 2) CU_ASSERT_EQUAL(per_param(&f, 2, d), 2 + 16.0 / d);
    /* the ZeRO paper's 7.5B model on 64 GPUs, Adam, but with 4-byte
     * gradients: 18 x 7.5e9 = 135 GB replicated, (6 + 12/64) x 7.5e9 =
     * 46.4 GB under ZeRO 1, (2 + 16/64) x 7.5e9 = 16.9 GB under ZeRO 2 */
    plan_state_f z0 = plan_state_factors(2, PREC_MIXED, OPTIM_ADAM, 0, 4);
    plan_state_f z1 = plan_state_factors(2, PREC_MIXED, OPTIM_ADAM, 1, 4);
    plan_state_f z2 = plan_state_factors(2, PREC_MIXED, OPTIM_ADAM, 2, 4);
    double pb = 7.5e9 * 2; /* parameter bytes in the model's 2-byte elements */
    CU_ASSERT_DOUBLE_EQUAL(plan_state_bytes(&z0, pb, 64), 135e9, 1);
    CU_ASSERT_DOUBLE_EQUAL(plan_state_bytes(&z1, pb, 64), 46.40625e9, 1);
    CU_ASSERT_DOUBLE_EQUAL(plan_state_bytes(&z2, pb, 64), 16.875e9, 1);
    /* 16-bit gradients: Megatron-LM's "fp16 param, fp16 grads" row, 20
     * and 4 + 16/d (the optimiser's fp32 copy of the gradients sharded with
     * the master weights), which is also DeepSpeed's own estimate for its
     * ZeRO 1 and 2 with fp16 (estimate_zero2_model_states_mem_needs in
     * deepspeed/runtime/zero/stage_1_and_2.py: 4 x params + 16 x params /
     * GPUs); ZeRO 2 shards the 16-bit gradients too: 2 + 18/d */
    f = plan_state_factors(2, PREC_MIXED, OPTIM_ADAM, 0, 2);
    CU_ASSERT_EQUAL(per_param(&f, 2, 1), 20);
    CU_ASSERT_EQUAL(per_param(&f, 2, 64), 20);
    f = plan_state_factors(2, PREC_MIXED, OPTIM_ADAM, 1, 2);
    for (int d = 1; d <= 64; d *= 2) CU_ASSERT_EQUAL(per_param(&f, 2, d), 4 + 16.0 / d);
    CU_ASSERT_EQUAL(f.master_grads * 2, 4);
    f = plan_state_factors(2, PREC_MIXED, OPTIM_ADAM, 2, 2);
    for (int d = 1; d <= 64; d *= 2) CU_ASSERT_EQUAL(per_param(&f, 2, d), 2 + 18.0 / d);
    /* fp32 gradients need no copy */
    CU_ASSERT_EQUAL(plan_state_factors(2, PREC_MIXED, OPTIM_ADAM, 1, 4).master_grads, 0);
    /* mixed precision keeps the fp32 master weights for SGD too: 2 + 4 + 4 */
    f = plan_state_factors(2, PREC_MIXED, OPTIM_SGD, 0, 4);
    CU_ASSERT_EQUAL(per_param(&f, 2, 1), 10);
    f = plan_state_factors(2, PREC_MIXED, OPTIM_MOMENTUM, 0, 4);
    CU_ASSERT_EQUAL(per_param(&f, 2, 1), 14);
    /* fp32 without ZeRO: the old params x (2 + optimiser), to the bit */
    for (int o = 0; o < OPTIM_COUNT; o++) {
        f = plan_state_factors(4, PREC_FP32, (plan_optim)o, 0, 4);
        CU_ASSERT_EQUAL(f.shard, 0);
        CU_ASSERT_EQUAL(f.version, 1);
        double pbytes = 123456789.0 * 4 + 0.25;
        CU_ASSERT_EQUAL(plan_state_bytes(&f, pbytes, 7), pbytes * (2.0 + plan_optim_state_mult((plan_optim)o)));
    }
    /* auto precision follows the element size */
    CU_ASSERT_EQUAL(plan_prec_resolve(PREC_AUTO, 2), PREC_MIXED);
    CU_ASSERT_EQUAL(plan_prec_resolve(PREC_AUTO, 4), PREC_FP32);
    CU_ASSERT_EQUAL(plan_prec_resolve(PREC_FP32, 2), PREC_FP32);
}

/* ------------------------------------------------ planner, simulator -- */

#define NL 8          /* layers                                   */
#define PB 4000.0     /* parameter bytes per layer (test_chain.h) */
#define STASH 1e5     /* stash bytes per sample per layer          */

/* A chain of NL equal layers in `dtype`, its profile (1 ms each way, PB
 * parameter bytes, STASH per sample) and 4 devices of 1 GB. */
static void chain(model *m, prof *pf, cluster *c, model_dtype dtype)
{
    test_uniform_chain(m, pf, "chain", NL, STASH, dtype, "g");
    cl_err e = {0};
    cluster_devtype t = {.name = "g", .peak_fp32_flops = 1e12, .mem_bytes = (uint64_t)1 << 30,
                         .mem_bw_Bps = 1e12, .efficiency = 1};
    CU_ASSERT_EQUAL_FATAL(cluster_uniform(c, &t, 4, 0, (cluster_link){1e10, 0}, (cluster_link){1e10, 0}, &e),
                          CL_OK);
}

/* The layout every test here plans: the chain's 4 layers on 2 stages x 2
 * replicas, gpipe, 4 microbatches of 1, exact search, on c as the caller
 * left it (chain()'s cluster, its reserve perhaps changed). */
static void plan_2x2(const model *m, const prof *pf, cluster *c, plan_optim o, plan_prec prec, int zero,
                     int comm, plan_result *res)
{
    plan_request rq = {.model = m, .prof = pf, .cluster = c, .ref_type = &c->types[0], .batch = 4,
                       .schedule = SCHED_GPIPE, .microbatches = 4, .stages = 2, .algo = PLAN_ALGO_EXACT,
                       .optimizer = o, .precision = prec, .zero = zero, .comm = comm, .replication = 1};
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(plan_search(&rq, res, &e), CL_OK);
}

/* Plan 2 stages x 2 replicas (gpipe, 4 microbatches of 1, no
 * communication) and check every device's model state, in the plan and in
 * the simulator, against bytes per parameter worked by hand (`want`, per
 * parameter of the stage's PB x NL/2 bytes over elem). */
static void check_layout(model_dtype dtype, plan_prec prec, plan_optim o, int zero, double want)
{
    model m;
    prof pf;
    cluster c;
    chain(&m, &pf, &c, dtype);
    plan_result res;
    cl_err e = {0};
    plan_2x2(&m, &pf, &c, o, prec, zero, 0, &res);
    plan *p = &res.plan;
    CU_ASSERT_EQUAL_FATAL(p->n_stages, 2);
    CU_ASSERT_EQUAL_FATAL(p->stages[0].n_replicas, 2);
    CU_ASSERT_EQUAL_FATAL(p->stages[1].n_replicas, 2);
    CU_ASSERT_EQUAL_FATAL(p->stages[0].n_layers, NL / 2);
    CU_ASSERT_EQUAL(p->zero, zero);
    int elem = dtype == MODEL_F32 ? 4 : 2;
    double params = PB * NL / 2 / elem;   /* parameters per stage */
    double state = want * params;         /* bytes per device, by hand */
    /* the rest of a device's memory, by the planner's rules without any
     * model state: gpipe keeps ceil(4 microbatches / 2 replicas) = 2
     * stashes of NL/2 layers, and 2 x (in + out) boundary buffers (stage
     * 0: the model input, 256 elements of a sample, and 1024 bytes out) */
    double in0 = 256.0 * elem, rest0 = 2 * STASH * NL / 2 + 2 * (in0 + 1024);
    double rest1 = 2 * STASH * NL / 2 + 2 * (1024 + 0);
    CU_ASSERT_DOUBLE_EQUAL(p->stages[0].mem_bytes, state + rest0, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(p->stages[1].mem_bytes, state + rest1, 1e-6);
    /* the simulator: the same components, per device, at its peak */
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(sim_predict(p, &r, &e), CL_OK);
    plan_state_f f = plan_state_factors(elem, plan_prec_resolve(prec, elem), o, zero, 4);
    for (int i = 0; i < r.n_dev; i++) {
        const sim_mem *x = &r.dev[i].at_peak;
        double st = x->weights + x->grads + x->optim;
        CU_ASSERT_DOUBLE_EQUAL(st, state, 1e-6);
        /* weights stay whole; under ZeRO 2 the gradients are halved */
        CU_ASSERT_DOUBLE_EQUAL(x->weights, params * (prec == PREC_FP32 || (prec == PREC_AUTO && elem == 4) ? 4 : 2), 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(x->grads, params * 4 / (zero >= 2 ? 2 : 1), 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(x->optim, f.optim * PB * NL / 2 / (zero >= 1 ? 2 : 1), 1e-9);
        /* and the planner's figure for the stage on that device: the same
         * model state, and a peak it covers (its 2 x (in + out) buffers
         * are a bound; the simulator holds fewer at its peak) */
        int s = r.dev[i].stage;
        CU_ASSERT_DOUBLE_EQUAL(p->stages[s].mem_bytes - (s == 0 ? rest0 : rest1), st, 1e-6);
        CU_ASSERT_TRUE(r.dev[i].peak_mem_bytes <= p->stages[s].mem_bytes);
        CU_ASSERT_DOUBLE_EQUAL(r.dev[i].peak_mem_bytes - x->stash - x->buffers, st, 1e-6);
    }
    sim_result_free(&r);
    plan_result_free(&res);
    cluster_free(&c);
    model_free(&m);
    prof_free(&pf);
}

/* The gradients each framework keeps between microbatches, from the
 * frameworks' code (core/plan.h, plan_grad_keep_bytes), and the separate
 * accumulation kernel's bytes that follow: a 16-bit gradient read and the
 * accumulator read and written. */
static void test_grad_keep(void)
{
    const struct { model_dtype dt; plan_prec prec; plan_for fw; int reduce, keep; } rows[] = {
        {MODEL_F32, PREC_AUTO, PLAN_FOR_ANY, 0, 4},       {MODEL_F32, PREC_AUTO, PLAN_FOR_DEEPSPEED, 0, 4},
        {MODEL_F16, PREC_FP32, PLAN_FOR_MEGATRON, 0, 4},  {MODEL_F16, PREC_AUTO, PLAN_FOR_ANY, 0, 4},
        {MODEL_BF16, PREC_AUTO, PLAN_FOR_TORCH, 0, 4},    {MODEL_F16, PREC_AUTO, PLAN_FOR_TORCH, 0, 4},
        /* Megatron-LM: the buffer it reduces */
        {MODEL_BF16, PREC_MIXED, PLAN_FOR_MEGATRON, 0, 4}, {MODEL_F16, PREC_MIXED, PLAN_FOR_MEGATRON, 0, 2},
        {MODEL_BF16, PREC_MIXED, PLAN_FOR_MEGATRON, 2, 2}, {MODEL_F16, PREC_FP8, PLAN_FOR_MEGATRON, 4, 4},
        {MODEL_BF16, PREC_FP8, PLAN_FOR_MEGATRON, 0, 4},
        /* DeepSpeed: fp16 engine 16-bit, BF16 optimizer fp32 whatever it
         * communicates in */
        {MODEL_F16, PREC_MIXED, PLAN_FOR_DEEPSPEED, 0, 2}, {MODEL_F16, PREC_MIXED, PLAN_FOR_DEEPSPEED, 4, 2},
        {MODEL_BF16, PREC_MIXED, PLAN_FOR_DEEPSPEED, 0, 4}, {MODEL_BF16, PREC_MIXED, PLAN_FOR_DEEPSPEED, 2, 4},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int reduce = plan_grad_reduce_resolve(rows[i].reduce, rows[i].dt, rows[i].prec, rows[i].fw);
        int keep = plan_grad_keep_bytes(rows[i].dt, rows[i].prec, rows[i].fw, reduce);
        if (keep != rows[i].keep) fprintf(stderr, "\n  row %zu: keep %d, want %d\n", i, keep, rows[i].keep);
        CU_ASSERT_EQUAL(keep, rows[i].keep);
        int fp32 = plan_prec_resolve(rows[i].prec, model_dtype_bytes(rows[i].dt)) == PREC_FP32;
        CU_ASSERT_EQUAL(plan_grad_acc_bytes(rows[i].dt, rows[i].prec, rows[i].fw, rows[i].reduce),
                        fp32 ? 12 : 2 + 2 * rows[i].keep);
    }
}

/* The same chain planned on 2 stages x 2 replicas, 1F1B, 4 microbatches,
 * with and without --for deepspeed (Megatron-LM plans only transformers;
 * its choice is checked above): same layout, and every device's model
 * state in the plan and at the simulator's peak differs by the bytes per
 * parameter worked by hand (fp16, Adam): DeepSpeed keeps 16-bit gradients,
 * 20 / 4 + 16/2 = 12 / 2 + 18/2 = 11 for ZeRO 0, 1, 2, against
 * 18 / 12 / 10 with fp32 gradients. */
static void test_framework_state(void)
{
    model m;
    prof pf;
    cluster c;
    chain(&m, &pf, &c, MODEL_F16);
    const double any[3] = {18, 12, 10}, fw16[3] = {20, 12, 11};
    double params = PB * NL / 2 / 2; /* per stage */
    for (int z = 0; z <= PLAN_ZERO_MAX; z++)
        for (int k = 0; k < 2; k++) {
            plan_for fw = k ? PLAN_FOR_DEEPSPEED : PLAN_FOR_ANY;
            plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .ref_type = &c.types[0], .batch = 4,
                               .schedule = SCHED_1F1B, .microbatches = 4, .stages = 2, .algo = PLAN_ALGO_EXACT,
                               .optimizer = OPTIM_ADAM, .zero = z, .comm = 0, .replication = 1, .framework = fw};
            plan_result a, b;
            cl_err e = {0};
            CU_ASSERT_EQUAL_FATAL(plan_search(&rq, &b, &e), CL_OK);
            rq.framework = PLAN_FOR_ANY;
            CU_ASSERT_EQUAL_FATAL(plan_search(&rq, &a, &e), CL_OK);
            CU_ASSERT_EQUAL_FATAL(a.plan.n_stages, 2);
            CU_ASSERT_EQUAL_FATAL(b.plan.n_stages, 2);
            double want = fw == PLAN_FOR_ANY ? any[z] : fw16[z];
            for (int s = 0; s < 2; s++) {
                CU_ASSERT_EQUAL_FATAL(b.plan.stages[s].n_replicas, 2);
                CU_ASSERT_EQUAL_FATAL(a.plan.stages[s].n_layers, b.plan.stages[s].n_layers);
                CU_ASSERT_DOUBLE_EQUAL(b.plan.stages[s].mem_bytes - a.plan.stages[s].mem_bytes,
                                       params * (want - any[z]), 1e-6);
            }
            sim_result r;
            CU_ASSERT_EQUAL_FATAL(sim_predict(&b.plan, &r, &e), CL_OK);
            for (int i = 0; i < r.n_dev; i++) {
                const sim_mem *x = &r.dev[i].at_peak;
                CU_ASSERT_DOUBLE_EQUAL(x->weights + x->grads + x->optim, params * want, 1e-6);
                CU_ASSERT_DOUBLE_EQUAL(x->grads, params * (fw == PLAN_FOR_ANY ? 4 : 2) / (z >= 2 ? 2 : 1), 1e-9);
            }
            sim_result_free(&r);
            plan_result_free(&a);
            plan_result_free(&b);
        }
    cluster_free(&c);
    model_free(&m);
    prof_free(&pf);
}

static void test_layouts_by_hand(void)
{
    /* bytes per parameter, 2 replicas per stage:
     * mixed Adam: 18; ZeRO 1: 6 + 12/2 = 12; ZeRO 2: 2 + 16/2 = 10 */
    check_layout(MODEL_F16, PREC_AUTO, OPTIM_ADAM, 0, 18);
    check_layout(MODEL_F16, PREC_MIXED, OPTIM_ADAM, 1, 12);
    check_layout(MODEL_BF16, PREC_AUTO, OPTIM_ADAM, 2, 10);
    /* mixed momentum: 2 + 4 + 4 + 4 = 14; ZeRO 1: 6 + 8/2 = 10 */
    check_layout(MODEL_F16, PREC_MIXED, OPTIM_MOMENTUM, 0, 14);
    check_layout(MODEL_F16, PREC_MIXED, OPTIM_MOMENTUM, 1, 10);
    /* fp32 Adam: 16; ZeRO 1: 8 + 8/2 = 12; ZeRO 2: 4 + 12/2 = 10 */
    check_layout(MODEL_F32, PREC_AUTO, OPTIM_ADAM, 0, 16);
    check_layout(MODEL_F32, PREC_FP32, OPTIM_ADAM, 1, 12);
    check_layout(MODEL_F32, PREC_FP32, OPTIM_ADAM, 2, 10);
    /* fp32 SGD, as before: 8 */
    check_layout(MODEL_F32, PREC_AUTO, OPTIM_SGD, 0, 8);
    /* a 2-byte model forced to fp32: 4 + 4 + 8 = 16 */
    check_layout(MODEL_F16, PREC_FP32, OPTIM_ADAM, 0, 16);
}

/* ZeRO lets a layout fit that does not fit without it: 8 layers of 2,000
 * fp16 parameters each on 4 devices, Adam.  One stage on 4 replicas needs
 * 18 x 16,000 = 288,000 bytes of state per device without ZeRO and
 * (2 + 16/4) x 16,000 = 96,000 under ZeRO 2; with a device of 200,000
 * bytes plus what the stash and buffers need, only ZeRO 2 fits. */
static void test_zero_makes_it_fit(void)
{
    model m;
    prof pf;
    cluster c;
    chain(&m, &pf, &c, MODEL_F16);
    for (int i = 0; i < NL; i++) pf.layers[i].stash_bytes = 0;
    /* one microbatch per replica: 2 x (512 input + 0) buffer bytes */
    c.types[0].mem_bytes = 200000 + 2 * 512;
    plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .ref_type = &c.types[0], .batch = 4,
                       .schedule = SCHED_GPIPE, .microbatches = 4, .stages = 1, .algo = PLAN_ALGO_EXACT,
                       .optimizer = OPTIM_ADAM, .comm = 0, .replication = 1};
    plan_result res;
    cl_err e = {0};
    CU_ASSERT_EQUAL(plan_search(&rq, &res, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no plan fits in memory"));
    rq.zero = 2;
    cl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(plan_search(&rq, &res, &e), CL_OK);
    CU_ASSERT_EQUAL(res.plan.stages[0].n_replicas, 4);
    CU_ASSERT_DOUBLE_EQUAL(res.plan.stages[0].mem_bytes, 96000 + 2 * 512, 1e-6);
    plan_result_free(&res);
    /* the same device with a reserve of 1 byte more than the room left */
    c.types[0].reserve_bytes = c.types[0].mem_bytes - (96000 + 2 * 512) + 1;
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(plan_search(&rq, &res, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no plan fits in memory"));
    c.types[0].reserve_bytes--;
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(plan_search(&rq, &res, &e), CL_OK);
    if (!e.code) plan_result_free(&res);
    cluster_free(&c);
    model_free(&m);
    prof_free(&pf);
}

/* ------------------------------------------------------------ files -- */

static void test_plan_json(void)
{
    model m;
    prof pf;
    cluster c;
    chain(&m, &pf, &c, MODEL_F16);
    c.types[0].reserve_bytes = 12345;
    plan_result res;
    cl_err e = {0};
    plan_2x2(&m, &pf, &c, OPTIM_ADAM, PREC_AUTO, 2, 0, &res);
    CU_ASSERT_EQUAL(res.plan.precision, PREC_MIXED); /* resolved from the 2-byte model */
    cJSON *j = plan_to_json(&res.plan);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(j, "precision")), "mixed");
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "zero")), 2);
    const cJSON *ty = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "cluster"), "device_types"), 0);
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(ty, "reserve_bytes")), 12345);
    plan q;
    CU_ASSERT_EQUAL_FATAL(plan_from_json(&q, j, "p.json", &e), CL_OK);
    CU_ASSERT_EQUAL(q.precision, PREC_MIXED);
    CU_ASSERT_EQUAL(q.zero, 2);
    CU_ASSERT_EQUAL(q.cluster.types[0].reserve_bytes, 12345);
    plan_free(&q);
    /* a plan from before: no precision, no zero: the model's default, 0 */
    cJSON_DeleteItemFromObject(j, "precision");
    cJSON_DeleteItemFromObject(j, "zero");
    CU_ASSERT_EQUAL_FATAL(plan_from_json(&q, j, "old.json", &e), CL_OK);
    CU_ASSERT_EQUAL(q.precision, PREC_AUTO);
    CU_ASSERT_EQUAL(plan_prec_resolve(q.precision, 2), PREC_MIXED);
    CU_ASSERT_EQUAL(q.zero, 0);
    plan_free(&q);
    /* fp8: written and read back; its model state is mixed precision's */
    cJSON_AddStringToObject(j, "precision", "fp8");
    CU_ASSERT_EQUAL_FATAL(plan_from_json(&q, j, "fp8.json", &e), CL_OK);
    CU_ASSERT_EQUAL(q.precision, PREC_FP8);
    plan_state_f f8 = plan_state_factors(2, PREC_FP8, OPTIM_ADAM, 1, 4), f16 = plan_state_factors(2, PREC_MIXED, OPTIM_ADAM, 1, 4);
    CU_ASSERT(f8.rep == f16.rep && f8.shard == f16.shard && f8.master == f16.master);
    plan_free(&q);
    cJSON_DeleteItemFromObject(j, "precision");
    /* bad values: one line naming the member */
    cJSON_AddStringToObject(j, "precision", "fp4");
    CU_ASSERT_EQUAL(plan_from_json(&q, j, "bad.json", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "bad.json"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "precision"));
    cJSON_DeleteItemFromObject(j, "precision");
    cJSON_AddNumberToObject(j, "zero", 3);
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(plan_from_json(&q, j, "bad.json", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "zero"));
    cJSON_Delete(j);
    /* an fp32 model in fp32 without ZeRO writes neither (plans as before) */
    plan_result_free(&res);
    model_free(&m);
    prof_free(&pf);
    cluster_free(&c);
    chain(&m, &pf, &c, MODEL_F32);
    plan_2x2(&m, &pf, &c, OPTIM_ADAM, PREC_AUTO, 0, 0, &res);
    j = plan_to_json(&res.plan);
    CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(j, "precision"));
    CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(j, "zero"));
    ty = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "cluster"), "device_types"), 0);
    CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(ty, "reserve_bytes"));
    cJSON_Delete(j);
    plan_result_free(&res);
    model_free(&m);
    prof_free(&pf);
    cluster_free(&c);
}

static void test_reserve_json(void)
{
    static const char *head =
        "{\"format\": \"cleave-cluster\", \"version\": 1, \"name\": \"r\", \"device_types\": [{"
        "\"name\": \"g\", \"peak_fp32_flops\": 1e12, \"memory_bytes\": 1000, \"reserve_bytes\": ";
    static const char *tail =
        ", \"memory_bw_Bps\": 1e12, \"efficiency\": 0.5}], \"nodes\": [{\"name\": \"n\", \"devices\": "
        "{\"type\": \"g\", \"count\": 2}}], \"links\": {\"intra_node\": {\"bandwidth_Bps\": 1e9, "
        "\"latency_s\": 0}}}";
    char txt[1024];
    cluster c;
    cl_err e = {0};
    snprintf(txt, sizeof txt, "%s%s%s", head, "250", tail);
    cJSON *j = cJSON_Parse(txt);
    CU_ASSERT_EQUAL_FATAL(cluster_from_json(&c, j, "r.json", &e), CL_OK);
    CU_ASSERT_EQUAL(c.types[0].reserve_bytes, 250);
    CU_ASSERT_EQUAL(cluster_usable_bytes(&c.types[0]), 750);
    cluster_free(&c);
    cJSON_Delete(j);
    const char *bad[] = {"1000", "-1", "2.5"};
    for (int k = 0; k < 3; k++) {
        snprintf(txt, sizeof txt, "%s%s%s", head, bad[k], tail);
        j = cJSON_Parse(txt);
        cl_err_clear(&e);
        CU_ASSERT_EQUAL(cluster_from_json(&c, j, "r.json", &e), CL_EINPUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "device_types[0].reserve_bytes"));
        cJSON_Delete(j);
    }
}

/* -------------------------------------------------------------- CLI -- */

/* The example: GPT-2 1.5B (fp16), Adam, batch 8 in 8 microbatches
 * on one A100 80GB.  Before: gpipe, 79.97 GiB "of 80.00".  Now 18 bytes per
 * parameter and a 5 GiB reserve: gpipe needs 94.48 GiB of 75.00 and does
 * not fit; 1f1b (one microbatch in flight) does, at 34.66 GiB. */
static void test_gpt2_one_a100(void)
{
    char *so, *se;
    int st = test_run_cli("plan --model models/gpt2-1.5b.json --device A100-80GB --devices 1 --batch 8 "
                          "--microbatches 8 --optimizer adam --schedule gpipe", &so, &se);
    CU_ASSERT_EQUAL(st, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(se, "no plan fits in memory"));
    CU_ASSERT_PTR_NOT_NULL(strstr(se, "needs 94.48 GiB per device but device node0.0 has 75.00 GiB"));
    free(so);
    free(se);
    st = test_run_cli("plan --model models/gpt2-1.5b.json --device A100-80GB --devices 1 --batch 8 "
                      "--microbatches 8 --optimizer adam", &so, &se);
    CU_ASSERT_EQUAL(st, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(so, "34.66 GiB  75.00 GiB"));
    CU_ASSERT_PTR_NOT_NULL(strstr(so, "adam: 18 bytes per parameter"));
    CU_ASSERT_PTR_NOT_NULL(strstr(so, "runtime reserve of 5.00 GiB"));
    free(so);
    free(se);
}

/* cleave sim --precision and --zero replay a plan under other settings:
 * a plan of the 2-byte chain made in fp32 with Adam (2 stages x 2
 * replicas: 4 + 4 + 8 bytes per parameter), replayed in mixed precision
 * under ZeRO 1, keeps 6 + 12/2 = 12: 2 per parameter of weights, 4 of
 * gradients, 6 of optimiser state (fp32 master and moments, 12, halved). */
static void test_sim_overrides(void)
{
    model m;
    prof pf;
    cluster c;
    chain(&m, &pf, &c, MODEL_F16);
    plan_result res;
    cl_err e = {0};
    plan_2x2(&m, &pf, &c, OPTIM_ADAM, PREC_FP32, 0, 0, &res);
    char *dir = test_tmpdir(), path[600], args[800];
    snprintf(path, sizeof path, "%s/p.json", dir);
    CU_ASSERT_EQUAL_FATAL(plan_save(&res.plan, path, &e), CL_OK);
    double params = PB * NL / 2 / 2; /* per stage, 2-byte elements */
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, k ? "sim %s --json --precision mixed --zero 1" : "sim %s --json", path);
        char *so, *se;
        CU_ASSERT_EQUAL(test_run_cli(args, &so, &se), 0);
        cJSON *j = cJSON_Parse(so);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j);
        const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "devices"), 0);
        const cJSON *mem = cJSON_GetObjectItem(d, "memory_at_peak");
        double w = cJSON_GetNumberValue(cJSON_GetObjectItem(mem, "weights_bytes"));
        double g = cJSON_GetNumberValue(cJSON_GetObjectItem(mem, "grads_bytes"));
        double o = cJSON_GetNumberValue(cJSON_GetObjectItem(mem, "optimizer_bytes"));
        /* as planned: fp32, 4 + 4 + 8 per parameter; overridden: 2 + 4 + 12/2 */
        CU_ASSERT_DOUBLE_EQUAL(w, params * (k ? 2 : 4), 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(g, params * 4, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(o, params * (k ? 6 : 8), 1e-9);
        cJSON_Delete(j);
        free(so);
        free(se);
    }
    /* the table says how the state is kept */
    char *so, *se;
    snprintf(args, sizeof args, "sim %s --zero 2", path);
    CU_ASSERT_EQUAL(test_run_cli(args, &so, &se), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(so, "model state: fp32 (weights, gradients, moments), adam: 4 + 12/r bytes per parameter"));
    free(so);
    free(se);
    test_rmtree(dir);
    plan_result_free(&res);
    cluster_free(&c);
    model_free(&m);
    prof_free(&pf);
}

/* ZeRO's collectives in the simulator: one stage on 4 replicas, 4
 * microbatches (one per replica) under gpipe, F 1 ms, B 1 ms, an optimiser
 * step of 8 ms, 4 MB of parameters over 1 GB/s links (every pair its own
 * link), no latency.  A ring step moves 4 MB / 4 = 1 ms.
 *   ZeRO 0: F + B 2 ms, all-reduce 6 steps 6 ms, step 8 ms       = 16 ms
 *   ZeRO 1: F + B 2 ms, reduce-scatter 3 ms, the shard's step 8/4 = 2 ms,
 *           all-gather 3 ms (the next F waits for it)           = 10 ms
 * per iteration, over 1 and 3 iterations; the closed form (plan_predict)
 * moves by the same 6 ms. */
static void test_zero_collectives(void)
{
    for (int it = 1; it <= 3; it += 2)
        for (int zero = 0; zero <= 2; zero++) {
            sim_uniform u = {.stages = 1, .replicas = 4, .micro = 4, .schedule = SCHED_GPIPE,
                             .fwd_s = 1e-3, .bwd_in_s = 1e-3, .param_bytes = 4e6,
                             .intra = {1e9, 0}, .inter = {1e9, 0}};
            plan p;
            cl_err e = {0};
            CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), CL_OK);
            p.stages[0].update_s = 8e-3;
            p.zero = zero;
            sched sc;
            CU_ASSERT_EQUAL_FATAL(sched_build(&p, SCHED_GPIPE, 4, it, &sc, &e), CL_OK);
            sim_opts o = {0};
            sim *s = sim_create(&p, &sc, &o, &e);
            CU_ASSERT_PTR_NOT_NULL_FATAL(s);
            sim_result r;
            CU_ASSERT_EQUAL_FATAL(sim_run(s, &r, &e), CL_OK);
            double want = zero ? 10e-3 : 16e-3;
            CU_ASSERT_DOUBLE_EQUAL(r.iteration_s, want, 1e-12);
            CU_ASSERT_DOUBLE_EQUAL(r.makespan_s, it * want, 1e-12);
            /* the same bytes either way: 2 (r - 1) / r x 4 MB per device per iteration */
            CU_ASSERT_DOUBLE_EQUAL(r.dev[0].sent_bytes, it * 1.5 * 4e6, 1e-3);
            sim_result_free(&r);
            sim_destroy(s);
            sched_free(&sc);
            sim_uniform_free(&p);
        }
    /* the closed form: 2 stages x 2 replicas of the chain, an 8 ms step on
     * each; ZeRO halves the step at the end of the iteration, 8 - 4 = 4 ms */
    model m;
    prof pf;
    cluster c;
    chain(&m, &pf, &c, MODEL_F16);
    plan_result res;
    cl_err e = {0};
    plan_2x2(&m, &pf, &c, OPTIM_ADAM, PREC_AUTO, 0, 1, &res);
    CU_ASSERT_EQUAL_FATAL(res.plan.stages[0].n_replicas, 2);
    for (int k = 0; k < res.plan.n_stages; k++) res.plan.stages[k].update_s = 8e-3;
    plan_pred pr0, pr1;
    CU_ASSERT_EQUAL(plan_predict(&res.plan, NULL, &pr0, NULL, &e), CL_OK);
    res.plan.zero = 1;
    CU_ASSERT_EQUAL(plan_predict(&res.plan, NULL, &pr1, NULL, &e), CL_OK);
    CU_ASSERT_DOUBLE_EQUAL(pr0.iteration_s - pr1.iteration_s, 4e-3, 1e-12);
    plan_result_free(&res);
    cluster_free(&c);
    model_free(&m);
    prof_free(&pf);
}

TEST_SUITE(model_state)
{
    test_add_suite("model_state");
    test_add("bytes per parameter: Megatron-LM's table and DeepSpeed's estimate", test_published_per_param);
    test_add("optimiser step traffic, tensor by tensor", test_update_traffic);
    test_add("gradients kept by each framework, and their accumulation's bytes", test_grad_keep);
    test_add("2 x 2 under DeepSpeed: 16-bit gradients by hand", test_framework_state);
    test_add("2 stages x 2 replicas: plan and simulator against hand totals", test_layouts_by_hand);
    test_add("ZeRO 2 makes a layout fit; the reserve takes it away", test_zero_makes_it_fit);
    test_add("plan JSON: precision and zero written, old plans load", test_plan_json);
    test_add("cluster JSON: reserve_bytes read and checked", test_reserve_json);
    test_add("GPT-2 1.5B, Adam, one A100 80GB: gpipe no longer fits", test_gpt2_one_a100);
    test_add("cleave sim --precision, --zero replay under other settings", test_sim_overrides);
    test_add("ZeRO 1/2 in the simulator: reduce-scatter, shard update, all-gather", test_zero_collectives);
}
