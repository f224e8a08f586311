/* test_exec_tfm.c - the vision transformer's layers (exec/nn/layers_tfm.h)
 * against naive double-precision references written here, with the
 * finite-difference harness of test_exec_layers.c (fd_layer.h): forward
 * agreement, input and weight gradients each against central differences
 * (step 1e-5, double) of L = sum_j r_j y_j.
 *
 * The references (tfm_ref.c) use direct loops and the textbook formulas,
 * not the executor's arrangement.  Sizes are small and ragged (5 tokens, width 8 or 12, 2 or
 * 3 heads) so a mixed-up stride or head offset shows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/nn/layers_tfm.h"
#include "exec/nn/tensor.h"
#include "fd_layer.h"
#include "test.h"
#include "tfm_ref.h"

typedef struct { exec_tfm g; int B; float *aux; } tfm_ctx;

static void tfm_ref(double *y, const double *x, const double *w, void *vc)
{
    const tfm_ctx *c = vc;
    tfm_ref_eval(y, x, w, &c->g, c->B);
}

/* -------------------------------------------------- the executor's calls */

static void tfm_fwd(float *y, const float *x, const float *w, void *vc)
{
    tfm_ctx *c = vc;
    exec_tfm_forward(&c->g, y, x, w, c->aux, c->B);
}
static void tfm_bin(float *dx, const float *dy, const float *x, const float *w, const float *y,
                    void *vc)
{
    tfm_ctx *c = vc;
    (void)y;
    exec_tfm_backward_input(&c->g, dx, dy, x, w, c->aux, c->B);
}
/* For the blocks this reads the inner gradients the input-gradient call
 * just left in aux (the harness calls it second, as the net does). */
static void tfm_bw(float *dw, const float *dy, const float *x, const float *w, void *vc)
{
    tfm_ctx *c = vc;
    (void)w;
    exec_tfm_backward_weight(&c->g, dw, dy, x, c->aux, c->B);
}

static void tfm_case(const char *name, exec_tfm g, int B, double tol)
{
    g.scratch = exec_falloc(B * exec_tfm_scratch_floats(&g)); /* full recomputation's */
    tfm_ctx c = {g, B, exec_falloc(B * exec_tfm_aux_floats(&g) + exec_tfm_aux_fixed(&g))};
    int64_t nx = (int64_t)B * g.T * g.D, ny = nx;
    if (g.kind == EXEC_TFM_PATCH) nx = (int64_t)B * g.C * g.Hh * g.Ww;
    if (g.kind == EXEC_TFM_MEANPOOL) ny = (int64_t)B * g.D;
    int64_t nw = exec_tfm_params(&g);
    layer_case lc = {name, nx, nw, ny, tol, 1e-5, &c, tfm_ref, tfm_fwd, tfm_bin,
                     nw ? tfm_bw : NULL, 0, 1};
    check_layer(&lc);
    free(c.aux);
    free(g.scratch);
}

static void test_tfm_simple(void)
{
    tfm_case("patch_embed 2x6x4 image, 2x2 patches, width 5",
             (exec_tfm){.kind = EXEC_TFM_PATCH, .T = 6, .D = 5, .C = 2, .Hh = 6, .Ww = 4, .p = 2},
             3, 1e-4);
    tfm_case("patch_embed 1x28x28 image, 7x7 patches (the model's), width 4",
             (exec_tfm){.kind = EXEC_TFM_PATCH, .T = 16, .D = 4, .C = 1, .Hh = 28, .Ww = 28, .p = 7},
             1, 1e-4);
    tfm_case("pos_embed 5 tokens, width 6", (exec_tfm){.kind = EXEC_TFM_POS, .T = 5, .D = 6}, 3,
             1e-6);
    tfm_case("layernorm 5 tokens, width 12",
             (exec_tfm){.kind = EXEC_TFM_LAYERNORM, .T = 5, .D = 12}, 2, 1e-4);
    tfm_case("layernorm features [7]", (exec_tfm){.kind = EXEC_TFM_LAYERNORM, .T = 1, .D = 7}, 4,
             1e-4);
    tfm_case("gelu 5 x 6", (exec_tfm){.kind = EXEC_TFM_GELU, .T = 5, .D = 6}, 2, 1e-4);
    tfm_case("meanpool 5 tokens, width 6", (exec_tfm){.kind = EXEC_TFM_MEANPOOL, .T = 5, .D = 6},
             3, 1e-6);
}

static void test_tfm_blocks(void)
{
    tfm_case("attention block: 5 tokens, width 8, 2 heads",
             (exec_tfm){.kind = EXEC_TFM_ATTN, .T = 5, .D = 8, .H = 2}, 2, 1e-4);
    tfm_case("attention block: 4 tokens, width 12, 3 heads, batch 1",
             (exec_tfm){.kind = EXEC_TFM_ATTN, .T = 4, .D = 12, .H = 3}, 1, 1e-4);
    tfm_case("attention block recomputing its probabilities: 5 tokens, width 8, 2 heads, batch 3",
             (exec_tfm){.kind = EXEC_TFM_ATTN, .T = 5, .D = 8, .H = 2, .recompute = 1}, 3, 1e-4);
    tfm_case("attention block recomputing everything from its input: 5 x 8, 2 heads, batch 3",
             (exec_tfm){.kind = EXEC_TFM_ATTN, .T = 5, .D = 8, .H = 2, .recompute = 2}, 3, 1e-4);
    tfm_case("mlp block recomputing everything from its input: 5 x 6, hidden 10, batch 2",
             (exec_tfm){.kind = EXEC_TFM_MLP, .T = 5, .D = 6, .F = 10, .recompute = 2}, 2, 1e-4);
    tfm_case("mlp block: 5 tokens, width 6, hidden 10",
             (exec_tfm){.kind = EXEC_TFM_MLP, .T = 5, .D = 6, .F = 10}, 2, 1e-4);
}

TEST_SUITE(exec_tfm)
{
    test_add_suite("exec_tfm");
    test_add("patch and position embedding, layernorm, gelu, meanpool vs finite differences",
             test_tfm_simple);
    test_add("attention and mlp blocks (pre-norm, residual) vs finite differences",
             test_tfm_blocks);
}
