/* linear_avx512.c - AVX-512 kernels for linear layers with at most
 * EXEC_KERN_LINEAR_MAX_OC outputs (kern.h; docs/executor.md, "Own
 * kernels"; the 10-output forward: docs/executor-sgemm.md), where an
 * SGEMM's tile of 32 columns would be mostly empty.  Each kernel's comment
 * says what sits in registers; all sums run in a fixed order. */
#include <assert.h>
#include <string.h>

#include "avx512.h"
#include "kern.h"

#if KERN_X86

/* For each output count OC, where the forward's results go: vectors 0-2
 * give, for element e = r OC + o of a 4-row block's output, the result
 * lane holding it: accumulator j = r NG + o / 2 went into pair v = j / 2
 * (result v / 4, lane 4 L + v % 4) and block L = 2 (j % 2) + o % 2 of it;
 * vectors 3-5 give o, to spread the bias.  Built once: per call they cost
 * a noticeable share of a small call (docs/executor.md, "Own kernels"). */
static __m512i lin_fwd_idx[EXEC_KERN_LINEAR_MAX_OC][6];

void exec_kern_linear_tables(void)
{
    for (int OC = 1; OC <= EXEC_KERN_LINEAR_MAX_OC; OC++) {
        const int NG = (OC + 1) / 2;
        int32_t t[96] = {0};
        for (int r = 0; r < 4; r++) {
            for (int o = 0; o < OC; o++) {
                const int e = r * OC + o, j = r * NG + o / 2, v = j / 2;
                t[e] = 16 * (v / 4) + 4 * (2 * (j % 2) + o % 2) + v % 4;
                t[48 + e] = o;
            }
        }
        memcpy(lin_fwd_idx[OC - 1], t, sizeof t);
    }
}

/* Forward.  Lanes hold 2 outputs x 8 consecutive input features (output
 * 2g in the low half, 2g + 1 in the high half): Wr (IC/8, NG, 16) is W
 * regrouped once per call, so each step of 8 features is NG loads of Wr
 * and, per row, one 256-bit broadcast of its inputs, for 4 rows x NG
 * accumulators.  NG = ceil(OC / 2), so every lane does useful work unless
 * OC is odd (10 outputs: 80 multiply-adds per row at 128 features, where 4
 * outputs x 4 features wasted 2 of 12 lanes for 96).  A fixed tree then
 * sums the 8 partials of each output across the 4 rows' accumulators: pairs
 * of accumulators meet in 128-bit blocks (each block one output, 4
 * partials), fours of those in 4 x 4 transposes (each lane one output),
 * and permutations put the rows' outputs in place. */
