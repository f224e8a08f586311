/* sched_json.c - explicit schedules as JSON ("format": "cleave-schedule",
 * docs/formats.md): per-device op lists a user writes by hand or dumps with
 * `cleave sim --dump-schedule`.
 *
 * What a file may leave out, and how it is filled in from the plan:
 *   B is fused with W unless the file has a W for that (stage, mb, iter);
 *   SEND/RECV direction (activation or gradient) follows from the stages;
 *   bytes are the plan's act_out_bytes at that boundary;
 *   "peer" defaults to the device holding the other end's F (activations)
 *   or B (gradients) of that microbatch;
 *   a file without any SEND/RECV gets them inserted as the built-in
 *   schedules place them: RECV right before the consuming op, SEND right
 *   after the producing one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonx.h"
#include "schedule.h"

#define SCHED_MAX_MICRO (1 << 24)
#define SCHED_MAX_ITER (1 << 20)

typedef struct ld {
    const plan *pl;
    sched *s;
    int S, m, P;
    int64_t G;
    int *fw, *bw;   /* per (g, stage): worker of its F / B, -1 */
    char *has_w;    /* per (g, stage): a W exists */
} ld;

static int64_t gkey(const ld *l, int iter, int micro, int stage)
{
    return ((int64_t)iter * l->m + micro) * l->S + stage;
}

static const char *const op_allowed[] = {"op", "stage", "mb", "iter", "peer_stage", "peer", "wver", NULL};

static int read_op(jx *j, ld *l, const cJSON *o, const char *path, int w, sched_op *op)
{
    static const char *const names[] = {"F", "B", "W", "SEND", "RECV", "ALLREDUCE", "UPDATE"};
    int kind = 0;
    int64_t v;
    int rc = jx_only(j, o, path, op_allowed);
    if (!rc) rc = jx_enum(j, o, path, "op", 1, names, SCHED_OP_COUNT, &kind);
    if (rc) return rc;
    memset(op, 0, sizeof *op);
    op->kind = (uint8_t)kind;
    op->peer = op->wver = op->micro = -1;
    if ((rc = jx_int(j, o, path, "stage", 1, 0, l->S - 1, &v))) return rc;
    op->stage = (int32_t)v;
    op->chunk = (uint16_t)(l->s->kind == SCHED_SEQUENTIAL ? 0 : op->stage / l->P);
    int xfer = kind == SCHED_SEND || kind == SCHED_RECV;
    v = -1;
    if ((rc = jx_int(j, o, path, "mb", kind <= SCHED_RECV, -1, l->m - 1, &v))) return rc;
    op->micro = (int32_t)v;
    if (kind <= SCHED_RECV && op->micro < 0) return jx_fail(j, path, "mb: needs a microbatch >= 0");
    v = 0;
    if ((rc = jx_int(j, o, path, "iter", 0, 0, l->s->n_iter - 1, &v))) return rc;
    op->iter = (int32_t)v;
    v = -1;
    if ((rc = jx_int(j, o, path, "wver", 0, -1, INT32_MAX, &v))) return rc;
    op->wver = (int32_t)v;
    if (xfer) {
        if ((rc = jx_int(j, o, path, "peer_stage", 1, 0, l->S - 1, &v))) return rc;
        int d = (int)v - op->stage;
        if (d != 1 && d != -1)
            return jx_fail(j, path, "peer_stage: %d is not next to stage %d (hint: transfers go "
                           "between neighbouring stages)", (int)v, op->stage);
        int send = kind == SCHED_SEND;
        op->flags = (send ? d < 0 : d > 0) ? SCHED_GRAD : 0;
        int lo = d > 0 ? op->stage : op->stage - 1;
        op->bytes = l->pl->stages[lo].act_out_bytes;
        v = -1;
        if ((rc = jx_int(j, o, path, "peer", 0, 0, l->pl->cluster.n_devices - 1, &v))) return rc;
        if (v >= 0) {
            int pw = -1;
            for (int k = 0; k < l->s->n_dev; k++)
                if (l->s->dev[k] == v) pw = k;
            if (pw < 0)
                return jx_fail(j, path, "peer: device %lld has no op list in this file", (long long)v);
            op->peer = pw;
        }
    } else if (cJSON_GetObjectItemCaseSensitive(o, "peer") ||
               cJSON_GetObjectItemCaseSensitive(o, "peer_stage")) {
        return jx_fail(j, path, "peer: only SEND and RECV have a peer");
    }
    if (kind == SCHED_ALLREDUCE) { /* the gradients' reduce-scatter half (plan_ar_bytes) */
        double gather;
        plan_ar_bytes(l->pl, op->stage, -1, &op->bytes, &gather);
    }
    if (kind <= SCHED_W) {
        int64_t k = gkey(l, op->iter, op->micro, op->stage);
        if (kind == SCHED_F) l->fw[k] = w;
        if (kind == SCHED_B) l->bw[k] = w;
        if (kind == SCHED_W) l->has_w[k] = 1;
    }
    return CL_OK;
}

