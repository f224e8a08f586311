/* dag_sums.c - the per-set sums of a DAG's downsets, without a pass over
 * every member of every set (docs/planner.md, "Branching models").
 *
 * The sums are taken over a set's members in layer order, so a subset never
 * sums to more than its superset (the exact search's subset walk relies on
 * it), and they are taken again at every microbatch count.  Summed member
 * by member, inception_v3's 221,565 downsets of 327 layers cost 36% of an
 * exact plan's time.  Two observations make them cheap with the very same
 * additions in the very same order, so every sum keeps its bits:
 *
 *   - Sets that agree on layers 0..x-1 share the partial sums up to x.
 *     Visiting the sets in lexicographic order of their membership read in
 *     layer order (plan_lattice.sum_order, sorted once), each set only adds
 *     its members from the first layer where it differs from the set before;
 *     the partial sums after each member are kept on a stack.  Downsets of a
 *     series of cells share everything before their cell.
 *   - A member's output crosses the cut only when one of its readers is not
 *     in the set.  Every layer below the set's first missing layer p is in,
 *     so a member i < p can be read from outside only if its last reader is
 *     at p or beyond: only those (listed per p, ascending) and the members
 *     from p on are checked, in layer order as before.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"

/* Membership rows compared in layer order: at the first layer where two
 * rows differ, the one holding it comes first (any fixed order would do;
 * this one keeps sets sharing a prefix of layers next to each other). */
static int cmp_rows(const void *a, const void *b, void *ctx)
{
    const plan_lattice *L = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    const uint64_t *rx = &L->bits[(size_t)x * (size_t)L->words];
    const uint64_t *ry = &L->bits[(size_t)y * (size_t)L->words];
    for (int w = 0; w < L->words; w++)
        if (rx[w] != ry[w]) {
            uint64_t d = rx[w] ^ ry[w];
            return (rx[w] & d & -d) ? -1 : 1;
        }
    return x < y ? -1 : x > y;
}

/* Most work first, ties: the larger id first (exact_subs.c's order). */
static int cmp_more_work(const void *a, const void *b, void *ctx)
{
    const double *w = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    if (w[x] != w[y]) return w[x] > w[y] ? -1 : 1;
    return x > y ? -1 : x < y;
}

/* Keep L->by_work in that order for the new sums: usually it still is
 * (times scaled to another microbatch), which one pass confirms. */
static void order_by_work(plan_lattice *L)
{
    int S = L->n_sets, sorted = L->by_work != NULL;
    if (!L->by_work) {
        L->by_work = cl_malloc((size_t)S * sizeof(int));
        for (int t = 0; t < S; t++) L->by_work[t] = t;
    }
    for (int k = 1; k < S && sorted; k++)
        sorted = cmp_more_work(&L->by_work[k - 1], &L->by_work[k], L->work) < 0;
    if (!sorted) qsort_r(L->by_work, (size_t)S, sizeof(int), cmp_more_work, L->work);
}

/* The first layer at which rows a and b differ (n when equal). */
static int first_diff(const uint64_t *a, const uint64_t *b, int words, int n)
{
    for (int w = 0; w < words; w++)
        if (a[w] != b[w]) return w * 64 + __builtin_ctzll(a[w] ^ b[w]);
    return n;
}

/* The first layer not in row r (n when full). */
static int first_out(const uint64_t *r, int words, int n)
{
    for (int w = 0; w < words; w++)
        if (~r[w]) {
            int i = w * 64 + __builtin_ctzll(~r[w]);
            return i < n ? i : n;
        }
    return n;
}

static int row_has(const uint64_t *r, int i) { return (int)((r[i >> 6] >> (i & 63)) & 1); }

/* The readers of each layer and of the model input (at index n), and for
 * every position p the layers below p read at p or beyond, ascending. */
typedef struct graph_index {
    int *rd_off, *rd;       /* readers of layer j (j = n: the model input) */
    int *last;              /* the last reader of layer j, -1 for none     */
    int *x_off, *x;         /* cross[p] = x[x_off[p] .. x_off[p + 1])      */
} graph_index;

static void index_graph(graph_index *G, const plan_inst *I)
{
    int n = I->n;
    int *last = cl_malloc((size_t)(n + 1) * sizeof *last);
    G->rd_off = cl_calloc((size_t)n + 2, sizeof(int));
    for (int j = 0; j < n; j++) last[j] = -1;
    for (int i = 0; i < n; i++)
        for (int k = I->in_off[i]; k < I->in_off[i + 1]; k++) {
            int j = I->in_idx[k] < 0 ? n : I->in_idx[k];
            G->rd_off[j + 1]++;
            if (j < n && i > last[j]) last[j] = i;
        }
    for (int j = 0; j <= n; j++) G->rd_off[j + 1] += G->rd_off[j];
    G->rd = cl_malloc((size_t)(G->rd_off[n + 1] + 1) * sizeof(int));
    int *at = cl_malloc((size_t)(n + 1) * sizeof *at);
    memcpy(at, G->rd_off, (size_t)(n + 1) * sizeof *at);
    for (int i = 0; i < n; i++)
        for (int k = I->in_off[i]; k < I->in_off[i + 1]; k++) {
            int j = I->in_idx[k] < 0 ? n : I->in_idx[k];
            G->rd[at[j]++] = i;
        }
    free(at);
    /* cross[p]: i < p <= last[i]; counted, then filled in ascending i */
    G->x_off = cl_calloc((size_t)n + 2, sizeof(int));
    for (int i = 0; i < n; i++)
        for (int p = i + 1; p <= last[i]; p++) G->x_off[p + 1]++;
    for (int p = 0; p <= n; p++) G->x_off[p + 1] += G->x_off[p];
    G->x = cl_malloc((size_t)(G->x_off[n + 1] + 1) * sizeof(int));
    int *fill = cl_malloc((size_t)(n + 1) * sizeof *fill);
    memcpy(fill, G->x_off, (size_t)(n + 1) * sizeof *fill);
    for (int i = 0; i < n; i++)
        for (int p = i + 1; p <= last[i]; p++) G->x[fill[p]++] = i;
    free(fill);
    G->last = last;
}

