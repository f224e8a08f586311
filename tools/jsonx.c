/* jsonx.c - checked JSON access (see jsonx.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "escape.h"
#include "jsonx.h"

static void where(const char *text, const char *at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *p = text; p < at && *p; p++) {
        if (*p == '\n') { (*line)++; *col = 1; }
        else (*col)++;
    }
}

int jx_parse_text(const char *file, const char *text, size_t len, cJSON **root,
                  cl_err *e)
{
    *root = NULL;
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' ||
                       text[i] == '\r'))
        i++;
    if (i == len)
        return cl_fail(e, CL_EINPUT, "%s: empty file (hint: expected a JSON object)", file);
    if (memchr(text, '\0', len))
        return cl_fail(e, CL_EINPUT, "%s: contains a NUL byte (hint: not a JSON text file)", file);
    /* text[len] is the NUL every caller guarantees; cJSON's strict mode
     * (nothing but white space after the value) wants it inside the length */
    const char *end = NULL;
    cJSON *r = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
    if (!r) {
        const char *at = end ? end : cJSON_GetErrorPtr();
        if (!at || at >= text + len)
            return cl_fail(e, CL_EINPUT,
                           "%s: truncated JSON: the document ends early (hint: was the file cut short?)",
                           file);
        int line, col;
        where(text, at, &line, &col);
        return cl_fail(e, CL_EINPUT, "%s:%d:%d: JSON syntax error near '%.12s' (hint: check commas, quotes and brackets; NaN and Infinity are not JSON)",
                       file, line, col, at);
    }
    *root = r;
    return CL_OK;
}

int jx_parse_file(const char *file, cJSON **root, cl_err *e)
{
    char *text;
    size_t len;
    *root = NULL;
    int rc = cl_read_file(file, JX_MAX_FILE_BYTES, &text, &len, e);
    if (rc) return rc;
    rc = jx_parse_text(file, text, len, root, e);
    free(text);
    return rc;
}

void jx_join(char *buf, size_t cap, const char *path, const char *key)
{
    if (!path || !*path) snprintf(buf, cap, "%s", key);
    else snprintf(buf, cap, "%s.%s", path, key);
}

void jx_index(char *buf, size_t cap, const char *path, int i)
{
    snprintf(buf, cap, "%s[%d]", path && *path ? path : "", i);
}

int jx_fail(jx *j, const char *path, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (path && *path) return cl_fail(j->e, CL_EINPUT, "%s: %s: %s", j->file, path, what);
    return cl_fail(j->e, CL_EINPUT, "%s: %s", j->file, what);
}

static const char *type_name(const cJSON *v)
{
    if (!v) return "nothing";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "an unknown value";
}

int jx_header(jx *j, const cJSON *root, const char *expect, int max_version,
              int *version)
{
    if (!cJSON_IsObject(root))
        return jx_fail(j, "", "expected a JSON object at the top level, got %s (hint: a %s file starts with {\"format\": \"%s\", ...})",
                       type_name(root), expect, expect);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!f)
        return jx_fail(j, "format", "missing (hint: add \"format\": \"%s\")", expect);
    if (!cJSON_IsString(f) || strcmp(f->valuestring, expect) != 0)
        return jx_fail(j, "format", "expected \"%s\", got %s%s%s (hint: is this the right kind of file?)",
                       expect, cJSON_IsString(f) ? "\"" : type_name(f),
                       cJSON_IsString(f) ? f->valuestring : "", cJSON_IsString(f) ? "\"" : "");
    int64_t v = 0;
    int rc = jx_int(j, root, "", "version", 1, 1, INT32_MAX, &v);
    if (rc) return rc;
    if (v > max_version)
        return jx_fail(j, "version", "%lld is newer than this cleave reads (up to %d) (hint: upgrade cleave, or write the file with the older version)",
                       (long long)v, max_version);
    if (version) *version = (int)v;
    return CL_OK;
}

int jx_only(jx *j, const cJSON *obj, const char *path, const char *const *allowed)
{
    for (const cJSON *it = obj ? obj->child : NULL; it; it = it->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (it->string && strcmp(it->string, *a) == 0) { ok = 1; break; }
        if (!ok) {
            char list[512] = "", p[256];
            size_t n = 0;
            for (const char *const *a = allowed; *a && n < sizeof list - 40; a++)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", *a);
            jx_join(p, sizeof p, path, it->string ? it->string : "?");
            return jx_fail(j, p, "unknown member (hint: allowed here: %s)", list);
        }
        /* a repeated key is almost always a copy-paste mistake */
        for (const cJSON *o = obj->child; o != it; o = o->next)
            if (o->string && it->string && strcmp(o->string, it->string) == 0) {
                char p[256];
                jx_join(p, sizeof p, path, it->string);
                return jx_fail(j, p, "appears twice (hint: keep one)");
            }
    }
    return CL_OK;
}

int jx_member(jx *j, const cJSON *obj, const char *path, const char *key,
              int required, const cJSON **out)
{
    *out = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!*out && required) {
        char p[256];
        jx_join(p, sizeof p, path, key);
        return jx_fail(j, p, "missing (hint: this member is required)");
    }
    return CL_OK;
}

