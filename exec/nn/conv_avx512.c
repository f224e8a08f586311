/* conv_avx512.c - direct conv2d passes on the own SGEMM's register tile
 * (conv_tile.h; when they run and how fast: docs/executor-sgemm.md).
 *
 * Why: the row-shift lowering of layers.c splits a 5x5 convolution into k
 * products of depth C k (cnn conv2: five 32 x 196 x 80 products per
 * sample), too small for either SGEMM to reach its pace, and a full
 * im2col (Ho Wo x C k k per sample) costs as much time to write and read
 * back as the product itself (measured: 62 GFLOP/s with it against 113 for
 * the product alone).  Here nothing is lowered: each sample is copied
 * channel-last with zero borders, padHWC (Hp, Wp, C), so the taps (ki, kj,
 * c) of one kernel row ki are k C adjacent floats, and the tile of
 * gemm_avx512.c (up to 14 rows x 32 columns in 28 zmm accumulators) reads
 * its a operand from padHWC through a two-level k loop:
 *
 *   forward         rows: up to 14 pixels of an output row; columns: 32
 *                   output channels; k: ki (stride Wp C) x (kj, c)
 *                   (stride 1) = depth C k k; b: the weights packed per
 *                   32 channels.  Stored transposed into out (O, Ho Wo).
 *   weight gradient rows: up to 14 taps of one kernel row; columns: 32
 *                   output channels; k: the sample's pixels, oh (stride
 *                   s Wp C) x ow (stride s C); b: d transposed, packed.
 *                   Added into dwT (C k k, O), summed over the batch.
 *
 * The input gradient with at most 16 input channels (conv2) is a forward
 * convolution of d (padded by k - 1 - pad, channel-last) with the kernel
 * flipped: rows up to 2 x 14 pixels (two rows of din), columns the 16
 * input channels, one zmm, k (ki, kj, o) = depth O k k; stored
 * transposed into din.  The 14 x 32 tile with rows = pixels and columns
 * = taps, each tile row added back into padHWC, measured slower than the
 * row shifts (47-72 GFLOP/s against 55-81): per 32 k steps a tile paid
 * its start and a scatter of 28 vectors.
 *
 * Every sum runs in a fixed order that depends on the shape only.
 */
#include <string.h>

#include "conv_tile.h"
#include "avx512.h"
#include "kern.h"
#include "tensor.h"

/* C k in 16s: the shapes measured (cnn conv2); others keep the paths
 * measured for them (layers.c) */
int exec_convg_shape(const exec_conv *g, int min_ck)
{
    return g->C * g->k >= min_ck && (g->C * g->k) % 16 == 0 && g->O >= 16;
}

/* The input gradient as a forward convolution of d (below): stride 1,
 * at most 16 input channels (one zmm of columns), O in 16s (d's
 * channel-last copy by blocks), the shapes the row shifts take (C k >=
 * min_ck).  Depends on the shape only. */
int exec_convg_din_shape(const exec_conv *g, int min_ck)
{
    return g->stride == 1 && g->C <= 16 && g->C * g->k >= min_ck && g->O % 16 == 0 &&
           g->pad <= g->k - 1;
}

static int64_t panels(int64_t n)
{
    return (n + 31) / 32 * 32;
}

int64_t exec_convg_col_floats(const exec_conv *g)
{
    const int64_t K = (int64_t)g->C * g->k * g->k, P = (int64_t)g->Ho * g->Wo, O = panels(g->O);
    const int64_t din = (int64_t)g->O * g->k * g->k * 16; /* the input gradient's panel */
    const int64_t m = O * K > P * O ? O * K : P * O;
    return m > din ? m : din;
}

int64_t exec_convg_pad_floats(const exec_conv *g)
{
    const int q = g->k - 1 - g->pad; /* d's padding in the input gradient */
    const int64_t fwd = (int64_t)(g->H + 2 * g->pad) * (g->W + 2 * g->pad) * g->C,
                  din = q < 0 ? 0 : (int64_t)(g->Ho + 2 * q) * (g->Wo + 2 * q) * g->O;
    return fwd > din ? fwd : din;
}

/* padHWC (Hp, Wp, C) = one sample's in (C, H, W), zero borders (any C;
 * the AVX-512 section transposes 16 x 16 blocks when C % 16 == 0) */
