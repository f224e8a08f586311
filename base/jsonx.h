/* jsonx.h - checked access to JSON documents, with paths in every error.
 *
 * Every loader reads through these helpers, so every bad value is reported
 * the same way: "<file>: <path>: <problem> (hint: ...)", with the path in
 * the JSON-pointer-like dotted form users read (`layers[3].kernel`).
 *
 * Conventions: `obj` is the enclosing object, `path` its path ("" for the
 * root), `key` the member.  Optional members leave *out untouched when absent,
 * so callers set defaults first.  All return CL_OK or CL_EINPUT.
 */
#ifndef CL_JSONX_H
#define CL_JSONX_H

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "status.h"

typedef struct jx {
    const char *file; /* named in every message */
    cl_err *e;
    const void *ctx;  /* what a format's reader needs besides the document
                         (the plan a schedule is read against), or NULL */
} jx;

/* Largest JSON file any loader accepts (a guard, not a design limit). */
#define JX_MAX_FILE_BYTES ((size_t)256 << 20)

/* Parse a file or text (text[len] must be the NUL terminator). Syntax errors give line and column; an empty or
 * truncated document is named as such. The caller owns *root (cJSON_Delete). */
int jx_parse_file(const char *file, cJSON **root, cl_err *e);
int jx_parse_text(const char *file, const char *text, size_t len, cJSON **root,
                  cl_err *e);

/* Join path and key ("layers[3]" + "kernel" -> "layers[3].kernel"). */
void jx_join(char *buf, size_t cap, const char *path, const char *key);
/* Path of an array element ("layers" + 3 -> "layers[3]"). */
void jx_index(char *buf, size_t cap, const char *path, int i);

/* Fail with the uniform message; returns CL_EINPUT. */
int jx_fail(jx *j, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The document must be an object carrying "format": expect and an integer
 * "version" in 1..max_version. */
int jx_header(jx *j, const cJSON *root, const char *expect, int max_version,
              int *version);

/* Reject members not in `allowed` (NULL-terminated): catches typos. */
int jx_only(jx *j, const cJSON *obj, const char *path, const char *const *allowed);

/* ------------------------------------------------------------ file formats
 * Every cleave file format is read the same way: parse the file (at most
 * JX_MAX_FILE_BYTES; syntax errors with line and column), check it is an
 * object tagged {"format": tag, "version": 1..max_version} holding no
 * member outside `members`, then let the format read the rest.  A format
 * describes only what is its own: */
typedef struct jx_format {
    const char *tag;            /* "cleave-model", ...; NULL for a foreign
                                   format read through the same skeleton (a
                                   Hugging Face config.json): no header and
                                   no member check, version 0               */
    int max_version;            /* the newest version this cleave reads     */
    const char *const *members; /* top-level members allowed, NULL-ended
                                   (NULL: any, for a foreign format)        */
    size_t size;                /* sizeof what `read` fills                 */
    /* Read the document (header and members already checked) into out,
     * which is zeroed; report failures through j (jx_fail). */
    int (*read)(jx *j, const cJSON *root, int version, void *out);
    /* Free what read left in out, also after read failed half-way. */
    void (*release)(void *out);
} jx_format;

/* Read `root` (from `file`, named in messages) as format f into out: out
 * is zeroed first, and on failure released and left zeroed.  ctx reaches
 * the reader as j->ctx (NULL for a format that needs nothing else). */
int jx_decode(const jx_format *f, const cJSON *root, const char *file, const void *ctx,
              void *out, cl_err *e);
/* The same from a file: jx_parse_file, then jx_decode. */
int jx_load(const jx_format *f, const char *path, const void *ctx, void *out, cl_err *e);
/* A new document of format f, holding the members every file of it starts
 * with: {"format": tag, "version": max_version} (it is written in the newest
 * version read).  The caller adds the rest and frees it (cJSON_Delete). */
cJSON *jx_doc_new(const jx_format *f);

/* Member lookup: *out is NULL when absent and optional. */
int jx_member(jx *j, const cJSON *obj, const char *path, const char *key,
              int required, const cJSON **out);

/* Typed members. Integers must be integral, finite and within [lo, hi];
 * numbers finite and within [lo, hi] (use -HUGE_VAL/HUGE_VAL for open). */
int jx_int(jx *j, const cJSON *obj, const char *path, const char *key,
           int required, int64_t lo, int64_t hi, int64_t *out);
int jx_num(jx *j, const cJSON *obj, const char *path, const char *key,
           int required, double lo, double hi, double *out);
/* Strictly positive finite number. */
int jx_pos(jx *j, const cJSON *obj, const char *path, const char *key,
           int required, double *out);
int jx_bool(jx *j, const cJSON *obj, const char *path, const char *key,
            int required, int *out);
/* String copied into buf; must be non-empty and fit in cap-1 bytes. */
int jx_str(jx *j, const cJSON *obj, const char *path, const char *key,
           int required, char *buf, size_t cap);
/* A name (of a model, layer, cluster, node, device, device type): jx_str,
 * and the characters escape.h allows (esc_name_problem), else an error
 * quoting the rule. */
int jx_name(jx *j, const cJSON *obj, const char *path, const char *key,
            int required, char *buf, size_t cap);
#define JX_NAME_HINT "a name is 1 to 63 ASCII letters, digits, spaces and _-.+:/@#%()[]=, starting with a letter, a digit or _; see docs/formats.md, Names"
/* Free text (notes): jx_str without control characters, so it prints as
 * one line on a terminal. */
int jx_text(jx *j, const cJSON *obj, const char *path, const char *key,
            int required, char *buf, size_t cap);
/* String that must be one of names[0..n-1]; *out is its index. */
int jx_enum(jx *j, const cJSON *obj, const char *path, const char *key,
            int required, const char *const *names, int n, int *out);
/* Array member with length in [min_len, max_len]; *out NULL when absent. */
int jx_array(jx *j, const cJSON *obj, const char *path, const char *key,
             int required, int min_len, int max_len, const cJSON **out);
/* Object member. */
int jx_object(jx *j, const cJSON *obj, const char *path, const char *key,
              int required, const cJSON **out);

/* Value checks for array elements (item already fetched). */
int jx_int_item(jx *j, const cJSON *item, const char *path, int64_t lo,
                int64_t hi, int64_t *out);
int jx_num_item(jx *j, const cJSON *item, const char *path, double lo,
                double hi, double *out);

/* Serialise to a file atomically (pretty-printed, trailing newline).
 * Doubles print with up to 17 significant digits, so load(write(x)) == x. */
int jx_write_file(const char *path, const cJSON *root, cl_err *e);
/* jx_write_file, then cJSON_Delete(root): what every *_save does with the
 * document its *_to_json built. */
int jx_save(const char *path, cJSON *root, cl_err *e);
/* The same text in memory (pretty 0: on one line); NULL when out of
 * memory.  The caller frees it.  Use it instead of cJSON_Print, whose
 * numbers do not always read back exactly. */
char *jx_print(const cJSON *root, int pretty);
/* Print root (pretty, exact numbers) and a newline on stdout, then delete
 * it: what every --json output does.  CL_OK, or CL_ERUN with a message on
 * stderr when out of memory. */
int jx_puts(cJSON *root);

#endif
