/* gnuplot.c - plots through the gnuplot program (see gnuplot.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "escape.h"
#include "fileio.h"
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

static const char *ext_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : "";
}

int gp_render(gp_plot *g, const char *tmpl, const char *out, int width, int height,
              cl_err *e)
{
    const char *text = gp_template(tmpl);
    if (!text) return cl_fail(e, CL_EINPUT, "internal: no gnuplot template \"%s\"", tmpl);
    const char *ext = ext_of(out);
    const char *term;
    /* noenhanced: names are text, not markup (an _ or ^ in a layer name would
     * otherwise turn what follows into a subscript or superscript) */
    if (!strcmp(ext, "png")) term = "pngcairo noenhanced font \"sans,11\"";
    else if (!strcmp(ext, "svg")) term = "svg noenhanced dynamic font \"sans,11\"";
    else
        return cl_fail(e, CL_EINPUT, "%s: unknown image type \".%s\" (hint: use .png or .svg)", out, ext);
    end_block(g);
    fflush(g->f);
    if (g->text_in_block)
        return cl_fail(e, CL_ERUN, "%s: internal: text in a gnuplot data block (labels go in gp_stri variables)", out);

    char *img_tmp = cl_tmp_name(out);
    size_t n = strlen(img_tmp) + 16;
    char *script_path = cl_malloc(n), *err_path = cl_malloc(n);
    snprintf(script_path, n, "%s.gp", img_tmp);
    snprintf(err_path, n, "%s.err", img_tmp);

    int rc = CL_OK;
    FILE *s = fopen(script_path, "w");
    if (!s) {
        rc = cl_fail(e, CL_EINPUT, "%s: cannot write beside it: %s (hint: does the folder exist?)",
                     out, strerror(errno));
        goto done;
    }
    fprintf(s, "set terminal %s size %d,%d\nset output ", term, width, height);
    put_quoted(s, img_tmp);
    fputc('\n', s);
    fwrite(g->buf, 1, g->len, s);
    fputs(text, s);
    fputs("\nunset output\n", s);
    if (fclose(s) != 0) {
        rc = cl_fail(e, CL_ERUN, "%s: cannot write the plot script", out);
        goto done;
    }

    const char *prog = getenv("GNUPLOT");
    if (!prog || !*prog) prog = "gnuplot";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char *argv[] = {(char *)prog, script_path, NULL};
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
        char *msg = NULL;
        cl_err ignore = {0};
        cl_read_file(err_path, 1 << 16, &msg, NULL, &ignore);
        char first[300] = "";
        if (msg) { /* the line naming the problem, not the echoed script */
            char *line = strstr(msg, "line ");
            snprintf(first, sizeof first, "%s", line ? line : msg);
            char *nl = strchr(first, '\n');
            if (nl) *nl = '\0';
        }
        free(msg);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
            rc = cl_fail(e, CL_ERUN, "%s: %s not found (hint: make deps, or apt-get install gnuplot-nox)", out, prog);
        else
            rc = cl_fail(e, CL_ERUN, "%s: gnuplot failed: %s", out, first[0] ? first : "no message");
        goto done;
    }
    int fd = open(img_tmp, O_RDONLY); /* durable before it replaces out */
    if (fd < 0 || fsync(fd) != 0)
        rc = cl_fail(e, CL_ERUN, "%s: gnuplot wrote no image: %s", out, strerror(errno));
    if (fd >= 0) close(fd);
    if (!rc && rename(img_tmp, out) != 0)
        rc = cl_fail(e, CL_ERUN, "%s: cannot move the image into place: %s", out, strerror(errno));
done:
    remove(img_tmp);
    remove(script_path);
    remove(err_path);
    free(img_tmp);
    free(script_path);
    free(err_path);
    return rc;
}
