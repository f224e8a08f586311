/* exact_dp.h - the exact search's state, shared by its files (internal to
 * planner/exact*.c; the interface is exact.h).
 *
 * A dynamic programme over suffixes of the pipeline.  A state is
 *   (t, c, k): the layers of set t are still to place (t is a downset, the
 *   stages already placed hold the rest), c says where the next stage must
 *   end on the device line and how it links to the stage after it, and k
 *   counts the stages placed (only when memory or the caller needs it).
 * Stages are placed last to first, from the right end of the device line.
 * Each state keeps a small Pareto front of entries over (d, key): d is the
 * span of device positions used so far, key the objective so far.
 *
 * The search is split by pass, and so is its state (struct exact_dp):
 *   exact_setup.c   positions and classes of the device line (dp_places) and
 *                   the tables every transition reads (dp_tables), built
 *                   once per search
 *   exact_climb.c   which pass runs and how (dp_pass_state): the bound climb of
 *                   pass 1, the feasibility passes, pass 2
 *   exact_pass.c    one pass: the transitions and the walk over the sets;
 *                   its entries and fronts (dp_store, see exact_front.h), its
 *                   step budget (dp_budget)
 *   exact_shadow.c  the shadow schedules riding along a pass (dp_shadows)
 *   exact_subs.c    a DAG set's subsets, smallest stage first, on demand
 *                   (dp_subs)
 *   exact.c         the entry points of exact.h and the layout's rebuild
 * Cross-file functions carry the prefix exact_dp_; everything else is static.
 */
#ifndef CL_PLAN_EXACT_DP_H
#define CL_PLAN_EXACT_DP_H

#include <math.h>
#include <stdint.h>

#include "exact.h"

/* How positions are told apart (exact_setup.c: position classes). */
enum { MODE_FLAT, MODE_PERIODIC, MODE_POSITIONS };
/* How an entry extends its parent: the start, one stage, or a gap. */
enum { EDGE_START, EDGE_STAGE, EDGE_GAP };

/* entries of the tabulated memory counts (dp_tables.in) at most */
#define TAB_MAX 4e6

/* dp_entry.alive's bit for the lead schedule (the shadows use bits 0..n_sh-1) */
#define LEAD_BIT (1 << PLAN_EXACT_SHADOWS)

typedef struct dp_entry {
    double B, C, H;         /* bottleneck, communication, smallest headroom */
    double Hs[PLAN_EXACT_SHADOWS]; /* the headroom under each shadow schedule */
    int alive;              /* with shadows: bit j, in shadow j's own run;
                               LEAD_BIT, in the lead schedule's own run     */
    int U, d;               /* devices used, positions spanned from the right */
    int t, c, k;            /* the state it belongs to                       */
    int parent;             /* entry it extends, -1 for the start            */
    int edge, from, r;      /* EDGE_STAGE: stage = set `from` \ set t on r   */
} dp_entry;

/* What dominance compares, kept beside the ids in each front so that the
 * scans read contiguous memory. */
typedef struct dp_key {
    double B, C, H;
    int U, d;
    int alive;              /* as dp_entry.alive                                */
    double Hs[PLAN_EXACT_SHADOWS];
} dp_key;

typedef struct dp_front {
    int k, next;            /* k of this front; next front of the same (t, c) */
    int t, c;               /* its state (to rebuild dp_store.fidx)           */
    int n, cap;
    int *ids;               /* in key's block, after its cap keys            */
    dp_key *key;              /* key[i] of entry ids[i]                        */
    int dom;                /* with shadows: where the scan that refused
                               the last offer ended, where the next starts
                               (exact_dp_offer_sh; only where to look first) */
} dp_front;

/* What a pass optimises (dp_pass_state.goal).  Every goal but GOAL_COMM is a pass 1
 * (key = bottleneck). */
typedef enum xgoal {
    GOAL_BOTTLENECK,        /* pass 1: the least bottleneck within the bound */
    GOAL_COMM,              /* pass 2: transitions within the threshold B*,
                               least (communication, -headroom, devices)    */
    GOAL_FITS,              /* feasibility only: times ignored, B kept 0, so
                               fronts hold only (span, devices) trade-offs */
    GOAL_BELOW              /* feasibility within the bound only (any_below):
                               entries compare by span (and devices below)  */
} xgoal;

