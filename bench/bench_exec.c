/* bench.c - `cleave bench exec`: the executor's speed on this machine
 * (bench/exec.csv).
 *
 * Rows (column `row`):
 *   peak  single-core SGEMM peak (exec_gemm_peak) and OpenBLAS's kernel name;
 *   kernel a conv2d or linear layer's pass at a batch size on its own,
 *         called back to back (exec_profile_isolated), as the SGEMM peak is
 *         measured: median seconds, GFLOP/s of the fastest run (the model's
 *         FLOP counts, docs/formats.md) and its % of the peak, which is
 *         itself a fastest run, so a busy neighbour on the shared machine
 *         does not count against the kernels; gflops_median from the median
 *         run;
 *   layer the same pass inside training steps (the profile's clocks): what
 *         the step pays, cold code and operands included;
 *   total the conv2d and linear passes of a model together: their FLOPs over
 *         their median seconds;
 *   step  a sequential training step, measured (median) without the
 *         profiler's clocks, alternating with the profiler's clocked steps
 *         so both see the same machine load: its forward + backward part ("fbw"), the SGD
 *         update, and the full step with samples/s; the profile's prediction
 *         (fbw: the sum of every layer's fwd + bwd_in + bwd_w medians; update:
 *         the sum of the layers' update_s; step: both) and its relative error
 *         against each.
 * Targets (issue 5): conv and linear passes >= 60% of peak at batch >= 64
 * (the kernel rows; the layer rows are reported beside them); the profile
 * predicts the step within 5%.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "models/model.h"
#include "base/escape.h"
#include "base/fileio.h"
#include "exec/nn/gemm.h"
#include "exec/probe/profile_layers.h"

#define PCT_TARGET 60.0
#define PREDICT_TARGET 0.05

typedef struct bench_ctx {
    cl_out out;
    double peak;
    int below;          /* layer passes under the target, in a step */
    int below_kernel;   /* the same passes on their own */
    double worst_pred;  /* largest |prediction error| */
} bench_ctx;

static void layer_rows(bench_ctx *c, const model *m, int B, const exec_layer_time *t,
                       const char *row)
{
    double all_flops = 0, all_s = 0; /* conv2d and linear passes together */
    for (int l = 0; l < m->n_layers; l++) {
        const model_layer *ml = &m->layers[l];
        if (ml->kind != MODEL_CONV2D && ml->kind != MODEL_LINEAR) continue;
        const char *names[3] = {"fwd", "bwd_in", "bwd_w"};
        const double med[3] = {t[l].fwd_s, t[l].bwd_in_s, t[l].bwd_w_s};
        const double best[3] = {t[l].fwd_min, t[l].bwd_in_min, t[l].bwd_w_min};
        const double flops[3] = {ml->fwd_flops, ml->bwd_in_flops, ml->bwd_w_flops};
        printf("  %-6s %-6s %4d", ml->name, model_kind_name(ml->kind), B);
        for (int p = 0; p < 3; p++) {
            if (!(med[p] > 0) || !(flops[p] > 0)) {
                printf("  %-6s %17s", names[p], "-");
                continue;
            }
            double gf = flops[p] * B / best[p] / 1e9, gf_med = flops[p] * B / med[p] / 1e9;
            all_flops += flops[p] * B;
            all_s += med[p];
            double pct = 100 * gf * 1e9 / c->peak;
            int low = pct < PCT_TARGET;
            if (!strcmp(row, "layer")) c->below += low;
            else c->below_kernel += low;
            printf("  %-6s %5.1f %5.1f %4.0f%%%s", names[p], gf, gf_med, pct, low ? "<" : " ");
            char *mn = esc_csv(m->name), *ln = esc_csv(ml->name);
            fprintf(c->out.f, "%s,%s,%s,%s,%d,%s,%.9f,%.3f,%.2f,,,,%.3f\n", row, mn, ln,
                    model_kind_name(ml->kind), B, names[p], med[p], gf, pct, gf_med);
            free(mn);
            free(ln);
        }
        printf("\n");
    }
    double gf = all_flops / all_s / 1e9;
    printf("  %s batch %d, conv2d and linear together (FLOP-weighted, median runs): %.1f GFLOP/s, %.0f%% of peak\n",
           m->name, B, gf, 100 * gf * 1e9 / c->peak);
    fprintf(c->out.f, "total,%s,,conv2d+linear,%d,all,%.9f,%.3f,%.2f,,,,%.3f\n", m->name, B, all_s,
            gf, 100 * gf * 1e9 / c->peak, gf);
}

