/* pipedream.c - PipeDream graph.txt import (see pipedream.h and
 * docs/formats.md, "PipeDream graph import").
 *
 * Three steps: parse node and edge lines (every error names the line),
 * order the nodes topologically (Kahn's algorithm, ties broken by the number
 * in the node id, then by line, so the order never depends on how the file
 * lists its nodes), then build the model and profile in that order.
 */
#include <assert.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"
#include "base/escape.h"
#include "base/fileio.h"
#include "base/jsonx.h"
#include "pipedream.h"
#include "profile.h"

/* Largest graph.txt accepted: the published ones are under 40 KB. */
#define PD_MAX_FILE_BYTES ((size_t)64 << 20)
#define PD_ID_MAX 64

typedef struct pd_node {
    char id[PD_ID_MAX];
    char cls[PD_ID_MAX];   /* module class ("Conv2d"), for the layer name */
    int line;
    long long num;         /* number at the end of the id, for ties; -1 if none */
    int is_input;          /* description starts with "Input" */
    double fwd_ms, bwd_ms, act_bytes, param_bytes;
} pd_node;

typedef struct pd_edge {
    int from, to, line;
    char a[PD_ID_MAX], b[PD_ID_MAX];
} pd_edge;

typedef struct pd_graph {
    const char *file;
    cl_err *e;
    int n, cap;
    pd_node *nodes;
    int ne, ecap;
    pd_edge *edges;
    /* edges into node v, in file order: in_edge[in_start[v] .. in_start[v + 1]) */
    int *in_start, *in_edge;
} pd_graph;

static int fail_at(pd_graph *g, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_at(pd_graph *g, int line, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return cl_fail(g->e, CL_EINPUT, "%s:%d: %s", g->file, line, what);
}

/* ---------------------------------------------------------------- lines -- */

static const char *SEP = " -- ";

/* Copy [s, e) without surrounding white space into buf (cap bytes). */
static int copy_trim(char *buf, size_t cap, const char *s, const char *e)
{
    while (s < e && isspace((unsigned char)*s)) s++;
    while (e > s && isspace((unsigned char)e[-1])) e--;
    if ((size_t)(e - s) >= cap) return -1;
    memcpy(buf, s, (size_t)(e - s));
    buf[e - s] = '\0';
    return (int)(e - s);
}

static int valid_id(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (isspace((unsigned char)*s) || !isprint((unsigned char)*s)) return 0;
    return 1;
}

static const char *const attr_names[4] = {"forward_compute_time", "backward_compute_time",
                                          "activation_size", "parameter_size"};

/* One number at *pp: finite, >= 0; advances *pp. */
static int number(pd_graph *g, int line, const char *key, const char **pp, double *out)
{
    char *end;
    double v = strtod(*pp, &end);
    if (end == *pp)
        return fail_at(g, line, "%s: expected a number, got '%.12s' (hint: key=value, e.g. %s=1.25)",
                       key, *pp, key);
    if (!isfinite(v))
        return fail_at(g, line, "%s: %.12s is not a finite number", key, *pp);
    if (v < 0)
        return fail_at(g, line, "%s: negative value %g (hint: times and sizes are >= 0)", key, v);
    *out = v;
    *pp = end;
    return CL_OK;
}

/* "forward_compute_time=<ms>, backward_compute_time=<ms>,
 *  activation_size=<bytes or [b; b; ...]>, parameter_size=<bytes>" */
static int parse_attrs(pd_graph *g, int line, const char *p, pd_node *n)
{
    double val[4] = {0};
    int seen[4] = {0};
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        const char *eq = strchr(p, '=');
        char key[64];
        if (!eq || copy_trim(key, sizeof key, p, eq) <= 0)
            return fail_at(g, line, "expected key=value, got '%.24s' (hint: forward_compute_time=<ms>, backward_compute_time=<ms>, activation_size=<bytes>, parameter_size=<bytes>)", p);
        int k = 0;
        while (k < 4 && strcmp(key, attr_names[k]) != 0) k++;
        if (k == 4)
            return fail_at(g, line, "unknown attribute '%s' (hint: forward_compute_time, backward_compute_time, activation_size, parameter_size)", key);
        if (seen[k]) return fail_at(g, line, "%s given twice", key);
        seen[k] = 1;
        p = eq + 1;
        while (*p == ' ') p++;
        if (*p == '[') {  /* several outputs: their sizes add up */
            p++;
            double sum = 0, v = 0;
            for (;;) {
                int rc = number(g, line, key, &p, &v);
                if (rc) return rc;
                sum += v;
                while (*p == ' ') p++;
                if (*p == ';') { p++; continue; }
                if (*p == ']') { p++; break; }
                return fail_at(g, line, "%s: expected ';' or ']' in the list, got '%.12s'", key, p);
            }
            val[k] = sum;
        } else {
            int rc = number(g, line, key, &p, &val[k]);
            if (rc) return rc;
        }
        while (*p == ' ' || *p == '\t') p++;
        if (*p == ',') p++;
        else if (*p)
            return fail_at(g, line, "expected ',' after %s, got '%.12s'", key, p);
    }
    for (int k = 0; k < 4; k++)
        if (!seen[k])
            return fail_at(g, line, "missing %s= (hint: every node line ends with forward_compute_time, backward_compute_time, activation_size and parameter_size; was the line cut short?)",
                           attr_names[k]);
    n->fwd_ms = val[0];
    n->bwd_ms = val[1];
    n->act_bytes = val[2];
    n->param_bytes = val[3];
    return CL_OK;
}