/* The device line, fixed for the whole search (exact_setup.c). */
typedef struct dp_places {
    int N;                  /* devices (positions 0..N-1)                    */
    int mode;               /* MODE_*                                        */
    int K;                  /* MODE_PERIODIC: devices per node (the last
                               node may hold fewer)                        */
    int C;                  /* position classes per set                      */
    int *nstart, *nend;     /* per position: first and one-past-last of its node */
    double *node_spd, *node_cap; /* per position: the slowest speed and the
                               smallest memory in its node (whole-node blocks) */
    int *pcls;              /* per end position 0..N: class_of without the bit */
    double spd_top;         /* the fastest device's speed                    */
} dp_places;

/* The most memory a stage's counts can give at any depth (one replica, the
 * most in-flight microbatches and versions, the largest cut both sides)
 * and the smallest device (exact_dp_mem_most). */
typedef struct dp_mem_most {
    sched_kind sched;       /* the schedule counted (exact_dp_free_with counts
                               its stages replica count by replica count) */
    int in_max, ver_max;
    double cut_max, cap_min;
} dp_mem_most;

/* What every transition reads, tabulated once per search (exact_setup.c). */
typedef struct dp_tables {
    int dep;                /* plan_mem_dependence of the instance           */
    int monotone;           /* memory never shrinks as the depth grows       */
    int most_ok;            /* most is set (not too many devices to try)    */
    dp_mem_most most;
    int mem_free;           /* plan_exact_mem_free: no stage of any layout
                               overflows a device (exact_dp_free_at)        */
    double cap_top;         /* the largest device memory                     */
    double inv_cap;         /* (1 - PLAN_BOUND_SLACK) / cap_top                         */
    int *qtab;              /* ceil(m / r) for r = 0..rtab (qtab[0] unused)  */
    const double *pm, *infl; /* per devices U already below (0..N): the least,
                               over replica counts r, of bytes per parameter
                               byte and in-flight microbatches of a stage at
                               depth U + r (memory grows with the depth, so
                               stages further up need at least as much)     */
    double pm_least, infl_least; /* the same for any depth and schedule      */
    /* the simulator's counts per stage, tabulated (NULL when too large):
     * in-flight microbatches and weight versions of a stage of r replicas
     * at depth D, at [D x (rtab + 1) + r] (exact memory: pipeline devices
     * dev_fixed or D), and at [r] for depth = devices = r (relaxed 1) */
    int rtab;
    const int *in, *ver, *in1, *ver1;
    /* plan_allreduce_s's factors per link level and r <= rtab: per byte
     * and the latency term, the same operations in the same order */
    double *ar_pb[CLUSTER_LEVELS], *ar_lat[CLUSTER_LEVELS];
} dp_tables;

/* How the current pass runs, set by exact_dp_pass (exact_climb.c). */
typedef struct dp_pass_state {
    xgoal goal;
    int relaxed;            /* 0: exact memory; 1: least memory of this
                               schedule; 2: least memory of any schedule    */
    double bound;           /* pass 1: prune above; pass 2: the threshold B* */
    double need_coef;       /* m / (fastest speed x bound) x (1 - PLAN_BOUND_SLACK): a
                               set of work W needs >= W x need_coef devices */
    /* derived from relaxed and the instance: */
    int track_u;            /* memory depends on the depth: fewer devices
                               below dominate (see dominates)               */
    int u_fronts;           /* one front per devices count (exact U needed)  */
    int c_first;            /* pass 2 where no stage can overflow a device
                               (exact_dp_free_at): strictly less
                               communication dominates, whatever the devices
                               below (exact_front.h, dominates_by)          */
} dp_pass_state;

/* The entries and fronts of the current pass (exact_front.h, exact_pass.c). */
typedef struct dp_store {
    dp_entry *ent;
    int64_t n_ent, cap_ent;
    int64_t created;        /* entries offered and kept (stats)              */
    int *scratch;           /* run_pass: the ids of the front it expands     */
    int cap_scratch;
    dp_front *fr;
    int n_fr, cap_fr;
    int **head;             /* per set: C front-list heads, or NULL          */
    /* where a front's k varies (u_fronts or p_fixed), a state (t, c) can
     * hold hundreds of fronts (one per devices count U): an open-addressing
     * index of (t, c, k) to the front, so that finding one does not walk
     * the list (exact_front.h, front_of).  A slot is taken in this pass
     * when its gen equals fgen; the lists (and so the order fronts are
     * expanded in) stay as they are. */
    struct dp_fslot { int t, c, k, f; unsigned gen; } *fidx;
    int fidx_cap;           /* slots, a power of 2 (0: none yet)             */
    unsigned fgen;          /* this pass's generation (exact_dp_run_pass)    */
    /* storage given back by the fronts of sets already expanded, for the
     * fronts to come (a small search makes and drops thousands a pass):
     * blocks of a front's keys and ids by log2 of their capacity, and
     * sets' head arrays, each list linked through its blocks' first bytes
     * (exact_front.h, front_block) */
    void *pool[32];
    void *head_pool;
} dp_store;

