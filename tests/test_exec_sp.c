/* test_exec_sp.c - sequence parallelism executed on threads (Korthikanti
 * et al. 2022): the reduce-scatter and all-gather of the tensor-parallel
 * group (exec/run/tp_group.c) against closed forms and the all-reduce, the
 * ViT's split layers with their layer norms and residuals sharded by token
 * (exec/nn/tfm_blocks.c) against the same split without it and against
 * sequential training, the activation memory per worker against a closed
 * form of what is sharded, and the command.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/plan.h"
#include "exec/nn/data.h"
#include "exec/nn/net.h"
#include "exec/nn/tensor.h"
#include "exec/run/pipeline.h"
#include "exec/run/tp_group.h"
#include "exec/run/train.h"
#include "models/model.h"

#include "test_proc.h"
#include "test.h"
#include "test_vit.h"

#define U 0x1p-24 /* float's unit roundoff */

enum { MAXW = 4 };

/* ------------------------------------------------------------ collectives */

enum { CB = 3, CC = 5 }; /* blocks, chunk */

typedef struct coll {
    exec_tp_group *g;
    int n, r;
    float *src, *rs, *ag, *ar; /* src (CB, n CC); rs (CB, CC); ag, ar (CB, n CC) */
} coll;

static void *coll_main(void *p)
{
    coll *c = p;
    exec_tp_group_reduce_scatter(c->g, c->r, c->rs, c->src, CB, CC);
    exec_tp_group_all_gather(c->g, c->r, c->ag, c->rs, CB, CC);
    memcpy(c->ar, c->src, (size_t)CB * c->n * CC * sizeof *c->ar);
    exec_tp_group_allreduce(c->g, c->r, c->ar, (int64_t)CB * c->n * CC);
    return NULL;
}

/* On 2, 3 and 4 threads, twice: with small integers, whose float sums are
 * exact, reduce-scatter gives rank r the integer sum of chunk r of each
 * block and all-gather puts each rank's chunk in its place; with random
 * floats, reduce-scatter then all-gather equals the all-reduce bit for bit
 * (the same additions in rank order), and differs from the sum in the
 * reverse order somewhere (the order is fixed, and it matters). */
static void test_sp_collectives(void)
{
    for (int n = 2; n <= MAXW; n++)
        for (int ints = 1; ints >= 0; ints--) {
            const int64_t row = (int64_t)n * CC, len = CB * row;
            exec_tp_group *g = exec_tp_group_create(n, len);
            coll c[MAXW];
            pthread_t th[MAXW];
            uint64_t s = 12345 + (uint64_t)n;
            for (int r = 0; r < n; r++) {
                c[r] = (coll){g, n, r, exec_falloc(len), exec_falloc(CB * CC), exec_falloc(len),
                              exec_falloc(len)};
                for (int64_t i = 0; i < len; i++) {
                    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                    double u = (double)(s >> 11) * 0x1p-53;
                    c[r].src[i] = ints ? (float)(int)(u * 200 - 100) : (float)(u * 2 - 1) * (1 + r);
                }
            }
            for (int r = 0; r < n; r++)
                CU_ASSERT_EQUAL_FATAL(pthread_create(&th[r], NULL, coll_main, &c[r]), 0);
            for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
            int exact = 1, placed = 1, same = 1, reordered = 0;
            for (int r = 0; r < n; r++) {
                for (int b = 0; b < CB; b++)
                    for (int i = 0; i < CC; i++) {
                        const int64_t at = b * row + (int64_t)r * CC + i;
                        double sum = 0;
                        for (int q = 0; q < n; q++) sum += c[q].src[at];
                        float back = c[n - 1].src[at];
                        for (int q = n - 2; q >= 0; q--) back += c[q].src[at];
                        if (ints) exact &= c[r].rs[b * CC + i] == (float)sum;
                        else reordered |= c[r].rs[b * CC + i] != back;
                        for (int q = 0; q < n; q++) /* rank q's chunk in q's place */
                            placed &= c[r].ag[b * row + (int64_t)q * CC + i] == c[q].rs[b * CC + i];
                    }
                same &= memcmp(c[r].ag, c[r].ar, (size_t)len * sizeof(float)) == 0;
            }
            CU_ASSERT(exact && placed && same);
            if (!ints && n > 2) CU_ASSERT(reordered); /* two terms commute exactly */
            for (int r = 0; r < n; r++) {
                free(c[r].src);
                free(c[r].rs);
                free(c[r].ag);
                free(c[r].ar);
            }
            exec_tp_group_destroy(g);
        }
}

