/* optim.h - stochastic gradient descent with momentum and weight decay,
 * over one stage's parameter block.
 *
 * Per element, PyTorch's formulation (torch.optim.SGD, dampening 0):
 *     g = grad + weight_decay * p      (decay on conv/linear weights only)
 *     v = momentum * v + g
 *     p = p - lr * v
 * and the gradient is zeroed in the same pass, ready for the next
 * accumulation.
 */
#ifndef CL_EXEC_OPTIM_H
#define CL_EXEC_OPTIM_H

#include <stdint.h>

#include "net.h"

/* Plain value; velocity is owned (exec_sgd_free). */
typedef struct exec_sgd {
    double lr, momentum, weight_decay;
    float *velocity; /* same layout as the net's parameter block, zeroed */
    int64_t n;
} exec_sgd;

void exec_sgd_init(exec_sgd *s, exec_net *n, double lr, double momentum, double weight_decay);
/* One update of every tensor of n from its accumulated gradient; zeroes the
 * gradient block. */
void exec_sgd_step(exec_sgd *s, exec_net *n);
void exec_sgd_free(exec_sgd *s);

#endif
