/* test_docs.c - suite docs: the examples in README.md and docs/ *.md are
 * what the commands print.
 *
 * Every line of a code block that starts with "$ build/cleave " or
 * "$ cleave " (continued by a trailing backslash) is a command; the lines
 * after it in the same block, up to the next command or the block's end,
 * are what the documentation says it prints.  The commands whose answers
 * are deterministic (plan, sim, import, inspect, export, sweep, compare)
 * run, file by file and in order, in one scratch folder that reaches the
 * repository's models/, profiles/, bench/ and tests/ and ../shared like
 * the repository root does (a later example reads the files an earlier one
 * wrote).  Each shown line must appear in the output, in order; other
 * lines may come between them ("..." in the docs), so an example may show
 * a part.  Lines that report wall-clock time are not compared.  train,
 * validate, bench, profile and plot measure this machine or draw pictures:
 * not run.  A command with a pipe other than `| head -N` or `| tail -N`, a
 * redirection or quoting is not run either (commands run without a shell).
 *
 * Why: the figures in the docs drifted from what the code prints (the
 * README quoted a 258.8 s GPT-3 plan that no longer fits at all); now a
 * change that moves an example fails here until the docs say it.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fileio.h"
#include "test.h"

static const char *const run_cmds[] = {"plan", "sim", "import", "inspect", "export", "sweep", "compare", NULL};

/* A line that reports wall-clock time, which no run repeats. */
static int timed(const char *l)
{
    static const char *const pats[] = {"planned in ", "evaluated in ", "simulated in ", "done in ",
                                       "elapsed", NULL};
    for (int i = 0; pats[i]; i++)
        if (strstr(l, pats[i])) return 1;
    return 0;
}

static size_t indent_of(const char *l)
{
    size_t n = 0;
    while (l[n] == ' ') n++;
    return n;
}

/* The command without its program and an ending `| head -N` or `| tail -N`
 * (the lines shown are then a part of the output, as any example's may be), or NULL when
 * it is not one to run (malloc'd). */
static char *runnable(const char *cmd)
{
    const char *a = !strncmp(cmd, "build/cleave ", 13) ? cmd + 13 : cmd + 7; /* "cleave " */
    int ok = 0;
    for (int i = 0; run_cmds[i]; i++) {
        size_t n = strlen(run_cmds[i]);
        if (!strncmp(a, run_cmds[i], n) && a[n] == ' ') ok = 1;
    }
    if (!ok) return NULL;
    char *s = cl_strdup(a);
    char *bar = strchr(s, '|');
    if (bar) {
        int n = 0;
        if ((sscanf(bar, "| head -%d", &n) != 1 && sscanf(bar, "| tail -%d", &n) != 1) || n < 1) {
            free(s);
            return NULL;
        }
        *bar = '\0';
    }
    if (strpbrk(s, "<>;&`$|'\"\\")) { /* redirections, quoting, shell syntax: not run */
        free(s);
        return NULL;
    }
    return s;
}

/* Run the cleave binary with `args` (words split at spaces; runnable
 * refused quoting) in folder cwd, no shell between; stdout and stderr
 * together (caller frees). */
static char *run_in(const char *cwd, const char *bin, const char *args)
{
    char *tmp = test_tmpdir(), *words = cl_strdup(args), p[PATH_MAX];
    char *argv[256];
    int n = 0;
    argv[n++] = (char *)bin;
    for (char *w = strtok(words, " "); w && n < 255; w = strtok(NULL, " ")) argv[n++] = w;
    argv[n] = NULL;
    snprintf(p, sizeof p, "%s/out", tmp);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600), null = open("/dev/null", O_RDONLY);
        if (fd < 0 || null < 0 || chdir(cwd) != 0) _exit(126);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        dup2(null, STDIN_FILENO);
        execv(bin, argv);
        _exit(127);
    }
    int st;
    if (pid > 0) waitpid(pid, &st, 0); /* the docs show refusals too: only the output is compared */
    free(words);
    char *o = test_slurp(p);
    test_rmtree(tmp);
    return o ? o : cl_strdup("");
}

/* 1 when every line of want[0..n-1] appears in out, in order (each a whole
 * line of out, trailing spaces aside); else 0 with *bad the first missing. */
static int shown_in(char **want, int n, const char *out, int *bad)
{
    const char *at = out;
    for (int i = 0; i < n; i++) {
        size_t wl = strlen(want[i]);
        const char *p = at;
        int found = 0;
        while (*p) {
            const char *eol = strchr(p, '\n');
            size_t ll = eol ? (size_t)(eol - p) : strlen(p);
            while (ll > 0 && p[ll - 1] == ' ') ll--;
            if (ll == wl && !memcmp(p, want[i], wl)) {
                found = 1;
                at = eol ? eol + 1 : p + strlen(p);
                break;
            }
            if (!eol) break;
            p = eol + 1;
        }
        if (!found) {
            *bad = i;
            return 0;
        }
    }
    return 1;
}

typedef struct doc_stats {
    int run, skipped, failed;
} doc_stats;

