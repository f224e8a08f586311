/* exact_front.h - the Pareto fronts of the exact search's states (internal
 * to planner/exact*.c, see exact_dp.h).
 *
 * Every transition of a pass ends in an offer to a front, the innermost
 * work of the search, so this is all static inline and offer is forced
 * inline: the key stays in registers in the callers (exact_pass.c).  The
 * shadow schedules' variant of offer lives in exact_shadow.c.
 */
#ifndef CL_PLAN_EXACT_FRONT_H
#define CL_PLAN_EXACT_FRONT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exact_dp.h"

/* A fresh entry slot. */
static inline int new_entry(exact_dp *X)
{
    dp_store *S = &X->store;
    if (S->n_ent == S->cap_ent) {
        S->cap_ent = S->cap_ent ? S->cap_ent * 2 : 4096;
        S->ent = cl_realloc(S->ent, (size_t)S->cap_ent * sizeof *S->ent);
    }
    return (int)S->n_ent++;
}

/* a is at least as good as b for every completion.  When memory grows with
 * the depth, an entry whose placed stages use fewer devices is no worse (the
 * stages still to come sit less deep), so U joins the comparison.  But when
 * no stage can overflow a device (c_first), the depth decides only the
 * headroom, which pass 2 compares after the communication: every completion
 * of b then completes a too (a spans no more positions), at no more
 * communication, so a strictly smaller communication dominates whatever U
 * (1,000 layers on 1,024 devices: 14.6 million steps in pass 2 without
 * this, 0.48 million with it; the 3-way fronts over span, U and
 * communication were the cost). */
static inline int dominates_by(int track_u, int pass2, int c_first, const dp_key *a, const dp_key *b,
                               double ha, double hb)
{
    if (a->d > b->d) return 0;
    if (c_first && a->C < b->C) return 1;
    if (track_u && a->U > b->U) return 0;
    if (!pass2) return a->B <= b->B;
    if (a->C != b->C) return a->C < b->C;
    if (ha != hb) return ha > hb;
    return a->U <= b->U;
}

static inline int dominates(const exact_dp *X, const dp_key *a, const dp_key *b)
{
    /* feasibility within the bound only (any_below): the least span wins */
    if (X->run.goal == GOAL_BELOW) return a->d <= b->d && (!X->run.track_u || a->U <= b->U);
    return dominates_by(X->run.track_u, X->run.goal == GOAL_COMM, X->run.c_first, a, b, a->H, b->H);
}

/* The store's free lists (dp_store.pool, head_pool): linked through each
 * block's first bytes. */
static inline void pool_push(void **list, void *block)
{
    *(void **)block = *list;
    *list = block;
}

/* A block off the list, or a new one of `bytes`. */
static inline void *pool_pop(void **list, size_t bytes)
{
    void *p = *list;
    if (!p) return cl_malloc(bytes);
    *list = *(void **)p;
    return p;
}

/* Free every block of a list (the search's teardown). */
static inline void pool_free(void **list)
{
    while (*list) {
        void *p = *list;
        *list = *(void **)p;
        free(p);
    }
}

/* A block for a front of `cap` entries (a power of 2 from 2): cap keys,
 * then cap ids. */
static inline dp_key *front_block(dp_store *S, int cap)
{
    return pool_pop(&S->pool[__builtin_ctz((unsigned)cap)], (size_t)cap * (sizeof(dp_key) + sizeof(int)));
}

static inline void front_block_put(dp_store *S, dp_key *block, int cap)
{
    pool_push(&S->pool[__builtin_ctz((unsigned)cap)], block);
}

/* Slot of (t, c, k) in the front index: the one holding it, else the
 * empty slot where it belongs. */
static inline size_t fidx_slot(const dp_store *S, int t, int c, int k)
{
    uint64_t h = ((uint64_t)(unsigned)t * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(unsigned)c * 0xC2B2AE3D27D4EB4Full) ^
                 ((uint64_t)(unsigned)k * 0x165667B19E3779F9ull);
    size_t mask = (size_t)S->fidx_cap - 1, i = (size_t)(h ^ (h >> 29)) & mask;
    for (;; i = (i + 1) & mask) {
        const struct dp_fslot *q = &S->fidx[i];
        if (q->gen != S->fgen || (q->t == t && q->c == c && q->k == k)) return i;
    }
}

/* Room for one more front in the index (kept at most half full): grown
 * and refilled from this pass's fronts. */
static inline void fidx_reserve(dp_store *S)
{
    if (2 * (S->n_fr + 1) <= S->fidx_cap) return;
    int cap = S->fidx_cap ? 2 * S->fidx_cap : 64;
    while (2 * (S->n_fr + 1) > cap) cap *= 2;
    free(S->fidx);
    S->fidx = cl_calloc((size_t)cap, sizeof *S->fidx);
    S->fidx_cap = cap;
    S->fgen = 1;
    for (int f = 0; f < S->n_fr; f++) {
        const dp_front *q = &S->fr[f];
        S->fidx[fidx_slot(S, q->t, q->c, q->k)] = (struct dp_fslot){q->t, q->c, q->k, f, S->fgen};
    }
}

/* The front of state (t, c) for k (with u_fronts, k also codes U; see
 * offer), created when missing; a new front goes to the head of its
 * state's list. */
