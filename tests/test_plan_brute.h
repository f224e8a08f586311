/* test_plan_brute.h - random instances of the planner's cost model and the
 * brute force that lists every layout it allows (test_plan_brute.c), for
 * the suites that check the exact search against it (plan_exact,
 * plan_passes). */
#ifndef CL_TEST_PLAN_BRUTE_H
#define CL_TEST_PLAN_BRUTE_H

#include <math.h>

#include "planner/cost.h"
#include "test_rand.h"

typedef struct gen_opts {
    int max_layers, dag, max_dev;
    int min_dev;            /* 0: 1 */
} gen_opts;

/* Fill a random instance from the including suite's own generator
 * (test_rand.h: each suite seeds its copy, so a failing seed replays
 * alone; hence defined here, static inline); returns p_fixed to use (0 = free)
 * and sets *dev_fixed when the schedule's memory needs a fixed device
 * count. */
static inline int gen_instance(plan_inst *I, const gen_opts *g, int *dev_fixed)
{
    int n = irand(1, g->max_layers);
    int nd = irand(g->min_dev > 0 ? g->min_dev : 1, g->max_dev);
    /* inputs */
    int *cnt = cl_calloc((size_t)n, sizeof *cnt);
    int *ins = cl_malloc((size_t)n * 3 * sizeof *ins);
    int total = 0;
    for (int i = 0; i < n; i++) {
        if (!g->dag || i == 0) {
            ins[3 * i] = i - 1;
            cnt[i] = 1;
        } else {
            int k = irand(1, i >= 2 ? 3 : 1);
            int used = 0;
            for (int a = 0; a < k; a++) {
                int src = a == 0 ? i - 1 : irand(-1, i - 1);
                int dup = 0;
                for (int b = 0; b < used; b++) dup |= ins[3 * i + b] == src;
                if (!dup) ins[3 * i + used++] = src;
            }
            /* sort ascending */
            for (int a = 1; a < used; a++)
                for (int b = a; b > 0 && ins[3 * i + b - 1] > ins[3 * i + b]; b--) {
                    int t = ins[3 * i + b];
                    ins[3 * i + b] = ins[3 * i + b - 1];
                    ins[3 * i + b - 1] = t;
                }
            cnt[i] = used;
        }
        total += cnt[i];
    }
    plan_inst_alloc(I, n, total, nd);
    int at = 0;
    for (int i = 0; i < n; i++) {
        I->in_off[i] = at;
        for (int a = 0; a < cnt[i]; a++) I->in_idx[at++] = ins[3 * i + a];
    }
    I->in_off[n] = at;
    free(cnt);
    free(ins);
    for (int i = 0; i < n; i++) {
        int inert = g->dag && irand(0, 5) == 0;
        I->fwd_s[i] = inert ? 0 : 0.05 + urand();
        I->bwd_in_s[i] = inert ? 0 : urand() * 1.5;
        I->bwd_w_s[i] = inert ? 0 : urand();
        I->param_bytes[i] = inert || irand(0, 3) == 0 ? 0 : urand() * 1e6;
        I->out_bytes[i] = 1 + urand() * 1e6;
        I->stash_bytes[i] = urand() * 1e6;
    }
    I->input_bytes = urand() * 1e6;
    /* devices: nodes of random or equal sizes, equal or mixed devices */
    int shape = irand(0, 2), mixed = irand(0, 2) == 0;
    int node = 0, left = 0;
    for (int d = 0; d < nd; d++) {
        if (left == 0) {
            left = shape == 0 ? nd : shape == 1 ? (nd % 2 == 0 ? 2 : 1) : irand(1, nd - d);
            if (d > 0) node++;
        }
        I->node[d] = node;
        left--;
        I->dev[d] = d;
        I->speed[d] = mixed ? (irand(0, 1) ? 1.0 : 0.5 + urand() * 1.5) : 1.0;
        I->mem_cap[d] = 1e300;
    }
    I->link[CLUSTER_INTRA] = (cluster_link){1e6 + urand() * 1e7, urand() * 1e-3};
    I->link[CLUSTER_INTER] = (cluster_link){1e5 + urand() * 1e6, urand() * 1e-2};
    I->m = irand(1, 6);
    static const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_FBP, SCHED_PIPEDREAM,
                                       SCHED_ZBH1};
    I->sched = kinds[irand(0, 4)];
    int k = irand(0, 2);
    I->state = plan_state_factors(4, PREC_FP32, (plan_optim)k, 0, 4);
    I->comm = irand(0, 3) != 0;
    I->max_replicas = irand(0, 2) == 0 ? 1 : nd;
    /* memory: a cap around what the model needs spread over the devices,
     * so it binds sometimes and makes some instances infeasible */
    double need = 0;
    for (int i = 0; i < n; i++)
        need += I->param_bytes[i] * (3 + k) + I->stash_bytes[i] * I->m + 4 * I->out_bytes[i];
    if (irand(0, 3) != 0) {
        double f = 0.4 + urand() * 1.2;
        for (int d = 0; d < nd; d++) I->mem_cap[d] = need / nd * f * (mixed ? 0.7 + urand() * 0.6 : 1.0);
        if (!mixed)
            for (int d = 1; d < nd; d++) I->mem_cap[d] = I->mem_cap[0];
    }
    int p_fixed = 0;
    *dev_fixed = 0;
    if (plan_mem_dependence(I) == PLAN_MEM_BY_TOTAL) *dev_fixed = irand(1, nd);
    if (irand(0, 5) == 0) p_fixed = irand(1, nd < n ? nd : n);
    /* a third of the instances in mixed precision and/or under ZeRO, whose
     * model state shrinks with a stage's replicas; drawn from a hash of the
     * generator's state without advancing it, so every instance is
     * otherwise the one it was before they were modelled */
    uint64_t h = state_hash();
    if (h % 3 == 0)
        I->state = plan_state_factors((h >> 8) & 1 ? 2 : 4, (h >> 9) & 1 ? PREC_MIXED : PREC_FP32,
                                      (plan_optim)k, (int)((h >> 10) % (PLAN_ZERO_MAX + 1)),
                                      (h >> 9) & 1 && (h >> 40) & 1 ? 2 : 4);
    return p_fixed;
}

/* Returns 1 with *best when some layout is feasible.  With I->rep_fixed or
 * I->cut_max set, only layouts that obey them (checked here on their own,
 * not by the search's rules). */
int brute_force(const plan_inst *I, const plan_lattice *L, int p_fixed, int dev_fixed,
                plan_eval *best, long *evals);

#endif
