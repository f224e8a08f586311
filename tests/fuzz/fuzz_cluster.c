/* fuzz_cluster.c - cluster files: jx_parse_text then cluster_from_json.
 *
 * A cluster that loads must serialise and load again to the same text, and
 * every device must point at a real type and node (profiles/cluster.h). */
#include <stdlib.h>

#include <cJSON.h>

#include "profiles/cluster.h"
#include "fuzz.h"

static cJSON *cluster_reload(const cJSON *doc, cl_err *e, void *ctx)
{
    const cluster *first = ctx;
    cluster c;
    if (cluster_from_json(&c, doc, "round-trip.json", e) != CL_OK) return NULL;
    if (c.n_devices != first->n_devices || c.n_nodes != first->n_nodes || c.n_types != first->n_types)
        fuzz_fail("cluster", "reloaded cluster has other device, node or type counts");
    cJSON *out = cluster_to_json(&c);
    cluster_free(&c);
    return out;
}

FUZZ_TARGET(cluster)
{
    cJSON *root;
    int rc = fuzz_parse("cluster", data, size, &root);
    if (rc) return rc;
    cl_err e = {0};
    cluster c;
    rc = fuzz_check("cluster", FUZZ_FILE, cluster_from_json(&c, root, FUZZ_FILE, &e), &e);
    cJSON_Delete(root);
    if (rc) {
        fuzz_check_freed("cluster", (const void *[]){c.types, c.node_names, c.devices}, 3);
        return rc;
    }
    if (c.n_devices < 1 || c.n_nodes < 1 || c.n_types < 1)
        fuzz_fail("cluster", "loaded a cluster without devices, nodes or types");
    for (int d = 0; d < c.n_devices; d++) {
        const cluster_device *dv = &c.devices[d];
        if (dv->type < 0 || dv->type >= c.n_types || dv->node < 0 || dv->node >= c.n_nodes)
            fuzz_fail("cluster", "device %d names type %d, node %d", d, dv->type, dv->node);
        const cluster_link *l = cluster_link_between(&c, 0, d);
        if (!(l->bw_Bps > 0))
            fuzz_fail("cluster", "devices 0 and %d are joined by a link of bandwidth %g", d, l->bw_Bps);
    }
    for (int t = 0; t < c.n_types; t++) {
        cl_err te = {0};
        if (cluster_devtype_check(&c.types[t], "type", &te) != CL_OK)
            fuzz_fail("cluster", "loaded type %d fails cluster_devtype_check: %s", t, te.msg);
    }
    fuzz_round_trip("cluster", cluster_to_json(&c), cluster_reload, &c);
    cluster_free(&c);
    return rc;
}