static void to_hwc_any(float *pad, const float *in, const exec_conv *g)
{
    const int C = g->C, p = g->pad, Wp = g->W + 2 * p;
    memset(pad, 0, (size_t)(g->H + 2 * p) * Wp * C * sizeof *pad);
    for (int h = 0; h < g->H; h++)
        for (int w = 0; w < g->W; w++) {
            float *dst = pad + ((int64_t)(h + p) * Wp + w + p) * C;
            const float *src = in + (int64_t)h * g->W + w;
            for (int c = 0; c < C; c++) dst[c] = src[(int64_t)c * g->H * g->W];
        }
}

/* w (O, C, k, k) at tap t = (ki kj) C + c of output channel o */
static float wtap(const float *w, const exec_conv *g, int o, int t)
{
    const int C = g->C, kk = g->k * g->k;
    return w[((int64_t)o * C + t % C) * kk + t / C];
}

/* Tiles of at most 14 rows over n, sized evenly (as the SGEMM's). */
static int tile_len(int n, int i0)
{
    const int cnt = (n + 13) / 14, base = n / cnt, extra = n % cnt;
    return i0 < extra * (base + 1) ? base + 1 : base;
}

#if KERN_X86

#include "kern_tile.h"

/* to_hwc_any by 16 x 16 blocks (channels x pixels of a
 * row): per element a scalar strided copy took 5% of a conv2 pass */
KERN static void to_hwc(float *pad, const float *in, const exec_conv *g)
{
    const int C = g->C, p = g->pad, Wp = g->W + 2 * p;
    const int64_t HW = (int64_t)g->H * g->W;
    if (C % 16) {
        to_hwc_any(pad, in, g);
        return;
    }
    memset(pad, 0, (size_t)(g->H + 2 * p) * Wp * C * sizeof *pad);
    for (int h = 0; h < g->H; h++)
        for (int w0 = 0; w0 < g->W; w0 += 16) {
            const int nw = g->W - w0 < 16 ? g->W - w0 : 16;
            for (int c0 = 0; c0 < C; c0 += 16) {
                __m512 r[16];
                for (int c = 0; c < 16; c++)
                    r[c] = _mm512_maskz_loadu_ps(lanes(nw), in + (c0 + c) * HW + (int64_t)h * g->W + w0);
                tr16(r);
                float *dst = pad + ((int64_t)(h + p) * Wp + w0 + p) * C + c0;
                for (int w = 0; w < nw; w++) _mm512_storeu_ps(dst + (int64_t)w * C, r[w]);
            }
        }
}

enum { FWD, BWD_W };

/* Part `part` of `parts` of the 64-byte lines of x[0, n) prefetched into
 * L2.  The passes below call it for the next sample's operands while the
 * current one computes: at batch 256 conv2's operands (9.6 MB) do not stay
 * in cache between calls, and the demand misses at each sample's start
 * (to_hwc's 16 strided rows, the stores into out) cost a fifth of the time
 * on Zen 5 (docs/executor-sgemm.md).  Hints only: no result changes. */
KERN_INLINE void prefetch_part(const float *x, int64_t n, int part, int parts)
{
    const int64_t lines = (n + 15) / 16, l0 = lines * part / parts, l1 = lines * (part + 1) / parts;
    for (int64_t l = l0; l < l1; l++) _mm_prefetch((const char *)(x + l * 16), _MM_HINT_T1);
}

typedef struct ctile_args {
    int mode, nj;
    const float *a;     /* a(i, (q, r)) = a[i rs + q s1 + r s2] */
    int64_t rs, s1, s2;
    int n1, n2;
    const float *bp;    /* packed panel, n1 n2 rows of NR */
    const float *bias;  /* FWD: the panel's first bias value, or NULL */
    float *c;           /* FWD: out (transposed store); BWD_W: dwT rows */
    int64_t ldc;
} ctile_args;

/* rs_const: the row stride when it is a constant (0: t->rs), so the 14
 * broadcasts address by immediates; at 4 instructions per cycle the
 * front end has little room besides the 44 per k step */
KERN_INLINE void ctile(const int mr, const int rs_const, const ctile_args *t, __m512 *acc)
{
    const int64_t rs = rs_const ? rs_const : t->rs;
    const float *bp = t->bp;
    for (int q = 0; q < t->n1; q++) {
        const float *a = t->a + q * t->s1;
#pragma GCC unroll 2
        for (int r = 0; r < t->n2; r++, a += t->s2, bp += NR) tile_kstep(mr, a, rs, bp, acc);
    }
}

/* One function per tile height and pass, so the 28 accumulators stay in
 * registers (one function for the three passes kept them on the stack). */
#define CTILE_INIT(R)                                                                 \
    __m512 acc[2 * (R)];                                                              \
    for (int i = 0; i < 2 * (R); i++) acc[i] = _mm512_setzero_ps();
