/* checkpoint.h - training checkpoints: a checksummed file of named sections,
 * the identity checks that make a resume exact or refused, the weights file,
 * and the stop-at-a-boundary signal handling.
 *
 * File (docs/testing.md, "Reliability"):
 *     "cleave-checkpoint <version> <payload bytes> <crc32 of the payload, 8 hex>\n"
 *     payload: sections, each  u32 name length, name, u64 data length, data
 * (integers little-endian).  A reader refuses, with one line naming the file,
 * anything that does not start with the tag ("not a cleave checkpoint"), a
 * version it does not know, a payload shorter or longer than the header says
 * (truncated), a checksum that differs (corrupt), or sections that do not
 * parse.  Written atomically (base/fileio.h), so a kill while writing leaves
 * the previous checkpoint whole.
 *
 * A trainer stores its state as sections (exec_trainer_save in train.h,
 * the pipelined runner per worker); this module knows the shared pieces: an
 * exec_net with its optimiser state (parameters, batchnorm running
 * statistics, dropout streams, momentum buffers), a GSL stream, and the
 * identity (what kind of run, the model's name and a hash of its JSON, the
 * options that change the arithmetic, a fingerprint of the training data)
 * that a resume must match exactly.  Identity sections are "id.<key>"
 * strings; a mismatch names the key and both values.
 */
#ifndef CL_EXEC_CHECKPOINT_H
#define CL_EXEC_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "models/model.h"
#include "base/status.h"
#include "exec/nn/data.h"
#include "exec/nn/net.h"
#include "exec/nn/optim.h"

#define EXEC_CKPT_TAG "cleave-checkpoint"
#define EXEC_CKPT_VERSION 1

/* ------------------------------------------------------------ container -- */

typedef struct exec_ckpt exec_ckpt; /* an ordered set of named sections */

/* An empty checkpoint to fill (caller frees with exec_ckpt_free). */
exec_ckpt *exec_ckpt_new(void);
void exec_ckpt_free(exec_ckpt *c);

/* Add a section (data copied; a name added twice is a bug).  Names are
 * short ASCII ("s0.params", "train.perm"). */
void exec_ckpt_put(exec_ckpt *c, const char *name, const void *data, size_t len);
void exec_ckpt_put_str(exec_ckpt *c, const char *name, const char *s);
void exec_ckpt_put_i64(exec_ckpt *c, const char *name, const int64_t *v, size_t n);
void exec_ckpt_put_f64(exec_ckpt *c, const char *name, const double *v, size_t n);

/* Serialise into one buffer (caller frees) / write atomically to path. */
unsigned char *exec_ckpt_encode(const exec_ckpt *c, size_t *len);
int exec_ckpt_write(const exec_ckpt *c, const char *path, cl_err *e);

/* Parse a file's bytes / read a file; CL_EINPUT with one line naming `file`
 * for anything but a whole checkpoint of a known version. */
int exec_ckpt_decode(exec_ckpt **out, const unsigned char *buf, size_t len, const char *file,
                     cl_err *e);
int exec_ckpt_read(exec_ckpt **out, const char *path, cl_err *e);

/* Copy every section of src into dst (names must not clash). */
void exec_ckpt_merge(exec_ckpt *dst, const exec_ckpt *src);

/* The file a checkpoint was read from ("" for a new one). */
const char *exec_ckpt_file(const exec_ckpt *c);

/* The number of sections, and the name of section i (0 <= i < count, in
 * the order they were added or read; owned by c). */
int exec_ckpt_count(const exec_ckpt *c);
const char *exec_ckpt_name(const exec_ckpt *c, int i);

/* A section's bytes (owned by c) or NULL when absent. */
const void *exec_ckpt_find(const exec_ckpt *c, const char *name, size_t *len);
/* Copy a section of exactly len bytes into dst; CL_EINPUT naming the file
 * and section when it is missing or of another size. */
int exec_ckpt_get(const exec_ckpt *c, const char *name, void *dst, size_t len, cl_err *e);

/* ------------------------------------------------------------- identity -- */

/* 64-bit FNV-1a of n bytes; of model_to_json(m) printed unformatted (equal
 * for equal models whatever the file's layout). */
uint64_t exec_ckpt_hash(const void *p, size_t n);
uint64_t exec_ckpt_model_hash(const model *m);
/* "n=<samples> dim=<elems> classes=<c> crc=<crc32 of x and y, hex>". */
void exec_ckpt_data_print(const exec_data *d, char *buf, size_t cap);

/* Identity entries: key and the value this run has (formatted so equal
 * settings print equal: integers as %lld, reals as %.17g). */
