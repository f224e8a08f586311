/* tfm_rank.c - one tensor-parallel rank's model (see tfm_rank.h).  Per
 * sample = one sequence; s, h, V, e (activation bytes) as in transformer.h. */
#include <stdio.h>
#include <string.h>

#include "models/tfm_model.h"
#include "models/tfm_rank.h"

static const char *const recomp_names[] = {"none", "selective", "full"};

const char *tfm_recomp_name(tfm_recomp r)
{
    return (unsigned)r <= TFM_RECOMP_FULL ? recomp_names[r] : "?";
}

int tfm_recomp_from_name(const char *s)
{
    for (int i = 0; i <= TFM_RECOMP_FULL; i++)
        if (!strcmp(s, recomp_names[i])) return i;
    return -1;
}

static tfm_layout layout_of(const tfm_rank_opts *o, model_dtype dt)
{
    tfm_layout l = {.t = o->t, .sp = o->sp, .b = 1, .recomp = o->recomp,
                    .prec = dt == MODEL_F32 ? TFM_FP32 : dt == MODEL_F16 ? TFM_FP16 : TFM_BF16,
                    .fused_attn = o->fused_attn, .fp8 = o->fp8};
    return l;
}

int tfm_rank_check(const model *m, const tfm_rank_opts *o, const char *file, cl_err *e)
{
    if (!m->has_tfm)
        return cl_fail(e, CL_EINPUT,
                       "%s: no \"transformer\" member: tensor parallelism and recomputation need "
                       "the architecture behind the layers (hint: re-import the model with "
                       "`cleave import config.json`, or use --tensor 1 --recompute none)",
                       file);
    const tfm_desc *d = &m->tfm;
    if (d->heads % o->t || d->groups % o->t || d->ffn % o->t)
        return cl_fail(e, CL_EINPUT,
                       "%s: --tensor %d does not divide the %lld heads, %lld key/value groups and "
                       "MLP width %lld (hint: Megatron gives each rank whole heads and an equal "
                       "share of the MLP; pick a common divisor)",
                       file, o->t, (long long)d->heads, (long long)d->groups, (long long)d->ffn);
    if (o->sp && d->seq % o->t)
        return cl_fail(e, CL_EINPUT,
                       "%s: sequence %lld is not a multiple of --tensor %d (hint: sequence "
                       "parallelism splits the sequence over the ranks)",
                       file, (long long)d->seq, o->t);
    int c = tfm_rank_cp(o);
    if (c > 1 && d->seq % (2 * c))
        return cl_fail(e, CL_EINPUT,
                       "%s: sequence %lld is not a multiple of 2 x cp = %d (hint: context parallelism "
                       "cuts each sequence into 2 cp equal chunks, two per rank, to balance the causal "
                       "mask; pick a cp that divides %lld / 2)",
                       file, (long long)d->seq, 2 * c, (long long)d->seq);
    if (c > 1 && o->sp && (d->seq / c) % o->t)
        return cl_fail(e, CL_EINPUT,
                       "%s: a rank's %lld tokens (sequence %lld / cp %d) are not a multiple of --tensor "
                       "%d (hint: sequence parallelism splits them over the tensor-parallel ranks)",
                       file, (long long)(d->seq / c), (long long)d->seq, c, o->t);
    return CL_OK;
}

typedef struct costs {
    double fwd, bwd, bwd_w, params, out_bytes, stash_bytes;
} costs;

/* Context parallelism: a rank holds s/c tokens of each sequence, and its
 * queries meet all s keys, so every per-sequence figure of a layer (the
 * GEMMs and element-wise work on s/c tokens, the attention core on
 * (s/c) x s scores, the stash, the output) is the whole rank's / c; the
 * parameters are replicated.  c = 1 divides by 1.0, which changes no bit. */
