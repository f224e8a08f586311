/* pipeline.c - the pipelined runner (pipeline.h).  Placeholder while the
 * runner is written: every entry point exists so callers link. */
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

const char *exec_pipe_backend_name(exec_pipe_backend b)
{
    return b == EXEC_PIPE_MPI ? "mpi" : "threads";
}

int exec_pipe_backend_from_name(const char *name)
{
    if (!name) return -1;
    if (!strcmp(name, "threads")) return EXEC_PIPE_THREADS;
    if (!strcmp(name, "mpi")) return EXEC_PIPE_MPI;
    return -1;
}

void exec_pipe_defaults(exec_pipe_opts *o)
{
    exec_train_opts t;
    exec_train_defaults(&t);
    memset(o, 0, sizeof *o);
    o->epochs = 1;
    o->lr = t.lr;
    o->momentum = t.momentum;
    o->weight_decay = t.weight_decay;
    o->lr_schedule = t.schedule;
    o->seed = t.seed;
}

void exec_pipe_result_free(exec_pipe_result *r)
{
    if (!r) return;
    memset(r, 0, sizeof *r);
}

int exec_pipe_check(const plan *p, const char *file, cl_err *e)
{
    (void)p;
    return cl_fail(e, CL_ERUN, "%s: the pipelined runner is not built yet", file);
}

int exec_pipe_workers(const plan *p, const char *file, cl_err *e)
{
    (void)p;
    cl_fail(e, CL_ERUN, "%s: the pipelined runner is not built yet", file);
    return -1;
}

int exec_pipe_run(const plan *p, const exec_pipe_opts *o, exec_pipe_result *r, cl_err *e)
{
    (void)p;
    memset(r, 0, sizeof *r);
    return cl_fail(e, CL_ERUN, "%s: the pipelined runner is not built yet", o->file);
}

int exec_pipe_save_weights(const exec_pipe_result *r, const char *path, cl_err *e)
{
    (void)r;
    return cl_fail(e, CL_ERUN, "%s: the pipelined runner is not built yet", path);
}

int exec_pipe_mpi_world(int *rank, int *size, cl_err *e)
{
    *rank = 0;
    *size = 1;
    return cl_fail(e, CL_ERUN, "the MPI backend is not built yet");
}

void exec_pipe_mpi_finalize(void) {}
