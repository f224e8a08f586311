/* test_onnx.c - `cleave import`: ONNX files exported from torchvision
 * against the published parameter and MAC counts, the imported ResNet-50
 * against the hand-written models/resnet50.json layer by layer, a
 * transformer block against the closed form, and bad files (truncated,
 * unknown operator, cycle, missing input, huge and negative dimensions)
 * refused with exit 2, the file and the node named, and no output written.
 * Fixtures: tests/data/onnx/, made by tools/make_onnx_fixtures.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fileio.h"
#include "models/model.h"
#include "models/onnx_import.h"
#include "test.h"

#define DIR "tests/data/onnx/"

static int import_ok(model *m, const char *path, onnx_import_stats *st)
{
    cl_err e = {0};
    int rc = onnx_import(m, path, NULL, NULL, st, &e);
    if (rc) fprintf(stderr, "\n  %s\n", e.msg);
    CU_ASSERT_EQUAL(rc, CL_OK);
    return rc == CL_OK;
}

/* torchvision's model pages (pytorch.org/vision/stable/models/generated/
 * torchvision.models.<name>.html, IMAGENET1K_V1 weights) give num_params
 * and "GFLOPS"; those GFLOPS are multiply-accumulates of the convolution and
 * linear layers, printed to two decimals, which is the rounding checked. */
static void test_published(void)
{
    static const struct { const char *name; uint64_t params; long gmac_x100; } want[] = {
        {"resnet18", 11689512u, 181},     {"resnet50", 25557032u, 409},
        {"vgg16", 138357544u, 1547},      {"mobilenet_v2", 3504872u, 30},
        {"densenet121", 7978856u, 283},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, DIR "%s.onnx", want[i].name);
        model m;
        onnx_import_stats st;
        if (!import_ok(&m, path, &st)) continue;
        model_totals t = model_sum(&m);
        if (t.params != want[i].params || llround(st.macs / 1e7) != want[i].gmac_x100)
            fprintf(stderr, "\n  %s: %llu params, %.4f GMAC\n", want[i].name,
                    (unsigned long long)t.params, st.macs / 1e9);
        CU_ASSERT_EQUAL(t.params, want[i].params);
        CU_ASSERT_EQUAL(st.params, want[i].params);
        CU_ASSERT_EQUAL(llround(st.macs / 1e7), want[i].gmac_x100);
        /* every MAC sits in a native conv2d/linear unless a block holds it
         * (grouped convolutions: MobileNet's depthwise ones) */
        if (!st.blocks) CU_ASSERT_EQUAL(t.macs, st.macs);
        CU_ASSERT_TRUE(m.n_layers >= st.nodes - st.constants);
        model_free(&m);
    }
}

/* The imported ResNet-50 and the hand-written one have the same layers in
 * the same order (the export follows torchvision's forward), so every
 * per-layer cost and every cut is equal and any contiguous stage costs the
 * same; the hand model's one extra layer is its loss (softmax_xent), which
 * an ONNX export for inference does not hold. */
static void test_resnet50_matches_hand_model(void)
{
    model a, b;
    cl_err e = {0};
    if (!import_ok(&a, DIR "resnet50.onnx", NULL)) return;
    CU_ASSERT_EQUAL_FATAL(model_load(&b, "models/resnet50.json", &e), CL_OK);
    CU_ASSERT_EQUAL(a.n_layers + 1, b.n_layers);
    CU_ASSERT_EQUAL(b.layers[b.n_layers - 1].kind, MODEL_SOFTMAX_XENT);
    CU_ASSERT_TRUE(a.is_dag);
    int n = a.n_layers < b.n_layers ? a.n_layers : b.n_layers, bad = 0;
    for (int i = 0; i < n; i++) {
        const model_layer *x = &a.layers[i], *y = &b.layers[i];
        int same = x->kind == y->kind && x->out_elems == y->out_elems && x->params == y->params &&
                   x->fwd_flops == y->fwd_flops && x->bwd_in_flops == y->bwd_in_flops &&
                   x->bwd_w_flops == y->bwd_w_flops && x->stash_elems == y->stash_elems &&
                   x->n_inputs == y->n_inputs &&
                   !memcmp(x->inputs, y->inputs, sizeof(int) * (size_t)x->n_inputs);
        if (!same && bad++ < 3)
            fprintf(stderr, "\n  layer %d: %s (%s) vs %s (%s)\n", i, x->name,
                    model_kind_name(x->kind), y->name, model_kind_name(y->kind));
    }
    CU_ASSERT_EQUAL(bad, 0);
    uint64_t *ca = model_cut_elems(&a), *cb = model_cut_elems(&b);
    for (int i = 0; i + 1 < n; i++) CU_ASSERT_EQUAL(ca[i], cb[i]);
    free(ca);
    free(cb);
    model_free(&a);
    model_free(&b);
}

