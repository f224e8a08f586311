/* test_exec_tp.c - tensor parallelism executed on threads
 * (exec/nn/tfm_split.c, exec/run/tp_group.c, exec/run/tp_team.c).
 *
 * A split attention or mlp layer run by 2 and 4 threads, one per rank:
 * every rank ends each pass with the same bits (the all-reduce sums in rank
 * order), its forward and the gradients gathered from the shards pass the
 * finite-difference check against the unsplit double reference
 * (tfm_ref.c), and its forward equals the unsplit layer's to a bound on
 * the reordered row-parallel sum.  Then a whole ViT trained for k steps on
 * 2 and 4 workers against the sequential trainer, the replicated tensors
 * identical on every worker, the memory per worker, and the command.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/nn/data.h"
#include "exec/nn/layers_tfm.h"
#include "exec/nn/net.h"
#include "exec/nn/tensor.h"
#include "exec/run/tp_group.h"
#include "exec/run/tp_team.h"
#include "exec/run/train.h"
#include "models/model.h"
#include <signal.h>

#include "fd_layer.h"
#include "test_proc.h"
#include "test.h"
#include "tfm_ref.h"

#define U 0x1p-24 /* float's unit roundoff */

enum { MAXW = 4 };

/* ------------------------------------------------- a split layer, by hand */

/* Layer g split over n threads, one per rank; each pass runs on every rank
 * at once (the all-reduces need them all). */
typedef struct split {
    exec_tfm g; /* unsplit */
    int B, n;
    exec_tp_group *grp;
    exec_tfm gs[MAXW];
    float *w[MAXW], *dw[MAXW], *aux[MAXW], *y[MAXW], *dx[MAXW];
    int64_t nws; /* parameters of a shard */
    int pass;    /* 0 forward, 1 input gradient, 2 weight gradient */
    const float *x, *dy;
} split;

typedef struct rank_arg {
    split *s;
    int r;
} rank_arg;

static void *rank_main(void *p)
{
    rank_arg *a = p;
    split *s = a->s;
    const int r = a->r;
    if (s->pass == 0) exec_tfm_forward(&s->gs[r], s->y[r], s->x, s->w[r], s->aux[r], s->B);
    else if (s->pass == 1)
        exec_tfm_backward_input(&s->gs[r], s->dx[r], s->dy, s->x, s->w[r], s->aux[r], s->B);
    else exec_tfm_backward_weight(&s->gs[r], s->dw[r], s->dy, s->x, s->aux[r], s->B);
    return NULL;
}

static void run_pass(split *s, int pass, const float *x, const float *dy)
{
    s->pass = pass;
    s->x = x;
    s->dy = dy;
    pthread_t th[MAXW];
    rank_arg a[MAXW];
    for (int r = 0; r < s->n; r++) {
        a[r] = (rank_arg){s, r};
        if (pthread_create(&th[r], NULL, rank_main, &a[r])) abort();
    }
    for (int r = 0; r < s->n; r++) pthread_join(th[r], NULL);
}

static void split_init(split *s, exec_tfm g, int B, int n)
{
    memset(s, 0, sizeof *s);
    s->g = g;
    s->B = B;
    s->n = n;
    const int64_t ny = (int64_t)B * g.T * g.D;
    s->grp = exec_tp_group_create(n, ny);
    for (int r = 0; r < n; r++) {
        s->gs[r] = g;
        CU_ASSERT(exec_tfm_split(&s->gs[r], exec_tp_group_comm(s->grp, r)));
        s->nws = exec_tfm_params(&s->gs[r]);
        s->w[r] = exec_falloc(s->nws);
        s->dw[r] = exec_falloc(s->nws);
        s->aux[r] = exec_falloc(B * exec_tfm_aux_floats(&s->gs[r]));
        s->y[r] = exec_falloc(ny);
        s->dx[r] = exec_falloc(ny);
    }
}

static void split_free(split *s)
{
    for (int r = 0; r < s->n; r++) {
        free(s->w[r]);
        free(s->dw[r]);
        free(s->aux[r]);
        free(s->y[r]);
        free(s->dx[r]);
    }
    exec_tp_group_destroy(s->grp);
}

