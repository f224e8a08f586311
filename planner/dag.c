/* dag.c - the downsets of a layer graph: every cut a branching model allows.
 *
 * A pipeline stage of a DAG model is D_hi \ D_lo for downsets D_lo < D_hi
 * (sets closed under taking a layer's inputs), the states of PipeDream's
 * antichain DP and Piper's ideals.  This file lists them all, so the exact
 * search sees every cut, not only the cuts of one topological order.
 *
 * Inert layers (no time, no parameters: PipeDream's Input and __getitem__
 * nodes, for instance) would multiply the count without changing any cost
 * but memory of a few small buffers, so they follow a rule instead of being
 * searched (docs/planner.md, "Branching models"):
 *   - one that no layer reads joins a set as soon as all its inputs are in;
 *   - one that reads only the model input joins with its first reader.
 * The number of downsets can still grow exponentially with the width of
 * the graph; past max_sets (or max_pairs subset pairs) the listing stops and
 * reports it, and the caller must say what it does instead.
 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/budget.h"
#include "cost.h"

void plan_lattice_arrays_(plan_lattice *L, int n_sets);

enum { RULE_NONE = 0, RULE_EAGER = 1, RULE_LAZY = 2 };

/* A work limit beside max_sets (and raised with it by --max-cuts): a
 * downset is a bit row of one word per 64 layers, listing one tries every
 * layer against a row and nesting two compares rows word by word, so on a
 * graph of many layers (a 20,000-node PipeDream graph with skip edges: 313
 * words a row) the steps, not the number of sets, take the time.  A step
 * is one layer tried, one input checked, one word compared or copied;
 * DAG_WORK_PER_SET steps per allowed set (2 x 10^9 at the default 100,000
 * sets; docs/planner.md, "Branching models", says how long that takes). */
#define DAG_WORK_PER_SET ((int64_t)20000)
/* The same limit bounds memory: a set is a row of n / 8 bytes, held twice
 * (the listing and the lattice), and every new set costs at least n steps
 * (close_eager tries every layer), so at most DAG_WORK_PER_SET x max_sets
 * / n sets, 5,000 bytes per allowed set (500 MB at the default), are held
 * whatever the graph (100,000 sets of a million-layer graph would be 25 GB). */

typedef struct enumr {
    const plan_inst *I;
    int n, words;
    int8_t *rule;
    /* hash set of rows */
    uint64_t *rows;     /* n_rows x words */
    int64_t n_rows, cap_rows;
    int64_t *table;     /* open addressing, -1 empty */
    int64_t table_cap;
    int64_t max_sets;
} enumr;

static uint64_t row_hash(const uint64_t *r, int words)
{
    uint64_t h = 1469598103934665603ull;
    for (int w = 0; w < words; w++) {
        h ^= r[w] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 1099511628211ull;
    }
    return h;
}

static int row_has(const uint64_t *r, int i) { return (int)((r[i >> 6] >> (i & 63)) & 1); }

static void table_grow(enumr *E)
{
    int64_t cap = E->table_cap ? E->table_cap * 2 : 1024;
    int64_t *t = cl_malloc((size_t)cap * sizeof *t);
    for (int64_t i = 0; i < cap; i++) t[i] = -1;
    for (int64_t k = 0; k < E->n_rows; k++) {
        uint64_t h = row_hash(&E->rows[k * E->words], E->words) & (uint64_t)(cap - 1);
        while (t[h] >= 0) h = (h + 1) & (uint64_t)(cap - 1);
        t[h] = k;
    }
    free(E->table);
    E->table = t;
    E->table_cap = cap;
}

/* Insert row r; returns its index, or -1 when new and over the limit.
 * *fresh is set when it was not there. */
static int64_t table_put(enumr *E, const uint64_t *r, int *fresh)
{
    *fresh = 0;
    if (2 * (E->n_rows + 1) > E->table_cap) table_grow(E);
    uint64_t h = row_hash(r, E->words) & (uint64_t)(E->table_cap - 1);
    while (E->table[h] >= 0) {
        int64_t k = E->table[h];
        if (memcmp(&E->rows[k * E->words], r, (size_t)E->words * 8) == 0) return k;
        h = (h + 1) & (uint64_t)(E->table_cap - 1);
    }
    if (E->n_rows >= E->max_sets) return -1;
    if (E->n_rows == E->cap_rows) {
        E->cap_rows = E->cap_rows ? E->cap_rows * 2 : 256;
        E->rows = cl_realloc(E->rows, (size_t)E->cap_rows * E->words * 8);
    }
    memcpy(&E->rows[E->n_rows * E->words], r, (size_t)E->words * 8);
    E->table[h] = E->n_rows;
    *fresh = 1;
    return E->n_rows++;
}

