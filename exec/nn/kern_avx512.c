/* kern_avx512.c - AVX-512 kernels for the shapes OpenBLAS runs slowly
 * (kern.h).  Each kernel's comment says what sits in registers; all sums
 * run in a fixed order. */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kern.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KERN_X86 1
#include <immintrin.h>
#define KERN __attribute__((target("avx512f,avx512dq,fma")))
#define KERN_INLINE static inline __attribute__((always_inline, target("avx512f,avx512dq,fma")))
#else
#define KERN_X86 0
#endif

/* ------------------------------------------------------------------------ */
/* dispatch                                                                  */

static int have_avx512;       /* set once, under pthread_once */
static _Atomic int disabled;  /* tests only; atomic so a read never races */

#if KERN_X86
static void lin_fwd_tables(void);
#endif

static void detect(void)
{
#if KERN_X86
    __builtin_cpu_init();
    /* GCC's check also requires the OS to save the ZMM state (XGETBV) */
    have_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("fma");
    if (have_avx512) lin_fwd_tables();
#endif
}

int exec_kern_avx512(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, detect);
    return have_avx512 && !disabled;
}

int exec_kern_disable(int off)
{
    int prev = disabled;
    disabled = off != 0;
    return prev;
}

#if KERN_X86

/* mask of the first n (0..16) lanes */
KERN_INLINE __mmask16 lanes(int n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n > 0 ? n : 0)) - 1u);
}

/* ------------------------------------------------------------------------ */
/* sums                                                                      */

KERN float exec_kern_sum(const float *a, int64_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_add_ps(s0, _mm512_loadu_ps(a + i));
        s1 = _mm512_add_ps(s1, _mm512_loadu_ps(a + i + 16));
        s2 = _mm512_add_ps(s2, _mm512_loadu_ps(a + i + 32));
        s3 = _mm512_add_ps(s3, _mm512_loadu_ps(a + i + 48));
    }
    for (; i < n; i += 16) s0 = _mm512_add_ps(s0, _mm512_maskz_loadu_ps(lanes((int)(n - i)), a + i));
    s0 = _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3));
    return _mm512_reduce_add_ps(s0);
}

/* ------------------------------------------------------------------------ */
/* elementwise: the same results as vec.h's loops, on 512-bit vectors      */

KERN void exec_kern_relu(float *out, const float *in, int64_t n)
{
    const __m512 z = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = lanes((int)(n - i < 16 ? n - i : 16));
        const __m512 x = _mm512_maskz_loadu_ps(m, in + i);
        _mm512_mask_storeu_ps(out + i, m, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, z, _CMP_GT_OQ), x));
    }
}

KERN void exec_kern_pass_positive(float *out, const float *in, const float *sel, int64_t n)
{
    const __m512 z = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = lanes((int)(n - i < 16 ? n - i : 16));
        const __m512 x = _mm512_maskz_loadu_ps(m, in + i), s = _mm512_maskz_loadu_ps(m, sel + i);
        _mm512_mask_storeu_ps(out + i, m, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(s, z, _CMP_GT_OQ), x));
    }
}

KERN void exec_kern_mask_scale(float *out, const float *in, const uint8_t *mask, int64_t n,
                               float scale)
{
    const __m512 sv = _mm512_set1_ps(scale);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i mb = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(mask + i)));
        const __mmask16 keep = _mm512_test_epi32_mask(mb, mb);
        _mm512_storeu_ps(out + i, _mm512_maskz_mul_ps(keep, _mm512_loadu_ps(in + i), sv));
    }
    for (; i < n; i++) out[i] = mask[i] ? in[i] * scale : 0.0f;
}

/* ------------------------------------------------------------------------ */
/* softmax cross-entropy                                                     */

/* e^x for x <= 0 (softmax arguments x - max): x = n ln 2 + r with |r| <=
 * ln 2 / 2 (ln 2 split in two for an exact n ln 2), e^r by the degree-7
 * polynomial of Cephes' expf (Moshier), scaled by 2^n.  Within 2 ulp of
 * expf; arguments under -87.3 give e^-87.3, a probability of 1e-38 where
 * the exact one is smaller still. */
KERN_INLINE __m512 exp_nonpos(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.3365f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504089f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(y, n);
}

/* One row at a time, lanes over its classes (16 at a time); the sum of the
 * exponentials in float lanes, then in double across them, as the portable
 * loop sums. */