/* "nodeID -- <module description> -- <attributes>" */
static int parse_node(pd_graph *g, int line, const char *s)
{
    const char *first = strstr(s, SEP), *last = NULL;
    for (const char *q = first; q; q = strstr(q + 1, SEP)) last = q;
    if (!first || first == last)
        return fail_at(g, line, "malformed node line '%.40s' (hint: expected 'nodeID -- Module(...) -- forward_compute_time=..., ...')", s);
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->nodes = cl_realloc(g->nodes, (size_t)g->cap * sizeof *g->nodes);
    }
    pd_node *n = &g->nodes[g->n];
    memset(n, 0, sizeof *n);
    n->line = line;
    if (copy_trim(n->id, sizeof n->id, s, first) < 0 || !valid_id(n->id))
        return fail_at(g, line, "node id '%.40s' must be one word of at most %d characters", s, PD_ID_MAX - 1);
    const char *bad = esc_name_problem(n->id); /* it names a layer */
    if (bad) return fail_at(g, line, "node id '%.40s' %s (hint: %s)", n->id, bad, JX_NAME_HINT);
    /* module class: the description up to its first '(' or blank */
    const char *d = first + strlen(SEP);
    while (*d == ' ') d++;
    size_t k = 0;
    while (d < last && *d != '(' && *d != ' ' && k < 40) {
        n->cls[k++] = (isalnum((unsigned char)*d) || *d == '_' || *d == '-' || *d == '.') ? *d : '_';
        d++;
    }
    n->cls[k] = '\0';
    n->is_input = strncmp(n->cls, "Input", 5) == 0;
    const char *t = n->id + strlen(n->id);
    while (t > n->id && isdigit((unsigned char)t[-1])) t--;
    n->num = (*t && strlen(t) <= 15) ? atoll(t) : -1;
    int rc = parse_attrs(g, line, last + strlen(SEP), n);
    if (rc) return rc;
    g->n++;
    return CL_OK;
}

/* "\tnodeA -- nodeB" */
static int parse_edge(pd_graph *g, int line, const char *s)
{
    const char *sep = strstr(s, SEP);
    if (g->ne == g->ecap) {
        g->ecap = g->ecap ? 2 * g->ecap : 64;
        g->edges = cl_realloc(g->edges, (size_t)g->ecap * sizeof *g->edges);
    }
    pd_edge *ed = &g->edges[g->ne];
    memset(ed, 0, sizeof *ed);
    ed->line = line;
    if (!sep || copy_trim(ed->a, sizeof ed->a, s, sep) <= 0 ||
        copy_trim(ed->b, sizeof ed->b, sep + strlen(SEP), s + strlen(s)) <= 0 ||
        !valid_id(ed->a) || !valid_id(ed->b))
        return fail_at(g, line, "malformed edge line '%.40s' (hint: expected a tab, then 'nodeA -- nodeB')", s);
    g->ne++;
    return CL_OK;
}

