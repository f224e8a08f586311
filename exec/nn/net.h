/* net.h - a contiguous range of a model's layers (a stage) made runnable:
 * one parameter block, one gradient block, and forward / input-gradient /
 * weight-gradient passes over the range on one microbatch at a time.
 *
 * A whole model is the stage [0, n_layers).  A pipeline cuts the model into
 * stages and gives each its own exec_net; stage k's output activations are
 * stage k+1's input, stage k+1's input-gradient is stage k's output
 * gradient.  Initial weights depend only on (seed, layer index), never on
 * where the cuts are, so every partition of a model starts from the same
 * weights as sequential training.
 *
 * Per-microbatch state lives in an exec_acts (what the forward pass keeps
 * for the backward pass), so a stage can hold several microbatches in
 * flight (GPipe, 1F1B) with one acts each.  Memory plan: a layer's output is
 * kept in the acts only if a backward pass needs it (the next layer's
 * weight gradient, relu's own mask) or it leaves the stage; other
 * activations and gradients pass through scratch buffers owned by the net.
 * Output gradients of layers with weights are kept in the acts from the
 * input-gradient pass to the weight-gradient pass.
 *
 * Concurrency: calls on one net are made by one thread at a time (forward
 * and backward calls share the net's scratch).
 * Weight-gradient calls add into the gradient block; exec_sgd (optim.h)
 * consumes and zeroes it.
 */
#ifndef CL_EXEC_NET_H
#define CL_EXEC_NET_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "models/model.h"
#include "base/status.h"
#include "profiles/profile.h"
#include "layers_tfm.h"
#include "tensor.h"

typedef struct exec_net exec_net;
typedef struct exec_acts exec_acts;

/* Check that the executor can run layers [first, last) of m: refuses kinds
 * it cannot run (block, add) and models whose layers do not form a chain,
 * naming the layer: "<file>: layers[5] (name): the executor cannot run kind
 * block; it is for planning only".  CL_OK or CL_EINPUT. */
int exec_net_check(const model *m, int first, int last, const char *file, cl_err *e);
/* Can layers [first, last) of m be split over `size` tensor-parallel
 * workers?  Every attention layer's heads and mlp layer's hidden width must
 * be divisible by size, and some such layer must exist (nothing else is
 * split).  CL_EINPUT naming the layer and the degrees that would do. */
int exec_net_tp_check(const model *m, int first, int last, int size, const char *file,
                      cl_err *e);
/* Can the split layers of [first, last) of m run sequence parallel over
 * `size` workers?  Every attention and mlp layer's tokens must be
 * divisible by size.  CL_EINPUT naming the layer. */
int exec_net_sp_check(const model *m, int first, int last, int size, const char *file,
                      cl_err *e);
/* Whether layers [first, last) of m hold a layer tensor parallelism splits
 * (attention, mlp). */
int exec_net_has_split(const model *m, int first, int last);

enum {
    EXEC_NET_KEEP_ALL = 1, /* keep every activation and gradient in the acts:
                            * the reference the memory plan is tested against */
    EXEC_NET_RECOMPUTE = 2, /* selective recomputation: attention layers keep
                            * one sample's softmax probabilities and recompute
                            * them in the input-gradient pass (layers_tfm.h,
                            * exec_tfm.recompute); the same results, bit for bit */
    EXEC_NET_RECOMPUTE_FULL = 4, /* full recomputation: attention and mlp layers
                            * keep their input only and recompute the rest in
                            * their input-gradient pass, into one scratch of
                            * the net's; the same bits again, but the weight
                            * gradient must follow each layer's input gradient:
                            * exec_net_backward only (asserted) */
    EXEC_NET_SEQ_PAR = 8    /* sequence parallelism in the layers a tensor-
                            * parallel net splits (layers_tfm.h, exec_tfm.seq):
                            * they keep their layer norms' activations and
                            * pass each other T / size tokens a sample, the
                            * stage's input and output stay whole; ignored
                            * without a split.  exec_net_sp_check first */
};
/* The flags of a recomputation mode (a tfm_recomp) and sequence
 * parallelism: what a plan or a command asks the nets to do. */
int exec_net_flags_of(int recompute, int seq_par);

/* Build the stage [first, last) of m for microbatches of up to max_batch
 * samples, weights initialised from `seed` (He for layers feeding a relu,
 * Glorot otherwise, biases 0; docs/executor.md).  m must outlive the net.
 * Returns CL_EINPUT (as exec_net_check, or a size that does not fit an int)
 * with *out NULL; the caller destroys the net. */
