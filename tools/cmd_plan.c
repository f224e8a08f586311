/* cmd_plan.c - `cleave plan`: find the best partition, devices, microbatches
 * and schedule for a model on a cluster; print it as a table and write the
 * plan JSON (docs/planner.md, docs/formats.md "Plan").
 *
 * Inputs: --model and/or --profile (a cleave profile, or a PipeDream
 * graph.txt, which is a whole model and profile by itself), and --cluster or
 * the quick-question flags --devices N [--per-node K] [--bandwidth B[,B2]]
 * [--device TYPE].  Without a profile the costs are derived from the model
 * by the roofline of the device type.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/model.h"
#include "planner/search.h"
#include "profiles/cluster.h"
#include "profiles/pipedream.h"
#include "profiles/profile.h"
#include "base/budget.h"
#include "cli.h"
#include "base/fileio.h"
#include "base/units.h"

/* Links of a cluster built from --devices when --bandwidth/--latency are
 * not given: 10 GB/s and 10 us inside a node (PCIe-class), 1.25 GB/s and
 * 50 us between nodes (10 Gb/s Ethernet).  Printed with every plan. */
#define DEF_INTRA_BPS 10e9
#define DEF_INTRA_LAT 10e-6
#define DEF_INTER_BPS 1.25e9
#define DEF_INTER_LAT 50e-6

static int help(void)
{
    printf(
        "usage: cleave plan [--model M.json] [--profile P.json|graph.txt] [--cluster C.json]\n"
        "                   [--devices N [--per-node K] [--bandwidth B[,B2]] [--latency L[,L2]]]\n"
        "                   [--device TYPE] [--profiled-on TYPE] [--batch B]\n"
        "                   [--schedule gpipe|1f1b|interleaved|zb-h1|pipedream|fbp|sequential|auto]\n"
        "                   [--microbatches m|auto] [--stages p] [--chunks v] [--algo auto|exact|merge]\n"
        "                   [--optimizer sgd|momentum|adam] [--comm on|off] [--no-replication]\n"
        "                   [--max-cuts N] [--max-seconds S] [-o plan.json]\n\n"
        "Finds the partition of the layers into pipeline stages, the devices (and\n"
        "replicas) of each stage, the microbatch count and the schedule that train\n"
        "fastest within each device's memory, prints it and writes the plan.\n\n"
        "  --profile        a cleave profile, or a PipeDream graph.txt (then no --model)\n"
        "  --devices N      a quick cluster of N devices of --device TYPE (a preset from\n"
        "                   profiles/devices.json; default: the profile's device), K per\n"
        "                   node, links B (and B2 between nodes) bytes/s\n"
        "  --profiled-on    the device type the profile was measured on (for mixed clusters)\n"
        "  --comm off       leave communication out of every cost (to compare with tools\n"
        "                   that do)\n"
        "  --algo           exact: optimal partition; merge: the method's partition-and-merge;\n"
        "                   auto (default): both, report the gap, keep the faster\n"
        "  --chunks v       model chunks per device for --schedule interleaved (default 2;\n"
        "                   a balanced chunk split, not the exact search)\n"
        "  --max-cuts N     cap on the cuts listed for a branching model (default 100000)\n"
        "  --max-seconds S  stop with an error after S seconds of real time (default 600)\n");
    return 0;
}

/* "B" or "B,B2" into a[0], a[1] (a[1] = a[0] when absent). */
static int two_nums(const char *opt, const char *s, double lo, double *a)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    char *comma = strchr(buf, ',');
    if (comma) *comma = '\0';
    int rc = cli_num("plan", opt, buf, lo, 1e300, &a[0]);
    if (rc) return rc;
    a[1] = a[0];
    if (comma) rc = cli_num("plan", opt, comma + 1, lo, 1e300, &a[1]);
    return rc;
}

static int is_pipedream(const char *path)
{
    size_t n = strlen(path);
    return n > 4 && strcmp(path + n - 4, ".txt") == 0;
}

/* The table's memory columns: "812 KiB", "3.4 MiB", "1.25 GiB", "2.1 PB". */
static const cl_bytes_style table_bytes = {.lo = CL_KIB, .hi = CL_GIB, .grow = 1, .pb = 1e15};

