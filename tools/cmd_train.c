/* cmd_train.c - `cleave train`: sequential training of a model on
 * Fashion-MNIST (or a synthetic set) with the embedded executor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "exec/ckpt/checkpoint.h"
#include "exec/nn/data.h"
#include "exec/nn/gemm.h"
#include "exec/run/tp_team.h"
#include "exec/run/train.h"
#include "models/model.h"
#include "cli.h"
#include "base/fileio.h"
#include "train_args.h"

typedef struct train_cmd {
    train_args a;           /* the options train --plan shares */
    const char *model, *plan;
    int tensor_set;         /* --tensor or --recompute was given: report memory */
    int recompute_set;
} train_cmd;

static const cli_opt train_opts[] = {
    {"model", 0, CLI_STR, CLI_FIELD(train_cmd, model), .arg = "FILE",
     .help = "model file (models/fmnist-mlp.json, models/fmnist-cnn.json)"},
    {"epochs", 0, CLI_INT, CLI_FIELD(train_cmd, a.opt.epochs), 1, 100000, .arg = "N",
     .help = "epochs (default {})"},
    {"batch", 0, CLI_INT, CLI_FIELD(train_cmd, a.opt.batch), 1, 65536, .arg = "B",
     .help = "minibatch size (default {})"},
    TRAIN_OPT_LR(train_cmd, a),
    TRAIN_OPT_LR_SCHEDULE(train_cmd, a, "constant or cosine (default cosine: lr decays to 0 over the run)"),
    TRAIN_OPT_MOMENTUM(train_cmd, a, "SGD momentum (default {})"),
    TRAIN_OPT_WEIGHT_DECAY(train_cmd, a),
    TRAIN_OPT_SEED(train_cmd, a),
    {"tensor", 0, CLI_INT, CLI_FIELD(train_cmd, a.opt.tensor), 1, 64,
     .given = CLI_AT(train_cmd, tensor_set), .arg = "T",
     .help = "tensor parallelism: split attention and mlp layers over T threads\n"
             "(default {}); given, memory per worker is reported at the end"},
    {"sequence-parallel", 0, CLI_FLAG, CLI_FIELD(train_cmd, a.opt.seq_par),
     .help = "with --tensor T > 1: sequence parallelism (Korthikanti et al. 2022):\n"
             "layer norms and residuals keep 1/T of the tokens each, reduce-scatters\n"
             "and all-gathers replace the all-reduces"},
    {"recompute", 0, CLI_ENUM, CLI_FIELD(train_cmd, a.opt.recompute),
     .words = "none|selective|full", .given = CLI_AT(train_cmd, recompute_set), .arg = "R",
     .help = "selective: attention recomputes its softmax probabilities in the\n"
             "backward pass; full: attention and mlp layers keep their input only\n"
             "and recompute the rest (default none); given, as --tensor"},
    TRAIN_OPT_LIMIT(train_cmd, a),
    TRAIN_OPT_DATA(train_cmd, a),
    TRAIN_OPT_SYNTHETIC(train_cmd, a),
    TRAIN_OPT_LOG(train_cmd, a),
    TRAIN_OPT_SAVE_WEIGHTS(train_cmd, a),
    TRAIN_OPT_CHECKPOINT(train_cmd, a, "write a checkpoint at each epoch end, every --checkpoint-every\n"
                                       "minibatches, and on SIGINT/SIGTERM (then stop, exit 130/143)"),
    TRAIN_OPT_CHECKPOINT_EVERY(train_cmd, a, "also every N minibatch steps (default 0: epoch ends only)"),
    TRAIN_OPT_RESUME(train_cmd, a, "continue the run a checkpoint recorded, bit for bit (same\n"
                                   "model, data and options; --checkpoint may name the same file)"),
    {"plan", 0, CLI_STR, CLI_FIELD(train_cmd, plan), .arg = "FILE",
     .help = "train a plan pipelined instead (cleave train --plan F --help)"},
    TRAIN_OPT_SCHEDULE(train_cmd, a),
};
static const cli_spec train_spec = {"train", train_opts, CLI_N(train_opts), .help_col = 23};

static void help(void)
{
    train_cmd d = {0};
    train_args_help(&train_spec, &d, &d.a,
                    "usage: cleave train --model FILE [options]\n\n"
                    "Train the model sequentially (one thread, or --tensor T threads) and print one\n"
                    "line per epoch: mean training loss, training and test accuracy, samples/s,\n"
                    "elapsed seconds.\n\n");
}

