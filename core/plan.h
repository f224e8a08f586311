/* plan.h - a partition plan: stages, their devices, the schedule, predictions.
 *
 * The plan is the hand-off between the planner, the simulator and the
 * executor, and is self-contained: it embeds the model and the cluster it was
 * made for, so `cleave sim plan.json` and `cleave train --plan plan.json`
 * need nothing else (docs/formats.md, "Plan").
 *
 * Stages are in pipeline order.  A stage holds a set of layers (for a chain a
 * contiguous range first..last; for a DAG a downset difference, listed in
 * layer order) and runs on one or more devices.  With r > 1 devices the stage
 * is replicated: microbatch i of the iteration runs on replica (i mod r) and
 * the replicas all-reduce their gradients once per iteration (ring).
 * Interleaved 1F1B uses chunks v > 1: the plan then has p*v stages and stage
 * k runs on the devices of stage (k mod p).
 */
#ifndef CL_PLAN_H
#define CL_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "models/model.h"
#include "profiles/cluster.h"
#include "base/status.h"

typedef enum sched_kind {
    SCHED_SEQUENTIAL,   /* one device, no pipelining                          */
    SCHED_GPIPE,        /* all forwards, then all backwards, flush            */
    SCHED_1F1B,         /* PipeDream-Flush: warm-up, one-forward-one-backward */
    SCHED_INTERLEAVED,  /* 1F1B over v model chunks per device                */
    SCHED_ZBH1,         /* zero-bubble H1: backward split into B and W        */
    SCHED_PIPEDREAM,    /* asynchronous 1F1B with weight stashing, no flush   */
    SCHED_FBP,          /* the method: 1F1B order, per-stage update right after
                           each backward, no flush, one weight version        */
    SCHED_COUNT
} sched_kind;

/* "sequential", "gpipe", "1f1b", "interleaved", "zb-h1", "pipedream", "fbp" */
const char *sched_kind_name(sched_kind k);
int sched_kind_from_name(const char *name); /* -1 if unknown */
/* Asynchronous kinds never flush; their iteration time is a steady state. */
int sched_is_async(sched_kind k);

typedef enum plan_optim { OPTIM_SGD, OPTIM_MOMENTUM, OPTIM_ADAM, OPTIM_COUNT } plan_optim;
const char *plan_optim_name(plan_optim o);
int plan_optim_from_name(const char *name);
/* Optimiser state in units of the parameter bytes: 0 (SGD), 1 (momentum), 2 (Adam). */
int plan_optim_state_mult(plan_optim o);

/* The precision a model trains in, which decides the bytes of its model
 * state (docs/planner.md, "Model state").  PREC_AUTO (0, what a zeroed plan
 * holds) follows the model's element size: 2 bytes (float16, bfloat16)
 * trains in mixed precision, 4 bytes in fp32. */
/* PREC_FP8 is mixed precision whose transformer-block GEMMs run in FP8
 * (NVIDIA Transformer Engine): the model state of mixed precision, the
 * GEMMs priced at the device's FP8 peak (docs/compute.md, "FP8"). */
typedef enum plan_prec { PREC_AUTO, PREC_FP32, PREC_MIXED, PREC_FP8, PREC_COUNT } plan_prec;
const char *plan_prec_name(plan_prec p);  /* "auto", "fp32", "mixed", "fp8" */
int plan_prec_from_name(const char *name); /* -1 if unknown */
/* p itself, or for PREC_AUTO the model's default: PREC_MIXED when an element
 * is elem_bytes = 2, else PREC_FP32. */
plan_prec plan_prec_resolve(plan_prec p, int elem_bytes);

/* ZeRO stages modelled: 0 replicated, 1 optimiser state (fp32 master weights
 * and moments) sharded over a stage's replicas, 2 the gradients too. */
#define PLAN_ZERO_MAX 2

