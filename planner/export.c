/* export.c - plans as framework settings (see export.h). */
#include <assert.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/tfm_rank.h"
#include "sim/sim.h"
#include "base/escape.h"
#include "export.h"

static const char *const target_names[] = {"torch", "deepspeed", "deepspeed-module", "megatron"};
_Static_assert(sizeof target_names / sizeof target_names[0] == PLAN_TO_COUNT, "target names");

const char *plan_target_name(plan_target t)
{
    assert((unsigned)t < PLAN_TO_COUNT);
    return target_names[t];
}

int plan_target_from_name(const char *name)
{
    for (int t = 0; t < PLAN_TO_COUNT; t++)
        if (name && strcmp(name, target_names[t]) == 0) return t;
    return -1;
}

/* Does target t run schedule k?  One stage has nothing to pipeline, so every
 * target runs the sequential kind. */
int plan_target_runs(plan_target t, sched_kind k)
{
    if (k == SCHED_SEQUENTIAL) return 1;
    switch (t) {
    case PLAN_TO_TORCH: /* torch.distributed.pipelining's schedule classes */
        return k == SCHED_GPIPE || k == SCHED_1F1B || k == SCHED_INTERLEAVED || k == SCHED_ZBH1;
    case PLAN_TO_DEEPSPEED:
    case PLAN_TO_DEEPSPEED_MODULE: /* PipelineEngine's TrainSchedule: 1F1B */
        return k == SCHED_1F1B;
    case PLAN_TO_MEGATRON: /* 1F1B, interleaved with virtual stages */
        return k == SCHED_1F1B || k == SCHED_INTERLEAVED;
    default: return 0;
    }
}

plan_target plan_for_target(plan_for f)
{
    switch (f) {
    case PLAN_FOR_TORCH: return PLAN_TO_TORCH;
    case PLAN_FOR_DEEPSPEED: return PLAN_TO_DEEPSPEED;
    case PLAN_FOR_MEGATRON: return PLAN_TO_MEGATRON;
    default: assert(!"a framework"); return PLAN_TO_TORCH;
    }
}

int plan_for_runs(plan_for f, sched_kind k)
{
    return plan_target_runs(plan_for_target(f), k);
}

const char *plan_for_schedules(plan_for f)
{
    switch (f) {
    case PLAN_FOR_TORCH: return "gpipe, 1f1b, zb-h1 or interleaved";
    case PLAN_FOR_DEEPSPEED: return "1f1b";
    default: return "1f1b or interleaved";
    }
}

sched_kind plan_export_schedule(const plan *p, plan_target t)
{
    /* interleaving changes the stages; a target without it refuses instead */
    if (plan_target_runs(t, p->schedule) || p->chunks > 1) return p->schedule;
    return SCHED_1F1B;
}

/* ------------------------------------------------------------- buffer -- */

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    assert(need >= 0);
    if (b->n + (size_t)need + 1 > b->cap) {
        b->cap = (b->n + (size_t)need + 1) * 2;
        b->s = cl_realloc(b->s, b->cap);
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)need;
}

/* -------------------------------------------------------------- checks -- */

/* Every stage a contiguous run of layers, in order. */
static int check_contiguous(const plan *p, plan_target t, const char *file, cl_err *e)
{
    int next = 0;
    for (int s = 0; s < p->n_stages; s++) {
        const plan_stage *st = &p->stages[s];
        if (st->first != next || st->last - st->first + 1 != st->n_layers)
            return cl_fail(e, CL_EINPUT,
                           "%s: stages[%d] holds %d layers between %d and %d, not the run of layers after the previous stage; %s splits a model at single points of its layer list (hint: plan with --algo merge, whose stages are runs of the topological order)",
                           file, s, st->n_layers, st->first, st->last, target_names[t]);
        next = st->last + 1;
    }
    return CL_OK;
}

/* The plan as planned, when the export is its re-simulated run. */
typedef struct plan_export_origin {
    sched_kind schedule;
    plan_pred pred;
    /* the re-simulated run's worst device over its memory (over > 0), if any */
    int over_dev;
    double need_bytes, cap_bytes;
} plan_export_origin;

