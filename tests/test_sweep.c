/* test_sweep.c - `cleave sweep`: a CSV row per point whose figures are what
 * `cleave sim` reports for the saved plans; infeasible points with their
 * reason; Ctrl-C (through the CLEAVE_TEST_INTERRUPT_AFTER hook) leaves
 * complete files for the points done; no progress output unless stderr is
 * a terminal, and a bar when it is one; a missing gnuplot or bad input fails
 * clearly and leaves no partial file. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/jsonx.h"
#include "test.h"
#include "test_csv.h"

static const char *const sweep_kinds[] = {"gpipe", "1f1b", "fbp"};
static const int sweep_devices[] = {1, 2, 4, 8};

/* `cleave sim --json PLAN`: throughput and speed-up; 0 on success. */
static int sim_json(const char *plan, double *thr, double *speedup)
{
    char args[1200], *out = NULL;
    snprintf(args, sizeof args, "sim --json %s", plan);
    int rc = test_run_cli(args, &out, NULL);
    if (rc) {
        free(out);
        return rc;
    }
    cJSON *root = cJSON_Parse(out);
    free(out);
    if (!root) return -1;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "throughput");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "speedup");
    rc = cJSON_IsNumber(t) && cJSON_IsNumber(s) ? 0 : -1;
    if (!rc) *thr = t->valuedouble, *speedup = s->valuedouble;
    cJSON_Delete(root);
    return rc;
}

static int file_is_png(const char *path)
{
    char *s = NULL;
    size_t n = 0;
    cl_err e = {0};
    if (cl_read_file(path, 1 << 24, &s, &n, &e)) return 0;
    int ok = n > 1000 && memcmp(s, "\x89PNG\r\n\x1a\n", 8) == 0;
    free(s);
    return ok;
}

static void test_rows_match_sim(void)
{
    char args[2000], csv[600], plans[600], png[600];
    char *dir = test_scratch(sizeof csv, "s.csv", csv, "s.png", png, "plans", plans, NULL);
    snprintf(args, sizeof args,
             "sweep --model models/vgg16.json --cluster profiles/clusters/dgx-a100-4nodes.json "
             "--devices 8,1,4,2 --schedules gpipe,1f1b,fbp --csv %s --png %s --save-plans %s", csv, png, plans);
    char *out = NULL, *err = NULL;
    int rc = test_run_cli(args, &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) fprintf(stderr, "sweep failed: %s\n", err);
    CU_ASSERT_STRING_EQUAL(err, ""); /* stderr is not a terminal: no progress bar */
    free(out);
    free(err);
    CU_ASSERT(file_is_png(png));
    test_csv c;
    CU_ASSERT_FATAL(test_csv_read(csv, &c) == 0);
    CU_ASSERT_FALSE(c.ragged);
    /* one row per point, by device count (ascending) then schedule */
    CU_ASSERT_EQUAL_FATAL(c.n_rows, 4 * 3);
    char base[700];
    snprintf(base, sizeof base, "%s/baseline-1dev.json", plans);
    double base_thr = 0, ignore;
    CU_ASSERT_EQUAL_FATAL(sim_json(base, &base_thr, &ignore), 0);
    int feasible = 0;
    for (int r = 0; r < c.n_rows; r++) {
        int n = sweep_devices[r / 3];
        const char *k = sweep_kinds[r % 3];
        CU_ASSERT_EQUAL(atoi(test_csv_get(&c, r, "devices")), n);
        CU_ASSERT_STRING_EQUAL(test_csv_get(&c, r, "schedule"), k);
        if (strcmp(test_csv_get(&c, r, "feasible"), "yes") != 0) {
            CU_ASSERT(strlen(test_csv_get(&c, r, "reason")) > 10);
            CU_ASSERT(isnan(test_csv_num(&c, r, "speedup")));
            continue;
        }
        feasible++;
        char plan[700];
        snprintf(plan, sizeof plan, "%s/%ddev-%s.json", plans, n, k);
        double thr = 0, sp = 0;
        CU_ASSERT_EQUAL_FATAL(sim_json(plan, &thr, &sp), 0);
        /* the CSV prints 12 significant digits */
        CU_ASSERT(test_rel(test_csv_num(&c, r, "throughput"), thr) < 1e-10);
        CU_ASSERT(test_rel(test_csv_num(&c, r, "speedup_vs_sequential"), sp) < 1e-10);
        CU_ASSERT(test_rel(test_csv_num(&c, r, "speedup"), thr / base_thr) < 1e-10);
        CU_ASSERT(test_rel(test_csv_num(&c, r, "iteration_s") * thr,
                           atof(test_csv_get(&c, r, "microbatches")) * atof(test_csv_get(&c, r, "microbatch"))) < 1e-9);
        CU_ASSERT(test_csv_num(&c, r, "peak_mem_bytes") > 0);
    }
    CU_ASSERT(feasible >= 9);
    test_csv_free(&c);
    test_rm_dir(plans);
    test_rm_dir(dir);
    CU_ASSERT_NOT_EQUAL(access(dir, F_OK), 0); /* nothing unexpected was left */
    free(dir);
}

