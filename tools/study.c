/* study.c - plan and simulate a model on clusters (study.h). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/budget.h"
#include "cli.h"
#include "base/escape.h"
#include "planner/export.h"
#include "planner/tensor.h"
#include "profiles/tfm_time.h"
#include "study.h"

/* Device memory at or above this is "unknown" (quick clusters built from a
 * profile's device use 2^53 bytes for "not limited"). */
#define STUDY_MEM_UNKNOWN 9e15

int study_load(study *s, const char *model_path, const char *prof_path, int batch, cl_err *e)
{
    memset(s, 0, sizeof *s);
    s->optimizer = OPTIM_SGD;
    s->replication = 1;
    s->tro.t = 1; /* the model whole until study_args_load says otherwise */
    int rc = model_load(&s->md, model_path, e);
    if (rc) return rc;
    if (prof_path) {
        if ((rc = prof_load(&s->pf, prof_path, e))) {
            study_free(s);
            return rc;
        }
        s->have_prof = 1; /* owned from here, so study_free releases it */
        if ((rc = prof_check_model(&s->pf, &s->md, prof_path, e))) {
            study_free(s);
            return rc;
        }
        /* a rank profile prices one rank of groups of t, which the sweeps'
         * clusters are not (read as a whole model it would be wrong) */
        if (s->pf.tensor > 1 || s->pf.recompute) {
            int t = s->pf.tensor > 1 ? s->pf.tensor : 1, r = s->pf.recompute;
            study_free(s);
            return cl_fail(e, CL_EINPUT, "%s: tensor: a rank profile (rank 0's share at tensor %d, recompute %s); sweep and compare plan from whole-model profiles (hint: cleave plan --profile plans from it, one device count at a time)",
                           prof_path, t, tfm_recomp_name((tfm_recomp)r));
        }
    }
    if (batch <= 0 && s->have_prof && (rc = prof_default_batch(&s->pf, prof_path, &batch, e))) {
        study_free(s);
        return rc;
    }
    s->batch = batch > 0 ? batch : 64;
    return CL_OK;
}

void study_free(study *s)
{
    if (s->per_rank) model_free(&s->rank_md);
    if (!s->borrowed) {
        model_free(&s->md);
        if (s->have_prof) prof_free(&s->pf);
    }
    memset(s, 0, sizeof *s);
}

int study_cands(const study *s, int max_t, tfm_rank_opts *out, int cap)
{
    int t0 = s->t_auto ? 1 : s->tro.t, t1 = s->t_auto ? (max_t < 1024 ? max_t : 1024) : s->tro.t;
    int r0 = s->r_auto ? 0 : (int)s->tro.recomp, r1 = s->r_auto ? TFM_RECOMP_FULL : r0;
    int n = 0;
    for (int t = t0; t <= t1; t++)
        for (int r = r0; r <= r1 && n < cap; r++) {
            tfm_rank_opts o = s->tro;
            o.t = t;
            o.recomp = (tfm_recomp)r;
            o.sp = s->tro.sp && t > 1;
            cl_err ignored = {0};
            if ((s->t_auto || s->r_auto) && tfm_rank_check(&s->md, &o, s->md.name, &ignored))
                continue; /* not a t this model allows */
            out[n++] = o;
        }
    return n;
}

int study_with(const study *s, const tfm_rank_opts *o, study *out, cl_err *e)
{
    *out = *s;
    out->borrowed = 1;
    out->t_auto = out->r_auto = 0;
    out->tro = *o;
    out->per_rank = 0;
    memset(&out->rank_md, 0, sizeof out->rank_md);
    if (tfm_rank_reprices(o)) {
        int rc = tfm_rank_model(&out->rank_md, &s->md, o, s->md.name, e);
        if (rc) return rc;
        out->per_rank = 1;
    }
    return CL_OK;
}

int study_cand_studies(const study *s, int max_t, study **cs, int *nc, cl_err *e)
{
    tfm_rank_opts *o = cl_malloc(STUDY_MAX_CANDS * sizeof *o);
    *nc = study_cands(s, max_t, o, STUDY_MAX_CANDS);
    *cs = cl_calloc((size_t)(*nc ? *nc : 1), sizeof **cs);
    int rc = CL_OK;
    for (int i = 0; i < *nc && !rc; i++) rc = study_with(s, &o[i], &(*cs)[i], e);
    free(o);
    return rc;
}