/* What the frameworks run of a plan: one data-parallel degree r for all
 * stages (they replicate whole pipelines) and the same number of
 * microbatches on every replica (microbatch i runs on replica i mod r), so
 * global batch = microbatch x gas x r with gas = microbatches / r. */
typedef struct run {
    int r;   /* data-parallel degree                                  */
    int gas; /* microbatches per replica and iteration                */
} run;

/* The run target t makes of p, or CL_EINPUT saying why t cannot run it. */
static int plan_run(const plan *p, plan_target t, const char *file, run *out, cl_err *e)
{
    if ((t == PLAN_TO_DEEPSPEED || t == PLAN_TO_DEEPSPEED_MODULE) && p->chunks > 1)
        return cl_fail(e, CL_EINPUT,
                       "%s: the plan interleaves %d chunks per device; DeepSpeed's PipelineModule runs one stage per rank (hint: plan with --schedule 1f1b)",
                       file, p->chunks);
    int rc = check_contiguous(p, t, file, e);
    if (rc) return rc;
    int r = p->stages[0].n_replicas, s = plan_uneven_stage(p);
    if (s)
        return cl_fail(e, CL_EINPUT,
                       "%s: stages[0] has %d replicas but stages[%d] has %d; %s replicates whole pipelines (one data-parallel degree) (hint: plan with --for %s, which plans only what it runs)",
                       file, r, s, p->stages[s].n_replicas, target_names[t],
                       t == PLAN_TO_DEEPSPEED_MODULE ? "deepspeed" : target_names[t]);
    if (p->n_micro % r)
        return cl_fail(e, CL_EINPUT,
                       "%s: %d microbatches over %d replicas leave them unequal; %s gives every data-parallel replica the same number (hint: plan with --microbatches a multiple of %d)",
                       file, p->n_micro, r, target_names[t], r);
    /* with context parallelism a stage's replicas are d data-parallel
     * ones of c context ranks each (planner/layout.h) */
    out->r = r / plan_context(p);
    out->gas = p->n_micro / r;
    return CL_OK;
}

/* cp: the plan's context-parallel degree (its samples are c-ths of a
 * sequence; the frameworks count sequences) */
static void put_pred(sbuf *b, const plan_pred *pr, int cp)
{
    if (pr->iteration_s > 0 && pr->throughput > 0)
        put(b, "%.6g s per iteration, %.1f samples/s", pr->iteration_s, pr->throughput / cp);
    else
        put(b, "no prediction in the plan");
}

/* The run the export states: partition, batch split, schedule, figure. */
static void header(sbuf *b, const plan *p, plan_target t, const plan_export_origin *planned, const run *rn,
                   const char *what)
{
    char *name = esc_python(p->model.name); /* no line break survives, so the comment stays one */
    put(b, "# %s for model %s: %d stage%s", what, name, p->n_stages, p->n_stages == 1 ? "" : "s");
    free(name);
    if (p->chunks > 1) put(b, " (%d devices x %d chunks)", p->n_stages / p->chunks, p->chunks);
    int cp = plan_context(p), devs = p->n_stages / p->chunks * rn->r * cp;
    put(b, ", data-parallel degree %d (%d device%s", rn->r, devs, devs == 1 ? "" : "s");
    if (plan_tensor(p) > 1) put(b, " of %d GPUs each, tensor-parallel", plan_tensor(p));
    if (cp > 1) put(b, ", %d context-parallel per replica", cp);
    put(b, ")\n");
    put(b, "# batch %d per iteration = %d replica%s x %d microbatch%s x %d samples\n", p->batch / cp, rn->r,
        rn->r == 1 ? "" : "s", rn->gas, rn->gas == 1 ? "" : "es", p->microbatch);
    if (planned && planned->schedule != p->schedule) {
        put(b, "# the plan's schedule, %s (predicted ", sched_kind_name(planned->schedule));
        put_pred(b, &planned->pred, cp);
        put(b, "), is not one %s runs;\n# this is the same partition and batch under %s, simulated by cleave: ",
            target_names[t], sched_kind_name(p->schedule));
        put_pred(b, &p->pred, cp);
        put(b, "\n");
        if (planned->need_bytes > planned->cap_bytes)
            put(b, "# WARNING: this run needs %.2f GiB on device %d, over its %.2f GiB\n",
                planned->need_bytes / (1 << 30), planned->over_dev, planned->cap_bytes / (1 << 30));
    } else {
        put(b, "# schedule %s, predicted by cleave: ", sched_kind_name(p->schedule));
        put_pred(b, &p->pred, cp);
        put(b, "\n");
    }
}

