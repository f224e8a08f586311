/* cluster.c - reading, checking and writing cluster files (see cluster.h and
 * docs/formats.md, "Cluster"), device presets, and uniform clusters built
 * from command-line flags. */
#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/jsonx.h"
#include "cluster.h"

/* A guard on the number of device types in one file (a cluster of a
 * thousand different accelerator models is a typo, not a data centre). */
#define CLUSTER_MAX_TYPES 4096

/* ---------------------------------------------------------------- names -- */

typedef struct name_ref {
    const char *s;
    int idx;
} name_ref;

static int name_ref_cmp(const void *a, const void *b)
{
    const name_ref *x = a, *y = b;
    int c = strcmp(x->s, y->s);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Find a repeated string among n names laid out `stride` bytes apart.
 * Returns 1 and the indices of the first (*first) and a later (*second)
 * occurrence, choosing the pair whose later index is smallest, so the
 * message points at the first repetition in file order.  O(n log n). */
static int find_duplicate(const char *base, size_t stride, int n, int *first, int *second)
{
    if (n < 2) return 0;
    name_ref *r = cl_malloc((size_t)n * sizeof *r);
    for (int i = 0; i < n; i++) r[i] = (name_ref){base + (size_t)i * stride, i};
    qsort(r, (size_t)n, sizeof *r, name_ref_cmp);
    int found = 0;
    for (int i = 1; i < n; i++)
        if (strcmp(r[i].s, r[i - 1].s) == 0) {
            /* the group's smallest index is its first occurrence */
            int k = i;
            while (k > 0 && strcmp(r[k - 1].s, r[i].s) == 0) k--;
            if (!found || r[i].idx < *second) {
                *first = r[k].idx;
                *second = r[i].idx;
                found = 1;
            }
        }
    free(r);
    return found;
}

/* ---------------------------------------------------------- device types -- */

int cluster_devtype_check(const cluster_devtype *t, const char *what, cl_err *e)
{
    if (!t->name[0])
        return cl_fail(e, CL_EINPUT, "%s: device type without a name", what);
    if (!(t->peak_fp32_flops > 0) || !isfinite(t->peak_fp32_flops))
        return cl_fail(e, CL_EINPUT, "%s: peak_fp32_flops must be a positive finite number", what);
    if (!(t->peak_fp16_flops >= 0) || !isfinite(t->peak_fp16_flops))
        return cl_fail(e, CL_EINPUT, "%s: peak_fp16_flops must be >= 0 (0: same as fp32)", what);
    if (!(t->peak_fp8_flops >= 0) || !isfinite(t->peak_fp8_flops))
        return cl_fail(e, CL_EINPUT, "%s: peak_fp8_flops must be >= 0 (0: no FP8 path)", what);
    if (t->mem_bytes == 0)
        return cl_fail(e, CL_EINPUT, "%s: memory_bytes must be positive", what);
    if (t->reserve_bytes >= t->mem_bytes)
        return cl_fail(e, CL_EINPUT, "%s: reserve_bytes must be below memory_bytes", what);
    if (!(t->mem_bw_Bps > 0) || !isfinite(t->mem_bw_Bps))
        return cl_fail(e, CL_EINPUT, "%s: memory_bw_Bps must be a positive finite number", what);
    if (!(t->efficiency > 0 && t->efficiency <= 1))
        return cl_fail(e, CL_EINPUT, "%s: efficiency must be in (0, 1]", what);
    if (!(t->price_per_hour >= 0) || !isfinite(t->price_per_hour))
        return cl_fail(e, CL_EINPUT, "%s: price_per_hour must be >= 0", what);
    return CL_OK;
}

double cluster_flops(const cluster_devtype *t, int elem_bytes)
{
    double peak = (elem_bytes == 2 && t->peak_fp16_flops > 0) ? t->peak_fp16_flops
                                                             : t->peak_fp32_flops;
    return peak * t->efficiency;
}

/* The optional "kernels" object of a device type at `path` into *k (left
 * zero when absent).  Every member is required once the object is given:
 * a half-described kernel model would price with made-up numbers. */
static int kernels_from_json(jx *j, const cJSON *type, const char *path, cluster_kernels *k)
{
    static const char *const allowed[] = {"sms", "tile_m", "tile_n", "gemm_efficiency",
                                          "attention_efficiency", "fp8_gemm_efficiency", "launch_s",
                                          "source", NULL};
    const cJSON *o;
    char p[256];
    jx_join(p, sizeof p, path, "kernels");
    int rc = jx_object(j, type, path, "kernels", 0, &o);
    if (rc || !o) return rc;
    int64_t sms = 0, tm = 0, tn = 0;
    if ((rc = jx_only(j, o, p, allowed)) ||
        (rc = jx_int(j, o, p, "sms", 1, 1, 100000, &sms)) ||
        (rc = jx_int(j, o, p, "tile_m", 1, 1, 4096, &tm)) ||
        (rc = jx_int(j, o, p, "tile_n", 1, 1, 4096, &tn)) ||
        (rc = jx_num(j, o, p, "gemm_efficiency", 1, -HUGE_VAL, HUGE_VAL, &k->gemm_efficiency)) ||
        (rc = jx_num(j, o, p, "attention_efficiency", 1, -HUGE_VAL, HUGE_VAL,
                     &k->attention_efficiency)) ||
        (rc = jx_num(j, o, p, "fp8_gemm_efficiency", 0, -HUGE_VAL, HUGE_VAL, &k->fp8_gemm_efficiency)) ||
        (rc = jx_num(j, o, p, "launch_s", 1, 0, 1, &k->launch_s)) ||
        (rc = jx_text(j, o, p, "source", 0, k->source, sizeof k->source)))
        return rc;
    const char *bad = !(k->gemm_efficiency > 0 && k->gemm_efficiency <= 1) ? "gemm_efficiency"
                    : !(k->attention_efficiency > 0 && k->attention_efficiency <= 1)
                        ? "attention_efficiency"
                    : !(k->fp8_gemm_efficiency >= 0 && k->fp8_gemm_efficiency <= 1)
                        ? "fp8_gemm_efficiency" : NULL; /* 0 or absent: no FP8 model */
    if (bad) {
        char q[300];
        jx_join(q, sizeof q, p, bad);
        return jx_fail(j, q, "expected a fraction in (0, 1] (hint: the share of peak FLOP/s the "
                             "kernel reaches in a published measurement, e.g. 0.86)");
    }
    k->sms = (int)sms, k->tile_m = (int)tm, k->tile_n = (int)tn;
    return CL_OK;
}

/* One device type object at `path` (shared by cluster and preset files). */
static int devtype_from_json(jx *j, const cJSON *o, const char *path, cluster_devtype *t)
{
    static const char *const allowed[] = {"name", "peak_fp32_flops", "peak_fp16_flops", "peak_fp8_flops",
                                          "memory_bytes", "memory_bw_Bps", "efficiency",
                                          "price_per_hour", "note", "reserve_bytes", "kernels",
                                          NULL};
    memset(t, 0, sizeof *t);
    if (!cJSON_IsObject(o)) return jx_fail(j, path, "expected an object describing a device type");
    int64_t mem = 0, reserve = 0;
    double eff = 0;
    int rc;
    if ((rc = jx_only(j, o, path, allowed)) ||
        (rc = jx_name(j, o, path, "name", 1, t->name, sizeof t->name)) ||
        (rc = jx_pos(j, o, path, "peak_fp32_flops", 1, &t->peak_fp32_flops)) ||
        (rc = jx_pos(j, o, path, "peak_fp16_flops", 0, &t->peak_fp16_flops)) ||
        (rc = jx_pos(j, o, path, "peak_fp8_flops", 0, &t->peak_fp8_flops)) ||
        (rc = jx_int(j, o, path, "memory_bytes", 1, 1, (int64_t)1 << 53, &mem)) ||
        (rc = jx_int(j, o, path, "reserve_bytes", 0, 0, (int64_t)1 << 53, &reserve)) ||
        (rc = jx_pos(j, o, path, "memory_bw_Bps", 1, &t->mem_bw_Bps)) ||
        (rc = jx_num(j, o, path, "efficiency", 1, -HUGE_VAL, HUGE_VAL, &eff)) ||
        (rc = jx_num(j, o, path, "price_per_hour", 0, 0, HUGE_VAL, &t->price_per_hour)) ||
        (rc = jx_text(j, o, path, "note", 0, t->note, sizeof t->note)) ||
        (rc = kernels_from_json(j, o, path, &t->kernels)))
        return rc;
    if (!(eff > 0 && eff <= 1)) {
        char p[256];
        jx_join(p, sizeof p, path, "efficiency");
        return jx_fail(j, p, "expected a fraction in (0, 1], got %.17g (hint: the share of peak FLOP/s real layers reach, e.g. 0.5)", eff);
    }
    if (reserve >= mem) {
        char p[256];
        jx_join(p, sizeof p, path, "reserve_bytes");
        return jx_fail(j, p, "%lld is not below memory_bytes %lld (hint: the bytes a device keeps for its runtime, e.g. 1073741824)",
                       (long long)reserve, (long long)mem);
    }
    t->mem_bytes = (uint64_t)mem;
    t->reserve_bytes = (uint64_t)reserve;
    t->efficiency = eff;
    return CL_OK;
}

static cJSON *devtype_to_json(const cluster_devtype *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddNumberToObject(o, "peak_fp32_flops", t->peak_fp32_flops);
    if (t->peak_fp16_flops > 0) cJSON_AddNumberToObject(o, "peak_fp16_flops", t->peak_fp16_flops);
    if (t->peak_fp8_flops > 0) cJSON_AddNumberToObject(o, "peak_fp8_flops", t->peak_fp8_flops);
    cJSON_AddNumberToObject(o, "memory_bytes", (double)t->mem_bytes);
    if (t->reserve_bytes) cJSON_AddNumberToObject(o, "reserve_bytes", (double)t->reserve_bytes);
    cJSON_AddNumberToObject(o, "memory_bw_Bps", t->mem_bw_Bps);
    cJSON_AddNumberToObject(o, "efficiency", t->efficiency);
    if (t->price_per_hour > 0) cJSON_AddNumberToObject(o, "price_per_hour", t->price_per_hour);
    if (t->note[0]) cJSON_AddStringToObject(o, "note", t->note);
    const cluster_kernels *k = &t->kernels;
    if (k->sms > 0) {
        cJSON *ko = cJSON_AddObjectToObject(o, "kernels");
        cJSON_AddNumberToObject(ko, "sms", k->sms);
        cJSON_AddNumberToObject(ko, "tile_m", k->tile_m);
        cJSON_AddNumberToObject(ko, "tile_n", k->tile_n);
        cJSON_AddNumberToObject(ko, "gemm_efficiency", k->gemm_efficiency);
        cJSON_AddNumberToObject(ko, "attention_efficiency", k->attention_efficiency);
        if (k->fp8_gemm_efficiency > 0) cJSON_AddNumberToObject(ko, "fp8_gemm_efficiency", k->fp8_gemm_efficiency);
        cJSON_AddNumberToObject(ko, "launch_s", k->launch_s);
        if (k->source[0]) cJSON_AddStringToObject(ko, "source", k->source);
    }
    return o;
}

/* The "device_types" array of obj into a fresh array; names must be unique. */
static int devtypes_from_json(jx *j, const cJSON *obj, cluster_devtype **out, int *n_out)
{
    const cJSON *arr;
    *out = NULL;
    *n_out = 0;
    int rc = jx_array(j, obj, "", "device_types", 1, 1, CLUSTER_MAX_TYPES, &arr);
    if (rc) return rc;
    int n = cJSON_GetArraySize(arr);
    cluster_devtype *t = cl_calloc((size_t)n, sizeof *t);
    int i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        char p[64];
        jx_index(p, sizeof p, "device_types", i);
        if ((rc = devtype_from_json(j, it, p, &t[i]))) { free(t); return rc; }
    }
    int a = -1, b = -1;
    if (find_duplicate(t[0].name, sizeof t[0], n, &a, &b)) {
        char p[80];
        snprintf(p, sizeof p, "device_types[%d].name", b);
        rc = jx_fail(j, p, "\"%s\" is already the name of device_types[%d] (hint: type names must be unique)",
                     t[b].name, a);
        free(t);
        return rc;
    }
    *out = t;
    *n_out = n;
    return CL_OK;
}

