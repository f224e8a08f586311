/* test_cli_opts.c - the option parser every command reads argv with
 * (tools/cli.h): each syntax getopt_long allows, abbreviations and their
 * ambiguity, "--", the value kinds and their refusals, list options, the
 * hand-over look-up (cli_find) and the --help list; then end to end:
 * `cleave --version`, `plan -o -` and `plan --json` giving stdout that is
 * one JSON document (the same bytes as the file), the same plan from every
 * spelling of its options, the one-line refusal naming the candidates, and
 * train's --lr-schedule with --schedule refused with its hint; the B[,B2]
 * reader and the JSON number table the commands share, and what plan's and
 * sweep's --bandwidth B alone mean.
 *
 * The in-process cases compare against values written here by hand; the
 * end-to-end ones against the file the long-established spelling writes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/jsonx.h"
#include "test.h"
#include "tools/cli.h"

typedef struct targs {
    const char *model, *out, *device;
    int64_t devices;
    int small;
    double x;
    int flag, level, x_given;
    cli_list items, args;
} targs;

static const cli_opt topts[] = {
    {"model", 0, CLI_STR, CLI_FIELD(targs, model), .help = "the model"},
    {"out", 'o', CLI_STR, CLI_FIELD(targs, out), .arg = "FILE", .help = "where\nto write"},
    {"device", 0, CLI_STR, CLI_FIELD(targs, device), .help = NULL},
    {"devices", 0, CLI_INT, CLI_FIELD(targs, devices), 1, 100, .help = NULL},
    {"small", 0, CLI_INT, CLI_FIELD(targs, small), -5, 5, .arg = "N", .help = "default {}"},
    {"x", 'x', CLI_NUM, CLI_FIELD(targs, x), .lo = 0, .hi = 10, .given = CLI_AT(targs, x_given),
     .help = "real, default {}"},
    {"flag", 'f', CLI_FLAG, CLI_FIELD(targs, flag), .help = NULL},
    {"level", 0, CLI_ENUM, CLI_FIELD(targs, level), .words = "on|off|auto", .arg = "L", .help = "is {}"},
    {"items", 0, CLI_LIST, CLI_FIELD(targs, items), .help = NULL},
};
static const cli_spec tspec = {"t", topts, CLI_N(topts), .args = CLI_AT(targs, args), .help_col = 12};
static const cli_spec tspec_noargs = {"t", topts, CLI_N(topts), .help_col = 12};

/* Parse the NULL-terminated words (argv[0] "t" added) into *t, quietly. */
static int parse_words(const cli_spec *s, targs *t, const char *const *words)
{
    char *argv[32] = {"t"};
    int argc = 1;
    while (words[argc - 1] && argc < 31) argv[argc] = (char *)words[argc - 1], argc++;
    memset(t, 0, sizeof *t);
    return cli_parse(s, argc, argv, t, 1);
}
#define PARSE(t, ...) parse_words(&tspec, (t), (const char *const[]){__VA_ARGS__, NULL})

static int str_is(const char *a, const char *b) { return a && b && !strcmp(a, b); }

