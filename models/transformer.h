/* transformer.h - closed-form costs of a decoder-only transformer under
 * Megatron-style parallelism: parameters, GEMM FLOPs, activation memory,
 * tensor-parallel collectives and model-state memory (issue 15).
 *
 * Pure arithmetic on two plain structs, no I/O and no allocation.  The
 * formulas, their sources and what is not modelled are in docs/transformer.md;
 * each function's comment names the paper it follows.  models/tfm_rank.h
 * builds one tensor-parallel rank's layers from it for `cleave plan
 * --tensor` (planner/tensor.h); the model-state functions are not used by
 * the planner yet.
 *
 * Units: counts are elements or parameters, FLOPs count a multiply-add as 2,
 * bytes are bytes.  Everything is returned as double so that 1T-parameter
 * models and s^2 terms never overflow; every value below 2^53 is exact.
 */
#ifndef CL_TRANSFORMER_H
#define CL_TRANSFORMER_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum {
    TFM_POS_LEARNED, /* a learned s x h position table (GPT-2, GPT-3)          */
    TFM_POS_ROTARY   /* no position parameters (rotary as in LLaMA; ALiBi too) */
} tfm_pos;

typedef enum {
    TFM_NORM_LAYER, /* LayerNorm: scale and shift, 2h parameters */
    TFM_NORM_RMS    /* RMSNorm: scale only, h parameters         */
} tfm_norm;

/* One transformer: L identical pre-norm blocks (attention, then MLP), an
 * input embedding, a final norm and an output (logit) layer. */
typedef struct tfm_desc {
    int64_t layers;  /* L                                                    */
    int64_t hidden;  /* h, a multiple of heads                               */
    int64_t heads;   /* a: query heads                                      */
    int64_t groups;  /* g: key/value heads (GQA); g = a is plain multi-head,
                      * g = 1 multi-query; g divides a                       */
    int64_t ffn;     /* f: MLP inner size (GPT: 4h)                           */
    int gated;       /* 1: gated MLP (SwiGLU, three h x f matrices), 0: two  */
    int64_t seq;     /* s: sequence length                                   */
    int64_t vocab;   /* V: vocabulary (as padded by the framework)          */
    int tied;        /* 1: the logit layer reuses the embedding matrix       */
    tfm_pos pos;
    tfm_norm norm;
    int bias;        /* 1: every linear layer has a bias (GPT), 0: none (LLaMA) */
    int dropout;     /* 1: dropout after the softmax and after both residual
                      * branches (GPT, Korthikanti's assumption), 0: none    */
    int64_t positions; /* rows of the learned position table (GPT-2's
                      * n_positions) when it differs from s; 0: s rows     */
} tfm_desc;

/* The GPT family of Narayanan et al. 2021: f = 4h, g = a, ungated, tied,
 * learned positions, LayerNorm, biases, dropout. */
tfm_desc tfm_gpt(int64_t layers, int64_t hidden, int64_t heads, int64_t seq, int64_t vocab);

/* The LLaMA family (Touvron et al. 2023; Meta's config.json files): g
 * key/value heads, a gated (SwiGLU) MLP of width f, untied output layer,
 * rotary positions, RMSNorm, no biases, no dropout.  The same model that
 * `cleave import` builds from a llama config.json (models/hf_config.c). */
tfm_desc tfm_llama(int64_t layers, int64_t hidden, int64_t heads, int64_t groups, int64_t ffn, int64_t seq,
                   int64_t vocab);

typedef enum { TFM_RECOMP_NONE, TFM_RECOMP_SELECTIVE, TFM_RECOMP_FULL } tfm_recomp;
typedef enum { TFM_FP32, TFM_FP16, TFM_BF16 } tfm_prec;

/* How a block is laid out on its t tensor-parallel ranks (pipeline and
 * data parallelism are the plan's: they do not change a block's formulas). */
typedef struct tfm_layout {
    int t;             /* tensor-parallel degree (Megatron column/row split) */
    int sp;            /* 1: sequence parallelism in the non-tensor-parallel
                        * regions (Korthikanti et al. 2022), needs t > 1 to matter */
    int64_t b;         /* microbatch size (sequences)                         */
    tfm_recomp recomp; /* activation recomputation                            */
    tfm_prec prec;     /* fp32, or 16-bit weights/activations with fp32 master */
    int fused_attn;    /* 1: one fused (flash) attention kernel: the a s^2 b
                        * score tensors are never stored, only the softmax
                        * statistics (Dao 2022, 2023); 0: unfused             */
    int fp8;           /* 1: the blocks' linear layers run FP8 GEMMs (NVIDIA
                        * Transformer Engine), which keep each one's input for
                        * the weight gradient as the 1-byte FP8 copy they
                        * multiplied (docs/compute.md, "FP8")              */
} tfm_layout;

/* Check that d (and l, when not NULL) describe something these formulas
 * cover: positive sizes, a divisible by g, h by a, a, g and f by t, s by t
 * with sequence parallelism, known enums.  CL_OK, or CL_EINPUT
 * with one line in e naming the field ("transformer: heads 96 is not a
 * multiple of t 5 (hint: ...)").  The other functions assume this passed. */
int tfm_check(const tfm_desc *d, const tfm_layout *l, cl_err *e);

/* ------------------------------------------------------------ parameters */

/* Trainable parameters of one block: Q (h x h), K and V (h x h g/a each),
 * the output projection (h x h), the MLP (2 or 3 matrices h x f), their
 * biases when d->bias, and two norms.  GPT: 12h^2 + 13h (Narayanan Eq. 2). */
