/* tp_crew.h - the threads of a tensor-parallel group: the calling thread is
 * rank 0, the crew starts ranks 1 .. size-1 and keeps them idle at the
 * group's barrier between calls.  exec_tp_crew_run runs one function on
 * every rank at once (each from its own thread, as the split layers'
 * all-reduces need) and returns when all are done, so between runs the
 * caller may read and write whatever the ranks own.  Used by the
 * sequential tensor-parallel trainer (tp_team.h) and by every stage of a
 * pipelined run with tensor parallelism (pipe_tp.h).
 */
#ifndef CL_EXEC_TP_CREW_H
#define CL_EXEC_TP_CREW_H

#include <stdint.h>

#include "tp_group.h"

typedef struct exec_tp_crew exec_tp_crew;

/* fn(ctx, rank): rank's share of one call; it must make the same
 * all-reduces on every rank and cannot fail between them (tp_group.h). */
typedef void (*exec_tp_fn)(void *ctx, int rank);

/* A crew of size >= 2 ranks whose all-reduces sum at most max_floats;
 * cpu: NULL, or [size] core to pin rank r's thread to (-1: not pinned;
 * cpu[0], the caller's, is ignored).  Ranks start with OpenBLAS on one
 * thread (exec_blas_init). */
exec_tp_crew *exec_tp_crew_create(int size, int64_t max_floats, const int *cpu);
/* Stops the threads (idle between runs) and frees the crew. */
void exec_tp_crew_destroy(exec_tp_crew *c);

int exec_tp_crew_size(const exec_tp_crew *c);
exec_tp_group *exec_tp_crew_group(exec_tp_crew *c);

/* fn(ctx, r) on every rank r, the caller's thread running rank 0. */
void exec_tp_crew_run(exec_tp_crew *c, exec_tp_fn fn, void *ctx);

#endif