int exec_net_create(exec_net **out, const model *m, int first, int last, int max_batch,
                    uint64_t seed, int flags, const char *file, cl_err *e);
/* The same for worker tp->rank of a tensor-parallel group (layers_tfm.h,
 * exec_tp_comm; tp must outlive the net): its attention and mlp layers hold
 * their shards of the weights a whole net of the same seed starts from and
 * call tp->allreduce inside their passes, so every worker of the group must
 * make the same forward and backward calls, each from its own thread; the
 * other layers are replicated: each worker computes them whole, with the
 * same bits.  exec_net_tp_check first; tp NULL or of size 1: exec_net_create. */
int exec_net_create_tp(exec_net **out, const model *m, int first, int last, int max_batch,
                       uint64_t seed, int flags, const exec_tp_comm *tp, const char *file,
                       cl_err *e);
/* Rank 0's share of layers [first, last) split `size` ways, on
 * exec_tp_comm_solo (no all-reduces: for timing one rank's compute and
 * sizing its memory, not for its values); exec_net_create when size is 1
 * or the layers hold nothing to split.  Errors as exec_net_create_tp. */
int exec_net_create_solo(exec_net **out, const model *m, int first, int last, int max_batch,
                         uint64_t seed, int flags, int size, const char *file, cl_err *e);
/* Rank 0's share as exec_net_create_solo builds it, on a communicator that
 * counts (exec/nn/tp_count.c): while k->into is not NULL, every collective
 * the net calls is added to k->into[(layer - first) * PROF_PASSES + pass]
 * for the layer and pass running (exec_net_pass; floats of the whole call,
 * for the batch the pass ran), then does what the solo one does.  A stage
 * without a split layer counts nothing (k->solo NULL: a whole net).  k
 * must outlive the net.  Errors
 * as exec_net_create_tp. */
typedef struct exec_tp_counter {
    exec_tp_comm c;
    const exec_tp_comm *solo;
    const exec_net *net;
    int first;
    prof_coll *into;
} exec_tp_counter;
int exec_net_create_counted(exec_net **out, exec_tp_counter *k, const model *m, int first, int last,
                            int max_batch, uint64_t seed, int flags, int size, const char *file,
                            cl_err *e);
void exec_net_destroy(exec_net *n);
/* Gather the parameters of shards[0..size) (the workers of one group, in
 * rank order, over the same layers as whole) into whole, an unsplit net:
 * split tensors assembled, replicated ones from rank 0. */
void exec_net_tp_gather(exec_net *whole, exec_net *const *shards, int size);
/* The same between any blocks laid out as the nets' parameter blocks
 * (parameters, gradients, momentum): wb whole's, sb[r] shard r's; to_whole
 * 1 gathers the shards into wb, 0 splits wb into the shards (each rank its
 * part of a split tensor, a copy of every replicated one). */
void exec_net_tp_move(exec_net *whole, float *wb, exec_net *const *shards, float *const *sb,
                      int size, int to_whole);

/* Shape of the stage. */
int64_t exec_net_in_elems(const exec_net *n);    /* per sample */
int64_t exec_net_out_elems(const exec_net *n);   /* per sample (1 after the loss) */
int exec_net_has_loss(const exec_net *n);        /* ends in softmax_xent */
int exec_net_classes(const exec_net *n);         /* its logits, when has_loss */
/* Whether the stage's input needs a gradient (some earlier layer of the model
 * has parameters); when 0 backward_input never writes `din`. */
int exec_net_needs_din(const exec_net *n);

/* The parameter and gradient blocks (same layout, *n_floats each, padding
 * included and always zero), and the named tensors carved from them. */
float *exec_net_params(exec_net *n, int64_t *n_floats);
float *exec_net_grads(exec_net *n, int64_t *n_floats);
int exec_net_n_tensors(const exec_net *n);
const exec_tensor *exec_net_tensor(const exec_net *n, int k);
void exec_net_zero_grads(exec_net *n);

/* State beyond the parameters, for checkpoints (exec/ckpt/checkpoint.h): the
 * running-statistics block (batchnorm running mean and variance, *n_floats,
 * padding included) and the random streams of the stage's dropout layers,
 * stream k of exec_net_n_rngs in layer order.  Both belong to the net. */
float *exec_net_bufs(exec_net *n, int64_t *n_floats);
int exec_net_n_rngs(const exec_net *n);
gsl_rng *exec_net_rng(exec_net *n, int k);

/* Bytes per sample the acts keep for model layer `layer` between its
 * forward and backward passes (kept output, argmax, mask, normalised input,
 * probabilities; the stage input is counted with the first layer), and the
 * output-gradient bytes kept from the input- to the weight-gradient pass. */
