/* cmd_plot.c - `cleave plot TRACE -o IMAGE [--kind gantt|memory]`: pictures
 * of a Chrome trace written by `cleave sim --trace` or by the executor.
 *
 * gantt:  one row per device compute stream and per link, boxes coloured by
 *         forward (F), backward (B), weight gradient (W), update (U) and
 *         communication (transfers, all-reduce); idle time is the grey
 *         underlay; time in ms from the first event.
 * memory: memory in use over time per device, from the trace's counter
 *         events ("ph": "C", args.bytes), as a step plot.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/budget.h"
#include "cli.h"
#include "gnuplot.h"
#include "base/jsonx.h"
#include "plot_reduce.h"

#define PLOT_MAX_ROWS 4096   /* rows in a Gantt chart; more is unreadable anyway */
#define PLOT_MAX_LINES 64    /* lines in a memory chart */
#define PLOT_MAX_TRACKS 4096 /* memory counter tracks read (the highest peaks are drawn) */
#define ROW_HASH 8192        /* > 2 x PLOT_MAX_ROWS and PLOT_MAX_TRACKS, a power of two */

typedef struct row {
    int pid, tid, sort;
    char name[160];
    int used;                /* has slices (or counter samples) */
} row;

typedef plot_slice slice;
typedef plot_sample sample;

enum { CAT_IDLE, CAT_F, CAT_B, CAT_W, CAT_U, CAT_COMM, CAT_OTHER, CAT_COUNT };
static const char *const cat_block[CAT_COUNT] = {"idle", "fwd", "bwd", "wgrad", "upd", "comm", "other"};
static const char *const cat_color[CAT_COUNT] = {"#ececec", "#1f77b4", "#d62728", "#2ca02c",
                                                 "#9467bd", "#ff7f0e", "#7f7f7f"};
static const char *const cat_label[CAT_COUNT] = {"idle", "forward (F)", "backward (B)",
                                                 "weight gradient (W)", "update (U)",
                                                 "communication", "other"};

typedef struct trace_data {
    row *rows;
    int n_rows, cap_rows;
    slice *slices;
    int64_t n_slices, cap_slices;
    sample *samples;
    int64_t n_samples, cap_samples;
    char (*lines)[160];      /* counter track names */
    int n_lines;
    char title[160];         /* otherData.title, "" when absent */
    /* rows by (pid, tid) and tracks by name, open addressing, -1 empty: a
     * scan of every row per event made a trace of many rows quadratic */
    int row_at[ROW_HASH], line_at[ROW_HASH];
} trace_data;

static uint32_t mix(uint32_t h) { return (h ^ (h >> 16)) * 0x45d9f3bu; }

static int find_row(trace_data *d, int pid, int tid)
{
    uint32_t h = mix(mix((uint32_t)pid) ^ (uint32_t)tid) & (ROW_HASH - 1);
    for (; d->row_at[h] >= 0; h = (h + 1) & (ROW_HASH - 1))
        if (d->rows[d->row_at[h]].pid == pid && d->rows[d->row_at[h]].tid == tid) return d->row_at[h];
    if (d->n_rows == PLOT_MAX_ROWS) return -1;
    d->row_at[h] = d->n_rows;
    if (d->n_rows == d->cap_rows) {
        d->cap_rows = d->cap_rows ? 2 * d->cap_rows : 64;
        d->rows = cl_realloc(d->rows, (size_t)d->cap_rows * sizeof *d->rows);
    }
    row *r = &d->rows[d->n_rows];
    memset(r, 0, sizeof *r);
    r->pid = pid;
    r->tid = tid;
    r->sort = tid;
    snprintf(r->name, sizeof r->name, "pid %d tid %d", pid, tid);
    return d->n_rows++;
}

static int category(const char *name, const char *cat)
{
    if (cat && !strcmp(cat, "link")) return CAT_COMM;
    switch (name[0]) {
    case 'F': return CAT_F;
    case 'B': return CAT_B;
    case 'W': return CAT_W;
    case 'U': return CAT_U;
    case 'A': case 'G': return CAT_COMM;  /* A3, G3 transfers, AR all-reduce */
    default: return CAT_OTHER;
    }
}