KERN_INLINE void lin_fwd_ng(float *out, const float *in, const float *w, const float *b,
                            int B, int IC, int OC, const int NG)
{
    enum { R = 4 };                     /* rows per block */
    const int nk8 = (IC + 7) / 8;
    const int NA = R * NG, NV = NA / 2, NF = (NV + 3) / 4; /* accumulators, pairs, results */
    __m512 Wr[EXEC_KERN_LINEAR_FWD_MAX_IC / 8 * 6];
    for (int k8 = 0; k8 < nk8; k8++) {
        const __mmask16 m = lanes(IC - 8 * k8) & 0xff;
        for (int g = 0; g < NG; g++) {
            const int o0 = 2 * g, o1 = 2 * g + 1;
            const __m512 lo = _mm512_maskz_loadu_ps(m, w + (int64_t)o0 * IC + 8 * k8);
            const __m512 hi = o1 < OC ? _mm512_maskz_loadu_ps(m, w + (int64_t)o1 * IC + 8 * k8)
                                      : _mm512_setzero_ps();
            Wr[k8 * NG + g] = _mm512_shuffle_f32x4(lo, hi, 0x44);
        }
    }
    const __m512i *fx = lin_fwd_idx[OC - 1]; /* result lane and bias of each output */
    __m512 bias[3] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    if (b) {
        const __m512 bv = _mm512_maskz_loadu_ps(lanes(OC), b);
        for (int v = 0; v < 3; v++) bias[v] = _mm512_permutexvar_ps(fx[3 + v], bv);
    }
    const int nout = (R * OC + 15) / 16;
    const int tail = IC % 8 != 0;
    const __mmask16 mtail = lanes(IC % 8);
    for (int r0 = 0; r0 < B; r0 += R) {
        const int nr = B - r0 < R ? B - r0 : R;
        const float *x[R];
        for (int r = 0; r < R; r++) x[r] = in + (int64_t)(r0 + (r < nr ? r : nr - 1)) * IC;
        __m512 acc[R][6];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
#pragma GCC unroll 6
            for (int g = 0; g < NG; g++) acc[r][g] = _mm512_setzero_ps();
        for (int k8 = 0; k8 < nk8 - tail; k8++) {
            __m512 wv[6];
#pragma GCC unroll 6
            for (int g = 0; g < NG; g++) wv[g] = Wr[k8 * NG + g];
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x[r] + 8 * k8));
#pragma GCC unroll 6
                for (int g = 0; g < NG; g++) acc[r][g] = _mm512_fmadd_ps(xv, wv[g], acc[r][g]);
            }
        }
        if (tail) {
            const int k8 = nk8 - 1;
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const __m512 t = _mm512_maskz_loadu_ps(mtail, x[r] + 8 * k8);
                const __m512 xv = _mm512_shuffle_f32x4(t, t, 0x44);
#pragma GCC unroll 6
                for (int g = 0; g < NG; g++)
                    acc[r][g] = _mm512_fmadd_ps(xv, Wr[k8 * NG + g], acc[r][g]);
            }
        }
        /* pairs: block L of pair v = 128-bit blocks (0, 2) + (1, 3) of
         * accumulators 2v (L = 0, 1) and 2v + 1 (L = 2, 3) */
        __m512 V[12], F[3];
#pragma GCC unroll 12
        for (int v = 0; v < NV; v++) {
            const __m512 a0 = acc[(2 * v) / NG][(2 * v) % NG], a1 = acc[(2 * v + 1) / NG][(2 * v + 1) % NG];
            V[v] = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x88), _mm512_shuffle_f32x4(a0, a1, 0xDD));
        }
        for (int v = NV; v < 4 * NF; v++) V[v] = _mm512_setzero_ps();
        /* fours: lane 4 L + t of result q sums block L of pair 4 q + t */
#pragma GCC unroll 3
        for (int q = 0; q < NF; q++) {
            const __m512 v0 = V[4 * q], v1 = V[4 * q + 1], v2 = V[4 * q + 2], v3 = V[4 * q + 3];
            const __m512 p = _mm512_add_ps(_mm512_shuffle_ps(v0, v1, 0x44), _mm512_shuffle_ps(v0, v1, 0xEE));
            const __m512 u = _mm512_add_ps(_mm512_shuffle_ps(v2, v3, 0x44), _mm512_shuffle_ps(v2, v3, 0xEE));
            F[q] = _mm512_add_ps(_mm512_shuffle_ps(p, u, 0x88), _mm512_shuffle_ps(p, u, 0xDD));
        }
        for (int q = NF; q < 3; q++) F[q] = F[0];
        float *o = out + (int64_t)r0 * OC;
        for (int v = 0; v < nout; v++) {
            const __m512i iv = fx[v];
            __m512 res = _mm512_permutex2var_ps(F[0], iv, F[1]);
            const __mmask16 m2 = _mm512_cmpge_epi32_mask(iv, _mm512_set1_epi32(32));
            res = _mm512_mask_permutexvar_ps(res, m2, iv, F[2]);
            _mm512_mask_storeu_ps(o + 16 * v, lanes(nr * OC - 16 * v),
                                  _mm512_add_ps(res, bias[v]));
        }
    }
}