/* ----------------------------------------------------------------- links -- */

static int link_from_json(jx *j, const cJSON *links, const char *key, int required,
                          cluster_link *l, int *present, int *nics)
{
    static const char *const allowed[] = {"bandwidth_Bps", "latency_s", NULL};
    static const char *const allowed_nics[] = {"bandwidth_Bps", "latency_s", "nics_per_node", NULL};
    const cJSON *o;
    char p[64];
    jx_join(p, sizeof p, "links", key);
    int rc = jx_object(j, links, "links", key, required, &o);
    if (rc) return rc;
    *present = o != NULL;
    if (!o) return CL_OK;
    double lat = 0;
    int64_t k = 0;
    if ((rc = jx_only(j, o, p, nics ? allowed_nics : allowed)) ||
        (nics && (rc = jx_int(j, o, p, "nics_per_node", 0, 1, 1 << 20, &k))) ||
        (rc = jx_pos(j, o, p, "bandwidth_Bps", 1, &l->bw_Bps)) ||
        (rc = jx_num(j, o, p, "latency_s", 1, -HUGE_VAL, HUGE_VAL, &lat)))
        return rc;
    if (lat < 0) {
        char q[96];
        jx_join(q, sizeof q, p, "latency_s");
        return jx_fail(j, q, "negative latency %g s (hint: seconds from send to first byte, >= 0)", lat);
    }
    l->latency_s = lat;
    if (nics) *nics = (int)k;
    return CL_OK;
}

