/* test_compute.c - the shape-aware kernel model (profiles/gemm.h) and the
 * transformer layers priced with it (profiles/tfm_time.h), against tile and
 * wave counts worked by hand, closed forms of bytes over bandwidth written
 * out here, monotonicity and the large-GEMM limit (docs/compute.md). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/transformer.h"
#include "profiles/cluster.h"
#include "profiles/gemm.h"
#include "profiles/tfm_time.h"
#include "test.h"

static cluster_devtype preset(const char *name)
{
    cluster_devtype t;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cluster_devtype_preset("profiles/devices.json", name, &t, &e), CL_OK);
    return t;
}

/* 4 SMs, 128 x 64 tiles, 1 TFLOP/s fp16 at efficiency 0.5, memory and
 * launches free: times are the wave formula alone. */
static cluster_devtype toy(void)
{
    cluster_devtype t = {.name = "toy", .peak_fp32_flops = 1e11, .peak_fp16_flops = 1e12,
                         .mem_bytes = 1 << 30, .mem_bw_Bps = 1e30, .efficiency = 1};
    t.kernels = (cluster_kernels){.sms = 4, .tile_m = 128, .tile_n = 64, .gemm_efficiency = 0.5,
                                  .attention_efficiency = 0.25, .launch_s = 0};
    return t;
}

/* By hand on the toy: a 640 x 64 output is 5 tiles of 128 x 64 (the other
 * orientation, 64 x 128, needs 10 x 1 = 10), one more than the 4 SMs: two
 * waves, each 2 x 128 x 64 x k FLOPs on one SM at 1e12 x 0.5 / 4 FLOP/s.
 * 512 x 64 is 4 tiles, one wave: half the time for 4/5 of the work. */
static void test_waves_by_hand(void)
{
    cluster_devtype t = toy();
    double k = 1000, wave = 2.0 * 128 * 64 * k / (1e12 * 0.5 / 4); /* 1.31072e-4 s */
    CU_ASSERT_EQUAL(prof_gemm_waves(&t.kernels, 640, 64, 1), 2);
    CU_ASSERT_EQUAL(prof_gemm_waves(&t.kernels, 512, 64, 1), 1);
    CU_ASSERT(test_rel(prof_gemm_s(&t, 2, 640, 64, k, 1), 2 * wave) < 1e-12);
    CU_ASSERT(test_rel(prof_gemm_s(&t, 2, 512, 64, k, 1), wave) < 1e-12);
    /* a 64 x 640 output takes the tile the other way round: 5 tiles too */
    CU_ASSERT_EQUAL(prof_gemm_waves(&t.kernels, 64, 640, 1), 2);
    /* one row past a tile pads a whole tile: 129 x 64 is 2 tiles, one wave,
     * as long as 256 x 64 */
    CU_ASSERT(test_rel(prof_gemm_s(&t, 2, 129, 64, k, 1), wave) < 1e-12);
    /* a batch of 3 GEMMs of 2 tiles each: 6 tiles, 2 waves */
    CU_ASSERT_EQUAL(prof_gemm_waves(&t.kernels, 256, 64, 3), 2);
    /* fp32 operands run against the fp32 peak (10x lower) */
    CU_ASSERT(test_rel(prof_gemm_s(&t, 4, 512, 64, k, 1), 10 * wave) < 1e-12);

    /* the A100 preset: 108 SMs and 256 x 128 tiles; 109 tiles along m (the
     * other orientation needs 218) is one tile past a full wave: twice the
     * compute of 108 tiles (memory made free to isolate the compute term) */
    cluster_devtype a = preset("A100-80GB");
    CU_ASSERT_EQUAL(a.kernels.sms, 108);
    a.mem_bw_Bps = 1e30;
    a.kernels.launch_s = 0;
    CU_ASSERT_EQUAL(prof_gemm_waves(&a.kernels, 256 * 109, 128, 1), 2);
    CU_ASSERT_EQUAL(prof_gemm_waves(&a.kernels, 256 * 108, 128, 1), 1);
    double one = 2.0 * 256 * 128 * 4096 / (312e12 * a.kernels.gemm_efficiency / 108);
    CU_ASSERT(test_rel(prof_gemm_s(&a, 2, 256 * 108, 128, 4096, 1), one) < 1e-12);
    CU_ASSERT(test_rel(prof_gemm_s(&a, 2, 256 * 109, 128, 4096, 1), 2 * one) < 1e-12);
}

