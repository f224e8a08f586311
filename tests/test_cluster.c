/* test_cluster.c - cluster files, device presets, uniform clusters. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "profiles/cluster.h"
#include "base/jsonx.h"
#include "test.h"

static const char *const presets[] = {
    "profiles/clusters/dgx-a100-1node.json", "profiles/clusters/dgx-a100-4nodes.json",
    "profiles/clusters/v100-8-pcie.json",    "profiles/clusters/h100-8-nvlink.json",
    "profiles/clusters/cpu-2cores.json",     "tests/data/cluster/mixed.json",
};
#define N_PRESETS ((int)(sizeof presets / sizeof presets[0]))

/* Field-by-field equality (loaders zero every buffer, so memcmp of the
 * fixed-size name and note arrays compares their whole content). */
static int same_cluster(const cluster *a, const cluster *b)
{
    if (strcmp(a->name, b->name) || strcmp(a->note, b->note) || strcmp(a->links_note, b->links_note))
        return 0;
    if (a->n_types != b->n_types || a->n_nodes != b->n_nodes || a->n_devices != b->n_devices ||
        a->nics_per_node != b->nics_per_node)
        return 0;
    if (memcmp(a->types, b->types, (size_t)a->n_types * sizeof *a->types)) return 0;
    if (memcmp(a->node_names, b->node_names, (size_t)a->n_nodes * sizeof *a->node_names)) return 0;
    if (memcmp(a->devices, b->devices, (size_t)a->n_devices * sizeof *a->devices)) return 0;
    for (int l = 0; l < CLUSTER_LEVELS; l++)
        if (a->links[l].bw_Bps != b->links[l].bw_Bps || a->links[l].latency_s != b->links[l].latency_s)
            return 0;
    return 1;
}

/* Load, write (memory and file), load again: identical structures. */
static void test_round_trip(void)
{
    char *dir = test_tmpdir();
    for (int i = 0; i < N_PRESETS; i++) {
        cluster a, b, c;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(cluster_load(&a, presets[i], &e), CL_OK);
        cJSON *j = cluster_to_json(&a);
        CU_ASSERT_EQUAL(cluster_from_json(&b, j, "mem", &e), CL_OK);
        cJSON_Delete(j);
        CU_ASSERT(same_cluster(&a, &b));
        char path[600];
        snprintf(path, sizeof path, "%s/c%d.json", dir, i);
        CU_ASSERT_EQUAL(cluster_save(&a, path, &e), CL_OK);
        CU_ASSERT_EQUAL(cluster_load(&c, path, &e), CL_OK);
        CU_ASSERT(same_cluster(&a, &c));
        if (e.code) fprintf(stderr, "%s\n", e.msg);
        remove(path);
        cluster_free(&a);
        cluster_free(&b);
        cluster_free(&c);
    }
    rmdir(dir);
    free(dir);
}

/* cluster_copy: the copy equals the original field by field, and owns its
 * arrays: with the original scribbled over and freed, it still equals a
 * second load of the same file (or a second uniform cluster). */
static void copy_check(cluster *a, const cluster *ref)
{
    cluster c;
    cluster_copy(&c, a);
    CU_ASSERT(same_cluster(a, &c));
    /* writing over the original leaves the copy as it was */
    memset(a->types, 0x5a, (size_t)a->n_types * sizeof *a->types);
    memset(a->node_names, 0x5a, (size_t)a->n_nodes * sizeof *a->node_names);
    memset(a->devices, 0x5a, (size_t)a->n_devices * sizeof *a->devices);
    memset(a->name, 0x5a, sizeof a->name - 1);
    CU_ASSERT(same_cluster(ref, &c));
    if (c.types == a->types || c.node_names == a->node_names || c.devices == a->devices) {
        CU_FAIL("the copy shares the original's arrays"); /* freeing both would free them twice */
        return;
    }
    /* and the copy outlives it */
    cluster_free(a);
    CU_ASSERT(same_cluster(ref, &c));
    cluster_free(&c);
}

static void test_copy(void)
{
    for (int i = 0; i < N_PRESETS; i++) {
        cluster a, ref;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(cluster_load(&a, presets[i], &e), CL_OK);
        CU_ASSERT_EQUAL_FATAL(cluster_load(&ref, presets[i], &e), CL_OK);
        copy_check(&a, &ref);
        cluster_free(&ref);
    }
    cluster_devtype t = {.name = "gpu", .peak_fp32_flops = 1e13, .mem_bytes = 1u << 30, .mem_bw_Bps = 1e12,
                         .efficiency = 0.5};
    cluster a, ref;
    cl_err e = {0};
    for (int k = 0; k < 2; k++)
        CU_ASSERT_EQUAL_FATAL(cluster_uniform(k ? &ref : &a, &t, 6, 4, (cluster_link){10e9, 1e-5},
                                              (cluster_link){1e9, 5e-5}, &e),
                              CL_OK);
    copy_check(&a, &ref);
    cluster_free(&ref);
}