/* Are layer i's inputs in row r (those that are not lazy sources, which
 * join with their first reader)?  *steps counts the inputs checked.  Reading
 * the graph's input lists costs a step per input, where a mask per layer
 * would cost a word per 64 layers and n^2 / 4 bytes in all. */
static int inputs_in(const enumr *E, int i, const uint64_t *r, int64_t *steps)
{
    const plan_inst *I = E->I;
    for (int k = I->in_off[i]; k < I->in_off[i + 1]; k++) {
        int j = I->in_idx[k];
        ++*steps;
        if (j >= 0 && E->rule[j] != RULE_LAZY && !row_has(r, j)) return 0;
    }
    return 1;
}

/* Add every eager layer whose inputs are all in, with its lazy sources
 * (they join with their first reader, also an eager one: an inert layer
 * reading only an inert source of the model input was added without it,
 * the set was no downset, and the full set was never reached). */
static void close_eager(const enumr *E, uint64_t *r, int64_t *steps)
{
    const plan_inst *I = E->I;
    int changed = 1;
    while (changed) {
        changed = 0;
        for (int i = 0; i < E->n; i++) {
            ++*steps;
            if (E->rule[i] != RULE_EAGER || row_has(r, i)) continue;
            if (inputs_in(E, i, r, steps)) {
                r[i >> 6] |= 1ull << (i & 63);
                for (int q = I->in_off[i]; q < I->in_off[i + 1]; q++) {
                    int j = I->in_idx[q];
                    if (j >= 0 && E->rule[j] == RULE_LAZY) r[j >> 6] |= 1ull << (j & 63);
                }
                changed = 1;
            }
        }
    }
}

static void classify(enumr *E)
{
    const plan_inst *I = E->I;
    int n = E->n;
    int *readers = cl_calloc((size_t)n, sizeof *readers);
    for (int i = 0; i < n; i++)
        for (int k = I->in_off[i]; k < I->in_off[i + 1]; k++)
            if (I->in_idx[k] >= 0) readers[I->in_idx[k]]++;
    for (int i = 0; i < n; i++) {
        int inert = plan_inst_work(I, i) == 0 && I->param_bytes[i] == 0;
        int only_input = 1;
        for (int k = I->in_off[i]; k < I->in_off[i + 1]; k++)
            if (I->in_idx[k] >= 0) only_input = 0;
        if (!inert) E->rule[i] = RULE_NONE;
        else if (readers[i] == 0) E->rule[i] = RULE_EAGER;
        else if (only_input) E->rule[i] = RULE_LAZY;
        else E->rule[i] = RULE_NONE;
    }
    free(readers);
}

typedef struct set_key {
    int size;
    int64_t id;
} set_key;

