/* interleave.c - chunk splits for interleaved 1F1B plans (docs/planner.md,
 * "Interleaved plans").
 *
 * With p devices and v chunks each, the pipeline has n = p x v stages and
 * stage k runs on device k mod p.  The split below minimises the slowest
 * chunk (per iteration, on its device) over contiguous runs of the chain
 * view: a bisection on the bound with a cover (greedy, exact where every
 * layer alone fits every position; else cover_mixed), then an even split
 * under that bound when it spreads the devices' sums better.  It does not
 * minimise those sums exactly and does not replicate: a heuristic, said so
 * wherever its plans are shown.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"

/* The time of the chunk of layers at..end-1 on a device of speed spd. */
static inline double chunk_s(const plan_inst *I, const plan_lattice *L, int at, int end, double spd)
{
    return (double)I->m * ((L->work[end] - L->work[at]) / spd);
}

/* Greedy cover under bound T: chunk k takes layers while its time stays
 * within T, leaving at least one layer per chunk still to come.  Returns
 * 1 when all layers fit in n chunks (cut filled), else 0.  A chunk's time
 * only grows with its end (prefix sums of work that is never negative,
 * and rounding keeps order), so its last end within T is found by
 * galloping from its first layer: the end a scan layer by layer would stop
 * at, in O(log length) (a bisection calls this some 40 times per split). */
static int cover(const plan_inst *I, const plan_lattice *L, int p, int n, double T, int *cut)
{
    int nl = L->n_layers, at = 0;
    cut[0] = 0;
    for (int k = 0; k < n; k++) {
        int end = at + 1; /* at least one layer */
        double spd = I->speed[k % p];
        int limit = nl - (n - k - 1);
        if (chunk_s(I, L, at, end, spd) > T) return 0;
        /* end is within T; grow the step while end + step is, then halve */
        int step = 1;
        while (end + step <= limit && chunk_s(I, L, at, end + step, spd) <= T) {
            end += step;
            step *= 2;
        }
        for (step /= 2; step > 0; step /= 2)
            if (end + step <= limit && chunk_s(I, L, at, end + step, spd) <= T) end += step;
        if (k == n - 1 && end < nl) return 0;
        cut[k + 1] = end;
        at = end;
    }
    return at == nl;
}

/* The same question where the p devices differ in speed, answered exactly:
 * there the greedy cover can run ahead and hand a heavy layer to a chunk
 * on a slow device, and fail under a bound some split meets.  Row k of
 * reach marks where chunk k may start (row 0: layer 0 only): chunk k may
 * end at b when it may start at some a < b whose chunk a..b-1 is within T,
 * and those a form a range lo(b)..b-1 (a chunk's time only falls as it
 * starts later) whose lo grows with b, so a count of marks by prefix
 * answers each b in O(1).  Chunk k starts at k at the earliest and leaves a
 * layer to each chunk after it, so a row holds the W = nl - n + 1 places
 * k..k + W - 1 (reach: n + 1 rows of W + 1, count: W + 1):
 * O(n x (nl - n + 1)) a bound.  Fills cut when the split exists. */
static int cover_mixed(const plan_inst *I, const plan_lattice *L, int p, int n, double T, int *cut,
                       unsigned char *reach, int *count)
{
    int nl = L->n_layers, W = nl - n + 1;
    size_t row = (size_t)W + 1;
    memset(reach, 0, (size_t)W);
    reach[0] = 1;
    for (int k = 0; k < n; k++) {
        const unsigned char *from = reach + (size_t)k * row;  /* place a at [a - k]     */
        unsigned char *to = reach + (size_t)(k + 1) * row;    /* place b at [b - k - 1] */
        double spd = I->speed[k % p];
        /* count[i] = marks of row k at places k..k + i - 1 */
        count[0] = 0;
        for (int i = 0; i < W; i++) count[i + 1] = count[i] + from[i];
        int any = 0;
        for (int b = k + 1, lo = k; b <= k + W; b++) {
            while (lo < b - 1 && chunk_s(I, L, lo, b, spd) > T) lo++;
            int ok = chunk_s(I, L, lo, b, spd) <= T && count[b - k] - count[lo - k] > 0;
            to[b - k - 1] = (unsigned char)ok;
            any |= ok;
        }
        if (!any) return 0;
    }
    if (!reach[(size_t)n * row + (nl - n)]) return 0;
    /* back from the end: chunk k starts at the latest start it may have */
    cut[n] = nl;
    for (int k = n - 1; k >= 0; k--) {
        const unsigned char *from = reach + (size_t)k * row;
        int a = cut[k + 1] - 1;
        while (!from[a - k]) a--; /* (a mark within T exists: the row's test) */
        cut[k] = a;
    }
    return cut[0] == 0;
}

/* Even split under bound T: chunk k aims at the time still to place over
 * the chunks still to fill (rounding to the nearer layer), never over T,
 * leaving a layer for each chunk to come.  Returns 1 when it covers all. */