void study_cands_free(study *cs, int nc)
{
    for (int i = 0; i < nc && cs; i++) study_free(&cs[i]);
    free(cs);
}

/* A point no candidate could be asked on. */
static void no_cands(char *reason, size_t cap, const cluster *c)
{
    snprintf(reason, cap, "no tensor-parallel degree of the model fits %d devices", c->n_devices);
}

int study_better(const study_point *a, const study_point *b)
{
    return a->ok && (!b->ok || a->sim.throughput > b->sim.throughput * (1 + 1e-9) ||
                     (a->sim.throughput >= b->sim.throughput * (1 - 1e-9) && a->peak_mem_bytes < b->peak_mem_bytes));
}

void study_point_free(study_point *pt)
{
    if (pt->planned) plan_result_free(&pt->res);
    if (pt->ok) sim_result_free(&pt->sim);
    memset(pt, 0, sizeof *pt);
}

/* The device type a measured profile's times belong to, looked up in the
 * cluster and then the presets; 0 with *ref untouched when unknown. */
static int profile_ref(const study *s, const cluster *c, cluster_devtype *ref)
{
    const char *name = s->profiled_on[0] ? s->profiled_on : s->pf.device;
    const cluster_devtype *t = cluster_devtype_find(c->types, c->n_types, name);
    if (t) {
        *ref = *t;
        return 1;
    }
    cl_err ignore = {0};
    return cluster_devtype_preset(NULL, name, ref, &ignore) == CL_OK;
}

static void memory_figures(study_point *pt)
{
    const plan *p = &pt->res.plan;
    pt->peak_mem_bytes = 0;
    pt->headroom_bytes = HUGE_VAL;
    pt->headroom = HUGE_VAL;
    int known = 0;
    for (int i = 0; i < pt->sim.n_dev; i++) {
        const sim_dev_result *d = &pt->sim.dev[i];
        pt->peak_mem_bytes = fmax(pt->peak_mem_bytes, d->peak_mem_bytes);
        double cap = (double)cluster_usable_bytes(&p->cluster.types[p->cluster.devices[d->device].type]);
        if (cap >= STUDY_MEM_UNKNOWN || !(cap > 0)) continue;
        known = 1;
        pt->headroom_bytes = fmin(pt->headroom_bytes, cap - d->peak_mem_bytes);
        pt->headroom = fmin(pt->headroom, (cap - d->peak_mem_bytes) / cap);
    }
    if (!known) pt->headroom_bytes = pt->headroom = NAN;
}

int study_run(const study *s, const cluster *c, int kind, study_point *pt, cl_err *e)
{
    return study_run_after(s, c, kind, NULL, pt, e);
}

