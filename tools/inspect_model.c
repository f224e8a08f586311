/* inspect_model.c - PLACEHOLDER until the model loader lands; replaced, not kept. */
#include <stdio.h>
#include "inspect.h"
int inspect_model(const char *path, int as_json)
{
    (void)as_json;
    fprintf(stderr, "cleave: %s: model files are not supported yet\n", path);
    return 1;
}
