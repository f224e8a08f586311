/* bench.c - `cleave bench exec`: the executor's speed on this machine
 * (bench/exec.csv).
 *
 * The peak every pass is judged against is the core's own: the FMA
 * throughput of a register-only loop at each vector width the CPU has
 * (exec/probe/fma_peak.h), best run.  OpenBLAS's SGEMM rate is a second
 * reference only: it is whatever kernel OpenBLAS chose (OPENBLAS_CORETYPE
 * can pick an AVX2 kernel on an AVX-512 core), so it says nothing about
 * what the core can do.
 *
 * Rows (column `row`):
 *   fma    the FMA peak (gflops; pct_of_sgemm: its ratio to SGEMM), with the
 *          machine's labels: cpu model, vector width that reached it, FMA
 *          peak, OpenBLAS kernel, OPENBLAS_CORETYPE (empty when unset);
 *   fma_width  the best rate at each width the CPU has (kind fma128, ...);
 *   sgemm  single-core SGEMM (exec_gemm_peak): OpenBLAS's kernel name, best
 *          size n (batch column), GFLOP/s, % of the FMA peak;
 *   kernel a conv2d or linear layer's pass at a batch size on its own,
 *         called back to back (exec_profile_isolated), as the peaks are
 *         measured: median seconds, GFLOP/s of the fastest run (the model's
 *         FLOP counts, docs/formats.md), its % of the FMA peak and of
 *         SGEMM's rate, met (1 when >= the target); gflops_median from the
 *         median run;
 *         The ViT's linear products (inside its patch_embed, attention and
 *         mlp layers) get kernel rows of their own, layer names like
 *         attn1.qkv (bench_exec_vit.c);
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
 *         against each;
 *   share the vision transformer's training step split into its attention
 *         layers, mlp layers and the rest, and the attention layers' linear
 *         products on their own (bench_exec_vit.c says how); beside a step
 *         row (forward+backward) whose predicted_s the shares divide;
 *   torch the same model trained by PyTorch at batch 64 on one core
 *         (tools/torch_ref.py: synthetic data, SGD with momentum): median
 *         samples/s, the torch version in `layer`; no row (the reason
 *         printed) when /usr/bin/python3 cannot import torch.
 * Targets (issue 17): conv and linear passes >= 70% of the FMA peak at
 * batch >= 64, forward and backward (judged on the kernel rows; the layer
 * rows are reported beside them); the profile predicts the step within 5%.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "models/model.h"
#include "base/escape.h"
#include "base/fileio.h"
#include "base/spawn.h"
#include "exec/nn/gemm.h"
#include "exec/probe/fma_peak.h"
#include "exec/probe/profile_layers.h"

#define PCT_TARGET 70.0
#define PREDICT_TARGET 0.05
#define TORCH_SCRIPT "tools/torch_ref.py"
#define TORCH_BATCH 64

typedef struct bench_ctx {
    cl_out out;
    double peak;        /* the FMA peak, FLOP/s */
    double sgemm;       /* OpenBLAS SGEMM, FLOP/s */
    int below;          /* layer passes under the target, in a step */
    int below_kernel;   /* the same passes on their own */
    int n_kernel;       /* passes judged */
    double worst_pred;  /* largest |prediction error| */
    double step_sps[2]; /* cleave's samples/s at TORCH_BATCH, per model */
} bench_ctx;

