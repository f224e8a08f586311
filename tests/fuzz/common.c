/* common.c - checks shared by the fuzz targets (see fuzz.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "base/jsonx.h"
#include "fuzz.h"

const char *fuzz_current_input;

_Noreturn void fuzz_fail(const char *target, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fuzz %s: invariant broken%s%s: ", target,
            fuzz_current_input ? " on " : "", fuzz_current_input ? fuzz_current_input : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

char *fuzz_text(const uint8_t *data, size_t size)
{
    char *t = cl_malloc(size + 1);
    if (size) memcpy(t, data, size);
    t[size] = '\0';
    return t;
}

int fuzz_check(const char *target, const char *file, int rc, const cl_err *e)
{
    if (rc == CL_OK) {
        if (e->code != CL_OK)
            fuzz_fail(target, "returned CL_OK but recorded error %d: %s", e->code, e->msg);
        return rc;
    }
    if (rc != CL_EINPUT)
        fuzz_fail(target, "returned %d, expected CL_OK or CL_EINPUT (message: %s)", rc, e->msg);
    if (e->code != rc)
        fuzz_fail(target, "returned %d but recorded code %d", rc, e->code);
    if (!e->msg[0]) fuzz_fail(target, "CL_EINPUT with an empty message");
    if (strchr(e->msg, '\n') || strchr(e->msg, '\r'))
        fuzz_fail(target, "message is more than one line: %s", e->msg);
    size_t n = strlen(file);
    if (strncmp(e->msg, file, n) != 0 || e->msg[n] != ':')
        fuzz_fail(target, "message does not start with \"%s:\": %s", file, e->msg);
    return rc;
}

int fuzz_parse(const char *target, const uint8_t *data, size_t size, cJSON **root)
{
    char *text = fuzz_text(data, size);
    cl_err e = {0};
    *root = NULL;
    int rc = fuzz_check(target, FUZZ_FILE, jx_parse_text(FUZZ_FILE, text, size, root, &e), &e);
    free(text);
    return rc;
}

void fuzz_check_freed(const char *target, const void *const *owned, int n)
{
    for (int i = 0; i < n; i++)
        if (owned[i]) fuzz_fail(target, "a failed load left owned pointer %d set", i);
}

/* Exactly the same document: types, names, strings, numbers bit for bit
 * (== on doubles, so 0 and -0 count as equal). */
static int same_json(const cJSON *a, const cJSON *b)
{
    for (; a && b; a = a->next, b = b->next) {
        if ((a->type & 0xff) != (b->type & 0xff)) return 0;
        if ((a->string || b->string) && (!a->string || !b->string || strcmp(a->string, b->string)))
            return 0;
        if (cJSON_IsNumber(a) && a->valuedouble != b->valuedouble) return 0;
        if ((cJSON_IsString(a) || cJSON_IsRaw(a)) && strcmp(a->valuestring, b->valuestring)) return 0;
        if (!same_json(a->child, b->child)) return 0;
    }
    return !a && !b;
}

void fuzz_round_trip(const char *target, cJSON *first, fuzz_reload_fn reload, void *ctx)
{
    char *t1 = jx_print(first, 0);
    if (!t1) fuzz_fail(target, "cannot print to_json's document");
    cJSON *doc = NULL;
    cl_err e = {0};
    if (jx_parse_text("round-trip.json", t1, strlen(t1), &doc, &e) != CL_OK)
        fuzz_fail(target, "to_json printed text that does not parse: %s", e.msg);
    if (!same_json(first, doc))
        fuzz_fail(target, "printing changed a value: %.2000s", t1);
    cJSON *second = reload(doc, &e, ctx);
    cJSON_Delete(doc);
    if (!second) fuzz_fail(target, "to_json's output does not load again: %s", e.msg);
    char *t2 = jx_print(second, 0);
    if (!t2) fuzz_fail(target, "cannot print the reloaded document");
    if (!same_json(first, second) || strcmp(t1, t2) != 0)
        fuzz_fail(target, "round trip changed the document:\n  first:  %.2000s\n  second: %.2000s", t1, t2);
    cJSON_Delete(first);
    cJSON_Delete(second);
    free(t1);
    free(t2);
}
