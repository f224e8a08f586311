/* net.c - a stage of a model made runnable (net.h): parameter layout and
 * initialisation, the memory plan, and the acts a pass runs on.
 *
 * Memory plan (decided once, at creation): every layer output either lives
 * in the acts (kept: some backward pass reads it, or it is the stage output)
 * or in one of two scratch slots the net owns, alternating so a layer never
 * writes the slot it reads.  Output gradients likewise: kept in the acts for
 * layers with weights (the weight-gradient pass reads them later), else in
 * the same two slots.  Forward and backward share the slots because what
 * a forward leaves in them is dead by the time a backward runs, and because
 * the slot bytes the forward touched last (the top layers' outputs) are
 * the ones the backward writes first: they are still in the caches
 * (measured: docs/executor.md, "Stages").
 * The convolutions' lowering scratch is one buffer for the same reason:
 * calls on a net come one at a time, and none keeps it past its return.
 * The passes themselves: net_pass.c.
 */
#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "gemm.h"
#include "layers.h"
#include "layers_tfm.h"
#include "net.h"

#include "net_layout.h"

/* ======================================================================== */
/* construction                                                              */

/* splitmix64 (Steele, Lea, Flood 2014): decorrelates nearby seeds. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* An mt19937 stream for (seed, layer, purpose); the same for any partition. */
static gsl_rng *layer_rng(uint64_t seed, int layer, int purpose)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    uint64_t s = mix64(seed ^ mix64(((uint64_t)(unsigned)layer << 8) | (unsigned)purpose));
    gsl_rng_set(r, (unsigned long)(s & 0xffffffffu)); /* mt19937 takes 32 bits */
    return r;
}

/* Does layer i's output reach a relu before the next layer with weights
 * (passing through norms, pools, dropout, flatten)?  Then He init. */
static int feeds_relu(const model *m, int i)
{
    for (int j = i + 1; j < m->n_layers; j++) {
        switch (m->layers[j].kind) {
        case MODEL_RELU: return 1;
        case MODEL_BATCHNORM2D: case MODEL_MAXPOOL2D: case MODEL_AVGPOOL2D:
        case MODEL_DROPOUT: case MODEL_FLATTEN: continue;
        default: return 0;
        }
    }
    return 0;
}

/* Kinds whose backward passes read their input / their own output. */
static int needs_input(model_kind k) { return k == MODEL_CONV2D || k == MODEL_LINEAR; }
static int needs_own_output(model_kind k) { return k == MODEL_RELU; }

static int64_t pad64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

/* Geometry, parameter sizes and aux sizes of one layer. */
static void layer_setup(xlayer *x, const model *m, int i, const exec_tp_comm *tp, int flags)
{
    const model_layer *l = &m->layers[i];
    x->index = i;
    x->ml = l;
    x->kind = l->kind;
    x->in_elems = model_shape_elems(&l->in_shape);
    x->out_elems = model_shape_elems(&l->out_shape);
    const int64_t *d = l->in_shape.d;
    switch (l->kind) {
    case MODEL_CONV2D: {
        int rc = exec_conv_init(&x->conv, (int)d[0], (int)d[1], (int)d[2], (int)l->out_channels,
                                (int)l->kernel, (int)l->stride, (int)l->padding);
        assert(rc == 0 && (int64_t)x->conv.O * x->conv.Ho * x->conv.Wo == x->out_elems);
        (void)rc;
        x->has_w = 1;
        break;
    }
    case MODEL_LINEAR:
        x->IC = (int)x->in_elems;
        x->O = (int)x->out_elems;
        x->has_w = 1;
        break;
    case MODEL_MAXPOOL2D:
    case MODEL_AVGPOOL2D: {
        int rc = exec_pool_init(&x->pool, (int)d[0], (int)d[1], (int)d[2], (int)l->kernel,
                                (int)l->stride, (int)l->padding);
        assert(rc == 0 && (int64_t)x->pool.C * x->pool.Ho * x->pool.Wo == x->out_elems);
        (void)rc;
        if (l->kind == MODEL_MAXPOOL2D) x->aux_sample = x->out_elems * (int64_t)sizeof(int32_t);
        break;
    }
    case MODEL_DROPOUT:
        x->aux_sample = x->out_elems; /* one byte of mask per element */
        break;
    case MODEL_BATCHNORM2D:
        x->C = (int)d[0];
        x->HW = (int)(x->in_elems / x->C);
        x->has_w = 1;
        x->aux_sample = x->out_elems * (int64_t)sizeof(float);
        x->aux_fixed = x->C * (int64_t)sizeof(float);
        break;
    case MODEL_SOFTMAX_XENT:
        x->aux_sample = x->in_elems * (int64_t)sizeof(float);
        break;
    default:
        if ((x->is_tfm = exec_tfm_from_layer(&x->tg, l))) {
            x->tg.seq = exec_tfm_split(&x->tg, tp) && (flags & EXEC_NET_SEQ_PAR);
            int blk = x->tg.kind == EXEC_TFM_ATTN || x->tg.kind == EXEC_TFM_MLP;
            x->tg.recompute = blk && (flags & EXEC_NET_RECOMPUTE_FULL) ? EXEC_TFM_FULL
                              : (flags & EXEC_NET_RECOMPUTE) && x->tg.kind == EXEC_TFM_ATTN
                                  ? EXEC_TFM_SELECTIVE : 0;
            x->aux_fixed = exec_tfm_aux_fixed(&x->tg) * (int64_t)sizeof(float);
            x->has_w = exec_tfm_params(&x->tg) > 0;
            x->aux_sample = exec_tfm_aux_floats(&x->tg) * (int64_t)sizeof(float);
        }
        break;
    }
}

