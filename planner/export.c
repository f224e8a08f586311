/* export.c - plans as framework settings (see export.h). */
#include <assert.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/escape.h"
#include "export.h"

static const char *const target_names[] = {"torch", "deepspeed", "megatron"};
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

/* One replica count for all stages; returns it, or -1 after failing. */
static int uniform_replicas(const plan *p, plan_target t, const char *file, cl_err *e)
{
    int r = p->stages[0].n_replicas;
    for (int s = 1; s < p->n_stages; s++)
        if (p->stages[s].n_replicas != r) {
            cl_fail(e, CL_EINPUT,
                    "%s: stages[0] has %d replicas but stages[%d] has %d; %s replicates whole pipelines (one data-parallel degree) (hint: plan with --no-replication)",
                    file, r, s, p->stages[s].n_replicas, target_names[t]);
            return -1;
        }
    return r;
}

static void header(sbuf *b, const plan *p, const char *what)
{
    char *name = esc_python(p->model.name); /* no line break survives, so the comment stays one */
    put(b, "# %s for model %s: %d stage%s", what, name, p->n_stages, p->n_stages == 1 ? "" : "s");
    free(name);
    if (p->chunks > 1) put(b, " (%d devices x %d chunks)", p->n_stages / p->chunks, p->chunks);
    put(b, "\n# from a cleave plan: schedule %s, batch %d = %d microbatches of %d\n",
        sched_kind_name(p->schedule), p->batch, p->n_micro, p->microbatch);
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

static int to_torch(const plan *p, const char *file, sbuf *b, cl_err *e)
{
    int rc = check_contiguous(p, PLAN_TO_TORCH, file, e);
    if (rc) return rc;
    int r = uniform_replicas(p, PLAN_TO_TORCH, file, e);
    if (r < 0) return CL_EINPUT;
    header(b, p, "torch.distributed.pipelining split points");
    put(b, "# Keys are the model's layer names; they must be the module names (FQNs)\n"
           "# of your torch model, as they are for the zoo's torchvision-named models.\n");
    put(b, "from torch.distributed.pipelining import SplitPoint\n\n");
    put(b, "split_spec = {\n");
    for (int s = 1; s < p->n_stages; s++) {
        char *key = esc_python(p->model.layers[p->stages[s].first].name);
        put(b, "    %s: SplitPoint.BEGINNING,\n", key);
        free(key);
    }
    put(b, "}\n");
    put(b, "n_stages = %d\n", p->n_stages);
    put(b, "n_microbatches = %d\n", p->n_micro);
    if (r > 1) put(b, "data_parallel_degree = %d  # each stage on %d devices\n", r, r);
    const char *cls = torch_schedule(p->schedule);
    if (cls) put(b, "schedule_class = \"%s\"\n", cls);
    else
        put(b, "# schedule %s has no torch.distributed.pipelining equivalent; Schedule1F1B runs\n"
               "# the same order with a flush\nschedule_class = \"Schedule1F1B\"\n",
            sched_kind_name(p->schedule));
    return CL_OK;
}

/* ------------------------------------------------------------ deepspeed -- */

static int to_deepspeed(const plan *p, const char *file, sbuf *b, cl_err *e)
{
    if (p->chunks > 1)
        return cl_fail(e, CL_EINPUT,
                       "%s: the plan interleaves %d chunks per device; DeepSpeed's PipelineModule runs one stage per rank (hint: plan with --schedule 1f1b)",
                       file, p->chunks);
    int rc = check_contiguous(p, PLAN_TO_DEEPSPEED, file, e);
    if (rc) return rc;
    int r = uniform_replicas(p, PLAN_TO_DEEPSPEED, file, e);
    if (r < 0) return CL_EINPUT;
    header(b, p, "DeepSpeed PipelineModule partition");
    put(b, "# Stage s owns layers[parts[s]:parts[s+1]] of the PipelineModule's layer list,\n"
           "# which must list the model's %d layers in this order.\n",
        p->model.n_layers);
    put(b, "num_stages = %d\n", p->n_stages);
    put(b, "parts = [");
    for (int s = 0; s < p->n_stages; s++) put(b, "%d, ", p->stages[s].first);
    put(b, "%d]\n", p->model.n_layers);
    put(b, "micro_batches = %d  # gradient_accumulation_steps\n", p->n_micro);
    put(b, "train_micro_batch_size_per_gpu = %d\n", p->microbatch);
    if (r > 1) put(b, "data_parallel_degree = %d\n", r);
    put(b, "\n# PipelineModule chooses its own boundaries (partition_method); to use these:\n"
           "# class PlannedPipelineModule(PipelineModule):\n"
           "#     def _partition_layers(self, method=\"\"):\n"
           "#         super()._partition_layers(method=\"uniform\")\n"
           "#         self.parts = parts\n"
           "#         self._set_bounds(start=self.parts[self.stage_id], stop=self.parts[self.stage_id + 1])\n");
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

static int to_megatron(const plan *p, const char *file, sbuf *b, cl_err *e)
{
    const model *m = &p->model;
    int n = m->n_layers;
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
    int rc = check_contiguous(p, PLAN_TO_MEGATRON, file, e);
    if (rc) return rc;
    int r = uniform_replicas(p, PLAN_TO_MEGATRON, file, e);
    if (r < 0) return CL_EINPUT;
    /* the head layers stay together on the last stage */
    for (int s = 0; s < p->n_stages; s++)
        if (p->stages[s].first > tail)
            return cl_fail(e, CL_EINPUT,
                           "%s: stages[%d] starts inside the head layers (at \"%s\"); Megatron keeps them together on the last stage",
                           file, s, m->layers[p->stages[s].first].name);
    /* one text per stage: E? t*k L? */
    int S = p->n_stages;
    char **txt = cl_calloc((size_t)S, sizeof *txt);
    for (int s = 0; s < S; s++) {
        const plan_stage *st = &p->stages[s];
        sbuf one = {0};
        put(&one, "%s", "");
        if (st->first == 0) put(&one, "E");
        int a = st->first < 1 ? 1 : st->first, z = st->last < tail - 1 ? st->last : tail - 1;
        put_t(&one, z - a + 1);
        if (st->last >= tail) put(&one, "%sL", z >= a ? "," : "");
        txt[s] = one.s;
    }
    header(b, p, "Megatron-LM pipeline layout");
    put(b, "# E = embedding, t = transformer layer, L = loss (with the output layer);\n"
           "# stages are split by |, (X|)*n repeats a stage n times.\n");
    put(b, "--num-layers %d --pipeline-model-parallel-size %d", tail - 1, S / p->chunks);
    put(b, " --pipeline-model-parallel-layout \"");
    for (int s = 0; s < S;) {
        int run = 1;
        while (s + run < S - 1 && strcmp(txt[s + run], txt[s]) == 0) run++;
        if (run >= 3 && s + run < S) {
            put(b, "(%s|)*%d,", txt[s], run);
        } else {
            run = 1;
            put(b, "%s%s", txt[s], s + 1 < S ? "|" : "");
        }
        s += run;
    }
    put(b, "\"");
    if (r > 1) put(b, "  # data-parallel degree %d", r);
    put(b, "\n--micro-batch-size %d --global-batch-size %d\n", p->microbatch, p->batch * r);
    for (int s = 0; s < S; s++) free(txt[s]);
    free(txt);
    return CL_OK;
}

int plan_export(const plan *p, plan_target t, const char *file, char **text, cl_err *e)
{
    *text = NULL;
    sbuf b = {0};
    put(&b, "%s", "");
    int rc;
    switch (t) {
    case PLAN_TO_TORCH: rc = to_torch(p, file, &b, e); break;
    case PLAN_TO_DEEPSPEED: rc = to_deepspeed(p, file, &b, e); break;
    case PLAN_TO_MEGATRON: rc = to_megatron(p, file, &b, e); break;
    default: rc = cl_fail(e, CL_EINPUT, "unknown export target"); break;
    }
    if (rc) {
        free(b.s);
        return rc;
    }
    *text = b.s;
    return CL_OK;
}
