/* tfm_model.c - a transformer as a chain of `block` layers (see
 * tfm_model.h).  Per sample = one sequence; s, h, V as in transformer.h. */
#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "models/tfm_model.h"

/* One sequence, one device, no recomputation: the layout the model file's
 * per-sample costs describe (the planner multiplies by the batch). */
static tfm_layout one_device(model_dtype dt)
{
    tfm_layout l = {.t = 1, .sp = 0, .b = 1, .recomp = TFM_RECOMP_NONE,
                    .prec = dt == MODEL_F32 ? TFM_FP32 : dt == MODEL_F16 ? TFM_FP16 : TFM_BF16};
    return l;
}

typedef struct costs {
    double fwd, bwd, bwd_w, params, out_bytes, stash_bytes;
} costs;

/* Token lookup, plus the position add with a learned table.  The backward
 * scatters the output gradient into the table(s): all weight-gradient (the
 * token ids need none).  Stash: the dropout mask, 1 byte per element. */
static costs embedding(const tfm_desc *d, int eb)
{
    double sh = (double)d->seq * (double)d->hidden;
    int learned = d->pos == TFM_POS_LEARNED;
    costs c = {.fwd = learned ? sh : 0, .params = tfm_embed_params(d), .out_bytes = sh * eb,
               .stash_bytes = d->dropout ? sh : 0};
    c.bwd = c.bwd_w = learned ? 2 * sh : sh;
    return c;
}

/* One transformer layer: transformer.h's GEMM FLOPs; the backward is twice
 * the forward, of which the weight products (QKV, projection, MLP) once
 * more are weight-gradient; the stash is Korthikanti's activation count. */
static costs block(const tfm_desc *d, model_dtype dt, int eb)
{
    tfm_layout l = one_device(dt);
    tfm_block_flops f = tfm_block_fwd_flops(d, 1, 1);
    costs c = {.fwd = f.total, .bwd = 2 * f.total, .bwd_w = f.qkv + f.proj + f.mlp,
               .params = tfm_block_params(d),
               .out_bytes = (double)d->seq * (double)d->hidden * eb,
               .stash_bytes = tfm_block_act_bytes(d, &l)};
    return c;
}

/* Final norm, logits (2 s h V) and the loss (5 s V: max, subtract, exp,
 * sum, divide); backward twice the logit product plus one per logit; stash
 * the logit layer's input and the float32 probabilities. */
static costs head(const tfm_desc *d, int eb)
{
    double s = (double)d->seq, h = (double)d->hidden, V = (double)d->vocab;
    double mm = tfm_logit_fwd_flops(d, 1, 1);
    double norm = d->norm == TFM_NORM_LAYER ? TFM_MODEL_LN_FLOPS : TFM_MODEL_RMS_FLOPS;
    costs c = {.fwd = mm + norm * s * h + 5 * s * V, .bwd = 2 * mm + s * V, .bwd_w = mm,
               .params = tfm_head_params(d), .out_bytes = eb,
               .stash_bytes = s * h * eb + s * V * 4};
    return c;
}

tfm_model_sizes tfm_model_sizes_of(const tfm_desc *d, model_dtype dt)
{
    int eb = model_dtype_bytes(dt);
    costs a = embedding(d, eb), b = block(d, dt, eb), c = head(d, eb);
    tfm_model_sizes z = {.out_elems = (double)d->seq * (double)d->hidden,
                         .stash_bytes = a.stash_bytes, .params = tfm_params(d)};
    if (b.stash_bytes > z.stash_bytes) z.stash_bytes = b.stash_bytes;
    if (c.stash_bytes > z.stash_bytes) z.stash_bytes = c.stash_bytes;
    return z;
}

static void set(model_layer *l, const char *name, costs c)
{
    model_block_init(l, name, c.fwd, c.params, c.out_bytes, c.stash_bytes);
    l->blk_bwd_flops = c.bwd;
    l->blk_bwd_w_flops = c.bwd_w;
}

int tfm_model_build(model *m, const tfm_desc *d, model_dtype dt, const char *name,
                    const char *file, cl_err *e)
{
    memset(m, 0, sizeof *m);
    if (d->layers < 1 || d->layers > MODEL_MAX_LAYERS - 2)
        return cl_fail(e, CL_EINPUT, "%s: %lld transformer layers (hint: 1 to %d)", file,
                       (long long)d->layers, MODEL_MAX_LAYERS - 2);
    int eb = model_dtype_bytes(dt), n = (int)d->layers + 2;
    snprintf(m->name, sizeof m->name, "%s", name);
    m->input = (model_shape){1, {d->seq}};
    m->dtype = dt;
    m->n_layers = n;
    m->layers = cl_calloc((size_t)n, sizeof *m->layers);
    set(&m->layers[0], "embedding", embedding(d, eb));
    costs b = block(d, dt, eb);
    for (int i = 1; i <= d->layers; i++) {
        char lname[MODEL_NAME_MAX];
        snprintf(lname, sizeof lname, "layer.%d", i - 1);
        set(&m->layers[i], lname, b);
    }
    set(&m->layers[n - 1], "head", head(d, eb));
    m->layers[n - 1].blk_out_shape = (model_shape){1, {1}};
    m->has_tfm = 1; /* the file says what it was built from (model_tfm.c) */
    m->tfm = *d;
    int rc = model_derive(m, file, e);
    if (rc) model_free(m), memset(m, 0, sizeof *m);
    return rc;
}