static int even(const plan_inst *I, const plan_lattice *L, int p, int n, double T, int *cut)
{
    int nl = L->n_layers, at = 0;
    cut[0] = 0;
    /* left, the sum of 1 / speed over chunks k..n-1 in that order, is n - k
     * additions for each k: O(n^2) for the split (n is p x v, thousands).
     * Where the p devices have one speed the sum depends only on how many
     * terms it adds, so the running sums of 1..n terms give each one, by
     * the same additions in the same order */
    int one_speed = 1;
    for (int q = 1; q < p; q++) one_speed &= I->speed[q] == I->speed[0];
    double *run = NULL;
    if (one_speed) {
        run = cl_malloc((size_t)(n + 1) * sizeof *run);
        run[0] = 0;
        for (int i = 1; i <= n; i++) run[i] = run[i - 1] + 1.0 / I->speed[0];
    }
    for (int k = 0; k < n; k++) {
        double spd = I->speed[k % p], left = 0;
        if (run) left = run[n - k];
        else
            for (int j = k; j < n; j++) left += 1.0 / I->speed[j % p];
        /* time still to place, in this chunk's seconds, shared by weight */
        double target = (double)I->m * (L->work[nl] - L->work[at]) / spd * ((1.0 / spd) / left) * spd;
        int end = at + 1, limit = nl - (n - k - 1);
        while (end < limit) {
            double now = chunk_s(I, L, at, end, spd), next = chunk_s(I, L, at, end + 1, spd);
            if (next > T || next - target > target - now) break;
            end++;
        }
        if (chunk_s(I, L, at, end, spd) > T || (k == n - 1 && end < nl)) {
            free(run);
            return 0;
        }
        cut[k + 1] = end;
        at = end;
    }
    free(run);
    return at == nl;
}

/* The largest sum of chunk times a device carries. */
static double device_max(const plan_inst *I, const plan_lattice *L, int p, int n, const int *cut)
{
    double worst = 0;
    for (int q = 0; q < p; q++) {
        double t = 0;
        for (int k = q; k < n; k += p) t += chunk_s(I, L, cut[k], cut[k + 1], I->speed[q]);
        worst = fmax(worst, t);
    }
    return worst;
}

int plan_chunks_minmax(const plan_inst *I, const plan_lattice *L, int p, int n, int *cut)
{
    if (n < 1 || n > L->n_layers) return 0;
    double spd_min = HUGE_VAL;
    for (int k = 0; k < p; k++) spd_min = fmin(spd_min, I->speed[k]);
    /* the whole chain on the slowest device always covers; the slack keeps
     * rounding of the chunks' prefix differences from refusing it, and the
     * 1e-300 keeps the bound above 0 for a model that costs nothing (the
     * doubling below then ends) */
    double lo = 0, hi = (double)I->m * (L->work[L->n_layers] / spd_min) * (1 + PLAN_TIGHT_SLACK) + 1e-300;
    /* Under a bound where every layer alone fits every position (heavy:
     * the largest layer on the slowest position), the places each chunk may
     * end at are a run from its least, and the greedy cover reaches the top
     * of each: it is exact (a chunk that ends later never leaves the next
     * one less room).  Under one where some layer fits no position (light:
     * the largest on the fastest) nothing covers.  Between, which only
     * positions of several speeds have, cover_mixed decides: a layer too
     * heavy for a slow position breaks the runs. */
    double spd_max = 0, heavy = 0, light = 0;
    for (int k = 0; k < p; k++) spd_max = fmax(spd_max, I->speed[k]);
    for (int i = 0; i < L->n_layers; i++) {
        heavy = fmax(heavy, chunk_s(I, L, i, i + 1, spd_min));
        light = fmax(light, chunk_s(I, L, i, i + 1, spd_max));
    }
    unsigned char *reach = NULL;
    int *count = NULL;
    if (light < heavy) {
        size_t W = (size_t)(L->n_layers - n + 1);
        reach = cl_malloc((size_t)(n + 1) * (W + 1));
        count = cl_malloc((W + 1) * sizeof *count);
    }
#define FITS(T)                                                                                            \
    ((T) >= heavy ? cover(I, L, p, n, (T), cut) : (T) < light ? 0 : cover_mixed(I, L, p, n, (T), cut, reach, count))
    /* (bounded: a cover that fails at every bound, which the chain on the
     * slowest device rules out, must not loop once hi is infinite) */
    for (int d = 0; d < 64 && !FITS(hi); d++) hi *= 2;
    for (int it = 0; it < 100 && hi - lo > hi * PLAN_TIGHT_SLACK; it++) {
        double mid = 0.5 * (lo + hi);
        if (FITS(mid)) hi = mid;
        else lo = mid;
    }
    int ok = FITS(hi);
#undef FITS
    free(reach);
    free(count);
    if (!ok) return 0;
    /* the greedy cover fills early chunks to the bound; an even split under
     * the same bound usually spreads devices' sums better: keep the better */
    int *alt = cl_malloc((size_t)(n + 1) * sizeof(int));
    if (even(I, L, p, n, hi, alt) && device_max(I, L, p, n, alt) < device_max(I, L, p, n, cut))
        for (int k = 0; k <= n; k++) cut[k] = alt[k];
    free(alt);
    return 1;
}