static cJSON *link_to_json(const cluster_link *l, int nics)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "bandwidth_Bps", l->bw_Bps);
    cJSON_AddNumberToObject(o, "latency_s", l->latency_s);
    if (nics > 0) cJSON_AddNumberToObject(o, "nics_per_node", nics);
    return o;
}

int cluster_nic_of(const cluster *c, int d)
{
    if (c->nics_per_node <= 0) return -1;
    int node = c->devices[d].node, first = d, last = d;
    /* devices are numbered node by node */
    while (first > 0 && c->devices[first - 1].node == node) first--;
    while (last + 1 < c->n_devices && c->devices[last + 1].node == node) last++;
    return (int)cluster_nic_card(c->nics_per_node, node, d - first, last - first + 1);
}

/* ----------------------------------------------------------------- nodes -- */

/* Where each device came from, for messages about duplicate ids. */
typedef struct dev_origin {
    int node, pos;  /* nodes[node].devices[pos]; pos -1: generated by count */
} dev_origin;

/* Index of the type called `name` in types sorted by name (tix), or -1:
 * a binary search, as a million devices may each name one of 4096 types. */
static int type_index(const name_ref *tix, int n, const char *name)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, cmp = strcmp(tix[mid].s, name);
        if (cmp == 0) return tix[mid].idx;
        if (cmp < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

static int unknown_type(jx *j, const cluster *c, const char *path, const char *name)
{
    char list[400] = "";
    size_t len = 0;
    for (int i = 0; i < c->n_types && len < sizeof list - 80; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", c->types[i].name);
    return jx_fail(j, path, "unknown device type \"%s\" (hint: declared in device_types: %s)", name, list);
}

static cluster_device *grow(cluster *c, int *cap, int add)
{
    if (c->n_devices + add > *cap) {
        while (c->n_devices + add > *cap) *cap = *cap ? 2 * *cap : 64;
        c->devices = cl_realloc(c->devices, (size_t)*cap * sizeof *c->devices);
    }
    return c->devices + c->n_devices;
}

static int nodes_from_json(jx *j, const cJSON *root, cluster *c, dev_origin **origin_out)
{
    static const char *const node_keys[] = {"name", "devices", NULL};
    static const char *const dev_keys[] = {"id", "type", NULL};
    static const char *const count_keys[] = {"type", "count", NULL};
    const cJSON *arr;
    int rc = jx_array(j, root, "", "nodes", 1, 1, CLUSTER_MAX_DEVICES, &arr);
    if (rc) return rc;
    c->n_nodes = cJSON_GetArraySize(arr);
    c->node_names = cl_calloc((size_t)c->n_nodes, sizeof *c->node_names);
    int cap = 0, ocap = 0;
    dev_origin *origin = NULL;
    name_ref *tix = cl_malloc((size_t)c->n_types * sizeof *tix);  /* names are unique */
    for (int i = 0; i < c->n_types; i++) tix[i] = (name_ref){c->types[i].name, i};
    qsort(tix, (size_t)c->n_types, sizeof *tix, name_ref_cmp);
    int ni = 0;
    for (const cJSON *nd = arr->child; nd; nd = nd->next, ni++) {
        char np[64], p[128];
        jx_index(np, sizeof np, "nodes", ni);
        if (!cJSON_IsObject(nd)) { rc = jx_fail(j, np, "expected an object {\"name\", \"devices\"}"); break; }
        if ((rc = jx_only(j, nd, np, node_keys)) ||
            (rc = jx_name(j, nd, np, "name", 1, c->node_names[ni], CLUSTER_NAME_MAX)))
            break;
        const cJSON *devs;
        if ((rc = jx_member(j, nd, np, "devices", 1, &devs))) break;
        jx_join(p, sizeof p, np, "devices");
        if (cJSON_IsArray(devs)) {
            int n = cJSON_GetArraySize(devs);
            if (n == 0) { rc = jx_fail(j, p, "empty (hint: a node holds at least one device)"); break; }
            if (n > CLUSTER_MAX_DEVICES - c->n_devices) {
                rc = jx_fail(j, p, "the cluster would have more than %d devices", CLUSTER_MAX_DEVICES);
                break;
            }
            cluster_device *d = grow(c, &cap, n);
            if (ocap < cap) { ocap = cap; origin = cl_realloc(origin, (size_t)ocap * sizeof *origin); }
            int k = 0;
            for (const cJSON *dv = devs->child; dv; dv = dv->next, k++) {
                char dp[160], tp[200], tname[CLUSTER_NAME_MAX] = "";
                jx_index(dp, sizeof dp, p, k);
                if (!cJSON_IsObject(dv)) { rc = jx_fail(j, dp, "expected an object {\"id\", \"type\"}"); break; }
                memset(&d[k], 0, sizeof d[k]);
                if ((rc = jx_only(j, dv, dp, dev_keys)) ||
                    (rc = jx_name(j, dv, dp, "id", 1, d[k].id, sizeof d[k].id)) ||
                    (rc = jx_name(j, dv, dp, "type", 1, tname, sizeof tname)))
                    break;
                jx_join(tp, sizeof tp, dp, "type");
                if ((d[k].type = type_index(tix, c->n_types, tname)) < 0) { rc = unknown_type(j, c, tp, tname); break; }
                d[k].node = ni;
                origin[c->n_devices + k] = (dev_origin){ni, k};
            }
            if (rc) break;
            c->n_devices += n;
        } else if (cJSON_IsObject(devs)) {
            char tname[CLUSTER_NAME_MAX] = "", tp[200];
            int64_t count = 0;
            if ((rc = jx_only(j, devs, p, count_keys)) ||
                (rc = jx_name(j, devs, p, "type", 1, tname, sizeof tname)) ||
                (rc = jx_int(j, devs, p, "count", 1, 1, CLUSTER_MAX_DEVICES, &count)))
                break;
            jx_join(tp, sizeof tp, p, "type");
            int ti = type_index(tix, c->n_types, tname);
            if (ti < 0) { rc = unknown_type(j, c, tp, tname); break; }
            if (count > CLUSTER_MAX_DEVICES - c->n_devices) {
                jx_join(tp, sizeof tp, p, "count");
                rc = jx_fail(j, tp, "the cluster would have %lld devices, more than the limit of %d",
                             (long long)c->n_devices + count, CLUSTER_MAX_DEVICES);
                break;
            }
            /* generated ids "<node>.<k>" must fit the id buffer */
            char probe[32];
            int digits = snprintf(probe, sizeof probe, "%lld", (long long)count - 1);
            if (strlen(c->node_names[ni]) + 1 + (size_t)digits >= CLUSTER_NAME_MAX) {
                jx_join(tp, sizeof tp, np, "name");
                rc = jx_fail(j, tp, "too long to generate device ids \"%s.<k>\" (hint: a shorter node name, or list the devices with ids)",
                             c->node_names[ni]);
                break;
            }
            int n = (int)count;
            cluster_device *d = grow(c, &cap, n);
            if (ocap < cap) { ocap = cap; origin = cl_realloc(origin, (size_t)ocap * sizeof *origin); }
            for (int k = 0; k < n; k++) {
                memset(&d[k], 0, sizeof d[k]);
                snprintf(d[k].id, sizeof d[k].id, "%s.%d", c->node_names[ni], k);
                d[k].type = ti;
                d[k].node = ni;
                origin[c->n_devices + k] = (dev_origin){ni, -1};
            }
            c->n_devices += n;
        } else {
            rc = jx_fail(j, p, "expected an array of {\"id\", \"type\"} or an object {\"type\", \"count\"}");
            break;
        }
    }
    free(tix);
    *origin_out = origin;
    return rc;
}

/* ------------------------------------------------------------ load, save -- */

void cluster_free(cluster *c)
{
    free(c->types);
    free(c->node_names);
    free(c->devices);
    memset(c, 0, sizeof *c);
}

/* n elements of `size` bytes from src into fresh memory (NULL when none). */
static void *copy_array(const void *src, int n, size_t size)
{
    if (n <= 0 || !src) return NULL;
    void *p = cl_malloc((size_t)n * size);
    memcpy(p, src, (size_t)n * size);
    return p;
}

void cluster_copy(cluster *dst, const cluster *src)
{
    *dst = *src; /* types, node names and devices hold no pointers */
    dst->types = copy_array(src->types, src->n_types, sizeof *src->types);
    dst->node_names = copy_array(src->node_names, src->n_nodes, sizeof *src->node_names);
    dst->devices = copy_array(src->devices, src->n_devices, sizeof *src->devices);
}

static int cluster_read(jx *j, const cJSON *root, int version, void *out)
{
    static const char *const link_keys[] = {"intra_node", "inter_node", "note", NULL};
    cluster *c = out;
    (void)version;
    dev_origin *origin = NULL;
    const cJSON *links;
    int rc, a = -1, b = -1, has_intra = 0, has_inter = 0;
    if ((rc = jx_name(j, root, "", "name", 1, c->name, sizeof c->name)) ||
        (rc = jx_text(j, root, "", "note", 0, c->note, sizeof c->note)) ||
        (rc = devtypes_from_json(j, root, &c->types, &c->n_types)) ||
        (rc = nodes_from_json(j, root, c, &origin)))
        goto out;
    if (find_duplicate(c->node_names[0], sizeof c->node_names[0], c->n_nodes, &a, &b)) {
        char p[64];
        snprintf(p, sizeof p, "nodes[%d].name", b);
        rc = jx_fail(j, p, "\"%s\" is already the name of nodes[%d] (hint: node names must be unique)",
                     c->node_names[b], a);
        goto out;
    }
    if (find_duplicate(c->devices[0].id, sizeof c->devices[0], c->n_devices, &a, &b)) {
        char p[96], q[96];
        dev_origin oa = origin[a], ob = origin[b];
        if (ob.pos >= 0) snprintf(p, sizeof p, "nodes[%d].devices[%d].id", ob.node, ob.pos);
        else snprintf(p, sizeof p, "nodes[%d].devices", ob.node);
        if (oa.pos >= 0) snprintf(q, sizeof q, "nodes[%d].devices[%d]", oa.node, oa.pos);
        else snprintf(q, sizeof q, "a device generated by nodes[%d].devices", oa.node);
        rc = jx_fail(j, p, "duplicate device id \"%s\", also used by %s (hint: device ids must be unique)",
                     c->devices[b].id, q);
        goto out;
    }
    if ((rc = jx_object(j, root, "", "links", 1, &links)) ||
        (rc = jx_only(j, links, "links", link_keys)) ||
        (rc = link_from_json(j, links, "intra_node", 1, &c->links[CLUSTER_INTRA], &has_intra, NULL)) ||
        (rc = link_from_json(j, links, "inter_node", 0, &c->links[CLUSTER_INTER], &has_inter,
                             &c->nics_per_node)) ||
        (rc = jx_text(j, links, "links", "note", 0, c->links_note, sizeof c->links_note)))
        goto out;
    if (!has_inter && c->n_nodes > 1) {
        rc = jx_fail(j, "links.inter_node", "missing, and the cluster has %d nodes (hint: add {\"bandwidth_Bps\": ..., \"latency_s\": ...} for links between nodes)",
                     c->n_nodes);
        goto out;
    }
out:
    free(origin);
    return rc;
}

static void cluster_release(void *c) { cluster_free(c); }

static const char *const cluster_members[] = {"format", "version", "name", "note",
                                              "device_types", "nodes", "links", NULL};
static const jx_format cluster_format = {"cleave-cluster", 1, cluster_members, sizeof(cluster),
                                         cluster_read, cluster_release};

int cluster_from_json(cluster *c, const cJSON *root, const char *file, cl_err *e)
{
    return jx_decode(&cluster_format, root, file, NULL, c, e);
}

int cluster_load(cluster *c, const char *path, cl_err *e)
{
    return jx_load(&cluster_format, path, NULL, c, e);
}

/* True when node ni's devices (count of them, starting at index first) are
 * all of one type with the ids the {type, count} form would generate. */
static int compact_form(const cluster *c, int ni, const int *idx, int count)
{
    for (int k = 0; k < count; k++) {
        const cluster_device *d = &c->devices[idx[k]];
        char want[CLUSTER_NAME_MAX + 16];
        snprintf(want, sizeof want, "%s.%d", c->node_names[ni], k);
        if (d->type != c->devices[idx[0]].type || strcmp(d->id, want) != 0) return 0;
    }
    return 1;
}

cJSON *cluster_to_json(const cluster *c)
{
    cJSON *root = jx_doc_new(&cluster_format);
    cJSON_AddStringToObject(root, "name", c->name);
    if (c->note[0]) cJSON_AddStringToObject(root, "note", c->note);
    cJSON *types = cJSON_AddArrayToObject(root, "device_types");
    for (int i = 0; i < c->n_types; i++) cJSON_AddItemToArray(types, devtype_to_json(&c->types[i]));

    /* devices grouped by node, in device order (bucket by node index) */
    int *start = cl_calloc((size_t)c->n_nodes + 1, sizeof *start);
    int *idx = cl_malloc((size_t)(c->n_devices ? c->n_devices : 1) * sizeof *idx);
    for (int d = 0; d < c->n_devices; d++) start[c->devices[d].node + 1]++;
    for (int n = 0; n < c->n_nodes; n++) start[n + 1] += start[n];
    int *fill = cl_malloc((size_t)(c->n_nodes ? c->n_nodes : 1) * sizeof *fill);
    memcpy(fill, start, (size_t)c->n_nodes * sizeof *fill);
    for (int d = 0; d < c->n_devices; d++) idx[fill[c->devices[d].node]++] = d;
    free(fill);

    cJSON *nodes = cJSON_AddArrayToObject(root, "nodes");
    for (int n = 0; n < c->n_nodes; n++) {
        cJSON *nd = cJSON_CreateObject();
        cJSON_AddStringToObject(nd, "name", c->node_names[n]);
        int count = start[n + 1] - start[n];
        const int *mine = idx + start[n];
        if (count > 0 && compact_form(c, n, mine, count)) {
            cJSON *o = cJSON_AddObjectToObject(nd, "devices");
            cJSON_AddStringToObject(o, "type", c->types[c->devices[mine[0]].type].name);
            cJSON_AddNumberToObject(o, "count", count);
        } else {
            cJSON *arr = cJSON_AddArrayToObject(nd, "devices");
            for (int k = 0; k < count; k++) {
                cJSON *dv = cJSON_CreateObject();
                cJSON_AddStringToObject(dv, "id", c->devices[mine[k]].id);
                cJSON_AddStringToObject(dv, "type", c->types[c->devices[mine[k]].type].name);
                cJSON_AddItemToArray(arr, dv);
            }
        }
        cJSON_AddItemToArray(nodes, nd);
    }
    free(start);
    free(idx);

    cJSON *links = cJSON_AddObjectToObject(root, "links");
    cJSON_AddItemToObject(links, "intra_node", link_to_json(&c->links[CLUSTER_INTRA], 0));
    if (c->links[CLUSTER_INTER].bw_Bps > 0)
        cJSON_AddItemToObject(links, "inter_node", link_to_json(&c->links[CLUSTER_INTER], c->nics_per_node));
    if (c->links_note[0]) cJSON_AddStringToObject(links, "note", c->links_note);
    return root;
}

int cluster_save(const cluster *c, const char *path, cl_err *e)
{
    return jx_save(path, cluster_to_json(c), e);
}

/* --------------------------------------------------------------- uniform -- */

int cluster_uniform(cluster *c, const cluster_devtype *type, int n, int per_node,
                    cluster_link intra, cluster_link inter, cl_err *e)
{
    memset(c, 0, sizeof *c);
    int rc = cluster_devtype_check(type, "device type", e);
    if (rc) return rc;
    if (n < 1 || n > CLUSTER_MAX_DEVICES)
        return cl_fail(e, CL_EINPUT, "device count %d is out of range (hint: 1 to %d)", n, CLUSTER_MAX_DEVICES);
    if (per_node < 0)
        return cl_fail(e, CL_EINPUT, "devices per node %d is negative (hint: 0 puts all in one node)", per_node);
    if (per_node == 0 || per_node > n) per_node = n;
    int nodes = (n + per_node - 1) / per_node;
    if (!(intra.bw_Bps > 0) || !isfinite(intra.bw_Bps) || !(intra.latency_s >= 0) || !isfinite(intra.latency_s))
        return cl_fail(e, CL_EINPUT, "intra-node link: bandwidth must be > 0 and latency >= 0 (got %g B/s, %g s)",
                       intra.bw_Bps, intra.latency_s);
    if (nodes > 1 && (!(inter.bw_Bps > 0) || !isfinite(inter.bw_Bps) || !(inter.latency_s >= 0) ||
                      !isfinite(inter.latency_s)))
        return cl_fail(e, CL_EINPUT, "inter-node link: bandwidth must be > 0 and latency >= 0 (got %g B/s, %g s)",
                       inter.bw_Bps, inter.latency_s);
    snprintf(c->name, sizeof c->name, "%dx%.40s", n, type->name);
    c->n_types = 1;
    c->types = cl_calloc(1, sizeof *c->types);
    c->types[0] = *type;
    c->n_nodes = nodes;
    c->node_names = cl_calloc((size_t)nodes, sizeof *c->node_names);
    for (int i = 0; i < nodes; i++) snprintf(c->node_names[i], CLUSTER_NAME_MAX, "node%d", i);
    c->n_devices = n;
    c->devices = cl_calloc((size_t)n, sizeof *c->devices);
    for (int d = 0; d < n; d++) {
        c->devices[d].node = d / per_node;
        c->devices[d].type = 0;
        snprintf(c->devices[d].id, CLUSTER_NAME_MAX, "node%d.%d", d / per_node, d % per_node);
    }
    c->links[CLUSTER_INTRA] = intra;
    /* one node never uses the inter-node link: leave it unset, as a file
     * without "inter_node" would */
    if (nodes > 1) c->links[CLUSTER_INTER] = inter;
    return CL_OK;
}

/* --------------------------------------------------------------- presets -- */

static int readable(const char *p) { return access(p, R_OK) == 0; }

/* The default presets file (see cluster.h); buf holds the answer. */
static const char *default_devices_path(char *buf, size_t cap)
{
    assert(buf && cap > 0);
    const char *env = getenv("CLEAVE_DEVICES");
    if (env && *env) { snprintf(buf, cap, "%s", env); return buf; }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(buf, cap, "%s/../share/cleave/profiles/devices.json", exe);
            if (readable(buf)) return buf;
            snprintf(buf, cap, "%s/../profiles/devices.json", exe);
            if (readable(buf)) return buf;
        }
    }
    snprintf(buf, cap, "profiles/devices.json");
    return buf;
}

