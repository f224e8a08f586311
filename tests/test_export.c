/* test_export.c - `cleave export` states exactly the plan's run: global
 * batch = microbatch x microbatches per replica x data-parallel degree, the
 * plan's microbatch size, DeepSpeed's ds_config.json as JSON with documented
 * keys, Megatron flags that exist in Megatron-LM, Python that compiles, the
 * figure of the run exported when the target does not run the plan's
 * schedule, and one-line refusals for plans no framework runs (issue 16,
 * "Exports (measured)"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/plan.h"
#include "base/fileio.h"
#include "base/jsonx.h"
#include "base/spawn.h"
#include "test.h"

/* Top-level keys from DeepSpeed's configuration reference,
 * docs/_pages/config-json.md of microsoft/DeepSpeed (commit da7f21a2,
 * "DeepSpeed Configuration JSON": batch size, optimizer, scheduler,
 * communication and FP16 sections). */
static const char *const ds_keys[] = {
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "optimizer", "scheduler",
    "communication_data_type", "prescale_gradients", "gradient_predivide_factor", "sparse_gradients", "fp16", NULL};

/* Flags defined in Megatron-LM's megatron/training/arguments.py
 * (NVIDIA/Megatron-LM commit 000c4ac24f61159c138b0975def722c65245983c):
 * network size, training (batch) and distributed (pipeline) groups. */
static const char *const megatron_flags[] = {
    "--num-layers", "--micro-batch-size", "--global-batch-size", "--pipeline-model-parallel-size",
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers", "--pipeline-model-parallel-layout",
    "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
    /* model parallelism, activation recomputation and the distributed
     * optimizer (the same file's distributed and training groups) */
    "--tensor-model-parallel-size", "--sequence-parallel", "--recompute-granularity", "--recompute-method",
    "--recompute-num-layers", "--use-distributed-optimizer", NULL};

static int in_list(const char *const *list, const char *s)
{
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], s)) return 1;
    return 0;
}

/* The integer after "name" in text (e.g. "n_microbatches = "), or -1. */
static long after(const char *text, const char *name)
{
    const char *at = text ? strstr(text, name) : NULL;
    return at ? strtol(at + strlen(name), NULL, 10) : -1;
}

static char *dir;

static const char *tmp(const char *name, char *buf, size_t cap)
{
    if (!dir) dir = test_tmpdir();
    snprintf(buf, cap, "%s/%s", dir, name);
    return buf;
}

/* GPT-2 on the 8-GPU H100 cluster with Adam: the plan replicates its stages. */
#define GPT2_H100 "--model models/gpt2-1.5b.json --cluster profiles/clusters/h100-8-nvlink.json --optimizer adam "

/* `cleave plan ARGS -o out`, loaded into p: a fatal assertion when either fails. */
static void make_plan(const char *args, const char *out, plan *p)
{
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "plan %s -o %s", args, out);
    char *so, *se;
    int st = test_run_cli(cmd, &so, &se);
    if (st) fprintf(stderr, "\n  %s: %s", cmd, se);
    free(so);
    free(se);
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(st ? st : plan_load(p, out, &e), 0);
}

static char *export(const char *plan_path, const char *target, char **err)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "export %s --to %s", plan_path, target);
    char *so, *se;
    int st = test_run_cli(cmd, &so, &se);
    if (st) fprintf(stderr, "\n  %s: %s", cmd, se);
    CU_ASSERT_EQUAL(st, 0);
    if (err) *err = se;
    else free(se);
    if (st) {
        free(so);
        return NULL;
    }
    return so;
}

/* Megatron: every flag on the non-comment lines from arguments.py, and each
 * line's batch flags give the plan's batch and microbatches per replica. */
