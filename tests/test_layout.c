/* test_layout.c - `cleave plan --layout` (planner/layout.h) and `cleave
 * bench fidelity` (bench/fidelity.h): a layout equal to the search's
 * choice gets the search's figure to the bit, a layout checked by hand,
 * bad layouts (exit 2, one line), a layout that does not fit (exit 1, the
 * numbers), and the fidelity table end to end on a small CSV. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"
#include "bench/fidelity.h"
#include "core/plan.h"
#include "models/model.h"
#include "models/transformer.h"
#include "planner/predict.h"
#include "profiles/cluster.h"
#include "test.h"

static char *dir;

static void path_in(char *buf, size_t cap, const char *name)
{
    if (!dir) dir = test_tmpdir();
    snprintf(buf, cap, "%s/%s", dir, name);
}

/* Run `cleave ARGS` (it must succeed) and load the plan it wrote to path. */
static void plan_run(plan *p, const char *args, const char *path)
{
    char *so, *se;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &so, &se), 0);
    free(so);
    free(se);
    CU_ASSERT_EQUAL_FATAL(plan_load(p, path, &e), CL_OK);
}

/* The iteration `cleave sim ARGS --json` prints (it must succeed). */
static double sim_iteration(const char *args)
{
    char *so, *se;
    double it = NAN;
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &so, &se), 0);
    const char *at = strstr(so, "\"iteration_s\":");
    CU_ASSERT_PTR_NOT_NULL(at);
    if (at) it = strtod(at + 14, NULL);
    free(so);
    free(se);
    return it;
}

/* LLaMA-2 7B on one node of 8 A100s: the quick question both runs ask */
#define Q "--model models/llama2-7b.json --device A100-80GB --devices 8 --per-node 8 --bandwidth 300e9 --optimizer adam"

static void test_search_reproduced(void)
{
    char sp[600], lp[600], args[2000], lay[400];
    path_in(sp, sizeof sp, "search.json");
    path_in(lp, sizeof lp, "layout.json");
    snprintf(args, sizeof args, "plan " Q " --batch 16 --microbatches 8 --schedule 1f1b --for megatron --stages 2 --tensor 2 --recompute full -o %s", sp);
    plan s, l;
    plan_run(&s, args, sp);
    CU_ASSERT_EQUAL_FATAL(s.n_stages, 2);
    int d = s.stages[0].n_replicas;
    snprintf(lay, sizeof lay, "t=2,p=2,d=%d,mb=%d,m=%d,sched=1f1b,recompute=full,split=%d/%d", d, s.microbatch,
             s.n_micro / d, s.stages[0].n_layers, s.stages[1].n_layers);
    snprintf(args, sizeof args, "plan " Q " --layout %s --for megatron -o %s", lay, lp);
    plan_run(&l, args, lp);
    CU_ASSERT_EQUAL(l.n_micro, s.n_micro);
    CU_ASSERT_EQUAL(l.pred.iteration_s, s.pred.iteration_s); /* to the bit */
    CU_ASSERT_EQUAL(l.stages[0].mem_bytes, s.stages[0].mem_bytes);
    CU_ASSERT_EQUAL(l.tensor, 2);
    /* cleave sim --layout replays the same plan: the same iteration */
    snprintf(args, sizeof args, "sim " Q " --layout %s --for megatron --json", lay);
    CU_ASSERT_EQUAL(sim_iteration(args), l.pred.iteration_s);
    /* the framework is part of the run: without it the fp16 model keeps
     * fp32 gradients (18 bytes a parameter, not Megatron-LM's 20) */
    snprintf(args, sizeof args, "sim " Q " --layout %s --json", lay);
    CU_ASSERT_NOT_EQUAL(sim_iteration(args), l.pred.iteration_s);
    plan_free(&s);
    plan_free(&l);
}

/* 32 blocks over p = 2, embedding first and head last: layers 0-16 and
 * 17-33; mb x m x d = 1 x 4 x 4 = the batch of 16; GPipe without
 * communication on 2 stages: (m - 1) x the slower stage + both stages,
 * per replica's m = 4 microbatches, plus the optimizer step. */
