/* sched_check.c - is a schedule complete and consistent with its plan?
 * (sched_check in schedule.h).  Used on every loaded explicit schedule and by
 * the tests on every built-in one, so generators and hand-written files meet
 * the same contract the simulator and the executor rely on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

typedef struct chk {
    const plan *pl;
    const sched *s;
    const char *file;
    cl_err *e;
    int S, m;
    int64_t G;
    int64_t *posF, *posB, *posW;  /* per (g, stage): global op index, -1     */
    int64_t *posS, *posR;         /* per transfer slot: global op index, -1  */
    int *wk;                      /* per global op index: its worker         */
} chk;

#define NONE (-1)

static int64_t key(const chk *c, int64_t g, int stage) { return g * c->S + stage; }

static int64_t slot(const chk *c, const sched_op *op)
{
    int64_t g = (int64_t)op->iter * c->m + op->micro;
    return (g * (c->S - 1) + sched_boundary(op)) * 2 + ((op->flags & SCHED_GRAD) ? 1 : 0);
}

/* "<file>: devices[w].ops[i] (F stage 1 mb 2 iter 0): <msg>" */
static int fail_op(chk *c, int64_t at, const char *fmt, const char *detail)
{
    const sched *s = c->s;
    int w = c->wk[at];
    const sched_op *op = &s->ops[at];
    return cl_fail(c->e, CL_EINPUT, "%s: devices[%d].ops[%lld] (%s stage %d mb %d iter %d): %s%s",
                   c->file, w, (long long)(at - s->off[w]), sched_op_kind_name((sched_op_kind)op->kind),
                   op->stage, op->micro, op->iter, fmt, detail ? detail : "");
}

static int missing(chk *c, const char *what, int stage, int64_t g)
{
    return cl_fail(c->e, CL_EINPUT, "%s: no %s of stage %d microbatch %lld iteration %lld "
                   "(hint: every microbatch needs F and B on every stage)", c->file, what, stage,
                   (long long)(g % c->m), (long long)(g / c->m));
}

static int on_stage_device(const chk *c, int w, int stage)
{
    if (c->s->kind == SCHED_SEQUENTIAL) return 1;
    const plan_stage *st = &c->pl->stages[stage];
    for (int q = 0; q < st->n_replicas; q++)
        if (st->devices[q] == c->s->dev[w]) return 1;
    return 0;
}

/* The cross-worker edge for data leaving op `from` (worker a) for op `to`
 * (worker b): a SEND after `from` on a and the RECV before `to` on b. */
static int check_edge(chk *c, int64_t from, int64_t to, int64_t sl, const char *what)
{
    int a = c->wk[from], b = c->wk[to];
    if (a == b) {
        if (from > to) return fail_op(c, to, "comes before the op it depends on on the same device", NULL);
        if (c->posS[sl] != NONE) return fail_op(c, c->posS[sl], "SEND between ops on the same device", NULL);
        return CL_OK;
    }
    int64_t sp = c->posS[sl], rp = c->posR[sl];
    char d[96];
    snprintf(d, sizeof d, " (needs %s from device %d)", what, c->s->dev[a]);
    if (sp == NONE || rp == NONE)
        return fail_op(c, to, sp == NONE ? "no SEND for its input" : "no RECV for its input", d);
    if (c->wk[sp] != a || sp < from) return fail_op(c, sp, "SEND must follow the op producing it on that device", NULL);
    if (c->wk[rp] != b || rp > to) return fail_op(c, rp, "RECV must precede the op consuming it on that device", NULL);
    if (c->s->ops[sp].peer != b) return fail_op(c, sp, "SEND goes to the wrong device", NULL);
    if (c->s->ops[rp].peer != a) return fail_op(c, rp, "RECV expects the wrong device", NULL);
    return CL_OK;
}

