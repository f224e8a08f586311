/* exact_shadow.c - shadow schedules riding along one pass of the exact
 * search (plan_exact_shadowed in exact.h).
 *
 * One pass 2 at o->lower_s can carry up to PLAN_EXACT_SHADOWS other
 * schedules: each entry keeps a headroom per shadow (dp_entry.Hs) and a bit
 * per schedule saying whether that schedule's own run would have kept it
 * (dp_entry.alive), and a front keeps an entry while any schedule would.
 * A stage is kept for a schedule only where its memory fits; each
 * schedule's prunes (exact_pass.c: need, the stage's least memory) and
 * steps are its own, and so is its dominance (devices below where its
 * memory depends on the depth, communication first where its memory cannot
 * bind within the bound).  By induction each schedule's own run offers
 * exactly the extensions of its alive entries, in the same order, so each
 * gets exactly the layout of its own search, for the transitions of one
 * pass.  (Before, only schedules whose memory never binds rode along; the
 * others, fbp and pipedream on long chains over many devices, each ran the
 * same pass on their own.)
 */
#include <assert.h>

#include "exact_front.h"

/* Take the shadow schedules' memory-count tables (like dp_tables.in, exact
 * memory, devices = depth; kept by the instance or built,
 * exact_dp_shadow_tables) and turn them on; 0 when the tables are too
 * large or a schedule's memory rules it out. */
int exact_dp_shadows_setup(exact_dp *X, int n_sh, const sched_kind *sh)
{
    const plan_inst *I = X->I;
    if (!X->tab.in) return 0;
    for (int j = 0; j < n_sh; j++) {
        const double *pm, *infl;
        exact_dp_shadow_tables(X, j, sh[j], &X->sh.in[j], &X->sh.ver[j], &pm, &infl);
        plan_inst y = *I;
        y.sched = sh[j];
        int dep = plan_mem_dependence(&y);
        if (dep == PLAN_MEM_BY_TOTAL) return 0;
        /* as exact_dp_pass sets track_u (and u_fronts, which must be 0 like ours) */
        X->sh.track[j] = dep != PLAN_MEM_FLAT && plan_mem_depth_monotone(&y);
        if (dep != PLAN_MEM_FLAT && !X->sh.track[j]) return 0;
        /* what exact_dp_free_with needs; and unless its memory never binds
         * (with the lead's: then the lead's prunes are its own), its own
         * prunes: the multipliers build_tables gives its own search (no
         * device count fixed) */
        X->sh.most_ok[j] = exact_dp_mem_most(&y, X->L, &X->sh.most[j]);
        int all = X->L->n_sets - 1;
        X->sh.mem_free[j] = X->sh.most_ok[j] &&
                            exact_dp_mem_most_fits(I, &X->sh.most[j], X->L->params[all], X->L->stash[all]);
        if (X->tab.mem_free && X->sh.mem_free[j]) continue;
        X->sh.pm[j] = pm;
        X->sh.infl[j] = infl;
    }
    if (X->tab.dep != PLAN_MEM_FLAT && !X->tab.monotone) return 0; /* u_fronts */
    X->sh.lead_mask = LEAD_BIT;
    for (int j = 0; j < n_sh; j++) {
        X->sh.steps[j] = 0;
        if (X->tab.mem_free && X->sh.mem_free[j]) X->sh.lead_mask |= 1 << j;
    }
    X->sh.split = X->sh.lead_mask != (LEAD_BIT | ((1 << n_sh) - 1));
    X->sh.n = n_sh;
    return 1;
}

/* Set when a pass with shadows starts (exact_dp_pass): the schedules whose
 * own run of it lets strictly less communication dominate. */
void exact_dp_shadows_pass(exact_dp *X, double bound)
{
    X->sh.cf_mask = X->run.c_first ? LEAD_BIT : 0;
    X->sh.track_mask = X->run.track_u ? LEAD_BIT : 0;
    for (int j = 0; j < X->sh.n; j++)
        if (X->sh.track[j]) X->sh.track_mask |= 1 << j;
    for (int j = 0; j < X->sh.n; j++) {
        int cf = X->run.goal == GOAL_COMM &&
                 (X->c_first_rule ? X->c_first_rule > 0
                                  : exact_dp_free_with(X, X->sh.most_ok[j], &X->sh.most[j], X->sh.mem_free[j], bound));
        if (cf) X->sh.cf_mask |= 1 << j;
    }
}

/* The schedules among `mask` (LEAD_BIT and shadow bits) for which a
 * dominates b: dominates() for the lead, and for shadow j dominates_by()
 * under its own rule (headroom Hs[j], track_u sh.track[j]); the pass with
 * shadows is a pass 2 (GOAL_COMM); the shared comparisons once. */
