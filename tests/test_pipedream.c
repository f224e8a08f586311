/* test_pipedream.c - PipeDream graph.txt import, checked against a plain
 * sscanf scan of the same files (not the importer), the README's reference
 * total and a small branching fixture whose cuts are worked out by hand. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "models/model.h"
#include "profiles/pipedream.h"
#include "profiles/profile.h"
#include "base/fileio.h"
#include "test.h"

/* ------------------------------------------------- an independent scan -- */

#define SCAN_MAX 512

typedef struct scan {
    int n_nodes, n_edges;
    char id[SCAN_MAX][64];
    int input[SCAN_MAX];
    double fwd_ms[SCAN_MAX], bwd_ms[SCAN_MAX], act[SCAN_MAX], param[SCAN_MAX];
    char ea[SCAN_MAX][64], eb[SCAN_MAX][64];
    double sum_fwd_ms, sum_bwd_ms;  /* over non-Input nodes */
    double input_act;               /* first Input node's activation bytes */
} scan;

/* activation_size=<x> or activation_size=[a; b; ...]: the sum */
static double scan_act(const char *line)
{
    const char *p = strstr(line, "activation_size=");
    if (!p) return -1;
    p += strlen("activation_size=");
    if (*p != '[') return atof(p);
    double s = 0, v;
    int used;
    p++;
    while (sscanf(p, " %lf%n", &v, &used) == 1) {
        s += v;
        p += used;
        while (*p == ';' || *p == ' ') p++;
        if (*p == ']') break;
    }
    return s;
}

static int scan_file(const char *path, scan *s)
{
    memset(s, 0, sizeof *s);
    s->input_act = -1;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '\t') {
            if (sscanf(line, " %63s -- %63s", s->ea[s->n_edges], s->eb[s->n_edges]) == 2) s->n_edges++;
            continue;
        }
        if (strncmp(line, "node", 4) != 0) continue;
        int i = s->n_nodes++;
        sscanf(line, "%63s", s->id[i]);
        s->input[i] = strstr(line, " -- Input") != NULL;
        sscanf(strstr(line, "forward_compute_time="), "forward_compute_time=%lf", &s->fwd_ms[i]);
        sscanf(strstr(line, "backward_compute_time="), "backward_compute_time=%lf", &s->bwd_ms[i]);
        sscanf(strstr(line, "parameter_size="), "parameter_size=%lf", &s->param[i]);
        s->act[i] = scan_act(line);
        if (s->input[i] && s->input_act < 0) s->input_act = s->act[i];
        if (!s->input[i]) {
            s->sum_fwd_ms += s->fwd_ms[i];
            s->sum_bwd_ms += s->bwd_ms[i];
        }
    }
    fclose(f);
    return 0;
}

static int scan_find(const scan *s, const char *id)
{
    for (int i = 0; i < s->n_nodes; i++)
        if (strcmp(s->id[i], id) == 0) return i;
    return -1;
}

/* Position of the layer imported from node `id` (named "<id>_<class>"). */
static int layer_of(const model *m, const char *id)
{
    size_t n = strlen(id);
    for (int i = 0; i < m->n_layers; i++)
        if (strncmp(m->layers[i].name, id, n) == 0 && m->layers[i].name[n] == '_') return i;
    return -1;
}

/* ---------------------------------------------------------------- tests -- */

static const char *const files[] = {"alexnet", "vgg16", "resnet18", "resnet50", "gnmt"};

/* Import the published ../shared/data/pipedream/<name>.txt (batch inferred)
 * and, when s is not NULL, scan it independently: a fatal assertion when the
 * file is missing or either fails. */
