/* profile.c - reading, checking and writing profiles, and looking up a
 * layer's time at any batch size (see profile.h and docs/formats.md,
 * "Profile").  The roofline derivation lives in roofline.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_interp.h>

#include "models/model.h"
#include "base/jsonx.h"
#include "profile.h"

static const char *const source_names[PROF_SOURCE_COUNT] = {"measured", "derived", "imported"};

const char *prof_source_name(prof_source s)
{
    return (s >= 0 && s < PROF_SOURCE_COUNT) ? source_names[s] : "?";
}

/* --------------------------------------------------------- interpolation -- */

/* y at x over the points (xs[i], ys[i]), i < n, xs strictly increasing:
 * - exactly ys[i] at x == xs[i] (no rounding through a segment formula);
 * - inside the range, GSL's linear interpolation;
 * - outside, the straight line through the two nearest end points, never
 *   below zero (a time cannot be negative);
 * - one point: in proportion to x (time per sample is constant);
 * - x <= 0 or not finite: 0. */
static double lookup(const double *xs, const double *ys, int n, double x)
{
    if (n <= 0 || !(x > 0) || !isfinite(x)) return 0;  /* no batch, no time */
    for (int i = 0; i < n; i++)
        if (x == xs[i]) return ys[i];
    if (n == 1) return ys[0] * (x / xs[0]);
    double y;
    if (x < xs[0]) {
        y = ys[0] + (x - xs[0]) * (ys[1] - ys[0]) / (xs[1] - xs[0]);
    } else if (x > xs[n - 1]) {
        y = ys[n - 1] + (x - xs[n - 1]) * (ys[n - 1] - ys[n - 2]) / (xs[n - 1] - xs[n - 2]);
    } else {
        /* gsl_interp_linear keeps no state (its alloc and init are NULL), so
         * an object on the stack saves a malloc per lookup in the planner's
         * inner loop; gsl_interp_init still checks the abscissae. */
        gsl_interp it = {.type = gsl_interp_linear, .size = (size_t)n, .state = NULL};
        if (gsl_interp_init(&it, xs, ys, (size_t)n) != GSL_SUCCESS ||
            gsl_interp_eval_e(&it, xs, ys, x, NULL, &y) != GSL_SUCCESS)
            abort(); /* loaders guarantee increasing batches inside the range */
    }
    return y > 0 ? y : 0;
}

double prof_fwd_s(const prof_layer *l, double b) { return lookup(l->batch, l->fwd_s, l->n_points, b); }
double prof_bwd_in_s(const prof_layer *l, double b) { return lookup(l->batch, l->bwd_in_s, l->n_points, b); }
double prof_bwd_w_s(const prof_layer *l, double b) { return lookup(l->batch, l->bwd_w_s, l->n_points, b); }

/* ------------------------------------------------------------------ load -- */

void prof_layer_points(prof_layer *l, int n)
{
    double *b = cl_calloc((size_t)n * 5, sizeof *b);
    l->n_points = n;
    l->batch = b;
    l->fwd_s = b + n;
    l->bwd_in_s = b + 2 * n;
    l->bwd_w_s = b + 3 * n;
    l->fwd_sd = b + 4 * n;
}

void prof_alloc(prof *p, int n_layers, int n_points)
{
    p->n_layers = n_layers;
    p->layers = cl_calloc((size_t)n_layers, sizeof *p->layers);
    for (int i = 0; i < n_layers; i++) prof_layer_points(&p->layers[i], n_points);
}

int prof_same_layers(const prof *a, const prof *b)
{
    if (a->n_layers != b->n_layers) return 0;
    for (int i = 0; i < a->n_layers; i++) {
        const prof_layer *x = &a->layers[i], *y = &b->layers[i];
        if (memcmp(x->name, y->name, sizeof x->name) || x->n_points != y->n_points ||
            memcmp(&x->act_bytes, &y->act_bytes, sizeof(double)) ||
            memcmp(&x->stash_bytes, &y->stash_bytes, sizeof(double)) ||
            memcmp(&x->param_bytes, &y->param_bytes, sizeof(double)) ||
            memcmp(&x->update_s, &y->update_s, sizeof(double)) ||
            memcmp(x->batch, y->batch, (size_t)x->n_points * 5 * sizeof(double)))
            return 0; /* the five point arrays are one block (prof_layer_points) */
    }
    const size_t nc = (size_t)a->n_layers * PROF_PASSES;
    if (!a->coll != !b->coll || (a->coll && memcmp(a->coll, b->coll, nc * sizeof *a->coll))) return 0;
    return 1;
}

