/* exact_subs.c - a DAG set's proper subsets for the exact search, the
 * smallest stage first, made on demand (see exact_dp.h).
 *
 * A state (t, c) tries the stages t \ lo over the subsets lo of t in the
 * order most work first (ties: the larger id first), and stops at the
 * first stage over its bound (exact_pass.c, place): only a few of the
 * subsets are ever tried under a tight bound.  Listing every nested pair
 * instead grows with the square of the sets (inception_v3's 221,565
 * downsets have more than 10^9 pairs).  So the subsets are made in that
 * order, as far as they are asked for: from t, walk the lattice's edges
 * down (plan_lattice.down), best first with a heap.  A subset has no more
 * work than its superset (sums of non-negative times in layer order, each
 * rounding monotone) and a smaller id (ids ascend with size), so every set
 * comes after the sets it is reached from: the heap hands the subsets out
 * in exactly the order of the sorted list they replace.
 *
 * One walk is kept going, for the set being expanded: a pass expands every
 * entry of a set before the next smaller set (exact_pass.c,
 * exact_dp_run_pass).  What it listed stays in the lattice's cache
 * (plan_sub_cache) for the later passes and searches on the same sums:
 * the bound climb, pass 2 and every schedule at one microbatch count
 * expand mostly the same sets.
 */
#include <stdlib.h>
#include <string.h>

#include "exact_dp.h"

/* Most subsets the lattice's cache holds (4 bytes each). */
#define SUBS_HELD ((int64_t)1 << 24)

/* Does heap item a come before item b (more work, then the larger id)? */
static inline int before(const dp_sub_item *a, const dp_sub_item *b)
{
    return a->w != b->w ? a->w > b->w : a->id > b->id;
}

static void heap_push(dp_subs *G, const plan_lattice *L, int u)
{
    if (G->hn == G->hcap) {
        G->hcap = G->hcap ? 2 * G->hcap : 256;
        G->heap = cl_realloc(G->heap, (size_t)G->hcap * sizeof *G->heap);
    }
    dp_sub_item x = {L->work[u], u};
    int64_t i = G->hn++;
    while (i > 0) {
        int64_t up = (i - 1) / 2;
        if (!before(&x, &G->heap[up])) break;
        G->heap[i] = G->heap[up];
        i = up;
    }
    G->heap[i] = x;
}

static int heap_pop(dp_subs *G)
{
    int top = G->heap[0].id;
    dp_sub_item last = G->heap[--G->hn];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= G->hn) break;
        if (c + 1 < G->hn && before(&G->heap[c + 1], &G->heap[c])) c++;
        if (!before(&G->heap[c], &last)) break;
        G->heap[i] = G->heap[c];
        i = c;
    }
    if (G->hn) G->heap[i] = last;
    return top;
}

/* Push the unseen sets one edge below u. */
static void push_below(dp_subs *G, const plan_lattice *L, int u)
{
    for (int64_t q = L->down_off[u]; q < L->down_off[u + 1]; q++) {
        int v = L->down[q];
        if (G->seen[v] == G->mark) continue;
        G->seen[v] = G->mark;
        heap_push(G, L, v);
    }
}

/* Keep the walk of G->t in the lattice's cache when it went further than
 * the cache (within SUBS_HELD entries in all). */
static void flush(exact_dp *X)
{
    dp_subs *G = &X->subs;
    plan_sub_cache *C = X->L->subs;
    if (!C || G->t < 0 || G->n <= C->n[G->t] || C->held - C->n[G->t] + G->n > SUBS_HELD) return;
    C->list[G->t] = cl_realloc(C->list[G->t], (size_t)G->n * sizeof(int));
    memcpy(C->list[G->t], G->list, (size_t)G->n * sizeof(int));
    C->held += G->n - C->n[G->t];
    C->n[G->t] = G->n;
    C->done[G->t] = G->hn == 0;
}

int exact_dp_sub(exact_dp *X, int t, int64_t j)
{
    dp_subs *G = &X->subs;
    const plan_lattice *L = X->L;
    const plan_sub_cache *C = L->subs;
    if (C && j < C->n[t]) return C->list[t][j];
    if (C && C->done[t]) return -1;
    if (G->t != t) {
        flush(X);
        if (!G->seen) G->seen = cl_calloc((size_t)L->n_sets, sizeof *G->seen);
        if (++G->mark == 0) { /* wrapped: forget every mark */
            memset(G->seen, 0, (size_t)L->n_sets * sizeof *G->seen);
            G->mark = 1;
        }
        G->t = t;
        G->n = G->hn = 0;
        G->seen[t] = G->mark;
        push_below(G, L, t);
    }
    while (G->n <= j && G->hn > 0) {
        int u = heap_pop(G);
        if (G->n == G->cap) {
            G->cap = G->cap ? 2 * G->cap : 256;
            G->list = cl_realloc(G->list, (size_t)G->cap * sizeof(int));
        }
        G->list[G->n++] = u;
        push_below(G, L, u);
    }
    return j < G->n ? G->list[j] : -1;
}

void exact_dp_subs_free(exact_dp *X)
{
    flush(X);
    free(X->subs.list);
    free(X->subs.heap);
    free(X->subs.seen);
    memset(&X->subs, 0, sizeof X->subs);
    X->subs.t = -1;
}