/* ------------------------------------------------ one step, by hand */

enum { SB = 8 };

/* A rank's comm that counts its collectives, passing them to the group's. */
typedef struct counted {
    exec_tp_comm c;
    const exec_tp_comm *in;
    int ar, rs, ag;
} counted;

static void cnt_ar(void *ctx, int rank, float *buf, int64_t n)
{
    counted *k = ctx;
    k->ar++;
    k->in->allreduce(k->in->ctx, rank, buf, n);
}

static void cnt_rs(void *ctx, int rank, float *dst, const float *src, int64_t b, int64_t c)
{
    counted *k = ctx;
    k->rs++;
    k->in->reduce_scatter(k->in->ctx, rank, dst, src, b, c);
}

static void cnt_ag(void *ctx, int rank, float *dst, const float *src, int64_t b, int64_t c)
{
    counted *k = ctx;
    k->ag++;
    k->in->all_gather(k->in->ctx, rank, dst, src, b, c);
}

typedef struct srank {
    const model *m;
    counted tp;
    int flags;
    const float *x;
    const int32_t *y;
    exec_net *net;
    double loss;
} srank;

static void *srank_main(void *p)
{
    srank *s = p;
    cl_err e = {0};
    if (exec_net_create_tp(&s->net, s->m, 0, s->m->n_layers, SB, 7, s->flags, &s->tp.c, "m", &e))
        return NULL;
    exec_acts *a = exec_acts_create(s->net, SB);
    exec_net_forward(s->net, a, s->x, s->y, SB, 1);
    exec_net_backward(s->net, a, NULL, NULL, 1.0f / SB);
    s->loss = exec_acts_loss_sum(a);
    exec_acts_destroy(a);
    return NULL;
}

/* One forward and backward of models/fmnist-vit.json on n workers. */
static void one_step(const model *m, int n, int flags, const float *x, const int32_t *y,
                     srank *s)
{
    exec_tp_group *g = exec_tp_group_create(n, (int64_t)SB * 16 * 64);
    pthread_t th[MAXW];
    for (int r = 0; r < n; r++) {
        s[r] = (srank){m, {{0}, exec_tp_group_comm(g, r), 0, 0, 0}, flags, x, y, NULL, 0};
        s[r].tp.c = (exec_tp_comm){.rank = r, .size = n, .allreduce = cnt_ar,
                                   .reduce_scatter = cnt_rs, .all_gather = cnt_ag, .ctx = &s[r].tp};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[r], NULL, srank_main, &s[r]), 0);
    }
    for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
    exec_tp_group_destroy(g);
    for (int r = 0; r < n; r++) CU_ASSERT_PTR_NOT_NULL_FATAL(s[r].net);
}

/* The activations with sequence parallelism are those of the split without
 * it, bit for bit: the reduce-scatter makes the all-reduce's additions for
 * the worker's tokens, and the layer norm and the residual are per token.
 * So after one forward and backward the loss and every gradient are the
 * same bits, but the split layers' layer-norm gradients (their first 2 D
 * floats), which each worker sums over its own tokens and the all-reduce
 * then over the workers: a sum of R = B T = 128 rows in another order,
 * each order within gamma_{R-1} of the exact sum relative to the sum of
 * the terms' magnitudes (Higham 2002, 3.1).  The terms' magnitudes are not
 * at hand here, so the check is relative to the largest gradient of the
 * tensor's layer norm, 2 gamma_R: a model, not a theorem (cancellation
 * could exceed it); what it measures is printed.  Every worker holds the
 * same gradient of the replicated parameters, layer norms included. */
