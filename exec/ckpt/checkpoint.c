/* checkpoint.c - checkpoint files, identity checks, weights files and the
 * stop-at-a-boundary signal flag (checkpoint.h). */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <zlib.h>

#include "base/fileio.h"
#include "checkpoint.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint sections are stored in host order, which must be little-endian"
#endif

/* Largest checkpoint read back: a guard against naming a disk image. */
#define CKPT_MAX_BYTES ((size_t)1 << 36)
#define CKPT_NAME_MAX 255

typedef struct sec {
    char *name;
    unsigned char *data;
    size_t len;
} sec;

struct exec_ckpt {
    sec *s;
    int n, cap;
    char *file;
};

exec_ckpt *exec_ckpt_new(void)
{
    exec_ckpt *c = cl_calloc(1, sizeof *c);
    c->file = cl_strdup("");
    return c;
}

void exec_ckpt_free(exec_ckpt *c)
{
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        free(c->s[i].name);
        free(c->s[i].data);
    }
    free(c->s);
    free(c->file);
    free(c);
}

const char *exec_ckpt_file(const exec_ckpt *c) { return c->file; }

void exec_ckpt_merge(exec_ckpt *dst, const exec_ckpt *src)
{
    for (int i = 0; i < src->n; i++) exec_ckpt_put(dst, src->s[i].name, src->s[i].data, src->s[i].len);
}

static const sec *find(const exec_ckpt *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->s[i].name, name)) return &c->s[i];
    return NULL;
}

void exec_ckpt_put(exec_ckpt *c, const char *name, const void *data, size_t len)
{
    assert(strlen(name) >= 1 && strlen(name) <= CKPT_NAME_MAX);
    assert(!find(c, name) && "checkpoint section added twice");
    if (c->n == c->cap) {
        c->cap = c->cap * 2 + 16;
        c->s = cl_realloc(c->s, (size_t)c->cap * sizeof *c->s);
    }
    sec *s = &c->s[c->n++];
    s->name = cl_strdup(name);
    s->len = len;
    s->data = cl_malloc(len ? len : 1);
    if (len) memcpy(s->data, data, len);
}

void exec_ckpt_put_str(exec_ckpt *c, const char *name, const char *s)
{
    exec_ckpt_put(c, name, s, strlen(s));
}

void exec_ckpt_put_i64(exec_ckpt *c, const char *name, const int64_t *v, size_t n)
{
    exec_ckpt_put(c, name, v, n * sizeof *v);
}

void exec_ckpt_put_f64(exec_ckpt *c, const char *name, const double *v, size_t n)
{
    exec_ckpt_put(c, name, v, n * sizeof *v);
}

int exec_ckpt_count(const exec_ckpt *c) { return c->n; }

const char *exec_ckpt_name(const exec_ckpt *c, int i)
{
    assert(i >= 0 && i < c->n);
    return c->s[i].name;
}

const void *exec_ckpt_find(const exec_ckpt *c, const char *name, size_t *len)
{
    const sec *s = find(c, name);
    if (len) *len = s ? s->len : 0;
    return s ? s->data : NULL;
}

int exec_ckpt_get(const exec_ckpt *c, const char *name, void *dst, size_t len, cl_err *e)
{
    const sec *s = find(c, name);
    if (!s)
        return cl_fail(e, CL_EINPUT, "%s: section %s is missing (hint: the checkpoint was written by another kind of run)",
                       c->file, name);
    if (s->len != len)
        return cl_fail(e, CL_EINPUT, "%s: section %s holds %zu bytes, this run needs %zu (hint: the checkpoint was written for another model or options)",
                       c->file, name, s->len, len);
    if (len) memcpy(dst, s->data, len);
    return CL_OK;
}

/* ----------------------------------------------------------- encoding -- */

static uint32_t crc_of(const unsigned char *p, size_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n) { /* zlib takes uInt lengths */
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)crc;
}

