/* test_model.c - the model format: published totals, hand-worked shapes and
 * costs, the chain view of a DAG, exact round trips, rejected inputs and
 * `cleave inspect`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "models/model.h"
#include "base/jsonx.h"
#include "test.h"

static const char *const zoo[] = {
    "models/fmnist-mlp.json", "models/fmnist-cnn.json", "models/vgg16.json",
    "models/resnet50.json",   "models/bert-large.json", "models/gpt2-1.5b.json",
    "models/gpt3-175b.json",  "models/llama2-7b.json",  "models/llama2-70b.json",
    "models/llama3-8b.json",  "models/llama3-70b.json",
};

static int load_ok(model *m, const char *path)
{
    cl_err e = {0};
    int rc = model_load(m, path, &e);
    if (rc) fprintf(stderr, "\n  %s\n", e.msg);
    CU_ASSERT_EQUAL(rc, CL_OK);
    return rc == CL_OK;
}

static int shape_is(const model_shape *s, int ndim, int64_t a, int64_t b, int64_t c)
{
    return s->ndim == ndim && s->d[0] == a && (ndim < 3 || (s->d[1] == b && s->d[2] == c));
}

/* ------------------------------------------------- published totals */

/* torchvision's model pages (pytorch.org/vision/stable/models/generated/
 * torchvision.models.vgg16.html and ...resnet50.html, IMAGENET1K_V1) give
 * num_params 138357544 and 25557032 and "GFLOPS" 15.47 and 4.09; those
 * GFLOPS count multiply-accumulates of conv and linear layers. */
static void test_vgg16_published(void)
{
    model m;
    if (!load_ok(&m, "models/vgg16.json")) return;
    model_totals t = model_sum(&m);
    CU_ASSERT_EQUAL(t.params, 138357544u);
    CU_ASSERT_EQUAL(llround(t.macs / 1e7), 1547);
    /* 30.9 GFLOPs counting each multiply-accumulate as two operations */
    double conv_lin = 0;
    for (int i = 0; i < m.n_layers; i++)
        if (m.layers[i].kind == MODEL_CONV2D || m.layers[i].kind == MODEL_LINEAR)
            conv_lin += m.layers[i].fwd_flops;
    CU_ASSERT_EQUAL(llround(conv_lin / 1e8), 309);
    CU_ASSERT_EQUAL(m.classes, 1000);
    CU_ASSERT_FALSE(m.is_dag);
    /* the last feature map is 512 x 7 x 7, as torchvision's classifier expects */
    int fc = model_find(&m, "classifier.0");
    CU_ASSERT_TRUE(fc >= 0 && shape_is(&m.layers[fc].in_shape, 1, 25088, 0, 0));
    model_free(&m);
}

static void test_resnet50_published(void)
{
    model m;
    if (!load_ok(&m, "models/resnet50.json")) return;
    model_totals t = model_sum(&m);
    CU_ASSERT_EQUAL(t.params, 25557032u);
    CU_ASSERT_EQUAL(llround(t.macs / 1e7), 409);
    CU_ASSERT_TRUE(m.is_dag);
    /* shapes by hand: conv1 7x7/2 pad 3: (224 + 6 - 7) / 2 + 1 = 112;
     * maxpool 3/2 pad 1: (112 + 2 - 3) / 2 + 1 = 56; layer2 halves to 28
     * at its 3x3 conv; layer4 ends at 7x7 with 4 x 512 channels */
    struct { const char *name; int64_t c, h, w; } want[] = {
        {"conv1", 64, 112, 112},          {"maxpool", 64, 56, 56},
        {"layer1.0.conv3", 256, 56, 56},  {"layer2.0.conv1", 128, 56, 56},
        {"layer2.0.conv2", 128, 28, 28},  {"layer2.0.downsample.0", 512, 28, 28},
        {"layer3.5.relu3", 1024, 14, 14}, {"layer4.2.relu3", 2048, 7, 7},
        {"avgpool", 2048, 1, 1},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        int i = model_find(&m, want[k].name);
        CU_ASSERT_TRUE_FATAL(i >= 0);
        CU_ASSERT_TRUE(shape_is(&m.layers[i].out_shape, 3, want[k].c, want[k].h, want[k].w));
    }
    /* 16 bottlenecks: 16 adds, each joining two equal shapes */
    int adds = 0, bns = 0;
    for (int i = 0; i < m.n_layers; i++) {
        adds += m.layers[i].kind == MODEL_ADD;
        bns += m.layers[i].kind == MODEL_BATCHNORM2D;
        if (m.layers[i].kind == MODEL_CONV2D) CU_ASSERT_FALSE(m.layers[i].bias);
    }
    CU_ASSERT_EQUAL(adds, 16);
    CU_ASSERT_EQUAL(bns, 53); /* 1 + 16 x 3 + 4 downsample */
    model_free(&m);
}

