/* tfm_time.c - a transformer's layers priced kernel by kernel (see
 * tfm_time.h and docs/compute.md).  Per rank, for a microbatch of b
 * sequences of s tokens (s/c of each with context parallelism c): T = b s tokens, Ts = T / t with sequence
 * parallelism (the norms, dropouts and residual adds run on the rank's
 * share of the sequence) else T, E bytes per activation element. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "profiles/gemm.h"
#include "profiles/tfm_time.h"

/* A running sum of kernel times and the kernels launched. */
typedef struct acc {
    double s;
    int n;
} acc;

typedef struct ctx {
    const cluster_devtype *dev;
    int E;
    int fp8;          /* the blocks' linear layers in FP8 (tfm_rank_opts.fp8) */
    double wgrad_acc; /* tfm_rank_opts.wgrad_acc */
} ctx;

static void add(acc *a, double sec)
{
    if (sec > 0) a->s += sec, a->n++;
}

static void gemm(const ctx *c, acc *a, double m, double n, double k, double batch)
{
    add(a, prof_gemm_s(c->dev, c->E, m, n, k, batch));
}

static void mem(const ctx *c, acc *a, double bytes) { add(a, prof_mem_s(c->dev, bytes)); }

/* A linear layer Y (m x n) = X (m x k) W (k x n): the forward into f, the
 * input gradient dX = dY W^T (m x k, inner n) into in, the weight gradient
 * dW = X^T dY (k x n, inner m) into w. */
static void linear(const ctx *c, acc *f, acc *in, acc *w, double m, double n, double k)
{
    gemm(c, f, m, n, k, 1);
    gemm(c, in, m, k, n, 1);
    gemm(c, w, k, n, m, 1);
}

/* The same linear layer as Transformer Engine runs it in FP8: three FP8
 * GEMMs, and the casts that feed them: the forward casts X to FP8 with
 * its transpose (for the weight gradient), the backward dY likewise, each
 * reading 2-byte elements and writing two 1-byte copies (TE's
 * cast-transpose kernels; the fusions of a cast into the preceding norm or
 * activation are not counted, nor the weights' casts once per step). */
static void linear_fp8(const ctx *c, acc *f, acc *in, acc *w, double m, double n, double k)
{
    mem(c, f, (c->E + 2) * m * k);
    add(f, prof_gemm_fp8_s(c->dev, m, n, k));
    mem(c, in, (c->E + 2) * m * n);
    add(in, prof_gemm_fp8_s(c->dev, m, k, n));
    add(w, prof_gemm_fp8_s(c->dev, k, n, m));
}

/* A block's linear layer: FP8 when asked, else as the others. */
static void block_linear(const ctx *c, acc *f, acc *in, acc *w, double m, double n, double k)
{
    if (c->fp8) linear_fp8(c, f, in, w, m, n, k);
    else linear(c, f, in, w, m, n, k);
}

/* The separate accumulation of one parameter tensor's gradient (n
 * elements on this rank), when the framework runs one: one element-wise
 * add per tensor and microbatch (Megatron-LM's backward hook adds
 * param.grad into param.main_grad, then frees it). */
static void accumulate(const ctx *c, acc *w, double n)
{
    if (c->wgrad_acc > 0) mem(c, w, n * c->wgrad_acc);
}

static void join(acc *into, const acc *from)
{
    into->s += from->s;
    into->n += from->n;
}

/* The attention core of a block: per sequence and rank head, scores
 * S = Q K^T (s x s, inner h/a), softmax and dropout, context C = P V
 * (s x h/a, inner s); backward dP = dC V^T, dV = P^T dC, the dropout and
 * softmax backward, dQ = dS K, dK = dS^T Q.  Fused: one kernel each way doing
 * the forward's 4 b s^2 h / t FLOPs (2.5 times that backward, where the
 * kernel recomputes the scores: Dao 2023, Sec. 3.1), halved by the causal
 * mask whose blocks the kernel skips.  With context parallelism c the rank's
 * s/c queries meet the s keys one ring step at a time (Transformer Engine's
 * ring attention): c rounds of the same kernels on (s/c) x (s/c) blocks,
 * each a c-th of the rank's work (the load-balanced chunks give every step
 * the same causal share); c = 1 is the single round above. */
