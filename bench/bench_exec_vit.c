/* bench_exec_vit.c - `cleave bench exec`'s rows for the vision
 * transformer's linear products (issue 18's speed target).
 *
 * The ViT's linears live inside its patch_embed, attention and mlp layers,
 * whose per-layer times (the profile's) also hold layer norms, GELU and
 * the attention core; so each product is timed here on its own, through
 * the same exec_linear_* calls the layers make, at B T rows (B samples of
 * T tokens): patch embedding, the first attention block's qkv and output
 * projections, the first mlp block's two layers (the other blocks repeat
 * the same shapes) and the classifier.  As for the other kernel rows:
 * 10 untimed calls, then `reps` timed; GFLOP/s of the fastest and of the
 * median call, where calls under 5 us (the classifier's) are timed in
 * groups of back-to-back calls (time_pass says why).  The patch
 * embedding's input gradient is not run in training (it is the first
 * layer) and not timed.  Then, per batch size, the step's split into
 * attention, mlp and the rest (vit_step_shares): what the attention
 * layers cost besides their products.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "base/escape.h"
#include "base/measure.h"
#include "exec/nn/gemm.h"
#include "exec/nn/layers.h"
#include "exec/nn/layers_tfm.h"
#include "exec/nn/tensor.h"
#include "exec/probe/profile_layers.h"
#include "models/model.h"

#define VIT_MAX 8

typedef struct vit_lin {
    char name[MODEL_NAME_MAX + 8];
    int tokens, IC, OC, first; /* rows per sample; first: no input gradient */
    int in_attn;               /* a product of the attention blocks        */
} vit_lin;

static int add_lin(vit_lin *v, int n, const char *layer, const char *part, int T, int IC, int OC,
                   int first, int in_attn)
{
    if (n >= VIT_MAX) return n;
    snprintf(v[n].name, sizeof v[n].name, "%s%s%s", layer, *part ? "." : "", part);
    v[n].tokens = T;
    v[n].IC = IC;
    v[n].OC = OC;
    v[n].first = first;
    v[n].in_attn = in_attn;
    return n + 1;
}

/* the model's distinct linear products, in layer order */
static int vit_linears(const model *m, vit_lin *v)
{
    int n = 0, attn = 0, mlp = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const model_layer *ml = &m->layers[l];
        exec_tfm g;
        if (ml->kind == MODEL_LINEAR)
            n = add_lin(v, n, ml->name, "", 1, (int)ml->in_features, (int)ml->out_features,
                        l == 0, 0);
        else if (!exec_tfm_from_layer(&g, ml)) continue;
        else if (g.kind == EXEC_TFM_PATCH)
            n = add_lin(v, n, ml->name, "", g.T, g.C * g.p * g.p, g.D, l == 0, 0);
        else if (g.kind == EXEC_TFM_ATTN && !attn++) {
            n = add_lin(v, n, ml->name, "qkv", g.T, g.D, 3 * g.D, 0, 1);
            n = add_lin(v, n, ml->name, "out", g.T, g.D, g.D, 0, 1);
        } else if (g.kind == EXEC_TFM_MLP && !mlp++) {
            n = add_lin(v, n, ml->name, "fc1", g.T, g.D, g.F, 0, 0);
            n = add_lin(v, n, ml->name, "fc2", g.T, g.F, g.D, 0, 0);
        }
    }
    return n;
}

static void fill(float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) p[i] = (float)((i * 7919) % 2001 - 1000) * 1e-3f;
}

static void run_pass(int pass, int rows, int IC, int OC, float *x, float *w, float *b, float *y,
                     float *dw)
{
    if (pass == 0) exec_linear_forward(y, x, w, b, rows, IC, OC);
    else if (pass == 1) exec_linear_backward_input(x, y, w, rows, IC, OC);
    else exec_linear_backward_weight(dw, b, y, x, rows, IC, OC);
}

/* Fastest and median seconds of one pass (0 forward, 1 input, 2 weight).
 * A call shorter than VIT_GROUP_S (the head: 0.4 us) is timed in groups
 * of back-to-back calls, each sample the group's time over its calls: on
 * a single call the two clock reads (about 0.02 us) and the clock's 0.01
 * us step were 5% of the head's forward (docs/executor-sgemm.md, "The
 * head's forward and conv1 on Zen 5"). */
#define VIT_GROUP_S 5e-6
static void time_pass(int pass, int rows, int IC, int OC, float *x, float *w, float *b, float *y,
                      float *dw, int reps, double *best, double *med)
{
    double *t = cl_calloc((size_t)reps, sizeof *t), warm = 1;
    for (int r = 0; r < 10; r++) {
        double t0 = exec_now();
        run_pass(pass, rows, IC, OC, x, w, b, y, dw);
        double dt = exec_now() - t0;
        if (dt < warm) warm = dt;
    }
    const int group = warm >= VIT_GROUP_S ? 1 : warm * 64 < VIT_GROUP_S ? 64 : (int)(VIT_GROUP_S / warm) + 1;
    for (int r = 0; r < reps; r++) {
        double t0 = exec_now();
        for (int i = 0; i < group; i++) run_pass(pass, rows, IC, OC, x, w, b, y, dw);
        t[r] = (exec_now() - t0) / group;
    }
    *best = t[0];
    for (int r = 1; r < reps; r++)
        if (t[r] < *best) *best = t[r];
    *med = cl_median(t, reps);
    free(t);
}

