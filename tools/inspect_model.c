/* inspect_model.c - `cleave inspect MODEL.json`: the layers as an aligned
 * table (or JSON) with shapes, parameters, FLOPs and activation bytes per
 * sample, then the totals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "models/model.h"
#include "cli.h"
#include "inspect.h"
#include "base/jsonx.h"
#include "base/units.h"

/* 138357544 -> "138,357,544" */
static const char *grouped(uint64_t v, char *buf, size_t cap)
{
    char raw[32];
    int n = snprintf(raw, sizeof raw, "%llu", (unsigned long long)v);
    size_t o = 0;
    for (int k = 0; k < n && o + 2 < cap; k++) {
        if (k && (n - k) % 3 == 0) buf[o++] = ',';
        buf[o++] = raw[k];
    }
    buf[o] = '\0';
    return buf;
}

/* Bytes in binary units: "512 B", "3.1 MiB". */
static const cl_bytes_style model_bytes = {.hi = CL_PIB, .prec = 1};

/* A count with a decimal prefix: "30.96 G", "734.8 T". */
static const char *human_count(double v, char *buf, size_t cap)
{
    static const char *const unit[] = {"", "k", "M", "G", "T", "P", "E"};
    int u = 0;
    while (v >= 1000 && u < 6) { v /= 1000; u++; }
    snprintf(buf, cap, "%.4g %s", v, unit[u]);
    return buf;
}

/* The layer's inputs when they are not just the layer before it. */
static void inputs_str(const model *m, int i, char *buf, size_t cap)
{
    const model_layer *l = &m->layers[i];
    buf[0] = '\0';
    if (l->n_inputs == 1 && l->inputs[0] == i - 1) return;
    size_t n = 0;
    for (int k = 0; k < l->n_inputs && n < cap; k++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", k ? "," : "",
                              l->inputs[k] < 0 ? "input" : m->layers[l->inputs[k]].name);
}

static int print_json(const model *m, const uint64_t *cut)
{
    uint64_t eb = model_elem_bytes(m);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", m->name);
    cJSON *shape = cJSON_AddArrayToObject(root, "input");
    for (int k = 0; k < m->input.ndim; k++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)m->input.d[k]));
    cJSON_AddStringToObject(root, "dtype", model_dtype_name(m->dtype));
    cJSON_AddNumberToObject(root, "classes", m->classes);
    cJSON_AddBoolToObject(root, "is_dag", m->is_dag);
    cJSON *layers = cJSON_AddArrayToObject(root, "layers");
    for (int i = 0; i < m->n_layers; i++) {
        const model_layer *l = &m->layers[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", i);
        cJSON_AddStringToObject(o, "name", l->name);
        cJSON_AddStringToObject(o, "kind", model_kind_name(l->kind));
        cJSON *in = cJSON_AddArrayToObject(o, "inputs");
        for (int k = 0; k < l->n_inputs; k++)
            cJSON_AddItemToArray(in, cJSON_CreateString(l->inputs[k] < 0 ? "input" : m->layers[l->inputs[k]].name));
        cJSON *os = cJSON_AddArrayToObject(o, "out_shape");
        for (int k = 0; k < l->out_shape.ndim; k++) cJSON_AddItemToArray(os, cJSON_CreateNumber((double)l->out_shape.d[k]));
        cJSON_AddNumberToObject(o, "params", (double)l->params);
        cJSON_AddNumberToObject(o, "fwd_flops", l->fwd_flops);
        cJSON_AddNumberToObject(o, "bwd_in_flops", l->bwd_in_flops);
        cJSON_AddNumberToObject(o, "bwd_w_flops", l->bwd_w_flops);
        cJSON_AddNumberToObject(o, "macs", l->macs);
        cJSON_AddNumberToObject(o, "out_bytes", (double)(l->out_elems * eb));
        cJSON_AddNumberToObject(o, "stash_bytes", (double)(l->stash_elems * eb));
        cJSON_AddNumberToObject(o, "cut_bytes", (double)(cut[i] * eb));
        cJSON_AddItemToArray(layers, o);
    }
    model_totals t = model_sum(m);
    cJSON *tot = cJSON_AddObjectToObject(root, "totals");
    cJSON_AddNumberToObject(tot, "params", (double)t.params);
    cJSON_AddNumberToObject(tot, "param_bytes", (double)(t.params * eb));
    cJSON_AddNumberToObject(tot, "fwd_flops", t.fwd_flops);
    cJSON_AddNumberToObject(tot, "macs", t.macs);
    cJSON_AddNumberToObject(tot, "bwd_in_flops", t.bwd_in_flops);
    cJSON_AddNumberToObject(tot, "bwd_w_flops", t.bwd_w_flops);
    cJSON_AddNumberToObject(tot, "bwd_flops", t.bwd_in_flops + t.bwd_w_flops);
    cJSON_AddNumberToObject(tot, "out_bytes", (double)(t.out_elems * eb));
    cJSON_AddNumberToObject(tot, "stash_bytes", (double)(t.stash_elems * eb));
    return jx_puts(root);
}

