/* tfm_blocks.c - the transformer layer kinds the net runs (layers_tfm.h,
 * exec_tfm_*): parameter layouts, what each keeps between its passes, and
 * the passes, composed from layers_tfm.c and the linear layer's SGEMMs
 * (rows = B T tokens).
 *
 * aux is cut into regions, each B samples long, so a region is one
 * contiguous (B T, width) matrix for the products.
 *
 * A split ATTN or MLP (layers_tfm.h, exec_tp_comm) runs the same code on its
 * shard: its heads (Hl of width D / H, Dl = Hl D / H columns of q, k, v and
 * ctx) or hidden units (Fl), with the two all-reduces added; unsplit, Hl = H,
 * Dl = D, Fl = F and the calls are the ones before the split existed.
 *
 * Sequence parallelism (layers_tfm.h, exec_tfm.seq) shrinks the regions of
 * the layer norm (x^, LN(x), dLN(x), 1/sigma) to the worker's Tl = T / size
 * tokens and adds the collectives along the sequence; the products and the
 * attention core see all T tokens of the gathered LN(x), as without it.
 * The net's seqbuf holds G, a whole (B, T, D) activation (the gathered
 * LN(x) or output gradient, or a row-parallel product's partial sums), then
 * Y, a (B, Tl, D) one (a block's own tokens when its neighbour needs all
 * of them), then P, the layer norm's 2 D gradient floats being summed, then
 * O, a whole (B, T, D) output gradient gathered by the input-gradient pass
 * and read again by the weight-gradient pass when it follows at once
 * (exec_tfm.fused), as Megatron computes both from one gather.
 *
 * Recomputation (layers_tfm.h, EXEC_TFM_SELECTIVE / FULL) moves regions:
 * selective holds the probabilities once (one sample), full puts every
 * region in the net's shared scratch and keeps only the input in aux.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"

#include "layers.h"
#include "layers_tfm.h"
#include "tensor.h"

/* The workers a layer is split over (1: not split). */
static int tp_n(const exec_tfm *g) { return g->tp ? g->tp->size : 1; }

/* Sum buf over the workers of a split layer (nothing when unsplit). */
static void tp_sum(const exec_tfm *g, float *buf, int64_t n)
{
    if (g->tp) g->tp->allreduce(g->tp->ctx, g->tp->rank, buf, n);
}

/* Tokens per sample of the layer norm and the residual on this worker. */
static int tl(const exec_tfm *g) { return g->seq ? g->T / tp_n(g) : g->T; }

/* Where sample b's tokens of this worker start in a (B, ., D) buffer that
 * holds all T tokens of each sample (whole) or only this worker's. */
static int64_t tok_off(const exec_tfm *g, int whole, int b)
{
    const int64_t Tl = tl(g), r = g->seq ? g->tp->rank : 0;
    return (whole ? (int64_t)b * g->T + r * Tl : (int64_t)b * Tl) * g->D;
}

/* Do the layer's input / output hold all T tokens of a sample? */
static int in_whole(const exec_tfm *g) { return !(g->seq && g->seq_in); }
static int out_whole(const exec_tfm *g) { return !(g->seq && g->seq_out); }

/* dst (B, Tl, D) += (add) or = this worker's tokens of src (whole or not) */
static void tokens(const exec_tfm *g, float *dst, const float *src, int whole, int B, int add)
{
    const int64_t TlD = (int64_t)tl(g) * g->D;
    const int one = !whole || tl(g) == g->T; /* contiguous: one piece */
    for (int b = 0; b < (one ? 1 : B); b++) {
        float *d = dst + b * TlD;
        const float *x = src + tok_off(g, whole, b);
        const int64_t len = one ? B * TlD : TlD;
        if (add)
            for (int64_t i = 0; i < len; i++) d[i] += x[i];
        else
            memcpy(d, x, (size_t)len * sizeof *d);
    }
}

