/* cmd_train_plan.c - `cleave train --plan plan.json`: pipelined training of a
 * plan's stages on threads or MPI ranks (exec/run/pipeline.h).  cmd_train hands
 * over here when it sees --plan. */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "exec/ckpt/checkpoint.h"
#include "exec/nn/data.h"
#include "exec/nn/gemm.h"
#include "exec/probe/linkprof.h"
#include "exec/run/pipeline.h"
#include "cli.h"
#include "base/fileio.h"
#include "base/measure.h"
#include "train_args.h"

typedef struct train_plan_cmd {
    train_args a;           /* the options sequential train shares */
    exec_pipe_opts o;
    const char *plan, *trace, *model, *batch;
    int64_t epochs, iterations;
    int backend;            /* exec_pipe_backend */
    int tensor_over;        /* 0 threads, 1 mpi (exec_pipe_opts.tensor_mpi) */
} train_plan_cmd;

#define TP train_plan_cmd
static const cli_opt train_plan_opts[] = {
    {"plan", 0, CLI_STR, CLI_FIELD(TP, plan), .arg = "FILE",
     .help = "plan file (cleave plan); its model and schedule are used"},
    {"epochs", 0, CLI_INT, CLI_FIELD(TP, epochs), 1, 100000, .arg = "N",
     .help = "epochs (default 1); each is floor(samples / batch) iterations"},
    {"iterations", 0, CLI_INT, CLI_FIELD(TP, iterations), 1, 100000000, .arg = "N",
     .help = "run N iterations instead (one schedule, then one evaluation)"},
    {"backend", 0, CLI_ENUM, CLI_FIELD(TP, backend), .words = "threads|mpi", .arg = "B",
     .help = "threads (default: one process, workers pinned to cores)\n"
             "or mpi (one rank per worker; outside an MPI job cleave\n"
             "starts mpirun -np workers itself, as root too)"},
    {"tensor-over", 0, CLI_ENUM, CLI_FIELD(TP, tensor_over), .words = "threads|mpi", .arg = "H",
     .help = "a tensor-parallel plan's ranks: threads (default: a crew\n"
             "of threads per worker) or mpi (with --backend mpi: one\n"
             "rank per tensor rank, workers x tensor ranks in all)"},
    {"trace", 0, CLI_STR, CLI_FIELD(TP, trace), .arg = "FILE",
     .help = "write the measured timeline as a Chrome trace"},
    TRAIN_OPT_SAVE_WEIGHTS(TP, a),
    TRAIN_OPT_LR(TP, a),
    TRAIN_OPT_LR_SCHEDULE(TP, a, "constant or cosine (default cosine over the whole run)"),
    TRAIN_OPT_MOMENTUM(TP, a, "SGD momentum (default {} when the plan's optimizer is\n"
                              "momentum, 0 when it is sgd)"),
    TRAIN_OPT_WEIGHT_DECAY(TP, a),
    TRAIN_OPT_SEED(TP, a),
    TRAIN_OPT_LIMIT(TP, a),
    TRAIN_OPT_DATA(TP, a),
    TRAIN_OPT_SYNTHETIC(TP, a),
    TRAIN_OPT_LOG(TP, a),
    TRAIN_OPT_CHECKPOINT(TP, a, "write a checkpoint at each epoch end and every\n"
                                "--checkpoint-every N iterations (flushing schedules only);\n"
                                "threads: SIGINT/SIGTERM stop at an iteration end after one"),
    TRAIN_OPT_CHECKPOINT_EVERY(TP, a, NULL),
    TRAIN_OPT_RESUME(TP, a, "continue from a checkpoint, bit for bit (same plan, data and\n"
                            "options; threads and mpi may differ)"),
    {"stall-seconds", 0, CLI_NUM, CLI_FIELD(TP, o.stall_s), .lo = 0.001, .hi = 1e9, .arg = "S",
     .help = "a worker blocked S seconds fails the run (default 300)"},
    /* the plan gives these: refused with a message of their own */
    {"model", 0, CLI_STR, CLI_FIELD(TP, model), .help = NULL},
    {"batch", 0, CLI_STR, CLI_FIELD(TP, batch), .help = NULL},
    TRAIN_OPT_SCHEDULE(TP, a),
};
#undef TP
static const cli_spec train_plan_spec = {"train", train_plan_opts, CLI_N(train_plan_opts), .help_col = 23};

