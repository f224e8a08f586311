/* test_layering.c - tools/layering.sh, the check that every #include goes down
 * the layer table (README "Layout"): it passes on this tree, and on a small
 * tree written here it finds exactly the includes that go up or sideways. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/spawn.h"
#include "test.h"

/* Write text into dir/rel, making its folders. */
static void put(const char *dir, const char *rel, const char *text)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    for (char *s = p + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
        *s = 0;
        mkdir(p, 0700);
        *s = '/';
    }
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* Run the check on root; its exit status, its output in *out (caller frees). */
static int check(const char *root, const char *outfile, char **out)
{
    char *argv[] = {"sh", "tools/layering.sh", (char *)root, NULL};
    int st = cl_spawn_wait(argv, outfile);
    *out = test_slurp(outfile);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_this_tree(void)
{
    char *dir = test_tmpdir(), of[4096], *out;
    snprintf(of, sizeof of, "%s/out", dir);
    CU_ASSERT_EQUAL(check(".", of, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "every include goes down"));
    free(out);
    test_rmtree(dir);
}

static void test_finds_each_violation(void)
{
    char root[4096], of[4096], *out;
    char *dir = test_scratch(sizeof root, "tree", root, "out", of, NULL);
    CU_ASSERT_EQUAL_FATAL(mkdir(root, 0700), 0);
    /* allowed: down one row, down several rows, same folder */
    put(root, "base/status.h", "/* nothing */\n");
    put(root, "models/model.h", "#include \"base/status.h\"\n");
    put(root, "core/plan.h", "#include \"models/model.h\"\n#include \"base/status.h\"\n");
    put(root, "planner/cost.h", "#include \"core/plan.h\"\n");
    put(root, "planner/search.c", "#include \"cost.h\"\n#include <stdio.h>\n");
    put(root, "sim/sim.h", "#include \"core/plan.h\"\n");
    CU_ASSERT_EQUAL(check(root, of, &out), 0);
    free(out);

    /* up (base -> tools), sideways on one row (sim -> exec/nn), up from a
     * subfolder (exec/nn -> planner), and a relative include that is fine by
     * rank but hides its folder */
    put(root, "tools/cli.h", "/* nothing */\n");
    put(root, "exec/nn/net.h", "#include \"planner/cost.h\"\n");
    put(root, "base/progress.c", "#include <stdio.h>\n#include \"tools/cli.h\"\n");
    put(root, "sim/event.c", "#include \"exec/nn/net.h\"\n");
    put(root, "planner/dag.c", "#include \"../sim/sim.h\"\n");
    CU_ASSERT_EQUAL(check(root, of, &out), 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "base/progress.c:2: base (row 0) includes tools/cli.h"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "sim/event.c:1: sim (row 4) includes exec/nn/net.h of exec/nn (row 4)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "exec/nn/net.h:1: exec/nn (row 4) includes planner/cost.h"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "planner/dag.c:1: #include \"../sim/sim.h\": name the header"));
    int lines = 0;
    for (const char *s = out; (s = strchr(s, '\n')); s++) lines++;
    CU_ASSERT_EQUAL(lines, 4); /* nothing else reported */
    free(out);
    test_rmtree(dir);
}

TEST_SUITE(layering)
{
    test_add_suite("layering");
    test_add("this tree: every include goes down", test_this_tree);
    test_add("a planted tree: each kind of violation found, nothing else", test_finds_each_violation);
}
