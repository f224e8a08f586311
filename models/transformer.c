/* transformer.c - closed-form transformer costs (see transformer.h and
 * docs/transformer.md for the formulas and their sources). */
#include "models/transformer.h"

tfm_desc tfm_gpt(int64_t layers, int64_t hidden, int64_t heads, int64_t seq, int64_t vocab)
{
    tfm_desc d = {
        .layers = layers, .hidden = hidden, .heads = heads, .groups = heads,
        .ffn = 4 * hidden, .gated = 0, .seq = seq, .vocab = vocab, .tied = 1,
        .pos = TFM_POS_LEARNED, .norm = TFM_NORM_LAYER, .bias = 1, .dropout = 1,
    };
    return d;
}

tfm_desc tfm_llama(int64_t layers, int64_t hidden, int64_t heads, int64_t groups, int64_t ffn, int64_t seq,
                   int64_t vocab)
{
    tfm_desc d = {
        .layers = layers, .hidden = hidden, .heads = heads, .groups = groups,
        .ffn = ffn, .gated = 1, .seq = seq, .vocab = vocab, .tied = 0,
        .pos = TFM_POS_ROTARY, .norm = TFM_NORM_RMS, .bias = 0, .dropout = 0,
    };
    return d;
}

int tfm_act_elem(tfm_prec p) { return p == TFM_FP32 ? 4 : 2; }

/* ------------------------------------------------------------------ check */

int tfm_check(const tfm_desc *d, const tfm_layout *l, cl_err *e)
{
    const char *hint = "(hint: see docs/transformer.md)";
    if (d->layers < 1 || d->hidden < 1 || d->heads < 1 || d->groups < 1 || d->ffn < 1 ||
        d->seq < 1 || d->vocab < 1)
        return cl_fail(e, CL_EINPUT,
                       "transformer: layers, hidden, heads, groups, ffn, seq and vocab must "
                       "all be at least 1 (hint: groups = heads for plain multi-head attention)");
    if (d->hidden % d->heads)
        return cl_fail(e, CL_EINPUT, "transformer: hidden %lld is not a multiple of heads %lld %s",
                       (long long)d->hidden, (long long)d->heads, hint);
    if (d->heads % d->groups)
        return cl_fail(e, CL_EINPUT, "transformer: heads %lld is not a multiple of groups %lld %s",
                       (long long)d->heads, (long long)d->groups, hint);
    if (d->positions < 0 || (d->positions > 0 && d->pos == TFM_POS_LEARNED && d->seq > d->positions))
        return cl_fail(e, CL_EINPUT,
                       "transformer: seq %lld is longer than the %lld rows of the learned position "
                       "table (hint: a learned table has no row past its last)",
                       (long long)d->seq, (long long)d->positions);
    if ((unsigned)d->pos > TFM_POS_ROTARY || (unsigned)d->norm > TFM_NORM_RMS)
        return cl_fail(e, CL_EINPUT, "transformer: unknown position or norm kind %s", hint);
    if (!l) return CL_OK;
    if (l->t < 1 || l->b < 1)
        return cl_fail(e, CL_EINPUT, "transformer: t %d and microbatch %lld must be at least 1 %s", l->t,
                       (long long)l->b, hint);
    if (d->heads % l->t || d->groups % l->t || d->ffn % l->t)
        return cl_fail(e, CL_EINPUT,
                       "transformer: heads %lld, groups %lld and ffn %lld must be multiples of "
                       "t %d (hint: Megatron splits heads and the MLP over the tensor-parallel ranks)",
                       (long long)d->heads, (long long)d->groups, (long long)d->ffn, l->t);
    if (l->sp && d->seq % l->t)
        return cl_fail(e, CL_EINPUT,
                       "transformer: seq %lld is not a multiple of t %d with sequence "
                       "parallelism %s",
                       (long long)d->seq, l->t, hint);
    if ((unsigned)l->recomp > TFM_RECOMP_FULL || (unsigned)l->prec > TFM_BF16)
        return cl_fail(e, CL_EINPUT, "transformer: unknown recomputation or precision %s", hint);
    return CL_OK;
}

/* ------------------------------------------------------------- parameters */

/* Width of K (and of V): g heads of h/a each. */
static double kv_width(const tfm_desc *d)
{
    return (double)d->hidden / (double)d->heads * (double)d->groups;
}

static double norm_params(const tfm_desc *d)
{
    return d->norm == TFM_NORM_LAYER ? 2.0 * (double)d->hidden : (double)d->hidden;
}

/* Column-parallel part of a block (split t ways in weights and biases):
 * QKV and the MLP's first layer(s).  Row-parallel weights (projection, MLP
 * output) are split too; only their biases are replicated. */
static double col_weights(const tfm_desc *d)
{
    double h = (double)d->hidden, f = (double)d->ffn;
    return h * (h + 2 * kv_width(d)) + (d->gated ? 2 : 1) * h * f;
}

static double col_biases(const tfm_desc *d)
{
    if (!d->bias) return 0;
    return (double)d->hidden + 2 * kv_width(d) + (d->gated ? 2 : 1) * (double)d->ffn;
}

static double row_weights(const tfm_desc *d)
{
    double h = (double)d->hidden;
    return h * h + (double)d->ffn * h;
}

static double row_biases(const tfm_desc *d) { return d->bias ? 2.0 * (double)d->hidden : 0; }

double tfm_block_params(const tfm_desc *d) { return tfm_block_params_rank(d, 1); }

double tfm_block_params_rank(const tfm_desc *d, int t)
{
    return (col_weights(d) + col_biases(d) + row_weights(d)) / t + row_biases(d) +
           2 * norm_params(d);
}