/* Time never falls when any dimension grows (tiles, waves, bytes and the
 * launch only grow), on the A100 preset with its memory and launch terms,
 * over a grid that crosses tile and wave boundaries. */
static void test_monotone(void)
{
    cluster_devtype a = preset("A100-80GB");
    static const double sz[] = {1, 64, 127, 128, 129, 255, 256, 257, 1000, 2048, 3457, 8192, 13824};
    int n = (int)(sizeof sz / sizeof sz[0]), bad = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                for (int x = 0; x + 1 < n; x++) {
                    double m = sz[i], nn = sz[j], kk = sz[k], lo = sz[x], hi = sz[x + 1];
                    bad += prof_gemm_s(&a, 2, hi, nn, kk, 1) < prof_gemm_s(&a, 2, lo, nn, kk, 1);
                    bad += prof_gemm_s(&a, 2, m, hi, kk, 1) < prof_gemm_s(&a, 2, m, lo, kk, 1);
                    bad += prof_gemm_s(&a, 2, m, nn, hi, 1) < prof_gemm_s(&a, 2, m, nn, lo, 1);
                    bad += prof_gemm_s(&a, 2, m, nn, kk, hi) < prof_gemm_s(&a, 2, m, nn, kk, lo);
                    bad += prof_gemm_waves(&a.kernels, hi, nn, 1) < prof_gemm_waves(&a.kernels, lo, nn, 1);
                    bad += prof_gemm_waves(&a.kernels, m, hi, 1) < prof_gemm_waves(&a.kernels, m, lo, 1);
                }
    CU_ASSERT_EQUAL(bad, 0);
}

/* A large square GEMM reaches the documented ceiling, peak x
 * gemm_efficiency, and never passes it: m = n = k = 32768 is 128 x 256
 * tiles = 32768 tiles, 304 waves on 108 SMs (32768 / 108 = 303.4: 0.2% of
 * the last wave idle) and 249 on H100's 132 (248.2: 0.3%), so within 0.5%
 * of the ceiling. */
static void test_large_square(void)
{
    const char *names[] = {"A100-80GB", "H100-80GB"};
    for (int i = 0; i < 2; i++) {
        cluster_devtype a = preset(names[i]);
        double N = 32768, rate = 2 * N * N * N / prof_gemm_s(&a, 2, N, N, N, 1);
        double ceil_rate = a.peak_fp16_flops * a.kernels.gemm_efficiency;
        CU_ASSERT(rate <= ceil_rate);
        CU_ASSERT(rate > 0.995 * ceil_rate);
        /* small ones fall far below it: one 256 x 128 x 256 tile */
        double small = 2.0 * 256 * 128 * 256 / prof_gemm_s(&a, 2, 256, 128, 256, 1);
        CU_ASSERT(small < 0.01 * ceil_rate);
    }
}

/* Memory-bound kernels: bytes / bandwidth + launch, and a thin GEMM is
 * limited by reading its operands. */
static void test_memory_bound(void)
{
    cluster_devtype a = preset("A100-80GB");
    CU_ASSERT(test_rel(prof_mem_s(&a, 1e9), 1e9 / 2.039e12 + 4e-6) < 1e-12);
    CU_ASSERT_EQUAL(prof_mem_s(&a, 0), 0);
    /* 65536 x 128 times 128 x 128: E (m k + k n + m n) = 2 (8388608 + 16384
     * + 8388608) bytes, 16.47 us at 2.039 TB/s; its compute, 256 tiles in 3
     * waves of 2 x 256 x 128 x 128 FLOPs per SM, is 9.25 us */
    double bytes = 2.0 * (65536.0 * 128 + 128.0 * 128 + 65536.0 * 128);
    CU_ASSERT(test_rel(prof_gemm_s(&a, 2, 65536, 128, 128, 1), bytes / 2.039e12 + 4e-6) < 1e-12);
    /* fused attention: FLOPs over the published share of peak */
    CU_ASSERT(test_rel(prof_fused_s(&a, 2, 1e12), 1e12 / (312e12 * 0.5) + 4e-6) < 1e-12);
}

