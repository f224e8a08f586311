/* cost.c - pricing stages, boundaries and whole layouts (see cost.h and
 * docs/planner.md, "Cost model"). */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "cost.h"

/* ------------------------------------------------------------- instance -- */

void plan_inst_alloc(plan_inst *I, int n, int n_in, int n_dev)
{
    assert(n >= 1 && n_in >= 0 && n_dev >= 1);
    memset(I, 0, sizeof *I);
    I->n = n;
    I->fwd_s = cl_calloc((size_t)n, sizeof(double));
    I->bwd_in_s = cl_calloc((size_t)n, sizeof(double));
    I->bwd_w_s = cl_calloc((size_t)n, sizeof(double));
    I->out_bytes = cl_calloc((size_t)n, sizeof(double));
    I->stash_bytes = cl_calloc((size_t)n, sizeof(double));
    I->param_bytes = cl_calloc((size_t)n, sizeof(double));
    I->in_off = cl_calloc((size_t)n + 1, sizeof(int));
    I->in_idx = cl_calloc((size_t)(n_in > 0 ? n_in : 1), sizeof(int));
    I->n_dev = n_dev;
    I->speed = cl_calloc((size_t)n_dev, sizeof(double));
    I->mem_cap = cl_calloc((size_t)n_dev, sizeof(double));
    I->node = cl_calloc((size_t)n_dev, sizeof(int));
    I->dev = cl_calloc((size_t)n_dev, sizeof(int));
    I->m = 1;
    I->sched = SCHED_1F1B;
    I->chunks = 1;
    I->comm = 1;
    I->max_replicas = n_dev;
    I->state = plan_state_factors(4, PREC_FP32, OPTIM_SGD, 0, 4);
    I->ar_scale[0] = I->ar_scale[1] = 1;
    I->zero = 0;
    I->tabs = plan_mem_tabs_new();
    I->rep_fixed = 0;
    I->cut_max = n;
}

void plan_inst_free(plan_inst *I)
{
    free(I->fwd_s);
    free(I->bwd_in_s);
    free(I->bwd_w_s);
    free(I->out_bytes);
    free(I->stash_bytes);
    free(I->param_bytes);
    free(I->in_off);
    free(I->in_idx);
    free(I->speed);
    free(I->mem_cap);
    free(I->node);
    free(I->dev);
    plan_mem_tabs_free(I->tabs);
    memset(I, 0, sizeof *I);
}

/* Largest device count probed; every schedule's rule varies well before. */
#define PROBE_D 48

/* The probes below call the simulator's rules some 10^4 to 10^5 times and
 * the searches ask the same questions again and again (every exact search,
 * every pair of schedules, every microbatch count), so answers are kept in
 * a small per-thread memo keyed by everything they depend on, one per
 * question, with a slot per hash of the key (a new answer replaces the one
 * in its slot).  It was one list of 128 scanned in full, where the
 * monotony's answers, one per device count too, pushed out the dearer
 * dependence's: the search fuzz target probed that 15 times per input, a
 * tenth of its time. */
typedef struct mem_memo {
    int used, what;         /* what: 0 dependence, 1 monotone               */
    int sched, m, chunks, n_dev;
    int answer;
} mem_memo;
#define MEMO_SLOTS 1024     /* a power of 2 */
static _Thread_local mem_memo memo[2][MEMO_SLOTS];

static mem_memo *memo_slot(int what, const plan_inst *I, int n_dev)
{
    uint64_t h = (uint64_t)what * 0x9E3779B97F4A7C15u;
    h = (h ^ (uint64_t)(unsigned)I->sched) * 0x9E3779B97F4A7C15u;
    h = (h ^ (uint64_t)(unsigned)I->m) * 0x9E3779B97F4A7C15u;
    h = (h ^ (uint64_t)(unsigned)I->chunks) * 0x9E3779B97F4A7C15u;
    h = (h ^ (uint64_t)(unsigned)n_dev) * 0x9E3779B97F4A7C15u;
    return &memo[what][(h >> 32) & (MEMO_SLOTS - 1)];
}

static int memo_get(int what, const plan_inst *I, int n_dev, int *answer)
{
    const mem_memo *q = memo_slot(what, I, n_dev);
    if (q->used && q->what == what && q->sched == (int)I->sched && q->m == I->m && q->chunks == I->chunks &&
        q->n_dev == n_dev) {
        *answer = q->answer;
        return 1;
    }
    return 0;
}

