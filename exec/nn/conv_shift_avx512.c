/* conv_shift_avx512.c - AVX-512 kernels for conv2d on layers.c's row-shift
 * lowering (kern.h): the direct convolution of layers with few input
 * channels (C k < 16, stride 1: the CNN's conv1), its weight gradient with
 * lanes over pixels, and the weight gradient with lanes over output
 * channels (O a multiple of 32).  The convolutions on the SGEMM's register
 * tile are conv_avx512.c's.  Each kernel's comment says what sits in
 * registers; all sums run in a fixed order. */
#include <assert.h>

#include "avx512.h"
#include "kern.h"

#if KERN_X86

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

#else /* no AVX-512 build: exec_kern_avx512() is 0 and nothing calls these */

static void unreachable(void)
{
    assert(0 && "AVX-512 kernel called without AVX-512");
}

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