double tfm_embed_params(const tfm_desc *d)
{
    /* the table has as many rows as the model was built with, whatever
     * sequence length it is trained at */
    double rows = d->positions > 0 ? (double)d->positions : (double)d->seq;
    double pos = d->pos == TFM_POS_LEARNED ? rows : 0;
    return ((double)d->vocab + pos) * (double)d->hidden;
}

double tfm_head_params(const tfm_desc *d)
{
    return norm_params(d) + (d->tied ? 0 : (double)d->vocab * (double)d->hidden);
}

double tfm_params(const tfm_desc *d)
{
    return (double)d->layers * tfm_block_params(d) + tfm_embed_params(d) + tfm_head_params(d);
}

/* ------------------------------------------------------------------ FLOPs */

tfm_block_flops tfm_block_fwd_flops(const tfm_desc *d, int64_t b, int t)
{
    double bs = (double)b * (double)d->seq, h = (double)d->hidden, s = (double)d->seq;
    tfm_block_flops f;
    f.qkv = 2 * bs * h * (h + 2 * kv_width(d)) / t;
    f.score = 2 * bs * s * h / t;
    f.attn_v = 2 * bs * s * h / t;
    f.proj = 2 * bs * h * h / t;
    f.mlp = 2 * bs * h * (double)d->ffn * (d->gated ? 3 : 2) / t;
    f.total = f.qkv + f.score + f.attn_v + f.proj + f.mlp;
    return f;
}

double tfm_logit_fwd_flops(const tfm_desc *d, int64_t b, int t)
{
    return 2.0 * (double)b * (double)d->seq * (double)d->hidden * (double)d->vocab / t;
}

double tfm_block_train_flops(const tfm_desc *d, int64_t b, int t, tfm_recomp r)
{
    tfm_block_flops f = tfm_block_fwd_flops(d, b, t);
    double extra = r == TFM_RECOMP_FULL ? f.total
                 : r == TFM_RECOMP_SELECTIVE ? f.score + f.attn_v : 0;
    return 3 * f.total + extra;
}

double tfm_iter_flops(const tfm_desc *d, int64_t B, tfm_recomp r)
{
    return (double)d->layers * tfm_block_train_flops(d, B, 1, r) +
           3 * tfm_logit_fwd_flops(d, B, 1);
}

/* ------------------------------------------------------------ activations */

double tfm_block_act_bytes(const tfm_desc *d, const tfm_layout *l)
{
    double e = tfm_act_elem(l->prec), t = l->t;
    double sbh = (double)d->seq * (double)l->b * (double)d->hidden;
    double sbf = (double)d->seq * (double)l->b * (double)d->ffn;
    double as2b = (double)d->heads * (double)d->seq * (double)d->seq * (double)l->b;
    double kv = sbh / (double)d->heads * (double)d->groups; /* K or V: s b h g/a */
    /* outside the tensor-parallel regions (replicated on the t ranks unless
     * sequence parallel): the two norm inputs, the two norm outputs (the
     * inputs of QKV and of the first MLP layer) and the two residual dropout
     * masks (1 byte each) */
    /* in FP8 the inputs of the four linear layers (the two norm outputs, the
     * projection's input, the MLP's activation output) are kept as the
     * 1-byte copies the FP8 GEMMs read: Transformer Engine's Linear,
     * LayerNormLinear and LayerNormMLP save the quantised input for the
     * weight gradient, not the 16-bit one */
    double lin = l->fp8 ? 1 : e;
    double outside = 2 * e * sbh + 2 * lin * sbh + (d->dropout ? 2 * sbh : 0);
    /* inside, split over t: Q, K, V, the projection's input, the MLP's
     * activation input(s) (gated: gate and up) and output */
    double inside = e * (sbh + 2 * kv) + lin * sbh + e * sbf * (d->gated ? 2 : 1) + lin * sbf;
    /* the attention core: softmax output, and with dropout its mask (1 byte)
     * and its output; selective recomputation recomputes all of it */
    double core = d->dropout ? (2 * e + 1) * as2b : e * as2b;
    /* a fused kernel keeps one fp32 log-sum-exp per head and token for its
     * backward (FlashAttention-2, Dao 2023, Alg. 1) and regenerates the
     * dropout mask from the random seed */
    if (l->fused_attn) core = 4 * as2b / (double)d->seq;
    if (l->recomp == TFM_RECOMP_FULL) return e * sbh / (l->sp ? t : 1);
    if (l->recomp == TFM_RECOMP_SELECTIVE) core = 0;
    return outside / (l->sp ? t : 1) + (inside + core) / t;
}

/* -------------------------------------------------------- tensor parallel */

tfm_tp_comm tfm_block_tp_comm(const tfm_desc *d, const tfm_layout *l)
{
    tfm_tp_comm c = {0};
    if (l->t <= 1) return c;
    int rep = l->recomp == TFM_RECOMP_FULL ? 2 : 1; /* recompute repeats the forward's */
    if (l->sp) {
        c.fwd_allgather = c.fwd_reducescatter = 2;
        c.bwd_allgather = 2 * rep;
        c.bwd_reducescatter = 2 * rep;
    } else {
        c.fwd_allreduce = 2;
        c.bwd_allreduce = 2 + 2 * (rep - 1);
    }
    c.msg_bytes = (double)tfm_act_elem(l->prec) * (double)d->seq * (double)l->b * (double)d->hidden;
    double part = (double)(l->t - 1) / l->t * c.msg_bytes;
    c.fwd_send_bytes = part * (2 * c.fwd_allreduce + c.fwd_allgather + c.fwd_reducescatter);
    c.bwd_send_bytes = part * (2 * c.bwd_allreduce + c.bwd_allgather + c.bwd_reducescatter);
    return c;
}

