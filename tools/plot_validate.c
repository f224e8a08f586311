/* plot_validate.c - `cleave plot VAL.json... --kind validate -o IMAGE`:
 * predicted against measured from `cleave validate --json` results, as a
 * scatter with the y = x line (validate.gp).
 *
 * A results file ("format": "cleave-validation") holds quantities
 * {"predicted", "measured", "error"}: the iteration time and each worker's
 * busy time are drawn on the time panel, each worker's peak memory on the
 * memory panel (the throughput, the inverse of the iteration time, is not
 * drawn).  Several files put all their points on one chart, e.g. one per
 * validated plan.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gnuplot.h"
#include "base/jsonx.h"

#define PV_MAX_FILES CLI_LIST_MAX

typedef struct pv_point {
    double measured, predicted;
    int series;     /* time: 1 iteration, 2 busy per worker, 3 other; memory: 1 */
} pv_point;

typedef struct pv_set {
    pv_point *p;
    int n, cap;
} pv_set;

static void add(pv_set *s, double m, double pr, int series)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 32;
        s->p = cl_realloc(s->p, (size_t)s->cap * sizeof *s->p);
    }
    s->p[s->n++] = (pv_point){m, pr, series};
}

/* One quantity {"predicted", "measured", "error"} at path.key: a point in
 * the set when both are above zero (nothing measured or predicted: none). */
static int quantity(jx *j, const cJSON *obj, const char *path, const char *key, pv_set *s, int series,
                    int *found)
{
    const cJSON *q;
    char p[160];
    int rc = jx_object(j, obj, path, key, 1, &q);
    if (rc) return rc;
    snprintf(p, sizeof p, "%s%s%s", path, path[0] ? "." : "", key);
    double pr = 0, me = 0;
    if ((rc = jx_num(j, q, p, "predicted", 1, 0, HUGE_VAL, &pr)) ||
        (rc = jx_num(j, q, p, "measured", 1, 0, HUGE_VAL, &me)))
        return rc;
    if (pr > 0 && me > 0) {
        add(s, me, pr, series);
        ++*found;
    }
    return CL_OK;
}

/* A results file of cleave validate --json (docs/formats.md, "Validation
 * results"): the iteration time, and per worker its busy time and peak
 * memory. */
static int read_results(const char *path, pv_set *time, pv_set *mem, cl_err *e)
{
    cJSON *root;
    int rc = jx_parse_file(path, &root, e);
    if (rc) return rc;
    jx j = {.file = path, .e = e};
    const cJSON *ws = NULL;
    int found = 0;
    if (!(rc = jx_header(&j, root, "cleave-validation", 1, NULL)) &&
        !(rc = quantity(&j, root, "", "iteration_s", time, 1, &found)) &&
        !(rc = jx_array(&j, root, "", "workers", 1, 0, 1 << 20, &ws))) {
        int i = 0;
        for (const cJSON *w = ws->child; w && !rc; w = w->next, i++) {
            char p[64];
            snprintf(p, sizeof p, "workers[%d]", i);
            if (!cJSON_IsObject(w)) rc = jx_fail(&j, p, "expected a worker object");
            else if (!(rc = quantity(&j, w, p, "busy_s", time, 2, &found)))
                rc = quantity(&j, w, p, "peak_mem_bytes", mem, 1, &found);
        }
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "trustworthy");
    if (!rc && cJSON_IsFalse(t))
        fprintf(stderr, "cleave plot: note: %s was measured while other processes took the CPU (\"trustworthy\": false); its points may be off\n",
                path);
    cJSON_Delete(root);
    if (!rc && !found)
        rc = cl_fail(e, CL_EINPUT, "%s: no predicted/measured times or memory above zero to draw "
                     "(hint: the output of cleave validate --json)", path);
    return rc;
}

/* Scale a panel's values (seconds or bytes) to the unit that suits their
 * largest value; names the unit for the axis labels. */