/* Check every example of one file, running its commands in cwd. */
static void check_file(const char *path, const char *cwd, const char *bin, doc_stats *ds)
{
    char *text = test_slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    /* split into lines (text is ours to cut) */
    int cap = 1024, n = 0;
    char **line = cl_malloc((size_t)cap * sizeof *line);
    for (char *p = text; *p;) {
        if (n == cap) line = cl_realloc(line, (size_t)(cap *= 2) * sizeof *line);
        line[n++] = p;
        char *eol = strchr(p, '\n');
        if (!eol) break;
        *eol = '\0';
        p = eol + 1;
    }
    int fence = 0;
    for (int i = 0; i < n; i++) {
        if (!strncmp(line[i], "```", 3)) {
            fence = !fence;
            continue;
        }
        size_t ind = indent_of(line[i]);
        const char *l = line[i] + ind;
        if (!(fence || ind >= 4) || (strncmp(l, "$ build/cleave ", 15) && strncmp(l, "$ cleave ", 9))) continue;
        /* the command, joined over trailing backslashes */
        int lineno = i + 1;
        size_t cl = 0, ccap = 256;
        char *cmd = cl_malloc(ccap);
        const char *part = l + 2;
        for (;;) {
            size_t pl = strlen(part);
            while (pl > 0 && part[pl - 1] == ' ') pl--;
            int cont = pl > 0 && part[pl - 1] == '\\';
            if (cont) pl--;
            if (cl + pl + 2 > ccap) cmd = cl_realloc(cmd, ccap = 2 * (cl + pl + 2));
            memcpy(cmd + cl, part, pl);
            cl += pl;
            cmd[cl++] = ' ';
            cmd[cl] = '\0';
            if (!cont || i + 1 >= n) break;
            part = line[++i];
            while (*part == ' ') part++;
        }
        /* what it prints: the block's next lines up to a command, a fence or
         * text indented less than the command */
        char **want = cl_malloc((size_t)(n - i + 1) * sizeof *want);
        int nw = 0;
        for (int j = i + 1; j < n; j++) {
            const char *w = line[j];
            if (!strncmp(w, "```", 3)) break;
            if (!*w) continue;
            if (!fence && indent_of(w) < ind) break;
            const char *body = w + (indent_of(w) >= ind ? ind : indent_of(w));
            if (!strncmp(body, "$ ", 2)) break;
            i = j;
            if (!strcmp(body, "...") || timed(body)) continue;
            size_t bl = strlen(body);
            while (bl > 0 && body[bl - 1] == ' ') bl--;
            want[nw] = cl_malloc(bl + 1);
            memcpy(want[nw], body, bl);
            want[nw++][bl] = '\0';
        }
        char *args = runnable(cmd);
        if (!args) {
            ds->skipped++;
        } else {
            char *out = run_in(cwd, bin, args);
            int bad = -1;
            ds->run++;
            if (!shown_in(want, nw, out, &bad)) {
                ds->failed++;
                fprintf(stderr, "\n%s:%d: `%s` no longer prints\n    %s\n  in order after the lines before it; it printed:\n%s\n",
                        path, lineno, cmd, want[bad], out);
                CU_FAIL("a documented example prints something else (stderr names it)");
            }
            free(out);
            free(args);
        }
        for (int k = 0; k < nw; k++) free(want[k]);
        free(want);
        free(cmd);
    }
    free(line);
    free(text);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_examples(void)
{
#ifdef CLEAVE_SANITIZED
    /* the examples exercise no code the other suites do not, and the
     * largest (a GPT-3 tensor search) take minutes under the sanitizers */
    CU_PASS("examples are checked in the plain build only");
    return;
#endif
    char root[PATH_MAX], shared[PATH_MAX], bin[2 * PATH_MAX], link[PATH_MAX + 32];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(root, sizeof root));
    const char *b = getenv("CLEAVE_BIN");
    if (b && b[0] == '/') snprintf(bin, sizeof bin, "%s", b);
    else snprintf(bin, sizeof bin, "%s/%s", root, b ? b : "build/cleave");
    char *dir = test_tmpdir(), work[PATH_MAX + 8];
    snprintf(work, sizeof work, "%s/w", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(work, 0700), 0);
    /* the scratch folder stands where the repository root would */
    static const char *const sub[] = {"models", "profiles", "bench", "tests", "build", NULL};
    for (int i = 0; sub[i]; i++) {
        char target[PATH_MAX + 32];
        snprintf(target, sizeof target, "%s/%s", root, sub[i]);
        snprintf(link, sizeof link, "%s/%s", work, sub[i]);
        CU_ASSERT_EQUAL(symlink(target, link), 0);
    }
    if (realpath("../shared", shared)) {
        snprintf(link, sizeof link, "%s/shared", dir);
        CU_ASSERT_EQUAL(symlink(shared, link), 0);
    }
    /* README.md, then the .md files of docs/ in name order */
    char *files[64];
    int nf = 0;
    files[nf++] = cl_strdup("README.md");
    DIR *d = opendir("docs");
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    for (struct dirent *de; (de = readdir(d)) && nf < 64;) {
        size_t l = strlen(de->d_name);
        if (l > 3 && !strcmp(de->d_name + l - 3, ".md")) {
            char p[PATH_MAX];
            snprintf(p, sizeof p, "docs/%s", de->d_name);
            files[nf++] = cl_strdup(p);
        }
    }
    closedir(d);
    qsort(files + 1, (size_t)(nf - 1), sizeof *files, cmp_str);
    doc_stats ds = {0};
    for (int i = 0; i < nf; i++) {
        check_file(files[i], work, bin, &ds);
        free(files[i]);
    }
    /* the README's own plan example at least ran: a parser that found no
     * example would otherwise pass */
    CU_ASSERT(ds.run >= 20);
    CU_ASSERT_EQUAL(ds.failed, 0);
    test_rmtree(dir);
}

TEST_SUITE(docs)
{
    test_add_suite("docs");
    test_add("README and docs examples print what they show", test_examples);
}