static void test_syntax_forms(void)
{
    /* every spelling of the same three options gives the same fields */
    const char *const *forms[] = {
        (const char *const[]){"--model", "m.json", "-o", "f.json", "--devices", "7", NULL},
        (const char *const[]){"--model=m.json", "-of.json", "--devices=7", NULL},
        (const char *const[]){"--mod", "m.json", "--out=f.json", "--devices=7", NULL},
        (const char *const[]){"--mo=m.json", "--ou", "f.json", "--devices", "7", NULL},
    };
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        targs t;
        CU_ASSERT_EQUAL(parse_words(&tspec, &t, forms[i]), 0);
        CU_ASSERT(str_is(t.model, "m.json"));
        CU_ASSERT(str_is(t.out, "f.json"));
        CU_ASSERT_EQUAL(t.devices, 7);
        CU_ASSERT_PTR_NULL(t.device);
        CU_ASSERT_EQUAL(t.args.n, 0);
    }
    /* short options: grouped flags, a value attached or apart */
    targs t;
    CU_ASSERT_EQUAL(PARSE(&t, "-fx2.5"), 0);
    CU_ASSERT_EQUAL(t.flag, 1);
    CU_ASSERT_DOUBLE_EQUAL(t.x, 2.5, 0);
    CU_ASSERT_EQUAL(t.x_given, 1);
    CU_ASSERT_EQUAL(PARSE(&t, "-f", "-x", "2.5", "-o-"), 0);
    CU_ASSERT_EQUAL(t.flag, 1);
    CU_ASSERT_DOUBLE_EQUAL(t.x, 2.5, 0);
    CU_ASSERT(str_is(t.out, "-"));
    CU_ASSERT_EQUAL(PARSE(&t, "-o", "-", "--small", "-5"), 0); /* "-" and "-5" are values */
    CU_ASSERT(str_is(t.out, "-"));
    CU_ASSERT_EQUAL(t.small, -5);
    CU_ASSERT_EQUAL(t.x_given, 0);
    /* arguments between options, in order */
    CU_ASSERT_EQUAL(PARSE(&t, "a", "--flag", "b"), 0);
    CU_ASSERT_EQUAL(t.args.n, 2);
    CU_ASSERT(str_is(t.args.v[0], "a") && str_is(t.args.v[1], "b"));
    CU_ASSERT_EQUAL(PARSE(&t, "-"), 0); /* "-" alone is an argument (stdin's name) */
    CU_ASSERT(t.args.n == 1 && str_is(t.args.v[0], "-"));
}

static void test_double_dash(void)
{
    targs t;
    CU_ASSERT_EQUAL(PARSE(&t, "--flag", "--", "--model", "-o", "x"), 0);
    CU_ASSERT_EQUAL(t.flag, 1);
    CU_ASSERT_PTR_NULL(t.model);
    CU_ASSERT_PTR_NULL(t.out);
    CU_ASSERT_EQUAL_FATAL(t.args.n, 3);
    CU_ASSERT(str_is(t.args.v[0], "--model") && str_is(t.args.v[1], "-o") && str_is(t.args.v[2], "x"));
    /* a value that is "--" is a value */
    CU_ASSERT_EQUAL(PARSE(&t, "--model", "--", "a"), 0);
    CU_ASSERT(str_is(t.model, "--"));
    CU_ASSERT(t.args.n == 1 && str_is(t.args.v[0], "a"));
    /* without arguments allowed, even after "--" an argument is refused */
    CU_ASSERT_EQUAL(parse_words(&tspec_noargs, &t, (const char *const[]){"--", "a", NULL}), 2);
    CU_ASSERT_EQUAL(parse_words(&tspec_noargs, &t, (const char *const[]){"--flag", "--", NULL}), 0);
}

static void test_abbreviations(void)
{
    targs t;
    /* an exact name wins over the longer names it begins */
    CU_ASSERT_EQUAL(PARSE(&t, "--device", "cpu"), 0);
    CU_ASSERT(str_is(t.device, "cpu"));
    CU_ASSERT_EQUAL(t.devices, 0);
    CU_ASSERT_EQUAL(PARSE(&t, "--devices", "3"), 0);
    CU_ASSERT_EQUAL(t.devices, 3);
    /* a prefix of two names is refused, whatever follows */
    CU_ASSERT_EQUAL(PARSE(&t, "--devi", "3"), 2);
    CU_ASSERT_EQUAL(PARSE(&t, "--devic=3"), 2);
    CU_ASSERT_EQUAL(PARSE(&t, "--d", "x"), 2);
    /* a prefix of one name is that name */
    CU_ASSERT_EQUAL(PARSE(&t, "--m", "x", "--le", "auto", "--fl", "--it", "a"), 0);
    CU_ASSERT(str_is(t.model, "x"));
    CU_ASSERT_EQUAL(t.level, 2);
    CU_ASSERT_EQUAL(t.flag, 1);
    CU_ASSERT(t.items.n == 1 && str_is(t.items.v[0], "a"));
    /* help in any unambiguous spelling */
    CU_ASSERT_EQUAL(PARSE(&t, "-h"), CLI_HELP);
    CU_ASSERT_EQUAL(PARSE(&t, "--he"), CLI_HELP);
    CU_ASSERT_EQUAL(PARSE(&t, "--model", "m", "--help", "--nonsense"), CLI_HELP);
}