static void import_published(const char *name, scan *s, model *m, prof *p, pipedream_info *info)
{
    char rel[64], buf[256];
    snprintf(rel, sizeof rel, "pipedream/%s.txt", name);
    const char *path = test_shared(rel, buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(path);
    if (s) CU_ASSERT_EQUAL_FATAL(scan_file(path, s), 0);
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(pipedream_import(path, 0, m, p, info, &e), CL_OK);
}

/* For every published file: node and edge counts, forward and backward
 * totals and per-node numbers equal the scan's; Input nodes cost nothing;
 * the batch is inferred exactly when the Input holds whole 3x224x224
 * float32 images. */
static void test_totals_match_scan(void)
{
    scan *s = cl_malloc(sizeof *s);
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        model m;
        prof p;
        pipedream_info info;
        import_published(files[f], s, &m, &p, &info);
        CU_ASSERT_EQUAL(info.n_nodes, s->n_nodes);
        CU_ASSERT_EQUAL(info.n_edges, s->n_edges);
        CU_ASSERT_EQUAL(m.n_layers, s->n_nodes);
        CU_ASSERT_EQUAL(p.n_layers, s->n_nodes);
        CU_ASSERT_EQUAL(p.source, PROF_IMPORTED);
        double images = s->input_act / (3.0 * 224 * 224 * 4);
        int whole = images >= 1 && images == floor(images);
        CU_ASSERT_EQUAL(info.batch_inferred, whole);
        CU_ASSERT_EQUAL(info.batch, whole ? images : 1);
        double fwd = 0, bwd = 0;
        for (int i = 0; i < p.n_layers; i++) {
            const prof_layer *l = &p.layers[i];
            fwd += l->fwd_s[0];
            bwd += l->bwd_in_s[0] + l->bwd_w_s[0];
            CU_ASSERT_EQUAL(l->n_points, 1);
            CU_ASSERT_EQUAL(l->batch[0], info.batch);
            char id[64];
            sscanf(l->name, "%63[^_]", id);
            int k = scan_find(s, id);
            CU_ASSERT_FATAL(k >= 0);
            CU_ASSERT_EQUAL(l->fwd_s[0], s->input[k] ? 0 : s->fwd_ms[k] / 1000);
            CU_ASSERT(fabs(l->bwd_in_s[0] + l->bwd_w_s[0] - (s->input[k] ? 0 : s->bwd_ms[k] / 1000)) < 1e-15);
            if (s->param[k] == 0) CU_ASSERT_EQUAL(l->bwd_w_s[0], 0);
            CU_ASSERT_EQUAL(l->act_bytes, s->act[k] / info.batch);
            CU_ASSERT_EQUAL(l->param_bytes, s->param[k]);
        }
        CU_ASSERT(fabs(fwd * 1000 - s->sum_fwd_ms) < 1e-9);
        CU_ASSERT(fabs(bwd * 1000 - s->sum_bwd_ms) < 1e-9);
        model_free(&m);
        prof_free(&p);
    }
    free(s);
}

/* README reference: PipeDream's optimizer gives 0.672535 s for one stage
 * running vgg16 (forward + backward of every non-Input node). */
static void test_vgg16_reference(void)
{
    model m;
    prof p;
    pipedream_info info;
    import_published("vgg16", NULL, &m, &p, &info);
    double total = 0;
    for (int i = 0; i < p.n_layers; i++)
        total += prof_fwd_s(&p.layers[i], info.batch) + prof_bwd_in_s(&p.layers[i], info.batch) +
                 prof_bwd_w_s(&p.layers[i], info.batch);
    CU_ASSERT(fabs(total - 0.672535) < 1e-9);
    CU_ASSERT_EQUAL(info.n_nodes, 41);
    CU_ASSERT_EQUAL(info.n_edges, 41);
    CU_ASSERT_EQUAL(info.batch, 128);  /* 77070336 B = 128 x 3 x 224 x 224 x 4 */
    CU_ASSERT_STRING_EQUAL(m.layers[0].name, "node1_Input");
    CU_ASSERT_STRING_EQUAL(m.name, "vgg16");
    model_free(&m);
    prof_free(&p);
}

/* tests/data/pipedream/branch7.txt, nodes listed out of order:
 *
 *   node1 Input (400 B) -> node2 Conv (800 B) -> node3 ReLU (800) -> node4 Conv (800) -> node5 Add (800) -> node6 Linear (40)
 *                              |                                                       ^
 *                              +-----------------------------------(skip)--------------+
 *                              +---> node7 Conv (activation [120; 80] = 200 B) --------+
 *
 * Kahn's order, ties by node number: 1, 2, 3, 4, 7, 5, 6 (after node2
 * both 3 and 7 are ready; 3 wins).  Bytes crossing the cut after each
 * position (batch 1, so bytes per sample):
 *   after node1: node1 -> node2                                   400
 *   after node2: node2 -> {3, 5, 7}                               800
 *   after node3: node3 -> node4 800 + node2 -> {5, 7} 800        1600
 *   after node4: node4 -> node5 800 + node2 -> {5, 7} 800        1600
 *   after node7: node4 -> 5 800 + node2 -> 5 800 + node7 -> 5 200 1800
 *   after node5: node5 -> node6                                   800
 *   after node6: nothing                                            0
 */