/* Model state of a stage in bytes per byte of its param_bytes (parameters
 * counted in the model's element size elem_bytes), as the frameworks keep
 * it, with keep_bytes the element size (2 or 4) of the gradients kept
 * between microbatches (plan_grad_keep_bytes):
 *   fp32:   weights 4, gradients 4, moments 4 per moment (momentum 1, Adam 2)
 *   mixed:  16-bit weights 2, gradients keep_bytes, fp32 master weights 4,
 *           and where the kept gradients are 16-bit the optimiser's own fp32
 *           copy of them 4, moments as above.
 * With Adam that is Megatron-LM's table of bytes per parameter (README,
 * "Distributed Optimizer"): 18 for bf16 parameters with fp32 gradients,
 * 20 for fp16 parameters with fp16 gradients, 16 for fp32; with its
 * distributed optimizer (ZeRO 1 here) 6 + 12/d, 4 + 16/d and 8 + 8/d.
 * DeepSpeed's estimate for ZeRO 1 and 2 with fp16 (stage_1_and_2.py,
 * estimate_zero2_model_states_mem_needs) is the same 4 + 16/d.  (The ZeRO
 * paper's 16 = 2 + 2 + 12 leaves the fp32 gradient copy out.)
 * ZeRO 1 divides the master weights, their gradient copy and the moments
 * by the stage's replicas r, ZeRO 2 the kept gradients too.  rep is the part
 * every replica keeps whole, shard the part divided by r; version the bytes
 * of one stashed weight version (PipeDream), the weights.  For an fp32
 * model in fp32 without ZeRO rep = 2 + plan_optim_state_mult exactly and
 * shard = 0: the memory of plans made before precision and ZeRO existed. */
typedef struct plan_state_f {
    double weights, grads, master, master_grads, moments; /* per param byte, unsharded */
    double optim;                           /* master + master_grads + moments */
    double rep, shard, version;
    int grads_sharded, opt_sharded;         /* divided by r               */
} plan_state_f;
plan_state_f plan_state_factors(int elem_bytes, plan_prec prec, plan_optim o, int zero, int keep_bytes);
/* Bytes one optimiser step moves through device memory per byte of
 * param_bytes (unsharded): it reads the gradients (and writes and reads
 * their fp32 copy where they are 16-bit), reads and writes the moments and
 * the master weights, and writes the weights; without master weights
 * (fp32) it reads the weights too.  Mixed precision with Adam and fp32
 * gradients: 15 (30 bytes per 2-byte parameter); fp32 SGD: 3.  Clearing
 * the gradient buffer, the gradient norm for clipping and loss-scale checks
 * are left out (docs/planner.md, "The optimiser step"). */
double plan_update_traffic(const plan_state_f *f);
/* Model state of one device of a stage of param_bytes on r replicas:
 * param_bytes x (rep + shard / r), the shard term left out when it is 0
 * (so that plans without ZeRO keep their bits). */
static inline double plan_state_bytes(const plan_state_f *f, double param_bytes, int r)
{
    double b = param_bytes * f->rep;
    if (f->shard > 0) b += param_bytes * f->shard / r;
    return b;
}
/* The training framework a plan was searched for (cleave plan --for): the
 * planner then considers only what that framework runs, and the plan's
 * figure is that run's (docs/planner.md, "Plans a framework runs").
 * Written as "for" in the plan file. */
typedef enum plan_for { PLAN_FOR_ANY, PLAN_FOR_TORCH, PLAN_FOR_DEEPSPEED, PLAN_FOR_MEGATRON, PLAN_FOR_COUNT } plan_for;
/* "torch", "deepspeed", "megatron"; "" for PLAN_FOR_ANY */
const char *plan_for_name(plan_for f);
/* a framework's name to its plan_for; -1 if unknown ("" included) */
int plan_for_from_name(const char *name);