int jx_int_item(jx *j, const cJSON *v, const char *p, int64_t lo, int64_t hi,
                int64_t *out)
{
    if (!cJSON_IsNumber(v))
        return jx_fail(j, p, "expected an integer, got %s", type_name(v));
    double d = v->valuedouble;
    if (!isfinite(d))
        return jx_fail(j, p, "expected a finite integer (hint: the value overflows a double)");
    if (d != floor(d))
        return jx_fail(j, p, "expected an integer, got %.17g", d);
    /* 2^53 bounds what a double holds exactly; larger "integers" are rounded */
    if (d < (double)lo || d > (double)hi || fabs(d) > 9007199254740992.0)
        return jx_fail(j, p, "%.17g is out of range (hint: expected %lld to %lld)", d,
                       (long long)lo, (long long)hi);
    *out = (int64_t)d;
    return CL_OK;
}

int jx_int(jx *j, const cJSON *obj, const char *path, const char *key,
           int required, int64_t lo, int64_t hi, int64_t *out)
{
    const cJSON *v;
    int rc = jx_member(j, obj, path, key, required, &v);
    if (rc || !v) return rc;
    char p[256];
    jx_join(p, sizeof p, path, key);
    return jx_int_item(j, v, p, lo, hi, out);
}

int jx_num_item(jx *j, const cJSON *v, const char *p, double lo, double hi,
                double *out)
{
    if (!cJSON_IsNumber(v))
        return jx_fail(j, p, "expected a number, got %s", type_name(v));
    double d = v->valuedouble;
    if (!isfinite(d))
        return jx_fail(j, p, "expected a finite number (hint: the value overflows a double)");
    if (d < lo || d > hi)
        return jx_fail(j, p, "%.17g is out of range (hint: expected %g to %g)", d, lo, hi);
    *out = d;
    return CL_OK;
}

int jx_num(jx *j, const cJSON *obj, const char *path, const char *key,
           int required, double lo, double hi, double *out)
{
    const cJSON *v;
    int rc = jx_member(j, obj, path, key, required, &v);
    if (rc || !v) return rc;
    char p[256];
    jx_join(p, sizeof p, path, key);
    return jx_num_item(j, v, p, lo, hi, out);
}

int jx_pos(jx *j, const cJSON *obj, const char *path, const char *key,
           int required, double *out)
{
    const cJSON *v;
    int rc = jx_member(j, obj, path, key, required, &v);
    if (rc || !v) return rc;
    char p[256];
    jx_join(p, sizeof p, path, key);
    double d = 0;
    rc = jx_num_item(j, v, p, -HUGE_VAL, HUGE_VAL, &d);
    if (rc) return rc;
    if (!(d > 0))
        return jx_fail(j, p, "expected a positive number, got %.17g", d);
    *out = d;
    return CL_OK;
}

int jx_bool(jx *j, const cJSON *obj, const char *path, const char *key,
            int required, int *out)
{
    const cJSON *v;
    int rc = jx_member(j, obj, path, key, required, &v);
    if (rc || !v) return rc;
    if (!cJSON_IsBool(v)) {
        char p[256];
        jx_join(p, sizeof p, path, key);
        return jx_fail(j, p, "expected true or false, got %s", type_name(v));
    }
    *out = cJSON_IsTrue(v);
    return CL_OK;
}

int jx_str(jx *j, const cJSON *obj, const char *path, const char *key,
           int required, char *buf, size_t cap)
{
    const cJSON *v;
    int rc = jx_member(j, obj, path, key, required, &v);
    if (rc || !v) return rc;
    char p[256];
    jx_join(p, sizeof p, path, key);
    if (!cJSON_IsString(v))
        return jx_fail(j, p, "expected a string, got %s", type_name(v));
    size_t n = strlen(v->valuestring);
    if (n == 0) return jx_fail(j, p, "empty string (hint: give a name)");
    if (n >= cap)
        return jx_fail(j, p, "string longer than %zu characters (hint: shorten it)", cap - 1);
    memcpy(buf, v->valuestring, n + 1);
    return CL_OK;
}

int jx_name(jx *j, const cJSON *obj, const char *path, const char *key,
            int required, char *buf, size_t cap)
{
    /* too long is one more way to break the names rule: say the rule */
    const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    if (cJSON_IsString(v) && strlen(v->valuestring) >= cap) {
        char p[256];
        jx_join(p, sizeof p, path, key);
        return jx_fail(j, p, "the name \"%.40s...\" is longer than %zu characters (hint: %s)", v->valuestring,
                       cap - 1, JX_NAME_HINT);
    }
    int rc = jx_str(j, obj, path, key, required, buf, cap);
    if (rc || !buf[0]) return rc;
    const char *bad = esc_name_problem(buf);
    if (!bad) return CL_OK;
    char p[256];
    jx_join(p, sizeof p, path, key);
    return jx_fail(j, p, "the name \"%.40s%s\" %s (hint: %s)", buf, strlen(buf) > 40 ? "..." : "", bad,
                   JX_NAME_HINT);
}