#define CTILE_FN(R)                                                                   \
    KERN static void ctile_fwd_##R(const ctile_args *t)                               \
    {                                                                                 \
        CTILE_INIT(R)                                                                 \
        if (t->bias) {                                                                \
            const __m512 b0 = _mm512_maskz_loadu_ps(lanes(t->nj), t->bias);           \
            const __m512 b1 = _mm512_maskz_loadu_ps(lanes(t->nj - 16), t->bias + 16); \
            for (int i = 0; i < (R); i++) { acc[2 * i] = b0; acc[2 * i + 1] = b1; }   \
        }                                                                             \
        if (t->rs == 16) ctile((R), 16, t, acc);                                      \
        else ctile((R), 0, t, acc);                                                   \
        store_t((R), acc, t->c, t->ldc, t->nj, 0);                                    \
    }                                                                                 \
    KERN static void ctile_bww_##R(const ctile_args *t)                               \
    {                                                                                 \
        CTILE_INIT(R)                                                                 \
        ctile((R), 1, t, acc);                                                        \
        store((R), acc, t->c, t->ldc, t->nj, 1);                                      \
    }
CTILE_FN(1) CTILE_FN(2) CTILE_FN(3) CTILE_FN(4) CTILE_FN(5) CTILE_FN(6) CTILE_FN(7)
CTILE_FN(8) CTILE_FN(9) CTILE_FN(10) CTILE_FN(11) CTILE_FN(12) CTILE_FN(13) CTILE_FN(14)