/* What a device types file holds (cluster_devtypes_load). */
typedef struct devtypes { cluster_devtype *types; int n; } devtypes;

static int devtypes_read(jx *j, const cJSON *root, int version, void *out)
{
    devtypes *d = out;
    (void)version;
    const cJSON *note = cJSON_GetObjectItemCaseSensitive(root, "note");
    if (note && !cJSON_IsString(note)) return jx_fail(j, "note", "expected a string");
    return devtypes_from_json(j, root, &d->types, &d->n);
}

static void devtypes_release(void *out) { free(((devtypes *)out)->types); }

static const char *const devtypes_members[] = {"format", "version", "note", "device_types", NULL};
static const jx_format devtypes_format = {"cleave-devices", 1, devtypes_members, sizeof(devtypes),
                                          devtypes_read, devtypes_release};

int cluster_devtypes_load(const char *path, cluster_devtype **types, int *n, cl_err *e)
{
    char buf[4200];
    if (!path) path = default_devices_path(buf, sizeof buf);
    devtypes d;
    int rc = jx_load(&devtypes_format, path, NULL, &d, e);
    *types = d.types;
    *n = d.n;
    return rc;
}

cJSON *cluster_devtypes_to_json(const cluster_devtype *types, int n)
{
    cJSON *root = jx_doc_new(&devtypes_format);
    cJSON *arr = cJSON_AddArrayToObject(root, "device_types");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, devtype_to_json(&types[i]));
    return root;
}

const cluster_devtype *cluster_devtype_find(const cluster_devtype *types, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(types[i].name, name) == 0) return &types[i];
    return NULL;
}

int cluster_devtype_preset(const char *path, const char *name, cluster_devtype *out, cl_err *e)
{
    cluster_devtype *t;
    int n;
    char buf[4200];
    if (!path) path = default_devices_path(buf, sizeof buf);
    int rc = cluster_devtypes_load(path, &t, &n, e);
    if (rc) return rc;
    const cluster_devtype *f = cluster_devtype_find(t, n, name);
    if (f) {
        *out = *f;
    } else {
        char list[512] = "";
        size_t len = 0;
        for (int i = 0; i < n && len < sizeof list - 80; i++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", t[i].name);
        rc = cl_fail(e, CL_EINPUT, "unknown device \"%s\" (hint: %s defines %s)", name, path, list);
    }
    free(t);
    return rc;
}
