/* cmd_train.c - `cleave train`: sequential training of a model on
 * Fashion-MNIST (or a synthetic set) with the embedded executor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    const char *cmd = "train", *model_path = NULL, *log_path = NULL, *data_dir = NULL;
    exec_train_opts o;
    exec_train_defaults(&o);
    int64_t v, limit = 0, synthetic = 0;
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

    cl_err e = {0};
    model m;
    if (model_load(&m, model_path, &e)) return cli_report(&e);
    exec_data train = {0}, test = {0};
    exec_trainer *t = NULL;
    exec_epoch *hist = NULL;
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
    if (log_path) { /* fail now, not after the first epoch, on a bad path */
        cl_out probe;
        if ((rc = cl_out_open(&probe, log_path, &e))) goto done;
        cl_out_abort(&probe);
    }
    double mean, sd;
    exec_data_normalise(&train, &test, &mean, &sd);
    if ((rc = exec_trainer_create(&t, &m, model_path, &o, &e))) goto done;

    printf("train %s: %lld %s training samples, %lld test, standardised (mean %.4f, sd %.4f)\n",
           m.name, (long long)train.n, source, (long long)test.n, mean, sd);
    printf("batch %d, lr %g (%s), momentum %g, weight decay %g, seed %llu, OpenBLAS %s, 1 thread\n",
           o.batch, o.lr, o.schedule == EXEC_LR_COSINE ? "cosine" : "constant", o.momentum,
           o.weight_decay, (unsigned long long)o.seed, exec_blas_corename());
    printf("%5s %9s %9s %9s %11s %9s\n", "epoch", "loss", "train_acc", "test_acc", "samples/s",
           "elapsed_s");
    fflush(stdout);
    hist = cl_calloc((size_t)o.epochs, sizeof *hist);
    bar b = {cli_stderr_tty(), o.epochs};
    for (int ep = 0; ep < o.epochs; ep++) {
        exec_trainer_epoch(t, &train, &test, progress, &b, &hist[ep]);
        const exec_epoch *h = &hist[ep];
        printf("%5d %9.4f %9.4f %9.4f %11.0f %9.1f\n", h->epoch, h->loss, h->train_acc,
               h->test_acc, h->samples_per_s, h->elapsed_s);
        fflush(stdout);
        if (!isfinite(h->loss)) {
            rc = cl_fail(&e, CL_EINPUT, "training diverged at epoch %d (loss is not finite) (hint: a smaller --lr)",
                         h->epoch);
            break;
        }
        if (log_path && (rc = write_log(log_path, hist, ep + 1, &e))) break;
    }
done:
    exec_trainer_destroy(t);
    free(hist);
    exec_data_free(&train);
    exec_data_free(&test);
    model_free(&m);
    return rc ? cli_report(&e) : 0;
}