KERN double exec_kern_softmax_xent_forward(float *probs, float *loss, const float *logits,
                                           const int32_t *labels, int B, int K)
{
    double total = 0;
    for (int n = 0; n < B; n++) {
        const float *x = logits + (int64_t)n * K;
        float *p = probs + (int64_t)n * K;
        __m512 mv = _mm512_set1_ps(-INFINITY);
        for (int j = 0; j < K; j += 16)
            mv = _mm512_mask_max_ps(mv, lanes(K - j), mv, _mm512_maskz_loadu_ps(lanes(K - j), x + j));
        const float m = _mm512_reduce_max_ps(mv);
        __m512 sv = _mm512_setzero_ps();
        for (int j = 0; j < K; j += 16) {
            const __mmask16 mk = lanes(K - j);
            const __m512 e = exp_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, x + j), _mm512_set1_ps(m)));
            _mm512_mask_storeu_ps(p + j, mk, e);
            sv = _mm512_mask_add_ps(sv, mk, sv, e);
        }
        const double s = (double)_mm512_reduce_add_ps(sv);
        const __m512 inv = _mm512_set1_ps((float)(1.0 / s));
        for (int j = 0; j < K; j += 16) {
            const __mmask16 mk = lanes(K - j);
            _mm512_mask_storeu_ps(p + j, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, p + j), inv));
        }
        const double l = log(s) - ((double)x[labels[n]] - m);
        loss[n] = (float)l;
        total += l;
    }
    return total;
}

/* scale (p - onehot), the portable loop's two roundings in the same order */
KERN void exec_kern_softmax_xent_backward_input(float *dlogits, const float *probs,
                                                const int32_t *labels, int B, int K,
                                                float scale)
{
    const __m512 sv = _mm512_set1_ps(scale);
    const int64_t n = (int64_t)B * K;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dlogits + i, _mm512_mul_ps(sv, _mm512_loadu_ps(probs + i)));
    if (i < n)
        _mm512_mask_storeu_ps(dlogits + i, lanes((int)(n - i)),
                              _mm512_mul_ps(sv, _mm512_maskz_loadu_ps(lanes((int)(n - i)), probs + i)));
    for (int r = 0; r < B; r++) dlogits[(int64_t)r * K + labels[r]] -= scale;
}

/* ------------------------------------------------------------------------ */
/* linear, few outputs                                                       */

/* For each output count OC, where the forward's results go: vectors 0-2
 * give, for element e = r OC + o of a 4-row block's output, the result
 * lane holding it: accumulator j = r NG + o / 2 went into pair v = j / 2
 * (result v / 4, lane 4 L + v % 4) and block L = 2 (j % 2) + o % 2 of it;
 * vectors 3-5 give o, to spread the bias.  Built once: per call they cost
 * a noticeable share of a small call (docs/executor.md, "Own kernels"). */
static __m512i lin_fwd_idx[EXEC_KERN_LINEAR_MAX_OC][6];

static void lin_fwd_tables(void)
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

/* ------------------------------------------------------------------------ */
/* conv2d, direct                                                            */

#define CONV_OB 8 /* output channels per register block (forward) */

static int opad8(int O)
{
    return (O + CONV_OB - 1) / CONV_OB * CONV_OB;
}

void exec_kern_conv_wt(float *wt, const float *w, const exec_conv *g)
{
    const int K = g->C * g->k * g->k, Op = opad8(g->O);
    for (int t = 0; t < K; t++) {
        for (int o = 0; o < g->O; o++) wt[(int64_t)t * Op + o] = w[(int64_t)o * K + t];
        for (int o = g->O; o < Op; o++) wt[(int64_t)t * Op + o] = 0.0f;
    }
}

/* Rows at most 32 wide: each input row is loaded once as two vectors and
 * every shifted copy is one masked two-source permutation of them. */
