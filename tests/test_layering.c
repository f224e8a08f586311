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

/* The planted tree: a file, its text, and the line the check must report for
 * it (NULL: none).  Allowed: down one row, down several rows, the same
 * folder.  Refused: up (base -> tools), sideways on one row (sim ->
 * exec/nn), up from a subfolder (exec/nn -> planner), and a relative
 * include that is fine by rank but hides its folder. */
static const struct planted { const char *path, *text, *report; } tree[] = {
    {"base/status.h", "/* nothing */\n", NULL},
    {"models/model.h", "#include \"base/status.h\"\n", NULL},
    {"core/plan.h", "#include \"models/model.h\"\n#include \"base/status.h\"\n", NULL},
    {"planner/cost.h", "#include \"core/plan.h\"\n", NULL},
    {"planner/search.c", "#include \"cost.h\"\n#include <stdio.h>\n", NULL},
    {"sim/sim.h", "#include \"core/plan.h\"\n", NULL},
    {"tools/cli.h", "/* nothing */\n", NULL},
    {"exec/nn/net.h", "#include \"planner/cost.h\"\n", "exec/nn/net.h:1: exec/nn (row 4) includes planner/cost.h"},
    {"base/progress.c", "#include <stdio.h>\n#include \"tools/cli.h\"\n",
     "base/progress.c:2: base (row 0) includes tools/cli.h"},
    {"sim/event.c", "#include \"exec/nn/net.h\"\n", "sim/event.c:1: sim (row 4) includes exec/nn/net.h of exec/nn (row 4)"},
    {"planner/dag.c", "#include \"../sim/sim.h\"\n", "planner/dag.c:1: #include \"../sim/sim.h\": name the header"},
};

static void test_finds_each_violation(void)
{
    char root[4096], of[4096], *out;
    char *dir = test_scratch(sizeof root, "tree", root, "out", of, NULL);
    CU_ASSERT_EQUAL_FATAL(mkdir(root, 0700), 0);
    const int n = (int)(sizeof tree / sizeof *tree);
    for (int i = 0; i < n; i++)
        if (!tree[i].report) put(root, tree[i].path, tree[i].text);
    CU_ASSERT_EQUAL(check(root, of, &out), 0); /* the allowed files alone */
    free(out);
    int refused = 0;
    for (int i = 0; i < n; i++)
        if (tree[i].report) put(root, tree[i].path, tree[i].text), refused++;
    CU_ASSERT_EQUAL(check(root, of, &out), 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    for (int i = 0; i < n; i++)
        if (tree[i].report) CU_ASSERT_PTR_NOT_NULL(strstr(out, tree[i].report));
    int lines = 0;
    for (const char *s = out; (s = strchr(s, '\n')); s++) lines++;
    CU_ASSERT_EQUAL(lines, refused); /* nothing else reported */
    free(out);
    test_rmtree(dir);
}

TEST_SUITE(layering)
{
    test_add_suite("layering");
    test_add("this tree: every include goes down", test_this_tree);
    test_add("a planted tree: each kind of violation found, nothing else", test_finds_each_violation);
}