int study_run_after(const study *s, const cluster *c, int kind, const study_point *prev, study_point *pt,
                    cl_err *e)
{
    memset(pt, 0, sizeof *pt);
    prof derived = {0};
    const prof *pf = &s->pf;
    cluster_devtype ref;
    int have_ref = 0, rc;
    cl_err pe = {0};
    /* per rank: the cluster of t-GPU groups (a count that splits a node's
     * GPUs unevenly is a point that cannot be done, with tp_cluster's line) */
    cluster groups = {0};
    const cluster *cq = c;
    if (s->per_rank) {
        if ((rc = tp_cluster(&groups, c, s->tro.t, c->name, &pe))) goto infeasible;
        cq = &groups;
    }
    if (!s->have_prof) {
        /* costs of the first device's type at every microbatch size the
         * search may try (divisors of the batch), derived as `cleave plan`
         * derives them: tp_derive, per rank when asked (s->tro is t = 1 and
         * nothing else otherwise: the model whole, priced by shape on a
         * device with a kernel model, docs/compute.md) */
        const cluster_devtype *t = &c->types[c->devices[0].type];
        double pts[PROF_MAX_POINTS];
        int np = 0, shaped = 0;
        for (int d = 1; d <= s->batch && np < PROF_MAX_POINTS; d++)
            if (s->batch % d == 0 && (s->microbatches == 0 || d == s->batch / s->microbatches))
                pts[np++] = d;
        if ((rc = tp_derive(&derived, &s->md, s->per_rank ? &s->rank_md : &s->md, &s->tro, s->per_rank, s->attn,
                            t, c->links[CLUSTER_INTRA], c->links[CLUSTER_INTRA], pts, np, &shaped, &pe)))
            goto infeasible;
        if (s->attn == PROF_ATTN_FUSED && !shaped) {
            rc = cl_fail(&pe, CL_EINPUT, "--attention fused needs a device type with a \"kernels\" member (docs/compute.md): %s has none", t->name);
            goto infeasible;
        }
        if (s->tro.wgrad_acc > 0 && !shaped) {
            rc = cl_fail(&pe, CL_EINPUT, "%s: %s has none", PLAN_GRAD_ACC_NEEDS, t->name);
            goto infeasible;
        }
        pf = &derived;
        ref = *t;
        have_ref = 1;
    } else {
        have_ref = profile_ref(s, c, &ref);
    }
    plan_request rq = {.model = s->per_rank ? &s->rank_md : &s->md, .prof = pf, .cluster = cq,
                       .ref_type = have_ref ? &ref : NULL,
                       .batch = s->batch, .schedule = kind, .microbatches = s->microbatches,
                       .algo = PLAN_ALGO_AUTO, .optimizer = s->optimizer,
                       .precision = s->precision, .zero = s->zero, .comm = 1,
                       .replication = s->replication, .framework = s->framework,
                       .floor = prev && prev->planned ? &prev->res : NULL};
    if ((rc = plan_search(&rq, &pt->res, &pe))) {
        plan_result_free(&pt->res); /* whatever a failed search left */
        goto infeasible;
    }
    pt->planned = 1;
    pt->res.plan.tensor = s->tro.t; /* as `cleave plan` records a per-rank plan */
    pt->res.plan.seq_par = s->tro.sp;
    pt->res.plan.recompute = s->tro.recomp;
    pt->dev_used = plan_device_count(&pt->res.plan) * s->tro.t; /* GPUs */
    if ((rc = sim_predict(&pt->res.plan, &pt->sim, &pe))) {
        sim_result_free(&pt->sim);
        snprintf(pt->reason, sizeof pt->reason, "simulator: %s", pe.msg);
        goto infeasible_noreason;
    }
    pt->ok = 1;
    memory_figures(pt);
    if (!s->have_prof) prof_free(&derived);
    cluster_free(&groups);
    return CL_OK;
infeasible:
    snprintf(pt->reason, sizeof pt->reason, "%s", pe.msg[0] ? pe.msg : "failed");
infeasible_noreason:
    if (!s->have_prof) prof_free(&derived);
    cluster_free(&groups);
    /* a point that cannot be done; but a spent budget ends the study */
    if (pe.code == CL_EINPUT && !cl_budget_over()) return CL_OK;
    *e = pe;
    return rc;
}

int study_run_cands(const study *cs, int nc, const cluster *c, int kind, study_point *prev, int *win,
                    char *reason, size_t cap, cl_err *e)
{
    *win = -1;
    reason[0] = '\0';
    if (!nc) no_cands(reason, cap, c);
    for (int i = 0; i < nc; i++) {
        study_point pt;
        int rc = study_run_after(&cs[i], c, kind, &prev[i], &pt, e);
        if (rc) {
            study_point_free(&pt);
            return rc;
        }
        if (!reason[0] && !pt.ok) {
            if (nc > 1) /* which question the line answers */
                snprintf(reason, cap, "t %d %s: %.1000s", cs[i].tro.t, tfm_recomp_name(cs[i].tro.recomp), pt.reason);
            else snprintf(reason, cap, "%s", pt.reason);
        }
        if (!pt.planned) { /* the candidate's last plan stays its floor */
            study_point_free(&pt);
            continue;
        }
        study_point_free(&prev[i]);
        prev[i] = pt;
        if (pt.ok && (*win < 0 || study_better(&prev[i], &prev[*win]))) *win = i;
    }
    return CL_OK;
}

int study_best_candidates(const study *s, int n_kinds)
{
    return n_kinds * (s->replication ? 2 : 1);
}