/* Every rank holds the same bits in out[r][0 .. n) */
static int same_on_all(const split *s, float *const *out, int64_t off, int64_t n)
{
    int same = 1;
    for (int r = 1; r < s->n; r++)
        same &= memcmp(out[r] + off, out[0] + off, (size_t)n * sizeof(float)) == 0;
    return same;
}

static void sp_fwd(float *y, const float *x, const float *w, void *vc)
{
    split *s = vc;
    for (int r = 0; r < s->n; r++) exec_tfm_shard(&s->gs[r], (float *)w, s->w[r], 0);
    run_pass(s, 0, x, NULL);
    const int64_t ny = (int64_t)s->B * s->g.T * s->g.D;
    CU_ASSERT(same_on_all(s, s->y, 0, ny));
    memcpy(y, s->y[0], (size_t)ny * sizeof *y);
}

static void sp_bin(float *dx, const float *dy, const float *x, const float *w, const float *y,
                   void *vc)
{
    split *s = vc;
    (void)w, (void)y;
    run_pass(s, 1, x, dy);
    const int64_t nx = (int64_t)s->B * s->g.T * s->g.D;
    CU_ASSERT(same_on_all(s, s->dx, 0, nx));
    memcpy(dx, s->dx[0], (size_t)nx * sizeof *dx);
}

/* The shards' weight gradients gathered; the replicated parameters' (layer
 * norm first, the last bias at the end) must be the same on every rank. */
static void sp_bw(float *dw, const float *dy, const float *x, const float *w, void *vc)
{
    split *s = vc;
    (void)w;
    for (int r = 0; r < s->n; r++) memset(s->dw[r], 0, (size_t)s->nws * sizeof(float));
    run_pass(s, 2, x, dy);
    const int64_t D = s->g.D;
    CU_ASSERT(same_on_all(s, s->dw, 0, 2 * D));
    CU_ASSERT(same_on_all(s, s->dw, s->nws - D, D));
    exec_tfm whole = s->g;
    const int64_t nw = exec_tfm_params(&whole);
    float *g = exec_falloc(nw);
    for (int r = 0; r < s->n; r++) exec_tfm_shard(&s->gs[r], g, s->dw[r], 1);
    for (int64_t i = 0; i < nw; i++) dw[i] += g[i];
    free(g);
}

static void sp_ref(double *y, const double *x, const double *w, void *vc)
{
    const split *s = vc;
    tfm_ref_eval(y, x, w, &s->g, s->B);
}

/* The finite-difference harness of the layer suites on the split layer:
 * its forward against the unsplit double reference, the input gradient and
 * the gathered weight gradient against central differences of it. */
static void fd_split(const char *name, exec_tfm g, int B, int n)
{
    split s;
    split_init(&s, g, B, n);
    const int64_t nx = (int64_t)B * g.T * g.D;
    check_layer(&(layer_case){.name = name, .nx = nx, .nw = exec_tfm_params(&g), .ny = nx,
                              .tol = 1e-4, .fwd_tol = 1e-5, .ctx = &s, .ref = sp_ref,
                              .fwd = sp_fwd, .bwd_in = sp_bin, .bwd_w = sp_bw, .repeat = 1});
    split_free(&s);
}

static const exec_tfm ATTN_8_4 = {.kind = EXEC_TFM_ATTN, .T = 5, .D = 8, .H = 4};
static const exec_tfm MLP_6_8 = {.kind = EXEC_TFM_MLP, .T = 5, .D = 6, .F = 8};

static void test_tp_fd(void)
{
    fd_split("attention 5 tokens, width 8, 4 heads, over 2", ATTN_8_4, 2, 2);
    fd_split("attention 5 tokens, width 8, 4 heads, over 4 (one head each)", ATTN_8_4, 2, 4);
    fd_split("mlp 5 tokens, width 6, hidden 8, over 2", MLP_6_8, 2, 2);
    fd_split("mlp 5 tokens, width 6, hidden 8, over 4", MLP_6_8, 3, 4);
}

/* ------------------------------------------ split forward against unsplit */

