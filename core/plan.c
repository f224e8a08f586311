/* plan.c - plan files: reading, checking, writing (see plan.h and
 * docs/formats.md, "Plan").  The schedule kind names live in
 * core/sched_kind.c beside the schedules. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonx.h"
#include "plan.h"

#define FORMAT "cleave-plan"
#define VERSION 1

/* ------------------------------------------------------------- optimiser -- */

static const char *const optim_names[] = {"sgd", "momentum", "adam"};
_Static_assert(sizeof optim_names / sizeof optim_names[0] == OPTIM_COUNT,
               "optim_names out of sync with plan_optim");

const char *plan_optim_name(plan_optim o)
{
    assert((unsigned)o < OPTIM_COUNT);
    return optim_names[o];
}

static const char *const for_names[] = {"", "torch", "deepspeed", "megatron"};
_Static_assert(sizeof for_names / sizeof for_names[0] == PLAN_FOR_COUNT, "for_names out of sync with plan_for");

const char *plan_for_name(plan_for f)
{
    assert((unsigned)f < PLAN_FOR_COUNT);
    return for_names[f];
}

int plan_for_from_name(const char *name)
{
    for (int f = 1; f < PLAN_FOR_COUNT; f++)
        if (name && strcmp(name, for_names[f]) == 0) return f;
    return -1;
}

int plan_optim_from_name(const char *name)
{
    for (int o = 0; o < OPTIM_COUNT; o++)
        if (name && strcmp(name, optim_names[o]) == 0) return o;
    return -1;
}

int plan_optim_state_mult(plan_optim o)
{
    assert((unsigned)o < OPTIM_COUNT);
    return o == OPTIM_SGD ? 0 : o == OPTIM_MOMENTUM ? 1 : 2;
}

/* ------------------------------------------------------------- precision -- */

static const char *const prec_names[] = {"auto", "fp32", "mixed", "fp8"};
_Static_assert(sizeof prec_names / sizeof prec_names[0] == PREC_COUNT,
               "prec_names out of sync with plan_prec");

const char *plan_prec_name(plan_prec p)
{
    assert((unsigned)p < PREC_COUNT);
    return prec_names[p];
}

int plan_prec_from_name(const char *name)
{
    for (int p = 0; p < PREC_COUNT; p++)
        if (name && strcmp(name, prec_names[p]) == 0) return p;
    return -1;
}

plan_prec plan_prec_resolve(plan_prec p, int elem_bytes)
{
    if (p != PREC_AUTO) return p;
    return elem_bytes == 2 ? PREC_MIXED : PREC_FP32;
}

plan_state_f plan_state_factors(int elem_bytes, plan_prec prec, plan_optim o, int zero, int keep_bytes)
{
    assert(elem_bytes > 0 && prec != PREC_AUTO && (unsigned)prec < PREC_COUNT);
    assert(zero >= 0 && zero <= PLAN_ZERO_MAX);
    assert(keep_bytes == 4 || (keep_bytes == 2 && prec != PREC_FP32));
    double e = elem_bytes;
    int mixed = prec == PREC_MIXED || prec == PREC_FP8;
    plan_state_f f = {0};
    /* bytes per parameter over bytes per parameter in the model's element
     * size: small integers over 2 or 4, so every factor is exact */
    f.weights = (prec == PREC_FP32 ? 4.0 : 2.0) / e;
    f.grads = keep_bytes / e;
    f.master = (mixed ? 4.0 : 0.0) / e;
    f.master_grads = (mixed && keep_bytes < 4 ? 4.0 : 0.0) / e;
    f.moments = 4.0 * plan_optim_state_mult(o) / e;
    f.optim = f.master + f.master_grads + f.moments;
    f.grads_sharded = zero >= 2;
    f.opt_sharded = zero >= 1;
    f.rep = f.weights + (f.grads_sharded ? 0 : f.grads) + (f.opt_sharded ? 0 : f.optim);
    f.shard = (f.grads_sharded ? f.grads : 0) + (f.opt_sharded ? f.optim : 0);
    f.version = f.weights;
    return f;
}

double plan_update_traffic(const plan_state_f *f)
{
    double w = f->master > 0 ? f->weights : 2 * f->weights;
    return f->grads + 2 * f->optim + w;
}

