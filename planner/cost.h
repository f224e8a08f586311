/* cost.h - the planner's cost model, on plain per-layer cost arrays.
 *
 * The searches (exact.c, merge.c) and the brute force in the tests all
 * price a candidate through the functions here, so they agree to the bit.
 * docs/planner.md gives the formulas; in short, per training iteration of
 * m microbatches:
 *
 *   stage time     ceil(m / r) x (F + B + W) / speed  +  all-reduce
 *   all-reduce     r > 1: 2 (r - 1) / r x params / bw + 2 (r - 1) x latency
 *   boundary time  2 x m x (latency + cut bytes / bw)     (activations and
 *                  gradients, overlapped with compute like a pipeline stage)
 *   bottleneck     the largest stage time or boundary time
 *   memory/device  params x (rep + shard / r) + (versions - 1) x params x
 *                  version + stash x in-flight microbatches
 *                  + 2 x (cut in + cut out)
 *                  (model state per parameter byte: core/plan.h,
 *                  plan_state_factors; fp32 without ZeRO: rep = 2 +
 *                  optimiser, shard 0, version 1)
 *
 * F, B, W are per microbatch on the profiled (reference) device; `speed` is
 * a device's effective FLOP/s over the reference's.  Replica i of a stage
 * runs microbatches i, i + r, ..., so the busiest replica runs ceil(m/r).
 *
 * Layer sets.  A stage is a set of layers closed under "stage order": its
 * layers are D_hi \ D_lo for two downsets D_lo < D_hi of the layer graph
 * (sets closed under taking inputs).  A plan_lattice lists the downsets the
 * search may cut at, with per-set sums, so a stage's cost is a difference
 * of two sums; for a chain the downsets are the prefixes.
 *
 * Device placement.  Positions 0..n_dev-1 are the devices in the order the
 * search lays stages out (nodes contiguous).  Stage s occupies the block
 * pos[s] .. pos[s] + r[s] - 1; blocks follow the pipeline order left to
 * right, may leave gaps, and each lies inside one node or covers whole nodes.
 */
#ifndef CL_PLAN_COST_H
#define CL_PLAN_COST_H

#include <math.h>
#include <stdint.h>

#include "profiles/cluster.h"
#include "core/plan.h"

/* ------------------------------------------------------ rounding slacks -- */

/* The searches compare bounds with times that were summed in another order
 * or by another formula (differences of prefix sums, a product for a sum),
 * which may differ from them in the last bits.  Each comparison that must
 * not be swayed by such rounding gives the bound a relative slack:
 *
 * PLAN_BOUND_SLACK: a pruning bound (a time no layout or iteration beats,
 * shrunk by it; one every layout stays under, grown by it), so a prune
 * never drops the very layout it bounds.  Rounding of a sum of a million
 * doubles stays near 1e-10 relative, so 1e-9 covers it, and it is far below
 * any difference two plans are ranked by: the prunes it lets through are
 * real ones. */
#define PLAN_BOUND_SLACK 1e-9
/* PLAN_TIGHT_SLACK: a time compared with a bound made from the same prefix
 * sums (a chunk's time against the bound it was cut under, the width at
 * which a bisection on such times stops), where only a few ulps of
 * rounding can separate them: 1e-12 covers those and keeps a bisection's
 * answer to 12 digits. */
#define PLAN_TIGHT_SLACK 1e-12

/* ------------------------------------------------------------- instance -- */

