/* tfm_rank.h - one tensor-parallel rank's share of a transformer model
 * (issue 15): the question "t GPUs run this model with tensor parallelism"
 * restated as "one device runs this smaller model", which the pipeline x
 * data-parallel planner and the simulator already answer.
 *
 * The per-rank model has the same layers (embedding, layer.i, head) with
 * the costs of one of t Megatron-LM ranks: GEMM FLOPs / t, parameters per
 * rank (replicated norms and row-parallel biases whole), the activations
 * Korthikanti et al. 2022 count with t, sequence parallelism and the
 * recomputation mode, and the tensor-parallel collectives each layer runs,
 * which planner/tensor.c prices on the node's link and adds to the layer's
 * times.  The formulas and what they leave out: docs/transformer.md,
 * "Tensor parallelism in plan and sim".
 */
#ifndef CL_TFM_RANK_H
#define CL_TFM_RANK_H

#include "base/status.h"
#include "models/model.h"
#include "models/transformer.h"

typedef struct tfm_rank_opts {
    int t;             /* tensor-parallel degree, >= 1                     */
    int sp;            /* sequence parallelism (Korthikanti Sec. 4.2.2)    */
    tfm_recomp recomp; /* activation recomputation                          */
    int fused_attn;    /* 1: a fused attention kernel (tfm_layout.fused_attn) */
    int fp8;           /* 1: the blocks' linear layers run FP8 GEMMs (NVIDIA
                        * Transformer Engine) and keep their inputs in FP8
                        * (tfm_layout.fp8; docs/compute.md, "FP8")          */
    int c;             /* context-parallel degree (0 or 1: none): each rank
                          holds s/c tokens of every sequence and exchanges
                          key/value blocks in a ring (docs/transformer.md,
                          "Context parallelism")                           */
    double wgrad_acc;  /* bytes per parameter of a separate kernel that adds
                          each microbatch's weight gradient into the
                          accumulated one (Megatron-LM's main_grad hook,
                          PyTorch's .grad accumulation): the gradient's
                          bytes read plus the accumulator's read and
                          written; 0: none (accumulated inside the weight-
                          gradient GEMM, Transformer Engine's fusion)     */
} tfm_rank_opts;

/* The context-parallel degree of o, 1 when none. */
static inline int tfm_rank_cp(const tfm_rank_opts *o) { return o->c > 1 ? o->c : 1; }

/* Whether o re-prices a transformer's layers per rank (tfm_rank_model):
 * anything but one whole GPU's unfused, unrecomputed 16-bit kernels with
 * the accumulation inside the weight-gradient GEMM. */
static inline int tfm_rank_reprices(const tfm_rank_opts *o)
{
    return o->t > 1 || o->sp || o->recomp || o->fused_attn || o->fp8 || tfm_rank_cp(o) > 1 ||
           o->wgrad_acc > 0;
}

/* The key/value ring of context parallelism in one block, per sample (one
 * sequence) on one rank: `steps` (c - 1) point-to-point steps each way;
 * each forward step sends the rank's key and value block (2 (s/c) h g/a / t
 * elements), each backward step that block and its gradient (twice the
 * bytes).  All zero without context parallelism. */
typedef struct tfm_rank_ring {
    int steps;
    double fwd_bytes, bwd_bytes;
} tfm_rank_ring;

tfm_rank_ring tfm_rank_kv_ring(const tfm_desc *d, model_dtype dt, const tfm_rank_opts *o);

/* The collectives of one layer per sample (one sequence), on one rank:
 * counts of ring all-reduces, all-gathers and reduce-scatters of msg bytes
 * (the whole tensor, gathered), plus `small` all-reduces of small_bytes
 * (the vocabulary-parallel loss's max, sum and target logit). */
typedef struct tfm_rank_coll {
    int ar, ag, rs;
    double msg;
    int small;
    double small_bytes;
} tfm_rank_coll;

typedef struct tfm_rank_comm {
    tfm_rank_coll fwd, bwd; /* bwd includes a recomputed forward's */
} tfm_rank_comm;

/* Check o against m: m carries its transformer (m->has_tfm), t divides
 * heads, key/value groups and the MLP width, and with sp the sequence;
 * with context parallelism c, 2c divides the sequence (load-balanced
 * causal chunks) and with sp t divides the rank's s/c tokens.
 * CL_EINPUT naming `file` with a hint. */
int tfm_rank_check(const model *m, const tfm_rank_opts *o, const char *file, cl_err *e);

/* Build the per-rank model of m (checked by tfm_rank_check) into *out:
 * same name, layer names and input; no transformer member (its layers no
 * longer hold the whole model's parameters).  model_free releases it. */
int tfm_rank_model(model *out, const model *m, const tfm_rank_opts *o, const char *file, cl_err *e);

/* The collectives of layer i (0 embedding, 1..L blocks, L + 1 head). */
tfm_rank_comm tfm_rank_layer_comm(const tfm_desc *d, model_dtype dt, const tfm_rank_opts *o, int i);

/* Seconds of the collectives c on t ranks for a microbatch of b samples,
 * ring algorithms on a link of bw bytes/s and lat s per step: an
 * all-reduce of M bytes is 2 (t - 1) steps of M / t, an all-gather or a
 * reduce-scatter t - 1 steps. */
double tfm_rank_coll_s(const tfm_rank_coll *c, int t, double b, double bw, double lat);

/* "none", "selective", "full" and back (-1: unknown). */
const char *tfm_recomp_name(tfm_recomp r);
int tfm_recomp_from_name(const char *s);

#endif