static int int_member(jx *j, const cJSON *ev, const char *p, const char *key, int *out)
{
    int64_t v = 0;
    int rc = jx_int(j, ev, p, key, 1, INT32_MIN, INT32_MAX, &v);
    *out = (int)v;
    return rc;
}

/* The track of a counter name, or -1 past PLOT_MAX_TRACKS tracks. */
static int line_of(trace_data *d, const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 16777619u;
    h &= ROW_HASH - 1;
    for (; d->line_at[h] >= 0; h = (h + 1) & (ROW_HASH - 1))
        if (!strcmp(d->lines[d->line_at[h]], name)) return d->line_at[h];
    if (d->n_lines == PLOT_MAX_TRACKS) return -1;
    if ((d->n_lines & (d->n_lines - 1)) == 0) /* capacity doubles at powers of two */
        d->lines = cl_realloc(d->lines, (size_t)(d->n_lines ? 2 * d->n_lines : 1) * sizeof *d->lines);
    snprintf(d->lines[d->n_lines], sizeof d->lines[0], "%s", name);
    d->line_at[h] = d->n_lines;
    return d->n_lines++;
}

/* Read the events we draw; everything else in the trace is ignored. */
static int read_trace(const char *path, trace_data *d, cl_err *e)
{
    cJSON *root;
    for (int h = 0; h < ROW_HASH; h++) d->row_at[h] = d->line_at[h] = -1;
    int rc = jx_parse_file(path, &root, e);
    if (rc) return rc;
    char doing[300];
    snprintf(doing, sizeof doing, "reading %s", path);
    if (cl_budget_over()) rc = cl_budget_fail(e, doing, "plot a shorter trace");
    jx j = {.file = path, .e = e};
    const cJSON *events = root;
    const char *base = "";
    if (cJSON_IsObject(root)) {
        rc = jx_array(&j, root, "", "traceEvents", 1, 0, INT32_MAX, &events);
        base = "traceEvents";
        const cJSON *od = cJSON_GetObjectItemCaseSensitive(root, "otherData");
        if (!rc && cJSON_IsObject(od) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(od, "title")))
            rc = jx_text(&j, od, "otherData", "title", 0, d->title, sizeof d->title);
    } else if (!cJSON_IsArray(root)) {
        rc = jx_fail(&j, "", "expected a Chrome trace: an object with \"traceEvents\" or an array of events");
    }
    int i = -1;
    for (const cJSON *ev = rc ? NULL : events->child; ev && !rc; ev = ev->next) {
        char p[64];
        jx_index(p, sizeof p, base, ++i);
        if ((i & 65535) == 65535 && cl_budget_over()) {
            rc = cl_budget_fail(e, doing, "plot a shorter trace");
            break;
        }
        if (!cJSON_IsObject(ev)) { rc = jx_fail(&j, p, "expected an event object"); break; }
        char ph[8] = "", name[160] = "", cat[32] = "";
        if ((rc = jx_str(&j, ev, p, "ph", 1, ph, sizeof ph))) break;
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(ev, "name");
        if (cJSON_IsString(nm)) snprintf(name, sizeof name, "%s", nm->valuestring);
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(ev, "cat");
        if (cJSON_IsString(ct)) snprintf(cat, sizeof cat, "%s", ct->valuestring);
        if (!strcmp(ph, "M")) {
            int pid, tid;
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
            if (strcmp(name, "thread_name") && strcmp(name, "thread_sort_index")) continue;
            if ((rc = int_member(&j, ev, p, "pid", &pid)) || (rc = int_member(&j, ev, p, "tid", &tid))) break;
            int r = find_row(d, pid, tid);
            if (r < 0) continue;
            if (!strcmp(name, "thread_name")) {
                /* a row label ("dev 0 n0.g0 (stage 0)"): free text without
                 * control characters; gnuplot gets it only as a value */
                const cJSON *n = cJSON_GetObjectItemCaseSensitive(args, "name");
                char ap[80];
                jx_join(ap, sizeof ap, p, "args");
                if (cJSON_IsString(n) && n->valuestring[0] &&
                    (rc = jx_text(&j, args, ap, "name", 1, d->rows[r].name, sizeof d->rows[r].name)))
                    break;
            } else {
                const cJSON *s = cJSON_GetObjectItemCaseSensitive(args, "sort_index");
                if (cJSON_IsNumber(s)) d->rows[r].sort = (int)s->valuedouble;
            }
        } else if (!strcmp(ph, "X")) {
            int pid, tid;
            double ts = 0, dur = 0;
            if ((rc = int_member(&j, ev, p, "pid", &pid)) || (rc = int_member(&j, ev, p, "tid", &tid)) ||
                (rc = jx_num(&j, ev, p, "ts", 1, -1e18, 1e18, &ts)) ||
                (rc = jx_num(&j, ev, p, "dur", 1, 0, 1e18, &dur)))
                break;
            int r = find_row(d, pid, tid);
            if (r < 0) {
                rc = jx_fail(&j, p, "more than %d timeline rows (hint: simulate fewer stages or replicas for a readable chart)",
                             PLOT_MAX_ROWS);
                break;
            }
            d->rows[r].used = 1;
            if (d->n_slices == d->cap_slices) {
                d->cap_slices = d->cap_slices ? 2 * d->cap_slices : 1024;
                d->slices = cl_realloc(d->slices, (size_t)d->cap_slices * sizeof *d->slices);
            }
            d->slices[d->n_slices++] = (slice){r, category(name, cat), ts, dur};
        } else if (!strcmp(ph, "C")) {
            double ts = 0, bytes = 0;
            const cJSON *args;
            if ((cJSON_IsString(nm) && nm->valuestring[0] && (rc = jx_text(&j, ev, p, "name", 1, name, sizeof name))) ||
                (rc = jx_num(&j, ev, p, "ts", 1, -1e18, 1e18, &ts)) ||
                (rc = jx_object(&j, ev, p, "args", 1, &args)))
                break;
            char ap[80];
            jx_join(ap, sizeof ap, p, "args");
            if (!cJSON_GetObjectItemCaseSensitive(args, "bytes")) continue; /* another counter */
            if ((rc = jx_num(&j, args, ap, "bytes", 1, 0, 1e30, &bytes))) break;
            if (d->n_samples == d->cap_samples) {
                d->cap_samples = d->cap_samples ? 2 * d->cap_samples : 1024;
                d->samples = cl_realloc(d->samples, (size_t)d->cap_samples * sizeof *d->samples);
            }
            int line = line_of(d, name[0] ? name : "memory");
            if (line < 0) {
                rc = jx_fail(&j, p, "more than %d memory counter tracks (hint: simulate fewer devices for a readable chart)",
                             PLOT_MAX_TRACKS);
                break;
            }
            d->samples[d->n_samples++] = (sample){line, ts, bytes};
        }
    }
    cJSON_Delete(root);
    return rc;
}

