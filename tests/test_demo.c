/* test_demo.c - `cleave demo --quick` runs and leaves exactly the files it
 * lists, each complete: images are PNG/SVG, plans load in `cleave sim`,
 * CSVs parse with a row per point or cluster. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/jsonx.h"
#include "test.h"
#include "test_csv.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Check one announced file by its kind; returns 1 when it is whole. */
static int file_ok(const char *path)
{
    char *s = NULL;
    size_t n = 0;
    cl_err e = {0};
    if (cl_read_file(path, 1 << 26, &s, &n, &e)) return 0;
    int ok = n > 0;
    if (ends_with(path, ".png")) ok = n > 1000 && memcmp(s, "\x89PNG\r\n\x1a\n", 8) == 0;
    else if (ends_with(path, ".svg")) ok = strstr(s, "<svg") && strstr(s, "</svg>");
    else if (ends_with(path, ".py")) ok = strstr(s, "split_spec") != NULL;
    else if (ends_with(path, ".json")) {
        cJSON *j = cJSON_Parse(s);
        ok = j != NULL;
        cJSON_Delete(j);
    } else if (ends_with(path, ".csv")) {
        test_csv c;
        ok = test_csv_read(path, &c) == 0 && !c.ragged && c.n_rows >= 2;
        test_csv_free(&c);
    }
    free(s);
    return ok;
}

static void test_quick_demo(void)
{
    char *dir = test_tmpdir();
    char args[700];
    snprintf(args, sizeof args, "demo --quick -o %s/out", dir);
    char *out = NULL, *err = NULL;
    int rc = test_run_cli(args, &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) fprintf(stderr, "demo failed: %s\n", err);
    CU_ASSERT_STRING_EQUAL(err, "");
    /* the list after "files (N):", one "  PATH  what it is" line each */
    const char *list = strstr(out, "\nfiles (");
    CU_ASSERT_PTR_NOT_NULL_FATAL(list);
    int n = atoi(list + 8), seen = 0, plans = 0, torch_plans = 0, pngs = 0;
    const char *line = strchr(list + 1, '\n');
    char outdir[600];
    snprintf(outdir, sizeof outdir, "%s/out/", dir);
    while (line && line[1] == ' ' && line[2] == ' ') {
        char path[1024];
        if (sscanf(line + 1, " %1023s", path) != 1) break;
        CU_ASSERT(strncmp(path, outdir, strlen(outdir)) == 0);
        CU_ASSERT(file_ok(path));
        if (!file_ok(path)) fprintf(stderr, "demo file not whole: %s\n", path);
        if (ends_with(path, "-plan.json")) {
            char sim[1200];
            snprintf(sim, sizeof sim, "sim %s", path);
            CU_ASSERT_EQUAL(test_run_cli(sim, NULL, NULL), 0);
            plans++;
            if (ends_with(path, "-torch-plan.json")) {
                /* the plan for torch: what `export --to torch` takes */
                snprintf(sim, sizeof sim, "export %s --to torch", path);
                CU_ASSERT_EQUAL(test_run_cli(sim, NULL, NULL), 0);
                torch_plans++;
            }
        }
        pngs += ends_with(path, ".png");
        seen++;
        line = strchr(line + 1, '\n');
    }
    CU_ASSERT_EQUAL(seen, n);
    CU_ASSERT_EQUAL(plans - torch_plans, 1); /* --quick: VGG-16 only */
    CU_ASSERT(torch_plans <= 1);
    /* a plan --for torch is never faster than the best plan of every schedule */
    const char *below = strstr(out, "% below the best plan");
    if (torch_plans) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(below);
        while (below[-1] != '(') below--;
        CU_ASSERT(atof(below) >= 0);
    }
    CU_ASSERT_EQUAL(pngs, 4);    /* Gantt, memory, speed-up, comparison */
    /* nothing else in the folder: no temporaries, nothing unannounced */
    int tmp = 0;
    snprintf(outdir, sizeof outdir, "%s/out", dir);
    CU_ASSERT_EQUAL(test_dir_count(outdir, &tmp), n);
    CU_ASSERT_EQUAL(tmp, 0);
    free(out);
    free(err);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0); /* out/ with it */
}

/* Ctrl-C while planning: exit 130, an empty list and an empty folder. */
static void test_interrupt(void)
{
    char *dir = test_tmpdir();
    char args[700];
    snprintf(args, sizeof args, "demo --quick -o %s", dir);
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL(test_run_interrupted(args, 3, &out, &err), 130);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "files (0):"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "interrupted"));
    int tmp = 0;
    CU_ASSERT_EQUAL(test_dir_count(dir, &tmp), 0);
    free(out);
    free(err);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

static void test_usage(void)
{
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli("demo --bogus", NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown option"));
    free(err);
    CU_ASSERT_EQUAL(test_run_cli("demo -o", NULL, &err), 2);
    free(err);
    /* an output folder that cannot be made: exit 2 naming it */
    CU_ASSERT_EQUAL(test_run_cli("demo -o /proc/cleave-demo", NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/proc/cleave-demo"));
    free(err);
}

TEST_SUITE(demo)
{
    test_add_suite("demo");
    test_add("demo --quick writes every file it lists, whole", test_quick_demo);
    test_add("Ctrl-C while planning leaves nothing half-done", test_interrupt);
    test_add("usage and an impossible folder", test_usage);
}
