/* test_hf_import.c - `cleave import config.json`: the configs of
 * models/hf/ against the parameter counts their publishers give (sources
 * in docs/transformer.md, "Importing a Hugging Face config.json"), one
 * block against the closed form written out by hand, the GPT configs
 * against the zoo files tools/gen_zoo.py wrote, the LLaMA zoo files
 * against a fresh import, the defaults (--seq cap, torch_dtype), the input
 * kind read from the content, and bad configs refused with exit 2, the
 * file and the key named, and no output written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fileio.h"
#include "models/hf_config.h"
#include "models/model.h"
#include "test.h"

#define HF "models/hf/"

static int import_ok(model *m, const char *path, const hf_opts *o, hf_info *in)
{
    cl_err e = {0};
    int rc = hf_import(m, path, o, in, &e);
    if (rc) fprintf(stderr, "\n  %s\n", e.msg);
    CU_ASSERT_EQUAL(rc, CL_OK);
    return rc == CL_OK;
}

/* ------------------------------------------------- published counts */

/* Each publisher's own count of the model as released (the sources and
 * what each includes are in docs/transformer.md).  All are exact integers;
 * the import must give them exactly. */
static void test_published_params(void)
{
    static const struct { const char *dir; uint64_t params; int layers; } want[] = {
        {"gpt2-xl", 1557611200u, 48},         {"gpt-neox-20b", 20554567680u, 44},
        {"llama2-7b", 6738415616u, 32},       {"llama2-70b", 68976648192u, 80},
        {"llama3-8b", 8030261248u, 32},       {"llama3-70b", 70553706496u, 80},
        {"mistral-7b", 7241732096u, 32},      {"gpt3-175b", 174604259328u, 96},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, HF "%s/config.json", want[i].dir);
        model m;
        if (!import_ok(&m, path, NULL, NULL)) continue;
        model_totals t = model_sum(&m);
        if (t.params != want[i].params)
            fprintf(stderr, "\n  %s: %llu parameters, published %llu\n", path,
                    (unsigned long long)t.params, (unsigned long long)want[i].params);
        CU_ASSERT_EQUAL(t.params, want[i].params);
        CU_ASSERT_EQUAL(m.n_layers, want[i].layers + 2);
        CU_ASSERT_STRING_EQUAL(m.name, want[i].dir); /* named after the folder */
        model_free(&m);
    }
}

/* LLaMA-2 7B by hand (h 4096, f 11008, a = g = 32, s 4096, V 32000, no
 * biases, RMSNorm): a block holds Q, K, V, O (4 h^2 = 67,108,864), gate,
 * up and down (3 h f = 135,266,304) and two norms (2h = 8,192):
 * 202,383,360; its forward is 6 s h^2 (QKV) + 2 s h^2 (O) + 4 s^2 h
 * (scores, values) + 6 s h f (MLP) = s h (8h + 4s + 6f) = 16,777,216 x
 * 115,200 = 1,932,735,283,200; the weight gradient repeats the products
 * with weights: s h (8h + 6f) = 1,657,857,376,256.  The embedding and the
 * untied logit layer hold V h = 131,072,000 each, the final norm h. */
static void test_llama2_by_hand(void)
{
    model m;
    if (!import_ok(&m, HF "llama2-7b/config.json", NULL, NULL)) return;
    const model_layer *b = &m.layers[1], *emb = &m.layers[0], *head = &m.layers[m.n_layers - 1];
    CU_ASSERT_EQUAL(b->params, 202383360u);
    CU_ASSERT_EQUAL(b->fwd_flops, 1932735283200.0);
    CU_ASSERT_EQUAL(b->bwd_w_flops, 1657857376256.0);
    CU_ASSERT_EQUAL(b->bwd_in_flops + b->bwd_w_flops, 2 * 1932735283200.0);
    CU_ASSERT_EQUAL(emb->params, 131072000u);
    CU_ASSERT_EQUAL(head->params, 131072000u + 4096u);
    CU_ASSERT_EQUAL(m.dtype, MODEL_F16); /* torch_dtype float16 */
    CU_ASSERT_EQUAL(m.input.d[0], 4096); /* max_position_embeddings */
    /* one block's output: s h float16 elements */
    CU_ASSERT_EQUAL(b->out_elems, 4096u * 4096u);
    model_free(&m);
}

/* ------------------------------------------------- the zoo agrees */