/* One planning problem at a fixed microbatch count.  Owns every array. */
typedef struct plan_inst {
    /* layers, in topological order; times per microbatch on the reference
     * device, bytes per microbatch */
    int n;
    double *fwd_s, *bwd_in_s, *bwd_w_s;
    double *out_bytes;      /* the layer's output                          */
    double *stash_bytes;    /* kept from forward to backward               */
    double *param_bytes;
    int *in_off, *in_idx;   /* inputs of layer i: in_idx[in_off[i]..in_off[i+1]),
                               -1 = the model input                         */
    double input_bytes;     /* model input per microbatch                  */
    /* devices, in layout order */
    int n_dev;
    double *speed;          /* effective FLOP/s relative to the reference  */
    double *mem_cap;        /* bytes                                       */
    int *node;              /* node index; positions of a node are contiguous */
    int node_max;           /* devices in the largest node (0: not known):
                               how many replicas a node can hold in a
                               hierarchical all-reduce (plan_allreduce_s) */
    int *dev;               /* cluster device index at each position       */
    cluster_link link[CLUSTER_LEVELS];
    /* settings */
    int m;                  /* microbatches per iteration, >= 1            */
    sched_kind sched;
    int chunks;             /* v for interleaved, else 1                   */
    plan_state_f state;     /* model state per parameter byte (precision,
                               optimiser, ZeRO: plan_state_factors)        */
    /* the all-reduce's bytes per param byte over 2, halves summed
     * (plan_ar_factors): [1] when ZeRO splits it under I->sched
     * (plan_zero_splits(zero, sched)), else [0]; 1 for a reduction in the
     * model's element size without ZeRO */
    double ar_scale[2];
    int zero;               /* ZeRO stage (as in state)                     */
    int comm;               /* 1: price communication; 0: leave it out     */
    int bnd_off;            /* 1: stage boundaries cost nothing (all-reduces
                               still do): a bound the simulator cannot beat
                               (search.c, skip_count)                      */
    int max_replicas;       /* 1 forbids replication                       */
    int rep_fixed;          /* > 0: every stage has exactly this many replicas
                               (one data-parallel degree, as frameworks
                               replicate whole pipelines); max_replicas is
                               then the same; 0: any count                 */
    int cut_max;            /* chain views: a stage may start at layer j only
                               when j <= cut_max (Megatron keeps its head
                               layers on the last stage); n: anywhere       */
    /* the exact search's memory-count tables built on this instance, kept
     * for its later searches (exact_setup.c; copies of the struct share
     * them, plan_inst_free releases them); NULL: none kept */
    struct plan_mem_tabs *tabs;
} plan_inst;
typedef struct plan_mem_tabs plan_mem_tabs;
plan_mem_tabs *plan_mem_tabs_new(void);
void plan_mem_tabs_free(plan_mem_tabs *c);

/* Allocate every array for n layers with n_in inputs in all and n_dev
 * devices (zeroed; in_off has n + 1 entries).  Settings default to m = 1,
 * 1f1b, chunks 1, SGD in fp32 without ZeRO, comm on, replication up to
 * n_dev, any replica count per stage (rep_fixed 0), stages starting
 * anywhere (cut_max n).  plan_inst_free releases it. */
void plan_inst_alloc(plan_inst *I, int n, int n_in, int n_dev);
void plan_inst_free(plan_inst *I);
/* Layer i's work per microbatch on the reference device: F + B + W. */
static inline double plan_inst_work(const plan_inst *I, int i)
{
    return I->fwd_s[i] + I->bwd_in_s[i] + I->bwd_w_s[i];
}

/* Memory follows the simulator's rules (core/schedule.h): a replica of a
 * stage with r replicas and depth D (devices from this stage to the last,
 * its own included) keeps sched_inflight_rep(kind, devices, D, r, m, v)
 * microbatches of stash and sched_versions_rep(kind, D, r) weight versions,
 * `devices` being the whole pipeline's.  Does that depend on r alone
 * (FLAT: gpipe, sequential), also on the depth (BY_DEPTH: 1f1b, fbp,
 * pipedream), or on the pipeline's device count too (BY_TOTAL: zb-h1,
 * interleaved)?  Found by probing those functions, so the planner follows
 * whatever rules the simulator has. */
enum { PLAN_MEM_FLAT = 0, PLAN_MEM_BY_DEPTH = 1, PLAN_MEM_BY_TOTAL = 2 };
int plan_mem_dependence(const plan_inst *I);
/* 1 when memory never shrinks as the depth grows (probed up to n_dev). */
int plan_mem_depth_monotone(const plan_inst *I);