/* The regions of seqbuf (file comment). */
static float *seq_G(const exec_tfm *g) { return g->seqbuf; }
static float *seq_Y(const exec_tfm *g, int B) { return g->seqbuf + (int64_t)B * g->T * g->D; }
static float *seq_P(const exec_tfm *g, int B)
{
    return seq_Y(g, B) + (int64_t)B * tl(g) * g->D;
}
static float *seq_O(const exec_tfm *g, int B) { return seq_P(g, B) + 2 * g->D; }

static void all_gather(const exec_tfm *g, float *dst, const float *src, int B)
{
    g->tp->all_gather(g->tp->ctx, g->tp->rank, dst, src, B, (int64_t)tl(g) * g->D);
}

static void reduce_scatter(const exec_tfm *g, float *dst, const float *src, int B)
{
    g->tp->reduce_scatter(g->tp->ctx, g->tp->rank, dst, src, B, (int64_t)tl(g) * g->D);
}

/* The bias after a row-parallel product, added by one worker only. */
static const float *lead_bias(const exec_tfm *g, const float *b)
{
    return !g->tp || g->tp->rank == 0 ? b : NULL;
}

int exec_tfm_from_layer(exec_tfm *g, const model_layer *l)
{
    static const int kinds[MODEL_KIND_COUNT] = {
        [MODEL_PATCH_EMBED] = EXEC_TFM_PATCH + 1, [MODEL_POS_EMBED] = EXEC_TFM_POS + 1,
        [MODEL_LAYERNORM] = EXEC_TFM_LAYERNORM + 1, [MODEL_GELU] = EXEC_TFM_GELU + 1,
        [MODEL_MEANPOOL] = EXEC_TFM_MEANPOOL + 1, [MODEL_ATTENTION] = EXEC_TFM_ATTN + 1,
        [MODEL_MLP] = EXEC_TFM_MLP + 1};
    if ((unsigned)l->kind >= MODEL_KIND_COUNT || !kinds[l->kind]) return 0;
    /* tokens [1,T,D] or features [D]; patch_embed's T and D are its output's */
    const model_shape *s = l->kind == MODEL_PATCH_EMBED ? &l->out_shape : &l->in_shape;
    *g = (exec_tfm){.kind = (exec_tfm_kind)(kinds[l->kind] - 1)};
    g->D = (int)s->d[s->ndim - 1];
    g->T = s->ndim == 3 ? (int)s->d[1] : 1;
    g->H = (int)l->heads;
    g->F = (int)l->out_features;
    if (l->kind == MODEL_PATCH_EMBED) {
        g->C = (int)l->in_shape.d[0];
        g->Hh = (int)l->in_shape.d[1];
        g->Ww = (int)l->in_shape.d[2];
        g->p = (int)l->kernel;
    }
    return 1;
}

/* The regions of aux in order; sizes per sample (floats), but for the one
 * region held once whatever the batch (once = 1 + its index; 0: none), of
 * `fixed` floats after all the others. */
typedef struct regions {
    int n;
    int64_t size[10];
    int once;
    int64_t fixed;
} regions;

static regions layout(const exec_tfm *g)
{
    const int64_t T = g->T, D = g->D, TD = T * D, TDl = TD / tp_n(g), Tl = tl(g), TlD = Tl * D;
    switch (g->kind) {
    case EXEC_TFM_PATCH: {
        int64_t K = (int64_t)g->C * g->p * g->p;
        return (regions){.n = 2, .size = {T * K, T * K}}; /* patches, their gradient */
    }
    case EXEC_TFM_LAYERNORM: return (regions){.n = 2, .size = {TD, T}};   /* xhat, rstd */
    case EXEC_TFM_GELU: return (regions){.n = 1, .size = {TD}};           /* the input */
    case EXEC_TFM_ATTN: {
        /* xhat, ln, qkv, att, ctx, dqkv, dln, rstd, softmax scratch */
        const int64_t att = g->H / tp_n(g) * T * T;
        const int sel = g->recompute == EXEC_TFM_SELECTIVE;
        return (regions){9, {TlD, TlD, 3 * TDl, sel ? 0 : att, TDl, 3 * TDl, TlD, Tl, T * T},
                         sel ? 4 : 0, sel ? att : 0};
    }
    case EXEC_TFM_MLP: {
        int64_t TF = T * (g->F / tp_n(g));
        return (regions){.n = 7, .size = {TlD, TlD, TF, TF, TF, TlD, Tl}}; /* xhat ln h1 g dh1 dln rstd */
    }
    default: return (regions){.n = 0, .size = {0}};
    }
}