static void same_blocks(const model *a, const model *b)
{
    CU_ASSERT_STRING_EQUAL(a->name, b->name);
    CU_ASSERT_EQUAL(a->dtype, b->dtype);
    CU_ASSERT_EQUAL(a->input.ndim, b->input.ndim);
    CU_ASSERT_EQUAL(a->input.d[0], b->input.d[0]);
    CU_ASSERT_EQUAL_FATAL(a->n_layers, b->n_layers);
    int bad = 0;
    for (int i = 0; i < a->n_layers; i++) {
        const model_layer *x = &a->layers[i], *y = &b->layers[i];
        if (strcmp(x->name, y->name) || x->kind != MODEL_BLOCK || y->kind != MODEL_BLOCK ||
            x->blk_fwd_flops != y->blk_fwd_flops || x->blk_bwd_flops != y->blk_bwd_flops ||
            x->blk_bwd_w_flops != y->blk_bwd_w_flops || x->blk_params != y->blk_params ||
            x->blk_out_bytes != y->blk_out_bytes || x->blk_stash_bytes != y->blk_stash_bytes ||
            x->out_elems != y->out_elems) {
            if (!bad) fprintf(stderr, "\n  %s: layer %d (%s) differs\n", a->name, i, x->name);
            bad++;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* tools/gen_zoo.py wrote gpt2-1.5b.json and gpt3-175b.json from the
 * formulas of docs/formats.md; the import of the configs gives the same
 * layers to the last FLOP and byte (GPT-2 XL's config names no
 * torch_dtype, so float16 is asked for, as the zoo file has it). */
static void test_gpt_zoo(void)
{
    model a, b;
    hf_opts g2 = {.seq = 0, .dtype = MODEL_F16, .name = "gpt2-1.5b"};
    if (import_ok(&a, HF "gpt2-xl/config.json", &g2, NULL)) {
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(model_load(&b, "models/gpt2-1.5b.json", &e), CL_OK);
        same_blocks(&a, &b);
        model_free(&a);
        model_free(&b);
    }
    hf_opts g3 = {.seq = 0, .dtype = -1, .name = "gpt3-175b"};
    if (import_ok(&a, HF "gpt3-175b/config.json", &g3, NULL)) {
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(model_load(&b, "models/gpt3-175b.json", &e), CL_OK);
        same_blocks(&a, &b);
        model_free(&a);
        model_free(&b);
    }
}

/* models/llama*.json are `cleave import models/hf/<name>/config.json`
 * output: a fresh import must equal them, so they never drift. */
static void test_llama_zoo(void)
{
    static const char *const names[] = {"llama2-7b", "llama2-70b", "llama3-8b", "llama3-70b"};
    for (int i = 0; i < 4; i++) {
        char cfg[256], zoo[256];
        snprintf(cfg, sizeof cfg, HF "%s/config.json", names[i]);
        snprintf(zoo, sizeof zoo, "models/%s.json", names[i]);
        model a, b;
        if (!import_ok(&a, cfg, NULL, NULL)) continue;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(model_load(&b, zoo, &e), CL_OK);
        same_blocks(&a, &b);
        model_free(&a);
        model_free(&b);
    }
}

/* ------------------------------------------------------ defaults */

static void test_defaults(void)
{
    model m;
    hf_info in;
    /* Mistral announces 32768 positions: capped at HF_SEQ_CAP */
    if (import_ok(&m, HF "mistral-7b/config.json", NULL, &in)) {
        CU_ASSERT_EQUAL(m.input.d[0], HF_SEQ_CAP);
        CU_ASSERT_TRUE(in.seq_capped);
        CU_ASSERT_EQUAL(in.max_positions, 32768);
        CU_ASSERT_EQUAL(in.sliding_window, 4096);
        CU_ASSERT_EQUAL(m.dtype, MODEL_BF16);
        model_free(&m);
    }
    /* no torch_dtype: float32; a shorter --seq keeps GPT-2's 1024-row
     * position table (the parameter count does not move) */
    hf_opts o = {.seq = 512, .dtype = -1, .name = NULL};
    if (import_ok(&m, HF "gpt2-xl/config.json", &o, &in)) {
        CU_ASSERT_EQUAL(m.dtype, MODEL_F32);
        CU_ASSERT_TRUE(in.dtype_default);
        CU_ASSERT_EQUAL(m.input.d[0], 512);
        CU_ASSERT_EQUAL(model_sum(&m).params, 1557611200u);
        model_free(&m);
    }
    /* rotary: a --seq past the config's positions is allowed, and said */
    hf_opts lo = {.seq = 16384, .dtype = -1, .name = "long one"};
    if (import_ok(&m, HF "llama3-8b/config.json", &lo, &in)) {
        CU_ASSERT_TRUE(in.seq_beyond);
        CU_ASSERT_STRING_EQUAL(m.name, "long one");
        CU_ASSERT_EQUAL(model_sum(&m).params, 8030261248u);
        model_free(&m);
    }
    char buf[MODEL_NAME_MAX];
    hf_name_from_path("config.json", buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "config");
    hf_name_from_path("/x/my model$/config.json", buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "my model_");
    hf_name_from_path("a/b/llama.json", buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "llama");
}

/* ------------------------------------------------------------- CLI */

/* A small LLaMA config with one key replaced (value NULL: removed). */
static const char *const small_llama =
    "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 128, "
    "\"max_position_embeddings\": 256, \"vocab_size\": 1000, \"torch_dtype\": \"bfloat16\"}";

static void with_key(char *out, size_t cap, const char *key, const char *value)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *at = strstr(small_llama, k);
    if (!at) { /* a new key: before the closing brace */
        snprintf(out, cap, "%.*s, %s%s}", (int)strlen(small_llama) - 1, small_llama, k, value);
        return;
    }
    const char *end = at + strlen(k);
    while (*end != ',' && *end != '}') end++;
    if (value) snprintf(out, cap, "%.*s%s%s%s", (int)(at - small_llama), small_llama, k, value, end);
    else if (at[-1] == '{') snprintf(out, cap, "{%s", end + 2); /* the first key and ", " */
    else snprintf(out, cap, "%.*s%s", (int)(at - small_llama - 2), small_llama, end);
}

/* Refused: exit 2, stderr names the file and `what`, no output file. */
static void refused_text(const char *text, const char *opts, const char *what)
{
    char *dir = test_tmpdir(), in[512], out[512], args[1400];
    snprintf(in, sizeof in, "%s/config.json", dir);
    snprintf(out, sizeof out, "%s/out.json", dir);
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cl_write_file(in, text, strlen(text), &e), CL_OK);
    snprintf(args, sizeof args, "import %s %s -o %s", opts, in, out);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    int lines = 0;
    for (const char *c = err ? err : ""; *c; c++) lines += *c == '\n';
    int ok = err && strstr(err, in) && strstr(err, what) && lines == 1;
    if (!ok) fprintf(stderr, "\n  want \"%s\", got: %s", what, err ? err : "(nothing)");
    CU_ASSERT_TRUE(ok);
    CU_ASSERT_NOT_EQUAL(access(out, F_OK), 0);
    free(err);
    test_rmtree(dir);
}

static void refused_key(const char *key, const char *value, const char *what)
{
    char text[1024];
    with_key(text, sizeof text, key, value);
    refused_text(text, "", what);
}

static void test_bad_configs(void)
{
    refused_key("model_type", "\"bert\"", "model_type: \"bert\" is not a family cleave imports");
    refused_key("model_type", NULL, "model_type: missing");
    refused_key("model_type", "7", "model_type: expected a string");
    refused_key("num_hidden_layers", NULL, "num_hidden_layers: missing (hint: a llama config.json");
    refused_key("num_hidden_layers", "1e9", "num_hidden_layers: 1000000000 is out of range");
    refused_key("hidden_size", "-64", "hidden_size: -64 is out of range");
    refused_key("hidden_size", "\"64\"", "hidden_size: expected an integer, got a string");
    refused_key("hidden_size", "66", "hidden_size: 66 is not a multiple of num_attention_heads 4");
    refused_key("num_key_value_heads", "3", "num_key_value_heads: 3 does not divide");
    refused_key("intermediate_size", "2.5", "intermediate_size: expected an integer, got 2.5");
    refused_key("vocab_size", "0", "vocab_size: 0 is out of range");
    refused_key("max_position_embeddings", "1e300", "max_position_embeddings: 1.0000000000000001e+300 is out of range");
    refused_key("torch_dtype", "\"int8\"", "torch_dtype: \"int8\" is not a precision");
    refused_key("attention_bias", "true", "mlp_bias: false with attention_bias true is not modelled");
    refused_key("head_dim", "32", "head_dim: 32 x 4 heads is not hidden_size 64");
    refused_key("attention_dropout", "1", "attention_dropout: dropout probability must be below 1");
    refused_key("tie_word_embeddings", "\"yes\"", "tie_word_embeddings: expected true or false");
    refused_text("[1, 2]", "", "expected a JSON object at the top level");
    refused_text("{\"model_type\": \"llama\", ", "", "truncated JSON");
    refused_text("{\"format\": \"cleave-model\", \"version\": 1}", "", "format: \"cleave-model\": a cleave file");
    refused_text(small_llama, "--seq 16777216", "max_position_embeddings: a sequence of 16777216 tokens");
    refused_text("{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 64, \"n_head\": 4, "
                 "\"n_positions\": 128, \"vocab_size\": 100}",
                 "--seq 256", "n_positions: --seq 256 is longer than the 128 rows");
    refused_text("{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 64, \"n_head\": 4, "
                 "\"n_positions\": 128, \"vocab_size\": 100, \"add_cross_attention\": true}",
                 "", "add_cross_attention: cross-attention is not modelled");
    refused_text("{\"model_type\": \"gpt_neox\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
                 "\"num_attention_heads\": 4, \"intermediate_size\": 256, "
                 "\"max_position_embeddings\": 128, \"vocab_size\": 100, \"rotary_pct\": 0}",
                 "", "rotary_pct: expected a share of the head in (0, 1]");
    refused_text(small_llama, "--name 'a;b'", "--name: the name \"a;b\"");
    /* options that belong to the other kind of input */
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli("import --price-unknown memory " HF "llama2-7b/config.json", NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "--price-unknown applies to ONNX files") : NULL);
    free(err);
    CU_ASSERT_EQUAL(test_run_cli("import --seq 64 tests/data/onnx/tiny.onnx", NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "--seq and --dtype apply to a config.json") : NULL);
    free(err);
    CU_ASSERT_EQUAL(test_run_cli("import --dtype float64 " HF "llama2-7b/config.json", NULL, &err), 2);
    free(err);
}