static void print_table(const model *m, const uint64_t *cut)
{
    uint64_t eb = model_elem_bytes(m);
    model_totals t = model_sum(m);
    double scale = 1e9;
    const char *fl = "GFLOP";
    if (t.fwd_flops < 1e9) { scale = 1e6; fl = "MFLOP"; }
    char a[64], b[64], c[64], d[64], sh[96], ins[600];

    int wn = 4, wk = 4, ws = 6, wi = 6;
    for (int i = 0; i < m->n_layers; i++) {
        const model_layer *l = &m->layers[i];
        int n = (int)strlen(l->name);
        if (n > wn) wn = n;
        n = (int)strlen(model_kind_name(l->kind));
        if (n > wk) wk = n;
        model_shape_str(&l->out_shape, sh, sizeof sh);
        n = (int)strlen(sh);
        if (n > ws) ws = n;
        inputs_str(m, i, ins, sizeof ins);
        n = (int)strlen(ins);
        if (n > wi) wi = n;
    }
    model_shape_str(&m->input, sh, sizeof sh);
    printf("model %s: input %s %s, %d layers (%s)", m->name, sh, model_dtype_name(m->dtype),
           m->n_layers, m->is_dag ? "DAG" : "chain");
    if (m->classes) printf(", %d classes", m->classes);
    printf("\nper sample; FLOPs count a multiply-accumulate as 2\n\n");

    int wi_col = m->is_dag ? wi : 0;
    printf("%5s  %-*s  %-*s  ", "#", wn, "name", wk, "kind");
    if (m->is_dag) printf("%-*s  ", wi_col, "inputs");
    printf("%-*s  %13s  %11s  %10s  %10s", ws, "output", "params", fl, "out bytes", "stash");
    if (m->is_dag) printf("  %10s", "cut bytes");
    printf("\n");
    for (int i = 0; i < m->n_layers; i++) {
        const model_layer *l = &m->layers[i];
        model_shape_str(&l->out_shape, sh, sizeof sh);
        printf("%5d  %-*s  %-*s  ", i, wn, l->name, wk, model_kind_name(l->kind));
        if (m->is_dag) {
            inputs_str(m, i, ins, sizeof ins);
            printf("%-*s  ", wi_col, ins);
        }
        printf("%-*s  %13s  %11.3f  %10s  %10s", ws, sh, grouped(l->params, a, sizeof a),
               l->fwd_flops / scale, cl_fmt_bytes(b, sizeof b, (double)(l->out_elems * eb), model_bytes),
               cl_fmt_bytes(c, sizeof c, (double)(l->stash_elems * eb), model_bytes));
        if (m->is_dag) printf("  %10s", cl_fmt_bytes(d, sizeof d, (double)(cut[i] * eb), model_bytes));
        printf("\n");
    }
    double bwd = t.bwd_in_flops + t.bwd_w_flops;
    printf("\ntotals\n");
    printf("  params      %s (%s as %s)\n", grouped(t.params, a, sizeof a),
           cl_fmt_bytes(b, sizeof b, (double)(t.params * eb), model_bytes), model_dtype_name(m->dtype));
    printf("  forward     %sFLOP", human_count(t.fwd_flops, a, sizeof a));
    if (t.macs > 0) printf(" (conv2d/linear: %sMAC)", human_count(t.macs, b, sizeof b));
    printf("\n  backward    %sFLOP (input-gradient %sFLOP, ", human_count(bwd, a, sizeof a),
           human_count(t.bwd_in_flops, b, sizeof b));
    printf("weight-gradient %sFLOP)\n", human_count(t.bwd_w_flops, c, sizeof c));
    printf("  activations %s output, %s stashed for backward\n",
           cl_fmt_bytes(a, sizeof a, (double)(t.out_elems * eb), model_bytes),
           cl_fmt_bytes(b, sizeof b, (double)(t.stash_elems * eb), model_bytes));
}

int inspect_model(const char *path, int as_json)
{
    model m;
    cl_err e = {0};
    if (model_load(&m, path, &e)) return cli_report(&e);
    uint64_t *cut = model_cut_elems(&m);
    int rc = 0;
    if (as_json) rc = print_json(&m, cut);
    else print_table(&m, cut);
    free(cut);
    model_free(&m);
    return rc;
}