/* A training step of the model at batch B, timed by the profile (its
 * per-layer clocks, as `cleave profile`), split by block: the attention
 * layers (each with its layer norm, projections, attention core and
 * residual add), the mlp layers, and the rest (patch and position
 * embedding, final norm, pooling, classifier, loss), each the sum of its
 * layers' forward, input- and weight-gradient medians; then how much of
 * the attention layers' time their linear products take on their own
 * (attn_lin_s: the first block's, from the kernel rows, times the block
 * count), the rest being the attention core, softmax, layer norm and
 * adds.  CSV: a `step` row as the other models' (the step measured without
 * clocks, the profile's sum as its prediction) and one `share` row per
 * part, its seconds per step (the share is seconds over the step row's
 * predicted_s). */
static int vit_step_shares(FILE *csv, const model *m, const char *path, int B, int reps,
                           double attn_lin_s, cl_err *e)
{
    exec_layer_time *t = cl_calloc((size_t)m->n_layers, sizeof *t);
    exec_step_time st;
    int rc = exec_profile_batch(m, path, B, 3, reps, 1, t, &st, e);
    if (rc) {
        free(t);
        return rc;
    }
    double attn = 0, mlp = 0, rest = 0;
    int n_attn = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const double s = t[l].fwd_s + t[l].bwd_in_s + t[l].bwd_w_s;
        if (m->layers[l].kind == MODEL_ATTENTION) attn += s, n_attn++;
        else if (m->layers[l].kind == MODEL_MLP) mlp += s;
        else rest += s;
    }
    free(t);
    const double sum = attn + mlp + rest, lin = attn_lin_s * n_attn;
    printf("  %s batch %d, a training step (the profile's per-layer clocks): forward+backward"
           " %.3f ms\n      (measured without the clocks %.3f ms, the profile's error %+.1f%%):"
           " attention %.3f ms (%.0f%%),\n      mlp %.3f ms (%.0f%%), the rest %.3f ms (%.0f%%);"
           " the attention layers' linear products\n      on their own %.3f ms of their %.3f ms,"
           " the attention core, softmax, layer norms and adds the other %.3f ms\n",
           m->name, B, sum * 1e3, st.fbw_s * 1e3, 100 * (sum - st.fbw_s) / st.fbw_s, attn * 1e3,
           100 * attn / sum, mlp * 1e3, 100 * mlp / sum, rest * 1e3, 100 * rest / sum, lin * 1e3,
           attn * 1e3, (attn - lin) * 1e3);
    char *mn = esc_csv(m->name);
    fprintf(csv, "step,%s,,forward+backward,%d,fbw,%.9f,,,,%.9f,%.5f,,,,,,,,\n", mn, B, st.fbw_s,
            sum, (sum - st.fbw_s) / st.fbw_s);
    const char *part[4] = {"attention", "mlp", "rest", "attention linear products"};
    const double sec[4] = {attn, mlp, rest, lin};
    for (int i = 0; i < 4; i++)
        fprintf(csv, "share,%s,%s,step share,%d,fbw,%.9f,,,,,,,,,,,,,\n", mn, part[i], B, sec[i]);
    free(mn);
    return 0;
}

int exec_bench_vit(FILE *csv, const char *path, double peak, double sgemm, const int *batches,
                   int nb, int reps, int *below, int *judged, cl_err *e)
{
    model m;
    int rc = model_load(&m, path, e);
    if (rc) return rc;
    vit_lin v[VIT_MAX];
    const int n = vit_linears(&m, v);
    static const char *const names[3] = {"fwd", "bwd_in", "bwd_w"};
    for (int k = 0; k < nb; k++) {
        const int B = batches[k];
        printf("  %s batch %d, its linear products on their own (rows = batch x tokens):\n", m.name, B);
        double attn_lin_s = 0; /* the first attention block's products, all passes */
        for (int i = 0; i < n; i++) {
            const int rows = B * v[i].tokens, IC = v[i].IC, OC = v[i].OC;
            float *x = exec_falloc((int64_t)rows * IC), *y = exec_falloc((int64_t)rows * OC),
                  *w = exec_falloc((int64_t)OC * IC), *dw = exec_falloc((int64_t)OC * IC),
                  *b = exec_falloc(OC);
            fill(x, (int64_t)rows * IC);
            fill(y, (int64_t)rows * OC);
            fill(w, (int64_t)OC * IC);
            printf("  %-10s linear %5d", v[i].name, rows);
            for (int p = 0; p < 3; p++) {
                if (p == 1 && v[i].first) {
                    printf("  %-6s %24s", names[p], "-");
                    continue;
                }
                double best, med;
                time_pass(p, rows, IC, OC, x, w, b, y, dw, reps, &best, &med);
                const double flops = 2.0 * rows * IC * OC, gf = flops / best / 1e9,
                             gf_med = flops / med / 1e9, pct = 100 * gf * 1e9 / peak,
                             pct_blas = 100 * gf * 1e9 / sgemm;
                const int met = pct >= 70.0;
                if (v[i].in_attn) attn_lin_s += med;
                *below += !met;
                (*judged)++;
                printf("  %-6s %5.1f %5.1f %3.0f%%%s %3.0f%%", names[p], gf, gf_med, pct,
                       met ? " " : "<", pct_blas);
                char *mn = esc_csv(m.name), *ln = esc_csv(v[i].name);
                fprintf(csv, "kernel,%s,%s,linear,%d,%s,%.9f,%.3f,%.2f,,,,%.3f,%.2f,%d,,,,,\n", mn, ln, B,
                        names[p], med, gf, pct, gf_med, pct_blas, met);
                free(mn);
                free(ln);
            }
            printf("  (%d x %d -> %d)\n", rows, IC, OC);
            free(x);
            free(y);
            free(w);
            free(dw);
            free(b);
        }
        if ((rc = vit_step_shares(csv, &m, path, B, reps, attn_lin_s, e))) break;
    }
    model_free(&m);
    return rc;
}
