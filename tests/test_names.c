/* test_names.c - hostile names and strings at every sink (issue 13, "Code
 * execution from data"; docs/testing.md, "Threat model: names").
 *
 * Each escaper is checked against the program that reads its output
 * (gnuplot, python3, cJSON, the suites' CSV reader), and the real commands
 * are fed names and strings holding backticks, $(...), quotes, \, ;, a line
 * "EOD", ESC: a name is refused at load (exit 2, file and JSON path, a
 * hint, no output), anything else is drawn verbatim, and no marker file a
 * command substitution would create ever appears.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "base/spawn.h"
#include "test.h"
#include "test_csv.h"
#include "test_names.h"

static int exists(const char *path) { return access(path, F_OK) == 0; }

static void put_file(const char *path, const char *text)
{
    cl_err e = {0};
    CU_ASSERT_FATAL(cl_write_file(path, text, strlen(text), &e) == CL_OK);
}

/* ------------------------------------------------------------ the rule -- */

/* The rule as docs/formats.md states it, written out independently. */
static int doc_allows(unsigned char c, int first)
{
    static const char set[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
    static const char rest[] = "-.+:/@#%()[]= ";
    if (c && memchr(set, c, sizeof set - 1)) return 1;
    return !first && c && memchr(rest, c, sizeof rest - 1);
}

static void test_name_rule(void)
{
    /* every byte, first and inside a name */
    for (int c = 1; c < 256; c++) {
        char first[4] = {(char)c, 'x', 0}, mid[4] = {'x', (char)c, 'x', 0};
        CU_ASSERT_EQUAL(esc_name_problem(first) == NULL, doc_allows((unsigned char)c, 1));
        CU_ASSERT_EQUAL(esc_name_problem(mid) == NULL, doc_allows((unsigned char)c, 0));
    }
    const char *good[] = {"vgg16", "layer1.0.conv1", "n0.g0", "A100-80GB", "dgx a100", "fc/w",
                          "x(1)[2]=3:4@5#6%7+8", "_", "0"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) CU_ASSERT_PTR_NULL(esc_name_problem(good[i]));
    char longest[ESC_NAME_MAX + 2];
    memset(longest, 'a', sizeof longest);
    longest[ESC_NAME_MAX] = '\0';
    CU_ASSERT_PTR_NULL(esc_name_problem(longest));
    longest[ESC_NAME_MAX] = 'a';
    longest[ESC_NAME_MAX + 1] = '\0';
    CU_ASSERT_PTR_NOT_NULL(esc_name_problem(longest));
    CU_ASSERT_PTR_NOT_NULL(esc_name_problem(""));
    CU_ASSERT_PTR_NOT_NULL(esc_name_problem("trailing "));
    for (size_t i = 0; i < N_HOSTILE; i++) CU_ASSERT_PTR_NOT_NULL(esc_name_problem(hostile[i]));
    /* a derived name is made valid */
    char fixed[64] = " `ls`;é x ";
    esc_name_fix(fixed);
    CU_ASSERT_PTR_NULL(esc_name_problem(fixed));
    CU_ASSERT_STRING_EQUAL(fixed, "__ls____ x");
}

/* ----------------------------------------------------------- escapers -- */

/* gnuplot reads esc_gnuplot(s) back as s (line breaks kept, other control
 * bytes as '?'), and no command substitution runs. */
static void test_gnuplot_literal(void)
{
    char marker[600], gp[600], got[600];
    char *dir = test_scratch(sizeof marker, "PWN", marker, "t.gp", gp, "got", got, NULL);
    for (size_t i = 0; i < N_HOSTILE; i++) {
        char *s = with_marker(hostile[i], marker), *lit = esc_gnuplot(s);
        CU_ASSERT_PTR_NULL(strchr(lit, '\n')); /* one script line */
        char *script = cl_malloc(strlen(lit) + 1200);
        sprintf(script, "set print '%s'\nv = %s\nprint v\n", got, lit);
        put_file(gp, script);
        char *argv[] = {"gnuplot", gp, NULL};
        int st = cl_spawn_wait(argv, NULL);
        CU_ASSERT(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        char *back = test_slurp(got), *want = cl_malloc(strlen(s) + 2);
        size_t n = 0;
        for (const char *c = s; *c; c++)
            want[n++] = (*c == '\n' || !((unsigned char)*c < 0x20 || *c == 0x7f)) ? *c : '?';
        want[n++] = '\n'; /* print ends the line */
        want[n] = '\0';
        CU_ASSERT_PTR_NOT_NULL_FATAL(back);
        CU_ASSERT_STRING_EQUAL(back, want);
        CU_ASSERT_FALSE(exists(marker));
        free(back);
        free(want);
        free(script);
        free(lit);
        free(s);
        remove(got);
    }
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

/* python3 reads esc_python(s) back as s, byte for byte. */
static void test_python_literal(void)
{
    char *argv0[] = {"python3", "-c", "pass", NULL};
    int have = cl_spawn_wait(argv0, NULL);
    if (have == -1 || !WIFEXITED(have) || WEXITSTATUS(have) != 0) {
        printf("[python3 missing: literal structure only] ");
    }
    char marker[600], py[600], got[600];
    char *dir = test_scratch(sizeof marker, "PWN", marker, "t.py", py, "got", got, NULL);
    for (size_t i = 0; i < N_HOSTILE + 1; i++) {
        char *s = i < N_HOSTILE ? with_marker(hostile[i], marker) : cl_strdup("caf\xc3\xa9 \x7f\x01\t\r");
        char *lit = esc_python(s);
        CU_ASSERT_PTR_NULL(strchr(lit, '\n')); /* also safe in a # comment */
        CU_ASSERT(lit[0] == '"' && lit[strlen(lit) - 1] == '"');
        if (have != -1 && WIFEXITED(have) && WEXITSTATUS(have) == 0) {
            char *script = cl_malloc(strlen(lit) + 1200);
            sprintf(script, "# model %s\nopen('%s', 'wb').write(%s.encode('latin-1'))\n", lit, got, lit);
            put_file(py, script);
            char *argv[] = {"python3", py, NULL};
            int st = cl_spawn_wait(argv, NULL);
            CU_ASSERT(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
            char *back = test_slurp(got);
            CU_ASSERT_PTR_NOT_NULL_FATAL(back);
            CU_ASSERT_STRING_EQUAL(back, s);
            free(back);
            free(script);
            remove(got);
        }
        CU_ASSERT_FALSE(exists(marker));
        free(lit);
        free(s);
    }
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

/* cJSON and the suites' CSV reader read esc_json / esc_csv back. */
static void test_json_csv_terminal(void)
{
    char *dir = test_tmpdir();
    char csv[600];
    snprintf(csv, sizeof csv, "%s/t.csv", dir);
    char *text = cl_strdup("a,b\n");
    for (size_t i = 0; i < N_HOSTILE; i++) {
        char *j = esc_json(hostile[i]);
        cJSON *v = cJSON_Parse(j);
        CU_ASSERT(cJSON_IsString(v) && strcmp(v->valuestring, hostile[i]) == 0);
        cJSON_Delete(v);
        free(j);
        char *c = esc_csv(hostile[i]);
        text = cl_realloc(text, strlen(text) + strlen(c) + 8);
        strcat(text, c);
        strcat(text, ",x\n");
        free(c);
        /* the terminal: no control byte left, ESC visible as \x1b */
        char *t = esc_term(hostile[i]);
        for (const char *p = t; *p; p++) CU_ASSERT((unsigned char)*p >= 0x20 && *p != 0x7f);
        free(t);
    }
    char *t = esc_term("a\x1b[2J\xc2\x9b" "b");
    CU_ASSERT_STRING_EQUAL(t, "a\\x1b[2J\\xc2\\x9bb");
    free(t);
    put_file(csv, text);
    test_csv c;
    CU_ASSERT_FATAL(test_csv_read(csv, &c) == 0);
    CU_ASSERT_EQUAL(c.n_rows, (int)N_HOSTILE);
    CU_ASSERT_FALSE(c.ragged);
    for (size_t i = 0; i < N_HOSTILE && (int)i < c.n_rows; i++) {
        char *want = cl_strdup(hostile[i]);
        for (char *p = want; *p; p++) if (*p == '\n' || *p == '\r') *p = ' ';
        CU_ASSERT_STRING_EQUAL(test_csv_get(&c, (int)i, "a"), want);
        CU_ASSERT_STRING_EQUAL(test_csv_get(&c, (int)i, "b"), "x");
        free(want);
    }
    test_csv_free(&c);
    free(text);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

/* Arguments reach a started program as they are: no shell splits them. */
static void test_spawn_no_shell(void)
{
    char *dir = test_tmpdir();
    char marker[600], arg[3000], out[600];
    snprintf(marker, sizeof marker, "%s/PWN", dir);
    snprintf(arg, sizeof arg, "%s/x;touch %s;y `touch %s` $(touch %s) 'q\"", dir, marker, marker, marker);
    snprintf(out, sizeof out, "%s/out", dir);
    char *argv[] = {"printf", "%s", arg, NULL};
    int st = cl_spawn_wait(argv, out);
    CU_ASSERT(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char *back = test_slurp(out);
    CU_ASSERT(back && strcmp(back, arg) == 0);
    free(back);
    CU_ASSERT_FALSE(exists(marker));
    char *missing[] = {"/nonexistent/cleave-no-such-program", NULL};
    CU_ASSERT_EQUAL(cl_spawn_wait(missing, NULL), -1);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

TEST_SUITE(names)
{
    test_add_suite("names");
    test_add("the names rule, byte by byte, against the documented set", test_name_rule);
    test_add("gnuplot reads its literals back; no backtick runs", test_gnuplot_literal);
    test_add("python3 reads its literals back byte for byte", test_python_literal);
    test_add("JSON, CSV and terminal escapers", test_json_csv_terminal);
    test_add("programs start without a shell", test_spawn_no_shell);
}
