/* status.c - failure records and checked allocation (see status.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "status.h"

int cl_fail(cl_err *e, int code, const char *fmt, ...)
{
    if (e && e->code == CL_OK) {
        char raw[sizeof e->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        /* one line, whatever the input held (line breaks become spaces), and
         * no control byte reaches the terminal: an ESC from a file could
         * rewrite the screen (esc_term writes them as \xNN) */
        for (char *p = raw; *p; p++)
            if (*p == '\n' || *p == '\r') *p = ' ';
        char *safe = esc_term(raw);
        snprintf(e->msg, sizeof e->msg, "%s", safe);
        free(safe);
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
