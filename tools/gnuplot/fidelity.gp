# fidelity.gp - predicted against measured iteration time of published
# training runs (cleave bench fidelity), log-log, with the y = x line and
# the ±15% and ±25% bands.
# Set by the caller: title, lo, hi (the range of both axes, seconds);
# $runs rows "measured predicted fits" (fits 1, or 0 when the layout is
# predicted not to fit in memory).
set grid
set key top left box opaque samplen 2
set size ratio -1
set logscale xy
set xrange [lo:hi]
set yrange [lo:hi]
set xtics nomirror
set ytics nomirror
set samples 400
set title title font ",13"
set xlabel "measured iteration time (s)"
set ylabel "predicted iteration time (s)"
plot $runs using ($3 == 1 ? $1 : NaN):2 with points pt 7 ps 1.2 lc rgb "#1f77b4" title "published run", \
     $runs using ($3 == 0 ? $1 : NaN):2 with points pt 6 ps 1.5 lc rgb "#d62728" title "predicted not to fit", \
     x with lines lw 1.5 lc rgb "gray20" title "y = x (exact)", \
     1.15 * x with lines dt 3 lc rgb "gray50" title "±15%", \
     0.85 * x with lines dt 3 lc rgb "gray50" notitle, \
     1.25 * x with lines dt 2 lc rgb "gray70" title "±25%", \
     0.75 * x with lines dt 2 lc rgb "gray70" notitle
