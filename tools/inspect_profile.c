/* inspect_profile.c - PLACEHOLDER until the profile loader lands; replaced, not kept. */
#include <stdio.h>
#include "inspect.h"
int inspect_profile(const char *path, int as_json)
{
    (void)as_json;
    fprintf(stderr, "cleave: %s: profile files are not supported yet\n", path);
    return 1;
}