/* What the files say, checked against their text. */
static void test_contents(void)
{
    cluster c;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cluster_load(&c, "profiles/clusters/dgx-a100-4nodes.json", &e), CL_OK);
    CU_ASSERT_EQUAL(c.n_devices, 32);
    CU_ASSERT_EQUAL(c.n_nodes, 4);
    CU_ASSERT_STRING_EQUAL(c.devices[9].id, "dgx1.1");   /* generated "<node>.<k>" */
    CU_ASSERT_EQUAL(c.devices[9].node, 1);
    /* the rates NCCL reaches, not the line rates 300e9 and 25e9 */
    CU_ASSERT_EQUAL(cluster_link_between(&c, 0, 7)->bw_Bps, 230e9);
    CU_ASSERT_EQUAL(cluster_link_between(&c, 0, 9)->bw_Bps, 24e9);  /* 200 Gb/s HDR */
    CU_ASSERT_EQUAL(cluster_link_between(&c, 31, 8)->latency_s, 1e-5);
    cluster_free(&c);

    CU_ASSERT_EQUAL_FATAL(cluster_load(&c, "tests/data/cluster/mixed.json", &e), CL_OK);
    CU_ASSERT_EQUAL(c.n_types, 2);
    CU_ASSERT_EQUAL(c.n_devices, 7);  /* 3 listed + 3 counted + 1 listed */
    CU_ASSERT_STRING_EQUAL(c.devices[1].id, "a-small");
    CU_ASSERT_EQUAL(c.devices[1].type, 1);
    CU_ASSERT_STRING_EQUAL(c.devices[5].id, "b.2");
    CU_ASSERT_EQUAL(c.devices[6].node, 2);
    CU_ASSERT_EQUAL(c.types[0].mem_bytes, 42949672960u);
    CU_ASSERT_EQUAL(c.types[0].price_per_hour, 2.75);
    CU_ASSERT_EQUAL(c.types[1].peak_fp16_flops, 0);  /* absent: same as fp32 */
    CU_ASSERT_EQUAL(c.links[CLUSTER_INTER].latency_s, 2.5e-5);
    /* effective speed: fp16 peak for 2-byte elements when given */
    CU_ASSERT_EQUAL(cluster_flops(&c.types[0], 4), 2e13 * 0.45);
    CU_ASSERT_EQUAL(cluster_flops(&c.types[0], 2), 1.6e14 * 0.45);
    CU_ASSERT_EQUAL(cluster_flops(&c.types[1], 2), 3.3e12 * 1.0);
    cluster_free(&c);
}

/* Device presets: the numbers are the datasheet ones quoted in the
 * brief, and every cluster preset's types agree with them. */