static costs per_cp(costs k, const tfm_rank_opts *o)
{
    double c = tfm_rank_cp(o);
    k.fwd /= c, k.bwd /= c, k.bwd_w /= c, k.out_bytes /= c, k.stash_bytes /= c;
    return k;
}

/* Vocabulary-parallel embedding (Megatron's VocabParallelEmbedding): V/t
 * rows of the token table per rank, the position table whole on every
 * rank; the position add and the dropout run on the whole sequence, or on
 * s/t of it with sequence parallelism. */
static costs embedding(const tfm_desc *d, const tfm_rank_opts *o, double e)
{
    double sh = (double)d->seq * (double)d->hidden, t = o->t, sp = o->sp ? t : 1;
    int learned = d->pos == TFM_POS_LEARNED;
    double rows = d->positions > 0 ? (double)d->positions : (double)d->seq;
    costs c = {.fwd = learned ? sh / sp : 0,
               .params = (double)d->vocab * (double)d->hidden / t +
                         (learned ? rows * (double)d->hidden : 0),
               .out_bytes = e * sh / t, .stash_bytes = d->dropout ? sh / sp : 0};
    c.bwd = c.bwd_w = (learned ? 2 * sh : sh) / sp;
    return c;
}

/* One block on one rank: GEMMs / t; the backward twice the forward plus
 * what recomputation runs again (all of the forward, or the attention
 * core), which is input-gradient work (it must finish before B). */
static costs block(const tfm_desc *d, const tfm_rank_opts *o, model_dtype dt, double e)
{
    tfm_layout l = layout_of(o, dt);
    tfm_block_flops f = tfm_block_fwd_flops(d, 1, o->t);
    double again = o->recomp == TFM_RECOMP_FULL ? f.total
                 : o->recomp == TFM_RECOMP_SELECTIVE ? f.score + f.attn_v : 0;
    costs c = {.fwd = f.total, .bwd = 2 * f.total + again, .bwd_w = f.qkv + f.proj + f.mlp,
               .params = tfm_block_params_rank(d, o->t),
               .out_bytes = e * (double)d->seq * (double)d->hidden / o->t,
               .stash_bytes = tfm_block_act_bytes(d, &l)};
    return c;
}

/* Final norm (whole, or on s/t with SP), the logit layer split over the
 * vocabulary (column-parallel: V/t logits per rank) and the
 * vocabulary-parallel loss (5 s V/t); stash: the logit layer's input and
 * the rank's float32 probabilities. */
static costs head(const tfm_desc *d, const tfm_rank_opts *o, double e)
{
    double s = (double)d->seq, h = (double)d->hidden, V = (double)d->vocab, t = o->t;
    double sp = o->sp ? t : 1;
    double mm = tfm_logit_fwd_flops(d, 1, o->t);
    double norm = d->norm == TFM_NORM_LAYER ? TFM_MODEL_LN_FLOPS : TFM_MODEL_RMS_FLOPS;
    double norm_p = d->norm == TFM_NORM_LAYER ? 2 * h : h;
    costs c = {.fwd = mm + norm * s * h / sp + 5 * s * V / t, .bwd = 2 * mm + s * V / t,
               .bwd_w = mm, .params = norm_p + (d->tied ? 0 : V * h / t), .out_bytes = e,
               .stash_bytes = s * h * e / sp + s * V * 4 / t};
    return c;
}