/* -------------------------------------------------------------- lattice -- */

/* The subsets of DAG sets the exact search has walked to, in the order it
 * tries them (exact_subs.c), kept for the later searches on the same sums
 * (cleared by plan_lattice_sums). */
typedef struct plan_sub_cache {
    int **list;             /* per set: its first n[t] subsets, or NULL     */
    int64_t *n;
    unsigned char *done;    /* 1: list[t] holds all of them                */
    int64_t held;           /* entries held over every set                 */
} plan_sub_cache;

typedef struct plan_lattice {
    int n_layers;
    int n_sets;             /* set 0 is empty, set n_sets-1 holds every layer;
                               sets are sorted by size, so a subset has a
                               smaller id                                   */
    int chain;              /* set j is the first j layers (no bits, no lists) */
    int words;              /* 64-bit words per membership row             */
    uint64_t *bits;         /* n_sets x words, NULL for a chain            */
    int *size;              /* layers in each set                          */
    double *work, *fwd, *bwd_in, *bwd_w, *params, *stash; /* sums over the set */
    double *cut;            /* bytes per microbatch that leave the set: outputs
                               of its layers (and the model input) read by a
                               layer outside it                             */
    int64_t *down_off;      /* DAG: sets one searched layer (and the inert  */
    int *down;              /* ones its rules take) smaller than set t are
                               down[down_off[t]..down_off[t+1]): every proper
                               subset is reached along them (exact_subs.c) */
    int64_t n_edges;        /* their number                                 */
    plan_sub_cache *subs;   /* DAG: what the exact search walked (mutable
                               through a const lattice: a cache)           */
    int n_inert;            /* layers placed by rule, not searched (dag.c)  */
    int *sum_order;         /* DAG: the sets in the order dag_sums.c sums
                               them (made by its first call), or NULL       */
    int *by_work;           /* DAG: every set, most work first (ties: the
                               larger id first), kept by plan_lattice_sums */
} plan_lattice;

/* Prefixes in layer order (the chain view; every prefix of a topological
 * order is a downset). */
void plan_lattice_prefix(plan_lattice *L, const plan_inst *I);
/* Every downset of the layer graph, except that inert layers (no time, no
 * parameters) follow a rule instead of being searched: one nothing reads
 * joins as soon as its inputs are in, one that reads only the model input
 * joins with its first reader.  Fails with CL_ERUN and a message when more
 * than max_sets downsets (or their work limit) would be needed (the caller
 * decides what to do and must say so).  dag.c. */
int plan_lattice_downsets(plan_lattice *L, const plan_inst *I, int64_t max_sets, cl_err *e);
void plan_lattice_free(plan_lattice *L);
/* Is layer i in set t? */
int plan_lattice_has(const plan_lattice *L, int t, int i);
/* Forget the subsets the exact search walked (plan_sub_cache). */
void plan_lattice_subs_clear(const plan_lattice *L);
/* Fill the per-set sums and cuts from the instance (membership set). */
void plan_lattice_sums(plan_lattice *L, const plan_inst *I);

/* -------------------------------------------------------------- layouts -- */

typedef struct plan_layout {
    int p;                  /* stages                                      */
    int *cut;               /* p + 1 set ids, cut[0] = 0, cut[p] = last;
                               stage s holds cut[s+1] \ cut[s]             */
    int *pos;               /* first position of stage s's block           */
    int *r;                 /* replicas of stage s                         */
} plan_layout;

void plan_layout_alloc(plan_layout *y, int p);
void plan_layout_free(plan_layout *y);
void plan_layout_copy(plan_layout *dst, const plan_layout *src);

/* What a layout costs.  The searches minimise, in this order: bottleneck,
 * total communication, then maximise the smallest memory headroom, then
 * minimise the devices used. */