static int full(const exec_tfm *g) { return g->recompute == EXEC_TFM_FULL; }

/* Start of region r for a batch of B (in the scratch with FULL, where aux
 * holds the layer's input). */
static float *region(const exec_tfm *g, const float *aux, int B, int r)
{
    regions L = layout(g);
    assert(r < L.n);
    int64_t off = 0;
    for (int k = 0; k < (L.once == r + 1 ? L.n : r); k++) off += L.size[k] * B;
    return (full(g) ? g->scratch : (float *)aux) + off;
}

int64_t exec_tfm_scratch_floats(const exec_tfm *g)
{
    regions L = layout(g);
    int64_t s = 0;
    for (int k = 0; k < L.n; k++) s += L.size[k];
    return full(g) ? s : 0;
}

int64_t exec_tfm_aux_floats(const exec_tfm *g)
{
    if (full(g)) return (int64_t)tl(g) * g->D; /* its tokens of the input */
    regions L = layout(g);
    int64_t s = 0;
    for (int k = 0; k < L.n; k++) s += L.size[k];
    return s;
}

int64_t exec_tfm_seq_floats(const exec_tfm *g, int B)
{
    return g->seq ? (int64_t)B * (2 * g->T + tl(g)) * g->D + 2 * g->D : 0;
}

int64_t exec_tfm_aux_fixed(const exec_tfm *g)
{
    return layout(g).fixed;
}

int64_t exec_tfm_params(const exec_tfm *g)
{
    const int64_t D = g->D, Dl = D / tp_n(g), Fl = g->F / tp_n(g);
    switch (g->kind) {
    case EXEC_TFM_PATCH: return D * g->C * g->p * g->p + D;
    case EXEC_TFM_POS: return (int64_t)g->T * D;
    case EXEC_TFM_LAYERNORM: return 2 * D;
    case EXEC_TFM_ATTN: return 2 * D + 3 * Dl * D + 3 * Dl + D * Dl + D;
    case EXEC_TFM_MLP: return 2 * D + 2 * D * Fl + Fl + D;
    default: return 0;
    }
}

/* Glorot (Xavier) uniform, the usual ViT initialisation of its linears. */
static float *glorot(float *w, int64_t out, int64_t in, gsl_rng *r)
{
    double bound = sqrt(6.0 / (double)(in + out));
    for (int64_t i = 0; i < out * in; i++) w[i] = (float)((2 * gsl_rng_uniform(r) - 1) * bound);
    return w + out * in;
}

static float *ln_init(float *w, int D)
{
    for (int j = 0; j < D; j++) w[j] = 1; /* gamma 1, beta 0 (the block is zeroed) */
    return w + 2 * D;
}

