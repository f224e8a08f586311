/* model_tfm.c - the model format's optional "transformer" member: the
 * architecture (models/transformer.h's tfm_desc) a transformer model's
 * block layers were built from (docs/formats.md, "The transformer member").
 *
 * Why it is in the file: the block layers carry one device's costs; to
 * split them over t tensor-parallel ranks (planner/tensor.h) the planner
 * needs the shapes behind them, which the costs alone do not tell. */
#include <math.h>
#include <stdint.h>

#include "base/jsonx.h"
#include <cJSON.h>
#include "models/model.h"

static const char *const pos_names[] = {"learned", "rotary"};
static const char *const norm_names[] = {"layernorm", "rmsnorm"};
static const char *const tfm_members[] = {"layers", "hidden", "heads", "groups", "ffn", "gated",
                                          "seq", "vocab", "tied", "positions", "max_positions",
                                          "norm", "bias", "dropout", NULL};

int model_tfm_read(struct jx *j, const cJSON *root, model *m)
{
    const char *p = "transformer";
    const cJSON *o;
    int rc;
    if ((rc = jx_object(j, root, "", p, 0, &o)) || !o) return rc;
    if ((rc = jx_only(j, o, p, tfm_members))) return rc;
    tfm_desc d = {0};
    int64_t big = (int64_t)1 << 40;
    int pos = 0, norm = 0;
    if ((rc = jx_int(j, o, p, "layers", 1, 1, MODEL_MAX_LAYERS, &d.layers)) ||
        (rc = jx_int(j, o, p, "hidden", 1, 1, big, &d.hidden)) ||
        (rc = jx_int(j, o, p, "heads", 1, 1, big, &d.heads)) ||
        (rc = jx_int(j, o, p, "groups", 1, 1, big, &d.groups)) ||
        (rc = jx_int(j, o, p, "ffn", 1, 1, big, &d.ffn)) ||
        (rc = jx_bool(j, o, p, "gated", 1, &d.gated)) ||
        (rc = jx_int(j, o, p, "seq", 1, 1, big, &d.seq)) ||
        (rc = jx_int(j, o, p, "vocab", 1, 1, big, &d.vocab)) ||
        (rc = jx_bool(j, o, p, "tied", 1, &d.tied)) ||
        (rc = jx_enum(j, o, p, "positions", 1, pos_names, 2, &pos)) ||
        (rc = jx_int(j, o, p, "max_positions", 0, 1, big, &d.positions)) ||
        (rc = jx_enum(j, o, p, "norm", 1, norm_names, 2, &norm)) ||
        (rc = jx_bool(j, o, p, "bias", 1, &d.bias)) ||
        (rc = jx_bool(j, o, p, "dropout", 1, &d.dropout)))
        return rc;
    d.pos = (tfm_pos)pos;
    d.norm = (tfm_norm)norm;
    cl_err e2 = {0};
    if (tfm_check(&d, NULL, &e2))
        return jx_fail(j, p, "%s", e2.msg + (sizeof "transformer: " - 1));
    /* the member must describe these layers, not another model: an
     * embedding, L blocks and a head, with the closed form's parameters */
    if ((int64_t)m->n_layers != d.layers + 2)
        return jx_fail(j, p, "layers %lld, but the model has %d layers, not %lld (hint: an embedding, one block per transformer layer and a head, as cleave import writes them)",
                       (long long)d.layers, m->n_layers, (long long)d.layers + 2);
    double want = tfm_params(&d), have = (double)model_sum(m).params;
    if (want != have)
        return jx_fail(j, p, "describes %.17g parameters, the layers hold %.17g (hint: the member must describe the layers it comes with; cleave import writes both)",
                       want, have);
    m->has_tfm = 1;
    m->tfm = d;
    return CL_OK;
}

void model_tfm_write(cJSON *root, const model *m)
{
    if (!m->has_tfm) return;
    const tfm_desc *d = &m->tfm;
    cJSON *o = cJSON_AddObjectToObject(root, "transformer");
    cJSON_AddNumberToObject(o, "layers", (double)d->layers);
    cJSON_AddNumberToObject(o, "hidden", (double)d->hidden);
    cJSON_AddNumberToObject(o, "heads", (double)d->heads);
    cJSON_AddNumberToObject(o, "groups", (double)d->groups);
    cJSON_AddNumberToObject(o, "ffn", (double)d->ffn);
    cJSON_AddBoolToObject(o, "gated", d->gated);
    cJSON_AddNumberToObject(o, "seq", (double)d->seq);
    cJSON_AddNumberToObject(o, "vocab", (double)d->vocab);
    cJSON_AddBoolToObject(o, "tied", d->tied);
    cJSON_AddStringToObject(o, "positions", pos_names[d->pos]);
    if (d->positions > 0) cJSON_AddNumberToObject(o, "max_positions", (double)d->positions);
    cJSON_AddStringToObject(o, "norm", norm_names[d->norm]);
    cJSON_AddBoolToObject(o, "bias", d->bias);
    cJSON_AddBoolToObject(o, "dropout", d->dropout);
}
