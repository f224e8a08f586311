/* test_plan_subs.c - the DAG lattice and the exact search's subsets against
 * the way they were made before (issue 16).
 *
 * The listing used to close every new set by trying every layer and to
 * compare every two sets for nesting, keeping each set's proper subsets
 * sorted most work first (ties: the larger id first); the exact search
 * tried them in that order.  Now the listing extends each set by its
 * addable layers only (dag.c) and the search walks the lattice's edges down
 * (exact_subs.c).  Both are checked here against a plain copy of the old
 * way on random graphs with inert layers (the rules' cases) and wide
 * branches: the same sets with the same ids, and for every set the same
 * subsets in the same order, first walked and then read from the cache,
 * and again after the sums change.  Equal ids and equal order make the
 * search's every offer the same, so its answers are those of before
 * (test_plan_exact checks them against brute force).
 *
 * The exact search now reads the subsets off one list of every set by work
 * (plan_lattice.by_work); that list, filtered to a set's proper subsets,
 * is checked against the same sorted pairs.
 *
 * The per-set sums (dag_sums.c shares the sums of common prefixes and
 * checks only the members whose readers can lie outside) are checked bit
 * for bit against the plain sum over every member in layer order.
 */
#include <stdlib.h>
#include <string.h>

#include "planner/cost.h"
#include "planner/exact_dp.h"
#include "test.h"
#include "test_rand.h"

/* The instance of n layers whose layer i reads ins[i x stride ..][0 ..
 * cnt[i]) (total inputs in all), on one device, with random times: a fifth
 * of the layers inert (no time, no parameters). */
static void make_inst(plan_inst *I, int n, int total, const int *ins, int stride, const int *cnt)
{
    plan_inst_alloc(I, n, total, 1);
    int at = 0;
    for (int i = 0; i < n; i++) {
        I->in_off[i] = at;
        for (int a = 0; a < cnt[i]; a++) I->in_idx[at++] = ins[i * stride + a];
    }
    I->in_off[n] = at;
    for (int i = 0; i < n; i++) {
        int inert = irand(0, 4) == 0;
        /* a few equal times, so that sets of equal work tie */
        double f = irand(0, 3) == 0 ? 0.5 : 0.05 + urand();
        I->fwd_s[i] = inert ? 0 : f;
        I->bwd_in_s[i] = inert ? 0 : f;
        I->bwd_w_s[i] = inert ? 0 : (irand(0, 3) == 0 ? 0 : urand());
        I->param_bytes[i] = inert ? 0 : 1 + urand() * 1e6;
        I->out_bytes[i] = 1 + urand() * 1e6;
        I->stash_bytes[i] = urand() * 1e6;
    }
    I->speed[0] = 1;
    I->mem_cap[0] = 1e300;
    I->m = 1;
}

/* A random graph of n layers: each reads one to three earlier layers or
 * the model input (wide: any of them, so many branches run side by side;
 * else the first input is one of the three layers before); a fifth inert
 * (no time, no parameters). */
static void random_graph(plan_inst *I, int n, int wide)
{
    int ins[64][3], cnt[64], total = 0;
    for (int i = 0; i < n; i++) {
        int k = i == 0 ? 1 : irand(1, 3), used = 0;
        for (int a = 0; a < k; a++) {
            int near = i - 3 < -1 ? -1 : i - 3;
            int src = wide || a > 0 ? irand(-1, i - 1) : irand(near, i - 1);
            int dup = 0;
            for (int b = 0; b < used; b++) dup |= ins[i][b] == src;
            if (!dup) ins[i][used++] = src;
        }
        cnt[i] = used;
        total += used;
    }
    make_inst(I, n, total, &ins[0][0], 3, cnt);
}

/* A series of Inception-like cells, up to n <= 160 layers (rows of up to
 * three words): a layer forks into two to four branches of one to four
 * layers that a join reads, the branches' layers interleaved in layer
 * order; times, bytes and inert layers as random_graph. */
static void cells_graph(plan_inst *I, int n)
{
    int ins[160][4], cnt[160], total = 0, k = 0;
    ins[0][0] = -1;
    cnt[k++] = 1;
    while (k < n) {
        int fork = k - 1, nb = irand(2, 4), len[4], done[4] = {0}, last[4];
        int cell = 0;
        for (int b = 0; b < nb; b++) cell += len[b] = irand(1, 4);
        if (k + cell + 1 > n) { /* no room: a chain layer */
            ins[k][0] = k - 1;
            cnt[k++] = 1;
            continue;
        }
        for (int b = 0; b < nb; b++) last[b] = fork;
        for (int left = cell; left > 0; left--) { /* a branch with layers left */
            int b;
            do b = irand(0, nb - 1);
            while (done[b] == len[b]);
            ins[k][0] = last[b];
            cnt[k] = 1;
            last[b] = k++;
            done[b]++;
        }
        for (int b = 0; b < nb; b++) ins[k][b] = last[b];
        cnt[k++] = nb;
    }
    for (int i = 0; i < n; i++) total += cnt[i];
    make_inst(I, n, total, &ins[0][0], 4, cnt);
}

/* ------------------------------------------------- the old listing -- */

