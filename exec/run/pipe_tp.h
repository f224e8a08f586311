/* pipe_tp.h - tensor parallelism inside a pipelined run (pipe_tp.c): each
 * stage with an attention or mlp layer runs on T ranks, Megatron-style, as
 * the sequential --tensor trainer does (tp_team.h).  Internal to exec/run/
 * (pipe_run.h lists the runner's files).
 *
 * The design: the pipeline worker is rank 0 of its stages, and a crew
 * (tp_crew.h) of T - 1 threads of its own are ranks 1 ..; the op lists,
 * messages, memory accounting, reports and trace are rank 0's alone, as
 * without tensor parallelism.  Each compute call (forward, the backward
 * passes, the update, the evaluation's forward) runs on every rank at once,
 * each on its shard, the split layers all-reducing inside.  The input
 * (received activation, output gradient, data) is read by every rank from
 * rank 0's buffer (threads share memory: no copy), and after the
 * row-parallel all-reduce every rank holds the whole stage output and input
 * gradient, so rank 0's is the one sent: the other ranks' copies go to
 * scratch.  A stage with no split layer runs on rank 0 alone (T = 1): its
 * work would be replicated, not split.
 *
 * A replicated stage is one such group per replica.  The data-parallel
 * all-reduce of its gradients is per shard, as Megatron-LM's
 * data-parallel groups are orthogonal to its tensor groups: rank k's
 * gradient block sums with rank k's of the other replicas (the
 * replicated layers' copies too, equal on every rank).  It is the ring of
 * the unsplit case (pipe_worker.c), moved by rank 0 for all its ranks:
 * each step's message holds the step's chunk of every rank's block.
 *
 * With T == 1 every call here is the plain exec_net call.
 *
 * Tensor ranks as MPI processes (exec_pipe_opts.tensor_mpi, R->tpm): no
 * crew; each process is one rank k of its worker and runs the worker's
 * whole op list as the pipeline of rank k (backend_mpi.c), a split stage
 * holding its shard alone (ps->T == 1, ps->tpm set, the all-reduces over
 * tp_mpi.h), a stage with no split layer whole on every rank.  The ring
 * above then moves this rank's shard only; pipe_tp_whole gathers the
 * group's shards to rank 0, and so do the checkpoints (pipe_tp_mpi_put):
 * the file is the crew's, the whole stage per section, so a run resumes in
 * either mode from a checkpoint written in either.
 */
#ifndef CL_EXEC_PIPE_TP_H
#define CL_EXEC_PIPE_TP_H

#include "exec/ckpt/checkpoint.h"
#include "pipe_worker.h"

/* The crew of worker W when the plan's tensor degree is above 1 and one of
 * the stages it holds has a split layer (W->local set, stages not made
 * yet); its threads pinned next to the workers' (docs/executor.md). */
void pipe_tp_crew_init(pipe_worker *W);

/* Stage ps (ps->stage set) of W: its nets on every rank, for batches of up
 * to max_batch, the optimiser of each; CL_EINPUT as exec_net_create_tp. */
int pipe_tp_stage_init(pipe_worker *W, pstage *ps, int max_batch, cl_err *e);
void pipe_tp_stage_free(pstage *ps);

/* Acts for B samples on every rank ([T], caller frees with acts_free). */
exec_acts **pipe_tp_acts_new(const pstage *ps, int B);
void pipe_tp_acts_free(const pstage *ps, exec_acts **a);

/* The passes of net.h on every rank (rank 0's din is the one written;
 * din NULL: none).  pass: forward (train: training mode), backward
 * (both gradients), backward input, backward weight. */
enum { PIPE_TP_FWD, PIPE_TP_BWD, PIPE_TP_BWD_IN, PIPE_TP_BWD_W };
void pipe_tp_pass(pipe_worker *W, pstage *ps, int pass, exec_acts **a, const float *in,
                  const int32_t *lab, int B, int train, const float *dout, float *din,
                  float loss_scale);

/* One SGD step on every rank at lr and weight decay wd. */
void pipe_tp_update(pipe_worker *W, pstage *ps, double lr, double wd);

/* Exchange every rank's parameter block with its block of stash
 * (T x n_floats; pipe_ops.c's weight versions); done twice it restores. */
void pipe_tp_swap(pstage *ps, float *stash);
/* Copy every rank's parameters into stash (T x n_floats). */
void pipe_tp_copy_params(pstage *ps, float *stash);

/* The stage's whole parameters: ps->net when T == 1, else a new unsplit
 * net gathered from the shards (*made = 1: the caller destroys it).  With
 * ps->tpm a collective of the worker's group: every rank calls it, rank 0
 * gets the whole net, the others their shard (made 0). */
exec_net *pipe_tp_whole(pipe_worker *W, pstage *ps, int *made);

/* A split stage whose ranks are MPI processes (ps->tpm), in a checkpoint:
 * put is a collective of the worker's group that gathers every rank's
 * parameters and momentum to tensor rank 0, which adds the whole stage's
 * sections under prefix to c as exec_ckpt_put_net_tp does for a crew (c
 * NULL on the other ranks).  get, on each rank alone, reads the whole
 * stage from c and keeps this rank's part; errors as exec_ckpt_get_net. */
void pipe_tp_mpi_put(pipe_worker *W, pstage *ps, exec_ckpt *c, const char *prefix);
int pipe_tp_mpi_get(pipe_worker *W, pstage *ps, const exec_ckpt *c, const char *prefix,
                    cl_err *e);

#endif
