/* tensor.h - tensor parallelism (and recomputation) as a restated question
 * (issue 15).
 *
 * t GPUs of a node run each layer together (Megatron-LM's column- and
 * row-parallel attention and MLP).  Seen from one of them, that is one
 * device running a smaller model (models/tfm_rank.h) whose layers also
 * wait for the tensor-parallel collectives: blocking in Megatron, so they
 * occupy the rank like compute.  The cluster becomes one device per
 * tensor-parallel group (its first GPU standing for it), so the existing
 * pipeline x data-parallel planner and simulator answer the per-rank
 * question; every per-device figure is one GPU's (docs/transformer.md,
 * "Tensor parallelism in plan and sim").
 */
#ifndef CL_PLAN_TENSOR_H
#define CL_PLAN_TENSOR_H

#include "base/status.h"
#include "models/model.h"
#include "models/tfm_rank.h"
#include "profiles/cluster.h"
#include "profiles/profile.h"
#include "profiles/tfm_time.h"

/* The cluster of tensor-parallel groups: every node's devices taken t at a
 * time in order, each group one device (the first's id and type); same
 * nodes and links.  CL_EINPUT, naming `file`, when t does not divide a
 * node's device count or a group mixes device types. */
int tp_cluster(cluster *out, const cluster *c, int t, const char *file, cl_err *e);

/* Add to each layer's forward and input-gradient times at every profiled
 * batch size the seconds of its collectives (tfm_rank_layer_comm of the
 * full model's transformer) on the link `intra` (the node's). */
void tp_add_comm(prof *pf, const model *full, const tfm_rank_opts *o, cluster_link intra);

/* A rank profile's (prof.tensor t > 1): add to each layer's forward,
 * input- and weight-gradient times at every profiled batch size the
 * collectives it was counted making (prof.coll), priced as rings on
 * t ranks over `intra` (prof_coll_s). */
void tp_add_counted(prof *pf, int t, cluster_link intra);

/* Context parallelism (docs/transformer.md, "Context parallelism"): add
 * to each block's forward and input-gradient times at every profiled
 * batch size what its key/value ring (tfm_rank_kv_ring of the full model
 * full) leaves exposed on the link `ring`: c - 1 steps each way, each
 * max(a c-th of the attention core, the transfer), the core's seconds from
 * prof_tfm_core_s when `shaped`, else the core's FLOP share of the layer's
 * time.  Recomputation (full or selective) runs the forward's ring again
 * in the backward.  Nothing without context parallelism. */
void cp_add_ring(prof *pf, const model *full, const tfm_rank_opts *o, prof_attn a, const cluster_devtype *t,
                 int shaped, cluster_link ring);

/* The derived profile of a question: prof_derive of mr (the whole model
 * md, or its per-rank model) for device type t at the np batch sizes pts;
 * then, for a transformer on a device with a kernel model (*shaped = 1),
 * every layer priced from its shapes (prof_tfm_times, attention a); then,
 * when rs (t > 1, sequence parallelism, recomputation or context
 * parallelism), the context-parallel ring on `ring` (cp_add_ring) and each
 * layer's tensor-parallel collectives on `intra` (tp_add_comm).  The one place
 * `plan` and `--layout` derive costs.  CL_EINPUT from prof_derive. */
int tp_derive(prof *pf, const model *md, const model *mr, const tfm_rank_opts *o, int rs, prof_attn a,
              const cluster_devtype *t, cluster_link intra, cluster_link ring, const double *pts, int np,
              int *shaped, cl_err *e);

#endif