static void test_sp_step(void)
{
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(&m, "models/fmnist-vit.json", &e), CL_OK);
    exec_data d = {0};
    exec_data_synthetic(&d, SB, 1, 28, 28, 10, 5, 0);
    float *x = exec_falloc((int64_t)SB * d.dim);
    int32_t y[SB];
    int64_t idx[SB];
    for (int b = 0; b < SB; b++) idx[b] = b;
    exec_data_gather(&d, idx, SB, x, y);
    const int D = 64, R = SB * 16;
    const double gamma = R * U / (1 - R * U);
    for (int n = 2; n <= 4; n *= 2) {
        srank tp[MAXW], sp[MAXW];
        one_step(&m, n, 0, x, y, tp);
        one_step(&m, n, EXEC_NET_SEQ_PAR, x, y, sp);
        CU_ASSERT(tp[0].loss == sp[0].loss && tp[0].loss > 0);
        /* the collectives of a step (docs/executor-vit.md): 2 all-reduces
         * per block without; with, per block an all-gather and a
         * reduce-scatter forward and backward, the gather of LN(x) again
         * and the layer norm's all-reduce in the weight pass, less the
         * last block's output-gradient gather plus its output's and the
         * first block's input gradient's */
        CU_ASSERT(tp[0].tp.ar == 16 && tp[0].tp.rs == 0 && tp[0].tp.ag == 0);
        CU_ASSERT(sp[0].tp.ar == 8 && sp[0].tp.rs == 16 && sp[0].tp.ag == 25);
        int exact = 1, ln = 0, replicated = 1;
        double worst = 0;
        for (int r = 0; r < n; r++)
            for (int k = 0; k < exec_net_n_tensors(tp[r].net); k++) {
                const exec_tensor *a = exec_net_tensor(tp[r].net, k),
                                  *b = exec_net_tensor(sp[r].net, k),
                                  *b0 = exec_net_tensor(sp[0].net, k);
                const exec_tfm *g = exec_net_tfm(sp[r].net, b->layer);
                const int64_t skip = g && g->seq ? 2 * D : 0;
                CU_ASSERT_FATAL(a->n == b->n);
                exact &= memcmp(a->grad + skip, b->grad + skip,
                                (size_t)(a->n - skip) * sizeof(float)) == 0;
                if (!skip) {
                    replicated &= memcmp(b->grad, b0->grad, (size_t)b->n * sizeof(float)) == 0;
                    continue;
                }
                replicated &= memcmp(b->grad, b0->grad, 2 * (size_t)D * sizeof(float)) == 0;
                ln++;
                for (int h = 0; h < 2; h++) { /* gamma, beta */
                    double big = 0, diff = 0;
                    for (int j = h * D; j < (h + 1) * D; j++) {
                        big = fmax(big, fabs((double)a->grad[j]));
                        diff = fmax(diff, fabs((double)a->grad[j] - b->grad[j]));
                    }
                    worst = fmax(worst, diff / (2 * gamma * big));
                }
            }
        printf("\n    %d workers: layer-norm gradients differ by %.4f of the bound ", n, worst);
        CU_ASSERT(exact && replicated && ln == 8 * n && worst <= 1);
        for (int r = 0; r < n; r++) {
            exec_net_destroy(tp[r].net);
            exec_net_destroy(sp[r].net);
        }
    }
    free(x);
    exec_data_free(&d);
    model_free(&m);
}

/* ------------------------------------------------ training, k steps */

enum { TR_B = 16, TR_K = 3 };

static exec_net *train_steps(const model *m, const exec_data *d, int tensor, int seq,
                             int recompute)
{
    exec_train_opts o;
    exec_train_defaults(&o);
    o.batch = TR_B;
    o.tensor = tensor;
    o.seq_par = seq;
    o.recompute = recompute;
    exec_trainer *t;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_trainer_create(&t, m, "models/fmnist-vit.json", &o, &e), CL_OK);
    float *x = exec_falloc((int64_t)TR_B * d->dim);
    int32_t *y = cl_malloc(TR_B * sizeof *y);
    int64_t idx[TR_B];
    for (int k = 0; k < TR_K; k++) {
        for (int b = 0; b < TR_B; b++) idx[b] = k * TR_B + b;
        exec_data_gather(d, idx, TR_B, x, y);
        exec_trainer_step(t, x, y, TR_B);
    }
    exec_net *whole = exec_trainer_gather(t);
    free(x);
    free(y);
    exec_trainer_destroy(t);
    return whole;
}

/* Largest |a - b| of a tensor over k 2 gamma_{K+2} P (test_exec_tp.c,
 * test_tp_train: the model of how reordered sums of K terms move a
 * parameter of scale P in k steps), over the tensors. */
static double worst_of(exec_net *a, exec_net *b, int K)
{
    const double gamma = (K + 2) * U / (1 - (K + 2) * U);
    double worst = 0;
    for (int k = 0; k < exec_net_n_tensors(a); k++) {
        const exec_tensor *r = exec_net_tensor(a, k), *g = exec_net_tensor(b, k);
        double P = 0, dmax = 0;
        for (int64_t i = 0; i < r->n; i++) {
            P = fmax(P, fabs((double)r->data[i]));
            dmax = fmax(dmax, fabs((double)g->data[i] - r->data[i]));
        }
        worst = fmax(worst, dmax / (TR_K * 2 * gamma * P));
    }
    return worst;
}

