/* fuzz.h - what every fuzz target includes (docs/testing.md, "Fuzzing").
 *
 * A target is one file tests/fuzz/fuzz_<name>.c holding
 *
 *     FUZZ_TARGET(name) { ... return rc; }
 *
 * which defines `int fuzz_<name>(const uint8_t *data, size_t size)` (its
 * static helpers are named <name>_..., see targets.c): feed
 * the bytes to one loader and return what it returned (CL_OK or CL_EINPUT).
 * Anything else is a bug the target reports through fuzz_fail(), which
 * aborts, so libFuzzer records the input and the regression suite stops.
 *
 * The same file is compiled twice: by `make fuzz` with CLEAVE_LIBFUZZER
 * defined, where FUZZ_TARGET also emits libFuzzer's entry point, and into
 * the CUnit runner through tests/fuzz/targets.c, where tests/test_fuzz_regress.c
 * replays every file under tests/fuzz/regress/<name>/ and tests/fuzz/corpus/<name>/.
 */
#ifndef CL_FUZZ_H
#define CL_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

struct cJSON;

/* The file name every target hands its loader; messages must start with it. */
#define FUZZ_FILE "fuzz-input.json"
#define FUZZ_TEXT_FILE "fuzz-input.txt"

/* Input being replayed, named in fuzz_fail's report (NULL under libFuzzer,
 * which names the crashing input itself). */
extern const char *fuzz_current_input;

/* Report a broken invariant on stderr and abort(). */
_Noreturn void fuzz_fail(const char *target, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A NUL-terminated copy of the input (loaders want text[size] == '\0');
 * the caller frees. */
char *fuzz_text(const uint8_t *data, size_t size);

/* The loader contract: rc is CL_OK, or CL_EINPUT with a one-line non-empty
 * message starting with "<file>:"; e->code must agree with rc.  Fails the
 * target otherwise.  Returns rc. */
int fuzz_check(const char *target, const char *file, int rc, const cl_err *e);

/* The input as JSON: jx_parse_text of fuzz_text(data, size) named
 * FUZZ_FILE, under the loader contract (fuzz_check); on CL_OK *root is the
 * document (the caller deletes it). */
int fuzz_parse(const char *target, const uint8_t *data, size_t size, struct cJSON **root);

/* A failed loader leaves nothing to free: every owned pointer is NULL. */
void fuzz_check_freed(const char *target, const void *const *owned, int n);

/* Round trip: `first` is to_json of a loaded value; print it (jx_print,
 * what saving uses), parse the text back and hand the document to reload(),
 * which must return CL_OK and the to_json of what it loaded (caller-owned,
 * NULL on failure).  The parsed text must equal `first` exactly (numbers
 * bit for bit), and so must the reloaded document and its printed text.
 * Takes ownership of first. */
typedef struct cJSON *(*fuzz_reload_fn)(const struct cJSON *doc, cl_err *e, void *ctx);
void fuzz_round_trip(const char *target, struct cJSON *first, fuzz_reload_fn reload,
                     void *ctx);

typedef int (*fuzz_fn)(const uint8_t *data, size_t size);

#ifdef CLEAVE_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
#define FUZZ_ENTRY_(name)                                                      \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)               \
    {                                                                          \
        (void)fuzz_##name(data, size);                                         \
        return 0;                                                              \
    }
#else
#define FUZZ_ENTRY_(name)
#endif

#define FUZZ_TARGET(name)                                                      \
    int fuzz_##name(const uint8_t *data, size_t size);                        \
    FUZZ_ENTRY_(name)                                                          \
    int fuzz_##name(const uint8_t *data, size_t size)

#endif