/* Sequence parallelism: consecutive sequence-parallel blocks pass each
 * other their workers' tokens only (T / size of each sample); the first of
 * a run takes its tokens from the whole input and the last gathers its
 * whole output (layers_tfm.h), so every other layer, and the stage's input
 * and output, keep the whole sequence. */
static void seq_regions(exec_net *n)
{
    for (int k = 0; k < n->L; k++) {
        exec_tfm *g = &n->ly[k].tg;
        if (!n->ly[k].is_tfm || !g->seq) continue;
        g->seq_in = k > 0 && n->ly[k - 1].is_tfm && n->ly[k - 1].tg.seq;
        g->seq_out = k + 1 < n->L && n->ly[k + 1].is_tfm && n->ly[k + 1].tg.seq;
        if (g->seq_in) n->ly[k].in_elems /= g->tp->size;
        if (g->seq_out) n->ly[k].out_elems /= g->tp->size;
    }
}

static int64_t layer_n_params(const xlayer *x, int64_t *nb)
{
    const model_layer *l = x->ml;
    *nb = 0;
    switch (x->kind) {
    case MODEL_CONV2D:
        *nb = l->bias ? x->conv.O : 0;
        return (int64_t)x->conv.O * x->conv.C * x->conv.k * x->conv.k;
    case MODEL_LINEAR:
        *nb = l->bias ? x->O : 0;
        return (int64_t)x->O * x->IC;
    case MODEL_BATCHNORM2D:
        *nb = x->C;
        return x->C;
    default:
        return x->is_tfm ? exec_tfm_params(&x->tg) : 0;
    }
}

static void add_tensor(exec_net *n, const xlayer *x, const char *role, int64_t off, int64_t cnt,
                       int decay)
{
    exec_tensor *t = &n->tensors[n->n_tensors++];
    snprintf(t->name, sizeof t->name, "%.*s.%s", MODEL_NAME_MAX, x->ml->name, role);
    t->data = n->params + off;
    t->grad = n->grads + off;
    t->n = cnt;
    t->offset = off;
    t->layer = x->index;
    t->decay = decay;
}

