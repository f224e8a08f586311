# memory.gp - memory in use over time, one line per device.
# Set by the caller: title, mem_unit, ncols (columns per row: time, then one
# per device), line_i (the name of column i, 2 <= i <= ncols), $memory with
# rows sampled at every change (step plot).
set title title font ",13"
set xlabel "time (ms)"
set ylabel sprintf("memory in use (%s)", mem_unit)
set grid
set key outside right top
set yrange [0:*]
plot for [i=2:ncols] $memory using 1:i with steps lw 2 title value(sprintf('line_%d', i))
