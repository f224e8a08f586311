/* cmd_compare.c - placeholder while the command is written. */
#include <stdio.h>

#include "cli.h"

int cmd_compare(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cleave compare: not written yet\n");
    return 1;
}