/* Carve the parameter, gradient and running-statistics blocks; initialise. */
static void setup_params(exec_net *n, uint64_t seed)
{
    int64_t total = 0, bufs = 0;
    for (int k = 0; k < n->L; k++) {
        int64_t nb, nw = layer_n_params(&n->ly[k], &nb);
        total += exec_pad_floats(nw) + exec_pad_floats(nb);
        if (n->ly[k].kind == MODEL_BATCHNORM2D) bufs += 2 * exec_pad_floats(n->ly[k].C);
    }
    n->n_params = total;
    n->n_bufs = bufs;
    n->params = exec_falloc(total);
    n->grads = exec_falloc(total);
    n->bufs = exec_falloc(bufs);
    n->tensors = cl_calloc((size_t)(2 * n->L + 1), sizeof *n->tensors);
    int64_t off = 0, boff = 0;
    for (int k = 0; k < n->L; k++) {
        xlayer *x = &n->ly[k];
        int64_t nb, nw = layer_n_params(x, &nb);
        if (!nw) continue;
        x->w = n->params + off;
        x->dw = n->grads + off;
        add_tensor(n, x, "weight", off, nw, x->kind != MODEL_BATCHNORM2D);
        off += exec_pad_floats(nw);
        if (nb) {
            x->b = n->params + off;
            x->db = n->grads + off;
            add_tensor(n, x, "bias", off, nb, 0);
            off += exec_pad_floats(nb);
        }
        if (x->kind == MODEL_BATCHNORM2D) {
            for (int c = 0; c < x->C; c++) x->w[c] = 1; /* gamma 1, beta 0 */
            x->run_mean = n->bufs + boff;
            x->run_var = n->bufs + boff + exec_pad_floats(x->C);
            for (int c = 0; c < x->C; c++) x->run_var[c] = 1;
            boff += 2 * exec_pad_floats(x->C);
            continue;
        }
        if (x->is_tfm) {
            gsl_rng *r = layer_rng(seed, x->index, 0);
            exec_tfm_init(&x->tg, x->w, r);
            gsl_rng_free(r);
            continue;
        }
        /* fan_in / fan_out of the weight; He (Kaiming) uniform bound
         * sqrt(6 / fan_in) when a relu follows, else Glorot (Xavier)
         * uniform sqrt(6 / (fan_in + fan_out)) */
        double fan_in, fan_out;
        if (x->kind == MODEL_CONV2D) {
            double kk = (double)x->conv.k * x->conv.k;
            fan_in = x->conv.C * kk;
            fan_out = x->conv.O * kk;
        } else {
            fan_in = x->IC;
            fan_out = x->O;
        }
        double bound = feeds_relu(n->m, x->index) ? sqrt(6.0 / fan_in)
                                                  : sqrt(6.0 / (fan_in + fan_out));
        gsl_rng *r = layer_rng(seed, x->index, 0);
        for (int64_t i = 0; i < nw; i++) x->w[i] = (float)((2 * gsl_rng_uniform(r) - 1) * bound);
        gsl_rng_free(r);
    }
    assert(off == total && boff == bufs);
}

/* Which buffers the acts keep, which scratch slots the rest use. */
static void plan_memory(exec_net *n)
{
    const int all = n->flags & EXEC_NET_KEEP_ALL;
    xlayer *ly = n->ly;
    const int L = n->L;
    n->keep_x0 = all || needs_input(ly[0].kind);
    for (int k = 0; k < L; k++) {
        ly[k].keep_out = all || k == L - 1 || needs_own_output(ly[k].kind) ||
                         (k + 1 < L && needs_input(ly[k + 1].kind));
        int in_slot = k == 0 || ly[k - 1].keep_out ? -1 : ly[k - 1].out_slot;
        ly[k].out_slot = in_slot == 0 ? 1 : 0;
    }
    for (int k = L - 1; k >= 0; k--) {
        ly[k].keep_dout = all || ly[k].has_w;
        int g_slot = k == L - 1 || ly[k + 1].keep_dout ? -1 : ly[k + 1].dout_slot;
        ly[k].dout_slot = g_slot == 0 ? 1 : 0;
    }
    /* stash per sample: a kept buffer is charged to the layer whose own
     * backward reads it, else to the consumer that reads it as input; the
     * stage input goes to the first layer; the stage output kept only to be
     * sent is not stash (it is the layer's act_bytes) */
    for (int k = 0; k < L; k++) {
        xlayer *x = &ly[k];
        uint64_t s = (uint64_t)x->aux_sample;
        if (needs_own_output(x->kind)) s += (uint64_t)x->out_elems * sizeof(float);
        if (needs_input(x->kind) && (k == 0 || !needs_own_output(ly[k - 1].kind)))
            s += (uint64_t)x->in_elems * sizeof(float);
        x->stash_bytes = s;
    }
}

static void alloc_scratch(exec_net *n)
{
    int64_t sz[2] = {0, 0}, cf = 0; /* per sample: what each slot holds at most */
    for (int k = 0; k < n->L; k++) {
        const xlayer *x = &n->ly[k];
        if (!x->keep_out && x->out_elems > sz[x->out_slot]) sz[x->out_slot] = x->out_elems;
        if (!x->keep_dout && x->out_elems > sz[x->dout_slot]) sz[x->dout_slot] = x->out_elems;
        if (x->kind == MODEL_CONV2D && exec_conv_col_floats(&x->conv) > cf)
            cf = exec_conv_col_floats(&x->conv);
    }
    for (int s = 0; s < 2; s++) n->slot[s] = exec_falloc(sz[s] * n->max_batch);
    n->col = exec_falloc(cf);
    for (int k = 0; k < n->L; k++)
        if (n->ly[k].is_tfm && exec_tfm_scratch_floats(&n->ly[k].tg) > n->n_tfm_scratch)
            n->n_tfm_scratch = exec_tfm_scratch_floats(&n->ly[k].tg);
    n->n_tfm_scratch *= n->max_batch;
    n->tfm_scratch = exec_falloc(n->n_tfm_scratch);
    for (int k = 0; k < n->L; k++)
        if (n->ly[k].is_tfm && exec_tfm_seq_floats(&n->ly[k].tg, n->max_batch) > n->n_seqbuf)
            n->n_seqbuf = exec_tfm_seq_floats(&n->ly[k].tg, n->max_batch);
    n->seqbuf = exec_falloc(n->n_seqbuf);
    for (int k = 0; k < n->L; k++) {
        n->ly[k].tg.scratch = n->tfm_scratch;
        n->ly[k].tg.seqbuf = n->seqbuf;
    }
}