enum { NONE, EAGER, LAZY };

static int has(const uint64_t *r, int i) { return (int)((r[i >> 6] >> (i & 63)) & 1); }

static int old_inputs_in(const plan_inst *I, const int *rule, int i, const uint64_t *r)
{
    for (int k = I->in_off[i]; k < I->in_off[i + 1]; k++) {
        int j = I->in_idx[k];
        if (j >= 0 && rule[j] != LAZY && !has(r, j)) return 0;
    }
    return 1;
}

static void old_close(const plan_inst *I, const int *rule, uint64_t *r)
{
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < I->n; i++) {
            if (rule[i] != EAGER || has(r, i) || !old_inputs_in(I, rule, i, r)) continue;
            r[i >> 6] |= 1ull << (i & 63);
            for (int q = I->in_off[i]; q < I->in_off[i + 1]; q++)
                if (I->in_idx[q] >= 0 && rule[I->in_idx[q]] == LAZY)
                    r[I->in_idx[q] >> 6] |= 1ull << (I->in_idx[q] & 63);
            changed = 1;
        }
    }
}

/* The old listing (n <= 64: one word a row): breadth first, every layer
 * tried in order, each new set closed by trying every layer, a linear
 * search for repeats; then sorted by size, stable by discovery.  Returns
 * the number of rows in rows[]. */
static int old_listing(const plan_inst *I, uint64_t *rows, int cap)
{
    int n = I->n, rule[64], readers[64] = {0};
    for (int i = 0; i < n; i++)
        for (int k = I->in_off[i]; k < I->in_off[i + 1]; k++)
            if (I->in_idx[k] >= 0) readers[I->in_idx[k]]++;
    for (int i = 0; i < n; i++) {
        int inert = I->fwd_s[i] + I->bwd_in_s[i] + I->bwd_w_s[i] == 0 && I->param_bytes[i] == 0;
        int only_input = 1;
        for (int k = I->in_off[i]; k < I->in_off[i + 1]; k++) only_input &= I->in_idx[k] < 0;
        rule[i] = !inert ? NONE : readers[i] == 0 ? EAGER : only_input ? LAZY : NONE;
    }
    int m = 0;
    rows[m++] = 0;
    uint64_t r = 0;
    old_close(I, rule, &r);
    if (r) rows[m++] = r;
    for (int k = 0; k < m; k++)
        for (int v = 0; v < n; v++) {
            if (rule[v] != NONE || has(&rows[k], v) || !old_inputs_in(I, rule, v, &rows[k])) continue;
            r = rows[k] | 1ull << v;
            for (int q = I->in_off[v]; q < I->in_off[v + 1]; q++)
                if (I->in_idx[q] >= 0 && rule[I->in_idx[q]] == LAZY) r |= 1ull << I->in_idx[q];
            old_close(I, rule, &r);
            int seen = 0;
            for (int q = 0; q < m && !seen; q++) seen = rows[q] == r;
            if (!seen && m < cap) rows[m++] = r;
        }
    /* stable sort by size (insertion) */
    for (int a = 1; a < m; a++)
        for (int b = a; b > 0 && __builtin_popcountll(rows[b - 1]) > __builtin_popcountll(rows[b]); b--) {
            uint64_t x = rows[b];
            rows[b] = rows[b - 1];
            rows[b - 1] = x;
        }
    return m;
}

/* ------------------------------------------------ the old subsets -- */

static const plan_lattice *cmp_L;

static int cmp_more_work(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    if (cmp_L->work[x] != cmp_L->work[y]) return cmp_L->work[x] > cmp_L->work[y] ? -1 : 1;
    return x > y ? -1 : x < y;
}

/* Every set's subsets as exact_dp_sub hands them out equal the old sorted
 * list; *pairs counts them.  Returns the number of sets that differ. */
static int check_subs(const plan_inst *I, const plan_lattice *L, int64_t *pairs)
{
    exact_dp X;
    cl_err e = {0};
    plan_exact_opts o = {.upper_s = HUGE_VAL};
    if (exact_dp_setup(&X, I, L, &o, NULL, &e)) return L->n_sets;
    int bad = 0, S = L->n_sets;
    int *want = malloc((size_t)S * sizeof *want);
    for (int t = 0; t < S; t++) {
        int nw = 0;
        for (int u = 0; u < S; u++)
            if (L->size[u] < L->size[t] && (L->bits[u] & ~L->bits[t]) == 0) want[nw++] = u;
        cmp_L = L;
        qsort(want, (size_t)nw, sizeof *want, cmp_more_work);
        *pairs += nw;
        int ok = 1;
        for (int j = 0; j <= nw && ok; j++) ok = exact_dp_sub(&X, t, j) == (j < nw ? want[j] : -1);
        /* the lattice's list of every set by work, read as the search reads
         * it (exact_pass.c, subsets_by_work): t's proper subsets in order */
        int j = 0;
        for (int k = 0; k < S && ok; k++) {
            int u = L->by_work[k];
            if (u != t && (L->bits[u] & ~L->bits[t]) == 0) ok = j < nw && want[j++] == u;
        }
        ok = ok && j == nw;
        bad += !ok;
    }
    free(want);
    exact_dp_teardown(&X, NULL);
    return bad;
}