typedef void (*ctile_fn)(const ctile_args *);
#define CTILE_TABLE(P)                                                                     \
    {NULL, P##1, P##2, P##3, P##4, P##5, P##6, P##7, P##8, P##9, P##10, P##11, P##12, P##13, \
     P##14}
static const ctile_fn ctiles[2][15] = {CTILE_TABLE(ctile_fwd_), CTILE_TABLE(ctile_bww_)};

KERN void exec_convg_forward(float *out, const float *in, const float *w, const float *b,
                        const exec_conv_scr *sc, const exec_conv *g, int B)
{
    const int C = g->C, s = g->stride, Wp = g->W + 2 * g->pad, K = C * g->k * g->k;
    const int64_t P = (int64_t)g->Ho * g->Wo, CHW = (int64_t)C * g->H * g->W;
    /* wpk[panel][t][j] = w of output channel 32 panel + j at tap t */
    for (int j0 = 0; j0 < g->O; j0 += NR)
        for (int t = 0; t < K; t++)
            for (int j = 0; j < NR; j++)
                sc->col[(int64_t)j0 * K + t * NR + j] = j0 + j < g->O ? wtap(w, g, j0 + j, t) : 0.0f;
    for (int n = 0; n < B; n++) {
        to_hwc(sc->pad, in + n * CHW, g);
        float *o = out + (int64_t)n * g->O * P;
        for (int oh = 0; oh < g->Ho; oh++) {
            if (n + 1 < B) {
                prefetch_part(in + (n + 1) * CHW, CHW, oh, g->Ho);
                prefetch_part(o + g->O * P, g->O * P, oh, g->Ho);
            }
            for (int ow = 0, mr; ow < g->Wo; ow += mr) {
                mr = tile_len(g->Wo, ow);
                for (int j0 = 0; j0 < g->O; j0 += NR) {
                    const ctile_args t = {FWD, g->O - j0 < NR ? g->O - j0 : NR,
                                          sc->pad + ((int64_t)oh * s * Wp + ow * s) * C,
                                          (int64_t)s * C, (int64_t)Wp * C, 1, g->k, g->k * C,
                                          sc->col + (int64_t)j0 * K, b ? b + j0 : NULL,
                                          o + (int64_t)j0 * P + oh * g->Wo + ow, P};
                    ctiles[t.mode][mr](&t);
                }
            }
        }
    }
}

KERN void exec_convg_backward_weight(float *dw, float *db, const float *dout, const float *in,
                                const exec_conv_scr *sc, const exec_conv *g, int B)
{
    const int C = g->C, k = g->k, s = g->stride, Wp = g->W + 2 * g->pad, K = C * k * k,
              kc = k * C, O = g->O;
    const int64_t P = (int64_t)g->Ho * g->Wo, CHW = (int64_t)C * g->H * g->W;
    memset(sc->wp, 0, (size_t)K * O * sizeof *sc->wp); /* dwT (K, O) */
    for (int n = 0; n < B; n++) {
        const float *d = dout + (int64_t)n * O * P;
        to_hwc(sc->pad, in + n * CHW, g);
        pack_trans(sc->col, d, P, (int)P, O); /* panels of d^T (P, 32) */
        for (int ki = 0; ki < k; ki++) {
            if (n + 1 < B) {
                prefetch_part(in + (n + 1) * CHW, CHW, ki, k);
                prefetch_part(d + O * P, O * P, ki, k);
            }
            for (int r0 = 0, mr; r0 < kc; r0 += mr) {
                mr = tile_len(kc, r0);
                for (int j0 = 0; j0 < O; j0 += NR) {
                    const ctile_args t = {BWD_W, O - j0 < NR ? O - j0 : NR,
                                          sc->pad + (int64_t)ki * Wp * C + r0, 1,
                                          (int64_t)s * Wp * C, (int64_t)s * C, g->Ho, g->Wo,
                                          sc->col + (int64_t)j0 * P, NULL,
                                          sc->wp + ((int64_t)ki * kc + r0) * O + j0, O};
                    ctiles[t.mode][mr](&t);
                }
            }
        }
        if (db)
            for (int c = 0; c < O; c++) db[c] += exec_kern_sum(d + c * P, P);
    }
    for (int o = 0; o < O; o++)
        for (int t = 0; t < K; t++)
            dw[((int64_t)o * C + t % C) * k * k + t / C] += sc->wp[(int64_t)t * O + o];
}

/* Input gradient as a forward convolution: din (C, H, W) = d padded by
 * q = k - 1 - pad, correlated with w flipped in (ki, kj) and transposed
 * in (o, c).  Columns are the (at most 16) input channels, one zmm, so a
 * tile is up to 2 x 14 pixels (two rows of din, the same columns) x 16:
 * per k step one panel load, 28 broadcasts, 28 FMAs (the 14 x 32 tile
 * would multiply padding in half its columns).  k runs over the kernel
 * row ki (stride Wq O of d's channel-last copy) x (kj, o) (stride 1). */
typedef struct dtile_args {
    const float *a0, *a1; /* first pixel of each tile row in dpad (a1 unused for one row) */
    int64_t rs, s1;       /* pixel stride (O), kernel-row stride (Wq O) */
    int n1, n2;           /* k, k O */
    const float *bp;      /* panel: (ki, kj, o) x 16 */
    float *c0, *c1;       /* din at (0, h, w0) and (0, h + 1, w0) */
    int64_t ldc;          /* H W */
    int nj;               /* channels */
} dtile_args;

KERN_INLINE void dtile_kloop(const int mr, const int two, const int rs_const, const dtile_args *t,
                             __m512 *acc)
{
    const int64_t rs = rs_const ? rs_const : t->rs;
    const float *bp = t->bp;
    for (int q = 0; q < t->n1; q++) {
        const float *a0 = t->a0 + q * t->s1, *a1 = t->a1 + q * t->s1;
#pragma GCC unroll 2
        for (int r = 0; r < t->n2; r++, a0++, a1++, bp += 16) {
            /* opaque to the compiler: otherwise it keeps one pointer per
             * tile row (28 of them, spilled) instead of a0 + immediates */
            __asm__("" : "+r"(a0), "+r"(a1));
            const __m512 b = _mm512_load_ps(bp);
#pragma GCC unroll 14
            for (int i = 0; i < mr; i++) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(a0[i * rs]), b, acc[i]);
            if (two)
#pragma GCC unroll 14
                for (int i = 0; i < mr; i++)
                    acc[mr + i] = _mm512_fmadd_ps(_mm512_set1_ps(a1[i * rs]), b, acc[mr + i]);
        }
    }
}

/* mr pixels x 16 channels, stored channel-major: din[j][w0 + i] */
KERN_INLINE void dtile_store(const int mr, const __m512 *acc, float *c, int64_t ldc, int nj)
{
    __m512 r[16];
    for (int i = 0; i < 16; i++) r[i] = i < mr ? acc[i] : _mm512_setzero_ps();
    tr16(r);
    for (int j = 0; j < nj; j++) _mm512_mask_storeu_ps(c + (int64_t)j * ldc, lanes(mr), r[j]);
}

/* one function per height and row count, so the accumulators stay in
 * registers; the pixel stride is a constant when d has 32 channels */