int exec_net_create(exec_net **out, const model *m, int first, int last, int max_batch,
                    uint64_t seed, int flags, const char *file, cl_err *e)
{
    return exec_net_create_tp(out, m, first, last, max_batch, seed, flags, NULL, file, e);
}

int exec_net_create_tp(exec_net **out, const model *m, int first, int last, int max_batch,
                       uint64_t seed, int flags, const exec_tp_comm *tp, const char *file,
                       cl_err *e)
{
    *out = NULL;
    int rc = exec_net_check(m, first, last, file, e);
    if (!rc && tp && tp->size > 1) rc = exec_net_tp_check(m, first, last, tp->size, file, e);
    if (!rc && tp && tp->size > 1 && (flags & EXEC_NET_SEQ_PAR))
        rc = exec_net_sp_check(m, first, last, tp->size, file, e);
    if (rc) return rc;
    if (max_batch < 1 || max_batch > (1 << 20))
        return cl_fail(e, CL_EINPUT, "%s: batch %d is out of range (hint: 1 to %d)", file,
                       max_batch, 1 << 20);
    for (int i = first; i < last; i++) {
        int64_t big = model_shape_elems(&m->layers[i].in_shape);
        int64_t o = model_shape_elems(&m->layers[i].out_shape);
        if (o > big) big = o;
        if (big * max_batch > INT_MAX)
            return cl_fail(e, CL_EINPUT, "%s: layers[%d] (%s): batch %d times %lld elements per sample passes 2^31 (hint: a smaller batch)",
                           file, i, m->layers[i].name, max_batch, (long long)big);
    }
    exec_blas_init();
    exec_net *n = cl_calloc(1, sizeof *n);
    n->m = m;
    n->first = first;
    n->last = last;
    n->L = last - first;
    n->max_batch = max_batch;
    n->flags = flags;
    n->tp = tp;
    n->ly = cl_calloc((size_t)n->L, sizeof *n->ly);
    int any_w = 0;
    for (int i = 0; i < first; i++) any_w |= m->layers[i].params > 0;
    for (int k = 0; k < n->L; k++) {
        xlayer *x = &n->ly[k];
        layer_setup(x, m, first + k, tp, flags);
        x->need_din = any_w;
        any_w |= x->has_w;
        if (x->kind == MODEL_DROPOUT) {
            x->rng = layer_rng(seed, x->index, 1);
        }
    }
    seq_regions(n);
    setup_params(n, seed);
    plan_memory(n);
    alloc_scratch(n);
    *out = n;
    return CL_OK;
}

void exec_net_destroy(exec_net *n)
{
    if (!n) return;
    for (int k = 0; k < n->L; k++)
        if (n->ly[k].rng) gsl_rng_free(n->ly[k].rng);
    free(n->ly);
    free(n->params);
    free(n->grads);
    free(n->bufs);
    free(n->tensors);
    for (int s = 0; s < 2; s++) free(n->slot[s]);
    free(n->col);
    free(n->tfm_scratch);
    free(n->seqbuf);
    free(n);
}

/* ======================================================================== */
/* accessors                                                                 */

int64_t exec_net_in_elems(const exec_net *n) { return n->ly[0].in_elems; }
int64_t exec_net_out_elems(const exec_net *n) { return n->ly[n->L - 1].out_elems; }
int exec_net_has_loss(const exec_net *n) { return n->ly[n->L - 1].kind == MODEL_SOFTMAX_XENT; }
int exec_net_classes(const exec_net *n)
{
    return exec_net_has_loss(n) ? (int)n->ly[n->L - 1].in_elems : 0;
}
int exec_net_needs_din(const exec_net *n) { return n->ly[0].need_din; }

float *exec_net_params(exec_net *n, int64_t *n_floats)
{
    if (n_floats) *n_floats = n->n_params;
    return n->params;
}

float *exec_net_grads(exec_net *n, int64_t *n_floats)
{
    if (n_floats) *n_floats = n->n_params;
    return n->grads;
}