/* The start of a commented export: the run target t makes of p (or why it
 * cannot) and the header stating it. */
static int run_header(sbuf *b, const plan *p, plan_target t, const plan_export_origin *planned,
                      const char *file, const char *what, run *rn, cl_err *e)
{
    int rc = plan_run(p, t, file, rn, e);
    if (!rc) header(b, p, t, planned, rn, what);
    return rc;
}

/* ---------------------------------------------------------------- torch -- */

static const char *torch_schedule(sched_kind k)
{
    switch (k) {
    case SCHED_GPIPE: return "ScheduleGPipe";
    case SCHED_1F1B: return "Schedule1F1B";
    case SCHED_INTERLEAVED: return "ScheduleInterleaved1F1B";
    case SCHED_ZBH1: return "ScheduleInterleavedZeroBubble";
    default: return NULL;
    }
}

static int to_torch(const plan *p, const plan_export_origin *planned, const char *file, sbuf *b, cl_err *e)
{
    run rn;
    int rc = run_header(b, p, PLAN_TO_TORCH, planned, file, "torch.distributed.pipelining split points",
                        &rn, e);
    if (rc) return rc;
    put(b, "# Keys are the model's layer names; they must be the module names (FQNs)\n"
           "# of your torch model, as they are for the zoo's torchvision-named models.\n"
           "# Each of the data_parallel_degree pipelines passes batch_per_replica samples\n"
           "# to schedule.step() per iteration and all-reduces its stages' gradients\n"
           "# with the same stage of the other pipelines (e.g. DDP over that group).\n");
    put(b, "from torch.distributed.pipelining import SplitPoint\n\n");
    put(b, "split_spec = {\n");
    for (int s = 1; s < p->n_stages; s++) {
        char *key = esc_python(p->model.layers[p->stages[s].first].name);
        put(b, "    %s: SplitPoint.BEGINNING,\n", key);
        free(key);
    }
    put(b, "}\n");
    put(b, "n_stages = %d\n", p->n_stages);
    put(b, "data_parallel_degree = %d  # pipelines; world size %d\n", rn.r, p->n_stages / p->chunks * rn.r);
    put(b, "n_microbatches = %d  # per pipeline and iteration (the schedule's n_microbatches)\n", rn.gas);
    put(b, "microbatch_size = %d\n", p->microbatch);
    put(b, "batch_per_replica = %d  # n_microbatches x microbatch_size\n", rn.gas * p->microbatch);
    put(b, "global_batch_size = %d  # data_parallel_degree x batch_per_replica, the plan's batch\n", p->batch);
    const char *cls = torch_schedule(p->schedule);
    if (p->schedule == SCHED_SEQUENTIAL) cls = "ScheduleGPipe"; /* one stage: every order is the same */
    if (!cls)
        return cl_fail(e, CL_EINPUT, "%s: schedule %s has no torch equivalent (hint: plan with --schedule 1f1b)",
                       file, sched_kind_name(p->schedule));
    put(b, "schedule_class = \"%s\"\n", cls);
    return CL_OK;
}

/* ------------------------------------------------------------ deepspeed -- */

/* ds_config.json: DeepSpeed's batch keys (docs/config-json, "Batch Size
 * Related Parameters"): train_batch_size = train_micro_batch_size_per_gpu x
 * gradient_accumulation_steps x data-parallel ranks.  Pipeline engines run
 * gradient_accumulation_steps microbatches per train_batch().  JSON has no
 * comments, so the run's figures are in the deepspeed-module export. */
static int to_deepspeed(const plan *p, const char *file, sbuf *b, cl_err *e)
{
    run rn;
    int rc = plan_run(p, PLAN_TO_DEEPSPEED, file, &rn, e);
    if (rc) return rc;
    put(b, "{\n  \"train_batch_size\": %d,\n  \"train_micro_batch_size_per_gpu\": %d,\n"
           "  \"gradient_accumulation_steps\": %d\n}\n",
        p->batch, p->microbatch, rn.gas);
    return CL_OK;
}