unsigned char *exec_ckpt_encode(const exec_ckpt *c, size_t *len)
{
    size_t pay = 0;
    for (int i = 0; i < c->n; i++) pay += 4 + strlen(c->s[i].name) + 8 + c->s[i].len;
    unsigned char *p = cl_malloc(pay ? pay : 1), *q = p;
    for (int i = 0; i < c->n; i++) {
        uint32_t nl = (uint32_t)strlen(c->s[i].name);
        uint64_t dl = c->s[i].len;
        memcpy(q, &nl, 4);
        memcpy(q + 4, c->s[i].name, nl);
        q += 4 + nl;
        memcpy(q, &dl, 8);
        q += 8;
        if (dl) memcpy(q, c->s[i].data, dl);
        q += dl;
    }
    assert((size_t)(q - p) == pay);
    char hdr[96];
    int h = snprintf(hdr, sizeof hdr, "%s %d %zu %08" PRIx32 "\n", EXEC_CKPT_TAG, EXEC_CKPT_VERSION,
                     pay, crc_of(p, pay));
    unsigned char *out = cl_malloc((size_t)h + pay);
    memcpy(out, hdr, (size_t)h);
    if (pay) memcpy(out + h, p, pay);
    free(p);
    *len = (size_t)h + pay;
    return out;
}

int exec_ckpt_write(const exec_ckpt *c, const char *path, cl_err *e)
{
    size_t n;
    unsigned char *b = exec_ckpt_encode(c, &n);
    int rc = cl_write_file(path, b, n, e);
    free(b);
    return rc;
}

/* Parse the header line at the start of buf (len bytes, the whole file or
 * its first bytes): *eol is the offset of its newline. */
static int ckpt_header(const unsigned char *buf, size_t len, const char *file, size_t *eol_out,
                       unsigned long long *pay_out, unsigned int *crc_out, cl_err *e)
{
    const size_t tl = strlen(EXEC_CKPT_TAG);
    if (len < tl + 1 || memcmp(buf, EXEC_CKPT_TAG, tl) != 0 || buf[tl] != ' ')
        return cl_fail(e, CL_EINPUT, "%s: not a cleave checkpoint (it does not start with \"%s\") (hint: name a file written by cleave train --checkpoint)",
                       file, EXEC_CKPT_TAG);
    size_t eol = tl;
    while (eol < len && eol < 96 && buf[eol] != '\n') eol++;
    if (eol >= len || buf[eol] != '\n')
        return cl_fail(e, CL_EINPUT, "%s: truncated checkpoint header (hint: the file is damaged; use an older checkpoint or start afresh)",
                       file);
    char hdr[100];
    memcpy(hdr, buf, eol);
    hdr[eol] = 0;
    int ver = 0, used = 0;
    unsigned long long pay = 0;
    unsigned int crc = 0;
    if (sscanf(hdr + tl, " %d %llu %8x%n", &ver, &pay, &crc, &used) != 3 || hdr[tl + used] != 0)
        return cl_fail(e, CL_EINPUT, "%s: malformed checkpoint header \"%.60s\" (hint: the file is damaged; use an older checkpoint or start afresh)",
                       file, hdr);
    if (ver != EXEC_CKPT_VERSION)
        return cl_fail(e, CL_EINPUT, "%s: checkpoint version %d, this cleave reads version %d (hint: resume with the cleave that wrote it)",
                       file, ver, EXEC_CKPT_VERSION);
    *eol_out = eol;
    *pay_out = pay;
    *crc_out = crc;
    return CL_OK;
}

/* The payload after the header has `have` bytes; the header says pay. */
static int ckpt_sizes(const char *file, unsigned long long have, unsigned long long pay, cl_err *e)
{
    if (have < pay)
        return cl_fail(e, CL_EINPUT, "%s: truncated checkpoint: %llu of %llu payload bytes (hint: the file is damaged; use an older checkpoint or start afresh)",
                       file, have, pay);
    if (have > pay)
        return cl_fail(e, CL_EINPUT, "%s: %llu bytes after the checkpoint's %llu payload bytes (hint: the file is damaged; use an older checkpoint or start afresh)",
                       file, have - pay, pay);
    return CL_OK;
}