static void core(const ctx *c, const tfm_desc *d, const tfm_rank_opts *o, double b, double heads,
                 prof_attn at, acc *f, acc *in)
{
    int cp = tfm_rank_cp(o);
    double s = (double)d->seq / cp, dh = (double)d->hidden / (double)d->heads, bh = b * heads;
    double A = bh * s * s, E = c->E;
    for (int step = 0; step < cp; step++) {
        if (at == PROF_ATTN_FUSED) {
            double flops = 0.5 * 4.0 * bh * (double)d->seq * (double)d->seq * dh / cp / cp;
            add(f, prof_fused_s(c->dev, c->E, flops));
            add(in, prof_fused_s(c->dev, c->E, 2.5 * flops));
            continue;
        }
        gemm(c, f, s, s, dh, bh);
        mem(c, f, 2 * E * A); /* fused scale + mask + softmax: read, write */
        if (d->dropout) mem(c, f, A * (2 * E + 1)); /* read, write, 1-byte mask */
        gemm(c, f, s, dh, s, bh);
        gemm(c, in, s, s, dh, bh);
        gemm(c, in, s, dh, s, bh);
        if (d->dropout) mem(c, in, A * (2 * E + 1));
        mem(c, in, 3 * E * A); /* softmax backward: read output and gradient, write */
        gemm(c, in, s, dh, s, bh);
        gemm(c, in, s, dh, s, bh);
    }
}

static prof_tfm_pass block(const ctx *c, const tfm_desc *d, const tfm_rank_opts *o,
                           prof_attn at, double b)
{
    double t = o->t, E = c->E, h = (double)d->hidden, s = (double)d->seq / tfm_rank_cp(o);
    double T = b * s, Ts = T / (o->sp ? t : 1), fr = (double)d->ffn / t;
    double kv = (double)d->groups * h / (double)d->heads, drop = d->dropout ? 1 : 0;
    acc f = {0}, in = {0}, w = {0}, cf = {0}, ci = {0};
    /* attention: norm, QKV, core, projection, bias + dropout + residual add */
    mem(c, &f, 2 * E * h * Ts);
    block_linear(c, &f, &in, &w, T, (h + 2 * kv) / t, h);
    core(c, d, o, b, (double)d->heads / t, at, &cf, &ci);
    join(&f, &cf);
    join(&in, &ci);
    block_linear(c, &f, &in, &w, T, h, h / t);
    mem(c, &f, h * Ts * (3 * E + drop));
    /* MLP: norm, up (gate and up together when gated), activation, down, add */
    mem(c, &f, 2 * E * h * Ts);
    block_linear(c, &f, &in, &w, T, (d->gated ? 2 : 1) * fr, h);
    mem(c, &f, E * T * fr * (d->gated ? 3 : 2));
    block_linear(c, &f, &in, &w, T, h, fr);
    mem(c, &f, h * Ts * (3 * E + drop));
    /* backward of the element-wise kernels, per residual branch: dropout,
     * the gradient added into the residual stream, the norm (read input and
     * gradient, write); the activation reads its inputs and the gradient */
    for (int r = 0; r < 2; r++) {
        if (d->dropout) mem(c, &in, h * Ts * (2 * E + 1));
        mem(c, &in, 3 * E * h * Ts);
        mem(c, &in, 3 * E * h * Ts);
    }
    mem(c, &in, E * T * fr * (d->gated ? 5 : 3));
    if (d->bias) { /* bias gradients: a reduction over the tokens of each output gradient */
        mem(c, &w, E * T * (h + 2 * kv) / t);
        mem(c, &w, E * Ts * h);
        mem(c, &w, E * T * fr);
        mem(c, &w, E * Ts * h);
    }
    /* each parameter tensor's gradient added into its accumulator: the
     * column-parallel QKV and MLP-up weights and biases and the
     * row-parallel weights split over t, the row-parallel biases and the
     * norms' scales (and shifts) whole */
    double up = (d->gated ? 2 : 1) * fr, norms = d->norm == TFM_NORM_LAYER ? 2 : 1;
    accumulate(c, &w, h * (h + 2 * kv) / t);
    accumulate(c, &w, h * h / t);
    accumulate(c, &w, h * up);
    accumulate(c, &w, fr * h);
    if (d->bias) {
        accumulate(c, &w, (h + 2 * kv) / t);
        accumulate(c, &w, h);
        accumulate(c, &w, up);
        accumulate(c, &w, h);
    }
    for (int r = 0; r < 2 * norms; r++) accumulate(c, &w, h);
    if (o->recomp == TFM_RECOMP_FULL) join(&in, &f);
    else if (o->recomp == TFM_RECOMP_SELECTIVE) join(&in, &cf);
    prof_tfm_pass p = {f.s, in.s, w.s, f.n + in.n + w.n};
    return p;
}

/* Vocabulary-parallel lookup (read and write the rows), the position add
 * with a learned table, dropout; backward: dropout, the scatter-add of the
 * gradient into the token rows and the sum into the position table, all
 * weight-gradient work as in models/tfm_rank.c. */
static prof_tfm_pass embedding(const ctx *c, const tfm_desc *d, const tfm_rank_opts *o, double b)
{
    double E = c->E, h = (double)d->hidden, s = (double)d->seq / tfm_rank_cp(o), T = b * s;
    double Ts = T / (o->sp ? o->t : 1);
    int learned = d->pos == TFM_POS_LEARNED;
    acc f = {0}, w = {0};
    mem(c, &f, 2 * E * T * h);
    if (learned) mem(c, &f, 3 * E * h * Ts);
    if (d->dropout) mem(c, &f, h * Ts * (2 * E + 1)), mem(c, &w, h * Ts * (2 * E + 1));
    mem(c, &w, 2 * E * T * h);
    if (learned) mem(c, &w, E * (T + s) * h);
    /* the rank's rows of the table and the position table */
    accumulate(c, &w, (double)d->vocab / o->t * h);
    if (learned) accumulate(c, &w, (d->positions > 0 ? (double)d->positions : (double)d->seq) * h);
    prof_tfm_pass p = {f.s, 0, w.s, f.n + w.n};
    return p;
}

