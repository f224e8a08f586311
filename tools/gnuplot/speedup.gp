# speedup.gp - predicted speed-up against device count, one line per schedule,
# with the ideal linear line; below it, peak memory per device.
# Set by the caller: title, ncols (columns in $speedup), mem_unit (e.g. "GiB"),
# col_i (the schedule of column i, 2 <= i <= ncols), $speedup (one row per
# device count: devices, then one column per schedule; NaN leaves a gap),
# $memory (same layout: peak memory per device in mem_unit).
# Optional: speedup_label (the y axis), logx (1: device counts on log2 axes, and
# speed-up too, so the ideal line is straight; 0: linear; default 1).
if (!exists("logx")) logx = 1
if (!exists("speedup_label")) speedup_label = "speed-up over one device"
# one colour and point shape per schedule, the same in both panels
array lc_[6] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
array pt_[6] = [7, 5, 9, 11, 13, 15]
set multiplot title title font ",13"
set grid
set lmargin at screen 0.07
set rmargin at screen 0.84
set key outside right top box opaque samplen 2.5 spacing 1.1
# a margin inside the frame, so points on the extremes are not drawn on it
set autoscale xfix
set offsets graph 0.03, graph 0.03, graph 0.06, 0
if (logx) { set logscale x 2 } else { unset logscale x }
set xtics nomirror
set xlabel "devices"
set ylabel speedup_label
set tmargin at screen 0.92
set bmargin at screen 0.42
if (logx) { set logscale y 2; set yrange [*:*] } else { set yrange [0:*] }
plot for [i=2:ncols] $speedup using 1:i with linespoints lw 2 ps 1.3 \
        lc rgb lc_[(i-2)%6+1] pt pt_[(i-2)%6+1] title value(sprintf('col_%d', i)), \
     $speedup using 1:1 with lines dt 2 lw 1.5 lc rgb "gray40" title "ideal (linear)"
unset logscale y
set yrange [0:*]
set tmargin at screen 0.33
set bmargin at screen 0.08
set ylabel sprintf("peak memory\nper device (%s)", mem_unit)
plot for [i=2:ncols] $memory using 1:i with linespoints lw 2 ps 1.3 \
        lc rgb lc_[(i-2)%6+1] pt pt_[(i-2)%6+1] title value(sprintf('col_%d', i))
unset multiplot