/* models/fmnist-vit.json, 3 steps of 16 synthetic samples: with sequence
 * parallelism on 2 and 4 workers the weights equal sequential training's
 * and the split's without it within k 2 gamma_{K+2} P, where K = B T = 256
 * is now the longest reordered sum (the layer norms' gradients over the
 * tokens; 128, the hidden width, without sequence parallelism), and
 * differ from the split's somewhere (the layer-norm gradients are summed
 * in another order).  Recomputation, selective and full, changes no bit. */
static void test_sp_train(void)
{
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(&m, "models/fmnist-vit.json", &e), CL_OK);
    exec_data d = {0};
    exec_data_synthetic(&d, TR_K * TR_B, 1, 28, 28, 10, 3, 0);
    exec_net *ref = train_steps(&m, &d, 1, 0, 0);
    int64_t nf;
    const float *pr = exec_net_params(ref, &nf);
    for (int tensor = 2; tensor <= 4; tensor *= 2) {
        exec_net *tp = train_steps(&m, &d, tensor, 0, 0), *sp = train_steps(&m, &d, tensor, 1, 0);
        const float *ps = exec_net_params(sp, NULL);
        double w1 = worst_of(ref, sp, TR_B * 16), wt = worst_of(tp, sp, TR_B * 16);
        printf("\n    %d workers: vs sequential %.4f, vs without sequence parallelism %.4f of the bound ",
               tensor, w1, wt);
        CU_ASSERT(w1 <= 1 && wt <= 1);
        CU_ASSERT(memcmp(exec_net_params(tp, NULL), ps, (size_t)nf * sizeof *ps) != 0);
        CU_ASSERT(memcmp(pr, ps, (size_t)nf * sizeof *ps) != 0);
        if (tensor == 2)
            for (int mode = 1; mode <= 2; mode++) {
                exec_net *rc = train_steps(&m, &d, tensor, 1, mode);
                CU_ASSERT(memcmp(exec_net_params(rc, NULL), ps, (size_t)nf * sizeof *ps) == 0);
                exec_net_destroy(rc);
            }
        exec_net_destroy(tp);
        exec_net_destroy(sp);
    }
    exec_net_destroy(ref);
    exec_data_free(&d);
    model_free(&m);
}

/* ------------------------------------------------------------ memory */

/* Per worker, with sequence parallelism the acts keep, for each of the 4
 * attention and 4 mlp layers, x^, LN(x) and dLN(x) of T / t tokens instead
 * of T and 1/sigma of T / t, and each block's output gradient but the last
 * one's (whose output is the whole sequence for the final layer norm) of
 * T / t tokens: the activations shrink by B (8 (3 D + 1) + 7 D) (T - T/t)
 * floats, nothing else changes; the buffers add the gather scratch, two
 * whole (B, T, D) activations, one worker's share of one and 2 D floats. */
static void test_sp_memory(void)
{
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(&m, "models/fmnist-vit.json", &e), CL_OK);
    const double D = 64, T = 16, B = 8;
    for (int tensor = 2; tensor <= 4; tensor *= 2) {
        sim_mem mm[2];
        for (int seq = 0; seq < 2; seq++) {
            exec_train_opts o;
            exec_train_defaults(&o);
            o.batch = (int)B;
            o.tensor = tensor;
            o.seq_par = seq;
            exec_trainer *t;
            CU_ASSERT_EQUAL_FATAL(exec_trainer_create(&t, &m, "m", &o, &e), CL_OK);
            for (int r = 0; r < tensor; r++) {
                sim_mem w;
                exec_trainer_mem(t, r, &w);
                if (r == 0) mm[seq] = w;
                CU_ASSERT(memcmp(&w, &mm[seq], sizeof w) == 0); /* every worker alike */
            }
            exec_trainer_destroy(t);
        }
        const double Tl = T / tensor;
        const double saved = 4 * B * (8 * (3 * D + 1) + 7 * D) * (T - Tl);
        printf("\n    %d workers: activations %.3f MB, %.3f with sequence parallelism ", tensor,
               mm[0].stash / 1e6, mm[1].stash / 1e6);
        CU_ASSERT_EQUAL(mm[0].stash - mm[1].stash, saved);
        CU_ASSERT(mm[0].weights == mm[1].weights && mm[0].grads == mm[1].grads);
        CU_ASSERT_EQUAL(mm[1].buffers - mm[0].buffers, 4 * (B * (2 * T + Tl) * D + 2 * D));
    }
    model_free(&m);
}

