/* test_fma_peak.c - the FMA peak probe (exec/probe/fma_peak.h) against what
 * can be known without a clock: the loop's FMA count (from its results), the
 * widths against the compiler's cpuid checks, and the measured peak within
 * physical bounds; and the executor's kernel dispatch by feature. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "base/spawn.h"
#include "exec/nn/gemm.h"
#include "exec/nn/kern.h"
#include "exec/probe/fma_peak.h"
#include "exec/probe/steady.h"
#include "test.h"
#include "test_csv.h"

static int widths(int w[3])
{
    exec_cpu_feat f;
    exec_cpu_features(&f);
    return exec_fma_widths(&f, w);
}

/* The closed form: chains x (width / 32) lanes x 2 operations per iteration. */
static void test_flop_count(void)
{
    CU_ASSERT_EQUAL(exec_fma_flops(512, 1000), 2.0 * 16 * 12 * 1000);
    CU_ASSERT_EQUAL(exec_fma_flops(256, 7), 2.0 * 8 * 12 * 7);
    CU_ASSERT_EQUAL(exec_fma_flops(128, 0), 0);
}

/* With mul = add = 1 every FMA adds 1 to one lane of one accumulator, so the
 * sum of all lanes is the start values plus the number of lane FMAs the loop
 * really did: half the FLOPs exec_fma_flops credits it with. */
static void test_loop_does_the_counted_fmas(void)
{
    int w[3], n = widths(w);
    const long iters[] = {0, 1, 13, 1000, 65536};
    for (int k = 0; k < n; k++) {
        double lanes = w[k] / 32, start = lanes * (EXEC_FMA_CHAINS - 1) * EXEC_FMA_CHAINS / 2;
        for (size_t i = 0; i < sizeof iters / sizeof iters[0]; i++) {
            double secs = -1;
            double got = exec_fma_run(w[k], iters[i], 1.0f, 1.0f, &secs);
            CU_ASSERT_EQUAL(got - start, exec_fma_flops(w[k], iters[i]) / 2);
            CU_ASSERT(secs >= 0);
        }
        /* mul and add are really used: acc = acc * 2 + 0 doubles the start */
        CU_ASSERT_EQUAL(exec_fma_run(w[k], 3, 2.0f, 0.0f, NULL), 8 * start);
    }
    CU_ASSERT_EQUAL(exec_fma_run(384, 10, 1, 1, NULL), -1);
    CU_ASSERT_EQUAL(exec_fma_run(w[0] ? w[0] : 128, -1, 1, 1, NULL), -1);
}

/* The widths are exactly what the compiler's cpuid checks allow. */
static void test_widths_match_cpuid(void)
{
    int w[3], n = widths(w);
    int fma = 0, avx2 = 0, avx512 = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    fma = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx");
    avx2 = fma && __builtin_cpu_supports("avx2");
    avx512 = fma && __builtin_cpu_supports("avx512f");
#endif
    CU_ASSERT_EQUAL(n, fma + avx2 + avx512);
    int seen[3] = {0, 0, 0};
    for (int k = 0; k < n; k++) {
        seen[0] += w[k] == 128;
        seen[1] += w[k] == 256;
        seen[2] += w[k] == 512;
        if (k) CU_ASSERT(w[k] > w[k - 1]);
    }
    CU_ASSERT_EQUAL(seen[0], fma);
    CU_ASSERT_EQUAL(seen[1], avx2);
    CU_ASSERT_EQUAL(seen[2], avx512);
    /* a CPU without a feature gets no width for it, whatever else it has */
    exec_cpu_feat none = {.fma = 0, .avx2 = 0, .avx512f = 0}, only = {.fma = 1, .avx512f = 1};
    CU_ASSERT_EQUAL(exec_fma_widths(&none, w), 0);
    CU_ASSERT_EQUAL(exec_fma_widths(&only, w), 2);
    CU_ASSERT(w[0] == 128 && w[1] == 512);
}

/* The peak is physical (under 2 x 16 lanes x 2 ports x 6 GHz), is the best
 * width's, and is not below half of what OpenBLAS's
 * SGEMM reaches (an SGEMM does no more than the FMA units allow).  Bounds
 * only: no timing target. */
static void test_peak_bounds(void)
{
    int w[3], n = widths(w);
    exec_fma_peak p;
    exec_fma_measure(0.3, &p);
    if (n == 0) {
        CU_ASSERT_EQUAL(p.flops, 0);
        CU_ASSERT_EQUAL(p.width, 0);
        return;
    }
    CU_ASSERT(p.flops > 0 && p.flops < 2.0 * 16 * 2 * 6e9);
    /* the peak is the best width's, and only widths the CPU has were run */
    int slot = p.width == 128 ? 0 : p.width == 256 ? 1 : p.width == 512 ? 2 : -1;
    CU_ASSERT_FATAL(slot >= 0);
    CU_ASSERT_EQUAL(p.at[slot], p.flops);
    for (int s = 0; s < 3; s++) {
        CU_ASSERT(p.at[s] <= p.flops);
        int has = 0;
        for (int k = 0; k < n; k++) has |= w[k] == 128 << s;
        CU_ASSERT_EQUAL(p.at[s] > 0, has);
    }
    double sgemm = exec_gemm_peak(0.3, NULL);
    CU_ASSERT(p.flops >= 0.5 * sgemm);
}

