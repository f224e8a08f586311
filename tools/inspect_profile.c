/* inspect_profile.c - `cleave inspect PROFILE.json` (or a PipeDream
 * graph.txt, imported first): per-layer times at each profiled batch size,
 * then totals at every batch size any layer was profiled at (a layer
 * without that point contributes its interpolated time).  --json prints the
 * profile in its file form plus "totals" (and "import" for PipeDream). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "models/model.h"
#include "models/tfm_rank.h"
#include "profiles/pipedream.h"
#include "profiles/profile.h"
#include "cli.h"
#include "base/fileio.h"
#include "inspect.h"
#include "base/jsonx.h"
#include "base/units.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Every batch size some layer was profiled at, sorted, without repeats;
 * caller frees. */
static double *batch_union(const prof *p, int *n_out)
{
    size_t n = 0;
    for (int i = 0; i < p->n_layers; i++) n += (size_t)p->layers[i].n_points;
    double *b = cl_malloc((n ? n : 1) * sizeof *b);
    size_t k = 0;
    for (int i = 0; i < p->n_layers; i++)
        for (int j = 0; j < p->layers[i].n_points; j++) b[k++] = p->layers[i].batch[j];
    qsort(b, n, sizeof *b, cmp_double);
    size_t u = 0;
    for (size_t j = 0; j < n; j++)
        if (u == 0 || b[j] != b[u - 1]) b[u++] = b[j];
    *n_out = (int)u;
    return b;
}

typedef struct sums {
    double fwd, bwd_in, bwd_w;
} sums;

static sums totals_at(const prof *p, double b)
{
    sums s = {0, 0, 0};
    for (int i = 0; i < p->n_layers; i++) {
        s.fwd += prof_fwd_s(&p->layers[i], b);
        s.bwd_in += prof_bwd_in_s(&p->layers[i], b);
        s.bwd_w += prof_bwd_w_s(&p->layers[i], b);
    }
    return s;
}

/* "512 B", "3.1 MiB". */
static const cl_bytes_style prof_bytes = {.hi = CL_PIB, .prec = 1};

/* cut: per-sample bytes crossing the cut after each layer (PipeDream
 * graphs, whose model is known), or NULL. */
static void print_table(const prof *p, const pipedream_info *pd, const double *cut)
{
    char a[32], b[32], c[32];
    printf("profile %s on %s (%s), %d layers\n", p->model, p->device, prof_source_name(p->source),
           p->n_layers);
    if (pd)
        printf("PipeDream graph: %d nodes, %d edges, batch %g (%s)\n", pd->n_nodes, pd->n_edges,
               pd->batch, pd->batch_inferred ? "inferred from the Input node's images" : "not in the file; numbers are per minibatch");
    if (p->note[0]) printf("%s\n", p->note);
    if (p->tensor > 1 || p->recompute) {
        /* a rank profile: what its times are of, and the collectives they leave out */
        double calls = 0;
        for (int i = 0; p->coll && i < p->n_layers * PROF_PASSES; i++) calls += p->coll[i].calls;
        printf("rank profile: rank 0's share at tensor %d%s, recompute %s", p->tensor > 1 ? p->tensor : 1,
               p->seq_par ? ", sequence parallel" : "", tfm_recomp_name((tfm_recomp)p->recompute));
        if (calls > 0)
            printf("; %g collectives a step, not in the times (cleave plan prices them on the node's link)",
                   calls);
        printf("\n");
    }
    printf("\ntimes in ms for the whole batch; bytes per sample\n\n");
    int wn = 4;
    for (int i = 0; i < p->n_layers; i++)
        if ((int)strlen(p->layers[i].name) > wn) wn = (int)strlen(p->layers[i].name);
    int has_sd = 0;  /* a spread column only when some point carries one */
    for (int i = 0; i < p->n_layers; i++)
        for (int k = 0; k < p->layers[i].n_points; k++) has_sd |= p->layers[i].fwd_sd[k] > 0;
    printf("%5s  %-*s  %8s  %10s  %10s  %10s", "#", wn, "name", "batch", "fwd", "bwd_in", "bwd_w");
    if (has_sd) printf("  %10s", "fwd sd");
    printf("  %10s  %10s", "act", "params");
    if (cut) printf("  %10s", "cut");
    printf("\n");
    for (int i = 0; i < p->n_layers; i++) {
        const prof_layer *l = &p->layers[i];
        for (int k = 0; k < l->n_points; k++) {
            if (k == 0) printf("%5d  %-*s", i, wn, l->name);
            else printf("%5s  %-*s", "", wn, "");
            printf("  %8g  %10.3f  %10.3f  %10.3f", l->batch[k], l->fwd_s[k] * 1e3,
                   l->bwd_in_s[k] * 1e3, l->bwd_w_s[k] * 1e3);
            if (has_sd) printf("  %10.3f", l->fwd_sd[k] * 1e3);
            if (k == 0) {
                printf("  %10s  %10s", cl_fmt_bytes(a, sizeof a, l->act_bytes, prof_bytes),
                       cl_fmt_bytes(b, sizeof b, l->param_bytes, prof_bytes));
                if (cut) printf("  %10s", cl_fmt_bytes(c, sizeof c, cut[i], prof_bytes));
            }
            printf("\n");
        }
    }
    double params = 0;
    for (int i = 0; i < p->n_layers; i++) params += p->layers[i].param_bytes;
    int nb;
    double *bs = batch_union(p, &nb);
    printf("\ntotals (parameters %s)\n", cl_fmt_bytes(a, sizeof a, params, prof_bytes));
    printf("  %8s  %12s  %12s  %12s  %14s\n", "batch", "fwd ms", "bwd_in ms", "bwd_w ms", "fwd+bwd ms");
    for (int k = 0; k < nb; k++) {
        sums s = totals_at(p, bs[k]);
        printf("  %8g  %12.3f  %12.3f  %12.3f  %14.3f\n", bs[k], s.fwd * 1e3, s.bwd_in * 1e3,
               s.bwd_w * 1e3, (s.fwd + s.bwd_in + s.bwd_w) * 1e3);
    }
    free(bs);
}

