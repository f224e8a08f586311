/* progress.h - a progress bar for long loops, and a Ctrl-C that stops them
 * cleanly (prefix prog_).
 *
 * The bar goes to stderr and only when stderr is a terminal; otherwise
 * nothing at all is written, so logs and pipes stay clean.  It is redrawn
 * in place ("\r") at most about ten times a second and erased by prog_end.
 *
 * Interruption: prog_catch_sigint installs a SIGINT handler that only sets
 * a flag (and restores the default action, so a second Ctrl-C kills at
 * once).  Long loops poll prog_interrupted() between work items, write
 * complete outputs for the items already done, and the command returns
 * PROG_EXIT_INTERRUPTED, the 128 + SIGINT status shells report for Ctrl-C.
 *
 * Test hook: with CLEAVE_TEST_INTERRUPT_AFTER=N in the environment,
 * prog_step raises SIGINT right after the N-th item, as if the user had
 * pressed Ctrl-C there.
 */
#ifndef CL_PROGRESS_H
#define CL_PROGRESS_H

#define PROG_EXIT_INTERRUPTED 130

typedef struct prog {
    char what[48];      /* what is being counted, e.g. "sweep"          */
    int total, done;    /* items                                        */
    int tty;            /* draw at all                                  */
    int interrupt_after;/* the test hook's N, 0 when unset              */
    double t0_s, last_s;/* monotonic clock at begin and at last draw    */
    int drawn;          /* a bar is on the screen                       */
} prog;

/* Start counting `total` items (draws an empty bar on a terminal). */
void prog_begin(prog *p, const char *what, int total);
/* One item finished; `label` (may be NULL) names the next or last item. */
void prog_step(prog *p, const char *label);
/* Erase the bar (nothing when none was drawn).  Safe to call twice. */
void prog_end(prog *p);

/* Install / remove the SIGINT flag handler; prog_catch_sigint also clears
 * the flag.  Pair them around the loop and the writing of its outputs. */
void prog_catch_sigint(void);
void prog_release_sigint(void);
/* 1 once SIGINT arrived since prog_catch_sigint. */
int prog_interrupted(void);

#endif