static void test_by_hand(void)
{
    char lp[600], args[1600];
    path_in(lp, sizeof lp, "hand.json");
    snprintf(args, sizeof args, "plan " Q " --comm off --layout t=1,p=2,d=4,mb=1,m=4,sched=gpipe,recompute=full -o %s", lp);
    plan l;
    plan_run(&l, args, lp);
    CU_ASSERT_EQUAL(l.batch, 16);
    CU_ASSERT_EQUAL(l.n_micro, 16);
    CU_ASSERT_EQUAL(l.microbatch, 1);
    CU_ASSERT_EQUAL_FATAL(l.n_stages, 2);
    CU_ASSERT_EQUAL(l.stages[0].first, 0);
    CU_ASSERT_EQUAL(l.stages[0].last, 16);
    CU_ASSERT_EQUAL(l.stages[1].last, 33);
    CU_ASSERT_EQUAL(l.stages[1].n_replicas, 4);
    double t[2];
    for (int s = 0; s < 2; s++) t[s] = l.stages[s].fwd_s + l.stages[s].bwd_in_s + l.stages[s].bwd_w_s;
    double want = 3 * fmax(t[0], t[1]) + t[0] + t[1];
    /* the optimizer step comes on top; it is far below a microbatch here */
    CU_ASSERT(l.pred.iteration_s >= want * (1 - 1e-9));
    CU_ASSERT(l.pred.iteration_s <= want * 1.02);
    plan_free(&l);
}

/* Interleaved with data-parallel replicas: each replica runs Megatron's
 * order over its own microbatches, so without communication 2 replicas of
 * m = 4 take what one pipeline of m = 4 takes. */
static void test_interleaved_replicas(void)
{
    char lp[2][600], args[1600];
    plan l[2];
    for (int d = 1; d <= 2; d++) {
        path_in(lp[d - 1], sizeof lp[d - 1], d == 1 ? "il1.json" : "il2.json");
        snprintf(args, sizeof args, "plan --model models/llama2-7b.json --device A100-80GB --per-node 8 --comm off --devices %d "
                 "--layout p=2,d=%d,mb=1,m=4,sched=interleaved,v=2,recompute=full -o %s", 2 * d, d, lp[d - 1]);
        plan_run(&l[d - 1], args, lp[d - 1]);
    }
    CU_ASSERT_EQUAL(l[1].n_micro, 8);
    CU_ASSERT_EQUAL(l[1].stages[0].n_replicas, 2);
    CU_ASSERT(l[0].pred.iteration_s > 0);
    CU_ASSERT_EQUAL(l[1].pred.iteration_s, l[0].pred.iteration_s);
    plan_free(&l[0]);
    plan_free(&l[1]);
}

/* GPT-3 on 512 H100s, interleaved: more ops than the search replays per
 * candidate (it keeps the closed form for those, 4.3% fast here).  One
 * layout is one replay, so plan's figure is the one `cleave sim` prints for
 * the plan it wrote, to the bit. */
static void test_large_layout_simulated(void)
{
    char lp[600], args[1600];
    path_in(lp, sizeof lp, "large.json");
    snprintf(args, sizeof args, "plan --model models/gpt3-175b.json --device H100-80GB --devices 512 --per-node 8 "
             "--bandwidth 450e9,50e9 --batch 1024 --optimizer adam --attention fused "
             "--layout t=4,p=8,d=16,mb=1,sched=interleaved,v=12,zero=1,sp=1 -o %s", lp);
    plan l;
    plan_run(&l, args, lp);
    CU_ASSERT_EQUAL(l.n_micro, 1024);
    snprintf(args, sizeof args, "sim %s --json", lp);
    CU_ASSERT_EQUAL(sim_iteration(args), l.pred.iteration_s);
    plan_free(&l);
}