static int scan(chk *c)
{
    const sched *s = c->s;
    int S = c->S;
    for (int w = 0; w < s->n_dev; w++) {
        if (s->dev[w] < 0 || s->dev[w] >= c->pl->cluster.n_devices)
            return cl_fail(c->e, CL_EINPUT, "%s: devices[%d]: device %d is not in the cluster",
                           c->file, w, s->dev[w]);
        for (int v = 0; v < w; v++)
            if (s->dev[v] == s->dev[w])
                return cl_fail(c->e, CL_EINPUT, "%s: devices[%d]: device %d already has a list",
                               c->file, w, s->dev[w]);
        for (int64_t i = s->off[w]; i < s->off[w + 1]; i++) c->wk[i] = w;
    }
    for (int64_t i = 0; i < s->n_ops; i++) {
        const sched_op *op = &s->ops[i];
        int w = c->wk[i];
        int needs_mb = op->kind <= SCHED_RECV;
        if (op->kind >= SCHED_OP_COUNT || op->stage < 0 || op->stage >= S || op->iter < 0 ||
            op->iter >= s->n_iter || op->micro < (needs_mb ? 0 : -1) || op->micro >= c->m)
            return fail_op(c, i, "stage, microbatch or iteration out of range", NULL);
        if (!on_stage_device(c, w, op->stage))
            return fail_op(c, i, "this device does not hold that stage", NULL);
        int64_t g = (int64_t)op->iter * c->m + op->micro;
        int64_t *pos = NULL;
        switch ((sched_op_kind)op->kind) {
        case SCHED_F: pos = &c->posF[key(c, g, op->stage)]; break;
        case SCHED_B: pos = &c->posB[key(c, g, op->stage)]; break;
        case SCHED_W: pos = &c->posW[key(c, g, op->stage)]; break;
        case SCHED_SEND:
        case SCHED_RECV: {
            int grad = (op->flags & SCHED_GRAD) != 0, send = op->kind == SCHED_SEND;
            int want = sched_peer_stage(op);
            if (want < 0 || want >= S)
                return fail_op(c, i, grad ? (send ? "stage 0 has no gradient to send"
                                                  : "the last stage receives no gradient")
                                          : (send ? "the last stage sends no activation"
                                                  : "stage 0 receives no activation"), NULL);
            if (op->peer < 0 || op->peer >= s->n_dev || op->peer == w)
                return fail_op(c, i, "peer is not another device of the schedule", NULL);
            if (op->bytes != c->pl->stages[sched_boundary(op)].act_out_bytes)
                return fail_op(c, i, "bytes differ from the plan's act_out_bytes of the boundary", NULL);
            pos = send ? &c->posS[slot(c, op)] : &c->posR[slot(c, op)];
            break;
        }
        case SCHED_ALLREDUCE:
        case SCHED_UPDATE:
        case SCHED_OP_COUNT: break;
        }
        if (pos) {
            if (*pos != NONE) return fail_op(c, i, "appears twice", NULL);
            *pos = i;
        }
    }
    return CL_OK;
}

static int deps(chk *c)
{
    const sched *s = c->s;
    int S = c->S;
    for (int64_t g = 0; g < c->G; g++)
        for (int st = 0; st < S; st++) {
            int64_t f = c->posF[key(c, g, st)], b = c->posB[key(c, g, st)], w = c->posW[key(c, g, st)];
            if (f == NONE) return missing(c, "F", st, g);
            if (b == NONE) return missing(c, "B", st, g);
            int fused = (s->ops[b].flags & SCHED_FUSED_W) != 0;
            if (fused && w != NONE) return fail_op(c, w, "W of a B that already computes it (fused)", NULL);
            if (!fused && w == NONE) return missing(c, "W (its B is not fused)", st, g);
            if (c->wk[b] != c->wk[f] || b < f) return fail_op(c, b, "B must follow its F on the same device", NULL);
            if (w != NONE && (c->wk[w] != c->wk[b] || w < b))
                return fail_op(c, w, "W must follow its B on the same device", NULL);
            if (s->ops[b].wver != s->ops[f].wver)
                return fail_op(c, b, "B must use the weight version of its F", NULL);
            int64_t sl = (g * (S - 1) + st) * 2;
            if (st + 1 < S) {
                if (c->posF[key(c, g, st + 1)] == NONE) return missing(c, "F", st + 1, g);
                if (c->posB[key(c, g, st + 1)] == NONE) return missing(c, "B", st + 1, g);
                int rc = check_edge(c, f, c->posF[key(c, g, st + 1)], sl, "activations");
                if (!rc) rc = check_edge(c, c->posB[key(c, g, st + 1)], b, sl + 1, "gradients");
                if (rc) return rc;
            }
        }
    /* every SEND has its RECV and vice versa */
    int64_t n_slots = S > 1 ? c->G * (S - 1) * 2 : 0;
    for (int64_t i = 0; i < n_slots; i++) {
        if ((c->posS[i] == NONE) != (c->posR[i] == NONE))
            return fail_op(c, c->posS[i] != NONE ? c->posS[i] : c->posR[i], "has no matching ",
                           c->posS[i] != NONE ? "RECV" : "SEND");
    }
    return CL_OK;
}

