/* test_validate_cli.c - `cleave validate` and `cleave profile --links` end
 * to end: a short real run that reports every quantity (no timing
 * assertions: timing is for `cleave bench validate`), and bad inputs that
 * exit 2 without leaving files behind. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/plan.h"
#include "profiles/cluster.h"
#include "base/fileio.h"
#include "base/jsonx.h"
#include "test.h"
#include "test_pipe.h"

#define TINY "tests/data/validate/tiny-2stage.json"
/* the ViT whole on one worker with tensor 2 (2 ranks: one per core here) */
#define VIT1T2 "tests/data/validate/vit-1worker-t2.json"

/* The quantity `key` of a validate --json document: predicted and measured
 * positive and finite, error = (predicted - measured) / measured. */
static void check_qty(const cJSON *root, const char *key)
{
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, key);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(q, "predicted"),
                *m = cJSON_GetObjectItemCaseSensitive(q, "measured"),
                *r = cJSON_GetObjectItemCaseSensitive(q, "error");
    CU_ASSERT_FATAL(cJSON_IsNumber(p) && cJSON_IsNumber(m) && cJSON_IsNumber(r));
    double pv = p->valuedouble, mv = m->valuedouble;
    CU_ASSERT(isfinite(pv) && pv > 0);
    CU_ASSERT(isfinite(mv) && mv > 0);
    CU_ASSERT(fabs(r->valuedouble - (pv - mv) / mv) <= 1e-12 * fmax(1, fabs(r->valuedouble)));
}

static void test_end_to_end_json(void)
{
    char *out = NULL, *err = NULL;
    int rc = test_run_cli("validate --plan " TINY " --iterations 3 --reps 3 --json", &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) fprintf(stderr, "validate: %s\n", err);
    cJSON *root;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(jx_parse_text("stdout", out, strlen(out), &root, &e), CL_OK);
    /* a file of its own kind (docs/formats.md, "Validation results") */
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "format")), "cleave-validation");
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(root, "version")), 1);
    check_qty(root, "iteration_s");
    check_qty(root, "throughput");
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(root, "workers");
    CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(ws), 2);
    for (int i = 0; i < 2; i++) {
        const cJSON *w = cJSON_GetArrayItem(ws, i);
        CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(w, "worker")), i);
        check_qty(w, "busy_s");
        check_qty(w, "peak_mem_bytes");
    }
    /* other load: unknown on a run this short (null, and trust unknown), or
     * a share whose verdict follows the 10% rule */
    const cJSON *ol = cJSON_GetObjectItemCaseSensitive(root, "others_load"),
                *tr = cJSON_GetObjectItemCaseSensitive(root, "trustworthy");
    CU_ASSERT_FATAL(ol && tr);
    if (cJSON_IsNull(ol)) {
        CU_ASSERT(cJSON_IsNull(tr));
    } else {
        CU_ASSERT(cJSON_IsNumber(ol) && ol->valuedouble >= 0 && ol->valuedouble <= 1);
        CU_ASSERT(cJSON_IsBool(tr) && cJSON_IsTrue(tr) == (ol->valuedouble <= 0.10));
    }
    /* throughput is samples per iteration over the iteration time, both ways */
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "iteration_s"),
                *tp = cJSON_GetObjectItemCaseSensitive(root, "throughput");
    double ip = cJSON_GetObjectItemCaseSensitive(it, "predicted")->valuedouble,
           im = cJSON_GetObjectItemCaseSensitive(it, "measured")->valuedouble;
    CU_ASSERT(test_rel(cJSON_GetObjectItemCaseSensitive(tp, "predicted")->valuedouble, 16 / ip) < 1e-9);
    CU_ASSERT(test_rel(cJSON_GetObjectItemCaseSensitive(tp, "measured")->valuedouble, 16 / im) < 1e-9);
    cJSON_Delete(root);
    free(out);
    free(err);
}

/* A tensor-parallel plan (the ViT's two stages, t = 2): validate runs it,
 * prices each all-reduce at what it cost rank 0 in the replay on the crew,
 * so every worker's predicted busy time holds at least its stage's
 * all-reduces (2 per attention and mlp layer per microbatch, counted here
 * from the plan's layers); with more threads than cores it says so. */
