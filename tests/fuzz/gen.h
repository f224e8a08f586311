/* gen.h - plans, models, profiles and clusters built from fuzz bytes, and
 * the properties a simulation of any of them must have (docs/testing.md,
 * "Plan search and simulation").
 *
 * The search and simulation targets (fuzz_search.c, fuzz_sim.c) decode
 * their input with these instead of parsing it: every byte string makes a
 * well-formed request, so libFuzzer spends its time inside the planner and
 * the simulator rather than in the loaders (fuzzed on their own).  The
 * property suite (tests/test_sim_random.c) feeds the same decoder bytes from
 * a seeded generator.  Bytes past the end of the input read as 0, so short
 * inputs make small problems.
 */
#ifndef CL_FUZZ_GEN_H
#define CL_FUZZ_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "core/plan.h"
#include "core/schedule.h"
#include "sim/sim.h"

typedef struct gen {
    const uint8_t *p;
    size_t n, at;
} gen;

/* A value in [0, n) from the next one, two or four bytes. */
unsigned gen_u(gen *g, unsigned n);
/* 0 one time in 16, else lo .. hi spread evenly on a log scale (lo > 0). */
double gen_real(gen *g, double lo, double hi);
/* Links within and between nodes, one draw per field in reading order
 * (intra bandwidth, latency, inter bandwidth, latency): bandwidths from bw
 * over 1e6..1e12 and 1e5..1e11 B/s, latencies from gen_real over
 * 1e-7..1e-3 and 1e-6..1e-2 s. */
void gen_links(gen *g, double (*bw)(gen *, double, double), cluster_link *intra, cluster_link *inter);

/* What a simulation replays: the schedule kind, microbatches, iterations,
 * communication, and an event budget (0: the bound gen_sim_check derives). */
typedef struct gen_run {
    sched_kind kind;
    int micro, iters, comm_off;
    uint64_t max_events;
} gen_run;

/* A random plan a schedule can be built for: 1-5 pipeline positions (x 1-3
 * chunks for interleaved), 1-4 replicas each (one plan in 8 is wide: 1-3
 * positions of 1-24 replicas; async kinds: the first stage's count or 1,
 * and microbatches a multiple of it), devices shuffled over nodes of 1-8,
 * stage times, sizes and links from gen_real; last the model's element
 * type, the framework, the ZeRO stage and the gradient reduction's element
 * size (0, 2 or 4), which set the all-reduce's two halves.  The embedded
 * model is otherwise empty (the simulator reads only stages, cluster and
 * those).  Free with
 * gen_plan_free. */
void gen_plan(gen *g, plan *p, gen_run *run);
void gen_plan_free(plan *p);

/* Build run's schedule for p, simulate it with comm as run says and, when
 * communication is on, again without; returns the simulator's status, the
 * result in *r when out is not NULL (caller frees).  *broken is NULL, or
 * names the property the run broke:
 * - the run ends within the event budget: 2 events per compute op and per
 *   transfer (pipeline and ring steps, counted from the op lists) + 16;
 * - bytes sent per device and per run equal the SEND payloads plus
 *   what the all-reduce of every gradient sends (communication on), each
 *   half of its own bytes (the reduce-scatter R, the gradients in the
 *   reduction's element size; the all-gather G, the gradients again or
 *   under a ZeRO split the updated weights): a flat ring (r - 1) / r of
 *   each, a hierarchical one (k replicas on each of n nodes)
 *   (k - 1) / k + (n - 1) / (n k) of each; an ALLREDUCE op carries R;
 * - the makespan is at least every device's compute (summed from its ops),
 *   and at least the makespan without communication;
 * - every device's busy + idle + comm-wait is the iteration time;
 * - results are finite.
 * `broken` points to a static buffer. */
int gen_sim_check(const plan *p, const gen_run *run, sim_result *out, const char **broken,
                  cl_err *e);

#endif