static void scale(pv_set *s, int bytes, gp_plot *g, const char *key)
{
    double mx = 0;
    for (int i = 0; i < s->n; i++) mx = fmax(mx, fmax(s->p[i].measured, s->p[i].predicted));
    double div;
    const char *unit;
    if (bytes) {
        if (mx >= (double)(1ull << 30)) div = (double)(1ull << 30), unit = "GiB";
        else if (mx >= 1 << 20) div = 1 << 20, unit = "MiB";
        else if (mx >= 1 << 10) div = 1 << 10, unit = "KiB";
        else div = 1, unit = "bytes";
    } else {
        if (mx >= 1) div = 1, unit = "s";
        else if (mx >= 1e-3) div = 1e-3, unit = "ms";
        else div = 1e-6, unit = "µs";
    }
    for (int i = 0; i < s->n; i++) s->p[i].measured /= div, s->p[i].predicted /= div;
    gp_str(g, key, unit);
}

/* Axis range of one panel (the same on x and y, so y = x is the diagonal);
 * log axes once the values span more than 20x. */
static void panel(gp_plot *g, const char *prefix, const pv_set *s)
{
    double lo = HUGE_VAL, hi = 0;
    for (int i = 0; i < s->n; i++) {
        lo = fmin(lo, fmin(s->p[i].measured, s->p[i].predicted));
        hi = fmax(hi, fmax(s->p[i].measured, s->p[i].predicted));
    }
    int logs = hi > 20 * lo;
    char key[32];
    snprintf(key, sizeof key, "%s_log", prefix);
    gp_num(g, key, logs);
    snprintf(key, sizeof key, "%s_lo", prefix);
    gp_num(g, key, logs ? lo / 1.5 : fmax(0, lo - 0.15 * (hi - lo + hi * 0.05)));
    snprintf(key, sizeof key, "%s_hi", prefix);
    gp_num(g, key, logs ? hi * 1.5 : hi + 0.15 * (hi - lo + hi * 0.05));
}

int plot_validate(const cli_list *list, const char *out, const char *title, int w, int h)
{
    if (list->n > PV_MAX_FILES) return cli_usage_error("plot", "at most %d results files", PV_MAX_FILES);
    const char *const *files = list->v;
    int n_files = list->n;
    if (!n_files) return cli_usage_error("plot", "missing RESULTS.json (cleave validate --json output)");
    if (!out) return cli_usage_error("plot", "missing -o IMAGE");
    pv_set time = {0}, mem = {0};
    cl_err e = {0};
    int rc = CL_OK;
    for (int i = 0; i < n_files && !rc; i++) rc = read_results(files[i], &time, &mem, &e);
    if (!rc) {
        char deftitle[256];
        if (!title) {
            const char *base = strrchr(files[0], '/');
            snprintf(deftitle, sizeof deftitle, "Predicted against measured: %s%s", base ? base + 1 : files[0],
                     n_files > 1 ? " and more" : "");
            title = deftitle;
        }
        gp_plot *g = gp_new();
        gp_str(g, "title", title);
        gp_num(g, "has_time", time.n > 0);
        gp_num(g, "has_mem", mem.n > 0);
        scale(&time, 0, g, "t_unit");
        scale(&mem, 1, g, "m_unit");
        if (time.n) panel(g, "t", &time);
        for (int k = 1; k <= 3; k++) {
            int has = 0;
            for (int i = 0; i < time.n; i++) has |= time.p[i].series == k;
            char key[32];
            snprintf(key, sizeof key, "t_has%d", k);
            gp_num(g, key, has);
        }
        if (mem.n) panel(g, "m", &mem);
        FILE *f = gp_data(g, "time");
        for (int i = 0; i < time.n; i++) fprintf(f, "%.9g %.9g %d\n", time.p[i].measured, time.p[i].predicted, time.p[i].series);
        if (!time.n) fputs("1 1 0\n", f); /* never drawn: keeps the block well-formed */
        f = gp_data(g, "mem");
        for (int i = 0; i < mem.n; i++) fprintf(f, "%.9g %.9g %d\n", mem.p[i].measured, mem.p[i].predicted, mem.p[i].series);
        if (!mem.n) fputs("1 1 0\n", f);
        rc = gp_render(g, "validate", out, w, h, &e);
        gp_free(g);
    }
    free(time.p);
    free(mem.p);
    if (rc) return cli_report(&e);
    printf("wrote %s\n", out);
    return 0;
}
