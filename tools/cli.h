/* cli.h - the `cleave` subcommands and the helpers they share.
 *
 * Each subcommand lives in tools/cmd_<name>.c as
 *     int cmd_<name>(int argc, char **argv);
 * with argv[0] the subcommand's name; it returns the process exit status
 * (0 ok, 1 runtime failure, 2 bad input or usage).  Only main() exits.
 *
 * Options: each command declares one table of cli_opt (name, letter, kind,
 * the field it fills, its --help text) and hands argv to cli_parse, which
 * reads it with getopt_long: --opt=value, --opt value, -oFILE, -o FILE,
 * flags grouped (-xy), unambiguous abbreviations (--mod for --model), and
 * -- ending the options.  Errors are one line, "cleave CMD: ... (hint: ...)",
 * and status 2.
 */
#ifndef CL_CLI_H
#define CL_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"

/* The release `cleave --version` prints: the one place it is written. */
#define CLEAVE_VERSION "0.14.0"

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

/* cmd_plot --kind validate: files are cleave validate --json results */
struct cli_list;
int plot_validate(const struct cli_list *files, const char *out, const char *title, int w, int h);

/* Print "cleave: <message>" for a failure and return its exit status. */
int cli_report(const cl_err *e);
/* Print "cleave <cmd>: <message> (hint: cleave <cmd> --help)"; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same with another hint. */
int cli_usage_hint(const char *cmd, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parse option values; on failure report "--name: ..." and return 2. */
int cli_int(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi,
            int64_t *out);
int cli_num(const char *cmd, const char *opt, const char *s, double lo, double hi,
            double *out);
/* "X" or "X,Y", reals of at least lo (--bandwidth B,B2): a[0] = X, and
 * a[1] = Y when given (else left as it is); *n gets how many were given. */
int cli_num_pair(const char *cmd, const char *opt, const char *s, double lo, double a[2], int *n);
/* Comma-separated integers ("1,2,4,8") into a caller-freed array. */
int cli_int_list(const char *cmd, const char *opt, const char *s, int64_t lo,
                 int64_t hi, int64_t **out, int *n);

/* Arguments that are not options, or the values of a CLI_LIST option, in
 * order.  n counts them all; the first CLI_LIST_MAX are kept (a command
 * refuses more with its own message). */
enum { CLI_LIST_MAX = 256 };
typedef struct cli_list {
    const char *v[CLI_LIST_MAX];
    int n;
} cli_list;

/* What an option takes and how the value lands in the field:
 *   CLI_FLAG  no value; the int field becomes 1
 *   CLI_STR   the string as given (a pointer into argv)
 *   CLI_INT   an integer in [ilo, ihi], into an int or int64_t field
 *   CLI_NUM   a finite real in [lo, hi], into a double
 *   CLI_ENUM  one of `words` ("on|off"); the int field gets the word's index
 *   CLI_LIST  a value, and the arguments that follow it up to the next
 *             option, appended to a cli_list ("--clusters A B C") */
typedef enum { CLI_FLAG, CLI_STR, CLI_INT, CLI_NUM, CLI_ENUM, CLI_LIST } cli_kind;

/* The field of struct T an option fills: its offset and size. */
#define CLI_FIELD(T, f) offsetof(T, f), sizeof(((T *)0)->f)
/* An optional int field of T (1 + its offset; 0 means none). */
#define CLI_AT(T, f) (offsetof(T, f) + 1)

typedef struct cli_opt {
    const char *name;       /* long name without the dashes ("model"), or NULL */
    char letter;            /* short option ('o'), or 0                        */
    cli_kind kind;
    size_t off, size;       /* CLI_FIELD(T, field)                             */
    int64_t ilo, ihi;       /* CLI_INT range                                   */
    double lo, hi;          /* CLI_NUM range                                   */
    const char *words;      /* CLI_ENUM: the allowed words, "|" between        */
    size_t given;           /* CLI_AT(T, flag): an int set to 1 when given     */
    const char *arg;        /* --help: the value's name ("FILE")               */
    const char *help;       /* --help: the description, NULL for none; "\n"
                               continues it under the column, "{}" is the
                               field's default                                 */
} cli_opt;

typedef struct cli_spec {
    const char *cmd;        /* "plan": messages read "cleave plan: ..."        */
    const cli_opt *opts;
    int n_opts;
    size_t args;            /* CLI_AT(T, list): the cli_list of arguments that
                               are not options; 0: such an argument is refused */
    int help_col;           /* --help: the column descriptions start at        */
} cli_spec;

#define CLI_N(table) ((int)(sizeof(table) / sizeof((table)[0])))

/* Read argv[1..argc) into base (a struct with the fields the table names,
 * holding its defaults).  Returns 0, CLI_HELP for -h/--help (nothing
 * printed: the command prints its help), or 2 after a one-line message
 * (none when quiet: MPI ranks other than 0). */
enum { CLI_HELP = -1 };
int cli_parse(const cli_spec *s, int argc, char **argv, void *base, int quiet);

/* The value option `name` has in argv as s reads it (its last occurrence;
 * "" for a flag), or NULL when it is absent; nothing printed.  How a
 * command hands over to another form before parsing (train --plan,
 * profile --links, plot --kind validate). */
const char *cli_find(const cli_spec *s, int argc, char **argv, const char *name);

/* The option list of --help: each option with a description, in table
 * order, "{}" replaced by the field's value in defaults. */
void cli_help(const cli_spec *s, const void *defaults, FILE *f);

/* Numbers written as a table: add t[i].key: t[i].v to the JSON object o,
 * in order; returns o. */
typedef struct cli_json_num {
    const char *key;
    double v;
} cli_json_num;
struct cJSON;
struct cJSON *cli_json_add_numbers(struct cJSON *o, const cli_json_num *t, int n);

/* True when stderr is a terminal (progress bars go there and only then). */
int cli_stderr_tty(void);

#endif