void exec_tfm_init(const exec_tfm *g, float *w, gsl_rng *r)
{
    const int D = g->D;
    memset(w, 0, (size_t)exec_tfm_params(g) * sizeof *w);
    if (g->tp) { /* the whole layer from the same stream, then this shard */
        exec_tfm whole = *g;
        whole.tp = NULL;
        float *full = exec_falloc(exec_tfm_params(&whole));
        exec_tfm_init(&whole, full, r);
        exec_tfm_shard(g, full, w, 0);
        free(full);
        return;
    }
    switch (g->kind) {
    case EXEC_TFM_PATCH: glorot(w, D, (int64_t)g->C * g->p * g->p, r); break;
    case EXEC_TFM_POS:
        for (int64_t i = 0; i < (int64_t)g->T * D; i++)
            w[i] = (float)((2 * gsl_rng_uniform(r) - 1) * 0.02 * sqrt(3.0));
        break;
    case EXEC_TFM_LAYERNORM: ln_init(w, D); break;
    case EXEC_TFM_ATTN: {
        float *p = ln_init(w, D);
        p = glorot(p, 3 * D, D, r) + 3 * D;
        glorot(p, D, D, r);
        break;
    }
    case EXEC_TFM_MLP: {
        float *p = ln_init(w, D);
        p = glorot(p, g->F, D, r) + g->F;
        glorot(p, D, g->F, r);
        break;
    }
    default: break;
    }
}

