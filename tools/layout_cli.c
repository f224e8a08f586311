/* layout_cli.c - model, cluster and layout of `plan/sim --layout`
 * (layout_cli.h). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "layout_cli.h"
#include "models/model.h"
#include "planner/layout.h"

int layout_quick_cluster(cluster *cl, const cluster_devtype *t, int n, int k, const double bw[2],
                         const double lat[2], int bw_given, char *links, size_t cap, cl_err *e)
{
    cluster_link li = {bw[0], lat[0]}, le = {bw[1], lat[1]};
    int rc = cluster_uniform(cl, t, n, k, li, le, e);
    if (rc) return rc;
    if (cl->n_nodes > 1)
        snprintf(links, cap, "%.4g B/s, %.3g s inside a node; %.4g B/s, %.3g s between nodes%s", bw[0], lat[0],
                 bw[1], lat[1], bw_given ? "" : " (defaults; set --bandwidth)");
    else
        snprintf(links, cap, "%.4g B/s, %.3g s%s", bw[0], lat[0], bw_given ? "" : " (default; set --bandwidth)");
    return CL_OK;
}

int layout_cli_eval(const layout_inputs *in, plan_result *res, char *links, size_t links_cap, char *nofit,
                    size_t nofit_cap, cl_err *e)
{
    const char *cmd = in->cmd;
    double bw[2] = {DEF_INTRA_BPS, DEF_INTER_BPS}, lat[2] = {DEF_INTRA_LAT, DEF_INTER_LAT};
    int n_bw = 0, n_lat = 0, rc;
    links[0] = 0;
    if (!in->model) return cli_usage_hint(cmd, "--model M.json", "--layout needs the model");
    if (!in->cluster && !in->devices) return cli_usage_error(cmd, "--layout needs --cluster C.json or --devices N");
    if (in->cluster && (in->devices || in->per_node || in->bandwidth || in->latency || in->device))
        return cli_usage_error(cmd, "--cluster and the quick-cluster flags (--devices, --per-node, --bandwidth, --latency, --device) exclude each other");
    if (in->devices && !in->device)
        return cli_usage_error(cmd, "--layout with --devices needs --device TYPE (a preset from profiles/devices.json) to derive costs");
    if ((in->bandwidth && (rc = cli_num_pair(cmd, "--bandwidth", in->bandwidth, 1e-300, bw, &n_bw))) ||
        (in->latency && (rc = cli_num_pair(cmd, "--latency", in->latency, 0, lat, &n_lat))))
        return rc;
    if (n_bw == 1) bw[1] = bw[0];
    if (n_lat == 1) lat[1] = lat[0];
    plan_fixed fx;
    if ((rc = plan_fixed_parse(in->layout, "--layout", &fx, e))) return rc;
    fx.attn = in->attention;
    model md = {0};
    cluster cl = {0};
    cluster_devtype dt;
    if ((rc = model_load(&md, in->model, e))) return rc;
    if (in->devices) {
        if (!(rc = cluster_devtype_preset(NULL, in->device, &dt, e)))
            rc = layout_quick_cluster(&cl, &dt, (int)in->devices, (int)in->per_node, bw, lat, in->bandwidth != NULL,
                                      links, links_cap, e);
    } else if (!(rc = cluster_load(&cl, in->cluster, e))) {
        dt = cl.types[cl.devices[0].type];
    }
    if (!rc) {
        plan_request rq = {.model = &md, .cluster = &cl, .ref_type = &dt, .batch = (int)in->batch,
                           .optimizer = (plan_optim)in->optimizer, .precision = (plan_prec)in->precision,
                           .zero = in->zero > 0 ? in->zero : 0, .comm = in->comm, .replication = 1,
                           .grad_reduce = in->grad_reduce, .framework = (plan_for)in->framework,
                           .wgrad_acc = in->grad_acc ? plan_grad_acc_bytes(md.dtype, (plan_prec)in->precision,
                                                                           (plan_for)in->framework, in->grad_reduce)
                                                     : 0,
                           .model_origin = in->model, .cluster_origin = in->cluster ? in->cluster : "--devices",
                           .prof_origin = "the costs derived for the device type"};
        rc = plan_fixed_eval(&rq, &fx, "--layout", res, nofit, nofit_cap, e);
    }
    model_free(&md);
    cluster_free(&cl);
    return rc;
}