/* Transformers: parameters against published totals and per-layer FLOPs
 * against the closed forms in docs/formats.md. */
static void test_transformers(void)
{
    model m;
    /* GPT-2 XL: 1,557,611,200 parameters (Hugging Face gpt2-xl, tied head) */
    if (load_ok(&m, "models/gpt2-1.5b.json")) {
        CU_ASSERT_EQUAL(model_sum(&m).params, 1557611200u);
        CU_ASSERT_EQUAL(m.n_layers, 50);
        double s = 1024, d = 1600;
        CU_ASSERT_EQUAL(m.layers[1].fwd_flops, 24 * s * d * d + 4 * s * s * d);
        CU_ASSERT_EQUAL(m.layers[1].params, (uint64_t)(12 * d * d + 13 * d));
        CU_ASSERT_EQUAL(m.layers[1].out_elems, (uint64_t)(s * d));
        CU_ASSERT_EQUAL(model_elem_bytes(&m), 2u);
        model_free(&m);
    }
    /* GPT-3: "175.0B" parameters (Brown et al. 2020, table 2.1); forward
     * FLOPs per token about 2 N + 2 n_layer n_ctx d (Kaplan et al. 2020,
     * table 1, N without embeddings), times 2048 tokens */
    if (load_ok(&m, "models/gpt3-175b.json")) {
        model_totals t = model_sum(&m);
        CU_ASSERT_TRUE(test_rel((double)t.params, 175.0e9) < 0.005);
        double N = 96 * (12 * 12288.0 * 12288 + 13 * 12288);
        double kaplan = (2 * N + 2 * 96 * 2048 * 12288.0) * 2048;
        CU_ASSERT_TRUE(test_rel(t.fwd_flops, kaplan) < 0.03);
        CU_ASSERT_EQUAL(m.n_layers, 98);
        model_free(&m);
    }
    /* BERT-large: "340M" parameters (Devlin et al. 2019), and exactly the
     * closed form: embeddings V d + s d + 2 d + 2 d, 24 layers of
     * 12 d^2 + 13 d, pre-training heads 2 d^2 + 6 d + V + 2 */
    if (load_ok(&m, "models/bert-large.json")) {
        uint64_t V = 30522, s = 512, d = 1024;
        uint64_t want = V * d + s * d + 4 * d + 24 * (12 * d * d + 13 * d) + 2 * d * d + 6 * d + V + 2;
        CU_ASSERT_EQUAL(model_sum(&m).params, want);
        CU_ASSERT_TRUE(test_rel((double)want, 340e6) < 0.02);
        model_free(&m);
    }
}

/* ------------------------------------------------- hand-worked small models */