static void test_kinds_and_refusals(void)
{
    targs t;
    /* integers into an int and an int64_t, within their ranges */
    CU_ASSERT_EQUAL(PARSE(&t, "--small", "5", "--devices", "100"), 0);
    CU_ASSERT_EQUAL(t.small, 5);
    CU_ASSERT_EQUAL(t.devices, 100);
    CU_ASSERT_EQUAL(PARSE(&t, "--small", "6"), 2);
    CU_ASSERT_EQUAL(PARSE(&t, "--devices", "0"), 2);
    CU_ASSERT_EQUAL(PARSE(&t, "--devices", "7x"), 2);
    CU_ASSERT_EQUAL(PARSE(&t, "--x", "nan"), 2);
    CU_ASSERT_EQUAL(PARSE(&t, "--x", "10.5"), 2);
    /* enum: the word's index */
    CU_ASSERT_EQUAL(PARSE(&t, "--level", "off"), 0);
    CU_ASSERT_EQUAL(t.level, 1);
    CU_ASSERT_EQUAL(PARSE(&t, "--level", "of"), 2); /* values are not abbreviated */
    /* unknown options, missing values, a flag with a value */
    CU_ASSERT_EQUAL(PARSE(&t, "--nope"), 2);
    CU_ASSERT_EQUAL(PARSE(&t, "-q"), 2);
    CU_ASSERT_EQUAL(PARSE(&t, "--model"), 2);
    CU_ASSERT_EQUAL(PARSE(&t, "-o"), 2);
    CU_ASSERT_EQUAL(PARSE(&t, "-fo"), 2);
    CU_ASSERT_EQUAL(PARSE(&t, "--flag=1"), 2);
    /* a list takes the arguments after it, up to the next option */
    CU_ASSERT_EQUAL(PARSE(&t, "--items", "a", "b", "--flag", "c", "--items=d", "e"), 0);
    CU_ASSERT_EQUAL_FATAL(t.items.n, 4);
    CU_ASSERT(str_is(t.items.v[0], "a") && str_is(t.items.v[1], "b") && str_is(t.items.v[2], "d") &&
              str_is(t.items.v[3], "e"));
    CU_ASSERT(t.args.n == 1 && str_is(t.args.v[0], "c"));
    /* a table whose field does not fit its kind is refused, nothing written */
    static const cli_opt bad[] = {{"small", 0, CLI_NUM, CLI_FIELD(targs, small), .help = NULL}};
    static const cli_spec bad_spec = {"t", bad, 1, .help_col = 12};
    CU_ASSERT_EQUAL(parse_words(&bad_spec, &t, (const char *const[]){"--small", "1", NULL}), 2);
    CU_ASSERT_EQUAL(t.small, 0);
    /* the last of a repeated option wins */
    CU_ASSERT_EQUAL(PARSE(&t, "--model", "a", "--model=b"), 0);
    CU_ASSERT(str_is(t.model, "b"));
}

/* "B" or "B,B2": how many were given, a[1] left alone when one was */
static void test_num_pair(void)
{
    double a[2] = {-1, -1};
    int n = 0;
    CU_ASSERT_EQUAL(cli_num_pair("t", "--bw", "5", 1, a, &n), 0);
    CU_ASSERT(n == 1 && a[0] == 5 && a[1] == -1);
    CU_ASSERT_EQUAL(cli_num_pair("t", "--bw", "2e3,7.5", 1, a, &n), 0);
    CU_ASSERT(n == 2 && a[0] == 2e3 && a[1] == 7.5);
    CU_ASSERT_EQUAL(cli_num_pair("t", "--bw", "5,x", 1, a, &n), 2);
    CU_ASSERT_EQUAL(cli_num_pair("t", "--bw", "5,", 1, a, &n), 2);
    CU_ASSERT_EQUAL(cli_num_pair("t", "--bw", "0.5", 1, a, &n), 2); /* below lo */
    CU_ASSERT_EQUAL(cli_num_pair("t", "--bw", "inf", 1, a, &n), 2);
}