static void layer_rows(bench_ctx *c, const model *m, int B, const exec_layer_time *t,
                       const char *row)
{
    double all_flops = 0, all_s = 0; /* conv2d and linear passes together */
    const int kernel = strcmp(row, "layer") != 0;
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
                printf("  %-6s %24s", names[p], "-");
                continue;
            }
            double gf = flops[p] * B / best[p] / 1e9, gf_med = flops[p] * B / med[p] / 1e9;
            all_flops += flops[p] * B;
            all_s += med[p];
            double pct = 100 * gf * 1e9 / c->peak, pct_blas = 100 * gf * 1e9 / c->sgemm;
            int met = pct >= PCT_TARGET;
            if (!kernel) c->below += !met;
            else {
                c->below_kernel += !met;
                c->n_kernel++;
            }
            printf("  %-6s %5.1f %5.1f %3.0f%%%s %3.0f%%", names[p], gf, gf_med, pct,
                   met ? " " : "<", pct_blas);
            char *mn = esc_csv(m->name), *ln = esc_csv(ml->name);
            fprintf(c->out.f, "%s,%s,%s,%s,%d,%s,%.9f,%.3f,%.2f,,,,%.3f,%.2f,%d,,,,,\n", row, mn,
                    ln, model_kind_name(ml->kind), B, names[p], med[p], gf, pct, gf_med, pct_blas,
                    met);
            free(mn);
            free(ln);
        }
        printf("\n");
    }
    double gf = all_flops / all_s / 1e9;
    printf("  %s batch %d, conv2d and linear together (FLOP-weighted, median runs): %.1f GFLOP/s, %.0f%% of the FMA peak, %.0f%% of SGEMM\n",
           m->name, B, gf, 100 * gf * 1e9 / c->peak, 100 * gf * 1e9 / c->sgemm);
    fprintf(c->out.f, "total,%s,,conv2d+linear,%d,all,%.9f,%.3f,%.2f,,,,%.3f,%.2f,,,,,,\n",
            m->name, B, all_s, gf, 100 * gf * 1e9 / c->peak, gf, 100 * gf * 1e9 / c->sgemm);
}

static int bench_model(bench_ctx *c, int idx, const char *path, const int *batches, int nb, int reps,
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
        if (B == TORCH_BATCH) c->step_sps[idx] = B / st.step_s;
        printf("  %s batch %d: %.0f samples/s; forward+backward %.3f ms, profile sum %.3f ms, error %+.1f%%%s;\n"
               "      fastest runs: %.3f ms against %.3f ms, %+.1f%%; full step with the SGD update (%.3f ms) %.3f ms,\n"
               "      profile with its update_s (%.3f ms) %.3f ms, error %+.1f%%%s\n",
               m.name, B, B / st.step_s, st.fbw_s * 1e3, pred * 1e3, 100 * err,
               fabs(err) > PREDICT_TARGET ? " (over 5%)" : "", st.fbw_min * 1e3, pred_min * 1e3,
               100 * err_min, st.update_s * 1e3, st.step_s * 1e3, pred_upd * 1e3, pred_full * 1e3,
               100 * err_full, fabs(err_full) > PREDICT_TARGET ? " (over 5%)" : "");
        fprintf(c->out.f, "step,%s,,forward+backward,%d,fbw,%.9f,,,,%.9f,%.5f,,,,,,,,\n", m.name, B,
                st.fbw_s, pred, err);
        fprintf(c->out.f, "step,%s,,full step,%d,step,%.9f,,,%.1f,%.9f,%.5f,,,,,,,,\n", m.name, B,
                st.step_s, B / st.step_s, pred_full, err_full);
        fprintf(c->out.f, "step,%s,,sgd update,%d,update,%.9f,,,,%.9f,%.5f,,,,,,,,\n", m.name, B,
                st.update_s, pred_upd, (pred_upd - st.update_s) / st.update_s);
        fprintf(c->out.f, "step,%s,,forward+backward fastest,%d,fbw_min,%.9f,,,,%.9f,%.5f,,,,,,,,\n",
                m.name, B, st.fbw_min, pred_min, err_min);
    }
    free(t);
    model_free(&m);
    return rc;
}

/* PyTorch training the same model (tools/torch_ref.py, started without a
 * shell); its one output line parsed.  Returns 0 with *sps and the version
 * in ver, or 1 with the reason in why (the row is skipped). */