static void test_mlp_by_hand(void)
{
    model m;
    if (!load_ok(&m, "models/fmnist-mlp.json")) return;
    CU_ASSERT_EQUAL(model_sum(&m).params, 784u * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
    CU_ASSERT_EQUAL(model_sum(&m).macs, 784.0 * 256 + 256 * 128 + 128 * 10);
    int fc1 = model_find(&m, "fc1"), fc2 = model_find(&m, "fc2");
    CU_ASSERT_TRUE_FATAL(fc1 >= 0 && fc2 >= 0);
    const model_layer *a = &m.layers[fc1], *b = &m.layers[fc2];
    CU_ASSERT_EQUAL(a->fwd_flops, 2.0 * 784 * 256);
    /* nothing before fc1 has parameters: no input-gradient is computed */
    CU_ASSERT_EQUAL(a->bwd_in_flops, 0);
    CU_ASSERT_EQUAL(a->bwd_w_flops, 2.0 * 784 * 256 + 256);
    CU_ASSERT_EQUAL(b->bwd_in_flops, 2.0 * 256 * 128);
    CU_ASSERT_EQUAL(b->bwd_w_flops, 2.0 * 256 * 128 + 128);
    CU_ASSERT_EQUAL(a->stash_elems, 784u); /* its input */
    CU_ASSERT_EQUAL(m.layers[fc1 + 1].stash_elems, 256u); /* relu: its output */
    CU_ASSERT_EQUAL(m.layers[m.n_layers - 1].stash_elems, 10u); /* probabilities */
    CU_ASSERT_EQUAL(m.layers[m.n_layers - 1].out_elems, 1u);
    CU_ASSERT_EQUAL(m.classes, 10);
    model_free(&m);
}

static void test_cnn_by_hand(void)
{
    model m;
    if (!load_ok(&m, "models/fmnist-cnn.json")) return;
    /* 5x5 pad 2 keeps 28x28; each 2x2 pool halves it: 28 -> 14 -> 7 */
    struct { int ndim; int64_t c, h, w; } want[] = {
        {3, 16, 28, 28}, {3, 16, 28, 28}, {3, 16, 14, 14}, {3, 32, 14, 14},
        {3, 32, 14, 14}, {3, 32, 7, 7},   {1, 1568, 0, 0}, {1, 128, 0, 0},
        {1, 128, 0, 0},  {1, 128, 0, 0},  {1, 10, 0, 0},   {1, 1, 0, 0},
    };
    CU_ASSERT_EQUAL_FATAL(m.n_layers, (int)(sizeof want / sizeof want[0]));
    for (int i = 0; i < m.n_layers; i++)
        CU_ASSERT_TRUE(shape_is(&m.layers[i].out_shape, want[i].ndim, want[i].c, want[i].h, want[i].w));
    /* conv1: 16 x (1 x 5 x 5) + 16; conv2: 32 x (16 x 5 x 5) + 32;
     * fc1: 1568 x 128 + 128; fc2: 128 x 10 + 10 */
    CU_ASSERT_EQUAL(model_sum(&m).params, 416u + 12832 + 200832 + 1290);
    /* conv2 MACs: 32 x 14 x 14 outputs, 16 x 5 x 5 each */
    CU_ASSERT_EQUAL(m.layers[3].macs, 32.0 * 14 * 14 * 16 * 25);
    CU_ASSERT_EQUAL(m.layers[0].bwd_in_flops, 0); /* reads the model input */
    CU_ASSERT_EQUAL(m.layers[3].bwd_in_flops, 2 * m.layers[3].macs);
    CU_ASSERT_EQUAL(m.layers[2].stash_elems, 16u * 14 * 14); /* argmax per output */
    model_free(&m);
}

/* ------------------------------------------------- chain view of a DAG */

/* tests/data/model/residual.json, input [6]:
 *   0 a    linear 10   <- input        4 proj linear 10 <- input
 *   1 b    relu   10   <- a            5 sum  add    10 <- d, b, proj
 *   2 c    linear 4    <- b            6 head linear 3  <- sum
 *   3 d    linear 10   <- c            7 loss softmax_xent <- head
 * Last reader of each producer: input 4, a 1, b 5, c 3, d 5, proj 5, sum 6,
 * head 7.  A cut after i carries every producer <= i read after i:
 *   after 0: input 6 + a 10            = 16
 *   after 1: input 6 + b 10            = 16
 *   after 2: input 6 + b 10 + c 4      = 20
 *   after 3: input 6 + b 10 + d 10     = 26
 *   after 4: b 10 + d 10 + proj 10     = 30
 *   after 5: sum 10                    = 10
 *   after 6: head 3                    =  3
 *   after 7: nothing                   =  0 */
static const uint64_t residual_cuts[8] = {16, 16, 20, 26, 30, 10, 3, 0};

static void test_cut_residual_file(void)
{
    model m;
    if (!load_ok(&m, "tests/data/model/residual.json")) return;
    CU_ASSERT_TRUE(m.is_dag);
    CU_ASSERT_EQUAL_FATAL(m.n_layers, 8);
    uint64_t *cut = model_cut_elems(&m);
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(cut[i], residual_cuts[i]);
    free(cut);
    /* the projection reads the model input, so it needs no input-gradient;
     * head does (sum leads back to parameters) */
    CU_ASSERT_EQUAL(m.layers[4].bwd_in_flops, 0);
    CU_ASSERT_EQUAL(m.layers[4].params, 60u); /* 6 x 10, no bias */
    CU_ASSERT_EQUAL(m.layers[5].fwd_flops, 20); /* 3 inputs: 2 adds per element */
    CU_ASSERT_EQUAL(m.layers[6].bwd_in_flops, 2.0 * 10 * 3);
    model_free(&m);
}

/* The same graph built in code from blocks, the way importers build
 * models: float32, out_bytes = 4 x the element counts above. */
static void test_cut_residual_in_memory(void)
{
    static const struct { const char *name; int n; int in[3]; double out; } g[] = {
        {"a", 1, {-1}, 10},  {"b", 1, {0}, 10},         {"c", 1, {1}, 4},  {"d", 1, {2}, 10},
        {"proj", 1, {-1}, 10}, {"sum", 3, {3, 1, 4}, 10}, {"head", 1, {5}, 3}, {"loss", 1, {6}, 1},
    };
    model m = {0};
    snprintf(m.name, sizeof m.name, "in-memory");
    m.input = (model_shape){1, {6}};
    m.dtype = MODEL_F32;
    m.n_layers = 8;
    m.layers = cl_calloc(8, sizeof *m.layers);
    for (int i = 0; i < 8; i++) {
        model_block_init(&m.layers[i], g[i].name, 100.0 * i, i % 2 ? 0 : 5, 4 * g[i].out, 8);
        /* chain layers keep the default (n_inputs 0); the others name theirs */
        if (!(g[i].n == 1 && g[i].in[0] == i - 1)) {
            m.layers[i].n_inputs = g[i].n;
            for (int k = 0; k < g[i].n; k++) m.layers[i].inputs[k] = g[i].in[k];
        }
    }
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_derive(&m, "mem", &e), CL_OK);
    CU_ASSERT_TRUE(m.is_dag);
    CU_ASSERT_EQUAL(m.layers[1].n_inputs, 1); /* default written back */
    CU_ASSERT_EQUAL(m.layers[1].inputs[0], 0);
    CU_ASSERT_TRUE(shape_is(&m.layers[5].in_shape, 1, 30, 0, 0)); /* joined: 10+10+10 */
    CU_ASSERT_EQUAL(m.layers[2].bwd_w_flops, 200); /* params 5 > 0: half of 2 x 200 */
    CU_ASSERT_EQUAL(m.layers[2].bwd_in_flops, 200);
    CU_ASSERT_EQUAL(m.layers[3].bwd_w_flops, 0);   /* no params */
    CU_ASSERT_EQUAL(m.layers[3].stash_elems, 2u);  /* 8 bytes of float32 */
    uint64_t *cut = model_cut_elems(&m);
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(cut[i], residual_cuts[i]);
    free(cut);

    /* a chain's cut after i is just layer i's output */
    model c;
    if (load_ok(&c, "models/vgg16.json")) {
        cut = model_cut_elems(&c);
        for (int i = 0; i + 1 < c.n_layers; i++) CU_ASSERT_EQUAL(cut[i], c.layers[i].out_elems);
        CU_ASSERT_EQUAL(cut[c.n_layers - 1], 0u);
        free(cut);
        model_free(&c);
    }

    /* errors from code-built models name the layer too */
    m.layers[3].n_inputs = 1;
    m.layers[3].inputs[0] = 6;
    CU_ASSERT_EQUAL(model_derive(&m, "mem", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "mem: layers[3].inputs (d): "));
    cl_err_clear(&e);
    m.layers[3].inputs[0] = 2;
    m.layers[2].blk_fwd_flops = NAN;
    CU_ASSERT_EQUAL(model_derive(&m, "mem", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "mem: layers[2].fwd_flops (c): "));
    cl_err_clear(&e);
    m.layers[2].blk_fwd_flops = 1;
    snprintf(m.layers[6].name, sizeof m.layers[6].name, "a");
    CU_ASSERT_EQUAL(model_derive(&m, "mem", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "duplicate"));
    model_free(&m);
}

