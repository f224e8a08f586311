/* test_plan_brute.c - the brute force over every layout the planner's cost
 * model allows (test_plan_brute.h): every chain of downsets and every block
 * placement with gaps, the best kept by plan_eval_cmp. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/cost.h"
#include "test.h"
#include "test_plan_brute.h"

/* -------------------------------------------------------- brute force -- */

typedef struct brute {
    const plan_inst *I;
    const plan_lattice *L;
    int p_fixed, dev_fixed;
    int rep;                /* > 0: every stage on exactly this many devices */
    int cut_max;            /* a stage starts at a set (prefix) <= this      */
    plan_layout cur;
    plan_eval best;
    int have;
    long evals;
} brute;

static int subset(const plan_lattice *L, int a, int b)
{
    if (L->chain) return a < b;
    if (L->size[a] >= L->size[b]) return 0;
    for (int i = 0; i < L->n_layers; i++)
        if (plan_lattice_has(L, a, i) && !plan_lattice_has(L, b, i)) return 0;
    return 1;
}

static void brute_rec(brute *b, int s, int set, int pos_min)
{
    const plan_inst *I = b->I;
    const plan_lattice *L = b->L;
    if (set == L->n_sets - 1) {
        if (b->p_fixed && s != b->p_fixed) return;
        plan_layout y = {.p = s, .cut = b->cur.cut, .pos = b->cur.pos, .r = b->cur.r};
        if (b->dev_fixed) {
            int u = 0;
            for (int k = 0; k < s; k++) u += y.r[k];
            if (u != b->dev_fixed) return;
        }
        plan_eval ev;
        plan_layout_eval(I, L, &y, &ev);
        b->evals++;
        if (!ev.valid || !ev.feasible) return;
        if (!b->have || plan_eval_cmp(&ev, &b->best) < 0) {
            b->best = ev;
            b->have = 1;
        }
        return;
    }
    if (s == I->n_dev || set > b->cut_max) return;
    for (int nxt = set + 1; nxt < L->n_sets; nxt++) {
        if (!subset(L, set, nxt)) continue;
        for (int pos = pos_min; pos < I->n_dev; pos++)
            for (int r = 1; pos + r <= I->n_dev; r++) {
                if (r > I->m || r > I->max_replicas || !plan_block_ok(I, pos, r)) continue;
                if (b->rep && r != b->rep) continue;
                b->cur.cut[s + 1] = nxt;
                b->cur.pos[s] = pos;
                b->cur.r[s] = r;
                brute_rec(b, s + 1, nxt, pos + r);
            }
    }
}

/* Returns 1 with *best when some layout is feasible.  With I->rep_fixed or
 * I->cut_max set, only layouts that obey them (checked here on their own,
 * not by the search's rules). */
int brute_force(const plan_inst *I, const plan_lattice *L, int p_fixed, int dev_fixed,
                       plan_eval *best, long *evals)
{
    brute b = {.I = I, .L = L, .p_fixed = p_fixed, .dev_fixed = dev_fixed, .rep = I->rep_fixed,
               .cut_max = L->chain ? I->cut_max : L->n_sets};
    plan_layout_alloc(&b.cur, I->n_dev + 1);
    b.cur.cut[0] = 0;
    brute_rec(&b, 0, 0, 0);
    plan_layout_free(&b.cur);
    *best = b.best;
    *evals = b.evals;
    return b.have;
}
