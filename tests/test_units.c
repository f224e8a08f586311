/* test_units.c - cl_fmt_bytes against sizes worked out by hand.
 *
 * Each style below is one that a command prints today (the comment names
 * where), so these strings are also what those tables show.  The values sit
 * on the edges: just below and at each unit, the ties printf rounds to even,
 * the cap on the largest unit, and what is not a size at all. */
#include <math.h>
#include <string.h>

#include "base/units.h"
#include "test.h"

/* Format b in style st and compare with want. */
static void check(double b, cl_bytes_style st, const char *want)
{
    char buf[64];
    const char *got = cl_fmt_bytes(buf, sizeof buf, b, st);
    CU_ASSERT_PTR_EQUAL(got, buf);
    if (strcmp(got, want) != 0) fprintf(stderr, "\n  %.17g: got \"%s\", want \"%s\"\n", b, got, want);
    CU_ASSERT_STRING_EQUAL(got, want);
}

static const double KiB = 1024, MiB = 1024 * 1024, GiB = 1024.0 * 1024 * 1024;

/* inspect's tables (model, profile): B up to PiB, one decimal. */
static void test_table_style(void)
{
    const cl_bytes_style s = {.hi = CL_PIB, .prec = 1};
    check(0, s, "0 B");
    check(1, s, "1 B");
    check(1023, s, "1023 B");
    check(1023.5, s, "1024 B");           /* a tie: printf rounds to even, the unit stays */
    check(1024, s, "1.0 KiB");
    check(1536, s, "1.5 KiB");
    check(MiB - 1, s, "1024.0 KiB");      /* 1023.999 KiB: the unit is chosen before rounding */
    check(MiB, s, "1.0 MiB");
    check(1.5 * GiB, s, "1.5 GiB");
    check(ldexp(1, 50), s, "1.0 PiB");
    check(ldexp(1, 60), s, "1024.0 PiB"); /* PiB is the largest unit here */
    /* inspect's cluster table goes one unit further */
    check(ldexp(1, 60), (cl_bytes_style){.hi = CL_EIB, .prec = 1}, "1.0 EiB");
}

/* cleave sim's summary (two decimals), cleave validate's (three, up to TiB). */
static void test_decimals_and_sign(void)
{
    const cl_bytes_style sim = {.hi = CL_PIB, .prec = 2}, val = {.hi = CL_TIB, .prec = 3};
    check(1000, sim, "1000 B");
    check(1.5 * GiB, sim, "1.50 GiB");
    check(-2048, sim, "-2.00 KiB"); /* the magnitude picks the unit */
    check(1.5 * GiB, val, "1.500 GiB");
    check(ldexp(1, 50), val, "1024.000 TiB");
    check(NAN, sim, "nan B");
    check(INFINITY, sim, "inf PiB");
    check(-INFINITY, sim, "-inf PiB");
}

/* The plan tables: KiB to GiB with a decimal more per unit, "PB" from 1e15
 * (cleave plan); one decimal in KiB (cleave inspect PLAN); from MiB on
 * (cleave sweep). */
static void test_growing_decimals(void)
{
    const cl_bytes_style plan = {.lo = CL_KIB, .hi = CL_GIB, .grow = 1, .pb = 1e15};
    check(0, plan, "0 KiB");
    check(512, plan, "0 KiB");  /* 0.5: the tie rounds to even */
    check(1536, plan, "2 KiB"); /* 1.5 likewise, up */
    check(1023 * KiB, plan, "1023 KiB");
    check(MiB, plan, "1.0 MiB");
    check(GiB - 1, plan, "1024.0 MiB");
    check(1.5 * GiB, plan, "1.50 GiB");
    check(999e12, plan, "930391.25 GiB"); /* GiB is the largest binary unit here */
    check(1e15, plan, "1 PB");
    check(2.5e15, plan, "2.5 PB");
    check(123456e15, plan, "1.23e+05 PB");

    const cl_bytes_style inspect = {.lo = CL_KIB, .hi = CL_GIB, .prec = 1, .grow = 1};
    check(512, inspect, "0.5 KiB");
    check(MiB, inspect, "1.0 MiB");
    check(3 * GiB, inspect, "3.00 GiB");
    check(ldexp(1, 40), inspect, "1024.00 GiB");

    const cl_bytes_style sweep = {.lo = CL_MIB, .hi = CL_GIB, .grow = 1};
    check(0, sweep, "0.0 MiB");
    check(512 * KiB, sweep, "0.5 MiB");
    check(1.25 * GiB, sweep, "1.25 GiB");
}

/* A short buffer gets what fits, NUL-terminated; no buffer, nothing. */
static void test_truncation(void)
{
    char buf[4] = "xyz";
    CU_ASSERT_STRING_EQUAL(cl_fmt_bytes(buf, sizeof buf, 1536, (cl_bytes_style){.hi = CL_PIB, .prec = 1}), "1.5");
    CU_ASSERT_STRING_EQUAL(cl_fmt_bytes(buf, 0, 1536, (cl_bytes_style){.hi = CL_PIB}), "1.5");
}

TEST_SUITE(units)
{
    test_add_suite("units");
    test_add("binary units, one decimal: edges of each unit", test_table_style);
    test_add("decimals, sign, NaN and infinity", test_decimals_and_sign);
    test_add("a decimal more per unit, PB, a smallest unit", test_growing_decimals);
    test_add("short buffers are truncated, never overrun", test_truncation);
}
