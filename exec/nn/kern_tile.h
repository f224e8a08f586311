/* kern_tile.h - pieces shared by the own SGEMM (gemm_avx512.c) and the
 * direct conv2d kernels (conv_avx512.c): panel packing, the 16 x 16
 * in-register transpose and tile stores.  Included only inside their
 * AVX-512 sections, after avx512.h. */
#ifndef CL_EXEC_KERN_TILE_H
#define CL_EXEC_KERN_TILE_H

#define NR 32 /* panel width: two zmm */

/* ------------------------------------------------------------------------ */
/* packing b: panels of NR columns, dst[p][k][j] for k < kc, zero beyond nj */

/* b(k, j) = src[k ld + j] (rows of B copied) */
KERN_INLINE void pack_rows(float *dst, const float *src, int64_t ld, int kc, int nj)
{
    for (int j0 = 0; j0 < nj; j0 += NR, dst += (int64_t)kc * NR) {
        const int w = nj - j0 < NR ? nj - j0 : NR;
        const __mmask16 m0 = lanes(w), m1 = lanes(w - 16);
        const float *s = src + j0;
        for (int k = 0; k < kc; k++, s += ld) {
            _mm512_store_ps(dst + k * NR, _mm512_maskz_loadu_ps(m0, s));
            _mm512_store_ps(dst + k * NR + 16, _mm512_maskz_loadu_ps(m1, s + 16));
        }
    }
}

/* 16 x 16 transpose: r[i] lane l -> r[l] lane i */
KERN_INLINE void tr16(__m512 r[16])
{
    __m512 t[16], u[16];
    for (int p = 0; p < 8; p++) {
        t[2 * p] = _mm512_unpacklo_ps(r[2 * p], r[2 * p + 1]);
        t[2 * p + 1] = _mm512_unpackhi_ps(r[2 * p], r[2 * p + 1]);
    }
    for (int q = 0; q < 4; q++) {
        u[4 * q] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
        u[4 * q + 1] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0xee);
        u[4 * q + 2] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
        u[4 * q + 3] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xee);
    }
    /* u[4q + s] holds, in 128-bit block L, column 4L + s of rows 4q..4q+3 */
    for (int s = 0; s < 4; s++) {
        __m512 w0 = _mm512_shuffle_f32x4(u[s], u[4 + s], 0x44);
        __m512 w1 = _mm512_shuffle_f32x4(u[s], u[4 + s], 0xee);
        __m512 w2 = _mm512_shuffle_f32x4(u[8 + s], u[12 + s], 0x44);
        __m512 w3 = _mm512_shuffle_f32x4(u[8 + s], u[12 + s], 0xee);
        r[s] = _mm512_shuffle_f32x4(w0, w2, 0x88);
        r[4 + s] = _mm512_shuffle_f32x4(w0, w2, 0xdd);
        r[8 + s] = _mm512_shuffle_f32x4(w1, w3, 0x88);
        r[12 + s] = _mm512_shuffle_f32x4(w1, w3, 0xdd);
    }
}

/* b(k, j) = src[j ld + k] (rows of the source become panel columns) */
KERN_INLINE void pack_trans(float *dst, const float *src, int64_t ld, int kc, int nj)
{
    for (int j0 = 0; j0 < nj; j0 += NR, dst += (int64_t)kc * NR)
        for (int h = 0; h < NR; h += 16) {
            const int rows = nj - j0 - h; /* source rows in this half (may be <= 0) */
            for (int k0 = 0; k0 < kc; k0 += 16) {
                const int kw = kc - k0 < 16 ? kc - k0 : 16;
                const __mmask16 km = lanes(kw);
                __m512 r[16];
                for (int i = 0; i < 16; i++)
                    r[i] = i < rows ? _mm512_maskz_loadu_ps(km, src + (int64_t)(j0 + h + i) * ld + k0)
                                    : _mm512_setzero_ps();
                tr16(r);
                for (int i = 0; i < kw; i++) _mm512_store_ps(dst + (int64_t)(k0 + i) * NR + h, r[i]);
            }
        }
}

/* ------------------------------------------------------------------------ */

/* store a tile: rows i < mr, columns j < nj of C at c[i ldc + j], adding
 * the old values when add */
KERN_INLINE void store(const int mr, const __m512 *acc, float *c, int64_t ldc, int nj, int add)
{
    const __mmask16 m0 = lanes(nj), m1 = lanes(nj - 16);
    for (int i = 0; i < mr; i++, c += ldc) {
        __m512 v0 = acc[2 * i], v1 = acc[2 * i + 1];
        if (add) {
            v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, c));
            v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, c + 16));
        }
        _mm512_mask_storeu_ps(c, m0, v0);
        _mm512_mask_storeu_ps(c + 16, m1, v1);
    }
}

/* the same tile stored transposed: element (i, j) at c[j ldc + i] */
KERN_INLINE void store_t(const int mr, const __m512 *acc, float *c, int64_t ldc, int nj, int add)
{
    const __mmask16 im = lanes(mr);
    /* unrolled (constant acc indices), or the accumulators live on the stack */
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        if (16 * h >= nj) break;
        __m512 r[16];
        for (int i = 0; i < 16; i++) r[i] = i < mr ? acc[2 * i + h] : _mm512_setzero_ps();
        tr16(r);
        const int n = nj - 16 * h < 16 ? nj - 16 * h : 16;
        for (int j = 0; j < n; j++) {
            float *cj = c + (int64_t)(16 * h + j) * ldc;
            __m512 v = r[j];
            if (add) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(im, cj));
            _mm512_mask_storeu_ps(cj, im, v);
        }
    }
}

/* One k step of a tile: acc[2i + h] += a[i rs] b(16h..16h+15), i < mr,
 * with b the 32 values at bp (mr constant: the loop unrolls) */
KERN_INLINE void tile_kstep(const int mr, const float *a, int64_t rs, const float *bp, __m512 *acc)
{
    const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
#pragma GCC unroll 14
    for (int i = 0; i < mr; i++) {
        const __m512 ai = _mm512_set1_ps(a[i * rs]);
        acc[2 * i] = _mm512_fmadd_ps(ai, b0, acc[2 * i]);
        acc[2 * i + 1] = _mm512_fmadd_ps(ai, b1, acc[2 * i + 1]);
    }
}

#endif