static int check_megatron(const char *text, const plan *p, int r)
{
    int lines = 0;
    char *copy = cl_strdup(text), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') continue;
        lines++;
        char *s2 = NULL;
        for (char *tok = strtok_r(line, " ", &s2); tok; tok = strtok_r(NULL, " ", &s2))
            if (!strncmp(tok, "--", 2) && !in_list(megatron_flags, tok)) {
                fprintf(stderr, "\n  %s is not a Megatron-LM flag", tok);
                CU_FAIL("unknown Megatron flag");
            }
    }
    free(copy);
    /* both interfaces state the batch the same way */
    for (const char *at = text; (at = strstr(at, "--micro-batch-size ")); at++) {
        long mb = after(at, "--micro-batch-size "), gb = after(at, "--global-batch-size ");
        CU_ASSERT_EQUAL(mb, p->microbatch);
        CU_ASSERT_EQUAL(gb, p->batch);
        /* Megatron's microbatches per replica: global / (micro x data-parallel) */
        CU_ASSERT_EQUAL(gb % (mb * r), 0);
        CU_ASSERT_EQUAL(gb / (mb * r), p->n_micro / r);
    }
    return lines;
}

/* The GPT-2 plan: 2 stages x 4 replicas, batch 64 = 8 microbatches
 * of 8.  Every export must describe that batch, not 4 x 64. */