int study_best(const study *s0, const cluster *c, const int *kinds, int n_kinds, prog *pg,
               study_point *best, int *interrupted, cl_err *e)
{
    int passes = s0->replication ? 2 : 1, rc = CL_OK;
    memset(best, 0, sizeof *best);
    *interrupted = 0;
    /* the (t, recomputation) candidates, each its own study (one, s0's,
     * without --tensor auto or --recompute auto) */
    study *cs;
    int nc;
    rc = study_cand_studies(s0, c->n_devices, &cs, &nc, e);
    if (!nc) no_cands(best->reason, sizeof best->reason, c);
    for (int pass = 0; pass < passes && !rc; pass++)
        for (int k = 0; k < n_kinds && !rc; k++) {
            for (int i = 0; i < nc && !rc; i++) {
                if (prog_interrupted()) { /* checked before a candidate, so a finished search stays whole */
                    *interrupted = 1;
                    goto done;
                }
                study s = cs[i]; /* shallow: only the replication flag changes */
                s.replication = s0->replication && pass == 0;
                study_point pt;
                if ((rc = study_run(&s, c, kinds[k], &pt, e))) {
                    study_point_free(&pt);
                    break;
                }
                if (study_better(&pt, best)) {
                    study_point_free(best);
                    *best = pt;
                } else {
                    if (!best->ok && !best->reason[0])
                        snprintf(best->reason, sizeof best->reason, "%s: %.1000s",
                                 sched_kind_name((sched_kind)kinds[k]), pt.reason);
                    study_point_free(&pt);
                }
            }
            if (pg && !rc) {
                char label[96];
                snprintf(label, sizeof label, "%s, %s", c->name, sched_kind_name((sched_kind)kinds[k]));
                prog_step(pg, label);
            }
        }
done:
    study_cands_free(cs, nc);
    return rc;
}

int study_subcluster(const cluster *c, int n, cluster *out, cl_err *e)
{
    memset(out, 0, sizeof *out);
    if (n < 1 || n > c->n_devices)
        return cl_fail(e, CL_EINPUT, "%s: has %d devices, cannot take the first %d (hint: a device count from 1 to %d)",
                       c->name, c->n_devices, n, c->n_devices);
    *out = *c;
    snprintf(out->name, sizeof out->name, "%.48s[0:%d]", c->name, n);
    if (n == c->n_devices) snprintf(out->name, sizeof out->name, "%s", c->name);
    out->types = cl_malloc((size_t)c->n_types * sizeof *out->types);
    memcpy(out->types, c->types, (size_t)c->n_types * sizeof *out->types);
    /* devices are numbered node by node, so the first n use a prefix of the
     * nodes; renumber the nodes they use, in order */
    int *map = cl_malloc((size_t)c->n_nodes * sizeof *map);
    for (int i = 0; i < c->n_nodes; i++) map[i] = -1;
    out->devices = cl_malloc((size_t)n * sizeof *out->devices);
    out->node_names = cl_malloc((size_t)c->n_nodes * sizeof *out->node_names);
    out->n_nodes = 0;
    for (int d = 0; d < n; d++) {
        int nd = c->devices[d].node;
        if (map[nd] < 0) {
            map[nd] = out->n_nodes;
            memcpy(out->node_names[out->n_nodes++], c->node_names[nd], CLUSTER_NAME_MAX);
        }
        out->devices[d] = c->devices[d];
        out->devices[d].node = map[nd];
    }
    out->n_devices = n;
    free(map);
    return CL_OK;
}

int study_schedules(const char *cmd, const char *list, int **kinds, int *n)
{
    *kinds = NULL;
    *n = 0;
    if (!list || !*list) return cli_usage_error(cmd, "--schedules: expected a comma-separated list");
    int cap = 1;
    for (const char *p = list; *p; p++) cap += *p == ',';
    int *k = cl_malloc((size_t)cap * sizeof *k), m = 0;
    char *copy = cl_strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int kind = sched_kind_from_name(tok);
        if (kind < 0) {
            int rc = cli_usage_error(cmd, "--schedules: unknown schedule \"%s\" (gpipe, 1f1b, interleaved, zb-h1, pipedream, fbp, sequential)", tok);
            free(copy);
            free(k);
            return rc;
        }
        int dup = 0;
        for (int i = 0; i < m; i++) dup |= k[i] == kind;
        if (!dup) k[m++] = kind;
    }
    free(copy);
    if (m == 0) {
        free(k);
        return cli_usage_error(cmd, "--schedules: empty list");
    }
    *kinds = k;
    *n = m;
    return CL_OK;
}

