/* cmd_train.c - `cleave train`: sequential training of a model on
 * Fashion-MNIST (or a synthetic set) with the embedded executor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../exec/checkpoint.h"
#include "../exec/data.h"
#include "../exec/gemm.h"
#include "../exec/train.h"
#include "../models/model.h"
#include "cli.h"
#include "fileio.h"

static void help(void)
{
    exec_train_opts d;
    exec_train_defaults(&d);
    printf("usage: cleave train --model FILE [options]\n\n"
           "Train the model sequentially (one thread) and print one line per epoch:\n"
           "mean training loss, training and test accuracy, samples/s, elapsed seconds.\n\n"
           "  --model FILE         model file (models/fmnist-mlp.json, models/fmnist-cnn.json)\n"
           "  --epochs N           epochs (default %d)\n"
           "  --batch B            minibatch size (default %d)\n"
           "  --lr X               learning rate (default %g)\n"
           "  --schedule S         constant or cosine (default cosine: lr decays to 0 over the run)\n"
           "  --momentum M         SGD momentum (default %g)\n"
           "  --weight-decay W     L2 weight decay on conv/linear weights (default %g)\n"
           "  --seed S             seed of weights, dropout and shuffling (default %llu)\n"
           "  --limit N            use only the first N training samples\n"
           "  --data DIR           folder with the Fashion-MNIST IDX files (default %s)\n"
           "  --synthetic N        train on N synthetic samples instead (N/4 test samples)\n"
           "  --log FILE           also write the epoch lines as CSV (rewritten after each epoch)\n"
           "  --save-weights FILE  write the trained weights (cleave-weights format)\n"
           "  --checkpoint FILE    write a checkpoint at each epoch end, every --checkpoint-every\n"
           "                       minibatches, and on SIGINT/SIGTERM (then stop, exit 130/143)\n"
           "  --checkpoint-every N also every N minibatch steps (default 0: epoch ends only)\n"
           "  --resume FILE        continue the run a checkpoint recorded, bit for bit (same\n"
           "                       model, data and options; --checkpoint may name the same file)\n"
           "  --plan FILE          train a plan pipelined instead (cleave train --plan F --help)\n",
           d.epochs, d.batch, d.lr, d.momentum, d.weight_decay, (unsigned long long)d.seed,
           EXEC_FMNIST_DIR);
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

/* The CSV log, rewritten whole (atomically) after each epoch so it is never
 * partial. */
static int write_log(const char *path, const exec_epoch *h, int n, cl_err *e)
{
    cl_out o;
    int rc = cl_out_open(&o, path, e);
    if (rc) return rc;
    fprintf(o.f, "epoch,loss,train_acc,test_acc,test_loss,samples_per_s,elapsed_s,lr\n");
    for (int i = 0; i < n; i++)
        fprintf(o.f, "%d,%.6f,%.6f,%.6f,%.6f,%.1f,%.3f,%.6g\n", h[i].epoch, h[i].loss,
                h[i].train_acc, h[i].test_acc, h[i].test_loss, h[i].samples_per_s, h[i].elapsed_s,
                h[i].lr);
    return cl_out_commit(&o, e);
}