/* A GPT block's forward on a device whose compute is free and kernels
 * cost nothing: every kernel is bytes over bandwidth, and the sum is
 * written out here from the block's tensors (E = 2, t = 1, b = 2):
 *   GEMM operands and outputs: QKV E (T h + 3h^2 + 3T h), scores
 *   E b a (2 s d + s^2), context E b a (s^2 + 2 s d), projection
 *   E (2 T h + h^2), MLP up E (T h + 4h^2 + 4T h), down E (4T h + 4h^2 + T h)
 *   element-wise: two norms 2 E T h each, softmax 2 E A, attention dropout
 *   A (2E + 1), two bias-dropout-adds T h (3E + 1), bias + GeLU 2 E 4T h
 * with T = b s, d = h / a, A = b a s^2. */
static void test_block_bytes(void)
{
    cluster_devtype t = toy();
    t.peak_fp16_flops = 1e30;
    t.mem_bw_Bps = 1e12;
    t.kernels.sms = 1 << 30;
    tfm_desc d = tfm_gpt(2, 512, 8, 256, 1000);
    tfm_rank_opts o = {.t = 1, .sp = 0, .recomp = TFM_RECOMP_NONE};
    double E = 2, b = 2, h = 512, a = 8, s = 256, T = b * s, dh = h / a, A = b * a * s * s;
    double gemms = E * (T * h + 3 * h * h + 3 * T * h) + E * b * a * (2 * s * dh + s * s) +
                   E * b * a * (s * s + 2 * s * dh) + E * (2 * T * h + h * h) +
                   E * (T * h + 4 * h * h + 4 * T * h) + E * (4 * T * h + 4 * h * h + T * h);
    double elem = 2 * 2 * E * T * h + 2 * E * A + A * (2 * E + 1) + 2 * T * h * (3 * E + 1) +
                  2 * E * 4 * T * h;
    prof_tfm_pass p = prof_tfm_layer_s(&d, 2, &o, PROF_ATTN_UNFUSED, &t, 1, b);
    CU_ASSERT(test_rel(p.fwd_s, (gemms + elem) / 1e12) < 1e-12);
}