/* The asynchronous kinds' closed form against the simulator where the
 * all-reduces dominate: LLaMA-2 7B as 2 fbp stages of 16 replicas over 4
 * nodes on 1 GB/s links, 4 microbatches per replica, so each stage runs 4
 * rounds of a ~6.7 GB ring an iteration.  The layout's figure is the
 * replay; the closed form must come within 5% of it (with one all-reduce
 * an iteration, as before: 5.18 s against 5.83 s replayed, 11% fast). */
static void test_async_closed_form(void)
{
    char lp[600], args[1600];
    path_in(lp, sizeof lp, "fbp.json");
    snprintf(args, sizeof args, "plan --model models/llama2-7b.json --device A100-80GB --devices 32 --per-node 8 "
             "--bandwidth 300e9,1e9 --batch 64 --optimizer adam --layout p=2,d=16,mb=1,sched=fbp,recompute=full -o %s", lp);
    plan l;
    plan_run(&l, args, lp);
    plan_pred cf;
    plan_predict_opts po = {.comm = 1};
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(plan_predict(&l, &po, &cf, NULL, &e), CL_OK);
    CU_ASSERT(fabs(cf.iteration_s - l.pred.iteration_s) < 0.05 * l.pred.iteration_s);
    if (fabs(cf.iteration_s - l.pred.iteration_s) >= 0.05 * l.pred.iteration_s)
        fprintf(stderr, "\n  closed form %.4f s, replay %.4f s\n", cf.iteration_s, l.pred.iteration_s);
    plan_free(&l);
}

static void test_bad_layouts(void)
{
    static const struct { const char *layout, *want; } bad[] = {
        {"t=2,p=2,d=4", "t x p x d = 2 x 2 x 4 = 16 GPUs, but the cluster has 8"},
        {"t=16,p=1", "t 16 is more than the 8 GPUs of a node"},
        {"t=1,p=64,d=1", "= 64 GPUs, but the cluster has 8"}, /* product before p vs layers */
        {"t=2,p=4,d=1,split=1/1/1", "split lists 3 chunks"},
        {"t=2,p=4,d=1,mb=8,m=2,sched=interleaved", "multiple of p 4"},
        {"t=2,q=4", "unknown key"},
        {"t=2,p=4,d=1,v=2,sched=1f1b", "need sched=interleaved"},
        {"t=3,p=1,d=1", "t x p x d"},
    };
    char lp[600];
    path_in(lp, sizeof lp, "bad.json");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[1600], *so, *se;
        snprintf(args, sizeof args, "plan " Q " --batch 16 --layout %s -o %s", bad[i].layout, lp);
        int st = test_run_cli(args, &so, &se);
        CU_ASSERT_EQUAL(st, 2);
        if (!strstr(se, bad[i].want)) fprintf(stderr, "[%s] %s", bad[i].layout, se);
        CU_ASSERT_PTR_NOT_NULL(strstr(se, bad[i].want));
        CU_ASSERT(strstr(se, "hint") != NULL || strstr(se, "unknown key") == NULL);
        CU_ASSERT_EQUAL(strchr(se, '\n') - se + 1, (long)strlen(se)); /* one line */
        CU_ASSERT(access(lp, F_OK) != 0);
        free(so);
        free(se);
    }
    /* p beyond the layers: 32 blocks, p 8 x v 8 = 64 chunks */
    char args[1600], *so, *se;
    snprintf(args, sizeof args, "plan --model models/llama2-7b.json --device A100-80GB --devices 8 --per-node 8 --batch 64 --layout t=1,p=8,d=1,sched=interleaved,v=8,mb=1");
    CU_ASSERT_EQUAL(test_run_cli(args, &so, &se), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(se, "64 pipeline chunks for 32 transformer layers"));
    free(so);
    free(se);
    /* memory: LLaMA-2 7B with Adam on one GPU does not fit: exit 1, numbers */
    snprintf(args, sizeof args, "plan --model models/llama2-7b.json --device A100-80GB --devices 1 --optimizer adam --layout mb=1,m=1 -o %s", lp);
    CU_ASSERT_EQUAL(test_run_cli(args, &so, &se), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(se, "does not fit: stage 0 (layers 0-33) needs"));
    CU_ASSERT_PTR_NOT_NULL(strstr(se, "over by"));
    CU_ASSERT_PTR_NOT_NULL(strstr(so, "the layout given (no search)")); /* the table, with each stage's memory */
    CU_ASSERT(access(lp, F_OK) != 0);
    free(so);
    free(se);
    /* sim --layout --for: an unknown framework (its name escaped for the
     * terminal), one a plan file cannot take, one whose schedule the
     * framework does not run: exit 2, one line each */
    static const struct { const char *args, *want; } sim_bad[] = {
        {"sim " Q " --batch 16 --layout t=2,p=2,d=2 --for \"me\x1bgatron\"", "unknown framework \"me\\x1bgatron\""},
        {"sim tests/data/plans/none.json --for megatron", "go with --layout"},
        {"sim " Q " --batch 16 --layout t=2,p=2,d=2,sched=interleaved,v=2 --for deepspeed", "deepspeed does not run it"},
    };
    for (size_t i = 0; i < sizeof sim_bad / sizeof sim_bad[0]; i++) {
        CU_ASSERT_EQUAL(test_run_cli(sim_bad[i].args, &so, &se), 2);
        if (!strstr(se, sim_bad[i].want)) fprintf(stderr, "[%s] %s", sim_bad[i].args, se);
        CU_ASSERT_PTR_NOT_NULL(strstr(se, sim_bad[i].want));
        CU_ASSERT(strchr(se, '\x1b') == NULL);
        CU_ASSERT_EQUAL(strchr(se, '\n') - se + 1, (long)strlen(se));
        free(so);
        free(se);
    }
}