static void free_trace(trace_data *d)
{
    free(d->rows);
    free(d->slices);
    free(d->samples);
    free(d->lines);
}

static int by_sort(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    if (x->sort != y->sort) return x->sort < y->sort ? -1 : 1;
    return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Length of a row name without a trailing lane suffix " #N": overlapping
 * transfers on one link are written as extra lanes, drawn here on one row. */
static size_t base_len(const char *name)
{
    size_t n = strlen(name), k = n;
    while (k > 0 && name[k - 1] >= '0' && name[k - 1] <= '9') k--;
    if (k < n && k >= 2 && name[k - 1] == '#' && name[k - 2] == ' ') return k - 2;
    return n;
}

static void merge_lanes(trace_data *d)
{
    for (int r = 0; r < d->n_rows; r++) {
        size_t n = base_len(d->rows[r].name);
        if (n == strlen(d->rows[r].name)) continue;
        for (int q = 0; q < d->n_rows; q++)
            if (q != r && d->rows[q].pid == d->rows[r].pid && strlen(d->rows[q].name) == n &&
                !strncmp(d->rows[q].name, d->rows[r].name, n)) {
                for (int64_t i = 0; i < d->n_slices; i++)
                    if (d->slices[i].row == r) d->slices[i].row = q;
                d->rows[q].used |= d->rows[r].used;
                d->rows[r].used = 0;
                break;
            }
    }
}

/* Draw g with template tmpl into out, unless the time budget ran out while
 * its data was written (the charts' common end); frees g. */
static int render(gp_plot *g, const char *tmpl, const char *out, int width, int height, cl_err *e)
{
    int rc = cl_budget_over() ? cl_budget_fail(e, "writing the chart's data", "plot a shorter trace")
                              : gp_render(g, tmpl, out, width, height, e);
    gp_free(g);
    return rc;
}

static int gantt(const char *trace, trace_data *d, const char *out, const char *title,
                 int width, int height, cl_err *e)
{
    if (d->n_slices == 0)
        return cl_fail(e, CL_EINPUT, "%s: no timeline events (\"ph\": \"X\") to draw (hint: is this a trace from cleave sim --trace?)", trace);
    merge_lanes(d);
    /* rows in display order: devices first, by sort index; unused rows dropped */
    int *pos = cl_malloc((size_t)d->n_rows * sizeof *pos);
    row *sorted = cl_malloc((size_t)d->n_rows * sizeof *sorted);
    memcpy(sorted, d->rows, (size_t)d->n_rows * sizeof *sorted);
    qsort(sorted, (size_t)d->n_rows, sizeof *sorted, by_sort);
    int n_used = 0;
    for (int i = 0; i < d->n_rows; i++) if (sorted[i].used) n_used++;
    int k = 0;
    for (int i = 0; i < d->n_rows; i++) {
        if (!sorted[i].used) continue;
        for (int r = 0; r < d->n_rows; r++)
            if (d->rows[r].pid == sorted[i].pid && d->rows[r].tid == sorted[i].tid)
                pos[r] = n_used - 1 - k; /* first row at the top */
        k++;
    }
    double t0 = HUGE_VAL, t1 = -HUGE_VAL;
    for (int64_t i = 0; i < d->n_slices; i++) {
        t0 = fmin(t0, d->slices[i].t0_us);
        t1 = fmax(t1, d->slices[i].t0_us + d->slices[i].dur_us);
    }
    double span_ms = (t1 - t0) / 1000.0;
    if (!(span_ms > 0)) span_ms = 1e-6;
    /* boxes rasterised to pixel columns (plot_reduce.h): the data is
     * bounded by the image, not the trace */
    int64_t nb = 0;
    slice *boxes = plot_raster_boxes(d->slices, d->n_slices, CAT_COUNT, t0, t1 - t0, width, &nb);
    free(d->slices);
    d->slices = boxes;
    d->n_slices = d->cap_slices = nb;

    gp_plot *g = gp_new();
    gp_str(g, "title", title);
    gp_num(g, "nrows", n_used);
    gp_num(g, "xmax_ms", span_ms);
    /* y tick labels: every row when they fit, else every k-th; names from
     * the trace reach gnuplot only as string values (gp_stri) */
    int every = n_used > 80 ? (n_used + 79) / 80 : 1, nticks = 0;
    k = 0;
    for (int i = 0; i < d->n_rows; i++) {
        if (!sorted[i].used) continue;
        if (k % every == 0) {
            nticks++;
            gp_stri(g, "ytl", nticks, sorted[i].name);
            char key[32];
            snprintf(key, sizeof key, "ytp_%d", nticks);
            gp_num(g, key, n_used - 1 - k);
        }
        k++;
    }
    gp_num(g, "nticks", nticks);

    int present[CAT_COUNT] = {0};
    present[CAT_IDLE] = 1;
    /* a category whose slices all take no time (updates the simulator does
     * not time) draws nothing, so it stays out of the legend too */
    for (int64_t i = 0; i < d->n_slices; i++)
        if (d->slices[i].dur_us > 0) present[d->slices[i].cat] = 1;
    int ncats = 0;
    for (int c = 0; c < CAT_COUNT; c++) {
        if (!present[c]) continue;
        ncats++;
        char key[32];
        snprintf(key, sizeof key, "cat_%d", ncats);
        gp_str(g, key, cat_block[c]);
        snprintf(key, sizeof key, "color_%d", ncats);
        gp_str(g, key, cat_color[c]);
        snprintf(key, sizeof key, "label_%d", ncats);
        gp_str(g, key, cat_label[c]);
    }
    gp_num(g, "ncats", ncats);
    for (int c = 0; c < CAT_COUNT; c++) {
        if (!present[c]) continue;
        FILE *f = gp_data(g, cat_block[c]);
        if (c == CAT_IDLE) {
            for (int r = 0; r < n_used; r++)
                fprintf(f, "%.9g %d %.9g 0.4\n", span_ms / 2, r, span_ms / 2);
            continue;
        }
        for (int64_t i = 0; i < d->n_slices; i++) {
            const slice *s = &d->slices[i];
            if (s->cat != c) continue;
            double a = (s->t0_us - t0) / 1000.0, w = s->dur_us / 1000.0;
            fprintf(f, "%.9g %d %.9g 0.4\n", a + w / 2, pos[s->row], w / 2);
        }
    }
    int rc = render(g, "gantt", out, width, height, e);
    free(pos);
    free(sorted);
    return rc;
}

static int memory(const char *trace, trace_data *d, const char *out, const char *title,
                  int width, int height, cl_err *e)
{
    if (d->n_samples == 0)
        return cl_fail(e, CL_EINPUT, "%s: no memory counters (\"ph\": \"C\" with args.bytes) to draw (hint: write the trace with cleave sim --trace)", trace);
    int n = d->n_lines;
    double *peak = cl_calloc((size_t)n, sizeof *peak), t0 = HUGE_VAL, maxb = 0;
    for (int64_t i = 0; i < d->n_samples; i++) {
        peak[d->samples[i].line] = fmax(peak[d->samples[i].line], d->samples[i].bytes);
        t0 = fmin(t0, d->samples[i].t_us);
        maxb = fmax(maxb, d->samples[i].bytes);
    }
    /* draw at most PLOT_MAX_LINES lines: the ones with the highest peaks */
    int *keep = cl_calloc((size_t)n, sizeof *keep), kept = 0;
    for (int k = 0; k < n && kept < PLOT_MAX_LINES; k++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!keep[i] && (best < 0 || peak[i] > peak[best])) best = i;
        keep[best] = 1;
        kept++;
    }
    if (kept < n)
        fprintf(stderr, "cleave plot: %d memory tracks; drawing the %d with the highest peaks\n", n, kept);
    const char *unit = maxb >= 1 << 30 ? "GiB" : maxb >= 1 << 20 ? "MiB" : "KiB";
    double scale = maxb >= 1 << 30 ? 1.0 / (1 << 30) : maxb >= 1 << 20 ? 1.0 / (1 << 20) : 1.0 / 1024;
    gp_plot *g = gp_new();
    gp_str(g, "title", title);
    gp_str(g, "mem_unit", unit);
    gp_num(g, "ncols", kept + 1);
    for (int i = 0, col = 2; i < n; i++) /* column names: values, not data (gnuplot.h) */
        if (keep[i]) gp_stri(g, "line", col++, d->lines[i]);
    FILE *f = gp_data(g, "memory");
    /* one row per sample with every kept track's latest value (a step
     * function per track), or past two rows per pixel column one row per
     * column with each track's largest value in it (plot_reduce.h) */
    int64_t max_rows = 2 * (int64_t)width, cap = d->n_samples < max_rows ? d->n_samples : max_rows;
    double *rt = cl_malloc((size_t)cap * sizeof *rt), *rv = cl_malloc((size_t)cap * n * sizeof *rv);
    int64_t nr = plot_memory_rows(d->samples, d->n_samples, n, max_rows, rt, rv);
    for (int64_t i = 0; i < nr; i++) {
        fprintf(f, "%.9g", (rt[i] - t0) / 1000.0);
        for (int k = 0; k < n; k++)
            if (keep[k]) fprintf(f, " %.9g", rv[i * n + k] * scale);
        fputc('\n', f);
    }
    free(rt);
    free(rv);
    int rc = render(g, "memory", out, width, height, e);
    free(keep);
    free(peak);
    return rc;
}

