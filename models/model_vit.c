/* model_vit.c - shapes and per-sample costs of the vision transformer's
 * layer kinds (model.h, model_vit_derive; docs/formats.md, "Vision
 * transformer kinds").
 *
 * Tokens are the shape [1, T, D]: T tokens of width D (a 3-D shape, so the
 * loaders and the planner need nothing new).  With N = T D, H heads, F the
 * MLP's hidden width, K = C p^2 the patch size, FLOPs count a
 * multiply-accumulate as two; elementwise counts are stated per element:
 * layer norm 7 forward, 6 input-gradient, 3 weight-gradient (as
 * batchnorm2d); GELU 10 forward and 16 backward (its sigmoid recomputed);
 * softmax 5 forward and 3 backward per score.  Stash is every float the
 * executor's layer keeps for its backward passes (layers_tfm.h), including
 * the inner gradients the blocks' input-gradient pass leaves for their
 * weight-gradient pass.
 */
#include <stdio.h>

#include "model.h"

static int tokens(const model_layer *l, int64_t *T, int64_t *D, char *why, size_t cap)
{
    const model_shape *s = &l->in_shape;
    if (s->ndim != 3 || s->d[0] != 1) {
        char sh[96];
        model_shape_str(s, sh, sizeof sh);
        snprintf(why, cap, "expected tokens [1, T, D], got %s (hint: start with patch_embed)", sh);
        return 0;
    }
    *T = s->d[1];
    *D = s->d[2];
    return 1;
}

int64_t model_vit_derive(model_layer *l, int needs_grad, char *why, size_t cap)
{
    const model_shape *in = &l->in_shape;
    int64_t T = 1, D = in->d[in->ndim - 1];
    const double n = (double)model_shape_elems(in);
    const double g = needs_grad ? 1 : 0;
    l->out_shape = *in;
    switch (l->kind) {
    case MODEL_PATCH_EMBED: {
        const int64_t p = l->kernel;
        if (in->ndim != 3 || in->d[1] % p || in->d[2] % p) {
            char sh[96];
            model_shape_str(in, sh, sizeof sh);
            snprintf(why, cap, "patch %lld does not tile the input %s (hint: an image [C,H,W] with H and W multiples of patch)",
                     (long long)p, sh);
            return -1;
        }
        T = (in->d[1] / p) * (in->d[2] / p);
        D = l->out_features;
        const int64_t K = in->d[0] * p * p;
        if (K > ((int64_t)1 << 31) || D * K > ((int64_t)1 << 40)) {
            snprintf(why, cap, "more than 2^40 parameters (hint: a smaller patch or width)");
            return -1;
        }
        l->out_shape = (model_shape){3, {1, T, D}};
        l->macs = (double)T * (double)K * (double)D;
        l->fwd_flops = 2 * l->macs;
        l->bwd_in_flops = g * 2 * l->macs;
        l->bwd_w_flops = 2 * l->macs + (double)(T * D);
        l->stash_elems = (uint64_t)(2 * n); /* the patches and their gradient */
        return D * K + D;
    }
    case MODEL_LAYERNORM:
        if (in->ndim == 3 && !tokens(l, &T, &D, why, cap)) return -1;
        l->fwd_flops = 7 * n;
        l->bwd_in_flops = g * 6 * n;
        l->bwd_w_flops = 3 * n;
        l->stash_elems = (uint64_t)(n + (double)T);
        return 2 * D;
    case MODEL_GELU:
        l->fwd_flops = 10 * n;
        l->bwd_in_flops = g * 16 * n;
        l->stash_elems = (uint64_t)n;
        return 0;
    default:
        break;
    }
    if (!tokens(l, &T, &D, why, cap)) return -1;
    const double t = (double)T, d = (double)D;
    switch (l->kind) {
    case MODEL_POS_EMBED:
        l->fwd_flops = n;
        l->bwd_in_flops = 0; /* a copy */
        l->bwd_w_flops = n;
        return T * D;
    case MODEL_MEANPOOL:
        l->out_shape = (model_shape){1, {D}};
        l->fwd_flops = n;
        l->bwd_in_flops = g * n;
        return 0;
    case MODEL_ATTENTION: {
        const int64_t H = l->heads;
        if (D % H) {
            snprintf(why, cap, "width %lld is not a multiple of heads %lld (hint: heads must divide the width)",
                     (long long)D, (long long)H);
            return -1;
        }
        const double h = (double)H;
        l->macs = 4 * t * d * d + 2 * t * t * d; /* q k v o projections; scores, context */
        l->fwd_flops = 2 * l->macs + 7 * n + 5 * h * t * t + n;
        l->bwd_in_flops = g * (8 * t * d * d + 8 * t * t * d + 3 * h * t * t + 6 * n + n);
        l->bwd_w_flops = 8 * t * d * d + 4 * n + 3 * n;
        l->stash_elems = (uint64_t)(10 * n + h * t * t + t + t * t);
        return 2 * D + 3 * D * D + 3 * D + D * D + D;
    }
    case MODEL_MLP: {
        const int64_t F = l->out_features;
        const double f = (double)F;
        l->macs = 2 * t * d * f;
        l->fwd_flops = 2 * l->macs + 7 * n + 10 * t * f + n;
        l->bwd_in_flops = g * (2 * l->macs + 16 * t * f + 6 * n + n);
        l->bwd_w_flops = 2 * l->macs + t * (f + d) + 3 * n;
        l->stash_elems = (uint64_t)(3 * n + 3 * t * f + t);
        return 2 * D + 2 * D * F + F + D;
    }
    default:
        snprintf(why, cap, "not a vision transformer kind (hint: a bug)");
        return -1;
    }
}
