/* cmd_import.c - `cleave import FILE -o MODEL.json`: an ONNX graph
 * (models/onnx_import.h; docs/formats.md, "ONNX import") or a Hugging Face
 * config.json (models/hf_config.h; docs/transformer.md, "Importing a
 * Hugging Face config.json") as a cleave model file.  Which of the two a
 * file is, is read from its first bytes, not its name.  The model file is
 * written atomically (cl_write_file): a failed import leaves no partial
 * file.  A summary and notes on the defaults taken go to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "base/jsonx.h"
#include "cli.h"
#include "models/hf_config.h"
#include "models/onnx_import.h"

static int help(void)
{
    printf("usage: cleave import MODEL.onnx [-o MODEL.json] [--name NAME] [--price-unknown refuse|memory]\n"
           "       cleave import config.json [-o MODEL.json] [--name NAME] [--seq N] [--dtype T]\n\n"
           "Turns an ONNX graph into a cleave model file (stdout without -o): every node a\n"
           "layer, the DAG kept; conv2d, linear, relu, batchnorm2d, pools, add, flatten and\n"
           "dropout where the node fits the kind exactly, else a block with the node's FLOPs,\n"
           "parameters and bytes.  Shapes come from the graph input's fixed shape; a symbolic\n"
           "batch axis counts as 1 (costs are per sample).\n"
           "  --name NAME               the model's name (default: the file's base name)\n"
           "  --price-unknown memory    price an operator cleave does not know as memory-bound\n"
           "                            (no FLOPs: the roofline charges bytes in + out) instead\n"
           "                            of refusing the file; each such node is named on stderr\n\n"
           "A Hugging Face config.json (model_type gpt2, gpt_neox, llama or mistral) becomes\n"
           "an embedding block, one block per transformer layer and a head block, with the\n"
           "closed-form costs of models/transformer.h per sequence (docs/transformer.md).\n"
           "The file's kind is read from its content (JSON or protobuf), not its name.\n"
           "  --name NAME               default: the folder of a config.json, else the file name\n"
           "  --seq N                   sequence length (default: the config's maximum\n"
           "                            positions, at most %d)\n"
           "  --dtype T                 float32, float16 or bfloat16 (default: the config's\n"
           "                            torch_dtype; float32 when it names none)\n",
           HF_SEQ_CAP);
    return 0;
}

typedef struct import_args {
    const char *out, *name;
    int price;              /* --price-unknown: 0 refuse (default), 1 memory */
    int price_given;
    int64_t seq;            /* --seq (config.json), 0: the config's */
    int dtype;              /* --dtype (config.json): a model_dtype, -1: the config's */
    cli_list args;          /* MODEL.onnx or config.json */
} import_args;

static const cli_opt import_opts[] = {
    {"out", 'o', CLI_STR, CLI_FIELD(import_args, out), .help = NULL},
    {"name", 0, CLI_STR, CLI_FIELD(import_args, name), .help = NULL},
    {"price-unknown", 0, CLI_ENUM, CLI_FIELD(import_args, price), .words = "refuse|memory",
     .given = CLI_AT(import_args, price_given), .help = NULL},
    {"seq", 0, CLI_INT, CLI_FIELD(import_args, seq), .ilo = 1, .ihi = HF_MAX_POSITIONS, .help = NULL},
    /* the order of model_dtype: the index is the dtype */
    {"dtype", 0, CLI_ENUM, CLI_FIELD(import_args, dtype), .words = "float32|float16|bfloat16", .help = NULL},
};
_Static_assert(MODEL_F32 == 0 && MODEL_F16 == 1 && MODEL_BF16 == 2, "--dtype words out of order");
static const cli_spec import_spec = {"import", import_opts, CLI_N(import_opts), .args = CLI_AT(import_args, args)};

/* Is the file JSON (a config.json) rather than protobuf (ONNX)?  JSON text
 * starts, after white space and an optional UTF-8 byte order mark, with
 * '{' or '['; an ONNX ModelProto starts with a field tag, and no field of
 * ModelProto is written as those bytes (0x7b is field 15 as a group, 0x5b
 * field 11 as a group, neither of which ModelProto has).  1 JSON, 0 not,
 * or CL_EINPUT (-) with e set when the file cannot be read. */
static int looks_json(const char *path, cl_err *e)
{
    int fd;
    struct stat st;
    int rc = cl_in_open(path, 0, &fd, &st, e);
    if (rc) return -rc;
    unsigned char head[256];
    ssize_t n = read(fd, head, sizeof head);
    close(fd);
    if (n < 0) return -cl_fail(e, CL_EINPUT, "%s: cannot read (hint: check the file)", path);
    ssize_t i = 0;
    if (n >= 3 && head[0] == 0xef && head[1] == 0xbb && head[2] == 0xbf) i = 3;
    while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) i++;
    return i < n && (head[i] == '{' || head[i] == '[');
}

