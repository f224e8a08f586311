/* cmd_inspect.c - `cleave inspect FILE [--json]`: recognise the file's kind
 * by its "format" member (or a PipeDream graph by its first line) and hand it
 * to that kind's printer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "base/escape.h"
#include "base/fileio.h"
#include "inspect.h"
#include "base/jsonx.h"

static int help(void)
{
    printf("usage: cleave inspect FILE [--json]\n\n"
           "Shows a model (layers, shapes, parameters, FLOPs, activations and totals),\n"
           "a cluster (device types, devices, links), device presets (profiles/devices.json),\n"
           "a profile (per-layer times) or a PipeDream graph.txt profile.  --json prints\n"
           "the same as JSON.\n");
    return 0;
}

typedef struct inspect_args {
    int json;
    cli_list args;          /* FILE */
} inspect_args;

static const cli_opt inspect_opts[] = {
    {"json", 0, CLI_FLAG, CLI_FIELD(inspect_args, json), .help = NULL},
};
static const cli_spec inspect_spec = {"inspect", inspect_opts, CLI_N(inspect_opts),
                                      .args = CLI_AT(inspect_args, args)};

int cmd_inspect(int argc, char **argv)
{
    inspect_args x = {0};
    int rc = cli_parse(&inspect_spec, argc, argv, &x, 0);
    if (rc) return rc == CLI_HELP ? help() : rc;
    if (x.args.n > 1)
        return cli_usage_error("inspect", "one file at a time (got %s and %s)", x.args.v[0], x.args.v[1]);
    const char *path = x.args.n ? x.args.v[0] : NULL;
    int as_json = x.json;
    if (!path) return cli_usage_error("inspect", "missing FILE");

    cl_err e = {0};
    char *text;
    size_t len;
    if (cl_read_file(path, JX_MAX_FILE_BYTES, &text, &len, &e)) return cli_report(&e);
    /* PipeDream graphs are text: "nodeN -- Module(...) -- forward_compute_time=..." */
    size_t plen = strlen(path);
    int pipedream = (plen > 4 && !strcmp(path + plen - 4, ".txt")) ||
                    (strstr(text, " -- ") && strstr(text, "forward_compute_time="));
    if (pipedream) {
        free(text);
        return inspect_profile(path, as_json);
    }
    cJSON *root;
    rc = jx_parse_text(path, text, len, &root, &e);
    free(text);
    if (rc) return cli_report(&e);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    char kind[32] = "";
    if (cJSON_IsString(f)) snprintf(kind, sizeof kind, "%s", f->valuestring);
    cJSON_Delete(root);
    if (!strcmp(kind, "cleave-model")) return inspect_model(path, as_json);
    if (!strcmp(kind, "cleave-cluster")) return inspect_cluster(path, as_json);
    if (!strcmp(kind, "cleave-profile")) return inspect_profile(path, as_json);
    if (!strcmp(kind, "cleave-plan")) return inspect_plan(path, as_json);
    if (!strcmp(kind, "cleave-devices")) return inspect_devices(path, as_json);
    char *shown = esc_term(kind); /* from the file: no control byte to the terminal */
    fprintf(stderr, "cleave: %s: format: expected \"cleave-model\", \"cleave-cluster\", "
                    "\"cleave-profile\", \"cleave-plan\" or \"cleave-devices\"%s%s%s (hint: see docs/formats.md)\n",
            path, kind[0] ? ", got \"" : "", shown, kind[0] ? "\"" : "");
    free(shown);
    return 2;
}