/* y_split against y_unsplit for the same weights.  Both compute
 * y = x + b + sum_k a_k W_ik, a the input of the row-parallel product (ctx,
 * or GELU(h)); the column-parallel product and the attention core before
 * it compute each element from the same operands in the same order either
 * way (a GEMM column is its own dot product over the D inputs; each head's
 * core is the same small products), so only the order of that sum changes:
 * one chain of K = D (or F) products, or T chains of K / T added in rank
 * order.  Each is within gamma_{K+2} S of the exact sum (Higham, "Accuracy
 * and Stability of Numerical Algorithms", 3.1; gamma_m = m u / (1 - m u),
 * K products, the bias and the residual), S = |x| + |b| + sum_k |a_k W_ik|,
 * so they differ by at most 2 gamma_{K+2} S; S comes from the double
 * reference's a (tfm_ref_inner), 1% added for its distance to the float
 * one. */
static void split_vs_whole(const char *name, exec_tfm g, int B, int n)
{
    const int D = g.D, K = g.kind == EXEC_TFM_ATTN ? D : g.F;
    const int64_t R = (int64_t)B * g.T, ny = R * D, nw = exec_tfm_params(&g);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 7);
    float *x = exec_falloc(ny), *w = exec_falloc(nw), *y = exec_falloc(ny);
    double *xd = cl_malloc((size_t)ny * sizeof *xd), *wd = cl_malloc((size_t)nw * sizeof *wd);
    double *a = cl_malloc((size_t)(R * K) * sizeof *a);
    for (int64_t i = 0; i < ny; i++) xd[i] = x[i] = (float)(2 * gsl_rng_uniform(rng) - 1);
    exec_tfm_init(&g, w, rng); /* Glorot weights, gamma 1 */
    for (int64_t i = 0; i < nw; i++) { /* biases and beta nonzero too */
        if (w[i] == 0) w[i] = (float)(0.1 * (2 * gsl_rng_uniform(rng) - 1));
        wd[i] = w[i];
    }
    float *aux = exec_falloc(B * exec_tfm_aux_floats(&g));
    exec_tfm_forward(&g, y, x, w, aux, B);
    split s;
    split_init(&s, g, B, n);
    float *ys = exec_falloc(ny);
    sp_fwd(ys, x, w, &s);
    tfm_ref_inner(a, xd, wd, &g, B);
    const double *W = wd + nw - D - (int64_t)D * K, *b = wd + nw - D; /* Wo or W2, then bo or b2 */
    const double gamma = (K + 2) * U / (1 - (K + 2) * U);
    double worst = 0; /* largest |difference| / bound */
    int64_t differ = 0;
    for (int64_t r = 0; r < R; r++)
        for (int i = 0; i < D; i++) {
            double S = fabs(xd[r * D + i]) + fabs(b[i]);
            for (int k = 0; k < K; k++) S += fabs(a[r * K + k] * W[(int64_t)i * K + k]);
            double bound = 2 * gamma * S * 1.01, d = fabs((double)ys[r * D + i] - y[r * D + i]);
            worst = fmax(worst, d / bound);
            differ += d > 0;
        }
    printf("\n    %s: %lld of %lld outputs differ, largest difference %.3f of the bound ", name,
           (long long)differ, (long long)ny, worst);
    CU_ASSERT(worst <= 1);
    split_free(&s);
    free(x); free(w); free(y); free(ys); free(aux); free(xd); free(wd); free(a);
    gsl_rng_free(rng);
}

static void test_tp_split_vs_whole(void)
{
    split_vs_whole("attention 5 x 8, 4 heads, over 2", ATTN_8_4, 3, 2);
    split_vs_whole("attention 5 x 8, 4 heads, over 4", ATTN_8_4, 3, 4);
    split_vs_whole("mlp 5 x 6, hidden 8, over 4", MLP_6_8, 3, 4);
    const exec_tfm attn = {.kind = EXEC_TFM_ATTN, .T = 16, .D = 64, .H = 4};
    const exec_tfm mlp = {.kind = EXEC_TFM_MLP, .T = 16, .D = 64, .F = 128};
    split_vs_whole("the ViT's attention (16 x 64, 4 heads), batch 8, over 2", attn, 8, 2);
    split_vs_whole("the ViT's attention, over 4", attn, 8, 4);
    split_vs_whole("the ViT's mlp (16 x 64, hidden 128), batch 8, over 2", mlp, 8, 2);
    split_vs_whole("the ViT's mlp, over 4", mlp, 8, 4);
}

/* ------------------------------------------- training: t workers vs one */

