/* cli.c - helpers shared by the subcommands, and the option parser every
 * one of them reads its argv with (see cli.h). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "cli.h"

int cli_report(const cl_err *e)
{
    fprintf(stderr, "cleave: %s\n", e->msg[0] ? e->msg : "failed");
    return e->code ? e->code : CL_ERUN;
}

/* "cleave <cmd>: <message> (hint: ...)", the hint cmd's --help when NULL;
 * printed unless quiet.  Returns 2. */
static int usage_v(int quiet, const char *cmd, const char *hint, const char *fmt, va_list ap)
{
    if (quiet) return CL_EINPUT;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (hint) fprintf(stderr, "cleave %s: %s (hint: %s)\n", cmd, msg, hint);
    else fprintf(stderr, "cleave %s: %s (hint: cleave %s --help)\n", cmd, msg, cmd);
    return CL_EINPUT;
}

static int usage(int quiet, const char *cmd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int usage(int quiet, const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = usage_v(quiet, cmd, NULL, fmt, ap);
    va_end(ap);
    return rc;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = usage_v(0, cmd, NULL, fmt, ap);
    va_end(ap);
    return rc;
}

int cli_usage_hint(const char *cmd, const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = usage_v(0, cmd, hint, fmt, ap);
    va_end(ap);
    return rc;
}

static int parse_int(int quiet, const char *cmd, const char *opt, const char *s, int64_t lo,
                     int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno)
        return usage(quiet, cmd, "%s: expected an integer, got \"%s\"", opt, s ? s : "");
    if (v < lo || v > hi)
        return usage(quiet, cmd, "%s: %lld is out of range %lld to %lld", opt, v, (long long)lo,
                     (long long)hi);
    *out = v;
    return CL_OK;
}

static int parse_num(int quiet, const char *cmd, const char *opt, const char *s, double lo,
                     double hi, double *out)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !isfinite(v))
        return usage(quiet, cmd, "%s: expected a finite number, got \"%s\"", opt, s ? s : "");
    if (v < lo || v > hi)
        return usage(quiet, cmd, "%s: %g is out of range %g to %g", opt, v, lo, hi);
    *out = v;
    return CL_OK;
}

int cli_int(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi,
            int64_t *out)
{
    return parse_int(0, cmd, opt, s, lo, hi, out);
}

int cli_num(const char *cmd, const char *opt, const char *s, double lo, double hi,
            double *out)
{
    return parse_num(0, cmd, opt, s, lo, hi, out);
}

int cli_num_pair(const char *cmd, const char *opt, const char *s, double lo, double a[2], int *n)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    char *comma = strchr(buf, ',');
    if (comma) *comma = '\0';
    *n = comma ? 2 : 1;
    int rc = cli_num(cmd, opt, buf, lo, 1e300, &a[0]);
    if (!rc && comma) rc = cli_num(cmd, opt, comma + 1, lo, 1e300, &a[1]);
    return rc;
}

int cli_int_list(const char *cmd, const char *opt, const char *s, int64_t lo,
                 int64_t hi, int64_t **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (!s || !*s) return cli_usage_error(cmd, "%s: expected a comma-separated list", opt);
    int cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int64_t *v = cl_malloc((size_t)cap * sizeof *v);
    char *copy = cl_strdup(s), *save = NULL;
    int k = 0, rc = CL_OK;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if ((rc = cli_int(cmd, opt, tok, lo, hi, &v[k]))) break;
        k++;
    }
    free(copy);
    if (!rc && k == 0) rc = cli_usage_error(cmd, "%s: empty list", opt);
    if (rc) { free(v); return rc; }
    *out = v;
    *n = k;
    return CL_OK;
}

cJSON *cli_json_add_numbers(cJSON *o, const cli_json_num *t, int n)
{
    for (int i = 0; i < n; i++) cJSON_AddNumberToObject(o, t[i].key, t[i].v);
    return o;
}