static int memo_put(int what, const plan_inst *I, int n_dev, int answer)
{
    *memo_slot(what, I, n_dev) = (mem_memo){.used = 1, .what = what, .sched = (int)I->sched, .m = I->m,
                                            .chunks = I->chunks, .n_dev = n_dev, .answer = answer};
    return answer;
}

int plan_mem_dependence(const plan_inst *I)
{
    int known;
    if (memo_get(0, I, 0, &known)) return known;
    /* the counts that do not vary with D, once: at [depth][r], and at
     * depth = D = r */
    int in_d[PROBE_D + 1][PROBE_D + 1], ve_d[PROBE_D + 1][PROBE_D + 1];
    int in_r[PROBE_D + 1], ve_r[PROBE_D + 1];
    for (int depth = 1; depth <= PROBE_D; depth++)
        for (int r = 1; r <= depth; r++) {
            in_d[depth][r] = sched_inflight_rep(I->sched, depth, depth, r, I->m, I->chunks);
            ve_d[depth][r] = sched_versions_rep(I->sched, depth, r);
        }
    for (int r = 1; r <= PROBE_D; r++) {
        in_r[r] = in_d[r][r];
        ve_r[r] = ve_d[r][r];
    }
    int flat = 1, depth_only = 1;
    for (int D = 1; D <= PROBE_D && (flat || depth_only); D++)
        for (int depth = 1; depth <= D; depth++)
            for (int r = 1; r <= depth; r++) {
                int in = D == depth ? in_d[depth][r]
                                    : sched_inflight_rep(I->sched, D, depth, r, I->m, I->chunks);
                if (in != in_d[depth][r]) depth_only = 0;
                if (in != in_r[r] || ve_d[depth][r] != ve_r[r]) flat = 0;
            }
    return memo_put(0, I, 0, flat ? PLAN_MEM_FLAT : depth_only ? PLAN_MEM_BY_DEPTH : PLAN_MEM_BY_TOTAL);
}

int plan_mem_depth_monotone(const plan_inst *I)
{
    int N = I->n_dev, known;
    if (memo_get(1, I, N, &known)) return known;
    int *in = cl_malloc(2 * ((size_t)N + 1) * sizeof *in), *ver = in + N + 1, mono = 1;
    for (int r = 1; r <= N && r <= PROBE_D && mono; r++) {
        sched_inflight_depths(I->sched, N, r, I->m, I->chunks, N, in, ver);
        for (int depth = r + 1; depth <= N && mono; depth++)
            mono = in[depth] >= in[depth - 1] && ver[depth] >= ver[depth - 1];
    }
    free(in);
    return memo_put(1, I, N, mono);
}

/* -------------------------------------------------------------- lattice -- */

int plan_lattice_has(const plan_lattice *L, int t, int i)
{
    if (L->chain) return i < t;
    return (int)((L->bits[(size_t)t * L->words + (size_t)(i >> 6)] >> (i & 63)) & 1);
}

static void lattice_arrays(plan_lattice *L, int n_sets)
{
    L->n_sets = n_sets;
    L->size = cl_calloc((size_t)n_sets, sizeof(int));
    L->work = cl_calloc((size_t)n_sets, sizeof(double));
    L->fwd = cl_calloc((size_t)n_sets, sizeof(double));
    L->bwd_in = cl_calloc((size_t)n_sets, sizeof(double));
    L->bwd_w = cl_calloc((size_t)n_sets, sizeof(double));
    L->params = cl_calloc((size_t)n_sets, sizeof(double));
    L->stash = cl_calloc((size_t)n_sets, sizeof(double));
    L->cut = cl_calloc((size_t)n_sets, sizeof(double));
}

void plan_lattice_subs_clear(const plan_lattice *L)
{
    plan_sub_cache *C = L->subs;
    if (!C || !C->held) return;
    for (int t = 0; t < L->n_sets; t++) {
        free(C->list[t]);
        C->list[t] = NULL;
        C->n[t] = 0;
        C->done[t] = 0;
    }
    C->held = 0;
}

void plan_lattice_dag_sums_(plan_lattice *L, const plan_inst *I);

