/* optim.c - SGD with momentum and weight decay (optim.h). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "optim.h"

void exec_sgd_init(exec_sgd *s, exec_net *n, double lr, double momentum, double weight_decay)
{
    memset(s, 0, sizeof *s);
    s->lr = lr;
    s->momentum = momentum;
    s->weight_decay = weight_decay;
    exec_net_params(n, &s->n);
    s->velocity = exec_falloc(s->n);
}

void exec_sgd_step(exec_sgd *s, exec_net *n)
{
    int64_t np;
    exec_net_params(n, &np);
    assert(np == s->n);
    const float lr = (float)s->lr, mu = (float)s->momentum;
    for (int k = 0; k < exec_net_n_tensors(n); k++) {
        const exec_tensor *t = exec_net_tensor(n, k);
        float *p = t->data, *g = t->grad, *v = s->velocity + t->offset;
        const float wd = t->decay ? (float)s->weight_decay : 0.0f;
        for (int64_t i = 0; i < t->n; i++) {
            float gi = g[i] + wd * p[i];
            v[i] = mu * v[i] + gi;
            p[i] -= lr * v[i];
            g[i] = 0;
        }
    }
}

void exec_sgd_free(exec_sgd *s)
{
    free(s->velocity);
    memset(s, 0, sizeof *s);
}