enum { TR_B = 16, TR_K = 3 };

/* models/fmnist-vit.json after TR_K steps of TR_B synthetic samples each
 * on `tensor` workers (1: the sequential trainer), gathered whole; *start
 * gets the weights it started from.  On the way: the replicated tensors
 * hold the same bits on every worker (their gradients are the same on
 * each, so they take no all-reduce). */
static exec_net *train_steps(const model *m, const exec_data *d, int tensor, int recompute,
                             exec_net **start)
{
    exec_train_opts o;
    exec_train_defaults(&o);
    o.batch = TR_B;
    o.tensor = tensor;
    o.recompute = recompute;
    exec_trainer *t;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_trainer_create(&t, m, "models/fmnist-vit.json", &o, &e), CL_OK);
    *start = exec_trainer_gather(t);
    float *x = exec_falloc((int64_t)TR_B * d->dim);
    int32_t *y = cl_malloc(TR_B * sizeof *y);
    int64_t idx[TR_B];
    for (int k = 0; k < TR_K; k++) {
        for (int b = 0; b < TR_B; b++) idx[b] = k * TR_B + b;
        exec_data_gather(d, idx, TR_B, x, y);
        exec_trainer_step(t, x, y, TR_B);
    }
    exec_tp_team *team = exec_trainer_team(t);
    CU_ASSERT((team != NULL) == (tensor > 1));
    for (int r = 1; r < tensor; r++) {
        exec_net *n0 = exec_tp_team_net(team, 0), *nr = exec_tp_team_net(team, r);
        int same = 1, checked = 0;
        for (int k = 0; k < exec_net_n_tensors(n0); k++) {
            const exec_tensor *a = exec_net_tensor(n0, k), *b = exec_net_tensor(nr, k);
            const exec_tfm *g = exec_net_tfm(n0, a->layer);
            if (g && g->tp) continue;
            same &= a->n == b->n && memcmp(a->data, b->data, (size_t)a->n * sizeof(float)) == 0;
            checked++;
        }
        CU_ASSERT(same && checked == 5); /* patch, pos, norm, head weight and bias */
    }
    exec_net *whole = exec_trainer_gather(t);
    free(x);
    free(y);
    exec_trainer_destroy(t);
    return whole;
}

/* models/fmnist-vit.json and TR_K minibatches of synthetic samples. */
static void vit_and_data(model *m, exec_data *d)
{
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(m, "models/fmnist-vit.json", &e), CL_OK);
    exec_data_synthetic(d, TR_K * TR_B, 1, 28, 28, 10, 3, 0);
}

/* The tolerance: splitting changes the order of the row-parallel sums only
 * (split_vs_whole): at most K + 2 terms (K = 128, the MLP's hidden width,
 * the longest), each sum within 2 gamma_{K+2} of the unsplit one relative
 * to its terms.  Each step's update lr v is made of such sums and of the
 * rounding of p - lr v at the scale of the parameters, so after k steps a
 * parameter may differ by k 2 gamma_{K+2} P, P the tensor's largest |p|.
 * That takes the scale of a sum's terms to be that of the parameters, a
 * model rather than a theorem (the loss gradient's terms are not
 * bounded by the weights); what it measures is printed: the largest
 * difference is a unit or two in the last place of p, 0.3% of it. */
static void test_tp_train(void)
{
    model m;
    exec_data d = {0};
    vit_and_data(&m, &d);
    exec_net *p0, *ref = train_steps(&m, &d, 1, 0, &p0);
    const int K = 128;
    const double gamma = (K + 2) * U / (1 - (K + 2) * U);
    for (int tensor = 2; tensor <= 4; tensor *= 2) {
        exec_net *tp0, *got = train_steps(&m, &d, tensor, 0, &tp0);
        int64_t n;
        const float *a0 = exec_net_params(p0, &n), *b0 = exec_net_params(tp0, NULL);
        CU_ASSERT(memcmp(a0, b0, (size_t)n * sizeof *a0) == 0); /* the same start */
        double worst = 0, moved = 0;
        for (int k = 0; k < exec_net_n_tensors(ref); k++) {
            const exec_tensor *r = exec_net_tensor(ref, k), *g = exec_net_tensor(got, k),
                              *s = exec_net_tensor(p0, k);
            double P = 0, dmax = 0;
            for (int64_t i = 0; i < r->n; i++) {
                P = fmax(P, fabs((double)r->data[i]));
                dmax = fmax(dmax, fabs((double)g->data[i] - r->data[i]));
                moved = fmax(moved, fabs((double)r->data[i] - s->data[i]) / (fabs(s->data[i]) + 1e-3));
            }
            worst = fmax(worst, dmax / (TR_K * 2 * gamma * P));
        }
        printf("\n    %d workers: largest difference %.4f of the bound ", tensor, worst);
        CU_ASSERT(worst <= 1);
        CU_ASSERT(moved > 1e-3); /* the steps moved the weights: the check compared something */
        exec_net_destroy(got);
        exec_net_destroy(tp0);
    }
    exec_net_destroy(ref);
    exec_net_destroy(p0);
    exec_data_free(&d);
    model_free(&m);
}

