/* bench.c - what every benchmark does with its CSV file. */
#include <stdio.h>

#include "bench.h"

int bench_csv_open(cl_out *o, char *path, size_t cap, const char *outdir, const char *name,
                   const char *header)
{
    cl_err e = {0};
    snprintf(path, cap, "%s/%s.csv", outdir, name);
    if (cl_out_open(o, path, &e)) {
        fprintf(stderr, "cleave: %s\n", e.msg);
        return e.code;
    }
    fprintf(o->f, "%s\n", header);
    return CL_OK;
}

int bench_csv_commit(cl_out *o, const char *path)
{
    cl_err e = {0};
    int rc = cl_out_commit(o, &e);
    if (rc) fprintf(stderr, "cleave: %s\n", e.msg);
    else printf("wrote %s\n", path);
    return rc;
}