static void check_branch(const model *m, const prof *p)
{
    static const char *const order[7] = {"node1_Input", "node2_Conv2d", "node3_ReLU", "node4_Conv2d",
                                         "node7_Conv2d", "node5_Add", "node6_Linear"};
    static const uint64_t cut_bytes[7] = {400, 800, 1600, 1600, 1800, 800, 0};
    CU_ASSERT_EQUAL_FATAL(m->n_layers, 7);
    for (int i = 0; i < 7; i++) {
        CU_ASSERT_STRING_EQUAL(m->layers[i].name, order[i]);
        CU_ASSERT_STRING_EQUAL(p->layers[i].name, order[i]);
    }
    uint64_t *cut = model_cut_elems(m);
    for (int i = 0; i < 7; i++) CU_ASSERT_EQUAL(cut[i] * model_elem_bytes(m), cut_bytes[i]);
    free(cut);
    /* node5_Add reads node2, node4 and node7: positions 1, 3, 4 */
    const model_layer *add = &m->layers[5];
    CU_ASSERT_EQUAL(add->n_inputs, 3);
    CU_ASSERT_EQUAL(add->inputs[0], 1);
    CU_ASSERT_EQUAL(add->inputs[1], 3);
    CU_ASSERT_EQUAL(add->inputs[2], 4);
    CU_ASSERT_EQUAL(m->layers[0].n_inputs, 1);
    CU_ASSERT_EQUAL(m->layers[0].inputs[0], -1);  /* the Input reads the model input */
    CU_ASSERT(m->is_dag);
}

static void test_branch_fixture(void)
{
    model m;
    prof p;
    pipedream_info info;
    cl_err e = {0};
    const char *path = "tests/data/pipedream/branch7.txt";
    CU_ASSERT_EQUAL_FATAL(pipedream_import(path, 0, &m, &p, &info, &e), CL_OK);
    CU_ASSERT_EQUAL(info.batch, 1);  /* 400 B is no whole image */
    CU_ASSERT_EQUAL(info.batch_inferred, 0);
    check_branch(&m, &p);
    CU_ASSERT_EQUAL(p.layers[4].act_bytes, 200);       /* [120; 80] summed */
    CU_ASSERT_EQUAL(p.layers[0].fwd_s[0], 0);          /* the file says 3 ms of loading */
    CU_ASSERT_EQUAL(p.layers[1].bwd_in_s[0], 0.010);   /* 20 ms split in half: weights */
    CU_ASSERT_EQUAL(p.layers[1].bwd_w_s[0], 0.010);
    CU_ASSERT_EQUAL(p.layers[2].bwd_in_s[0], 0.0015);  /* ReLU: all input-gradient */
    CU_ASSERT_EQUAL(p.layers[2].bwd_w_s[0], 0);
    CU_ASSERT_EQUAL(m.layers[6].params, 8040 / 4);     /* float32 parameters */
    model_free(&m);
    prof_free(&p);

    /* a stated batch: per-sample bytes divide by it, times stay per batch */
    CU_ASSERT_EQUAL_FATAL(pipedream_import(path, 4, &m, &p, &info, &e), CL_OK);
    CU_ASSERT_EQUAL(p.layers[0].batch[0], 4);
    CU_ASSERT_EQUAL(p.layers[0].act_bytes, 100);
    CU_ASSERT_EQUAL(p.layers[1].fwd_s[0], 0.010);
    model_free(&m);
    prof_free(&p);

    /* the order does not depend on how the file lists nodes and edges:
     * reverse every line and import again */
    char *text;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(cl_read_file(path, 1 << 20, &text, &len, &e), CL_OK);
    char *rev = cl_malloc(len + 2), *lines[64];
    int n = 0;
    for (char *s = strtok(text, "\n"); s && n < 64; s = strtok(NULL, "\n")) lines[n++] = s;
    size_t o = 0;
    for (int k = n - 1; k >= 0; k--) o += (size_t)sprintf(rev + o, "%s\n", lines[k]);
    CU_ASSERT_EQUAL_FATAL(pipedream_parse("branch7.txt", rev, o, 0, &m, &p, &info, &e), CL_OK);
    check_branch(&m, &p);
    model_free(&m);
    prof_free(&p);
    free(rev);
    free(text);
}

