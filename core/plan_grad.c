/* plan_grad.c - the element size and the bytes of the data-parallel
 * gradient reduction (see plan.h, plan_grad_reduce_default and
 * plan_ar_factors; docs/simulator.md, "Gradient reduction").
 *
 * The simulator's ring (sim/ring.c), the planner's price of the all-reduce
 * (planner/cost.c, plan_allreduce_factors) and the schedule's ALLREDUCE op
 * (core/schedule.c) all take their bytes from here, so the search prices
 * the ring it then simulates.
 */
#include <assert.h>
#include <stdio.h>

#include "plan.h"

int plan_grad_reduce_default(model_dtype dt, plan_prec prec, plan_for fw)
{
    assert(prec != PREC_AUTO && (unsigned)prec < PREC_COUNT);
    int elem = model_dtype_bytes(dt);
    if (prec == PREC_FP32) return 4;
    /* Megatron-LM's validate_args turns fp32 accumulation and reduction on
     * for bf16; DeepSpeed's bf16 optimizer reduces its fp32 buffers in fp32
     * since DeepSpeed's pull request 2970 (2023).  fp16 keeps 16-bit
     * gradients in both. */
    if (dt == MODEL_BF16 && (fw == PLAN_FOR_MEGATRON || fw == PLAN_FOR_DEEPSPEED)) return 4;
    return elem;
}

int plan_zero_splits(int zero, int kind)
{
    return zero >= 1 && zero <= PLAN_ZERO_MAX &&
           (kind == SCHED_GPIPE || kind == SCHED_1F1B || kind == SCHED_INTERLEAVED || kind == SCHED_ZBH1);
}

plan_ar_f plan_ar_factors(model_dtype dt, int reduce_bytes, int zero_split, plan_for fw)
{
    assert(reduce_bytes > 0);
    double e = model_dtype_bytes(dt);
    plan_ar_f f = {.reduce = reduce_bytes / e, .gather = reduce_bytes / e};
    if (zero_split) {
        f.gather = 1.0; /* the updated weights, in the model's element size */
        if (fw == PLAN_FOR_DEEPSPEED && dt == MODEL_BF16) f.gather += reduce_bytes / e;
    }
    return f;
}

int plan_grad_reduce_resolve(int set, model_dtype dt, plan_prec prec, plan_for fw)
{
    if (set > 0) return set;
    return plan_grad_reduce_default(dt, plan_prec_resolve(prec, model_dtype_bytes(dt)), fw);
}

int plan_grad_reduce_bytes(const plan *p)
{
    return plan_grad_reduce_resolve(p->grad_reduce, p->model.dtype, p->precision, p->framework);
}

void plan_ar_bytes(const plan *p, int st, int kind, double *reduce, double *gather)
{
    double P = p->stages[st].param_bytes;
    plan_ar_f f = plan_ar_factors(p->model.dtype, plan_grad_reduce_bytes(p),
                                  plan_zero_splits(p->zero, kind), p->framework);
    *reduce = P * f.reduce;
    *gather = P * f.gather;
}

int plan_grad_keep_bytes(model_dtype dt, plan_prec prec, plan_for fw, int reduce_bytes)
{
    prec = plan_prec_resolve(prec, model_dtype_bytes(dt));
    if (prec == PREC_FP32) return 4;
    /* Megatron-LM accumulates into the buffer it reduces (its DDP's
     * grad_dtype); DeepSpeed's fp16 engine keeps the 16-bit .grad and its
     * BF16 optimizer fp32 buffers, whatever its communication type */
    if (fw == PLAN_FOR_MEGATRON) return reduce_bytes;
    if (fw == PLAN_FOR_DEEPSPEED) return dt == MODEL_BF16 ? 4 : 2;
    return 4;
}

int plan_grad_keep(const plan *p)
{
    return plan_grad_keep_bytes(p->model.dtype, p->precision, p->framework, plan_grad_reduce_bytes(p));
}

double plan_grad_acc_bytes(model_dtype dt, plan_prec prec, plan_for fw, int reduce_set)
{
    prec = plan_prec_resolve(prec, model_dtype_bytes(dt));
    if (prec == PREC_FP32) return 4 + 4 + 4;
    return 2 + 2.0 * plan_grad_keep_bytes(dt, prec, fw, plan_grad_reduce_resolve(reduce_set, dt, prec, fw));
}

int plan_grad_reduce_describe(const plan *p, char *buf, size_t cap)
{
    int elem = model_dtype_bytes(p->model.dtype), g = plan_grad_reduce_bytes(p);
    buf[0] = '\0';
    if (g == elem) return 0;
    char because[96];
    if (p->grad_reduce > 0)
        snprintf(because, sizeof because, "as set");
    else if (plan_prec_resolve(p->precision, elem) == PREC_FP32)
        snprintf(because, sizeof because, "fp32 training");
    else
        snprintf(because, sizeof because, "%s's default for bfloat16", plan_for_name(p->framework));
    snprintf(buf, cap, "%s, %d bytes per parameter where the weights have %d (%s)", g == 4 ? "fp32" : "16-bit", g,
             elem, because);
    return 1;
}
