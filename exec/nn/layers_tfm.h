/* layers_tfm.h - the vision transformer's layers, on raw float32 arrays, in
 * the conventions of layers.h (outputs first, shapes in comments,
 * x_backward_input overwrites din, x_backward_weight adds into dw).
 *
 * Tokens are (B, T, D) row-major: T tokens of width D per sample.  The
 * second half of the file is the layer kinds the net runs (exec_tfm_*):
 * patch embedding, position embedding, layer norm, GELU, mean pooling and
 * two pre-norm residual blocks (attention, MLP).  The residual add is part
 * of the blocks because the executor runs chains (docs/executor.md).
 */
#ifndef CL_EXEC_LAYERS_TFM_H
#define CL_EXEC_LAYERS_TFM_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

#define EXEC_LN_EPS 1e-5 /* PyTorch's LayerNorm default */

/* ------------------------------------------------------------------------ */
/* layer norm over the last dimension, R = rows (B T)                        */

/* out, xhat (R,D); rstd (R) = 1 / sqrt(biased variance + eps) */
void exec_layernorm_forward(float *out, float *xhat, float *rstd, const float *in,
                            const float *gamma, const float *beta, int64_t R, int D);
/* din (R,D) from dout, xhat, rstd (din may not alias dout) */
void exec_layernorm_backward_input(float *din, const float *dout, const float *xhat,
                                   const float *rstd, const float *gamma, int64_t R, int D);
/* dgamma (D) += sum dout xhat; dbeta (D) += sum dout */
void exec_layernorm_backward_weight(float *dgamma, float *dbeta, const float *dout,
                                    const float *xhat, int64_t R, int D);

/* ------------------------------------------------------------------------ */
/* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))          */

void exec_gelu_forward(float *out, const float *in, int64_t n);
/* din = dout gelu'(in); din may alias dout */
void exec_gelu_backward_input(float *din, const float *dout, const float *in, int64_t n);

/* ------------------------------------------------------------------------ */
/* multi-head self-attention core: qkv (B,T,3D) holds q | k | v per token,
 * head h uses columns h D/H .. (h+1) D/H - 1 of each; scale 1/sqrt(D/H)     */

/* ctx (B,T,D); att (B,H,T,T) the softmax probabilities, kept for backward */
void exec_mhsa_forward(float *ctx, float *att, const float *qkv, int B, int T, int D, int H);
/* dqkv (B,T,3D) from dctx (B,T,D); tmp scratch of T T floats */
void exec_mhsa_backward(float *dqkv, const float *dctx, const float *att, const float *qkv,
                        float *tmp, int B, int T, int D, int H);

/* ------------------------------------------------------------------------ */
/* patches, position embedding, mean pooling                                 */

/* patches (B, T, C p p) from in (B,C,Hh,Ww), T = (Hh/p)(Ww/p) in row order;
 * each patch row is channel-major (c, i, j) like a conv2d weight */
void exec_patchify(float *patches, const float *in, int B, int C, int Hh, int Ww, int p);
/* din (B,C,Hh,Ww) from dpatches: the inverse permutation */
void exec_unpatchify(float *din, const float *dpatches, int B, int C, int Hh, int Ww, int p);
/* out (B,N) = in + pos (N) per sample; dpos (N) += sum over the batch of dout */
void exec_posembed_forward(float *out, const float *in, const float *pos, int B, int N);
void exec_posembed_backward_weight(float *dpos, const float *dout, int B, int N);
/* out (B,D) = mean over T of in (B,T,D); din (B,T,D) = dout / T */
void exec_meanpool_forward(float *out, const float *in, int B, int T, int D);
void exec_meanpool_backward_input(float *din, const float *dout, int B, int T, int D);

/* ------------------------------------------------------------------------ */
/* layer kinds the net runs: one parameter array each, laid out as below    */

typedef enum exec_tfm_kind {
    EXEC_TFM_PATCH,     /* w (D, C p p), b (D); in (C,Hh,Ww), out (T,D)    */
    EXEC_TFM_POS,       /* pos (T D)                                       */
    EXEC_TFM_LAYERNORM, /* gamma (D), beta (D)                             */
    EXEC_TFM_GELU,      /* none                                            */
    EXEC_TFM_MEANPOOL,  /* none; out (D)                                   */
    EXEC_TFM_ATTN,      /* out = in + Wo mhsa(Wqkv ln(in) + bqkv) + bo:
                         * gamma, beta (D), Wqkv (3D, D), bqkv (3D), Wo (D, D), bo (D) */
    EXEC_TFM_MLP        /* out = in + W2 gelu(W1 ln(in) + b1) + b2:
                         * gamma, beta (D), W1 (F, D), b1 (F), W2 (D, F), b2 (D) */
} exec_tfm_kind;

/* Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): an ATTN or MLP
 * layer split over `size` workers, this one `rank`.  Worker r holds heads
 * [r H/size, (r+1) H/size) of ATTN (their rows of Wqkv and bqkv: the
 * column-parallel product, and their columns of Wo: the row-parallel one),
 * or hidden units [r F/size, (r+1) F/size) of MLP (rows of W1 and b1,
 * columns of W2).  Layer norm, bo and b2 are replicated; rank 0 alone adds
 * bo (b2) into its partial product, so the sum counts it once.
 * allreduce sums buf (n floats) over the workers in place, the same bits on
 * every worker; each split layer calls it once in its forward (after the
 * row-parallel product) and once in its input-gradient pass (dLN(x), before
 * the layer norm's backward), every worker the same calls in the same
 * order (with sequence parallelism it sums the layer norm's gradient in the
 * weight-gradient pass instead, and the collectives below do the rest). */
typedef struct exec_tp_comm {
    int rank, size;
    void (*allreduce)(void *ctx, int rank, float *buf, int64_t n);
    /* Sequence parallelism (Korthikanti et al. 2022; exec_tfm.seq): a
     * buffer is `blocks` samples; the sequence of each is cut into size
     * chunks of `chunk` floats, chunk q belonging to rank q.
     * reduce_scatter: src (blocks, size chunk), every rank its own; dst
     * (blocks, chunk) = the sum over the ranks of their src's chunk `rank`,
     * in rank order, the additions allreduce makes on those elements.
     * all_gather: src (blocks, chunk), dst (blocks, size chunk) with chunk q
     * of each block rank q's src.  NULL where a comm has no sequence
     * parallelism (only a net built with EXEC_NET_SEQ_PAR calls them). */
    void (*reduce_scatter)(void *ctx, int rank, float *dst, const float *src, int64_t blocks,
                           int64_t chunk);
    void (*all_gather)(void *ctx, int rank, float *dst, const float *src, int64_t blocks,
                       int64_t chunk);
    void *ctx;
} exec_tp_comm;

typedef struct exec_tfm {
    exec_tfm_kind kind;
    int T, D;     /* tokens and width (the input's for PATCH: T, D of the output) */
    int H;        /* ATTN: heads (the whole layer's, also when split) */
    int F;        /* MLP: hidden width (likewise) */
    int C, Hh, Ww, p; /* PATCH: input channels and size, patch side */
    const exec_tp_comm *tp; /* ATTN, MLP: NULL, or this worker's split */
    int seq;      /* split ATTN, MLP: sequence parallel (below) */
    int seq_in, seq_out; /* with seq: the input / output holds this worker's
                          * T / size tokens of each sample (the neighbour is
                          * a sequence-parallel block too), else all T */
    float *seqbuf; /* with seq: the net's scratch for the gathered and the
                    * partial activations, exec_tfm_seq_floats, shared by
                    * its layers and dead between calls (but below) */
    int fused;     /* with seq: set by the net when the weight-gradient pass
                    * follows this layer's input-gradient pass at once
                    * (exec_net_backward): the gathered output gradient is
                    * then kept in seqbuf from one to the other rather
                    * than gathered twice */
    int recompute; /* EXEC_TFM_SELECTIVE or EXEC_TFM_FULL (below), or 0 */
    float *scratch; /* FULL: the intermediates, for B samples
                     * (exec_tfm_scratch_floats each), shared by the layers
                     * of a net: valid from one layer's input-gradient pass
                     * to its weight-gradient pass, which must come next */
} exec_tfm;

/* Recomputation (Korthikanti et al. 2022), the same calls on the same
 * inputs, so the same bits as keeping everything:
 * SELECTIVE (ATTN): the softmax probabilities are kept for one sample only
 * and recomputed, sample by sample, in the input-gradient pass.
 * FULL (ATTN, MLP): the layer keeps its input alone and recomputes its
 * intermediates, up to the input of its last product, in the input-gradient
 * pass, into the scratch it shares with the net's other layers. */
