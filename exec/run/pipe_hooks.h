/* pipe_hooks.h - test-only hooks into a pipelined run.  Not part of the
 * public API (pipeline.h): no command reaches them; the tests call
 * exec_pipe_run_hooked to break a run on purpose and check that the
 * failure is caught, or that a mechanism really matters. */
#ifndef CL_EXEC_PIPE_HOOKS_H
#define CL_EXEC_PIPE_HOOKS_H

#include <stdint.h>

#include "pipeline.h"

typedef struct exec_pipe_hooks {
    int fail_worker;       /* > 0: worker fail_worker - 1 fails with a runtime
                              error before its op fail_op                    */
    int64_t fail_op;
    int stash_off;         /* pipedream without weight stashing              */
} exec_pipe_hooks;

/* exec_pipe_run with the hooks h (NULL: none, which is exec_pipe_run). */
int exec_pipe_run_hooked(const plan *p, const exec_pipe_opts *o, const exec_pipe_hooks *h,
                         exec_pipe_result *r, cl_err *e);

#endif
