/* data.c - IDX reading through zlib, normalisation, synthetic sets,
 * shuffling (data.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>
#include <zlib.h>

#include "base/fileio.h"
#include "data.h"
#include "tensor.h"

#define IDX_IMAGES 0x00000803u /* unsigned bytes, 3 dimensions */
#define IDX_LABELS 0x00000801u /* unsigned bytes, 1 dimension  */
#define IDX_MAX_COUNT 100000000u /* guards against a garbage header */
#define IDX_MAX_SIDE 65536u

#define INSTALL_HINT "hint: apt-get install dataset-fashion-mnist (or make deps), or point --data at a folder holding the IDX files"

void exec_data_free(exec_data *d)
{
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}

/* Read up to n bytes; *got is how many arrived before the end of the file.
 * A corrupt stream is CL_EINPUT. */
static int gz_read(gzFile g, const char *path, unsigned char *buf, uint64_t n, uint64_t *got,
                   cl_err *e)
{
    *got = 0;
    while (*got < n) {
        unsigned chunk = n - *got > (1u << 30) ? (1u << 30) : (unsigned)(n - *got);
        int r = gzread(g, buf + *got, chunk);
        if (r < 0) {
            int zerr;
            const char *msg = gzerror(g, &zerr);
            return cl_fail(e, CL_EINPUT, "%s: corrupt gzip data: %s (%s)", path, msg, INSTALL_HINT);
        }
        if (r == 0) break;
        *got += (uint64_t)r;
    }
    return CL_OK;
}

static int truncated(const char *path, uint64_t n, uint64_t got, const char *what, cl_err *e)
{
    return cl_fail(e, CL_EINPUT, "%s: truncated: expected %llu bytes of %s, found %llu (%s)", path,
                   (unsigned long long)n, what, (unsigned long long)got, INSTALL_HINT);
}

/* Exactly n bytes into buf. */
static int gz_exact(gzFile g, const char *path, unsigned char *buf, uint64_t n, const char *what,
                    cl_err *e)
{
    uint64_t got;
    int rc = gz_read(g, path, buf, n, &got, e);
    if (!rc && got < n) rc = truncated(path, n, got, what, e);
    return rc;
}

/* Exactly n bytes into a buffer that grows as data arrives (*out, caller
 * frees), so a header claiming more than the file holds costs only what
 * the file holds before it is reported as truncated. */
static int gz_grow(gzFile g, const char *path, uint64_t n, const char *what, unsigned char **out,
                   cl_err *e)
{
    const uint64_t step = (uint64_t)64 << 20;
    uint64_t have = 0, cap = n < step ? n : step;
    unsigned char *buf = cl_malloc(cap ? cap : 1);
    int rc = CL_OK;
    while (have < n) {
        if (have == cap) {
            cap = n - cap < cap ? n : 2 * cap;
            buf = cl_realloc(buf, cap);
        }
        uint64_t got;
        if ((rc = gz_read(g, path, buf + have, cap - have, &got, e))) break;
        have += got;
        if (have < cap) {
            rc = truncated(path, n, have, what, e);
            break;
        }
    }
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    return CL_OK;
}

/* Read past the data to the end of the stream, so a corrupt gzip member
 * (bad checksum) is reported; bytes after the data are ignored. */
