# compare.gp - hardware comparison: time per epoch and cost per epoch per
# cluster, as two bar charts side by side.
# Set by the caller: title, time_unit ("hours", "minutes" or "seconds"),
# currency (e.g. "USD"), cost_note (appended to the cost panel's title), nrows, tmin and cmin (smallest positive time and
# cost, for log axes), logy_time and logy_cost (1: log y axis, for
# values spanning orders of magnitude), per cluster i (1-based, in row
# order) name_i, tlab_i and clab_i (the labels printed above the bars, e.g.
# "1.79 h", "$45.10", "n/a", "no plan fits"), and $bars with one row per
# cluster: "time cost" (a negative time or cost draws no bar).
set multiplot layout 1,2 title title font ",13"
set style fill solid 0.85 border rgb "gray30"
set boxwidth 0.6
set grid y
set xrange [-0.6:nrows - 0.4]
set offsets 0, 0, graph 0.12, 0
set xtics nomirror rotate by (nrows > 6 ? -40 : -20) left font ",10"
set ytics nomirror
set key top right box opaque
set bmargin (nrows > 6 ? 10 : 7)
set xlabel "cluster"
set ylabel sprintf("time per epoch (%s)", time_unit)
set title "time per epoch (lower is faster)" font ",11"
# on a log axis bars start at the axis' bottom, and absent ones sit there
if (logy_time) { set logscale y; set yrange [*:*]; base = tmin / 2 } else { unset logscale y; set yrange [0:*]; base = 0 }
plot $bars using 0:($1 >= 0 ? $1 : base):xtic(value(sprintf('name_%d', $0 + 1))) with boxes lc rgb "#1f77b4" title "time per epoch", \
     $bars using 0:($1 >= 0 ? $1 : base):(value(sprintf('tlab_%d', $0 + 1))) with labels offset 0,0.8 font ",10" notitle
set ylabel sprintf("cost per epoch (%s)", currency)
set title "cost per epoch (lower is cheaper)".cost_note font ",11"
if (logy_cost) { set logscale y; set yrange [*:*]; base = cmin / 2 } else { unset logscale y; set yrange [0:*]; base = 0 }
plot $bars using 0:($2 >= 0 ? $2 : base):xtic(value(sprintf('name_%d', $0 + 1))) with boxes lc rgb "#2ca02c" title sprintf("cost per epoch (%s)", currency), \
     $bars using 0:($2 >= 0 ? $2 : base):(value(sprintf('clab_%d', $0 + 1))) with labels offset 0,0.8 font ",10" notitle
unset multiplot
