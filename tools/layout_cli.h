/* layout_cli.h - the inputs `cleave plan --layout` and `cleave sim --layout`
 * share: a model, a cluster (a file or the quick --devices flags) and a
 * layout (planner/layout.h), loaded and evaluated the same way for both.
 */
#ifndef CL_LAYOUT_CLI_H
#define CL_LAYOUT_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "planner/search.h"
#include "profiles/cluster.h"

/* Links of a cluster built from --devices when --bandwidth/--latency are
 * not given: 10 GB/s and 10 us inside a node (PCIe-class), 1.25 GB/s and
 * 50 us between nodes (10 Gb/s Ethernet).  Printed with every plan. */
#define DEF_INTRA_BPS 10e9
#define DEF_INTRA_LAT 10e-6
#define DEF_INTER_BPS 1.25e9
#define DEF_INTER_LAT 50e-6

/* The cluster of n devices of type t, k per node (0: one node), with the
 * links bw[0], lat[0] inside a node and bw[1], lat[1] between nodes; the
 * line that describes the links into links[0..cap) (saying they are the
 * defaults unless bw_given). */
int layout_quick_cluster(cluster *cl, const cluster_devtype *t, int n, int k, const double bw[2],
                         const double lat[2], int bw_given, char *links, size_t cap, cl_err *e);

typedef struct layout_inputs {
    const char *cmd;        /* "plan" or "sim", for usage errors          */
    const char *layout;     /* the --layout text                          */
    const char *model, *cluster, *device, *bandwidth, *latency;
    int64_t devices, per_node, batch;
    int optimizer, precision, zero, comm; /* zero -1: the layout's or 0 */
    int attention;          /* a prof_attn                                */
    int grad_acc;           /* --grad-accumulation: 0 fused, 1 separate   */
    int grad_reduce;        /* --grad-reduce-bytes; 0: the default        */
    int framework;          /* --for: a plan_for (PLAN_FOR_ANY: none)     */
} layout_inputs;

/* Load the model and the cluster of `in`, and evaluate the layout on them
 * (plan_fixed_eval; costs derived for the cluster's first device type or
 * --device).  *res as plan_fixed_eval's; links gets the quick cluster's
 * line ("" for a cluster file); nofit "" or the "does not fit" line.
 * Returns CL_OK, a usage error's exit status (printed already), or an
 * error in e (not printed). */
int layout_cli_eval(const layout_inputs *in, plan_result *res, char *links, size_t links_cap, char *nofit,
                    size_t nofit_cap, cl_err *e);

#endif