static inline int dom_mask(const exact_dp *X, int track_mask, const dp_key *a, const dp_key *b, int mask)
{
    if (a->d > b->d) return 0;
    /* the schedules that let strictly less communication dominate (their
     * memory cannot bind in this pass) */
    int out = 0;
    if (a->C < b->C) {
        out = mask & X->sh.cf_mask;
        mask &= ~X->sh.cf_mask;
        if (!mask) return out;
    }
    int ule = a->U <= b->U;
    if (!ule) mask &= ~track_mask;
    if (!mask) return out;
    if (a->C != b->C) return out | (a->C < b->C ? mask : 0);
    if (mask & LEAD_BIT) {
        if (a->H != b->H ? a->H > b->H : ule) out |= LEAD_BIT;
    }
    for (int j = 0; j < X->sh.n; j++)
        if (mask & (1 << j)) {
            if (a->Hs[j] != b->Hs[j] ? a->Hs[j] > b->Hs[j] : ule) out |= 1 << j;
        }
    return out;
}

/* offer with shadow schedules (X->sh.n > 0).  The front is the union of
 * the lead's and every shadow's own front: an entry's bit for schedule j
 * says it is in j's own front, where j's own run would have put it (by
 * induction: j's run offers exactly the extensions of the entries alive
 * for j, in the same order, and compares them by its own rule).  An
 * entry stays while it is alive for one of them. */
/* dom_mask in a pass 1 (plan_exact_opts.memo_out: a schedule riding along
 * a climb): dominates_by() without pass 2's keys, the bottleneck the same
 * for every schedule. */
static inline int dom_mask1(int track_mask, const dp_key *a, const dp_key *b, int mask)
{
    if (a->d > b->d || a->B > b->B) return 0;
    if (a->U > b->U) mask &= ~track_mask;
    return mask;
}

void exact_dp_offer_sh(exact_dp *X, dp_front *f, const dp_key *kvp, int t, int c, int k, int parent,
                  int edge, int from, int r)
{
    assert(X->run.goal == GOAL_COMM || X->run.goal == GOAL_BOTTLENECK);
    int p1 = X->run.goal == GOAL_BOTTLENECK;
    const dp_key *kv = kvp; /* read field by field: it was just stored */
    int alive = kv->alive;
    dp_key *fkey = f->key;
    int n = f->n;
    int track_mask = X->sh.track_mask;
    /* rejected by schedule j when an entry of its front dominates v, any
     * entry: so the scan may start anywhere, and it stops once every
     * schedule has rejected v.  Most offers are rejected (over 90% in the
     * shared passes on long chains, by fronts of about 20 entries); the scan
     * starts at the entry that completed the last rejection (consecutive
     * offers come from one parent's blocks, alike). */
    int rej = 0, s = f->dom < n ? f->dom : 0;
    for (int left = n; left > 0; left--, s = s + 1 < n ? s + 1 : 0) {
        int m = fkey[s].alive & alive & ~rej;
        if (m && (rej |= p1 ? dom_mask1(track_mask, &fkey[s], kv, m) : dom_mask(X, track_mask, &fkey[s], kv, m)) == alive) {
            f->dom = s;
            return;
        }
    }
    alive &= ~rej;
    if (!alive) return;
    /* v then drops from j's front the entries it dominates by j's rule */
    int w = 0, reuse = -1;
    for (int i = 0; i < n; i++) {
        int a = fkey[i].alive, both = a & alive;
        if (both) a &= ~(p1 ? dom_mask1(track_mask, kv, &fkey[i], both) : dom_mask(X, track_mask, kv, &fkey[i], both));
        if (a != fkey[i].alive) {
            fkey[i].alive = a;
            X->store.ent[f->ids[i]].alive = a;
        }
        if (a) {
            f->ids[w] = f->ids[i];
            fkey[w++] = fkey[i];
        } else if (reuse < 0) {
            reuse = f->ids[i];
        }
    }
    f->n = w;
    keep_entry(X, f, kv, alive, reuse, t, c, k, parent, edge, from, r);
}

/* Final entry `id` of a pass with shadows: each shadow schedule keeps the
 * best of the final entries alive for it, by its own headroom and in the
 * same order, as its own run would pick. */
void exact_dp_shadow_pick(exact_dp *X, int id)
{
    const dp_entry *a = &X->store.ent[id];
    for (int j = 0; j < X->sh.n; j++) {
        if (!(a->alive & (1 << j))) continue;
        int q = X->sh.best[j];
        const dp_entry *b = q >= 0 ? &X->store.ent[q] : NULL;
        if (X->run.goal == GOAL_BOTTLENECK) { /* a pass 1: the least bottleneck, the first of equals */
            if (!b || a->B < b->B) X->sh.best[j] = id;
            continue;
        }
        if (!b || a->C < b->C ||
            (a->C == b->C && (a->Hs[j] != b->Hs[j] ? a->Hs[j] > b->Hs[j] : a->U < b->U)))
            X->sh.best[j] = id;
    }
}
