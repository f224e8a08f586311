/* pipeline.c - the pipelined runner's entry points (pipeline.h): checks
 * before anything runs, the run's shared state, channel capacities, the
 * backends, and the result assembled from the workers' reports. */
#include <assert.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "exec/ckpt/checkpoint.h"
#include "models/tfm_rank.h"
#include "pipe_ckpt.h"
#include "pipe_hooks.h"
#include "pipe_ops.h"
#include "pipe_run.h"
#include "pipe_trace.h"
#include "tp_mpi.h"

const char *exec_pipe_backend_name(exec_pipe_backend b)
{
    return b == EXEC_PIPE_MPI ? "mpi" : "threads";
}

int exec_pipe_backend_from_name(const char *name)
{
    if (!name) return -1;
    if (!strcmp(name, "threads")) return EXEC_PIPE_THREADS;
    if (!strcmp(name, "mpi")) return EXEC_PIPE_MPI;
    return -1;
}

void exec_pipe_defaults(exec_pipe_opts *o)
{
    exec_train_opts t;
    exec_train_defaults(&t);
    memset(o, 0, sizeof *o);
    o->backend = EXEC_PIPE_THREADS;
    o->epochs = 1;
    o->lr = t.lr;
    o->momentum = t.momentum;
    o->weight_decay = t.weight_decay;
    o->lr_schedule = t.schedule;
    o->seed = t.seed;
    o->spin_s = exec_spin_default();
}

void exec_pipe_result_free(exec_pipe_result *r)
{
    if (!r) return;
    if (r->w)
        for (int i = 0; i < r->n_workers; i++) free(r->w[i].iter_busy_s);
    free(r->w);
    free(r->iter_end_s);
    free(r->iter_s);
    free(r->iter_loss);
    free(r->epochs);
    free(r->tensors);
    free(r->params);
    memset(r, 0, sizeof *r);
}

/* -------------------------------------------------------------- checks -- */

/* What the runner takes of a plan's per-rank settings (pipe_tp.h): tensor
 * parallelism, replicated stages too, with sequence parallelism
 * (exec_pipe_net_flags); recomputation (full only with a fused backward on
 * the forward's weights: exec_pipe_check); not context parallelism. */
static int tensor_check(const plan *p, const char *file, cl_err *e)
{
    int rc = plan_exec_refuse(p, file, "cleave train --plan", e);
    if (rc) return rc;
    const int T = plan_tensor(p);
    if (T == 1) return CL_OK;
    rc = exec_net_tp_check(&p->model, 0, p->model.n_layers, T, file, e);
    if (!rc && p->seq_par) rc = exec_net_sp_check(&p->model, 0, p->model.n_layers, T, file, e);
    return rc;
}