/* Kernel counts by hand, and recomputation adding exactly what it reruns. */
static void test_block_structure(void)
{
    cluster_devtype a = preset("A100-80GB");
    tfm_desc g = tfm_gpt(96, 12288, 96, 2048, 51200);
    tfm_rank_opts o = {.t = 8, .sp = 0, .recomp = TFM_RECOMP_NONE}, full = {.t = 8, .sp = 0, .recomp = TFM_RECOMP_FULL},
                  sel = {.t = 8, .sp = 0, .recomp = TFM_RECOMP_SELECTIVE};
    /* GPT, unfused: forward 6 GEMMs + 2 norms, softmax, dropout, 2
     * bias-dropout-adds, bias-GeLU = 13; input gradient 4 linear + 4
     * attention GEMMs, softmax, dropout, per branch dropout, residual add and
     * norm (6), GeLU = 17; weights 4 GEMMs + 4 bias gradients = 8: 38.
     * Fused: 13 - 4 + 1 = 10, 17 - 6 + 1 = 12, 8: 30. */
    prof_tfm_pass u = prof_tfm_layer_s(&g, 2, &o, PROF_ATTN_UNFUSED, &a, 1, 1);
    prof_tfm_pass f = prof_tfm_layer_s(&g, 2, &o, PROF_ATTN_FUSED, &a, 1, 1);
    CU_ASSERT_EQUAL(u.kernels, 38);
    CU_ASSERT_EQUAL(f.kernels, 30);
    prof_tfm_pass r = prof_tfm_layer_s(&g, 2, &full, PROF_ATTN_UNFUSED, &a, 1, 1);
    CU_ASSERT(test_rel(r.bwd_in_s, u.bwd_in_s + u.fwd_s) < 1e-12);
    CU_ASSERT_EQUAL(r.fwd_s, u.fwd_s);
    CU_ASSERT_EQUAL(r.bwd_w_s, u.bwd_w_s);
    prof_tfm_pass q = prof_tfm_layer_s(&g, 2, &sel, PROF_ATTN_UNFUSED, &a, 1, 1);
    CU_ASSERT(q.bwd_in_s > u.bwd_in_s && q.bwd_in_s < r.bwd_in_s);
    /* LLaMA-style (no bias, no dropout, gated): forward 6 GEMMs + 2 norms,
     * softmax, 2 adds, SwiGLU = 12; input gradient 4 + 4 GEMMs, softmax, per
     * branch add and norm (4), SwiGLU = 14; weights 4: 30 */
    tfm_desc l = g;
    l.bias = 0, l.dropout = 0, l.gated = 1, l.ffn = 28672, l.norm = TFM_NORM_RMS;
    CU_ASSERT_EQUAL(prof_tfm_layer_s(&l, 2, &o, PROF_ATTN_UNFUSED, &a, 1, 1).kernels, 30);
    /* a rank with more of the block (t = 4) takes longer than with t = 8 */
    tfm_rank_opts o4 = {.t = 4, .sp = 0, .recomp = TFM_RECOMP_NONE};
    CU_ASSERT(prof_tfm_layer_s(&g, 2, &o4, PROF_ATTN_UNFUSED, &a, 1, 1).fwd_s > u.fwd_s);
    /* GPT-3's block on one A100 of t = 8: its GEMMs are large, so the block
     * runs near (below) the GEMM ceiling; a hidden-1024 block with one
     * sequence of 1024 runs far below it (small GEMMs, memory-bound
     * attention and element-wise kernels, launches) */
    double peak = 312e12, big = tfm_block_train_flops(&g, 1, 8, TFM_RECOMP_NONE) /
                                (u.fwd_s + u.bwd_in_s + u.bwd_w_s) / peak;
    CU_ASSERT(big > 0.6 && big < a.kernels.gemm_efficiency);
    tfm_desc m = tfm_gpt(24, 1024, 16, 1024, 50257);
    tfm_rank_opts o1 = {.t = 1, .sp = 0, .recomp = TFM_RECOMP_NONE};
    prof_tfm_pass sm = prof_tfm_layer_s(&m, 2, &o1, PROF_ATTN_UNFUSED, &a, 1, 1);
    double small = tfm_block_train_flops(&m, 1, 1, TFM_RECOMP_NONE) /
                   (sm.fwd_s + sm.bwd_in_s + sm.bwd_w_s) / peak;
    CU_ASSERT(small < 0.5 * big);
}

/* The separate weight-gradient accumulation (Megatron-LM's main_grad
 * hook): on a device whose compute and launches are free, each block's
 * weight-gradient pass grows by exactly its parameters on the rank (the
 * count of models/transformer.c, checked against Narayanan et al.'s formula
 * in suite `transformer`) times the bytes per parameter over the bandwidth,
 * one kernel per parameter tensor (GPT: 4 weights, 4 biases, 2 x 2 norm
 * parameters = 12; LLaMA: 4 weights, 2 norm scales = 6); the embedding by
 * its rank's rows of the token table and the position table, the head by
 * the logit weight's rank share and the final norm's.  The forward and
 * input gradient do not change. */
