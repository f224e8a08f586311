/* test_files.c - the file rules of base/fileio.h (docs/testing.md, "Threat
 * model: files"): no output replaces an input, a device, a pipe or a
 * symbolic link; temporaries cannot be redirected by a planted link; a plot
 * is checked complete before it replaces anything; write failures say why;
 * inputs that are not regular files are refused without blocking; sizes are
 * checked before reading.  Most cases run the cleave binary.
 *
 * Full disks are simulated with RLIMIT_FSIZE (8 KiB, SIGXFSZ ignored):
 * write() then fails with EFBIG at the very point where a full disk fails
 * with ENOSPC, for any user, with no mount.  Character devices are made with
 * mknod in the test's folder (root only; /dev itself is never written). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fileio.h"
#include "tools/gnuplot.h"
#include "test.h"

#define PLAN "tests/data/sim/fmnist-2stage.json"
#define TINY "train --model tests/data/ckpt/tiny.json --synthetic 400 --epochs 1 "
/* What a case runs under, set in the child before cleave starts: */
typedef struct limits {
    int guard_s;        /* killed by SIGALRM after this many seconds (0: never) */
    long fsize;         /* RLIMIT_FSIZE in bytes, SIGXFSZ ignored (0: none)   */
    int vm;             /* RLIMIT_AS of VM_BYTES                              */
    const char *env;    /* one NAME=value (NULL: none)                        */
    const char *fd7;    /* a file opened for writing as descriptor 7 (NULL: none) */
} limits;

/* Only a guard against a run that blocks (a FIFO opened for reading); a
 * refusal takes milliseconds.  Not a speed target. */
#define GUARD_S 120
/* A memory limit that keeps a regression reading /dev/zero or a 3 GiB file
 * from taking the machine; not under ASan or TSan, which reserve terabytes
 * of address space at start. */
#define VM_BYTES ((rlim_t)2000000 << 10)
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define VM_ON 0
#else
#define VM_ON 1
#endif
/* a full disk after 8 KiB */
#define FULL_AT 8192

#define NONE ((limits){0})
#define GUARD ((limits){.guard_s = GUARD_S})
#define VM_GUARD ((limits){.guard_s = GUARD_S, .vm = VM_ON})
#define VM ((limits){.vm = VM_ON})
#define FULL ((limits){.fsize = FULL_AT})
#define ENV(s) ((limits){.env = (s)})

static void apply_limits(void *ctx)
{
    const limits *l = ctx;
    if (l->fsize) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit r = {(rlim_t)l->fsize, (rlim_t)l->fsize};
        if (setrlimit(RLIMIT_FSIZE, &r)) _exit(125);
    }
    if (l->vm) {
        struct rlimit r = {VM_BYTES, VM_BYTES};
        if (setrlimit(RLIMIT_AS, &r)) _exit(125);
    }
    if (l->env && putenv((char *)l->env)) _exit(125);
    if (l->fd7) {
        int fd = open(l->fd7, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || (fd != 7 && (dup2(fd, 7) < 0 || close(fd)))) _exit(125);
    }
    if (l->guard_s) alarm((unsigned)l->guard_s); /* kept across exec */
}

/* Run `cleave args` (test_run_cli: no shell) under l; stderr into *err
 * (caller frees, may be NULL).  The exit status (128 + signal if killed). */
static int run(limits l, const char *args, char **err)
{
    return test_run_cli_with(args, apply_limits, &l, NULL, err);
}

/* Run and check status and a piece of the message; print what went wrong. */
static void expect(limits l, const char *args, int status, const char *msg)
{
    char *err = NULL;
    int st = run(l, args, &err);
    int ok = st == status && (!msg || strstr(err, msg));
    CU_ASSERT(ok);
    if (!ok)
        fprintf(stderr, "\n  cleave %s (guard %d s, file size %ld, vm %d, env %s)\n  -> exit %d (want %d, \"%s\"): %s", args,
                l.guard_s, l.fsize, l.vm, l.env ? l.env : "-", st, status, msg ? msg : "", err);
    free(err);
}

static char *slurp(const char *path, size_t *len)
{
    char *s = NULL;
    cl_err e = {0};
    if (cl_read_file(path, (size_t)1 << 26, &s, len, &e)) return NULL;
    return s;
}