int plan_state_describe(const plan *p, char *buf, size_t cap)
{
    int elem = model_dtype_bytes(p->model.dtype);
    plan_prec prec = plan_prec_resolve(p->precision, elem);
    buf[0] = '\0';
    if (prec == PREC_FP32 && elem == 4 && !p->zero) return 0;
    plan_state_f s = plan_state_factors(elem, prec, p->optimizer, p->zero, plan_grad_keep(p));
    char per[96];
    if (s.shard > 0)
        snprintf(per, sizeof per, "%g + %g/r bytes per parameter on a stage of r replicas (ZeRO %d)",
                 s.rep * elem, s.shard * elem, p->zero);
    else
        snprintf(per, sizeof per, "%g bytes per parameter%s", s.rep * elem,
                 p->zero ? " (ZeRO has nothing to shard)" : "");
    const char *what = prec == PREC_FP32 ? "fp32 (weights, gradients, moments)"
                       : s.master_grads > 0 ? "16-bit weights and gradients; fp32 master weights, their gradients, moments"
                                            : "16-bit weights; fp32 gradients, master weights, moments";
    snprintf(buf, cap, "%s%s%s%s, %s: %s", prec == PREC_FP8 ? "FP8 GEMMs in the blocks, otherwise " : "",
             prec == PREC_FP32 ? "" : "mixed precision (", what, prec == PREC_FP32 ? "" : ")",
             plan_optim_name(p->optimizer), per);
    return 1;
}

/* ------------------------------------------------------------------ free -- */

void plan_free(plan *p)
{
    for (int s = 0; s < p->n_stages; s++) {
        free(p->stages[s].layers);
        free(p->stages[s].devices);
    }
    free(p->stages);
    model_free(&p->model);
    cluster_free(&p->cluster);
    memset(p, 0, sizeof *p);
}

int plan_uneven_stage(const plan *p)
{
    for (int s = 1; s < p->n_stages; s++)
        if (p->stages[s].n_replicas != p->stages[0].n_replicas) return s;
    return 0;
}

int plan_device_count(const plan *p)
{
    int n = p->cluster.n_devices, count = 0;
    if (n <= 0) return 0;
    char *seen = cl_calloc((size_t)n, 1);
    for (int s = 0; s < p->n_stages; s++)
        for (int r = 0; r < p->stages[s].n_replicas; r++) {
            int d = p->stages[s].devices[r];
            if (d >= 0 && d < n && !seen[d]) {
                seen[d] = 1;
                count++;
            }
        }
    free(seen);
    return count;
}

void plan_ring_shape(const plan *p, int st, int *k, int *n)
{
    const plan_stage *ps = &p->stages[st];
    const cluster *cl = &p->cluster;
    int r = ps->n_replicas, nodes = 0, per = 0, even = 1;
    int *cnt = cl_calloc((size_t)(cl->n_nodes > 0 ? cl->n_nodes : 1), sizeof *cnt);
    for (int q = 0; q < r; q++) nodes += cnt[cl->devices[ps->devices[q]].node]++ == 0;
    for (int q = 0; q < r; q++) {
        int c = cnt[cl->devices[ps->devices[q]].node];
        if (!per) per = c;
        even &= c == per;
    }
    free(cnt);
    *k = r;
    *n = 1;
    if (nodes >= 2 && per >= 2 && even) {
        *k = per;
        *n = nodes;
    }
}

/* -------------------------------------------------------------- validate -- */