/* resnet50: the DAG keeps every edge, and each cut is at least the largest
 * single activation crossing it and exactly the sum over the distinct
 * producers crossing it (brute force over the scan's edges). */
/* The batch is inferred from whole square RGB float32 images of any of the
 * usual sides, not only 224: an Inception-v3 input (128 images of 3 x 299 x
 * 299, 137,319,936 bytes) gives batch 128 and a [3, 299, 299] model input;
 * a size no listed side divides gives batch 1 (per minibatch). */
static void test_image_sides(void)
{
    static const struct { double bytes; double batch; int side; } cases[] = {
        {128.0 * 3 * 299 * 299 * 4, 128, 299},  /* inception_v3 */
        {64.0 * 3 * 331 * 331 * 4, 64, 331},    /* nasnet-large */
        {32.0 * 3 * 224 * 224 * 4, 32, 224},    /* also 8 images of 448: 224 comes first */
        {16.0 * 3 * 256 * 256 * 4, 16, 256},
        {100.0 * 3 * 32 * 32 * 4, 1, 0},        /* CIFAR-sized: also one 320 x 320, so not guessed */
        {400, 1, 0},                            /* no whole image of any side */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "node1 -- Input -- forward_compute_time=0.000, backward_compute_time=0.000, activation_size=%.1f, parameter_size=0.000\n"
                 "node2 -- Linear(in_features=8, out_features=10, bias=True) -- forward_compute_time=1.000, backward_compute_time=2.000, activation_size=40.0, parameter_size=360.000\n"
                 "\tnode1 -- node2\n", cases[i].bytes);
        model m;
        prof p;
        pipedream_info info;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(pipedream_parse("sides.txt", text, strlen(text), 0, &m, &p, &info, &e), CL_OK);
        CU_ASSERT_EQUAL(info.batch, cases[i].batch);
        CU_ASSERT_EQUAL(info.batch_inferred, cases[i].side > 0);
        CU_ASSERT_EQUAL(info.image_side, cases[i].side);
        /* a batch nobody can tell counts minibatches */
        CU_ASSERT_EQUAL(m.unit, cases[i].side ? MODEL_UNIT_SAMPLE : MODEL_UNIT_MINIBATCH);
        if (cases[i].side) {
            CU_ASSERT_EQUAL(m.input.ndim, 3);
            CU_ASSERT(m.input.d[0] == 3 && m.input.d[1] == cases[i].side && m.input.d[2] == cases[i].side);
        }
        model_free(&m);
        prof_free(&p);
        /* a stated batch is samples, whatever the input */
        CU_ASSERT_EQUAL_FATAL(pipedream_parse("sides.txt", text, strlen(text), 8, &m, &p, &info, &e), CL_OK);
        CU_ASSERT_EQUAL(m.unit, MODEL_UNIT_SAMPLE);
        model_free(&m);
        prof_free(&p);
    }
}

static void test_resnet50_chain(void)
{
    scan *s = cl_malloc(sizeof *s);
    model m;
    prof p;
    pipedream_info info;
    import_published("resnet50", s, &m, &p, &info);
    CU_ASSERT_EQUAL(m.n_layers, 177);
    CU_ASSERT_EQUAL(s->n_nodes, 177);
    CU_ASSERT(m.is_dag);
    int n = m.n_layers;
    int *pos = cl_malloc((size_t)s->n_nodes * sizeof *pos);
    for (int k = 0; k < s->n_nodes; k++) {
        pos[k] = layer_of(&m, s->id[k]);
        CU_ASSERT_FATAL(pos[k] >= 0);
    }
    /* every edge is an input, producers first */
    for (int k = 0; k < s->n_edges; k++) {
        int a = pos[scan_find(s, s->ea[k])], b = pos[scan_find(s, s->eb[k])];
        CU_ASSERT(a < b);
        int found = 0;
        for (int t = 0; t < m.layers[b].n_inputs; t++) found |= m.layers[b].inputs[t] == a;
        CU_ASSERT(found);
    }
    uint64_t *cut = model_cut_elems(&m);
    const double eb = (double)model_elem_bytes(&m);
    for (int i = 0; i < n; i++) {
        double largest = 0, sum = 0;
        for (int k = 0; k < s->n_nodes; k++) {  /* producer k crosses cut i? */
            if (pos[k] > i) continue;
            int crosses = 0;
            for (int t = 0; t < s->n_edges; t++)
                if (strcmp(s->ea[t], s->id[k]) == 0 && pos[scan_find(s, s->eb[t])] > i) crosses = 1;
            if (!crosses) continue;
            double bytes = s->act[k] / info.batch;
            if (bytes > largest) largest = bytes;
            sum += (double)m.layers[pos[k]].out_elems * eb;
        }
        CU_ASSERT((double)cut[i] * eb >= largest);
        CU_ASSERT_EQUAL((double)cut[i] * eb, sum);
    }
    CU_ASSERT_EQUAL(cut[n - 1], 0);
    free(cut);
    free(pos);
    free(s);
    model_free(&m);
    prof_free(&p);
}

