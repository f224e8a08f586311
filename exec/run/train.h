/* train.h - sequential training of a whole model: the epoch loop,
 * minibatch steps and evaluation (single process, single thread, or with
 * tensor parallelism one thread per worker: tp_team.h).
 *
 * A trainer is an engine: created from a model and options, it owns the net
 * (exec_net over every layer), one acts, the optimiser and the shuffling
 * stream.  Everything that draws random numbers is seeded from opts.seed, so
 * two trainers with the same model, options and data produce bit-identical
 * weights.
 */
#ifndef CL_EXEC_TRAIN_H
#define CL_EXEC_TRAIN_H

#include <stdint.h>

#include "models/model.h"
#include "base/status.h"
#include "exec/nn/data.h"
#include "exec/nn/net.h"
#include "sim/sim.h"

typedef enum exec_lr_schedule {
    EXEC_LR_CONSTANT, /* lr throughout */
    EXEC_LR_COSINE    /* lr * (1 + cos(pi * step / steps)) / 2, per step */
} exec_lr_schedule;

typedef struct exec_train_opts {
    int epochs;            /* >= 1; the cosine schedule spans them */
    int batch;             /* minibatch size; the last one of an epoch may be smaller */
    double lr, momentum, weight_decay;
    exec_lr_schedule schedule;
    uint64_t seed;         /* weights, dropout, shuffling */
    int tensor;            /* tensor-parallel workers (0 or 1: none, the
                              sequential trainer unchanged)                 */
    int recompute;         /* 0 none, 1 selective (EXEC_NET_RECOMPUTE), 2 full
                              (EXEC_NET_RECOMPUTE_FULL)                      */
    int seq_par;           /* with tensor > 1: sequence parallelism
                              (EXEC_NET_SEQ_PAR)                             */
} exec_train_opts;

/* Defaults (docs/executor.md, "Training defaults"): the values that reach the
 * issue's accuracy targets on both Fashion-MNIST models. */
void exec_train_defaults(exec_train_opts *o);

/* What one epoch did. */
typedef struct exec_epoch {
    int epoch;             /* 1-based */
    double loss;           /* mean training loss over the epoch's minibatches, in training mode */
    double train_acc;      /* fraction right during the epoch, in training mode */
    double test_loss, test_acc; /* evaluation mode after the epoch (NAN without a test set) */
    double samples_per_s;  /* training samples / training seconds (evaluation excluded) */
    double elapsed_s;      /* since the first epoch started, evaluation included */
    double lr;             /* learning rate at the epoch's last step */
} exec_epoch;

/* Check that d fits m: sample shape equals the model input, labels below the
 * model's classes.  `what` names the set in the message. */
int exec_data_check(const exec_data *d, const model *m, const char *file, const char *what,
                    cl_err *e);

typedef struct exec_trainer exec_trainer;

/* m must outlive the trainer.  CL_EINPUT for a model the executor cannot run
 * (exec_net_check) or one that does not end in softmax_xent, or that
 * opts.tensor > 1 cannot split (exec_net_tp_check). */
int exec_trainer_create(exec_trainer **t, const model *m, const char *file,
                        const exec_train_opts *o, cl_err *e);
void exec_trainer_destroy(exec_trainer *t);
/* The net it trains; with tensor parallelism worker 0's (its shards of the
 * split layers: exec_trainer_gather has the whole model). */
exec_net *exec_trainer_net(exec_trainer *t);
/* A new unsplit net of the model (microbatch 1) holding the trained
 * parameters, with tensor parallelism gathered from every worker's shards;
 * the caller destroys it. */
exec_net *exec_trainer_gather(exec_trainer *t);
/* The tensor-parallel workers (tp_team.h), or NULL without. */
struct exec_tp_team *exec_trainer_team(exec_trainer *t);
/* Memory of worker `rank` (0 without tensor parallelism) in the
 * simulator's components: weights, gradients, momentum (when nonzero),
 * activations (exec_acts_bytes, and full recomputation's scratch:
 * exec_net_recompute_bytes) and, with tensor parallelism, the all-reduce
 * buffer (exec_tp_team_mem).  The trainer allocates nothing
 * after creation, so this is the peak of what it counts. */
void exec_trainer_mem(const exec_trainer *t, int rank, sim_mem *m);

/* Called every few minibatches with progress through the epoch. */
typedef void (*exec_progress_fn)(void *ctx, int epoch, int64_t done, int64_t total,
                                 double mean_loss);

/* Called after every minibatch step; nonzero stops the epoch there.  The
 * trainer stays mid-epoch and the next exec_trainer_epoch continues it with
 * the next minibatch, exactly as if it had not stopped (checkpoints). */
typedef int (*exec_step_hook)(void *ctx, exec_trainer *t);
void exec_trainer_set_hook(exec_trainer *t, exec_step_hook hook, void *ctx);

/* One epoch over train (shuffled by the trainer's stream), then an
 * evaluation on test (may be NULL).  Both sets must pass exec_data_check.
 * Returns 1 with *out filled, or 0 when the hook stopped it (out zeroed). */
int exec_trainer_epoch(exec_trainer *t, const exec_data *train, const exec_data *test,
                       exec_progress_fn progress, void *ctx, exec_epoch *out);

/* Where the trainer is: epochs started (1-based number of the current or
 * last one), minibatches done in the current epoch (0 between epochs),
 * optimiser steps over the run. */
void exec_trainer_position(const exec_trainer *t, int *epoch, int64_t *pos, int64_t *step);

/* Checkpoints (exec/ckpt/checkpoint.h): save adds the trainer's whole state
 * (the net's parameters, running statistics and dropout streams, momentum,
 * the shuffling stream, the epoch's order, the position and the epoch's
 * sums) as sections of c; restore puts it back into a trainer created with
 * the same model and options, so that training continues bit for bit as if
 * it had not stopped.  With tensor parallelism the checkpoint holds the
 * whole model (the shards gathered; restore splits it again), the same
 * sections as without, so a run may resume with another degree (then with
 * that degree's rounding).  n_train: samples of the training set.
 * CL_EINPUT (naming the checkpoint) when a section is missing or does not
 * fit. */
struct exec_ckpt;
void exec_trainer_save(exec_trainer *t, struct exec_ckpt *c);
int exec_trainer_restore(exec_trainer *t, const struct exec_ckpt *c, int64_t n_train, cl_err *e);

/* One minibatch step (forward, backward, update) on x (B, dim), y (B) with
 * the current learning rate; returns the mean loss.  B <= opts.batch. */
double exec_trainer_step(exec_trainer *t, const float *x, const int32_t *y, int B);

/* Mean loss and accuracy of the model on d in evaluation mode. */
void exec_trainer_evaluate(exec_trainer *t, const exec_data *d, double *loss, double *acc);

#endif