void plan_lattice_sums(plan_lattice *L, const plan_inst *I)
{
    int n = I->n;
    if (L->chain) {
        /* prefix sums, then the bytes crossing each cut: layer i's output
         * crosses cuts i+1 .. (last reader), the model input cuts 1 ..
         * (last reader of -1) */
        for (int j = 0; j < n; j++) {
            L->size[j + 1] = j + 1;
            L->work[j + 1] = L->work[j] + plan_inst_work(I, j);
            L->fwd[j + 1] = L->fwd[j] + I->fwd_s[j];
            L->bwd_in[j + 1] = L->bwd_in[j] + I->bwd_in_s[j];
            L->bwd_w[j + 1] = L->bwd_w[j] + I->bwd_w_s[j];
            L->params[j + 1] = L->params[j] + I->param_bytes[j];
            L->stash[j + 1] = L->stash[j] + I->stash_bytes[j];
        }
        /* bytes crossing each cut: producer j (0 = the model input, else
         * layer j - 1) is inside sets t >= j and read outside them while
         * t <= its last reader; summed per cut in producer order */
        int *last = cl_malloc((size_t)(n + 1) * sizeof *last);
        for (int j = 0; j <= n; j++) last[j] = -1;
        for (int i = 0; i < n; i++)
            for (int k = I->in_off[i]; k < I->in_off[i + 1]; k++) last[I->in_idx[k] + 1] = i;
        for (int t = 0; t <= n; t++) L->cut[t] = 0;
        for (int j = 0; j <= n; j++) {
            double b = j == 0 ? I->input_bytes : I->out_bytes[j - 1];
            for (int t = j; t <= last[j]; t++) L->cut[t] += b;
        }
        free(last);
        return;
    }
    plan_lattice_subs_clear(L);
    /* DAG: sums over members in layer order (monotone under inclusion),
     * sharing the sums of common prefixes (dag_sums.c) */
    plan_lattice_dag_sums_(L, I);
}

void plan_lattice_prefix(plan_lattice *L, const plan_inst *I)
{
    memset(L, 0, sizeof *L);
    L->n_layers = I->n;
    L->chain = 1;
    lattice_arrays(L, I->n + 1);
    plan_lattice_sums(L, I);
}

void plan_lattice_free(plan_lattice *L)
{
    free(L->bits);
    free(L->size);
    free(L->work);
    free(L->fwd);
    free(L->bwd_in);
    free(L->bwd_w);
    free(L->params);
    free(L->stash);
    free(L->cut);
    free(L->down_off);
    free(L->down);
    free(L->sum_order);
    free(L->by_work);
    if (L->subs) {
        plan_lattice_subs_clear(L);
        free(L->subs->list);
        free(L->subs->n);
        free(L->subs->done);
        free(L->subs);
    }
    memset(L, 0, sizeof *L);
}

/* Shared with dag.c through this translation unit's helper. */
void plan_lattice_arrays_(plan_lattice *L, int n_sets);
void plan_lattice_arrays_(plan_lattice *L, int n_sets) { lattice_arrays(L, n_sets); }

/* -------------------------------------------------------------- pricing -- */

/* A hierarchical all-reduce of k replicas on each of r / k nodes. */
static void hier_factors(const plan_inst *I, int r, int k, double *per_byte, double *lat)
{
    const cluster_link *a = &I->link[CLUSTER_INTRA], *x = &I->link[CLUSTER_INTER];
    int n = r / k;
    *per_byte = 2.0 * (k - 1) / k / a->bw_Bps + 2.0 * (n - 1) / ((double)n * k) / x->bw_Bps;
    *lat = 2.0 * (k - 1) * a->latency_s + 2.0 * (n - 1) * x->latency_s;
}

/* plan_allreduce_factors for one byte per param byte in each half. */
static void ar_shape_factors(const plan_inst *I, int r, int level, double *per_byte, double *lat)
{
    if (level == CLUSTER_INTER)
        for (int k = I->node_max < r / 2 ? I->node_max : r / 2; k >= 2; k--)
            if (r % k == 0) {
                hier_factors(I, r, k, per_byte, lat);
                return;
            }
    const cluster_link *l = &I->link[level];
    *per_byte = 2.0 * (r - 1) / r / l->bw_Bps;
    *lat = 2.0 * (r - 1) * l->latency_s;
}

