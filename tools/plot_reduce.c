/* plot_reduce.c - shrink a trace to what a picture can show (plot_reduce.h). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "plot_reduce.h"
#include "base/status.h"

static int by_row_start(const void *a, const void *b)
{
    const plot_slice *x = a, *y = b;
    if (x->row != y->row) return x->row < y->row ? -1 : 1;
    return (x->t0_us > y->t0_us) - (x->t0_us < y->t0_us);
}

plot_slice *plot_raster_boxes(plot_slice *s, int64_t n, int n_cat, double t0_us, double span_us,
                              int cols, int64_t *n_out)
{
    assert(n_cat >= 1 && n_cat <= 64 && cols >= 1);
    qsort(s, (size_t)n, sizeof *s, by_row_start);
    double w = span_us > 0 ? span_us / cols : 1;
    /* per column and category: time covered; `edge` adds the partial end
     * columns, `run` is a difference array over the fully covered ones, so
     * a box costs O(1) however many columns it spans */
    double *edge = cl_calloc((size_t)cols * n_cat, sizeof *edge);
    double *run = cl_calloc((size_t)(cols + 1) * n_cat, sizeof *run);
    int64_t cap = 64, k = 0;
    plot_slice *out = cl_malloc((size_t)cap * sizeof *out);
    for (int64_t a = 0, b; a < n; a = b) {
        int row = s[a].row;
        for (b = a; b < n && s[b].row == row; b++) {
            const plot_slice *x = &s[b];
            if (x->cat < 0 || x->cat >= n_cat || !(x->dur_us > 0)) continue;
            double u0 = (x->t0_us - t0_us) / w, u1 = (x->t0_us + x->dur_us - t0_us) / w;
            if (u0 < 0) u0 = 0;
            if (u1 > cols) u1 = cols;
            if (!(u1 > u0)) continue;
            int c0 = (int)u0, c1 = (int)u1; /* u0 in column c0, u1 in c1 (or at its start) */
            if (c0 >= cols) continue;
            if (c1 == c0 || (c1 == cols && c0 == cols - 1)) {
                edge[(size_t)c0 * n_cat + x->cat] += u1 - u0;
                continue;
            }
            edge[(size_t)c0 * n_cat + x->cat] += c0 + 1 - u0;
            if (c1 < cols) edge[(size_t)c1 * n_cat + x->cat] += u1 - c1;
            run[(size_t)(c0 + 1) * n_cat + x->cat] += 1; /* columns c0 + 1 .. c1 - 1 whole */
            run[(size_t)c1 * n_cat + x->cat] -= 1;
        }
        int open_cat = -1;
        double acc[64] = {0}; /* running sums of run[], n_cat <= 64 */
        for (int c = 0; c <= cols; c++) {
            int best = -1;
            if (c < cols) {
                double best_t = 0, covered = 0;
                for (int q = 0; q < n_cat; q++) {
                    acc[q] += run[(size_t)c * n_cat + q];
                    double t = (acc[q] > 0.5 ? 1.0 : 0.0) + edge[(size_t)c * n_cat + q];
                    covered += t;
                    if (t > best_t) best_t = t, best = q;
                }
                if (covered > 1) covered = 1;
                if (best_t < 1 - covered) best = -1; /* idle takes most of it */
            }
            if (best != open_cat && open_cat >= 0) { /* close the run ending at c */
                out[k - 1].dur_us = t0_us + c * w - out[k - 1].t0_us;
            }
            if (best != open_cat && best >= 0) {
                if (k == cap) out = cl_realloc(out, (size_t)(cap *= 2) * sizeof *out);
                out[k++] = (plot_slice){row, best, t0_us + c * w, 0};
            }
            open_cat = best;
        }
        memset(edge, 0, (size_t)cols * n_cat * sizeof *edge);
        memset(run, 0, (size_t)(cols + 1) * n_cat * sizeof *run);
    }
    free(edge);
    free(run);
    *n_out = k;
    return out;
}

int64_t plot_memory_rows(const plot_sample *s, int64_t n, int n_lines, int64_t max_rows,
                         double *rows_t, double *rows_v)
{
    if (n <= 0) return 0;
    double *cur = cl_calloc((size_t)n_lines, sizeof *cur);
    size_t row_bytes = (size_t)n_lines * sizeof *rows_v;
    int64_t k = 0;
    if (n <= max_rows) {
        for (int64_t i = 0; i < n; i++, k++) {
            cur[s[i].line] = s[i].bytes;
            rows_t[k] = s[i].t_us;
            memcpy(&rows_v[k * n_lines], cur, row_bytes);
        }
        free(cur);
        return k;
    }
    /* max_rows - 1 columns, then the final values */
    double t0 = s[0].t_us, span = s[n - 1].t_us - t0;
    int64_t cols = max_rows - 1 > 0 ? max_rows - 1 : 1, col = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = span > 0 ? (int64_t)((s[i].t_us - t0) / span * (double)cols) : 0;
        if (c >= cols) c = cols - 1;
        if (c != col && k < cols) { /* a new column: a row at its first sample */
            col = c;
            rows_t[k] = s[i].t_us;
            memcpy(&rows_v[k * n_lines], cur, row_bytes);
            k++;
        }
        cur[s[i].line] = s[i].bytes;
        double *v = &rows_v[(k - 1) * n_lines + s[i].line];
        if (s[i].bytes > *v) *v = s[i].bytes;
    }
    rows_t[k] = s[n - 1].t_us;
    memcpy(&rows_v[k * n_lines], cur, row_bytes);
    free(cur);
    return k + 1;
}