int cli_stderr_tty(void)
{
    return isatty(STDERR_FILENO);
}

/* ------------------------------------------------------------ the parser -- */

/* Every command takes -h and --help; getopt_long returns HELP_VAL for them. */
enum { HELP_VAL = 'h', OPT_VAL = 256, MAX_OPTS = 96 };
static const cli_opt help_opt = {"help", 'h', CLI_FLAG, 0, 0, .help = NULL};

static const cli_opt *opt_at(const cli_spec *s, int i) { return i < s->n_opts ? &s->opts[i] : &help_opt; }

/* How messages name an option: "--model", or "-o" when it has no long name. */
static const char *opt_name(const cli_opt *o, char *buf, size_t cap)
{
    if (o->name) snprintf(buf, cap, "--%s", o->name);
    else snprintf(buf, cap, "-%c", o->letter);
    return buf;
}

/* Does o's field have the size its kind writes?  (A table mistake, caught
 * on the command's first run rather than as a write past the field.) */
static int field_fits(const cli_opt *o)
{
    switch (o->kind) {
    case CLI_FLAG:
    case CLI_ENUM: return o->size == sizeof(int);
    case CLI_STR: return o->size == sizeof(const char *);
    case CLI_INT: return o->size == sizeof(int) || o->size == sizeof(int64_t);
    case CLI_NUM: return o->size == sizeof(double);
    case CLI_LIST: return o->size == sizeof(cli_list);
    }
    return 0;
}

/* getopt_long's tables for s: long options (the table's, then help) and the
 * short ones, "-:" first: arguments that are not options come back in
 * order as 1 (so a list option can take those after it), and a missing
 * value is ':' with no message of getopt's own. */
static int getopt_tables(const cli_spec *s, struct option *lo, char *shorts)
{
    if (s->n_opts > MAX_OPTS - 1) return -1;
    int k = 0, j = 0;
    shorts[j++] = '-';
    shorts[j++] = ':';
    for (int i = 0; i <= s->n_opts; i++) {
        const cli_opt *o = opt_at(s, i);
        if (o != &help_opt && !field_fits(o)) return -1;
        int arg = o->kind == CLI_FLAG ? no_argument : required_argument;
        if (o->name) lo[k++] = (struct option){o->name, arg, NULL, o == &help_opt ? HELP_VAL : OPT_VAL + i};
        if (o->letter) {
            shorts[j++] = o->letter;
            if (arg == required_argument) shorts[j++] = ':';
        }
    }
    lo[k] = (struct option){0};
    shorts[j] = '\0';
    return 0;
}

static const cli_opt *by_letter(const cli_spec *s, int c, int *index)
{
    for (int i = 0; i <= s->n_opts; i++)
        if (opt_at(s, i)->letter == c) {
            *index = i;
            return opt_at(s, i);
        }
    return NULL;
}

/* The message for the argument getopt_long refused (arg, the element of
 * argv it was reading; letter, getopt's optopt for a short option). */
static int refuse(const cli_spec *s, const char *arg, int letter, int quiet)
{
    char nm[80];
    if (arg[0] == '-' && arg[1] == '-') {
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const cli_opt *hit = NULL;
        char cands[400] = "";
        int n = 0;
        for (int i = 0; i <= s->n_opts; i++) {
            const cli_opt *o = opt_at(s, i);
            if (!o->name || strncmp(o->name, name, len)) continue;
            if (strlen(o->name) == len) { /* exact: no abbreviation competes */
                hit = o;
                n = 1;
                break;
            }
            size_t at = strlen(cands);
            snprintf(cands + at, sizeof cands - at, "%s--%s", n ? ", " : "", o->name);
            hit = o;
            n++;
        }
        if (n > 1)
            return usage(quiet, s->cmd, "ambiguous option --%.*s (could be %s)", (int)len, name, cands);
        if (n == 0) return usage(quiet, s->cmd, "unknown option --%.*s", (int)len, name);
        if (eq && hit->kind == CLI_FLAG) return usage(quiet, s->cmd, "--%s takes no value", hit->name);
        return usage(quiet, s->cmd, "%s needs a value", opt_name(hit, nm, sizeof nm));
    }
    int index;
    const cli_opt *o = letter ? by_letter(s, letter, &index) : NULL;
    if (o) return usage(quiet, s->cmd, "-%c needs a value", letter);
    if (letter > ' ' && letter < 127) return usage(quiet, s->cmd, "unknown option -%c", letter);
    return usage(quiet, s->cmd, "unknown option %s", arg);
}