static int parse_lines(pd_graph *g, const char *text, size_t len)
{
    int line = 0, rc = CL_OK;
    char *buf = NULL;
    size_t bcap = 0;
    for (const char *s = text; s < text + len && !rc;) {
        const char *e = memchr(s, '\n', (size_t)(text + len - s));
        if (!e) e = text + len;
        line++;
        size_t n = (size_t)(e - s);
        if (n && s[n - 1] == '\r') n--;
        if (n + 1 > bcap) { bcap = n + 1; buf = cl_realloc(buf, bcap); }
        memcpy(buf, s, n);
        buf[n] = '\0';
        s = e + 1;
        if (memchr(buf, '\0', n))
            rc = fail_at(g, line, "contains a NUL byte (hint: not a text file)");
        else if (strspn(buf, " \t") == n)
            continue;  /* blank */
        else if (buf[0] == '\t' || buf[0] == ' ')
            rc = parse_edge(g, line, buf);
        else
            rc = parse_node(g, line, buf);
    }
    free(buf);
    return rc;
}

/* ------------------------------------------------------------- the graph -- */

typedef struct id_ref {
    const char *id;
    int i;
} id_ref;

static int id_cmp(const void *a, const void *b)
{
    const id_ref *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

static int find_node(const id_ref *ix, int n, const char *id)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(ix[mid].id, id);
        if (c == 0) return ix[mid].i;
        if (c < 0) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

typedef struct edge_key {
    int from, to, line, k;
} edge_key;

static int edge_key_cmp(const void *a, const void *b)
{
    const edge_key *x = a, *y = b;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    return (x->line > y->line) - (x->line < y->line);
}

/* Resolve edge ids; reject duplicate nodes and edges; index incoming edges. */
static int resolve(pd_graph *g)
{
    id_ref *ix = cl_malloc((size_t)g->n * sizeof *ix);
    for (int i = 0; i < g->n; i++) ix[i] = (id_ref){g->nodes[i].id, i};
    qsort(ix, (size_t)g->n, sizeof *ix, id_cmp);
    int rc = CL_OK;
    for (int i = 1; i < g->n && !rc; i++)
        if (strcmp(ix[i].id, ix[i - 1].id) == 0)
            rc = fail_at(g, g->nodes[ix[i].i].line, "duplicate node %s (first on line %d)",
                         ix[i].id, g->nodes[ix[i - 1].i].line);
    for (int k = 0; k < g->ne && !rc; k++) {
        pd_edge *ed = &g->edges[k];
        ed->from = find_node(ix, g->n, ed->a);
        ed->to = find_node(ix, g->n, ed->b);
        if (ed->from < 0 || ed->to < 0)
            rc = fail_at(g, ed->line, "edge %s -- %s names an unknown node %s (hint: every node needs its own line)",
                         ed->a, ed->b, ed->from < 0 ? ed->a : ed->b);
    }
    free(ix);
    if (rc) return rc;
    /* duplicate edges: sort (from, to, line) keys, O(E log E) */
    edge_key *o = cl_malloc((size_t)(g->ne ? g->ne : 1) * sizeof *o);
    for (int k = 0; k < g->ne; k++) o[k] = (edge_key){g->edges[k].from, g->edges[k].to, g->edges[k].line, k};
    qsort(o, (size_t)g->ne, sizeof *o, edge_key_cmp);
    for (int k = 1; k < g->ne && !rc; k++) {
        const pd_edge *a = &g->edges[o[k - 1].k], *b = &g->edges[o[k].k];
        if (a->from == b->from && a->to == b->to)
            rc = fail_at(g, b->line, "duplicate edge %s -- %s (first on line %d)", b->a, b->b, a->line);
    }
    free(o);
    if (rc) return rc;
    /* incoming edges by node (a counting sort keeps file order) */
    g->in_start = cl_calloc((size_t)g->n + 1, sizeof *g->in_start);
    g->in_edge = cl_malloc((size_t)(g->ne ? g->ne : 1) * sizeof *g->in_edge);
    for (int k = 0; k < g->ne; k++) g->in_start[g->edges[k].to + 1]++;
    for (int v = 0; v < g->n; v++) g->in_start[v + 1] += g->in_start[v];
    int *fill = cl_malloc((size_t)(g->n ? g->n : 1) * sizeof *fill);
    memcpy(fill, g->in_start, (size_t)g->n * sizeof *fill);
    for (int k = 0; k < g->ne; k++) g->in_edge[fill[g->edges[k].to]++] = k;
    free(fill);
    return CL_OK;
}

/* Kahn order key: the id's number, then the line. */
static int before(const pd_node *x, const pd_node *y)
{
    if (x->num != y->num) return x->num < y->num;
    return x->line < y->line;
}

static void heap_push(int *h, int *n, int v, const pd_node *nd)
{
    int i = (*n)++;
    h[i] = v;
    while (i > 0 && before(&nd[h[i]], &nd[h[(i - 1) / 2]])) {
        int p = (i - 1) / 2, t = h[p];
        h[p] = h[i];
        h[i] = t;
        i = p;
    }
}

static int heap_pop(int *h, int *n, const pd_node *nd)
{
    int top = h[0];
    h[0] = h[--*n];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && before(&nd[h[l]], &nd[h[m]])) m = l;
        if (r < *n && before(&nd[h[r]], &nd[h[m]])) m = r;
        if (m == i) break;
        int t = h[m];
        h[m] = h[i];
        h[i] = t;
        i = m;
    }
    return top;
}

