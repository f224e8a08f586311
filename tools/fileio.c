/* fileio.c - whole-file reads and atomic writes (see fileio.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"

int cl_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                 cl_err *e)
{
    *out = NULL;
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return cl_fail(e, CL_EINPUT, "%s: cannot open: %s (hint: check the path)",
                       path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return cl_fail(e, CL_EINPUT, "%s: is a directory (hint: name a file)", path);
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = cl_malloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > max_bytes) {
                free(buf);
                fclose(f);
                return cl_fail(e, CL_EINPUT,
                               "%s: larger than %zu bytes (hint: is this the right file?)",
                               path, max_bytes);
            }
            cap *= 2;
            buf = cl_realloc(buf, cap);
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return cl_fail(e, CL_EINPUT, "%s: read error", path);
    }
    if (n > max_bytes) {
        free(buf);
        return cl_fail(e, CL_EINPUT,
                       "%s: larger than %zu bytes (hint: is this the right file?)",
                       path, max_bytes);
    }
    buf[n] = '\0';
    *out = buf;
    if (len) *len = n;
    return CL_OK;
}

char *cl_tmp_name(const char *path)
{
    /* Same folder as the destination so rename() stays on one filesystem.
     * The pid keeps concurrent runs (MPI ranks, parallel tests) apart. */
    size_t n = strlen(path) + 48;
    char *t = cl_malloc(n);
    const char *slash = strrchr(path, '/');
    if (slash)
        snprintf(t, n, "%.*s.%s.tmp%ld", (int)(slash - path + 1), path, slash + 1,
                 (long)getpid());
    else
        snprintf(t, n, ".%s.tmp%ld", path, (long)getpid());
    return t;
}

int cl_out_open(cl_out *o, const char *path, cl_err *e)
{
    memset(o, 0, sizeof *o);
    if (strcmp(path, "-") == 0) {
        o->f = stdout;
        return CL_OK;
    }
    o->path = cl_strdup(path);
    o->tmp = cl_tmp_name(path);
    o->f = fopen(o->tmp, "wb");
    if (!o->f) {
        int err = errno;
        free(o->path);
        free(o->tmp);
        memset(o, 0, sizeof *o);
        return cl_fail(e, CL_EINPUT, "%s: cannot write: %s (hint: does the folder exist?)",
                       path, strerror(err));
    }
    return CL_OK;
}

int cl_out_commit(cl_out *o, cl_err *e)
{
    if (!o->f) return cl_fail(e, CL_ERUN, "internal: commit of a closed output");
    if (!o->path) { /* stdout */
        fflush(o->f);
        o->f = NULL;
        return CL_OK;
    }
    int ok = fflush(o->f) == 0 && !ferror(o->f) && fsync(fileno(o->f)) == 0;
    int err = errno;
    ok = (fclose(o->f) == 0) && ok;
    o->f = NULL;
    if (ok && rename(o->tmp, o->path) != 0) { ok = 0; err = errno; }
    if (!ok) {
        remove(o->tmp);
        cl_fail(e, CL_ERUN, "%s: write failed: %s", o->path, strerror(err));
    }
    free(o->path);
    free(o->tmp);
    o->path = o->tmp = NULL;
    return ok ? CL_OK : CL_ERUN;
}

void cl_out_abort(cl_out *o)
{
    if (o->f && o->path) {
        fclose(o->f);
        remove(o->tmp);
    }
    free(o->path);
    free(o->tmp);
    memset(o, 0, sizeof *o);
}

int cl_write_file(const char *path, const void *data, size_t len, cl_err *e)
{
    cl_out o;
    int rc = cl_out_open(&o, path, e);
    if (rc) return rc;
    if (fwrite(data, 1, len, o.f) != len) {
        cl_out_abort(&o);
        return cl_fail(e, CL_ERUN, "%s: write failed", path);
    }
    return cl_out_commit(&o, e);
}