/* The shadow schedules (plan_exact_shadowed), during the pass at lower_s
 * (exact_shadow.c); n = 0 otherwise. */
typedef struct dp_shadows {
    int n;
    const int *in[PLAN_EXACT_SHADOWS], *ver[PLAN_EXACT_SHADOWS]; /* as dp_tables.in */
    const double *pm[PLAN_EXACT_SHADOWS], *infl[PLAN_EXACT_SHADOWS]; /* as dp_tables.pm,
                               infl: its own prunes (need, place)           */
    int track[PLAN_EXACT_SHADOWS]; /* its track_u                           */
    int best[PLAN_EXACT_SHADOWS];  /* its best final entry, or -1           */
    dp_mem_most most[PLAN_EXACT_SHADOWS]; /* as dp_tables.most                */
    int most_ok[PLAN_EXACT_SHADOWS], mem_free[PLAN_EXACT_SHADOWS];
    int track_mask;         /* the schedules whose dominance compares the
                               devices below (their track_u), set per pass  */
    int cf_mask;            /* the schedules (LEAD_BIT, shadow bits) whose run
                               of this pass lets strictly less communication
                               dominate (dp_pass_state.c_first)            */
    int lead_mask;          /* the schedules whose steps count in budget.steps:
                               the lead and the shadows whose memory never
                               binds anywhere (plan_exact_mem_free, with the
                               lead), which were always counted with it   */
    int64_t steps[PLAN_EXACT_SHADOWS]; /* the other shadows' own steps       */
    int64_t lead_own;       /* the lead's own steps in the pass             */
    int split;              /* some shadow outside lead_mask: each schedule
                               keeps its own prunes (exact_pass.c); else all
                               share the lead's, which are theirs (memory
                               never binds: the pass as it always ran)      */
} dp_shadows;

/* The search's work and its limits (exact_pass.c, expand). */
typedef struct dp_budget {
    int64_t steps, limit;   /* inner steps (transitions priced); the most    */
    int64_t tries;          /* stage sets tried (place calls): on a long chain
                               of cheap layers most are refused before a
                               step is counted, yet each costs time        */
    int64_t next_poll;      /* tries at which to poll the command's budget */
    int over;               /* over either budget: every pass stops        */
} dp_budget;

/* A set waiting in dp_subs.heap, with its work beside it. */
typedef struct dp_sub_item {
    double w;
    int id;
} dp_sub_item;

/* The subsets of the set being expanded, in the order they are tried
 * (exact_subs.c). */
typedef struct dp_subs {
    int t;                  /* the set they belong to; -1: none yet          */
    int *list;              /* list[0..n): the first n, in order             */
    int64_t n, cap;
    dp_sub_item *heap;      /* the sets one edge below a listed one, not yet
                               listed, best first                           */
    int64_t hn, hcap;
    unsigned *seen;         /* per set: == mark when pushed for t           */
    unsigned mark;
} dp_subs;

/* A schedule's memory-count tables (dp_tables.in, ver, in1, ver1, pm,
 * infl), keyed by everything they read (exact_setup.c, mem_tab_get): an
 * instance keeps them for its later searches (plan_inst.tabs). */
typedef struct mem_tab {
    sched_kind sched;       /* the key */
    int dev_fixed, N, rmax, m, chunks;
    plan_state_f state;
    int *in, *ver, *in1, *ver1; /* as dp_tables (NULL when too large) */
    double *pm, *infl;
} mem_tab;