static int same_model_layers(const model *a, const model *b)
{
    if (a->n_layers != b->n_layers || a->dtype != b->dtype) return 0;
    for (int i = 0; i < a->n_layers; i++) {
        const model_layer *x = &a->layers[i], *y = &b->layers[i];
        if (strcmp(x->name, y->name) || x->kind != y->kind || x->n_inputs != y->n_inputs ||
            x->out_elems != y->out_elems || x->stash_elems != y->stash_elems || x->params != y->params)
            return 0;
        for (int k = 0; k < x->n_inputs; k++)
            if (x->inputs[k] != y->inputs[k]) return 0;
    }
    return 1;
}

/* Imported profiles and models survive their file formats unchanged. */
static void test_round_trip(void)
{
    for (size_t f = 0; f < sizeof files / sizeof files[0] + 1; f++) {
        char rel[64], buf[256];
        const char *path;
        if (f < sizeof files / sizeof files[0]) {
            snprintf(rel, sizeof rel, "pipedream/%s.txt", files[f]);
            path = test_shared(rel, buf, sizeof buf);
        } else {
            path = "tests/data/pipedream/branch7.txt";
        }
        CU_ASSERT_PTR_NOT_NULL_FATAL(path);
        model m, m2;
        prof p, p2;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(pipedream_import(path, 0, &m, &p, NULL, &e), CL_OK);
        cJSON *j = prof_to_json(&p);
        CU_ASSERT_EQUAL(prof_from_json(&p2, j, "mem", &e), CL_OK);
        cJSON_Delete(j);
        CU_ASSERT_EQUAL(p.n_layers, p2.n_layers);
        CU_ASSERT(prof_same_layers(&p, &p2));
        CU_ASSERT_STRING_EQUAL(p.note, p2.note);
        j = model_to_json(&m);
        CU_ASSERT_EQUAL(model_from_json(&m2, j, "mem", &e), CL_OK);
        cJSON_Delete(j);
        if (e.code) fprintf(stderr, "\n  %s\n", e.msg);
        CU_ASSERT(same_model_layers(&m, &m2));
        CU_ASSERT_EQUAL(m2.unit, m.unit);
        CU_ASSERT_EQUAL(prof_check_model(&p2, &m2, "mem", &e), CL_OK);
        model_free(&m);
        model_free(&m2);
        prof_free(&p);
        prof_free(&p2);
    }
}

