/* train_args.c - the options, data and output both `cleave train` forms
 * share (train_args.h). */
#include "train_args.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "base/fileio.h"

void train_args_defaults(train_args *a)
{
    memset(a, 0, sizeof *a);
    exec_train_defaults(&a->opt);
}

void train_args_help(const cli_spec *s, void *defaults, train_args *a, const char *usage)
{
    train_args_defaults(a);
    a->data = EXEC_FMNIST_DIR;
    fputs(usage, stdout);
    cli_help(s, defaults, stdout);
}

_Static_assert(EXEC_LR_CONSTANT == 0 && EXEC_LR_COSINE == 1,
               "TRAIN_OPT_LR_SCHEDULE's words are in exec_lr_schedule's order");
_Static_assert(sizeof(exec_lr_schedule) == sizeof(int), "an enum option fills an int");

int train_args_check(const train_args *a, const char *cmd)
{
    if (a->schedule)
        return cli_usage_hint(cmd, "--schedule is the pipeline schedule; the learning-rate schedule is --lr-schedule",
                              "--schedule %s: train takes no pipeline schedule (a plan gives it)", a->schedule);
    if (a->synthetic && a->data) return cli_usage_error(cmd, "--synthetic and --data exclude each other");
    if (a->every && !a->ckpt) return cli_usage_error(cmd, "--checkpoint-every needs --checkpoint FILE");
    return 0;
}

int train_args_probe(const train_args *a, cl_err *e)
{
    const char *outs[3] = {a->log, a->ckpt, a->weights};
    for (int i = 0; i < 3; i++) {
        if (!outs[i]) continue;
        int rc = cl_out_check(outs[i], e);
        if (rc) return rc;
    }
    return CL_OK;
}

int train_args_data(const train_args *a, const model *m, const char *file, exec_data *train,
                    exec_data *test, const char **source, double *mean, double *sd,
                    cl_err *e)
{
    int rc;
    *source = "Fashion-MNIST";
    if (a->synthetic) {
        const model_shape *s = &m->input;
        int C = s->ndim == 3 ? (int)s->d[0] : 1, H = s->ndim == 3 ? (int)s->d[1] : 1,
            W = s->ndim == 3 ? (int)s->d[2] : (int)s->d[0];
        int classes = m->classes > 0 ? m->classes : 2;
        int64_t n_test = a->synthetic / 4 > 0 ? a->synthetic / 4 : 1;
        exec_data_synthetic(train, a->synthetic, C, H, W, classes, a->opt.seed, 0);
        exec_data_synthetic(test, n_test, C, H, W, classes, a->opt.seed, 1);
        *source = "synthetic";
    } else if ((rc = exec_fmnist_load(a->data, train, test, e))) {
        return rc;
    }
    if (a->limit) exec_data_limit(train, a->limit);
    if ((rc = exec_data_check(train, m, file, "training", e)) ||
        (rc = exec_data_check(test, m, file, "test", e)))
        return rc;
    exec_data_normalise(train, test, mean, sd);
    return CL_OK;
}

int train_args_resume_check(const exec_ckpt *c, const char *kind, const char *path,
                            const exec_ckpt_id *ids, int n, cl_err *e)
{
    size_t len;
    const char *got = exec_ckpt_find(c, "kind", &len);
    if (!got || len != strlen(kind) || memcmp(got, kind, len) != 0)
        return cl_fail(e, CL_EINPUT, "%s: the checkpoint is not of a %s run (hint: %s)", path, kind,
                       strcmp(kind, "sequential") == 0 ? "resume a pipelined run with cleave train --plan"
                                                       : "resume a sequential run without --plan");
    return exec_ckpt_check_ids(c, ids, n, e);
}

const char *train_args_schedule_name(exec_lr_schedule s)
{
    return s == EXEC_LR_COSINE ? "cosine" : "constant";
}

int train_args_ids(const train_args *a, const model *m, const exec_data *train,
                   exec_ckpt_id *ids)
{
    char hash[32], data[160];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)exec_ckpt_model_hash(m));
    exec_ckpt_data_print(train, data, sizeof data);
    int n = 0;
    ids[n++] = exec_ckpt_id_int("--seed", (int64_t)a->opt.seed);
    ids[n++] = exec_ckpt_id_real("--lr", a->opt.lr);
    ids[n] = exec_ckpt_id_str("--lr-schedule", train_args_schedule_name(a->opt.schedule));
    ids[n++].was = "--schedule"; /* its name before cleave 0.14 */
    ids[n++] = exec_ckpt_id_real("--momentum", a->opt.momentum);
    ids[n++] = exec_ckpt_id_real("--weight-decay", a->opt.weight_decay);
    ids[n++] = exec_ckpt_id_str("model", m->name);
    ids[n++] = exec_ckpt_id_str("model-hash", hash);
    ids[n++] = exec_ckpt_id_str("training-data", data);
    return n;
}

void train_args_print_header(void)
{
    printf("%5s %9s %9s %9s %11s %9s\n", "epoch", "loss", "train_acc", "test_acc", "samples/s",
           "elapsed_s");
}

void train_args_print_epoch(const exec_epoch *h)
{
    printf("%5d %9.4f %9.4f %9.4f %11.0f %9.1f\n", h->epoch, h->loss, h->train_acc, h->test_acc,
           h->samples_per_s, h->elapsed_s);
}

int train_args_write_log(const char *path, const exec_epoch *h, int n, cl_err *e)
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