#define VIT_T2 "bench/results/pipe/fmnist-vit-2stage-1f1b-t2.json"
static void test_tensor_parallel(void)
{
    char *out = NULL, *err = NULL;
    int rc = test_run_cli("validate --plan " VIT_T2 " --iterations 3 --reps 3 --json", &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) fprintf(stderr, "validate: %s\n", err);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores > 0 && cores < 4) CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "threads on") && strstr(err, "take turns"));
    plan p;
    cl_err e = {0};
    cJSON *root = NULL;
    CU_ASSERT_EQUAL_FATAL(plan_load(&p, VIT_T2, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(jx_parse_text("stdout", out, strlen(out), &root, &e), CL_OK);
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(root, "tensor")), 2);
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(root, "allreduce_s");
    CU_ASSERT_FATAL(cJSON_IsNumber(ar) && ar->valuedouble > 0);
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(root, "workers");
    CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(ws), p.n_stages);
    for (int s = 0; s < p.n_stages; s++) {
        int split = 0;
        for (int l = p.stages[s].first; l <= p.stages[s].last; l++)
            split += p.model.layers[l].kind == MODEL_ATTENTION || p.model.layers[l].kind == MODEL_MLP;
        CU_ASSERT(split > 0);
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ws, s), "busy_s");
        double busy = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(b, "predicted"));
        CU_ASSERT(busy >= 0.999 * 2 * split * p.n_micro * ar->valuedouble);
    }
    cJSON_Delete(root);
    plan_free(&p);
    free(out);
    free(err);
    /* a path with an escape byte reaches the terminal escaped (esc_term) */
    char *dir = test_tmpdir(), hostile[600], args[1400];
    snprintf(hostile, sizeof hostile, "%s/x\033[31mred.json", dir);
    char *text = test_slurp(VIT_T2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(cl_write_file(hostile, text, strlen(text), &e), CL_OK);
    free(text);
    snprintf(args, sizeof args, "validate --plan %s --iterations 3 --reps 3", hostile);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NULL(strchr(out, '\033'));
    CU_ASSERT_PTR_NULL(strchr(err, '\033'));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "x\\x1b[31mred.json"));
    free(out);
    free(err);
    test_rmtree(dir);
}

/* The table, given the links and a profile from files, with both traces. */
static void test_end_to_end_table(void)
{
    char *dir = test_tmpdir(), args[2048], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "profile --model tests/data/exec/tiny-mlp.json --batch 4 --reps 3 -o %s/p.json", dir);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
    snprintf(args, sizeof args, "profile --links --max-bytes 1048576 --seconds 0.001 --reps 3 -o %s/c.json", dir);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
    snprintf(args, sizeof args,
             "validate --plan " TINY " --profile %s/p.json --links %s/c.json --iterations 3 --reps 3 "
             "--trace %s/run.json --sim-trace %s/sim.json", dir, dir, dir, dir);
    int rc = test_run_cli(args, &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) fprintf(stderr, "validate: %s\n", err);
    const char *want[] = {"iteration time", "worker 0 (core0) busy", "worker 1 (core1) busy",
                          "worker 0 (core0) peak memory", "worker 1 (core1) peak memory",
                          "throughput", "link: from"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        CU_ASSERT_PTR_NOT_NULL(strstr(out, want[i]));
    const char *files[] = {"p.json", "c.json", "run.json", "sim.json"};
    for (size_t i = 0; i < 4; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        cJSON *r;
        cl_err e = {0};
        CU_ASSERT_EQUAL(jx_parse_file(path, &r, &e), CL_OK);
        if (!e.code) cJSON_Delete(r);
        remove(path);
    }
    rmdir(dir);
    free(dir);
    free(out);
    free(err);
}

/* Each bad input exits 2 with a one-line "cleave: ..." naming the problem
 * and writes neither trace. */
static void expect_bad(const char *args, const char *needle)
{
    char *dir = test_tmpdir(), cmd[2048], *err = NULL;
    snprintf(cmd, sizeof cmd, "%s --trace %s/run.json --sim-trace %s/sim.json", args, dir, dir);
    CU_ASSERT_EQUAL(test_run_cli(cmd, NULL, &err), 2);
    if (!strstr(err, needle)) fprintf(stderr, "expected \"%s\" in: %s\n", needle, err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, needle));
    char path[1024];
    snprintf(path, sizeof path, "%s/run.json", dir);
    CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/sim.json", dir);
    CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
    rmdir(dir);
    free(dir);
    free(err);
}

