/* tp_group.h - the collective of a tensor-parallel group on threads: `size`
 * workers of one process, each calling from its own thread, meet at a
 * barrier and sum buffers over shared memory.
 *
 * The all-reduce is deterministic: element i of the sum is always
 * ((buf_0[i] + buf_1[i]) + buf_2[i]) + ... in rank order, whichever thread
 * computes it and whenever, so every worker gets the same bits and a run
 * does not depend on thread timing.  Waiting blocks on a condition
 * variable (no spinning).  Every worker must make the same sequence of
 * calls; a worker that never arrives would block the others, so the group
 * is for code that cannot fail between its calls (the tensor-parallel
 * trainer: tp_team.h).
 */
#ifndef CL_EXEC_TP_GROUP_H
#define CL_EXEC_TP_GROUP_H

#include <stdint.h>

#include "exec/nn/layers_tfm.h"

typedef struct exec_tp_group exec_tp_group;

/* A group of size >= 1 workers whose all-reduces sum at most max_floats. */
exec_tp_group *exec_tp_group_create(int size, int64_t max_floats);
void exec_tp_group_destroy(exec_tp_group *g);

/* Worker rank's view for exec_net_create_tp (owned by the group). */
const exec_tp_comm *exec_tp_group_comm(exec_tp_group *g, int rank);

/* Wait until all size workers have called it (once each per round). */
void exec_tp_group_barrier(exec_tp_group *g);

/* Sum buf (n <= max_floats floats, each worker its own buffer) over the
 * workers, in place: two barriers; in between each worker sums its
 * 1/size of the elements over every worker's buffer into the group's
 * buffer, then every worker copies the whole sum back. */
void exec_tp_group_allreduce(exec_tp_group *g, int rank, float *buf, int64_t n);

/* The collectives of sequence parallelism (exec_tp_comm: blocks of size
 * chunks, chunk q rank q's), two barriers each like the all-reduce, no
 * group buffer: between them each worker reads every worker's src.
 * reduce_scatter: dst (blocks, chunk) = sum over q in rank order of src_q's
 * chunk `rank` of each block, so reduce-scatter then all-gather gives the
 * all-reduce's bits; all_gather: dst (blocks, size chunk) from every
 * worker's src (blocks, chunk).  src and dst must not overlap. */
void exec_tp_group_reduce_scatter(exec_tp_group *g, int rank, float *dst, const float *src,
                                  int64_t blocks, int64_t chunk);
void exec_tp_group_all_gather(exec_tp_group *g, int rank, float *dst, const float *src,
                              int64_t blocks, int64_t chunk);

/* Seconds worker rank has waited at its all-reduces' barriers for the
 * others (its own thread's count: read it from that thread, or after the
 * workers have met at a barrier since). */
double exec_tp_group_wait_s(const exec_tp_group *g, int rank);

/* Bytes of the group's sum buffer (shared by its workers). */
int64_t exec_tp_group_bytes(const exec_tp_group *g);

#endif
