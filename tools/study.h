/* study.h - plan and simulate one model on many clusters (prefix study_):
 * the engine shared by `cleave sweep`, `cleave compare` and `cleave demo`.
 *
 * A study holds a model (and optionally a measured cleave profile of it)
 * and the planning settings.  study_run plans it on a cluster with
 * plan_search (planner/search.h), then replays the plan with the simulator
 * (sim_predict, sim/sim.h), whose figures are the ones reported: the same
 * numbers `cleave sim` prints for the saved plan.  Without a profile the
 * per-layer costs are derived by the roofline of the cluster's first device
 * type at every microbatch size the search may try, as `cleave plan` does.
 */
#ifndef CL_STUDY_H
#define CL_STUDY_H

#include <stdint.h>
#include <stdio.h>

#include "models/model.h"
#include "models/tfm_rank.h"
#include "planner/search.h"
#include "profiles/tfm_time.h"
#include "profiles/cluster.h"
#include "profiles/profile.h"
#include "sim/sim.h"
#include "base/progress.h"
#include "base/status.h"
#include "cli.h"

/* Links of a cluster built from flags when none are given: the figures
 * `cleave plan --devices` uses (10 GB/s and 10 us inside a node, as
 * PCIe-class links; 1.25 GB/s and 50 us between nodes, 10 Gb/s Ethernet). */
#define STUDY_DEF_INTRA_BPS 10e9
#define STUDY_DEF_INTRA_LAT 10e-6
#define STUDY_DEF_INTER_BPS 1.25e9
#define STUDY_DEF_INTER_LAT 50e-6

typedef struct study {
    model md;               /* owned */
    prof pf;                /* owned; a measured profile when have_prof   */
    int have_prof;
    int batch;              /* samples per iteration, >= 1                 */
    int microbatches;       /* 0: the planner chooses                      */
    plan_optim optimizer;
    plan_prec precision;    /* PREC_AUTO: from the model */
    int zero;               /* ZeRO stage */
    int replication;        /* 0: never replicate a stage                  */
    char profiled_on[CLUSTER_NAME_MAX]; /* device type of the profile ("" = its own) */
    plan_for framework;     /* --for: plan only what it runs (PLAN_FOR_ANY: anything) */
    /* --tensor, --sequence-parallel, --recompute, --attention: every
     * question is restated for one tensor-parallel rank (planner/tensor.h),
     * as `cleave plan` does for one (t, recomputation) */
    tfm_rank_opts tro;
    prof_attn attn;
    int per_rank;           /* 1: rank_md and each cluster's t-GPU groups are planned */
    model rank_md;          /* owned when per_rank                           */
    /* --tensor auto, --recompute auto: every point is the best of the
     * candidates study_cands lists, each a study_with (as `cleave plan`
     * searches them); tro then holds the fixed parts (tro.sp: asked for) */
    int t_auto, r_auto;
    int borrowed;           /* 1: md and pf are another study's (study_with) */
} study;

/* Load the model (and a cleave profile of it when prof_path is not NULL);
 * batch 0 means the profile's largest batch, else 64.  Other settings take
 * the planner's defaults (SGD, replication on).  Free with study_free. */
int study_load(study *s, const char *model_path, const char *prof_path, int batch, cl_err *e);
void study_free(study *s);

/* The (t, recomputation) questions a point of s asks: s->tro alone, or with
 * t_auto every t from 1 to max_t the model allows (tfm_rank_check: heads,
 * key/value groups, MLP width) and with r_auto every recomputation mode.
 * Sequence parallelism, when asked, goes to every t > 1.  Writes at most
 * cap into out; returns the count (at least 1 when s->tro is valid). */
int study_cands(const study *s, int max_t, tfm_rank_opts *out, int cap);
#define STUDY_MAX_CANDS (3 * 1024)
/* s restated for the candidate o (study_cands): a shallow copy sharing s's
 * model and profile, with o's per-rank model built when o restates the
 * question.  study_free releases only what it built. */
int study_with(const study *s, const tfm_rank_opts *o, study *out, cl_err *e);
/* Every candidate of s up to max_t, each as study_with builds it, into
 * *cs (allocated, *nc of them, possibly 0); free with study_cands_free
 * also after a failure. */
int study_cand_studies(const study *s, int max_t, study **cs, int *nc, cl_err *e);
void study_cands_free(study *cs, int nc);

typedef struct study_point {
    int planned;            /* res holds a plan (free with study_point_free) */
    int ok;                 /* planned and simulated: sim holds the results */
    char reason[1100];      /* when !ok: why (the planner's or simulator's line) */
    plan_result res;
    sim_result sim;
    double peak_mem_bytes;  /* highest simulated peak over the plan's devices */
    double headroom_bytes;  /* smallest capacity - peak over those devices    */
    double headroom;        /* the same as a fraction of that device's memory */
    int dev_used;           /* distinct devices the plan uses               */
} study_point;