KERN_INLINE void conv_shifts_narrow(float *colx, const float *in, const exec_conv *g)
{
    const int k = g->k, p = g->pad, H = g->H, W = g->W, Hp = H + 2 * p, Wo = g->Wo;
    const __mmask16 mw0 = lanes(W), mw1 = lanes(W - 16), mo0 = lanes(Wo), mo1 = lanes(Wo - 16);
    for (int kj = 0; kj < k; kj++) {
        /* output lane l of chunk v reads input column 16 v + l + kj - p */
        int32_t ix[2][16];
        __mmask16 valid[2] = {0, 0};
        for (int v = 0; v < 2; v++)
            for (int l = 0; l < 16; l++) {
                const int col = 16 * v + l + kj - p;
                ix[v][l] = col >= 0 && col < 32 ? col : 0;
                if (col >= 0 && col < W && 16 * v + l < Wo) valid[v] |= (__mmask16)(1u << l);
            }
        const __m512i i0 = _mm512_loadu_si512(ix[0]), i1 = _mm512_loadu_si512(ix[1]);
        for (int c = 0; c < g->C; c++) {
            float *dst = colx + (int64_t)(c * k + kj) * Hp * Wo;
            for (int r = 0; r < Hp; r++, dst += Wo) {
                const int h = r - p;
                __m512 o0 = _mm512_setzero_ps(), o1 = o0;
                if (h >= 0 && h < H) {
                    const float *row = in + ((int64_t)c * H + h) * W;
                    const __m512 r0 = W >= 16 ? _mm512_loadu_ps(row) : _mm512_maskz_loadu_ps(mw0, row);
                    const __m512 r1 = _mm512_maskz_loadu_ps(mw1, row + 16);
                    o0 = _mm512_maskz_permutex2var_ps(valid[0], r0, i0, r1);
                    o1 = _mm512_maskz_permutex2var_ps(valid[1], r0, i1, r1);
                }
                _mm512_mask_storeu_ps(dst, mo0, o0);
                if (mo1) _mm512_mask_storeu_ps(dst + 16, mo1, o1);
            }
        }
    }
}

/* Rows at most 32 wide, padding under 16: the sample's padded rows are
 * first written to a stack buffer (64 floats a row, zero around the row),
 * up to 64 rows at a time, and each shifted copy is then two unaligned
 * loads from it.  Writing all of a chunk's rows before reading any keeps
 * the loads clear of the stores they read (a load that straddles two
 * recent stores waits for them).  The permutations of conv_shifts_narrow
 * took 12% of conv1's forward on Zen 5; these loads and stores about 3%
 * (docs/executor-sgemm.md, "conv1"). */
KERN_INLINE void conv_shifts_buf(float *colx, const float *in, const exec_conv *g)
{
    enum { RS = 64, CH = 64 }; /* floats a buffered row, rows a chunk */
    const int k = g->k, p = g->pad, H = g->H, W = g->W, Hp = H + 2 * p, Wo = g->Wo;
    const __mmask16 mw0 = lanes(W), mw1 = lanes(W - 16), mo0 = lanes(Wo), mo1 = lanes(Wo - 16);
    float buf[CH * RS] __attribute__((aligned(64)));
    const __m512 z = _mm512_setzero_ps();
    for (int c = 0; c < g->C; c++)
        for (int r0 = 0; r0 < Hp; r0 += CH) {
            const int nr = Hp - r0 < CH ? Hp - r0 : CH;
            for (int r = 0; r < nr; r++) {
                float *q = buf + r * RS;
                const int h = r0 + r - p;
                _mm512_store_ps(q, z);
                _mm512_store_ps(q + 32, z);
                _mm512_store_ps(q + 48, z);
                __m512 v0 = z, v1 = z;
                if (h >= 0 && h < H) {
                    const float *row = in + ((int64_t)c * H + h) * W;
                    v0 = _mm512_maskz_loadu_ps(mw0, row);
                    v1 = _mm512_maskz_loadu_ps(mw1, row + 16);
                }
                _mm512_storeu_ps(q + p, v0);
                _mm512_storeu_ps(q + p + 16, v1);
            }
            for (int kj = 0; kj < k; kj++) {
                float *dst = colx + ((int64_t)(c * k + kj) * Hp + r0) * Wo;
                /* plain stores spill past the row into the next rows,
                 * written after it; rows whose spill would leave the plane
                 * (into a plane written before) are stored masked */
                const int vec = mo1 ? 32 : 16, rmax = Hp * Wo >= vec ? (Hp * Wo - vec) / Wo + 1 : 0;
                const int nfull = rmax - r0 < 0 ? 0 : rmax - r0 < nr ? rmax - r0 : nr;
                int r = 0;
                for (; r < nfull; r++, dst += Wo) {
                    const float *q = buf + r * RS + kj;
                    _mm512_storeu_ps(dst, _mm512_loadu_ps(q));
                    if (mo1) _mm512_storeu_ps(dst + 16, _mm512_loadu_ps(q + 16));
                }
                for (; r < nr; r++, dst += Wo) {
                    const float *q = buf + r * RS + kj;
                    _mm512_mask_storeu_ps(dst, mo0, _mm512_loadu_ps(q));
                    if (mo1) _mm512_mask_storeu_ps(dst + 16, mo1, _mm512_loadu_ps(q + 16));
                }
            }
        }
}