/* Report a cycle among the nodes Kahn's algorithm could not place
 * (remaining[v] != 0): walk back along incoming edges from a remaining node
 * until a node repeats; name the cycle and its latest edge line. */
static int report_cycle(pd_graph *g, const char *remaining)
{
    int start = -1;
    for (int v = 0; v < g->n; v++)
        if (remaining[v] && (start < 0 || before(&g->nodes[v], &g->nodes[start]))) start = v;
    int *step = cl_malloc((size_t)g->n * sizeof *step);  /* edge taken into v */
    int *seen = cl_malloc((size_t)g->n * sizeof *seen);
    for (int v = 0; v < g->n; v++) seen[v] = -1;
    int v = start, t = 0;
    while (seen[v] < 0) {
        seen[v] = t++;
        int pick = -1;
        for (int i = g->in_start[v]; i < g->in_start[v + 1]; i++)  /* first incoming edge from a remaining node */
            if (remaining[g->edges[g->in_edge[i]].from]) { pick = g->in_edge[i]; break; }
        assert(pick >= 0);
        step[v] = pick;
        v = g->edges[pick].from;
    }
    /* v is on the cycle; walking the recorded steps back from it lists the
     * cycle against the edges' direction, so print it reversed */
    int *cyc = cl_malloc((size_t)(g->n + 1) * sizeof *cyc), nc = 0, worst = step[v];
    cyc[nc++] = v;
    for (int u = g->edges[step[v]].from;; u = g->edges[step[u]].from) {
        cyc[nc++] = u;
        if (g->edges[step[u]].line > g->edges[worst].line) worst = step[u];
        if (u == v) break;
    }
    char path[600];
    size_t len = 0;
    path[0] = '\0';
    for (int k = nc - 1; k >= 0 && len < sizeof path - 80; k--)
        len += (size_t)snprintf(path + len, sizeof path - len, "%s%s", k == nc - 1 ? "" : " -> ",
                                g->nodes[cyc[k]].id);
    free(cyc);
    free(step);
    free(seen);
    const pd_edge *w = &g->edges[worst];
    return fail_at(g, w->line, "edge %s -- %s closes a cycle (%s) (hint: the graph must be acyclic)",
                   w->a, w->b, path);
}