static int torch_ref(const char *model_path, int steps, double *sps, char *ver, size_t vcap,
                     char *why, size_t wcap)
{
    if (access(TORCH_SCRIPT, R_OK) != 0) {
        snprintf(why, wcap, "%s not found (run from the repository root)", TORCH_SCRIPT);
        return 1;
    }
    char *tmp = NULL;
    int fd = cl_tmp_create("/tmp/cleave-torch", &tmp);
    if (fd < 0) {
        snprintf(why, wcap, "cannot create a temporary file in /tmp");
        return 1;
    }
    close(fd);
    char batch[16], nsteps[16];
    snprintf(batch, sizeof batch, "%d", TORCH_BATCH);
    snprintf(nsteps, sizeof nsteps, "%d", steps);
    char *argv[] = {"/usr/bin/python3", TORCH_SCRIPT, (char *)model_path, batch, nsteps, NULL};
    int st = cl_spawn_wait(argv, tmp);
    char *text = NULL;
    size_t len = 0;
    cl_err e = {0};
    int rd = cl_read_file_flags(tmp, 1 << 20, CL_IN_INTERNAL, &text, &len, &e);
    unlink(tmp);
    free(tmp);
    int ok = 0;
    if (st == -1) snprintf(why, wcap, "/usr/bin/python3 cannot be started");
    else if (rd != CL_OK) snprintf(why, wcap, "cannot read the script's output");
    else {
        /* the last line the script printed: its result, or why it failed */
        char *line = text, *nl;
        while ((nl = strchr(line, '\n')) && nl[1]) line = nl + 1;
        line[strcspn(line, "\n")] = 0;
        double best;
        char v[64];
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
            sscanf(line, "samples_per_s %lf %lf torch %63s", sps, &best, v) == 3 && *sps > 0) {
            snprintf(ver, vcap, "%s", v);
            ok = 1;
        } else
            snprintf(why, wcap, "%.200s", *line ? line : "the script printed nothing");
    }
    free(text);
    return !ok;
}

static void torch_rows(bench_ctx *c, const char *const *models, int n, int quick)
{
    for (int i = 0; i < n; i++) {
        double sps;
        char ver[64], why[256];
        if (torch_ref(models[i], quick ? 10 : 50, &sps, ver, sizeof ver, why, sizeof why)) {
            printf("  PyTorch reference skipped: %s\n", why);
            return;
        }
        model m;
        cl_err e = {0};
        char name[128] = "?";
        if (model_load(&m, models[i], &e) == CL_OK) {
            snprintf(name, sizeof name, "%s", m.name);
            model_free(&m);
        }
        double mine = c->step_sps[i];
        printf("  PyTorch %s, one core, %s batch %d: %.0f samples/s (median step); cleave %.0f, %.1fx\n",
               ver, name, TORCH_BATCH, sps, mine, mine > 0 ? mine / sps : 0);
        char *mn = esc_csv(name), *vn = esc_csv(ver);
        fprintf(c->out.f, "torch,%s,%s,pytorch,%d,step,%.9f,,,%.1f,,,,,,,,,,\n", mn, vn,
                TORCH_BATCH, TORCH_BATCH / sps, sps);
        free(mn);
        free(vn);
    }
}