/* a table of numbers: the members in table order, values exact */
static void test_json_numbers(void)
{
    const cli_json_num v[] = {{"b", 2}, {"a", 0.125}, {"c", -3e9}};
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "first", "x");
    CU_ASSERT_PTR_EQUAL(cli_json_add_numbers(o, v, CLI_N(v)), o);
    char *text = cJSON_PrintUnformatted(o);
    CU_ASSERT(str_is(text, "{\"first\":\"x\",\"b\":2,\"a\":0.125,\"c\":-3000000000}"));
    free(text);
    cJSON_Delete(o);
}

/* Do `cmd ARGS_A OUT dir/a` and `cmd ARGS_B OUT dir/b` both succeed and
 * write the same bytes (OUT: the command's file option)? */
static int same_file(const char *dir, const char *cmd, const char *args_a, const char *args_b,
                     const char *out)
{
    char args[2400], path[2][600];
    const char *form[2] = {args_a, args_b};
    for (int i = 0; i < 2; i++) {
        snprintf(path[i], sizeof path[i], "%s/%c.out", dir, 'a' + i);
        snprintf(args, sizeof args, "%s %s %s %s", cmd, form[i], out, path[i]);
        if (test_run_cli(args, NULL, NULL) != 0) return 0;
    }
    char *x = test_slurp(path[0]), *y = test_slurp(path[1]);
    int same = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return same;
}

/* plan --bandwidth B --latency L means B,B and L,L; sweep's B alone keeps
 * the inter-node default (1.25e9 bytes/s, 5e-5 s: sweep --help) */
static void test_link_pairs(void)
{
    char *dir = test_tmpdir();
    CU_ASSERT(same_file(dir, "plan --model models/fmnist-mlp.json --devices 4 --per-node 2 --device cpu-core",
                        "--bandwidth 3e8 --latency 2e-4", "--bandwidth 3e8,3e8 --latency 2e-4,2e-4", "-o"));
    CU_ASSERT(same_file(dir, "sweep --model models/fmnist-mlp.json --device cpu-core --devices 1,4 "
                             "--devices-per-node 2 --quiet",
                        "--bandwidth 3e8 --latency 2e-4", "--bandwidth 3e8,1.25e9 --latency 2e-4,5e-5", "--csv"));
    test_rmtree(dir);
}

static void test_find(void)
{
    char *a1[] = {"t", "-oF", NULL}, *a2[] = {"t", "--ou=G", "--flag", NULL},
         *a3[] = {"t", "--model", "-o", "x", NULL}, *a4[] = {"t", "--", "-o", "x", NULL},
         *a5[] = {"t", "--bogus", "--out", "H", NULL};
    CU_ASSERT(str_is(cli_find(&tspec, 2, a1, "out"), "F"));
    CU_ASSERT(str_is(cli_find(&tspec, 3, a2, "out"), "G"));
    CU_ASSERT(str_is(cli_find(&tspec, 3, a2, "flag"), ""));
    CU_ASSERT_PTR_NULL(cli_find(&tspec, 2, a1, "flag"));
    CU_ASSERT_PTR_NULL(cli_find(&tspec, 4, a3, "out")); /* "-o" is --model's value */
    CU_ASSERT_PTR_NULL(cli_find(&tspec, 4, a4, "out")); /* after --: an argument */
    CU_ASSERT(str_is(cli_find(&tspec, 4, a5, "out"), "H")); /* past an unknown option */
    /* and the parse after it starts afresh (getopt's state is global) */
    targs t;
    CU_ASSERT_EQUAL(PARSE(&t, "-o", "y"), 0);
    CU_ASSERT(str_is(t.out, "y"));
}

static void test_help_list(void)
{
    targs d = {.small = -3, .x = 1.5, .level = 2};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CU_ASSERT_FATAL(f != NULL);
    cli_help(&tspec, &d, f);
    fclose(f);
    const char *want = "  --model   the model\n"
                       "  -o FILE   where\n"
                       "            to write\n"
                       "  --small N default -3\n"
                       "  -x        real, default 1.5\n"
                       "  --level L is auto\n";
    if (strcmp(buf, want)) fprintf(stderr, "\n--- got\n%s--- want\n%s", buf, want);
    CU_ASSERT_STRING_EQUAL(buf, want);
    free(buf);
}

