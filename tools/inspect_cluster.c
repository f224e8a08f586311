/* inspect_cluster.c - `cleave inspect CLUSTER.json`: device types, nodes and
 * their devices, links and totals as tables, or (--json) the cluster in
 * its file form plus a "totals" object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "profiles/cluster.h"
#include "cli.h"
#include "inspect.h"
#include "base/jsonx.h"
#include "base/units.h"

typedef struct totals {
    double fp32_flops, fp16_flops, mem_bytes, price_per_hour;
    int priced;  /* every device has a price */
} totals;

static totals sum(const cluster *c)
{
    totals t = {0, 0, 0, 0, 1};
    for (int d = 0; d < c->n_devices; d++) {
        const cluster_devtype *ty = &c->types[c->devices[d].type];
        t.fp32_flops += ty->peak_fp32_flops;
        t.fp16_flops += ty->peak_fp16_flops > 0 ? ty->peak_fp16_flops : ty->peak_fp32_flops;
        t.mem_bytes += (double)ty->mem_bytes;
        t.price_per_hour += ty->price_per_hour;
        if (!(ty->price_per_hour > 0)) t.priced = 0;
    }
    return t;
}

/* "80.0 GiB". */
static const cl_bytes_style cluster_bytes = {.hi = CL_EIB, .prec = 1};

/* Decimal rates: "300 GB/s", "25 GB/s", "12.5 MB/s". */
static const char *rate_str(double v, const char *unit, char *buf, size_t cap)
{
    static const char *const pre[] = {"", "k", "M", "G", "T", "P", "E"};
    int p = 0;
    while (v >= 1000 && p < 6) { v /= 1000; p++; }
    snprintf(buf, cap, "%.4g %s%s", v, pre[p], unit);
    return buf;
}

static const char *time_str(double s, char *buf, size_t cap)
{
    if (s == 0) snprintf(buf, cap, "0 s");
    else if (s < 1e-3) snprintf(buf, cap, "%.4g us", s * 1e6);
    else if (s < 1) snprintf(buf, cap, "%.4g ms", s * 1e3);
    else snprintf(buf, cap, "%.4g s", s);
    return buf;
}

/* "8 x A100-80GB" for node n (types in type order), from the devices
 * by_node[start[n] .. start[n + 1] - 1]; cnt is scratch, n_types long. */
static void node_desc(const cluster *c, const int *start, const int *by_node, int *cnt,
                      int n, char *buf, size_t cap)
{
    memset(cnt, 0, (size_t)c->n_types * sizeof *cnt);
    for (int k = start[n]; k < start[n + 1]; k++) cnt[c->devices[by_node[k]].type]++;
    size_t len = 0;
    buf[0] = '\0';
    for (int t = 0; t < c->n_types && len < cap; t++)
        if (cnt[t])
            len += (size_t)snprintf(buf + len, cap - len, "%s%d x %s", len ? ", " : "", cnt[t],
                                    c->types[t].name);
}

/* One row per device type: peaks, memory and its runtime reserve,
 * bandwidth, efficiency, price. */
static void print_types(const cluster_devtype *types, int n)
{
    char a[64], b[64], r[64];
    int wn = 4;
    for (int t = 0; t < n; t++)
        if ((int)strlen(types[t].name) > wn) wn = (int)strlen(types[t].name);
    printf("  %-*s  %12s  %12s  %10s  %10s  %12s  %5s  %8s\n", wn, "name", "fp32 TFLOP/s",
           "fp16 TFLOP/s", "memory", "reserve", "memory bw", "eff", "$/hour");
    for (int t = 0; t < n; t++) {
        const cluster_devtype *ty = &types[t];
        char f16[32], price[32];
        if (ty->peak_fp16_flops > 0) snprintf(f16, sizeof f16, "%.4g", ty->peak_fp16_flops / 1e12);
        else snprintf(f16, sizeof f16, "-");
        if (ty->price_per_hour > 0) snprintf(price, sizeof price, "%.2f", ty->price_per_hour);
        else snprintf(price, sizeof price, "-");
        if (ty->reserve_bytes) cl_fmt_bytes(r, sizeof r, (double)ty->reserve_bytes, cluster_bytes);
        else snprintf(r, sizeof r, "-");
        printf("  %-*s  %12.4g  %12s  %10s  %10s  %12s  %5.2f  %8s\n", wn, ty->name,
               ty->peak_fp32_flops / 1e12, f16, cl_fmt_bytes(a, sizeof a, (double)ty->mem_bytes, cluster_bytes),
               r, rate_str(ty->mem_bw_Bps, "B/s", b, sizeof b), ty->efficiency, price);
    }
}