KERN void exec_kern_conv_shifts(float *colx, const float *in, const exec_conv *g)
{
    if (g->W <= 32 && g->Wo <= 32 && g->pad < 16 && g->k <= 32) {
        conv_shifts_buf(colx, in, g);
        return;
    }
    if (g->W <= 32 && g->Wo <= 32) {
        conv_shifts_narrow(colx, in, g);
        return;
    }
    const int k = g->k, p = g->pad, H = g->H, W = g->W, Hp = H + 2 * p, Wo = g->Wo;
    for (int c = 0; c < g->C; c++)
        for (int kj = 0; kj < k; kj++) {
            float *dst = colx + (int64_t)(c * k + kj) * Hp * Wo;
            /* input columns ow + kj - p for ow in [lo, hi) lie inside */
            const int lo = p - kj > 0 ? p - kj : 0, hi = W + p - kj < Wo ? W + p - kj : Wo;
            for (int r = 0; r < Hp; r++, dst += Wo) {
                const int h = r - p;
                for (int ow0 = 0; ow0 < Wo; ow0 += 16) {
                    const __mmask16 m = lanes(Wo - ow0);
                    __m512 v = _mm512_setzero_ps();
                    if (h >= 0 && h < H) {
                        const int a = lo - ow0 > 0 ? lo - ow0 : 0, b = hi - ow0;
                        const __mmask16 mi = (__mmask16)(lanes(b) & ~lanes(a));
                        /* lanes outside mi are not read (masked loads do not fault) */
                        v = _mm512_maskz_loadu_ps(mi, in + ((int64_t)c * H + h) * W + ow0 + kj - p);
                    }
                    _mm512_mask_storeu_ps(dst + ow0, m, v);
                }
            }
        }
}

/* Output channels [ob, ob + 8) at flat output pixels [p0, p0 + 16 NV):
 * 8 x NV accumulators; per tap NV input loads and 8 weight broadcasts. */
KERN_INLINE void conv_fwd_block(float *out, const float *colx, const float *wt, const float *b,
                                const exec_conv *g, int ob, int p0, const int NV,
                                __mmask16 m0, __mmask16 m1, const int FULL)
{
    const int k = g->k, Hp = g->H + 2 * g->pad, Op = opad8(g->O), Wo = g->Wo;
    const int64_t HWo = (int64_t)g->Ho * Wo, rowlen = (int64_t)Hp * Wo;
    const int nob = g->O - ob < CONV_OB ? g->O - ob : CONV_OB;
    __m512 acc[CONV_OB][2];
#pragma GCC unroll 8
    for (int j = 0; j < CONV_OB; j++) {
        const __m512 bv = _mm512_set1_ps(b && j < nob ? b[ob + j] : 0.0f);
        acc[j][0] = acc[j][1] = bv;
    }
    /* taps in (c, ki, kj) order, the order of wt's rows */
    const float *wp = wt + ob;
    for (int c = 0; c < g->C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++, wp += Op) {
                const float *x = colx + (int64_t)(c * k + kj) * rowlen + (int64_t)ki * Wo + p0;
                /* plain loads where every lane is valid: masked loads
                 * that cross a cache line measured much slower */
                const __m512 x0 = FULL ? _mm512_loadu_ps(x) : _mm512_maskz_loadu_ps(m0, x);
                const __m512 x1 = NV < 2 ? x0 : FULL ? _mm512_loadu_ps(x + 16)
                                                     : _mm512_maskz_loadu_ps(m1, x + 16);
#pragma GCC unroll 8
                for (int j = 0; j < CONV_OB; j++) {
                    const __m512 wv = _mm512_set1_ps(wp[j]);
                    acc[j][0] = _mm512_fmadd_ps(wv, x0, acc[j][0]);
                    if (NV > 1) acc[j][1] = _mm512_fmadd_ps(wv, x1, acc[j][1]);
                }
            }
#pragma GCC unroll 8
    for (int j = 0; j < CONV_OB; j++) {
        if (j >= nob) break;
        float *o = out + (ob + j) * HWo + p0;
        _mm512_mask_storeu_ps(o, m0, acc[j][0]);
        if (NV > 1) _mm512_mask_storeu_ps(o + 16, m1, acc[j][1]);
    }
}