int exec_ckpt_decode(exec_ckpt **out, const unsigned char *buf, size_t len, const char *file,
                     cl_err *e)
{
    *out = NULL;
    size_t eol;
    unsigned long long pay;
    unsigned int crc;
    int rc = ckpt_header(buf, len, file, &eol, &pay, &crc, e);
    if (rc) return rc;
    const unsigned char *p = buf + eol + 1;
    size_t have = len - eol - 1;
    if ((rc = ckpt_sizes(file, have, pay, e))) return rc;
    if (crc_of(p, have) != crc)
        return cl_fail(e, CL_EINPUT, "%s: corrupt checkpoint: checksum %08" PRIx32 ", header says %08x (hint: the file is damaged; use an older checkpoint or start afresh)",
                       file, crc_of(p, have), crc);
    exec_ckpt *c = exec_ckpt_new();
    free(c->file);
    c->file = cl_strdup(file);
    size_t off = 0;
    while (off < have) {
        uint32_t nl;
        uint64_t dl;
        int bad = have - off < 4;
        if (!bad) {
            memcpy(&nl, p + off, 4);
            bad = nl < 1 || nl > CKPT_NAME_MAX || have - off - 4 < (size_t)nl + 8;
        }
        if (!bad) {
            memcpy(&dl, p + off + 4 + nl, 8);
            bad = dl > have - off - 12 - nl;
        }
        char name[CKPT_NAME_MAX + 1];
        if (!bad) {
            memcpy(name, p + off + 4, nl);
            name[nl] = 0;
            bad = strlen(name) != nl || find(c, name) != NULL;
        }
        if (bad) {
            exec_ckpt_free(c);
            return cl_fail(e, CL_EINPUT, "%s: section at byte %zu does not parse (hint: the file is damaged; use an older checkpoint or start afresh)",
                           file, off);
        }
        exec_ckpt_put(c, name, p + off + 12 + nl, (size_t)dl);
        off += 12 + nl + (size_t)dl;
    }
    *out = c;
    return CL_OK;
}

