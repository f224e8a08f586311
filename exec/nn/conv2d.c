/* conv2d.c - the conv2d layer's passes (layers.h, exec_conv2d_*): the
 * lowerings onto matrix products (im2col, row shifts) and the own AVX-512
 * kernels where they are faster (conv_tile.h, kern.h), chosen per shape.
 * Split from layers.c, whose conventions it keeps: reductions in a fixed
 * order, so results are bit-for-bit reproducible. */
#include <assert.h>
#include <string.h>

#include "conv_tile.h"
#include "gemm.h"
#include "kern.h"
#include "layers.h"
#include "tensor.h"
#include "vec.h"

/* ======================================================================== */
/* conv2d                                                                    */
/*                                                                           */
/* Two lowerings onto matrix products, per sample:                           */
/* - full im2col: col (K, Ho*Wo) with K = C*k*k holds every input patch as a */
/*   column, so out (O, Ho*Wo) = w (O, K) col;                               */
/* - row shifts (stride 1 only): colX (C*k, Hp*Wo) holds each padded input   */
/*   row shifted by kj = 0..k-1, once.  The patch rows for kernel row ki are */
/*   colX's columns from ki*Wo on, so out = sum over ki of w_ki (O, C*k)     */
/*   colX[:, ki*Wo ...] with leading dimension Hp*Wo: k products, k times    */
/*   less lowering traffic.  Measured faster when C*k >= 16 (docs/executor.md)*/
/*   and used then; w_ki is w permuted to (k, O, C*k) in scratch.            */

#define CONV_SHIFT_MIN_CK 16

int exec_conv_init(exec_conv *g, int C, int H, int W, int O, int k, int stride, int pad)
{
    memset(g, 0, sizeof *g);
    if (C < 1 || H < 1 || W < 1 || O < 1 || k < 1 || stride < 1 || pad < 0) return -1;
    if (H + 2 * pad < k || W + 2 * pad < k) return -1;
    *g = (exec_conv){C, H, W, O, k, stride, pad, (H + 2 * pad - k) / stride + 1,
                     (W + 2 * pad - k) / stride + 1};
    return 0;
}

static int conv_shift(const exec_conv *g)
{
    return g->stride == 1 && g->C * g->k >= CONV_SHIFT_MIN_CK;
}

/* Shapes the direct kernels of kern.h take (on an AVX-512 CPU): few input
 * channels (where im2col would be used) for the forward and weight
 * gradient; output channels in 32s for the weight gradient otherwise. */
