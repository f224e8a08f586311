/* avx512.h - how the executor's AVX-512 kernels are compiled: the one
 * place every *_avx512.c file takes it from (kern.h says which shapes
 * they serve and why).
 *
 * KERN_X86 is 1 where GCC builds for x86-64; there each kernel carries a
 * function target attribute (AVX-512F, AVX-512DQ, FMA) while the rest of
 * the build stays baseline x86-64, and runs only after exec_kern_avx512()
 * has found the CPU and OS support them.  Elsewhere (another compiler or
 * architecture) KERN_X86 is 0, the kernels are left out, and each file's
 * stubs stand in for them: nothing calls them, since exec_kern_avx512()
 * is then 0.  Clang gets the stubs too: the kernels were only ever
 * built and measured with GCC. */
#ifndef CL_EXEC_AVX512_H
#define CL_EXEC_AVX512_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KERN_X86 1
#include <immintrin.h>

#define KERN __attribute__((target("avx512f,avx512dq,fma")))
#define KERN_INLINE static inline __attribute__((always_inline, target("avx512f,avx512dq,fma")))

/* mask of the first n lanes (n <= 0: none, n >= 16: all) */
KERN_INLINE __mmask16 lanes(int n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n > 0 ? n : 0)) - 1u);
}
#else
#define KERN_X86 0
#endif

#endif
