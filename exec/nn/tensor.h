/* tensor.h - float32 buffers and named views into a parameter block.
 *
 * The executor keeps a stage's parameters in one allocation and their
 * gradients in another with the same layout (llm.c style), so an optimiser
 * step or an all-reduce is one pass over one block.  Tensors are views into
 * those blocks; every view starts on a 64-byte boundary (EXEC_ALIGN_FLOATS)
 * so AVX-512 loads of a row start aligned.
 */
#ifndef CL_EXEC_TENSOR_H
#define CL_EXEC_TENSOR_H

#include <stdint.h>

#define EXEC_ALIGN_FLOATS 16 /* 64 bytes: one cache line, one AVX-512 register */

/* A named parameter tensor: `data` in the parameter block, `grad` at the same
 * offset in the gradient block.  Plain value; the block owns the memory. */
typedef struct exec_tensor {
    char name[96];     /* "conv1.weight" (model layer name + role) */
    float *data;       /* n floats in the parameter block */
    float *grad;       /* n floats in the gradient block  */
    int64_t n;         /* elements */
    int64_t offset;    /* index of data[0] in the block (floats) */
    int layer;         /* model layer index it belongs to */
    int decay;         /* 1: weight decay applies (weights), 0: biases, norms */
} exec_tensor;

/* n rounded up to a multiple of EXEC_ALIGN_FLOATS. */
static inline int64_t exec_pad_floats(int64_t n)
{
    return (n + EXEC_ALIGN_FLOATS - 1) / EXEC_ALIGN_FLOATS * EXEC_ALIGN_FLOATS;
}

/* A zeroed, 64-byte aligned buffer of n >= 0 floats (n = 0 gives a valid
 * one-line buffer).  Aborts when out of memory; the caller frees with free(). */
float *exec_falloc(int64_t n);

/* Same for n bytes (masks, indices). */
void *exec_balloc(int64_t n);

#endif
