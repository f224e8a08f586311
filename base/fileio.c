/* fileio.c - safe reads and atomic writes (the rules are in fileio.h). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"

/* ------------------------------------------------------------ inputs -- */

/* The inputs the current command read, so that no output replaces one.
 * ctime is part of the identity: were an input deleted during a long run
 * and its inode number reused by a new file, the new file differs in it. */
typedef struct in_id {
    dev_t dev;
    ino_t ino;
    struct timespec ct;
    char *path;
} in_id;

static pthread_mutex_t g_in_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_track, g_n_in, g_cap_in;
static in_id *g_in;

void cl_inputs_track(int on)
{
    pthread_mutex_lock(&g_in_mu);
    g_track = on;
    if (!on) {
        for (int i = 0; i < g_n_in; i++) free(g_in[i].path);
        free(g_in);
        g_in = NULL;
        g_n_in = g_cap_in = 0;
    }
    pthread_mutex_unlock(&g_in_mu);
}

static void remember(const char *path, const struct stat *st)
{
    pthread_mutex_lock(&g_in_mu);
    if (g_track) {
        if (g_n_in == g_cap_in) {
            g_cap_in = g_cap_in ? 2 * g_cap_in : 8;
            g_in = cl_realloc(g_in, (size_t)g_cap_in * sizeof *g_in);
        }
        g_in[g_n_in++] = (in_id){st->st_dev, st->st_ino, st->st_ctim, cl_strdup(path)};
    }
    pthread_mutex_unlock(&g_in_mu);
}

/* Nonzero (and the input's name in buf) when st is a file this command read. */
static int is_input(const struct stat *st, char *buf, size_t cap)
{
    int hit = 0;
    pthread_mutex_lock(&g_in_mu);
    for (int i = 0; i < g_n_in && !hit; i++)
        if (g_in[i].dev == st->st_dev && g_in[i].ino == st->st_ino &&
            g_in[i].ct.tv_sec == st->st_ctim.tv_sec && g_in[i].ct.tv_nsec == st->st_ctim.tv_nsec) {
            snprintf(buf, cap, "%s", g_in[i].path);
            hit = 1;
        }
    pthread_mutex_unlock(&g_in_mu);
    return hit;
}

static const char *kind_of(mode_t m)
{
    if (S_ISFIFO(m)) return "pipe (FIFO)";
    if (S_ISCHR(m)) return "character device";
    if (S_ISBLK(m)) return "block device";
    if (S_ISSOCK(m)) return "socket";
    if (S_ISDIR(m)) return "directory";
    return "special file";
}

int cl_in_open(const char *path, int flags, int *fd, struct stat *st, cl_err *e)
{
    *fd = -1;
    if (!*path) return cl_fail(e, CL_EINPUT, "an input file name is empty (hint: name a file)");
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer; fstat then refuses it without reading. */
    int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0)
        return cl_fail(e, CL_EINPUT, "%s: cannot open: %s (hint: check the path)", path,
                       strerror(errno));
    if (fstat(f, st) != 0) {
        int err = errno;
        close(f);
        return cl_fail(e, CL_EINPUT, "%s: cannot stat: %s", path, strerror(err));
    }
    if (S_ISDIR(st->st_mode)) {
        close(f);
        return cl_fail(e, CL_EINPUT, "%s: is a directory (hint: name a file)", path);
    }
    if (!S_ISREG(st->st_mode)) {
        close(f);
        return cl_fail(e, CL_EINPUT,
                       "%s: is a %s, not a regular file (hint: cleave reads only regular files; save the data to a file first)",
                       path, kind_of(st->st_mode));
    }
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0) fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    if (!(flags & (CL_IN_REPLACEABLE | CL_IN_INTERNAL))) remember(path, st);
    *fd = f;
    return CL_OK;
}

size_t cl_in_limit(size_t def_bytes)
{
    const char *s = getenv(CL_MAX_INPUT_ENV);
    if (!s || !*s) return def_bytes;
    char *end;
    errno = 0;
    unsigned long long mb = strtoull(s, &end, 10);
    if (errno || *end || mb == 0 || s[0] == '-' || mb > (SIZE_MAX >> 21)) return def_bytes;
    return (size_t)mb << 20;
}

int cl_in_too_big(cl_err *e, const char *path, unsigned long long size, size_t limit)
{
    char lim[64];
    if (limit % (1 << 20) == 0) snprintf(lim, sizeof lim, "%zu MiB", limit >> 20);
    else snprintf(lim, sizeof lim, "%zu bytes", limit);
    return cl_fail(e, CL_EINPUT,
                   "%s: %llu bytes, more than the %s an input may have (hint: is this the right file? to read it anyway set %s=%llu)",
                   path, size, lim, CL_MAX_INPUT_ENV, (size + (1 << 20) - 1) >> 20);
}