int exec_pipe_check(const plan *p, const char *file, cl_err *e)
{
    const model *m = &p->model;
    int rc = exec_net_check(m, 0, m->n_layers, file, e);
    if (rc) return rc;
    if (m->n_layers < 1 || m->layers[m->n_layers - 1].kind != MODEL_SOFTMAX_XENT)
        return cl_fail(e, CL_EINPUT, "%s: model.layers: training needs a model ending in softmax_xent (hint: add {\"kind\": \"softmax_xent\"} as the last layer and re-plan)",
                       file);
    if (p->optimizer != OPTIM_SGD && p->optimizer != OPTIM_MOMENTUM)
        return cl_fail(e, CL_EINPUT, "%s: optimizer: the executor trains with SGD (optionally with momentum), not %s (hint: re-plan with --optimizer momentum)",
                       file, plan_optim_name(p->optimizer));
    if (p->n_stages < 1) return cl_fail(e, CL_EINPUT, "%s: stages: the plan has no stages", file);
    if (p->n_stages > EXEC_TAG_MAX_BOUNDARY)
        return cl_fail(e, CL_EINPUT, "%s: stages: %d stages; the executor runs at most %d", file,
                       p->n_stages, EXEC_TAG_MAX_BOUNDARY);
    int next = 0;
    for (int s = 0; s < p->n_stages; s++) {
        const plan_stage *st = &p->stages[s];
        int contiguous = st->n_layers == st->last - st->first + 1;
        for (int i = 0; contiguous && i < st->n_layers; i++)
            contiguous = st->layers && st->layers[i] == st->first + i;
        if (st->first != next || st->last < st->first || st->last >= m->n_layers || !contiguous)
            return cl_fail(e, CL_EINPUT, "%s: stages[%d]: layers %d..%d do not fit the model: stage %d must start at layer %d, end by layer %d (its last), and hold a contiguous range (hint: the stages must cut the model's %d layers in order; re-plan for this model)",
                           file, s, st->first, st->last, s, next, m->n_layers - 1, m->n_layers);
        next = st->last + 1;
    }
    if (next != m->n_layers)
        return cl_fail(e, CL_EINPUT, "%s: stages: the stages end at layer %d but the model has %d layers (hint: re-plan for this model)",
                       file, next - 1, m->n_layers);
    if (p->microbatch < 1 || p->n_micro < 1 || (int64_t)p->microbatch * p->n_micro != p->batch)
        return cl_fail(e, CL_EINPUT, "%s: batch: %d is not microbatch %d x microbatches %d", file,
                       p->batch, p->microbatch, p->n_micro);
    if ((rc = tensor_check(p, file, e))) return rc;
    sched sc;
    rc = sched_build(p, p->schedule, p->n_micro, 1, &sc, e);
    /* full recomputation refills one scratch per layer in its input
     * gradient, which that layer's weight gradient reads at once (net.h),
     * and reproduces the forward only on the forward's weights */
    if (!rc && p->recompute == TFM_RECOMP_FULL && sc.split_bw)
        rc = cl_fail(e, CL_EINPUT, "%s: recompute: full recomputation needs each layer's weight gradient right after its input gradient, and schedule %s runs them apart (hint: re-plan with --recompute selective, or a schedule other than %s)",
                     file, sched_kind_name(p->schedule), sched_kind_name(p->schedule));
    else if (!rc && p->recompute == TFM_RECOMP_FULL && sched_is_async(p->schedule) && !sc.stash_weights)
        rc = cl_fail(e, CL_EINPUT, "%s: recompute: full recomputation reruns each block's forward in its backward, and schedule %s runs that backward on weights updated since the forward, so the rerun would not reproduce it (hint: re-plan with --recompute selective, or schedule pipedream, which keeps the forward's weights)",
                     file, sched_kind_name(p->schedule));
    sched_free(&sc);
    return rc;
}

int exec_pipe_net_flags(const plan *p)
{
    return exec_net_flags_of(p->recompute, p->seq_par && plan_tensor(p) > 1);
}

int exec_pipe_workers(const plan *p, const char *file, cl_err *e)
{
    sched sc;
    if (exec_pipe_check(p, file, e) || sched_build(p, p->schedule, p->n_micro, 1, &sc, e)) return -1;
    int n = sc.n_dev;
    sched_free(&sc);
    return n;
}

/* -------------------------------------------------------------- set-up -- */

/* Channel capacities (docs/executor.md, "Pipelined training"): a flushing
 * iteration ends with every microbatch consumed on every stage before the
 * next iteration's first SEND on the pair can happen, so the most SENDs on
 * the pair in one iteration never block; an asynchronous stream keeps at
 * most about n_dev microbatches in flight, so a window of ceil(n_dev / m) + 1
 * iterations' SENDs. */
static int *channel_caps(const sched *sc)
{
    int n = sc->n_dev;
    int *cap = cl_calloc((size_t)n * (size_t)n, sizeof *cap);
    int *cnt = cl_calloc((size_t)n * (size_t)sc->n_iter, sizeof *cnt);
    for (int w = 0; w < n; w++) {
        memset(cnt, 0, (size_t)n * (size_t)sc->n_iter * sizeof *cnt);
        for (int64_t k = sc->off[w]; k < sc->off[w + 1]; k++) {
            const sched_op *op = &sc->ops[k];
            if (op->kind != SCHED_SEND) continue;
            int c = ++cnt[(size_t)op->peer * (size_t)sc->n_iter + (size_t)op->iter];
            if (c > cap[w * n + op->peer]) cap[w * n + op->peer] = c;
        }
    }
    free(cnt);
    int window = sched_is_async((sched_kind)sc->kind) ? (n + sc->n_micro - 1) / sc->n_micro + 1 : 1;
    for (int i = 0; i < n * n; i++) cap[i] = cap[i] * window + 1;
    return cap;
}