/* Plan s->md on cluster c with schedule `kind` (a sched_kind, or -1 for the
 * planner's choice) and simulate the plan.  A point that cannot be done -
 * nothing fits in memory, the simulator refuses the plan - is CL_OK with
 * ok = 0 and the reason; only machine failures return an error.  Free the
 * point with study_point_free (also after a failure). */
int study_run(const study *s, const cluster *c, int kind, study_point *pt, cl_err *e);
/* The same, given the point planned on the first devices of c before (a
 * sweep's previous device count, same kind; NULL or not planned: none):
 * its plan is a candidate, and the planner does not search those devices
 * again (plan_request.floor), so the iteration time never rises. */
int study_run_after(const study *s, const cluster *c, int kind, const study_point *prev, study_point *pt,
                    cl_err *e);
void study_point_free(study_point *pt);

/* The best plan for s on c: every schedule in kinds[0..n_kinds-1] is
 * planned and simulated, with stage replication on and off (only off when
 * s->replication is 0), and the highest simulated throughput wins; ties go
 * to the smaller peak memory.  The planner ranks its candidates by closed
 * forms, which on slow links can favour a plan the simulator finds well
 * behind another, so the simulator decides here.  *best gets the winner
 * (ok = 0 with the first candidate's reason when none works; free it with
 * study_point_free).  pg (may be NULL) steps once per candidate; once
 * SIGINT has arrived the search stops before its next candidate with
 * *interrupted = 1 (a search whose candidates all ran is complete). */
int study_best(const study *s, const cluster *c, const int *kinds, int n_kinds, prog *pg,
               study_point *best, int *interrupted, cl_err *e);
/* One point for each candidate study cs[0..nc-1] (study_with) on c with
 * schedule kind, each planned after prev[i], that candidate's last planned
 * point (study_run_after; zeroed: none), which a newly planned point
 * replaces.  *win: the best of those planned now (study_better), -1 when
 * none is feasible, with the first candidate's reason in reason.  Only
 * machine failures return an error; the caller frees prev[0..nc-1]. */
int study_run_cands(const study *cs, int nc, const cluster *c, int kind, study_point *prev, int *win,
                    char *reason, size_t cap, cl_err *e);
/* Candidates study_best tries (for sizing a progress bar): its steps. */
int study_best_candidates(const study *s, int n_kinds);
/* 1 when point a beats b (the one rule of study_best and sweep's tensor
 * candidates): a is feasible and b is not, or a's simulated throughput is
 * higher, or equal with a smaller peak memory. */
int study_better(const study_point *a, const study_point *b);

/* The first n devices of c, in c's order (nodes left without devices are
 * dropped), named "<c.name>[0:n]"; free with cluster_free. */
int study_subcluster(const cluster *c, int n, cluster *out, cl_err *e);

/* "gpipe,1f1b,fbp" into sched_kind values (caller frees *kinds); an unknown
 * name is reported as a usage error of `cmd` and returns 2. */
int study_schedules(const char *cmd, const char *list, int **kinds, int *n);

/* The training-set size of the data set a model is shaped for, or 0 when
 * not known: 1,281,167 for ImageNet-1k (3x224x224 input, 1000 classes, the
 * ILSVRC-2012 training images), 60,000 for Fashion-MNIST (28x28 input, 10
 * classes).  *name is set to the data set's name ("" when unknown). */
int64_t study_dataset_size(const model *m, const char **name);

/* Write s as one CSV field: quoted (with "" for ") when it holds a comma,
 * quote or line break, else as is. */
void study_csv_field(FILE *f, const char *s);

/* Create folder `dir` and any missing parents (like mkdir -p); CL_EINPUT
 * naming the folder when that fails. */
int study_mkdir(const char *dir, cl_err *e);

/* "8 x A100-80GB" or "6 x V100-32GB + 2 x A100-80GB": the device types of c. */
void study_devices_str(const cluster *c, char *buf, size_t cap);

/* The options `cleave sweep` and `cleave compare` share, parsed one way. */
typedef struct study_args {
    const char *model, *profile, *profiled_on; /* --model, --profile, --profiled-on */
    const char *out_dir;    /* -o/--out DIR: <DIR>/<stem>.csv, .png, .svg    */
    const char *csv, *png, *svg, *title, *save_plans, *schedules;
    const char *framework;  /* --for, as given                              */
    int schedules_given;    /* --schedules given (else the command's default) */
    int64_t batch;          /* --batch (0: the study's default)             */
    int no_replication, quiet;
    const char *tensor;     /* --tensor T|auto (NULL: 1)                    */
    int64_t t;              /* T, or 0 for auto (study_args_check)           */
    int seq_par, recompute, attention; /* --sequence-parallel, --recompute (a tfm_recomp,
                               or STUDY_RECOMP_AUTO), --attention            */
    int grad_acc;           /* --grad-accumulation: 0 fused, 1 separate      */
    int precision;          /* the command's --precision (a plan_prec; 0:
                               auto), for what a separate accumulation moves */
    double max_seconds;     /* --max-seconds (when max_seconds_given)       */
    int max_seconds_given;
    FILE *msg;              /* the table and "wrote": stdout, or stderr when
                               --csv - gives stdout to the CSV              */
} study_args;