/* ------------------------------------------------------------- fidelity -- */

static const char *const head =
    "id,source_key,hardware,gpus,gpus_per_node,interconnect,layers,hidden,heads,seq_len,vocab,global_batch,"
    "micro_batch,tensor_parallel,pipeline_parallel,data_parallel,context_parallel,virtual_stages,schedule,"
    "recomputation,sequence_parallel,precision,zero_stage,iteration_s\n";

static void write_csv(const char *path, const char *rows)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(head, f);
    fputs(rows, f);
    fclose(f);
}

static void test_fidelity_small(void)
{
    char csv[600], out[600], got[700];
    path_in(csv, sizeof csv, "runs.csv");
    path_in(out, sizeof out, "fid");
    mkdir(out, 0777);
    write_csv(csv,
              "a,src1,A100 SXM 80GB,16,8,\"NVLink, InfiniBand\",24,2048,16,2048,51200,64,1,2,2,4,,,1F1B,full,no,bf16,1,1.5\n"
              "b,src2,A100 SXM 80GB,8,8,NVLink,24,2048,16,2048,51200,32,2,2,2,2,,2,interleaved,selective,yes,bf16,,0.8\n"
              "c,src3,H100 80GB,8,8,NVLink,24,2048,16,2048,51200,32,1,2,2,2,2,,1F1B,full,no,FP8,,0.5\n");
    fid_summary sum;
    cl_err e = {0};
    FILE *msg = tmpfile();
    CU_ASSERT_EQUAL_FATAL(fidelity_run(csv, out, msg, &sum, &e), CL_OK);
    CU_ASSERT_EQUAL(sum.rows, 3);
    CU_ASSERT_EQUAL(sum.evaluated, 2);
    CU_ASSERT_EQUAL(sum.skipped, 1);
    /* the row not expressed is listed with its reason */
    rewind(msg);
    char text[4096] = "";
    size_t n = fread(text, 1, sizeof text - 1, msg);
    text[n] = 0;
    fclose(msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "not expressed: c: "));
    /* the error column is (predicted - measured) / measured */
    snprintf(got, sizeof got, "%s/fidelity.csv", out);
    FILE *f = fopen(got, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[2048];
    int rows = 0;
    double abs_sum = 0;
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "id,source,gpus,layout,measured_s,predicted_s,error_pct"));
    while (fgets(line, sizeof line, f)) {
        char id[8];
        double meas, pred, err;
        /* layout fields hold commas and are quoted: read around them */
        char *q2 = strrchr(line, '"');
        if (line[0] == 'c') continue;
        CU_ASSERT_FATAL(q2 && sscanf(line, "%7[^,]", id) == 1 && sscanf(q2 + 1, ",%lf,%lf,%lf", &meas, &pred, &err) == 3);
        CU_ASSERT(fabs(err - 100 * (pred - meas) / meas) < 0.01);
        abs_sum += fabs(err);
        rows++;
    }
    fclose(f);
    CU_ASSERT_EQUAL(rows, 2);
    CU_ASSERT(fabs(sum.mae_pct - abs_sum / 2) < 0.01);
    free(sum.points);
}