KERN void exec_kern_conv_forward(float *out, const float *colx, const float *wt, const float *b,
                                 const exec_conv *g)
{
    assert(g->stride == 1);
    const int P = g->Ho * g->Wo;
    for (int p0 = 0; p0 < P; p0 += 32) {
        const __mmask16 m0 = lanes(P - p0), m1 = lanes(P - p0 - 16);
        /* ask for the output lines two chunks ahead now, so their
         * read-for-ownership overlaps the arithmetic */
        if (p0 + 64 < P)
            for (int o = 0; o < g->O; o++) {
                const float *q = out + (int64_t)o * P + p0 + 64;
                __builtin_prefetch(q, 1, 3);
                __builtin_prefetch(q + 16, 1, 3);
            }
        for (int ob = 0; ob < g->O; ob += CONV_OB) {
            if (m1 == 0xffff) conv_fwd_block(out, colx, wt, b, g, ob, p0, 2, m0, m1, 1);
            else if (m1) conv_fwd_block(out, colx, wt, b, g, ob, p0, 2, m0, m1, 0);
            else conv_fwd_block(out, colx, wt, b, g, ob, p0, 1, m0, m1, 0);
        }
    }
}

/* Weight gradient, lanes over flat output pixels.  A block is 4 output
 * channels x 5 taps of one kernel row (c, ki, kj0..kj0+4): 20 accumulators,
 * per pixel vector 4 gradient loads and 5 input loads, over all `ns`
 * samples; with WB, also the 4 channels' gradient sums (bias).  Channels
 * past O and taps past k repeat the last valid one and are not stored.
 * The accumulators start from zero and are added into acc at the end:
 * loading them first held the block's first FMAs behind 20 loads from a
 * 26 KB array that L1 does not keep beside d (3% of conv1's weight
 * gradient on Zen 5). */