#define DTILE_FN(R)                                                                 \
    KERN static void dtile1_##R(const dtile_args *t)                                \
    {                                                                               \
        __m512 acc[(R)];                                                            \
        for (int i = 0; i < (R); i++) acc[i] = _mm512_setzero_ps();                 \
        if (t->rs == 32) dtile_kloop((R), 0, 32, t, acc);                           \
        else dtile_kloop((R), 0, 0, t, acc);                                        \
        dtile_store((R), acc, t->c0, t->ldc, t->nj);                                \
    }                                                                               \
    KERN static void dtile2_##R(const dtile_args *t)                                \
    {                                                                               \
        __m512 acc[2 * (R)];                                                        \
        for (int i = 0; i < 2 * (R); i++) acc[i] = _mm512_setzero_ps();             \
        if (t->rs == 32) dtile_kloop((R), 1, 32, t, acc);                           \
        else dtile_kloop((R), 1, 0, t, acc);                                        \
        dtile_store((R), acc, t->c0, t->ldc, t->nj);                                \
        dtile_store((R), acc + (R), t->c1, t->ldc, t->nj);                          \
    }
DTILE_FN(1) DTILE_FN(2) DTILE_FN(3) DTILE_FN(4) DTILE_FN(5) DTILE_FN(6) DTILE_FN(7)
DTILE_FN(8) DTILE_FN(9) DTILE_FN(10) DTILE_FN(11) DTILE_FN(12) DTILE_FN(13) DTILE_FN(14)

typedef void (*dtile_fn)(const dtile_args *);
static const dtile_fn dtiles[2][15] = {CTILE_TABLE(dtile1_), CTILE_TABLE(dtile2_)};

KERN void exec_convg_backward_input(float *din, const float *dout, const float *w,
                                   const exec_conv_scr *sc, const exec_conv *g, int B)
{
    const int C = g->C, O = g->O, k = g->k, q = g->k - 1 - g->pad, Wq = g->Wo + 2 * q;
    const int64_t HW = (int64_t)g->H * g->W, P = (int64_t)g->Ho * g->Wo;
    /* d of one sample as the input of a convolution with O channels */
    const exec_conv gd = {O, g->Ho, g->Wo, C, k, 1, q, g->H, g->W};
    /* panel[(ki, kj, o)][c] = w[o][c][k-1-ki][k-1-kj], zero past C */
    for (int ki = 0; ki < k; ki++)
        for (int kj = 0; kj < k; kj++)
            for (int o = 0; o < O; o++)
                for (int c = 0; c < 16; c++)
                    sc->col[(((int64_t)ki * k + kj) * O + o) * 16 + c] =
                        c < C ? w[(((int64_t)o * C + c) * k + k - 1 - ki) * k + k - 1 - kj] : 0.0f;
    for (int n = 0; n < B; n++) {
        to_hwc(sc->pad, dout + n * O * P, &gd);
        float *dn = din + n * C * HW;
        for (int h = 0; h < g->H; h += 2) {
            const int two = h + 1 < g->H;
            if (n + 1 < B) {
                prefetch_part(dout + (n + 1) * O * P, O * P, h / 2, (g->H + 1) / 2);
                prefetch_part(dn + C * HW, C * HW, h / 2, (g->H + 1) / 2);
            }
            for (int w0 = 0, mr; w0 < g->W; w0 += mr) {
                mr = tile_len(g->W, w0);
                const float *a0 = sc->pad + ((int64_t)h * Wq + w0) * O;
                const dtile_args t = {a0, two ? a0 + (int64_t)Wq * O : a0, O, (int64_t)Wq * O, k,
                                      k * O, sc->col, dn + (int64_t)h * g->W + w0,
                                      dn + (int64_t)(h + 1) * g->W + w0, HW, C};
                dtiles[two][mr](&t);
            }
        }
    }
}

#else /* no AVX-512 build: exec_kern_avx512() is 0 and nothing calls these */
#include <stdlib.h>

void exec_convg_forward(float *out, const float *in, const float *w, const float *b,
                        const exec_conv_scr *sc, const exec_conv *g, int B)
{
    (void)out; (void)in; (void)w; (void)b; (void)sc; (void)g; (void)B;
    abort();
}
void exec_convg_backward_weight(float *dw, float *db, const float *dout, const float *in,
                                const exec_conv_scr *sc, const exec_conv *g, int B)
{
    (void)dw; (void)db; (void)dout; (void)in; (void)sc; (void)g; (void)B;
    abort();
}
void exec_convg_backward_input(float *din, const float *dout, const float *w,
                               const exec_conv_scr *sc, const exec_conv *g, int B)
{
    (void)din; (void)dout; (void)w; (void)sc; (void)g; (void)B;
    abort();
}
#endif