/* The cut through PipelineModule's public arguments: partition_method
 * "parameters" and "type:REGEX" balance a count and cannot place an arbitrary
 * cut, but "uniform" over exactly num_stages layers gives each stage one; so
 * the layers are grouped into one nn.Sequential per planned stage. */
static int to_deepspeed_module(const plan *p, const plan_export_origin *planned, const char *file, sbuf *b,
                               cl_err *e)
{
    run rn;
    int rc = run_header(b, p, PLAN_TO_DEEPSPEED_MODULE, planned, file, "DeepSpeed PipelineModule", &rn, e);
    if (rc) return rc;
    put(b, "# planned_pipeline(layers) groups the model's %d layers (nn.Modules, in\n"
           "# this order) into one nn.Sequential per stage; partition_method=\"uniform\"\n"
           "# then gives every stage exactly one of them (\"parameters\" and \"type:...\"\n"
           "# balance a count and cannot place these cuts).  Every rank builds all\n"
           "# layers.  Run on %d GPUs with the ds_config.json of\n"
           "# `cleave export PLAN --to deepspeed` (gradient_accumulation_steps %d).\n",
        p->model.n_layers, p->n_stages * rn.r, rn.gas);
    put(b, "from torch import nn\nfrom deepspeed.pipe import PipelineModule\n\n");
    put(b, "num_stages = %d\n", p->n_stages);
    put(b, "parts = [");
    for (int s = 0; s < p->n_stages; s++) put(b, "%d, ", p->stages[s].first);
    put(b, "%d]  # stage s owns layers[parts[s]:parts[s + 1]]\n\n\n", p->model.n_layers);
    put(b, "def planned_pipeline(layers, **kwargs):\n"
           "    if len(layers) != parts[-1]:\n"
           "        raise ValueError(\"the plan has %%d layers, got %%d\" %% (parts[-1], len(layers)))\n"
           "    stages = [nn.Sequential(*layers[parts[s]:parts[s + 1]]) for s in range(num_stages)]\n"
           "    return PipelineModule(layers=stages, num_stages=num_stages, partition_method=\"uniform\", **kwargs)\n");
    return CL_OK;
}

/* ------------------------------------------------------------- megatron -- */

static int name_has(const char *name, const char *word)
{
    char low[MODEL_NAME_MAX];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof low; i++) low[i] = (char)tolower((unsigned char)name[i]);
    low[i] = '\0';
    return strstr(low, word) != NULL;
}

static int is_head(const model_layer *l)
{
    static const char *const words[] = {"head", "loss", "logit", "output", "classifier", "lm_", NULL};
    if (l->kind == MODEL_SOFTMAX_XENT) return 1;
    for (int k = 0; words[k]; k++)
        if (name_has(l->name, words[k])) return 1;
    return 0;
}

static void put_t(sbuf *b, int k)
{
    if (k == 1) put(b, "t");
    else if (k == 2) put(b, "tt");
    else if (k > 2) put(b, "t*%d", k);
}

/* The same split in the flags older Megatron versions have: a first and a
 * last stage with their own transformer-layer counts, the stages between
 * them equal (the embedding always on the first stage, the loss on the last).
 * Returns 1 after writing the flags, 0 after a comment saying why the split
 * does not fit them. */
static int megatron_previous(sbuf *b, const plan *p, const int *tl, int S, int n_t)
{
    put(b, "# older versions (--decoder-first/last-pipeline-num-layers), the same split:\n");
    if (p->chunks > 1) {
        put(b, "#   not expressible: interleaved chunks need equal stages there\n");
        return 0;
    }
    for (int s = 0; s < S; s++)
        if (tl[s] < 1) {
            put(b, "#   not expressible: stage %d holds no transformer layer\n", s);
            return 0;
        }
    for (int s = 2; s < S - 1; s++)
        if (tl[s] != tl[1]) {
            put(b, "#   not expressible: the middle stages hold %d and %d transformer layers (stages 1, %d)\n", tl[1],
                tl[s], s);
            return 0;
        }
    put(b, "--num-layers %d --pipeline-model-parallel-size %d", n_t, S);
    if (S > 1)
        put(b, " --decoder-first-pipeline-num-layers %d --decoder-last-pipeline-num-layers %d", tl[0], tl[S - 1]);
    return 1;
}