tfm_rank_comm tfm_rank_layer_comm(const tfm_desc *d, model_dtype dt, const tfm_rank_opts *o, int i)
{
    tfm_rank_comm c;
    memset(&c, 0, sizeof c);
    if (o->t <= 1) return c;
    /* with context parallelism the tensor-parallel group works on the
     * rank's s/c tokens */
    double cp = tfm_rank_cp(o), e = model_dtype_bytes(dt);
    double msg = e * (double)d->seq * (double)d->hidden / cp;
    c.fwd.msg = c.bwd.msg = msg;
    if (i == 0) {
        /* the partial lookups are summed (no SP) or summed and scattered
         * over the sequence (SP); the backward needs nothing */
        if (o->sp) c.fwd.rs = 1;
        else c.fwd.ar = 1;
    } else if (i == d->layers + 1) {
        /* the logit layer's input is gathered (SP) or already whole; its
         * input gradient is summed over the ranks; the loss sums three
         * s-vectors of float32 (max, sum of exponentials, target logit) */
        if (o->sp) c.fwd.ag = 1, c.bwd.rs = 1;
        else c.bwd.ar = 1;
        c.fwd.small = 3;
        c.fwd.small_bytes = 4 * (double)d->seq / cp;
    } else {
        tfm_layout l = layout_of(o, dt);
        tfm_tp_comm b = tfm_block_tp_comm(d, &l);
        c.fwd.ar = b.fwd_allreduce, c.fwd.ag = b.fwd_allgather, c.fwd.rs = b.fwd_reducescatter;
        c.bwd.ar = b.bwd_allreduce, c.bwd.ag = b.bwd_allgather, c.bwd.rs = b.bwd_reducescatter;
    }
    return c;
}

tfm_rank_ring tfm_rank_kv_ring(const tfm_desc *d, model_dtype dt, const tfm_rank_opts *o)
{
    tfm_rank_ring r = {0, 0, 0};
    int c = tfm_rank_cp(o);
    if (c <= 1) return r;
    /* the rank's s/c tokens of K and V, of the g/a key/value heads this
     * tensor-parallel rank holds */
    double kv = (double)d->hidden * (double)d->groups / (double)d->heads / o->t;
    r.steps = c - 1;
    r.fwd_bytes = 2.0 * model_dtype_bytes(dt) * ((double)d->seq / c) * kv;
    r.bwd_bytes = 2 * r.fwd_bytes;
    return r;
}

double tfm_rank_coll_s(const tfm_rank_coll *c, int t, double b, double bw, double lat)
{
    if (t <= 1) return 0;
    double steps1 = t - 1, piece = b * c->msg / t, small = b * c->small_bytes / t;
    return (2 * c->ar + c->ag + c->rs) * steps1 * (lat + piece / bw) +
           2 * c->small * steps1 * (lat + small / bw);
}

static void set(model_layer *l, const char *name, costs c, double out_elems)
{
    model_block_init(l, name, c.fwd, c.params, c.out_bytes, c.stash_bytes);
    l->blk_bwd_flops = c.bwd;
    l->blk_bwd_w_flops = c.bwd_w;
    l->blk_out_shape = (model_shape){1, {(int64_t)out_elems}};
}

int tfm_rank_model(model *out, const model *m, const tfm_rank_opts *o, const char *file, cl_err *e)
{
    memset(out, 0, sizeof *out);
    const tfm_desc *d = &m->tfm;
    int n = (int)d->layers + 2;
    double eb = model_dtype_bytes(m->dtype), sh = (double)d->seq * (double)d->hidden / tfm_rank_cp(o);
    snprintf(out->name, sizeof out->name, "%s", m->name);
    out->input = m->input;
    out->dtype = m->dtype;
    out->unit = m->unit;
    out->n_layers = n;
    out->layers = cl_calloc((size_t)n, sizeof *out->layers);
    set(&out->layers[0], m->layers[0].name, per_cp(embedding(d, o, eb), o), sh / o->t);
    costs b = per_cp(block(d, o, m->dtype, eb), o);
    for (int i = 1; i <= d->layers; i++) set(&out->layers[i], m->layers[i].name, b, sh / o->t);
    costs hd = per_cp(head(d, o, eb), o);
    hd.out_bytes = eb; /* the loss, one element whatever the tokens */
    set(&out->layers[n - 1], m->layers[n - 1].name, hd, 1);
    int rc = model_derive(out, file, e);
    if (rc) model_free(out), memset(out, 0, sizeof *out);
    return rc;
}