int jx_text(jx *j, const cJSON *obj, const char *path, const char *key,
            int required, char *buf, size_t cap)
{
    int rc = jx_str(j, obj, path, key, required, buf, cap);
    if (rc || !buf[0]) return rc;
    for (size_t i = 0; buf[i]; i++) {
        unsigned char c = (unsigned char)buf[i], d = (unsigned char)buf[i + 1];
        if (c < 0x20 || c == 0x7f || (c == 0xc2 && d >= 0x80 && d <= 0x9f)) {
            char p[256];
            jx_join(p, sizeof p, path, key);
            return jx_fail(j, p, "control character 0x%02x at byte %zu (hint: one line of printable text)",
                           c == 0xc2 ? d : c, i + 1);
        }
    }
    return CL_OK;
}

int jx_enum(jx *j, const cJSON *obj, const char *path, const char *key,
            int required, const char *const *names, int n, int *out)
{
    char s[64] = "";
    int rc = jx_str(j, obj, path, key, required, s, sizeof s);
    if (rc || !s[0]) return rc;
    for (int i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], s) == 0) { *out = i; return CL_OK; }
    char list[512] = "", p[256];
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof list - 40; i++)
        if (names[i])
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", names[i]);
    jx_join(p, sizeof p, path, key);
    return jx_fail(j, p, "unknown value \"%s\" (hint: one of %s)", s, list);
}

int jx_array(jx *j, const cJSON *obj, const char *path, const char *key,
             int required, int min_len, int max_len, const cJSON **out)
{
    const cJSON *v;
    *out = NULL;
    int rc = jx_member(j, obj, path, key, required, &v);
    if (rc || !v) return rc;
    char p[256];
    jx_join(p, sizeof p, path, key);
    if (!cJSON_IsArray(v))
        return jx_fail(j, p, "expected an array, got %s", type_name(v));
    int n = cJSON_GetArraySize(v);
    if (n < min_len)
        return jx_fail(j, p, "has %d element%s, expected at least %d", n, n == 1 ? "" : "s", min_len);
    if (n > max_len)
        return jx_fail(j, p, "has %d elements, more than the limit of %d", n, max_len);
    *out = v;
    return CL_OK;
}

int jx_object(jx *j, const cJSON *obj, const char *path, const char *key,
              int required, const cJSON **out)
{
    const cJSON *v;
    *out = NULL;
    int rc = jx_member(j, obj, path, key, required, &v);
    if (rc || !v) return rc;
    if (!cJSON_IsObject(v)) {
        char p[256];
        jx_join(p, sizeof p, path, key);
        return jx_fail(j, p, "expected an object, got %s", type_name(v));
    }
    *out = v;
    return CL_OK;
}

/* cJSON 1.7.15 prints a number with 15 significant digits whenever those
 * come within a relative DBL_EPSILON of it, which drops the last bits
 * (0.1 + 0.2 prints as 0.3) or overflows (DBL_MAX prints as a text that
 * reads back as infinity).  Each finite number in the copy becomes a raw
 * item holding the shortest of %.15g, %.16g, %.17g that reads back exactly. */
static int exact_numbers(cJSON *n)
{
    for (; n; n = n->next) {
        if (cJSON_IsNumber(n) && isfinite(n->valuedouble)) {
            char buf[32] = "0"; /* -0 too, as cJSON prints it: it equals 0 */
            for (int prec = 15; prec <= 17 && n->valuedouble != 0; prec++) {
                snprintf(buf, sizeof buf, "%.*g", prec, n->valuedouble);
                if (strtod(buf, NULL) == n->valuedouble) break;
            }
            char *raw = cJSON_malloc(strlen(buf) + 1);
            if (!raw) return -1;
            strcpy(raw, buf);
            n->type = cJSON_Raw;
            n->valuestring = raw; /* cJSON_Delete frees it */
        }
        if (n->child && exact_numbers(n->child)) return -1;
    }
    return 0;
}

char *jx_print(const cJSON *root, int pretty)
{
    cJSON *copy = cJSON_Duplicate(root, 1);
    if (!copy) return NULL;
    char *text = NULL;
    if (exact_numbers(copy) == 0) text = pretty ? cJSON_Print(copy) : cJSON_PrintUnformatted(copy);
    cJSON_Delete(copy);
    return text;
}

int jx_puts(cJSON *root)
{
    char *text = jx_print(root, 1);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "cleave: cannot serialise JSON (out of memory)\n");
        return CL_ERUN;
    }
    puts(text);
    free(text);
    return CL_OK;
}

int jx_write_file(const char *path, const cJSON *root, cl_err *e)
{
    char *text = jx_print(root, 1);
    if (!text) return cl_fail(e, CL_ERUN, "%s: cannot serialise JSON", path);
    size_t n = strlen(text);
    text[n] = '\n'; /* cJSON_Print's buffer has room: replace NUL, write n+1 */
    int rc = cl_write_file(path, text, n + 1, e);
    free(text);
    return rc;
}