enum { EXEC_TFM_SELECTIVE = 1, EXEC_TFM_FULL = 2 };

/* Sequence parallelism (Korthikanti et al. 2022, section 4.2.2), for a
 * split ATTN or MLP with seq set: the layer norm and the residual add run
 * on this worker's tokens r T/size .. (r+1) T/size - 1 of each sample only,
 * and keep only those; an all-gather of LN(x) along the sequence feeds the
 * column-parallel product, and a reduce-scatter of the row-parallel
 * product's partial sums replaces its all-reduce (backward: an all-gather of
 * the output gradient, a reduce-scatter of dLN(x)).  The weight-gradient
 * pass gathers LN(x) again rather than keeping it whole (and the output
 * gradient, unless fused), and all-reduces the layer norm's gradient, which each worker
 * computes from its own tokens.  A block whose neighbour is not sequence
 * parallel takes its tokens from the whole input (seq_in 0) or gathers its
 * whole output (seq_out 0), so the layers around the blocks see the whole
 * sequence.  The activations equal those of the split without it bit for
 * bit (the same sums in the same order); the layer norm's gradient is
 * summed in another order. */

/* Fill g from a model layer of a vision transformer kind (models/model.h)
 * whose shapes are derived; returns 0 for any other kind. */
struct model_layer;
int exec_tfm_from_layer(exec_tfm *g, const struct model_layer *l);

/* Rank 0 of a `size`-way split whose all-reduces do nothing (size 1 ..
 * EXEC_TP_SOLO_MAX; static, never freed): a net built on it computes one
 * rank's share alone, which times a rank's compute apart from its
 * collectives (bench/validate.c prices those as the planner does).  Its
 * values are not a rank's: the partial sums are never summed. */
enum { EXEC_TP_SOLO_MAX = 64 };
const exec_tp_comm *exec_tp_comm_solo(int size);

/* Split g over tp (exec_tp_comm) when g is ATTN or MLP and tp->size > 1;
 * returns whether it did.  The counts, init and passes below then work on
 * this worker's shard. */
int exec_tfm_split(exec_tfm *g, const exec_tp_comm *tp);
/* Copy between the whole layer's parameters (full, laid out as unsplit) and
 * the shard of split g: to_full 0 fills shard from full, 1 writes the
 * shard's part of full (and the replicated parameters). */
void exec_tfm_shard(const exec_tfm *g, float *full, float *shard, int to_full);

/* Parameters (floats) of the layer. */
int64_t exec_tfm_params(const exec_tfm *g);
/* Floats of per-sample state the layer keeps between its passes (aux), and
 * floats it needs once whatever the batch (recompute); aux holds
 * B aux_floats + aux_fixed. */
int64_t exec_tfm_aux_floats(const exec_tfm *g);
int64_t exec_tfm_aux_fixed(const exec_tfm *g);
/* Floats per sample of g->scratch (FULL; else 0). */
int64_t exec_tfm_scratch_floats(const exec_tfm *g);
/* Floats of g->seqbuf for B samples (seq; else 0). */
int64_t exec_tfm_seq_floats(const exec_tfm *g, int B);
/* Initialise w: linear weights Glorot uniform, biases and beta 0, gamma 1,
 * position embedding uniform +-0.02 sqrt(3) (sd 0.02, as ViT's).  A split
 * layer gets its shard of the whole layer's initial weights (the same
 * stream), so every split starts from the unsplit layer's weights. */
void exec_tfm_init(const exec_tfm *g, float *w, gsl_rng *r);

/* The three passes.  aux (B x aux floats) is written by forward and read
 * by both backward passes; the blocks' input-gradient pass also leaves in
 * aux the inner gradients their weight-gradient pass reads, so for ATTN and
 * MLP the weight gradient must follow the input gradient of the same
 * forward (every schedule's W does).  in is the layer's input (read by the
 * weight pass of PATCH only through aux: it keeps the patches). */
void exec_tfm_forward(const exec_tfm *g, float *out, const float *in, const float *w,
                      float *aux, int B);
void exec_tfm_backward_input(const exec_tfm *g, float *din, const float *dout,
                             const float *in, const float *w, float *aux, int B);
void exec_tfm_backward_weight(const exec_tfm *g, float *dw, const float *dout,
                              const float *in, const float *aux, int B);

#endif