static void help(void)
{
    train_plan_cmd d = {0};
    train_args_help(&train_plan_spec, &d, &d.a,
                    "usage: cleave train --plan FILE [--backend threads|mpi] [--tensor-over threads|mpi] [options]\n"
                    "       mpirun -np N cleave train --plan FILE --backend mpi [options]\n\n"
                    "Train the plan's model pipelined: one worker per device of the plan, each\n"
                    "running its stages' op lists (the schedule the simulator replays), passing\n"
                    "activations and gradients through bounded channels.  One line per epoch:\n"
                    "mean training loss, training and test accuracy, samples/s, elapsed seconds.\n\n");
}

typedef struct ctx {
    int quiet;              /* an MPI rank other than 0 */
    const char *log_path;
    exec_epoch *hist;
    int n, cap;
    cl_err log_err;
    int bar;                /* draw a progress bar (stderr is a terminal) */
    int epochs;             /* segments of the run: epochs, or 1 for --iterations */
    int drawn;              /* the last percentage drawn, -1 none */
    double drawn_s;         /* when (cl_now_s) */
} ctx;

/* The progress bar of an epoch, redrawn when its percentage changes and a
 * tenth of a second has passed (as base/progress.h: a few writes a second,
 * whatever the iteration time), erased at the epoch's end before its line
 * is printed. */
static void on_iteration(void *p, int64_t done, int64_t total)
{
    ctx *c = p;
    if (!c->bar || c->quiet || total <= 0) return;
    int64_t per = total / c->epochs > 0 ? total / c->epochs : total;
    int64_t ep = (done - 1) / per, in = done - ep * per;
    int pct = (int)(100 * in / per);
    if (in >= per) {
        fputs("\r\033[K", stderr);
        c->drawn = -1;
    } else if (pct != c->drawn && (c->drawn < 0 || cl_now_s() - c->drawn_s >= 0.1)) {
        const int width = 30;
        char s[32];
        for (int i = 0; i < width; i++) s[i] = i < pct * width / 100 ? '#' : '.';
        s[width] = 0;
        fprintf(stderr, "\r  epoch %lld/%d [%s] %3d%%  iteration %lld/%lld", (long long)ep + 1, c->epochs,
                s, pct, (long long)in, (long long)per);
        c->drawn = pct;
        c->drawn_s = cl_now_s();
    }
    fflush(stderr);
}

static void on_epoch(void *p, const exec_epoch *h)
{
    ctx *c = p;
    if (c->quiet) return;
    train_args_print_epoch(h);
    fflush(stdout);
    if (c->n == c->cap) {
        c->cap = c->cap * 2 + 8;
        c->hist = cl_realloc(c->hist, (size_t)c->cap * sizeof *c->hist);
    }
    c->hist[c->n++] = *h;
    if (c->log_path && !c->log_err.code) train_args_write_log(c->log_path, c->hist, c->n, &c->log_err);
}

/* Report e on rank 0 only (bad input: every rank fails the same way); a
 * runtime failure is reported by every rank that has one, naming the rank. */
static int report(const ctx *c, const cl_err *e)
{
    if (c->quiet && e->code != CL_ERUN) return e->code ? e->code : 1;
    return cli_report(e);
}

/* Before MPI is up: is this an Open MPI rank other than 0? */
static int env_rank_nonzero(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    return r && strcmp(r, "0") != 0;
}

