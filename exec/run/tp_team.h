/* tp_team.h - a whole model trained with tensor parallelism on threads
 * (Megatron-LM style): `size` workers, each holding a net whose attention
 * and mlp layers are its shard (exec_net_create_tp) and whose other layers
 * are replicated, its own activations, gradients and momentum, joined by a
 * tp_group whose all-reduces the split layers call inside their passes.
 *
 * The caller's thread is worker 0; workers 1 .. size-1 are threads the team
 * starts and keeps (tp_crew.h), idle between calls.  Every call
 * runs the same work on all workers and returns when all are done; what
 * worker 0 computes is what the sequential trainer would (train.h uses the
 * team for exec_train_opts.tensor > 1).
 */
#ifndef CL_EXEC_TP_TEAM_H
#define CL_EXEC_TP_TEAM_H

#include <stdint.h>

#include "base/status.h"
#include "exec/nn/net.h"
#include "exec/nn/optim.h"
#include "models/model.h"
#include "sim/sim.h"

typedef struct exec_tp_team exec_tp_team;

/* The whole model m (outliving the team) split over size >= 2 workers, for
 * minibatches of up to max_batch; weights from seed (the shards of a whole
 * net's), the nets' flags (net.h; EXEC_NET_SEQ_PAR for sequence
 * parallelism), SGD with momentum and weight decay as exec_sgd.  CL_EINPUT
 * as exec_net_tp_check (and exec_net_sp_check), naming file. */
int exec_tp_team_create(exec_tp_team **out, const model *m, int size, int max_batch,
                        uint64_t seed, int flags, double momentum, double weight_decay,
                        const char *file, cl_err *e);
/* Stops the threads and frees everything. */
void exec_tp_team_destroy(exec_tp_team *t);

int exec_tp_team_size(const exec_tp_team *t);
exec_net *exec_tp_team_net(exec_tp_team *t, int rank);
exec_acts *exec_tp_team_acts(exec_tp_team *t, int rank);
exec_sgd *exec_tp_team_sgd(exec_tp_team *t, int rank);

/* On every worker: forward of x (B, in_elems), labels y (B) into its acts;
 * with train, then the backward pass (loss scale 1 / B) and an SGD step at
 * lr, exactly as exec_trainer_step does sequentially.  Loss and accuracy
 * are in any worker's acts (the same on each).  B <= max_batch. */
void exec_tp_team_run(exec_tp_team *t, const float *x, const int32_t *y, int B, int train,
                      double lr);

/* Seconds worker rank waited for the others inside all-reduces so far
 * (exec_tp_group_wait_s; between calls). */
double exec_tp_team_wait_s(const exec_tp_team *t, int rank);

/* Worker rank's memory, with the simulator's components (sim_mem) as the
 * pipelined runner counts them: weights, gradients and momentum (its net's
 * blocks; momentum only when nonzero), activations (exec_acts_bytes of its
 * acts, and exec_net_recompute_bytes) and buffers (the group's all-reduce buffer,
 * and with sequence parallelism the net's gather scratch, exec_net_seq_bytes).  Nothing is allocated
 * or freed while the team trains, so this is also its peak. */
void exec_tp_team_mem(const exec_tp_team *t, int rank, sim_mem *m);

#endif