/* Final norm, the logit GEMM over V / t columns, the vocabulary-parallel
 * loss (a max pass reading the logits, a pass reading them again and
 * writing float32 probabilities); backward: probabilities to logit
 * gradients, the logit GEMM's two gradients, the norm. */
static prof_tfm_pass head(const ctx *c, const tfm_desc *d, const tfm_rank_opts *o, double b)
{
    double E = c->E, h = (double)d->hidden, T = b * (double)d->seq / tfm_rank_cp(o);
    double Ts = T / (o->sp ? o->t : 1), Vr = (double)d->vocab / o->t;
    acc f = {0}, in = {0}, w = {0};
    mem(c, &f, 2 * E * h * Ts);
    linear(c, &f, &in, &w, T, Vr, h);
    mem(c, &f, E * T * Vr);
    mem(c, &f, (E + 4) * T * Vr);
    mem(c, &in, (4 + E) * T * Vr);
    mem(c, &in, 3 * E * h * Ts);
    /* the logit weight's gradient (the last stage's own copy of a tied
     * embedding too: Megatron-LM keeps one there and sums the two between
     * the first and last stage after the step's microbatches) and the
     * final norm's */
    accumulate(c, &w, Vr * h);
    for (int r = 0; r < (d->norm == TFM_NORM_LAYER ? 2 : 1); r++) accumulate(c, &w, h);
    prof_tfm_pass p = {f.s, in.s, w.s, f.n + in.n + w.n};
    return p;
}

prof_tfm_pass prof_tfm_core_s(const tfm_desc *d, int elem, const tfm_rank_opts *o, prof_attn a,
                              const cluster_devtype *t, double b)
{
    assert(prof_tfm_priced(t) && o->t >= 1);
    ctx c = {t, elem, o->fp8, 0}; /* as prof_tfm_layer_s: the core runs its own kernels, not FP8 ones */
    acc f = {0}, in = {0};
    core(&c, d, o, b, (double)d->heads / o->t, a, &f, &in);
    prof_tfm_pass p = {f.s, in.s, 0, f.n + in.n};
    return p;
}

int prof_tfm_priced(const cluster_devtype *t) { return t->kernels.sms > 0; }

prof_tfm_pass prof_tfm_layer_s(const tfm_desc *d, int elem, const tfm_rank_opts *o,
                               prof_attn a, const cluster_devtype *t, int i, double b)
{
    assert(prof_tfm_priced(t) && i >= 0 && i <= d->layers + 1 && o->t >= 1);
    ctx c = {t, elem, o->fp8, o->wgrad_acc};
    if (i == 0) return embedding(&c, d, o, b);
    if (i == d->layers + 1) return head(&c, d, o, b);
    return block(&c, d, o, a, b);
}

void prof_tfm_times(prof *pf, const tfm_desc *d, int elem, const tfm_rank_opts *o, prof_attn a,
                    const cluster_devtype *t)
{
    assert(pf->n_layers == d->layers + 2);
    for (int i = 0; i < pf->n_layers; i++) {
        prof_layer *l = &pf->layers[i];
        /* the blocks are alike: price one per batch size, copy it */
        int same = i > 1 && i <= d->layers;
        for (int k = 0; k < l->n_points; k++) {
            prof_tfm_pass p;
            if (same) {
                const prof_layer *prev = &pf->layers[i - 1];
                p.fwd_s = prev->fwd_s[k], p.bwd_in_s = prev->bwd_in_s[k],
                p.bwd_w_s = prev->bwd_w_s[k];
            } else p = prof_tfm_layer_s(d, elem, o, a, t, i, l->batch[k]);
            l->fwd_s[k] = p.fwd_s;
            l->bwd_in_s[k] = p.bwd_in_s;
            l->bwd_w_s[k] = p.bwd_w_s;
        }
    }
    snprintf(pf->note, sizeof pf->note,
             "shape-aware: GEMMs by tiles and waves on %d SMs (%dx%d tiles, %.3g of peak), "
             "attention %s, element-wise kernels at %.4g B/s, %.3g s per kernel%s",
             t->kernels.sms, t->kernels.tile_m, t->kernels.tile_n, t->kernels.gemm_efficiency,
             a == PROF_ATTN_FUSED ? "fused" : "unfused", t->mem_bw_Bps, t->kernels.launch_s,
             o->fp8 ? "; the blocks' linear layers in FP8" : "");
}