typedef struct exact_dp {
    /* the question, fixed for the whole search */
    const plan_inst *I;
    const plan_lattice *L;
    int p_fixed;            /* exact stage count, or 0                       */
    int dev_fixed;          /* exact device count (BY_TOTAL memory), or 0    */
    int c_first_rule;       /* plan_exact_opts.c_first                       */
    int fine_climb;         /* plan_exact_opts.fine_climb                    */
    int positions;          /* plan_exact_opts.positions                     */
    /* plan_exact_opts.memo_out, armed (memo_on) past the pass at lower_s:
     * shadow 0 is memo_sched, with its split and lead_mask kept aside */
    plan_exact_memo *memo_out;
    int memo_on, memo_split, memo_lead_mask;
    const plan_exact_memo *memo_in;
    const plan_layout *memo_y; /* the last pass answered from memo_in: its
                               layout (pass 2), else NULL                  */
    dp_places pos;
    dp_tables tab;
    dp_pass_state run;
    dp_store store;
    dp_shadows sh;
    dp_budget budget;
    dp_subs subs;
    /* tables the instance could not keep, the lead's and each shadow's:
     * this search's own, freed with it */
    mem_tab own_tab[1 + PLAN_EXACT_SHADOWS];
    int tabs_kept;          /* the lead's came from the instance's */
} exact_dp;

static inline double mind(double a, double b) { return a < b ? a : b; }
/* fmax for the search's values (never NaN, never -0), without the call */
static inline double maxd(double a, double b) { return a > b ? a : b; }

/* The class of a state whose next stage ends at e (bit: positions mode's
 * node bit, ignored otherwise); pcls[e] holds the part without the bit. */
static inline int class_of(const exact_dp *X, int e, int bit)
{
    return X->pos.pcls[e] + (X->pos.mode == MODE_POSITIONS ? bit : 0);
}

/* One stage's set sums, priced once for every block that may hold it. */
typedef struct xstage {
    double P, st, in, out;  /* parameters, stash, cut bytes before and after */
    double fixed, vb, io;   /* plan_stage_mem_parts's count-free parts
                               (fixed for one replica: xfixed for r)      */
    double least;           /* plan_stage_mem_least (relaxed 2)             */
} xstage;

static inline void stage_sums(const exact_dp *X, xstage *g, double P, double st, double in,
                              double out)
{
    g->P = P;
    g->st = st;
    g->in = in;
    g->out = out;
    g->fixed = plan_mem_weights(X->I, P, 1);
    g->vb = plan_mem_version(X->I, P);
    g->io = plan_mem_io(in, out);
    g->least = X->run.relaxed == 2 ? plan_stage_mem_least(X->I, P, st, in, out) : 0;
}

/* plan_mem_weights of stage g on r replicas: g->fixed unless ZeRO shards. */
static inline double xfixed(const exact_dp *X, const xstage *g, int r)
{
    return X->I->state.shard > 0 ? plan_mem_weights(X->I, g->P, r) : g->fixed;
}

/* Memory of one device of stage g on r replicas at `depth` (the bits of
 * plan_stage_mem, plan_stage_mem_least or plan_stage_mem_counts). */
static inline __attribute__((always_inline)) double mem_of(const exact_dp *X, const xstage *g,
                                                            int depth, int r)
{
    const dp_tables *T = &X->tab;
    if (X->run.relaxed == 2) return g->least;
    if (X->run.relaxed == 1) {
        if (T->in1 && r <= T->rtab)
            return plan_stage_mem_parts(xfixed(X, g, r), g->vb, g->st, g->io, T->in1[r], T->ver1[r]);
        return plan_stage_mem(X->I, g->P, g->st, g->in, g->out, r, r, r);
    }
    int devices = X->dev_fixed ? X->dev_fixed : depth;
    if (depth > devices) return HUGE_VAL;
    if (T->in && r <= T->rtab && depth <= X->pos.N) {
        size_t k = (size_t)depth * (size_t)(T->rtab + 1) + (size_t)r;
        return plan_stage_mem_parts(xfixed(X, g, r), g->vb, g->st, g->io, T->in[k], T->ver[k]);
    }
    return plan_stage_mem(X->I, g->P, g->st, g->in, g->out, depth, r, devices);
}

/* exact_setup.c: set up the search (positions, tables, an empty store);
 * returns 0, or -1 (with e) when the positions are too many.  Every setup
 * that returned 0 is paired with one exact_dp_teardown, which adds the work to
 * st (may be NULL) and frees everything. */
int exact_dp_setup(exact_dp *X, const plan_inst *I, const plan_lattice *L, const plan_exact_opts *o,
              plan_exact_stats *st, cl_err *e);
void exact_dp_teardown(exact_dp *X, plan_exact_stats *st);