int cl_read_file_flags(const char *path, size_t max_bytes, int flags, char **out, size_t *len,
                       cl_err *e)
{
    *out = NULL;
    if (len) *len = 0;
    size_t limit = flags & CL_IN_INTERNAL ? max_bytes : cl_in_limit(max_bytes);
    int fd;
    struct stat st;
    int rc = cl_in_open(path, flags, &fd, &st, e);
    if (rc) return rc;
    if ((unsigned long long)st.st_size > limit) {
        close(fd);
        return cl_in_too_big(e, path, (unsigned long long)st.st_size, limit);
    }
    /* st_size is a hint (a file may grow while read, /proc files say 0):
     * read to the end, never past the limit. */
    size_t cap = (size_t)st.st_size + 2, n = 0;
    if (cap < 4096) cap = 4096;
    char *buf = cl_malloc(cap);
    for (;;) {
        if (n + 1 == cap) {
            if (n > limit) break;
            cap = cap > limit / 2 ? limit + 2 : 2 * cap;
            buf = cl_realloc(buf, cap);
        }
        ssize_t got = read(fd, buf + n, cap - 1 - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int err = errno;
            free(buf);
            close(fd);
            return cl_fail(e, CL_EINPUT, "%s: read error: %s", path, strerror(err));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    if (n > limit) {
        free(buf);
        return cl_in_too_big(e, path, n, limit);
    }
    buf[n] = '\0';
    *out = buf;
    if (len) *len = n;
    return CL_OK;
}

int cl_read_file(const char *path, size_t max_bytes, char **out, size_t *len, cl_err *e)
{
    return cl_read_file_flags(path, max_bytes, 0, out, len, e);
}

/* ----------------------------------------------------------- outputs -- */

/* A FILE over a descriptor that keeps the first write error, so a failure
 * found at commit can say why (stdio's errno is long gone by then). */
struct cl_out_sink {
    int fd;
    int err;
};

static ssize_t sink_write(void *c, const char *buf, size_t n)
{
    cl_out_sink *s = c;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(s->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (!s->err) s->err = w < 0 ? errno : EIO;
            return 0; /* glibc marks the stream failed */
        }
        done += (size_t)w;
    }
    return (ssize_t)n;
}

static int sink_close(void *c)
{
    cl_out_sink *s = c;
    int rc = close(s->fd);
    if (rc != 0 && !s->err) s->err = errno;
    s->fd = -1;
    return rc;
}

static FILE *sink_open(cl_out *o, int fd)
{
    o->sink = cl_calloc(1, sizeof *o->sink);
    o->sink->fd = fd;
    FILE *f = fopencookie(o->sink, "w", (cookie_io_functions_t){.write = sink_write,
                                                               .close = sink_close});
    if (!f) abort(); /* out of memory */
    setvbuf(f, NULL, _IOFBF, 1 << 16);
    return f;
}

static void out_free(cl_out *o)
{
    free(o->path);
    free(o->target);
    free(o->tmp);
    free(o->sink);
    memset(o, 0, sizeof *o);
}

int cl_tmp_create(const char *near, char **name)
{
    static unsigned counter;
    const char *slash = strrchr(near, '/');
    int dir_len = slash ? (int)(slash - near + 1) : 0;
    const char *base = slash ? slash + 1 : near;
    size_t n = (size_t)dir_len + 240;
    char *t = cl_malloc(n);
    for (int tries = 0; tries < 100; tries++) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
            r = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)t;
        r ^= __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
        /* the base is cut so that the name stays within NAME_MAX */
        snprintf(t, n, "%.*s.%.200s.%012llx.tmp", dir_len, near, base,
                 (unsigned long long)(r & 0xffffffffffffULL));
        int fd = open(t, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *name = t;
            return fd;
        }
        if (errno != EEXIST) break;
    }
    int err = errno;
    free(t);
    *name = NULL;
    errno = err;
    return -1;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int cl_rmtree(const char *dir)
{
    /* depth first, so a folder is empty when its turn comes */
    return nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) ? -1 : 0;
}

static int same_as_input(cl_err *e, const char *path, const char *in)
{
    int same = strcmp(path, in) == 0;
    return cl_fail(e, CL_EINPUT,
                   "%s: is also an input of this command%s%s%s; writing it would destroy that input (hint: write to another file)",
                   path, same ? "" : " (read as ", same ? "" : in, same ? "" : ")");
}

/* The descriptor a name stands for (/dev/stdout, /dev/stderr, /dev/fd/N,
 * /proc/self/fd/N), or -1: such outputs are written, never replaced. */
static int fd_of_name(const char *p)
{
    if (!strcmp(p, "/dev/stdout")) return 1;
    if (!strcmp(p, "/dev/stderr")) return 2;
    const char *n = !strncmp(p, "/dev/fd/", 8) ? p + 8 : !strncmp(p, "/proc/self/fd/", 14) ? p + 14 : NULL;
    if (!n || *n < '0' || *n > '9') return -1;
    char *end;
    long v = strtol(n, &end, 10);
    return *end || v > INT_MAX ? -1 : (int)v;
}

/* cl_out_open and cl_out_check: open_it = 0 checks without opening a
 * device or pipe and removes the temporary at once. */
