/* vec.h - the executor's elementwise loops, written with GCC vector
 * extensions (internal to exec/).
 *
 * The build uses -O2 with the baseline x86-64 target, where GCC 12's
 * vectoriser ("very cheap" cost model) leaves loops of unknown length scalar
 * and compiles `x > 0 ? x : 0` to a branch, which mispredicts on real
 * activations (measured: docs/executor.md, "Elementwise loops").  Four-wide
 * vectors map onto SSE2, which every x86-64 has, and onto the generic
 * fallback elsewhere; results are the same as the scalar loops'.
 */
#ifndef CL_EXEC_VEC_H
#define CL_EXEC_VEC_H

#include <stdint.h>
#include <string.h>

typedef float exec_v4f __attribute__((vector_size(16)));
typedef int32_t exec_v4i __attribute__((vector_size(16)));

static inline exec_v4f exec_v_load(const float *p)
{
    exec_v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void exec_v_store(float *p, exec_v4f v)
{
    memcpy(p, &v, sizeof v);
}

/* out = in > 0 ? in : 0 */
static inline void exec_v_relu(float *out, const float *in, int64_t n)
{
    const exec_v4f z = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        exec_v4f x = exec_v_load(in + i);
        exec_v_store(out + i, (exec_v4f)((exec_v4i)x & (x > z)));
    }
    for (; i < n; i++) out[i] = in[i] > 0 ? in[i] : 0.0f;
}

/* out = sel > 0 ? in : 0 */
static inline void exec_v_pass_positive(float *out, const float *in, const float *sel, int64_t n)
{
    const exec_v4f z = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        exec_v4f x = exec_v_load(in + i), s = exec_v_load(sel + i);
        exec_v_store(out + i, (exec_v4f)((exec_v4i)x & (s > z)));
    }
    for (; i < n; i++) out[i] = sel[i] > 0 ? in[i] : 0.0f;
}

/* a += b */
static inline void exec_v_add(float *a, const float *b, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) exec_v_store(a + i, exec_v_load(a + i) + exec_v_load(b + i));
    for (; i < n; i++) a[i] += b[i];
}

/* a = b (short runs: inline, no call) */
static inline void exec_v_copy(float *a, const float *b, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) exec_v_store(a + i, exec_v_load(b + i));
    for (; i < n; i++) a[i] = b[i];
}

/* a = v */
static inline void exec_v_fill(float *a, float v, int64_t n)
{
    const exec_v4f x = {v, v, v, v};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) exec_v_store(a + i, x);
    for (; i < n; i++) a[i] = v;
}

/* Sum in four interleaved lanes, then the tail: a fixed order, so the
 * result is reproducible (it differs from a left-to-right sum by rounding). */
static inline float exec_v_sum(const float *a, int64_t n)
{
    exec_v4f s = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) s += exec_v_load(a + i);
    float t = (s[0] + s[1]) + (s[2] + s[3]);
    for (; i < n; i++) t += a[i];
    return t;
}

#endif