static int print_json(const prof *p, const pipedream_info *pd, const double *cut)
{
    cJSON *root = prof_to_json(p);
    int nb;
    double *bs = batch_union(p, &nb);
    cJSON *tot = cJSON_AddArrayToObject(root, "totals");
    for (int k = 0; k < nb; k++) {
        sums s = totals_at(p, bs[k]);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "batch", bs[k]);
        cJSON_AddNumberToObject(o, "fwd_s", s.fwd);
        cJSON_AddNumberToObject(o, "bwd_in_s", s.bwd_in);
        cJSON_AddNumberToObject(o, "bwd_w_s", s.bwd_w);
        cJSON_AddNumberToObject(o, "total_s", s.fwd + s.bwd_in + s.bwd_w);
        cJSON_AddItemToArray(tot, o);
    }
    free(bs);
    if (pd) {
        cJSON *o = cJSON_AddObjectToObject(root, "import");
        cJSON_AddNumberToObject(o, "nodes", pd->n_nodes);
        cJSON_AddNumberToObject(o, "edges", pd->n_edges);
        cJSON_AddNumberToObject(o, "batch", pd->batch);
        cJSON_AddBoolToObject(o, "batch_inferred", pd->batch_inferred);
        cJSON *c = cJSON_AddArrayToObject(o, "cut_bytes");
        for (int i = 0; i < p->n_layers; i++) cJSON_AddItemToArray(c, cJSON_CreateNumber(cut[i]));
    }
    return jx_puts(root);
}

/* A PipeDream graph.txt: import, then print the profile with cut sizes. */
static int inspect_pipedream(const char *path, int as_json)
{
    model m;
    prof p;
    pipedream_info info;
    cl_err e = {0};
    if (pipedream_import(path, 0, &m, &p, &info, &e)) return cli_report(&e);
    uint64_t *ce = model_cut_elems(&m);
    double *cut = cl_malloc((size_t)m.n_layers * sizeof *cut);
    for (int i = 0; i < m.n_layers; i++) cut[i] = (double)(ce[i] * model_elem_bytes(&m));
    free(ce);
    int rc = 0;
    if (as_json) rc = print_json(&p, &info, cut);
    else print_table(&p, &info, cut);
    free(cut);
    model_free(&m);
    prof_free(&p);
    return rc;
}

/* A JSON document starts with '{'; anything else is taken for a graph.txt
 * (cmd_inspect sends both kinds here). */
static int is_json(const char *path)
{
    int fd;
    struct stat st;
    cl_err ignore = {0};
    /* not a regular file, missing: the JSON loader reports it */
    if (cl_in_open(path, CL_IN_INTERNAL, &fd, &st, &ignore)) return 1;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return 1;
    }
    int ch;
    while ((ch = fgetc(f)) == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {}
    fclose(f);
    return ch == '{' || ch == EOF;
}

int inspect_profile(const char *path, int as_json)
{
    if (!is_json(path)) return inspect_pipedream(path, as_json);
    prof p;
    cl_err e = {0};
    if (prof_load(&p, path, &e)) return cli_report(&e);
    int rc = 0;
    if (as_json) rc = print_json(&p, NULL, NULL);
    else print_table(&p, NULL, NULL);
    prof_free(&p);
    return rc;
}
