/* gnuplot.h - render a plot from a template in tools/gnuplot/ (prefix gp_).
 *
 * A plot is a gnuplot template (embedded into the binary at build time from
 * tools/gnuplot/NAME.gp) preceded by the variables and inline data blocks the
 * caller defines.  Rendering runs the `gnuplot` program (or $GNUPLOT) on
 * unlinked scratch files in $TMPDIR (or /tmp) passed as descriptors (script
 * /dev/fd/4, image /dev/fd/3, messages fd 2).  The image is checked complete
 * (PNG signature and end chunk, SVG closing tag: gnuplot exits 0 even when
 * its writes failed) before it goes to the destination through cl_out, so a
 * failed or interrupted plot never leaves a partial image.  The terminal
 * follows the extension: .png (pngcairo) or .svg.
 */
#ifndef CL_GNUPLOT_H
#define CL_GNUPLOT_H

#include <stdio.h>

#include "base/status.h"

typedef struct gp_plot gp_plot;

gp_plot *gp_new(void);                 /* free with gp_free */
void gp_free(gp_plot *g);

/* Define a gnuplot string or number variable for the template.  A string
 * may hold anything (a name, a title, a path): it is written as a literal
 * the script never evaluates (esc_gnuplot in escape.h), and templates use
 * it only as a value (title t, value(sprintf('name_%d', i)), never eval). */
void gp_str(gp_plot *g, const char *name, const char *value);
void gp_num(gp_plot *g, const char *name, double value);
/* gp_str of the variable prefix_i: per-row and per-column labels, read by
 * templates as value(sprintf('prefix_%d', i)). */
void gp_stri(gp_plot *g, const char *prefix, int i, const char *value);
/* Start an inline data block `$name`; write whitespace-separated rows of
 * NUMBERS to the returned stream until the next gp_* call (the block ends
 * there).  No text goes into a block (a name holding a line "EOD" would end
 * it): labels go in gp_stri variables. */
FILE *gp_data(gp_plot *g, const char *name);

/* Render template `tmpl` (e.g. "speedup") to `out` (.png or .svg), at
 * width x height pixels.  Fails with CL_ERUN when gnuplot is missing or
 * reports an error (its first error line is quoted), CL_EINPUT for an
 * unknown extension or template. */
int gp_render(gp_plot *g, const char *tmpl, const char *out, int width, int height,
              cl_err *e);

/* The embedded template text, or NULL (generated from tools/gnuplot/). */
const char *gp_template(const char *name);

#endif