typedef struct bar {
    int on;
    int epochs;
} bar;

static void progress(void *ctx, int epoch, int64_t done, int64_t total, double loss)
{
    bar *b = ctx;
    if (!b->on) return;
    const int width = 30;
    int fill = (int)((double)done / (double)total * width);
    char s[64];
    for (int i = 0; i < width; i++) s[i] = i < fill ? '#' : '.';
    s[width] = 0;
    fprintf(stderr, "\r  epoch %d/%d [%s] %3d%%  loss %.4f", epoch, b->epochs, s,
            (int)(100.0 * (double)done / (double)total), loss);
    if (done == total) fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

/* Checkpointing state shared with the step hook. */
typedef struct ckpt_ctx {
    const char *path;          /* NULL: no checkpoints                          */
    int64_t every;             /* steps between checkpoints (0: epoch ends)     */
    const exec_ckpt_id *ids;
    int n_ids;
    const exec_epoch *hist;    /* the completed epochs                          */
    int *n_hist;
    int sig;                   /* the signal that stopped the run               */
    int rc;                    /* a checkpoint write failed                     */
    cl_err err;
} ckpt_ctx;

/* Epoch lines as doubles, 8 per epoch, in exec_epoch's order. */
enum { HIST_F = 8 };

static int save_ckpt(ckpt_ctx *k, exec_trainer *t)
{
    exec_ckpt *c = exec_ckpt_new();
    exec_ckpt_put_str(c, "kind", "sequential");
    exec_ckpt_put_ids(c, k->ids, k->n_ids);
    exec_trainer_save(t, c);
    int n = *k->n_hist;
    double *h = cl_malloc((size_t)(n ? n : 1) * HIST_F * sizeof *h);
    for (int i = 0; i < n; i++) {
        const exec_epoch *x = &k->hist[i];
        double v[HIST_F] = {x->epoch, x->loss, x->train_acc, x->test_loss, x->test_acc,
                            x->samples_per_s, x->elapsed_s, x->lr};
        memcpy(h + (size_t)i * HIST_F, v, sizeof v);
    }
    exec_ckpt_put_f64(c, "train.hist", h, (size_t)n * HIST_F);
    free(h);
    int rc = exec_ckpt_write(c, k->path, &k->err);
    exec_ckpt_free(c);
    return rc;
}

static int on_step(void *p, exec_trainer *t)
{
    ckpt_ctx *k = p;
    int epoch;
    int64_t pos, step;
    exec_trainer_position(t, &epoch, &pos, &step);
    int sig = exec_ckpt_signal();
    if (k->path && (sig || (k->every > 0 && step % k->every == 0)) &&
        (k->rc = save_ckpt(k, t)))
        return 1;
    k->sig = sig;
    if (!sig) exec_ckpt_test_pause(step);
    return sig != 0;
}

/* Restore the epoch lines a checkpoint holds into hist[0 .. epochs). */
static int load_hist(const exec_ckpt *c, exec_epoch *hist, int epochs, int *n, cl_err *e)
{
    size_t len;
    const void *b = exec_ckpt_find(c, "train.hist", &len);
    if (!b || len % (HIST_F * sizeof(double)) || len / (HIST_F * sizeof(double)) > (size_t)epochs)
        return cl_fail(e, CL_EINPUT, "%s: section train.hist is missing or does not fit %d epochs (hint: the file is damaged)",
                       exec_ckpt_file(c), epochs);
    *n = (int)(len / (HIST_F * sizeof(double)));
    for (int i = 0; i < *n; i++) {
        double v[HIST_F];
        memcpy(v, (const char *)b + (size_t)i * sizeof v, sizeof v);
        hist[i] = (exec_epoch){.epoch = (int)v[0], .loss = v[1], .train_acc = v[2],
                               .test_loss = v[3], .test_acc = v[4], .samples_per_s = v[5],
                               .elapsed_s = v[6], .lr = v[7]};
    }
    return CL_OK;
}

/* Memory per worker (exec_trainer_mem: allocated at creation, so also the
 * peak of what it counts) and the process's peak RSS, which adds the data
 * set, the nets' scratch and the runtime, shared by the threads. */
static void print_mem(exec_trainer *t, int workers, int seq_par)
{
    const double mb = 1e-6;
    printf("memory per worker, MB (held from start to end, so also the peak):\n");
    printf("%6s %9s %9s %9s %11s %9s %9s\n", "worker", "weights", "grads", "momentum",
           "activations", "buffers", "total");
    for (int r = 0; r < workers; r++) {
        sim_mem mm;
        exec_trainer_mem(t, r, &mm);
        printf("%6d %9.3f %9.3f %9.3f %11.3f %9.3f %9.3f\n", r, mm.weights * mb, mm.grads * mb,
               mm.optim * mb, mm.stash * mb, mm.buffers * mb, sim_mem_total(&mm) * mb);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("process peak RSS %.1f MB (all workers, the data sets included)\n",
           (double)ru.ru_maxrss * 1024.0 * mb);
    const exec_tp_team *team = exec_trainer_team(t);
    if (!team) return;
    printf("waited in %s for the other workers, s:",
           seq_par ? "all-reduces, reduce-scatters and all-gathers" : "all-reduces");
    for (int r = 0; r < workers; r++)
        printf("%s worker %d %.1f", r ? "," : "", r, exec_tp_team_wait_s(team, r));
    printf("\n");
}

int cmd_train(int argc, char **argv)
{
    if (cli_find(&train_spec, argc, argv, "plan")) /* trains pipelined: cmd_train_plan.c */
        return cmd_train_plan(argc, argv);
    const char *cmd = "train";
    train_cmd t0 = {0};
    train_args_defaults(&t0.a);
    int rc = cli_parse(&train_spec, argc, argv, &t0, 0);
    if (rc == CLI_HELP) help();
    if (rc) return rc == CLI_HELP ? 0 : rc;
    train_args a = t0.a;
    const char *model_path = t0.model;
    if (!model_path) return cli_usage_error(cmd, "--model is required");
    if (t0.a.opt.seq_par && t0.a.opt.tensor < 2)
        return cli_usage_error(cmd, "--sequence-parallel needs --tensor T > 1 (it splits the "
                                    "sequence over the tensor-parallel threads)");
    if ((rc = train_args_check(&a, cmd))) return rc;
    const exec_train_opts o = a.opt;

    cl_err e = {0};
    model m;
    if (model_load(&m, model_path, &e)) return cli_report(&e);
    exec_data train = {0}, test = {0};
    exec_trainer *t = NULL;
    exec_epoch *hist = NULL;
    exec_ckpt *resume = NULL;
    int n_hist = 0;
    const char *source;
    double mean, sd;
    if ((rc = exec_net_check(&m, 0, m.n_layers, model_path, &e)) ||
        (o.tensor > 1 && (rc = exec_net_tp_check(&m, 0, m.n_layers, o.tensor, model_path, &e))) ||
        (o.seq_par && (rc = exec_net_sp_check(&m, 0, m.n_layers, o.tensor, model_path, &e))) ||
        (rc = train_args_data(&a, &m, model_path, &train, &test, &source, &mean, &sd, &e)) ||
        (rc = train_args_probe(&a, &e)))
        goto done;
    if (a.resume && (rc = exec_ckpt_read(&resume, a.resume, &e))) goto done;
    if ((rc = exec_trainer_create(&t, &m, model_path, &o, &e))) goto done;

    /* what a resume must match: the model, the data, every option that
     * changes the arithmetic */
    exec_ckpt_id ids[2 + TRAIN_ARGS_IDS];
    int n_ids = 0;
    if (a.ckpt || resume) {
        ids[n_ids++] = exec_ckpt_id_int("--epochs", o.epochs);
        ids[n_ids++] = exec_ckpt_id_int("--batch", o.batch);
        n_ids += train_args_ids(&a, &m, &train, ids + n_ids);
    }
    hist = cl_calloc((size_t)o.epochs, sizeof *hist);
    if (resume) {
        if ((rc = train_args_resume_check(resume, "sequential", a.resume, ids, n_ids, &e)) ||
            (rc = exec_trainer_restore(t, resume, train.n, &e)) ||
            (rc = load_hist(resume, hist, o.epochs, &n_hist, &e)))
            goto done;
    }
    ckpt_ctx k = {.path = a.ckpt, .every = a.every, .ids = ids, .n_ids = n_ids, .hist = hist,
                  .n_hist = &n_hist};
    exec_trainer_set_hook(t, on_step, &k);
    exec_ckpt_signals_install();

    printf("train %s: %lld %s training samples, %lld test, standardised (mean %.4f, sd %.4f)\n",
           m.name, (long long)train.n, source, (long long)test.n, mean, sd);
    char threads[128] = "1 thread";
    if (o.tensor > 1)
        snprintf(threads, sizeof threads, "tensor parallel over %d threads", o.tensor);
    if (o.tensor > 1 && o.seq_par) strcat(threads, ", sequence parallel");
    if (o.recompute)
        strcat(threads, o.recompute == 1 ? ", selective recomputation" : ", full recomputation");
    printf("batch %d, lr %g (%s), momentum %g, weight decay %g, seed %llu, OpenBLAS %s, %s\n",
           o.batch, o.lr, train_args_schedule_name(o.schedule), o.momentum,
           o.weight_decay, (unsigned long long)o.seed, exec_blas_corename(), threads);
    if (resume) {
        int ep;
        int64_t pos, step;
        exec_trainer_position(t, &ep, &pos, &step);
        printf("resumed from %s: %d epoch%s done, %lld minibatch steps\n", a.resume, n_hist,
               n_hist == 1 ? "" : "s", (long long)step);
    }
    train_args_print_header();
    for (int i = 0; i < n_hist; i++) /* the epochs a resumed run inherits */
        train_args_print_epoch(&hist[i]);
    fflush(stdout);
    if (a.log && n_hist && (rc = train_args_write_log(a.log, hist, n_hist, &e))) goto done;
    bar b = {cli_stderr_tty(), o.epochs};
    for (int ep = n_hist; ep < o.epochs; ep++) {
        if (!exec_trainer_epoch(t, &train, &test, progress, &b, &hist[ep])) break;
        const exec_epoch *h = &hist[ep];
        n_hist = ep + 1;
        train_args_print_epoch(h);
        fflush(stdout);
        if (!isfinite(h->loss)) {
            rc = cl_fail(&e, CL_EINPUT, "training diverged at epoch %d (loss is not finite) (hint: a smaller --lr)",
                         h->epoch);
            break;
        }
        if (a.log && (rc = train_args_write_log(a.log, hist, ep + 1, &e))) break;
        if (a.ckpt && (rc = k.rc = save_ckpt(&k, t))) break;
        if ((k.sig = exec_ckpt_signal())) break; /* arrived during the evaluation */
    }
    exec_ckpt_signals_restore();
    if (k.rc && !e.code) { /* a checkpoint write failed: its message */
        e = k.err;
        rc = k.rc;
    }
    if (!rc && k.sig) {
        int ep;
        int64_t pos, step;
        exec_trainer_position(t, &ep, &pos, &step);
        if (b.on) fprintf(stderr, "\r\033[K");
        if (a.ckpt)
            fprintf(stderr, "cleave: %s: stopped at epoch %d, minibatch %lld (step %lld); checkpoint written to %s (hint: continue with --resume %s)\n",
                    exec_ckpt_signal_name(k.sig), pos ? ep : ep + 1, (long long)pos,
                    (long long)step, a.ckpt, a.ckpt);
        else
            fprintf(stderr, "cleave: %s: stopped at epoch %d, minibatch %lld (step %lld); no checkpoint (hint: --checkpoint FILE makes runs resumable)\n",
                    exec_ckpt_signal_name(k.sig), pos ? ep : ep + 1, (long long)pos,
                    (long long)step);
        rc = 128 + k.sig;
        goto done;
    }
    if (!rc && (t0.tensor_set || t0.recompute_set)) print_mem(t, o.tensor, o.seq_par);
    if (!rc && a.weights && o.tensor > 1) { /* the shards gathered into the whole model */
        exec_net *net = exec_trainer_gather(t);
        rc = exec_ckpt_save_weights(&net, 1, a.weights, &e);
        exec_net_destroy(net);
    } else if (!rc && a.weights) {
        exec_net *net = exec_trainer_net(t);
        rc = exec_ckpt_save_weights(&net, 1, a.weights, &e);
    }
done:
    exec_ckpt_signals_restore();
    exec_trainer_destroy(t);
    exec_ckpt_free(resume);
    free(hist);
    exec_data_free(&train);
    exec_data_free(&test);
    model_free(&m);
    if (rc > 128) return rc; /* stopped by a signal, reported above */
    return rc ? cli_report(&e) : 0;
}