static sched_op *push(sched_op **ops, int64_t *n, int64_t *cap)
{
    if (*n == *cap) {
        *cap = *cap * 2 + 64;
        *ops = cl_realloc(*ops, (size_t)*cap * sizeof **ops);
    }
    return &(*ops)[(*n)++];
}

static void xfer(const ld *l, sched_op *op, int kind, int stage, int peer_stage, int peer, const sched_op *at)
{
    int send = kind == SCHED_SEND, d = peer_stage - stage;
    memset(op, 0, sizeof *op);
    op->kind = (uint8_t)kind;
    op->flags = (send ? d < 0 : d > 0) ? SCHED_GRAD : 0;
    op->chunk = at->chunk;
    op->stage = stage;
    op->peer = peer;
    op->micro = at->micro;
    op->iter = at->iter;
    op->wver = -1;
    op->bytes = l->pl->stages[d > 0 ? stage : peer_stage].act_out_bytes;
}

/* Insert SEND/RECV pairs the way the built-in schedules place them. */
static void insert_transfers(ld *l)
{
    sched *s = l->s;
    int64_t n = 0, cap = s->n_ops * 2 + 64;
    sched_op *out = cl_malloc((size_t)cap * sizeof *out);
    int64_t *off = cl_malloc(((size_t)s->n_dev + 1) * sizeof *off);
    for (int w = 0; w < s->n_dev; w++) {
        off[w] = n;
        for (int64_t i = s->off[w]; i < s->off[w + 1]; i++) {
            const sched_op *op = &s->ops[i];
            int st = op->stage;
            int64_t k = op->kind <= SCHED_W ? gkey(l, op->iter, op->micro, st) : 0;
            if (op->kind == SCHED_F && st > 0 && l->fw[k - 1] >= 0 && l->fw[k - 1] != w)
                xfer(l, push(&out, &n, &cap), SCHED_RECV, st, st - 1, l->fw[k - 1], op);
            if (op->kind == SCHED_B && st < l->S - 1 && l->bw[k + 1] >= 0 && l->bw[k + 1] != w)
                xfer(l, push(&out, &n, &cap), SCHED_RECV, st, st + 1, l->bw[k + 1], op);
            *push(&out, &n, &cap) = *op;
            if (op->kind == SCHED_F && st < l->S - 1 && l->fw[k + 1] >= 0 && l->fw[k + 1] != w)
                xfer(l, push(&out, &n, &cap), SCHED_SEND, st, st + 1, l->fw[k + 1], op);
            if (op->kind == SCHED_B && st > 0 && l->bw[k - 1] >= 0 && l->bw[k - 1] != w)
                xfer(l, push(&out, &n, &cap), SCHED_SEND, st, st - 1, l->bw[k - 1], op);
        }
    }
    off[s->n_dev] = n;
    free(s->ops);
    free(s->off);
    s->ops = out;
    s->off = off;
    s->n_ops = n;
}

/* The schedule's members (header and member names checked by jx_decode),
 * read against the plan in j->ctx, then checked as a whole (sched_check). */