prof_coll *prof_coll_of(prof *p, int l)
{
    if (!p->coll) p->coll = cl_calloc((size_t)p->n_layers * PROF_PASSES, sizeof *p->coll);
    return p->coll + (size_t)l * PROF_PASSES;
}

void prof_free(prof *p)
{
    for (int i = 0; p->layers && i < p->n_layers; i++) free(p->layers[i].batch);
    free(p->layers);
    free(p->coll);
    memset(p, 0, sizeof *p);
}

/* A time member: finite and >= 0 seconds. */
static int seconds(jx *j, const cJSON *o, const char *path, const char *key, int required,
                   double *out)
{
    double v = 0;
    int rc = jx_num(j, o, path, key, required, -HUGE_VAL, HUGE_VAL, &v);
    if (rc) return rc;
    if (v < 0) {
        char p[160];
        jx_join(p, sizeof p, path, key);
        return jx_fail(j, p, "negative time %g s (hint: seconds for the whole batch, >= 0)", v);
    }
    *out = v;
    return CL_OK;
}

static int point_from_json(jx *j, const cJSON *o, const char *path, prof_layer *l, int k)
{
    static const char *const keys[] = {"batch", "fwd_s", "bwd_in_s", "bwd_w_s", "fwd_sd", NULL};
    if (!cJSON_IsObject(o))
        return jx_fail(j, path, "expected an object {\"batch\", \"fwd_s\", \"bwd_in_s\", \"bwd_w_s\"}");
    int rc;
    if ((rc = jx_only(j, o, path, keys)) ||
        (rc = jx_pos(j, o, path, "batch", 1, &l->batch[k])) ||
        (rc = seconds(j, o, path, "fwd_s", 1, &l->fwd_s[k])) ||
        (rc = seconds(j, o, path, "bwd_in_s", 1, &l->bwd_in_s[k])) ||
        (rc = seconds(j, o, path, "bwd_w_s", 1, &l->bwd_w_s[k])) ||
        (rc = seconds(j, o, path, "fwd_sd", 0, &l->fwd_sd[k])))
        return rc;
    if (k > 0 && !(l->batch[k] > l->batch[k - 1])) {
        char p[160];
        jx_join(p, sizeof p, path, "batch");
        return jx_fail(j, p, "%.17g does not exceed the previous point's batch %.17g (hint: list points by strictly increasing batch size)",
                       l->batch[k], l->batch[k - 1]);
    }
    return CL_OK;
}

static const char *const coll_passes[PROF_PASSES] = {"fwd", "bwd_in", "bwd_w"};

/* "collectives": {"fwd" | "bwd_in" | "bwd_w": {"calls", "steps", "floats",
 * "fixed_floats"}} of a layer into c (PROF_PASSES entries) */
static int colls_from_json(jx *j, const cJSON *c, const char *cp, prof_coll *out)
{
    if (!cJSON_IsObject(c)) return jx_fail(j, cp, "expected an object {\"fwd\", \"bwd_in\", \"bwd_w\"}");
    int rc = jx_only(j, c, cp, (const char *const[]){"fwd", "bwd_in", "bwd_w", NULL});
    for (int k = 0; k < PROF_PASSES && !rc; k++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(c, coll_passes[k]);
        if (!x) continue;
        char xp[200];
        jx_join(xp, sizeof xp, cp, coll_passes[k]);
        if (!cJSON_IsObject(x)) return jx_fail(j, xp, "expected an object {\"calls\", \"steps\", \"floats\"}");
        prof_coll *v = &out[k];
        if ((rc = jx_only(j, x, xp, (const char *const[]){"calls", "steps", "floats", "fixed_floats", NULL})) ||
            (rc = jx_num(j, x, xp, "calls", 1, 0, 1e9, &v->calls)) ||
            (rc = jx_num(j, x, xp, "steps", 1, 0, 2e9, &v->steps)) ||
            (rc = jx_num(j, x, xp, "floats", 1, 0, 1e18, &v->floats)) ||
            (rc = jx_num(j, x, xp, "fixed_floats", 0, 0, 1e18, &v->fixed)))
            return rc;
    }
    return rc;
}