/* Recomputation repeats the same calls on the same inputs: selective (the
 * attention probabilities) and full (all of a block from its input) give
 * the same weights as keeping everything, bit for bit, alone and with
 * tensor parallelism. */
static void test_tp_recompute(void)
{
    model m;
    exec_data d = {0};
    vit_and_data(&m, &d);
    for (int tensor = 1; tensor <= 2; tensor++) {
        exec_net *s0, *a = train_steps(&m, &d, tensor, 0, &s0);
        int64_t n;
        const float *pa = exec_net_params(a, &n), *p0 = exec_net_params(s0, NULL);
        CU_ASSERT(memcmp(pa, p0, (size_t)n * sizeof *pa) != 0); /* the steps moved them */
        for (int mode = 1; mode <= 2; mode++) {
            exec_net *s1, *b = train_steps(&m, &d, tensor, mode, &s1);
            CU_ASSERT(memcmp(pa, exec_net_params(b, NULL), (size_t)n * sizeof *pa) == 0);
            exec_net_destroy(b);
            exec_net_destroy(s1);
        }
        exec_net_destroy(a);
        exec_net_destroy(s0);
    }
    exec_data_free(&d);
    model_free(&m);
}

/* Worker memory: the parameter block holds exactly the shard's floats
 * (each tensor padded to 16), worked out here from the layer shapes; the
 * all-reduce buffer is one (B, T, D) activation; activations shrink as the
 * heads and hidden units spread over more workers. */
static void test_tp_memory(void)
{
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(&m, "models/fmnist-vit.json", &e), CL_OK);
    const int64_t D = 64, F = 128, Tk = 16, B = 8;
    double stash_prev = 0, stash_none = 0;
    for (int run = 0; run < 9; run++) {
        const int tensor = 1 << (run / 3), recompute = run % 3;
        /* floats per sample each attention and mlp layer keeps without
         * recomputation: x^, LN(x), q k v, probabilities, ctx, their
         * gradients, dLN(x), 1/sigma, softmax scratch; x^, LN(x), h, GELU(h),
         * its gradient, dLN(x), 1/sigma */
        const double auxA = 3 * Tk * D + 7 * Tk * D / tensor + 4 / tensor * Tk * Tk + Tk + Tk * Tk;
        const double auxM = 3 * Tk * D + 3 * Tk * F / tensor + Tk;
        exec_train_opts o;
        exec_train_defaults(&o);
        o.batch = (int)B;
        o.tensor = tensor;
        o.recompute = recompute;
        exec_trainer *t;
        CU_ASSERT_EQUAL_FATAL(exec_trainer_create(&t, &m, "m", &o, &e), CL_OK);
        const int64_t attn = 2 * D + 4 * D * D / tensor + 3 * D / tensor + D;
        const int64_t mlp = 2 * D + 2 * D * F / tensor + F / tensor + D;
        const int64_t floats = exec_pad_floats(D * 49 + D) + exec_pad_floats(Tk * D) +
                               4 * (exec_pad_floats(attn) + exec_pad_floats(mlp)) +
                               exec_pad_floats(2 * D) + exec_pad_floats(10 * D) +
                               exec_pad_floats(10);
        for (int r = 0; r < tensor; r++) {
            sim_mem mm;
            exec_trainer_mem(t, r, &mm);
            CU_ASSERT_EQUAL(mm.weights, (double)floats * 4);
            CU_ASSERT(mm.grads == mm.weights && mm.optim == mm.weights);
            CU_ASSERT_EQUAL(mm.buffers, tensor > 1 ? (double)(B * Tk * D * 4) : 0);
            if (r == 0 && !recompute) {
                CU_ASSERT(tensor == 1 || mm.stash < stash_prev);
                stash_prev = stash_none = mm.stash;
            } else if (r == 0 && recompute == 1) { /* 4 attention layers keep 1 sample's
                                                     * probabilities, not B */
                CU_ASSERT_EQUAL(stash_none - mm.stash, 4.0 * (B - 1) * (4 / tensor) * Tk * Tk * 4);
            } else if (r == 0) { /* 8 blocks keep their input alone; one scratch for the largest */
                CU_ASSERT_EQUAL(stash_none - mm.stash,
                                4.0 * B * (4 * (auxA + auxM) - 8 * Tk * D - fmax(auxA, auxM)));
            }
        }
        exec_trainer_destroy(t);
    }
    model_free(&m);
}