static void test_listing_and_subsets(void)
{
    rng_state = 161616;
    int bad_sets = 0, bad_subs = 0, inert_cases = 0;
    int64_t pairs = 0;
    enum { CAP = 1 << 15 };
    uint64_t *rows = malloc(CAP * sizeof *rows);
    for (int it = 0; it < 300; it++) {
        plan_inst I;
        random_graph(&I, irand(1, it % 2 ? 12 : 24), it % 2);
        int m = old_listing(&I, rows, CAP);
        plan_lattice L;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(plan_lattice_downsets(&L, &I, CAP - 1, &e), CL_OK);
        int same = L.n_sets == m && L.words == 1;
        for (int t = 0; same && t < m; t++) same = L.bits[t] == rows[t];
        bad_sets += !same;
        inert_cases += L.n_inert > 0;
        if (same) {
            /* walked, then read from the cache, then walked again after
             * the sums change (times doubled: the same order, re-made) */
            bad_subs += check_subs(&I, &L, &pairs);
            bad_subs += check_subs(&I, &L, &pairs);
            for (int i = 0; i < I.n; i++) I.fwd_s[i] *= 2;
            plan_lattice_sums(&L, &I);
            bad_subs += check_subs(&I, &L, &pairs);
        }
        plan_lattice_free(&L);
        plan_inst_free(&I);
    }
    free(rows);
    CU_ASSERT_EQUAL(bad_sets, 0);
    CU_ASSERT_EQUAL(bad_subs, 0);
    CU_ASSERT(inert_cases > 100 && pairs > 100000); /* not vacuous */
}

/* ------------------------------------------------- the plain sums -- */

/* Set t's sums as they were taken before dag_sums.c: every member in layer
 * order, and the cut from every non-member's inputs.  1 when every figure
 * of L equals them to the bit. */
static int sums_plain_equal(const plan_inst *I, const plan_lattice *L, int t)
{
    int n = I->n;
    const uint64_t *row = &L->bits[(size_t)t * (size_t)L->words];
    double w = 0, f = 0, bi = 0, bw = 0, pa = 0, st = 0, c = 0;
    int sz = 0, in_out = 0;
    char *out_read = calloc((size_t)n, 1);
    for (int i = 0; i < n; i++) {
        if (!has(row, i)) {
            for (int k = I->in_off[i]; k < I->in_off[i + 1]; k++) {
                if (I->in_idx[k] < 0) in_out = 1;
                else out_read[I->in_idx[k]] = 1;
            }
            continue;
        }
        sz++;
        w += plan_inst_work(I, i);
        f += I->fwd_s[i];
        bi += I->bwd_in_s[i];
        bw += I->bwd_w_s[i];
        pa += I->param_bytes[i];
        st += I->stash_bytes[i];
    }
    if (in_out) c = I->input_bytes;
    for (int i = 0; i < n; i++)
        if (has(row, i) && out_read[i]) c += I->out_bytes[i];
    free(out_read);
    return L->size[t] == sz && L->work[t] == w && L->fwd[t] == f && L->bwd_in[t] == bi &&
           L->bwd_w[t] == bw && L->params[t] == pa && L->stash[t] == st && L->cut[t] == c;
}

static void test_sums(void)
{
    rng_state = 1616;
    int bad = 0, multiword = 0;
    int64_t sets = 0;
    for (int it = 0; it < 300; it++) {
        plan_inst I;
        /* cells of up to 160 layers (rows of three words), or random
         * graphs: up to 24 layers near the layers before them, up to 12
         * on wide branches */
        if (it % 3 == 0) cells_graph(&I, irand(20, 160));
        else random_graph(&I, irand(1, it % 3 == 1 ? 24 : 12), it % 3 == 2);
        for (int i = 0; i < I.n; i++) /* values whose sums round */
            I.out_bytes[i] = irand(0, 2) ? 1e6 * urand() : 1e-3 * urand();
        I.input_bytes = urand() * 1e6;
        plan_lattice L;
        cl_err e = {0};
        if (plan_lattice_downsets(&L, &I, 20000, &e) != CL_OK) { /* too many: skipped */
            plan_inst_free(&I);
            continue;
        }
        multiword += L.words > 1;
        for (int round = 0; round < 2; round++) { /* again with other times */
            for (int t = 0; t < L.n_sets; t++) bad += !sums_plain_equal(&I, &L, t);
            sets += L.n_sets;
            for (int i = 0; i < I.n; i++) I.bwd_in_s[i] *= 1.0 / 3.0;
            plan_lattice_sums(&L, &I);
        }
        plan_lattice_free(&L);
        plan_inst_free(&I);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(multiword > 50 && sets > 100000); /* not vacuous */
}

TEST_SUITE(plan_subs)
{
    test_add_suite("plan_subs");
    test_add("DAG lattice and subsets as the old listing and sorted pairs, on 300 random graphs",
             test_listing_and_subsets);
    test_add("DAG set sums and cuts equal the plain sums over every member to the bit, on 300 random graphs",
             test_sums);
}