static int sched_read(jx *jp, const cJSON *root, int version, void *out)
{
    (void)version;
    const plan *pl = jp->ctx;
    sched *s = out;
    const char *file = jp->file;
    cl_err *e = jp->e;
    jx j = *jp;
    static const char *const kinds[] = {"sequential", "gpipe", "1f1b", "interleaved", "zb-h1",
                                        "pipedream", "fbp", "custom"};
    /* how SEND and RECV behave (docs/simulator.md, "Blocking transfers");
     * absent: posted, as every schedule before DeepSpeed's */
    static const char *const transfers[] = {"posted", "blocking"};
    int kind = SCHED_COUNT, tr = -1, rc;
    int64_t m = 0, iters = 1;
    const cJSON *devs;
    if ((rc = jx_enum(&j, root, "", "kind", 0, kinds, SCHED_COUNT + 1, &kind)) ||
        (rc = jx_enum(&j, root, "", "transfers", 0, transfers, 2, &tr)) ||
        (rc = jx_int(&j, root, "", "microbatches", 1, 1, SCHED_MAX_MICRO, &m)) ||
        (rc = jx_int(&j, root, "", "iterations", 0, 1, SCHED_MAX_ITER, &iters)) ||
        (rc = jx_array(&j, root, "", "devices", 1, 1, pl->cluster.n_devices, &devs)))
        return rc;
    if (m * iters * pl->n_stages > ((int64_t)1 << 32))
        return jx_fail(&j, "microbatches", "%lld x %lld iterations x %d stages is too large",
                       (long long)m, (long long)iters, pl->n_stages);
    int v = pl->chunks > 1 ? pl->chunks : 1;
    if (pl->n_stages % v)
        return cl_fail(e, CL_EINPUT, "%s: the plan's %d stages do not split into %d chunks", file,
                       pl->n_stages, v);
    ld l = {.pl = pl, .s = s, .S = pl->n_stages, .m = (int)m, .P = pl->n_stages / v};
    s->kind = kind == SCHED_COUNT ? -1 : kind;
    s->blocking_p2p = tr == 1;
    s->n_stages = pl->n_stages;
    s->chunks = v;
    s->n_micro = (int)m;
    s->n_iter = (int)iters;
    s->n_dev = cJSON_GetArraySize(devs);
    s->dev = cl_malloc((size_t)s->n_dev * sizeof *s->dev);
    s->off = cl_calloc((size_t)s->n_dev + 1, sizeof *s->off);
    l.G = m * iters;
    int64_t n = l.G * l.S, total_ops = 0;
    char path[128], opath[160];
    /* devices first (peers refer to them), counting the ops */
    int w = 0;
    for (const cJSON *d = devs->child; d && !rc; d = d->next, w++) {
        static const char *const dk[] = {"device", "ops", NULL};
        int64_t dv;
        const cJSON *ops;
        jx_index(path, sizeof path, "devices", w);
        if (!cJSON_IsObject(d)) rc = jx_fail(&j, path, "expected an object {\"device\", \"ops\"}");
        if (!rc) rc = jx_only(&j, d, path, dk);
        if (!rc) rc = jx_int(&j, d, path, "device", 1, 0, pl->cluster.n_devices - 1, &dv);
        if (!rc) s->dev[w] = (int)dv;
        for (int k = 0; k < w && !rc; k++)
            if (s->dev[k] == s->dev[w]) rc = jx_fail(&j, path, "device: %d has two op lists", s->dev[w]);
        if (!rc) rc = jx_array(&j, d, path, "ops", 1, 0, INT32_MAX, &ops);
        if (!rc) total_ops += cJSON_GetArraySize(ops);
    }
    /* every (stage, microbatch, iteration) needs an F and a B: a file that
     * claims more than its ops can hold is refused before anything that
     * size is allocated */
    if (!rc && 2 * n > total_ops)
        rc = jx_fail(&j, "microbatches", "%lld microbatches x %lld iterations x %d stages need at "
                     "least %lld ops (an F and a B each), the file has %lld", (long long)m,
                     (long long)iters, l.S, (long long)(2 * n), (long long)total_ops);
    if (rc) {
        sched_free(s);
        return rc;
    }
    l.fw = cl_malloc((size_t)n * sizeof *l.fw);
    l.bw = cl_malloc((size_t)n * sizeof *l.bw);
    l.has_w = cl_calloc((size_t)n, 1);
    for (int64_t i = 0; i < n; i++) l.fw[i] = l.bw[i] = -1;
    int64_t cap = total_ops;
    s->ops = cl_malloc((size_t)(cap ? cap : 1) * sizeof *s->ops);
    w = 0;
    for (const cJSON *d = devs->child; d && !rc; d = d->next, w++) {
        const cJSON *ops = cJSON_GetObjectItemCaseSensitive(d, "ops");
        jx_index(path, sizeof path, "devices", w);
        s->off[w] = s->n_ops;
        int i = 0;
        for (const cJSON *o = ops->child; o && !rc; o = o->next, i++) {
            char ap[140];
            jx_join(ap, sizeof ap, path, "ops");
            jx_index(opath, sizeof opath, ap, i);
            if (!cJSON_IsObject(o)) {
                rc = jx_fail(&j, opath, "expected an op object {\"op\": \"F\", \"stage\": 0, \"mb\": 0}");
                break;
            }
            rc = read_op(&j, &l, o, opath, w, push(&s->ops, &s->n_ops, &cap));
        }
    }
    if (!rc) {
        s->off[s->n_dev] = s->n_ops;
        int any_xfer = 0;
        for (int64_t i = 0; i < s->n_ops; i++) {
            sched_op *op = &s->ops[i];
            if (op->kind == SCHED_SEND || op->kind == SCHED_RECV) any_xfer = 1;
            if (op->wver >= 0) s->stash_weights = 1;
            if (op->kind == SCHED_W) s->split_bw = 1;
            if (op->kind == SCHED_B && !l.has_w[gkey(&l, op->iter, op->micro, op->stage)])
                op->flags |= SCHED_FUSED_W;
        }
        /* default peers: the device holding the other end */
        for (int dw = 0; dw < s->n_dev && !rc; dw++)
            for (int64_t i = s->off[dw]; i < s->off[dw + 1]; i++) {
                sched_op *op = &s->ops[i];
                if ((op->kind != SCHED_SEND && op->kind != SCHED_RECV) || op->peer >= 0) continue;
                int64_t k = gkey(&l, op->iter, op->micro, sched_peer_stage(op));
                op->peer = (op->flags & SCHED_GRAD) ? l.bw[k] : l.fw[k];
                if (op->peer < 0) {
                    rc = cl_fail(e, CL_EINPUT, "%s: devices[%d].ops[%lld]: no device runs %s of stage %d "
                                 "microbatch %d iteration %d, so the %s has no peer", file, dw,
                                 (long long)(i - s->off[dw]), (op->flags & SCHED_GRAD) ? "B" : "F",
                                 sched_peer_stage(op), op->micro, op->iter,
                                 op->kind == SCHED_SEND ? "SEND" : "RECV");
                    break;
                }
            }
        if (!rc && !any_xfer) insert_transfers(&l);
    }
    free(l.fw);
    free(l.bw);
    free(l.has_w);
    if (!rc) rc = sched_check(pl, s, file, e);
    return rc; /* on failure jx_decode releases s (sched_free) */
}