/* ------------------------------------------------------------ the command */

static void test_tp_cli(void)
{
    const char *vit = "train --model models/fmnist-vit.json --synthetic 64 --batch 16 --epochs 1";
    char args[2048], *out = NULL, *err = NULL;
    /* refusals: one line, exit 2, nothing on stdout */
    const char *bad[][2] = {
        {"--tensor 3", "layers[2] (attn1): --tensor 3 does not divide its 4 heads (hint: --tensor 1, 2 or 4"},
        {"--tensor 8", "--tensor 8 does not divide its 4 heads"},
    };
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "%s %s", vit, bad[i][0]);
        test_cli_refused(args, bad[i][1]);
    }
    CU_ASSERT_EQUAL(test_run_cli("train --model models/fmnist-mlp.json --synthetic 64 --tensor 2",
                                 &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "splits attention and mlp layers, and this model has none"));
    free(out);
    free(err);
    /* a run: the header names the threads, the memory table has a row per
     * worker; the same epoch as without --tensor to the printed digits */
    double loss[2];
    for (int tensor = 1; tensor <= 2; tensor++) {
        snprintf(args, sizeof args, "%s --tensor %d", vit, tensor);
        CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, &err), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, tensor == 1 ? ", 1 thread\n" : ", tensor parallel over 2 threads\n"));
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "memory per worker"));
        CU_ASSERT_EQUAL(strstr(out, "\n     1 ") != NULL, tensor == 2);
        CU_ASSERT_EQUAL(strstr(out, "\nwaited in all-reduces for the other workers, s: worker 0 ") != NULL,
                        tensor == 2);
        const char *ep = strstr(out, "\n    1 ");
        CU_ASSERT_FATAL(ep && sscanf(ep, "%*d %lf", &loss[tensor - 1]) == 1);
        free(out);
        free(err);
    }
    CU_ASSERT(fabs(loss[0] - loss[1]) <= 1e-4 && loss[0] > 0);
    /* --save-weights gathers the shards: the whole model's tensors, in the
     * same file layout as sequential training's, with nearby values */
    char dir_files[2][512];
    char *dir = test_scratch(sizeof dir_files[0], "t1.w", dir_files[0], "t2.w", dir_files[1], NULL);
    long len[2] = {0, 0};
    unsigned char *buf[2];
    for (int tensor = 1; tensor <= 2; tensor++) {
        snprintf(args, sizeof args, "%s --tensor %d --save-weights %s", vit, tensor,
                 dir_files[tensor - 1]);
        CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
        FILE *f = fopen(dir_files[tensor - 1], "rb");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        buf[tensor - 1] = cl_malloc(1 << 20);
        len[tensor - 1] = (long)fread(buf[tensor - 1], 1, 1 << 20, f);
        fclose(f);
    }
    /* text lines are equal bytes; floats, 4-aligned only by luck, compared
     * as bytes would fail, so: same length, same text, floats close */
    CU_ASSERT(len[0] == len[1] && len[0] > 4 * 138890);
    double dmax = 0;
    long pos = 0;
    while (pos < len[0] && len[0] == len[1]) {
        const char *nl = memchr(buf[0] + pos, '\n', (size_t)(len[0] - pos));
        CU_ASSERT_FATAL(nl != NULL);
        long ll = (long)((const unsigned char *)nl - buf[0]) - pos + 1;
        CU_ASSERT(memcmp(buf[0] + pos, buf[1] + pos, (size_t)ll) == 0);
        long nf = 0;
        if (pos > 0) sscanf((const char *)buf[0] + pos, "%*s %ld", &nf);
        pos += ll;
        for (long i = 0; i < nf; i++, pos += 4) {
            float a0, a1;
            memcpy(&a0, buf[0] + pos, 4);
            memcpy(&a1, buf[1] + pos, 4);
            dmax = fmax(dmax, fabs((double)a0 - a1));
        }
    }
    CU_ASSERT(pos == len[0] && dmax < 1e-5);
    free(buf[0]);
    free(buf[1]);
    test_rmtree(dir);
    /* --recompute selective: named in the header, a memory table */
    snprintf(args, sizeof args, "%s --recompute selective", vit);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ", 1 thread, selective recomputation\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "memory per worker"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "%s --recompute full --tensor 2", vit);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ", tensor parallel over 2 threads, full recomputation\n"));
    free(out);
    free(err);
    /* without --tensor: no memory table */
    CU_ASSERT_EQUAL_FATAL(test_run_cli(vit, &out, &err), 0);
    CU_ASSERT_PTR_NULL(strstr(out, "memory per worker"));
    free(out);
    free(err);
}