static void test_wgrad_acc(void)
{
    cluster_devtype t = toy();
    t.peak_fp16_flops = 1e30;
    t.mem_bw_Bps = 1e12;
    t.kernels.sms = 1 << 30;
    tfm_desc g = tfm_gpt(2, 512, 8, 256, 1000), l = g;
    l.bias = 0, l.dropout = 0, l.gated = 1, l.ffn = 1536, l.norm = TFM_NORM_RMS;
    const tfm_desc *ds[2] = {&g, &l};
    int tensors[2] = {12, 6};
    for (int k = 0; k < 2; k++) {
        const tfm_desc *d = ds[k];
        tfm_rank_opts o = {.t = 2, .sp = 0, .recomp = TFM_RECOMP_NONE}, a = o;
        a.wgrad_acc = 10;
        prof_tfm_pass p = prof_tfm_layer_s(d, 2, &o, PROF_ATTN_UNFUSED, &t, 1, 2);
        prof_tfm_pass q = prof_tfm_layer_s(d, 2, &a, PROF_ATTN_UNFUSED, &t, 1, 2);
        CU_ASSERT(test_rel(q.bwd_w_s - p.bwd_w_s, tfm_block_params_rank(d, 2) * 10 / 1e12) < 1e-9);
        CU_ASSERT_EQUAL(q.kernels - p.kernels, tensors[k]);
        CU_ASSERT_EQUAL(q.fwd_s, p.fwd_s);
        CU_ASSERT_EQUAL(q.bwd_in_s, p.bwd_in_s);
    }
    tfm_rank_opts o = {.t = 2}, a = {.t = 2, .wgrad_acc = 6};
    double h = 512, V = 1000, s = 256;
    double emb = prof_tfm_layer_s(&g, 2, &a, PROF_ATTN_UNFUSED, &t, 0, 2).bwd_w_s -
                 prof_tfm_layer_s(&g, 2, &o, PROF_ATTN_UNFUSED, &t, 0, 2).bwd_w_s;
    CU_ASSERT(test_rel(emb, (V / 2 * h + s * h) * 6 / 1e12) < 1e-9);
    double head = prof_tfm_layer_s(&g, 2, &a, PROF_ATTN_UNFUSED, &t, 3, 2).bwd_w_s -
                  prof_tfm_layer_s(&g, 2, &o, PROF_ATTN_UNFUSED, &t, 3, 2).bwd_w_s;
    CU_ASSERT(test_rel(head, (V / 2 * h + 2 * h) * 6 / 1e12) < 1e-9);
}

/* FP8 (Transformer Engine's linear layers): a GEMM runs the same waves at
 * the FP8 peak x fp8_gemm_efficiency (on the toy: twice the 16-bit rate,
 * so half the time); H100's large GEMM reaches that rate; in a block whose
 * compute is free, each linear layer Y (m x n) = X (m x k) W moves 1-byte
 * operands and a 2-byte output, (m k + k n + 2 m n), instead of
 * E (m k + k n + m n), and its forward casts X, (E + 2) m k: the forward
 * changes by the sum of (3 m k - k n) over QKV (n 3h, k h), the projection
 * (h, h), MLP up (4h, h) and down (h, 4h): 21 T h - 12 h^2 bytes; each
 * linear launches two casts more (8 per block). */
static void test_fp8(void)
{
    cluster_devtype t = toy();
    t.peak_fp8_flops = 2e12;
    t.kernels.fp8_gemm_efficiency = 0.5;
    CU_ASSERT(prof_fp8(&t));
    CU_ASSERT(test_rel(prof_gemm_fp8_s(&t, 640, 64, 1000), prof_gemm_s(&t, 2, 640, 64, 1000, 1) / 2) < 1e-12);
    cluster_devtype h = preset("H100-80GB"), a = preset("A100-80GB");
    CU_ASSERT(prof_fp8(&h));
    CU_ASSERT(!prof_fp8(&a));
    double n = 32768, want = 2 * n * n * n / (h.peak_fp8_flops * h.kernels.fp8_gemm_efficiency);
    double got = prof_gemm_fp8_s(&h, n, n, n);
    CU_ASSERT(got >= want && got < 1.005 * want);

    t.peak_fp16_flops = t.peak_fp8_flops = 1e30;
    t.mem_bw_Bps = 1e12;
    t.kernels.sms = 1 << 30;
    tfm_desc d = tfm_gpt(2, 512, 8, 256, 1000);
    tfm_rank_opts o = {.t = 1, .recomp = TFM_RECOMP_NONE}, o8 = o;
    o8.fp8 = 1;
    double T = 2 * 256, hd = 512;
    prof_tfm_pass p16 = prof_tfm_layer_s(&d, 2, &o, PROF_ATTN_UNFUSED, &t, 1, 2);
    prof_tfm_pass p8 = prof_tfm_layer_s(&d, 2, &o8, PROF_ATTN_UNFUSED, &t, 1, 2);
    CU_ASSERT(test_rel(p8.fwd_s - p16.fwd_s, (21 * T * hd - 12 * hd * hd) / 1e12) < 1e-9);
    CU_ASSERT_EQUAL(p8.kernels, p16.kernels + 8);
    /* the embedding and head stay 16-bit */
    prof_tfm_pass h16 = prof_tfm_layer_s(&d, 2, &o, PROF_ATTN_UNFUSED, &t, 3, 2);
    prof_tfm_pass h8 = prof_tfm_layer_s(&d, 2, &o8, PROF_ATTN_UNFUSED, &t, 3, 2);
    CU_ASSERT_EQUAL(h8.fwd_s, h16.fwd_s);
    CU_ASSERT_EQUAL(h8.bwd_in_s, h16.bwd_in_s);
}