/* Forward with 10 outputs and IC a multiple of 8 (mlp fc3, cnn fc2, the
 * ViT's head), laid out so that the sums come out in row order without a
 * cross-lane permutation, which on Zen 5 cost about a fifth of the ViT
 * head's call (docs/executor-sgemm.md, "The 10-output forward").  Lanes
 * hold 8 features of output g (low half) and of output g + 4 (high half)
 * for g = 0..3, and of outputs 8 and 9 for g = 4: per step of 8 features
 * one 256-bit broadcast of a row's inputs feeds 5 FMAs, as in lin_fwd_ng.
 * Per row, the four accumulators of outputs 0-7 meet in in-lane shuffles
 * (vshufps, which this core runs beside its FMAs): block b of the result
 * holds the 4 partials of half b % 2 of outputs 4 (b / 2) + 0..3, and one
 * 128-bit shuffle per pair of rows adds the halves, leaving outputs 0-7 of
 * two rows in one vector, stored as two 256-bit halves; outputs 8 and 9 of
 * the 4 rows take the same path once per block.  Sum order, per output:
 * 8 chains over the features (lane j: features 8 s + j), then ((p0 + p1) +
 * (p2 + p3)) + ((p4 + p5) + (p6 + p7)), then the bias.  Wr (W regrouped)
 * is written by the first block as it goes: regrouping before the first
 * block cost 0.03 us of the head's 0.44. */
enum { L10_R = 4, L10_NG = 5 };

KERN_INLINE void lin10_block(float *out, const float *in, const float *w, __m512 *Wr,
                             __m512 bias8, __m128 bias89, int r0, int B, int IC, const int FIRST)
{
    enum { R = L10_R, NG = L10_NG };
    const int nk8 = IC / 8, nr = B - r0 < R ? B - r0 : R;
    const float *x[R];
    for (int r = 0; r < R; r++) x[r] = in + (int64_t)(r0 + (r < nr ? r : nr - 1)) * IC;
    __m512 acc[R][NG];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 5
        for (int g = 0; g < NG; g++) acc[r][g] = _mm512_setzero_ps();
    for (int k8 = 0; k8 < nk8; k8++) {
        __m512 wv[NG];
#pragma GCC unroll 5
        for (int g = 0; g < NG; g++) {
            if (FIRST) {
                /* [w(lo) features 8 k8.. | w(hi) the same]: two masked loads */
                const int lo = g < 4 ? g : 8, hi = g < 4 ? g + 4 : 9;
                wv[g] = _mm512_mask_loadu_ps(_mm512_maskz_loadu_ps(0x00ff, w + (int64_t)lo * IC + 8 * k8),
                                             0xff00, w + (int64_t)hi * IC + 8 * k8 - 8);
                Wr[k8 * NG + g] = wv[g];
            } else {
                wv[g] = Wr[k8 * NG + g];
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x[r] + 8 * k8));
#pragma GCC unroll 5
            for (int g = 0; g < NG; g++) acc[r][g] = _mm512_fmadd_ps(xv, wv[g], acc[r][g]);
        }
    }
    /* quads: row q's accumulators 0-3 (q < R), and accumulator 4 of rows
     * 0-3 (q = R); lane 4 b + m of U[q] sums block b of quad member m */
    __m512 U[R + 1];
#pragma GCC unroll 5
    for (int q = 0; q <= R; q++) {
        const __m512 a0 = q < R ? acc[q][0] : acc[0][4], a1 = q < R ? acc[q][1] : acc[1][4],
                     a2 = q < R ? acc[q][2] : acc[2][4], a3 = q < R ? acc[q][3] : acc[3][4];
        const __m512 s0 = _mm512_add_ps(_mm512_shuffle_ps(a0, a1, 0x88), _mm512_shuffle_ps(a0, a1, 0xDD));
        const __m512 s1 = _mm512_add_ps(_mm512_shuffle_ps(a2, a3, 0x88), _mm512_shuffle_ps(a2, a3, 0xDD));
        U[q] = _mm512_add_ps(_mm512_shuffle_ps(s0, s1, 0x88), _mm512_shuffle_ps(s0, s1, 0xDD));
    }
    float *o = out + (int64_t)r0 * 10;