static void test_device_presets(void)
{
    cluster_devtype *t;
    int n;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cluster_devtypes_load("profiles/devices.json", &t, &n, &e), CL_OK);
    const cluster_devtype *a100 = cluster_devtype_find(t, n, "A100-80GB");
    const cluster_devtype *v100 = cluster_devtype_find(t, n, "V100-32GB");
    const cluster_devtype *h100 = cluster_devtype_find(t, n, "H100-80GB");
    CU_ASSERT_PTR_NOT_NULL_FATAL(a100);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v100);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h100);
    CU_ASSERT_PTR_NOT_NULL(cluster_devtype_find(t, n, "cpu-core"));
    CU_ASSERT_PTR_NULL(cluster_devtype_find(t, n, "A100"));
    CU_ASSERT_EQUAL(v100->peak_fp32_flops, 15.7e12);
    CU_ASSERT_EQUAL(v100->peak_fp16_flops, 125e12);
    CU_ASSERT_EQUAL(v100->mem_bw_Bps, 900e9);
    CU_ASSERT_EQUAL(a100->peak_fp32_flops, 19.5e12);
    CU_ASSERT_EQUAL(a100->peak_fp16_flops, 312e12);
    CU_ASSERT_EQUAL(a100->mem_bw_Bps, 2039e9);
    CU_ASSERT_EQUAL(a100->mem_bytes, 80ull << 30);
    CU_ASSERT_EQUAL(h100->peak_fp32_flops, 67e12);
    CU_ASSERT_EQUAL(h100->peak_fp16_flops, 989e12);
    CU_ASSERT_EQUAL(h100->mem_bw_Bps, 3.35e12);
    for (int i = 0; i < n; i++) {
        CU_ASSERT(t[i].note[0] != '\0');  /* every preset names its source */
        CU_ASSERT_EQUAL(cluster_devtype_check(&t[i], t[i].name, &e), CL_OK);
    }
    for (int p = 0; p < N_PRESETS - 1; p++) {
        cluster c;
        CU_ASSERT_EQUAL_FATAL(cluster_load(&c, presets[p], &e), CL_OK);
        for (int k = 0; k < c.n_types; k++) {
            const cluster_devtype *d = cluster_devtype_find(t, n, c.types[k].name);
            CU_ASSERT_PTR_NOT_NULL(d);
            if (d) CU_ASSERT_EQUAL(memcmp(d, &c.types[k], sizeof *d), 0);
        }
        CU_ASSERT(c.links_note[0] != '\0');
        cluster_free(&c);
    }
    free(t);

    /* lookup by name through the default path (tests run from the root) */
    cluster_devtype one;
    CU_ASSERT_EQUAL(cluster_devtype_preset(NULL, "H100-80GB", &one, &e), CL_OK);
    CU_ASSERT_EQUAL(one.peak_fp16_flops, 989e12);
    CU_ASSERT_EQUAL(cluster_devtype_preset("profiles/devices.json", "B200", &one, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "unknown device \"B200\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "A100-80GB"));
}

/* Network cards: devices of a node use them in blocks (8 devices on 4
 * cards: 2 a card; 6 on 4: 0 0 1 2 2 3, card = place x 4 / 6); none
 * declared: -1. */
static void test_nics(void)
{
    cluster c;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cluster_load(&c, "tests/data/cluster/nics.json", &e), CL_OK);
    CU_ASSERT_EQUAL(c.nics_per_node, 4);
    const int want[14] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 6, 6, 7};
    for (int d = 0; d < 14; d++) CU_ASSERT_EQUAL(cluster_nic_of(&c, d), want[d]);
    /* written and read back: the same */
    cluster b;
    cJSON *j = cluster_to_json(&c);
    CU_ASSERT_EQUAL(cluster_from_json(&b, j, "mem", &e), CL_OK);
    cJSON_Delete(j);
    CU_ASSERT(same_cluster(&c, &b));
    cluster_free(&b);
    c.nics_per_node = 0;
    CU_ASSERT_EQUAL(cluster_nic_of(&c, 3), -1);
    cluster_free(&c);
}

static void test_uniform(void)
{
    cluster_devtype t = {.name = "g", .peak_fp32_flops = 1e12, .mem_bytes = 1 << 30,
                         .mem_bw_Bps = 1e11, .efficiency = 0.5};
    cluster_link intra = {1e10, 1e-6}, inter = {1e9, 1e-5}, none = {0, 0};
    cluster c, d;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cluster_uniform(&c, &t, 10, 4, intra, inter, &e), CL_OK);
    CU_ASSERT_EQUAL(c.n_nodes, 3);  /* 4 + 4 + 2 */
    CU_ASSERT_EQUAL(c.n_devices, 10);
    CU_ASSERT_EQUAL(c.devices[9].node, 2);
    CU_ASSERT_EQUAL(c.devices[3].node, 0);
    CU_ASSERT_EQUAL(c.devices[4].node, 1);
    CU_ASSERT_EQUAL(cluster_link_between(&c, 3, 4)->bw_Bps, 1e9);
    CU_ASSERT_EQUAL(cluster_link_between(&c, 4, 7)->bw_Bps, 1e10);
    cJSON *j = cluster_to_json(&c);
    CU_ASSERT_EQUAL(cluster_from_json(&d, j, "mem", &e), CL_OK);
    cJSON_Delete(j);
    CU_ASSERT(same_cluster(&c, &d));
    cluster_free(&c);
    cluster_free(&d);
    /* one node needs no inter-node link */
    CU_ASSERT_EQUAL(cluster_uniform(&c, &t, 3, 0, intra, none, &e), CL_OK);
    CU_ASSERT_EQUAL(c.n_nodes, 1);
    cluster_free(&c);
    /* ...and one given for a single node is dropped, as a file would */
    CU_ASSERT_EQUAL(cluster_uniform(&c, &t, 3, 8, intra, inter, &e), CL_OK);
    CU_ASSERT_EQUAL(c.links[CLUSTER_INTER].bw_Bps, 0);
    j = cluster_to_json(&c);
    CU_ASSERT_EQUAL(cluster_from_json(&d, j, "mem", &e), CL_OK);
    cJSON_Delete(j);
    CU_ASSERT(same_cluster(&c, &d));
    cluster_free(&c);
    cluster_free(&d);
    CU_ASSERT_EQUAL(cluster_uniform(&c, &t, 0, 0, intra, inter, &e), CL_EINPUT);
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(cluster_uniform(&c, &t, 4, 2, intra, none, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "inter-node"));
    cl_err_clear(&e);
    t.efficiency = 1.5;
    CU_ASSERT_EQUAL(cluster_uniform(&c, &t, 4, 2, intra, inter, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "efficiency"));
}