/* The first layer after i not in row r (n when none). */
static int next_out(const uint64_t *r, int words, int n, int i)
{
    int q = (i + 1) >> 6;
    if (q >= words) return n;
    uint64_t z = ~r[q] & (((i + 1) & 63) ? ~0ull << ((i + 1) & 63) : ~0ull);
    while (!z && ++q < words) z = ~r[q];
    if (!z) return n;
    int x = q * 64 + __builtin_ctzll(z);
    return x < n ? x : n;
}

/* Is any reader of layer j (n: the model input) outside row r? */
static int read_outside(const graph_index *G, const uint64_t *r, int j)
{
    for (int k = G->rd_off[j]; k < G->rd_off[j + 1]; k++)
        if (!row_has(r, G->rd[k])) return 1;
    return 0;
}

/* Partial sums after a member, as plan_lattice_sums accumulates them. */
typedef struct psum {
    int layer, sz;
    double w, f, bi, bw, pa, st;
} psum;

void plan_lattice_dag_sums_(plan_lattice *L, const plan_inst *I);
void plan_lattice_dag_sums_(plan_lattice *L, const plan_inst *I)
{
    int n = I->n, W = L->words, S = L->n_sets;
    if (!L->sum_order) {
        L->sum_order = cl_malloc((size_t)S * sizeof(int));
        for (int t = 0; t < S; t++) L->sum_order[t] = t;
        qsort_r(L->sum_order, (size_t)S, sizeof(int), cmp_rows, L);
    }
    graph_index G;
    index_graph(&G, I);
    double *wk = cl_malloc((size_t)(n + 1) * sizeof *wk);
    for (int i = 0; i < n; i++) wk[i] = plan_inst_work(I, i);
    psum *stk = cl_malloc((size_t)(n + 1) * sizeof *stk);
    int depth = 0; /* stk[0] is the empty prefix */
    stk[0] = (psum){.layer = -1};
    const uint64_t *prev = NULL;
    for (int o = 0; o < S; o++) {
        int t = L->sum_order[o];
        const uint64_t *row = &L->bits[(size_t)t * (size_t)W];
        /* keep the members below the first layer where this row differs */
        int x = prev ? first_diff(prev, row, W, n) : 0;
        while (depth > 0 && stk[depth].layer >= x) depth--;
        psum s = stk[depth];
        for (int q = x >> 6; q < W; q++) {
            uint64_t b = row[q];
            if (q == x >> 6) b &= ~0ull << (x & 63);
            for (; b; b &= b - 1) {
                int i = q * 64 + __builtin_ctzll(b);
                s.layer = i;
                s.sz++;
                s.w += wk[i];
                s.f += I->fwd_s[i];
                s.bi += I->bwd_in_s[i];
                s.bw += I->bwd_w_s[i];
                s.pa += I->param_bytes[i];
                s.st += I->stash_bytes[i];
                stk[++depth] = s;
            }
        }
        prev = row;
        L->size[t] = s.sz;
        L->work[t] = s.w;
        L->fwd[t] = s.f;
        L->bwd_in[t] = s.bi;
        L->bwd_w[t] = s.bw;
        L->params[t] = s.pa;
        L->stash[t] = s.st;
        /* the cut, member by member in layer order as before */
        int p = first_out(row, W, n);
        double c = read_outside(&G, row, n) ? I->input_bytes : 0;
        for (int k = G.x_off[p]; k < G.x_off[p + 1]; k++)
            if (read_outside(&G, row, G.x[k])) c += I->out_bytes[G.x[k]];
        /* a member whose readers all come before the next layer not in
         * the set has them all in */
        int nz = p;
        for (int q = p >> 6; q < W; q++) {
            uint64_t b = row[q];
            if (q == p >> 6) b &= p & 63 ? ~0ull << (p & 63) : ~0ull;
            for (; b; b &= b - 1) {
                int i = q * 64 + __builtin_ctzll(b);
                if (nz <= i) nz = next_out(row, W, n, i);
                if (G.last[i] >= nz && read_outside(&G, row, i)) c += I->out_bytes[i];
            }
        }
        L->cut[t] = c;
    }
    free(stk);
    free(wk);
    free(G.rd_off);
    free(G.rd);
    free(G.x_off);
    free(G.x);
    free(G.last);
    order_by_work(L);
}
