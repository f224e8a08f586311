/* cmd_import.c - `cleave import MODEL.onnx -o MODEL.json`: an ONNX graph as
 * a cleave model file (models/onnx_import.h; docs/formats.md, "Importing
 * ONNX").  The model file is written atomically (cl_write_file): a failed
 * import leaves no partial file.  A summary goes to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/jsonx.h"
#include "cli.h"
#include "models/onnx_import.h"

static int help(void)
{
    printf("usage: cleave import MODEL.onnx [-o MODEL.json] [--name NAME] [--price-unknown memory]\n\n"
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

int cmd_import(int argc, char **argv)
{
    const char *path = NULL, *out = NULL, *name = NULL;
    onnx_import_opts o = {.notes = stderr};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return help();
        else if (!strcmp(a, "-o") || !strcmp(a, "--name") || !strcmp(a, "--price-unknown")) {
            if (i + 1 >= argc) return cli_usage_error("import", "%s needs a value", a);
            const char *v = argv[++i];
            if (a[1] == 'o') out = v;
            else if (a[2] == 'n') name = v;
            else if (!strcmp(v, "memory")) o.price_unknown_memory = 1;
            else return cli_usage_error("import", "--price-unknown: expected memory, got \"%s\"", v);
        } else if (a[0] == '-' && a[1]) return cli_usage_error("import", "unknown option %s", a);
        else if (path) return cli_usage_error("import", "one ONNX file at a time (got %s and %s)", path, a);
        else path = a;
    }
    if (!path) return cli_usage_error("import", "missing MODEL.onnx");
    cl_err e = {0};
    if (out && cl_out_check(out, &e)) return cli_report(&e);
    model m;
    onnx_import_stats st;
    if (onnx_import(&m, path, name, &o, &st, &e)) return cli_report(&e);
    model_totals t = model_sum(&m);
    /* cl_out underneath: "-" is stdout, a file is replaced atomically */
    int rc = jx_save(out ? out : "-", model_to_json(&m), &e);
    if (!rc)
        fprintf(stderr, "cleave import: %s: opset %lld, %d nodes -> %d layers (%d blocks, %d constants folded%s), "
                        "%llu params, %.4g GMAC (conv/gemm/matmul), %.4g GFLOP forward\n",
                path, (long long)st.opset, st.nodes, m.n_layers, st.blocks, st.constants,
                st.unknown_priced ? ", unknown operators priced as memory-bound" : "",
                (unsigned long long)t.params, st.macs / 1e9, t.fwd_flops / 1e9);
    model_free(&m);
    return rc ? cli_report(&e) : 0;
}