/* GPT-2 1.5B (SGD in mixed precision: 10 bytes of state per parameter, 15.6
 * GB) does not fit one or two 12 GiB cores, nor four with GPipe: those
 * points are rows with the planner's reason; four with FBP fit.  Without a
 * one-device baseline the speed-up column is empty and the sequential one
 * is given. */
static void test_infeasible_rows(void)
{
    char *dir = test_tmpdir();
    char args[1200], csv[600];
    snprintf(csv, sizeof csv, "%s/s.csv", dir);
    snprintf(args, sizeof args,
             "sweep --model models/gpt2-1.5b.json --device cpu-core --devices 1,2,4 --schedules gpipe,fbp "
             "--batch 8 --csv %s --quiet", csv);
    char *out = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, &out, NULL), 0);
    CU_ASSERT_STRING_EQUAL(out, ""); /* --quiet */
    free(out);
    test_csv c;
    CU_ASSERT_FATAL(test_csv_read(csv, &c) == 0);
    CU_ASSERT_EQUAL_FATAL(c.n_rows, 6);
    for (int r = 0; r < 5; r++) { /* one and two devices, four with gpipe */
        CU_ASSERT_STRING_EQUAL(test_csv_get(&c, r, "feasible"), "no");
        CU_ASSERT_PTR_NOT_NULL(strstr(test_csv_get(&c, r, "reason"), "fits in memory"));
    }
    CU_ASSERT_STRING_EQUAL(test_csv_get(&c, 5, "feasible"), "yes"); /* 4 devices, fbp */
    CU_ASSERT(isnan(test_csv_num(&c, 5, "speedup")));
    CU_ASSERT(test_csv_num(&c, 5, "speedup_vs_sequential") > 1);
    test_csv_free(&c);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

/* --tensor, --recompute, --attention: each point is the per-rank question
 * `cleave plan` asks with the same options on that many GPUs, to the
 * digit it prints; 1 GPU cannot hold a group of 2 (a row with the reason);
 * the "used" column counts GPUs; a t that does not divide the heads and
 * --tensor with --profile are refused in one line.  compare likewise. */
static void test_tensor_rows(void)
{
    char *dir = test_tmpdir();
    char args[1400], csv[600];
    snprintf(csv, sizeof csv, "%s/t.csv", dir);
    const char *q = "--model models/llama2-7b.json --device A100-80GB --batch 16 --optimizer adam "
                    "--tensor 2 --recompute full --attention fused";
    snprintf(args, sizeof args, "sweep %s --devices-per-node 8 --devices 1,4,8 --schedules 1f1b --csv %s --quiet", q, csv);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
    test_csv c;
    CU_ASSERT_FATAL(test_csv_read(csv, &c) == 0);
    CU_ASSERT_EQUAL_FATAL(c.n_rows, 3);
    CU_ASSERT_STRING_EQUAL(test_csv_get(&c, 0, "feasible"), "no");
    CU_ASSERT_PTR_NOT_NULL(strstr(test_csv_get(&c, 0, "reason"), "--tensor 2"));
    for (int r = 1; r < 3; r++) {
        int n = r == 1 ? 4 : 8;
        char *out = NULL;
        snprintf(args, sizeof args, "plan %s --per-node 8 --devices %d --schedule 1f1b", q, n);
        CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, NULL), 0);
        const char *p = strstr(out, "predicted: iteration ");
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        double want = strtod(p + strlen("predicted: iteration "), NULL);
        CU_ASSERT(fabs(test_csv_num(&c, r, "iteration_s") - want) <= 5e-7 * want + 1e-6);
        CU_ASSERT(test_csv_num(&c, r, "devices_used") <= n && (int)test_csv_num(&c, r, "devices_used") % 2 == 0);
        free(out);
    }
    test_csv_free(&c);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli("sweep --model models/llama2-7b.json --device A100-80GB --devices 8 --tensor 3", NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "does not divide"));
    free(err);
    err = NULL;
    CU_ASSERT_EQUAL(test_run_cli("compare --model models/llama2-7b.json --clusters profiles/clusters/dgx-a100-1node.json "
                                 "--dataset-size 1000 --tensor 3", NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "does not divide"));
    free(err);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

/* The t and recomputation `plan` prints ("tensor: 2, recompute selective:"
 * or, for the model whole, no such line: 1 and none). */