void plan_allreduce_factors(const plan_inst *I, int r, int level, double *per_byte, double *lat)
{
    /* both halves cross the same links in the same steps: the ring's time
     * is the all-reduce's of (reduce + gather) / 2 per param byte */
    ar_shape_factors(I, r, level, per_byte, lat);
    *per_byte *= I->ar_scale[plan_zero_splits(I->zero, I->sched)];
}

double plan_allreduce_s(const plan_inst *I, double bytes, int r, int level)
{
    if (r <= 1 || !I->comm) return 0;
    /* (2 (r - 1) / r / bw) x bytes + 2 (r - 1) x latency, in this order */
    double per_byte, lat;
    plan_allreduce_factors(I, r, level, &per_byte, &lat);
    return per_byte * bytes + lat;
}

double plan_allreduce_least(const plan_inst *I, double bytes, int r)
{
    if (r <= 1 || !I->comm) return 0;
    double best = HUGE_VAL, scale = fmin(I->ar_scale[0], I->ar_scale[1]);
    bytes *= scale; /* the fewer bytes of either kind of ring */
    for (int lv = 0; lv < CLUSTER_LEVELS; lv++)
        if (I->link[lv].bw_Bps > 0) {
            const cluster_link *l = &I->link[lv];
            best = fmin(best, 2.0 * (r - 1) / r / l->bw_Bps * bytes + 2.0 * (r - 1) * l->latency_s);
        }
    if (I->link[CLUSTER_INTRA].bw_Bps > 0 && I->link[CLUSTER_INTER].bw_Bps > 0)
        for (int k = 2; k <= r / 2; k++) /* any shape the simulator may meet */
            if (r % k == 0) {
                double per_byte, lat;
                hier_factors(I, r, k, &per_byte, &lat);
                best = fmin(best, per_byte * bytes + lat);
            }
    return best < HUGE_VAL ? best : 0;
}

double plan_boundary_s(const plan_inst *I, double bytes, int level)
{
    if (!I->comm || I->bnd_off) return 0;
    const cluster_link *l = &I->link[level];
    return 2.0 * I->m * (l->latency_s + bytes / l->bw_Bps);
}

double plan_stage_mem(const plan_inst *I, double params, double stash, double in_bytes,
                      double out_bytes, int depth, int r, int devices)
{
    assert(r >= 1 && depth >= r && devices >= depth);
    int inflight = sched_inflight_rep(I->sched, devices, depth, r, I->m, I->chunks);
    int versions = sched_versions_rep(I->sched, depth, r);
    return plan_stage_mem_counts(I, params, stash, in_bytes, out_bytes, inflight, versions, r);
}

double plan_stage_mem_least(const plan_inst *I, double params, double stash, double in_bytes,
                            double out_bytes)
{
    return plan_stage_mem_counts(I, params, stash, in_bytes, out_bytes, 1, 1, plan_inst_rmax(I));
}

double plan_chunks_mem(const plan_inst *I, double fixed, const double *stash, int q, int p, int r)
{
    return fixed + sched_interleaved_stash_peak(p, I->chunks, q, I->m, r, stash);
}

int plan_block_ok(const plan_inst *I, int pos, int r)
{
    if (r < 1 || pos < 0 || pos + r > I->n_dev) return 0;
    int a = I->node[pos], b = I->node[pos + r - 1];
    if (a == b) return 1;
    /* whole nodes: the block starts at a node's first position and ends at
     * one's last */
    if (pos > 0 && I->node[pos - 1] == a) return 0;
    if (pos + r < I->n_dev && I->node[pos + r] == b) return 0;
    return 1;
}

/* -------------------------------------------------------------- layouts -- */

void plan_layout_alloc(plan_layout *y, int p)
{
    assert(p >= 1);
    y->p = p;
    y->cut = cl_calloc((size_t)p + 1, sizeof(int));
    y->pos = cl_calloc((size_t)p, sizeof(int));
    y->r = cl_calloc((size_t)p, sizeof(int));
}

void plan_layout_free(plan_layout *y)
{
    free(y->cut);
    free(y->pos);
    free(y->r);
    memset(y, 0, sizeof *y);
}

