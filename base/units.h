/* units.h - sizes in the units people read.
 *
 * One formatter for every byte count cleave prints.  The commands print
 * sizes in a few established styles (a plan's table: "812 KiB", "3.4 MiB",
 * "1.25 GiB"; inspect's tables: "512 B", "3.1 MiB"; sim's summary: "3.13
 * GiB"), and their output must not change, so a style says which units a
 * call site uses and how many decimals: the same code picks the unit and
 * rounds for all of them.
 */
#ifndef CL_UNITS_H
#define CL_UNITS_H

#include <stddef.h>

/* Binary units: unit u is 1024^u bytes. */
enum { CL_B, CL_KIB, CL_MIB, CL_GIB, CL_TIB, CL_PIB, CL_EIB };

typedef struct cl_bytes_style {
    int lo, hi;  /* smallest and largest unit used, CL_B .. CL_EIB          */
    int prec;    /* decimals in KiB and above (plain bytes have none)       */
    int grow;    /* nonzero: at least (unit - 1) decimals: MiB 1, GiB 2 ... */
    double pb;   /* > 0: from this many bytes on, "%.3g PB" (decimal units) */
} cl_bytes_style;

/* Write `bytes` into buf (cap bytes, truncated to fit) and return buf: in
 * the largest unit from st.lo to st.hi that |bytes| reaches (st.lo when
 * none does), e.g. "1023 B", "1.0 KiB", "1.50 GiB".  NaN and infinities
 * print as printf prints them ("nan B", "inf PiB"). */
const char *cl_fmt_bytes(char *buf, size_t cap, double bytes, cl_bytes_style st);

#endif