#pragma GCC unroll 2
    for (int p = 0; p < 2; p++) {
        /* blocks (0 + 1, 2 + 3) of rows 2p and 2p + 1: outputs 0-3, 4-7 */
        const __m512 u = U[2 * p], v = U[2 * p + 1];
        const __m512 z = _mm512_add_ps(_mm512_add_ps(_mm512_shuffle_f32x4(u, v, 0x88),
                                                     _mm512_shuffle_f32x4(u, v, 0xDD)), bias8);
        if (2 * p < nr) _mm256_storeu_ps(o + 20 * p, _mm512_castps512_ps256(z));
        if (2 * p + 1 < nr) _mm256_storeu_ps(o + 20 * p + 10, _mm512_extractf32x8_ps(z, 1));
    }
    /* outputs 8 (block 0) and 9 (block 2) of rows 0-3, then in row pairs */
    const __m512 z8 = _mm512_add_ps(U[R], _mm512_shuffle_f32x4(U[R], U[R], 0xB1));
    const __m128 l8 = _mm512_castps512_ps128(z8), l9 = _mm512_extractf32x4_ps(z8, 2);
    const __m128 p01 = _mm_add_ps(_mm_unpacklo_ps(l8, l9), bias89),
                 p23 = _mm_add_ps(_mm_unpackhi_ps(l8, l9), bias89);
    _mm_storel_pi((__m64 *)(o + 8), p01);
    if (nr > 1) _mm_storeh_pi((__m64 *)(o + 18), p01);
    if (nr > 2) _mm_storel_pi((__m64 *)(o + 28), p23);
    if (nr > 3) _mm_storeh_pi((__m64 *)(o + 38), p23);
}

KERN static void lin_fwd10(float *out, const float *in, const float *w, const float *b, int B, int IC)
{
    __m512 Wr[EXEC_KERN_LINEAR_FWD_MAX_IC / 8 * L10_NG];
    const __m256 b8 = b ? _mm256_loadu_ps(b) : _mm256_setzero_ps();
    const __m512 bias8 = _mm512_insertf32x8(_mm512_castps256_ps512(b8), b8, 1);
    const __m128 bias89 = b ? _mm_setr_ps(b[8], b[9], b[8], b[9]) : _mm_setzero_ps();
    lin10_block(out, in, w, Wr, bias8, bias89, 0, B, IC, 1);
    for (int r0 = L10_R; r0 < B; r0 += L10_R) lin10_block(out, in, w, Wr, bias8, bias89, r0, B, IC, 0);
}

KERN void exec_kern_linear_forward(float *out, const float *in, const float *w, const float *b,
                                   int B, int IC, int OC)
{
    if (OC == 10 && IC % 8 == 0 && IC <= EXEC_KERN_LINEAR_FWD_MAX_IC && B >= 1) {
        lin_fwd10(out, in, w, b, B, IC);
        return;
    }
    assert(OC >= 1 && OC <= EXEC_KERN_LINEAR_MAX_OC && IC >= 1 && IC <= EXEC_KERN_LINEAR_FWD_MAX_IC);
    switch ((OC + 1) / 2) {
    case 1: lin_fwd_ng(out, in, w, b, B, IC, OC, 1); break;
    case 2: lin_fwd_ng(out, in, w, b, B, IC, OC, 2); break;
    case 3: lin_fwd_ng(out, in, w, b, B, IC, OC, 3); break;
    case 4: lin_fwd_ng(out, in, w, b, B, IC, OC, 4); break;
    case 5: lin_fwd_ng(out, in, w, b, B, IC, OC, 5); break;
    default: lin_fwd_ng(out, in, w, b, B, IC, OC, 6); break;
    }
}