/* The data-parallel gradient reduction (core/plan_grad.c; docs/simulator.md,
 * "Gradient reduction").  Frameworks reduce gradients in an element size of
 * their own, not always the model's: Megatron-LM (validate_args in
 * megatron/training/arguments.py) reduces the gradients of a bf16 model in
 * fp32 unless --grad-reduce-in-bf16 is given, and keeps fp16 models' in
 * fp16; DeepSpeed's bf16 optimizer all-reduces its fp32 gradient buffers
 * (_bf16_reduce_grads in deepspeed/runtime/pipe/engine.py).
 *
 * The element size in bytes (2 or 4) a plan of a model of element type dt
 * under resolved precision prec, searched for framework fw, reduces its
 * gradients in by default: 4 for fp32; 4 for a bfloat16 model under
 * Megatron-LM or DeepSpeed; else the model's element size.  (DeepSpeed
 * casts the fp32 gradients it reduces to its communication_data_type,
 * 16-bit for bf16 until its pull request 2970 of March 2023 made fp32 the
 * default: runs of 2022 set 2 with grad_reduce.) */
#define PLAN_GRAD_REDUCE_MAX 4
int plan_grad_reduce_default(model_dtype dt, plan_prec prec, plan_for fw);
/* 1 when ZeRO stage `zero` under schedule kind `kind` splits each
 * all-reduce into a reduce-scatter of the gradients, the shard's update and
 * an all-gather of the updated weights (the flushing kinds; the
 * asynchronous ones and explicit schedules, kind -1, keep one ring). */
int plan_zero_splits(int zero, int kind);
/* Bytes each half of a replicated stage's all-reduce moves, per byte of its
 * param_bytes (parameters in the model's element size elem_bytes):
 *   reduce  the reduce-scatter half: gradients at reduce_bytes per element;
 *   gather  the all-gather half: the gradients again, or, when ZeRO splits
 *           the all-reduce (zero_split), the updated weights at the model's
 *           element size; DeepSpeed's bf16 optimizer (fw deepspeed, a
 *           bfloat16 model: its pipeline engine's only way with bf16)
 *           all-reduces the whole gradient before its own ZeRO-1
 *           all-gather of the weights, so its gather half carries both.
 * Ratios of small integers: 1 exactly when reduce_bytes is the model's
 * element size and no ZeRO split, the all-reduce of plans made before
 * this existed. */
typedef struct plan_ar_f {
    double reduce, gather;
} plan_ar_f;
plan_ar_f plan_ar_factors(model_dtype dt, int reduce_bytes, int zero_split, plan_for fw);

typedef struct plan_stage {
    int first, last;          /* layer range for a chain (inclusive)          */
    int n_layers;
    int *layers;              /* owned; the stage's layers in model order     */
    int n_replicas;
    int *devices;             /* owned; cluster device indices, one per replica */

    /* per microbatch, on one replica, in seconds */
    double fwd_s;             /* forward                                      */
    double bwd_in_s;          /* input gradient (B)                           */
    double bwd_w_s;           /* weight gradient (W)                          */
    double update_s;          /* one optimiser step of the stage's parameters
                                 (per UPDATE op; 0: not modelled, as plans
                                 from files have it)                          */
    /* bytes per microbatch */
    double act_out_bytes;     /* activations sent to the next stage (0 for the last);
                                 the gradient sent back has the same size     */
    double stash_bytes;       /* activations kept until the backward pass     */
    double param_bytes;       /* this stage's parameters (all-reduced if r > 1) */

    /* predictions, filled by the planner */
    double compute_s;         /* forward + backward over the whole batch      */
    double comm_s;            /* boundary transfers + all-reduce per iteration */
    double mem_bytes;         /* predicted peak per device                    */
} plan_stage;

typedef struct plan_pred {
    double iteration_s;       /* time per training iteration (one batch)     */
    double throughput;        /* samples per second                          */
    double bubble;            /* idle fraction of device time, 0..1          */
    double speedup;           /* over the same model on one device           */
    int simulated;            /* 1: the simulator's figures; 0: the closed
                                 form of planner/predict.h (not in files)    */
} plan_pred;