static void sched_release(void *s) { sched_free(s); }

static const char *const sched_members[] = {"format", "version", "kind", "transfers", "microbatches",
                                            "iterations", "devices", NULL};
static const jx_format sched_format = {"cleave-schedule", 1, sched_members, sizeof(sched), sched_read,
                                       sched_release};

int sched_from_json(const plan *pl, const cJSON *root, const char *file, sched *s, cl_err *e)
{
    return jx_decode(&sched_format, root, file, pl, s, e);
}

int sched_load(const plan *p, const char *path, sched *s, cl_err *e)
{
    return jx_load(&sched_format, path, p, s, e);
}

cJSON *sched_to_json(const sched *s)
{
    cJSON *root = jx_doc_new(&sched_format);
    cJSON_AddStringToObject(root, "kind", s->kind >= 0 ? sched_kind_name((sched_kind)s->kind) : "custom");
    if (s->blocking_p2p) cJSON_AddStringToObject(root, "transfers", "blocking");
    cJSON_AddNumberToObject(root, "microbatches", s->n_micro);
    cJSON_AddNumberToObject(root, "iterations", s->n_iter);
    cJSON *devs = cJSON_AddArrayToObject(root, "devices");
    for (int w = 0; w < s->n_dev; w++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddNumberToObject(d, "device", s->dev[w]);
        cJSON *ops = cJSON_AddArrayToObject(d, "ops");
        for (int64_t i = s->off[w]; i < s->off[w + 1]; i++) {
            const sched_op *op = &s->ops[i];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "op", sched_op_kind_name((sched_op_kind)op->kind));
            cJSON_AddNumberToObject(o, "stage", op->stage);
            if (op->micro >= 0) cJSON_AddNumberToObject(o, "mb", op->micro);
            if (op->iter) cJSON_AddNumberToObject(o, "iter", op->iter);
            if (op->kind == SCHED_SEND || op->kind == SCHED_RECV) {
                cJSON_AddNumberToObject(o, "peer_stage", sched_peer_stage(op));
                cJSON_AddNumberToObject(o, "peer", s->dev[op->peer]);
            }
            if (op->wver >= 0) cJSON_AddNumberToObject(o, "wver", op->wver);
            cJSON_AddItemToArray(ops, o);
        }
        cJSON_AddItemToArray(devs, d);
    }
    return root;
}

int sched_save(const sched *s, const char *path, cl_err *e)
{
    return jx_save(path, sched_to_json(s), e);
}
