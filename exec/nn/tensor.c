/* tensor.c - aligned float buffers (tensor.h). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor.h"

void *exec_balloc(int64_t n)
{
    assert(n >= 0);
    size_t bytes = (size_t)n;
    bytes = bytes < 64 ? 64 : (bytes + 63) / 64 * 64; /* aligned_alloc wants a multiple */
    void *p = aligned_alloc(64, bytes);
    if (!p) {
        /* out of memory is a machine failure, not an input error (status.h) */
        fprintf(stderr, "cleave: out of memory allocating %zu bytes\n", bytes);
        abort();
    }
    memset(p, 0, bytes);
    return p;
}

float *exec_falloc(int64_t n)
{
    assert(n >= 0 && n <= INT64_MAX / (int64_t)sizeof(float));
    return exec_balloc(n * (int64_t)sizeof(float));
}