/* The steadiness probe: refuses thread counts it cannot run, times at least
 * one slice per thread, sizes slices from its warm-up (no faster than
 * 0.2 ms: a warm-up slowed by other jobs only makes them longer), and its
 * quantiles are in order; exec_steady_ok is the documented threshold.
 * Bounds only: how steady this machine is is not a test's business. */
static void test_steady(void)
{
    exec_steady s;
    CU_ASSERT_EQUAL(exec_steady_measure(0.05, 0, &s), -1);
    CU_ASSERT_EQUAL(s.slices, 0);
    CU_ASSERT_EQUAL(exec_steady_measure(0.05, 65, &s), -1);
    int w[3];
    if (widths(w) == 0) {
        CU_ASSERT_EQUAL(exec_steady_measure(0.05, 2, &s), -1);
        return;
    }
    CU_ASSERT_EQUAL_FATAL(exec_steady_measure(0.05, 2, &s), 0);
    CU_ASSERT_EQUAL(s.threads, 2);
    CU_ASSERT(s.slices >= 2);
    CU_ASSERT(s.slice_s >= 2e-4);
    CU_ASSERT(s.slow50 >= 0 && s.slow50 <= s.slow90 && s.slow90 <= s.slow_max);
    CU_ASSERT_EQUAL(exec_steady_ok(&s), s.slow90 <= EXEC_STEADY_MAX_SLOW90);
    exec_steady t = {.threads = 1, .slices = 10, .slice_s = 1e-3, .slow90 = 0.051};
    CU_ASSERT_FALSE(exec_steady_ok(&t));
    t.slow90 = 0.049;
    CU_ASSERT_TRUE(exec_steady_ok(&t));
    t.slices = 0;
    CU_ASSERT_FALSE(exec_steady_ok(&t));
}

/* The executor's own kernels run exactly when the CPU has the features
 * they are compiled for (kern.h), whoever made it. */
static void test_dispatch_by_feature(void)
{
    int want = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    want = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("fma");
#endif
    CU_ASSERT_EQUAL(exec_kern_avx512(), want);
    /* the OpenBLAS kernel wanted for this CPU is the pure choice on its features */
    int avx512 = 0, avx2_fma = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    avx512 = want && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512cd");
    avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    const char *w = exec_blas_wanted(),
               *ref = exec_blas_better_core(exec_blas_corename(), avx512, avx2_fma);
    CU_ASSERT((w == NULL) == (ref == NULL));
    if (w && ref) CU_ASSERT_STRING_EQUAL(w, ref);
    /* OpenBLAS kernel choice: by features, with the same corename */
    CU_ASSERT_STRING_EQUAL(exec_blas_better_core("Zen", 1, 1), "SkylakeX");
    CU_ASSERT_PTR_NULL(exec_blas_better_core("Zen", 0, 1));
    CU_ASSERT_PTR_NULL(exec_blas_better_core("Haswell", 0, 1));
}

/* `cleave bench --quick exec`: every row has the header's columns, the
 * machine row names the widest width the CPU has, and each pass's
 * percentages and `met` follow from its GFLOP/s and the two references
 * recomputed here; PyTorch rows exactly when python3 imports torch. */
