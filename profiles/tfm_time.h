/* tfm_time.h - shape-aware times of a transformer's layers on one
 * tensor-parallel rank (issue 15, item 4; docs/compute.md).
 *
 * Each layer of a model with a transformer member (embedding, L blocks,
 * head: models/tfm_model.h, models/tfm_rank.h) is priced kernel by kernel
 * with profiles/gemm.h: every GEMM from its per-rank shape (tensor
 * parallelism t splits n or k of each), the attention core as batched GEMMs
 * and memory-bound softmax and dropout or as one fused (flash) kernel, and
 * the norms, activations, dropouts, residual adds and bias gradients as
 * bytes over bandwidth; with Megatron-LM's fusions (Narayanan et al. 2021,
 * Sec. 4.2: bias + GeLU, bias + dropout + add, scale + mask + softmax).
 * These replace FLOPs / (peak x efficiency) for devices whose preset has a
 * "kernels" member; the tensor-parallel collectives and the context-parallel
 * key/value ring are added separately (planner/tensor.h).  With context
 * parallelism c every layer works on the rank's s/c tokens of each
 * sequence, and the attention core runs c ring steps.
 */
#ifndef CL_PROF_TFM_TIME_H
#define CL_PROF_TFM_TIME_H

#include "models/tfm_rank.h"
#include "models/transformer.h"
#include "profiles/cluster.h"
#include "profiles/profile.h"

typedef enum {
    PROF_ATTN_UNFUSED, /* scores and context as batched GEMMs, softmax and dropout
                          as memory-bound kernels (Megatron-LM 2021)          */
    PROF_ATTN_FUSED    /* one flash-attention kernel each way (Dao 2022, 2023) */
} prof_attn;

/* Seconds of one layer's passes for a microbatch. */
typedef struct prof_tfm_pass {
    double fwd_s;    /* forward                                                    */
    double bwd_in_s; /* input gradient, plus the recomputed forward (full) or
                        attention core (selective)                               */
    double bwd_w_s;  /* weight (and bias) gradients                              */
    int kernels;     /* kernels launched in the three passes together            */
} prof_tfm_pass;

/* 1 when t carries a kernel model (its "kernels" member). */
int prof_tfm_priced(const cluster_devtype *t);

/* Layer i (0 embedding, 1..L blocks, L + 1 head) of d on one of o->t ranks,
 * elem-byte activations, a microbatch of b sequences, on t (which
 * prof_tfm_priced).  d and o as tfm_rank_check accepts them. */
prof_tfm_pass prof_tfm_layer_s(const tfm_desc *d, int elem, const tfm_rank_opts *o,
                               prof_attn a, const cluster_devtype *t, int i, double b);

/* The attention core alone of one block on one rank (its fwd_s and
 * bwd_in_s; no recomputation), with context parallelism all c ring steps
 * together: what the key/value ring's transfers overlap with
 * (planner/tensor.h, cp_add_ring).  Arguments as prof_tfm_layer_s. */
prof_tfm_pass prof_tfm_core_s(const tfm_desc *d, int elem, const tfm_rank_opts *o, prof_attn a,
                              const cluster_devtype *t, double b);

/* Replace the times of pf (derived by prof_derive for the full or per-rank
 * model of d: L + 2 layers) at every batch size by prof_tfm_layer_s, and
 * say so in its note.  t must be prof_tfm_priced. */
void prof_tfm_times(prof *pf, const tfm_desc *d, int elem, const tfm_rank_opts *o, prof_attn a,
                    const cluster_devtype *t);

#endif
