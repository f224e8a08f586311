/* cmd_demo.c - placeholder while the command is written. */
#include <stdio.h>

#include "cli.h"

int cmd_demo(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cleave demo: not written yet\n");
    return 1;
}
