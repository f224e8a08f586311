/* test_plot.c - `cleave plot` on traces written through the shared trace
 * writer (sim/trace.h), and its failures: no partial image, exit 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/trace.h"
#include "base/fileio.h"
#include "test.h"

/* A two-device 1F1B-like timeline with one transfer lane, written by hand:
 * device 0 F0 F1 B0 B1, device 1 F0 B0 F1 B1, link A0 A1 G0 G1. */
static void write_trace(const char *path)
{
    trace_w *t;
    cl_err e = {0};
    CU_ASSERT_FATAL(trace_open(&t, path, &e) == CL_OK);
    trace_process(t, TRACE_PID_DEVICES, "devices", 0);
    trace_thread(t, TRACE_PID_DEVICES, 0, "dev 0 (stage 0)", 0);
    trace_thread(t, TRACE_PID_DEVICES, 1, "dev 1 (stage 1)", 1);
    trace_process(t, TRACE_PID_LINKS, "links", 1);
    trace_thread(t, TRACE_PID_LINKS, 0, "dev0 -> dev1 (intra)", 0);
    const double F = 1e-3, B = 2e-3, X = 0.2e-3;
    trace_slice(t, 1, 0, "F0", "compute", 0, F, NULL);
    trace_slice(t, 1, 0, "F1", "compute", F, F, NULL);
    trace_slice(t, 2, 0, "A0", "link", F, X, NULL);
    trace_slice(t, 1, 1, "F0", "compute", F + X, F, NULL);
    trace_slice(t, 1, 1, "B0", "compute", 2 * F + X, B, NULL);
    trace_slice(t, 1, 0, "B0", "compute", 2 * F + B + 2 * X, B, NULL);
    trace_slice(t, 1, 0, "U", "compute", 2 * F + 2 * B + 2 * X, 0.1e-3, NULL);
    CU_ASSERT(trace_close(t, &e) == CL_OK);
}

static void test_gantt_png(void)
{
    char tr[512], png[512], args[1200];
    char *dir = test_scratch(sizeof tr, "t.json", tr, "g.png", png, NULL);
    write_trace(tr);
    snprintf(args, sizeof args, "plot %s -o %s", tr, png);
    char *out, *err;
    int rc = test_run_cli(args, &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) fprintf(stderr, "plot failed: %s\n", err);
    char *img = NULL;
    size_t n = 0;
    cl_err e = {0};
    CU_ASSERT_EQUAL(cl_read_file(png, 1 << 24, &img, &n, &e), CL_OK);
    CU_ASSERT(n > 1000 && img && memcmp(img, "\x89PNG", 4) == 0);
    free(img);
    free(out);
    free(err);
    /* no memory counters in this trace: a clear error and no image */
    char mem[512];
    snprintf(mem, sizeof mem, "%s/m.png", dir);
    snprintf(args, sizeof args, "plot %s --kind memory -o %s", tr, mem);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no memory counters"));
    CU_ASSERT_NOT_EQUAL(access(mem, F_OK), 0);
    free(err);
    remove(tr);
    remove(png);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
    free(dir);
}

static void test_bad_traces(void)
{
    static const struct { const char *text, *expect; } cases[] = {
        {"", "empty file"},
        {"{\"traceEvents\": [{\"ph\": \"X\", \"pid\": 1, \"tid\": 0, \"ts\": 0}]}", "traceEvents[0].dur: missing"},
        {"{\"traceEvents\": [{\"ph\": \"X\", \"pid\": 1, \"tid\": 0, \"ts\": 0, \"dur\": -1}]}", "traceEvents[0].dur: -1 is out of range"},
        {"{\"traceEvents\": []}", "no timeline events"},
        {"{\"events\": []}", "traceEvents: missing"},
        {"[1, 2]", "[0]: expected an event object"},
    };
    char *dir = test_tmpdir();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char tr[512], png[512], args[1200];
        snprintf(tr, sizeof tr, "%s/bad%zu.json", dir, i);
        snprintf(png, sizeof png, "%s/bad%zu.png", dir, i);
        cl_err e = {0};
        CU_ASSERT_EQUAL(cl_write_file(tr, cases[i].text, strlen(cases[i].text), &e), CL_OK);
        snprintf(args, sizeof args, "plot %s -o %s", tr, png);
        char *err;
        CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i].expect));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, tr));
        CU_ASSERT_NOT_EQUAL(access(png, F_OK), 0);
        free(err);
        remove(tr);
    }
    CU_ASSERT_EQUAL(rmdir(dir), 0);
    free(dir);
}

/* The default title says what the trace shows: the simulator's and the
 * executor's traces name model, cluster and schedule (otherData.title); a
 * trace without one is titled by its file name. */
static void test_default_titles(void)
{
    char tr[600], img[600], args[1600];
    char *dir = test_scratch(sizeof tr, "t.json", tr, "t.svg", img, NULL);
    const char *runs[] = {"sim tests/data/sim/fmnist-2stage.json --trace",
                          "train --plan tests/data/pipe/tiny2-1f1b.json --synthetic 256 --trace"};
    const char *want[] = {"fmnist-cnn on ", "tiny-pipe on "};
    const char *kind[] = {", simulated: timeline", ", measured (threads): timeline"};
    for (int i = 0; i < 2; i++) {
        char *out = NULL, *err = NULL;
        snprintf(args, sizeof args, "%s %s", runs[i], tr);
        CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
        free(out);
        free(err);
        snprintf(args, sizeof args, "plot %s -o %s", tr, img);
        CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
        free(out);
        free(err);
        char *svg = NULL;
        cl_err e = {0};
        CU_ASSERT_EQUAL(cl_read_file(img, 1 << 26, &svg, NULL, &e), CL_OK);
        const char *t = svg ? strstr(svg, want[i]) : NULL;
        CU_ASSERT_PTR_NOT_NULL(t);
        CU_ASSERT_PTR_NOT_NULL(t && strstr(t, kind[i]));
        free(svg);
        remove(tr);
        remove(img);
    }
    rmdir(dir);
    free(dir);
}

TEST_SUITE(plot)
{
    test_add_suite("plot");
    test_add("gantt chart of a hand-written trace", test_gantt_png);
    test_add("malformed traces: exit 2, path named, no image", test_bad_traces);
    test_add("default titles name model, cluster and schedule", test_default_titles);
}