static void test_bad_inputs(void)
{
    expect_bad("validate --plan tests/data/validate/nowhere.json", "nowhere.json");
    expect_bad("validate --plan tests/data/validate/block-plan.json", "kind block");
    expect_bad("validate --plan " TINY " --profile tests/data/validate/nowhere.json", "nowhere.json");
    expect_bad("validate --plan " TINY " --profile tests/data/validate/block-plan.json", "block-plan.json");
    expect_bad("validate --plan " TINY " --links tests/data/cluster/bad-negative-latency.json",
               "bad-negative-latency.json");
    expect_bad("validate", "--plan");
    expect_bad("validate --plan " TINY " --backend smoke-signals", "--backend");
    expect_bad("validate --plan " TINY " --iterations 0", "--iterations");
    expect_bad("validate --plan " TINY " --colour blue", "unknown option");
    expect_bad("validate --plan " TINY " --tensor-over mpi", "add --backend mpi");
}

/* `validate --plan PLAN --backend mpi --tensor-over mpi --json` on np
 * ranks, which must succeed: its JSON (the caller deletes it), which says
 * it ran on MPI with the tensor ranks as processes. */
static cJSON *tp_validate_json(int np, const char *plan_path)
{
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "validate --plan %s --backend mpi --tensor-over mpi --iterations 3 --reps 3 --json",
             plan_path);
    int rc = tp_mpirun(np, args, &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) fprintf(stderr, "validate: %s\n", err);
    cJSON *root = NULL;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(jx_parse_text("stdout", out ? out : "", out ? strlen(out) : 0, &root, &e), CL_OK);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "backend")), "mpi");
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "tensor_over")), "mpi");
    free(out);
    free(err);
    return root;
}

/* The same plan with each tensor rank an MPI process (--backend mpi
 * --tensor-over mpi, 2 workers x 2 = 4 ranks): every quantity predicted and
 * measured, the all-reduces priced by the replay over the first worker's
 * tensor processes (allreduce_s); a world of 2 ranks is refused before
 * anything is profiled, naming the 4 it needs.  No timing assertions. */
static void test_tensor_over_mpi(void)
{
    cJSON *root = tp_validate_json(4, VIT_T2);
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(root, "allreduce_s");
    CU_ASSERT(cJSON_IsNumber(ar) && ar->valuedouble > 0);
    check_qty(root, "iteration_s");
    check_qty(root, "throughput");
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(root, "workers");
    CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(ws), 2);
    for (int i = 0; i < 2; i++) {
        check_qty(cJSON_GetArrayItem(ws, i), "busy_s");
        check_qty(cJSON_GetArrayItem(ws, i), "peak_mem_bytes");
    }
    cJSON_Delete(root);
    char *out = NULL, *err = NULL;
    int rc = tp_mpirun(2, "validate --plan " VIT_T2 " --backend mpi --tensor-over mpi", &out, &err);
    CU_ASSERT_EQUAL(rc, 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "x 2 tensor ranks but MPI has 2 ranks (hint: mpirun -np 4 cleave validate --plan "));
    CU_ASSERT_PTR_NOT_NULL(out && !strstr(out, "quantity"));
    free(out);
    free(err);
}

/* The ViT whole on one worker with t = 2 as 2 MPI processes (one per
 * core here): the replay over the two processes prices an all-reduce
 * (allreduce_s), and the prediction uses that price, as the crew's: the
 * ring's latency a step is the one that makes the planner's ring at t = 2
 * cost it, (allreduce_s - mb * msg / bw) / 2 at the ring's bandwidth (at
 * least 0; msg a (16 tokens, width 64) float output), and the predicted
 * busy time holds every all-reduce of the iteration at that price.  No
 * timing assertions. */