int plan_target_model(const model *m, plan_target t, const char *file, int *head, cl_err *e)
{
    int n = m->n_layers;
    *head = n;
    if (t != PLAN_TO_MEGATRON) return CL_OK;
    /* E: a leading embedding; L: the trailing head/loss layers; t: blocks */
    if (n < 2 || !name_has(m->layers[0].name, "embed"))
        return cl_fail(e, CL_EINPUT,
                       "%s: megatron needs a transformer model (embedding, transformer layers, head); layer 0 (\"%s\") is not an embedding",
                       file, m->layers[0].name);
    int tail = n;
    while (tail > 1 && is_head(&m->layers[tail - 1])) tail--;
    if (tail == n)
        return cl_fail(e, CL_EINPUT,
                       "%s: megatron needs a transformer model ending in a head or loss layer; the last layer is \"%s\"",
                       file, m->layers[n - 1].name);
    for (int i = 1; i < tail; i++)
        if (m->layers[i].kind != MODEL_BLOCK)
            return cl_fail(e, CL_EINPUT,
                           "%s: megatron needs transformer layers between the embedding and the head; layer %d (\"%s\") is a %s",
                           file, i, m->layers[i].name, model_kind_name(m->layers[i].kind));
    *head = tail;
    return CL_OK;
}

static int to_megatron(const plan *p, const plan_export_origin *planned, const char *file, sbuf *b, cl_err *e)
{
    const model *m = &p->model;
    int tail;
    int rc = plan_target_model(m, PLAN_TO_MEGATRON, file, &tail, e);
    if (rc) return rc;
    run rn;
    rc = plan_run(p, PLAN_TO_MEGATRON, file, &rn, e);
    if (rc) return rc;
    /* the head layers stay together on the last stage */
    for (int s = 0; s < p->n_stages; s++)
        if (p->stages[s].first > tail)
            return cl_fail(e, CL_EINPUT,
                           "%s: stages[%d] starts inside the head layers (at \"%s\"); Megatron keeps them together on the last stage",
                           file, s, m->layers[p->stages[s].first].name);
    /* one text per stage: E? t*k L?, and its transformer-layer count */
    int S = p->n_stages;
    char **txt = cl_calloc((size_t)S, sizeof *txt);
    int *tl = cl_calloc((size_t)S, sizeof *tl);
    for (int s = 0; s < S; s++) {
        const plan_stage *st = &p->stages[s];
        sbuf one = {0};
        put(&one, "%s", "");
        if (st->first == 0) put(&one, "E");
        int a = st->first < 1 ? 1 : st->first, z = st->last < tail - 1 ? st->last : tail - 1;
        tl[s] = z >= a ? z - a + 1 : 0;
        put_t(&one, tl[s]);
        if (st->last >= tail) put(&one, "%sL", z >= a ? "," : "");
        txt[s] = one.s;
    }
    header(b, p, PLAN_TO_MEGATRON, planned, &rn, "Megatron-LM pipeline layout");
    int tp = plan_tensor(p), cp = plan_context(p);
    char cps[32] = "";
    if (cp > 1) snprintf(cps, sizeof cps, " x context %d", cp);
    put(b, "# Megatron takes the data-parallel degree from the world size: run on %d GPUs\n"
           "# (tensor %d%s x pipeline %d x data %d); global batch / (micro batch x data) = %d microbatches.\n"
           "# E = embedding, t = transformer layer, L = loss (with the output layer);\n"
           "# stages are split by |, (X|)*n repeats a stage n times.\n",
        tp * cp * (S / p->chunks) * rn.r, tp, cps, S / p->chunks, rn.r, rn.gas);
    if (p->zero == 2)
        put(b, "# ZeRO 2 planned: Megatron's distributed optimizer shards the optimizer state and\n"
               "# reduce-scatters the gradients, but keeps a full gradient buffer per rank.\n");
    /* what the plan says beyond the pipeline, the same on both lines */
    char batch[320];
    int n = 0;
    if (tp > 1) n += snprintf(batch + n, sizeof batch - (size_t)n, " --tensor-model-parallel-size %d", tp);
    if (cp > 1) n += snprintf(batch + n, sizeof batch - (size_t)n, " --context-parallel-size %d", cp);
    if (p->seq_par) n += snprintf(batch + n, sizeof batch - (size_t)n, " --sequence-parallel");
    if (p->recompute == TFM_RECOMP_SELECTIVE || p->recompute == TFM_RECOMP_FULL)
        n += snprintf(batch + n, sizeof batch - (size_t)n, " --recompute-granularity %s%s",
                      tfm_recomp_name((tfm_recomp)p->recompute),
                      p->recompute == TFM_RECOMP_FULL ? " --recompute-method uniform --recompute-num-layers 1" : "");
    if (p->zero >= 1) n += snprintf(batch + n, sizeof batch - (size_t)n, " --use-distributed-optimizer");
    snprintf(batch + n, sizeof batch - (size_t)n, " --micro-batch-size %d --global-batch-size %d\n", p->microbatch,
             p->batch / cp);
    put(b, "# Megatron-core with --pipeline-model-parallel-layout:\n");
    put(b, "--num-layers %d --pipeline-model-parallel-size %d", tail - 1, S / p->chunks);
    put(b, " --pipeline-model-parallel-layout \"");
    for (int s = 0; s < S;) {
        int k = 1;
        while (s + k < S - 1 && strcmp(txt[s + k], txt[s]) == 0) k++;
        if (k >= 3 && s + k < S) {
            put(b, "(%s|)*%d,", txt[s], k);
        } else {
            k = 1;
            put(b, "%s%s", txt[s], s + 1 < S ? "|" : "");
        }
        s += k;
    }
    put(b, "\"%s", batch);
    if (megatron_previous(b, p, tl, S, tail - 1)) put(b, "%s", batch);
    for (int s = 0; s < S; s++) free(txt[s]);
    free(txt);
    free(tl);
    return CL_OK;
}

