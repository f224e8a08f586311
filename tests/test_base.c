/* test_base.c - the shared base: checked JSON access and atomic files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fileio.h"
#include "base/jsonx.h"
#include "base/measure.h"
#include "test.h"

/* Parse `text` and fetch member `key` as an integer in [lo, hi]. */
static int get_int(const char *text, const char *key, int64_t lo, int64_t hi,
                   int64_t *v, cl_err *e)
{
    cJSON *root;
    int rc = jx_parse_text("t.json", text, strlen(text), &root, e);
    if (rc) return rc;
    jx j = {.file = "t.json", .e = e};
    rc = jx_int(&j, root, "a", key, 1, lo, hi, v);
    cJSON_Delete(root);
    return rc;
}

static void test_parse_errors(void)
{
    cl_err e = {0};
    cJSON *r;
    CU_ASSERT_EQUAL(jx_parse_text("f.json", "", 0, &r, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "empty file"));
    cl_err_clear(&e);
    const char *trunc = "{\"a\": [1, 2";
    CU_ASSERT_EQUAL(jx_parse_text("f.json", trunc, strlen(trunc), &r, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "truncated"));
    cl_err_clear(&e);
    const char *bad = "{\"a\": 1,\n \"b\": NaN}";
    CU_ASSERT_EQUAL(jx_parse_text("f.json", bad, strlen(bad), &r, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "f.json:2:"));
}

static void test_int_checks(void)
{
    cl_err e = {0};
    int64_t v = 0;
    CU_ASSERT_EQUAL(get_int("{\"k\": 12}", "k", 1, 100, &v, &e), CL_OK);
    CU_ASSERT_EQUAL(v, 12);
    CU_ASSERT_EQUAL(get_int("{\"k\": -1}", "k", 1, 100, &v, &e), CL_EINPUT);
    CU_ASSERT_STRING_EQUAL(e.msg, "t.json: a.k: -1 is out of range (hint: expected 1 to 100)");
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(get_int("{\"k\": 2.5}", "k", 1, 100, &v, &e), CL_EINPUT);
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(get_int("{\"k\": 1e400}", "k", 1, 100, &v, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "finite"));
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(get_int("{\"k\": \"3\"}", "k", 1, 100, &v, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "got a string"));
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(get_int("{\"x\": 3}", "k", 1, 100, &v, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "a.k: missing"));
    cl_err_clear(&e);
    /* 2^53 + 2 is not exactly representable as a user-given integer */
    CU_ASSERT_EQUAL(get_int("{\"k\": 9007199254740994}", "k", 0, INT64_MAX, &v, &e), CL_EINPUT);
}

static void test_only_and_header(void)
{
    cl_err e = {0};
    cJSON *r;
    const char *t = "{\"format\": \"cleave-x\", \"version\": 1, \"nmae\": 3}";
    CU_ASSERT_EQUAL(jx_parse_text("f.json", t, strlen(t), &r, &e), CL_OK);
    jx j = {.file = "f.json", .e = &e};
    int ver = 0;
    CU_ASSERT_EQUAL(jx_header(&j, r, "cleave-x", 1, &ver), CL_OK);
    CU_ASSERT_EQUAL(ver, 1);
    static const char *const allowed[] = {"format", "version", "name", NULL};
    CU_ASSERT_EQUAL(jx_only(&j, r, "", allowed), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "f.json: nmae: unknown member"));
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(jx_header(&j, r, "cleave-y", 1, &ver), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "expected \"cleave-y\""));
    cJSON_Delete(r);
    cl_err_clear(&e);
    const char *dup = "{\"name\": 1, \"name\": 2}";
    CU_ASSERT_EQUAL(jx_parse_text("f.json", dup, strlen(dup), &r, &e), CL_OK);
    CU_ASSERT_EQUAL(jx_only(&j, r, "", allowed), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "appears twice"));
    cJSON_Delete(r);
}

static void test_atomic_write(void)
{
    char *dir = test_tmpdir();
    char path[512], tmp[600];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    cl_err e = {0};
    CU_ASSERT_EQUAL(cl_write_file(path, "old\n", 4, &e), CL_OK);
    /* an aborted write leaves the old content and no temporary behind */
    cl_out o;
    CU_ASSERT_EQUAL(cl_out_open(&o, path, &e), CL_OK);
    fputs("half", o.f);
    snprintf(tmp, sizeof tmp, "%s", o.tmp);
    CU_ASSERT_EQUAL(access(tmp, F_OK), 0);
    cl_out_abort(&o);
    CU_ASSERT_NOT_EQUAL(access(tmp, F_OK), 0);
    char *s = NULL;
    CU_ASSERT_EQUAL(cl_read_file(path, 1024, &s, NULL, &e), CL_OK);
    CU_ASSERT_STRING_EQUAL(s, "old\n");
    free(s);
    /* a committed write replaces it */
    CU_ASSERT_EQUAL(cl_write_file(path, "new\n", 4, &e), CL_OK);
    CU_ASSERT_EQUAL(cl_read_file(path, 1024, &s, NULL, &e), CL_OK);
    CU_ASSERT_STRING_EQUAL(s, "new\n");
    free(s);
    /* a folder that does not exist is an input error naming the file */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.json", dir);
    CU_ASSERT_EQUAL(cl_write_file(bad, "x", 1, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "x.json"));
    remove(path);
    rmdir(dir);
    free(dir);
}

static void spin_cpu(double s)
{
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    do clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    while ((double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec) < s);
}

/* The load meter (validate's and bench pipe's "others' load"): 0.4 s of
 * CPU spent by a process that is not ours (a grandchild, never waited for)
 * counts as other load, and 0.4 s spent by ourselves counts as ours; on a
 * loaded machine other load only adds, so lower bounds are what can be
 * asserted (less 0.1 s for /proc/stat's ticks). */
static void test_load_meter(void)
{
    cl_loadmeter lm;
    cl_load_start(&lm);
    int fd[2];
    CU_ASSERT_FATAL(pipe(fd) == 0);
    fflush(NULL);
    pid_t c = fork();
    CU_ASSERT_FATAL(c >= 0);
    if (c == 0) {
        if (fork() == 0) { /* the grandchild: spin, then say so */
            spin_cpu(0.4);
            ssize_t w = write(fd[1], "x", 1);
            _exit(w == 1 ? 0 : 1);
        }
        _exit(0);
    }
    waitpid(c, NULL, 0);
    close(fd[1]);
    char x;
    CU_ASSERT_EQUAL(read(fd[0], &x, 1), 1);
    close(fd[0]);
    spin_cpu(0.4);
    double others_s = 0, share = cl_load_others(&lm, cl_load_ours_s(&lm), &others_s);
    CU_ASSERT(others_s >= 0.3);
    CU_ASSERT(cl_load_ours_s(&lm) >= 0.39);
    CU_ASSERT(share > 0 && share <= 1);
}

TEST_SUITE(base)
{
    test_add_suite("base");
    test_add("parse errors name line and cause", test_parse_errors);
    test_add("integer members are range- and type-checked", test_int_checks);
    test_add("unknown, duplicate members and format header", test_only_and_header);
    test_add("atomic writes never leave partial files", test_atomic_write);
    test_add("load meter: a stranger's CPU is others', ours is ours", test_load_meter);
}
