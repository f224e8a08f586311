/* train_args.h - what `cleave train` and `cleave train --plan` share
 * (prefix train_args_): the training options, the data they name, the
 * checkpoint identity they imply, and the epoch lines and CSV log both print.
 *
 * One parser for both forms, so an option means the same thing, has the
 * same range and fails with the same message whether the run is sequential
 * or pipelined. */
#ifndef CL_TRAIN_ARGS_H
#define CL_TRAIN_ARGS_H

#include <stdint.h>

#include "exec/ckpt/checkpoint.h"
#include "exec/nn/data.h"
#include "exec/run/train.h"
#include "models/model.h"
#include "base/status.h"

typedef struct train_args {
    const char *log;        /* --log: the epoch lines as CSV                 */
    const char *data;       /* --data: Fashion-MNIST folder (NULL: default)  */
    const char *ckpt;       /* --checkpoint                                  */
    const char *resume;     /* --resume                                      */
    const char *weights;    /* --save-weights                                */
    int64_t limit;          /* --limit: first N training samples (0: all)    */
    int64_t synthetic;      /* --synthetic N samples (0: real data)          */
    int64_t every;          /* --checkpoint-every (0: epoch ends only)       */
    exec_train_opts opt;    /* lr, momentum, weight decay, lr schedule, seed
                               (epochs and batch are the caller's)           */
    int momentum_set;       /* --momentum was given                          */
} train_args;

/* The executor's training defaults (exec_train_defaults), nothing named. */
void train_args_defaults(train_args *a);

/* Take option `opt` with value `val` (NULL when it is the last argument) if
 * it is one of the shared ones.  Returns -1 when it is not (the caller tries
 * its own), 0 when taken, or the usage-error status (2, message printed as
 * "cleave <cmd>: ..."). */
int train_args_option(train_args *a, const char *cmd, const char *opt, const char *val);

/* The checks across options (--synthetic vs --data, --checkpoint-every
 * without --checkpoint): 0 or the usage-error status. */
int train_args_check(const train_args *a, const char *cmd);

/* Fail now, not after the first epoch, on an output path that cannot be
 * written (--log, --checkpoint, --save-weights). */
int train_args_probe(const train_args *a, cl_err *e);

/* The data a names, ready to train m: `synthetic` samples shaped like the
 * model's input (and a quarter as many test samples), or Fashion-MNIST from
 * a->data; cut to --limit; checked against m (errors name `file`); then
 * standardised by the training set's mean and sd.  *source names the data
 * in the run's header.  The caller frees both sets (also after a failure). */
int train_args_data(const train_args *a, const model *m, const char *file, exec_data *train,
                    exec_data *test, const char **source, double *mean, double *sd,
                    cl_err *e);

/* The identity a resumed run must match that both forms share: seed, lr,
 * schedule, momentum, weight decay, model name and hash, training data.
 * Writes them to ids (room for TRAIN_ARGS_IDS) and returns how many. */
enum { TRAIN_ARGS_IDS = 8 };
int train_args_ids(const train_args *a, const model *m, const exec_data *train,
                   exec_ckpt_id *ids);

/* "cosine" or "constant". */
const char *train_args_schedule_name(exec_lr_schedule s);

/* The table both forms print: header, then one line per epoch. */
void train_args_print_header(void);
void train_args_print_epoch(const exec_epoch *h);

/* The CSV log of epochs h[0..n), rewritten whole (atomically) after each
 * epoch so that it is never partial. */
int train_args_write_log(const char *path, const exec_epoch *h, int n, cl_err *e);

#endif