int cmd_train_plan(int argc, char **argv)
{
    const char *cmd = "train";
    int quiet_env = env_rank_nonzero(), rc;
    train_plan_cmd t = {0};
    exec_pipe_defaults(&t.o);
    train_args_defaults(&t.a);
    t.backend = t.o.backend;
    /* rank 0 reports usage errors */
    if ((rc = cli_parse(&train_plan_spec, argc, argv, &t, quiet_env)) == CLI_HELP) help();
    if (rc) return rc == CLI_HELP ? 0 : rc;
    for (int i = 0; i < 2; i++) {
        const char *drop = i ? "--batch" : "--model";
        if (i ? t.batch != NULL : t.model != NULL)
            return cli_usage_error(cmd, "%s: the plan gives the model and the batch; drop %s", drop, drop);
    }
    const char *plan_path = t.plan, *trace = t.trace;
    exec_pipe_opts o = t.o;
    o.backend = (exec_pipe_backend)t.backend;
    train_args a = t.a;
    int64_t epochs = t.epochs, iterations = t.iterations;
    if (!plan_path) return cli_usage_error(cmd, "--plan is required");
    if (t.tensor_over && o.backend != EXEC_PIPE_MPI)
        return cli_usage_error(cmd, "--tensor-over mpi runs tensor ranks as MPI processes; add --backend mpi");
    o.tensor_mpi = t.tensor_over;
    if (epochs && iterations) return cli_usage_error(cmd, "--epochs and --iterations exclude each other");
    if ((rc = train_args_check(&a, cmd))) return rc;
    o.epochs = epochs ? (int)epochs : 1;
    o.iterations = (int)iterations;
    o.file = plan_path;
    o.trace_path = trace;
    o.keep_params = a.weights != NULL;
    o.lr = a.opt.lr;
    o.momentum = a.opt.momentum;
    o.weight_decay = a.opt.weight_decay;
    o.lr_schedule = a.opt.schedule;
    o.seed = a.opt.seed;

    cl_err e = {0};
    ctx c = {.quiet = quiet_env, .log_path = a.log};
    plan p;
    int mpi = o.backend == EXEC_PIPE_MPI;
    if (plan_load(&p, plan_path, &e)) {
        const int status = report(&c, &e); /* before finalising, as below */
        if (mpi) exec_pipe_mpi_finalize();
        return status;
    }
    exec_data train = {0}, test = {0};
    exec_pipe_result res = {0};
    exec_ckpt *resume = NULL;
    exec_ckpt_id ids[3 + TRAIN_ARGS_IDS];
    int n_ids = 0;
    const model *m = &p.model;
    const char *source;
    int workers = exec_pipe_workers(&p, plan_path, &e), rank = 0, size = 1;
    if (workers < 0) {
        rc = e.code;
        goto done;
    }
    const int tensor = plan_tensor(&p);
    /* processes: one per worker, or one per tensor rank of each */
    const int ranks = o.tensor_mpi && tensor > 1 ? workers * tensor : workers;
    if (mpi && !exec_link_in_mpi_job()) {
        /* not started by mpirun: start it, one rank per worker (as validate
         * and profile --links do; --allow-run-as-root when root) */
        plan_free(&p);
        return exec_link_mpirun(ranks, "train", argc, argv);
    }
    if (mpi) { /* the world must match before anything is loaded */
        if ((rc = exec_pipe_mpi_world(&rank, &size, &e))) goto done;
        c.quiet = rank != 0;
        if ((rc = exec_pipe_mpi_size_check(size, workers, ranks / workers, "train", plan_path, &e))) goto done;
    }
    if ((a.ckpt || a.resume) && (rc = exec_pipe_ckpt_check(&p, plan_path, &e))) goto done;
    if (!a.momentum_set && p.optimizer == OPTIM_SGD) a.opt.momentum = o.momentum = 0.0;
    double mean, sd;
    if ((rc = train_args_data(&a, m, plan_path, &train, &test, &source, &mean, &sd, &e)) ||
        (!c.quiet && (rc = train_args_probe(&a, &e))))
        goto done;
    if (a.resume && (rc = exec_ckpt_read(&resume, a.resume, &e))) goto done;
    if (a.ckpt || resume) { /* what a resume must match */
        char phash[32];
        cJSON *pj = plan_to_json(&p);
        char *ptext = cJSON_PrintUnformatted(pj);
        cJSON_Delete(pj);
        snprintf(phash, sizeof phash, "%016llx",
                 (unsigned long long)exec_ckpt_hash(ptext, ptext ? strlen(ptext) : 0));
        free(ptext);
        ids[n_ids++] = exec_ckpt_id_int("--epochs", iterations ? 0 : o.epochs);
        ids[n_ids++] = exec_ckpt_id_int("--iterations", o.iterations);
        ids[n_ids++] = exec_ckpt_id_str("plan-hash", phash);
        n_ids += train_args_ids(&a, m, &train, ids + n_ids);
        o.ids = ids;
        o.n_ids = n_ids;
        o.ckpt_path = a.ckpt;
        o.ckpt_every = a.every;
    }
    if (resume) {
        if ((rc = train_args_resume_check(resume, "pipelined", a.resume, ids, n_ids, &e))) goto done;
        o.resume = resume;
    }
    o.train = &train;
    o.test = &test;
    o.on_epoch = on_epoch;
    o.on_iteration = on_iteration;
    c.bar = cli_stderr_tty();
    c.epochs = o.iterations > 0 ? 1 : o.epochs;
    c.drawn = -1;
    o.ctx = &c;
    if (!c.quiet) {
        cpu_set_t cs;
        int cores = sched_getaffinity(0, sizeof cs, &cs) == 0 ? CPU_COUNT(&cs) : 0;
        char tp[64] = "";
        if (tensor > 1)
            snprintf(tp, sizeof tp, " x %d tensor-parallel %s", tensor,
                     ranks != workers ? "ranks" : "threads");
        printf("train %s with %s: %d stages on %d workers%s (%s), schedule %s, batch %d = %d x %d%s%s\n",
               m->name, plan_path, p.n_stages, workers, tp, exec_pipe_backend_name(o.backend),
               sched_kind_name(p.schedule), p.batch, p.n_micro, p.microbatch,
               tensor > 1 && p.seq_par ? ", sequence parallel" : "",
               p.recompute == TFM_RECOMP_FULL ? ", full recomputation"
               : p.recompute == TFM_RECOMP_SELECTIVE ? ", selective recomputation" : "");
        printf("%lld %s training samples, %lld test, standardised (mean %.4f, sd %.4f)\n",
               (long long)train.n, source, (long long)test.n, mean, sd);
        printf("lr %g (%s), momentum %g, weight decay %g, seed %llu, OpenBLAS %s, 1 thread per worker\n",
               o.lr, train_args_schedule_name(o.lr_schedule), o.momentum,
               o.weight_decay, (unsigned long long)o.seed, exec_blas_corename());
        if (!mpi && cores > 0 && workers * tensor > cores && tensor > 1)
            printf("note: %d threads share %d cores (oversubscribed): correct, but times measure time-sharing\n",
                   workers * tensor, cores);
        else if (!mpi && cores > 0 && workers > cores)
            printf("note: %d workers share %d cores (oversubscribed): correct, but times measure time-sharing\n",
                   workers, cores);
        if (resume) {
            int64_t pos[5] = {0};
            exec_ckpt_get(resume, "run.position", pos, sizeof pos, &(cl_err){0});
            printf("resumed from %s: %lld iterations done\n", a.resume, (long long)pos[0]);
        }
        train_args_print_header();
        fflush(stdout);
    }
    exec_ckpt_signals_install();
    rc = exec_pipe_run(&p, &o, &res, &e);
    int sig = exec_ckpt_signal();
    exec_ckpt_signals_restore();
    if (sig && (rc || res.stop_signal)) { /* stopped: say where, on every rank */
        if (rc)
            fprintf(stderr, "cleave: %s\n", e.msg);
        else if (!c.quiet)
            fprintf(stderr, "cleave: %s: stopped after iteration %lld; %s%s%s\n",
                    exec_ckpt_signal_name(sig), (long long)res.iters_done,
                    a.ckpt ? "checkpoint written to " : "no checkpoint (hint: --checkpoint FILE makes runs resumable)",
                    a.ckpt ? a.ckpt : "", a.ckpt ? " (hint: continue with --resume)" : "");
        rc = 128 + sig;
        goto done;
    }
    if (rc) goto done;
    if (c.log_err.code) {
        e = c.log_err;
        rc = e.code;
        goto done;
    }
    for (int i = 0; i < c.n; i++)
        if (!isfinite(c.hist[i].loss)) {
            rc = cl_fail(&e, CL_EINPUT, "training diverged at epoch %d (loss is not finite) (hint: a smaller --lr)",
                         c.hist[i].epoch);
            goto done;
        }
    if (a.weights && res.rank == 0 && (rc = exec_pipe_save_weights(&res, a.weights, &e))) goto done;
done:;
    /* report before finalising: after a failed MPI run it aborts the job */
    int status = rc > 128 ? rc : rc ? report(&c, &e) : 0;
    exec_pipe_result_free(&res);
    exec_ckpt_free(resume);
    exec_data_free(&train);
    exec_data_free(&test);
    free(c.hist);
    plan_free(&p);
    if (mpi) exec_pipe_mpi_finalize();
    return status;
}
