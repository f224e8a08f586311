/* interleave.c - chunk splits for interleaved 1F1B plans (docs/planner.md,
 * "Interleaved plans").
 *
 * With p devices and v chunks each, the pipeline has n = p x v stages and
 * stage k runs on device k mod p.  The split below minimises the slowest
 * chunk (per iteration, on its device) over contiguous runs of the chain
 * view: a bisection on the bound with a greedy cover, then an even split
 * under that bound when it spreads the devices' sums better.  It does not
 * minimise those sums exactly and does not replicate: a heuristic, said so
 * wherever its plans are shown.
 */
#include <math.h>
#include <stdlib.h>

#include "cost.h"

/* Greedy cover under bound T: chunk k takes layers while its time stays
 * within T, leaving at least one layer per chunk still to come.  Returns
 * 1 when all layers fit in n chunks (cut filled), else 0. */
static int cover(const plan_inst *I, const plan_lattice *L, int p, int n, double T, int *cut)
{
    int nl = L->n_layers, at = 0;
    cut[0] = 0;
    for (int k = 0; k < n; k++) {
        int end = at + 1; /* at least one layer */
        double spd = I->speed[k % p];
        int limit = nl - (n - k - 1);
        if ((double)I->m * ((L->work[end] - L->work[at]) / spd) > T) return 0;
        while (end < limit && (double)I->m * ((L->work[end + 1] - L->work[at]) / spd) <= T) end++;
        if (k == n - 1 && end < nl) return 0;
        cut[k + 1] = end;
        at = end;
    }
    return at == nl;
}

/* Even split under bound T: chunk k aims at the time still to place over
 * the chunks still to fill (rounding to the nearer layer), never over T,
 * leaving a layer for each chunk to come.  Returns 1 when it covers all. */
static int even(const plan_inst *I, const plan_lattice *L, int p, int n, double T, int *cut)
{
    int nl = L->n_layers, at = 0;
    cut[0] = 0;
    for (int k = 0; k < n; k++) {
        double spd = I->speed[k % p], left = 0;
        for (int j = k; j < n; j++) left += 1.0 / I->speed[j % p];
        /* time still to place, in this chunk's seconds, shared by weight */
        double target = (double)I->m * (L->work[nl] - L->work[at]) / spd * ((1.0 / spd) / left) * spd;
        int end = at + 1, limit = nl - (n - k - 1);
        while (end < limit) {
            double now = (double)I->m * ((L->work[end] - L->work[at]) / spd);
            double next = (double)I->m * ((L->work[end + 1] - L->work[at]) / spd);
            if (next > T || next - target > target - now) break;
            end++;
        }
        if ((double)I->m * ((L->work[end] - L->work[at]) / spd) > T) return 0;
        if (k == n - 1 && end < nl) return 0;
        cut[k + 1] = end;
        at = end;
    }
    return at == nl;
}

/* The largest sum of chunk times a device carries. */
static double device_max(const plan_inst *I, const plan_lattice *L, int p, int n, const int *cut)
{
    double worst = 0;
    for (int q = 0; q < p; q++) {
        double t = 0;
        for (int k = q; k < n; k += p) t += (double)I->m * ((L->work[cut[k + 1]] - L->work[cut[k]]) / I->speed[q]);
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
    while (!cover(I, L, p, n, hi, cut)) hi *= 2;
    for (int it = 0; it < 100 && hi - lo > hi * PLAN_TIGHT_SLACK; it++) {
        double mid = 0.5 * (lo + hi);
        if (cover(I, L, p, n, mid, cut)) hi = mid;
        else lo = mid;
    }
    if (!cover(I, L, p, n, hi, cut)) return 0;
    /* the greedy cover fills early chunks to the bound; an even split under
     * the same bound usually spreads devices' sums better: keep the better */
    int *alt = cl_malloc((size_t)(n + 1) * sizeof(int));
    if (even(I, L, p, n, hi, alt) && device_max(I, L, p, n, alt) < device_max(I, L, p, n, cut))
        for (int k = 0; k <= n; k++) cut[k] = alt[k];
    free(alt);
    return 1;
}
