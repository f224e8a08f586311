/* test_gnuplot.c - plots render atomically; failures leave no file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fileio.h"
#include "tools/gnuplot.h"
#include "test.h"

static gp_plot *speedup_plot(void)
{
    gp_plot *g = gp_new();
    gp_str(g, "title", "test \"quoted\" title");
    gp_num(g, "ncols", 3);
    gp_str(g, "mem_unit", "GiB");
    gp_stri(g, "col", 2, "gpipe");
    gp_stri(g, "col", 3, "fbp");
    FILE *d = gp_data(g, "speedup");
    fprintf(d, "1 1 1\n2 1.8 1.9\n4 3.2 3.7\n");
    d = gp_data(g, "memory");
    fprintf(d, "1 10 10\n2 6 5\n4 4 3\n");
    return g;
}

/* Rendering g to png fails (CL_ERUN) with want in the message, and leaves
 * no image; g is freed. */
static void render_fails(gp_plot *g, const char *png, const char *want)
{
    cl_err e = {0};
    CU_ASSERT_EQUAL(gp_render(g, "speedup", png, 640, 360, &e), CL_ERUN);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want));
    gp_free(g);
    CU_ASSERT_NOT_EQUAL(access(png, F_OK), 0);
}

static void test_png_and_svg(void)
{
    char png[512], svg[512];
    char *dir = test_scratch(sizeof png, "s.png", png, "s.svg", svg, NULL);
    gp_plot *g = speedup_plot();
    cl_err e = {0};
    CU_ASSERT_EQUAL(gp_render(g, "speedup", png, 640, 360, &e), CL_OK);
    CU_ASSERT_EQUAL(gp_render(g, "speedup", svg, 640, 360, &e), CL_OK);
    gp_free(g);
    char *s = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(cl_read_file(png, 1 << 24, &s, &n, &e), CL_OK);
    CU_ASSERT(n > 8 && memcmp(s, "\x89PNG\r\n\x1a\n", 8) == 0); /* PNG signature */
    free(s);
    CU_ASSERT_EQUAL(cl_read_file(svg, 1 << 24, &s, &n, &e), CL_OK);
    CU_ASSERT_PTR_NOT_NULL(s ? strstr(s, "<svg") : NULL);
    free(s);
    remove(png);
    remove(svg);
    rmdir(dir); /* fails (and the assert below catches it) if temporaries were left */
    CU_ASSERT_NOT_EQUAL(access(dir, F_OK), 0);
    free(dir);
}

static void test_failures_leave_nothing(void)
{
    char *dir = test_tmpdir();
    char png[512];
    snprintf(png, sizeof png, "%s/s.png", dir);
    /* gnuplot missing */
    setenv("GNUPLOT", "/nonexistent/gnuplot", 1);
    render_fails(speedup_plot(), png, "gnuplot-nox");
    unsetenv("GNUPLOT");
    /* a gnuplot error (malformed data) is quoted, and no image is left */
    gp_plot *g = gp_new();
    gp_str(g, "title", "t");
    gp_str(g, "mem_unit", "GiB");
    gp_num(g, "ncols", 3);
    gp_stri(g, "col", 2, "a");
    gp_stri(g, "col", 3, "b");
    gp_data(g, "speedup");  /* no rows: nothing to plot */
    gp_data(g, "memory");
    render_fails(g, png, "gnuplot failed");
    /* text in a data block (a line "EOD" would end it early) is refused */
    g = speedup_plot();
    fprintf(gp_data(g, "extra"), "1 2\nEOD\nprint `touch %s/PWN`\n", dir);
    render_fails(g, png, "text in a gnuplot data block");
    /* unknown extension */
    cl_err e = {0};
    g = speedup_plot();
    char bad[512];
    snprintf(bad, sizeof bad, "%s/s.jpg", dir);
    CU_ASSERT_EQUAL(gp_render(g, "speedup", bad, 640, 360, &e), CL_EINPUT);
    gp_free(g);
    CU_ASSERT_EQUAL(rmdir(dir), 0); /* nothing left behind */
    free(dir);
}

TEST_SUITE(gnuplot)
{
    test_add_suite("gnuplot");
    test_add("speed-up template renders PNG and SVG", test_png_and_svg);
    test_add("missing gnuplot, bad data, bad extension leave no file", test_failures_leave_nothing);
}