static int conv_direct_shape(const exec_conv *g)
{
    return g->stride == 1 && g->C * g->k < CONV_SHIFT_MIN_CK;
}
static int conv_direct(const exec_conv *g)
{
    return conv_direct_shape(g) && exec_kern_avx512();
}
static int conv_chan_shape(const exec_conv *g)
{
    return g->stride == 1 && g->O % 32 == 0 && !conv_direct_shape(g);
}
static int conv_chan(const exec_conv *g)
{
    return conv_chan_shape(g) && exec_kern_avx512();
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* Scratch layout: col (full: K x Ho*Wo; shifts: C*k x Hp*Wo; direct: that
 * for EXEC_KERN_BWP_SAMPLES samples; channel kernel: also d transposed,
 * Ho*Wo x O), pad (C, Hp, Wp), wperm (shifts: k, O, C*k; direct: K, O
 * rounded up to 8), dwT (K, O; direct: K x O x 16 lane sums, then O x 16
 * for the bias).  Sized for every path the shape allows, so turning
 * the AVX-512 kernels off (tests) never needs more. */
typedef struct conv_scratch {
    float *col, *pad, *wperm, *dwT;
} conv_scratch;

static int64_t conv_scratch_at(const exec_conv *g, float *base, conv_scratch *sc)
{
    const int64_t K = (int64_t)g->C * g->k * g->k, Hp = g->H + 2 * g->pad,
                  Wp = g->W + 2 * g->pad, HWo = (int64_t)g->Ho * g->Wo,
                  colx = (int64_t)g->C * g->k * Hp * g->Wo;
    const int sh = conv_shift(g), dir = conv_direct_shape(g), ch = conv_chan_shape(g);
    int64_t col = sh ? colx : K * HWo;
    if (dir) col = max64(col, colx * EXEC_KERN_BWP_SAMPLES);
    if (ch) col = max64(col, HWo * g->O);
    int64_t pad = (int64_t)g->C * Hp * Wp;
    if (exec_convg_shape(g, CONV_SHIFT_MIN_CK) || exec_convg_din_shape(g, CONV_SHIFT_MIN_CK)) {
        col = max64(col, exec_convg_col_floats(g));
        pad = max64(pad, exec_convg_pad_floats(g));
    }
    int64_t sizes[4] = {col, pad,
                        max64(sh ? K * g->O : 0, dir ? K * ((g->O + 7) / 8 * 8) : 0),
                        dir ? (K + 1) * g->O * 16 : K * g->O};
    conv_scratch unused;
    if (!sc) sc = &unused;
    float **ptr[4] = {&sc->col, &sc->pad, &sc->wperm, &sc->dwT};
    int64_t off = 0;
    for (int i = 0; i < 4; i++) {
        if (base) *ptr[i] = base + off;
        off += exec_pad_floats(sizes[i]);
    }
    return off;
}

int64_t exec_conv_col_floats(const exec_conv *g)
{
    return conv_scratch_at(g, NULL, NULL);
}

/* the tiled direct kernels of conv_tile.h (forward, weight gradient) */
static int conv_own(const exec_conv *g, conv_scratch *sc, exec_conv_scr *scr)
{
    if (!exec_convg_shape(g, CONV_SHIFT_MIN_CK) || !exec_kern_avx512()) return 0;
    *scr = (exec_conv_scr){sc->col, sc->pad, sc->dwT};
    return 1;
}

static void zero(float *p, int64_t n)
{
    if (n > 0) memset(p, 0, (size_t)n * sizeof *p);
}

/* The sample's input (C,H,W) copied into pad (C, H+2p, W+2p) with zero
 * borders, so the lowerings never test bounds. */
static void pad_input(float *pad, const float *in, const exec_conv *g)
{
    const int p = g->pad, Hp = g->H + 2 * p, Wp = g->W + 2 * p;
    zero(pad, (int64_t)g->C * Hp * Wp);
    for (int c = 0; c < g->C; c++)
        for (int h = 0; h < g->H; h++)
            exec_v_copy(pad + ((int64_t)c * Hp + h + p) * Wp + p, in + ((int64_t)c * g->H + h) * g->W,
                        g->W);
}

/* The padded gradient's interior into din (C,H,W). */
static void unpad(float *din, const float *pad, const exec_conv *g)
{
    const int p = g->pad, Hp = g->H + 2 * p, Wp = g->W + 2 * p;
    for (int c = 0; c < g->C; c++)
        for (int h = 0; h < g->H; h++)
            exec_v_copy(din + ((int64_t)c * g->H + h) * g->W, pad + ((int64_t)c * Hp + h + p) * Wp + p,
                        g->W);
}

/* Full im2col: col[(c,ki,kj)][oh*Wo + ow] = pad[c][oh*s + ki][ow*s + kj].
 * With accumulate, the adjoint instead: pad[...] += col[...]. */
static void im2col(float *col, float *pad, const exec_conv *g, int adjoint)
{
    const int k = g->k, s = g->stride, Ho = g->Ho, Wo = g->Wo;
    const int Hp = g->H + 2 * g->pad, Wp = g->W + 2 * g->pad;
    for (int c = 0; c < g->C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *row = col + ((int64_t)(c * k + ki) * k + kj) * Ho * Wo;
                float *src = pad + ((int64_t)c * Hp + ki) * Wp + kj;
                for (int oh = 0; oh < Ho; oh++, row += Wo, src += (int64_t)s * Wp) {
                    if (s == 1 && !adjoint) exec_v_copy(row, src, Wo);
                    else if (s == 1) exec_v_add(src, row, Wo);
                    else if (!adjoint) for (int ow = 0; ow < Wo; ow++) row[ow] = src[ow * s];
                    else for (int ow = 0; ow < Wo; ow++) src[ow * s] += row[ow];
                }
            }
}

/* Row shifts: colX[(c,kj)][r*Wo + ow] = pad[c][r][ow + kj], r < Hp; or the
 * adjoint, pad += colX. */
static void shifts(float *colx, float *pad, const exec_conv *g, int adjoint)
{
    const int k = g->k, Wo = g->Wo, Hp = g->H + 2 * g->pad, Wp = g->W + 2 * g->pad;
    for (int c = 0; c < g->C; c++)
        for (int kj = 0; kj < k; kj++) {
            float *row = colx + (int64_t)(c * k + kj) * Hp * Wo;
            float *src = pad + (int64_t)c * Hp * Wp + kj;
            for (int r = 0; r < Hp; r++, row += Wo, src += Wp) {
                if (adjoint) exec_v_add(src, row, Wo);
                else exec_v_copy(row, src, Wo);
            }
        }
}

/* wperm[ki][o][c*k + kj] = w[o][c][ki][kj] */
static void permute_weights(float *wperm, const float *w, const exec_conv *g)
{
    const int k = g->k, Ck = g->C * k;
    for (int o = 0; o < g->O; o++)
        for (int c = 0; c < g->C; c++)
            for (int ki = 0; ki < k; ki++)
                for (int kj = 0; kj < k; kj++)
                    wperm[((int64_t)ki * g->O + o) * Ck + c * k + kj] =
                        w[(((int64_t)o * g->C + c) * k + ki) * k + kj];
}

void exec_conv2d_forward(float *out, const float *in, const float *w, const float *b,
                         float *col, const exec_conv *g, int B)
{
    conv_scratch sc;
    conv_scratch_at(g, col, &sc);
    exec_conv_scr scr;
    if (conv_own(g, &sc, &scr)) {
        exec_convg_forward(out, in, w, b, &scr, g, B);
        return;
    }
    const int64_t HWo = (int64_t)g->Ho * g->Wo, CHW = (int64_t)g->C * g->H * g->W;
    const int K = g->C * g->k * g->k, Ck = g->C * g->k, N = (int)HWo,
              ldx = (g->H + 2 * g->pad) * g->Wo, sh = conv_shift(g);
    if (conv_direct(g)) {
        exec_kern_conv_wt(sc.wperm, w, g);
        for (int n = 0; n < B; n++) {
            exec_kern_conv_shifts(sc.col, in + n * CHW, g);
            exec_kern_conv_forward(out + (int64_t)n * g->O * HWo, sc.col, sc.wperm, b, g);
        }
        return;
    }
    if (sh) permute_weights(sc.wperm, w, g);
    for (int n = 0; n < B; n++) {
        float *o = out + (int64_t)n * g->O * HWo; /* (O, Ho*Wo) */
        if (b)
            for (int c = 0; c < g->O; c++) exec_v_fill(o + c * HWo, b[c], HWo);
        pad_input(sc.pad, in + n * CHW, g);
        if (sh) {
            shifts(sc.col, sc.pad, g, 0);
            /* o += w_ki (O, Ck) . colX[:, ki*Wo ...] (Ck, HWo) */
            for (int ki = 0; ki < g->k; ki++)
                exec_gemm(0, 0, g->O, N, Ck, 1.0f, sc.wperm + (int64_t)ki * g->O * Ck, Ck,
                          sc.col + (int64_t)ki * g->Wo, ldx, b || ki ? 1.0f : 0.0f, o, N);
        } else {
            im2col(sc.col, sc.pad, g, 0);
            /* o += w (O, K) . col (K, HWo) */
            exec_gemm(0, 0, g->O, N, K, 1.0f, w, K, sc.col, N, b ? 1.0f : 0.0f, o, N);
        }
    }
}

void exec_conv2d_backward_input(float *din, const float *dout, const float *w,
                                float *col, const exec_conv *g, int B)
{
    conv_scratch sc;
    conv_scratch_at(g, col, &sc);
    const int64_t HWo = (int64_t)g->Ho * g->Wo, CHW = (int64_t)g->C * g->H * g->W,
                  Hp = g->H + 2 * g->pad, Wp = g->W + 2 * g->pad;
    const int K = g->C * g->k * g->k, Ck = g->C * g->k, N = (int)HWo,
              ldx = (int)(Hp * g->Wo), sh = conv_shift(g);
    if (exec_convg_din_shape(g, CONV_SHIFT_MIN_CK) && exec_kern_avx512()) {
        const exec_conv_scr scr = {sc.col, sc.pad, sc.dwT};
        exec_convg_backward_input(din, dout, w, &scr, g, B);
        return;
    }
    if (sh) permute_weights(sc.wperm, w, g);
    for (int n = 0; n < B; n++) {
        const float *d = dout + (int64_t)n * g->O * HWo; /* (O, HWo) */
        zero(sc.pad, (int64_t)g->C * Hp * Wp);
        if (sh) {
            /* dcolX[:, ki*Wo ...] (Ck, HWo) += w_ki^T (Ck, O) . d (O, HWo) */
            zero(sc.col, (int64_t)Ck * ldx);
            for (int ki = 0; ki < g->k; ki++)
                exec_gemm(1, 0, Ck, N, g->O, 1.0f, sc.wperm + (int64_t)ki * g->O * Ck, Ck, d, N,
                          1.0f, sc.col + (int64_t)ki * g->Wo, ldx);
            shifts(sc.col, sc.pad, g, 1);
        } else {
            /* dcol (K, HWo) = w^T (K, O) . d (O, HWo) */
            exec_gemm(1, 0, K, N, g->O, 1.0f, w, K, d, N, 0.0f, sc.col, N);
            im2col(sc.col, sc.pad, g, 1);
        }
        unpad(din + n * CHW, sc.pad, g);
    }
}

/* db (O) += the sums of one sample's output-gradient planes d (O, Ho Wo)
 * (db may be NULL); run right after the sample's product, while d is in
 * cache. */
static void bias_grad(float *db, const float *d, const exec_conv *g)
{
    if (!db) return;
    const int64_t HWo = (int64_t)g->Ho * g->Wo;
    const int fast = exec_kern_avx512();
    for (int c = 0; c < g->O; c++)
        db[c] += fast ? exec_kern_sum(d + c * HWo, HWo) : exec_v_sum(d + c * HWo, HWo);
}

void exec_conv2d_backward_weight(float *dw, float *db, const float *dout, const float *in,
                                 float *col, const exec_conv *g, int B)
{
    conv_scratch sc;
    conv_scratch_at(g, col, &sc);
    exec_conv_scr scr;
    if (conv_own(g, &sc, &scr)) {
        exec_convg_backward_weight(dw, db, dout, in, &scr, g, B);
        return;
    }
    const int64_t HWo = (int64_t)g->Ho * g->Wo, CHW = (int64_t)g->C * g->H * g->W;
    const int k = g->k, K = g->C * k * k, Ck = g->C * k, N = (int)HWo,
              ldx = (g->H + 2 * g->pad) * g->Wo, dir = conv_direct(g), chan = conv_chan(g),
              sh = conv_shift(g) && !chan;
    if (dir) {
        /* per-lane sums over every sample, then into dw and db; the bias
         * lanes follow the weight lanes in dwT */
        const int64_t colx = (int64_t)g->C * k * (g->H + 2 * g->pad) * g->Wo,
                      nacc = (int64_t)g->O * K * 16;
        float *bacc = db ? sc.dwT + nacc : NULL;
        zero(sc.dwT, nacc + g->O * 16);
        for (int n0 = 0; n0 < B; n0 += EXEC_KERN_BWP_SAMPLES) {
            const int ns = B - n0 < EXEC_KERN_BWP_SAMPLES ? B - n0 : EXEC_KERN_BWP_SAMPLES;
            for (int n = 0; n < ns; n++)
                exec_kern_conv_shifts(sc.col + n * colx, in + (n0 + n) * CHW, g);
            const float *next = n0 + ns < B ? dout + (int64_t)(n0 + ns) * g->O * HWo : NULL;
            exec_kern_conv_bw_pixels(sc.dwT, bacc, dout + (int64_t)n0 * g->O * HWo, sc.col, g, ns,
                                     next);
        }
        exec_kern_conv_acc_finish(dw, db, sc.dwT, bacc, g);
        return;
    }
    /* dwT (K, O): the (K rows, O columns) orientation measured faster than
     * dw (O, K) += d . col^T */
    zero(sc.dwT, (int64_t)K * g->O);
    for (int n = 0; n < B; n++) {
        const float *d = dout + (int64_t)n * g->O * HWo;
        pad_input(sc.pad, in + n * CHW, g);
        if (chan) {
            exec_kern_conv_bw_channels(sc.dwT, sc.col, d, sc.pad, g);
        } else if (sh) {
            shifts(sc.col, sc.pad, g, 0);
            /* dwT_ki (Ck, O) += colX[:, ki*Wo ...] (Ck, HWo) . d^T (HWo, O) */
            for (int ki = 0; ki < k; ki++)
                exec_gemm(0, 1, Ck, g->O, N, 1.0f, sc.col + (int64_t)ki * g->Wo, ldx, d, N, 1.0f,
                          sc.dwT + (int64_t)ki * Ck * g->O, g->O);
        } else {
            im2col(sc.col, sc.pad, g, 0);
            exec_gemm(0, 1, K, g->O, N, 1.0f, sc.col, N, d, N, 1.0f, sc.dwT, g->O);
        }
        bias_grad(db, d, g);
    }
    /* back to (O, C, k, k): full rows are (c, ki, kj), shift rows (ki, c, kj) */
    for (int o = 0; o < g->O; o++)
        for (int c = 0; c < g->C; c++)
            for (int ki = 0; ki < k; ki++)
                for (int kj = 0; kj < k; kj++) {
                    int64_t r = sh ? ((int64_t)ki * Ck + c * k + kj) : (((int64_t)c * k + ki) * k + kj);
                    dw[(((int64_t)o * g->C + c) * k + ki) * k + kj] += sc.dwT[r * g->O + o];
                }
}
