/* gnuplot.c - plots through the gnuplot program (see gnuplot.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "gnuplot.h"

extern char **environ;

struct gp_plot {
    char *buf;      /* the preamble: variables and data blocks */
    size_t len;
    FILE *f;        /* open_memstream over buf */
    int in_block;   /* a data block is open and needs its EOD */
    size_t block_at; /* where the open block's rows start in buf */
    int text_in_block; /* a block held more than numbers (gnuplot.h) */
};

gp_plot *gp_new(void)
{
    gp_plot *g = cl_calloc(1, sizeof *g);
    g->f = open_memstream(&g->buf, &g->len);
    if (!g->f) abort();
    return g;
}

void gp_free(gp_plot *g)
{
    if (!g) return;
    if (g->f) fclose(g->f);
    free(g->buf);
    free(g);
}

/* Blocks carry numbers only (NaN and inf included): no quote, backtick or
 * line "EOD" can be formed from these characters, whatever a caller wrote. */
static void end_block(gp_plot *g)
{
    if (!g->in_block) return;
    fflush(g->f);
    for (size_t i = g->block_at; i < g->len; i++)
        if (!strchr("0123456789.+-eE naNiIfF\t\n", g->buf[i])) g->text_in_block = 1;
    fputs("EOD\n", g->f);
    g->in_block = 0;
}

/* Every string reaches the script as a single-quoted literal (esc_gnuplot):
 * gnuplot expands backticks and escapes only in double quotes, and the
 * templates read these variables, never eval them. */
static void put_quoted(FILE *f, const char *s)
{
    char *q = esc_gnuplot(s);
    fputs(q, f);
    free(q);
}

void gp_str(gp_plot *g, const char *name, const char *value)
{
    end_block(g);
    fprintf(g->f, "%s = ", name);
    put_quoted(g->f, value);
    fputc('\n', g->f);
}

void gp_stri(gp_plot *g, const char *prefix, int i, const char *value)
{
    char key[64];
    snprintf(key, sizeof key, "%s_%d", prefix, i);
    gp_str(g, key, value);
}

void gp_num(gp_plot *g, const char *name, double value)
{
    end_block(g);
    fprintf(g->f, "%s = %.17g\n", name, value);
}

FILE *gp_data(gp_plot *g, const char *name)
{
    end_block(g);
    fprintf(g->f, "$%s << EOD\n", name);
    fflush(g->f);
    g->block_at = g->len;
    g->in_block = 1;
    return g->f;
}

/* The extension of the file name (after the last '/'), or NULL. */
static const char *ext_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash + 1 : path, '.');
    return dot ? dot + 1 : NULL;
}

/* A scratch file gnuplot reaches as /dev/fd/N: created with O_EXCL in
 * $TMPDIR (or /tmp) and unlinked at once, so nothing can be planted in its
 * place and nothing is left behind, even after kill -9.  The descriptor is
 * moved to 10 or above so that it never collides with the child's 2, 3, 4. */
static int scratch(cl_err *e)
{
    const char *d = getenv("TMPDIR");
    char near[600];
    snprintf(near, sizeof near, "%s/cleave-gnuplot", d && *d ? d : "/tmp");
    char *name;
    int fd = cl_tmp_create(near, &name);
    if (fd < 0) {
        cl_fail(e, CL_ERUN, "%s: cannot create a scratch file: %s (hint: set TMPDIR to a writable folder)",
                near, strerror(errno));
        return -1;
    }
    unlink(name);
    free(name);
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
    if (hi < 0) cl_fail(e, CL_ERUN, "cannot duplicate a descriptor: %s", strerror(errno));
    return hi;
}

/* Read up to cap - 1 bytes at offset off of fd (NUL-terminated); the count. */
static size_t read_at(int fd, off_t off, char *buf, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t got = pread(fd, buf + n, cap - 1 - n, off + (off_t)n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        n += (size_t)got;
    }
    buf[n] = '\0';
    return n;
}

/* Is the image gnuplot wrote complete?  gnuplot exits 0 even when its
 * writes failed (a full disk left a truncated PNG), so look: a PNG starts
 * with its signature and ends with the IEND chunk; an SVG ends with its
 * closing tag.  On failure, what is wrong goes to why. */
static int image_complete(int fd, int png, off_t size, char *why, size_t cap)
{
    static const char sig[8] = "\x89PNG\r\n\x1a\n";
    static const char iend[12] = "\0\0\0\0IEND\xae\x42\x60\x82";
    char head[16], tail[64];
    size_t nh = read_at(fd, 0, head, sizeof head);
    off_t t0 = size > (off_t)sizeof tail - 1 ? size - (off_t)(sizeof tail - 1) : 0;
    size_t nt = read_at(fd, t0, tail, sizeof tail);
    if (png) {
        if (nh < 8 || memcmp(head, sig, 8) != 0) {
            snprintf(why, cap, "%lld bytes without the PNG signature", (long long)size);
            return 0;
        }
        if (nt < 12 || memcmp(tail + nt - 12, iend, 12) != 0) {
            snprintf(why, cap, "%lld bytes without the PNG end chunk", (long long)size);
            return 0;
        }
        return 1;
    }
    while (nt > 0 && (tail[nt - 1] == '\n' || tail[nt - 1] == ' ' || tail[nt - 1] == '\r')) nt--;
    if (nt < 6 || memcmp(tail + nt - 6, "</svg>", 6) != 0) {
        snprintf(why, cap, "%lld bytes without the closing </svg>", (long long)size);
        return 0;
    }
    return 1;
}