typedef struct plan_eval {
    int valid;              /* placement obeys the block rules             */
    int feasible;           /* valid and every stage fits its devices' memory */
    double bottleneck_s;    /* per iteration                               */
    double comm_s;          /* boundaries + all-reduces, per iteration     */
    double headroom_bytes;  /* smallest capacity - need over the stages    */
    int devices;            /* sum of replicas                             */
    int worst_stage;        /* stage with the least headroom               */
    double worst_need_bytes, worst_cap_bytes;
    int bottleneck_stage;   /* stage (or boundary after it) that sets the bottleneck */
    int bottleneck_is_boundary;
} plan_eval;

void plan_layout_eval(const plan_inst *I, const plan_lattice *L, const plan_layout *y,
                      plan_eval *out);
/* Lexicographic comparison of two evaluations (feasible ones first);
 * negative when a is better. */
int plan_eval_cmp(const plan_eval *a, const plan_eval *b);

/* ------------------------------------------------ pricing one stage/cut -- */

/* All-reduce of `bytes` over r devices whose group spans `level`, per
 * iteration: per_byte x bytes + lat.  Inside a node a flat ring,
 * 2 (r - 1)/r / bw and 2 (r - 1) latencies.  Across nodes, when r has a
 * divisor k, 2 <= k <= node_max, with r / k >= 2, the simulator's
 * hierarchical all-reduce (sim/ring.c) with the largest such k, the shape
 * a contiguous group takes (k a node on n = r / k nodes, or two halves):
 * 2 (k - 1)/k / bw_in + 2 (n - 1)/(n k) / bw_x per byte, 2 (k - 1)
 * lat_in + 2 (n - 1) lat_x; else a flat ring on the inter-node link.
 * `bytes` is the stage's param_bytes; per_byte is scaled by I->ar_scale,
 * the gradient reduction's bytes (core/plan_grad.c), so the price is the
 * simulator's ring with its two halves of R and G bytes. */
void plan_allreduce_factors(const plan_inst *I, int r, int level, double *per_byte, double *lat);
double plan_allreduce_s(const plan_inst *I, double bytes, int r, int level);
/* The least any group of r replicas takes to all-reduce `bytes`, in the
 * cost model or the simulator: a flat ring on either link level, or a
 * hierarchical all-reduce of any shape; for lower bounds. */
double plan_allreduce_least(const plan_inst *I, double bytes, int r);
/* Stage time per iteration for work w_s (per microbatch, reference device)
 * on r replicas whose slowest has relative speed spd; `ar` the all-reduce. */
static inline double plan_stage_time(const plan_inst *I, double w_s, int r, double spd,
                                     double ar)
{
    int q = (I->m + r - 1) / r;
    return (double)q * (w_s / spd) + ar;
}
/* Boundary time per iteration for `bytes` per microbatch over link level. */
double plan_boundary_s(const plan_inst *I, double bytes, int level);
/* Bytes one device of a stage needs: its model state (plan_mem_weights) +
 * (versions - 1) x a weight version + stash x in-flight + 2 x (in + out)
 * buffers, for a stage
 * of r replicas at depth `depth` in a pipeline of `devices` devices (pass
 * devices = depth when the schedule's memory is not BY_TOTAL).  in/out:
 * cut bytes before and after it, per microbatch. */
double plan_stage_mem(const plan_inst *I, double params, double stash, double in_bytes,
                      double out_bytes, int depth, int r, int devices);
/* plan_stage_mem's sum for given in-flight microbatches and weight
 * versions (one expression, so callers that tabulate the counts get the
 * same bits). */
static inline double plan_stage_mem_parts(double fixed, double vbytes, double stash, double io,
                                          int inflight, int versions);
/* The parts of a stage's memory no schedule changes: its weights with
 * their gradients and optimiser state on one of r replicas (ZeRO shards
 * some of it over r), and its boundary buffers, 2 x (in + out) bytes per
 * microbatch (activations in and out, their gradients back). */
