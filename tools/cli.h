/* cli.h - the `cleave` subcommands and the helpers they share.
 *
 * Each subcommand lives in tools/cmd_<name>.c as
 *     int cmd_<name>(int argc, char **argv);
 * with argv[0] the subcommand's name; it returns the process exit status
 * (0 ok, 1 runtime failure, 2 bad input or usage).  Only main() exits.
 */
#ifndef CL_CLI_H
#define CL_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

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
int cmd_import(int argc, char **argv);
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

/* Options that take a value, described by a table: a string is stored as
 * given, an integer (int64_t) or a real (double) parsed within [lo, hi].
 * The fields live at `off` bytes into the caller's struct. */
typedef enum { CLI_STR, CLI_INT, CLI_NUM } cli_opt_kind;
typedef struct cli_opt {
    const char *name;       /* "--lr"                                        */
    cli_opt_kind kind;
    size_t off;             /* offsetof(the struct, its field)                */
    int64_t ilo, ihi;       /* CLI_INT range                                 */
    double lo, hi;          /* CLI_NUM range                                 */
} cli_opt;
/* Take option `opt` with value `val` (NULL when it was the last argument)
 * into base if the table t[0..n) has it: -1 when it does not, 0 when
 * taken, else the usage-error status (missing or bad value). */
int cli_opt_take(const cli_opt *t, int n, void *base, const char *cmd, const char *opt,
                 const char *val);

/* True when stderr is a terminal (progress bars go there and only then). */
int cli_stderr_tty(void);

#endif
