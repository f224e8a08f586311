/* fuzz_idx.c - IDX image and label files: exec_idx_read.
 *
 * The reader takes two paths, so an input is both files: a 4-byte
 * big-endian length L, then L bytes of the image file, then the label file
 * (whatever is short is cut).  They are written to a private temporary
 * folder per process, removed at exit; zlib reads plain and gzip'd files
 * alike.  A set that
 * loads must have matching counts, labels in [0, classes) and pixels in
 * [0, 1] (exec/nn/data.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/nn/data.h"
#include "base/fileio.h"
#include "fuzz.h"

static char idx_dir[32], idx_images[64], idx_labels[64];

static void idx_cleanup(void)
{
    remove(idx_images);
    remove(idx_labels);
    rmdir(idx_dir);
}

static void idx_write(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0)
        fuzz_fail("idx", "cannot write %s", path);
}

FUZZ_TARGET(idx)
{
    if (!idx_images[0]) {
        snprintf(idx_dir, sizeof idx_dir, "/tmp/cleave-fuzz-idx-XXXXXX");
        if (!mkdtemp(idx_dir)) fuzz_fail("idx", "cannot make a temporary folder");
        snprintf(idx_images, sizeof idx_images, "%s/images", idx_dir);
        snprintf(idx_labels, sizeof idx_labels, "%s/labels", idx_dir);
        atexit(idx_cleanup);
    }
    size_t len = size >= 4 ? (size_t)data[0] << 24 | (size_t)data[1] << 16 | (size_t)data[2] << 8 | data[3] : 0;
    size_t rest = size >= 4 ? size - 4 : 0;
    if (len > rest) len = rest;
    idx_write(idx_images, data + (size - rest), len);
    idx_write(idx_labels, data + (size - rest) + len, rest - len);
    exec_data d;
    cl_err e = {0};
    int rc = exec_idx_read(idx_images, idx_labels, &d, &e);
    /* the message names whichever file is at fault */
    if (rc && strncmp(e.msg, idx_labels, strlen(idx_labels)) == 0)
        rc = fuzz_check("idx", idx_labels, rc, &e);
    else
        rc = fuzz_check("idx", idx_images, rc, &e);
    if (rc) {
        fuzz_check_freed("idx", (const void *[]){d.x, d.y}, 2);
        return rc;
    }
    if (d.n < 1 || d.dim != (int64_t)d.C * d.H * d.W || d.classes < 1)
        fuzz_fail("idx", "loaded %lld samples of %lld values, %d classes", (long long)d.n,
                  (long long)d.dim, d.classes);
    for (int64_t i = 0; i < d.n; i++)
        if (d.y[i] < 0 || d.y[i] >= d.classes) fuzz_fail("idx", "label %d of sample %lld", d.y[i], (long long)i);
    for (int64_t i = 0; i < d.n * d.dim; i++)
        if (!(d.x[i] >= 0 && d.x[i] <= 1)) fuzz_fail("idx", "pixel %lld is %g", (long long)i, d.x[i]);
    exec_data_free(&d);
    return rc;
}