void plan_layout_copy(plan_layout *dst, const plan_layout *src)
{
    plan_layout_alloc(dst, src->p);
    memcpy(dst->cut, src->cut, (size_t)(src->p + 1) * sizeof(int));
    memcpy(dst->pos, src->pos, (size_t)src->p * sizeof(int));
    memcpy(dst->r, src->r, (size_t)src->p * sizeof(int));
}

static int is_subset(const plan_lattice *L, int a, int b)
{
    if (L->chain) return a < b;
    if (L->size[a] >= L->size[b]) return 0;
    for (int w = 0; w < L->words; w++) {
        uint64_t x = L->bits[(size_t)a * L->words + w], y = L->bits[(size_t)b * L->words + w];
        if (x & ~y) return 0;
    }
    return 1;
}

void plan_layout_eval(const plan_inst *I, const plan_lattice *L, const plan_layout *y,
                      plan_eval *out)
{
    memset(out, 0, sizeof *out);
    out->worst_stage = -1;
    out->bottleneck_stage = -1;
    int p = y->p;
    if (p < 1 || y->cut[0] != 0 || y->cut[p] != L->n_sets - 1) return;
    for (int s = 0; s < p; s++) {
        if (!is_subset(L, y->cut[s], y->cut[s + 1])) return;
        if (y->r[s] < 1 || y->r[s] > I->m || y->r[s] > I->max_replicas) return;
        if (I->rep_fixed > 0 && y->r[s] != I->rep_fixed) return;
        if (L->chain && s > 0 && y->cut[s] > I->cut_max) return;
        if (!plan_block_ok(I, y->pos[s], y->r[s])) return;
        if (s > 0 && y->pos[s - 1] + y->r[s - 1] > y->pos[s]) return;
    }
    out->valid = 1;
    out->feasible = 1;
    double B = 0, C = 0, H = HUGE_VAL;
    int U = 0;
    int total = 0, depth = 0;
    for (int s = 0; s < p; s++) total += y->r[s];
    /* suffix order, as the exact search accumulates */
    for (int s = p - 1; s >= 0; s--) {
        int lo = y->cut[s], hi = y->cut[s + 1], pos = y->pos[s], r = y->r[s];
        double spd, cap;
        plan_block_least(I, pos, r, &spd, &cap);
        int level = I->node[pos] == I->node[pos + r - 1] ? CLUSTER_INTRA : CLUSTER_INTER;
        double P = L->params[hi] - L->params[lo];
        double ar = plan_allreduce_s(I, P, r, level);
        double t = plan_stage_time(I, L->work[hi] - L->work[lo], r, spd, ar);
        double bnd = 0;
        if (s < p - 1) {
            int lv = plan_link_level(I, pos, r, y->pos[s + 1], y->r[s + 1]);
            bnd = plan_boundary_s(I, L->cut[hi], lv);
        }
        depth += r;
        double mem = plan_stage_mem(I, P, L->stash[hi] - L->stash[lo], L->cut[lo], L->cut[hi],
                                    depth, r, total);
        if (t > B || out->bottleneck_stage < 0) {
            B = t;
            out->bottleneck_stage = s;
            out->bottleneck_is_boundary = 0;
        }
        if (bnd > B) {
            B = bnd;
            out->bottleneck_stage = s;
            out->bottleneck_is_boundary = 1;
        }
        C = C + ar + bnd;
        double h = cap - mem;
        if (h < H || out->worst_stage < 0) {
            H = h;
            out->worst_stage = s;
            out->worst_need_bytes = mem;
            out->worst_cap_bytes = cap;
        }
        if (mem > cap) out->feasible = 0;
        U += r;
    }
    out->bottleneck_s = B;
    out->comm_s = C;
    out->headroom_bytes = H;
    out->devices = U;
}

int plan_eval_cmp(const plan_eval *a, const plan_eval *b)
{
    if (a->feasible != b->feasible) return a->feasible ? -1 : 1;
    if (a->bottleneck_s != b->bottleneck_s) return a->bottleneck_s < b->bottleneck_s ? -1 : 1;
    if (a->comm_s != b->comm_s) return a->comm_s < b->comm_s ? -1 : 1;
    if (a->headroom_bytes != b->headroom_bytes) return a->headroom_bytes > b->headroom_bytes ? -1 : 1;
    if (a->devices != b->devices) return a->devices < b->devices ? -1 : 1;
    return 0;
}