int64_t study_dataset_size(const model *m, const char **name)
{
    int64_t elems = model_shape_elems(&m->input);
    if (m->classes == 1000 && m->input.ndim == 3 && m->input.d[0] == 3 && m->input.d[1] == 224 &&
        m->input.d[2] == 224) {
        *name = "ImageNet-1k";
        return 1281167; /* ILSVRC-2012 training images */
    }
    if (m->classes == 10 && elems == 28 * 28) {
        *name = "Fashion-MNIST";
        return 60000;   /* training images */
    }
    *name = "";
    return 0;
}

void study_csv_field(FILE *f, const char *s)
{
    char *q = esc_csv(s);
    fputs(q, f);
    free(q);
}

void study_devices_str(const cluster *c, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int t = 0; t < c->n_types && at + 8 < cap; t++) {
        int count = 0;
        for (int d = 0; d < c->n_devices; d++) count += c->devices[d].type == t;
        if (!count) continue;
        at += (size_t)snprintf(buf + at, cap - at, "%s%d x %s", at ? " + " : "", count, c->types[t].name);
    }
}

int study_mkdir(const char *dir, cl_err *e)
{
    char *p = cl_strdup(dir);
    int rc = CL_OK;
    for (char *c = p + 1;; c++) {
        if (*c != '/' && *c != '\0') continue;
        char keep = *c;
        *c = '\0';
        struct stat st;
        if (stat(p, &st) != 0 && mkdir(p, 0777) != 0 && errno != EEXIST) {
            rc = cl_fail(e, CL_EINPUT, "%s: cannot create the folder: %s", p, strerror(errno));
            break;
        }
        if (stat(p, &st) == 0 && !S_ISDIR(st.st_mode)) {
            rc = cl_fail(e, CL_EINPUT, "%s: exists and is not a folder (hint: choose another -o)", p);
            break;
        }
        *c = keep;
        if (keep == '\0') break;
    }
    free(p);
    return rc;
}

int study_args_check(study_args *a, const char *cmd)
{
    a->msg = a->csv && !strcmp(a->csv, "-") ? stderr : stdout;
    /* folders are joined with "/": drop trailing ones ("sweep/" would give
     * "sweep//speedup.csv"); the argv string is the caller's to edit */
    char *dirs[] = {(char *)a->out_dir, (char *)a->save_plans};
    for (int i = 0; i < 2; i++)
        for (size_t n = dirs[i] ? strlen(dirs[i]) : 0; n > 1 && dirs[i][n - 1] == '/'; n--) dirs[i][n - 1] = '\0';
    if (!a->model) return cli_usage_error(cmd, "missing --model M.json");
    if (a->out_dir && (a->csv || a->png || a->svg))
        return cli_usage_error(cmd, "-o DIR and --csv/--png/--svg exclude each other");
    if (a->profiled_on && !a->profile) return cli_usage_error(cmd, "--profiled-on describes a --profile");
    a->t = 1;
    if (a->tensor && !strcmp(a->tensor, "auto")) a->t = 0;
    else if (a->tensor) {
        int rc = cli_int(cmd, "--tensor", a->tensor, 1, 1024, &a->t);
        if (rc) return rc;
    }
    if (a->framework && plan_for_from_name(a->framework) < 0) {
        char *shown = esc_term(a->framework); /* argv: no control byte to the terminal */
        int rc = cli_usage_error(cmd, "--for: unknown framework \"%s\" (torch, deepspeed, megatron)", shown);
        free(shown);
        return rc;
    }
    return 0;
}

int study_args_schedules(const study_args *a, const char *cmd, int **kinds, int *n)
{
    int rc = study_schedules(cmd, a->schedules, kinds, n);
    if (rc || !a->framework) return rc;
    plan_for f = (plan_for)plan_for_from_name(a->framework);
    int refused, k = study_kinds_for(f, *kinds, *n, &refused);
    if (refused >= 0 && a->schedules_given) {
        char hint[128];
        snprintf(hint, sizeof hint, "%s runs %s", plan_for_name(f), plan_for_schedules(f));
        rc = cli_usage_hint(cmd, hint, "--schedules: %s does not run %s", plan_for_name(f),
                            sched_kind_name((sched_kind)refused));
        free(*kinds);
        *kinds = NULL;
        *n = 0;
        return rc;
    }
    *n = k;
    return CL_OK;
}

int study_kinds_for(plan_for f, int *kinds, int n, int *refused)
{
    int k = 0;
    *refused = -1;
    for (int i = 0; i < n; i++) {
        if (plan_for_runs(f, (sched_kind)kinds[i])) kinds[k++] = kinds[i];
        else if (*refused < 0) *refused = kinds[i];
    }
    return k;
}

