/* cli.h - the `cleave` subcommands and the helpers they share.
 *
 * Each subcommand lives in tools/cmd_<name>.c as
 *     int cmd_<name>(int argc, char **argv);
 * with argv[0] the subcommand's name; it returns the process exit status
 * (0 ok, 1 runtime failure, 2 bad input or usage).  Only main() exits.
 */
#ifndef CL_CLI_H
#define CL_CLI_H

#include <stdint.h>

#include "status.h"

int cmd_inspect(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_train_plan(int argc, char **argv); /* cmd_train --plan */
int cmd_profile(int argc, char **argv);
int cmd_profile_links(int argc, char **argv); /* cmd_profile --links */
int cmd_validate(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_plot_validate(int argc, char **argv); /* cmd_plot --kind validate */

/* Print "cleave: <message>" for a failure and return its exit status. */
int cli_report(const cl_err *e);
/* Print "cleave <cmd>: <message>" and a usage hint; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parse option values; on failure report "--name: ..." and return 2. */
int cli_int(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi,
            int64_t *out);
int cli_num(const char *cmd, const char *opt, const char *s, double lo, double hi,
            double *out);
/* Comma-separated integers ("1,2,4,8") into a caller-freed array. */
int cli_int_list(const char *cmd, const char *opt, const char *s, int64_t lo,
                 int64_t hi, int64_t **out, int *n);

/* True when stderr is a terminal (progress bars go there and only then). */
int cli_stderr_tty(void);

#endif