/* Store val into o's field. */
static int take(const cli_spec *s, const cli_opt *o, const char *val, void *base, int quiet)
{
    char nm[80];
    const char *name = opt_name(o, nm, sizeof nm);
    char *field = (char *)base + o->off;
    int rc = CL_OK;
    switch (o->kind) {
    case CLI_FLAG: *(int *)field = 1; break;
    case CLI_STR: *(const char **)field = val; break;
    case CLI_INT: {
        int64_t v;
        if ((rc = parse_int(quiet, s->cmd, name, val, o->ilo, o->ihi, &v))) return rc;
        if (o->size == sizeof(int)) *(int *)field = (int)v; /* the range fits an int */
        else memcpy(field, &v, sizeof v); /* int64_t, or a uint64_t seed: the same bits */
        break;
    }
    case CLI_NUM: rc = parse_num(quiet, s->cmd, name, val, o->lo, o->hi, (double *)field); break;
    case CLI_ENUM: {
        int index = 0;
        size_t len = strlen(val);
        for (const char *w = o->words; w; index++) {
            const char *bar = strchr(w, '|');
            size_t wl = bar ? (size_t)(bar - w) : strlen(w);
            if (wl == len && !strncmp(w, val, len)) {
                *(int *)field = index;
                goto given;
            }
            w = bar ? bar + 1 : NULL;
        }
        /* "expected on or off", "expected auto, exact or merge" */
        char list[300] = "";
        const char *w = o->words;
        while (w) {
            const char *bar = strchr(w, '|');
            size_t at = strlen(list), wl = bar ? (size_t)(bar - w) : strlen(w);
            const char *sep = at == 0 ? "" : bar ? ", " : " or ";
            snprintf(list + at, sizeof list - at, "%s%.*s", sep, (int)wl, w);
            w = bar ? bar + 1 : NULL;
        }
        return usage(quiet, s->cmd, "%s: expected %s, got \"%s\"", name, list, val);
    }
    case CLI_LIST: {
        cli_list *l = (cli_list *)field;
        if (l->n < CLI_LIST_MAX) l->v[l->n] = val;
        l->n++;
        break;
    }
    }
    if (rc) return rc;
given:
    if (o->given) *(int *)((char *)base + o->given - 1) = 1;
    return CL_OK;
}

/* An argument that is not an option: it continues the list option just
 * before it, else it joins the command's arguments if it takes any. */
static int argument(const cli_spec *s, int list, const char *val, void *base, int quiet)
{
    if (list >= 0) return take(s, &s->opts[list], val, base, quiet);
    if (!s->args) return usage(quiet, s->cmd, "unexpected argument \"%s\"", val);
    cli_list *l = (cli_list *)((char *)base + s->args - 1);
    if (l->n < CLI_LIST_MAX) l->v[l->n] = val;
    l->n++;
    return CL_OK;
}

/* One pass of getopt_long over argv.  base NULL: find option `want`
 * silently (*found gets its last value). */
