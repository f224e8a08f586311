/* steady.h - is the host steady enough to measure on (prefix exec_steady)?
 *
 * Why: a guest's idle cores say nothing of the host.  On a shared cloud
 * host a vCPU's sibling hyperthread or the host's own jobs can slow the
 * guest's compute by a third for a millisecond at a time without any steal
 * time or load showing inside the guest (seen on an Intel guest: a fixed
 * FMA loop ran 14% slower than its fastest in one slice of ten, 35% in the
 * worst).  A benchmark that compares a prediction with a run then measures
 * those neighbours, not the model.  This probe times the same fixed work
 * many times on each of n threads at once (the way a pipelined run keeps
 * its cores busy) and reports how much slower the typical and the slow
 * slices ran than the fastest: near 0 on a steady host.
 */
#ifndef CL_EXEC_STEADY_H
#define CL_EXEC_STEADY_H

typedef struct exec_steady {
    int threads;      /* threads run at once                          */
    int slices;       /* slices timed, all threads together            */
    double slice_s;   /* the fastest slice, seconds                    */
    double slow50;    /* median slice time / fastest - 1               */
    double slow90;    /* 90th percentile slice time / fastest - 1      */
    double slow_max;  /* slowest slice / fastest - 1                   */
} exec_steady;

/* Slowdowns above this at the 90th percentile make a host unsteady: the
 * validation targets are 5% on the mean, so a host whose compute alone
 * wanders by more than that cannot show whether they are met. */
#define EXEC_STEADY_MAX_SLOW90 0.05

/* Time slices of a fixed register-only FMA loop (about 0.5 ms each, the
 * size of a small model's ops) on `threads` threads at once for about
 * `seconds`.  0 and *s filled, or -1 (no FMA on this CPU, or threads
 * could not start) with *s zeroed. */
int exec_steady_measure(double seconds, int threads, exec_steady *s);

/* 1 when s says the host is steady (slow90 <= EXEC_STEADY_MAX_SLOW90). */
int exec_steady_ok(const exec_steady *s);

#endif