static void prun_free(pipe_run *R)
{
    sched_free(&R->sc);
    free(R->w_pos);
    free(R->w_rep);
    free(R->pos_w0);
    free(R->stage_first);
    free(R->stage_end);
    free(R->bnd_elems);
    free(R->epochs);
    free(R->iter_loss);
    if (R->blobs)
        for (int w = 0; w < R->n_w; w++) free(R->blobs[w]);
    free(R->blobs);
    free(R->blob_len);
    free(R->passed);
    if (R->x) R->x->ops->destroy(R->x);
    pthread_mutex_destroy(&R->mu);
}

/* Where a checkpoint leaves the run: its position and the epochs done. */
static int resume_position(pipe_run *R, const exec_ckpt *c, cl_err *e)
{
    int64_t pos[5];
    int rc = exec_ckpt_get(c, "run.position", pos, sizeof pos, e);
    if (rc) return rc;
    if (pos[2] != R->iters || pos[3] != R->n_runs || pos[4] != R->n_w || pos[0] < 0 ||
        pos[0] > R->total_iters || pos[1] < 0 || pos[1] > R->n_runs || pos[1] != pos[0] / R->iters)
        return cl_fail(e, CL_EINPUT, "%s: the checkpoint is of a run of %lld x %lld iterations on %lld workers at iteration %lld, this one is %d x %d on %d (hint: resume with the same plan, data and options)",
                       exec_ckpt_file(c), (long long)pos[3], (long long)pos[2], (long long)pos[4],
                       (long long)pos[0], R->n_runs, R->iters, R->n_w);
    size_t len;
    const double *h = exec_ckpt_find(c, "run.epochs", &len);
    if (!h || len != (size_t)pos[1] * 8 * sizeof(double))
        return cl_fail(e, CL_EINPUT, "%s: section run.epochs does not hold %lld epochs (hint: the file is damaged)",
                       exec_ckpt_file(c), (long long)pos[1]);
    for (int i = 0; i < (int)pos[1]; i++) {
        double v[8];
        memcpy(v, h + 8 * (size_t)i, sizeof v);
        R->epochs[i] = (exec_epoch){.epoch = (int)v[0], .loss = v[1], .train_acc = v[2],
                                    .test_loss = v[3], .test_acc = v[4], .samples_per_s = v[5],
                                    .elapsed_s = v[6], .lr = v[7]};
    }
    if ((rc = exec_ckpt_get(c, "run.iter_loss", R->iter_loss,
                            (size_t)pos[1] * (size_t)R->iters * sizeof *R->iter_loss, e)))
        return rc;
    R->start_gi = pos[0];
    R->n_epochs_done = (int)pos[1];
    return CL_OK;
}