static int bench_model(bench_ctx *c, const char *path, const int *batches, int nb, int reps,
                       cl_err *e)
{
    model m;
    int rc = model_load(&m, path, e);
    if (rc) return rc;
    exec_layer_time *t = cl_calloc((size_t)m.n_layers, sizeof *t);
    for (int k = 0; k < nb && !rc; k++) {
        const int B = batches[k];
        exec_step_time st;
        if ((rc = exec_profile_isolated(&m, path, B, 10, reps, 1, t, e))) break;
        printf("  %s batch %d, each pass on its own (called back to back):\n", m.name, B);
        layer_rows(c, &m, B, t, "kernel");
        if ((rc = exec_profile_batch(&m, path, B, 3, reps, 1, t, &st, e))) break;
        printf("  %s batch %d, each pass inside training steps (the profile):\n", m.name, B);
        layer_rows(c, &m, B, t, "layer");
        double pred = 0, pred_min = 0, pred_upd = 0;
        for (int l = 0; l < m.n_layers; l++) {
            pred += t[l].fwd_s + t[l].bwd_in_s + t[l].bwd_w_s;
            pred_min += t[l].fwd_min + t[l].bwd_in_min + t[l].bwd_w_min;
            pred_upd += t[l].update_s;
        }
        const double pred_full = pred + pred_upd;
        double err = (pred - st.fbw_s) / st.fbw_s, err_full = (pred_full - st.step_s) / st.step_s;
        if (fabs(err_full) > c->worst_pred) c->worst_pred = fabs(err_full);
        if (fabs(err) > c->worst_pred) c->worst_pred = fabs(err);
        double err_min = (pred_min - st.fbw_min) / st.fbw_min;
        printf("  %s batch %d: %.0f samples/s; forward+backward %.3f ms, profile sum %.3f ms, error %+.1f%%%s;\n"
               "      fastest runs: %.3f ms against %.3f ms, %+.1f%%; full step with the SGD update (%.3f ms) %.3f ms,\n"
               "      profile with its update_s (%.3f ms) %.3f ms, error %+.1f%%%s\n",
               m.name, B, B / st.step_s, st.fbw_s * 1e3, pred * 1e3, 100 * err,
               fabs(err) > PREDICT_TARGET ? " (over 5%)" : "", st.fbw_min * 1e3, pred_min * 1e3,
               100 * err_min, st.update_s * 1e3, st.step_s * 1e3, pred_upd * 1e3, pred_full * 1e3,
               100 * err_full, fabs(err_full) > PREDICT_TARGET ? " (over 5%)" : "");
        fprintf(c->out.f, "step,%s,,forward+backward,%d,fbw,%.9f,,,,%.9f,%.5f,\n", m.name, B,
                st.fbw_s, pred, err);
        fprintf(c->out.f, "step,%s,,full step,%d,step,%.9f,,,%.1f,%.9f,%.5f,\n", m.name, B,
                st.step_s, B / st.step_s, pred_full, err_full);
        fprintf(c->out.f, "step,%s,,sgd update,%d,update,%.9f,,,,%.9f,%.5f,\n", m.name, B,
                st.update_s, pred_upd, (pred_upd - st.update_s) / st.update_s);
        fprintf(c->out.f, "step,%s,,forward+backward fastest,%d,fbw_min,%.9f,,,,%.9f,%.5f,\n",
                m.name, B, st.fbw_min, pred_min, err_min);
    }
    free(t);
    model_free(&m);
    return rc;
}

int exec_bench(const char *outdir, int quick)
{
    cl_err e = {0};
    bench_ctx c = {0};
    char path[4096];
    int rc = bench_csv_open(&c.out, path, sizeof path, outdir, "exec",
                            "row,model,layer,kind,batch,pass,seconds,gflops,pct_of_peak,samples_per_s,predicted_s,"
                            "error,gflops_median");
    if (rc) return rc;
    int n;
    c.peak = exec_gemm_peak(quick ? 0.3 : 1.5, &n);
    char cpu[128];
    exec_cpu_name(cpu, sizeof cpu);
    printf("  SGEMM peak %.1f GFLOP/s on one core (%s), OpenBLAS kernel %s, best at n = %d\n",
           c.peak / 1e9, cpu, exec_blas_corename(), n);
    fprintf(c.out.f, "peak,,%s,sgemm,%d,,,%.3f,100,,,,\n", exec_blas_corename(), n, c.peak / 1e9);
    static const int full[] = {64, 256}, small[] = {64};
    const int *batches = quick ? small : full, nb = quick ? 1 : 2, reps = quick ? 5 : 25;
    static const char *const models[] = {"models/fmnist-mlp.json", "models/fmnist-cnn.json"};
    printf("  per pass: GFLOP/s of the fastest run, of the median run, fastest as %% of peak (< under %.0f%%)\n",
           PCT_TARGET);
    for (size_t i = 0; i < sizeof models / sizeof models[0] && !rc; i++)
        rc = bench_model(&c, models[i], batches, nb, reps, &e);
    if (rc) {
        cl_out_abort(&c.out);
        fprintf(stderr, "cleave: %s\n", e.msg);
        return rc;
    }
    if ((rc = cl_out_commit(&c.out, &e))) {
        fprintf(stderr, "cleave: %s\n", e.msg);
        return rc;
    }
    printf("  targets: %d conv/linear passes under %.0f%% of peak on their own (%d inside steps); worst step prediction error %.1f%% (target 5%%); wrote %s\n",
           c.below_kernel, PCT_TARGET, c.below, 100 * c.worst_pred, path);
    return 0;
}
