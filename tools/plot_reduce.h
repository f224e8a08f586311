/* plot_reduce.h - shrink a trace to what a picture of W pixels can show
 * (prefix plot_).
 *
 * A trace can hold millions of events; gnuplot draws every box and point it
 * is given, so a 250 MB trace used to take minutes and a script the size of
 * the trace.  Timeline boxes are rasterised to pixel columns (the category
 * that covers most of a column draws it), and memory samples fold into one
 * row per column (the largest value in it, so peaks survive): the data
 * handed to gnuplot is bounded by the image size, not by the trace.
 */
#ifndef CL_PLOT_REDUCE_H
#define CL_PLOT_REDUCE_H

#include <stdint.h>

/* One timeline box: row, category, start and duration (microseconds). */
typedef struct plot_slice {
    int row;
    int cat;
    double t0_us, dur_us;
} plot_slice;

/* One memory counter sample of line `line`. */
typedef struct plot_sample {
    int line;
    double t_us, bytes;
} plot_sample;

/* Rasterise the boxes to `cols` columns of span_us / cols between t0_us
 * and t0_us + span_us: in each row each column takes the category that
 * covers most of it, or none when the uncovered time is larger (idle), and
 * runs of columns of one category become one box.  Category -1 never
 * wins; categories are 0 .. n_cat - 1.  Returns a new array (the caller
 * frees it) of *n_out boxes sorted by row, then start: at most one per
 * column of each row, so rows x cols at most, whatever the trace's size.
 * Work O(n log n + rows x cols x n_cat). */
plot_slice *plot_raster_boxes(plot_slice *s, int64_t n, int n_cat, double t0_us, double span_us,
                              int cols, int64_t *n_out);

/* Memory rows from samples sorted by time, n_lines tracks: row k is a time
 * rows_t[k] and one value per track, rows_v[k * n_lines + line].  When
 * n <= max_rows every sample gives a row holding each track's latest value
 * (a step function, exact).  Otherwise the span is cut into max_rows - 1
 * columns and each column that has samples gives one row, at its first
 * sample, holding each track's largest value in the column (its value at
 * the column's start included), and a last row the final values; so at
 * most max_rows rows.  rows_t and rows_v have room for min(n, max_rows)
 * rows.  Returns the row count. */
int64_t plot_memory_rows(const plot_sample *s, int64_t n, int n_lines, int64_t max_rows,
                         double *rows_t, double *rows_v);

#endif