double tfm_block_params(const tfm_desc *d);

/* The same block's parameters held by one of t tensor-parallel ranks: the
 * column- and row-parallel weights and the column-parallel biases are split
 * t ways; the row-parallel biases (projection, second MLP layer) and the
 * norms are replicated on every rank, as in Megatron-LM. */
double tfm_block_params_rank(const tfm_desc *d, int t);

/* Input embedding V x h plus, with learned positions, s x h (or
 * positions x h when d->positions is set). */
double tfm_embed_params(const tfm_desc *d);

/* Final norm plus, when not tied, the logit matrix V x h (no bias). */
double tfm_head_params(const tfm_desc *d);

/* All parameters: L blocks + embedding + head.  For tfm_gpt this is
 * Narayanan's Eq. 2, 12 L h^2 (1 + 13/(12h) + (V + s)/(12 L h)), plus the
 * final LayerNorm's 2h that Eq. 2 leaves out. */
double tfm_params(const tfm_desc *d);

/* ------------------------------------------------------------------ FLOPs */

/* Forward FLOPs of one block for a microbatch of b sequences on one of t
 * tensor-parallel ranks (every GEMM splits evenly over t).  Attention scores
 * and the attention over values are counted for the full s x s matrix (no
 * saving for the causal mask), as Narayanan et al. count them. */
typedef struct tfm_block_flops {
    double qkv;    /* 2 b s h (h + 2 h g/a)                          */
    double score;  /* Q K^T: 2 b s^2 h                                */
    double attn_v; /* softmax x V: 2 b s^2 h                          */
    double proj;   /* output projection: 2 b s h^2                    */
    double mlp;    /* 2 b s h f x (3 if gated else 2)                 */
    double total;  /* sum of the above; GPT: 24 b s h^2 + 4 b s^2 h   */
} tfm_block_flops;
tfm_block_flops tfm_block_fwd_flops(const tfm_desc *d, int64_t b, int t);

/* Forward FLOPs of the logit layer: 2 b s h V (divided by t: Megatron splits
 * it over the vocabulary).  The embedding lookup does no FLOPs. */
double tfm_logit_fwd_flops(const tfm_desc *d, int64_t b, int t);

/* FLOPs of one block's forward + backward for a microbatch on one rank: the
 * backward is twice the forward (input and weight gradients); recomputation
 * adds a forward (full) or the attention core, score + attn_v (selective). */
double tfm_block_train_flops(const tfm_desc *d, int64_t b, int t, tfm_recomp r);

/* FLOPs of one training iteration of the whole model over a global batch of
 * B sequences, summed over all devices: L blocks as above plus the logit
 * layer's forward and backward (the logit layer is never recomputed).
 * GPT, full recomputation: Narayanan Eq. 3, 96 B s L h^2 (1 + s/(6h) +
 * V/(16 L h)); without: 72 B s L h^2 (1 + s/(6h) + V/(12 L h)) (the model
 * FLOPs of Korthikanti et al.). */
double tfm_iter_flops(const tfm_desc *d, int64_t B, tfm_recomp r);

/* ----------------------------------------------------------- activations */

/* Bytes one block keeps from its forward for its backward, per microbatch,
 * on one tensor-parallel rank; Korthikanti et al. 2022 Sec. 4, generalised
 * to g, f and gated MLPs.  Activations are 2 bytes (fp16/bf16; fp32: 4),
 * dropout masks 1 byte, no fused attention kernel (the a s^2 b softmax
 * terms are stored).  GPT without recomputation:
 *   t = 1:        s b h (34 + 5 a s/h)
 *   t, no SP:     s b h (10 + 24/t + 5 a s/(h t))
 *   t, SP:        s b h (34 + 5 a s/h) / t
 * selective recomputation drops the 5 a s/h term; full recomputation keeps
 * only the block input, 2 s b h (/ t with SP). */
double tfm_block_act_bytes(const tfm_desc *d, const tfm_layout *l);

/* -------------------------------------------------------- tensor parallel */

/* The collectives of one block over its t tensor-parallel ranks, per
 * microbatch.  Without SP: two all-reduces of s b h elements in the forward
 * (after the attention projection and after the MLP) and two in the backward
 * (the input gradients of QKV and of the first MLP layer).  With SP each
 * all-reduce becomes a reduce-scatter + all-gather pair: forward two
 * all-gathers (before QKV, before the MLP) and two reduce-scatters, backward
 * the same.  Full recomputation repeats the forward's collectives in the
 * backward.  t = 1: no collectives. */
typedef struct tfm_tp_comm {
    int fwd_allreduce, fwd_allgather, fwd_reducescatter;
    int bwd_allreduce, bwd_allgather, bwd_reducescatter; /* incl. recompute */
    double msg_bytes;      /* the full (gathered) tensor of each: e s b h  */
    double fwd_send_bytes; /* bytes each rank sends in the forward with ring
                            * algorithms: all-reduce 2 (t-1)/t x msg,
                            * all-gather and reduce-scatter (t-1)/t x msg  */
    double bwd_send_bytes; /* the same for the backward                   */
} tfm_tp_comm;
tfm_tp_comm tfm_block_tp_comm(const tfm_desc *d, const tfm_layout *l);

/* ----------------------------------------------------------- model state */

/* Model state (weights, gradients, master weights, moments) is the plan's
 * business, as each framework keeps it: core/plan.h, plan_state_factors. */

/* Bytes of one activation element: 4 for fp32, 2 otherwise. */
int tfm_act_elem(tfm_prec p);

#endif