int cmd_train(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* a plan trains pipelined (cmd_train_plan.c) */
        if (!strcmp(argv[i], "--plan")) return cmd_train_plan(argc, argv);
    const char *cmd = "train", *model_path = NULL, *log_path = NULL, *data_dir = NULL,
               *ckpt_path = NULL, *resume_path = NULL, *weights_path = NULL;
    exec_train_opts o;
    exec_train_defaults(&o);
    int64_t v, limit = 0, synthetic = 0, every = 0;
    int rc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return 0;
        }
        if (a[0] != '-' || a[1] != '-') return cli_usage_error(cmd, "unexpected argument \"%s\"", a);
        if (!val) return cli_usage_error(cmd, "%s needs a value", a);
        i++;
        if (!strcmp(a, "--model")) model_path = val;
        else if (!strcmp(a, "--log")) log_path = val;
        else if (!strcmp(a, "--data")) data_dir = val;
        else if (!strcmp(a, "--checkpoint")) ckpt_path = val;
        else if (!strcmp(a, "--resume")) resume_path = val;
        else if (!strcmp(a, "--save-weights")) weights_path = val;
        else if (!strcmp(a, "--checkpoint-every")) {
            if ((rc = cli_int(cmd, a, val, 1, INT64_MAX, &every))) return rc;
        }
        else if (!strcmp(a, "--epochs")) {
            if ((rc = cli_int(cmd, a, val, 1, 100000, &v))) return rc;
            o.epochs = (int)v;
        } else if (!strcmp(a, "--batch")) {
            if ((rc = cli_int(cmd, a, val, 1, 65536, &v))) return rc;
            o.batch = (int)v;
        } else if (!strcmp(a, "--seed")) {
            if ((rc = cli_int(cmd, a, val, 0, INT64_MAX, &v))) return rc;
            o.seed = (uint64_t)v;
        } else if (!strcmp(a, "--limit")) {
            if ((rc = cli_int(cmd, a, val, 1, INT64_MAX, &limit))) return rc;
        } else if (!strcmp(a, "--synthetic")) {
            if ((rc = cli_int(cmd, a, val, 4, 10000000, &synthetic))) return rc;
        } else if (!strcmp(a, "--lr")) {
            if ((rc = cli_num(cmd, a, val, 1e-12, 100, &o.lr))) return rc;
        } else if (!strcmp(a, "--momentum")) {
            if ((rc = cli_num(cmd, a, val, 0, 0.999999, &o.momentum))) return rc;
        } else if (!strcmp(a, "--weight-decay")) {
            if ((rc = cli_num(cmd, a, val, 0, 1, &o.weight_decay))) return rc;
        } else if (!strcmp(a, "--schedule")) {
            if (!strcmp(val, "constant")) o.schedule = EXEC_LR_CONSTANT;
            else if (!strcmp(val, "cosine")) o.schedule = EXEC_LR_COSINE;
            else return cli_usage_error(cmd, "--schedule: expected constant or cosine, got \"%s\"", val);
        } else return cli_usage_error(cmd, "unknown option %s", a);
    }
    if (!model_path) return cli_usage_error(cmd, "--model is required");
    if (synthetic && data_dir)
        return cli_usage_error(cmd, "--synthetic and --data exclude each other");
    if (every && !ckpt_path) return cli_usage_error(cmd, "--checkpoint-every needs --checkpoint FILE");

    cl_err e = {0};
    model m;
    if (model_load(&m, model_path, &e)) return cli_report(&e);
    exec_data train = {0}, test = {0};
    exec_trainer *t = NULL;
    exec_epoch *hist = NULL;
    exec_ckpt *resume = NULL;
    int n_hist = 0;
    const char *source = "Fashion-MNIST";
    if ((rc = exec_net_check(&m, 0, m.n_layers, model_path, &e))) goto done;
    if (synthetic) {
        const model_shape *s = &m.input;
        int C = s->ndim == 3 ? (int)s->d[0] : 1, H = s->ndim == 3 ? (int)s->d[1] : 1,
            W = s->ndim == 3 ? (int)s->d[2] : (int)s->d[0];
        int classes = m.classes > 0 ? m.classes : 2;
        exec_data_synthetic(&train, synthetic, C, H, W, classes, o.seed, 0);
        exec_data_synthetic(&test, synthetic / 4 > 0 ? synthetic / 4 : 1, C, H, W, classes,
                            o.seed, 1);
        source = "synthetic";
    } else if ((rc = exec_fmnist_load(data_dir, &train, &test, &e))) {
        goto done;
    }
    if (limit) exec_data_limit(&train, limit);
    if ((rc = exec_data_check(&train, &m, model_path, "training", &e)) ||
        (rc = exec_data_check(&test, &m, model_path, "test", &e)))
        goto done;
    const char *outs[3] = {log_path, ckpt_path, weights_path};
    for (int i = 0; i < 3; i++) { /* fail now, not after the first epoch, on a bad path */
        cl_out probe;
        if (!outs[i]) continue;
        if ((rc = cl_out_open(&probe, outs[i], &e))) goto done;
        cl_out_abort(&probe);
    }
    if (resume_path && (rc = exec_ckpt_read(&resume, resume_path, &e))) goto done;
    double mean, sd;
    exec_data_normalise(&train, &test, &mean, &sd);
    if ((rc = exec_trainer_create(&t, &m, model_path, &o, &e))) goto done;

    /* what a resume must match: the model, the data, every option that
     * changes the arithmetic */
    exec_ckpt_id ids[11];
    int n_ids = 0;
    if (ckpt_path || resume) {
        char hash[32], data[160];
        snprintf(hash, sizeof hash, "%016llx", (unsigned long long)exec_ckpt_model_hash(&m));
        exec_ckpt_data_print(&train, data, sizeof data);
        ids[n_ids++] = exec_ckpt_id_int("--epochs", o.epochs);
        ids[n_ids++] = exec_ckpt_id_int("--batch", o.batch);
        ids[n_ids++] = exec_ckpt_id_int("--seed", (int64_t)o.seed);
        ids[n_ids++] = exec_ckpt_id_real("--lr", o.lr);
        ids[n_ids++] = exec_ckpt_id_str("--schedule", o.schedule == EXEC_LR_COSINE ? "cosine" : "constant");
        ids[n_ids++] = exec_ckpt_id_real("--momentum", o.momentum);
        ids[n_ids++] = exec_ckpt_id_real("--weight-decay", o.weight_decay);
        ids[n_ids++] = exec_ckpt_id_str("model", m.name);
        ids[n_ids++] = exec_ckpt_id_str("model-hash", hash);
        ids[n_ids++] = exec_ckpt_id_str("training-data", data);
    }
    hist = cl_calloc((size_t)o.epochs, sizeof *hist);
    if (resume) {
        size_t kl;
        const char *kind = exec_ckpt_find(resume, "kind", &kl);
        if (!kind || kl != 10 || memcmp(kind, "sequential", 10) != 0) {
            rc = cl_fail(&e, CL_EINPUT, "%s: the checkpoint is not of a sequential run (hint: resume a pipelined run with cleave train --plan)",
                         resume_path);
            goto done;
        }
        if ((rc = exec_ckpt_check_ids(resume, ids, n_ids, &e)) ||
            (rc = exec_trainer_restore(t, resume, train.n, &e)) ||
            (rc = load_hist(resume, hist, o.epochs, &n_hist, &e)))
            goto done;
    }
    ckpt_ctx k = {.path = ckpt_path, .every = every, .ids = ids, .n_ids = n_ids, .hist = hist,
                  .n_hist = &n_hist};
    exec_trainer_set_hook(t, on_step, &k);
    exec_ckpt_signals_install();

    printf("train %s: %lld %s training samples, %lld test, standardised (mean %.4f, sd %.4f)\n",
           m.name, (long long)train.n, source, (long long)test.n, mean, sd);
    printf("batch %d, lr %g (%s), momentum %g, weight decay %g, seed %llu, OpenBLAS %s, 1 thread\n",
           o.batch, o.lr, o.schedule == EXEC_LR_COSINE ? "cosine" : "constant", o.momentum,
           o.weight_decay, (unsigned long long)o.seed, exec_blas_corename());
    if (resume) {
        int ep;
        int64_t pos, step;
        exec_trainer_position(t, &ep, &pos, &step);
        printf("resumed from %s: %d epoch%s done, %lld minibatch steps\n", resume_path, n_hist,
               n_hist == 1 ? "" : "s", (long long)step);
    }
    printf("%5s %9s %9s %9s %11s %9s\n", "epoch", "loss", "train_acc", "test_acc", "samples/s",
           "elapsed_s");
    for (int i = 0; i < n_hist; i++) /* the epochs a resumed run inherits */
        printf("%5d %9.4f %9.4f %9.4f %11.0f %9.1f\n", hist[i].epoch, hist[i].loss,
               hist[i].train_acc, hist[i].test_acc, hist[i].samples_per_s, hist[i].elapsed_s);
    fflush(stdout);
    if (log_path && n_hist && (rc = write_log(log_path, hist, n_hist, &e))) goto done;
    bar b = {cli_stderr_tty(), o.epochs};
    for (int ep = n_hist; ep < o.epochs; ep++) {
        if (!exec_trainer_epoch(t, &train, &test, progress, &b, &hist[ep])) break;
        const exec_epoch *h = &hist[ep];
        n_hist = ep + 1;
        printf("%5d %9.4f %9.4f %9.4f %11.0f %9.1f\n", h->epoch, h->loss, h->train_acc,
               h->test_acc, h->samples_per_s, h->elapsed_s);
        fflush(stdout);
        if (!isfinite(h->loss)) {
            rc = cl_fail(&e, CL_EINPUT, "training diverged at epoch %d (loss is not finite) (hint: a smaller --lr)",
                         h->epoch);
            break;
        }
        if (log_path && (rc = write_log(log_path, hist, ep + 1, &e))) break;
        if (ckpt_path && (rc = k.rc = save_ckpt(&k, t))) break;
        if ((k.sig = exec_ckpt_signal())) break; /* arrived during the evaluation */
    }
    exec_ckpt_signals_restore();
    if (!rc && k.rc) {
        e = k.err;
        rc = k.rc;
    }
    if (!rc && k.sig) {
        int ep;
        int64_t pos, step;
        exec_trainer_position(t, &ep, &pos, &step);
        if (b.on) fprintf(stderr, "\r\033[K");
        if (ckpt_path)
            fprintf(stderr, "cleave: %s: stopped at epoch %d, minibatch %lld (step %lld); checkpoint written to %s (hint: continue with --resume %s)\n",
                    exec_ckpt_signal_name(k.sig), pos ? ep : ep + 1, (long long)pos,
                    (long long)step, ckpt_path, ckpt_path);
        else
            fprintf(stderr, "cleave: %s: stopped at epoch %d, minibatch %lld (step %lld); no checkpoint (hint: --checkpoint FILE makes runs resumable)\n",
                    exec_ckpt_signal_name(k.sig), pos ? ep : ep + 1, (long long)pos,
                    (long long)step);
        rc = 128 + k.sig;
        goto done;
    }
    if (!rc && weights_path) {
        exec_net *net = exec_trainer_net(t);
        rc = exec_ckpt_save_weights(&net, 1, weights_path, &e);
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