static int out_start(cl_out *o, const char *path, int open_it, cl_err *e)
{
    memset(o, 0, sizeof *o);
    if (strcmp(path, "-") == 0) {
        if (open_it) o->f = stdout;
        return CL_OK;
    }
    if (!*path)
        return cl_fail(e, CL_EINPUT, "an output file name is empty (hint: name a file, or - for standard output)");
    struct stat st;
    int have = stat(path, &st) == 0, serr = errno;
    char in[512];
    if (have && S_ISDIR(st.st_mode))
        return cl_fail(e, CL_EINPUT, "%s: is a directory (hint: name a file in it)", path);
    if (have && S_ISREG(st.st_mode) && is_input(&st, in, sizeof in))
        return same_as_input(e, path, in);
    int dn = fd_of_name(path);
    if (dn >= 0 || (have && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))) {
        if (dn >= 0 && !have) { /* a system without /dev/fd: the descriptor itself */
            have = fstat(dn, &st) == 0;
            serr = errno;
        }
        if (!have)
            return cl_fail(e, CL_EINPUT, "%s: cannot write: %s", path, strerror(serr));
        if (!open_it) return CL_OK;
        fflush(stdout); /* keep the order when this is stdout under another name */
        /* a descriptor is duplicated (same file offset, works for sockets
         * too); a device or FIFO is opened by name */
        int fd = dn >= 0 ? fcntl(dn, F_DUPFD_CLOEXEC, 0)
                         : open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
            return cl_fail(e, CL_EINPUT, "%s: cannot write: %s", path, strerror(errno));
        o->path = cl_strdup(path);
        o->f = sink_open(o, fd);
        return CL_OK;
    }
    if (have && !S_ISREG(st.st_mode))
        return cl_fail(e, CL_EINPUT,
                       "%s: is a %s; cleave writes regular files, character devices and pipes (hint: name another file)",
                       path, kind_of(st.st_mode));
    if (!have && serr != ENOENT)
        return cl_fail(e, CL_EINPUT, "%s: cannot write: %s (hint: does the folder exist?)", path,
                       strerror(serr));
    struct stat lst;
    char *target;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        /* a link: replace its target, beside the target, and keep the link */
        target = have ? realpath(path, NULL) : NULL;
        if (!target)
            return cl_fail(e, CL_EINPUT,
                           "%s: is a symbolic link to a missing file (hint: create the target, or remove the link)",
                           path);
    } else {
        target = cl_strdup(path);
    }
    char *tmp;
    int fd = cl_tmp_create(target, &tmp);
    if (fd < 0) {
        int err = errno;
        free(target);
        return cl_fail(e, CL_EINPUT, "%s: cannot write: %s (hint: does the folder exist, may you write there?)",
                       path, strerror(err));
    }
    if (have) fchmod(fd, st.st_mode & 0777); /* the replacement keeps the permissions (not set-id bits) */
    if (!open_it) {
        close(fd);
        unlink(tmp);
        free(tmp);
        free(target);
        return CL_OK;
    }
    o->path = cl_strdup(path);
    o->target = target;
    o->tmp = tmp;
    o->f = sink_open(o, fd);
    return CL_OK;
}

int cl_out_open(cl_out *o, const char *path, cl_err *e)
{
    return out_start(o, path, 1, e);
}

int cl_out_check(const char *path, cl_err *e)
{
    cl_out o;
    return out_start(&o, path, 0, e);
}

int cl_out_commit(cl_out *o, cl_err *e)
{
    if (!o->f) return cl_fail(e, CL_ERUN, "internal: commit of a closed output");
    if (!o->sink) { /* stdout */
        int bad = fflush(o->f) != 0 || ferror(o->f);
        int err = errno;
        o->f = NULL;
        return bad ? cl_fail(e, CL_ERUN, "standard output: write failed: %s", strerror(err)) : CL_OK;
    }
    errno = 0;
    int ok = fflush(o->f) == 0 && !ferror(o->f);
    int err = o->sink->err ? o->sink->err : errno ? errno : EIO;
    if (ok && o->tmp && fsync(o->sink->fd) != 0) { /* durable before it replaces */
        ok = 0;
        err = errno;
    }
    if (fclose(o->f) != 0 && ok) {
        ok = 0;
        err = o->sink->err ? o->sink->err : errno;
    }
    o->f = NULL;
    int rc = CL_OK;
    struct stat st;
    char in[512];
    /* an input read after the output was opened is caught here */
    if (ok && o->tmp && stat(o->target, &st) == 0 && is_input(&st, in, sizeof in))
        rc = same_as_input(e, o->path, in);
    else if (ok && o->tmp && rename(o->tmp, o->target) != 0) {
        ok = 0;
        err = errno;
    }
    if (!ok) rc = cl_fail(e, CL_ERUN, "%s: write failed: %s", o->path, strerror(err));
    if (rc && o->tmp) unlink(o->tmp);
    out_free(o);
    return rc;
}

void cl_out_abort(cl_out *o)
{
    if (o->f && o->sink) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    out_free(o);
}

int cl_write_file(const char *path, const void *data, size_t len, cl_err *e)
{
    cl_out o;
    int rc = cl_out_open(&o, path, e);
    if (rc) return rc;
    fwrite(data, 1, len, o.f); /* a failure is reported, with its reason, by the commit */
    return cl_out_commit(&o, e);
}
