/* hf_config.c - read a Hugging Face config.json into a tfm_desc and build
 * the cleave model from it (see hf_config.h; the keys and defaults are
 * those of transformers' GPT2Config, GPTNeoXConfig, LlamaConfig and
 * MistralConfig, listed in docs/transformer.md). */
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "base/jsonx.h"
#include "models/hf_config.h"
#include "models/tfm_model.h"

/* ------------------------------------------------------------- families */

/* One family: the keys its config names the sizes by, and its
 * architecture as transformers builds it. */
typedef struct family {
    const char *type;                    /* model_type                     */
    const char *layers, *hidden, *heads; /* required                       */
    const char *kv;                      /* key/value heads (NULL: = heads) */
    const char *ffn;                     /* MLP inner size                 */
    int ffn_optional;                    /* absent or null: 4 x hidden     */
    const char *pos;                     /* maximum positions, required    */
    int gated, rotary, rms, bias;        /* architecture                   */
    int tied;                            /* tie_word_embeddings' default   */
    const char *const *drop;             /* dropout probabilities          */
    double drop_default;                 /* their default                  */
} family;

static const char *const gpt2_drop[] = {"resid_pdrop", "embd_pdrop", "attn_pdrop", NULL};
static const char *const neox_drop[] = {"attention_dropout", "hidden_dropout", NULL};
static const char *const llama_drop[] = {"attention_dropout", NULL};

/* GPT-2: learned positions, LayerNorm, biases, tied, dropout 0.1 by
 * default (GPT2Config).  GPT-NeoX: rotary, LayerNorm, biases, untied.
 * LLaMA and Mistral: rotary, RMSNorm, gated SwiGLU MLP, no biases,
 * untied, grouped-query attention. */
static const family families[] = {
    {"gpt2", "n_layer", "n_embd", "n_head", NULL, "n_inner", 1, "n_positions",
     0, 0, 0, 1, 1, gpt2_drop, 0.1},
    {"gpt_neox", "num_hidden_layers", "hidden_size", "num_attention_heads", NULL,
     "intermediate_size", 0, "max_position_embeddings", 0, 1, 0, 1, 0, neox_drop, 0},
    {"llama", "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
     "intermediate_size", 0, "max_position_embeddings", 1, 1, 1, 0, 0, llama_drop, 0},
    {"mistral", "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
     "intermediate_size", 0, "max_position_embeddings", 1, 1, 1, 0, 0, llama_drop, 0},
};
#define N_FAMILIES ((int)(sizeof families / sizeof families[0]))
#define TYPES_HINT "gpt2, gpt_neox, llama or mistral"

/* ---------------------------------------------------------------- keys */

/* A member that is absent or JSON null (transformers writes null for
 * "use the default") reads as absent. */