/* Copy the image into `out` through cl_out (atomic for a file, direct for a
 * device or pipe; refused when out is an input). */
static int deliver(int img, off_t size, const char *out, cl_err *e)
{
    cl_out o;
    int rc = cl_out_open(&o, out, e);
    if (rc) return rc;
    char buf[1 << 16];
    for (off_t off = 0; off < size;) {
        ssize_t got = pread(img, buf, sizeof buf, off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            int err = got < 0 ? errno : EIO;
            cl_out_abort(&o);
            return cl_fail(e, CL_ERUN, "%s: cannot read back gnuplot's image: %s", out, strerror(err));
        }
        fwrite(buf, 1, (size_t)got, o.f); /* errors are reported by the commit */
        off += got;
    }
    return cl_out_commit(&o, e);
}

int gp_render(gp_plot *g, const char *tmpl, const char *out, int width, int height,
              cl_err *e)
{
    const char *text = gp_template(tmpl);
    if (!text) return cl_fail(e, CL_EINPUT, "internal: no gnuplot template \"%s\"", tmpl);
    if (!*out)
        return cl_fail(e, CL_EINPUT, "an output file name is empty (hint: name a .png or .svg file)");
    const char *ext = ext_of(out);
    const char *term;
    if (!ext || !*ext)
        return cl_fail(e, CL_EINPUT, "%s: no image type in the name (hint: end it in .png or .svg)", out);
    /* noenhanced: names are text, not markup (an _ or ^ in a layer name would
     * otherwise turn what follows into a subscript or superscript) */
    if (!strcmp(ext, "png")) term = "pngcairo noenhanced font \"sans,11\"";
    else if (!strcmp(ext, "svg")) term = "svg noenhanced dynamic font \"sans,11\"";
    else
        return cl_fail(e, CL_EINPUT, "%s: unknown image type \".%s\" (hint: use .png or .svg)", out, ext);
    int rc = cl_out_check(out, e); /* a bad destination fails before gnuplot runs */
    if (rc) return rc;
    end_block(g);
    fflush(g->f);
    if (g->text_in_block)
        return cl_fail(e, CL_ERUN, "%s: internal: text in a gnuplot data block (labels go in gp_stri variables)", out);

    /* gnuplot reads the script from /dev/fd/4, writes the image to
     * /dev/fd/3 and its messages to fd 2: no file name reaches it. */
    int sfd = -1, efd = -1, ifd = -1;
    if ((sfd = scratch(e)) < 0 || (efd = scratch(e)) < 0 || (ifd = scratch(e)) < 0) {
        rc = e->code;
        goto done;
    }
    int dfd = dup(sfd);
    FILE *s = dfd < 0 ? NULL : fdopen(dfd, "w");
    if (!s) {
        if (dfd >= 0) close(dfd);
        rc = cl_fail(e, CL_ERUN, "%s: cannot write the plot script: %s", out, strerror(errno));
        goto done;
    }
    fprintf(s, "set terminal %s size %d,%d\nset output \"/dev/fd/3\"\n", term, width, height);
    fwrite(g->buf, 1, g->len, s);
    fputs(text, s);
    fputs("\nunset output\n", s);
    errno = 0;
    int bad = fflush(s) != 0 || ferror(s);
    int err = errno ? errno : EIO;
    if (fclose(s) != 0 || bad) {
        rc = cl_fail(e, CL_ERUN, "%s: cannot write the plot script to the scratch folder: %s (hint: free space there, or set TMPDIR)",
                     out, strerror(err));
        goto done;
    }

    const char *prog = getenv("GNUPLOT");
    if (!prog || !*prog) prog = "gnuplot";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, efd, 2);
    posix_spawn_file_actions_adddup2(&fa, ifd, 3);
    posix_spawn_file_actions_adddup2(&fa, sfd, 4);
    char *argv[] = {(char *)prog, "/dev/fd/4", NULL};
    pid_t pid;
    int sp = posix_spawnp(&pid, prog, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (sp != 0) {
        rc = cl_fail(e, CL_ERUN, "%s: cannot run %s: %s (hint: make deps, or apt-get install gnuplot-nox)",
                     out, prog, strerror(sp));
        goto done;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char msg[1 << 14];
        read_at(efd, 0, msg, sizeof msg);
        char first[300] = ""; /* the line naming the problem, not the echoed script */
        char *line = strstr(msg, "line ");
        snprintf(first, sizeof first, "%.299s", line ? line : msg);
        char *nl = strchr(first, '\n');
        if (nl) *nl = '\0';
        if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
            rc = cl_fail(e, CL_ERUN, "%s: %s not found (hint: make deps, or apt-get install gnuplot-nox)", out, prog);
        else
            rc = cl_fail(e, CL_ERUN, "%s: gnuplot failed: %s", out, first[0] ? first : "no message");
        goto done;
    }
    struct stat ist;
    char why[120] = "cannot stat it";
    if (fstat(ifd, &ist) != 0 || !image_complete(ifd, ext[0] == 'p', ist.st_size, why, sizeof why)) {
        rc = cl_fail(e, CL_ERUN, "%s: gnuplot's image is incomplete (%s; is the disk full?); the file was left unchanged",
                     out, why);
        goto done;
    }
    rc = deliver(ifd, ist.st_size, out, e);
done:
    if (sfd >= 0) close(sfd);
    if (efd >= 0) close(efd);
    if (ifd >= 0) close(ifd);
    return rc;
}