static void print_table(const cluster *c)
{
    char a[64], b[64], d[64];
    printf("cluster %s: %d device%s on %d node%s, %d device type%s\n", c->name, c->n_devices,
           c->n_devices == 1 ? "" : "s", c->n_nodes, c->n_nodes == 1 ? "" : "s", c->n_types,
           c->n_types == 1 ? "" : "s");
    if (c->note[0]) printf("%s\n", c->note);

    printf("\ndevice types (peaks as given; effective = peak x efficiency)\n");
    print_types(c->types, c->n_types);

    /* nodes; consecutive nodes with the same devices share a row */
    printf("\nnodes\n");
    /* devices bucketed by node, then one count per type for the node at hand */
    int *start = cl_calloc((size_t)c->n_nodes + 1, sizeof *start);
    for (int k = 0; k < c->n_devices; k++) start[c->devices[k].node + 1]++;
    for (int n = 0; n < c->n_nodes; n++) start[n + 1] += start[n];
    int *fill = cl_malloc((size_t)c->n_nodes * sizeof *fill);
    int *by_node = cl_malloc((size_t)c->n_devices * sizeof *by_node);
    memcpy(fill, start, (size_t)c->n_nodes * sizeof *fill);
    for (int k = 0; k < c->n_devices; k++) by_node[fill[c->devices[k].node]++] = k;
    int *cnt = cl_calloc((size_t)c->n_types, sizeof *cnt);
    char desc[512], next[512];
    for (int n = 0; n < c->n_nodes;) {
        node_desc(c, start, by_node, cnt, n, desc, sizeof desc);
        int m = n + 1;
        while (m < c->n_nodes) {
            node_desc(c, start, by_node, cnt, m, next, sizeof next);
            if (strcmp(next, desc) != 0) break;
            m++;
        }
        if (m - n == 1) printf("  %-24s %s\n", c->node_names[n], desc);
        else {
            char range[160];
            snprintf(range, sizeof range, "%s .. %s", c->node_names[n], c->node_names[m - 1]);
            printf("  %-24s %s each (%d nodes)\n", range, desc, m - n);
        }
        n = m;
    }
    free(cnt);
    free(start);
    free(fill);
    free(by_node);

    printf("\nlinks\n");
    printf("  %-10s  %12s  %10s\n", "level", "bandwidth", "latency");
    printf("  %-10s  %12s  %10s\n", "intra-node", rate_str(c->links[CLUSTER_INTRA].bw_Bps, "B/s", a, sizeof a),
           time_str(c->links[CLUSTER_INTRA].latency_s, b, sizeof b));
    if (c->links[CLUSTER_INTER].bw_Bps > 0)
        printf("  %-10s  %12s  %10s\n", "inter-node", rate_str(c->links[CLUSTER_INTER].bw_Bps, "B/s", a, sizeof a),
               time_str(c->links[CLUSTER_INTER].latency_s, b, sizeof b));
    else
        printf("  %-10s  %12s\n", "inter-node", "(none: one node)");
    if (c->nics_per_node > 0) /* only clusters that declare cards: others print as before */
        printf("  %d network cards a node, each at the inter-node bandwidth, shared by the node's devices\n",
               c->nics_per_node);
    if (c->links_note[0]) printf("  %s\n", c->links_note);

    totals t = sum(c);
    printf("\ntotals: %d devices, %s fp32 peak, %s fp16 peak, %s memory",
           c->n_devices, rate_str(t.fp32_flops, "FLOP/s", a, sizeof a),
           rate_str(t.fp16_flops, "FLOP/s", b, sizeof b), cl_fmt_bytes(d, sizeof d, t.mem_bytes, cluster_bytes));
    if (t.priced) printf(", %.2f $/hour", t.price_per_hour);
    printf("\n");
}

static int print_json(const cluster *c)
{
    cJSON *root = cluster_to_json(c);
    totals t = sum(c);
    cJSON *o = cJSON_AddObjectToObject(root, "totals");
    cJSON_AddNumberToObject(o, "devices", c->n_devices);
    cJSON_AddNumberToObject(o, "nodes", c->n_nodes);
    cJSON_AddNumberToObject(o, "peak_fp32_flops", t.fp32_flops);
    cJSON_AddNumberToObject(o, "peak_fp16_flops", t.fp16_flops);
    cJSON_AddNumberToObject(o, "memory_bytes", t.mem_bytes);
    if (t.priced) cJSON_AddNumberToObject(o, "price_per_hour", t.price_per_hour);
    return jx_puts(root);
}

int inspect_cluster(const char *path, int as_json)
{
    cluster c;
    cl_err e = {0};
    if (cluster_load(&c, path, &e)) return cli_report(&e);
    int rc = 0;
    if (as_json) rc = print_json(&c);
    else print_table(&c);
    cluster_free(&c);
    return rc;
}

int inspect_devices(const char *path, int as_json)
{
    cluster_devtype *types;
    int n;
    cl_err e = {0};
    if (cluster_devtypes_load(path, &types, &n, &e)) return cli_report(&e);
    int rc = 0;
    if (as_json) {
        rc = jx_puts(cluster_devtypes_to_json(types, n));
    } else {
        printf("device presets %s: %d type%s (--device NAME; peaks as given, effective = peak x efficiency)\n",
               path, n, n == 1 ? "" : "s");
        print_types(types, n);
        printf("\nsources\n");
        for (int t = 0; t < n; t++)
            if (types[t].note[0]) printf("  %s: %s\n", types[t].name, types[t].note);
    }
    free(types);
    return rc;
}