void exec_net_layer_bytes(const exec_net *n, int layer, uint64_t *stash, uint64_t *wgrad);

/* Bytes of the scratch full recomputation works in (0 without). */
uint64_t exec_net_recompute_bytes(const exec_net *n);
/* Bytes of the scratch sequence parallelism gathers into (0 without):
 * one whole (B, T, D) activation and one worker's share of it. */
uint64_t exec_net_seq_bytes(const exec_net *n);

/* Per-microbatch state for up to max_batch samples (<= the net's); the
 * caller destroys it.  exec_acts_bytes: its whole allocation. */
exec_acts *exec_acts_create(const exec_net *n, int max_batch);
void exec_acts_destroy(exec_acts *a);
uint64_t exec_acts_bytes(const exec_acts *a);

/* Forward over the stage.  in (batch, in_elems) is read during the call
 * only; labels (batch) are needed when the stage ends in the loss (checked
 * in [0, classes) by the caller) and copied.  train: batch statistics and
 * dropout on; otherwise evaluation mode. */
void exec_net_forward(exec_net *n, exec_acts *a, const float *in, const int32_t *labels,
                      int batch, int train);
/* The stage output (batch, out_elems), valid until the next forward on a:
 * activations for the next stage, or per-sample losses after the loss. */
const float *exec_acts_output(const exec_acts *a);
/* After a forward through the loss: sum of the losses, and how many samples
 * the logits classified correctly. */
double exec_acts_loss_sum(const exec_acts *a);
int exec_acts_correct(const exec_acts *a);

/* Input-gradient pass over the stage for the microbatch in a (after its
 * forward in training mode).  dout (batch, out_elems): gradient of the
 * stage output, read during the call (NULL when the stage ends in the
 * loss, whose gradient is loss_scale per sample: 1 / minibatch size for a
 * mean loss).  din (batch, in_elems): receives the gradient of the stage
 * input when exec_net_needs_din, else may be NULL. */
void exec_net_backward_input(exec_net *n, exec_acts *a, const float *dout, float *din,
                             float loss_scale);
/* Weight-gradient pass: adds this microbatch's dL/dW into the gradient
 * block.  Needs backward_input on a first (any time before). */
void exec_net_backward_weight(exec_net *n, exec_acts *a);
/* Both at once, layer by layer from the top: each layer's weight gradient
 * right after its input gradient, while the layer's output gradient and
 * input are still in cache (all input gradients first left a small top
 * layer's operands to be fetched back after the whole stage's backward).
 * The same arithmetic in the same per-layer order: results are identical
 * to exec_net_backward_input followed by exec_net_backward_weight. */
void exec_net_backward(exec_net *n, exec_acts *a, const float *dout, float *din,
                       float loss_scale);

/* One pass of one layer (model index `layer` of this stage) on a's
 * operands, as the stage passes run it: 0 forward (training mode), 1 input
 * gradient, 2 weight gradient (adds into the gradient block).  For
 * measuring a kernel on its own (exec_profile_isolated): a must hold a
 * forward and a backward of the stage, and a forward pass of a dropout
 * layer draws from its stream. */
void exec_net_run_pass(exec_net *n, exec_acts *a, int layer, int pass);

/* Per-layer clocks, for profiling in context: while set, every forward,
 * input- and weight-gradient call adds each layer's wall seconds into
 * clock[layer - first] (the copy of the stage input counts as the first
 * layer's forward).  clock has last - first entries and must outlive its
 * use; NULL stops timing. */
typedef struct exec_layer_clock {
    double fwd_s, bwd_in_s, bwd_w_s;
} exec_layer_clock;
void exec_net_set_clock(exec_net *n, exec_layer_clock *clock);
/* The pass the net is running or ran last: 0 forward, 1 input gradient, 2
 * weight gradient (PROF_F, PROF_B, PROF_W), and its layer (the model's
 * index).  A collective called
 * from inside a pass (exec_tp_comm) asks them to charge its time or count
 * to that pass and layer: a fused backward runs both passes. */
int exec_net_pass(const exec_net *n);
int exec_net_pass_layer(const exec_net *n);

/* Does layer have parameters / compute an input gradient? */
int exec_net_layer_has_weights(const exec_net *n, int layer);
int exec_net_layer_needs_din(const exec_net *n, int layer);
/* A vision transformer layer's geometry (and split), or NULL for other kinds. */
const exec_tfm *exec_net_tfm(const exec_net *n, int layer);

#endif