/* One GPT-2-style block, s = 128 tokens, d = 768, 12 heads: parameters
 * 12 d^2 + 13 d (q, k, v, proj d x d + d; MLP 2 x 4 d^2 + 5 d; two layer
 * norms 2 x 2d); MACs s x 12 d^2 for the projections and the MLP plus
 * 2 s^2 d for Q K^T and A V. */
static void test_transformer_block(void)
{
    model m;
    onnx_import_stats st;
    if (!import_ok(&m, DIR "gpt2_block.onnx", &st)) return;
    const double s = 128, d = 768;
    model_totals t = model_sum(&m);
    CU_ASSERT_EQUAL((double)t.params, 12 * d * d + 13 * d);
    CU_ASSERT_EQUAL(st.macs, s * 12 * d * d + 2 * s * s * d);
    CU_ASSERT_TRUE(m.is_dag); /* the residual adds */
    CU_ASSERT_EQUAL(model_shape_elems(&m.input), (int64_t)(s * d));
    CU_ASSERT_EQUAL(m.layers[m.n_layers - 1].out_elems, (uint64_t)(s * d));
    model_free(&m);
}

/* Every prefix of a file is refused cleanly (CL_EINPUT), never accepted
 * and never a crash: the protobuf decoder or the checks after it. */
static void test_truncated(void)
{
    static const char *const files[] = {DIR "tiny.onnx", DIR "resnet18.onnx"};
    for (size_t f = 0; f < 2; f++) {
        FILE *fp = fopen(files[f], "rb");
        CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
        static uint8_t buf[1 << 16];
        size_t len = fread(buf, 1, sizeof buf, fp);
        fclose(fp);
        CU_ASSERT_TRUE(len > 0 && len < sizeof buf);
        size_t step = len < 200 ? 1 : 97, bad = 0;
        for (size_t k = 0; k < len; k += step) {
            model m;
            cl_err e = {0};
            int rc = onnx_import_buf(&m, buf, k, "cut.onnx", NULL, NULL, NULL, &e);
            if (rc != CL_EINPUT || !strstr(e.msg, "cut.onnx")) bad++;
            if (rc == CL_OK) model_free(&m);
        }
        CU_ASSERT_EQUAL(bad, 0);
    }
}

/* A refused file: exit 2, stderr names the file and `what`, no output. */
static void refused(const char *file, const char *what, const char *opts)
{
    char *dir = test_tmpdir(), args[1024], out[512];
    snprintf(out, sizeof out, "%s/out.json", dir);
    snprintf(args, sizeof args, "import %s %s -o %s", opts, file, out);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, file) : NULL);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, what) : NULL);
    if (err && (!strstr(err, file) || !strstr(err, what))) fprintf(stderr, "\n  got: %s", err);
    CU_ASSERT_NOT_EQUAL(access(out, F_OK), 0);
    free(err);
    test_rmtree(dir);
}

