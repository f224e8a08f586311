/* main.c - the CUnit runner: every TEST_SUITE in the tests folder, or the ones
 * named on the command line.  Exit status is the number of failed
 * assertions (capped at 125), plus one for a suite that failed to set up,
 * so a red test is never hidden behind a framework status. */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <math.h>

#include "profiles/pipedream.h"
#include "base/fileio.h"
#include "test.h"

#define SUITE(name) void suite_##name(void);
#include "suites.h"
#undef SUITE

static CU_pSuite current;

void test_add_suite(const char *name)
{
    current = CU_add_suite(name, NULL, NULL);
    if (!current) {
        fprintf(stderr, "CUnit: cannot add suite %s: %s\n", name, CU_get_error_msg());
        abort();
    }
}

void test_add(const char *name, void (*fn)(void))
{
    if (!CU_add_test(current, name, fn)) {
        fprintf(stderr, "CUnit: cannot add test %s: %s\n", name, CU_get_error_msg());
        abort();
    }
}

char *test_slurp(const char *path)
{
    char *s = NULL;
    cl_err e = {0};
    if (cl_read_file(path, (size_t)256 << 20, &s, NULL, &e)) return NULL;
    return s;
}

/* a command's captured output: "" when there was none to read */
static char *slurp(const char *path)
{
    char *s = test_slurp(path);
    return s ? s : cl_strdup("");
}

/* The words of args as a shell would split them, for the few forms the
 * tests write: blanks between words, '...' (everything literal) and "..."
 * (backslash escapes \\ and \" only) inside or around a word.  Anything a
 * shell would do more with (| & ; < > ( ) $ ` \ * ? ~ # unquoted) is
 * refused, so a test cannot come to rely on a shell: NULL, and the reason
 * on stderr.  The caller frees the array and its words with free_words. */
static char **split_words(const char *args, int *n)
{
    size_t cap = strlen(args) + 1;
    char **w = cl_calloc(cap + 1, sizeof *w);
    const char *s = args;
    *n = 0;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n') s++;
        if (!*s) break;
        char *word = cl_malloc(cap), *o = word;
        while (*s && *s != ' ' && *s != '\t' && *s != '\n') {
            if (*s == '\'') {
                const char *e = strchr(s + 1, '\'');
                if (!e) goto bad;
                memcpy(o, s + 1, (size_t)(e - s - 1));
                o += e - s - 1;
                s = e + 1;
            } else if (*s == '"') {
                for (s++; *s && *s != '"'; s++) {
                    if (*s == '\\' && (s[1] == '"' || s[1] == '\\')) s++;
                    else if (*s == '$' || *s == '`' || *s == '\\') goto bad;
                    *o++ = *s;
                }
                if (*s++ != '"') goto bad;
            } else if (strchr("|&;<>()$`\\*?~#", *s)) {
                goto bad;
            } else {
                *o++ = *s++;
            }
        }
        *o = '\0';
        w[(*n)++] = word;
        continue;
    bad:
        free(word);
        fprintf(stderr, "test_run_cli: shell syntax the runner does not interpret at \"%.20s\" in: %s\n", s, args);
        for (int i = 0; i < *n; i++) free(w[i]);
        free(w);
        return NULL;
    }
    return w;
}

static void free_words(char **w, int n)
{
    for (int i = 0; i < n; i++) free(w[i]);
    free(w);
}

int test_which(const char *name)
{
    const char *path = getenv("PATH");
    if (!path) return 0;
    char *dirs = cl_strdup(path), *save = NULL;
    int found = 0;
    for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char f[4096];
        snprintf(f, sizeof f, "%s/%s", *d ? d : ".", name);
        found = access(f, X_OK) == 0;
    }
    free(dirs);
    return found;
}

int test_run_cli(const char *args, char **out, char **err)
{
    return test_run_cli_with(args, NULL, NULL, out, err);
}

void test_cli_refused(const char *args, const char *msg)
{
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, msg));
    CU_ASSERT(err && *err && strchr(err, '\n') == err + strlen(err) - 1);
    CU_ASSERT(out && out[0] == 0);
    free(out);
    free(err);
}