/* ------------------------------------------------- round trips */

/* Every field, given and derived, bit for bit.  Update this when
 * model_layer grows a field (the size check below will remind you). */
_Static_assert(sizeof(model_layer) == 384, "model_layer changed: extend same_layer()");

#define SAME(f) CU_ASSERT_EQUAL(memcmp(&a->f, &b->f, sizeof a->f), 0)

static void same_shape(const model_shape *a, const model_shape *b)
{
    CU_ASSERT_EQUAL(a->ndim, b->ndim);
    for (int k = 0; k < MODEL_MAX_DIMS; k++) CU_ASSERT_EQUAL(a->d[k], b->d[k]);
}

static void same_layer(const model_layer *a, const model_layer *b)
{
    CU_ASSERT_STRING_EQUAL(a->name, b->name);
    SAME(kind); SAME(n_inputs); SAME(inputs);
    SAME(out_channels); SAME(kernel); SAME(stride); SAME(padding);
    SAME(out_features);
    SAME(heads); SAME(in_channels); SAME(in_features); SAME(bias);
    SAME(dropout_p);
    SAME(blk_fwd_flops); SAME(blk_bwd_flops); SAME(blk_params);
    SAME(blk_out_bytes); SAME(blk_stash_bytes); SAME(blk_bwd_w_flops);
    same_shape(&a->blk_out_shape, &b->blk_out_shape);
    same_shape(&a->in_shape, &b->in_shape);
    same_shape(&a->out_shape, &b->out_shape);
    SAME(fwd_flops); SAME(bwd_in_flops); SAME(bwd_w_flops); SAME(macs);
    SAME(params); SAME(out_elems); SAME(stash_elems);
}