int plan_validate(const plan *p, const char *file, cl_err *e)
{
    jx j = {.file = file, .e = e};
    const model *m = &p->model;
    int n = m->n_layers, nd = p->cluster.n_devices;
    if ((unsigned)p->schedule >= SCHED_COUNT) return jx_fail(&j, "schedule", "unknown schedule kind");
    if ((unsigned)p->optimizer >= OPTIM_COUNT) return jx_fail(&j, "optimizer", "unknown optimiser");
    if (p->batch < 1) return jx_fail(&j, "batch", "%d is not a positive sample count", p->batch);
    if (p->microbatch < 1)
        return jx_fail(&j, "microbatch", "%d is not a positive sample count", p->microbatch);
    if (p->n_micro < 1)
        return jx_fail(&j, "microbatches", "%d is not a positive count", p->n_micro);
    if ((int64_t)p->microbatch * p->n_micro != p->batch)
        return jx_fail(&j, "batch",
                       "%d is not microbatch %d x microbatches %d = %lld (hint: batch must equal microbatch x microbatches)",
                       p->batch, p->microbatch, p->n_micro, (long long)p->microbatch * p->n_micro);
    if (p->n_stages < 1) return jx_fail(&j, "stages", "no stages (hint: a plan needs at least one)");
    if (p->chunks < 1) return jx_fail(&j, "chunks", "%d is not a positive count", p->chunks);
    if (p->chunks > 1 && p->schedule != SCHED_INTERLEAVED)
        return jx_fail(&j, "chunks", "%d model chunks per device need the interleaved schedule, not %s",
                       p->chunks, sched_kind_name(p->schedule));
    if (p->n_stages % p->chunks != 0)
        return jx_fail(&j, "stages", "%d stages are not %d chunks on each of some devices (hint: the count must be a multiple of chunks)",
                       p->n_stages, p->chunks);
    if (n < 1) return jx_fail(&j, "model", "the embedded model has no layers");
    if (nd < 1) return jx_fail(&j, "cluster", "the embedded cluster has no devices");

    int *owner = cl_malloc((size_t)n * sizeof *owner);
    int *dev_owner = cl_malloc((size_t)nd * sizeof *dev_owner);
    for (int i = 0; i < n; i++) owner[i] = -1;
    for (int d = 0; d < nd; d++) dev_owner[d] = -1;
    int rc = CL_OK, pipe = p->n_stages / p->chunks;
    char path[96];
    for (int s = 0; s < p->n_stages && !rc; s++) {
        const plan_stage *st = &p->stages[s];
        snprintf(path, sizeof path, "stages[%d].layers", s);
        if (st->n_layers < 1) {
            rc = jx_fail(&j, path, "empty stage (hint: every stage holds at least one layer)");
            break;
        }
        for (int k = 0; k < st->n_layers && !rc; k++) {
            int l = st->layers[k];
            snprintf(path, sizeof path, "stages[%d].layers[%d]", s, k);
            if (l < 0 || l >= n)
                rc = jx_fail(&j, path, "layer %d does not exist (the model has %d, numbered 0 to %d)",
                             l, n, n - 1);
            else if (k > 0 && l <= st->layers[k - 1])
                rc = jx_fail(&j, path, "layer %d after %d (hint: list a stage's layers in model order)",
                             l, st->layers[k - 1]);
            else if (owner[l] >= 0)
                rc = jx_fail(&j, path,
                             "layer %d (%s) is also in stages[%d] (hint: stages must not overlap)",
                             l, m->layers[l].name, owner[l]);
            else owner[l] = s;
        }
        if (rc) break;
        snprintf(path, sizeof path, "stages[%d]", s);
        if (st->first != st->layers[0] || st->last != st->layers[st->n_layers - 1]) {
            rc = jx_fail(&j, path, "first/last (%d, %d) disagree with its layers (%d .. %d)",
                         st->first, st->last, st->layers[0], st->layers[st->n_layers - 1]);
            break;
        }
        if (!m->is_dag && st->last - st->first + 1 != st->n_layers) {
            rc = jx_fail(&j, path, "layers %d .. %d of a chain model are not contiguous", st->first,
                         st->last);
            break;
        }
        snprintf(path, sizeof path, "stages[%d].devices", s);
        if (st->n_replicas < 1) {
            rc = jx_fail(&j, path, "no devices (hint: every stage runs on at least one)");
            break;
        }
        for (int r = 0; r < st->n_replicas && !rc; r++) {
            int d = st->devices[r];
            snprintf(path, sizeof path, "stages[%d].devices[%d]", s, r);
            if (d < 0 || d >= nd) {
                rc = jx_fail(&j, path, "device %d does not exist (the cluster has %d, numbered 0 to %d)",
                             d, nd, nd - 1);
            } else if (s < pipe) {
                if (dev_owner[d] >= 0)
                    rc = jx_fail(&j, path, "device %d (%s) is also used by stages[%d] (hint: replicas of different stages need different devices)",
                                 d, p->cluster.devices[d].id, dev_owner[d]);
                else dev_owner[d] = s;
            } else {
                /* interleaved: chunk stage s runs on the devices of stage s mod p */
                const plan_stage *b = &p->stages[s % pipe];
                if (st->n_replicas != b->n_replicas || d != b->devices[r])
                    rc = jx_fail(&j, path, "interleaved stage %d must run on the devices of stages[%d]",
                                 s, s % pipe);
            }
        }
        const double v[] = {st->fwd_s, st->bwd_in_s, st->bwd_w_s, st->update_s,
                            st->act_out_bytes, st->stash_bytes, st->param_bytes, st->compute_s,
                            st->comm_s, st->mem_bytes};
        static const char *const vn[] = {"fwd_s", "bwd_in_s", "bwd_w_s", "update_s",
                                         "act_out_bytes", "stash_bytes", "param_bytes",
                                         "compute_s", "comm_s", "mem_bytes"};
        for (size_t k = 0; k < sizeof v / sizeof v[0] && !rc; k++)
            if (!(v[k] >= 0) || !isfinite(v[k])) {
                snprintf(path, sizeof path, "stages[%d].%s", s, vn[k]);
                rc = jx_fail(&j, path, "%g is not a finite number >= 0", v[k]);
            }
    }
    for (int i = 0; i < n && !rc; i++)
        if (owner[i] < 0)
            rc = jx_fail(&j, "stages", "layer %d (%s) is in no stage (hint: every layer belongs to exactly one stage)",
                         i, m->layers[i].name);
    /* data flows forward: a layer's inputs are in its stage or earlier ones */
    for (int i = 0; i < n && !rc; i++)
        for (int k = 0; k < m->layers[i].n_inputs && !rc; k++) {
            int src = m->layers[i].inputs[k];
            if (src >= 0 && owner[src] > owner[i]) {
                int s = owner[i], at = 0;
                while (p->stages[s].layers[at] != i) at++;
                snprintf(path, sizeof path, "stages[%d].layers[%d]", s, at);
                rc = jx_fail(&j, path, "layer %d (%s) reads layer %d (%s) of the later stages[%d] (hint: stages follow the data flow)",
                             i, m->layers[i].name, src, m->layers[src].name, owner[src]);
            }
        }
    const double pv[] = {p->pred.iteration_s, p->pred.throughput, p->pred.bubble, p->pred.speedup};
    static const char *const pn[] = {"predictions.iteration_s", "predictions.throughput",
                                     "predictions.bubble", "predictions.speedup"};
    for (int k = 0; k < 4 && !rc; k++)
        if (!(pv[k] >= 0) || !isfinite(pv[k]) || (k == 2 && pv[k] > 1))
            rc = jx_fail(&j, pn[k], "%g is out of range", pv[k]);
    free(owner);
    free(dev_owner);
    return rc;
}