/* The shared options as entries of each command's option table
 * (tools/cli.h): T is the command's struct, m its study_args member, h the
 * entry's --help text (NULL: not listed).  Written here once, so an option
 * means the same in both commands. */
#define STUDY_OPT_OUT(T, m, h) {"out", 'o', CLI_STR, CLI_FIELD(T, m.out_dir), .arg = "DIR", .help = h}
#define STUDY_OPT_SAVE_PLANS(T, m, h) \
    {"save-plans", 0, CLI_STR, CLI_FIELD(T, m.save_plans), .arg = "D", .help = h}
#define STUDY_OPT_MAX_SECONDS(T, m, h)                                                      \
    {"max-seconds", 0, CLI_NUM, CLI_FIELD(T, m.max_seconds), .lo = 0, .hi = 1e7,           \
     .given = CLI_AT(T, m.max_seconds_given), .arg = "S", .help = h}
/* the rest, listed in the usage lines only */
#define STUDY_OPTS(T, m)                                                                   \
    {"model", 0, CLI_STR, CLI_FIELD(T, m.model), .help = NULL},                            \
    {"profile", 0, CLI_STR, CLI_FIELD(T, m.profile), .help = NULL},                        \
    {"profiled-on", 0, CLI_STR, CLI_FIELD(T, m.profiled_on), .help = NULL},                \
    {"csv", 0, CLI_STR, CLI_FIELD(T, m.csv), .help = NULL},                                \
    {"png", 0, CLI_STR, CLI_FIELD(T, m.png), .help = NULL},                                \
    {"svg", 0, CLI_STR, CLI_FIELD(T, m.svg), .help = NULL},                                \
    {"title", 0, CLI_STR, CLI_FIELD(T, m.title), .help = NULL},                            \
    {"schedules", 0, CLI_STR, CLI_FIELD(T, m.schedules), .given = CLI_AT(T, m.schedules_given),      \
     .help = NULL},                                                                        \
    {"for", 0, CLI_STR, CLI_FIELD(T, m.framework), .help = NULL},                          \
    {"batch", 0, CLI_INT, CLI_FIELD(T, m.batch), 1, 1 << 30, .help = NULL},                \
    {"no-replication", 0, CLI_FLAG, CLI_FIELD(T, m.no_replication), .help = NULL},         \
    {"tensor", 0, CLI_STR, CLI_FIELD(T, m.tensor), .help = NULL},                           \
    {"sequence-parallel", 0, CLI_FLAG, CLI_FIELD(T, m.seq_par), .help = NULL},              \
    {"recompute", 0, CLI_ENUM, CLI_FIELD(T, m.recompute), .words = "none|selective|full|auto", .help = NULL}, \
    {"attention", 0, CLI_ENUM, CLI_FIELD(T, m.attention), .words = "unfused|fused", .help = NULL}, \
    {"grad-accumulation", 0, CLI_ENUM, CLI_FIELD(T, m.grad_acc), .words = "fused|separate", .help = NULL}, \
    {"quiet", 0, CLI_FLAG, CLI_FIELD(T, m.quiet), .help = NULL}

#define STUDY_RECOMP_AUTO 3 /* --recompute auto: the words' fourth */

/* The checks across shared options: --model given, -o vs --csv/--png/--svg,
 * --profiled-on without --profile, --for a framework, --tensor T|auto; and
 * the folders' trailing "/" dropped.  0 or the usage-error status. */
int study_args_check(study_args *a, const char *cmd);
/* Start the command's wall-clock budget (--max-seconds, budget.h) and load
 * the study the options describe (study_load, then --profiled-on,
 * --no-replication and --for; CL_EINPUT naming the model when --for's
 * framework cannot take it). */
int study_args_load(const study_args *a, study *s, cl_err *e);
/* The schedules of --schedules (study_schedules) as --for allows: a
 * schedule given that the framework does not run is a usage error (status
 * 2, with a hint); the command's default list keeps those it runs. */
int study_args_schedules(const study_args *a, const char *cmd, int **kinds, int *n);
/* Keep, in order, the kinds[0..n-1] framework f runs (plan_for_runs);
 * returns how many; *refused: the first kind left out, -1 when none. */
int study_kinds_for(plan_for f, int *kinds, int n, int *refused);
/* The output paths (empty when not wanted): <out_dir>/<stem>.{csv,png,svg}
 * (the folder is created) or --csv/--png/--svg; and --save-plans created. */
int study_args_outputs(const study_args *a, const char *stem, char *csv, char *png, char *svg,
                       size_t cap, cl_err *e);

#endif