static inline dp_front *front_of(exact_dp *X, int t, int c, int k)
{
    dp_store *S = &X->store;
    if (!S->head[t]) {
        /* (at least two ints: a pooled array holds the list's link) */
        S->head[t] = pool_pop(&S->head_pool, (size_t)(X->pos.C > 2 ? X->pos.C : 2) * sizeof(int));
        for (int i = 0; i < X->pos.C; i++) S->head[t][i] = -1;
    }
    /* the first few fronts of the list are walked (short lists, the common
     * case, need no hashing); the index answers for longer ones */
    int f = S->head[t][c];
    for (int i = 0; f >= 0 && i < 4; f = S->fr[f].next, i++)
        if (S->fr[f].k == k) return &S->fr[f];
    size_t slot = 0;
    if (X->run.u_fronts || X->p_fixed) {
        fidx_reserve(S);
        slot = fidx_slot(S, t, c, k);
        if (S->fidx[slot].gen == S->fgen) return &S->fr[S->fidx[slot].f];
    } else {
        for (; f >= 0; f = S->fr[f].next)
            if (S->fr[f].k == k) return &S->fr[f];
    }
    if (S->n_fr == S->cap_fr) {
        S->cap_fr = S->cap_fr ? S->cap_fr * 2 : 1024;
        S->fr = cl_realloc(S->fr, (size_t)S->cap_fr * sizeof *S->fr);
    }
    dp_front *nf = &S->fr[S->n_fr];
    *nf = (dp_front){.k = k, .next = S->head[t][c], .t = t, .c = c};
    if (X->run.u_fronts || X->p_fixed) S->fidx[slot] = (struct dp_fslot){t, c, k, S->n_fr, S->fgen};
    S->head[t][c] = S->n_fr++;
    return nf;
}

/* Store entry (kv but alive `alive`; t, c, k, parent, edge, from, r as in
 * offer) in front f, in slot `reuse` when >= 0 (an entry just dropped from
 * f), else a new one. */
static inline void keep_entry(exact_dp *X, dp_front *f, const dp_key *kv, int alive, int reuse, int t,
                              int c, int k, int parent, int edge, int from, int r)
{
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 2;
        dp_key *key = front_block(&X->store, cap);
        int *ids = (int *)(key + cap);
        if (f->n) {
            memcpy(key, f->key, (size_t)f->n * sizeof *key);
            memcpy(ids, f->ids, (size_t)f->n * sizeof *ids);
        }
        if (f->cap) front_block_put(&X->store, f->key, f->cap);
        f->key = key;
        f->ids = ids;
        f->cap = cap;
    }
    int id = reuse >= 0 ? reuse : new_entry(X);
    X->store.created++;
    dp_entry *e = &X->store.ent[id];
    e->B = kv->B;
    e->C = kv->C;
    e->H = kv->H;
    for (int j = 0; j < X->sh.n; j++) e->Hs[j] = kv->Hs[j];
    e->alive = alive;
    e->U = kv->U;
    e->d = kv->d;
    e->t = t;
    e->c = c;
    e->k = k;
    e->parent = parent;
    e->edge = edge;
    e->from = from;
    e->r = r;
    f->key[f->n] = *kv;
    f->key[f->n].alive = alive;
    f->ids[f->n++] = id;
}

/* Offer a new entry to the front of state (t, c, k): key kv, and how it
 * extends entry `parent` (edge; EDGE_STAGE: the stage set `from` \ t on r
 * replicas).  It is stored only when no entry of the front dominates it.
 *
 * Every offer to a front comes before the front is expanded (offers go to
 * smaller sets, or through gaps to classes expanded later), so an entry
 * dropped from its front has no extensions: its slot is reused.  Inlined
 * into the callers, so the key stays in registers. */
static inline __attribute__((always_inline)) void offer(exact_dp *X, const dp_key *kv, int t, int c,
                                                        int k, int parent, int edge, int from,
                                                        int r)
{
    dp_store *S = &X->store;
    int fk = (X->p_fixed ? k : 0) * (X->pos.N + 1) + (X->run.u_fronts ? kv->U : 0);
    /* the state's first front is usually the one (a single k) */
    int f0 = S->head[t] ? S->head[t][c] : -1;
    dp_front *f = f0 >= 0 && S->fr[f0].k == fk ? &S->fr[f0] : front_of(X, t, c, fk);
    if (X->sh.n) {
        exact_dp_offer_sh(X, f, kv, t, c, k, parent, edge, from, r);
        return;
    }
    dp_key *fkey = f->key;
    int n = f->n;
    for (int i = 0; i < n; i++)
        if (dominates(X, &fkey[i], kv)) return;
    int w = 0, reuse = -1;
    for (int i = 0; i < n; i++) {
        if (!dominates(X, kv, &fkey[i])) {
            if (w != i) {
                f->ids[w] = f->ids[i];
                fkey[w] = fkey[i];
            }
            w++;
        } else if (reuse < 0) {
            reuse = f->ids[i];
        }
    }
    f->n = w;
    keep_entry(X, f, kv, kv->alive, reuse, t, c, k, parent, edge, from, r);
}

/* The key of entry x (the parts dominance compares). */
static inline dp_key key_of(const exact_dp *X, const dp_entry *x)
{
    dp_key kv = {.B = x->B, .C = x->C, .H = x->H, .U = x->U, .d = x->d, .alive = x->alive};
    for (int j = 0; j < X->sh.n; j++) kv.Hs[j] = x->Hs[j];
    return kv;
}

#endif
