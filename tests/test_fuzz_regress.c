/* test_fuzz_regress.c - replay the fuzz targets' inputs in the normal build.
 *
 * Every file under tests/fuzz/regress/<target>/ (inputs that once crashed
 * or broke a loader's contract) and tests/fuzz/corpus/<target>/ (the seed
 * corpora) goes through the same fuzz_<target>() function libFuzzer runs
 * (tests/fuzz/), so a fixed crash stays fixed under make test, asan and
 * ubsan.  The targets abort on a broken contract; on top of that each
 * file's name states the expected outcome, independent of the loader: a
 * name starting with "bad-" must be rejected (CL_EINPUT), any other must
 * load (CL_OK).  See docs/testing.md, "Fuzzing". */
#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "tests/fuzz/targets.c"
#include "test.h"

#define N_TARGETS ((int)(sizeof fuzz_targets / sizeof fuzz_targets[0]))

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entry names of a folder (no dot files); *n of them; caller frees
 * each and the array.  NULL when the folder does not exist. */
static char **list_dir(const char *dir, int *n)
{
    DIR *d = opendir(dir);
    *n = 0;
    if (!d) return NULL;
    int cap = 16;
    char **names = cl_malloc((size_t)cap * sizeof *names);
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        if (*n == cap) names = cl_realloc(names, (size_t)(cap *= 2) * sizeof *names);
        names[(*n)++] = cl_strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)*n, sizeof *names, cmp_str);
    return names;
}

static void free_list(char **names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

static const fuzz_target *find_target(const char *name)
{
    for (int t = 0; t < N_TARGETS; t++)
        if (strcmp(fuzz_targets[t].name, name) == 0) return &fuzz_targets[t];
    return NULL;
}

/* Replay every file of root/<target>/; returns how many were replayed. */
static int replay_tree(const char *root)
{
    int nt, total = 0;
    char **targets = list_dir(root, &nt);
    for (int t = 0; t < nt; t++) {
        char dir[512];
        struct stat st;
        snprintf(dir, sizeof dir, "%s/%s", root, targets[t]);
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) continue;  /* README */
        const fuzz_target *ft = find_target(targets[t]);
        if (!ft) {
            fprintf(stderr, "%s/%s: no fuzz target of that name (hint: tests/fuzz/targets.c lists them)\n",
                    root, targets[t]);
            CU_FAIL("a folder names an unknown fuzz target");
            continue;
        }
        int nf;
        char **files = list_dir(dir, &nf);
        for (int f = 0; f < nf; f++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, files[f]);
            char *data = NULL;
            size_t len = 0;
            cl_err e = {0};
            if (cl_read_file(path, (size_t)16 << 20, &data, &len, &e) != CL_OK) {
                fprintf(stderr, "%s\n", e.msg);
                CU_FAIL("cannot read a fuzz input");
                continue;
            }
            fuzz_current_input = path;
            int rc = ft->fn((const uint8_t *)data, len);
            fuzz_current_input = NULL;
            free(data);
            int want = strncmp(files[f], "bad-", 4) == 0 ? CL_EINPUT : CL_OK;
            if (rc != want)
                fprintf(stderr, "%s: loader returned %d, the file name says %d\n", path, rc, want);
            CU_ASSERT_EQUAL(rc, want);
            total++;
        }
        free_list(files, nf);
    }
    free_list(targets, nt);
    return total;
}

static void test_regress(void)
{
    /* an empty folder is fine (nothing has crashed yet), a missing one is not */
    int n;
    char **l = list_dir("tests/fuzz/regress", &n);
    CU_ASSERT_PTR_NOT_NULL(l);
    free_list(l, n);
    replay_tree("tests/fuzz/regress");
}

/* Each target has seeds, among them at least one input that loads and one
 * that is rejected, and all give the outcome their names state. */
static void test_corpus(void)
{
    for (int t = 0; t < N_TARGETS; t++) {
        char dir[256];
        snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", fuzz_targets[t].name);
        int nf, good = 0, bad = 0;
        char **files = list_dir(dir, &nf);
        for (int f = 0; f < nf; f++) {
            if (strncmp(files[f], "bad-", 4) == 0) bad++;
            else good++;
        }
        free_list(files, nf);
        if (!good || !bad) fprintf(stderr, "%s: needs good and bad- seeds\n", dir);
        CU_ASSERT(good > 0 && bad > 0);
    }
    CU_ASSERT(replay_tree("tests/fuzz/corpus") > 0);
}

TEST_SUITE(fuzz_regress)
{
    test_add_suite("fuzz_regress");
    test_add("corpus", test_corpus);
    test_add("regress", test_regress);
}
