/* optim.c - SGD with momentum and weight decay (optim.h). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "optim.h"
#include "vec.h"

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
        const exec_v4f vwd = {wd, wd, wd, wd}, vmu = {mu, mu, mu, mu}, vlr = {lr, lr, lr, lr},
                       z = {0, 0, 0, 0};
        int64_t i = 0;
        for (; i + 4 <= t->n; i += 4) {
            exec_v4f pi = exec_v_load(p + i);
            exec_v4f vi = vmu * exec_v_load(v + i) + (exec_v_load(g + i) + vwd * pi);
            exec_v_store(v + i, vi);
            exec_v_store(p + i, pi - vlr * vi);
            exec_v_store(g + i, z);
        }
        for (; i < t->n; i++) {
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