/* ------------------------------------------------------- in a pipeline */

/* One microbatch of 16 per iteration, 3 iterations: the two-stage plan of
 * bench/results/pipe/ with "tensor" 2 and "sequence_parallel" equals the
 * sequential trainer with --tensor 2 --sequence-parallel bit for bit for
 * every synchronous schedule, zb-h1's separate weight pass (which gathers
 * again) included: the cut makes the blocks at the stage boundaries take
 * and give the whole sequence, which changes no bit of an activation, and
 * each layer norm's gradient is summed per worker then over them as in the
 * trainer. */
static void test_sp_pipeline(void)
{
    enum { MB = 16, IT = 3 };
    exec_data d = {0};
    exec_data_synthetic(&d, IT * MB, 1, 28, 28, 10, 5, 0);
    plan p;
    if (tv_plan(&p, SCHED_GPIPE, 1, MB, 2, 0)) return;
    p.seq_par = 1;
    exec_pipe_opts o;
    tv_opts(&o, &d, IT);
    exec_train_opts to;
    exec_train_defaults(&to);
    to.epochs = 1;
    to.batch = MB;
    to.lr = o.lr;
    to.momentum = o.momentum;
    to.weight_decay = o.weight_decay;
    to.schedule = o.lr_schedule;
    to.seed = o.seed;
    to.tensor = 2;
    to.seq_par = 1;
    exec_trainer *tr;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_trainer_create(&tr, &p.model, TV_PLAN, &to, &e), CL_OK);
    exec_epoch ep;
    exec_trainer_epoch(tr, &d, NULL, NULL, NULL, &ep);
    exec_net *ref = exec_trainer_gather(tr);
    exec_trainer_destroy(tr);
    const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_ZBH1, SCHED_SEQUENTIAL};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        p.schedule = kinds[k];
        exec_pipe_result r;
        if (!tv_run(&p, &o, &r)) {
            int same = tv_same_as(&r, ref);
            printf("\n    %s: %s ", sched_kind_name(kinds[k]), same ? "bit for bit" : "DIFFERS");
            CU_ASSERT(same);
        }
        exec_pipe_result_free(&r);
    }
    /* and not the split's without sequence parallelism (the layer norms'
     * gradients are summed in another order): the comparison can fail */
    p.seq_par = 0;
    p.schedule = SCHED_1F1B;
    exec_pipe_result r;
    if (!tv_run(&p, &o, &r)) CU_ASSERT(!tv_same_as(&r, ref));
    exec_pipe_result_free(&r);
    exec_net_destroy(ref);
    plan_free(&p);
    exec_data_free(&d);
}

/* Replicated stages: the two-stage plan with its first stage on 2
 * replicas x t = 2, four microbatches of 4, 3 iterations of 1f1b, with and
 * without sequence parallelism: within the bound of exec_tp (K = 128: the
 * layer-norm gradients now sum B T = 64 rows in another order, fewer than
 * the hidden width's 128) and not the same bits; each replica's tensor
 * rank rings its shard, its layer-norm gradients summed over the tensor
 * ranks already.  Then the committed plan of `exec_txr` (the whole ViT on
 * 2 replicas x t = 2) with "sequence_parallel": the MPI backend, a crew
 * per rank and tensor ranks as processes, writes the threads backend's
 * weights file byte for byte. */
static void test_sp_replicated(void)
{
    enum { M = 4, MB = 4, IT = 3 };
    char path[512], sp[512];
    char *dir = test_scratch(sizeof path, "rep.json", path, "dp2-sp.json", sp, NULL);
    exec_data d = {0};
    exec_data_synthetic(&d, IT * M * MB, 1, 28, 28, 10, 5, 0);
    tv_write_plan(path, NULL, 2, NULL, 2);
    plan p;
    if (tv_load_plan(&p, path, SCHED_1F1B, M, MB, 2, 0)) return;
    CU_ASSERT_EQUAL(p.stages[0].n_replicas, 2);
    exec_pipe_opts o;
    tv_opts(&o, &d, IT);
    exec_pipe_result rt, rs;
    if (!tv_run(&p, &o, &rt)) {
        p.seq_par = 1;
        if (!tv_run(&p, &o, &rs)) {
            double w = tv_vs_bound(&rs, &rt, IT);
            printf("\n    2 replicas x t = 2, 1f1b: %.4f of the bound ", w);
            CU_ASSERT(w <= 1);
            CU_ASSERT(rs.n_params == rt.n_params &&
                      memcmp(rs.params, rt.params, (size_t)rs.n_params * sizeof(float)) != 0);
        }
        exec_pipe_result_free(&rs);
    }
    exec_pipe_result_free(&rt);
    plan_free(&p);
    exec_data_free(&d);
    tv_write_seq_par("bench/results/pipe/fmnist-vit-dp2-gpipe-t2.json", sp);
    tv_mpi_same(sp, 2, 2, 1, dir);
    test_rmtree(dir);
}