static int layer_from_json(jx *j, const cJSON *o, const char *path, prof_layer *l)
{
    static const char *const keys[] = {"name", "points", "act_bytes", "stash_bytes", "param_bytes",
                                       "update_s", "collectives", NULL};
    if (!cJSON_IsObject(o)) return jx_fail(j, path, "expected an object describing a layer");
    const cJSON *pts;
    int rc;
    if ((rc = jx_only(j, o, path, keys)) ||
        (rc = jx_name(j, o, path, "name", 1, l->name, sizeof l->name)) ||
        (rc = jx_array(j, o, path, "points", 1, 1, PROF_MAX_POINTS, &pts)) ||
        (rc = jx_num(j, o, path, "act_bytes", 1, 0, HUGE_VAL, &l->act_bytes)) ||
        (rc = jx_num(j, o, path, "stash_bytes", 1, 0, HUGE_VAL, &l->stash_bytes)) ||
        (rc = jx_num(j, o, path, "param_bytes", 1, 0, HUGE_VAL, &l->param_bytes)) ||
        (rc = seconds(j, o, path, "update_s", 0, &l->update_s)))
        return rc;
    char pp[128];
    jx_join(pp, sizeof pp, path, "points");
    prof_layer_points(l, cJSON_GetArraySize(pts));
    int k = 0;
    for (const cJSON *it = pts->child; it; it = it->next, k++) {
        char p[160];
        jx_index(p, sizeof p, pp, k);
        if ((rc = point_from_json(j, it, p, l, k))) return rc;
    }
    l->n_points = k;
    return CL_OK;
}

typedef struct name_ix {
    const char *s;
    int i;
} name_ix;

static int name_ix_cmp(const void *a, const void *b)
{
    const name_ix *x = a, *y = b;
    int c = strcmp(x->s, y->s);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* Layer names are unique (plans and checks refer to layers by name). */
static int check_unique(jx *j, const prof *p)
{
    if (p->n_layers < 2) return CL_OK;
    name_ix *r = cl_malloc((size_t)p->n_layers * sizeof *r);
    for (int i = 0; i < p->n_layers; i++) r[i] = (name_ix){p->layers[i].name, i};
    qsort(r, (size_t)p->n_layers, sizeof *r, name_ix_cmp);
    int a = -1, b = -1;
    for (int i = 1; i < p->n_layers; i++)
        if (strcmp(r[i].s, r[i - 1].s) == 0 && (b < 0 || r[i].i < b)) {
            int k = i;
            while (k > 0 && strcmp(r[k - 1].s, r[i].s) == 0) k--;
            a = r[k].i;
            b = r[i].i;
        }
    free(r);
    if (b < 0) return CL_OK;
    char path[64];
    snprintf(path, sizeof path, "layers[%d].name", b);
    return jx_fail(j, path, "\"%s\" is already the name of layers[%d] (hint: layer names must be unique)",
                   p->layers[b].name, a);
}

static int prof_read(jx *j, const cJSON *root, int version, void *out)
{
    prof *p = out;
    (void)version;
    const cJSON *arr;
    int src = 0, rc;
    if ((rc = jx_name(j, root, "", "model", 1, p->model, sizeof p->model)) ||
        (rc = jx_name(j, root, "", "device", 1, p->device, sizeof p->device)) ||
        (rc = jx_enum(j, root, "", "source", 1, source_names, PROF_SOURCE_COUNT, &src)) ||
        (rc = jx_text(j, root, "", "note", 0, p->note, sizeof p->note)) ||
        (rc = jx_array(j, root, "", "layers", 1, 1, MODEL_MAX_LAYERS, &arr)))
        return rc;
    int64_t t = 1;
    int sp = 0, rec = 0;
    static const char *const recomps[] = {"none", "selective", "full"};
    if ((rc = jx_int(j, root, "", "tensor", 0, 1, 1024, &t)) ||
        (rc = jx_bool(j, root, "", "sequence_parallel", 0, &sp)) ||
        (rc = jx_enum(j, root, "", "recompute", 0, recomps, 3, &rec)))
        return rc;
    if (sp && t < 2)
        return jx_fail(j, "sequence_parallel", "true with tensor 1 (hint: sequence parallelism splits the sequence over tensor-parallel ranks)");
    p->tensor = (int)t, p->seq_par = sp, p->recompute = rec;
    p->source = (prof_source)src;
    /* grown as layers check out, so memory follows what the file really
     * holds: a prof_layer is 2.6 KB and a 2 MB file can list a million
     * non-layers (2.6 GB if allocated by the array's length) */
    int n = cJSON_GetArraySize(arr), cap = 0;
    for (const cJSON *it = arr->child; it; it = it->next, p->n_layers++) {
        if (p->n_layers == cap) {
            cap = cap < n / 2 ? (cap ? 2 * cap : 16) : n;
            p->layers = cl_realloc(p->layers, (size_t)cap * sizeof *p->layers);
        }
        prof_layer *l = memset(&p->layers[p->n_layers], 0, sizeof *p->layers);
        char path[48];
        jx_index(path, sizeof path, "layers", p->n_layers);
        if ((rc = layer_from_json(j, it, path, l))) {
            free(l->batch); /* not yet counted in n_layers */
            break;
        }
    }
    if (!rc) rc = check_unique(j, p);
    /* the collectives, once the layers are known (prof.coll) */
    int i = 0;
    for (const cJSON *it = arr->child; !rc && it; it = it->next, i++) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "collectives");
        if (!c) continue;
        char path[80];
        snprintf(path, sizeof path, "layers[%d].collectives", i);
        rc = colls_from_json(j, c, path, prof_coll_of(p, i));
    }
    return rc;
}

