/* data.h - training data: Fashion-MNIST from IDX files, synthetic sets for
 * tests, normalisation, and seeded shuffling.
 *
 * IDX (LeCun's MNIST format, also Fashion-MNIST's): a big-endian header,
 * magic 0x00000803 for unsigned-byte images (count, rows, cols) and
 * 0x00000801 for labels (count), then the bytes.  Debian's
 * dataset-fashion-mnist package ships them gzip'd; zlib reads both gzip'd
 * and plain files.
 */
#ifndef CL_EXEC_DATA_H
#define CL_EXEC_DATA_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "base/status.h"

/* Where the Debian package puts the files. */
#define EXEC_FMNIST_DIR "/usr/share/datasets/fashion-mnist"

/* A labelled set: plain value owning x and y (exec_data_free). */
typedef struct exec_data {
    int64_t n;          /* samples */
    int C, H, W;        /* per-sample shape */
    int64_t dim;        /* C * H * W */
    int classes;        /* 1 + the largest label */
    float *x;           /* (n, dim) */
    int32_t *y;         /* (n), in [0, classes) */
} exec_data;

void exec_data_free(exec_data *d);

/* Read an IDX image file and its label file into d, pixels scaled to
 * [0, 1].  Fails with CL_EINPUT naming the file: missing or unreadable
 * (with the install hint), not IDX (bad magic), truncated, corrupt gzip, or
 * image and label counts that differ. */
int exec_idx_read(const char *images, const char *labels, exec_data *d, cl_err *e);

/* Fashion-MNIST's training and test sets from dir (NULL: EXEC_FMNIST_DIR):
 * {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz. */
int exec_fmnist_load(const char *dir, exec_data *train, exec_data *test, cl_err *e);

/* Keep the first n samples (n <= d->n). */
void exec_data_limit(exec_data *d, int64_t n);

/* Standardise both sets with the training set's pixel mean and standard
 * deviation (one pair over all pixels, computed in double):
 * x = (x - mean) / sd.  Returns mean and sd through the pointers. */
void exec_data_normalise(exec_data *train, exec_data *test, double *mean, double *sd);

/* A synthetic classification set of n samples, shape (C, H, W): each class
 * has a fixed random pattern of +-1 (drawn from seed), and a sample is 0.5
 * times its class's pattern plus unit Gaussian noise; `stream` selects
 * independent samples of the same classes (0 train, 1 test). */
void exec_data_synthetic(exec_data *d, int64_t n, int C, int H, int W, int classes,
                         uint64_t seed, int stream);

/* perm = a uniformly random permutation of 0 .. n-1 drawn from rng. */
void exec_shuffle(int64_t *perm, int64_t n, gsl_rng *rng);

/* Copy samples idx[0 .. B-1] into x (B, dim) and y (B). */
void exec_data_gather(const exec_data *d, const int64_t *idx, int B, float *x, int32_t *y);

#endif