/* ------------------------------------------------------------------ load -- */

static int read_stage(jx *j, const cJSON *sj, const char *sp, const model *m, plan_stage *st)
{
    static const char *const members[] = {
        "first", "last", "first_name", "last_name", "layers", "devices", "replicas", "fwd_s",
        "bwd_in_s", "bwd_w_s", "update_s", "act_out_bytes", "stash_bytes", "param_bytes", "compute_s",
        "comm_s", "mem_bytes", NULL};
    char p[128];
    int rc;
    if (!cJSON_IsObject(sj)) return jx_fail(j, sp, "expected an object describing a stage");
    if ((rc = jx_only(j, sj, sp, members))) return rc;
    const cJSON *layers = NULL, *devs = NULL;
    if ((rc = jx_array(j, sj, sp, "layers", 0, 0, MODEL_MAX_LAYERS, &layers))) return rc;
    int64_t first = -1, last = -1;
    if ((rc = jx_int(j, sj, sp, "first", layers == NULL, 0, MODEL_MAX_LAYERS, &first)) ||
        (rc = jx_int(j, sj, sp, "last", layers == NULL, 0, MODEL_MAX_LAYERS, &last)))
        return rc;
    if (layers) {
        int k = cJSON_GetArraySize(layers);
        st->n_layers = k;
        st->layers = cl_malloc((size_t)(k ? k : 1) * sizeof(int));
        int i = 0;
        for (const cJSON *it = layers->child; it; it = it->next, i++) {
            int64_t v;
            jx_join(p, sizeof p, sp, "layers");
            char q[160];
            jx_index(q, sizeof q, p, i);
            if ((rc = jx_int_item(j, it, q, 0, MODEL_MAX_LAYERS, &v))) return rc;
            st->layers[i] = (int)v;
        }
        st->first = k ? st->layers[0] : -1;
        st->last = k ? st->layers[k - 1] : -1;
        if (first >= 0 && first != st->first) {
            jx_join(p, sizeof p, sp, "first");
            return jx_fail(j, p, "%lld disagrees with the first of its layers (%d)", (long long)first, st->first);
        }
        if (last >= 0 && last != st->last) {
            jx_join(p, sizeof p, sp, "last");
            return jx_fail(j, p, "%lld disagrees with the last of its layers (%d)", (long long)last, st->last);
        }
    } else {
        if (last < first) {
            jx_join(p, sizeof p, sp, "last");
            return jx_fail(j, p, "%lld is before first %lld (hint: first <= last)", (long long)last,
                           (long long)first);
        }
        if (last >= m->n_layers) {
            jx_join(p, sizeof p, sp, "last");
            return jx_fail(j, p, "layer %lld does not exist (the model has %d, numbered 0 to %d)",
                           (long long)last, m->n_layers, m->n_layers - 1);
        }
        st->first = (int)first;
        st->last = (int)last;
        st->n_layers = (int)(last - first + 1);
        st->layers = cl_malloc((size_t)st->n_layers * sizeof(int));
        for (int i = 0; i < st->n_layers; i++) st->layers[i] = (int)first + i;
    }
    /* names, when given, must name the first and last layers */
    static const char *const nk[] = {"first_name", "last_name"};
    for (int k = 0; k < 2; k++) {
        char name[MODEL_NAME_MAX];
        name[0] = '\0';
        if ((rc = jx_name(j, sj, sp, nk[k], 0, name, sizeof name))) return rc;
        int at = k == 0 ? st->first : st->last;
        if (name[0] && at >= 0 && at < m->n_layers && strcmp(name, m->layers[at].name) != 0) {
            jx_join(p, sizeof p, sp, nk[k]);
            return jx_fail(j, p, "\"%s\" is not the name of layer %d (\"%s\")", name, at,
                           m->layers[at].name);
        }
    }
    if ((rc = jx_array(j, sj, sp, "devices", 1, 1, CLUSTER_MAX_DEVICES, &devs))) return rc;
    st->n_replicas = cJSON_GetArraySize(devs);
    st->devices = cl_malloc((size_t)st->n_replicas * sizeof(int));
    int i = 0;
    for (const cJSON *it = devs->child; it; it = it->next, i++) {
        int64_t v;
        char q[160];
        jx_join(p, sizeof p, sp, "devices");
        jx_index(q, sizeof q, p, i);
        if ((rc = jx_int_item(j, it, q, 0, CLUSTER_MAX_DEVICES, &v))) return rc;
        st->devices[i] = (int)v;
    }
    int64_t reps = st->n_replicas;
    if ((rc = jx_int(j, sj, sp, "replicas", 0, 1, CLUSTER_MAX_DEVICES, &reps))) return rc;
    if (reps != st->n_replicas) {
        jx_join(p, sizeof p, sp, "replicas");
        return jx_fail(j, p, "%lld replicas but %d devices listed (hint: one device per replica)",
                       (long long)reps, st->n_replicas);
    }
    struct { const char *k; double *v; int req; } nums[] = {
        {"fwd_s", &st->fwd_s, 1},           {"bwd_in_s", &st->bwd_in_s, 1},
        {"bwd_w_s", &st->bwd_w_s, 1},       {"update_s", &st->update_s, 0},
        {"act_out_bytes", &st->act_out_bytes, 1},
        {"stash_bytes", &st->stash_bytes, 1}, {"param_bytes", &st->param_bytes, 1},
        {"compute_s", &st->compute_s, 0},   {"comm_s", &st->comm_s, 0},
        {"mem_bytes", &st->mem_bytes, 0}};
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++)
        if ((rc = jx_num(j, sj, sp, nums[k].k, nums[k].req, 0, HUGE_VAL, nums[k].v))) return rc;
    return CL_OK;
}