static int cmp_set_key(const void *a, const void *b)
{
    const set_key *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int popcount_row(const uint64_t *r, int words)
{
    int c = 0;
    for (int w = 0; w < words; w++) c += __builtin_popcountll(r[w]);
    return c;
}

static int work_fail(cl_err *e, const char *doing, int64_t work, int64_t max_sets, int64_t sets)
{
    return cl_fail(e, CL_ERUN,
                   "%s the cuts of the layer graph took more than %lld steps "
                   "(%lld per allowed cut x --max-cuts %lld) after %lld cuts; stopped",
                   doing, (long long)work, (long long)DAG_WORK_PER_SET, (long long)max_sets, (long long)sets);
}

/* The pairs limit is fixed (it bounds the subset lists' memory, 4 bytes a
 * pair): the message must not send the user to --max-cuts. */
static int pairs_fail(cl_err *e, int64_t sets, int64_t max_pairs)
{
    return cl_fail(e, CL_ERUN,
                   "the layer graph's %lld downsets have more than %lld nested pairs; listing stopped "
                   "(a fixed limit: a larger --max-cuts does not raise it)",
                   (long long)sets, (long long)max_pairs);
}

int plan_lattice_downsets(plan_lattice *L, const plan_inst *I, int64_t max_sets,
                          int64_t max_pairs, cl_err *e)
{
    memset(L, 0, sizeof *L);
    int n = I->n;
    enumr E = {.I = I, .n = n, .words = (n + 63) / 64, .max_sets = max_sets};
    int W = E.words;
    /* steps done, and allowed (see DAG_WORK_PER_SET) */
    int64_t work = 0, next_poll = 0;
    double work_cap = (double)max_sets * DAG_WORK_PER_SET;
    E.rule = cl_calloc((size_t)n, 1);
    classify(&E);

    /* the empty set first: the lattice starts there (the first stage is
     * the second set minus the first); then its eager closure, when that
     * is not empty (inert sinks of inert sources), a downset of its own */
    uint64_t *row = cl_calloc((size_t)W, 8);
    int fresh, rc = CL_OK;
    table_put(&E, row, &fresh);
    close_eager(&E, row, &work);
    table_put(&E, row, &fresh);
    /* depth-first over the rows in discovery order (a work list) */
    for (int64_t k = 0; k < E.n_rows && !rc; k++) {
        for (int v = 0; v < n && !rc; v++) {
            const uint64_t *cur = &E.rows[k * W];
            if (E.rule[v] != RULE_NONE || row_has(cur, v)) continue;
            work++;
            if (!inputs_in(&E, v, cur, &work)) continue;
            work += W;
            memcpy(row, cur, (size_t)W * 8);
            row[v >> 6] |= 1ull << (v & 63);
            for (int q = I->in_off[v]; q < I->in_off[v + 1]; q++) { /* lazy sources join */
                int j = I->in_idx[q];
                if (j >= 0 && E.rule[j] == RULE_LAZY) row[j >> 6] |= 1ull << (j & 63);
            }
            close_eager(&E, row, &work);
            if (table_put(&E, row, &fresh) < 0)
                rc = cl_fail(e, CL_ERUN,
                             "the layer graph has more than %lld downsets (cuts); listing stopped (raise --max-cuts)",
                             (long long)max_sets);
            else if (work > work_cap) /* checked per new set: see DAG_WORK_PER_SET */
                rc = work_fail(e, "listing", work, max_sets, E.n_rows);
        }
        if (!rc && work > work_cap)
            rc = work_fail(e, "listing", work, max_sets, E.n_rows);
        if (!rc && work >= next_poll) {
            next_poll = work + ((int64_t)1 << 22);
            if (cl_budget_over()) rc = cl_budget_fail(e, "listing the cuts of the layer graph", "--algo merge");
        }
    }
    free(row);
    if (!rc) {
        /* the full set must be among them (every layer reachable) */
        int64_t full = -1;
        for (int64_t k = 0; k < E.n_rows; k++)
            if (popcount_row(&E.rows[k * W], W) == n) full = k;
        assert(full >= 0);
        (void)full;
    }
    if (rc) goto out;

    /* sort by size (stable by discovery), copy into the lattice */
    int64_t S = E.n_rows;
    set_key *keys = cl_malloc((size_t)S * sizeof *keys);
    for (int64_t k = 0; k < S; k++) keys[k] = (set_key){popcount_row(&E.rows[k * W], W), k};
    qsort(keys, (size_t)S, sizeof *keys, cmp_set_key);
    L->n_layers = n;
    L->chain = 0;
    L->words = W;
    plan_lattice_arrays_(L, (int)S);
    L->bits = cl_malloc((size_t)S * W * 8);
    for (int64_t t = 0; t < S; t++)
        memcpy(&L->bits[t * W], &E.rows[keys[t].id * W], (size_t)W * 8);
    free(keys);
    for (int i = 0; i < n; i++) L->n_inert += E.rule[i] != RULE_NONE;

    /* subset lists */
    int64_t pairs = 0, cap = 1024;
    L->sub_off = cl_calloc((size_t)S + 1, sizeof(int64_t));
    L->sub = cl_malloc((size_t)cap * sizeof(int));
    int *sz = cl_malloc((size_t)S * sizeof *sz);
    for (int64_t t = 0; t < S; t++) sz[t] = popcount_row(&L->bits[t * W], W);
    for (int64_t t = 0; t < S && !rc; t++) {
        L->sub_off[t] = pairs;
        const uint64_t *bt = &L->bits[t * W];
        for (int64_t u = 0; u < S && sz[u] < sz[t]; u++) {
            const uint64_t *bu = &L->bits[u * W];
            int w = 0;
            while (w < W && (bu[w] & ~bt[w]) == 0) w++;
            work += w + 1;
            if (w < W) continue;
            if (pairs == max_pairs) {
                rc = pairs_fail(e, S, max_pairs);
                break;
            }
            if (pairs == cap) {
                cap *= 2;
                L->sub = cl_realloc(L->sub, (size_t)cap * sizeof(int));
            }
            L->sub[pairs++] = (int)u;
        }
        if (!rc && work > work_cap)
            rc = work_fail(e, "nesting", work, max_sets, S);
        if (!rc && work >= next_poll) {
            next_poll = work + ((int64_t)1 << 22);
            if (cl_budget_over()) rc = cl_budget_fail(e, "nesting the cuts of the layer graph", "--algo merge");
        }
    }
    free(sz);
    if (!rc) {
        L->sub_off[S] = pairs;
        L->n_pairs = pairs;
        plan_lattice_sums(L, I);
    } else {
        plan_lattice_free(L);
    }
out:
    free(E.rule);
    free(E.rows);
    free(E.table);
    return rc;
}
