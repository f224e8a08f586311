/* tfm_split.c - where a split attention or MLP layer's shard sits in the
 * whole layer's parameters (layers_tfm.h, exec_tp_comm), as a list of
 * strided blocks; one walk over it copies either way.  And a net's shards
 * gathered into a whole net with it (net.h, exec_net_tp_gather).
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layers_tfm.h"
#include "net.h"

int exec_tfm_split(exec_tfm *g, const exec_tp_comm *tp)
{
    if (!tp || tp->size <= 1 || (g->kind != EXEC_TFM_ATTN && g->kind != EXEC_TFM_MLP)) return 0;
    assert(tp->rank >= 0 && tp->rank < tp->size);
    assert(g->kind == EXEC_TFM_ATTN ? g->H % tp->size == 0 : g->F % tp->size == 0);
    g->tp = tp;
    return 1;
}

/* rows blocks of len floats: the k-th at full[fo + k fs] and shard[so + k ss] */
typedef struct piece {
    int64_t rows, len, fo, fs, so, ss;
} piece;

void exec_tfm_shard(const exec_tfm *g, float *full, float *shard, int to_full)
{
    assert(g->tp);
    const int64_t D = g->D, r = g->tp->rank, n = g->tp->size;
    piece p[9]; /* ATTN: layer norm, 3 + 3 for q k v, Wo, bo */
    int np = 0;
    int64_t fo = 0, so = 0; /* where the next parameter starts in each */
    p[np++] = (piece){1, 2 * D, 0, 0, 0, 0}; /* gamma, beta: replicated */
    fo = so = 2 * D;
    if (g->kind == EXEC_TFM_ATTN) {
        const int64_t Dl = D / n;
        for (int q = 0; q < 3; q++) /* this worker's heads' rows of Wq, Wk, Wv */
            p[np++] = (piece){1, Dl * D, fo + (q * D + r * Dl) * D, 0, so + q * Dl * D, 0};
        fo += 3 * D * D;
        so += 3 * Dl * D;
        for (int q = 0; q < 3; q++) /* and of bqkv */
            p[np++] = (piece){1, Dl, fo + q * D + r * Dl, 0, so + q * Dl, 0};
        fo += 3 * D;
        so += 3 * Dl;
        p[np++] = (piece){D, Dl, fo + r * Dl, D, so, Dl}; /* their columns of Wo */
        fo += D * D;
        so += D * Dl;
    } else {
        const int64_t F = g->F, Fl = F / n;
        p[np++] = (piece){1, Fl * D, fo + r * Fl * D, 0, so, 0}; /* rows of W1 */
        fo += F * D;
        so += Fl * D;
        p[np++] = (piece){1, Fl, fo + r * Fl, 0, so, 0}; /* of b1 */
        fo += F;
        so += Fl;
        p[np++] = (piece){D, Fl, fo + r * Fl, F, so, Fl}; /* columns of W2 */
        fo += D * F;
        so += D * Fl;
    }
    p[np++] = (piece){1, D, fo, 0, so, 0}; /* bo or b2: replicated */
    assert(np <= (int)(sizeof p / sizeof *p) && so + D == exec_tfm_params(g));
    for (int i = 0; i < np; i++)
        for (int64_t k = 0; k < p[i].rows; k++) {
            float *f = full + p[i].fo + k * p[i].fs, *s = shard + p[i].so + k * p[i].ss;
            if (to_full) memcpy(f, s, (size_t)p[i].len * sizeof *f);
            else memcpy(s, f, (size_t)p[i].len * sizeof *s);
        }
}

void exec_net_tp_move(exec_net *whole, float *wb, exec_net *const *shards, float *const *sb,
                      int size, int to_whole)
{
    const float *w0 = exec_net_params(whole, NULL);
    for (int k = 0; k < exec_net_n_tensors(whole); k++) {
        const exec_tensor *t = exec_net_tensor(whole, k);
        float *wt = wb + (t->data - w0);
        for (int r = 0; r < size; r++) {
            const exec_tensor *s = exec_net_tensor(shards[r], k);
            const exec_tfm *g = exec_net_tfm(shards[r], s->layer);
            float *st = sb[r] + (s->data - exec_net_params(shards[r], NULL));
            assert(s->layer == t->layer && strcmp(s->name, t->name) == 0);
            if (g && g->tp) exec_tfm_shard(g, wt, st, to_whole);
            else if (!to_whole) memcpy(st, wt, (size_t)t->n * sizeof *wt);
            else if (r == 0) memcpy(wt, st, (size_t)t->n * sizeof *wt);
        }
    }
}

void exec_net_tp_gather(exec_net *whole, exec_net *const *shards, int size)
{
    float **sb = cl_malloc((size_t)size * sizeof *sb);
    for (int r = 0; r < size; r++) sb[r] = exec_net_params(shards[r], NULL);
    exec_net_tp_move(whole, exec_net_params(whole, NULL), shards, sb, size, 1);
    free(sb);
}

static void solo_allreduce(void *ctx, int rank, float *buf, int64_t n)
{
    (void)ctx, (void)rank, (void)buf, (void)n; /* one rank alone: nothing to sum */
}

/* Alone, rank 0's share of the sums is its own chunk; the gathered
 * sequence repeats its own tokens in every rank's place (defined values of
 * the right size: a solo net's values are not a rank's anyway). */
static void solo_reduce_scatter(void *ctx, int rank, float *dst, const float *src, int64_t blocks,
                                int64_t chunk)
{
    (void)rank;
    const int64_t size = (int64_t)(uintptr_t)ctx;
    for (int64_t b = 0; b < blocks; b++)
        memcpy(dst + b * chunk, src + b * size * chunk, (size_t)chunk * sizeof *dst);
}

static void solo_all_gather(void *ctx, int rank, float *dst, const float *src, int64_t blocks,
                            int64_t chunk)
{
    (void)rank;
    const int64_t size = (int64_t)(uintptr_t)ctx;
    for (int64_t b = 0; b < blocks; b++)
        for (int64_t q = 0; q < size; q++)
            memcpy(dst + (b * size + q) * chunk, src + b * chunk, (size_t)chunk * sizeof *dst);
}

#define SOLO(k) {.rank = 0, .size = (k), .allreduce = solo_allreduce, \
                 .reduce_scatter = solo_reduce_scatter, .all_gather = solo_all_gather, \
                 .ctx = (void *)(uintptr_t)(k)} /* ctx: the size */
#define SOLO8(k) SOLO(k), SOLO(k + 1), SOLO(k + 2), SOLO(k + 3), SOLO(k + 4), SOLO(k + 5), \
                 SOLO(k + 6), SOLO(k + 7)
static const exec_tp_comm solo[] = {SOLO8(0), SOLO8(8), SOLO8(16), SOLO8(24), SOLO8(32),
                                    SOLO8(40), SOLO8(48), SOLO8(56), SOLO(64)};
_Static_assert(sizeof solo / sizeof *solo == EXEC_TP_SOLO_MAX + 1, "one solo comm per size");

const exec_tp_comm *exec_tp_comm_solo(int size)
{
    assert(size >= 1 && size <= EXEC_TP_SOLO_MAX);
    return &solo[size];
}
