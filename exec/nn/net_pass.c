/* net_pass.c - the forward and backward passes over a net (net.h): where
 * each layer's operands live in the memory plan (net.c), each layer's
 * passes, and the per-layer clock. */
#include <assert.h>
#include <string.h>

#include "gemm.h"
#include "net_layout.h"

/* ======================================================================== */
/* passes                                                                    */

/* Where layer k's output / input / output gradient / input gradient live. */
static float *out_of(const exec_net *n, exec_acts *a, int k)
{
    return n->ly[k].keep_out ? a->out[k] : n->slot[n->ly[k].out_slot];
}

static const float *in_of(const exec_net *n, exec_acts *a, int k, const float *caller_in)
{
    if (k > 0) return out_of(n, a, k - 1);
    return n->keep_x0 ? a->x0 : caller_in;
}

static float *dout_of(const exec_net *n, exec_acts *a, int k, const float *caller_dout)
{
    const xlayer *x = &n->ly[k];
    if (x->keep_dout) return a->dout[k];
    if (k == n->L - 1) return (float *)caller_dout; /* read only */
    return n->slot[x->dout_slot];
}

static float *din_of(const exec_net *n, exec_acts *a, int k, float *caller_din)
{
    if (k > 0) return dout_of(n, a, k - 1, NULL);
    return caller_din ? caller_din : a->dx0;
}

static void fwd_layer(exec_net *n, exec_acts *a, int k, const float *x, float *y, int train)
{
    xlayer *l = &n->ly[k];
    const int B = a->batch;
    const int64_t nin = (int64_t)B * l->in_elems;
    switch (l->kind) {
    case MODEL_LINEAR:
        exec_linear_forward(y, x, l->w, l->b, B, l->IC, l->O);
        break;
    case MODEL_CONV2D:
        exec_conv2d_forward(y, x, l->w, l->b, n->col, &l->conv, B);
        break;
    case MODEL_MAXPOOL2D:
        exec_maxpool2d_forward(y, a->aux[k], x, &l->pool, B);
        break;
    case MODEL_AVGPOOL2D:
        exec_avgpool2d_forward(y, x, &l->pool, B);
        break;
    case MODEL_RELU:
        exec_relu_forward(y, x, nin);
        break;
    case MODEL_FLATTEN:
        memcpy(y, x, (size_t)nin * sizeof *y);
        break;
    case MODEL_DROPOUT:
        if (train) exec_dropout_forward(y, a->aux[k], x, nin, l->ml->dropout_p, l->rng);
        else memcpy(y, x, (size_t)nin * sizeof *y);
        break;
    case MODEL_BATCHNORM2D: {
        if (train) {
            float *xhat = a->aux[k];
            float *invstd = xhat + (int64_t)a->max_batch * l->out_elems;
            exec_batchnorm2d_forward_train(y, xhat, invstd, l->run_mean, l->run_var, x, l->w,
                                           l->b, B, l->C, l->HW);
        } else {
            exec_batchnorm2d_forward_eval(y, x, l->w, l->b, l->run_mean, l->run_var, B, l->C,
                                          l->HW);
        }
        break;
    }
    case MODEL_SOFTMAX_XENT: {
        int K = (int)l->in_elems;
        a->loss_sum = exec_softmax_xent_forward(a->aux[k], y, x, a->labels, B, K);
        a->correct = exec_count_correct(x, a->labels, B, K);
        break;
    }
    default:
        assert(l->is_tfm && "exec_net_check lets no other kind through");
        exec_tfm_forward(&l->tg, y, x, l->w, a->aux[k], B);
    }
}

static void bwd_in_layer(exec_net *n, exec_acts *a, int k, const float *dy, float *dx,
                         float loss_scale)
{
    xlayer *l = &n->ly[k];
    const int B = a->batch;
    const int64_t nin = (int64_t)B * l->in_elems;
    switch (l->kind) {
    case MODEL_LINEAR:
        exec_linear_backward_input(dx, dy, l->w, B, l->IC, l->O);
        break;
    case MODEL_CONV2D:
        exec_conv2d_backward_input(dx, dy, l->w, n->col, &l->conv, B);
        break;
    case MODEL_MAXPOOL2D:
        exec_maxpool2d_backward_input(dx, dy, a->aux[k], &l->pool, B);
        break;
    case MODEL_AVGPOOL2D:
        exec_avgpool2d_backward_input(dx, dy, &l->pool, B);
        break;
    case MODEL_RELU:
        exec_relu_backward_input(dx, dy, out_of(n, a, k), nin);
        break;
    case MODEL_FLATTEN:
        memcpy(dx, dy, (size_t)nin * sizeof *dx);
        break;
    case MODEL_DROPOUT:
        exec_dropout_backward_input(dx, dy, a->aux[k], nin, l->ml->dropout_p);
        break;
    case MODEL_BATCHNORM2D: {
        const float *xhat = a->aux[k];
        const float *invstd = xhat + (int64_t)a->max_batch * l->out_elems;
        exec_batchnorm2d_backward_input(dx, dy, xhat, invstd, l->w, B, l->C, l->HW);
        break;
    }
    case MODEL_SOFTMAX_XENT:
        exec_softmax_xent_backward_input(dx, a->aux[k], a->labels, B, (int)l->in_elems,
                                         loss_scale);
        break;
    default:
        assert(l->is_tfm && "exec_net_check lets no other kind through");
        exec_tfm_backward_input(&l->tg, dx, dy, NULL, l->w, a->aux[k], B);
    }
}