int plan_export(const plan *p, plan_target t, const char *file, char **text, cl_err *e)
{
    *text = NULL;
    if ((unsigned)t >= PLAN_TO_COUNT) return cl_fail(e, CL_EINPUT, "unknown export target");
    plan_export_origin from = {p->schedule, p->pred, -1, 0, 0}, *planned = NULL;
    plan sync = *p; /* shallow: only the schedule and figures differ */
    sched_kind kind = plan_export_schedule(p, t);
    if (kind != p->schedule) {
        /* refuse what the target cannot take before simulating anything */
        run rn;
        int rc = plan_run(p, t, file, &rn, e);
        if (rc) return rc;
        /* the target's run of this partition and batch, with its own figure */
        sync.schedule = kind;
        sim_result r;
        if ((rc = sim_predict(&sync, &r, e))) return rc;
        sync.pred.iteration_s = r.iteration_s;
        sync.pred.throughput = r.throughput;
        sync.pred.bubble = r.bubble;
        sync.pred.speedup = r.speedup;
        for (int i = 0; i < r.n_dev; i++) { /* a schedule with more in flight may not fit */
            int d = r.dev[i].device;
            if (d < 0 || d >= p->cluster.n_devices) continue;
            double cap = (double)cluster_usable_bytes(&p->cluster.types[p->cluster.devices[d].type]);
            if (r.dev[i].peak_mem_bytes - cap > from.need_bytes - from.cap_bytes) {
                from.over_dev = d;
                from.need_bytes = r.dev[i].peak_mem_bytes;
                from.cap_bytes = cap;
            }
        }
        sim_result_free(&r);
        planned = &from;
    }
    sbuf b = {0};
    put(&b, "%s", "");
    int rc;
    switch (t) {
    case PLAN_TO_TORCH: rc = to_torch(&sync, planned, file, &b, e); break;
    case PLAN_TO_DEEPSPEED: rc = to_deepspeed(&sync, file, &b, e); break;
    case PLAN_TO_DEEPSPEED_MODULE: rc = to_deepspeed_module(&sync, planned, file, &b, e); break;
    default: rc = to_megatron(&sync, planned, file, &b, e); break;
    }
    if (rc) {
        free(b.s);
        return rc;
    }
    *text = b.s;
    return CL_OK;
}