static void same_model(const model *a, const model *b)
{
    CU_ASSERT_STRING_EQUAL(a->name, b->name);
    same_shape(&a->input, &b->input);
    SAME(dtype); SAME(classes); SAME(is_dag);
    CU_ASSERT_EQUAL_FATAL(a->n_layers, b->n_layers);
    for (int i = 0; i < a->n_layers; i++) same_layer(&a->layers[i], &b->layers[i]);
}

static void round_trip(const char *path, const char *dir)
{
    model a, b, c;
    if (!load_ok(&a, path)) return;
    cl_err e = {0};
    /* in memory */
    cJSON *j = model_to_json(&a);
    CU_ASSERT_EQUAL(model_from_json(&b, j, "mem.json", &e), CL_OK);
    cJSON_Delete(j);
    same_model(&a, &b);
    /* through a file */
    char out[512];
    const char *base = strrchr(path, '/');
    snprintf(out, sizeof out, "%s/%s", dir, base ? base + 1 : path);
    CU_ASSERT_EQUAL(model_save(&a, out, &e), CL_OK);
    if (load_ok(&c, out)) {
        same_model(&a, &c);
        model_free(&c);
    }
    remove(out);
    model_free(&b);
    model_free(&a);
}

static void test_round_trip(void)
{
    char *dir = test_tmpdir();
    for (size_t k = 0; k < sizeof zoo / sizeof zoo[0]; k++) round_trip(zoo[k], dir);
    round_trip("tests/data/model/residual.json", dir);
    round_trip("tests/data/model/blocks.json", dir);
    rmdir(dir);
    free(dir);
}

/* model_copy: the copy equals the original field by field, and owns its
 * layers: with the original scribbled over and freed, it still equals a
 * second load of the same file. */
static void copy_check(const char *path)
{
    model a, ref, c;
    if (!load_ok(&a, path)) return;
    if (!load_ok(&ref, path)) {
        model_free(&a);
        return;
    }
    model_copy(&c, &a);
    same_model(&a, &c);
    /* writing over the original leaves the copy as it was */
    memset(a.layers, 0x5a, (size_t)a.n_layers * sizeof *a.layers);
    memset(a.name, 0x5a, sizeof a.name - 1);
    same_model(&ref, &c);
    if (c.layers == a.layers) { /* freeing both would free one block twice */
        CU_FAIL("the copy shares the original's layers");
        return;
    }
    /* and the copy outlives it */
    model_free(&a);
    same_model(&ref, &c);
    model_free(&c);
    model_free(&ref);
}