static int run(const cli_spec *s, int argc, char **argv, void *base, int quiet, int want,
               const char **found)
{
    struct option lo[MAX_OPTS + 1];
    char shorts[2 * MAX_OPTS + 3];
    if (getopt_tables(s, lo, shorts))
        return usage(quiet, s->cmd, "internal error: its option table is malformed (too many options, or a field of the wrong size)");
    int list = -1, rc;
    optind = 0; /* a fresh scan (getopt's state is global; demo runs commands in turn) */
    opterr = 0;
    for (;;) {
        int at = optind > 0 ? optind : 1, index = -1; /* the element getopt reads next */
        int c = getopt_long(argc, argv, shorts, lo, NULL);
        if (c == -1) break;
        if (c == 1) {
            if (base && (rc = argument(s, list, optarg, base, quiet))) return rc;
            continue;
        }
        if (c == '?' || c == ':') {
            if (base) return refuse(s, at < argc ? argv[at] : "", optopt, quiet);
            continue;
        }
        if (c == HELP_VAL) {
            if (base) return CLI_HELP;
            continue;
        }
        const cli_opt *o = c >= OPT_VAL ? &s->opts[(index = c - OPT_VAL)] : by_letter(s, c, &index);
        if (!o) continue; /* cannot happen: getopt returns only what the tables hold */
        if (!base) {
            if (index == want) *found = o->kind == CLI_FLAG ? "" : optarg;
            continue;
        }
        if ((rc = take(s, o, optarg, base, quiet))) return rc;
        list = o->kind == CLI_LIST ? index : -1;
    }
    /* after "--": arguments, whatever they look like */
    for (int i = optind; base && i < argc; i++)
        if ((rc = argument(s, list, argv[i], base, quiet))) return rc;
    return CL_OK;
}

int cli_parse(const cli_spec *s, int argc, char **argv, void *base, int quiet)
{
    return run(s, argc, argv, base, quiet, -1, NULL);
}

const char *cli_find(const cli_spec *s, int argc, char **argv, const char *name)
{
    const char *found = NULL;
    for (int i = 0; i < s->n_opts; i++)
        if (s->opts[i].name && !strcmp(s->opts[i].name, name)) run(s, argc, argv, NULL, 1, i, &found);
    return found;
}

/* ------------------------------------------------------------------ help -- */

/* The value of o's field in defaults, as --help shows it. */
static void show_default(const cli_opt *o, const void *defaults, FILE *f)
{
    const char *field = (const char *)defaults + o->off;
    switch (o->kind) {
    case CLI_INT: {
        int64_t v = 0;
        if (o->size == sizeof(int)) v = *(const int *)field;
        else memcpy(&v, field, sizeof v);
        fprintf(f, "%lld", (long long)v);
        break;
    }
    case CLI_NUM: fprintf(f, "%g", *(const double *)field); break;
    case CLI_STR: fputs(*(const char *const *)field ? *(const char *const *)field : "", f); break;
    case CLI_ENUM: {
        const char *w = o->words;
        for (int i = *(const int *)field; i > 0 && w; i--) w = strchr(w, '|') ? strchr(w, '|') + 1 : NULL;
        if (w) fprintf(f, "%.*s", (int)(strchr(w, '|') ? (size_t)(strchr(w, '|') - w) : strlen(w)), w);
        break;
    }
    case CLI_FLAG:
    case CLI_LIST: break;
    }
}

void cli_help(const cli_spec *s, const void *defaults, FILE *f)
{
    for (int i = 0; i < s->n_opts; i++) {
        const cli_opt *o = &s->opts[i];
        if (!o->help) continue;
        char label[96];
        if (o->letter) snprintf(label, sizeof label, "  -%c%s%s", o->letter, o->arg ? " " : "", o->arg ? o->arg : "");
        else snprintf(label, sizeof label, "  --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        fprintf(f, "%-*s ", s->help_col - 1, label);
        for (const char *p = o->help; *p; p++) {
            if (p[0] == '{' && p[1] == '}' && defaults) {
                show_default(o, defaults, f);
                p++;
            } else if (*p == '\n') {
                fprintf(f, "\n%*s", s->help_col, "");
            } else {
                fputc(*p, f);
            }
        }
        fputc('\n', f);
    }
}