static void test_batch_gpt2(void)
{
    char out[600];
    tmp("g.json", out, sizeof out);
    plan p;
    make_plan(GPT2_H100 "--schedule 1f1b", out, &p);
    int r = p.stages[0].n_replicas;
    for (int s = 1; s < p.n_stages; s++) CU_ASSERT_EQUAL_FATAL(p.stages[s].n_replicas, r);
    CU_ASSERT_EQUAL(p.n_micro % r, 0);
    if (r == 1) printf("[plan not replicated: r = 1] ");

    /* torch: the schedule's n_microbatches is per pipeline */
    char *t = export(out, "torch", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    long dp = after(t, "\ndata_parallel_degree = "), nm = after(t, "\nn_microbatches = "),
         mbs = after(t, "\nmicrobatch_size = "), gb = after(t, "\nglobal_batch_size = ");
    CU_ASSERT_EQUAL(dp, r);
    CU_ASSERT_EQUAL(mbs, p.microbatch);
    CU_ASSERT_EQUAL(nm * mbs * dp, p.batch);
    CU_ASSERT_EQUAL(gb, p.batch);
    CU_ASSERT_EQUAL(after(t, "\nbatch_per_replica = "), p.batch / r);
    free(t);

    /* deepspeed: JSON with documented keys and DeepSpeed's batch identity */
    t = export(out, "deepspeed", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    cJSON *j = cJSON_Parse(t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    for (cJSON *k = j->child; k; k = k->next) {
        if (!in_list(ds_keys, k->string)) fprintf(stderr, "\n  %s is not a documented DeepSpeed key", k->string);
        CU_ASSERT_TRUE(in_list(ds_keys, k->string));
    }
    const cJSON *tb = cJSON_GetObjectItem(j, "train_batch_size"),
                *mb = cJSON_GetObjectItem(j, "train_micro_batch_size_per_gpu"),
                *gas = cJSON_GetObjectItem(j, "gradient_accumulation_steps");
    CU_ASSERT_FATAL(cJSON_IsNumber(tb) && cJSON_IsNumber(mb) && cJSON_IsNumber(gas));
    CU_ASSERT_EQUAL(tb->valueint, p.batch);
    CU_ASSERT_EQUAL(mb->valueint, p.microbatch);
    CU_ASSERT_EQUAL(mb->valueint * gas->valueint * r, tb->valueint);
    cJSON_Delete(j);
    free(t);

    /* deepspeed-module: the cut as parts, the stage count */
    t = export(out, "deepspeed-module", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    if (p.n_stages == 2) { /* the planner may now keep one stage (equal-replica ranking) */
        char want[256];
        snprintf(want, sizeof want, "parts = [0, %d, %d]", p.stages[1].first, p.model.n_layers);
        CU_ASSERT_PTR_NOT_NULL(strstr(t, want));
    }
    CU_ASSERT_EQUAL(after(t, "\nnum_stages = "), p.n_stages);
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "partition_method=\"uniform\""));
    free(t);

    /* megatron: both interfaces, each with the plan's batch */
    t = export(out, "megatron", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(check_megatron(t, &p, r), 2);
    free(t);
    plan_free(&p);
}

/* An asynchronous plan: the export is its 1f1b run, and the header gives the
 * figure `cleave sim PLAN --schedule 1f1b` gives, besides the plan's own. */
static void test_async_figure(void)
{
    char out[600];
    tmp("fbp.json", out, sizeof out);
    plan p;
    make_plan(GPT2_H100 "--schedule fbp", out, &p);
    char cmd[1200], *so, *se;
    snprintf(cmd, sizeof cmd, "sim %s --schedule 1f1b --json", out);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(cmd, &so, &se), 0);
    cJSON *j = cJSON_Parse(so);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    const cJSON *thr = cJSON_GetObjectItem(j, "throughput");
    CU_ASSERT_FATAL(cJSON_IsNumber(thr));
    double sync = thr->valuedouble, peak = 0;
    const cJSON *devs = cJSON_GetObjectItem(j, "devices"), *d;
    cJSON_ArrayForEach(d, devs)
    {
        const cJSON *m = cJSON_GetObjectItem(d, "peak_mem_bytes");
        if (cJSON_IsNumber(m) && m->valuedouble > peak) peak = m->valuedouble;
    }
    CU_ASSERT_TRUE(peak > 0);
    cJSON_Delete(j);
    free(so);
    free(se);
    static const char *const targets[] = {"torch", "deepspeed-module", "megatron"};
    for (int k = 0; k < 3; k++) {
        char *err = NULL;
        char *t = export(out, targets[k], &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "note:"));
        const char *at = strstr(t, "under 1f1b, simulated by cleave: ");
        CU_ASSERT_PTR_NOT_NULL_FATAL(at);
        at = strstr(at, "per iteration, ");
        CU_ASSERT_PTR_NOT_NULL_FATAL(at);
        double got = strtod(at + strlen("per iteration, "), NULL);
        CU_ASSERT_TRUE(fabs(got - sync) <= 0.051); /* printed to 0.1 samples/s */
        char planned[96];
        snprintf(planned, sizeof planned, "%.1f samples/s), is not one", p.pred.throughput);
        CU_ASSERT_PTR_NOT_NULL(strstr(t, planned));
        free(t);
        free(err);
    }
    /* the 1f1b run over the memory the devices leave training (their memory
     * less their runtime reserve): said, with its peak; within it: not */
    for (int over = 0; over < 2; over++) {
        for (int k = 0; k < p.cluster.n_types; k++)
            p.cluster.types[k].mem_bytes = (uint64_t)(over ? peak - (1 << 30) : peak + (1 << 30)) +
                                           p.cluster.types[k].reserve_bytes;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(plan_save(&p, out, &e), CL_OK);
        char *t = export(out, "torch", NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        char want[96];
        snprintf(want, sizeof want, "# WARNING: this run needs %.2f GiB", peak / (1 << 30));
        if (over) {
            CU_ASSERT_PTR_NOT_NULL(strstr(t, want));
        } else {
            CU_ASSERT_PTR_NULL(strstr(t, "WARNING"));
        }
        free(t);
    }
    plan_free(&p);
}

/* The Python exports compile (python3 -m py_compile). */
static void test_python_compiles(void)
{
    char *argv0[] = {"python3", "-c", "pass", NULL};
    int have = cl_spawn_wait(argv0, NULL);
    if (have == -1 || !WIFEXITED(have) || WEXITSTATUS(have) != 0) {
        printf("[python3 missing: py_compile skipped] ");
        return;
    }
    char out[600], py[600], cmd[1400];
    tmp("g8.json", out, sizeof out);
    plan p;
    make_plan("--model models/gpt2-1.5b.json --devices 8 --device A100-80GB --batch 64 --schedule 1f1b "
              "--no-replication",
              out, &p);
    static const char *const targets[] = {"torch", "deepspeed-module"};
    char *pyd = test_tmpdir(); /* py_compile adds __pycache__ beside the file */
    for (int k = 0; k < 2; k++) {
        snprintf(py, sizeof py, "%s/%s.py", pyd, k ? "ds_module" : "torch_split");
        snprintf(cmd, sizeof cmd, "export %s --to %s -o %s", out, targets[k], py);
        CU_ASSERT_EQUAL(test_run_cli(cmd, NULL, NULL), 0);
        char *argv[] = {"python3", "-m", "py_compile", py, NULL};
        int st = cl_spawn_wait(argv, NULL);
        CU_ASSERT(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    test_rmtree(pyd);
    /* 8 stages: the older Megatron flags when the middle stages are equal,
     * else a comment saying why; either way the layer counts add up */
    char *t = export(out, "megatron", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_TRUE(check_megatron(t, &p, 1) >= 1);
    long first = after(t, "--decoder-first-pipeline-num-layers "), last = after(t, "--decoder-last-pipeline-num-layers ");
    if (first >= 0) {
        CU_ASSERT_EQUAL(first, p.stages[0].n_layers - 1); /* the embedding is not a transformer layer */
        int mid = p.n_stages > 2 ? p.stages[1].n_layers : 0;
        CU_ASSERT_EQUAL(first + last + (p.n_stages - 2) * mid, 48);
    } else {
        CU_ASSERT_PTR_NOT_NULL(strstr(t, "not expressible"));
    }
    free(t);
    plan_free(&p);
}

/* The word after "name" in text (e.g. "--recompute-granularity "), or "". */
static void word_after(const char *text, const char *name, char *buf, size_t cap)
{
    const char *at = strstr(text, name);
    buf[0] = '\0';
    if (at) snprintf(buf, cap, "%.*s", (int)strcspn(at + strlen(name), " \n"), at + strlen(name));
}

/* Tensor-parallel plans (LLaMA-3 8B on the 8-GPU H100 node, t 2 and 4, each
 * recomputation mode, sequence parallelism, ZeRO 1): the Megatron export
 * states t, the recomputation and the optimizer as the plan does, on both
 * interfaces, with the world size t x p x d; every other target refuses the
 * plan in one line naming --to megatron. */
static void test_megatron_tensor(void)
{
    static const struct { const char *args; int t, sp, zero; const char *gran; } cases[] = {
        {"--tensor 2 --recompute full", 2, 0, 0, "full"},
        {"--tensor 4 --sequence-parallel --recompute selective --zero 1", 4, 1, 1, "selective"},
        {"--tensor 2 --recompute none --zero 1", 2, 0, 1, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[600], args[400];
        tmp("tp.json", out, sizeof out);
        snprintf(args, sizeof args,
                 "--model models/llama3-8b.json --cluster profiles/clusters/h100-8-nvlink.json --optimizer adam "
                 "--for megatron %s", cases[i].args);
        plan p;
        make_plan(args, out, &p);
        CU_ASSERT_EQUAL(plan_tensor(&p), cases[i].t);
        char *t = export(out, "megatron", NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        int r = p.stages[0].n_replicas;
        CU_ASSERT(check_megatron(t, &p, r) >= 1); /* the older interface when the split fits it */
        /* each line: t, sequence parallelism, recomputation, optimizer */
        for (const char *line = t; (line = strstr(line, "--num-layers ")); line++) {
            const char *end = strchr(line, '\n');
            char one[1024], w[32];
            snprintf(one, sizeof one, "%.*s", end ? (int)(end - line) : (int)strlen(line), line);
            CU_ASSERT_EQUAL(after(one, "--tensor-model-parallel-size "), cases[i].t);
            CU_ASSERT_EQUAL(strstr(one, "--sequence-parallel") != NULL, cases[i].sp);
            word_after(one, "--recompute-granularity ", w, sizeof w);
            CU_ASSERT_STRING_EQUAL(w, cases[i].gran);
            CU_ASSERT_EQUAL(strstr(one, "--recompute-method uniform") != NULL, !strcmp(cases[i].gran, "full"));
            CU_ASSERT_EQUAL(strstr(one, "--use-distributed-optimizer") != NULL, cases[i].zero);
        }
        /* the world size: t x pipeline x data = t x the plan's devices */
        char want[96];
        snprintf(want, sizeof want, "run on %d GPUs", cases[i].t * plan_device_count(&p));
        CU_ASSERT_PTR_NOT_NULL(strstr(t, want));
        free(t);
        char cmd[800], *se = NULL;
        snprintf(cmd, sizeof cmd, "export %s --to torch", out);
        CU_ASSERT_EQUAL(test_run_cli(cmd, NULL, &se), 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(se, "only --to megatron writes"));
        CU_ASSERT_PTR_NOT_NULL(strchr(se, '\n') == se + strlen(se) - 1 ? se : NULL);
        free(se);
        plan_free(&p);
        remove(out);
    }
}

/* Microbatches that do not split evenly among the replicas: refused in one
 * line naming the plan, with a hint, nothing written. */
static void test_refusals(void)
{
    char out[600], bad[600], dst[600];
    tmp("g2.json", out, sizeof out);
    tmp("uneven.json", bad, sizeof bad);
    tmp("never.txt", dst, sizeof dst);
    plan p;
    make_plan(GPT2_H100 "--schedule 1f1b", out, &p);
    int r = p.stages[0].n_replicas;
    if (r < 2) {
        printf("[plan not replicated: uneven-microbatch refusal not exercised] ");
    } else {
        p.n_micro = r + 1; /* replica 0 would run 2 microbatches, the others 1 */
        p.microbatch = 1;
        p.batch = r + 1;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(plan_save(&p, bad, &e), CL_OK);
        static const char *const targets[] = {"torch", "deepspeed", "deepspeed-module", "megatron"};
        for (int k = 0; k < 4; k++) {
            char cmd[1400], *so, *se;
            snprintf(cmd, sizeof cmd, "export %s --to %s -o %s", bad, targets[k], dst);
            CU_ASSERT_EQUAL(test_run_cli(cmd, &so, &se), 2);
            CU_ASSERT_PTR_NOT_NULL(strstr(se, bad));
            CU_ASSERT_PTR_NOT_NULL(strstr(se, "hint: plan with --microbatches a multiple of"));
            CU_ASSERT_EQUAL(strchr(se, '\n') ? (int)(strchr(se, '\n') - se) + 1 : -1, (int)strlen(se));
            CU_ASSERT_NOT_EQUAL(access(dst, F_OK), 0);
            free(so);
            free(se);
        }
    }
    plan_free(&p);
}

/* The suite's folder, with the plan files the tests wrote in it. */
static void test_cleanup(void)
{
    if (dir) CU_ASSERT_EQUAL(test_rmtree(dir), 0);
    dir = NULL;
}

TEST_SUITE(export)
{
    test_add_suite("export");
    test_add("every export states the plan's batch (GPT-2, 4 replicas)", test_batch_gpt2);
    test_add("asynchronous plan: the 1f1b run's simulated figure", test_async_figure);
    test_add("Python exports compile; Megatron layer counts add up", test_python_compiles);
    test_add("uneven microbatches per replica: refused", test_refusals);
    test_add("tensor-parallel plans: Megatron flags for t, recomputation, optimizer", test_megatron_tensor);
    test_add("clean up", test_cleanup);
}