int exec_net_n_tensors(const exec_net *n) { return n->n_tensors; }
uint64_t exec_net_recompute_bytes(const exec_net *n) { return (uint64_t)n->n_tfm_scratch * 4; }
uint64_t exec_net_seq_bytes(const exec_net *n) { return (uint64_t)n->n_seqbuf * 4; }

const exec_tensor *exec_net_tensor(const exec_net *n, int k)
{
    assert(k >= 0 && k < n->n_tensors);
    return &n->tensors[k];
}

void exec_net_zero_grads(exec_net *n)
{
    memset(n->grads, 0, (size_t)n->n_params * sizeof *n->grads);
}

float *exec_net_bufs(exec_net *n, int64_t *n_floats)
{
    if (n_floats) *n_floats = n->n_bufs;
    return n->bufs;
}

int exec_net_n_rngs(const exec_net *n)
{
    int c = 0;
    for (int k = 0; k < n->L; k++) c += n->ly[k].rng != NULL;
    return c;
}

gsl_rng *exec_net_rng(exec_net *n, int k)
{
    for (int j = 0; j < n->L; j++)
        if (n->ly[j].rng && k-- == 0) return n->ly[j].rng;
    assert(0 && "exec_net_rng: no such stream");
    return NULL;
}

static const xlayer *layer_of(const exec_net *n, int layer)
{
    assert(layer >= n->first && layer < n->last);
    return &n->ly[layer - n->first];
}

void exec_net_layer_bytes(const exec_net *n, int layer, uint64_t *stash, uint64_t *wgrad)
{
    const xlayer *x = layer_of(n, layer);
    *stash = x->stash_bytes;
    *wgrad = x->has_w ? (uint64_t)x->out_elems * sizeof(float) : 0;
}

int exec_net_layer_has_weights(const exec_net *n, int layer) { return layer_of(n, layer)->has_w; }
const exec_tfm *exec_net_tfm(const exec_net *n, int layer)
{
    return layer_of(n, layer)->is_tfm ? &layer_of(n, layer)->tg : NULL;
}
int exec_net_layer_needs_din(const exec_net *n, int layer) { return layer_of(n, layer)->need_din; }

/* ======================================================================== */
/* per-microbatch state                                                      */

/* Two passes over the same layout: count (base NULL) then assign. */
static uint64_t carve_acts(exec_acts *a, char *base)
{
    const exec_net *n = a->net;
    const int64_t B = a->max_batch, fb = (int64_t)sizeof(float);
    const int all = n->flags & EXEC_NET_KEEP_ALL;
    int64_t off = 0;
#define TAKE(ptr, bytes)                                            \
    do {                                                            \
        int64_t take_ = pad64(bytes);                               \
        if (base) (ptr) = (void *)(base + off);                     \
        off += take_;                                               \
    } while (0)
    if (n->keep_x0) TAKE(a->x0, B * n->ly[0].in_elems * fb);
    if (all) TAKE(a->dx0, B * n->ly[0].in_elems * fb);
    for (int k = 0; k < n->L; k++) {
        const xlayer *x = &n->ly[k];
        if (x->keep_out) TAKE(a->out[k], B * x->out_elems * fb);
        if (x->keep_dout) TAKE(a->dout[k], B * x->out_elems * fb);
        if (x->aux_sample || x->aux_fixed) TAKE(a->aux[k], B * x->aux_sample + x->aux_fixed);
    }
    TAKE(a->labels, B * (int64_t)sizeof(int32_t));
#undef TAKE
    return (uint64_t)off;
}

exec_acts *exec_acts_create(const exec_net *n, int max_batch)
{
    assert(max_batch >= 1 && max_batch <= n->max_batch);
    exec_acts *a = cl_calloc(1, sizeof *a);
    a->net = n;
    a->max_batch = max_batch;
    a->out = cl_calloc((size_t)n->L, sizeof *a->out);
    a->dout = cl_calloc((size_t)n->L, sizeof *a->dout);
    a->aux = cl_calloc((size_t)n->L, sizeof *a->aux);
    a->bytes = carve_acts(a, NULL);
    a->mem = exec_balloc((int64_t)a->bytes);
    carve_acts(a, a->mem);
    return a;
}

void exec_acts_destroy(exec_acts *a)
{
    if (!a) return;
    free(a->mem);
    free(a->out);
    free(a->dout);
    free(a->aux);
    free(a);
}

uint64_t exec_acts_bytes(const exec_acts *a) { return a->bytes; }
double exec_acts_loss_sum(const exec_acts *a) { return a->loss_sum; }
int exec_acts_correct(const exec_acts *a) { return a->correct; }

const float *exec_acts_output(const exec_acts *a)
{
    return a->out[a->net->L - 1];
}