static const cJSON *present(const cJSON *root, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* A required size: missing says which size the family calls it. */
static int size_key(jx *j, const cJSON *root, const family *f, const char *key,
                    const char *what, int64_t hi, int64_t *out)
{
    if (!present(root, key))
        return jx_fail(j, key, "missing (hint: a %s config.json gives the %s as %s)", f->type,
                       what, key);
    return jx_int(j, root, "", key, 1, 1, hi, out);
}

static int opt_size(jx *j, const cJSON *root, const char *key, int64_t hi, int64_t *out)
{
    if (!present(root, key)) return CL_OK;
    return jx_int(j, root, "", key, 1, 1, hi, out);
}

static int opt_bool(jx *j, const cJSON *root, const char *key, int *out)
{
    if (!present(root, key)) return CL_OK;
    return jx_bool(j, root, "", key, 1, out);
}

/* Any dropout probability above 0 counts as dropout in every place
 * transformer.h puts it (after the softmax and both residual branches). */
static int read_dropout(jx *j, const cJSON *root, const family *f, int *dropout)
{
    *dropout = 0;
    for (const char *const *k = f->drop; *k; k++) {
        double p = f->drop_default;
        if (present(root, *k)) {
            int rc = jx_num(j, root, "", *k, 1, 0, 1, &p);
            if (rc) return rc;
            if (p >= 1)
                return jx_fail(j, *k, "dropout probability must be below 1 (hint: 0 <= p < 1)");
        }
        if (p > 0) *dropout = 1;
    }
    return CL_OK;
}

static int read_dtype(jx *j, const cJSON *root, const hf_opts *o, hf_info *info)
{
    static const char *const names[] = {[MODEL_F32] = "float32", [MODEL_F16] = "float16",
                                        [MODEL_BF16] = "bfloat16"};
    if (o->dtype >= 0) {
        info->dtype = (model_dtype)o->dtype;
        return CL_OK;
    }
    /* newer transformers write "dtype", older "torch_dtype" */
    const char *key = present(root, "torch_dtype") ? "torch_dtype" : "dtype";
    const cJSON *v = present(root, key);
    if (!v) {
        info->dtype = MODEL_F32;
        info->dtype_default = 1;
        return CL_OK;
    }
    if (!cJSON_IsString(v))
        return jx_fail(j, key, "expected a string such as \"bfloat16\" (hint: or --dtype)");
    for (int i = 0; i < MODEL_DTYPE_COUNT; i++)
        if (strcmp(v->valuestring, names[i]) == 0) {
            info->dtype = (model_dtype)i;
            return CL_OK;
        }
    return jx_fail(j, key, "\"%.32s\" is not a precision cleave models (hint: float32, float16 or "
                           "bfloat16; --dtype chooses one)",
                   v->valuestring);
}

/* The family's model_type, or a message naming the known ones. */
static int read_family(jx *j, const cJSON *root, const family **out)
{
    if (!cJSON_IsObject(root))
        return jx_fail(j, "", "expected a JSON object at the top level (hint: a Hugging Face "
                              "config.json names its model_type and sizes)");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (cJSON_IsString(fmt) && strncmp(fmt->valuestring, "cleave-", 7) == 0)
        return jx_fail(j, "format", "\"%.32s\": a cleave file, not a Hugging Face config.json "
                                    "(hint: cleave import reads config.json or .onnx; cleave's "
                                    "own model files are used as they are)",
                       fmt->valuestring);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (!t)
        return jx_fail(j, "model_type", "missing (hint: a Hugging Face config.json names its "
                                        "family: " TYPES_HINT ")");
    if (!cJSON_IsString(t))
        return jx_fail(j, "model_type", "expected a string (hint: " TYPES_HINT ")");
    for (int i = 0; i < N_FAMILIES; i++)
        if (strcmp(t->valuestring, families[i].type) == 0) {
            *out = &families[i];
            return CL_OK;
        }
    return jx_fail(j, "model_type", "\"%.40s\" is not a family cleave imports (hint: " TYPES_HINT
                                    "; for another transformer write a model file of block layers, "
                                    "docs/formats.md)",
                   t->valuestring);
}

/* Keys of one family that change the parameter count in a way the
 * transformer of transformer.h cannot express: refused, not ignored. */
static int read_quirks(jx *j, const cJSON *root, const family *f, int64_t hidden, int64_t heads,
                       hf_info *info, int *bias)
{
    int rc, flag = 0;
    if (strcmp(f->type, "gpt2") == 0) {
        if ((rc = opt_bool(j, root, "add_cross_attention", &flag))) return rc;
        if (flag)
            return jx_fail(j, "add_cross_attention", "cross-attention is not modelled (hint: "
                                                     "cleave imports decoder-only models)");
        return CL_OK;
    }
    if (strcmp(f->type, "gpt_neox") == 0) {
        double pct = 1;
        const char *k = present(root, "rotary_pct") ? "rotary_pct" : "partial_rotary_factor";
        if (present(root, k) && (rc = jx_num(j, root, "", k, 1, 0, 1, &pct))) return rc;
        if (!(pct > 0)) return jx_fail(j, k, "expected a share of the head in (0, 1]");
        flag = 1;
        if ((rc = opt_bool(j, root, "attention_bias", &flag))) return rc;
        if (!flag)
            return jx_fail(j, "attention_bias", "false is not modelled: GPT-NeoX's MLP keeps its "
                                                "biases (hint: cleave's transformer has biases on "
                                                "every linear layer or on none)");
        return opt_bool(j, root, "use_parallel_residual", &flag);
    }
    /* llama, mistral */
    int ab = 0, mb = 0;
    if ((rc = opt_bool(j, root, "attention_bias", &ab)) || (rc = opt_bool(j, root, "mlp_bias", &mb)))
        return rc;
    if (ab != mb)
        return jx_fail(j, "mlp_bias", "%s with attention_bias %s is not modelled (hint: cleave's "
                                      "transformer has biases on every linear layer or on none)",
                       mb ? "true" : "false", ab ? "true" : "false");
    *bias = ab;
    int64_t hd = 0;
    if ((rc = opt_size(j, root, "head_dim", HF_MAX_WIDTH, &hd))) return rc;
    if (hd && hd * heads != hidden)
        return jx_fail(j, "head_dim", "%lld x %lld heads is not hidden_size %lld (hint: cleave "
                                      "models heads of hidden_size / num_attention_heads)",
                       (long long)hd, (long long)heads, (long long)hidden);
    return opt_size(j, root, "sliding_window", HF_MAX_POSITIONS, &info->sliding_window);
}

/* ------------------------------------------------------------ the read */

static int choose_seq(jx *j, const family *f, const hf_opts *o, hf_info *info, int64_t *seq)
{
    int64_t max = info->max_positions;
    if (o->seq <= 0) {
        *seq = max < HF_SEQ_CAP ? max : HF_SEQ_CAP;
        info->seq_capped = max > HF_SEQ_CAP;
        return CL_OK;
    }
    if (o->seq > HF_MAX_POSITIONS)
        return jx_fail(j, f->pos, "--seq %lld is above the limit %lld (hint: a shorter --seq)",
                       (long long)o->seq, (long long)HF_MAX_POSITIONS);
    if (o->seq > max && !f->rotary)
        return jx_fail(j, f->pos, "--seq %lld is longer than the %lld rows of the learned position "
                                  "table (hint: --seq %lld or less)",
                       (long long)o->seq, (long long)max, (long long)max);
    info->seq_beyond = o->seq > max;
    *seq = o->seq;
    return CL_OK;
}

/* The jx_format reader (out is the zeroed hf_info, j->ctx the options). */
static int read_config(jx *jp, const cJSON *root, int version, void *out)
{
    (void)version;
    const hf_opts *o = jp->ctx;
    hf_info *info = out;
    jx j = *jp;
    cl_err *e = j.e;
    const family *f = NULL;
    int rc = read_family(&j, root, &f);
    if (rc) return rc;
    snprintf(info->model_type, sizeof info->model_type, "%s", f->type);
    info->pos_key = f->pos;
    int64_t L = 0, h = 0, a = 0, g = 0, ff = 0, V = 0;
    if ((rc = size_key(&j, root, f, f->layers, "number of layers", HF_MAX_LAYERS, &L)) ||
        (rc = size_key(&j, root, f, f->hidden, "hidden size", HF_MAX_WIDTH, &h)) ||
        (rc = size_key(&j, root, f, f->heads, "number of attention heads", HF_MAX_WIDTH, &a)) ||
        (rc = size_key(&j, root, f, f->pos, "longest sequence", HF_MAX_POSITIONS,
                       &info->max_positions)) ||
        (rc = size_key(&j, root, f, "vocab_size", "vocabulary size", HF_MAX_VOCAB, &V)))
        return rc;
    if (f->ffn_optional) {
        ff = 4 * h;
        if ((rc = opt_size(&j, root, f->ffn, HF_MAX_FFN, &ff))) return rc;
    } else if ((rc = size_key(&j, root, f, f->ffn, "MLP inner size", HF_MAX_FFN, &ff))) {
        return rc;
    }
    g = a;
    if (f->kv && (rc = opt_size(&j, root, f->kv, HF_MAX_WIDTH, &g))) return rc;
    if (h % a)
        return jx_fail(&j, f->hidden, "%lld is not a multiple of %s %lld (hint: every head has "
                                      "hidden / heads features)",
                       (long long)h, f->heads, (long long)a);
    if (a % g)
        return jx_fail(&j, f->kv, "%lld does not divide %s %lld (hint: each key/value head "
                                  "serves the same number of query heads)",
                       (long long)g, f->heads, (long long)a);
    int tied = f->tied, dropout = 0, bias = f->bias;
    if ((rc = opt_bool(&j, root, "tie_word_embeddings", &tied)) ||
        (rc = read_dropout(&j, root, f, &dropout)) ||
        (rc = read_quirks(&j, root, f, h, a, info, &bias)) || (rc = read_dtype(&j, root, o, info)))
        return rc;
    int64_t s = 0;
    if ((rc = choose_seq(&j, f, o, info, &s))) return rc;
    tfm_desc d = {.layers = L, .hidden = h, .heads = a, .groups = g, .ffn = ff, .gated = f->gated,
                  .seq = s, .vocab = V, .tied = tied,
                  .pos = f->rotary ? TFM_POS_ROTARY : TFM_POS_LEARNED,
                  .norm = f->rms ? TFM_NORM_RMS : TFM_NORM_LAYER, .bias = bias, .dropout = dropout,
                  .positions = f->rotary ? 0 : info->max_positions};
    if ((rc = tfm_check(&d, NULL, e))) return rc; /* the reads above make this pass */
    /* the model format's limits, named by the sizes that reach them */
    tfm_model_sizes z = tfm_model_sizes_of(&d, info->dtype);
    double eb = model_dtype_bytes(info->dtype);
    if (z.params > (double)MODEL_MAX_PARAMS)
        return jx_fail(&j, f->layers, "the model would have %.4g parameters, above the limit 2^53 "
                                      "(hint: check %s, %s and vocab_size)",
                       z.params, f->layers, f->hidden);
    if (z.out_elems > (double)MODEL_MAX_ELEMS || z.stash_bytes > (double)MODEL_MAX_ELEMS * eb)
        return jx_fail(&j, f->pos, "a sequence of %lld tokens makes a layer keep %.4g bytes per "
                                   "sequence, above the model format's 2^40 elements (hint: a "
                                   "shorter --seq)",
                       (long long)s, z.stash_bytes);
    info->desc = d;
    return CL_OK;
}

/* A config.json has no cleave header: the skeleton's foreign form (tag
 * NULL) parses it under JX_MAX_FILE_BYTES and hands it to read_config. */
static const jx_format hf_format = {.tag = NULL, .max_version = 0, .members = NULL,
                                    .size = sizeof(hf_info), .read = read_config,
                                    .release = NULL};
static const hf_opts no_opts = {.seq = 0, .dtype = -1, .name = NULL};

int hf_config_read(const cJSON *root, const char *file, const hf_opts *o, hf_info *info,
                   cl_err *e)
{
    return jx_decode(&hf_format, root, file, o ? o : &no_opts, info, e);
}

/* --------------------------------------------------------------- import */

void hf_name_from_path(const char *path, char *buf, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strcmp(base, "config.json") == 0 && base > path) {
        /* the folder: path[..base-1) without trailing slashes */
        const char *end = base - 1;
        while (end > path && end[-1] == '/') end--;
        const char *start = end;
        while (start > path && start[-1] != '/') start--;
        if (end > start && !(end - start == 1 && *start == '.')) {
            snprintf(buf, cap, "%.*s", (int)(end - start), start);
            esc_name_fix(buf);
            return;
        }
    }
    snprintf(buf, cap, "%s", base);
    size_t n = strlen(buf);
    if (n > 5 && strcmp(buf + n - 5, ".json") == 0) buf[n - 5] = 0;
    esc_name_fix(buf);
}

