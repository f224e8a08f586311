/* cli.c - helpers shared by the subcommands (see cli.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_report(const cl_err *e)
{
    fprintf(stderr, "cleave: %s\n", e->msg[0] ? e->msg : "failed");
    return e->code ? e->code : CL_ERUN;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cleave %s: %s (hint: cleave %s --help)\n", cmd, msg, cmd);
    return CL_EINPUT;
}

int cli_int(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi,
            int64_t *out)
{
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno)
        return cli_usage_error(cmd, "%s: expected an integer, got \"%s\"", opt, s ? s : "");
    if (v < lo || v > hi)
        return cli_usage_error(cmd, "%s: %lld is out of range %lld to %lld", opt, v,
                               (long long)lo, (long long)hi);
    *out = v;
    return CL_OK;
}

int cli_num(const char *cmd, const char *opt, const char *s, double lo, double hi,
            double *out)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !isfinite(v))
        return cli_usage_error(cmd, "%s: expected a finite number, got \"%s\"", opt, s ? s : "");
    if (v < lo || v > hi)
        return cli_usage_error(cmd, "%s: %g is out of range %g to %g", opt, v, lo, hi);
    *out = v;
    return CL_OK;
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

int cli_stderr_tty(void)
{
    return isatty(STDERR_FILENO);
}

int cli_opt_take(const cli_opt *t, int n, void *base, const char *cmd, const char *opt,
                 const char *val)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(opt, t[i].name)) continue;
        if (!val) return cli_usage_error(cmd, "%s needs a value", opt);
        void *field = (char *)base + t[i].off;
        switch (t[i].kind) {
        case CLI_STR: *(const char **)field = val; return 0;
        case CLI_INT: return cli_int(cmd, opt, val, t[i].ilo, t[i].ihi, (int64_t *)field);
        case CLI_NUM: return cli_num(cmd, opt, val, t[i].lo, t[i].hi, (double *)field);
        }
    }
    return -1;
}
