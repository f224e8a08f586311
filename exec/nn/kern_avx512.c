/* kern_avx512.c - which AVX-512 kernels run (the CPU's and OS's support,
 * found once), and the small ones: sums, elementwise passes, softmax
 * cross-entropy.  The linear kernels are in linear_avx512.c, the
 * row-shift conv2d ones in conv_shift_avx512.c (kern.h says which shapes
 * each serves).  Each kernel's comment says what sits in registers; all
 * sums run in a fixed order. */
#include <assert.h>
#include <math.h>
#include <pthread.h>

#include "avx512.h"
#include "kern.h"

/* ------------------------------------------------------------------------ */
/* dispatch                                                                  */

static int have_avx512;       /* set once, under pthread_once */
static _Atomic int disabled;  /* tests only; atomic so a read never races */

static void detect(void)
{
#if KERN_X86
    __builtin_cpu_init();
    /* GCC's check also requires the OS to save the ZMM state (XGETBV) */
    have_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("fma");
    if (have_avx512) exec_kern_linear_tables();
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

#endif