/* The model's name: --name checked against the names rule, else derived. */
static int model_name(const char *file, const hf_opts *o, char *name, size_t cap, cl_err *e)
{
    if (!o || !o->name) {
        hf_name_from_path(file, name, cap);
        return CL_OK;
    }
    const char *bad = esc_name_problem(o->name);
    if (bad)
        return cl_fail(e, CL_EINPUT, "%s: --name: the name \"%.40s\" %s (hint: %s)", file, o->name,
                       bad, JX_NAME_HINT);
    snprintf(name, cap, "%s", o->name);
    return CL_OK;
}

int hf_import_text(model *m, const char *text, size_t len, const char *file,
                   const hf_opts *o, hf_info *info, cl_err *e)
{
    hf_info local;
    if (!info) info = &local;
    memset(m, 0, sizeof *m);
    char name[MODEL_NAME_MAX];
    int rc = model_name(file, o, name, sizeof name, e);
    if (rc) return rc;
    cJSON *root = NULL;
    rc = jx_parse_text(file, text, len, &root, e);
    if (!rc) rc = hf_config_read(root, file, o, info, e);
    cJSON_Delete(root);
    if (!rc) rc = tfm_model_build(m, &info->desc, info->dtype, name, file, e);
    return rc;
}

int hf_import(model *m, const char *path, const hf_opts *o, hf_info *info, cl_err *e)
{
    hf_info local;
    if (!info) info = &local;
    memset(m, 0, sizeof *m);
    char name[MODEL_NAME_MAX];
    int rc = model_name(path, o, name, sizeof name, e);
    if (!rc) rc = jx_load(&hf_format, path, o ? o : &no_opts, info, e);
    if (!rc) rc = tfm_model_build(m, &info->desc, info->dtype, name, path, e);
    return rc;
}
