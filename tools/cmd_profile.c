/* cmd_profile.c - `cleave profile`: time every layer of a model on this
 * machine and write a measured profile (docs/formats.md, "Profile"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/nn/gemm.h"
#include "exec/nn/net.h"
#include "exec/probe/profile_layers.h"
#include "models/model.h"
#include "profiles/profile.h"
#include "cli.h"

#define DEFAULT_REPS 20
#define DEFAULT_WARMUP 3

typedef struct profile_args {
    const char *model, *out, *batch;
    int64_t reps, warmup, seed, tensor;
    int links, seq_par, recompute;
} profile_args;

#define PA profile_args
static const cli_opt profile_opts[] = {
    {"model", 0, CLI_STR, CLI_FIELD(PA, model), .arg = "FILE", .help = "model file the executor can run"},
    {"batch", 0, CLI_STR, CLI_FIELD(PA, batch), .arg = "LIST", .help = "batch sizes, increasing (default 64)"},
    {"reps", 0, CLI_INT, CLI_FIELD(PA, reps), 1, 100000, .arg = "N", .help = "timed runs per pass (default {})"},
    {"warmup", 0, CLI_INT, CLI_FIELD(PA, warmup), 0, 100000, .arg = "N", .help = "untimed runs first (default {})"},
    {"seed", 0, CLI_INT, CLI_FIELD(PA, seed), 0, INT64_MAX, .arg = "S",
     .help = "seed of the weights and random inputs (default {})"},
    {"tensor", 0, CLI_INT, CLI_FIELD(PA, tensor), 1, 64, .arg = "T",
     .help = "a rank profile: rank 0's share of attention and mlp layers split\n"
             "T ways, with the collectives each layer makes (default {})"},
    {"sequence-parallel", 0, CLI_FLAG, CLI_FIELD(PA, seq_par),
     .help = "with --tensor T > 1: the layers run sequence parallel"},
    {"recompute", 0, CLI_ENUM, CLI_FIELD(PA, recompute), .words = "none|selective|full", .arg = "R",
     .help = "the layers recompute as in cleave train (default none)"},
    {"out", 'o', CLI_STR, CLI_FIELD(PA, out), .arg = "FILE", .help = "the profile to write (- for stdout)"},
    {"links", 0, CLI_FLAG, CLI_FIELD(PA, links), .help = NULL}, /* cmd_profile_links.c */
};
#undef PA
static const cli_spec profile_spec = {"profile", profile_opts, CLI_N(profile_opts), .help_col = 17};

static const profile_args defaults = {.reps = DEFAULT_REPS, .warmup = DEFAULT_WARMUP, .seed = 1,
                                      .tensor = 1};

static void help(void)
{
    printf("usage: cleave profile --model FILE [--batch B[,B2...]] [--reps N] [--warmup N]\n"
           "                      [--seed S] [--tensor T [--sequence-parallel]]\n"
           "                      [--recompute none|selective|full] -o PROFILE.json\n\n"
           "Time every layer's forward, input-gradient and weight-gradient pass on one core\n"
           "of this machine (the executor's kernels) at each batch size: N warm-up runs,\n"
           "then N timed ones; the profile holds their median (and the forward's standard\n"
           "deviation), with activation, stash and parameter bytes.  With --tensor T, of\n"
           "rank 0's share (a rank profile: cleave plan --profile prices its collectives\n"
           "on the cluster's links; docs/formats.md, \"Profile\").\n\n");
    cli_help(&profile_spec, &defaults, stdout);
    printf("\ncleave profile --links ... measures the link between workers instead (--links --help).\n");
}

int cmd_profile(int argc, char **argv)
{
    if (cli_find(&profile_spec, argc, argv, "links")) /* links, not layers: cmd_profile_links.c */
        return cmd_profile_links(argc, argv);
    const char *cmd = "profile";
    profile_args x = defaults;
    int rc = cli_parse(&profile_spec, argc, argv, &x, 0);
    if (rc == CLI_HELP) help();
    if (rc) return rc == CLI_HELP ? 0 : rc;
    const char *model_path = x.model, *out = x.out;
    int64_t *batches = NULL, reps = x.reps, warmup = x.warmup, seed = x.seed;
    int n_batches = 0;
    if (x.batch) {
        rc = cli_int_list(cmd, "--batch", x.batch, 1, 65536, &batches, &n_batches);
        if (!rc && n_batches > PROF_MAX_POINTS)
            rc = cli_usage_error(cmd, "--batch: at most %d sizes", PROF_MAX_POINTS);
    }
    if (!rc && !model_path) rc = cli_usage_error(cmd, "--model is required");
    if (!rc && x.seq_par && x.tensor < 2)
        rc = cli_usage_hint(cmd, "--tensor 2 or more", "--sequence-parallel splits the sequence over tensor-parallel ranks, and --tensor is 1");
    if (!rc && !out) rc = cli_usage_error(cmd, "-o FILE is required");
    if (rc) {
        free(batches);
        return rc;
    }
    if (!batches) {
        batches = cl_malloc(sizeof *batches);
        batches[0] = 64;
        n_batches = 1;
    }
    cl_err e = {0};
    model m;
    if (model_load(&m, model_path, &e)) {
        free(batches);
        return cli_report(&e);
    }
    prof p;
    rc = exec_profile_net(&m, model_path, batches, n_batches, (int)warmup, (int)reps, (uint64_t)seed,
                          (int)x.tensor, exec_net_flags_of(x.recompute, x.seq_par), &p, &e);
    if (!rc) {
        rc = prof_save(&p, out, &e);
        if (!rc && strcmp(out, "-") != 0) {
            double step = 0;
            for (int l = 0; l < p.n_layers; l++)
                step += p.layers[l].fwd_s[0] + p.layers[l].bwd_in_s[0] + p.layers[l].bwd_w_s[0];
            printf("profiled %s: %d layers at %d batch size%s on %s (OpenBLAS %s); sum at batch %g: %.3f ms per step; wrote %s\n",
                   m.name, p.n_layers, n_batches, n_batches > 1 ? "s" : "", p.device,
                   exec_blas_corename(), p.layers[0].batch[0], step * 1e3, out);
        }
        prof_free(&p);
    }
    model_free(&m);
    free(batches);
    return rc ? cli_report(&e) : 0;
}