/* Union-find root of v, halving the path as it goes. */
static int uf_root(int *up, int v)
{
    while (up[v] != v) v = up[v] = up[up[v]];
    return v;
}

/* A PipeDream graph is one network fed by an Input node: every node joined
 * to the first by edges, direction aside.  A file cut short loses its edge
 * lines (they follow the nodes) and would otherwise load as loose layers,
 * and the batch could no longer be inferred from the Input. */
static int check_graph(pd_graph *g)
{
    int inputs = 0;
    for (int v = 0; v < g->n; v++) inputs += g->nodes[v].is_input;
    if (!inputs)
        return fail_at(g, g->nodes[0].line, "none of the %d nodes is an Input (hint: a graph.txt "
                       "starts from 'nodeID -- Input0 -- ...'; was the file cut short?)", g->n);
    int *up = cl_malloc((size_t)g->n * sizeof *up);
    for (int v = 0; v < g->n; v++) up[v] = v;
    for (int k = 0; k < g->ne; k++) up[uf_root(up, g->edges[k].from)] = uf_root(up, g->edges[k].to);
    int rc = CL_OK, r0 = uf_root(up, 0);
    for (int v = 1; v < g->n && !rc; v++)
        if (uf_root(up, v) != r0)
            rc = fail_at(g, g->nodes[v].line, "node %s is not connected to node %s (line %d) by any "
                         "edges (%d edge lines in the file) (hint: a graph.txt lists every edge after "
                         "the nodes; was the file cut short?)",
                         g->nodes[v].id, g->nodes[0].id, g->nodes[0].line, g->ne);
    free(up);
    return rc;
}

/* Topological order into order[0..n-1] (node indices). */
static int topo_order(pd_graph *g, int *order)
{
    int n = g->n;
    int *indeg = cl_calloc((size_t)n, sizeof *indeg);
    int *start = cl_calloc((size_t)n + 1, sizeof *start);
    int *succ = cl_malloc((size_t)(g->ne ? g->ne : 1) * sizeof *succ);
    for (int k = 0; k < g->ne; k++) {
        indeg[g->edges[k].to]++;
        start[g->edges[k].from + 1]++;
    }
    for (int v = 0; v < n; v++) start[v + 1] += start[v];
    int *fill = cl_malloc((size_t)n * sizeof *fill);
    memcpy(fill, start, (size_t)n * sizeof *fill);
    for (int k = 0; k < g->ne; k++) succ[fill[g->edges[k].from]++] = g->edges[k].to;
    free(fill);
    int *heap = cl_malloc((size_t)n * sizeof *heap), hn = 0, placed = 0;
    for (int v = 0; v < n; v++)
        if (indeg[v] == 0) heap_push(heap, &hn, v, g->nodes);
    while (hn > 0) {
        int v = heap_pop(heap, &hn, g->nodes);
        order[placed++] = v;
        for (int k = start[v]; k < start[v + 1]; k++)
            if (--indeg[succ[k]] == 0) heap_push(heap, &hn, succ[k], g->nodes);
    }
    int rc = CL_OK;
    if (placed < n) {
        char *remaining = cl_calloc((size_t)n, 1);
        for (int v = 0; v < n; v++) remaining[v] = indeg[v] > 0;
        rc = report_cycle(g, remaining);
        free(remaining);
    }
    free(heap);
    free(indeg);
    free(start);
    free(succ);
    return rc;
}

/* ----------------------------------------------------- model and profile -- */

/* "dir/vgg16.txt" -> "vgg16" */
static void base_name(const char *file, char *buf, size_t cap)
{
    const char *s = strrchr(file, '/');
    s = s ? s + 1 : file;
    const char *dot = strrchr(s, '.');
    size_t n = dot && dot > s ? (size_t)(dot - s) : strlen(s);
    if (n >= cap) n = cap - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (!buf[0]) snprintf(buf, cap, "pipedream");
}