static void test_copy(void)
{
    for (size_t k = 0; k < sizeof zoo / sizeof zoo[0]; k++) copy_check(zoo[k]);
    copy_check("tests/data/model/residual.json");
    copy_check("tests/data/model/blocks.json");
    /* a model without layers copies to one without layers */
    model empty = {.name = "empty", .input = {.ndim = 1, .d = {4}}}, c;
    model_copy(&c, &empty);
    same_model(&empty, &c);
    CU_ASSERT_PTR_NULL(c.layers);
    model_free(&c);
}

/* The blocks fixture: defaults, out_shape feeding a conv, a joining block. */
static void test_blocks_fixture(void)
{
    model m;
    if (!load_ok(&m, "tests/data/model/blocks.json")) return;
    const model_layer *stem = &m.layers[0], *join = &m.layers[4];
    CU_ASSERT_EQUAL(stem->blk_bwd_flops, 2000);   /* default 2 x fwd */
    CU_ASSERT_EQUAL(stem->blk_bwd_w_flops, 1000); /* half of it: params > 0 */
    CU_ASSERT_EQUAL(stem->stash_elems, 50u);      /* 100 bytes of bfloat16 */
    CU_ASSERT_TRUE(shape_is(&stem->out_shape, 3, 4, 8, 8));
    /* conv 3x3/2 pad 1 on 8x8: (8 + 2 - 3) / 2 + 1 = 4; avgpool 2: 2 */
    CU_ASSERT_TRUE(shape_is(&m.layers[1].out_shape, 3, 4, 4, 4));
    CU_ASSERT_TRUE(shape_is(&m.layers[3].out_shape, 3, 4, 2, 2));
    CU_ASSERT_STRING_EQUAL(m.layers[1].name, "conv2d_1");
    CU_ASSERT_EQUAL(m.layers[1].params, 4u * 4 * 9 + 4);
    CU_ASSERT_EQUAL(m.layers[2].params, 8u); /* batchnorm: 2 x channels */
    /* join reads stem (256) and the pool (16): in [272]; out 7 bytes -> 4 elements */
    CU_ASSERT_TRUE(shape_is(&join->in_shape, 1, 272, 0, 0));
    CU_ASSERT_TRUE(shape_is(&join->out_shape, 1, 4, 0, 0));
    CU_ASSERT_EQUAL(join->bwd_in_flops, 70);
    CU_ASSERT_EQUAL(join->bwd_w_flops, 0);
    CU_ASSERT_EQUAL(m.layers[5].dropout_p, 0.5); /* default */
    CU_ASSERT_EQUAL(m.classes, 2);               /* taken from the loss */
    CU_ASSERT_EQUAL(m.dtype, MODEL_BF16);
    model_free(&m);
}

/* ------------------------------------------------- bad input */

typedef struct bad_case {
    const char *file;  /* under tests/data/model/ */
    const char *path;  /* JSON path right after "<file>: ", or NULL */
    const char *what;  /* a phrase of the problem */
    int hint;          /* the message carries a hint */
} bad_case;