/* ------------------------------------------------------------ end to end -- */

#define MLP "--model models/fmnist-mlp.json --cluster profiles/clusters/cpu-2cores.json"

static void test_version(void)
{
    const char *forms[] = {"--version", "version"};
    for (int i = 0; i < 2; i++) {
        char *out = NULL, *err = NULL;
        CU_ASSERT_EQUAL(test_run_cli(forms[i], &out, &err), 0);
        CU_ASSERT_STRING_EQUAL(out ? out : "", "cleave " CLEAVE_VERSION "\n");
        CU_ASSERT_STRING_EQUAL(err ? err : "-", "");
        free(out);
        free(err);
    }
}

/* The whole of s is one JSON object of the given "format". */
static int one_json(const char *s, const char *format)
{
    cl_err e = {0};
    cJSON *j = NULL;
    if (!s || jx_parse_text("stdout", s, strlen(s), &j, &e)) return 0;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "format");
    int ok = cJSON_IsString(f) && !strcmp(f->valuestring, format);
    cJSON_Delete(j);
    return ok;
}

static void test_plan_stdout_json(void)
{
    char *dir = test_tmpdir(), args[1200], file[600];
    snprintf(file, sizeof file, "%s/p.json", dir);
    snprintf(args, sizeof args, "plan " MLP " -o %s", file);
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "plan: fmnist-mlp")); /* the table stays on stdout */
    free(out);
    free(err);
    char *want = test_slurp(file);
    CU_ASSERT_FATAL(want != NULL);
    const char *forms[] = {"plan " MLP " -o -", "plan " MLP " --json", "plan " MLP " -o- --json"};
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(test_run_cli(forms[i], &out, &err), 0);
        CU_ASSERT(one_json(out, "cleave-plan"));
        CU_ASSERT_STRING_EQUAL(out ? out : "", want); /* the file's bytes, nothing else */
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "plan: fmnist-mlp")); /* the table on stderr */
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "planned in"));
        free(out);
        free(err);
    }
    CU_ASSERT_EQUAL(test_run_cli("plan " MLP " -o -", &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "wrote -"));
    free(out);
    free(err);
    free(want);
    test_rmtree(dir);
}

static void test_plan_spellings(void)
{
    char *dir = test_tmpdir(), args[1200], a[600], b[600];
    snprintf(a, sizeof a, "%s/a.json", dir);
    snprintf(args, sizeof args, "plan --model models/fmnist-mlp.json --devices 4 --device cpu-core "
             "--schedule 1f1b --comm off -o %s", a);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
    char *want = test_slurp(a);
    CU_ASSERT_FATAL(want != NULL);
    const char *forms[] = {
        "plan --model=models/fmnist-mlp.json --devices=4 --device=cpu-core --sched=1f1b --comm=off -o",
        "plan --mod models/fmnist-mlp.json --devices 4 --device cpu-core --sch 1f1b --co off --out=",
        "plan --devices 4 --device cpu-core --comm off --schedule 1f1b --model models/fmnist-mlp.json -o ",
    };
    for (int i = 0; i < 3; i++) {
        snprintf(b, sizeof b, "%s/b%d.json", dir, i);
        snprintf(args, sizeof args, "%s%s", forms[i], b);
        CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
        char *got = test_slurp(b);
        CU_ASSERT(got && !strcmp(got, want));
        free(got);
    }
    free(want);
    test_rmtree(dir);
}

