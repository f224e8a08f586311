/* inspect_cluster.c - PLACEHOLDER until the cluster loader lands; replaced, not kept. */
#include <stdio.h>
#include "inspect.h"
int inspect_cluster(const char *path, int as_json)
{
    (void)as_json;
    fprintf(stderr, "cleave: %s: cluster files are not supported yet\n", path);
    return 1;
}