static void test_tensor_over_mpi_one_worker(void)
{
    plan p;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(plan_load(&p, VIT1T2, &e), CL_OK);
    cJSON *root = tp_validate_json(2, VIT1T2);
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(root, "allreduce_s"),
                *bw = cJSON_GetObjectItemCaseSensitive(root, "allreduce_bandwidth_Bps"),
                *lat = cJSON_GetObjectItemCaseSensitive(root, "allreduce_latency_s");
    const int priced = cJSON_IsNumber(ar) && ar->valuedouble > 0 && cJSON_IsNumber(bw) &&
                       bw->valuedouble > 0 && cJSON_IsNumber(lat);
    if (!priced) { /* say what validate printed instead */
        char *txt = cJSON_Print(root);
        fprintf(stderr, "\nvalidate --json gave: %s\n", txt ? txt : "(nothing)");
        free(txt);
    }
    CU_ASSERT_FATAL(priced);
    const double msg = (double)p.microbatch * 16 * 64 * 4;
    const double want = fmax(0, (ar->valuedouble - msg / bw->valuedouble) / 2);
    CU_ASSERT_DOUBLE_EQUAL(lat->valuedouble, want, 1e-12 * fmax(1e-6, want));
    check_qty(root, "iteration_s");
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(root, "workers");
    CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(ws), 1);
    int split = 0;
    for (int l = 0; l < p.model.n_layers; l++)
        split += p.model.layers[l].kind == MODEL_ATTENTION || p.model.layers[l].kind == MODEL_MLP;
    CU_ASSERT(split > 0);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ws, 0), "busy_s");
    double busy = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(b, "predicted"));
    CU_ASSERT(busy >= 0.999 * 2 * split * p.n_micro * ar->valuedouble);
    cJSON_Delete(root);
    plan_free(&p);
}

/* profile --links writes a cluster file the loader accepts: one node, one
 * device per core, the fitted link; a CSV of the samples on request. */
static void test_profile_links(void)
{
    char *dir = test_tmpdir(), args[1024];
    snprintf(args, sizeof args, "profile --links --max-bytes 1048576 --seconds 0.001 --reps 3 -o %s/c.json --csv %s/l.csv", dir, dir);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/c.json", dir);
    cluster c;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cluster_load(&c, path, &e), CL_OK);
    CU_ASSERT_EQUAL(c.n_nodes, 1);
    CU_ASSERT_EQUAL(c.n_devices, (int)sysconf(_SC_NPROCESSORS_ONLN));
    CU_ASSERT(c.links[CLUSTER_INTRA].bw_Bps > 0 && c.links[CLUSTER_INTRA].latency_s >= 0);
    CU_ASSERT(c.types[0].peak_fp32_flops > 1e9);
    CU_ASSERT(c.types[0].efficiency > 0 && c.types[0].efficiency <= 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(c.links_note, "least squares"));
    cluster_free(&c);
    remove(path);
    snprintf(path, sizeof path, "%s/l.csv", dir);
    char *csv = NULL;
    CU_ASSERT_EQUAL_FATAL(cl_read_file(path, 1 << 20, &csv, NULL, &e), CL_OK);
    int lines = 0;
    for (char *q = csv; *q; q++) lines += *q == '\n';
    CU_ASSERT_EQUAL(lines, 1 + 18); /* header, 8 B .. 1 MiB */
    free(csv);
    remove(path);
    /* bad sizes and a missing output: exit 2, no file */
    snprintf(args, sizeof args, "profile --links --min-bytes 3 -o %s/c.json", dir);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 2);
    CU_ASSERT_EQUAL(test_run_cli("profile --links --backend pigeons -o x.json", NULL, NULL), 2);
    CU_ASSERT_EQUAL(test_run_cli("profile --links", NULL, NULL), 2);
    snprintf(path, sizeof path, "%s/c.json", dir);
    CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
    rmdir(dir);
    free(dir);
}

TEST_SUITE(validate_cli)
{
    test_add_suite("validate_cli");
    test_add("validate --json reports every quantity", test_end_to_end_json);
    test_add("validate with profile, links and traces from files", test_end_to_end_table);
    test_add("validate refuses bad input with exit 2", test_bad_inputs);
    test_add("validate of a tensor-parallel plan prices its all-reduces", test_tensor_parallel);
    test_add("validate with tensor ranks as MPI processes", test_tensor_over_mpi);
    test_add("validate with one worker's tensor ranks as 2 MPI processes: the replay's price", test_tensor_over_mpi_one_worker);
    test_add("profile --links writes a cluster file", test_profile_links);
}