/* A sequence the tensor ranks do not divide is refused, naming the layer
 * (the ViT's 16 tokens divide every degree its 4 heads allow, so one
 * layer's tokens are changed here). */
static void test_sp_refusal(void)
{
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(&m, "models/fmnist-vit.json", &e), CL_OK);
    CU_ASSERT_EQUAL(exec_net_sp_check(&m, 0, m.n_layers, 4, "v.json", &e), CL_OK);
    int at = -1;
    for (int i = 0; i < m.n_layers && at < 0; i++)
        if (m.layers[i].kind == MODEL_MLP) at = i;
    CU_ASSERT_FATAL(at > 0);
    m.layers[at].in_shape.d[1] = 18;
    CU_ASSERT_EQUAL(exec_net_sp_check(&m, 0, m.n_layers, 2, "v.json", &e), CL_OK);
    CU_ASSERT_EQUAL(exec_net_sp_check(&m, 0, m.n_layers, 4, "v.json", &e), CL_EINPUT);
    char want[200];
    snprintf(want, sizeof want, "v.json: layers[%d] (%s): sequence parallelism over 4 tensor ranks does not divide its 18 tokens (hint: ",
             at, m.layers[at].name);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want));
    model_free(&m);
}

/* ------------------------------------------------------------ the command */

static void test_sp_cli(void)
{
    const char *vit = "train --model models/fmnist-vit.json --synthetic 64 --batch 16 --epochs 1";
    char args[2048], *out = NULL, *err = NULL;
    const char *bad[][2] = {
        {"--sequence-parallel", "--sequence-parallel needs --tensor T > 1"},
        {"--tensor 1 --sequence-parallel", "--sequence-parallel needs --tensor T > 1"},
    };
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "%s %s", vit, bad[i][0]);
        test_cli_refused(args, bad[i][1]);
    }
    /* the run: named in the header, the same epoch as without to the
     * printed digits, smaller activations in the memory table */
    double loss[2], acts[2];
    for (int seq = 0; seq < 2; seq++) {
        snprintf(args, sizeof args, "%s --tensor 2%s", vit, seq ? " --sequence-parallel" : "");
        CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, &err), 0);
        CU_ASSERT_EQUAL(strstr(out, ", tensor parallel over 2 threads, sequence parallel\n") != NULL,
                        seq);
        const char *ep = strstr(out, "\n    1 ");
        CU_ASSERT_FATAL(ep && sscanf(ep, "%*d %lf", &loss[seq]) == 1);
        const char *row = strstr(out, "\n     0 ");
        CU_ASSERT_FATAL(row && sscanf(row, "%*d %*f %*f %*f %lf", &acts[seq]) == 1);
        free(out);
        free(err);
    }
    CU_ASSERT(fabs(loss[0] - loss[1]) <= 1e-4 && loss[0] > 0);
    CU_ASSERT(acts[1] < acts[0]);
}

TEST_SUITE(exec_sp)
{
    test_add_suite("exec_sp");
    test_add("reduce-scatter and all-gather: closed form, and together the all-reduce's bits",
             test_sp_collectives);
    test_add("one step of the ViT: the split's gradients bit for bit but the layer norms'",
             test_sp_step);
    test_add("the ViT after k steps on 2 and 4 workers equals sequential training and the split's",
             test_sp_train);
    test_add("memory per worker: the layer norms' and residuals' activations sharded by token",
             test_sp_memory);
    test_add("t = 2 x p = 2, one microbatch: the sequential trainer with it bit for bit",
             test_sp_pipeline);
    test_add("replicated stages x t = 2: the split's weights within the bound; MPI the threads' bytes",
             test_sp_replicated);
    test_add("tokens the tensor ranks do not divide: refused, naming the layer", test_sp_refusal);
    test_add("cleave train --tensor 2 --sequence-parallel: refusals, the run, the memory table",
             test_sp_cli);
}
