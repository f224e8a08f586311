/* test.h - what every CUnit suite file includes.
 *
 * A suite file defines `TEST_SUITE(name) { ... }` at the start of a line; the
 * Makefile collects those into the runner, so suites register themselves by
 * existing.  Inside, call test_add_suite() then test_add() for each test.
 *
 * Tests run from the repository root: fixtures are tests/data/..., the
 * shipped files models/..., profiles/..., and ../shared/data/... .
 */
#ifndef CL_TEST_H
#define CL_TEST_H

#include <CUnit/CUnit.h>
#include <stddef.h>

#define TEST_SUITE(name) void suite_##name(void); void suite_##name(void)

/* Adds a suite and makes it current; aborts on CUnit framework errors. */
void test_add_suite(const char *name);
void test_add(const char *name, void (*fn)(void));

/* Run the cleave binary (path from CLEAVE_BIN, default build/cleave; a
 * name without a slash is looked up on PATH) with
 * args split into words as a shell would ('...' and "..." quote; shell
 * syntax beyond that is refused: -1), started directly, no shell; stdin
 * /dev/null, stdout and stderr captured (caller frees); returns the exit
 * status (128+signal if killed, -1 if it could not run). */
int test_run_cli(const char *args, char **out, char **err);
/* A command the tool must refuse as bad input: exit status 2, `msg` in a
 * one-line stderr, nothing on stdout (CUnit asserts, at the caller's
 * test). */
void test_cli_refused(const char *args, const char *msg);
/* test_run_cli with setup(ctx) called in the child just before it starts
 * the binary (limits, signal dispositions, environment). */
int test_run_cli_with(const char *args, void (*setup)(void *), void *ctx, char **out, char **err);
/* 1 when an executable called name is on PATH (what `command -v` says,
 * without a shell). */
int test_which(const char *name);
/* test_run_cli with CLEAVE_TEST_INTERRUPT_AFTER=after (base/progress.h: a
 * SIGINT right after the after-th work item, as if Ctrl-C), unset again. */
int test_run_interrupted(const char *args, int after, char **out, char **err);

/* A file's whole text (at most 256 MiB), or NULL when it cannot be read;
 * caller frees. */
char *test_slurp(const char *path);
/* A fresh empty folder under /tmp for this test's output files; caller frees. */
char *test_tmpdir(void);
/* test_tmpdir, and the paths of files in it: after `cap` (each buffer's
 * size), pairs of a file name and the buffer that gets "<folder>/<name>",
 * ended by NULL.  Returns the folder (caller frees, or test_rmtree). */
char *test_scratch(size_t cap, ...);
/* Run CLEAVE_BIN with argv (argv[0] included, NULL-terminated) with its
 * stderr on a pseudo-terminal and stdout on /dev/null; what the terminal
 * showed goes into buf (at most cap - 1 bytes, NUL-terminated).  Returns the
 * exit status, 128 + signal, or -1 when no terminal could be made. */
int test_run_on_tty(char *const argv[], char *buf, size_t cap);
/* Remove a test_tmpdir folder with everything in it (no shell), and free
 * the name; 0, or -1 when something could not be removed. */
int test_rmtree(char *dir);
/* Path to a file in the shared data folder (../shared/data/...), or NULL if
 * that folder is absent (tests using it then report it as a failure). */
const char *test_shared(const char *rel, char *buf, size_t cap);
/* Import ../shared/data/pipedream/<name>.txt (batch from the file) into
 * m and pf; nonzero, with the message on stderr, when it fails. */
struct model;
struct prof;
int test_pipedream(const char *name, struct model *m, struct prof *pf);

/* Relative difference |a - b| / max(|a|, |b|, tiny). */
double test_rel(double a, double b);

/* How many random instances (or cases) a broad property test runs: `plain`
 * in `make test`, `sanitized` in the AddressSanitizer and UBSan builds (make
 * asan, ubsan, tsan compile with -DCLEAVE_SANITIZED), a fifth of that (at
 * least one) under ThreadSanitizer.  Sanitizer builds run 5-15x slower (TSan
 * up to 45x on the planner) and look for memory, undefined-behaviour and
 * data-race faults, which a few instances through every code path find;
 * the statistical breadth of a property is the plain run's job, and TSan
 * sees races only between threads, which the planner, the simulator and
 * the loaders never start.  Without this, CI's sanitizer runs alone took
 * over an hour (docs/testing.md). */
#if defined(CLEAVE_SANITIZED) && defined(__SANITIZE_THREAD__)
/* TEST_COVERAGE: whether the build runs enough instances for a test to
 * require that a rare path fired at all (ThreadSanitizer's handful are for
 * races; the plain and the other sanitized runs require it). */
#define TEST_COVERAGE 0
#define TEST_BREADTH(plain, sanitized) ((sanitized) >= 5 ? (sanitized) / 5 : 1)
#elif defined(CLEAVE_SANITIZED)
#define TEST_COVERAGE 1
#define TEST_BREADTH(plain, sanitized) (sanitized)
#else
#define TEST_COVERAGE 1
#define TEST_BREADTH(plain, sanitized) (plain)
#endif

#endif