static int prun_init(pipe_run *R, const plan *p, const exec_pipe_opts *o, const exec_pipe_hooks *h,
                     cl_err *e)
{
    memset(R, 0, sizeof *R);
    pthread_mutex_init(&R->mu, NULL);
    R->p = p;
    R->o = o;
    if (h) R->hooks = *h;
    R->m = &p->model;
    R->S = p->n_stages;
    R->v = p->chunks > 1 ? p->chunks : 1;
    R->P = R->S / R->v;
    R->m_micro = p->n_micro;
    R->mb = p->microbatch;
    R->batch = p->batch;
    R->eval_batch = p->batch;
    R->data_ipe = o->train->n / p->batch;
    R->n_runs = o->iterations > 0 ? 1 : o->epochs;
    R->iters = o->iterations > 0 ? o->iterations : (int)R->data_ipe;
    R->total_iters = (int64_t)R->n_runs * R->iters;
    R->tracing = o->trace_path != NULL;
    R->stall_s = o->stall_s > 0 ? o->stall_s : 300;
    int rc = sched_build(p, p->schedule, p->n_micro, R->iters, &R->sc, e);
    if (rc) return rc;
    R->n_w = R->sc.n_dev;
    R->w_pos = cl_calloc((size_t)R->n_w, sizeof *R->w_pos);
    R->w_rep = cl_calloc((size_t)R->n_w, sizeof *R->w_rep);
    R->pos_w0 = cl_calloc((size_t)R->P, sizeof *R->pos_w0);
    if (R->sc.kind != SCHED_SEQUENTIAL)
        for (int j = 0, w = 0; j < R->P; j++) {
            R->pos_w0[j] = w;
            for (int q = 0; q < p->stages[j].n_replicas; q++, w++) {
                assert(w < R->n_w && R->sc.dev[w] == p->stages[j].devices[q]);
                R->w_pos[w] = j;
                R->w_rep[w] = q;
            }
        }
    R->stage_first = cl_malloc((size_t)R->S * sizeof *R->stage_first);
    R->stage_end = cl_malloc((size_t)R->S * sizeof *R->stage_end);
    R->bnd_elems = cl_malloc((size_t)R->S * sizeof *R->bnd_elems);
    for (int s = 0; s < R->S; s++) {
        R->stage_first[s] = p->stages[s].first;
        R->stage_end[s] = p->stages[s].last + 1;
        R->bnd_elems[s] = (int64_t)R->m->layers[p->stages[s].last].out_elems;
    }
    R->epochs = cl_calloc((size_t)R->n_runs, sizeof *R->epochs);
    R->iter_loss = cl_calloc((size_t)R->total_iters, sizeof *R->iter_loss);
    R->blobs = cl_calloc((size_t)R->n_w, sizeof *R->blobs);
    R->blob_len = cl_calloc((size_t)R->n_w, sizeof *R->blob_len);
    R->stop_at = -1;
    R->passed = cl_malloc((size_t)R->n_w * sizeof *R->passed);
    for (int w = 0; w < R->n_w; w++) R->passed[w] = -1;
    cl_err ignore = {0};
    R->ckpt = pipe_ckpt_check(R, &ignore) == CL_OK;
    if (o->ckpt_path || o->resume) {
        if ((rc = pipe_ckpt_check(R, e))) return rc;
        if (o->resume && (rc = resume_position(R, o->resume, e))) return rc;
    }
    return CL_OK;
}

/* ------------------------------------------------------------- results -- */

static int tensor_cmp_stage(const void *a, const void *b)
{
    int x = **(const int32_t *const *)a, y = **(const int32_t *const *)b;
    return (x > y) - (x < y);
}