/* The profiled batch: given, else whole images at the first sized Input
 * (*side: their side in pixels, 0 when not inferred). */
static double pick_batch(const pd_graph *g, double batch, int *side)
{
    static const int sides[] = {PIPEDREAM_IMAGE_SIDES};
    *side = 0;
    if (batch > 0) return batch;
    for (int v = 0; v < g->n; v++) {
        const pd_node *n = &g->nodes[v];
        if (!n->is_input || !(n->act_bytes > 0)) continue;
        for (size_t i = 0; i < sizeof sides / sizeof *sides; i++) {
            double k = n->act_bytes / (3.0 * sides[i] * sides[i] * 4);
            if (k >= 1 && k == floor(k) && k <= 1e9) {
                *side = sides[i];
                return k;
            }
        }
        break;
    }
    return 1;
}

/* Per-sample bytes rounded up to whole 4-byte (float32) elements. */
static double whole_elems_bytes(double bytes)
{
    return 4.0 * ceil(bytes / 4.0);
}

static int build(pd_graph *g, const int *order, double batch, int side, model *m, prof *p)
{
    int n = g->n;
    int *pos = cl_malloc((size_t)n * sizeof *pos);
    for (int k = 0; k < n; k++) pos[order[k]] = k;

    base_name(g->file, m->name, sizeof m->name);
    esc_name_fix(m->name); /* a file name may hold anything a name may not */
    m->dtype = MODEL_F32;
    m->n_layers = n;
    m->layers = cl_calloc((size_t)n, sizeof *m->layers);
    double in_bytes = 0;  /* the model input: the first sized Input node's output */
    int in_line = 0;
    for (int v = 0; v < n && in_bytes == 0; v++)
        if (g->nodes[v].is_input) {
            in_bytes = g->nodes[v].act_bytes / batch;
            in_line = g->nodes[v].line;
        }
    if (side) {
        m->input = (model_shape){3, {3, side, side}};
    } else {
        double el = ceil(in_bytes / 4);
        if (el > (double)MODEL_MAX_ELEMS) {
            free(pos);
            return fail_at(g, in_line, "the Input's activation_size is %g bytes per sample at batch %g, more than 2^40 float32 elements (hint: sizes are bytes per minibatch; state the batch size)",
                           in_bytes, batch);
        }
        m->input = (model_shape){1, {(int64_t)(el >= 1 ? el : 1), 0, 0}};
    }

    char images[64];
    snprintf(images, sizeof images, "inferred from the Input's 3x%dx%d fp32 images", side, side);
    snprintf(p->model, sizeof p->model, "%s", m->name);
    snprintf(p->device, sizeof p->device, "pipedream-gpu");
    p->source = PROF_IMPORTED;
    snprintf(p->note, sizeof p->note,
             "PipeDream graph %.40s, batch %g (%s); Input nodes cost 0; backward: all input-grad "
             "without parameters, else half input-grad, half weight-grad",
             m->name, batch, side ? images : "given or default");
    prof_alloc(p, n, 1);

    int rc = CL_OK;
    for (int k = 0; k < n && !rc; k++) {
        const pd_node *nd = &g->nodes[order[k]];
        model_layer *l = &m->layers[k];
        /* "<id>_<class>", or the id alone when that would not fit: ids are
         * unique, truncated names might not be */
        char name[2 * PD_ID_MAX + 2];
        snprintf(name, sizeof name, "%s_%s", nd->id, nd->cls[0] ? nd->cls : "node");
        if (strlen(name) >= MODEL_NAME_MAX) snprintf(name, sizeof name, "%s", nd->id);
        double per_sample = nd->act_bytes / batch;
        double params = ceil(nd->param_bytes / 4);  /* float32 parameters */
        model_block_init(l, name, 0, params, fmax(4, whole_elems_bytes(per_sample)),
                         whole_elems_bytes(per_sample));
        /* inputs: the producers' positions, ascending; sources read the model input */
        int ni = 0;
        for (int i = g->in_start[order[k]]; i < g->in_start[order[k] + 1] && !rc; i++) {
            int e = g->in_edge[i];
            if (ni == MODEL_MAX_INPUTS) {
                rc = fail_at(g, g->edges[e].line, "%s has more than %d inputs (hint: cleave models join at most %d tensors per layer)",
                             nd->id, MODEL_MAX_INPUTS, MODEL_MAX_INPUTS);
                break;
            }
            int src = pos[g->edges[e].from], at = ni++;
            while (at > 0 && l->inputs[at - 1] > src) { l->inputs[at] = l->inputs[at - 1]; at--; }
            l->inputs[at] = src;
        }
        if (ni == 0) l->inputs[ni++] = -1;
        l->n_inputs = ni;

        prof_layer *pl = &p->layers[k];
        snprintf(pl->name, sizeof pl->name, "%s", l->name);
        pl->batch[0] = batch;
        if (!nd->is_input) {  /* an Input's time is data loading, not compute */
            pl->fwd_s[0] = nd->fwd_ms / 1000;
            double bwd = nd->bwd_ms / 1000;
            pl->bwd_in_s[0] = nd->param_bytes > 0 ? bwd / 2 : bwd;
            pl->bwd_w_s[0] = nd->param_bytes > 0 ? bwd - pl->bwd_in_s[0] : 0;
        }
        pl->act_bytes = per_sample;
        pl->stash_bytes = per_sample;
        pl->param_bytes = nd->param_bytes;
    }
    free(pos);
    return rc;
}

