/* plot_validate.c - placeholder while the command is written. */
#include <stdio.h>

#include "cli.h"

int cmd_plot_validate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cleave plot --kind validate: not written yet\n");
    return 1;
}
