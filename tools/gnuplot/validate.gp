# validate.gp - predicted against measured (cleave validate results): a
# scatter per unit, time on the left and memory on the right, with the y = x
# line (exact prediction) and a ±10% band.
# Set by the caller: title, has_time, has_mem, and per present panel p in
# {t, m}: p_lo, p_hi (the range of both axes), p_log (1: log axes);
# t_has1..t_has3: whether the time series 1..3 have points (key entries);
# t_unit, m_unit: the units of the values (e.g. "ms", "MiB");
# $time rows "measured predicted series" (1 iteration time, 2 busy time per
# worker, 3 other times); $mem rows "measured predicted 1".
set multiplot layout 1, (has_time + has_mem) title title font ",13"
set grid
set key top left box opaque samplen 2
set size ratio -1
set xtics nomirror
set ytics nomirror
set samples 400
if (has_time) {
    if (t_log) { set logscale xy } else { unset logscale xy }
    set xrange [t_lo:t_hi]
    set yrange [t_lo:t_hi]
    set title "time" font ",11"
    set xlabel sprintf("measured (%s)", t_unit)
    set ylabel sprintf("predicted (%s)", t_unit)
    plot $time using ($3 == 1 ? $1 : NaN):2 with points pt 7 ps 2 lc rgb "#d62728" title (t_has1 ? "iteration time" : ""), \
         $time using ($3 == 2 ? $1 : NaN):2 with points pt 5 ps 1.5 lc rgb "#1f77b4" title (t_has2 ? "busy time per worker" : ""), \
         $time using ($3 == 3 ? $1 : NaN):2 with points pt 9 ps 1.5 lc rgb "#9467bd" title (t_has3 ? "other times" : ""), \
         x with lines lw 1.5 lc rgb "gray20" title "y = x (exact)", \
         1.1 * x with lines dt 3 lc rgb "gray50" title "±10%", \
         0.9 * x with lines dt 3 lc rgb "gray50" notitle
}
if (has_mem) {
    if (m_log) { set logscale xy } else { unset logscale xy }
    set xrange [m_lo:m_hi]
    set yrange [m_lo:m_hi]
    set title "memory" font ",11"
    set xlabel sprintf("measured peak (%s)", m_unit)
    set ylabel sprintf("predicted peak (%s)", m_unit)
    plot $mem using 1:2 with points pt 7 ps 1.5 lc rgb "#2ca02c" title "peak memory per worker", \
         x with lines lw 1.5 lc rgb "gray20" title "y = x (exact)", \
         1.1 * x with lines dt 3 lc rgb "gray50" title "±10%", \
         0.9 * x with lines dt 3 lc rgb "gray50" notitle
}
unset multiplot