/* The kind of file comes from its bytes: a config named .onnx imports as a
 * config, an ONNX graph named .json as ONNX; the notes and the summary
 * reach stderr, the model the output file. */
static void test_kind_by_content(void)
{
    char *dir = test_tmpdir(), a[512], b[512], out[512], args[2000];
    snprintf(a, sizeof a, "%s/model.onnx", dir);
    snprintf(b, sizeof b, "%s/graph.json", dir);
    snprintf(out, sizeof out, "%s/m.json", dir);
    char *t1 = test_slurp(HF "mistral-7b/config.json"), *t2 = NULL;
    size_t n2 = 0;
    cl_err e = {0};
    CU_ASSERT_PTR_NOT_NULL_FATAL(t1);
    CU_ASSERT_EQUAL_FATAL(cl_write_file(a, t1, strlen(t1), &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(cl_read_file("tests/data/onnx/tiny.onnx", 1 << 20, &t2, &n2, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(cl_write_file(b, t2, n2, &e), CL_OK);
    free(t1);
    free(t2);

    snprintf(args, sizeof args, "import %s -o %s", a, out);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "note: sequence 8192, the config's max_position_embeddings 32768 capped at 8192") : NULL);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "note: sliding_window 4096 is not modelled") : NULL);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "7241732096 params") : NULL);
    free(err);
    model m;
    if (model_load(&m, out, &e) == CL_OK) {
        CU_ASSERT_EQUAL(model_sum(&m).params, 7241732096u);
        CU_ASSERT_STRING_EQUAL(m.name, "model.onnx"); /* not config.json: the file's name */
        model_free(&m);
    } else {
        CU_FAIL(e.msg);
    }
    snprintf(args, sizeof args, "import %s -o %s", b, out);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "opset") : NULL);
    free(err);
    test_rmtree(dir);
}

