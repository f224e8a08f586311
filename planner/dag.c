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
 * the graph; past max_sets (or its work limit) the listing stops and
 * reports it, and the caller must say what it does instead.  Nested pairs
 * are never listed (their number grows with the square of the sets): the
 * lattice keeps its edges, one searched layer apart, and the exact search
 * walks them down from a set to its subsets, only as far as its bound
 * allows (exact_subs.c).
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
 * downset is a bit row of one word per 64 layers, so on a graph of many
 * layers (a 20,000-node PipeDream graph with skip edges: 313 words a row)
 * the rows, not the number of sets, take the time and memory.  A step is
 * one layer tried, one input checked, one word compared or copied, and
 * every new set is charged its n bits as n steps (it costs far less since
 * the listing extends each set by its addable layers alone, but the charge
 * keeps the memory bound below); DAG_WORK_PER_SET steps per allowed set
 * (2 x 10^9 at the default; docs/planner.md, "Branching models"). */
#define DAG_WORK_PER_SET ((int64_t)20000)
/* The same limit bounds memory: a set is a row of n / 8 bytes, held twice
 * (the listing and the lattice), and every new set is charged n steps, so
 * at most DAG_WORK_PER_SET x max_sets / n sets, 5,000 bytes per allowed
 * set, are held whatever the graph (100,000 sets of a million-layer graph
 * would be 25 GB). */

/* A growing array of ints. */
typedef struct ivec {
    int *v;
    int64_t n, cap;
} ivec;

static void ivec_push(ivec *a, int x)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 1024;
        a->v = cl_realloc(a->v, (size_t)a->cap * sizeof(int));
    }
    a->v[a->n++] = x;
}

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
    /* per row (discovery order): the searched layers that can join it (not
     * in it, every input in), ascending, at add.v[add_off[k] ..
     * add_off[k + 1]) */
    ivec add;
    int64_t *add_off;
    /* edges of the lattice found on the way: row lo_k + one layer (and the
     * inert layers its rules bring) = row hi_k */
    ivec e_lo, e_hi;
    /* per layer: the searched layers and the eager inert layers reading it
     * (each once), at rd[rd_off[i] .. rd_off[i + 1]) */
    int *rd_off, *rd;
} enumr;