int study_args_load(const study_args *a, study *s, cl_err *e)
{
    cl_budget_start(a->max_seconds_given ? a->max_seconds : CL_BUDGET_DEFAULT_S, "--max-seconds");
    int rc = study_load(s, a->model, a->profile, (int)a->batch, e);
    if (rc) return rc;
    if (a->profiled_on) snprintf(s->profiled_on, sizeof s->profiled_on, "%s", a->profiled_on);
    s->replication = !a->no_replication;
    s->attn = (prof_attn)a->attention;
    s->t_auto = a->t == 0;
    s->r_auto = a->recompute == STUDY_RECOMP_AUTO;
    s->tro = (tfm_rank_opts){.t = s->t_auto ? 1 : (int)a->t,
                             .recomp = s->r_auto ? TFM_RECOMP_NONE : (tfm_recomp)a->recompute,
                             .fused_attn = a->attention == PROF_ATTN_FUSED};
    /* with auto, tro.sp says it was asked for (study_cands gives it to t > 1) */
    s->tro.sp = a->seq_par && (s->t_auto || s->tro.t > 1);
    if (s->t_auto || s->r_auto) {
        tfm_rank_opts o1 = {.t = 1, .recomp = TFM_RECOMP_NONE};
        if (s->have_prof) {
            study_free(s);
            return cl_fail(e, CL_EINPUT, "--tensor auto and --recompute auto re-price a transformer's layers, which a profile measured whole (hint: drop --profile)");
        }
        if ((rc = tfm_rank_check(&s->md, &o1, a->model, e))) {
            study_free(s);
            return rc;
        }
    }
    if (a->grad_acc) {
        if (!s->md.has_tfm) {
            study_free(s);
            return cl_fail(e, CL_EINPUT, "%s: %s", a->model, PLAN_GRAD_ACC_NEEDS);
        }
        /* sweep and compare reduce in the framework's default element size */
        s->tro.wgrad_acc = plan_grad_acc_bytes(s->md.dtype, (plan_prec)a->precision,
                                               a->framework ? (plan_for)plan_for_from_name(a->framework) : PLAN_FOR_ANY, 0);
    }
    s->per_rank = !s->t_auto && !s->r_auto && tfm_rank_reprices(&s->tro);
    if (s->per_rank) {
        if (s->have_prof) {
            study_free(s);
            return cl_fail(e, CL_EINPUT, "--tensor, --recompute, --attention and --grad-accumulation re-price a transformer's layers, which a profile measured whole (hint: drop --profile)");
        }
        s->per_rank = 0; /* rank_md is not built yet: study_free must not free it */
        if ((rc = tfm_rank_check(&s->md, &s->tro, a->model, e)) ||
            (rc = tfm_rank_model(&s->rank_md, &s->md, &s->tro, a->model, e))) {
            study_free(s);
            return rc;
        }
        s->per_rank = 1;
    }
    if (a->framework) {
        s->framework = (plan_for)plan_for_from_name(a->framework);
        int head;
        cl_err me = {0};
        if ((rc = plan_target_model(&s->md, plan_for_target(s->framework), a->model, &head, &me))) {
            const char *fw = plan_for_name(s->framework);
            study_free(s); /* the caller frees only a study it got */
            return cl_fail(e, rc, "--for %s: %s (hint: --for torch or deepspeed)", fw, me.msg);
        }
    }
    return CL_OK;
}

int study_args_outputs(const study_args *a, const char *stem, char *csv, char *png, char *svg,
                       size_t cap, cl_err *e)
{
    int rc;
    csv[0] = png[0] = svg[0] = '\0';
    if (a->out_dir) {
        if ((rc = study_mkdir(a->out_dir, e))) return rc;
        snprintf(csv, cap, "%s/%s.csv", a->out_dir, stem);
        snprintf(png, cap, "%s/%s.png", a->out_dir, stem);
        snprintf(svg, cap, "%s/%s.svg", a->out_dir, stem);
    } else {
        if (a->csv) snprintf(csv, cap, "%s", a->csv);
        if (a->png) snprintf(png, cap, "%s", a->png);
        if (a->svg) snprintf(svg, cap, "%s", a->svg);
    }
    if (a->save_plans && (rc = study_mkdir(a->save_plans, e))) return rc;
    return CL_OK;
}
