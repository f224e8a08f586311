/* profile.h - per-layer measured (or derived, or imported) costs.
 *
 * A profile gives, for one model on one device type, each layer's forward,
 * input-gradient and weight-gradient time at one or more batch sizes, and
 * its activation and parameter bytes (docs/formats.md, "Profile").  Times
 * between profiled batch sizes are interpolated linearly (GSL); beyond the
 * range they extrapolate along the nearest segment; a single point scales
 * in proportion to the batch.
 */
#ifndef CL_PROFILE_H
#define CL_PROFILE_H

#include <stdint.h>

#include "base/status.h"

struct model;
struct cluster_devtype;

#define PROF_NAME_MAX 64
#define PROF_MAX_POINTS 64

typedef enum prof_source { PROF_MEASURED, PROF_DERIVED, PROF_IMPORTED, PROF_SOURCE_COUNT } prof_source;
const char *prof_source_name(prof_source s);

/* The tensor-parallel collectives one rank's share of a layer makes in one
 * pass (`cleave profile --tensor`: counted as the executor runs them):
 * calls, ring steps per t - 1 ranks (2 an all-reduce, 1 an all-gather or a
 * reduce-scatter) and floats, summed over the calls as steps x the whole
 * buffer (every rank's part): `floats` per sample, `fixed` those that do
 * not grow with the batch (a layer norm's gradient summed over the ranks).
 * prof_coll_s prices them. */
typedef struct prof_coll {
    double calls, steps, floats, fixed;
} prof_coll;
enum { PROF_F, PROF_B, PROF_W, PROF_PASSES };

/* Seconds of c for b samples on t ranks, ring algorithms on a link of bw
 * bytes/s and latency lat a step:
 * (t - 1) (steps lat + 4 (floats b + fixed) / (t bw)). */
double prof_coll_s(const prof_coll *c, int t, double b, double bw, double lat);

typedef struct prof_layer {
    char name[PROF_NAME_MAX];
    int n_points;                  /* 1..PROF_MAX_POINTS, batch sizes strictly increasing */
    /* n_points values each, in one block that `batch` owns (prof_layer_points):
     * a layer costs what its points need, not room for PROF_MAX_POINTS
     * (2.6 KB a layer, 2.6 GB for a million-layer model, once) */
    double *batch;
    double *fwd_s;                 /* seconds for the whole batch */
    double *bwd_in_s;              /* input-gradient seconds */
    double *bwd_w_s;               /* weight-gradient seconds */
    double *fwd_sd;                /* spread of repeated measurements (0 if none) */
    double act_bytes;              /* output bytes per sample (what crosses a cut) */
    double stash_bytes;            /* bytes per sample the backward pass keeps */
    double param_bytes;            /* parameter bytes */
    double update_s;               /* one optimiser step over its parameters, any batch
                                      (0 when not measured; optional in files) */
} prof_layer;

typedef struct prof {
    char model[PROF_NAME_MAX];     /* model name it was taken for */
    char device[PROF_NAME_MAX];    /* device type name it was measured on */
    prof_source source;
    char note[256];                /* where the numbers came from, free text */
    /* a rank profile (`cleave profile --tensor t`): the layers are rank 0's
     * share of a t-way split, run sequence parallel or recomputing as the
     * flags say; tensor 0 or 1: the whole model */
    int tensor, seq_par, recompute;   /* recompute: a tfm_recomp */
    /* a rank profile's collectives, n_layers x PROF_PASSES or NULL (none):
     * layer l's in its forward, input gradient and weight gradient (run
     * right after the input gradient) at prof_coll(p, l)[PROF_F..PROF_W];
     * the times leave them out.  Apart from the layers so a layer stays
     * small (test_bounds: a million-layer profile) */
    prof_coll *coll;
    int n_layers;
    prof_layer *layers;            /* owned; same order as the model's layers */
} prof;

/* Layer l's PROF_PASSES collectives (p->coll allocated, zeroed, when NULL). */
prof_coll *prof_coll_of(prof *p, int l);

int prof_load(prof *p, const char *path, cl_err *e);
struct cJSON;
int prof_from_json(prof *p, const struct cJSON *root, const char *file, cl_err *e);
struct cJSON *prof_to_json(const prof *p);  /* caller owns */
int prof_save(const prof *p, const char *path, cl_err *e);
void prof_free(prof *p);
/* Room for n points (1..PROF_MAX_POINTS) in layer l, zeroed; sets n_points.
 * prof_free releases it (a layer outside a prof: free(l->batch)). */
void prof_layer_points(prof_layer *l, int n);
/* p->layers: n_layers zeroed layers with room for n_points points each
 * (p->n_layers set); the rest of p is left as it is. */
void prof_alloc(prof *p, int n_layers, int n_points);
/* 1 when a and b hold the same layers bit for bit (names, byte counts,
 * update times and every point); the header fields are not compared. */
int prof_same_layers(const prof *a, const prof *b);

/* Seconds at batch size b (b > 0) for one layer. */
double prof_fwd_s(const prof_layer *l, double b);
double prof_bwd_in_s(const prof_layer *l, double b);
double prof_bwd_w_s(const prof_layer *l, double b);

/* Roofline derivation: time = max(FLOPs / (peak x efficiency),
 * bytes moved / memory bandwidth), at the given batch sizes. */
int prof_derive(prof *p, const struct model *m, const struct cluster_devtype *t,
                const double *batches, int n_batches, cl_err *e);

/* The batch a plan takes when none is given: the first layer's largest
 * profiled batch (0 when the profile has none).  CL_EINPUT, naming file,
 * beyond PROF_MAX_DEFAULT_BATCH (--batch's own limit), which no int holds
 * safely (2^53 used to become batch 0). */
#define PROF_MAX_DEFAULT_BATCH (1 << 30)
int prof_default_batch(const prof *p, const char *file, int *batch, cl_err *e);

/* Check that a profile describes this model (same layer count and names). */
int prof_check_model(const prof *p, const struct model *m, const char *file, cl_err *e);

#endif