static int by_time(const void *a, const void *b)
{
    const sample *x = a, *y = b;
    return (x->t_us > y->t_us) - (x->t_us < y->t_us);
}

static int help(void)
{
    printf("usage: cleave plot TRACE.json -o IMAGE.png|.svg [--kind gantt|memory|validate] [--title TEXT]\n"
           "                  [--size WxH] [--max-seconds S]\n\n"
           "Draws a trace written by `cleave sim --trace` or `cleave train --trace`:\n"
           "  gantt   one row per device (and link): forward, backward, weight gradient,\n"
           "          update and communication in colour, idle in grey; time in ms\n"
           "  memory  memory in use per device over time\n"
           "  validate predicted against measured, from cleave validate --json results\n"
           "          (cleave plot R1.json [R2.json ...] --kind validate -o IMAGE)\n"
           "The image is written only when complete. Default size 1280x720.\n"
           "Boxes closer than a pixel are drawn as one, and memory past two samples per\n"
           "pixel column as each column's peak, so the work follows the image size.\n"
           "--max-seconds S stops with an error after S seconds (default %g).\n", CL_BUDGET_DEFAULT_S);
    return 0;
}

typedef struct plot_args {
    const char *out, *kind, *title, *size;
    double max_seconds;
    cli_list args;          /* TRACE, or validate's RESULTS... */
} plot_args;