static void test_refusals_one_line(void)
{
    static const struct {
        const char *args, *err;
    } cases[] = {
        {"plan --model models/fmnist-mlp.json --dev 4",
         "cleave plan: ambiguous option --dev (could be --devices, --device) (hint: cleave plan --help)\n"},
        {"plan " MLP " --no-replication=yes",
         "cleave plan: --no-replication takes no value (hint: cleave plan --help)\n"},
        {"plan " MLP " --bogus=3", "cleave plan: unknown option --bogus (hint: cleave plan --help)\n"},
        {"plan " MLP " -o", "cleave plan: -o needs a value (hint: cleave plan --help)\n"},
        {"sim --json -Q x", "cleave sim: unknown option -Q (hint: cleave sim --help)\n"},
        {"sim tests/data/sim/fmnist-2stage.json --json --trace -",
         "cleave sim: --json, --trace - and --dump-schedule - each write stdout: give one of them "
         "(hint: cleave sim --help)\n"},
        {"train --model tests/data/ckpt/tiny.json --synthetic 40 --schedule constant",
         "cleave train: --schedule constant: train takes no pipeline schedule (a plan gives it) "
         "(hint: --schedule is the pipeline schedule; the learning-rate schedule is --lr-schedule)\n"},
        {"train --plan tests/data/sim/fmnist-2stage.json --synthetic 40 --schedule=cosine",
         "cleave train: --schedule cosine: train takes no pipeline schedule (a plan gives it) "
         "(hint: --schedule is the pipeline schedule; the learning-rate schedule is --lr-schedule)\n"},
        {"train --model tests/data/ckpt/tiny.json --lr-schedule linear",
         "cleave train: --lr-schedule: expected constant or cosine, got \"linear\" (hint: cleave train --help)\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *out = NULL, *err = NULL;
        CU_ASSERT_EQUAL(test_run_cli(cases[i].args, &out, &err), 2);
        if (strcmp(err ? err : "", cases[i].err)) fprintf(stderr, "\n%s\n  got  %s  want %s", cases[i].args, err, cases[i].err);
        CU_ASSERT_STRING_EQUAL(err ? err : "", cases[i].err);
        CU_ASSERT_STRING_EQUAL(out ? out : "-", "");
        free(out);
        free(err);
    }
}

static void test_train_lr_schedule(void)
{
    const char *forms[] = {"--lr-schedule constant", "--lr-sch=constant", "--lr-schedule cosine"};
    for (int i = 0; i < 3; i++) {
        char args[400], *out = NULL, *err = NULL;
        snprintf(args, sizeof args, "train --model tests/data/ckpt/tiny.json --synthetic 40 --epochs 1 "
                 "--batch 8 %s", forms[i]);
        CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out ? out : "", i < 2 ? "(constant)" : "(cosine)"));
        free(out);
        free(err);
    }
}

static void test_sim_stdout(void)
{
    /* the trace on stdout, the table on stderr; "--" before the plan */
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli("sim --trace - -- tests/data/sim/fmnist-2stage.json", &out, &err), 0);
    cl_err e = {0};
    cJSON *j = NULL;
    CU_ASSERT(out && jx_parse_text("stdout", out, strlen(out), &j, &e) == CL_OK);
    CU_ASSERT(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "traceEvents")) ||
              cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "traceEvents")));
    cJSON_Delete(j);
    CU_ASSERT_PTR_NOT_NULL(strstr(err ? err : "", "throughput"));
    free(out);
    free(err);
}

TEST_SUITE(cli_opts)
{
    test_add_suite("cli_opts");
    test_add("--opt=value, --opt value, -oFILE, -o FILE, grouped flags", test_syntax_forms);
    test_add("-- ends the options", test_double_dash);
    test_add("abbreviations: unique accepted, ambiguous refused, exact wins", test_abbreviations);
    test_add("value kinds, ranges, refusals, list options", test_kinds_and_refusals);
    test_add("cli_num_pair: B or B,B2", test_num_pair);
    test_add("cli_json_add_numbers: members in table order", test_json_numbers);
    test_add("plan's B means B,B; sweep's B keeps the inter-node default", test_link_pairs);
    test_add("cli_find: the hand-over look-up", test_find);
    test_add("--help list from the table", test_help_list);
    test_add("cleave --version and cleave version", test_version);
    test_add("plan -o - and --json: stdout is the plan file's bytes", test_plan_stdout_json);
    test_add("plan: every spelling writes the same plan", test_plan_spellings);
    test_add("refusals: one line naming the option, exit 2", test_refusals_one_line);
    test_add("train --lr-schedule", test_train_lr_schedule);
    test_add("sim --trace -: stdout is the trace", test_sim_stdout);
}
