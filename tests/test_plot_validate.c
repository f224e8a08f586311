/* test_plot_validate.c - `cleave plot --kind validate`: predicted against
 * measured from cleave validate --json results; bad results and a missing
 * gnuplot fail with one clear line and leave no image. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fileio.h"
#include "test.h"
#include "test_csv.h"

/* The shape cleave validate --json prints (tools/cmd_validate.c). */
static const char results[] =
    "{\"format\": \"cleave-validation\", \"version\": 1, \"plan\": \"p.json\", \"others_load\": 0.02,\n"
    " \"trustworthy\": true,\n"
    " \"iteration_s\": {\"predicted\": 0.0123, \"measured\": 0.0131, \"error\": -0.061},\n"
    " \"throughput\": {\"predicted\": 5203, \"measured\": 4885, \"error\": 0.065},\n"
    " \"workers\": [{\"worker\": 0, \"device\": \"core0\",\n"
    "   \"busy_s\": {\"predicted\": 0.0101, \"measured\": 0.0108, \"error\": -0.065},\n"
    "   \"peak_mem_bytes\": {\"predicted\": 5.1e6, \"measured\": 5.6e6, \"error\": -0.089}},\n"
    "  {\"worker\": 1, \"device\": \"core1\",\n"
    "   \"busy_s\": {\"predicted\": 0.0095, \"measured\": 0.0090, \"error\": 0.056},\n"
    "   \"peak_mem_bytes\": {\"predicted\": 3.9e6, \"measured\": 4.1e6, \"error\": null}}]}\n";

static void test_scatter(void)
{
    char in[600], png[600], svg[600], args[2000];
    char *dir = test_scratch(sizeof in, "r.json", in, "v.png", png, "v.svg", svg, NULL);
    cl_err e = {0};
    CU_ASSERT_FATAL(cl_write_file(in, results, strlen(results), &e) == CL_OK);
    snprintf(args, sizeof args, "plot %s %s --kind validate -o %s", in, in, png);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 0);
    CU_ASSERT_STRING_EQUAL(err, "");
    free(err);
    char *s = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(cl_read_file(png, 1 << 24, &s, &n, &e), CL_OK);
    CU_ASSERT(n > 1000 && s && memcmp(s, "\x89PNG", 4) == 0);
    free(s);
    snprintf(args, sizeof args, "plot %s --kind validate --title \"my run\" -o %s", in, svg);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    s = NULL;
    CU_ASSERT_EQUAL(cl_read_file(svg, 1 << 24, &s, &n, &e), CL_OK);
    CU_ASSERT_PTR_NOT_NULL(s ? strstr(s, "my run") : NULL);
    CU_ASSERT_PTR_NOT_NULL(s ? strstr(s, "y = x") : NULL);
    free(s);
    remove(png);
    remove(svg);
    remove(in);
    CU_ASSERT_EQUAL(rmdir(dir), 0); /* no temporaries left */
    free(dir);
}

static void test_bad_results(void)
{
    static const struct { const char *text, *expect; } cases[] = {
#define H "{\"format\": \"cleave-validation\", \"version\": 1, "
        {"[1, 2]", "expected a JSON object"},
        {"{\"iteration_s\": {\"predicted\": 1, \"measured\": 1}, \"workers\": []}", "format"},
        {H "\"iteration_s\": 3, \"workers\": []}", "iteration_s: expected"},
        {H "\"iteration_s\": {\"predicted\": 1}, \"workers\": []}", "iteration_s.measured: missing"},
        {H "\"iteration_s\": {\"predicted\": -1, \"measured\": 1}, \"workers\": []}", "out of range"},
        {H "\"iteration_s\": {\"predicted\": 1, \"measured\": 1}}", "workers: missing"},
        {H "\"iteration_s\": {\"predicted\": 1, \"measured\": 1}, \"workers\": [{\"busy_s\": {\"predicted\": 1}}]}",
         "workers[0].busy_s.measured: missing"},
        {H "\"iteration_s\": {\"predicted\": 0, \"measured\": 0}, \"workers\": []}", "no predicted/measured"},
        {H "\"iteration_s\": {\"predicted\": 1, \"measured\": 1}", "truncated"},
#undef H
    };
    char in[600], png[600], args[2000];
    char *dir = test_scratch(sizeof in, "r.json", in, "v.png", png, NULL);
    cl_err e = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CU_ASSERT_FATAL(cl_write_file(in, cases[i].text, strlen(cases[i].text), &e) == CL_OK);
        snprintf(args, sizeof args, "plot %s --kind validate -o %s", in, png);
        char *err = NULL;
        CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i].expect));
        if (!strstr(err, cases[i].expect)) fprintf(stderr, "case %zu: %s", i, err);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "r.json"));
        free(err);
        CU_ASSERT_NOT_EQUAL(access(png, F_OK), 0);
    }
    /* gnuplot missing */
    CU_ASSERT_FATAL(cl_write_file(in, results, strlen(results), &e) == CL_OK);
    setenv("GNUPLOT", "/nonexistent/gnuplot", 1);
    snprintf(args, sizeof args, "plot %s --kind validate -o %s", in, png);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 1);
    unsetenv("GNUPLOT");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "gnuplot-nox"));
    free(err);
    int tmp = 0;
    CU_ASSERT_EQUAL(test_dir_count(dir, &tmp), 1); /* just r.json */
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

TEST_SUITE(plot_validate)
{
    test_add_suite("plot_validate");
    test_add("predicted against measured scatter, PNG and SVG", test_scatter);
    test_add("bad results and no gnuplot leave no image", test_bad_results);
}