/* ---------------------------------------------------------- checkpoints */

/* A --tensor 2 run killed (SIGKILL) after step 7 of 12, with a checkpoint
 * every step, and resumed, writes the weights file of the uninterrupted
 * run byte for byte: the checkpoint holds the gathered model and its
 * momentum, the resume splits them again (exec_net_tp_move), and the split
 * is exact (a copy). */
#define TPV "train", "--model", "models/fmnist-vit.json", "--synthetic", "96", "--batch", "16", \
            "--epochs", "2", "--seed", "5", "--tensor", "2"
#define TPV_S "train --model models/fmnist-vit.json --synthetic 96 --batch 16 --epochs 2 --seed 5 --tensor 2"

static void test_tp_resume(void)
{
    char full[512], ck[512], w[512], w1[512], args[4096];
    char *dir = test_scratch(sizeof full, "full.w", full, "run.ckpt", ck, "resumed.w", w,
                             "resumed-t1.w", w1, NULL);
    snprintf(args, sizeof args, TPV_S " --save-weights %s", full);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
    char *first[] = {TPV, "--checkpoint", ck, "--checkpoint-every", "1", "--save-weights", w, NULL};
    int ok;
    CU_ASSERT_EQUAL(tproc_signal_at(first, dir, 7, SIGKILL, &ok), 128 + SIGKILL);
    CU_ASSERT(ok);
    CU_ASSERT_EQUAL(tproc_ckpt_step(ck), 7);
    char *out = NULL, *err = NULL;
    snprintf(args, sizeof args, TPV_S " --resume %s --save-weights %s", ck, w);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "resumed from"));
    CU_ASSERT(tproc_same_file(full, w));
    free(out);
    free(err);
    /* the checkpoint is the whole model: --tensor 1 resumes it too */
    snprintf(args, sizeof args,
             "train --model models/fmnist-vit.json --synthetic 96 --batch 16 --epochs 2 --seed 5 --resume %s --save-weights %s",
             ck, w1);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

TEST_SUITE(exec_tp)
{
    test_add_suite("exec_tp");
    test_add("split attention and mlp layers vs finite differences; every rank the same bits",
             test_tp_fd);
    test_add("split forward equals the unsplit layer's within the reordered sum's bound",
             test_tp_split_vs_whole);
    test_add("the ViT after k steps on 2 and 4 workers equals sequential training",
             test_tp_train);
    test_add("recomputation, selective and full: the same weights bit for bit, with --tensor too",
             test_tp_recompute);
    test_add("memory per worker: the shard's parameters, the all-reduce buffer, recomputation",
             test_tp_memory);
    test_add("cleave train --tensor: refusals, the run, the memory table", test_tp_cli);
    test_add("--tensor 2 killed and resumed from its checkpoint: the uninterrupted weights", test_tp_resume);
}