/* The optional columns: a llama row is LLaMA's model (tfm_llama), priced
 * as `cleave plan --layout` prices the zoo's LLaMA-2 7B (imported from
 * Meta's config.json) on the same cluster, to the bit; fused attention is
 * passed on and named in the layout column; an unknown family is not
 * expressed. */
static void test_fidelity_llama(void)
{
    char csv[600], out[600], got[700], lp[600], args[1600];
    path_in(csv, sizeof csv, "llama.csv");
    path_in(out, sizeof out, "fidl");
    path_in(lp, sizeof lp, "llama.json");
    mkdir(out, 0777);
    FILE *f = fopen(csv, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("id,source_key,hardware,gpus,gpus_per_node,interconnect,layers,hidden,heads,seq_len,vocab,global_batch,"
          "micro_batch,tensor_parallel,pipeline_parallel,data_parallel,context_parallel,virtual_stages,schedule,"
          "recomputation,sequence_parallel,precision,zero_stage,iteration_s,architecture,kv_heads,ffn,attention\n"
          "l,s,A100 SXM 80GB,16,8,NVLink,32,4096,32,4096,32000,16,1,2,2,4,,,1F1B,full,no,bf16,,1.0,llama,32,11008,fused (TE)\n"
          "x,s,A100 SXM 80GB,8,8,NVLink,32,4096,32,4096,32000,16,1,2,2,2,,,1F1B,full,no,bf16,,1.0,mamba,,,\n"
          "h,s,H100 80GB,16,8,NVLink,32,4096,32,4096,32000,16,1,2,2,4,,,1F1B,full,no,bf16,,1.0,llama,32,11008,fused (TE)\n", f);
    fclose(f);
    fid_summary sum;
    cl_err e = {0};
    FILE *msg = tmpfile();
    CU_ASSERT_EQUAL_FATAL(fidelity_run(csv, out, msg, &sum, &e), CL_OK);
    fclose(msg);
    CU_ASSERT_EQUAL(sum.skipped, 1);
    CU_ASSERT_EQUAL_FATAL(sum.evaluated, 2);
    /* the links run at what NCCL moves over them (NCCL's maintainers in
     * NVIDIA/nccl-tests issues 149, 212, 119 and 267; bench/fidelity/
     * devices.md), not the line rates (300, 450, 25, 50 GB/s): the rates and
     * latencies the cluster presets carry, read from them here so that the
     * benchmark and `cleave plan --cluster` cannot drift apart.  No H100
     * preset spans nodes: its 48 GB/s per NDR card is the benchmark's alone.
     * Both rows span two nodes. */
    cluster a100, h100;
    CU_ASSERT_EQUAL_FATAL(cluster_load(&a100, "profiles/clusters/dgx-a100-4nodes.json", &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(cluster_load(&h100, "profiles/clusters/h100-8-nvlink.json", &e), CL_OK);
    const cluster_link *ai = cluster_link_between(&a100, 0, 1), *ae = cluster_link_between(&a100, 0, 8),
                       *hi = cluster_link_between(&h100, 0, 1);
    char bw[2][80], lat[2][80];
    snprintf(bw[0], sizeof bw[0], "%.17g,%.17g", ai->bw_Bps, ae->bw_Bps);
    snprintf(lat[0], sizeof lat[0], "%.17g,%.17g", ai->latency_s, ae->latency_s);
    snprintf(bw[1], sizeof bw[1], "%.17g,48e9", hi->bw_Bps);
    snprintf(lat[1], sizeof lat[1], "%.17g,%.17g", hi->latency_s, ae->latency_s);
    cluster_free(&a100);
    cluster_free(&h100);
    static const struct { const char *dev; int n, d; } hw[] = {{"A100-80GB", 16, 4}, {"H100-80GB", 16, 4}};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "plan --model models/llama2-7b.json --device %s --devices %d --per-node 8 "
                 "--bandwidth %s --latency %s --batch 16 --optimizer adam --attention fused "
                 "--layout t=2,p=2,d=%d,mb=1,sched=1f1b,recompute=full -o %s", hw[i].dev, hw[i].n, bw[i], lat[i],
                 hw[i].d, lp);
        plan l;
        plan_run(&l, args, lp);
        CU_ASSERT_DOUBLE_EQUAL(sum.points[i].predicted_s, l.pred.iteration_s, 1e-12 * l.pred.iteration_s);
        plan_free(&l);
    }
    snprintf(got, sizeof got, "%s/fidelity.csv", out);
    char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(cl_read_file(got, 1 << 20, &text, &len, &e), CL_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "recompute=full,zero=0,sp=0 --attention fused"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "architecture is neither gpt nor llama"));
    free(text);
    free(sum.points);
}