typedef struct plan {
    sched_kind schedule;
    int chunks;               /* v: model chunks per device (interleaved), else 1 */
    plan_optim optimizer;
    plan_prec precision;      /* PREC_AUTO: from the model's element size     */
    int zero;                 /* ZeRO stage 0..PLAN_ZERO_MAX over each stage's
                                 replicas                                     */
    int batch;                /* samples per iteration = microbatch x n_micro */
    int microbatch;           /* samples per microbatch                       */
    int n_micro;              /* microbatches per iteration                   */
    int comm_off;             /* made with communication left out (--comm off):
                                 its costs and predictions have no transfers, and
                                 the simulator leaves them out too by default     */
    int n_stages;
    plan_stage *stages;       /* owned */
    plan_pred pred;
    plan_for framework;       /* searched for this framework (PLAN_FOR_ANY: none) */
    int grad_reduce;          /* bytes per gradient element of the data-parallel
                                 reduction, 2 or 4; 0: plan_grad_reduce_default
                                 ("grad_reduce_bytes" in the file)            */
    /* tensor parallelism (core/plan_tp.c, docs/transformer.md): with
     * tensor t > 1 every device of `cluster` stands for a group of t GPUs
     * and `model` is one rank's share; 0 or 1: none.  seq_par: sequence
     * parallelism; recompute: a tfm_recomp (0 none); context: the
     * context-parallel degree c (0 or 1: none), each stage then holding
     * d x c replicas that each run s/c tokens of every sequence, so a
     * "sample" of the plan is a c-th of a sequence (docs/transformer.md,
     * "Context parallelism") */
    int tensor, seq_par, recompute, context;
    /* when the plan leaves devices of its cluster idle, why, one line ("":
     * not said; the planner always says); "devices_used" in the file */
    char idle_why[320];
    model model;              /* owned: the model the plan partitions         */
    cluster cluster;          /* owned: the cluster it runs on                */
} plan;

int plan_load(plan *p, const char *path, cl_err *e);
struct cJSON;
int plan_from_json(plan *p, const struct cJSON *root, const char *file, cl_err *e);
struct cJSON *plan_to_json(const plan *p);          /* caller owns */
int plan_save(const plan *p, const char *path, cl_err *e);
void plan_free(plan *p);

/* Structural checks shared by the loader and the planner: every layer in
 * exactly one stage, layers respect the DAG order across stages, no empty
 * stage, device indices exist, batch = microbatch x n_micro.  `file` is named
 * in messages (the plan file, or "plan" for one built in memory). */
int plan_validate(const plan *p, const char *file, cl_err *e);

/* The plan file's "tensor", "sequence_parallel", "recompute" and
 * "context" members (core/plan_tp.c): absent, t = 1, no recomputation, no
 * context parallelism; written only when t > 1, recomputation is on or
 * context > 1 ("context" only then), so other plans keep their bytes. */
struct jx;
int plan_tp_read(struct jx *j, const struct cJSON *root, plan *p);
void plan_tp_write(struct cJSON *root, const plan *p);
/* CL_EINPUT naming file and the key when p asks for what the executor
 * (`what`: "cleave train --plan", ...) does not carry out: context
 * parallelism; CL_OK otherwise.  Without the check a run would silently
 * train, or a prediction price, something else than the plan describes. */
int plan_exec_refuse(const plan *p, const char *file, const char *what, cl_err *e);
/* The tensor-parallel degree (1 when none). */
static inline int plan_tensor(const plan *p) { return p->tensor > 1 ? p->tensor : 1; }
/* The context-parallel degree (1 when none). */
static inline int plan_context(const plan *p) { return p->context > 1 ? p->context : 1; }
/* 1 when the plan is a per-rank question (tensor, recomputation or
 * context parallelism): its devices are groups of GPUs. */
static inline int plan_per_rank(const plan *p)
{
    return plan_tensor(p) > 1 || p->recompute || plan_context(p) > 1;
}
/* With context parallelism, one line saying that a sample of the plan is
 * a c-th of a sequence, with the batch and `throughput` (the plan's
 * samples/s) in sequences; "" otherwise. */
void plan_cp_str(const plan *p, double throughput, char *buf, size_t cap);

/* "t x p x d = 8 x 16 x 8 = 1024 GPUs" (d "r0/r1/.." when stages differ
 * in replicas; "t x cp x p x d = 8 x 2 x 9 x 16 = 2304 GPUs" with context
 * parallelism, d the replicas / cp) into buf. */