/* Input gradient: 32 input features at a time, the OC x 32 weights in
 * registers; each row is OC broadcasts and 2 OC FMAs.  A row's two sums are
 * chains of OC dependent FMAs (40 cycles at 10 outputs), so rows go 4 at a
 * time, interleaved: 8 chains in flight rather than what the scheduler
 * finds on its own (57-69% of the FMA peak one row at a time).  Each row's
 * sum keeps its order (o ascending from zero), so the bits do not change. */
KERN_INLINE void lin_bin_oc(float *din, const float *dout, const float *w, int B, int IC,
                            const int OC)
{
    enum { R = 4 };
    for (int c0 = 0; c0 < IC; c0 += 32) {
        const __mmask16 m0 = lanes(IC - c0), m1 = lanes(IC - c0 - 16);
        __m512 w0[EXEC_KERN_LINEAR_MAX_OC], w1[EXEC_KERN_LINEAR_MAX_OC];
#pragma GCC unroll 12
        for (int o = 0; o < OC; o++) {
            w0[o] = _mm512_maskz_loadu_ps(m0, w + (int64_t)o * IC + c0);
            w1[o] = _mm512_maskz_loadu_ps(m1, w + (int64_t)o * IC + c0 + 16);
        }
        int r = 0;
        for (; r + R <= B; r += R) {
            const float *d = dout + (int64_t)r * OC;
            __m512 a0[R], a1[R];
#pragma GCC unroll 4
            for (int q = 0; q < R; q++) a0[q] = a1[q] = _mm512_setzero_ps();
#pragma GCC unroll 12
            for (int o = 0; o < OC; o++) {
#pragma GCC unroll 4
                for (int q = 0; q < R; q++) {
                    const __m512 dv = _mm512_set1_ps(d[q * OC + o]);
                    a0[q] = _mm512_fmadd_ps(dv, w0[o], a0[q]);
                    a1[q] = _mm512_fmadd_ps(dv, w1[o], a1[q]);
                }
            }
#pragma GCC unroll 4
            for (int q = 0; q < R; q++) {
                _mm512_mask_storeu_ps(din + (int64_t)(r + q) * IC + c0, m0, a0[q]);
                _mm512_mask_storeu_ps(din + (int64_t)(r + q) * IC + c0 + 16, m1, a1[q]);
            }
        }
        for (; r < B; r++) {
            const float *d = dout + (int64_t)r * OC;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0;
#pragma GCC unroll 12
            for (int o = 0; o < OC; o++) {
                const __m512 dv = _mm512_set1_ps(d[o]);
                a0 = _mm512_fmadd_ps(dv, w0[o], a0);
                a1 = _mm512_fmadd_ps(dv, w1[o], a1);
            }
            _mm512_mask_storeu_ps(din + (int64_t)r * IC + c0, m0, a0);
            _mm512_mask_storeu_ps(din + (int64_t)r * IC + c0 + 16, m1, a1);
        }
    }
}

KERN void exec_kern_linear_backward_input(float *din, const float *dout, const float *w, int B,
                                          int IC, int OC)
{
    assert(OC >= 1 && OC <= EXEC_KERN_LINEAR_MAX_OC);
    switch (OC) {
#define OCCASE(n) case n: lin_bin_oc(din, dout, w, B, IC, n); break;
    OCCASE(1) OCCASE(2) OCCASE(3) OCCASE(4) OCCASE(5) OCCASE(6)
    OCCASE(7) OCCASE(8) OCCASE(9) OCCASE(10) OCCASE(11) OCCASE(12)
#undef OCCASE
    default: assert(0);
    }
}