static void collect(const pipe_run *R, exec_pipe_result *r)
{
    int n = R->n_w;
    int64_t T = R->total_iters;
    r->n_workers = n;
    r->n_iter = (int)T;
    r->iter_end_s = cl_calloc((size_t)T, sizeof *r->iter_end_s);
    r->iter_s = cl_calloc((size_t)T, sizeof *r->iter_s);
    r->iter_loss = cl_calloc((size_t)T, sizeof *r->iter_loss);
    r->w = cl_calloc((size_t)n, sizeof *r->w);
    /* parameter sections of replica-0 workers, by stage */
    const unsigned char **sec = cl_calloc((size_t)R->S + 1, sizeof *sec);
    int n_sec = 0;
    for (int w = 0; w < n; w++) {
        pblob b;
        pipe_blob_parse(R, R->blobs[w], R->blob_len[w], &b);
        exec_pipe_worker *x = &r->w[w];
        x->device = R->sc.dev[w];
        x->replica = R->w_rep[w];
        x->stage = R->sc.kind == SCHED_SEQUENTIAL ? 0 : R->w_pos[w];
        x->n_stages = R->sc.kind == SCHED_SEQUENTIAL ? R->S : R->v;
        x->busy_s = b.rep->busy_s;
        x->wait_s = b.rep->wait_s;
        x->iter_busy_s = cl_malloc((size_t)T * sizeof *x->iter_busy_s);
        memcpy(x->iter_busy_s, b.iter_busy, (size_t)T * sizeof *x->iter_busy_s);
        x->peak_mem_bytes = b.rep->peak_mem;
        x->peak_t_s = b.rep->peak_t;
        x->at_peak = b.rep->at_peak;
        x->peak_stash = b.rep->peak_stash;
        x->peak_versions = b.rep->peak_versions;
        x->sent_bytes = b.rep->sent_bytes;
        x->peak_rss_bytes = b.rep->peak_rss;
        if (b.rep->peak_rss > r->peak_rss_bytes) r->peak_rss_bytes = b.rep->peak_rss;
        for (int64_t k = 0; k < T; k++)
            if (b.iter_end[k] > r->iter_end_s[k]) r->iter_end_s[k] = b.iter_end[k];
        if (b.params) { /* stage sections follow one another */
            const unsigned char *p = b.params, *end = b.params + b.rep->param_bytes;
            while (p < end) {
                sec[n_sec++] = p;
                int32_t hdr[2];
                memcpy(hdr, p, 8);
                p += 8;
                for (int t = 0; t < hdr[1]; t++) {
                    int64_t cnt;
                    memcpy(&cnt, p + 96, 8);
                    p += 104 + cnt * 4;
                }
            }
        }
    }
    for (int64_t k = 0; k < T; k++) {
        r->iter_s[k] = r->iter_end_s[k] - (k ? r->iter_end_s[k - 1] : 0);
        if (r->iter_end_s[k] > r->wall_s) r->wall_s = r->iter_end_s[k];
        r->iter_loss[k] = R->iter_loss[k] / R->batch;
    }
    r->n_epochs = R->n_epochs_done;
    r->epochs = cl_calloc((size_t)(r->n_epochs ? r->n_epochs : 1), sizeof *r->epochs);
    memcpy(r->epochs, R->epochs, (size_t)r->n_epochs * sizeof *r->epochs);
    if (n_sec) {
        assert(n_sec == R->S);
        qsort(sec, (size_t)n_sec, sizeof *sec, tensor_cmp_stage);
        int nt = 0;
        int64_t np = 0;
        for (int i = 0; i < n_sec; i++) { /* count */
            int32_t hdr[2];
            memcpy(hdr, sec[i], 8);
            const unsigned char *p = sec[i] + 8;
            for (int t = 0; t < hdr[1]; t++) {
                int64_t cnt;
                memcpy(&cnt, p + 96, 8);
                nt++;
                np += cnt;
                p += 104 + cnt * 4;
            }
        }
        r->n_tensors = nt;
        r->n_params = np;
        r->tensors = cl_calloc((size_t)(nt ? nt : 1), sizeof *r->tensors);
        r->params = cl_malloc((size_t)(np ? np : 1) * sizeof *r->params);
        nt = 0;
        np = 0;
        for (int i = 0; i < n_sec; i++) {
            int32_t hdr[2];
            memcpy(hdr, sec[i], 8);
            const unsigned char *p = sec[i] + 8;
            for (int t = 0; t < hdr[1]; t++) {
                exec_pipe_tensor *x = &r->tensors[nt++];
                memcpy(x->name, p, 96);
                x->name[95] = 0;
                memcpy(&x->n, p + 96, 8);
                x->offset = np;
                memcpy(r->params + np, p + 104, (size_t)x->n * 4);
                np += x->n;
                p += 104 + x->n * 4;
            }
        }
    }
    free(sec);
}

/* ----------------------------------------------------------------- run -- */

/* Waiting workers spin only while every thread has a core (chan.h): with
 * tensor parallelism each worker brings T - 1 more (pipe_tp.h), which the
 * transport does not see. */
static double spin_s(const plan *p, int n_w, double spin)
{
    cpu_set_t set;
    int T = plan_tensor(p);
    if (T > 1 && (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < n_w * T)) return 0;
    return spin;
}

int exec_pipe_run(const plan *p, const exec_pipe_opts *o, exec_pipe_result *r, cl_err *e)
{
    return exec_pipe_run_hooked(p, o, NULL, r, e);
}

