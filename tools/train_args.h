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
#include "cli.h"

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
    const char *schedule;   /* --schedule: refused (the pipeline schedule's
                               name; the learning rate's is --lr-schedule)   */
} train_args;

/* The executor's training defaults (exec_train_defaults), nothing named. */
void train_args_defaults(train_args *a);

/* The options both forms take, as entries of each form's option table
 * (tools/cli.h): T is the form's struct, m its train_args member, h the
 * entry's --help text (NULL: not listed) where the forms describe it
 * differently.  Names, kinds, ranges and the descriptions the forms share
 * are written here once, so an option means the same in both forms. */
#define TRAIN_OPT_LOG(T, m)                                 \
    {"log", 0, CLI_STR, CLI_FIELD(T, m.log), .arg = "FILE", \
     .help = "also write the epoch lines as CSV (rewritten after each epoch)"}
#define TRAIN_OPT_DATA(T, m)                                 \
    {"data", 0, CLI_STR, CLI_FIELD(T, m.data), .arg = "DIR", \
     .help = "folder with the Fashion-MNIST IDX files (default {})"}
#define TRAIN_OPT_CHECKPOINT(T, m, h) \
    {"checkpoint", 0, CLI_STR, CLI_FIELD(T, m.ckpt), .arg = "FILE", .help = h}
#define TRAIN_OPT_RESUME(T, m, h) {"resume", 0, CLI_STR, CLI_FIELD(T, m.resume), .arg = "FILE", .help = h}
#define TRAIN_OPT_SAVE_WEIGHTS(T, m)                                     \
    {"save-weights", 0, CLI_STR, CLI_FIELD(T, m.weights), .arg = "FILE", \
     .help = "write the trained weights (cleave-weights format)"}
#define TRAIN_OPT_CHECKPOINT_EVERY(T, m, h) \
    {"checkpoint-every", 0, CLI_INT, CLI_FIELD(T, m.every), 1, INT64_MAX, .arg = "N", .help = h}
#define TRAIN_OPT_LIMIT(T, m)                                              \
    {"limit", 0, CLI_INT, CLI_FIELD(T, m.limit), 1, INT64_MAX, .arg = "N", \
     .help = "use only the first N training samples"}
#define TRAIN_OPT_SYNTHETIC(T, m)                                                 \
    {"synthetic", 0, CLI_INT, CLI_FIELD(T, m.synthetic), 4, 10000000, .arg = "N", \
     .help = "train on N synthetic samples instead (N/4 test samples)"}
/* the seed is a uint64_t, read as an int64_t in [0, INT64_MAX]: the same bits */
#define TRAIN_OPT_SEED(T, m)                                                 \
    {"seed", 0, CLI_INT, CLI_FIELD(T, m.opt.seed), 0, INT64_MAX, .arg = "S", \
     .help = "seed of weights, dropout and shuffling (default {})"}
#define TRAIN_OPT_LR(T, m)                                                         \
    {"lr", 0, CLI_NUM, CLI_FIELD(T, m.opt.lr), .lo = 1e-12, .hi = 100, .arg = "X", \
     .help = "learning rate (default {})"}
#define TRAIN_OPT_MOMENTUM(T, m, h)                                                              \
    {"momentum", 0, CLI_NUM, CLI_FIELD(T, m.opt.momentum), .lo = 0, .hi = 0.999999,             \
     .given = CLI_AT(T, m.momentum_set), .arg = "M", .help = h}
#define TRAIN_OPT_WEIGHT_DECAY(T, m)                                                             \
    {"weight-decay", 0, CLI_NUM, CLI_FIELD(T, m.opt.weight_decay), .lo = 0, .hi = 1, .arg = "W", \
     .help = "L2 weight decay on conv/linear weights (default {})"}
/* the words in exec_lr_schedule's order: the index is the value */
#define TRAIN_OPT_LR_SCHEDULE(T, m, h) \
    {"lr-schedule", 0, CLI_ENUM, CLI_FIELD(T, m.opt.schedule), .words = "constant|cosine", .arg = "S", .help = h}
#define TRAIN_OPT_SCHEDULE(T, m) {"schedule", 0, CLI_STR, CLI_FIELD(T, m.schedule), .help = NULL}

/* Print --help of a train form: usage, then s's options with the defaults
 * the executor trains with and the data folder named.  defaults is the
 * form's struct (zero but for these), a the train_args inside it. */
void train_args_help(const cli_spec *s, void *defaults, train_args *a, const char *usage);

/* The checks across options (--synthetic vs --data, --checkpoint-every
 * without --checkpoint, the refused --schedule): 0 or the usage-error
 * status. */
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

/* May a run of kind ("sequential" or "pipelined") with identity ids[0..n)
 * resume checkpoint c, read from path?  0, or the input error naming
 * what differs. */
int train_args_resume_check(const exec_ckpt *c, const char *kind, const char *path,
                            const exec_ckpt_id *ids, int n, cl_err *e);

/* "cosine" or "constant". */
const char *train_args_schedule_name(exec_lr_schedule s);

/* The table both forms print: header, then one line per epoch. */
void train_args_print_header(void);
void train_args_print_epoch(const exec_epoch *h);

/* The CSV log of epochs h[0..n), rewritten whole (atomically) after each
 * epoch so that it is never partial. */
int train_args_write_log(const char *path, const exec_epoch *h, int n, cl_err *e);

#endif