static int gz_end(gzFile g, const char *path, cl_err *e)
{
    char buf[4096];
    int r;
    while ((r = gzread(g, buf, sizeof buf)) > 0) {
    }
    if (r < 0) {
        int zerr;
        const char *msg = gzerror(g, &zerr);
        return cl_fail(e, CL_EINPUT, "%s: corrupt gzip data: %s (%s)", path, msg, INSTALL_HINT);
    }
    return CL_OK;
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Open an IDX file and read its header: magic and `ndim` sizes. */
static int idx_open(const char *path, uint32_t magic, int ndim, uint32_t *dims, gzFile *out,
                    cl_err *e)
{
    *out = NULL;
    int fd;
    struct stat st;
    if (stat(path, &st) != 0)
        return cl_fail(e, CL_EINPUT, "%s: cannot open: %s (%s)", path, strerror(errno), INSTALL_HINT);
    int orc = cl_in_open(path, 0, &fd, &st, e); /* a regular file: no FIFO, no device */
    if (orc) return orc;
    gzFile g = gzdopen(fd, "rb");
    if (!g) {
        close(fd);
        return cl_fail(e, CL_EINPUT, "%s: cannot open: out of memory (%s)", path, INSTALL_HINT);
    }
    unsigned char h[16];
    int rc = gz_exact(g, path, h, 4, "the IDX magic number", e);
    if (!rc && be32(h) == magic) rc = gz_exact(g, path, h + 4, 4 * (uint64_t)ndim, "the IDX header", e);
    if (rc) {
        gzclose(g);
        return rc;
    }
    if (be32(h) != magic) {
        gzclose(g);
        return cl_fail(e, CL_EINPUT, "%s: not an IDX %s file (magic 0x%08x, expected 0x%08x) (%s)",
                       path, magic == IDX_IMAGES ? "image" : "label", be32(h), magic,
                       INSTALL_HINT);
    }
    for (int k = 0; k < ndim; k++) {
        dims[k] = be32(h + 4 + 4 * k);
        uint32_t lim = k == 0 ? IDX_MAX_COUNT : IDX_MAX_SIDE;
        if (dims[k] < 1 || dims[k] > lim) {
            gzclose(g);
            return cl_fail(e, CL_EINPUT, "%s: IDX header: dimension %d is %u (hint: expected 1 to %u; the file is damaged)",
                           path, k, dims[k], lim);
        }
    }
    *out = g;
    return CL_OK;
}

int exec_idx_read(const char *images, const char *labels, exec_data *d, cl_err *e)
{
    memset(d, 0, sizeof *d);
    uint32_t id[3], ld[1];
    gzFile gi, gl;
    int rc = idx_open(images, IDX_IMAGES, 3, id, &gi, e);
    if (rc) return rc;
    if ((rc = idx_open(labels, IDX_LABELS, 1, ld, &gl, e))) {
        gzclose(gi);
        return rc;
    }
    if (id[0] != ld[0]) {
        gzclose(gi);
        gzclose(gl);
        return cl_fail(e, CL_EINPUT, "%s: %u labels, but %s has %u images (hint: the two files must belong together)",
                       labels, ld[0], images, id[0]);
    }
    uint64_t n = id[0], dim = (uint64_t)id[1] * id[2];
    unsigned char *px = NULL, *lb = NULL;
    rc = gz_grow(gi, images, n * dim, "the pixels", &px, e);
    if (!rc) rc = gz_grow(gl, labels, n, "the labels", &lb, e);
    /* gzip's checksum is verified at the end of the stream: read on to it */
    if (!rc) rc = gz_end(gi, images, e);
    if (!rc) rc = gz_end(gl, labels, e);
    gzclose(gi);
    gzclose(gl);
    if (rc) {
        free(px);
        free(lb);
        return rc;
    }
    d->n = (int64_t)n;
    d->C = 1;
    d->H = (int)id[1];
    d->W = (int)id[2];
    d->dim = (int64_t)dim;
    d->x = exec_falloc((int64_t)(n * dim));
    d->y = cl_malloc(n * sizeof *d->y);
    for (uint64_t i = 0; i < n * dim; i++) d->x[i] = (float)px[i] / 255.0f;
    int maxl = 0;
    for (uint64_t i = 0; i < n; i++) {
        d->y[i] = lb[i];
        if (lb[i] > maxl) maxl = lb[i];
    }
    d->classes = maxl + 1;
    free(px);
    free(lb);
    return CL_OK;
}

int exec_fmnist_load(const char *dir, exec_data *train, exec_data *test, cl_err *e)
{
    if (!dir) dir = EXEC_FMNIST_DIR;
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(b, sizeof b, "%s/train-labels-idx1-ubyte.gz", dir);
    int rc = exec_idx_read(a, b, train, e);
    if (rc) return rc;
    snprintf(a, sizeof a, "%s/t10k-images-idx3-ubyte.gz", dir);
    snprintf(b, sizeof b, "%s/t10k-labels-idx1-ubyte.gz", dir);
    if ((rc = exec_idx_read(a, b, test, e))) {
        exec_data_free(train);
        return rc;
    }
    if (test->H != train->H || test->W != train->W) {
        int h = train->H, w = train->W;
        exec_data_free(train);
        exec_data_free(test);
        return cl_fail(e, CL_EINPUT, "%s: test images are %dx%d, training images %dx%d (hint: the files come from different data sets)",
                       a, test->H, test->W, h, w);
    }
    return CL_OK;
}

void exec_data_limit(exec_data *d, int64_t n)
{
    if (n < d->n) d->n = n;
}

void exec_data_normalise(exec_data *train, exec_data *test, double *mean, double *sd)
{
    const int64_t N = train->n * train->dim;
    double s = 0, ss = 0;
    for (int64_t i = 0; i < N; i++) s += train->x[i];
    double m = N ? s / (double)N : 0;
    for (int64_t i = 0; i < N; i++) ss += ((double)train->x[i] - m) * ((double)train->x[i] - m);
    double sdev = N ? sqrt(ss / (double)N) : 1;
    if (!(sdev > 0)) sdev = 1; /* a constant set stays finite */
    const float fm = (float)m, inv = (float)(1.0 / sdev);
    exec_data *sets[2] = {train, test};
    for (int k = 0; k < 2; k++) {
        if (!sets[k]) continue;
        int64_t n = sets[k]->n * sets[k]->dim;
        for (int64_t i = 0; i < n; i++) sets[k]->x[i] = (sets[k]->x[i] - fm) * inv;
    }
    if (mean) *mean = m;
    if (sd) *sd = sdev;
}

void exec_data_synthetic(exec_data *d, int64_t n, int C, int H, int W, int classes,
                         uint64_t seed, int stream)
{
    memset(d, 0, sizeof *d);
    d->n = n;
    d->C = C;
    d->H = H;
    d->W = W;
    d->dim = (int64_t)C * H * W;
    d->classes = classes;
    d->x = exec_falloc(n * d->dim);
    d->y = cl_malloc((size_t)(n ? n : 1) * sizeof *d->y);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, (unsigned long)(seed & 0xffffffffu));
    float *proto = exec_falloc((int64_t)classes * d->dim);
    for (int64_t i = 0; i < classes * d->dim; i++) proto[i] = gsl_rng_uniform(r) < 0.5 ? -1.0f : 1.0f;
    gsl_rng_set(r, (unsigned long)((seed + 0x9e3779b9u * (uint64_t)(stream + 1)) & 0xffffffffu));
    for (int64_t s = 0; s < n; s++) {
        int c = (int)gsl_rng_uniform_int(r, (unsigned long)classes);
        d->y[s] = c;
        for (int64_t i = 0; i < d->dim; i++)
            d->x[s * d->dim + i] = 0.5f * proto[c * d->dim + i] + (float)gsl_ran_gaussian(r, 1.0);
    }
    free(proto);
    gsl_rng_free(r);
}

void exec_shuffle(int64_t *perm, int64_t n, gsl_rng *rng)
{
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    if (n > 1) gsl_ran_shuffle(rng, perm, (size_t)n, sizeof *perm);
}

void exec_data_gather(const exec_data *d, const int64_t *idx, int B, float *x, int32_t *y)
{
    for (int b = 0; b < B; b++) {
        memcpy(x + (int64_t)b * d->dim, d->x + idx[b] * d->dim, (size_t)d->dim * sizeof *x);
        y[b] = d->y[idx[b]];
    }
}
