/* test_exec_data.c - IDX reading on hand-made fixtures (tests/data/exec,
 * made by a few lines of Python's gzip and struct: a 3-image 2x3 set with
 * pixels (15 i) mod 256 and labels 2, 0, 1, and broken variants),
 * normalisation, synthetic sets and shuffling. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "exec/nn/data.h"
#include "test.h"

#define FIX "tests/data/exec/"

static void test_idx_reads(void)
{
    const char *img[2] = {FIX "tiny-images.gz", FIX "tiny-images-plain"};
    for (int v = 0; v < 2; v++) {
        exec_data d;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(exec_idx_read(img[v], FIX "tiny-labels.gz", &d, &e), CL_OK);
        CU_ASSERT_EQUAL(d.n, 3);
        CU_ASSERT_EQUAL(d.C, 1);
        CU_ASSERT_EQUAL(d.H, 2);
        CU_ASSERT_EQUAL(d.W, 3);
        CU_ASSERT_EQUAL(d.dim, 6);
        CU_ASSERT_EQUAL(d.classes, 3);
        for (int i = 0; i < 18; i++) CU_ASSERT_EQUAL(d.x[i], (float)((i * 15) % 256) / 255.0f);
        CU_ASSERT_EQUAL(d.y[0], 2);
        CU_ASSERT_EQUAL(d.y[1], 0);
        CU_ASSERT_EQUAL(d.y[2], 1);
        exec_data_free(&d);
    }
}

/* Each broken file: CL_EINPUT, the file named, the problem named. */
static void bad(const char *images, const char *labels, const char *named, const char *what)
{
    exec_data d;
    cl_err e = {0};
    CU_ASSERT_EQUAL(exec_idx_read(images, labels, &d, &e), CL_EINPUT);
    if (!strstr(e.msg, named) || !strstr(e.msg, what))
        fprintf(stderr, "unexpected message: %s\n", e.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, named));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, what));
    CU_ASSERT_PTR_NULL(d.x);
}

static void test_idx_errors(void)
{
    bad(FIX "no-such-file.gz", FIX "tiny-labels.gz", "no-such-file.gz: cannot open",
        "apt-get install dataset-fashion-mnist");
    bad(FIX "bad-magic-images.gz", FIX "tiny-labels.gz", "bad-magic-images.gz",
        "not an IDX image file (magic 0x00000801, expected 0x00000803)");
    bad(FIX "truncated-images.gz", FIX "tiny-labels.gz", "truncated-images.gz",
        "truncated: expected 18 bytes of the pixels, found 10");
    bad(FIX "corrupt-images.gz", FIX "tiny-labels.gz", "corrupt-images.gz", "corrupt gzip data");
    bad(FIX "tiny-images.gz", FIX "two-labels.gz", "two-labels.gz", "2 labels, but");
    /* a label file given as the image file */
    bad(FIX "tiny-labels.gz", FIX "tiny-labels.gz", "tiny-labels.gz", "not an IDX image file");
}

static void test_fmnist_folder(void)
{
    exec_data tr, te;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_fmnist_load(FIX "fmnist", &tr, &te, &e), CL_OK);
    CU_ASSERT_EQUAL(tr.n, 40);
    CU_ASSERT_EQUAL(te.n, 20);
    CU_ASSERT_EQUAL(tr.dim, 784);
    exec_data_free(&tr);
    exec_data_free(&te);
    CU_ASSERT_EQUAL(exec_fmnist_load(FIX "no-such-folder", &tr, &te, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no-such-folder/train-images-idx3-ubyte.gz"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--data"));
}

/* Normalising with the training set's statistics: compared with a
 * two-pass computation here, then the training set has mean 0 and sd 1. */
static void test_normalise(void)
{
    exec_data tr, te;
    exec_data_synthetic(&tr, 50, 1, 3, 4, 4, 9, 0);
    exec_data_synthetic(&te, 20, 1, 3, 4, 4, 9, 1);
    int64_t N = tr.n * tr.dim;
    double s = 0, ss = 0;
    for (int64_t i = 0; i < N; i++) s += tr.x[i];
    for (int64_t i = 0; i < N; i++) ss += pow(tr.x[i] - s / N, 2);
    double want_m = s / N, want_sd = sqrt(ss / N), te0 = te.x[0];
    double m, sd;
    exec_data_normalise(&tr, &te, &m, &sd);
    CU_ASSERT(fabs(m - want_m) < 1e-12);
    CU_ASSERT(test_rel(sd, want_sd) < 1e-12);
    s = ss = 0;
    for (int64_t i = 0; i < N; i++) s += tr.x[i];
    for (int64_t i = 0; i < N; i++) ss += pow(tr.x[i] - s / N, 2);
    CU_ASSERT(fabs(s / N) < 1e-5);
    CU_ASSERT(fabs(sqrt(ss / N) - 1) < 1e-5);
    CU_ASSERT(fabs(te.x[0] - (te0 - want_m) / want_sd) < 1e-5); /* test set: train's statistics */
    exec_data_free(&tr);
    exec_data_free(&te);
}

static void test_synthetic_and_shuffle(void)
{
    exec_data a, b, c;
    exec_data_synthetic(&a, 100, 2, 3, 3, 5, 4, 0);
    exec_data_synthetic(&b, 100, 2, 3, 3, 5, 4, 0);
    exec_data_synthetic(&c, 100, 2, 3, 3, 5, 4, 1);
    CU_ASSERT(memcmp(a.x, b.x, 100 * 18 * sizeof(float)) == 0);
    CU_ASSERT(memcmp(a.x, c.x, 100 * 18 * sizeof(float)) != 0);
    for (int i = 0; i < 100; i++) CU_ASSERT(a.y[i] >= 0 && a.y[i] < 5);
    exec_data_free(&a);
    exec_data_free(&b);
    exec_data_free(&c);

    enum { N = 1000 };
    int64_t p[N], q[N];
    char seen[N] = {0};
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937), *r2 = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 3);
    gsl_rng_set(r2, 3);
    exec_shuffle(p, N, r);
    exec_shuffle(q, N, r2);
    int fixed = 0;
    for (int i = 0; i < N; i++) {
        CU_ASSERT_FATAL(p[i] >= 0 && p[i] < N);
        seen[p[i]]++;
        fixed += p[i] == i;
    }
    for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(seen[i], 1); /* a permutation */
    CU_ASSERT(memcmp(p, q, sizeof p) == 0);                   /* seeded */
    CU_ASSERT(fixed < 10); /* a random permutation fixes one point on average */
    gsl_rng_free(r);
    gsl_rng_free(r2);
}

TEST_SUITE(exec_data)
{
    test_add_suite("exec_data");
    test_add("IDX fixtures read (gzip'd and plain)", test_idx_reads);
    test_add("missing, bad-magic, truncated, corrupt and mismatched IDX files", test_idx_errors);
    test_add("a Fashion-MNIST folder, and a missing one with the install hint",
             test_fmnist_folder);
    test_add("standardisation with the training set's mean and sd", test_normalise);
    test_add("synthetic sets and shuffling are seeded", test_synthetic_and_shuffle);
}