static void test_bad_files(void)
{
    refused(DIR "unknown_op.onnx", "node erf1 (Erf): operator Erf is not known", "");
    refused(DIR "cycle.onnx", "cycle", "");
    refused(DIR "cycle.onnx", "node loop_", "");
    refused(DIR "missing_input.onnx", "node add1 (Add): input \"nowhere\"", "");
    refused(DIR "huge_dim.onnx", "above the limit 2^31", "");
    refused(DIR "negative_dim.onnx", "negative dimension -8", "");
    refused(DIR "old_opset.onnx", "operator set 5 is not supported", "");
    /* the running product of the target sizes passed 2^63 before the guard
     * (signed overflow: make ubsan fails without it) */
    refused(DIR "reshape_overflow.onnx", "node reshape_big (Reshape): target shape does not hold", "");
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli("import --price-unknown flops " DIR "tiny.onnx", NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "--price-unknown: expected refuse or memory, got \"flops\"") : NULL);
    free(err);

    char *dir = test_tmpdir(), path[512], args[1024];
    snprintf(path, sizeof path, "%s/cut.onnx", dir);
    char *text = test_slurp(DIR "resnet18.onnx");
    cl_err e = {0};
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(cl_write_file(path, text, 5000, &e), CL_OK);
    free(text);
    refused(path, "truncated or malformed", "");
    snprintf(args, sizeof args, "import %s/nonexistent.onnx", dir);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 2);
    test_rmtree(dir);
}

/* --price-unknown memory: the unknown node becomes a block without FLOPs
 * whose bytes are its output (4 x 8 x 8 floats), said on stderr; the file
 * written loads back with the same totals. */
static void test_price_unknown_and_round_trip(void)
{
    char *dir = test_tmpdir(), out[512], args[1024];
    snprintf(out, sizeof out, "%s/m.json", dir);
    snprintf(args, sizeof args, "import --price-unknown memory " DIR "unknown_op.onnx -o %s", out);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "node erf1 (Erf): unknown operator priced as memory-bound") : NULL);
    free(err);
    model m;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(&m, out, &e), CL_OK);
    CU_ASSERT_EQUAL(m.n_layers, 2);
    CU_ASSERT_EQUAL(m.layers[1].kind, MODEL_BLOCK);
    CU_ASSERT_EQUAL(m.layers[1].fwd_flops, 0);
    CU_ASSERT_EQUAL(m.layers[1].out_elems, 4 * 8 * 8);
    model_free(&m);

    snprintf(args, sizeof args, "import " DIR "resnet18.onnx -o %s", out);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    model a;
    CU_ASSERT_EQUAL_FATAL(model_load(&m, out, &e), CL_OK);
    if (import_ok(&a, DIR "resnet18.onnx", NULL)) {
        model_totals x = model_sum(&m), y = model_sum(&a);
        CU_ASSERT_EQUAL(x.params, y.params);
        CU_ASSERT_EQUAL(x.fwd_flops, y.fwd_flops);
        CU_ASSERT_EQUAL(x.stash_elems, y.stash_elems);
        CU_ASSERT_EQUAL(m.n_layers, a.n_layers);
        model_free(&a);
    }
    model_free(&m);
    test_rmtree(dir);
}

/* The summary line and the note name the file: a path holding an escape
 * sequence (ESC [ 3 1 m, "red") is printed as \x1b, never raw. */
static void test_path_escaped(void)
{
    char *dir = test_tmpdir(), in[512], out[512];
    snprintf(in, sizeof in, "%s/a\x1b[31m.onnx", dir);
    snprintf(out, sizeof out, "%s/m.json", dir);
    char *text = NULL;
    size_t n = 0;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cl_read_file(DIR "unknown_op.onnx", 1 << 20, &text, &n, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(cl_write_file(in, text, n, &e), CL_OK);
    free(text);
    char args[1200];
    snprintf(args, sizeof args, "import --price-unknown memory '%s' -o '%s'", in, out);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "a\\x1b[31m.onnx: node erf1 (Erf): unknown operator") : NULL);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "cleave import: ") : NULL);
    CU_ASSERT_PTR_NULL(err ? strchr(err, 0x1b) : "no stderr");
    free(err);
    test_rmtree(dir);
}

TEST_SUITE(onnx)
{
    test_add_suite("onnx");
    test_add("torchvision exports: published params and GMACs", test_published);
    test_add("resnet50: layer by layer as models/resnet50.json", test_resnet50_matches_hand_model);
    test_add("transformer block: closed-form params and MACs", test_transformer_block);
    test_add("every prefix of a file is refused cleanly", test_truncated);
    test_add("bad files: exit 2 naming file and node, no output", test_bad_files);
    test_add("--price-unknown memory, and the written file loads back", test_price_unknown_and_round_trip);
    test_add("a path with control bytes reaches the terminal escaped", test_path_escaped);
}