static void test_bench_exec_csv(void)
{
    char dir_csv[512];
    char *dir = test_scratch(sizeof dir_csv, "exec.csv", dir_csv, NULL);
    char args[600], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "bench --quick --out %s exec", dir);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, &err), 0);
    test_csv c;
    CU_ASSERT_EQUAL_FATAL(test_csv_read(dir_csv, &c), 0);
    CU_ASSERT_EQUAL(c.n_cols, 20);
    CU_ASSERT(!c.ragged);
    int w[3], n = widths(w), n_fma = 0, n_sgemm = 0, n_pass = 0, n_torch = 0;
    double fma = NAN, sgemm = NAN, bits = NAN, best = 0, best_bits = 0;
    int n_width = 0;
    for (int r = 0; r < c.n_rows; r++) {
        const char *row = test_csv_get(&c, r, "row");
        if (!strcmp(row, "fma")) {
            n_fma++;
            fma = test_csv_num(&c, r, "fma_gflops");
            bits = test_csv_num(&c, r, "vector_bits");
            CU_ASSERT_STRING_EQUAL(test_csv_get(&c, r, "blas_core"), exec_blas_corename());
            const char *ct = getenv("OPENBLAS_CORETYPE");
            CU_ASSERT_STRING_EQUAL(test_csv_get(&c, r, "coretype"), ct ? ct : "");
            CU_ASSERT(*test_csv_get(&c, r, "cpu"));
        } else if (!strcmp(row, "fma_width")) {
            n_width++;
            if (test_csv_num(&c, r, "gflops") > best) {
                best = test_csv_num(&c, r, "gflops");
                best_bits = test_csv_num(&c, r, "vector_bits");
            }
        } else if (!strcmp(row, "sgemm")) {
            n_sgemm++;
            sgemm = test_csv_num(&c, r, "gflops");
        }
    }
    CU_ASSERT_EQUAL_FATAL(n_fma, 1);
    CU_ASSERT_EQUAL_FATAL(n_sgemm, 1);
    CU_ASSERT(fma > 0 && sgemm > 0);
    /* one width row per width the CPU has; the peak is the best of them */
    CU_ASSERT_EQUAL(n_width, n);
    CU_ASSERT_EQUAL(bits, best_bits);
    CU_ASSERT_EQUAL(fma, best);
    for (int r = 0; r < c.n_rows; r++) {
        const char *row = test_csv_get(&c, r, "row");
        if (!strcmp(row, "torch")) {
            n_torch++;
            CU_ASSERT(test_csv_num(&c, r, "samples_per_s") > 0);
        }
        if (strcmp(row, "kernel") && strcmp(row, "layer")) continue;
        n_pass++;
        double gf = test_csv_num(&c, r, "gflops"), pct = test_csv_num(&c, r, "pct_of_peak");
        CU_ASSERT(fabs(pct - 100 * gf / fma) < 0.02 + 1e-4 * pct);
        CU_ASSERT(fabs(test_csv_num(&c, r, "pct_of_sgemm") - 100 * gf / sgemm) < 0.02 + 1e-3 * pct);
        CU_ASSERT_EQUAL(test_csv_num(&c, r, "met"), pct >= 70);
    }
    /* mlp: 3 linears, 8 passes; cnn: 2 conv2d + 2 linear, 11; each on
     * its own and in steps, at batch 64; the ViT's linear products on
     * their own: patch (forward and weight gradient: the first layer),
     * qkv, out, mlp fc1, fc2 and the head (three passes each), 17 */
    CU_ASSERT_EQUAL(n_pass, 2 * (8 + 11) + 17);
    /* the ViT's step shares: attention, mlp and the rest partition the
     * profile's forward+backward (its step row's predicted_s); the
     * attention layers' products are a fourth row beside them */
    double vit_step = NAN, parts = 0;
    int n_share = 0;
    for (int r = 0; r < c.n_rows; r++) {
        const char *row = test_csv_get(&c, r, "row");
        if (strcmp(test_csv_get(&c, r, "model"), "fmnist-vit")) continue;
        if (!strcmp(row, "step")) vit_step = test_csv_num(&c, r, "predicted_s");
        if (strcmp(row, "share")) continue;
        n_share++;
        CU_ASSERT(test_csv_num(&c, r, "seconds") > 0);
        if (strcmp(test_csv_get(&c, r, "layer"), "attention linear products"))
            parts += test_csv_num(&c, r, "seconds");
    }
    CU_ASSERT_EQUAL(n_share, 4);
    CU_ASSERT(vit_step > 0 && fabs(parts - vit_step) < 1e-8 + 1e-6 * vit_step);
    char *const probe[] = {"/usr/bin/python3", "-c", "import torch", NULL};
    int st = cl_spawn_wait(probe, "/dev/null");
    int have = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    CU_ASSERT_EQUAL(n_torch, have ? 2 : 0);
    if (!have) CU_ASSERT_PTR_NOT_NULL(strstr(out, "PyTorch reference skipped: "));
    test_csv_free(&c);
    free(out);
    free(err);
    test_rmtree(dir);
}

/* tools/torch_ref.py without torch on its path (python3 -S leaves out the
 * site packages): exit 3 and a reason, which the bench prints. */
static void test_torch_ref_absent(void)
{
    char path[512];
    char *dir = test_scratch(sizeof path, "out.txt", path, NULL);
    char *const argv[] = {"/usr/bin/python3", "-S", "tools/torch_ref.py", "models/fmnist-mlp.json",
                          "64", "1", NULL};
    int st = cl_spawn_wait(argv, path);
    if (st == -1) { /* no python3 at all: nothing to check */
        test_rmtree(dir);
        return;
    }
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    char *text = test_slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(strncmp(text, "no torch", 8), 0);
    free(text);
    test_rmtree(dir);
}

TEST_SUITE(fma_peak)
{
    test_add_suite("fma_peak");
    test_add("FLOP count closed form", test_flop_count);
    test_add("the loop does the FMAs it is credited with", test_loop_does_the_counted_fmas);
    test_add("widths match the cpuid checks", test_widths_match_cpuid);
    test_add("measured peak within physical bounds and above SGEMM / 2", test_peak_bounds);
    test_add("host steadiness probe: bounds, order, threshold", test_steady);
    test_add("kernel dispatch by CPU feature", test_dispatch_by_feature);
    test_add("bench exec CSV: percentages of the FMA peak and SGEMM", test_bench_exec_csv);
    test_add("torch_ref.py says when torch is absent", test_torch_ref_absent);
}
