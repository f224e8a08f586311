/* cmd_import.c - `cleave import MODEL.onnx -o MODEL.json`: an ONNX graph as
 * a cleave model file (models/onnx_import.h; docs/formats.md, "Importing
 * ONNX").  The model file is written atomically (cl_write_file): a failed
 * import leaves no partial file.  A summary goes to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "base/jsonx.h"
#include "cli.h"
#include "models/onnx_import.h"

static int help(void)
{
    printf("usage: cleave import MODEL.onnx [-o MODEL.json] [--name NAME] [--price-unknown refuse|memory]\n\n"
           "Turns an ONNX graph into a cleave model file (stdout without -o): every node a\n"
           "layer, the DAG kept; conv2d, linear, relu, batchnorm2d, pools, add, flatten and\n"
           "dropout where the node fits the kind exactly, else a block with the node's FLOPs,\n"
           "parameters and bytes.  Shapes come from the graph input's fixed shape; a symbolic\n"
           "batch axis counts as 1 (costs are per sample).\n"
           "  --name NAME               the model's name (default: the file's base name)\n"
           "  --price-unknown memory    price an operator cleave does not know as memory-bound\n"
           "                            (no FLOPs: the roofline charges bytes in + out) instead\n"
           "                            of refusing the file; each such node is named on stderr\n");
    return 0;
}

typedef struct import_args {
    const char *out, *name;
    int price;              /* --price-unknown: 0 refuse (default), 1 memory */
    cli_list args;          /* MODEL.onnx */
} import_args;

static const cli_opt import_opts[] = {
    {"out", 'o', CLI_STR, CLI_FIELD(import_args, out), .help = NULL},
    {"name", 0, CLI_STR, CLI_FIELD(import_args, name), .help = NULL},
    {"price-unknown", 0, CLI_ENUM, CLI_FIELD(import_args, price), .words = "refuse|memory", .help = NULL},
};
static const cli_spec import_spec = {"import", import_opts, CLI_N(import_opts), .args = CLI_AT(import_args, args)};

int cmd_import(int argc, char **argv)
{
    import_args x = {0};
    int rc = cli_parse(&import_spec, argc, argv, &x, 0);
    if (rc) return rc == CLI_HELP ? help() : rc;
    if (x.args.n > 1)
        return cli_usage_error("import", "one ONNX file at a time (got %s and %s)", x.args.v[0], x.args.v[1]);
    const char *path = x.args.n ? x.args.v[0] : NULL, *out = x.out, *name = x.name;
    onnx_import_opts o = {.notes = stderr, .price_unknown_memory = x.price == 1};
    if (!path) return cli_usage_error("import", "missing MODEL.onnx");
    cl_err e = {0};
    if (out && cl_out_check(out, &e)) return cli_report(&e);
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