static void bwd_w_layer(exec_net *n, exec_acts *a, int k)
{
    xlayer *l = &n->ly[k];
    const int B = a->batch;
    const float *dy = a->dout[k]; /* kept for every layer with weights */
    switch (l->kind) {
    case MODEL_LINEAR:
        exec_linear_backward_weight(l->dw, l->db, dy, in_of(n, a, k, NULL), B, l->IC, l->O);
        break;
    case MODEL_CONV2D:
        exec_conv2d_backward_weight(l->dw, l->db, dy, in_of(n, a, k, NULL), n->col, &l->conv,
                                    B);
        break;
    case MODEL_BATCHNORM2D:
        exec_batchnorm2d_backward_weight(l->dw, l->db, dy, a->aux[k], B, l->C, l->HW);
        break;
    default:
        if (l->is_tfm) exec_tfm_backward_weight(&l->tg, l->dw, dy, NULL, a->aux[k], B);
        break;
    }
}

/* Add the time since t0 to *acc; returns now (the next piece's start). */
static double charge(double *acc, double t0)
{
    double t1 = exec_now();
    *acc += t1 - t0;
    return t1;
}

void exec_net_forward(exec_net *n, exec_acts *a, const float *in, const int32_t *labels,
                      int batch, int train)
{
    assert(a->net == n && batch >= 1 && batch <= a->max_batch);
    a->batch = batch;
    a->train = train;
    double t0 = n->clock ? exec_now() : 0;
    if (n->keep_x0) memcpy(a->x0, in, (size_t)batch * n->ly[0].in_elems * sizeof *a->x0);
    if (exec_net_has_loss(n)) {
        assert(labels);
        memcpy(a->labels, labels, (size_t)batch * sizeof *labels);
    }
    n->pass = 0;
    for (int k = 0; k < n->L; k++) {
        n->at = k;
        fwd_layer(n, a, k, in_of(n, a, k, in), out_of(n, a, k), train);
        if (n->clock) t0 = charge(&n->clock[k].fwd_s, t0);
    }
}

/* The backward pass from the top: input gradients while layers need them
 * (the top ones, contiguous), and with `weights` each layer's weight
 * gradient right after its input gradient.  The clock charges each piece
 * from the end of the one before (the copy of dout goes to the top layer's
 * input gradient). */
static void backward(exec_net *n, exec_acts *a, const float *dout, float *din, float loss_scale,
                     int weights)
{
    assert(a->net == n && a->batch >= 1 && a->train);
    const int L = n->L;
    assert(exec_net_has_loss(n) || dout);
    assert(!n->ly[0].need_din || din || (n->flags & EXEC_NET_KEEP_ALL));
    assert(weights || !(n->flags & EXEC_NET_RECOMPUTE_FULL));
    double t = n->clock ? exec_now() : 0;
    if (dout && n->ly[L - 1].keep_dout)
        memcpy(a->dout[L - 1], dout, (size_t)a->batch * n->ly[L - 1].out_elems * sizeof *dout);
    int input_grads = 1;
    for (int k = L - 1; k >= 0; k--) {
        input_grads = input_grads && n->ly[k].need_din;
        if (!input_grads && !weights) break;
        /* sequence parallelism: one gather of the output gradient for both
         * passes, when both run here */
        n->ly[k].tg.fused = weights && input_grads;
        if (input_grads) {
            n->pass = 1, n->at = k;
            bwd_in_layer(n, a, k, dout_of(n, a, k, dout), din_of(n, a, k, din), loss_scale);
            if (n->clock) t = charge(&n->clock[k].bwd_in_s, t);
        }
        if (weights && n->ly[k].has_w) {
            n->pass = 2, n->at = k;
            bwd_w_layer(n, a, k);
            if (n->clock) t = charge(&n->clock[k].bwd_w_s, t);
        }
    }
}

void exec_net_backward_input(exec_net *n, exec_acts *a, const float *dout, float *din,
                             float loss_scale)
{
    backward(n, a, dout, din, loss_scale, 0);
}

void exec_net_backward(exec_net *n, exec_acts *a, const float *dout, float *din,
                       float loss_scale)
{
    backward(n, a, dout, din, loss_scale, 1);
}

void exec_net_backward_weight(exec_net *n, exec_acts *a)
{
    assert(a->net == n && a->batch >= 1 && a->train && !(n->flags & EXEC_NET_RECOMPUTE_FULL));
    for (int k = n->L - 1; k >= 0; k--) {
        if (!n->ly[k].has_w) continue;
        n->ly[k].tg.fused = 0;
        n->pass = 2, n->at = k;
        double t0 = n->clock ? exec_now() : 0;
        bwd_w_layer(n, a, k);
        if (n->clock) charge(&n->clock[k].bwd_w_s, t0);
    }
}

void exec_net_run_pass(exec_net *n, exec_acts *a, int layer, int pass)
{
    const int k = layer - n->first;
    assert(k >= 0 && k < n->L && a->net == n && a->batch >= 1 && a->train);
    n->ly[k].tg.fused = 0; /* each pass on its own */
    n->pass = pass, n->at = k;
    switch (pass) {
    case 0:
        assert(in_of(n, a, k, NULL));
        fwd_layer(n, a, k, in_of(n, a, k, NULL), out_of(n, a, k), 1);
        break;
    case 1:
        assert(n->ly[k].need_din && (k < n->L - 1 || exec_net_has_loss(n)));
        bwd_in_layer(n, a, k, dout_of(n, a, k, NULL), din_of(n, a, k, NULL), 1.0f / (float)a->batch);
        break;
    default: bwd_w_layer(n, a, k); break;
    }
}

void exec_net_set_clock(exec_net *n, exec_layer_clock *clock)
{
    n->clock = clock;
}

int exec_net_pass(const exec_net *n) { return n->pass; }
int exec_net_pass_layer(const exec_net *n) { return n->first + n->at; }