static const cli_opt plot_opts[] = {
    {"out", 'o', CLI_STR, CLI_FIELD(plot_args, out), .help = NULL},
    {"kind", 0, CLI_STR, CLI_FIELD(plot_args, kind), .help = NULL},
    {"title", 0, CLI_STR, CLI_FIELD(plot_args, title), .help = NULL},
    {"size", 0, CLI_STR, CLI_FIELD(plot_args, size), .help = NULL},
    {"max-seconds", 0, CLI_NUM, CLI_FIELD(plot_args, max_seconds), .lo = 0, .hi = 1e7, .help = NULL},
};
static const cli_spec plot_spec = {"plot", plot_opts, CLI_N(plot_opts), .args = CLI_AT(plot_args, args)};

int cmd_plot(int argc, char **argv)
{
    plot_args x = {.kind = "gantt", .max_seconds = CL_BUDGET_DEFAULT_S};
    int rc = cli_parse(&plot_spec, argc, argv, &x, 0);
    if (rc) return rc == CLI_HELP ? help() : rc;
    int64_t w = 1280, h = 720;
    if (x.size) {
        const char *s = x.size, *cross = strchr(s, 'x');
        if (!cross) return cli_usage_error("plot", "--size: expected WxH, got \"%s\"", s);
        char wb[32];
        snprintf(wb, sizeof wb, "%.*s", (int)(cross - s), s);
        if (cli_int("plot", "--size", wb, 200, 10000, &w) || cli_int("plot", "--size", cross + 1, 200, 10000, &h))
            return 2;
    }
    const char *out = x.out, *title = x.title, *kind = x.kind;
    double max_seconds = x.max_seconds;
    if (!strcmp(kind, "validate")) /* results of cleave validate: tools/plot_validate.c */
        return plot_validate(&x.args, out, title, (int)w, (int)h);
    if (x.args.n > 1) return cli_usage_error("plot", "one trace at a time");
    const char *in = x.args.n ? x.args.v[0] : NULL;
    if (!in) return cli_usage_error("plot", "missing TRACE file");
    if (!out) return cli_usage_error("plot", "missing -o IMAGE");
    if (strcmp(kind, "gantt") && strcmp(kind, "memory"))
        return cli_usage_error("plot", "--kind: expected gantt, memory or validate, got \"%s\"", kind);
    trace_data d = {0};
    cl_err e = {0};
    cl_budget_start(max_seconds, "--max-seconds");
    rc = read_trace(in, &d, &e);
    /* default title: what the trace says it shows (model, cluster,
     * schedule; cleave's traces carry it), else the file's name */
    char deftitle[256];
    if (!title) {
        const char *base = strrchr(in, '/');
        snprintf(deftitle, sizeof deftitle, "%s: %s", d.title[0] ? d.title : base ? base + 1 : in,
                 kind[0] == 'g' ? "timeline" : "memory");
        title = deftitle;
    }
    if (!rc && d.n_samples) qsort(d.samples, (size_t)d.n_samples, sizeof *d.samples, by_time);
    if (!rc)
        rc = kind[0] == 'g' ? gantt(in, &d, out, title, (int)w, (int)h, &e)
                            : memory(in, &d, out, title, (int)w, (int)h, &e);
    free_trace(&d);
    if (rc) return cli_report(&e);
    printf("wrote %s\n", out);
    return 0;
}
