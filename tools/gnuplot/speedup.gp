# speedup.gp - predicted speed-up against device count, one line per schedule,
# with the ideal linear line; below it, peak memory per device.
# Set by the caller: title, (optionally speedup_label, the y axis), ncols (columns in $speedup), mem_unit (e.g. "GiB"),
# $speedup (header row "devices sched1 sched2 ...", then one row per device count),
# $memory  (same layout: peak memory per device in mem_unit).
set multiplot layout 2,1 title title font ",13"
set grid
set key top left box opaque
set logscale x 2
set xlabel "devices"
set ylabel (exists("speedup_label") ? speedup_label : "speed-up over one device")
set size 1,0.62
set origin 0,0.36
set xrange [*:*]
set yrange [0:*]
plot for [i=2:ncols] $speedup using 1:i with linespoints lw 2 pt 7 title columnheader(i), \
     $speedup using 1:1 with lines dt 2 lw 1.5 lc rgb "gray40" title "ideal (linear)"
set size 1,0.34
set origin 0,0.0
unset title
set key top right box opaque
set ylabel sprintf("peak memory per device (%s)", mem_unit)
plot for [i=2:ncols] $memory using 1:i with linespoints lw 2 pt 7 title columnheader(i)
unset multiplot
