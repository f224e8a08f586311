/* units.c - sizes in the units people read (see units.h). */
#include <math.h>
#include <stdio.h>

#include "units.h"

const char *cl_fmt_bytes(char *buf, size_t cap, double bytes, cl_bytes_style st)
{
    static const char *const name[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (cap == 0) return buf;
    if (st.pb > 0 && fabs(bytes) >= st.pb) {
        snprintf(buf, cap, "%.3g PB", bytes / 1e15);
        return buf;
    }
    /* scaling by a power of two is exact, so this is the same as dividing
     * by 1024 while the value is 1024 or more */
    int u = st.lo;
    while (u < st.hi && fabs(bytes) >= ldexp(1, 10 * (u + 1))) u++;
    double v = ldexp(bytes, -10 * u);
    int prec = u == CL_B ? 0 : st.grow && u - 1 > st.prec ? u - 1 : st.prec;
    snprintf(buf, cap, "%.*f %s", prec, v, name[u]);
    return buf;
}