static const bad_case bad[] = {
    {"bad-empty.json", NULL, "empty file", 1},
    {"bad-truncated.json", NULL, "truncated", 1},
    {"bad-not-object.json", NULL, "expected a JSON object", 1},
    {"bad-format.json", "format", "expected \"cleave-model\"", 1},
    {"bad-version.json", "version", "newer than this cleave reads", 1},
    {"bad-no-layers.json", "layers", "missing", 1},
    {"bad-empty-layers.json", "layers", "empty", 1},
    {"bad-unknown-kind.json", "layers[1].kind", "unknown layer kind \"conv3d\"", 1},
    {"bad-negative-kernel.json", "layers[0].kernel", "-3 is out of range", 1},
    {"bad-zero-out-channels.json", "layers[0].out_channels", "0 is out of range", 1},
    {"bad-inf.json", "layers[1].out_features", "finite", 1},
    {"bad-type.json", "layers[0].kernel", "got a string", 0},
    {"bad-in-features.json", "layers[1].in_features", "expected 64", 1},
    {"bad-kernel-too-big.json", "layers[0].kernel", "larger than the padded input 5x5", 1},
    {"bad-overflow.json", "input.shape", "2^40", 1},
    {"bad-params-overflow.json", "layers[0]", "2^53 parameters", 1},
    {"bad-dup-name.json", "layers[2].name", "duplicate layer name \"conv1\"", 1},
    {"bad-unknown-input.json", "layers[2].inputs[1]", "\"rleu\"", 1},
    {"bad-later-input.json", "layers[1].inputs[0]", "comes later", 1},
    {"bad-add-shapes.json", "layers[3].inputs", "got [4,8,8]", 1},
    {"bad-softmax-not-last.json", "layers[2]", "must be the last layer", 1},
    {"bad-classes.json", "layers[3]", "expected 5 logits", 1},
    {"bad-typo.json", "layers[0].kernal", "unknown member", 1},
    {"bad-dropout-p.json", "layers[1].p", "below 1", 1},
    {"bad-linear-3d.json", "layers[1]", "flatten", 1},
    {"bad-block-bwd-w.json", "layers[0].bwd_w_flops", "more than bwd_flops", 1},
    {"bad-reserved-name.json", "layers[0].name", "reserved", 1},
    {"bad-pool-padding.json", "layers[0].padding", "half the kernel", 1},
    {"bad-shape-2d.json", "input.shape", "2 dimensions", 1},
    {"bad-relu-two-inputs.json", "layers[2].inputs", "takes one input", 1},
    {"bad-block-out-shape.json", "layers[0].out_shape", "256 elements", 1},
    {"bad-negative-flops.json", "layers[0].fwd_flops", "out of range", 1},
};

static void test_bad_inputs(void)
{
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char file[256], prefix[400];
        snprintf(file, sizeof file, "tests/data/model/%s", bad[k].file);
        model m;
        memset(&m, 0x5a, sizeof m); /* the loader must empty it on failure */
        cl_err e = {0};
        int rc = model_load(&m, file, &e);
        int ok = rc == CL_EINPUT && m.layers == NULL && m.n_layers == 0;
        snprintf(prefix, sizeof prefix, "%s: %s", file, bad[k].path ? bad[k].path : "");
        size_t pl = strlen(prefix);
        ok = ok && strncmp(e.msg, prefix, pl) == 0;
        /* the path ends where the message goes on: ": " or " (layer name)" */
        if (bad[k].path) ok = ok && (e.msg[pl] == ':' || e.msg[pl] == ' ');
        ok = ok && strstr(e.msg, bad[k].what) != NULL;
        if (bad[k].hint) ok = ok && strstr(e.msg, "(hint: ") != NULL;
        ok = ok && !strchr(e.msg, '\n');
        if (!ok) fprintf(stderr, "\n  %s: rc %d, message: %s\n", bad[k].file, rc, e.msg);
        CU_ASSERT_TRUE(ok);
        if (rc == CL_OK) model_free(&m);
    }
    CU_ASSERT_TRUE(sizeof bad / sizeof bad[0] >= 20);
}