/* "3" / "0-3" / "0,2,5" */
static void dev_list(char *buf, size_t cap, const plan_stage *st)
{
    int contiguous = 1;
    for (int r = 1; r < st->n_replicas; r++) contiguous &= st->devices[r] == st->devices[r - 1] + 1;
    if (st->n_replicas == 1) snprintf(buf, cap, "%d", st->devices[0]);
    else if (contiguous) snprintf(buf, cap, "%d-%d", st->devices[0], st->devices[st->n_replicas - 1]);
    else {
        size_t at = 0;
        buf[0] = '\0';
        for (int r = 0; r < st->n_replicas && at + 12 < cap; r++)
            at += (size_t)snprintf(buf + at, cap - at, r ? ",%d" : "%d", st->devices[r]);
    }
}

static void print_plan(const plan_request *rq, const plan_result *res, const char *quick_links)
{
    const plan *p = &res->plan;
    const model *m = &p->model;
    const cluster *c = &p->cluster;
    printf("plan: %s on %s (%d device%s in %d node%s), batch %d = %d microbatch%s of %d, schedule %s, %s search\n",
           m->name, c->name, c->n_devices, c->n_devices == 1 ? "" : "s", c->n_nodes,
           c->n_nodes == 1 ? "" : "s", p->batch, p->n_micro, p->n_micro == 1 ? "" : "es",
           p->microbatch, sched_kind_name(p->schedule), res->algo);
    if (quick_links) printf("links: %s\n", quick_links);
    if (!rq->comm) printf("communication: left out (--comm off)\n");
    printf("\n%-5s  %-44s %-8s %11s %11s %10s %10s %5s\n", "stage", "layers", "devices",
           "compute_s", "comm_s", "memory", "capacity", "util");
    for (int s = 0; s < p->n_stages; s++) {
        const plan_stage *st = &p->stages[s];
        char lay[96], dv[48], mem[24], cap[24];
        const char *a = m->layers[st->first].name, *b = m->layers[st->last].name;
        if (st->last - st->first + 1 == st->n_layers)
            snprintf(lay, sizeof lay, "%d-%d %.16s..%.16s", st->first, st->last, a, b);
        else
            snprintf(lay, sizeof lay, "%d layers %.16s..%.16s", st->n_layers, a, b);
        dev_list(dv, sizeof dv, st);
        cl_fmt_bytes(mem, sizeof mem, st->mem_bytes, table_bytes);
        double capb = HUGE_VAL;
        for (int r = 0; r < st->n_replicas; r++)
            capb = fmin(capb, (double)c->types[c->devices[st->devices[r]].type].mem_bytes);
        if (capb >= 9e15) snprintf(cap, sizeof cap, "unknown");
        else cl_fmt_bytes(cap, sizeof cap, capb, table_bytes);
        double busy = (double)p->n_micro / st->n_replicas * (st->fwd_s + st->bwd_in_s + st->bwd_w_s);
        double util = p->pred.iteration_s > 0 ? busy / p->pred.iteration_s : 0;
        printf("%-5d  %-44s %-8s %11.6f %11.6f %10s %10s %4.0f%%\n", s, lay, dv, st->compute_s,
               st->comm_s, mem, cap, 100 * util);
    }
    printf("\nslowest stage: %.6f s per iteration (%s %d)\n", res->bottleneck_s,
           res->bottleneck_is_boundary ? "boundary after stage" : "stage", res->bottleneck_stage);
    printf("predicted: iteration %.6f s, throughput %.1f samples/s, bubble %.1f%%, speed-up %.2fx over one device\n",
           p->pred.iteration_s, p->pred.throughput, 100 * p->pred.bubble, p->pred.speedup);
    if (p->idle_why[0])
        printf("devices: uses %d of %d: %s\n", res->devices_used, c->n_devices, p->idle_why);
    if (!isnan(res->exact_s) && !isnan(res->merge_s))
        printf("exact search: slowest stage %.6f s; partition-and-merge: %.6f s (gap %+.2f%%)\n",
               res->exact_s, res->merge_s, 100 * (res->merge_s - res->exact_s) / res->exact_s);
    else if (!isnan(res->exact_s))
        printf("exact search: slowest stage %.6f s (partition-and-merge found nothing that fits)\n", res->exact_s);
    else if (!isnan(res->merge_s))
        printf("partition-and-merge: slowest stage %.6f s (exact search not run)\n", res->merge_s);
    if (m->is_dag)
        printf("cuts: %s (%d)\n", res->cuts_dag ? "every downset of the layer graph" : "prefixes of one topological order",
               res->lattice_sets);
    for (int i = 0; i < res->n_notes; i++) printf("note: %s\n", res->notes[i]);
}