/* Runs the binary itself with args split into argv (split_words): no shell
 * between the test and cleave, as between cleave and what it starts. */
int test_run_cli_with(const char *args, void (*setup)(void *), void *ctx, char **out, char **err)
{
    const char *bin = getenv("CLEAVE_BIN");
    if (!bin) bin = "build/cleave";
    int nw;
    char **words = split_words(args, &nw);
    if (!words) {
        if (out) *out = cl_strdup("");
        if (err) *err = cl_strdup("");
        return -1;
    }
    char **argv = cl_calloc((size_t)nw + 2, sizeof *argv);
    argv[0] = (char *)bin;
    for (int i = 0; i < nw; i++) argv[i + 1] = words[i];
    char *dir = test_tmpdir();
    char po[600], pe[600];
    snprintf(po, sizeof po, "%s/out", dir);
    snprintf(pe, sizeof pe, "%s/err", dir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fi = open("/dev/null", O_RDONLY), fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0600),
            fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fi < 0 || fo < 0 || fe < 0 || dup2(fi, 0) < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(126);
        if (setup) setup(ctx);
        execvp(bin, argv);
        _exit(127);
    }
    int st = -1;
    if (pid > 0)
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
    free(argv);
    free_words(words, nw);
    char *o = slurp(po);
    remove(po);
    char *er = slurp(pe);
    remove(pe);
    rmdir(dir);
    free(dir);
    if (out) *out = o; else free(o);
    if (err) *err = er; else free(er);
    if (pid < 0 || st == -1) return -1;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return -1;
}

int test_run_interrupted(const char *args, int after, char **out, char **err)
{
    char n[24];
    snprintf(n, sizeof n, "%d", after);
    setenv("CLEAVE_TEST_INTERRUPT_AFTER", n, 1);
    int st = test_run_cli(args, out, err);
    unsetenv("CLEAVE_TEST_INTERRUPT_AFTER");
    return st;
}

/* Every test folder is made inside one folder of this run, removed with
 * whatever is left in it when the runner ends, so a test that fails before
 * its own clean-up (or forgets one) leaves nothing in /tmp. */
static char *run_dir;
static pid_t run_pid; /* a forked child that calls exit() must not remove it */


int test_run_on_tty(char *const argv[], char *buf, size_t cap)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0 || !ptsname(master)) {
        if (master >= 0) close(master);
        return -1;
    }
    char slave[256];
    snprintf(slave, sizeof slave, "%s", ptsname(master));
    const char *bin = getenv("CLEAVE_BIN");
    if (!bin) bin = "build/cleave";
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(master);
        return -1;
    }
    if (pid == 0) {
        int s = open(slave, O_RDWR | O_NOCTTY), null = open("/dev/null", O_RDWR);
        if (s < 0 || null < 0) _exit(126);
        dup2(s, STDERR_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDIN_FILENO);
        close(master);
        execvp(bin, argv);
        _exit(127);
    }
    size_t got = 0;
    for (;;) { /* until the child's end of the terminal closes (EIO) */
        ssize_t n = read(master, buf + got, cap - 1 - got);
        if (n > 0) got += (size_t)n;
        else if (n < 0 && errno == EINTR) continue;
        else break;
        if (got == cap - 1) break;
    }
    buf[got] = '\0';
    int st = 0;
    waitpid(pid, &st, 0);
    close(master);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

int test_rmtree(char *dir)
{
    int rc = dir && cl_rmtree(dir) ? -1 : 0;
    if (rc) fprintf(stderr, "cleave_tests: cannot remove %s entirely\n", dir);
    free(dir);
    return rc;
}

static void run_dir_remove(void)
{
    if (!run_dir || getpid() != run_pid) return;
    if (cl_rmtree(run_dir))
        fprintf(stderr, "cleave_tests: cannot remove %s entirely\n", run_dir);
    free(run_dir);
    run_dir = NULL;
}