static void plan_tp(const char *out, int *t, char *rec, size_t cap)
{
    const char *p = strstr(out, "\ntensor: ");
    *t = 1;
    snprintf(rec, cap, "none");
    if (!p) return;
    *t = atoi(p + strlen("\ntensor: "));
    const char *r = strstr(p, "recompute ");
    if (r) sscanf(r + strlen("recompute "), "%15[a-z]", rec);
}

/* --tensor auto --recompute auto: every row is `cleave plan`'s answer to
 * the same question with the same options (its own loop over the
 * candidates, cmd_plan.c), to the digit it prints, with the t and the
 * recomputation it chose in the CSV; a 70B model on 24 GPUs needs t 2.
 * compare's row is the best of compare asked every fixed (t, mode) the
 * node allows, one by one. */
static void test_tensor_auto(void)
{
    char *dir = test_tmpdir();
    char args[1400], csv[600];
    snprintf(csv, sizeof csv, "%s/a.csv", dir);
    const struct {
        const char *q, *devices, *schedules;
        int rows;
    } cases[] = {
        {"--model models/llama2-7b.json --device A100-80GB --batch 8 --optimizer adam", "2,8", "1f1b,gpipe", 4},
        {"--model models/llama2-70b.json --device A100-80GB --batch 4 --optimizer adam", "24", "1f1b", 1},
    };
    int t_above_1 = 0, n_cases = TEST_BREADTH(2, 1); /* the 70B case: the search breadth only */
    for (int k = 0; k < n_cases; k++) {
        snprintf(args, sizeof args, "sweep %s --tensor auto --recompute auto --devices-per-node 8 --devices %s --schedules %s --csv %s --quiet",
                 cases[k].q, cases[k].devices, cases[k].schedules, csv);
        CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
        test_csv c;
        CU_ASSERT_FATAL(test_csv_read(csv, &c) == 0);
        CU_ASSERT_EQUAL_FATAL(c.n_rows, cases[k].rows);
        for (int r = 0; r < c.n_rows; r++) {
            char *out = NULL, rec[16];
            int t;
            const char *nd = test_csv_get(&c, r, "devices"), *sc = test_csv_get(&c, r, "schedule");
            CU_ASSERT_FATAL(nd && sc);
            snprintf(args, sizeof args, "plan %s --tensor auto --recompute auto --per-node 8 --devices %s --schedule %s",
                     cases[k].q, nd ? nd : "", sc ? sc : "");
            CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, NULL), 0);
            const char *p = strstr(out, "predicted: iteration ");
            CU_ASSERT_PTR_NOT_NULL_FATAL(p);
            double want = strtod(p + strlen("predicted: iteration "), NULL);
            CU_ASSERT(fabs(test_csv_num(&c, r, "iteration_s") - want) <= 5e-7 * want + 1e-6);
            plan_tp(out, &t, rec, sizeof rec);
            CU_ASSERT_EQUAL(test_csv_num(&c, r, "tensor"), t);
            CU_ASSERT_STRING_EQUAL(test_csv_get(&c, r, "recompute"), rec);
            t_above_1 += t > 1;
            free(out);
        }
        test_csv_free(&c);
    }
    if (n_cases > 1) { /* the candidates beyond t = 1 were searched */
        CU_ASSERT(t_above_1 > 0);
    }
    /* compare: the best of the fixed questions */
    const char *cq = "compare --model models/llama2-7b.json --clusters profiles/clusters/dgx-a100-1node.json "
                     "--batch 8 --schedules 1f1b --dataset-size 1000";
    snprintf(args, sizeof args, "%s --tensor auto --recompute auto --csv %s --quiet", cq, csv);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
    test_csv c;
    CU_ASSERT_FATAL(test_csv_read(csv, &c) == 0);
    double got = test_csv_num(&c, 0, "throughput"), best = 0;
    test_csv_free(&c);
    static const char *const modes[] = {"none", "selective", "full"};
    const int t_max = TEST_BREADTH(8, 1);
    for (int t = 1; t <= t_max; t *= 2)
        for (int m = 0; m < 3; m++) {
            snprintf(args, sizeof args, "%s --tensor %d --recompute %s --csv %s --quiet", cq, t, modes[m], csv);
            CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
            CU_ASSERT_FATAL(test_csv_read(csv, &c) == 0);
            double thr = test_csv_num(&c, 0, "throughput");
            if (thr > best) best = thr;
            test_csv_free(&c);
        }
    /* sanitizer builds ask t = 1 only: the best of those cannot beat auto */
    if (t_max == 8) {
        CU_ASSERT(best > 0 && fabs(got - best) <= 1e-9 * best);
    } else {
        CU_ASSERT(best > 0 && got >= best * (1 - 1e-9));
    }
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

/* -o DIR/ (a trailing slash, as shells complete folder names) names the
 * files DIR/speedup.csv, not DIR//speedup.csv */