/* FNV-1a 64 of the model's unformatted JSON: what "model_hash" records, so
 * a plan notices when its embedded model was edited after planning (the
 * stage costs were computed from the model as it was).  Returns 16 hex
 * digits in buf (17 bytes). */
static void model_hash(const model *m, char *buf)
{
    cJSON *j = model_to_json(m);
    char *text = cJSON_PrintUnformatted(j);
    if (!text) abort(); /* out of memory */
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 offset basis and prime */
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) h = (h ^ *c) * 0x100000001b3ULL;
    snprintf(buf, 17, "%016llx", (unsigned long long)h);
    free(text);
    cJSON_Delete(j);
}

static int plan_read(jx *j, const cJSON *root, int version, void *out)
{
    static const char *const pred_members[] = {"iteration_s", "throughput", "bubble", "speedup",
                                               NULL};
    static const char *sched_names[SCHED_COUNT];
    for (int k = 0; k < SCHED_COUNT; k++) sched_names[k] = sched_kind_name((sched_kind)k);
    plan *p = out;
    const char *file = j->file;
    cl_err *e = j->e;
    (void)version;
    int rc, sk = 0, ok = OPTIM_SGD;
    int64_t chunks = 1, batch = 0, mb = 0, nm = 0;
    if ((rc = jx_enum(j, root, "", "schedule", 1, sched_names, SCHED_COUNT, &sk)) ||
        (rc = jx_int(j, root, "", "chunks", 0, 1, 1 << 20, &chunks)) ||
        (rc = jx_enum(j, root, "", "optimizer", 0, optim_names, OPTIM_COUNT, &ok)) ||
        (rc = jx_int(j, root, "", "batch", 1, 1, INT32_MAX, &batch)) ||
        (rc = jx_int(j, root, "", "microbatch", 1, 1, INT32_MAX, &mb)) ||
        (rc = jx_int(j, root, "", "microbatches", 1, 1, INT32_MAX, &nm)))
        return rc;
    /* precision and ZeRO: absent in plans written before they existed,
     * which load as the model's default precision (fp32 for a 4-byte
     * model: the meaning they were written with) and ZeRO 0 */
    int prec = PREC_AUTO;
    int64_t zero = 0;
    if ((rc = jx_enum(j, root, "", "precision", 0, prec_names + 1, PREC_COUNT - 1, &prec)) ||
        (rc = jx_int(j, root, "", "zero", 0, 0, PLAN_ZERO_MAX, &zero)))
        return rc;
    p->precision = cJSON_GetObjectItemCaseSensitive(root, "precision") ? (plan_prec)(prec + 1) : PREC_AUTO;
    p->zero = (int)zero;
    int comm = 1, fw = -1;
    if ((rc = jx_bool(j, root, "", "communication", 0, &comm)) ||
        (rc = jx_enum(j, root, "", "for", 0, for_names + 1, PLAN_FOR_COUNT - 1, &fw)))
        return rc;
    p->framework = (plan_for)(fw + 1); /* absent: -1 + 1, PLAN_FOR_ANY */
    /* absent: the default of the model, precision and framework */
    int64_t grb = 0;
    if ((rc = jx_int(j, root, "", "grad_reduce_bytes", 0, 2, PLAN_GRAD_REDUCE_MAX, &grb))) return rc;
    if (grb == 3) return jx_fail(j, "grad_reduce_bytes", "expected 2 or 4 (bytes per gradient element of the data-parallel reduction), got 3");
    p->grad_reduce = (int)grb;
    p->comm_off = !comm;
    if ((rc = plan_tp_read(j, root, p))) return rc;
    p->schedule = (sched_kind)sk;
    p->optimizer = (plan_optim)ok;
    p->chunks = (int)chunks;
    p->batch = (int)batch;
    p->microbatch = (int)mb;
    p->n_micro = (int)nm;
    /* the embedded model and cluster, named in messages as "<file>: model" */
    const cJSON *mj, *cj, *stages, *pred;
    char sub[1100];
    if ((rc = jx_object(j, root, "", "model", 1, &mj))) return rc;
    snprintf(sub, sizeof sub, "%s: model", file);
    if ((rc = model_from_json(&p->model, mj, sub, e))) return rc;
    if ((rc = jx_object(j, root, "", "cluster", 1, &cj))) return rc;
    snprintf(sub, sizeof sub, "%s: cluster", file);
    if ((rc = cluster_from_json(&p->cluster, cj, sub, e))) return rc;
    if ((rc = jx_array(j, root, "", "stages", 1, 1, MODEL_MAX_LAYERS, &stages))) return rc;
    p->n_stages = cJSON_GetArraySize(stages);
    p->stages = cl_calloc((size_t)p->n_stages, sizeof *p->stages);
    int s = 0;
    for (const cJSON *sj = stages->child; sj && !rc; sj = sj->next, s++) {
        char sp[64];
        jx_index(sp, sizeof sp, "stages", s);
        rc = read_stage(j, sj, sp, &p->model, &p->stages[s]);
    }
    if (rc) return rc;
    if ((rc = jx_object(j, root, "", "predictions", 0, &pred))) return rc;
    if (pred) {
        if ((rc = jx_only(j, pred, "predictions", pred_members)) ||
            (rc = jx_num(j, pred, "predictions", "iteration_s", 1, 0, HUGE_VAL, &p->pred.iteration_s)) ||
            (rc = jx_num(j, pred, "predictions", "throughput", 1, 0, HUGE_VAL, &p->pred.throughput)) ||
            (rc = jx_num(j, pred, "predictions", "bubble", 1, 0, 1, &p->pred.bubble)) ||
            (rc = jx_num(j, pred, "predictions", "speedup", 1, 0, HUGE_VAL, &p->pred.speedup)))
            return rc;
    }
    const cJSON *du;
    int64_t du_used = 0, du_of = 0;
    if ((rc = jx_object(j, root, "", "devices_used", 0, &du))) return rc;
    if (du) {
        static const char *const du_members[] = {"used", "of", "why", NULL};
        if ((rc = jx_only(j, du, "devices_used", du_members)) ||
            (rc = jx_int(j, du, "devices_used", "used", 1, 1, INT32_MAX, &du_used)) ||
            (rc = jx_int(j, du, "devices_used", "of", 1, 1, INT32_MAX, &du_of)) ||
            (rc = jx_str(j, du, "devices_used", "why", 1, p->idle_why, sizeof p->idle_why)))
            return rc;
    }
    if ((rc = plan_validate(p, file, e))) return rc;
    for (int k = 0; k < p->n_stages && plan_context(p) > 1; k++)
        if (p->stages[k].n_replicas % plan_context(p))
            return jx_fail(j, "context", "%d, but stage %d has %d replicas (hint: with context parallelism every stage holds d x context replicas)",
                           plan_context(p), k, p->stages[k].n_replicas);
    if (du && du_used != plan_device_count(p))
        return jx_fail(j, "devices_used.used", "%lld, but the stages use %d devices (hint: drop devices_used, or correct it)",
                       (long long)du_used, plan_device_count(p));
    if (du && du_of != p->cluster.n_devices)
        return jx_fail(j, "devices_used.of", "%lld, but the cluster has %d devices (hint: drop devices_used, or correct it)",
                       (long long)du_of, p->cluster.n_devices);
    const char *want = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "model_hash"));
    if (cJSON_GetObjectItemCaseSensitive(root, "model_hash") && !want)
        return jx_fail(j, "model_hash", "expected a string of 16 hex digits");
    if (want) {
        char have[17];
        model_hash(&p->model, have);
        if (strcmp(want, have) != 0)
            return jx_fail(j, "model_hash", "\"%.40s\", but the embedded model \"%s\" now hashes to \"%s\": it was edited after planning, so the stage costs no longer describe it (hint: plan it again, or delete \"model_hash\" to use the stages as they are)",
                           want, p->model.name, have);
    }
    return CL_OK;
}

