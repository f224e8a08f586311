/* test_proc.h - child processes for the reliability suites (checkpoint,
 * ckpt_pipe, mpi_death): start cleave (or mpirun running it) with stdout
 * and stderr in files, poll for a condition while it runs, send signals,
 * find an MPI rank's process, reap with the exit status, read where the
 * checkpoint it left says it was. */
#ifndef CL_TEST_PROC_H
#define CL_TEST_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* Monotonic seconds. */
double tproc_now(void);

/* Start `cleave args...` (args NULL-terminated; the binary from CLEAVE_BIN,
 * default build/cleave), stdout and stderr to dir/out and dir/err (removed
 * first), stdin /dev/null; returns its pid. */
pid_t tproc_cleave(char **args, const char *dir);

/* Start `mpirun -np np <loopback options> cleave args...` the way
 * tp_mpirun does (root allowed, LSan suppressions under ASan), in its own
 * process group; returns mpirun's pid. */
pid_t tproc_mpirun(int np, char **args, const char *dir);

/* Children started from now on stop themselves (SIGSTOP) right after
 * minibatch step or iteration n, any checkpoint due there written
 * (CLEAVE_TEST_PAUSE_AT, exec_ckpt_test_pause); n < 0: they do not. */
void tproc_pause_at(int64_t n);

/* Wait until pid (any process, an MPI rank too, so not waitpid) is
 * stopped: 0, or -1 when it ended first or TPROC_HANG_S passed.  That is a
 * guard against a hang, far beyond what any run here takes even under the
 * sanitizers on a loaded machine, not a speed target. */
#define TPROC_HANG_S 900
int tproc_wait_stopped(pid_t pid);

/* Start `cleave args...` in dir (as tproc_cleave) pausing itself after
 * step or iteration n, wait until it stopped there, then send it sig (and
 * SIGCONT, so a signal it handles is handled at once): its exit status as
 * tproc_reap gives it; *stopped says whether it did stop at n first. */
int tproc_signal_at(char **args, const char *dir, int64_t n, int sig, int *stopped);

/* Wait for pid; its exit status, or 128 + the signal that ended it. */
int tproc_reap(pid_t pid);

/* Has pid ended (a zombie not reaped yet counts)? */
int tproc_ended(pid_t pid);

/* The pid of MPI rank `rank` among mpirun's children, or -1. */
pid_t tproc_rank_pid(pid_t mpirun, int rank);

/* Optimiser steps recorded in a sequential checkpoint (train.position),
 * or -1 when it is absent or unreadable (it may be replaced while we read:
 * rename is atomic, so a read sees the old or the new file whole). */
int64_t tproc_ckpt_step(const char *path);
/* Iterations recorded in a pipelined checkpoint (run.position), or -1. */
int64_t tproc_ckpt_iters(const char *path);

/* What a child started in dir wrote so far to its stdout (which "out") or
 * stderr ("err"); caller frees; NULL when there is no such file. */
char *tproc_output(const char *dir, const char *which);

/* Wait until the stdout of pid, started in dir, holds text, or pid ended,
 * or TPROC_HANG_S passed (a guard against hangs, not a speed target). */
void tproc_wait_output(pid_t pid, const char *dir, const char *text);

/* The file's text (caller frees), or NULL. */
char *tproc_slurp(const char *path, size_t *len);

/* Do two files hold the same bytes (and are not empty)? */
int tproc_same_file(const char *a, const char *b);

/* Lines (newlines) in s. */
int tproc_lines(const char *s);

#endif