/* Weight gradient: 32 input features at a time, OC x 32 accumulators over
 * the rows, each row two loads and OC broadcasts.  The bias gradient (db
 * not NULL) rides along in the first 32 features' pass: one more lane
 * vector summing the rows of dout in order from zero, then added to db,
 * the additions the separate loop made (the same bits); on its own that
 * loop was a chain of B dependent adds, 10-15% of the pass. */
KERN_INLINE void lin_bw_oc(float *dw, float *db, const float *dout, const float *in, int B,
                           int IC, const int OC)
{
    const __mmask16 mo = lanes(OC);
    __m512 s = _mm512_setzero_ps();
    for (int c0 = 0; c0 < IC; c0 += 32) {
        const __mmask16 m0 = lanes(IC - c0), m1 = lanes(IC - c0 - 16);
        const int with_db = db && c0 == 0;
        __m512 a0[EXEC_KERN_LINEAR_MAX_OC], a1[EXEC_KERN_LINEAR_MAX_OC];
#pragma GCC unroll 12
        for (int o = 0; o < OC; o++) a0[o] = a1[o] = _mm512_setzero_ps();
        for (int r = 0; r < B; r++) {
            const __m512 x0 = _mm512_maskz_loadu_ps(m0, in + (int64_t)r * IC + c0);
            const __m512 x1 = _mm512_maskz_loadu_ps(m1, in + (int64_t)r * IC + c0 + 16);
            const float *d = dout + (int64_t)r * OC;
            if (with_db) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(mo, d));
#pragma GCC unroll 12
            for (int o = 0; o < OC; o++) {
                const __m512 dv = _mm512_set1_ps(d[o]);
                a0[o] = _mm512_fmadd_ps(dv, x0, a0[o]);
                a1[o] = _mm512_fmadd_ps(dv, x1, a1[o]);
            }
        }
#pragma GCC unroll 12
        for (int o = 0; o < OC; o++) {
            float *p = dw + (int64_t)o * IC + c0;
            _mm512_mask_storeu_ps(p, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, p), a0[o]));
            _mm512_mask_storeu_ps(p + 16, m1,
                                  _mm512_add_ps(_mm512_maskz_loadu_ps(m1, p + 16), a1[o]));
        }
    }
    if (db) _mm512_mask_storeu_ps(db, mo, _mm512_add_ps(_mm512_maskz_loadu_ps(mo, db), s));
}

KERN void exec_kern_linear_backward_weight(float *dw, float *db, const float *dout,
                                           const float *in, int B, int IC, int OC)
{
    assert(OC >= 1 && OC <= EXEC_KERN_LINEAR_MAX_OC);
    switch (OC) {
#define OCCASE(n) case n: lin_bw_oc(dw, db, dout, in, B, IC, n); break;
    OCCASE(1) OCCASE(2) OCCASE(3) OCCASE(4) OCCASE(5) OCCASE(6)
    OCCASE(7) OCCASE(8) OCCASE(9) OCCASE(10) OCCASE(11) OCCASE(12)
#undef OCCASE
    default: assert(0);
    }
}

#else /* no AVX-512 build: exec_kern_avx512() is 0 and nothing calls these */

static void unreachable(void)
{
    assert(0 && "AVX-512 kernel called without AVX-512");
}

void exec_kern_linear_forward(float *out, const float *in, const float *w, const float *b,
                              int B, int IC, int OC)
{ (void)out; (void)in; (void)w; (void)b; (void)B; (void)IC; (void)OC; unreachable(); }
void exec_kern_linear_backward_input(float *din, const float *dout, const float *w, int B,
                                     int IC, int OC)
{ (void)din; (void)dout; (void)w; (void)B; (void)IC; (void)OC; unreachable(); }
void exec_kern_linear_backward_weight(float *dw, float *db, const float *dout,
                                      const float *in, int B, int IC, int OC)
{ (void)dw; (void)db; (void)dout; (void)in; (void)B; (void)IC; (void)OC; unreachable(); }

#endif