static void test_fidelity_bad_csv(void)
{
    char csv[600], out[600], res[700];
    path_in(csv, sizeof csv, "bad.csv");
    path_in(out, sizeof out, "fidbad");
    mkdir(out, 0777);
    static const struct { const char *rows, *want; } bad[] = {
        {"a,s,A100,8,8,x,24,2048,16,2048,51200,32,1,2,2,2,,,1F1B,full,no,bf16,1,1.5\nb,s,A100,8\n", "bad.csv:3: 4 fields, the header has 24"},
        {"a,s,A100,0,8,x,24,2048,16,2048,51200,32,1,2,2,2,,,1F1B,full,no,bf16,1,1.5\n", "bad.csv:2: gpus"},
        {",s,A100,8,8,x,24,2048,16,2048,51200,32,1,2,2,2,,,1F1B,full,no,bf16,1,1.5\n", "bad.csv:2: empty id"},
        {"a,s,A100,8,8,\"x,24\n", "bad.csv:2: a quoted field does not close"},
        {"a,s,A100,8,8,x,24,2048,16,2048,51200,32,1,2,2,2,,,1F1B,full,no,bf16,1,-3\n", "bad.csv:2: iteration_s"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_csv(csv, bad[i].rows);
        fid_summary sum;
        cl_err e = {0};
        CU_ASSERT_EQUAL(fidelity_run(csv, out, stderr, &sum, &e), CL_EINPUT);
        if (!strstr(e.msg, bad[i].want)) fprintf(stderr, "want [%s] got [%s]\n", bad[i].want, e.msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[i].want));
        snprintf(res, sizeof res, "%s/fidelity.csv", out);
        CU_ASSERT(access(res, F_OK) != 0); /* no output */
    }
}

/* --grad-accumulation separate (docs/compute.md, "Gradient accumulation"):
 * GPT-2 1.5B on one A100, four microbatches of 1, nothing overlapping:
 * the iteration grows by four times one kernel per parameter tensor, each
 * moving the tensor's parameters x 10 bytes (a 2-byte gradient read, the
 * fp32 accumulator read and written: mixed precision keeps fp32
 * gradients) at the device's memory bandwidth plus its launch.  The
 * tensors as the layers hold them: each block's 12 (four weights, four
 * biases, two LayerNorms' scale and shift), the token and position tables,
 * the head's logit weight (priced as the last stage's copy, also when one
 * stage holds both ends) and the final LayerNorm's two.  With fp32 the
 * gradient read is 4 bytes: 12 per parameter. */