void plan_layout_str(const plan *p, char *buf, size_t cap);

/* Number of distinct devices the plan uses (p x replicas, chunks shared). */
int plan_device_count(const plan *p);
/* The first stage whose replica count is not stages[0]'s; 0 when every
 * stage has the same (one data-parallel degree, whole pipelines replicated,
 * as the frameworks run them). */
int plan_uneven_stage(const plan *p);

/* The shape of stage st's gradient all-reduce (sim/ring.c, docs/simulator.md):
 * hierarchical, *k replicas on each of *n nodes, when its replicas sit
 * evenly k >= 2 to a node on n >= 2 nodes; else one flat ring, *k = r,
 * *n = 1.  Devices must be in the cluster. */
void plan_ring_shape(const plan *p, int st, int *k, int *n);

/* The gradient reduction's element size: `set` when above 0 (a plan's
 * grad_reduce, a request's --grad-reduce-bytes), else
 * plan_grad_reduce_default of dt, precision prec (PREC_AUTO resolved from
 * dt) and fw.  plan_grad_reduce_bytes: plan p's. */
int plan_grad_reduce_resolve(int set, model_dtype dt, plan_prec prec, plan_for fw);
int plan_grad_reduce_bytes(const plan *p);
/* The element size (2 or 4) of the gradients a training keeps and
 * accumulates between microbatches, for a model of element type dt under
 * precision prec (PREC_AUTO resolved from dt), framework fw and a gradient
 * reduction of reduce_bytes (resolved): 4 in fp32; under Megatron-LM the
 * reduction's (its gradient buffer is what it reduces: fp32 for bf16 by
 * validate_args, the parameters' 16 bits for fp16 unless
 * --accumulate-allreduce-grads-in-fp32); under DeepSpeed 4 for bf16 (its
 * BF16 optimizer's fp32 gradient buffers) and 2 for fp16 (its fp16 and ZeRO
 * optimizers keep the fp16 gradients); otherwise 4 (fp32 gradients beside
 * 16-bit weights, the most any of these keeps).  plan_grad_keep: plan p's. */
int plan_grad_keep_bytes(model_dtype dt, plan_prec prec, plan_for fw, int reduce_bytes);
int plan_grad_keep(const plan *p);
/* Bytes per parameter a separate weight-gradient accumulation kernel moves
 * (docs/compute.md, "Gradient accumulation") in a training of a model of
 * element type dt under precision prec and framework fw, reducing its
 * gradients in reduce_set bytes (0: the default): the microbatch's gradient
 * read in the weights' element size (4 in fp32, else 2) and the
 * accumulator, of plan_grad_keep_bytes, read and written: 12 in fp32, 10 or
 * 6 for 16-bit weights with fp32 or 16-bit accumulators. */
double plan_grad_acc_bytes(model_dtype dt, plan_prec prec, plan_for fw, int reduce_set);
/* Bytes the reduce-scatter and all-gather halves of stage st's all-reduce
 * move under schedule kind `kind` (a sched_kind, -1 for an explicit
 * schedule): param_bytes times plan_ar_factors. */
void plan_ar_bytes(const plan *p, int st, int kind, double *reduce, double *gather);

/* One line saying how plan p reduces its gradients when that is not in
 * the model's element size ("fp32, 4 bytes per parameter, twice the
 * model's 2 (megatron's default for bf16)") into buf; returns 0 and writes
 * "" when they travel in the model's element size, as every plan did
 * before the reduction had its own. */
int plan_grad_reduce_describe(const plan *p, char *buf, size_t cap);

/* One line saying how plan p keeps its model state ("mixed precision
 * (...), adam: 18 bytes per parameter") into buf; returns 0 and writes ""
 * when there is nothing new to say: fp32 state of a 4-byte model without
 * ZeRO, what every plan meant before precision and ZeRO were modelled. */
int plan_state_describe(const plan *p, char *buf, size_t cap);

#endif