static void test_out_dir_slash(void)
{
    char *dir = test_tmpdir();
    char args[1200], want[700];
    snprintf(args, sizeof args,
             "sweep --model models/fmnist-mlp.json --cluster profiles/clusters/cpu-2cores.json "
             "--devices 1,2 --schedules gpipe -o %s/out//", dir);
    char *out = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, &out, NULL), 0);
    snprintf(want, sizeof want, "wrote %s/out/speedup.csv\n", dir);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, want));
    CU_ASSERT_PTR_NULL(out && strstr(out, "//"));
    free(out);
    snprintf(want, sizeof want, "%s/out/speedup.csv", dir);
    CU_ASSERT_EQUAL(access(want, F_OK), 0);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

/* SIGINT after 5 of 12 points: exit 130, complete CSV and image of 5 points,
 * no temporaries. */
static void test_interrupt(void)
{
    char args[1800], csv[600], png[600];
    char *dir = test_scratch(sizeof csv, "s.csv", csv, "s.png", png, NULL);
    snprintf(args, sizeof args,
             "sweep --model models/vgg16.json --cluster profiles/clusters/dgx-a100-1node.json "
             "--devices 1,2,4,8 --schedules gpipe,1f1b,zb-h1 --csv %s --png %s", csv, png);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_interrupted(args, 5, NULL, &err), 130);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "interrupted after 5 of 12 points"));
    free(err);
    test_check_interrupted(csv, 5, dir, 2);
    CU_ASSERT(file_is_png(png));
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

/* On a pseudo-terminal the bar is drawn (and erased) on stderr. */
static void test_progress_on_tty(void)
{
    char *argv[] = {"cleave", "sweep", "--model", "models/fmnist-mlp.json", "--device", "V100-32GB",
                    "--devices", "1,2", "--schedules", "gpipe,1f1b", NULL};
    char buf[8192];
    int st = test_run_on_tty(argv, buf, sizeof buf);
    CU_ASSERT_EQUAL(st, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "4/4"));       /* the finished bar */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "sweep"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\r\033[K"));  /* erased at the end */
}

static void test_failures(void)
{
    char args[2400], csv[600], png[600];
    char *dir = test_scratch(sizeof csv, "s.csv", csv, "s.png", png, NULL);
    /* gnuplot missing: a clear message, no image, no temporaries */
    setenv("GNUPLOT", "/nonexistent/gnuplot", 1);
    snprintf(args, sizeof args,
             "sweep --model models/fmnist-mlp.json --device V100-32GB --devices 1,2 --schedules gpipe "
             "--png %s --quiet", png);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 1);
    unsetenv("GNUPLOT");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "gnuplot"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "hint"));
    free(err);
    int tmp = 0;
    CU_ASSERT_EQUAL(test_dir_count(dir, &tmp), 0);
    /* a malformed cluster: exit 2 naming the file, and no output at all */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    cl_err e = {0};
    const char *text = "{\"format\": \"cleave-cluster\", \"version\": 1, \"name\": \"x\", \"nodes\": [";
    CU_ASSERT_EQUAL(cl_write_file(bad, text, strlen(text), &e), CL_OK);
    snprintf(args, sizeof args, "sweep --model models/vgg16.json --cluster %s --csv %s --png %s", bad, csv, png);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "bad.json"));
    free(err);
    CU_ASSERT_EQUAL(test_dir_count(dir, &tmp), 1); /* just bad.json */
    /* usage errors */
    static const char *const usage[] = {
        "sweep --model models/vgg16.json",                                  /* no cluster */
        "sweep --model models/vgg16.json --device A100-80GB",              /* no --devices */
        "sweep --model models/vgg16.json --device A100-80GB --devices 1,x",
        "sweep --model models/vgg16.json --device A100-80GB --devices 1 --schedules gpipe,nope",
        "sweep --model models/vgg16.json --cluster profiles/clusters/dgx-a100-1node.json --devices 16",
    };
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        CU_ASSERT_EQUAL(test_run_cli(usage[i], NULL, &err), 2);
        CU_ASSERT(strlen(err) > 10);
        free(err);
    }
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

TEST_SUITE(sweep)
{
    test_add_suite("sweep");
    test_add("rows match cleave sim on the saved plans", test_rows_match_sim);
    test_add("infeasible points are rows with the reason", test_infeasible_rows);
    test_add("--tensor: rows are plan's per-rank questions", test_tensor_rows);
    test_add("--tensor auto --recompute auto: rows are plan's answers", test_tensor_auto);
    test_add("-o DIR/ names DIR/speedup.csv", test_out_dir_slash);
    test_add("Ctrl-C keeps complete files for the points done", test_interrupt);
    test_add("progress bar on a terminal", test_progress_on_tty);
    test_add("gnuplot missing, bad input, usage", test_failures);
}