static char *make_dir(const char *parent, const char *prefix)
{
    size_t n = strlen(parent) + strlen(prefix) + 16;
    char *t = cl_malloc(n);
    snprintf(t, n, "%s/%sXXXXXX", parent, prefix);
    if (!mkdtemp(t)) {
        perror("mkdtemp");
        abort();
    }
    return t;
}

char *test_tmpdir(void)
{
    if (!run_dir) {
        const char *tmp = getenv("TMPDIR");
        run_dir = make_dir(tmp && *tmp ? tmp : "/tmp", "cleave-test-");
        run_pid = getpid();
        atexit(run_dir_remove);
    }
    /* named after the suite, so a folder left behind says whose it is */
    CU_pSuite su = CU_get_current_suite();
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-", su && su->pName ? su->pName : "t");
    return make_dir(run_dir, prefix);
}

char *test_scratch(size_t cap, ...)
{
    char *dir = test_tmpdir();
    va_list ap;
    va_start(ap, cap);
    int fits = 1;
    for (const char *name; (name = va_arg(ap, const char *));) {
        char *buf = va_arg(ap, char *);
        int n = snprintf(buf, cap, "%s/%s", dir, name);
        fits = fits && n > 0 && (size_t)n < cap;
    }
    va_end(ap);
    CU_ASSERT_FATAL(fits); /* every whole path fits its buffer */
    return dir;
}

/* Folders or files the tests left in the run's folder (each test removes
 * its own when it passes): printed, and their count. */
static int left_behind(void)
{
    if (!run_dir) return 0;
    DIR *d = opendir(run_dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *x; (x = readdir(d));) {
        if (!strcmp(x->d_name, ".") || !strcmp(x->d_name, "..")) continue;
        fprintf(stderr, "%s %s", n++ ? "," : "cleave_tests: tests that passed left behind", x->d_name);
    }
    closedir(d);
    if (n) fprintf(stderr, " (in %s; hint: a test removes the folder test_tmpdir gave it)\n", run_dir);
    return n;
}

const char *test_shared(const char *rel, char *buf, size_t cap)
{
    snprintf(buf, cap, "../shared/data/%s", rel);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

int test_pipedream(const char *name, struct model *m, struct prof *pf)
{
    char rel[128], buf[512];
    snprintf(rel, sizeof rel, "pipedream/%s.txt", name);
    const char *path = test_shared(rel, buf, sizeof buf);
    if (!path) {
        fprintf(stderr, "\n  %s: missing (../shared beside the repository?)\n", rel);
        return -1;
    }
    cl_err e = {0};
    int rc = pipedream_import(path, 0, m, pf, NULL, &e);
    if (rc) fprintf(stderr, "\n  %s\n", e.msg);
    return rc;
}

double test_rel(double a, double b)
{
    double m = fmax(fmax(fabs(a), fabs(b)), 1e-300);
    return fabs(a - b) / m;
}

typedef struct { const char *name; void (*add)(void); } suite_entry;
static const suite_entry suites[] = {
#define SUITE(name) {#name, suite_##name},
#include "suites.h"
#undef SUITE
};

int main(int argc, char **argv)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
        return 125;
    }
    size_t n = sizeof suites / sizeof suites[0];
    int added = 0;
    for (size_t i = 0; i < n; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++)
            if (strcmp(argv[a], suites[i].name) == 0) want = 1;
        if (want) { suites[i].add(); added++; }
    }
    if (argc >= 2 && added != argc - 1) {
        fprintf(stderr, "cleave_tests: unknown suite name among the arguments\n");
        CU_cleanup_registry();
        return 2;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures();
    unsigned bad_suites = CU_get_number_of_suites_failed();
    unsigned ran = CU_get_number_of_tests_run();
    unsigned tests_failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    printf("\n%u passed, %u failed\n", ran - tests_failed, tests_failed);
    if (ran == 0) {
        fprintf(stderr, "cleave_tests: no test ran\n");
        return 1;
    }
    unsigned rc = failed + bad_suites;
    if (rc == 0 && left_behind()) rc = 1; /* after failures, left-overs are expected */
    return rc > 125 ? 125 : (int)rc;
}