#define BWP_OB 4
#define BWP_TJ 5
KERN_INLINE void bwp_block(float *acc, float *bacc, const float *d, const float *colx,
                           const exec_conv *g, int ns, const char **pf, const char *pf_end,
                           int ob, int c, int ki, int kj0, const int WB)
{
    const int k = g->k, K = g->C * k * k, Hp = g->H + 2 * g->pad, Wo = g->Wo;
    const int P = g->Ho * Wo, nfull = P / 16;
    const __mmask16 mt = lanes(P - 16 * nfull);
    const int64_t rowlen = (int64_t)Hp * Wo, dstride = (int64_t)g->O * P,
                  xstride = (int64_t)g->C * k * rowlen;
    int64_t doff[BWP_OB], xoff[BWP_TJ];
    __m512 s[BWP_OB][BWP_TJ], bs[BWP_OB];
#pragma GCC unroll 4
    for (int j = 0; j < BWP_OB; j++) {
        const int o = ob + j < g->O ? ob + j : g->O - 1;
        doff[j] = (int64_t)o * P;
        if (WB) bs[j] = _mm512_loadu_ps(bacc + (int64_t)o * 16);
#pragma GCC unroll 5
        for (int t = 0; t < BWP_TJ; t++) {
            const int kj = kj0 + t < k ? kj0 + t : k - 1;
            s[j][t] = _mm512_setzero_ps();
            if (j == 0) xoff[t] = (int64_t)(c * k + kj) * rowlen + (int64_t)ki * Wo;
        }
    }
    for (int n = 0; n < ns; n++) {
        const float *dn = d + n * dstride, *xn = colx + n * xstride;
        /* full vectors with plain loads (masked loads that cross a cache
         * line measured much slower), then the masked tail */
        for (int v = 0; v <= nfull; v++) {
            const int full = v < nfull;
            const __mmask16 m = full ? (__mmask16)0xffff : mt;
            if (!m) break;
            if (*pf < pf_end) {
                _mm_prefetch(*pf, _MM_HINT_T1);
                *pf += 64;
            }
            __m512 dv[BWP_OB];
#pragma GCC unroll 4
            for (int j = 0; j < BWP_OB; j++) {
                const float *q = dn + doff[j] + 16 * v;
                dv[j] = full ? _mm512_loadu_ps(q) : _mm512_maskz_loadu_ps(m, q);
                if (WB) bs[j] = _mm512_add_ps(bs[j], dv[j]);
            }
#pragma GCC unroll 5
            for (int t = 0; t < BWP_TJ; t++) {
                const float *q = xn + xoff[t] + 16 * v;
                const __m512 xv = full ? _mm512_loadu_ps(q) : _mm512_maskz_loadu_ps(m, q);
#pragma GCC unroll 4
                for (int j = 0; j < BWP_OB; j++) s[j][t] = _mm512_fmadd_ps(dv[j], xv, s[j][t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < BWP_OB; j++) {
        if (ob + j >= g->O) break;
        if (WB) _mm512_storeu_ps(bacc + (int64_t)(ob + j) * 16, bs[j]);
#pragma GCC unroll 5
        for (int t = 0; t < BWP_TJ; t++)
            if (kj0 + t < k)
            {
                float *q = acc + ((int64_t)(ob + j) * K + (c * k + ki) * k + kj0 + t) * 16;
                _mm512_storeu_ps(q, _mm512_add_ps(_mm512_loadu_ps(q), s[j][t]));
            }
    }
}

KERN void exec_kern_conv_bw_pixels(float *acc, float *bacc, const float *d, const float *colx,
                                   const exec_conv *g, int ns, const float *next)
{
    assert(g->stride == 1);
    const int k = g->k;
    /* the next gradients are pulled towards L2 a line per inner step, so
     * they stream in while this sample computes */
    const char *pf = (const char *)next,
               *pf_end = pf ? pf + (int64_t)g->O * g->Ho * g->Wo * (int64_t)sizeof *d : NULL;
    for (int ob = 0; ob < g->O; ob += BWP_OB)
        for (int c = 0; c < g->C; c++)
            for (int ki = 0; ki < k; ki++)
                for (int kj0 = 0; kj0 < k; kj0 += BWP_TJ) {
                    if (bacc && c == 0 && ki == 0 && kj0 == 0)
                        bwp_block(acc, bacc, d, colx, g, ns, &pf, pf_end, ob, c, ki, kj0, 1);
                    else
                        bwp_block(acc, bacc, d, colx, g, ns, &pf, pf_end, ob, c, ki, kj0, 0);
                }
}

KERN void exec_kern_conv_acc_finish(float *dw, float *db, const float *acc, const float *bacc,
                                    const exec_conv *g)
{
    const int64_t n = (int64_t)g->O * g->C * g->k * g->k;
    for (int64_t i = 0; i < n; i++) dw[i] += _mm512_reduce_add_ps(_mm512_loadu_ps(acc + 16 * i));
    if (db)
        for (int o = 0; o < g->O; o++) db[o] += _mm512_reduce_add_ps(_mm512_loadu_ps(bacc + 16 * o));
}

/* Weight gradient, lanes over output channels: a block is 12 taps x 32
 * channels (24 accumulators in registers, in dwT between samples); per
 * pixel two gradient loads and 12 input broadcasts, read from the padded
 * input in place.  Taps past K repeat the last one and are not stored. */
#define BWC_T 12
KERN void exec_kern_conv_bw_channels(float *dwT, float *dT, const float *d, const float *pad,
                                     const exec_conv *g)
{
    assert(g->stride == 1 && g->O % 32 == 0);
    const int k = g->k, K = g->C * k * k, O = g->O, Hp = g->H + 2 * g->pad,
              Wp = g->W + 2 * g->pad, Ho = g->Ho, Wo = g->Wo, HWo = Ho * Wo;
    for (int o = 0; o < O; o++)
        for (int p = 0; p < HWo; p++) dT[(int64_t)p * O + o] = d[(int64_t)o * HWo + p];
    for (int ob = 0; ob < O; ob += 32)
        for (int t0 = 0; t0 < K; t0 += BWC_T) {
            const float *xp[BWC_T];
            __m512 s0[BWC_T], s1[BWC_T];
#pragma GCC unroll 12
            for (int t = 0; t < BWC_T; t++) {
                const int tt = t0 + t < K ? t0 + t : K - 1;
                const int c = tt / (k * k), ki = tt / k % k, kj = tt % k;
                xp[t] = pad + ((int64_t)c * Hp + ki) * Wp + kj;
                s0[t] = _mm512_loadu_ps(dwT + (int64_t)tt * O + ob);
                s1[t] = _mm512_loadu_ps(dwT + (int64_t)tt * O + ob + 16);
            }
            for (int oh = 0; oh < Ho; oh++) {
                const float *dr = dT + (int64_t)oh * Wo * O + ob;
                const int64_t xo = (int64_t)oh * Wp;
                for (int ow = 0; ow < Wo; ow++) {
                    const __m512 d0 = _mm512_loadu_ps(dr + (int64_t)ow * O);
                    const __m512 d1 = _mm512_loadu_ps(dr + (int64_t)ow * O + 16);
#pragma GCC unroll 12
                    for (int t = 0; t < BWC_T; t++) {
                        const __m512 xv = _mm512_set1_ps(xp[t][xo + ow]);
                        s0[t] = _mm512_fmadd_ps(xv, d0, s0[t]);
                        s1[t] = _mm512_fmadd_ps(xv, d1, s1[t]);
                    }
                }
            }
#pragma GCC unroll 12
            for (int t = 0; t < BWC_T; t++) {
                if (t0 + t >= K) break;
                _mm512_storeu_ps(dwT + (int64_t)(t0 + t) * O + ob, s0[t]);
                _mm512_storeu_ps(dwT + (int64_t)(t0 + t) * O + ob + 16, s1[t]);
            }
        }
}

#else /* no AVX-512 build: exec_kern_avx512() is 0 and nothing below runs */

static void unreachable(void)
{
    assert(0 && "AVX-512 kernel called without AVX-512");
}

void exec_kern_relu(float *out, const float *in, int64_t n)
{ (void)out; (void)in; (void)n; unreachable(); }
void exec_kern_pass_positive(float *out, const float *in, const float *sel, int64_t n)
{ (void)out; (void)in; (void)sel; (void)n; unreachable(); }
void exec_kern_mask_scale(float *out, const float *in, const uint8_t *mask, int64_t n,
                          float scale)
{ (void)out; (void)in; (void)mask; (void)n; (void)scale; unreachable(); }
float exec_kern_sum(const float *a, int64_t n) { (void)a; (void)n; unreachable(); return 0; }
double exec_kern_softmax_xent_forward(float *probs, float *loss, const float *logits,
                                      const int32_t *labels, int B, int K)
{ (void)probs; (void)loss; (void)logits; (void)labels; (void)B; (void)K; unreachable(); return 0; }
void exec_kern_softmax_xent_backward_input(float *dlogits, const float *probs,
                                           const int32_t *labels, int B, int K, float scale)
{ (void)dlogits; (void)probs; (void)labels; (void)B; (void)K; (void)scale; unreachable(); }
void exec_kern_linear_forward(float *out, const float *in, const float *w, const float *b,
                              int B, int IC, int OC)
{ (void)out; (void)in; (void)w; (void)b; (void)B; (void)IC; (void)OC; unreachable(); }
void exec_kern_linear_backward_input(float *din, const float *dout, const float *w, int B,
                                     int IC, int OC)
{ (void)din; (void)dout; (void)w; (void)B; (void)IC; (void)OC; unreachable(); }
void exec_kern_linear_backward_weight(float *dw, float *db, const float *dout,
                                      const float *in, int B, int IC, int OC)
{ (void)dw; (void)db; (void)dout; (void)in; (void)B; (void)IC; (void)OC; unreachable(); }
void exec_kern_conv_shifts(float *colx, const float *in, const exec_conv *g)
{ (void)colx; (void)in; (void)g; unreachable(); }
void exec_kern_conv_wt(float *wt, const float *w, const exec_conv *g)
{ (void)wt; (void)w; (void)g; unreachable(); }
void exec_kern_conv_forward(float *out, const float *colx, const float *wt, const float *b,
                            const exec_conv *g)
{ (void)out; (void)colx; (void)wt; (void)b; (void)g; unreachable(); }
void exec_kern_conv_bw_pixels(float *acc, float *bacc, const float *d, const float *colx,
                              const exec_conv *g, int ns, const float *next)
{ (void)acc; (void)bacc; (void)d; (void)colx; (void)g; (void)ns; (void)next; unreachable(); }
void exec_kern_conv_acc_finish(float *dw, float *db, const float *acc, const float *bacc,
                               const exec_conv *g)
{ (void)dw; (void)db; (void)acc; (void)bacc; (void)g; unreachable(); }
void exec_kern_conv_bw_channels(float *dwT, float *dT, const float *d, const float *pad,
                                const exec_conv *g)
{ (void)dwT; (void)dT; (void)d; (void)pad; (void)g; unreachable(); }

#endif