static inline double plan_mem_weights(const plan_inst *I, double params, int r)
{
    return plan_state_bytes(&I->state, params, r);
}
/* Bytes of one weight version of a stage (PipeDream's stashed copies). */
static inline double plan_mem_version(const plan_inst *I, double params)
{
    return params * I->state.version;
}
/* The largest replica count a stage may have: r <= m, max_replicas, n_dev. */
static inline int plan_inst_rmax(const plan_inst *I)
{
    int r = I->m < I->max_replicas ? I->m : I->max_replicas;
    return r < I->n_dev ? r : I->n_dev;
}
static inline double plan_mem_io(double in_bytes, double out_bytes)
{
    return 2.0 * (in_bytes + out_bytes);
}
static inline double plan_stage_mem_counts(const plan_inst *I, double params, double stash,
                                           double in_bytes, double out_bytes, int inflight,
                                           int versions, int r)
{
    return plan_stage_mem_parts(plan_mem_weights(I, params, r), plan_mem_version(I, params), stash,
                                plan_mem_io(in_bytes, out_bytes), inflight, versions);
}
/* The same sum from its parts that do not depend on the counts: fixed =
 * plan_mem_weights, vbytes = plan_mem_version, io = plan_mem_io (so a
 * caller pricing one stage under many counts computes them once and gets
 * the same bits). */
static inline double plan_stage_mem_parts(double fixed, double vbytes, double stash, double io,
                                          int inflight, int versions)
{
    return fixed + (versions - 1) * vbytes + stash * inflight + io;
}
/* The least memory any schedule needs for the stage (one microbatch in
 * flight, one weight version, the most replicas allowed, which shard the
 * most under ZeRO): a lower bound of plan_stage_mem. */
double plan_stage_mem_least(const plan_inst *I, double params, double stash, double in_bytes,
                            double out_bytes);
/* Interleaved plans: bytes a device of pipeline position q of p (each
 * position a block of r replicas) needs for all its chunks: `fixed` is the
 * sum over them of plan_mem_weights + plan_mem_io, stash[c] the stash per
 * microbatch of its chunk c (I->chunks of them), held as Megatron-LM's
 * order holds them over I->m microbatches (sched_interleaved_stash_peak:
 * the simulator's peak, not the largest chunk's stash times the count in
 * flight, which charged a last device's head chunk, the largest, for each
 * of (v - 1) p + 1 chunk-microbatches where one is ever alive). */
double plan_chunks_mem(const plan_inst *I, double fixed, const double *stash, int q, int p, int r);
/* Block rules: is [pos, pos + r) inside one node or a run of whole nodes? */
int plan_block_ok(const plan_inst *I, int pos, int r);
/* The slowest speed and the smallest memory of positions pos..pos + r - 1:
 * a block's replicas run at its slowest and hold what its smallest holds
 * (speeds and capacities are positive: no libm fmin per device, which was
 * a tenth of a packing on mixed devices). */
static inline void plan_block_least(const plan_inst *I, int pos, int r, double *spd, double *cap)
{
    double s = HUGE_VAL, c = HUGE_VAL;
    for (int d = pos; d < pos + r; d++) {
        s = I->speed[d] < s ? I->speed[d] : s;
        c = I->mem_cap[d] < c ? I->mem_cap[d] : c;
    }
    *spd = s;
    *cap = c;
}
/* Link level between two consecutive blocks: intra-node when both lie in
 * the same single node.  (Inline: partition and merge asks it for every
 * stage it tries.) */
static inline int plan_link_level(const plan_inst *I, int pos_a, int r_a, int pos_b, int r_b)
{
    int n = I->node[pos_a];
    if (I->node[pos_a + r_a - 1] != n) return CLUSTER_INTER;
    if (I->node[pos_b] != n || I->node[pos_b + r_b - 1] != n) return CLUSTER_INTER;
    return CLUSTER_INTRA;
}

/* Interleaved plans (interleave.c): split the chain view (L a prefix
 * lattice) into n contiguous chunks, chunk k on position k mod p, with the
 * smallest slowest chunk time; cut gets n + 1 layer indices.  Returns 0
 * when there are fewer layers than chunks. */
int plan_chunks_minmax(const plan_inst *I, const plan_lattice *L, int p, int n, int *cut);

#endif