/* Members of the wrong type and bad values in strings, one line each. */
static void test_bad_strings(void)
{
    static const struct { const char *text, *path; } cases[] = {
        {"{\"format\":\"cleave-model\",\"version\":1,\"name\":\"x\",\"input\":{\"shape\":[4]},"
         "\"layers\":{\"kind\":\"relu\"}}", "layers"},
        {"{\"format\":\"cleave-model\",\"version\":1,\"name\":\"x\",\"input\":{\"shape\":[4],"
         "\"dtype\":\"int8\"},\"layers\":[{\"kind\":\"relu\"}]}", "input.dtype"},
        {"{\"format\":\"cleave-model\",\"version\":1,\"name\":\"x\",\"input\":{\"shape\":[4]},"
         "\"layers\":[{\"kind\":\"relu\",\"inputs\":[3]}]}", "layers[0].inputs[0]"},
        {"{\"format\":\"cleave-model\",\"version\":1,\"name\":\"x\",\"input\":{\"shape\":[4]},"
         "\"layers\":[{\"kind\":\"linear\",\"out_features\":2,\"bias\":1}]}", "layers[0].bias"},
        {"{\"format\":\"cleave-model\",\"version\":1,\"name\":\"x\",\"input\":{\"shape\":[4]},"
         "\"layers\":[7]}", "layers[0]"},
        {"{\"format\":\"cleave-model\",\"version\":1,\"name\":\"x\",\"input\":{\"shape\":[4]},"
         "\"layers\":[{\"kind\":\"add\",\"inputs\":[\"input\"]}]}", "layers[0].inputs"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cJSON *root;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(jx_parse_text("s.json", cases[k].text, strlen(cases[k].text), &root, &e), CL_OK);
        model m;
        CU_ASSERT_EQUAL(model_from_json(&m, root, "s.json", &e), CL_EINPUT);
        char prefix[128];
        snprintf(prefix, sizeof prefix, "s.json: %s", cases[k].path);
        size_t pl = strlen(prefix);
        int ok = strncmp(e.msg, prefix, pl) == 0 && (e.msg[pl] == ':' || e.msg[pl] == ' ');
        if (!ok) fprintf(stderr, "\n  case %zu: %s\n", k, e.msg);
        CU_ASSERT_TRUE(ok);
        cJSON_Delete(root);
    }
}

/* ------------------------------------------------- cleave inspect */

static void test_cli(void)
{
    char *out, *err;
    int rc = test_run_cli("inspect tests/data/model/bad-kernel-too-big.json", &out, &err);
    CU_ASSERT_EQUAL(rc, 2);
    CU_ASSERT_STRING_EQUAL(out, "");
    CU_ASSERT_EQUAL(strncmp(err, "cleave: tests/data/model/bad-kernel-too-big.json: layers[0].kernel", 66), 0);
    /* one line */
    char *nl = strchr(err, '\n');
    CU_ASSERT_TRUE(nl && nl[1] == '\0');
    free(out);
    free(err);

    rc = test_run_cli("inspect models/vgg16.json", &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "138,357,544"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "classifier.6"));
    CU_ASSERT_STRING_EQUAL(err, "");
    free(out);
    free(err);

    /* --json: per-layer values add up to the totals it prints */
    rc = test_run_cli("inspect --json models/resnet50.json", &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    cJSON *root = cJSON_Parse(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    const cJSON *layers = cJSON_GetObjectItem(root, "layers");
    const cJSON *tot = cJSON_GetObjectItem(root, "totals");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(layers), 176);
    double params = 0, fwd = 0;
    for (const cJSON *l = layers ? layers->child : NULL; l; l = l->next) {
        params += cJSON_GetObjectItem(l, "params")->valuedouble;
        fwd += cJSON_GetObjectItem(l, "fwd_flops")->valuedouble;
    }
    CU_ASSERT_EQUAL(params, 25557032);
    CU_ASSERT_EQUAL(cJSON_GetObjectItem(tot, "params")->valuedouble, 25557032);
    CU_ASSERT_TRUE(test_rel(cJSON_GetObjectItem(tot, "fwd_flops")->valuedouble, fwd) < 1e-12);
    cJSON_Delete(root);
    free(out);
    free(err);
}

TEST_SUITE(model)
{
    test_add_suite("model");
    test_add("VGG-16 matches torchvision's params and MACs", test_vgg16_published);
    test_add("ResNet-50 matches torchvision's params and MACs", test_resnet50_published);
    test_add("transformer zoo matches published totals and formulas", test_transformers);
    test_add("MLP params and costs by hand", test_mlp_by_hand);
    test_add("CNN shapes and params by hand", test_cnn_by_hand);
    test_add("chain view cut sizes of a residual fixture", test_cut_residual_file);
    test_add("models built in code derive and cut the same", test_cut_residual_in_memory);
    test_add("block defaults, out_shape and joins", test_blocks_fixture);
    test_add("load, save, load is exact for zoo and fixtures", test_round_trip);
    test_add("model_copy equals the original and shares nothing", test_copy);
    test_add("bad model files name file, JSON path and hint", test_bad_inputs);
    test_add("bad members in strings name their path", test_bad_strings);
    test_add("cleave inspect on good and bad models", test_cli);
}
