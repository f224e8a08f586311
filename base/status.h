/* status.h - how cleave reports expected failures.
 *
 * Two kinds of failure (house style): a broken invariant is a bug and aborts
 * via assert(); bad input, a missing file or an infeasible request is expected
 * and travels back to main() as a status code plus one line of text in a
 * cl_err.  Nothing below main() calls exit().
 *
 * Message shape, one line:  "<file>: <json.path>: <what is wrong> (hint: ...)"
 */
#ifndef CL_STATUS_H
#define CL_STATUS_H

#include <stddef.h>

enum {
    CL_OK = 0,
    CL_ERUN = 1,   /* runtime failure: I/O error, out of memory, ... */
    CL_EINPUT = 2  /* bad input: the user can fix it; exit status 2   */
};

typedef struct cl_err {
    int code;       /* CL_OK until the first failure is recorded           */
    char msg[1024]; /* one line, no trailing newline                       */
} cl_err;

/* Record a failure (only the first one is kept, so the root cause wins) and
 * return its code, so callers can write `return cl_fail(e, CL_EINPUT, ...)`. */
int cl_fail(cl_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reset to CL_OK with an empty message. */
void cl_err_clear(cl_err *e);

/* Checked allocation: aborts on out-of-memory (a machine failure, not an input
 * failure; sizes that users give are validated before they reach here). */
void *cl_malloc(size_t n);
void *cl_calloc(size_t n, size_t size);
void *cl_realloc(void *p, size_t n);
char *cl_strdup(const char *s);

#endif