static void notes(const char *safe, const hf_info *in)
{
    const tfm_desc *d = &in->desc;
    if (in->seq_capped)
        fprintf(stderr, "cleave import: %s: note: sequence %lld, the config's %s %lld capped at %d "
                        "(--seq N chooses)\n",
                safe, (long long)d->seq, in->pos_key, (long long)in->max_positions, HF_SEQ_CAP);
    if (in->seq_beyond)
        fprintf(stderr, "cleave import: %s: note: --seq %lld is longer than %s %lld: the model was "
                        "not trained at this length\n",
                safe, (long long)d->seq, in->pos_key, (long long)in->max_positions);
    if (in->dtype_default)
        fprintf(stderr, "cleave import: %s: note: no torch_dtype: float32, as transformers loads "
                        "it (--dtype bfloat16 for mixed-precision training)\n", safe);
    if (in->sliding_window && in->sliding_window < d->seq)
        fprintf(stderr, "cleave import: %s: note: sliding_window %lld is not modelled: attention "
                        "is priced over all %lld positions\n",
                safe, (long long)in->sliding_window, (long long)d->seq);
}

static int import_hf(const import_args *x, const char *path)
{
    if (x->price_given) {
        char *safe = esc_term(path);
        int rc = cli_usage_error("import", "--price-unknown applies to ONNX files, and %s is JSON", safe);
        free(safe);
        return rc;
    }
    hf_opts o = {.seq = x->seq, .dtype = x->dtype, .name = x->name};
    cl_err e = {0};
    model m;
    hf_info in;
    if (hf_import(&m, path, &o, &in, &e)) return cli_report(&e);
    model_totals t = model_sum(&m);
    int rc = jx_save(x->out ? x->out : "-", model_to_json(&m), &e);
    if (!rc) {
        const tfm_desc *d = &in.desc;
        char *safe = esc_term(path);
        notes(safe, &in);
        fprintf(stderr, "cleave import: %s: %s, %lld layers, hidden %lld, %lld heads (%lld key/value), "
                        "MLP %lld%s, vocabulary %lld%s; sequence %lld, %s -> %d layers, %llu params, "
                        "%.4g TFLOP forward per sequence\n",
                safe, in.model_type, (long long)d->layers, (long long)d->hidden, (long long)d->heads,
                (long long)d->groups, (long long)d->ffn, d->gated ? " gated" : "",
                (long long)d->vocab, d->tied ? " tied" : "", (long long)d->seq,
                model_dtype_name(m.dtype), m.n_layers, (unsigned long long)t.params,
                t.fwd_flops / 1e12);
        free(safe);
    }
    model_free(&m);
    return rc ? cli_report(&e) : 0;
}

int cmd_import(int argc, char **argv)
{
    import_args x = {.dtype = -1};
    int rc = cli_parse(&import_spec, argc, argv, &x, 0);
    if (rc) return rc == CLI_HELP ? help() : rc;
    if (x.args.n > 1) {
        char *a = esc_term(x.args.v[0]), *b = esc_term(x.args.v[1]);
        rc = cli_usage_error("import", "one file at a time (got %s and %s)", a, b);
        free(a);
        free(b);
        return rc;
    }
    const char *path = x.args.n ? x.args.v[0] : NULL, *out = x.out, *name = x.name;
    if (!path) return cli_usage_error("import", "missing MODEL.onnx or config.json");
    cl_err e = {0};
    if (out && cl_out_check(out, &e)) return cli_report(&e);
    int json = looks_json(path, &e);
    if (json < 0) return cli_report(&e);
    if (json) return import_hf(&x, path);
    if (x.seq || x.dtype >= 0) {
        char *safe = esc_term(path);
        rc = cli_usage_error("import", "--seq and --dtype apply to a config.json, and %s is not JSON", safe);
        free(safe);
        return rc;
    }
    onnx_import_opts o = {.notes = stderr, .price_unknown_memory = x.price == 1};
    model m;
    onnx_import_stats st;
    if (onnx_import(&m, path, name, &o, &st, &e)) return cli_report(&e);
    model_totals t = model_sum(&m);
    /* cl_out underneath: "-" is stdout, a file is replaced atomically */
    rc = jx_save(out ? out : "-", model_to_json(&m), &e);
    if (!rc) {
        char *safe = esc_term(path); /* a path may hold control bytes */
        fprintf(stderr, "cleave import: %s: opset %lld, %d nodes -> %d layers (%d blocks, %d constants folded%s), "
                        "%llu params, %.4g GMAC (conv/gemm/matmul), %.4g GFLOP forward\n",
                safe, (long long)st.opset, st.nodes, m.n_layers, st.blocks, st.constants,
                st.unknown_priced ? ", unknown operators priced as memory-bound" : "",
                (unsigned long long)t.params, st.macs / 1e9, t.fwd_flops / 1e9);
        free(safe);
    }
    model_free(&m);
    return rc ? cli_report(&e) : 0;
}