static void add_into(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

/* The layer norm of this worker's tokens of in (whole or not). */
static void norm_tokens(const exec_tfm *g, const float *in, int whole, const float *w,
                        float *aux, int B)
{
    const int Tl = tl(g), D = g->D, ri = g->kind == EXEC_TFM_ATTN ? 7 : 6;
    float *xhat = region(g, aux, B, 0), *ln = region(g, aux, B, 1), *rstd = region(g, aux, B, ri);
    if (!whole || Tl == g->T) { /* contiguous */
        exec_layernorm_forward(ln, xhat, rstd, in, w, w + D, (int64_t)B * Tl, D);
        return;
    }
    for (int b = 0; b < B; b++) {
        const int64_t o = (int64_t)b * Tl * D;
        exec_layernorm_forward(ln + o, xhat + o, rstd + (int64_t)b * Tl, in + tok_off(g, whole, b),
                               w, w + D, Tl, D);
    }
}

/* LN(x) of all T tokens for the column-parallel product: the region, or
 * with sequence parallelism the workers' tokens gathered into G. */
static const float *norm_whole(const exec_tfm *g, const float *aux, int B)
{
    if (!g->seq) return region(g, aux, B, 1);
    all_gather(g, seq_G(g), region(g, aux, B, 1), B);
    return seq_G(g);
}

/* ATTN and MLP up to the input of the last product (ctx, or GELU(h1)):
 * the forward's first part, and all a FULL backward recomputes. */
static void block_inner(const exec_tfm *g, const float *in, int whole, const float *w, float *aux,
                        int B)
{
    const int T = g->T, D = g->D, BT = B * T;
    norm_tokens(g, in, whole, w, aux, B);
    const float *ln = norm_whole(g, aux, B);
    if (g->kind == EXEC_TFM_ATTN) {
        float *qkv = region(g, aux, B, 2), *att = region(g, aux, B, 3);
        float *ctx = region(g, aux, B, 4);
        const int Dl = D / tp_n(g);
        const float *wqkv = w + 2 * D, *bqkv = wqkv + 3 * Dl * D;
        exec_linear_forward(qkv, ln, wqkv, bqkv, BT, D, 3 * Dl);
        if (g->recompute == EXEC_TFM_SELECTIVE) /* att holds one sample's probabilities */
            for (int b = 0; b < B; b++)
                exec_mhsa_forward(ctx + (int64_t)b * T * Dl, att, qkv + (int64_t)b * T * 3 * Dl,
                                  1, T, Dl, g->H / tp_n(g));
        else
            exec_mhsa_forward(ctx, att, qkv, B, T, Dl, g->H / tp_n(g));
    } else {
        const int F = g->F / tp_n(g);
        float *h1 = region(g, aux, B, 2), *ge = region(g, aux, B, 3);
        const float *w1 = w + 2 * D, *b1 = w1 + (int64_t)F * D;
        exec_linear_forward(h1, ln, w1, b1, BT, D, F);
        exec_gelu_forward(ge, h1, (int64_t)BT * F);
    }
}

void exec_tfm_forward(const exec_tfm *g, float *out, const float *in, const float *w,
                      float *aux, int B)
{
    const int T = g->T, D = g->D, BT = B * T;
    const int64_t n = (int64_t)BT * D;
    switch (g->kind) {
    case EXEC_TFM_PATCH: {
        float *pt = region(g, aux, B, 0);
        int K = g->C * g->p * g->p;
        exec_patchify(pt, in, B, g->C, g->Hh, g->Ww, g->p);
        exec_linear_forward(out, pt, w, w + (int64_t)D * K, BT, K, D);
        break;
    }
    case EXEC_TFM_POS: exec_posembed_forward(out, in, w, B, T * D); break;
    case EXEC_TFM_LAYERNORM:
        exec_layernorm_forward(out, region(g, aux, B, 0), region(g, aux, B, 1), in, w, w + D,
                               BT, D);
        break;
    case EXEC_TFM_GELU:
        memcpy(region(g, aux, B, 0), in, (size_t)n * sizeof *in);
        exec_gelu_forward(out, in, n);
        break;
    case EXEC_TFM_MEANPOOL: exec_meanpool_forward(out, in, B, T, D); break;
    case EXEC_TFM_ATTN:
    case EXEC_TFM_MLP: { /* then out = in + W a + b: Wo ctx + bo, or W2 GELU(h1) + b2 */
        const int attn = g->kind == EXEC_TFM_ATTN, K = (attn ? D : g->F) / tp_n(g);
        const float *W = w + exec_tfm_params(g) - D - (int64_t)D * K;
        if (full(g)) tokens(g, aux, in, in_whole(g), B, 0); /* all the backward keeps:
                                                               * its tokens of the input */
        block_inner(g, in, in_whole(g), w, aux, B);
        const float *a = region(g, aux, B, attn ? 4 : 3);
        if (!g->seq) {
            exec_linear_forward(out, a, W, lead_bias(g, W + D * K), BT, K, D);
            tp_sum(g, out, n);
            add_into(out, in, n);
            break;
        }
        /* the partial sums of all T tokens, reduce-scattered to this
         * worker's, the residual added, and gathered when the next layer
         * needs the whole sequence */
        float *y = out_whole(g) ? seq_Y(g, B) : out;
        exec_linear_forward(seq_G(g), a, W, lead_bias(g, W + D * K), BT, K, D);
        reduce_scatter(g, y, seq_G(g), B);
        tokens(g, y, in, in_whole(g), B, 1);
        if (out_whole(g)) all_gather(g, out, y, B);
        break;
    }
    }
}

/* The output gradient of all T tokens for the row-parallel product's
 * input gradient (wpass 0) or weight gradient (1): dout, or with sequence
 * parallelism and this worker's tokens only, all of them gathered, into
 * G, or into O when the weight pass follows at once and reads them there. */
static const float *dout_whole(const exec_tfm *g, const float *dout, int B, int wpass)
{
    if (out_whole(g)) return dout;
    float *buf = g->fused ? seq_O(g, B) : seq_G(g);
    if (!(wpass && g->fused)) all_gather(g, buf, dout, B);
    return buf;
}

/* ATTN and MLP from dLN(x) on: dpart (B, T, D) holds this worker's partial
 * sum of the column-parallel product's input gradient (in dln, or in G
 * with sequence parallelism); summed over the workers into dln (all
 * tokens, or this worker's), the layer norm's backward, the residual path,
 * and the whole sequence gathered when the layer before needs it. */
static void block_din(const exec_tfm *g, float *din, const float *dout, const float *dpart,
                      float *dln, const float *xhat, const float *rstd, const float *w, int B)
{
    const int64_t rows = (int64_t)B * tl(g);
    if (g->seq) reduce_scatter(g, dln, dpart, B);
    else tp_sum(g, dln, rows * g->D);
    float *dx = in_whole(g) && g->seq ? seq_Y(g, B) : din;
    exec_layernorm_backward_input(dx, dln, xhat, rstd, w, rows, g->D);
    tokens(g, dx, dout, out_whole(g), B, 1); /* the residual path */
    if (dx != din) all_gather(g, din, dx, B);
}

void exec_tfm_backward_input(const exec_tfm *g, float *din, const float *dout,
                             const float *in, const float *w, float *aux, int B)
{
    (void)in;
    const int T = g->T, D = g->D, BT = B * T;
    const int64_t n = (int64_t)BT * D;
    if (full(g)) block_inner(g, aux, 0, w, aux, B); /* from the input it kept */
    switch (g->kind) {
    case EXEC_TFM_PATCH: {
        float *dp = region(g, aux, B, 1);
        int K = g->C * g->p * g->p;
        exec_linear_backward_input(dp, dout, w, BT, K, D);
        exec_unpatchify(din, dp, B, g->C, g->Hh, g->Ww, g->p);
        break;
    }
    case EXEC_TFM_POS: memcpy(din, dout, (size_t)n * sizeof *din); break;
    case EXEC_TFM_LAYERNORM:
        exec_layernorm_backward_input(din, dout, region(g, aux, B, 0), region(g, aux, B, 1), w,
                                      BT, D);
        break;
    case EXEC_TFM_GELU: exec_gelu_backward_input(din, dout, region(g, aux, B, 0), n); break;
    case EXEC_TFM_MEANPOOL: exec_meanpool_backward_input(din, dout, B, T, D); break;
    case EXEC_TFM_ATTN: {
        float *xhat = region(g, aux, B, 0), *qkv = region(g, aux, B, 2);
        float *att = region(g, aux, B, 3), *dqkv = region(g, aux, B, 5);
        float *dln = region(g, aux, B, 6), *rstd = region(g, aux, B, 7);
        float *tmp = region(g, aux, B, 8);
        const int Dl = D / tp_n(g);
        const float *wqkv = w + 2 * D, *wo = wqkv + 3 * Dl * D + 3 * Dl;
        /* din holds dctx for now (T D / size floats a sample: as many as
         * the worker's tokens with sequence parallelism) */
        exec_linear_backward_input(din, dout_whole(g, dout, B, 0), wo, BT, Dl, D);
        if (g->recompute == EXEC_TFM_SELECTIVE) { /* each sample's probabilities again (and
                                                     * its ctx: the same bits) */
            for (int b = 0; b < B; b++) {
                const int64_t o1 = (int64_t)b * T * Dl, o3 = 3 * o1;
                exec_mhsa_forward(region(g, aux, B, 4) + o1, att, qkv + o3, 1, T, Dl,
                                  g->H / tp_n(g));
                exec_mhsa_backward(dqkv + o3, din + o1, att, qkv + o3, tmp, 1, T, Dl,
                                   g->H / tp_n(g));
            }
        } else {
            exec_mhsa_backward(dqkv, din, att, qkv, tmp, B, T, Dl, g->H / tp_n(g));
        }
        float *dpart = g->seq ? seq_G(g) : dln;
        exec_linear_backward_input(dpart, dqkv, wqkv, BT, D, 3 * Dl);
        block_din(g, din, dout, dpart, dln, xhat, rstd, w, B);
        break;
    }
    case EXEC_TFM_MLP: {
        const int F = g->F / tp_n(g);
        float *xhat = region(g, aux, B, 0), *h1 = region(g, aux, B, 2);
        float *dh1 = region(g, aux, B, 4), *dln = region(g, aux, B, 5);
        float *rstd = region(g, aux, B, 6);
        const float *w1 = w + 2 * D, *w2 = w1 + (int64_t)F * D + F;
        exec_linear_backward_input(dh1, dout_whole(g, dout, B, 0), w2, BT, F, D);
        exec_gelu_backward_input(dh1, dh1, h1, (int64_t)BT * F);
        float *dpart = g->seq ? seq_G(g) : dln;
        exec_linear_backward_input(dpart, dh1, w1, BT, D, F);
        block_din(g, din, dout, dpart, dln, xhat, rstd, w, B);
        break;
    }
    }
}

/* The layer norm's gradient (gamma, beta: dw's first 2 D floats) from
 * dLN(x) and x^ of the rows the worker holds.  With sequence parallelism
 * those are its own tokens: their sum is all-reduced first, in P, so every
 * worker adds the same gradient of all the tokens. */
static void norm_weight(const exec_tfm *g, float *dw, const float *dln, const float *xhat, int B)
{
    const int D = g->D;
    const int64_t rows = (int64_t)B * tl(g);
    if (!g->seq) {
        exec_layernorm_backward_weight(dw, dw + D, dln, xhat, rows, D);
        return;
    }
    float *p = seq_P(g, B);
    memset(p, 0, 2 * (size_t)D * sizeof *p);
    exec_layernorm_backward_weight(p, p + D, dln, xhat, rows, D);
    tp_sum(g, p, 2 * D);
    add_into(dw, p, 2 * D);
}

void exec_tfm_backward_weight(const exec_tfm *g, float *dw, const float *dout,
                              const float *in, const float *aux, int B)
{
    const int T = g->T, D = g->D, BT = B * T;
    switch (g->kind) {
    case EXEC_TFM_PATCH: {
        int K = g->C * g->p * g->p;
        exec_linear_backward_weight(dw, dw + (int64_t)D * K, dout, region(g, aux, B, 0), BT, K,
                                    D);
        break;
    }
    case EXEC_TFM_POS: exec_posembed_backward_weight(dw, dout, B, T * D); break;
    case EXEC_TFM_LAYERNORM:
        exec_layernorm_backward_weight(dw, dw + D, dout, region(g, aux, B, 0), BT, D);
        break;
    case EXEC_TFM_ATTN: {
        /* bo and the layer norm see whole gradients (dout, and dLN(x)
         * after its all-reduce): a split layer's replicated parameters get
         * the same gradient on every worker, so they need no reduction
         * (with sequence parallelism dout and LN(x) are gathered again, and
         * the layer norm's gradient is summed: norm_weight) */
        const int Dl = D / tp_n(g);
        float *dwqkv = dw + 2 * D, *dbqkv = dwqkv + 3 * Dl * D;
        float *dwo = dbqkv + 3 * Dl, *dbo = dwo + D * Dl;
        exec_linear_backward_weight(dwo, dbo, dout_whole(g, dout, B, 1), region(g, aux, B, 4), BT,
                                    Dl, D);
        exec_linear_backward_weight(dwqkv, dbqkv, region(g, aux, B, 5), norm_whole(g, aux, B),
                                    BT, D, 3 * Dl);
        norm_weight(g, dw, region(g, aux, B, 6), region(g, aux, B, 0), B);
        break;
    }
    case EXEC_TFM_MLP: { /* as ATTN: b2 needs no reduction, nor the layer norm without
                          * sequence parallelism */
        const int F = g->F / tp_n(g);
        float *dw1 = dw + 2 * D, *db1 = dw1 + (int64_t)F * D;
        float *dw2 = db1 + F, *db2 = dw2 + (int64_t)D * F;
        exec_linear_backward_weight(dw2, db2, dout_whole(g, dout, B, 1), region(g, aux, B, 3), BT,
                                    F, D);
        exec_linear_backward_weight(dw1, db1, region(g, aux, B, 4), norm_whole(g, aux, B), BT,
                                    D, F);
        norm_weight(g, dw, region(g, aux, B, 5), region(g, aux, B, 0), B);
        break;
    }
    default: break;
    }
    (void)in;
}