static void test_bad_files(void)
{
    static const struct { const char *file, *want; } cases[] = {
        {"bad-malformed.txt", ":3: malformed node line"},
        {"bad-unknown-edge.txt", ":4: edge node2 -- node9 names an unknown node node9"},
        {"bad-cycle.txt", ":6: edge node3 -- node2 closes a cycle (node2 -> node3 -> node2)"},
        {"bad-negative.txt", ":2: backward_compute_time: negative value -1.5"},
        {"bad-duplicate.txt", ":3: duplicate node node2 (first on line 2)"},
        {"bad-truncated.txt", ":2: missing parameter_size="},
        {"bad-dup-edge.txt", ":6: duplicate edge node1 -- node2 (first on line 4)"},
        {"bad-edge-syntax.txt", ":3: malformed edge line"},
        {"bad-empty.txt", ": empty file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256], want[512];
        snprintf(path, sizeof path, "tests/data/pipedream/%s", cases[i].file);
        snprintf(want, sizeof want, "%s%s", path, cases[i].want);
        model m;
        prof p;
        cl_err e = {0};
        CU_ASSERT_EQUAL(pipedream_import(path, 0, &m, &p, NULL, &e), CL_EINPUT);
        CU_ASSERT_EQUAL(strncmp(e.msg, want, strlen(want)), 0);
        if (strncmp(e.msg, want, strlen(want)) != 0)
            fprintf(stderr, "\n  %s\n  got:  %s\n  want: %s...\n", cases[i].file, e.msg, want);
        CU_ASSERT_PTR_NULL(m.layers);
        CU_ASSERT_PTR_NULL(p.layers);
    }
    /* a list that never closes, text given in memory */
    const char *t = "node1 -- X -- forward_compute_time=1, backward_compute_time=1, activation_size=[4; 4, parameter_size=0\n";
    model m;
    prof p;
    cl_err e = {0};
    CU_ASSERT_EQUAL(pipedream_parse("mem.txt", t, strlen(t), 0, &m, &p, NULL, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "mem.txt:1: activation_size: expected ';' or ']'"));
}

/* A graph.txt cut short at any byte: the node lines come first, the edges
 * after them, so a cut leaves loose nodes, a cut line or a cut node name.
 * In a chain every edge matters, so every cut of alexnet and vgg16 is
 * refused naming the file; in resnet18 every cut before its last node line
 * is (a cut among the edges that only drops a redundant edge of a join
 * leaves a connected graph, which no check can tell from a whole one). */
static void test_cut_short(void)
{
    const char *names[] = {"alexnet", "vgg16", "resnet18"};
    for (int f = 0; f < 3; f++) {
        char rel[64], buf[256], *text = NULL;
        size_t len = 0;
        cl_err e = {0};
        snprintf(rel, sizeof rel, "pipedream/%s.txt", names[f]);
        const char *path = test_shared(rel, buf, sizeof buf);
        CU_ASSERT_PTR_NOT_NULL_FATAL(path);
        CU_ASSERT_EQUAL_FATAL(cl_read_file(path, (size_t)1 << 20, &text, &len, &e), CL_OK);
        size_t upto = len;
        if (f == 2) upto = (size_t)(strstr(text, "\n\t") - text);  /* end of the node lines */
        int loaded = 0;
        for (size_t cut = 1; cut < upto; cut++) {
            char *part = cl_malloc(cut + 1);
            memcpy(part, text, cut);
            part[cut] = '\0';
            model m;
            prof p;
            cl_err pe = {0};
            if (pipedream_parse("cut.txt", part, cut, 0, &m, &p, NULL, &pe) == CL_OK) {
                if (!loaded++) fprintf(stderr, "\n  %s cut after %zu bytes loads\n", names[f], cut);
                model_free(&m);
                prof_free(&p);
            } else if (strncmp(pe.msg, "cut.txt:", 8) != 0) {
                fprintf(stderr, "\n  %s cut after %zu bytes: %s\n", names[f], cut, pe.msg);
                loaded++;
            }
            free(part);
        }
        CU_ASSERT_EQUAL(loaded, 0);
        free(text);
    }
}

static void test_cli(void)
{
    char buf[256], args[400];
    const char *path = test_shared("pipedream/vgg16.txt", buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(path);
    char *out, *err;
    snprintf(args, sizeof args, "inspect %s", path);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "672.535"));   /* fwd+bwd ms at batch 128 */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "batch 128"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "inspect --json %s", path);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    cJSON *j = cJSON_Parse(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    const cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "totals"), 0);
    CU_ASSERT(fabs(cJSON_GetObjectItem(t0, "total_s")->valuedouble - 0.672535) < 1e-9);
    CU_ASSERT_EQUAL(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "import"), "nodes")->valuedouble, 41);
    cJSON_Delete(j);
    free(out);
    free(err);
    CU_ASSERT_EQUAL(test_run_cli("inspect tests/data/pipedream/bad-malformed.txt", &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cleave: tests/data/pipedream/bad-malformed.txt:3: malformed node line"));
    free(out);
    free(err);
}

/* gnmt's input is token ids: its batch cannot be told, so plans count its
 * profiled minibatches and say so; --profile-batch B makes them samples,
 * B times as many per second for the same plan; a bad "unit" in a model
 * file is refused by name. */
static void test_units(void)
{
    char buf[256], args[512];
    const char *path = test_shared("pipedream/gnmt.txt", buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(path);
    char *out, *err;
    double thr[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "plan --profile %s --devices 4 --schedule 1f1b --microbatches 1%s", path,
                 k ? " --profile-batch 64" : "");
        CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, &err), 0);
        const char *s = strstr(out, "throughput ");
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        char unit[32] = "";
        CU_ASSERT_EQUAL(sscanf(s, "throughput %lf %31s", &thr[k], unit), 2);
        CU_ASSERT_STRING_EQUAL(unit, k ? "samples/s," : "minibatches/s,");
        CU_ASSERT_EQUAL(strstr(out, "units: the profile does not tell its batch size") != NULL, k == 0);
        free(out);
        free(err);
    }
    CU_ASSERT(fabs(thr[1] - 64 * thr[0]) <= 0.1 * 64 + 1e-9 * thr[1]); /* printed to 0.1 */
    CU_ASSERT_EQUAL(test_run_cli("plan --model models/vgg16.json --profile-batch 3 --devices 2", &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--profile-batch"));
    free(out);
    free(err);
    const char *bad = "{\"format\": \"cleave-model\", \"version\": 1, \"name\": \"u\", \"unit\": \"token\","
                      " \"input\": {\"shape\": [4]}, \"layers\": [{\"kind\": \"linear\", \"name\": \"fc\", \"out_features\": 2}]}";
    cJSON *j = cJSON_Parse(bad);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL(model_from_json(&m, j, "u.json", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "unit"));
    cJSON_Delete(j);
}

/* An inert layer (no time, no parameters) reading only the inert Input,
 * beside a real branch: `plan` aborted on it (the DAG lattice placed the
 * inert pair with the empty set, so they were in no stage).  Now it plans,
 * with every layer in a stage. */
static void test_inert_source(void)
{
    char *out, *err;
    CU_ASSERT_EQUAL(test_run_cli("plan --profile tests/data/pipedream/inert-source.txt --devices 2 --stages 2 --json",
                                 &out, &err), 0);
    cJSON *j = cJSON_Parse(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    const cJSON *stages = cJSON_GetObjectItem(j, "stages");
    CU_ASSERT_PTR_NOT_NULL_FATAL(stages);
    int seen[4] = {0}, n = 0;
    const cJSON *st;
    cJSON_ArrayForEach(st, stages) {
        const cJSON *l, *list = cJSON_GetObjectItem(st, "layers");
        if (list) { /* a stage of a DAG's layers, or a range in model order */
            cJSON_ArrayForEach(l, list) {
                int i = (int)l->valuedouble;
                if (i >= 0 && i < 4) seen[i]++;
                n++;
            }
        } else {
            for (int i = (int)cJSON_GetObjectItem(st, "first")->valuedouble;
                 i <= (int)cJSON_GetObjectItem(st, "last")->valuedouble; i++, n++)
                if (i >= 0 && i < 4) seen[i]++;
        }
    }
    CU_ASSERT_EQUAL(n, 4);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(seen[i], 1);
    cJSON_Delete(j);
    free(out);
    free(err);
}

TEST_SUITE(pipedream)
{
    test_add_suite("pipedream");
    test_add("every published file: counts and totals equal a plain scan", test_totals_match_scan);
    test_add("vgg16: single-stage time 0.672535 s (README reference)", test_vgg16_reference);
    test_add("branching fixture: order, inputs and cuts by hand", test_branch_fixture);
    test_add("batch inferred from images of any usual side (299, 331, 32...)", test_image_sides);
    test_add("resnet50: DAG edges kept, cuts against brute force", test_resnet50_chain);
    test_add("imported profiles and models round trip", test_round_trip);
    test_add("bad graph files name file and line", test_bad_files);
    test_add("a file cut short at any byte is refused", test_cut_short);
    test_add("cleave inspect on a PipeDream graph", test_cli);
    test_add("units: minibatches when the batch is unknown, --profile-batch", test_units);
    test_add("an inert layer reading only the inert Input plans (it aborted)", test_inert_source);
}
