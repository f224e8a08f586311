# gantt.gp - a pipeline timeline: one row per device (and per link), boxes
# coloured by what the row is doing; the grey underlay is idle time.
# Set by the caller: title, nrows, xmax_ms, ncats, and per category i:
# cat_i (data block name), color_i, label_i; nticks and per y tick i:
# ytl_i (the row's name) and ytp_i (its row); data blocks with rows
# "x_center_ms row half_width_ms half_height".
# Row names come from the trace: they are only ever values here (never eval).
set title title font ",13"
set xlabel "time (ms)"
set ylabel ""
set xrange [0:xmax_ms]
set yrange [-0.7:nrows - 0.3]
# the first tick replaces the automatic ones, the others are added to it
if (nticks > 0) { set ytics (ytl_1 ytp_1) }
do for [i=2:nticks] { set ytics add (value(sprintf('ytl_%d', i)) value(sprintf('ytp_%d', i))) }
if (nrows > 40) { set ytics font ",7" }
set ytics nomirror
set grid x lc rgb "#d0d0d0"
set key outside bottom center horizontal samplen 1.5 width 1
set style fill solid 1.0 noborder
set lmargin 28
plot for [i=1:ncats] '$'.value(sprintf("cat_%d", i)) using 1:2:3:4 with boxxyerror \
     lc rgb value(sprintf("color_%d", i)) title value(sprintf("label_%d", i))