int exec_pipe_run_hooked(const plan *p, const exec_pipe_opts *o, const exec_pipe_hooks *h,
                         exec_pipe_result *r, cl_err *e)
{
    memset(r, 0, sizeof *r);
    const char *file = o->file ? o->file : "plan";
    int rc = exec_pipe_check(p, file, e);
    if (rc) return rc;
    if (!o->train) return cl_fail(e, CL_EINPUT, "%s: no training data", file);
    if ((rc = exec_data_check(o->train, &p->model, file, "training", e))) return rc;
    if (o->test && (rc = exec_data_check(o->test, &p->model, file, "test", e))) return rc;
    if (o->train->n < p->batch)
        return cl_fail(e, CL_EINPUT, "%s: batch: an iteration takes %d samples but the training set has %lld (hint: more data, or a plan with a smaller batch)",
                       file, p->batch, (long long)o->train->n);
    const int tpm = o->tensor_mpi && o->backend == EXEC_PIPE_MPI && plan_tensor(p) > 1;
    if (o->iterations < 0 || (o->iterations == 0 && o->epochs < 1))
        return cl_fail(e, CL_EINPUT, "%s: nothing to run (%d iterations, %d epochs)", file,
                       o->iterations, o->epochs);
    if (o->iterations == 0 && (int64_t)o->epochs * (o->train->n / p->batch) > INT32_MAX / 4)
        return cl_fail(e, CL_EINPUT, "%s: %d epochs of %lld iterations are too many", file,
                       o->epochs, (long long)(o->train->n / p->batch));
    pipe_run *R = cl_calloc(1, sizeof *R);
    if ((rc = prun_init(R, p, o, h, e))) {
        prun_free(R);
        free(R);
        return rc;
    }
    int *cap = NULL;
    if (o->chan_cap > 0) {
        cap = cl_malloc((size_t)R->n_w * (size_t)R->n_w * sizeof *cap);
        for (int i = 0; i < R->n_w * R->n_w; i++) cap[i] = o->chan_cap;
    } else {
        cap = channel_caps(&R->sc);
    }
    if (o->backend == EXEC_PIPE_MPI)
        rc = exec_xport_mpi(&R->x, R->n_w, tpm ? plan_tensor(p) : 1, cap, file, e);
    else
        R->x = exec_xport_threads(R->n_w, cap, spin_s(p, R->n_w, o->spin_s));
    free(cap);
    if (!rc && tpm) R->tpm = exec_tp_mpi_create(plan_tensor(p));
    /* the world rank: tensor rank k of worker w is w * T + k (pipeline.h) */
    if (!rc && R->x->rank >= 0) r->rank = pipe_world_rank(R, R->x->rank);
    if (!rc && o->trace_path) { /* fail on a bad path now, not after training */
        rc = cl_out_check(o->trace_path, e);
    }
    if (!rc && o->ckpt_path && r->rank == 0) {
        rc = cl_out_check(o->ckpt_path, e);
    }
    if (!rc && o->on_epoch && r->rank == 0) /* the epochs a resumed run did before */
        for (int i = 0; i < R->n_epochs_done; i++) o->on_epoch(o->ctx, &R->epochs[i]);
    if (!rc) {
        rc = R->x->ops->run(R->x, pipe_worker_main, R);
        if (rc) {
            if (R->err.code) *e = R->err;
            else cl_fail(e, CL_ERUN, "the pipelined run stopped (another worker failed)");
            rc = e->code;
        }
    }
    if (!rc) {
        r->stop_signal = R->stop_at >= 0 && R->stop_at < R->total_iters ? R->stop_sig : 0;
        r->iters_done = r->stop_signal ? R->stop_at : R->total_iters;
    }
    if (!rc && r->rank == 0) {
        collect(R, r);
        if (o->trace_path) rc = pipe_write_trace(R, o->trace_path, e);
    }
    exec_tp_mpi_destroy(R->tpm, !R->x || !R->x->ops->aborted(R->x));
    prun_free(R);
    free(R);
    return rc;
}

/* ------------------------------------------------------------- weights -- */

int exec_pipe_save_weights(const exec_pipe_result *r, const char *path, cl_err *e)
{
    if (!r->params) return cl_fail(e, CL_ERUN, "internal: no parameters kept (keep_params)");
    cl_out out;
    int rc = cl_out_open(&out, path, e);
    if (rc) return rc;
    fprintf(out.f, "cleave-weights 1 %d\n", r->n_tensors);
    for (int t = 0; t < r->n_tensors; t++) {
        const exec_pipe_tensor *x = &r->tensors[t];
        fprintf(out.f, "%s %lld\n", x->name, (long long)x->n);
        for (int64_t i = 0; i < x->n; i++) { /* little-endian float32 */
            uint32_t u;
            memcpy(&u, &r->params[x->offset + i], 4);
            unsigned char b[4] = {(unsigned char)u, (unsigned char)(u >> 8),
                                  (unsigned char)(u >> 16), (unsigned char)(u >> 24)};
            fwrite(b, 1, 4, out.f);
        }
    }
    return cl_out_commit(&out, e);
}