/* The kernels member: presets carry it, a device file round-trips it, a
 * bad value is named by its JSON path. */
static void test_kernels_json(void)
{
    cluster_devtype *ty = NULL;
    int n = 0;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cluster_devtypes_load("profiles/devices.json", &ty, &n, &e), CL_OK);
    cJSON *j = cluster_devtypes_to_json(ty, n);
    char *dir = test_tmpdir(), path[600];
    snprintf(path, sizeof path, "%s/d.json", dir);
    FILE *f = fopen(path, "w");
    char *txt = cJSON_Print(j);
    fputs(txt, f);
    fclose(f);
    cJSON_free(txt);
    cJSON_Delete(j);
    cluster_devtype *back = NULL;
    int nb = 0;
    CU_ASSERT_EQUAL_FATAL(cluster_devtypes_load(path, &back, &nb, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(nb, n);
    int with = 0;
    for (int i = 0; i < n; i++) {
        with += ty[i].kernels.sms > 0;
        CU_ASSERT(!memcmp(&ty[i].kernels, &back[i].kernels, sizeof ty[i].kernels));
        CU_ASSERT_EQUAL(ty[i].peak_fp8_flops, back[i].peak_fp8_flops);
    }
    CU_ASSERT(with >= 2);
    free(back);
    free(ty);
    f = fopen(path, "w");
    fputs("{\"format\": \"cleave-devices\", \"version\": 1, \"device_types\": [{\"name\": \"x\", "
          "\"peak_fp32_flops\": 1e12, \"memory_bytes\": 1073741824, \"memory_bw_Bps\": 1e11, "
          "\"efficiency\": 0.5, \"kernels\": {\"sms\": 8, \"tile_m\": 128, \"tile_n\": 128, "
          "\"gemm_efficiency\": 1.5, \"attention_efficiency\": 0.5, \"launch_s\": 0}}]}",
          f);
    fclose(f);
    CU_ASSERT_EQUAL(cluster_devtypes_load(path, &ty, &n, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "device_types[0].kernels.gemm_efficiency"));
    f = fopen(path, "w");
    fputs("{\"format\": \"cleave-devices\", \"version\": 1, \"device_types\": [{\"name\": \"x\", "
          "\"peak_fp32_flops\": 1e12, \"peak_fp8_flops\": 4e12, \"memory_bytes\": 1073741824, \"memory_bw_Bps\": 1e11, "
          "\"efficiency\": 0.5, \"kernels\": {\"sms\": 8, \"tile_m\": 128, \"tile_n\": 128, "
          "\"gemm_efficiency\": 0.5, \"attention_efficiency\": 0.5, \"fp8_gemm_efficiency\": 2, \"launch_s\": 0}}]}",
          f);
    fclose(f);
    e = (cl_err){0};
    CU_ASSERT_EQUAL(cluster_devtypes_load(path, &ty, &n, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "device_types[0].kernels.fp8_gemm_efficiency"));
    remove(path);
    test_rmtree(dir);
}

/* The predicted iteration of `cleave plan ARGS`, or -1. */
static double plan_iteration(const char *args)
{
    char *out = NULL;
    double it = -1;
    if (test_run_cli(args, &out, NULL) == 0) {
        const char *p = out ? strstr(out, "predicted: iteration ") : NULL;
        if (p) it = atof(p + strlen("predicted: iteration "));
    }
    free(out);
    return it;
}

/* plan: GPT-2 1.5B at microbatch 1 on one A100 is priced by shape, slower
 * than one efficiency of 0.5 says (its GEMMs are small: 1024 tokens), and
 * the fused attention kernel is faster than the unfused one; --attention
 * fused is refused where it cannot apply; a V100 (no kernel model) is
 * priced by FLOPs over peak x efficiency as before. */
static void test_plan_cli(void)
{
    const char *base = "plan --model models/gpt2-1.5b.json --devices 1 --batch 8 --microbatches 8 "
                       "--optimizer adam --schedule 1f1b";
    char args[1024];
    snprintf(args, sizeof args, "%s --device A100-80GB", base);
    double unfused = plan_iteration(args);
    snprintf(args, sizeof args, "%s --device A100-80GB --attention fused", base);
    double fused = plan_iteration(args);
    /* 8 sequences x 3 x 3.507 TFLOP forward (docs/formats.md) at 0.5 of
     * 312 TFLOP/s would be 0.54 s */
    double flat = 8 * 3 * 3.507e12 / (0.5 * 312e12);
    CU_ASSERT(unfused > 1.1 * flat);
    CU_ASSERT(fused > 0 && fused < unfused);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli("plan --model models/bert-large.json --device A100-80GB "
                                 "--devices 8 --attention fused", NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "\"kernels\" member"));
    free(err);
    err = NULL;
    snprintf(args, sizeof args, "%s --device V100-32GB --attention fused", base);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    free(err);
    /* --precision fp8: faster than mixed on an H100, refused on an A100 (no
     * FP8 path) and for BERT (no transformer member), one line each */
    snprintf(args, sizeof args, "%s --device H100-80GB", base);
    double h16 = plan_iteration(args);
    snprintf(args, sizeof args, "%s --device H100-80GB --precision fp8", base);
    double h8 = plan_iteration(args);
    CU_ASSERT(h8 > 0 && h8 < h16);
    err = NULL;
    snprintf(args, sizeof args, "%s --device A100-80GB --precision fp8", base);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "FP8 peak"));
    free(err);
    err = NULL;
    CU_ASSERT_EQUAL(test_run_cli("plan --model models/bert-large.json --device H100-80GB --devices 8 --precision fp8", NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "\"transformer\" member"));
    free(err);
    /* sim: a plan file's times are priced already, so --precision fp8 on
     * one is refused; with --layout sim prices it, faster than 16-bit */
    char *dir = test_tmpdir(), pp[300];
    snprintf(pp, sizeof pp, "%s/g.json", dir);
    snprintf(args, sizeof args, "%s --device H100-80GB -o %s", base, pp);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    snprintf(args, sizeof args, "sim %s --precision fp8", pp);
    err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "plan with --precision fp8"));
    free(err);
    test_rmtree(dir);
    /* the V100 keeps FLOPs / (125 TFLOP/s x 0.5): 8 x (3.507 + 7.013) TFLOP
     * = 1.3466 s, plus the few memory-bound layers (SGD, to fit 32 GB), plus
     * one optimiser step: SGD in mixed precision reads the fp32 gradient and
     * master weight, writes the master and the 16-bit weight, 14 bytes per
     * parameter (plan_update_traffic) of 1,557,611,200 over 900 GB/s */
    double v100 = plan_iteration("plan --model models/gpt2-1.5b.json --devices 1 --batch 8 "
                                 "--microbatches 8 --optimizer sgd --schedule 1f1b --device V100-32GB");
    CU_ASSERT(test_rel(v100, 8 * (3.507e12 + 7.013e12) / (0.5 * 125e12) + 1557611200.0 * 14 / 900e9) < 0.01);
}

TEST_SUITE(compute)
{
    test_add_suite("compute");
    test_add("tile and wave quantisation by hand", test_waves_by_hand);
    test_add("GEMM time grows with every dimension", test_monotone);
    test_add("large square GEMM reaches peak x gemm_efficiency", test_large_square);
    test_add("memory-bound kernels are bytes / bandwidth", test_memory_bound);
    test_add("GPT block forward bytes in closed form", test_block_bytes);
    test_add("block kernel counts and recomputation", test_block_structure);
    test_add("FP8 GEMMs: waves at the FP8 rate, bytes and casts in closed form", test_fp8);
    test_add("weight-gradient accumulation: parameters x bytes / bandwidth", test_wgrad_acc);
    test_add("device kernels member: presets, round trip, errors", test_kernels_json);
    test_add("plan prices GPT-2 by shape; --attention", test_plan_cli);
}