static int same_file_text(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static mode_t lkind(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_mode & S_IFMT : 0;
}

static void rm_dir(char *dir) { CU_ASSERT_EQUAL(test_rmtree(dir), 0); }

/* cp from to, without a shell */
static int copy_file(const char *from, const char *to)
{
    char *t = NULL;
    size_t n = 0;
    cl_err e = {0};
    int rc = cl_read_file(from, (size_t)1 << 26, &t, &n, &e) || cl_write_file(to, t, n, &e);
    free(t);
    return rc;
}

/* An output that is an input (same file, by name, link or hard link) is
 * refused with exit 2 and the input stays byte for byte. */
static void test_output_is_input(void)
{
    char p[600], l[600], h[600], a[4096];
    char *d = test_scratch(sizeof p, "p.json", p, "link.json", l, "hard.json", h, NULL);
    CU_ASSERT_EQUAL(copy_file(PLAN, p), 0);
    CU_ASSERT_EQUAL(symlink("p.json", l), 0);
    CU_ASSERT_EQUAL(link(p, h), 0);
    const char *cmd[][2] = {{"sim", "--trace"}, {"export", "--to torch -o"}};
    const char *outs[] = {p, l, h};
    for (int f = 0; f < 2; f++)
        for (int o = 0; o < 3; o++) {
            snprintf(a, sizeof a, "%s %s %s %s", cmd[f][0], p, cmd[f][1], outs[o]);
            expect(NONE, a, 2, "is also an input of this command");
            CU_ASSERT(same_file_text(p, PLAN));
            CU_ASSERT_EQUAL(lkind(l), S_IFLNK);
        }
    rm_dir(d);
}

/* A FIFO, /dev/null and /dev/full stay what they are: written directly. */
static void test_output_devices(void)
{
    char f[600], ref[600], a[2048];
    char *d = test_scratch(sizeof f, "fifo", f, "ref.py", ref, NULL);
    snprintf(a, sizeof a, "export " PLAN " --to torch -o %s", ref);
    expect(NONE, a, 0, NULL);
    CU_ASSERT_EQUAL(mkfifo(f, 0600), 0);
    int rd = open(f, O_RDONLY | O_NONBLOCK); /* a reader, so the writer's open succeeds */
    CU_ASSERT(rd >= 0);
    snprintf(a, sizeof a, "export " PLAN " --to torch -o %s", f);
    expect(GUARD, a, 0, NULL);
    CU_ASSERT_EQUAL(lkind(f), S_IFIFO);
    char buf[1 << 16];
    ssize_t got = rd >= 0 ? read(rd, buf, sizeof buf - 1) : -1;
    size_t nref = 0;
    char *want = slurp(ref, &nref);
    CU_ASSERT(want && got == (ssize_t)nref && memcmp(buf, want, nref) == 0);
    free(want);
    if (rd >= 0) close(rd);

    char null[600], full[600];
    snprintf(null, sizeof null, "%s/null", d);
    snprintf(full, sizeof full, "%s/full", d);
    if (mknod(null, S_IFCHR | 0666, makedev(1, 3)) == 0 &&
        mknod(full, S_IFCHR | 0666, makedev(1, 7)) == 0) {
        snprintf(a, sizeof a, "export " PLAN " --to torch -o %s", null);
        expect(NONE, a, 0, NULL);
        CU_ASSERT_EQUAL(lkind(null), S_IFCHR);
        snprintf(a, sizeof a, "export " PLAN " --to torch -o %s", full);
        expect(NONE, a, 1, "full: write failed: No space left on device");
        CU_ASSERT_EQUAL(lkind(full), S_IFCHR);
        snprintf(a, sizeof a, TINY "--checkpoint %s", full);
        expect(NONE, a, 1, "full: write failed: No space left on device");
        CU_ASSERT_EQUAL(lkind(full), S_IFCHR);
    } else {
        fprintf(stderr, "\n  (mknod: %s; the character-device cases need root)", strerror(errno));
    }
    /* a descriptor's name is written, never replaced (the runner sends fd 1
     * to a file); /dev/fd/1 rather than /dev/stdout, whose link a
     * regression would replace on the machine running the tests */
    expect(NONE, "export " PLAN " --to torch -o /dev/fd/1", 0, NULL);
    char seven[600];
    snprintf(seven, sizeof seven, "%s/seven", d);
    expect((limits){.fd7 = seven}, "export " PLAN " --to torch -o /dev/fd/7", 0, NULL);
    CU_ASSERT(same_file_text(seven, ref));
    rm_dir(d);
}

/* A symbolic link is written through: the target (in another folder) gets
 * the new content, the link stays.  A dangling link is refused. */
static void test_output_symlink(void)
{
    char sub[600], t[600], l[600], ref[600], a[2048];
    char *d = test_scratch(sizeof sub, "sub", sub, "sub/target.py", t, "link.py", l, "ref.py", ref, NULL);
    CU_ASSERT_EQUAL(mkdir(sub, 0700), 0);
    cl_err e = {0};
    CU_ASSERT_EQUAL(cl_write_file(t, "old\n", 4, &e), CL_OK);
    CU_ASSERT_EQUAL(symlink("sub/target.py", l), 0);
    snprintf(a, sizeof a, "export " PLAN " --to torch -o %s", ref);
    expect(NONE, a, 0, NULL);
    snprintf(a, sizeof a, "export " PLAN " --to torch -o %s", l);
    expect(NONE, a, 0, NULL);
    CU_ASSERT_EQUAL(lkind(l), S_IFLNK);
    CU_ASSERT(same_file_text(t, ref));
    /* dangling */
    char dl[600];
    snprintf(dl, sizeof dl, "%s/dangling.py", d);
    CU_ASSERT_EQUAL(symlink("sub/missing.py", dl), 0);
    snprintf(a, sizeof a, "export " PLAN " --to torch -o %s", dl);
    expect(NONE, a, 2, "symbolic link to a missing file");
    CU_ASSERT_EQUAL(lkind(dl), S_IFLNK);
    snprintf(a, sizeof a, "%s/sub/missing.py", d);
    CU_ASSERT_NOT_EQUAL(access(a, F_OK), 0);
    rm_dir(d);
}

/* Links planted at the temporary names cleave used to use (".NAME.tmpPID",
 * and for plots ".NAME.tmpPID.gp" / ".err") must not redirect a write:
 * the victims keep their content.  In-process, so the pid is known. */
static void test_planted_temporaries(void)
{
    char out[600], img[600], v[4][600], pl[4][700];
    char *d = test_scratch(sizeof out, "out.txt", out, "g.png", img, NULL);
    long pid = (long)getpid();
    snprintf(pl[0], sizeof pl[0], "%s/.out.txt.tmp%ld", d, pid);
    snprintf(pl[1], sizeof pl[1], "%s/.g.png.tmp%ld", d, pid);
    snprintf(pl[2], sizeof pl[2], "%s/.g.png.tmp%ld.gp", d, pid);
    snprintf(pl[3], sizeof pl[3], "%s/.g.png.tmp%ld.err", d, pid);
    cl_err e = {0};
    for (int i = 0; i < 4; i++) {
        snprintf(v[i], sizeof v[i], "%s/victim%d", d, i);
        CU_ASSERT_EQUAL(cl_write_file(v[i], "precious\n", 9, &e), CL_OK);
        CU_ASSERT_EQUAL(symlink(v[i], pl[i]), 0);
    }
    CU_ASSERT_EQUAL(cl_write_file(out, "new\n", 4, &e), CL_OK);
    gp_plot *g = gp_new();
    gp_str(g, "title", "t");
    gp_num(g, "ncols", 2);
    gp_str(g, "mem_unit", "GiB");
    gp_stri(g, "col", 2, "a");
    fprintf(gp_data(g, "speedup"), "1 1\n2 1.9\n");
    fprintf(gp_data(g, "memory"), "1 2\n2 1\n");
    CU_ASSERT_EQUAL(gp_render(g, "speedup", img, 320, 200, &e), CL_OK);
    gp_free(g);
    for (int i = 0; i < 4; i++) {
        char *s = slurp(v[i], NULL);
        CU_ASSERT(s && strcmp(s, "precious\n") == 0);
        free(s);
        CU_ASSERT_EQUAL(lkind(pl[i]), S_IFLNK);
    }
    CU_ASSERT_EQUAL(lkind(out), S_IFREG);
    CU_ASSERT_EQUAL(lkind(img), S_IFREG);
    /* two outputs of one name get different temporaries, removed on abort */
    cl_out o1, o2;
    CU_ASSERT_EQUAL(cl_out_open(&o1, out, &e), CL_OK);
    CU_ASSERT_EQUAL(cl_out_open(&o2, out, &e), CL_OK);
    CU_ASSERT(strcmp(o1.tmp, o2.tmp) != 0);
    char t1[700];
    snprintf(t1, sizeof t1, "%s", o1.tmp);
    cl_out_abort(&o1);
    cl_out_abort(&o2);
    CU_ASSERT_NOT_EQUAL(access(t1, F_OK), 0);
    rm_dir(d);
}

/* gnuplot exits 0 after a failed write (a full disk): the truncated image
 * must be refused and the good one left byte for byte, PNG and SVG. */
static void test_plot_incomplete(void)
{
    char *d = test_tmpdir(), tr[600], a[2048];
    snprintf(tr, sizeof tr, "%s/t.json", d);
    snprintf(a, sizeof a, "sim " PLAN " --trace %s", tr);
    expect(NONE, a, 0, NULL);
    const char *ext[] = {"png", "svg"};
    for (int i = 0; i < 2; i++) {
        char img[600], good[600];
        snprintf(img, sizeof img, "%s/g.%s", d, ext[i]);
        snprintf(good, sizeof good, "%s/good.%s", d, ext[i]);
        snprintf(a, sizeof a, "plot %s -o %s", tr, img);
        expect(NONE, a, 0, NULL);
        CU_ASSERT_EQUAL(copy_file(img, good), 0);
        struct stat st;
        CU_ASSERT(stat(img, &st) == 0 && st.st_size > 16384); /* more than the limit below */
        snprintf(a, sizeof a, "plot %s -o %s", tr, img);
        expect(FULL, a, 1, "image is incomplete");
        CU_ASSERT(same_file_text(img, good));
    }
    /* sweep and compare draw through the same gp_render */
#define SWEEP_PNG "sweep --model models/fmnist-mlp.json --device A100-80GB --devices 1,2 --schedules gpipe --quiet --csv %s/s.csv --png %s"
#define COMPARE_PNG "compare --model models/fmnist-mlp.json --clusters profiles/clusters/cpu-2cores.json " \
                    "profiles/clusters/dgx-a100-1node.json --csv %s/c.csv --png %s"
    for (int i = 0; i < 2; i++) {
        char img[600], good[700];
        snprintf(img, sizeof img, "%s/o%d.png", d, i);
        snprintf(good, sizeof good, "%s.good", img);
        if (i == 0) snprintf(a, sizeof a, SWEEP_PNG, d, img);
        else snprintf(a, sizeof a, COMPARE_PNG, d, img);
        expect(NONE, a, 0, NULL);
        CU_ASSERT_EQUAL(copy_file(img, good), 0);
        expect(FULL, a, 1, "image is incomplete");
        CU_ASSERT(same_file_text(img, good));
    }
    snprintf(a, sizeof a, "plot %s -o %s/g", tr, d);
    expect(NONE, a, 2, "no image type in the name (hint: end it in .png or .svg)");
    snprintf(a, sizeof a, "plot %s -o %s/g.", tr, d);
    expect(NONE, a, 2, "no image type in the name");
    snprintf(a, sizeof a, "plot %s -o ''", tr);
    expect(NONE, a, 2, "cleave: an output file name is empty");
    rm_dir(d);
}

/* A failed checkpoint write names the file and the reason. */
static void test_checkpoint_write_error(void)
{
    char *d = test_tmpdir(), a[2048];
    snprintf(a, sizeof a, TINY "--checkpoint %s/run.ckpt", d);
    expect(FULL, a, 1, "run.ckpt: write failed: File too large");
    snprintf(a, sizeof a, "%s/run.ckpt", d);
    CU_ASSERT_NOT_EQUAL(access(a, F_OK), 0);
    expect(NONE, "export " PLAN " --to torch -o ''", 2, "cleave: an output file name is empty");
    rm_dir(d);
}

/* Inputs that are not regular files are refused at once: a FIFO (which
 * would block), /dev/zero (which never ends), a directory. */
static void test_inputs_not_regular(void)
{
    char *d = test_tmpdir(), f[600], a[2048];
    snprintf(f, sizeof f, "%s/fifo", d);
    CU_ASSERT_EQUAL(mkfifo(f, 0600), 0);
    char png[700];
    snprintf(png, sizeof png, "-o %s/x.png", d);
    const char *cmds[][2] = {{"sim", ""}, {"inspect", ""}, {"export", "--to torch"}, {"plot", png},
                             {"plan --model", "--devices 2"}, {TINY "--resume", ""}};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        snprintf(a, sizeof a, "%s %s %s", cmds[i][0], f, cmds[i][1]);
        expect(GUARD, a, 2, "fifo: is a pipe (FIFO), not a regular file");
        snprintf(a, sizeof a, "%s /dev/zero %s", cmds[i][0], cmds[i][1]);
        expect(VM_GUARD, a, 2, "/dev/zero: is a character device, not a regular file");
    }
    /* the IDX loader too: a --data folder whose files are FIFOs */
    const char *idx[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                         "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
    for (int i = 0; i < 4; i++) {
        snprintf(a, sizeof a, "%s/%s", d, idx[i]);
        CU_ASSERT_EQUAL(mkfifo(a, 0600), 0);
    }
    snprintf(a, sizeof a, "train --model tests/data/ckpt/tiny.json --epochs 1 --data %s", d);
    expect(GUARD, a, 2, "is a pipe (FIFO), not a regular file");
    snprintf(a, sizeof a, "sim %s", d);
    expect(GUARD, a, 2, "is a directory");
    rm_dir(d);
}

/* Sizes are checked before reading: a checkpoint's header first, then the
 * size it states against the file's; any input against the limit. */
static void test_sizes_before_reading(void)
{
    char z[600], ck[600], big[600], a[2048];
    char *d = test_scratch(sizeof z, "zero.ckpt", z, "run.ckpt", ck, "big.json", big, NULL);
    /* sparse files: 3 GiB of zeros, and a real checkpoint stretched to 3 GiB */
    int fd = open(z, O_WRONLY | O_CREAT | O_EXCL, 0644);
    CU_ASSERT(fd >= 0 && ftruncate(fd, (off_t)3 << 30) == 0);
    if (fd >= 0) close(fd);
    snprintf(a, sizeof a, TINY "--checkpoint %s", ck);
    expect(NONE, a, 0, NULL);
    CU_ASSERT_EQUAL(truncate(ck, (off_t)3 << 30), 0);
    limits lim = VM; /* reading either whole needs more than that */
    snprintf(a, sizeof a, TINY "--resume %s", z);
    expect(lim, a, 2, "zero.ckpt: not a cleave checkpoint");
    snprintf(a, sizeof a, TINY "--resume %s", ck);
    expect(lim, a, 2, "bytes after the checkpoint's");

    /* JSON: the 256 MiB default, named with the variable that raises it */
    fd = open(big, O_WRONLY | O_CREAT | O_EXCL, 0644);
    CU_ASSERT(fd >= 0 && ftruncate(fd, (off_t)300 << 20) == 0);
    if (fd >= 0) close(fd);
    snprintf(a, sizeof a, "inspect %s", big);
    expect(lim, a, 2, "314572800 bytes, more than the 256 MiB an input may have (hint: is this the right file? to read it anyway set CLEAVE_MAX_INPUT_MB=300)");
    /* a valid plan padded past 1 MiB: refused under a 1 MiB limit, read under 2 */
    char *t = NULL;
    size_t n = 0;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cl_read_file(PLAN, (size_t)1 << 26, &t, &n, &e), CL_OK);
    t = cl_realloc(t, n + 1500000);
    memset(t + n, ' ', 1500000); /* trailing blanks: still the same JSON */
    CU_ASSERT_EQUAL(cl_write_file(big, t, n + 1500000, &e), CL_OK);
    free(t);
    snprintf(a, sizeof a, "sim %s", big);
    expect(ENV("CLEAVE_MAX_INPUT_MB=1"), a, 2, "more than the 1 MiB an input may have");
    expect(ENV("CLEAVE_MAX_INPUT_MB=2"), a, 0, NULL);
    rm_dir(d);
}

TEST_SUITE(files)
{
    test_add_suite("files");
    test_add("an output that is an input is refused, the input kept", test_output_is_input);
    test_add("FIFOs and character devices are written, never replaced", test_output_devices);
    test_add("a symbolic link output replaces its target, keeps the link", test_output_symlink);
    test_add("links planted at temporary names redirect nothing", test_planted_temporaries);
    test_add("a truncated plot is refused, the old image kept", test_plot_incomplete);
    test_add("a failed checkpoint write names the file and the reason", test_checkpoint_write_error);
    test_add("inputs that are not regular files are refused without blocking", test_inputs_not_regular);
    test_add("sizes are checked before reading", test_sizes_before_reading);
}