typedef struct exec_ckpt_id {
    const char *key;       /* "model", "lr", "batch", ...                   */
    const char *was;       /* the key checkpoints of older versions store
                              it under (an option renamed), or NULL        */
    char val[160];
} exec_ckpt_id;

/* Fill an id: a string, an integer, a real printed in the fewest digits
 * that read back as the same double ("0.03", not 0.029999999999999999). */
exec_ckpt_id exec_ckpt_id_str(const char *key, const char *v);
exec_ckpt_id exec_ckpt_id_int(const char *key, int64_t v);
exec_ckpt_id exec_ckpt_id_real(const char *key, double v);

/* Store ids as "id.<key>" sections. */
void exec_ckpt_put_ids(exec_ckpt *c, const exec_ckpt_id *ids, int n);
/* Check that c holds each id (under its key, or else under `was`) with the
 * same value; CL_EINPUT on the first
 * difference: "<file>: the checkpoint was written with lr 0.02, this run has
 * lr 0.05 (hint: resume with the same model and options, or start afresh
 * without --resume)". */
int exec_ckpt_check_ids(const exec_ckpt *c, const exec_ckpt_id *ids, int n, cl_err *e);

/* ------------------------------------------------------- shared pieces -- */

/* A GSL stream's complete state (type name and state bytes). */
void exec_ckpt_put_rng(exec_ckpt *c, const char *name, const gsl_rng *r);
int exec_ckpt_get_rng(const exec_ckpt *c, const char *name, gsl_rng *r, cl_err *e);

/* A stage's state under `prefix`: parameter block (padding included),
 * running statistics, dropout streams and, when sgd is not NULL, its
 * momentum buffers.  get restores them into a net built for the same
 * layers; sizes that differ are CL_EINPUT. */
void exec_ckpt_put_net(exec_ckpt *c, const char *prefix, exec_net *n, const exec_sgd *sgd);
/* The same for layers [first, last) of m split over `size` tensor-parallel
 * ranks (shards[r], sgd[r] rank r's, net.h): the sections of the whole
 * stage, as exec_ckpt_put_net writes them for an unsplit net (so any degree
 * reads them back): the shards' parameters and momentum gathered
 * (exec_net_tp_move), the running statistics and dropout streams of the
 * layers outside the split rank 0's (the same on every rank).  get splits
 * them into every rank.  Errors as exec_ckpt_get_net. */
void exec_ckpt_put_net_tp(exec_ckpt *c, const char *prefix, const model *m, int first, int last,
                          exec_net *const *shards, exec_sgd *const *sgd, int size);
int exec_ckpt_get_net_tp(const exec_ckpt *c, const char *prefix, const model *m, int first,
                         int last, exec_net *const *shards, exec_sgd *const *sgd, int size,
                         cl_err *e);
int exec_ckpt_get_net(const exec_ckpt *c, const char *prefix, exec_net *n, exec_sgd *sgd,
                      cl_err *e);

/* --------------------------------------------------------------- weights -- */

/* Write the parameters of nets[0..n_nets) (stages in model order) as a
 * weights file, the format of exec_pipe_save_weights (pipeline.h): the line
 * "cleave-weights 1 <tensors>\n", then per tensor "<name> <n>\n" and n
 * little-endian float32.  Atomic. */
int exec_ckpt_save_weights(exec_net *const *nets, int n_nets, const char *path, cl_err *e);

/* --------------------------------------------------------------- signals -- */

/* SIGINT and SIGTERM set a flag instead of killing the process (each
 * handler resets itself, so a second signal kills as usual); training
 * loops poll exec_ckpt_signal() at iteration boundaries, write a
 * checkpoint and stop.  restore puts the previous handlers back and clears
 * the flag. */
void exec_ckpt_signals_install(void);
void exec_ckpt_signals_restore(void);
/* The signal received since install (SIGINT, SIGTERM), or 0. */
int exec_ckpt_signal(void);
/* "SIGINT", "SIGTERM", or "signal N". */
const char *exec_ckpt_signal_name(int sig);

/* Test hook: when the environment holds CLEAVE_TEST_PAUSE_AT=N, the process
 * stops itself (SIGSTOP) once it has finished minibatch step N (sequential)
 * or iteration N (pipelined, worker or rank 0), any checkpoint due there
 * written.  The reliability tests then kill or signal it at that known
 * point instead of racing a running process; a signal sent during the
 * pause is seen at the next boundary.  Does nothing otherwise. */
void exec_ckpt_test_pause(int64_t pos);

#endif