int cmd_plan(int argc, char **argv)
{
    const char *model_path = NULL, *prof_path = NULL, *cluster_path = NULL, *out = NULL;
    const char *device = NULL, *profiled_on = NULL;
    int64_t devices = 0, per_node = 0, batch = 0, micro = 0, stages = 0, max_cuts = 0;
    double bw[2] = {DEF_INTRA_BPS, DEF_INTER_BPS}, lat[2] = {DEF_INTRA_LAT, DEF_INTER_LAT};
    double max_seconds = CL_BUDGET_DEFAULT_S;
    int bw_given = 0, lat_given = 0, rc;
    plan_request rq = {.schedule = -1, .algo = PLAN_ALGO_AUTO, .optimizer = OPTIM_SGD, .comm = 1,
                       .replication = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                                                                     \
    do {                                                                                 \
        if (!v) return cli_usage_error("plan", "%s needs a value", a);                   \
        i++;                                                                             \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return help();
        else if (!strcmp(a, "--model")) { NEED_VALUE(); model_path = v; }
        else if (!strcmp(a, "--profile")) { NEED_VALUE(); prof_path = v; }
        else if (!strcmp(a, "--cluster")) { NEED_VALUE(); cluster_path = v; }
        else if (!strcmp(a, "-o") || !strcmp(a, "--out")) { NEED_VALUE(); out = v; }
        else if (!strcmp(a, "--device")) { NEED_VALUE(); device = v; }
        else if (!strcmp(a, "--profiled-on")) { NEED_VALUE(); profiled_on = v; }
        else if (!strcmp(a, "--devices")) {
            NEED_VALUE();
            if ((rc = cli_int("plan", a, v, 1, CLUSTER_MAX_DEVICES, &devices))) return rc;
        } else if (!strcmp(a, "--per-node")) {
            NEED_VALUE();
            if ((rc = cli_int("plan", a, v, 1, CLUSTER_MAX_DEVICES, &per_node))) return rc;
        } else if (!strcmp(a, "--bandwidth")) {
            NEED_VALUE();
            if ((rc = two_nums(a, v, 1e-300, bw))) return rc;
            bw_given = 1;
        } else if (!strcmp(a, "--latency")) {
            NEED_VALUE();
            if ((rc = two_nums(a, v, 0, lat))) return rc;
            lat_given = 1;
        } else if (!strcmp(a, "--batch")) {
            NEED_VALUE();
            if ((rc = cli_int("plan", a, v, 1, 1 << 30, &batch))) return rc;
        } else if (!strcmp(a, "--microbatches")) {
            NEED_VALUE();
            if (strcmp(v, "auto") != 0 && (rc = cli_int("plan", a, v, 1, 1 << 30, &micro))) return rc;
        } else if (!strcmp(a, "--chunks")) {
            NEED_VALUE();
            int64_t v2;
            if ((rc = cli_int("plan", a, v, 1, 64, &v2))) return rc;
            rq.chunks = (int)v2;
        } else if (!strcmp(a, "--stages")) {
            NEED_VALUE();
            if ((rc = cli_int("plan", a, v, 1, CLUSTER_MAX_DEVICES, &stages))) return rc;
        } else if (!strcmp(a, "--max-cuts")) {
            NEED_VALUE();
            if ((rc = cli_int("plan", a, v, 2, (int64_t)1 << 30, &max_cuts))) return rc;
        } else if (!strcmp(a, "--max-seconds")) {
            NEED_VALUE();
            if ((rc = cli_num("plan", a, v, 0, 1e7, &max_seconds))) return rc;
        } else if (!strcmp(a, "--schedule")) {
            NEED_VALUE();
            if (strcmp(v, "auto") != 0) {
                rq.schedule = sched_kind_from_name(v);
                if (rq.schedule < 0)
                    return cli_usage_error("plan", "--schedule: unknown schedule \"%s\" (gpipe, 1f1b, interleaved, zb-h1, pipedream, fbp, sequential, auto)", v);
            }
        } else if (!strcmp(a, "--algo")) {
            NEED_VALUE();
            int al = plan_algo_from_name(v);
            if (al < 0) return cli_usage_error("plan", "--algo: expected auto, exact or merge, got \"%s\"", v);
            rq.algo = (plan_algo)al;
        } else if (!strcmp(a, "--optimizer")) {
            NEED_VALUE();
            int o = plan_optim_from_name(v);
            if (o < 0) return cli_usage_error("plan", "--optimizer: expected sgd, momentum or adam, got \"%s\"", v);
            rq.optimizer = (plan_optim)o;
        } else if (!strcmp(a, "--comm")) {
            NEED_VALUE();
            if (!strcmp(v, "off")) rq.comm = 0;
            else if (!strcmp(v, "on")) rq.comm = 1;
            else return cli_usage_error("plan", "--comm: expected on or off, got \"%s\"", v);
        } else if (!strcmp(a, "--no-replication")) rq.replication = 0;
        else return cli_usage_error("plan", "unknown option %s", a);
#undef NEED_VALUE
    }
    if (!model_path && !prof_path)
        return cli_usage_error("plan", "give --model and/or --profile");
    if (!cluster_path && !devices)
        return cli_usage_error("plan", "give --cluster C.json or --devices N");
    if (cluster_path && (devices || per_node || bw_given || lat_given || device))
        return cli_usage_error("plan", "--cluster and the quick-cluster flags (--devices, --per-node, --bandwidth, --latency, --device) exclude each other");
    if (!devices && (per_node || bw_given || lat_given))
        return cli_usage_error("plan", "--per-node, --bandwidth and --latency describe a --devices cluster");
    if (prof_path && model_path && is_pipedream(prof_path))
        return cli_usage_error("plan", "a PipeDream profile is the model too: drop --model");

    cl_err e = {0};
    cl_budget_start(max_seconds, "--max-seconds"); /* loading, search and ranking */
    model md = {0};
    prof pf = {0};
    cluster cl = {0};
    cluster_devtype dev_type, ref_type, *ref = NULL;
    int have_prof = 0;
    char links[256] = "", *quick = NULL, derived_from[CLUSTER_NAME_MAX + 256] = "";
    /* model and profile */
    if (prof_path && is_pipedream(prof_path)) {
        if ((rc = pipedream_import(prof_path, 0, &md, &pf, NULL, &e))) goto fail;
        have_prof = 1;
    } else {
        if (!model_path) {
            rc = cli_usage_error("plan", "a cleave profile needs its --model");
            goto done;
        }
        if ((rc = model_load(&md, model_path, &e))) goto fail;
        if (prof_path) {
            if ((rc = prof_load(&pf, prof_path, &e))) goto fail;
            if ((rc = prof_check_model(&pf, &md, prof_path, &e))) goto fail;
            have_prof = 1;
        }
    }
    /* the device type of a quick cluster */
    if (devices) {
        if (device) {
            if ((rc = cluster_devtype_preset(NULL, device, &dev_type, &e))) goto fail;
        } else if (have_prof && cluster_devtype_preset(NULL, pf.device, &dev_type, &(cl_err){0}) == CL_OK) {
            /* the profile's device is a preset */
        } else if (have_prof) {
            /* the device the profile was taken on, memory unknown */
            memset(&dev_type, 0, sizeof dev_type);
            snprintf(dev_type.name, sizeof dev_type.name, "%s", pf.device[0] ? pf.device : "profiled");
            dev_type.peak_fp32_flops = 1e12;
            dev_type.mem_bytes = (uint64_t)1 << 53;
            dev_type.mem_bw_Bps = 1e12;
            dev_type.efficiency = 1;
            snprintf(dev_type.note, sizeof dev_type.note,
                     "the device the profile was measured on; its memory is unknown, so memory is not limited (give --device TYPE to check it)");
        } else {
            rc = cli_usage_error("plan", "without a profile, --devices needs --device TYPE (a preset from profiles/devices.json) to derive costs");
            goto done;
        }
        cluster_link li = {bw[0], lat[0]}, le = {bw[1], lat[1]};
        if ((rc = cluster_uniform(&cl, &dev_type, (int)devices, (int)per_node, li, le, &e))) goto fail;
        if (cl.n_nodes > 1)
            snprintf(links, sizeof links, "%.4g B/s, %.3g s inside a node; %.4g B/s, %.3g s between nodes%s",
                     bw[0], lat[0], bw[1], lat[1], bw_given ? "" : " (defaults; set --bandwidth)");
        else
            snprintf(links, sizeof links, "%.4g B/s, %.3g s%s", bw[0], lat[0],
                     bw_given ? "" : " (default; set --bandwidth)");
        quick = links;
    } else {
        if ((rc = cluster_load(&cl, cluster_path, &e))) goto fail;
    }
    /* the reference device: --profiled-on, the profile's device if the
     * cluster has it or it is a preset; without a profile, the type the
     * costs are derived for */
    if (profiled_on) {
        const cluster_devtype *t = cluster_devtype_find(cl.types, cl.n_types, profiled_on);
        if (t) ref_type = *t;
        else if ((rc = cluster_devtype_preset(NULL, profiled_on, &ref_type, &e))) goto fail;
        ref = &ref_type;
    } else if (have_prof) {
        const cluster_devtype *t = cluster_devtype_find(cl.types, cl.n_types, pf.device);
        if (t) {
            ref_type = *t;
            ref = &ref_type;
        } else if (cluster_devtype_preset(NULL, pf.device, &ref_type, &(cl_err){0}) == CL_OK) {
            ref = &ref_type;
        }
    }
    if (batch == 0) {
        int b = 0;
        if (have_prof && (rc = prof_default_batch(&pf, prof_path, &b, &e))) goto fail;
        batch = b;
        if (batch < 1) batch = 64;
    }
    if (!have_prof && micro && batch % micro) { /* no microbatch size to derive costs at */
        rc = cli_usage_error("plan", "--microbatches %lld does not divide the batch of %lld (pick a divisor, or auto)",
                             (long long)micro, (long long)batch);
        goto done;
    }
    if (!have_prof) {
        /* derive at every microbatch size the search may try */
        const cluster_devtype *t = &cl.types[cl.devices[0].type];
        if (device) t = &dev_type;
        double pts[PROF_MAX_POINTS];
        int np = 0;
        for (int64_t d = 1; d <= batch && np < PROF_MAX_POINTS; d++)
            if (batch % d == 0 && (micro == 0 || d == batch / micro)) pts[np++] = (double)d;
        if ((rc = prof_derive(&pf, &md, t, pts, np, &e))) goto fail;
        ref_type = *t;
        ref = &ref_type;
        snprintf(derived_from, sizeof derived_from,
                 "%s: device type \"%s\" (peak_fp32_flops %g, efficiency %g, memory_bw_Bps %g; the layer costs are derived from it)",
                 cluster_path ? cluster_path : "--device", t->name, t->peak_fp32_flops, t->efficiency,
                 t->mem_bw_Bps);
    }
    rq.prof_origin = have_prof ? prof_path : derived_from;
    rq.cluster_origin = cluster_path ? cluster_path : "the --devices cluster (--device, --bandwidth, --latency)";
    rq.model = &md;
    rq.prof = &pf;
    rq.cluster = &cl;
    rq.ref_type = ref;
    rq.batch = (int)batch;
    rq.microbatches = (int)micro;
    rq.stages = (int)stages;
    rq.max_downsets = max_cuts;
    plan_result res;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if ((rc = plan_search(&rq, &res, &e))) goto fail;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    print_plan(&rq, &res, quick);
    printf("planned in %.3f s (%d candidates, %lld exact-search steps; exact %.3f s, bounds %.3f s, "
           "merge %.3f s, ranking %.3f s)\n",
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), res.candidates,
           (long long)res.exact_steps, res.time_exact_s, res.time_lower_s, res.time_merge_s,
           res.time_rank_s);
    if (out) {
        rc = plan_save(&res.plan, out, &e);
        if (!rc) printf("wrote %s\n", out);
    }
    plan_result_free(&res);
    if (rc) goto fail;
    goto done;
fail:
    rc = cli_report(&e);
done:
    model_free(&md);
    prof_free(&pf);
    cluster_free(&cl);
    return rc;
}