static void plan_release(void *p) { plan_free(p); }

static const char *const plan_members[] = {"format", "version", "schedule", "chunks", "optimizer",
                                           "batch", "microbatch", "microbatches", "stages",
                                           "predictions", "model", "model_hash", "cluster",
                                           "communication", "devices_used", "for", "precision",
                                           "zero", "tensor", "sequence_parallel", "recompute", "context",
                                           "grad_reduce_bytes", NULL};
static const jx_format plan_format = {FORMAT, VERSION, plan_members, sizeof(plan), plan_read,
                                      plan_release};

int plan_from_json(plan *p, const cJSON *root, const char *file, cl_err *e)
{
    return jx_decode(&plan_format, root, file, NULL, p, e);
}

int plan_load(plan *p, const char *path, cl_err *e)
{
    return jx_load(&plan_format, path, NULL, p, e);
}

/* ------------------------------------------------------------------ save -- */

cJSON *plan_to_json(const plan *p)
{
    cJSON *root = jx_doc_new(&plan_format);
    cJSON_AddStringToObject(root, "schedule", sched_kind_name(p->schedule));
    if (p->chunks != 1) cJSON_AddNumberToObject(root, "chunks", p->chunks);
    cJSON_AddStringToObject(root, "optimizer", plan_optim_name(p->optimizer));
    /* written unless it is fp32 for a 4-byte model, which is what a plan
     * without it means (and every plan meant before it existed) */
    int elem = model_dtype_bytes(p->model.dtype);
    plan_prec prec = plan_prec_resolve(p->precision, elem);
    if (prec != PREC_FP32 || elem != 4) cJSON_AddStringToObject(root, "precision", plan_prec_name(prec));
    if (p->zero) cJSON_AddNumberToObject(root, "zero", p->zero);
    if (p->comm_off) cJSON_AddBoolToObject(root, "communication", 0);
    if (p->framework != PLAN_FOR_ANY) cJSON_AddStringToObject(root, "for", plan_for_name(p->framework));
    if (p->grad_reduce > 0) cJSON_AddNumberToObject(root, "grad_reduce_bytes", p->grad_reduce);
    plan_tp_write(root, p);
    cJSON_AddNumberToObject(root, "batch", p->batch);
    cJSON_AddNumberToObject(root, "microbatch", p->microbatch);
    cJSON_AddNumberToObject(root, "microbatches", p->n_micro);
    cJSON *stages = cJSON_AddArrayToObject(root, "stages");
    for (int s = 0; s < p->n_stages; s++) {
        const plan_stage *st = &p->stages[s];
        cJSON *o = cJSON_CreateObject();
        int contiguous = st->last - st->first + 1 == st->n_layers;
        if (contiguous) {
            cJSON_AddNumberToObject(o, "first", st->first);
            cJSON_AddNumberToObject(o, "last", st->last);
            if (st->first >= 0 && st->first < p->model.n_layers)
                cJSON_AddStringToObject(o, "first_name", p->model.layers[st->first].name);
            if (st->last >= 0 && st->last < p->model.n_layers)
                cJSON_AddStringToObject(o, "last_name", p->model.layers[st->last].name);
        } else {
            cJSON *l = cJSON_AddArrayToObject(o, "layers");
            for (int k = 0; k < st->n_layers; k++)
                cJSON_AddItemToArray(l, cJSON_CreateNumber(st->layers[k]));
        }
        cJSON *d = cJSON_AddArrayToObject(o, "devices");
        for (int r = 0; r < st->n_replicas; r++)
            cJSON_AddItemToArray(d, cJSON_CreateNumber(st->devices[r]));
        cJSON_AddNumberToObject(o, "replicas", st->n_replicas);
        cJSON_AddNumberToObject(o, "fwd_s", st->fwd_s);
        cJSON_AddNumberToObject(o, "bwd_in_s", st->bwd_in_s);
        cJSON_AddNumberToObject(o, "bwd_w_s", st->bwd_w_s);
        if (st->update_s > 0) cJSON_AddNumberToObject(o, "update_s", st->update_s);
        cJSON_AddNumberToObject(o, "act_out_bytes", st->act_out_bytes);
        cJSON_AddNumberToObject(o, "stash_bytes", st->stash_bytes);
        cJSON_AddNumberToObject(o, "param_bytes", st->param_bytes);
        cJSON_AddNumberToObject(o, "compute_s", st->compute_s);
        cJSON_AddNumberToObject(o, "comm_s", st->comm_s);
        cJSON_AddNumberToObject(o, "mem_bytes", st->mem_bytes);
        cJSON_AddItemToArray(stages, o);
    }
    cJSON *pr = cJSON_AddObjectToObject(root, "predictions");
    cJSON_AddNumberToObject(pr, "iteration_s", p->pred.iteration_s);
    cJSON_AddNumberToObject(pr, "throughput", p->pred.throughput);
    cJSON_AddNumberToObject(pr, "bubble", p->pred.bubble);
    cJSON_AddNumberToObject(pr, "speedup", p->pred.speedup);
    if (p->idle_why[0]) {
        cJSON *du = cJSON_AddObjectToObject(root, "devices_used");
        cJSON_AddNumberToObject(du, "used", plan_device_count(p));
        cJSON_AddNumberToObject(du, "of", p->cluster.n_devices);
        cJSON_AddStringToObject(du, "why", p->idle_why);
    }
    cJSON_AddItemToObject(root, "model", model_to_json(&p->model));
    char h[17];
    model_hash(&p->model, h);
    cJSON_AddStringToObject(root, "model_hash", h);
    /* the device types' kernel models priced the stage times already held
     * here; the embedded cluster leaves them out, so a plan does not change
     * with a model it did not use (docs/formats.md, "Plan") */
    cJSON *cj = cluster_to_json(&p->cluster), *types = cJSON_GetObjectItemCaseSensitive(cj, "device_types");
    for (cJSON *t = types ? types->child : NULL; t; t = t->next) cJSON_DeleteItemFromObjectCaseSensitive(t, "kernels");
    cJSON_AddItemToObject(root, "cluster", cj);
    return root;
}

int plan_save(const plan *p, const char *path, cl_err *e)
{
    return jx_save(path, plan_to_json(p), e);
}