int pipedream_parse(const char *file, const char *text, size_t len, double batch,
                    model *m, prof *p, pipedream_info *info, cl_err *e)
{
    memset(m, 0, sizeof *m);
    memset(p, 0, sizeof *p);
    if (!(batch >= 0) || !isfinite(batch))
        return cl_fail(e, CL_EINPUT, "%s: batch size %g is not a positive number", file, batch);
    pd_graph g = {.file = file, .e = e};
    int rc = parse_lines(&g, text, len);
    if (!rc && g.n == 0)
        rc = cl_fail(e, CL_EINPUT, "%s: empty file: no node lines (hint: expected PipeDream graph.txt lines 'nodeID -- Module -- forward_compute_time=...')", file);
    if (!rc && g.n > MODEL_MAX_LAYERS)
        rc = cl_fail(e, CL_EINPUT, "%s: %d nodes, more than the limit of %d", file, g.n, MODEL_MAX_LAYERS);
    if (!rc) rc = resolve(&g);
    if (!rc) rc = check_graph(&g);
    int *order = NULL;
    if (!rc) {
        order = cl_malloc((size_t)g.n * sizeof *order);
        rc = topo_order(&g, order);
    }
    int side = 0, given = batch > 0;
    if (!rc) batch = pick_batch(&g, batch, &side);
    if (!rc) rc = build(&g, order, batch, side, m, p);
    /* neither given nor told by the input: the times are per profiled
     * minibatch of unknown size, and so is every throughput planned on them */
    if (!rc && !given && !side) m->unit = MODEL_UNIT_MINIBATCH;
    if (!rc) rc = model_derive(m, file, e);
    if (!rc && info) *info = (pipedream_info){g.n, g.ne, batch, side > 0, side};
    free(order);
    free(g.nodes);
    free(g.edges);
    free(g.in_start);
    free(g.in_edge);
    if (rc) {
        model_free(m);
        prof_free(p);
    }
    return rc;
}

int pipedream_import(const char *path, double batch, model *m, prof *p,
                     pipedream_info *info, cl_err *e)
{
    char *text;
    size_t len;
    memset(m, 0, sizeof *m);
    memset(p, 0, sizeof *p);
    int rc = cl_read_file(path, PD_MAX_FILE_BYTES, &text, &len, e);
    if (rc) return rc;
    rc = pipedream_parse(path, text, len, batch, m, p, info, e);
    free(text);
    return rc;
}