/* Each bad fixture fails with CL_EINPUT and a message starting with the
 * file and the JSON path of the offending value. */
static void test_bad_files(void)
{
    static const struct { const char *file, *want; } cases[] = {
        {"bad-dup-id.json", "nodes[1].devices[1].id: duplicate device id \"g1\", also used by nodes[0].devices[1]"},
        {"bad-dup-generated.json", "nodes[1].devices: duplicate device id \"n1.1\""},
        {"bad-unknown-type.json", "nodes[0].devices[1].type: unknown device type \"gpu-2\""},
        {"bad-bandwidth-zero.json", "links.intra_node.bandwidth_Bps: expected a positive number, got 0"},
        {"bad-negative-latency.json", "links.inter_node.latency_s: negative latency"},
        {"bad-efficiency.json", "device_types[0].efficiency: expected a fraction in (0, 1], got 1.5"},
        {"bad-format.json", "format: expected \"cleave-cluster\", got \"cleave-profile\""},
        {"bad-empty.json", "empty file"},
        {"bad-truncated.json", "truncated JSON"},
        {"bad-count-overflow.json", "nodes[1].devices.count: the cluster would have 1200000 devices"},
        {"bad-count-huge.json", "nodes[0].devices.count: 1e+30 is out of range"},
        {"bad-empty-node.json", "nodes[1].devices: empty"},
        {"bad-dup-type.json", "device_types[1].name: \"gpu\" is already the name of device_types[0]"},
        {"bad-dup-node.json", "nodes[1].name: \"n0\" is already the name of nodes[0]"},
        {"bad-missing-inter.json", "links.inter_node: missing, and the cluster has 2 nodes"},
        {"bad-memory-negative.json", "device_types[0].memory_bytes: -5 is out of range"},
        {"bad-typo.json", "links.intra_node.bandwith_Bps: unknown member"},
        {"bad-nics-zero.json", "links.inter_node.nics_per_node: 0 is out of range"},
        {"bad-nics-intra.json", "links.intra_node.nics_per_node: unknown member"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256], want[512];
        snprintf(path, sizeof path, "tests/data/cluster/%s", cases[i].file);
        snprintf(want, sizeof want, "%s: %s", path, cases[i].want);
        cluster c;
        cl_err e = {0};
        int rc = cluster_load(&c, path, &e);
        CU_ASSERT_EQUAL(rc, CL_EINPUT);
        CU_ASSERT_EQUAL(strncmp(e.msg, want, strlen(want)), 0);
        if (strncmp(e.msg, want, strlen(want)) != 0)
            fprintf(stderr, "\n  %s\n  got:  %s\n  want: %s...\n", cases[i].file, e.msg, want);
        CU_ASSERT_PTR_NULL(c.devices);  /* nothing left to free */
    }
}

static void test_cli(void)
{
    char *out, *err;
    int rc = test_run_cli("inspect profiles/clusters/dgx-a100-4nodes.json", &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "totals: 32 devices"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "A100-80GB"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "24 GB/s"));
    CU_ASSERT_PTR_NULL(strstr(out, "network cards")); /* none declared */
    free(out);
    free(err);
    rc = test_run_cli("inspect tests/data/cluster/nics.json", &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n  4 network cards a node, each at the inter-node bandwidth"));
    free(out);
    free(err);
    rc = test_run_cli("inspect --json profiles/clusters/v100-8-pcie.json", &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    cJSON *j = cJSON_Parse(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    const cJSON *tot = cJSON_GetObjectItem(j, "totals");
    CU_ASSERT_EQUAL(cJSON_GetObjectItem(tot, "devices")->valuedouble, 8);
    CU_ASSERT_EQUAL(cJSON_GetObjectItem(tot, "peak_fp32_flops")->valuedouble, 8 * 14e12);
    cJSON_Delete(j);
    free(out);
    free(err);
    rc = test_run_cli("inspect tests/data/cluster/bad-dup-id.json", &out, &err);
    CU_ASSERT_EQUAL(rc, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cleave: tests/data/cluster/bad-dup-id.json: nodes[1].devices[1].id:"));
    CU_ASSERT_EQUAL(out[0], '\0');
    free(out);
    free(err);
}

TEST_SUITE(cluster)
{
    test_add_suite("cluster");
    test_add("round trip of every preset and fixture", test_round_trip);
    test_add("cluster_copy equals the original and shares nothing", test_copy);
    test_add("contents, links between devices, effective FLOP/s", test_contents);
    test_add("device presets: datasheet figures, lookup, agreement", test_device_presets);
    test_add("network cards per node, shared in blocks", test_nics);
    test_add("uniform clusters from flags", test_uniform);
    test_add("bad cluster files name file and JSON path", test_bad_files);
    test_add("cleave inspect on clusters", test_cli);
}