static void test_grad_acc(void)
{
    cl_err e = {0};
    model md = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(&md, "models/gpt2-1.5b.json", &e), CL_OK);
    CU_ASSERT_FATAL(md.has_tfm && md.tfm.pos == TFM_POS_LEARNED && md.tfm.bias && md.tfm.norm == TFM_NORM_LAYER);
    cluster_devtype a100;
    CU_ASSERT_EQUAL_FATAL(cluster_devtype_preset(NULL, "A100-80GB", &a100, &e), CL_OK);
    const tfm_desc *d = &md.tfm;
    double h = (double)d->hidden, V = (double)d->vocab, L = (double)d->layers;
    double P = (double)(d->positions > 0 ? d->positions : d->seq);
    double params = L * tfm_block_params_rank(d, 1) + V * h + P * h + V * h + 2 * h;
    double kernels = 12 * L + 2 + 3;
    const char *q = "sim --layout t=1,p=1,d=1,mb=1,m=4,sched=1f1b --model models/gpt2-1.5b.json --device A100-80GB --devices 1 --optimizer adam --batch 4 --json";
    /* mixed precision with fp32 accumulators: 2 + 4 + 4; fp32: 4 + 4 + 4;
     * Megatron-LM keeps an fp16 model's gradients in 16 bits: 2 + 2 + 2 */
    const char *prec[3] = {"", " --precision fp32", " --for megatron"};
    const double bytes[3] = {10, 12, 6};
    for (int k = 0; k < 3; k++) {
        char args[600];
        snprintf(args, sizeof args, "%s%s", q, prec[k]);
        double fused = sim_iteration(args);
        snprintf(args, sizeof args, "%s%s --grad-accumulation separate", q, prec[k]);
        double separate = sim_iteration(args);
        double want = 4 * (params * bytes[k] / a100.mem_bw_Bps + kernels * a100.kernels.launch_s);
        printf("\n    %s: %.6f s -> %.6f s, +%.6f s (closed form %.6f s) ", k == 2 ? "megatron fp16" : k ? "fp32" : "mixed", fused,
               separate, separate - fused, want);
        CU_ASSERT(fabs((separate - fused) - want) <= 1e-9 * separate);
    }
    /* a model without a transformer member: refused, one line */
    char *so, *se;
    CU_ASSERT_EQUAL(test_run_cli("plan --model models/vgg16.json --devices 4 --device A100-80GB --grad-accumulation separate", &so, &se), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(se, "needs a model with a \"transformer\" member"));
    CU_ASSERT(strchr(se, '\n') == se + strlen(se) - 1);
    free(so);
    free(se);
    model_free(&md);
}

static void test_cleanup(void)
{
    test_rmtree(dir);
    dir = NULL;
}

TEST_SUITE(layout)
{
    test_add_suite("layout");
    test_add("a layout equal to the search's choice: the same time to the bit", test_search_reproduced);
    test_add("a layout checked by hand: split, batch, GPipe time", test_by_hand);
    test_add("interleaved, 2 replicas without communication = 1 pipeline", test_interleaved_replicas);
    test_add("bad layouts: exit 2, one line; no fit: exit 1 with numbers", test_bad_layouts);
    test_add("a layout above the search's replay budget: plan's figure is sim's", test_large_layout_simulated);
    test_add("asynchronous closed form: one all-reduce per round, as replayed", test_async_closed_form);
    test_add("fidelity on a 3-row CSV: error column, a row not expressed", test_fidelity_small);
    test_add("fidelity: llama rows priced as the zoo's LLaMA-2 7B, fused attention", test_fidelity_llama);
    test_add("fidelity: malformed CSV rows named by file:line, no output", test_fidelity_bad_csv);
    test_add("--grad-accumulation separate: the accumulation's closed form, refused without a transformer", test_grad_acc);
    test_add("clean up", test_cleanup);
}