static uint64_t row_hash(const uint64_t *r, int words)
{
    uint64_t h = 1469598103934665603ull;
    for (int w = 0; w < words; w++) {
        h ^= r[w] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 1099511628211ull;
    }
    /* the multiplications carry only upward: without a final mix the low
     * bits, which pick the slot, would ignore the high bits of every word
     * (rows that differ only in layers 32-63 of each word all collided) */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
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
        E->add_off = cl_realloc(E->add_off, (size_t)(E->cap_rows + 1) * sizeof(int64_t));
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

/* Layer i's lazy sources join with it. */
static void join_lazy(const enumr *E, uint64_t *r, int i)
{
    const plan_inst *I = E->I;
    for (int q = I->in_off[i]; q < I->in_off[i + 1]; q++) {
        int j = I->in_idx[q];
        if (j >= 0 && E->rule[j] == RULE_LAZY) r[j >> 6] |= 1ull << (j & 63);
    }
}

/* Add every eager layer whose inputs are all in, with its lazy sources
 * (they join with their first reader, also an eager one: an inert layer
 * reading only an inert source of the model input was added without it,
 * the set was no downset, and the full set was never reached). */
static void close_eager(const enumr *E, uint64_t *r, int64_t *steps)
{
    int changed = 1;
    while (changed) {
        changed = 0;
        for (int i = 0; i < E->n; i++) {
            ++*steps;
            if (E->rule[i] != RULE_EAGER || row_has(r, i)) continue;
            if (inputs_in(E, i, r, steps)) {
                r[i >> 6] |= 1ull << (i & 63);
                join_lazy(E, r, i);
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

/* The readers of each layer that can change what joins a set when it
 * joins: searched layers (they may become addable) and eager inert ones
 * (they join with their last input); each once, ascending. */
static void list_readers(enumr *E)
{
    const plan_inst *I = E->I;
    int n = E->n;
    E->rd_off = cl_calloc((size_t)n + 1, sizeof(int));
    for (int i = 0; i < n; i++)
        for (int k = I->in_off[i]; k < I->in_off[i + 1]; k++)
            if (I->in_idx[k] >= 0 && E->rule[i] != RULE_LAZY) E->rd_off[I->in_idx[k] + 1]++;
    for (int j = 0; j < n; j++) E->rd_off[j + 1] += E->rd_off[j];
    E->rd = cl_malloc((size_t)(E->rd_off[n] + 1) * sizeof(int));
    int *at = cl_malloc((size_t)n * sizeof *at);
    for (int j = 0; j < n; j++) at[j] = E->rd_off[j];
    for (int i = 0; i < n; i++)
        for (int k = I->in_off[i]; k < I->in_off[i + 1]; k++) {
            int j = I->in_idx[k];
            if (j < 0 || E->rule[i] == RULE_LAZY) continue;
            if (at[j] > E->rd_off[j] && E->rd[at[j] - 1] == i) continue; /* read twice */
            E->rd[at[j]++] = i;
        }
    /* compact: drop the slots the duplicates left */
    int w = 0;
    for (int j = 0; j < n; j++) {
        int a = E->rd_off[j];
        E->rd_off[j] = w;
        for (int k = a; k < at[j]; k++) E->rd[w++] = E->rd[k];
    }
    E->rd_off[n] = w;
    free(at);
}

static void set_bit(uint64_t *r, int i) { r[i >> 6] |= 1ull << (i & 63); }

/* Layer v joins row r (closed under the rules), with its lazy sources and
 * the eager layers it completes: the only eager layers that can join are
 * v's readers (one whose inputs were all in before is in already), and an
 * eager layer has no readers, so nothing further follows.  The same row as
 * close_eager after adding v and its lazy sources. */
static void join(const enumr *E, uint64_t *r, int v, int64_t *steps)
{
    set_bit(r, v);
    join_lazy(E, r, v);
    for (int k = E->rd_off[v]; k < E->rd_off[v + 1]; k++) {
        int i = E->rd[k];
        ++*steps;
        if (E->rule[i] != RULE_EAGER || row_has(r, i) || !inputs_in(E, i, r, steps)) continue;
        set_bit(r, i);
        join_lazy(E, r, i);
    }
}

/* Record the addable layers of the new row `at` (the last), which is row k
 * with v joined: k's but v, and v's searched readers whose inputs are now
 * all in (inert layers joining with v are read by no searched layer, or
 * are lazy sources, which inputs_in skips), merged in ascending order. */
static void list_addable(enumr *E, int64_t k, int v, int64_t *steps)
{
    const uint64_t *r = &E->rows[(E->n_rows - 1) * E->words];
    int64_t a = E->add_off[k], a_end = E->add_off[k + 1];
    int b = E->rd_off[v], b_end = E->rd_off[v + 1];
    for (;;) {
        while (b < b_end && (E->rule[E->rd[b]] != RULE_NONE || row_has(r, E->rd[b]) ||
                             !inputs_in(E, E->rd[b], r, steps)))
            b++;
        if (a < a_end && E->add.v[a] == v) a++;
        if (a == a_end && b == b_end) break;
        int x;
        if (b == b_end || (a < a_end && E->add.v[a] < E->rd[b])) x = E->add.v[a++];
        else x = E->rd[b++];
        ivec_push(&E->add, x);
        ++*steps;
    }
    E->add_off[E->n_rows] = E->add.n;
}

int plan_lattice_downsets(plan_lattice *L, const plan_inst *I, int64_t max_sets, cl_err *e)
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
    list_readers(&E);

    /* the empty set first: the lattice starts there (the first stage is
     * the second set minus the first); then its eager closure, when that
     * is not empty (inert sinks of inert sources), a downset of its own */
    uint64_t *row = cl_calloc((size_t)W, 8);
    int fresh, rc = CL_OK;
    table_put(&E, row, &fresh);
    E.add_off[0] = 0;
    for (int v = 0; v < n; v++)
        if (E.rule[v] == RULE_NONE && inputs_in(&E, v, row, &work)) ivec_push(&E.add, v);
    E.add_off[1] = E.add.n;
    close_eager(&E, row, &work);
    int64_t k1 = table_put(&E, row, &fresh);
    if (fresh) {
        for (int64_t a = 0; a < E.add_off[1]; a++) ivec_push(&E.add, E.add.v[a]);
        E.add_off[2] = E.add.n;
        ivec_push(&E.e_lo, 0);
        ivec_push(&E.e_hi, (int)k1);
    }
    /* breadth-first over the rows in discovery order (a work list); each
     * new row is a known one with one addable layer joined */
    for (int64_t k = 0; k < E.n_rows && !rc; k++) {
        for (int64_t a = E.add_off[k]; a < E.add_off[k + 1] && !rc; a++) {
            int v = E.add.v[a];
            work += 1 + W;
            memcpy(row, &E.rows[k * W], (size_t)W * 8);
            if (k == 0) { /* the empty row is not closed under the rules */
                set_bit(row, v);
                join_lazy(&E, row, v);
                close_eager(&E, row, &work);
            } else {
                join(&E, row, v, &work);
            }
            int64_t id = table_put(&E, row, &fresh);
            if (id < 0) {
                rc = cl_fail(e, CL_ERUN,
                             "the layer graph has more than %lld downsets (cuts); listing stopped (raise --max-cuts)",
                             (long long)max_sets);
                break;
            }
            ivec_push(&E.e_lo, (int)k);
            ivec_push(&E.e_hi, (int)id);
            if (fresh) {
                work += n; /* its bits (see DAG_WORK_PER_SET) */
                list_addable(&E, k, v, &work);
            }
            if (work > work_cap) /* checked per row: see DAG_WORK_PER_SET */
                rc = work_fail(e, "listing", work, max_sets, E.n_rows);
        }
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
    int *id_of = cl_malloc((size_t)S * sizeof *id_of);
    for (int64_t t = 0; t < S; t++) {
        memcpy(&L->bits[t * W], &E.rows[keys[t].id * W], (size_t)W * 8);
        id_of[keys[t].id] = (int)t;
    }
    free(keys);
    for (int i = 0; i < n; i++) L->n_inert += E.rule[i] != RULE_NONE;

    /* the lattice's edges, by their larger set: every proper subset of a
     * set is reached from it along them (remove one searched layer at a
     * time, each a maximal one, with the inert layers its rules take) */
    int64_t n_edges = E.e_lo.n;
    L->down_off = cl_calloc((size_t)S + 1, sizeof(int64_t));
    L->down = cl_malloc((size_t)(n_edges + 1) * sizeof(int));
    for (int64_t q = 0; q < n_edges; q++) L->down_off[id_of[E.e_hi.v[q]] + 1]++;
    for (int64_t t = 0; t < S; t++) L->down_off[t + 1] += L->down_off[t];
    int64_t *at = cl_malloc((size_t)S * sizeof *at);
    memcpy(at, L->down_off, (size_t)S * sizeof *at);
    for (int64_t q = 0; q < n_edges; q++) L->down[at[id_of[E.e_hi.v[q]]]++] = id_of[E.e_lo.v[q]];
    free(at);
    free(id_of);
    L->n_edges = n_edges;
    L->subs = cl_calloc(1, sizeof *L->subs);
    L->subs->list = cl_calloc((size_t)S, sizeof(int *));
    L->subs->n = cl_calloc((size_t)S, sizeof(int64_t));
    L->subs->done = cl_calloc((size_t)S, 1);
    plan_lattice_sums(L, I);
out:
    free(E.rule);
    free(E.rows);
    free(E.table);
    free(E.add.v);
    free(E.add_off);
    free(E.e_lo.v);
    free(E.e_hi.v);
    free(E.rd_off);
    free(E.rd);
    return rc;
}