/* exact_setup.c: the most a stage's memory counts give on this instance
 * (0 when not worth finding: too many devices x replicas); does a stage of
 * P parameter and st stash bytes fit the smallest device with them? */
int exact_dp_mem_most(const plan_inst *I, const plan_lattice *L, dp_mem_most *w);
int exact_dp_mem_most_fits(const plan_inst *I, const dp_mem_most *w, double P, double st);
/* exact_setup.c: 1 when no stage a pass under `bound` may place can
 * overflow a device at any depth (no device count fixed); _with: for the
 * schedule whose memory counts are `most` (most_ok: found; mem_free: the
 * whole model fits with them). */
int exact_dp_free_at(const exact_dp *X, double bound);
/* exact_setup.c: shadow j's memory-count tables for schedule sk (as its
 * own search's, no device count fixed). */
void exact_dp_shadow_tables(exact_dp *X, int j, sched_kind sk, const int **in, const int **ver,
                            const double **pm, const double **infl);
int exact_dp_free_with(const exact_dp *X, int most_ok, const dp_mem_most *most, int mem_free, double bound);

/* exact.c: the layout of final entry id (plan_layout_free). */
void exact_dp_rebuild(const exact_dp *X, int id, plan_layout *out);

/* exact_climb.c: one pass (relaxed as in dp_pass_state.relaxed) for `goal` at
 * `bound`; returns the best final entry id, or -1 (nothing, or over the
 * budget: X->budget.over). */
int exact_dp_pass(exact_dp *X, int relaxed, xgoal goal, double bound, plan_exact_stats *st);
/* exact_climb.c: pass 1 under growing guesses of the bound, from
 * max(known_lb, a global lower bound) to min(upper, a global upper bound);
 * hint (> 0) is tried first.  Returns the best final entry, or -1. */
int exact_dp_climb(exact_dp *X, int relaxed, double upper, double hint, double known_lb,
              plan_exact_stats *st);
/* exact_climb.c: is there a layout (exact memory) within g?  Feasibility
 * passes under guesses growing from `from` (<= 0 or >= g: one pass at g)
 * up to g; returns a final entry of the first that finds one, or -1. */
int exact_dp_below(exact_dp *X, double from, double g, plan_exact_stats *st);

/* exact_pass.c: run the pass exact_dp_pass set up; returns the best final
 * entry id, or -1.  The entries stay until the next pass. */
int exact_dp_run_pass(exact_dp *X);

/* exact_subs.c: the j-th proper subset of DAG set t in the order most work
 * first (ties: the larger id first), or -1 past the last; made as far as
 * asked.  Cheap for the set asked last (X->subs.t), as the expansion of a
 * set's entries asks. */
int exact_dp_sub(exact_dp *X, int t, int64_t j);
void exact_dp_subs_free(exact_dp *X);

/* exact_shadow.c: tabulate the shadow schedules sh[0..n_sh) and turn them
 * on (X->sh.n = n_sh); 0 (and off) when they cannot ride along. */
int exact_dp_shadows_setup(exact_dp *X, int n_sh, const sched_kind *sh);
/* exact_shadow.c: at the start of a pass with shadows (exact_dp_pass):
 * which schedules' own runs let communication come first (sh.cf_mask). */
void exact_dp_shadows_pass(exact_dp *X, double bound);
/* exact_shadow.c: the memory multipliers of schedule bit b (LEAD_BIT: the
 * lead's dp_tables.pm, infl; else shadow b's, which are the lead's where
 * both never bind) */
static inline void exact_dp_tables_of(const exact_dp *X, int b, const double **pm, const double **infl)
{
    int j = b == LEAD_BIT ? -1 : __builtin_ctz((unsigned)b);
    if (j < 0 || !X->sh.pm[j]) { /* (a shadow whose memory never binds, with
                                    the lead's: its prunes are the lead's) */
        *pm = X->tab.pm;
        *infl = X->tab.infl;
    } else {
        *pm = X->sh.pm[j];
        *infl = X->sh.infl[j];
    }
}
/* exact_shadow.c: offer (exact_front.h) while shadows ride along. */
void exact_dp_offer_sh(exact_dp *X, dp_front *f, const dp_key *kvp, int t, int c, int k, int parent,
                  int edge, int from, int r);
/* exact_shadow.c: let final entry `id` compete for each shadow's best. */
void exact_dp_shadow_pick(exact_dp *X, int id);

#endif