/* Weight versions within range, all-reduce counts equal across replicas. */
static int counts(chk *c)
{
    const sched *s = c->s;
    int S = c->S;
    int64_t *upd = cl_calloc((size_t)S, sizeof *upd), *ar = cl_calloc((size_t)S, sizeof *ar);
    int64_t *ar0 = cl_malloc((size_t)S * sizeof *ar0);
    char *has = cl_malloc((size_t)S);
    for (int i = 0; i < S; i++) ar0[i] = -1;
    int rc = CL_OK;
    for (int w = 0; w < s->n_dev && !rc; w++) {
        memset(upd, 0, (size_t)S * sizeof *upd);
        memset(ar, 0, (size_t)S * sizeof *ar);
        memset(has, 0, (size_t)S);
        for (int64_t i = s->off[w]; i < s->off[w + 1]; i++) {
            has[s->ops[i].stage] = 1;
            if (s->ops[i].kind == SCHED_UPDATE) upd[s->ops[i].stage]++;
            if (s->ops[i].kind == SCHED_ALLREDUCE) ar[s->ops[i].stage]++;
        }
        for (int64_t i = s->off[w]; i < s->off[w + 1] && !rc; i++) {
            const sched_op *op = &s->ops[i];
            if (op->wver < -1 || op->wver > upd[op->stage])
                rc = fail_op(c, i, "weight version beyond the updates of this stage on this device", NULL);
            if (op->kind == SCHED_ALLREDUCE && c->pl->stages[op->stage].n_replicas < 2)
                rc = fail_op(c, i, "all-reduce of a stage with one replica", NULL);
        }
        for (int st = 0; st < S && !rc; st++) {
            if (!has[st] || c->pl->stages[st].n_replicas < 2) continue;
            if (ar0[st] < 0)
                ar0[st] = ar[st];
            else if (ar0[st] != ar[st])
                rc = cl_fail(c->e, CL_EINPUT, "%s: devices[%d]: %lld all-reduces of stage %d, another "
                             "replica has %lld (hint: each replica takes part in every all-reduce)",
                             c->file, w, (long long)ar[st], st, (long long)ar0[st]);
        }
    }
    free(upd);
    free(ar);
    free(ar0);
    free(has);
    return rc;
}

int sched_check(const plan *p, const sched *s, const char *file, cl_err *e)
{
    if (s->n_stages != p->n_stages || s->n_micro < 1 || s->n_iter < 1 || s->n_dev < 1)
        return cl_fail(e, CL_EINPUT, "%s: %d stages, %d microbatches, %d iterations, %d devices do "
                       "not fit the plan (%d stages)", file, s->n_stages, s->n_micro, s->n_iter,
                       s->n_dev, p->n_stages);
    chk c = {.pl = p, .s = s, .file = file, .e = e, .S = p->n_stages, .m = s->n_micro};
    c.G = (int64_t)s->n_micro * s->n_iter;
    int64_t n = c.G * c.S, n_slots = c.S > 1 ? c.G * (c.S - 1) * 2 : 1;
    c.posF = cl_malloc((size_t)n * sizeof(int64_t));
    c.posB = cl_malloc((size_t)n * sizeof(int64_t));
    c.posW = cl_malloc((size_t)n * sizeof(int64_t));
    c.posS = cl_malloc((size_t)n_slots * sizeof(int64_t));
    c.posR = cl_malloc((size_t)n_slots * sizeof(int64_t));
    c.wk = cl_malloc((size_t)(s->n_ops ? s->n_ops : 1) * sizeof(int));
    for (int64_t i = 0; i < n; i++) c.posF[i] = c.posB[i] = c.posW[i] = NONE;
    for (int64_t i = 0; i < n_slots; i++) c.posS[i] = c.posR[i] = NONE;
    int rc = scan(&c);
    if (!rc) rc = deps(&c);
    if (!rc) rc = counts(&c);
    free(c.posF);
    free(c.posB);
    free(c.posW);
    free(c.posS);
    free(c.posR);
    free(c.wk);
    return rc;
}