/* The notes and the summary name the file: a path holding an escape
 * sequence (ESC [ 3 1 m) reaches the terminal as \x1b, never raw. */
static void test_path_escaped(void)
{
    char *dir = test_tmpdir(), in[512], out[512], args[1300];
    snprintf(in, sizeof in, "%s/a\x1b[31m.json", dir);
    snprintf(out, sizeof out, "%s/m.json", dir);
    char *text = test_slurp(HF "mistral-7b/config.json");
    cl_err e = {0};
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL_FATAL(cl_write_file(in, text, strlen(text), &e), CL_OK);
    free(text);
    snprintf(args, sizeof args, "import '%s' -o '%s'", in, out);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "a\\x1b[31m.json: note: sequence 8192") : NULL);
    CU_ASSERT_PTR_NULL(err ? strchr(err, 0x1b) : "no stderr");
    free(err);
    snprintf(args, sizeof args, "import --price-unknown memory '%s' -o '%s'", in, out);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NULL(err ? strchr(err, 0x1b) : "no stderr");
    free(err);
    test_rmtree(dir);
}

TEST_SUITE(hf_import)
{
    test_add_suite("hf_import");
    test_add("configs of models/hf: published parameter counts", test_published_params);
    test_add("LLaMA-2 7B block, embedding and head by hand", test_llama2_by_hand);
    test_add("GPT configs give models/gpt2-1.5b.json and gpt3-175b.json", test_gpt_zoo);
    test_add("models/llama*.json equal a fresh import", test_llama_zoo);
    test_add("defaults: --seq cap, torch_dtype, position table", test_defaults);
    test_add("bad configs: exit 2 naming file and key, no output", test_bad_configs);
    test_add("input kind read from the content, not the name", test_kind_by_content);
    test_add("a path with control bytes reaches the terminal escaped", test_path_escaped);
}
