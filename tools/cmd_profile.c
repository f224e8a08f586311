/* cmd_profile.c - `cleave profile`: time every layer of a model on this
 * machine and write a measured profile (docs/formats.md, "Profile"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/nn/gemm.h"
#include "exec/probe/profile_layers.h"
#include "models/model.h"
#include "profiles/profile.h"
#include "cli.h"

#define DEFAULT_REPS 20
#define DEFAULT_WARMUP 3

static void help(void)
{
    printf("usage: cleave profile --model FILE [--batch B[,B2...]] [--reps N] [--warmup N]\n"
           "                      [--seed S] -o PROFILE.json\n\n"
           "Time every layer's forward, input-gradient and weight-gradient pass on one core\n"
           "of this machine (the executor's kernels) at each batch size: N warm-up runs,\n"
           "then N timed ones; the profile holds their median (and the forward's standard\n"
           "deviation), with activation, stash and parameter bytes.\n\n"
           "  --model FILE   model file the executor can run\n"
           "  --batch LIST   batch sizes, increasing (default 64)\n"
           "  --reps N       timed runs per pass (default %d)\n"
           "  --warmup N     untimed runs first (default %d)\n"
           "  --seed S       seed of the weights and random inputs (default 1)\n"
           "  -o FILE        the profile to write (- for stdout)\n\n"
           "cleave profile --links ... measures the link between workers instead (--links --help).\n",
           DEFAULT_REPS, DEFAULT_WARMUP);
}

int cmd_profile(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* links, not layers: tools/cmd_profile_links.c */
        if (!strcmp(argv[i], "--links")) return cmd_profile_links(argc, argv);
    const char *cmd = "profile", *model_path = NULL, *out = NULL;
    int64_t *batches = NULL, v, reps = DEFAULT_REPS, warmup = DEFAULT_WARMUP, seed = 1;
    int n_batches = 0, rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            free(batches);
            return 0;
        }
        if (a[0] != '-') {
            rc = cli_usage_error(cmd, "unexpected argument \"%s\"", a);
            break;
        }
        if (!val) {
            rc = cli_usage_error(cmd, "%s needs a value", a);
            break;
        }
        i++;
        if (!strcmp(a, "--model")) model_path = val;
        else if (!strcmp(a, "-o") || !strcmp(a, "--out")) out = val;
        else if (!strcmp(a, "--batch")) {
            free(batches);
            rc = cli_int_list(cmd, a, val, 1, 65536, &batches, &n_batches);
            if (!rc && n_batches > PROF_MAX_POINTS)
                rc = cli_usage_error(cmd, "--batch: at most %d sizes", PROF_MAX_POINTS);
        } else if (!strcmp(a, "--reps")) rc = cli_int(cmd, a, val, 1, 100000, &reps);
        else if (!strcmp(a, "--warmup")) rc = cli_int(cmd, a, val, 0, 100000, &warmup);
        else if (!strcmp(a, "--seed")) rc = cli_int(cmd, a, val, 0, INT64_MAX, &seed);
        else rc = cli_usage_error(cmd, "unknown option %s", a);
        (void)v;
    }
    if (!rc && !model_path) rc = cli_usage_error(cmd, "--model is required");
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
    rc = exec_profile(&m, model_path, batches, n_batches, (int)warmup, (int)reps, (uint64_t)seed,
                      &p, &e);
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