static void prof_release(void *p) { prof_free(p); }

static const char *const prof_members[] = {"format", "version", "model", "device", "source",
                                           "note", "tensor", "sequence_parallel", "recompute",
                                           "layers", NULL};
static const jx_format prof_format = {"cleave-profile", 1, prof_members, sizeof(prof), prof_read,
                                      prof_release};

int prof_from_json(prof *p, const cJSON *root, const char *file, cl_err *e)
{
    return jx_decode(&prof_format, root, file, NULL, p, e);
}

int prof_load(prof *p, const char *path, cl_err *e)
{
    return jx_load(&prof_format, path, NULL, p, e);
}

/* ------------------------------------------------------------------ save -- */

cJSON *prof_to_json(const prof *p)
{
    cJSON *root = jx_doc_new(&prof_format);
    cJSON_AddStringToObject(root, "model", p->model);
    cJSON_AddStringToObject(root, "device", p->device);
    cJSON_AddStringToObject(root, "source", prof_source_name(p->source));
    if (p->note[0]) cJSON_AddStringToObject(root, "note", p->note);
    if (p->tensor > 1) cJSON_AddNumberToObject(root, "tensor", p->tensor);
    if (p->seq_par) cJSON_AddBoolToObject(root, "sequence_parallel", 1);
    static const char *const recomps[] = {"none", "selective", "full"};
    if (p->recompute > 0 && p->recompute < 3) cJSON_AddStringToObject(root, "recompute", recomps[p->recompute]);
    cJSON *layers = cJSON_AddArrayToObject(root, "layers");
    for (int i = 0; i < p->n_layers; i++) {
        const prof_layer *l = &p->layers[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", l->name);
        cJSON *pts = cJSON_AddArrayToObject(o, "points");
        for (int k = 0; k < l->n_points; k++) {
            cJSON *pt = cJSON_CreateObject();
            cJSON_AddNumberToObject(pt, "batch", l->batch[k]);
            cJSON_AddNumberToObject(pt, "fwd_s", l->fwd_s[k]);
            cJSON_AddNumberToObject(pt, "bwd_in_s", l->bwd_in_s[k]);
            cJSON_AddNumberToObject(pt, "bwd_w_s", l->bwd_w_s[k]);
            if (l->fwd_sd[k] > 0) cJSON_AddNumberToObject(pt, "fwd_sd", l->fwd_sd[k]);
            cJSON_AddItemToArray(pts, pt);
        }
        cJSON_AddNumberToObject(o, "act_bytes", l->act_bytes);
        cJSON_AddNumberToObject(o, "stash_bytes", l->stash_bytes);
        cJSON_AddNumberToObject(o, "param_bytes", l->param_bytes);
        if (l->update_s > 0) cJSON_AddNumberToObject(o, "update_s", l->update_s);
        cJSON *cs = NULL;
        for (int k = 0; p->coll && k < PROF_PASSES; k++) {
            const prof_coll *c = &p->coll[(size_t)i * PROF_PASSES + (size_t)k];
            if (!(c->calls > 0)) continue;
            if (!cs) cs = cJSON_AddObjectToObject(o, "collectives");
            cJSON *x = cJSON_AddObjectToObject(cs, coll_passes[k]);
            cJSON_AddNumberToObject(x, "calls", c->calls);
            cJSON_AddNumberToObject(x, "steps", c->steps);
            cJSON_AddNumberToObject(x, "floats", c->floats);
            if (c->fixed > 0) cJSON_AddNumberToObject(x, "fixed_floats", c->fixed);
        }
        cJSON_AddItemToArray(layers, o);
    }
    return root;
}

int prof_save(const prof *p, const char *path, cl_err *e)
{
    return jx_save(path, prof_to_json(p), e);
}

/* ----------------------------------------------------------------- check -- */

double prof_coll_s(const prof_coll *c, int t, double b, double bw, double lat)
{
    if (t <= 1) return 0;
    return (t - 1) * (c->steps * lat + 4 * (c->floats * b + c->fixed) / (t * bw));
}

int prof_default_batch(const prof *p, const char *file, int *batch, cl_err *e)
{
    *batch = 0;
    if (p->n_layers < 1 || p->layers[0].n_points < 1) return CL_OK;
    int k = p->layers[0].n_points - 1;
    double b = p->layers[0].batch[k];
    if (!(b <= PROF_MAX_DEFAULT_BATCH))
        return cl_fail(e, CL_EINPUT, "%s: layers[0].points[%d].batch: %.17g, the batch a plan would take by default, is more than %d samples (hint: give --batch B)",
                       file, k, b, PROF_MAX_DEFAULT_BATCH);
    *batch = (int)b;
    return CL_OK;
}

int prof_check_model(const prof *p, const model *m, const char *file, cl_err *e)
{
    if (p->n_layers != m->n_layers)
        return cl_fail(e, CL_EINPUT, "%s: layers: the profile has %d layers but model \"%s\" has %d (hint: profile the model you plan, e.g. cleave profile or a derived profile)",
                       file, p->n_layers, m->name, m->n_layers);
    for (int i = 0; i < p->n_layers; i++)
        if (strcmp(p->layers[i].name, m->layers[i].name) != 0)
            return cl_fail(e, CL_EINPUT, "%s: layers[%d].name: \"%s\", but layer %d of model \"%s\" is \"%s\" (hint: the profile was taken for another model or layer order)",
                           file, i, p->layers[i].name, i, m->name, m->layers[i].name);
    /* same names, other sizes: a profile of another model (or of this one
     * before an edit) would price every stage wrongly.  A rank profile's
     * layer holds a t-th of its split tensors and all of the rest: between
     * a t-th of the layer and the whole of it */
    for (int i = 0; i < p->n_layers; i++) {
        const double whole = (double)m->layers[i].params * model_dtype_bytes(m->dtype);
        const double got = p->layers[i].param_bytes;
        if (p->tensor > 1 && got <= whole * (1 + 1e-9) && got >= whole / p->tensor * (1 - 1e-9)) continue;
        if (!model_param_bytes_match(m, p->layers[i].param_bytes, m->layers[i].params, 1))
            return cl_fail(e, CL_EINPUT, "%s: layers[%d].param_bytes: %.17g bytes, but layer \"%s\" of model \"%s\" has %llu parameters (%.17g bytes at %d bytes each) (hint: the profile was taken for another model, here \"%s\"; profile this one)",
                           file, i, p->layers[i].param_bytes, m->layers[i].name, m->name,
                           (unsigned long long)m->layers[i].params,
                           (double)m->layers[i].params * model_dtype_bytes(m->dtype),
                           model_dtype_bytes(m->dtype), p->model);
    }
    return CL_OK;
}