/* Read n bytes at off of fd; the count read (short at the end of file). */
static size_t pread_full(int fd, unsigned char *buf, size_t n, off_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

int exec_ckpt_read(exec_ckpt **out, const char *path, cl_err *e)
{
    *out = NULL;
    int fd;
    struct stat st;
    /* replaceable: --resume run.ckpt --checkpoint run.ckpt is the usual way */
    int rc = cl_in_open(path, CL_IN_REPLACEABLE, &fd, &st, e);
    if (rc) return rc;
    /* The header first: a file that is not a checkpoint, or whose size
     * disagrees with its header, is refused before the rest is read. */
    unsigned char head[100];
    size_t nh = pread_full(fd, head, sizeof head, 0);
    size_t eol;
    unsigned long long pay;
    unsigned int crc;
    rc = ckpt_header(head, nh, path, &eol, &pay, &crc, e);
    unsigned long long size = (unsigned long long)st.st_size;
    if (!rc) rc = ckpt_sizes(path, size - eol - 1, pay, e);
    size_t limit = cl_in_limit(CKPT_MAX_BYTES);
    if (!rc && size > limit) rc = cl_in_too_big(e, path, size, limit);
    unsigned char *buf = NULL;
    size_t n = 0;
    if (!rc) {
        buf = cl_malloc((size_t)size + 1);
        errno = 0;
        n = pread_full(fd, buf, (size_t)size, 0);
        if (n < size && errno) /* a shorter file is reported by the decoder */
            rc = cl_fail(e, CL_EINPUT, "%s: read error: %s", path, strerror(errno));
    }
    close(fd);
    if (!rc) rc = exec_ckpt_decode(out, buf, n, path, e);
    free(buf);
    return rc;
}

/* ----------------------------------------------------------- identity -- */

uint64_t exec_ckpt_hash(const void *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 offset basis and prime */
    for (const unsigned char *b = p; n--; b++) {
        h ^= *b;
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t exec_ckpt_model_hash(const model *m)
{
    cJSON *j = model_to_json(m);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    uint64_t h = exec_ckpt_hash(s, s ? strlen(s) : 0);
    free(s);
    return h;
}

void exec_ckpt_data_print(const exec_data *d, char *buf, size_t cap)
{
    uLong crc = crc_of((const unsigned char *)d->x, (size_t)d->n * (size_t)d->dim * sizeof *d->x);
    crc = crc32_combine(crc, crc_of((const unsigned char *)d->y, (size_t)d->n * sizeof *d->y),
                        (z_off_t)((size_t)d->n * sizeof *d->y));
    snprintf(buf, cap, "n=%lld dim=%lld classes=%d crc=%08lx", (long long)d->n,
             (long long)d->dim, d->classes, (unsigned long)crc);
}

exec_ckpt_id exec_ckpt_id_str(const char *key, const char *v)
{
    exec_ckpt_id id = {.key = key};
    snprintf(id.val, sizeof id.val, "%s", v);
    return id;
}

exec_ckpt_id exec_ckpt_id_int(const char *key, int64_t v)
{
    exec_ckpt_id id = {.key = key};
    snprintf(id.val, sizeof id.val, "%lld", (long long)v);
    return id;
}

exec_ckpt_id exec_ckpt_id_real(const char *key, double v)
{
    exec_ckpt_id id = {.key = key};
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(id.val, sizeof id.val, "%.*g", prec, v);
        if (strtod(id.val, NULL) == v) break;
    }
    return id;
}

void exec_ckpt_put_ids(exec_ckpt *c, const exec_ckpt_id *ids, int n)
{
    for (int i = 0; i < n; i++) {
        char name[CKPT_NAME_MAX + 1];
        snprintf(name, sizeof name, "id.%s", ids[i].key);
        exec_ckpt_put_str(c, name, ids[i].val);
    }
}

int exec_ckpt_check_ids(const exec_ckpt *c, const exec_ckpt_id *ids, int n, cl_err *e)
{
    for (int i = 0; i < n; i++) {
        char name[CKPT_NAME_MAX + 1];
        snprintf(name, sizeof name, "id.%s", ids[i].key);
        const sec *s = find(c, name);
        if (!s && ids[i].was) { /* written before the option was renamed */
            snprintf(name, sizeof name, "id.%s", ids[i].was);
            s = find(c, name);
        }
        if (!s)
            return cl_fail(e, CL_EINPUT, "%s: the checkpoint does not record %s (hint: it was written by another kind of run; start afresh without --resume)",
                           c->file, ids[i].key);
        if (s->len != strlen(ids[i].val) || memcmp(s->data, ids[i].val, s->len) != 0)
            return cl_fail(e, CL_EINPUT, "%s: the checkpoint was written with %s %.*s, this run has %s %s (hint: resume with the same model, data and options, or start afresh without --resume)",
                           c->file, ids[i].key, (int)(s->len > 200 ? 200 : s->len),
                           (const char *)s->data, ids[i].key, ids[i].val);
    }
    return CL_OK;
}

/* ------------------------------------------------------ shared pieces -- */

void exec_ckpt_put_rng(exec_ckpt *c, const char *name, const gsl_rng *r)
{
    const char *tn = gsl_rng_name(r);
    size_t tl = strlen(tn) + 1, sl = gsl_rng_size(r);
    unsigned char *b = cl_malloc(tl + sl);
    memcpy(b, tn, tl);
    memcpy(b + tl, gsl_rng_state(r), sl);
    exec_ckpt_put(c, name, b, tl + sl);
    free(b);
}

int exec_ckpt_get_rng(const exec_ckpt *c, const char *name, gsl_rng *r, cl_err *e)
{
    const char *tn = gsl_rng_name(r);
    size_t tl = strlen(tn) + 1, sl = gsl_rng_size(r), len;
    const unsigned char *b = exec_ckpt_find(c, name, &len);
    if (!b)
        return cl_fail(e, CL_EINPUT, "%s: section %s is missing (hint: the checkpoint was written by another kind of run)",
                       c->file, name);
    if (len != tl + sl || memcmp(b, tn, tl) != 0)
        return cl_fail(e, CL_EINPUT, "%s: section %s is not a %s random stream of this build (hint: resume with the cleave that wrote it)",
                       c->file, name, tn);
    if (!strcmp(tn, "mt19937")) { /* its state: unsigned long mt[624], then the index */
        int mti;
        memcpy(&mti, b + tl + 624 * sizeof(unsigned long), sizeof mti);
        if (mti < 0 || mti > 624)
            return cl_fail(e, CL_EINPUT, "%s: section %s: stream position %d is out of range (hint: the file is damaged)",
                           c->file, name, mti);
    }
    memcpy(gsl_rng_state(r), b + tl, sl);
    return CL_OK;
}

void exec_ckpt_put_net(exec_ckpt *c, const char *prefix, exec_net *n, const exec_sgd *sgd)
{
    char name[CKPT_NAME_MAX + 1];
    int64_t np, nb;
    const float *p = exec_net_params(n, &np), *b = exec_net_bufs(n, &nb);
    snprintf(name, sizeof name, "%s.params", prefix);
    exec_ckpt_put(c, name, p, (size_t)np * sizeof *p);
    snprintf(name, sizeof name, "%s.bufs", prefix);
    exec_ckpt_put(c, name, b, (size_t)nb * sizeof *b);
    for (int k = 0; k < exec_net_n_rngs(n); k++) {
        snprintf(name, sizeof name, "%s.rng%d", prefix, k);
        exec_ckpt_put_rng(c, name, exec_net_rng(n, k));
    }
    if (sgd) {
        assert(sgd->n == np);
        snprintf(name, sizeof name, "%s.velocity", prefix);
        exec_ckpt_put(c, name, sgd->velocity, (size_t)sgd->n * sizeof *sgd->velocity);
    }
}

int exec_ckpt_get_net(const exec_ckpt *c, const char *prefix, exec_net *n, exec_sgd *sgd,
                      cl_err *e)
{
    char name[CKPT_NAME_MAX + 1];
    int64_t np, nb;
    float *p = exec_net_params(n, &np), *b = exec_net_bufs(n, &nb);
    int rc;
    snprintf(name, sizeof name, "%s.params", prefix);
    if ((rc = exec_ckpt_get(c, name, p, (size_t)np * sizeof *p, e))) return rc;
    snprintf(name, sizeof name, "%s.bufs", prefix);
    if ((rc = exec_ckpt_get(c, name, b, (size_t)nb * sizeof *b, e))) return rc;
    for (int k = 0; k < exec_net_n_rngs(n); k++) {
        snprintf(name, sizeof name, "%s.rng%d", prefix, k);
        if ((rc = exec_ckpt_get_rng(c, name, exec_net_rng(n, k), e))) return rc;
    }
    if (sgd) {
        assert(sgd->n == np);
        snprintf(name, sizeof name, "%s.velocity", prefix);
        if ((rc = exec_ckpt_get(c, name, sgd->velocity, (size_t)sgd->n * sizeof *sgd->velocity, e)))
            return rc;
    }
    exec_net_zero_grads(n);
    return CL_OK;
}

/* Move a split stage's state between its ranks and `whole`, an unsplit
 * net of the same layers, and ws, whole's optimiser (exec_ckpt_put_net_tp). */
static void tp_state(exec_net *whole, exec_sgd *ws, exec_net *const *nets, exec_sgd *const *sgd,
                     int size, int to_whole)
{
    float **vel = cl_malloc((size_t)size * sizeof *vel), **par = cl_malloc((size_t)size * sizeof *par);
    for (int r = 0; r < size; r++) {
        par[r] = exec_net_params(nets[r], NULL);
        vel[r] = sgd[r]->velocity;
    }
    exec_net_tp_move(whole, exec_net_params(whole, NULL), nets, par, size, to_whole);
    exec_net_tp_move(whole, ws->velocity, nets, vel, size, to_whole);
    int64_t nb, nr;
    float *wb = exec_net_bufs(whole, &nb);
    for (int r = 0; r < (to_whole ? 1 : size); r++) {
        float *rb = exec_net_bufs(nets[r], &nr);
        assert(nr == nb && exec_net_n_rngs(nets[r]) == exec_net_n_rngs(whole));
        memcpy(to_whole ? wb : rb, to_whole ? rb : wb, (size_t)nb * sizeof *wb);
        for (int k = 0; k < exec_net_n_rngs(whole); k++)
            gsl_rng_memcpy(to_whole ? exec_net_rng(whole, k) : exec_net_rng(nets[r], k),
                           to_whole ? exec_net_rng(nets[r], k) : exec_net_rng(whole, k));
    }
    free(vel);
    free(par);
}

static void whole_net(exec_net **whole, exec_sgd *ws, const model *m, int first, int last)
{
    cl_err e = {0};
    int rc = exec_net_create(whole, m, first, last, 1, 0, 0, "", &e);
    assert(rc == CL_OK && "the shards exist, so the layers make a net");
    (void)rc;
    exec_sgd_init(ws, *whole, 0, 0.9, 0); /* only its velocity block is used */
}

void exec_ckpt_put_net_tp(exec_ckpt *c, const char *prefix, const model *m, int first, int last,
                          exec_net *const *shards, exec_sgd *const *sgd, int size)
{
    exec_net *whole;
    exec_sgd ws;
    whole_net(&whole, &ws, m, first, last);
    tp_state(whole, &ws, shards, sgd, size, 1);
    exec_ckpt_put_net(c, prefix, whole, &ws);
    exec_sgd_free(&ws);
    exec_net_destroy(whole);
}

int exec_ckpt_get_net_tp(const exec_ckpt *c, const char *prefix, const model *m, int first,
                         int last, exec_net *const *shards, exec_sgd *const *sgd, int size,
                         cl_err *e)
{
    exec_net *whole;
    exec_sgd ws;
    whole_net(&whole, &ws, m, first, last);
    int rc = exec_ckpt_get_net(c, prefix, whole, &ws, e);
    if (!rc) tp_state(whole, &ws, shards, sgd, size, 0);
    exec_sgd_free(&ws);
    exec_net_destroy(whole);
    return rc;
}

/* ------------------------------------------------------------- weights -- */

int exec_ckpt_save_weights(exec_net *const *nets, int n_nets, const char *path, cl_err *e)
{
    int nt = 0;
    for (int i = 0; i < n_nets; i++) nt += exec_net_n_tensors(nets[i]);
    cl_out out;
    int rc = cl_out_open(&out, path, e);
    if (rc) return rc;
    fprintf(out.f, "cleave-weights 1 %d\n", nt);
    for (int i = 0; i < n_nets; i++)
        for (int k = 0; k < exec_net_n_tensors(nets[i]); k++) {
            const exec_tensor *t = exec_net_tensor(nets[i], k);
            fprintf(out.f, "%s %lld\n", t->name, (long long)t->n);
            /* host order is little-endian (checked above) */
            fwrite(t->data, sizeof *t->data, (size_t)t->n, out.f);
        }
    return cl_out_commit(&out, e);
}

/* ------------------------------------------------------------- signals -- */

/* Set by the handler, read by the worker threads: volatile sig_atomic_t is
 * only for a handler and the thread it interrupts (another thread reading
 * it is a data race, which ThreadSanitizer reports); a lock-free atomic is
 * safe in a handler and between threads alike. */
static atomic_int g_sig;
static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signal flag must be lock-free");
static struct sigaction g_old_int, g_old_term;
static int g_installed;

static void on_signal(int sig) { atomic_store(&g_sig, sig); }

void exec_ckpt_signals_install(void)
{
    if (g_installed) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_RESTART; /* a second signal kills */
    atomic_store(&g_sig, 0);
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
    g_installed = 1;
}

void exec_ckpt_signals_restore(void)
{
    if (!g_installed) return;
    sigaction(SIGINT, &g_old_int, NULL);
    sigaction(SIGTERM, &g_old_term, NULL);
    g_installed = 0;
    atomic_store(&g_sig, 0);
}

int exec_ckpt_signal(void) { return atomic_load(&g_sig); }

void exec_ckpt_test_pause(int64_t pos)
{
    const char *s = getenv("CLEAVE_TEST_PAUSE_AT");
    if (s && *s && strtoll(s, NULL, 10) == pos) raise(SIGSTOP);
}

const char *exec_ckpt_signal_name(int sig)
{
    static char buf[32];
    if (sig == SIGINT) return "SIGINT";
    if (sig == SIGTERM) return "SIGTERM";
    snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}