int exec_bench(const char *outdir, int quick)
{
    cl_err e = {0};
    bench_ctx c = {0};
    char path[4096];
    int rc = bench_csv_open(&c.out, path, sizeof path, outdir, "exec",
                            "row,model,layer,kind,batch,pass,seconds,gflops,pct_of_peak,samples_per_s,predicted_s,"
                            "error,gflops_median,pct_of_sgemm,met,cpu,vector_bits,fma_gflops,blas_core,"
                            "coretype");
    if (rc) return rc;
    exec_fma_peak fp;
    exec_fma_measure(quick ? 0.3 : 1.5, &fp);
    int n;
    c.sgemm = exec_gemm_peak(quick ? 0.3 : 1.5, &n);
    c.peak = fp.flops > 0 ? fp.flops : c.sgemm; /* no FMA (not x86-64): SGEMM is all there is */
    exec_cpu_feat f;
    exec_cpu_features(&f);
    char cpu[128];
    exec_cpu_name(cpu, sizeof cpu);
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    printf("  FMA peak %.1f GFLOP/s on one core (%s, %s), %d-bit vectors (",
           fp.flops / 1e9, cpu, f.vendor[0] ? f.vendor : "vendor unknown", fp.width);
    for (int s = 0; s < 3; s++)
        if (fp.at[s] > 0) printf("%s%d: %.1f", s && fp.at[s - 1] > 0 ? ", " : "", 128 << s,
                                 fp.at[s] / 1e9);
    char *ct = esc_term(coretype ? coretype : "unset"); /* the environment's text, to a terminal */
    printf(")\n  OpenBLAS SGEMM %.1f GFLOP/s (%.0f%% of the FMA peak), kernel %s, OPENBLAS_CORETYPE %s, best at n = %d\n",
           c.sgemm / 1e9, 100 * c.sgemm / c.peak, exec_blas_corename(), ct, n);
    free(ct);
    const char *better = exec_blas_wanted();
    if (better)
        printf("  note: this CPU runs OpenBLAS's faster %s kernel, but %s the %s one: passes through\n"
               "  OpenBLAS are bound by it (unset OPENBLAS_CORETYPE and cleave picks %s itself)\n",
               better, coretype ? "OPENBLAS_CORETYPE selects" : "OpenBLAS loaded", exec_blas_corename(),
               better);
    char *ec = esc_csv(cpu), *ek = esc_csv(exec_blas_corename()),
         *et = esc_csv(coretype ? coretype : "");
    fprintf(c.out.f, "fma,,,fma%d,,,,%.3f,100,,,,,%.2f,,%s,%d,%.3f,%s,%s\n", fp.width,
            fp.flops / 1e9, 100 * fp.flops / c.sgemm, ec, fp.width, fp.flops / 1e9, ek, et);
    for (int s = 0; s < 3; s++)
        if (fp.at[s] > 0)
            fprintf(c.out.f, "fma_width,,,fma%d,,,,%.3f,%.2f,,,,,%.2f,,,%d,,,\n", 128 << s,
                    fp.at[s] / 1e9, 100 * fp.at[s] / c.peak, 100 * fp.at[s] / c.sgemm, 128 << s);
    fprintf(c.out.f, "sgemm,,%s,sgemm,%d,,,%.3f,%.2f,,,,,100,,%s,,,%s,%s\n", ek, n,
            c.sgemm / 1e9, 100 * c.sgemm / c.peak, ec, ek, et);
    free(ec);
    free(ek);
    free(et);
    static const int full[] = {64, 256}, small[] = {64};
    const int *batches = quick ? small : full, nb = quick ? 1 : 2, reps = quick ? 5 : 25;
    static const char *const models[] = {"models/fmnist-mlp.json", "models/fmnist-cnn.json"};
    const int n_models = (int)(sizeof models / sizeof models[0]);
    printf("  per pass: GFLOP/s of the fastest run, of the median run, fastest as %% of the FMA peak\n"
           "  (< under the %.0f%% target), and as %% of OpenBLAS SGEMM\n", PCT_TARGET);
    for (int i = 0; i < n_models && !rc; i++)
        rc = bench_model(&c, i, models[i], batches, nb, reps, &e);
    if (!rc)
        rc = exec_bench_vit(c.out.f, "models/fmnist-vit.json", c.peak, c.sgemm, batches, nb, reps,
                            &c.below_kernel, &c.n_kernel, &e);
    if (!rc) torch_rows(&c, models, n_models, quick);
    if (rc) {
        cl_out_abort(&c.out);
        fprintf(stderr, "cleave: %s\n", e.msg);
        return rc;
    }
    if ((rc = cl_out_commit(&c.out, &e))) {
        fprintf(stderr, "cleave: %s\n", e.msg);
        return rc;
    }
    printf("  target (>= %.0f%% of the FMA peak, batch >= 64, on their own): %s, %d of %d conv/linear passes under it (%d inside steps); worst step prediction error %.1f%% (target 5%%); wrote %s\n",
           PCT_TARGET, c.below_kernel ? "NOT met" : "met", c.below_kernel, c.n_kernel, c.below,
           100 * c.worst_pred, path);
    return 0;
}
