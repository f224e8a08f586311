/* test_proc.c - child processes for the reliability suites (test_proc.h). */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fileio.h"
#include "exec/ckpt/checkpoint.h"
#include "test_proc.h"

double tproc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *bin(void)
{
    const char *b = getenv("CLEAVE_BIN");
    return b ? b : "build/cleave";
}

/* Fork and exec argv[0] (PATH searched) with output to dir/out, dir/err. */
static pid_t start(char **argv, const char *dir, int own_group)
{
    char out[600], err[600];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    remove(out); /* a poll must not see an earlier child's output */
    remove(err);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (own_group) setpgid(0, 0);
        if (!freopen("/dev/null", "r", stdin) || !freopen(out, "w", stdout) ||
            !freopen(err, "w", stderr))
            _exit(126);
        execvp(argv[0], argv);
        _exit(127);
    }
    return pid;
}

pid_t tproc_cleave(char **args, const char *dir)
{
    char *argv[80];
    int n = 0;
    argv[n++] = (char *)bin();
    while (*args && n < 79) argv[n++] = *args++;
    argv[n] = NULL;
    return start(argv, dir, 0);
}

pid_t tproc_mpirun(int np, char **args, const char *dir)
{
    /* as tp_mpirun (test_pipe_ref.c): root allowed, loopback only, LSan
     * suppressions for what Open MPI keeps until exit under ASan */
    static char supp[600], asan[1200], npb[16];
    char *cwd = getcwd(NULL, 0);
    snprintf(supp, sizeof supp, "suppressions=%s/tests/lsan.supp:print_suppressions=0", cwd);
    free(cwd);
    const char *a = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "fast_unwind_on_malloc=0%s%s", a ? ":" : "", a ? a : "");
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 1);
    setenv("LSAN_OPTIONS", supp, 1);
    char *saved_asan = a ? cl_strdup(a) : NULL;
    setenv("ASAN_OPTIONS", asan, 1);
    snprintf(npb, sizeof npb, "%d", np);
    char *argv[96];
    int n = 0;
    const char *pre[] = {"mpirun", "--oversubscribe", "--bind-to", "none", "-np", npb,
                         "--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism",
                         "none", "-x", "LSAN_OPTIONS", "-x", "ASAN_OPTIONS", NULL};
    for (int i = 0; pre[i]; i++) argv[n++] = (char *)pre[i];
    argv[n++] = (char *)bin();
    while (*args && n < 95) argv[n++] = *args++;
    argv[n] = NULL;
    pid_t pid = start(argv, dir, 1);
    if (saved_asan) {
        setenv("ASAN_OPTIONS", saved_asan, 1);
        free(saved_asan);
    } else {
        unsetenv("ASAN_OPTIONS");
    }
    unsetenv("LSAN_OPTIONS");
    return pid;
}

void tproc_pause_at(int64_t n)
{
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)n);
    if (n < 0) unsetenv("CLEAVE_TEST_PAUSE_AT");
    else setenv("CLEAVE_TEST_PAUSE_AT", v, 1);
}

/* The state letter of /proc/<pid>/stat ('T' stopped), or 0. */
static char proc_state(pid_t pid)
{
    char p[64], buf[512];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *c = strrchr(buf, ')'); /* the command name may hold anything */
    return c && c[1] == ' ' ? c[2] : 0;
}

int tproc_wait_stopped(pid_t pid)
{
    double t0 = tproc_now();
    while (tproc_now() - t0 < TPROC_HANG_S) {
        char st = proc_state(pid);
        if (st == 'T') return 0;
        if (st == 0 || st == 'Z' || st == 'X') return -1;
        usleep(1000);
    }
    return -1;
}

int tproc_signal_at(char **args, const char *dir, int64_t n, int sig, int *stopped)
{
    tproc_pause_at(n);
    pid_t pid = tproc_cleave(args, dir);
    tproc_pause_at(-1);
    /* our own child: waitpid returns when it stops or ends, however long
     * the steps before n take (a sanitizer build on a loaded machine took
     * over a minute to reach iteration 5 of a ViT plan) */
    int st = 0;
    pid_t w;
    while ((w = waitpid(pid, &st, WUNTRACED)) < 0 && errno == EINTR) {}
    *stopped = w == pid && WIFSTOPPED(st);
    if (w != pid) return -1;
    if (!*stopped) /* it ended before n: its status, already reaped */
        return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    kill(pid, sig); /* pending while stopped, handled first thing after */
    kill(pid, SIGCONT);
    return tproc_reap(pid);
}

int tproc_reap(pid_t pid)
{
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

int tproc_ended(pid_t pid)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
}

/* Does /proc/<pid>/environ hold the string `kv`? */
static int env_has(pid_t pid, const char *kv)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/environ", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (!strcmp(buf + i, kv)) return 1;
    return 0;
}

pid_t tproc_rank_pid(pid_t mpirun, int rank)
{
    char kv[64], dirp[64];
    snprintf(kv, sizeof kv, "OMPI_COMM_WORLD_RANK=%d", rank);
    snprintf(dirp, sizeof dirp, "/proc/%d/task", (int)mpirun);
    DIR *d = opendir(dirp);
    if (!d) return -1;
    pid_t found = -1;
    for (struct dirent *t; found < 0 && (t = readdir(d));) {
        if (t->d_name[0] == '.') continue;
        char cp[600];
        snprintf(cp, sizeof cp, "%s/%s/children", dirp, t->d_name);
        FILE *f = fopen(cp, "r");
        if (!f) continue;
        int c;
        while (found < 0 && fscanf(f, "%d", &c) == 1)
            if (env_has((pid_t)c, kv)) found = (pid_t)c;
        fclose(f);
    }
    closedir(d);
    return found;
}

/* Entry k of the n integers of a checkpoint's section, or -1. */
static int64_t ckpt_position(const char *path, const char *section, int n, int k)
{
    exec_ckpt *c;
    cl_err e = {0};
    int64_t v[8];
    if (access(path, F_OK) != 0 || exec_ckpt_read(&c, path, &e)) return -1;
    int64_t x = exec_ckpt_get(c, section, v, (size_t)n * sizeof *v, &e) ? -1 : v[k];
    exec_ckpt_free(c);
    return x;
}

int64_t tproc_ckpt_step(const char *path) { return ckpt_position(path, "train.position", 7, 3); }
int64_t tproc_ckpt_iters(const char *path) { return ckpt_position(path, "run.position", 5, 0); }

char *tproc_slurp(const char *path, size_t *len)
{
    char *s = NULL;
    cl_err e = {0};
    if (cl_read_file(path, (size_t)1 << 26, &s, len, &e)) return NULL;
    return s;
}

char *tproc_output(const char *dir, const char *which)
{
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, which);
    return tproc_slurp(p, NULL);
}

void tproc_wait_output(pid_t pid, const char *dir, const char *text)
{
    double t0 = tproc_now();
    for (;;) {
        char *o = tproc_output(dir, "out");
        int ready = o && strstr(o, text);
        free(o);
        if (ready || tproc_now() - t0 > TPROC_HANG_S || tproc_ended(pid)) return;
        usleep(2000);
    }
}

int tproc_same_file(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    char *x = tproc_slurp(a, &la), *y = tproc_slurp(b, &lb);
    int same = x && y && la == lb && la > 0 && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

int tproc_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}
