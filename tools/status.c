/* status.c - failure records and checked allocation (see status.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

int cl_fail(cl_err *e, int code, const char *fmt, ...)
{
    if (e && e->code == CL_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        for (char *p = e->msg; *p; p++)  /* one line, whatever the input held */
            if (*p == '\n' || *p == '\r') *p = ' ';
        e->code = code;
    }
    return e ? e->code : code;
}

void cl_err_clear(cl_err *e)
{
    e->code = CL_OK;
    e->msg[0] = '\0';
}

static void *oom(size_t n)
{
    fprintf(stderr, "cleave: out of memory allocating %zu bytes\n", n);
    abort();
}

void *cl_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    return p ? p : oom(n);
}

void *cl_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    return p ? p : oom(n * size);
}

void *cl_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    return q ? q : oom(n);
}

char *cl_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(cl_malloc(n), s, n);
}
