/* fidelity.c - published runs against cleave's prediction (fidelity.h). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "bench/fidelity.h"
#include "models/tfm_model.h"
#include "planner/layout.h"
#include "profiles/tfm_time.h"
#include "profiles/cluster.h"

/* Largest file read, bytes (the collected table is about 150 KiB). */
#define FID_MAX_BYTES (16u << 20)
#define FID_MAX_FIELDS 64
/* What NCCL moved through one of Jean Zay's Omni-Path cards, bytes/s each
 * way: 40.5 Gb/s bus bandwidth of a 4 GB all-reduce over 4 A100 nodes, whose
 * two rings both left every node through one card (NET/IB/3 out, NET/IB/1
 * in), in bigscience-workshop/bigscience
 * experiments/bandwidth/all_reduce_bench-a100-n4.txt (devices.md) */
#define JZ_OPA_CARD_NCCL_BPS 5.07e9

/* ------------------------------------------------------------------ CSV -- */

/* One record of RFC 4180 CSV from *at (quoted fields may hold commas,
 * doubled quotes and line breaks): fields NUL-terminated in place, their
 * starts in f[]; *line advanced past it.  Returns the field count, 0 at the
 * end, -1 for a quote that never closes or too many fields. */
static int csv_record(char **at, char *end, char **f, int *line)
{
    char *p = *at, *w;
    int n = 0;
    if (p >= end) return 0;
    for (;;) {
        if (n == FID_MAX_FIELDS) return -1;
        f[n++] = w = p;
        if (p < end && *p == '"') {
            for (p++;; p++) {
                if (p >= end) return -1;
                if (*p == '"' && p + 1 < end && p[1] == '"') *w++ = *p++;
                else if (*p == '"') break;
                else {
                    if (*p == '\n') ++*line;
                    *w++ = *p;
                }
            }
            p++;
            if (p < end && *p != ',' && *p != '\n' && *p != '\r') return -1;
        } else {
            while (p < end && *p != ',' && *p != '\n' && *p != '\r') *w++ = *p++;
        }
        char c = p < end ? *p : '\n';
        if (p < end) p++; /* past the delimiter, before the NUL lands on it */
        if (c == '\r' && p < end && *p == '\n') p++;
        *w = 0;
        if (c == ',') continue;
        ++*line;
        *at = p;
        return n;
    }
}

/* The columns read, by header name. */
enum { C_ID, C_SRC, C_HW, C_GPUS, C_GPN, C_LAYERS, C_HIDDEN, C_HEADS, C_SEQ, C_VOCAB, C_BATCH, C_MB,
       C_TP, C_PP, C_DP, C_CP, C_VS, C_SCHED, C_RECOMP, C_SP, C_PREC, C_ZERO, C_ITER, C_NET,
       C_ARCH, C_KV, C_FFN, C_ATTN, C_FW, C_GRAD, C_N };
/* Columns from C_OPTIONAL on may be missing from the header (a table
 * without them describes GPT-family models only); an absent one reads as
 * an empty field. */
#define C_OPTIONAL C_ARCH
static const char *const col_names[C_N] = {
    "id", "source_key", "hardware", "gpus", "gpus_per_node", "layers", "hidden", "heads", "seq_len",
    "vocab", "global_batch", "micro_batch", "tensor_parallel", "pipeline_parallel", "data_parallel",
    "context_parallel", "virtual_stages", "schedule", "recomputation", "sequence_parallel",
    "precision", "zero_stage", "iteration_s", "interconnect", "architecture", "kv_heads", "ffn", "attention",
    "framework", "grad_reduce"};

/* A positive integer field; 0 when empty or not one. */
static long long pos_ll(const char *s)
{
    if (!*s || !isdigit((unsigned char)*s)) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    return errno || *end || v < 1 ? 0 : v;
}

/* ----------------------------------------------------------- one row -- */

/* The device preset, links and node size of a row's hardware; NULL reason
 * when known.  Inter-node bandwidth is per GPU, one direction, from the
 * system's network cards (bench/fidelity/devices.md); latencies are those
 * of profiles/clusters/dgx-a100-4nodes.json.  The in-node rates and the
 * DGX A100's inter-node rate are also the cluster presets' (dgx-a100-*,
 * h100-8-nvlink); tests/test_layout.c fails when the two disagree. */
static const char *row_hardware(const char *hw, const char *net, const char **preset, double *intra, double *inter)
{
    if (strstr(hw, "H100")) {
        *preset = "H100-80GB";
        /* NVLink 4: 450 GB/s each way on the wire, about 370 GB/s as NCCL
         * moves it (protocol overhead; bench/fidelity/devices.md) */
        *intra = 370e9;
        /* one ConnectX-7 NDR 400 Gb/s card per GPU: 50 GB/s on the wire,
         * 48 GB/s as NCCL moves it (devices.md) */
        *inter = 48e9;
    } else if (strstr(hw, "A100")) {
        *preset = "A100-80GB";
        /* NVLink 3: 300 GB/s each way on the wire, about 230 GB/s as NCCL
         * moves it (128-byte payloads from the SMs; devices.md) */
        *intra = 230e9;
        /* Jean Zay: 4 Omni-Path cards of 100 Gb/s per 8-GPU node, each at
         * the 5.07 GB/s NCCL 2.10.3 moved through one in BigScience's own
         * benchmark (41% of its line rate); DGX A100: one HDR 200 Gb/s card
         * per GPU, 24 GB/s as NCCL moves it (devices.md) */
        *inter = strstr(net, "Omni-Path") || strstr(hw, "Jean Zay") ? 4 * JZ_OPA_CARD_NCCL_BPS / 8 : 24e9;
    } else if (strstr(hw, "V100")) {
        return "V100 DGX-2H rows give no model dimensions or node network";
    } else {
        return "hardware is not a device preset";
    }
    return NULL;
}

/* The layout of a row, or the reason it cannot be expressed. */
static const char *row_layout(char **f, plan_fixed *fx, plan_prec *prec)
{
    *prec = PREC_MIXED;
    *fx = (plan_fixed){.sched = -1, .recompute = TFM_RECOMP_NONE, .zero = 0, .sp = 0};
    fx->t = (int)pos_ll(f[C_TP]);
    fx->p = (int)pos_ll(f[C_PP]);
    fx->d = (int)pos_ll(f[C_DP]);
    fx->mb = (int)pos_ll(f[C_MB]);
    if (!fx->t || !fx->p || !fx->d) return "tensor, pipeline or data-parallel degree not published";
    if (!fx->mb) return "microbatch size not published";
    long long cp = pos_ll(f[C_CP]);
    if (cp > 1 << 20) return "context-parallel degree out of range";
    if (cp > 1) fx->c = (int)cp; /* named in the layout only when used, as the run does */
    if (strstr(f[C_PREC], "FP8") || strstr(f[C_PREC], "fp8")) *prec = PREC_FP8; /* Transformer Engine's */
    if (f[C_ZERO][0] == '3') return "ZeRO stage 3 is not modelled";
    if (f[C_ZERO][0] == '1') fx->zero = 1;
    if (!strncmp(f[C_RECOMP], "full", 4)) fx->recompute = TFM_RECOMP_FULL;
    else if (!strncmp(f[C_RECOMP], "selective", 9)) fx->recompute = TFM_RECOMP_SELECTIVE;
    if (!strncmp(f[C_SP], "yes", 3)) fx->sp = 1; /* "yes (the recipe's ...)" too */
    if (fx->t == 1) fx->sp = 0; /* nothing to split over */
    /* a fused (flash) attention kernel where the row's framework ran one,
     * else Megatron-LM's unfused kernels of 2021-2022 */
    fx->attn = strncmp(f[C_ATTN], "fused", 5) ? PROF_ATTN_UNFUSED : PROF_ATTN_FUSED;
    long long vs = pos_ll(f[C_VS]);
    if (strstr(f[C_SCHED], "interleaved") && vs > 1) {
        fx->sched = SCHED_INTERLEAVED;
        fx->v = (int)vs;
    } else if (strstr(f[C_SCHED], "interleaved") && !vs && fx->p > 1) {
        return "interleaved schedule without a published virtual-stage count";
    } else {
        fx->sched = SCHED_1F1B;
    }
    return NULL;
}

/* The model family of a row: GPT (Narayanan et al.'s, in *d already) when
 * `architecture` is empty or "gpt"; "llama" is LLaMA's (tfm_llama) with the
 * row's kv_heads and ffn.  NULL, or the reason the row cannot be priced. */
static const char *row_architecture(char **f, tfm_desc *d)
{
    const char *arch = f[C_ARCH];
    if (!*arch || !strcmp(arch, "gpt")) return NULL;
    if (strcmp(arch, "llama")) return "architecture is neither gpt nor llama";
    long long g = pos_ll(f[C_KV]), ff = pos_ll(f[C_FFN]);
    if (!g || !ff) return "a llama row needs kv_heads and ffn";
    *d = tfm_llama(d->layers, d->hidden, d->heads, g, ff, d->seq, d->vocab);
    return NULL;
}

/* A vocabulary "51200", or "250k" as some sources write it. */
static long long row_vocab(const char *s)
{
    char *end;
    errno = 0;
    long long v = isdigit((unsigned char)*s) ? strtoll(s, &end, 10) : 0;
    if (v < 1 || errno) return 0;
    if (*end == 'k') v *= 1000, end++;
    return !*end || !strncmp(end, " (", 2) ? v : 0;
}

/* Whether the row's framework runs a separate weight-gradient
 * accumulation kernel (tfm_rank_opts.wgrad_acc, priced by
 * plan_grad_acc_bytes in the gradient element size that framework keeps).
 * The runs on Megatron-LM's own kernels (2021-2022 Megatron-LM and
 * Megatron-DeepSpeed) add each 16-bit weight gradient into an accumulator
 * after every microbatch's backward (Megatron-LM's hook adds param.grad into
 * param.main_grad; DeepSpeed's bf16 optimizer into its fp32 copies).
 * Transformer Engine's runs (fused attention: NeMo, Megatron-Bridge)
 * accumulate inside the weight-gradient GEMM: none. */
static int row_wgrad_acc(const plan_fixed *fx)
{
    return fx->attn != PROF_ATTN_FUSED;
}

/* The element type of a row's model: bfloat16 where the row says bf16,
 * and for FP8 runs (Transformer Engine keeps bf16 weights); float16 for
 * the others (fp16 stated or implied, "mixed (16-bit)" of 2020-2022
 * Megatron-LM), which trains the same except for the gradient reduction's
 * default (core/plan.h, plan_grad_reduce_default). */
static model_dtype row_dtype(char **f)
{
    const char *p = f[C_PREC];
    return !strncmp(p, "bf16", 4) || !strncmp(p, "BF16", 4) || strstr(p, "FP8") || strstr(p, "fp8") ? MODEL_BF16
                                                                                                   : MODEL_F16;
}

/* The framework of a row (its `framework` column: "megatron ...",
 * "deepspeed ..."; empty: none) and the element size of its gradient
 * reduction: the `grad_reduce` column where the run's configuration sets
 * one ("bf16 ..." or "fp16 ...": 2, "fp32 ...": 4), else 0, the
 * framework's default for the row's precision. */
static plan_for row_framework(char **f)
{
    if (!strncmp(f[C_FW], "megatron", 8)) return PLAN_FOR_MEGATRON;
    if (!strncmp(f[C_FW], "deepspeed", 9)) return PLAN_FOR_DEEPSPEED;
    return PLAN_FOR_ANY;
}
static int row_grad_reduce(char **f)
{
    const char *g = f[C_GRAD];
    if (!strncmp(g, "bf16", 4) || !strncmp(g, "fp16", 4)) return 2;
    if (!strncmp(g, "fp32", 4)) return 4;
    return 0;
}

/* Evaluate one row: its prediction in *pred and *fits, or the reason in
 * why[] (CL_OK either way; the row is then listed as not expressed). */
static void row_eval(char **f, const char *where, double *pred, int *fits, char *lay, size_t lay_cap,
                     char *why, size_t cap)
{
    why[0] = lay[0] = 0;
    plan_fixed fx;
    plan_prec prec;
    const char *r = row_layout(f, &fx, &prec), *preset = NULL;
    double intra = 0, inter = 0;
    if (!r) r = row_hardware(f[C_HW], f[C_NET], &preset, &intra, &inter);
    long long L = pos_ll(f[C_LAYERS]), h = pos_ll(f[C_HIDDEN]), a = pos_ll(f[C_HEADS]), s = pos_ll(f[C_SEQ]),
              V = row_vocab(f[C_VOCAB]), B = pos_ll(f[C_BATCH]), N = pos_ll(f[C_GPUS]), K = pos_ll(f[C_GPN]);
    if (!r && (!L || !h || !a || !s || !V)) r = "model dimensions (layers, hidden, heads, seq_len, vocab) not all published";
    tfm_desc d = tfm_gpt(L, h, a, s, V);
    if (!r) r = row_architecture(f, &d);
    if (!r && !B) r = "global batch not published";
    if (!r && !K && N > 8) r = "GPUs per node not published";
    if (r) {
        snprintf(why, cap, "%s", r);
        return;
    }
    if (!K) K = N;
    plan_fixed_str(&fx, lay, lay_cap);
    /* the options beside the layout, as on the command line */
    if (fx.attn == PROF_ATTN_FUSED) snprintf(lay + strlen(lay), lay_cap - strlen(lay), " --attention fused");
    if (prec == PREC_FP8) snprintf(lay + strlen(lay), lay_cap - strlen(lay), " --precision fp8");
    if (row_framework(f) != PLAN_FOR_ANY)
        snprintf(lay + strlen(lay), lay_cap - strlen(lay), " --for %s", plan_for_name(row_framework(f)));
    if (row_grad_reduce(f)) snprintf(lay + strlen(lay), lay_cap - strlen(lay), " --grad-reduce-bytes %d", row_grad_reduce(f));
    cl_err e = {0};
    model md = {0};
    cluster cl = {0};
    cluster_devtype dt;
    plan_result res;
    char nofit[320];
    cluster_link li = {intra, 5e-6}, le = {inter, 10e-6};
    if (tfm_check(&d, NULL, &e) || tfm_model_build(&md, &d, row_dtype(f), "published", where, &e) ||
        cluster_devtype_preset(NULL, preset, &dt, &e) || cluster_uniform(&cl, &dt, (int)N, (int)K, li, le, &e)) {
        snprintf(why, cap, "%s", e.msg);
    } else {
        plan_request rq = {.model = &md, .cluster = &cl, .ref_type = &dt, .batch = (int)B,
                           .optimizer = OPTIM_ADAM, .precision = prec, .comm = 1, .replication = 1,
                           .framework = row_framework(f), .grad_reduce = row_grad_reduce(f),
                           .wgrad_acc = row_wgrad_acc(&fx) ? plan_grad_acc_bytes(row_dtype(f), prec, row_framework(f),
                                                                                  row_grad_reduce(f))
                                                           : 0,
                           .model_origin = where, .cluster_origin = where};
        if (plan_fixed_eval(&rq, &fx, where, &res, nofit, sizeof nofit, &e)) {
            snprintf(why, cap, "%s", e.msg);
        } else {
            *pred = res.plan.pred.iteration_s;
            *fits = !nofit[0];
            plan_result_free(&res);
        }
    }
    model_free(&md);
    cluster_free(&cl);
}

/* --------------------------------------------------------------- table -- */

static int header_map(char **f, int n, int *col, const char *csv, cl_err *e)
{
    for (int c = 0; c < C_N; c++) {
        col[c] = -1;
        for (int i = 0; i < n; i++)
            if (!strcmp(f[i], col_names[c])) col[c] = i;
        if (col[c] < 0 && c < C_OPTIONAL)
            return cl_fail(e, CL_EINPUT, "%s:1: no column \"%s\" (hint: the header of bench/fidelity/published-runs.csv)",
                           csv, col_names[c]);
    }
    return CL_OK;
}

static void csv_field(FILE *o, const char *s, int last)
{
    char *x = esc_csv(s);
    fprintf(o, "%s%s", x, last ? "\n" : ",");
    free(x);
}

int fidelity_run(const char *csv, const char *outdir, FILE *msg, fid_summary *sum, cl_err *e)
{
    memset(sum, 0, sizeof *sum);
    char *text = NULL;
    size_t len = 0;
    int rc = cl_read_file(csv, FID_MAX_BYTES, &text, &len, e);
    if (rc) return rc;
    /* the records are parsed in place, twice: the second pass reads a copy
     * of what the first checked (the file is read once, so a file changed
     * between the passes cannot bring in records nobody checked) */
    char *again = cl_malloc(len + 1);
    memcpy(again, text, len + 1);
    char *at = text, *end = text + len, *hf[FID_MAX_FIELDS], *f[FID_MAX_FIELDS], *g[C_N];
    int line = 1, col[C_N], nh = csv_record(&at, end, hf, &line);
    if (nh <= 0) rc = cl_fail(e, CL_EINPUT, "%s:1: no header line (hint: a CSV file with the published-runs columns)", csv);
    if (!rc) rc = header_map(hf, nh, col, csv, e);
    /* first pass: every record well formed, before any output */
    int n;
    while (!rc && (n = csv_record(&at, end, f, &line)) != 0) {
        int start = line - 1;
        if (n == 1 && !f[0][0]) continue; /* a blank line */
        if (n < 0)
            rc = cl_fail(e, CL_EINPUT, "%s:%d: a quoted field does not close, or more than %d fields (hint: double the quotes inside a quoted field)",
                         csv, start, FID_MAX_FIELDS);
        else if (n != nh)
            rc = cl_fail(e, CL_EINPUT, "%s:%d: %d fields, the header has %d (hint: quote fields that hold commas)",
                         csv, start, n, nh);
        else if (!f[col[C_ID]][0])
            rc = cl_fail(e, CL_EINPUT, "%s:%d: empty id (hint: every run has a unique id)", csv, start);
        else if (!pos_ll(f[col[C_GPUS]]))
            rc = cl_fail(e, CL_EINPUT, "%s:%d: gpus: expected a positive integer (hint: the GPU count of the run)", csv, start);
        else if (f[col[C_ITER]][0] && !(strtod(f[col[C_ITER]], NULL) > 0))
            rc = cl_fail(e, CL_EINPUT, "%s:%d: iteration_s: expected a positive number of seconds or nothing", csv, start);
        sum->rows += rc ? 0 : 1;
    }
    free(text);
    text = again;
    if (rc) {
        free(text);
        return rc;
    }
    at = text;
    end = text + len;
    line = 1;
    csv_record(&at, end, hf, &line);
    char path[4096];
    cl_out o;
    snprintf(path, sizeof path, "%s/fidelity.csv", outdir);
    if ((rc = cl_out_open(&o, path, e))) {
        free(text);
        return rc;
    }
    fprintf(o.f, "id,source,gpus,layout,measured_s,predicted_s,error_pct,fits,reason\n");
    sum->points = cl_calloc((size_t)(sum->rows > 0 ? sum->rows : 1), sizeof *sum->points);
    double abs_sum = 0, sgn_sum = 0;
    while ((n = csv_record(&at, end, f, &line)) != 0) {
        if (n == 1 && !f[0][0]) continue;
        static char absent[1]; /* an optional column the table does not have */
        for (int c = 0; c < C_N; c++) g[c] = col[c] < 0 ? absent : f[col[c]];
        char where[128], lay[256], why[1100], num[3][32] = {"", "", ""};
        char *id = esc_term(g[C_ID]);
        snprintf(where, sizeof where, "%s:%d (%.40s)", csv, line - 1, id);
        double meas = g[C_ITER][0] ? strtod(g[C_ITER], NULL) : 0, pred = 0;
        int fits = 1;
        row_eval(g, where, &pred, &fits, lay, sizeof lay, why, sizeof why);
        if (!why[0] && !meas) snprintf(why, sizeof why, "no measured iteration time");
        if (why[0]) {
            char *w = esc_term(why);
            fprintf(msg, "not expressed: %s: %s\n", id, w);
            free(w);
            sum->skipped++;
        } else {
            double err = 100 * (pred - meas) / meas;
            snprintf(num[0], sizeof num[0], "%.6g", meas);
            snprintf(num[1], sizeof num[1], "%.6g", pred);
            snprintf(num[2], sizeof num[2], "%.2f", err);
            sum->points[sum->evaluated++] = (fid_point){meas, pred, fits};
            abs_sum += fabs(err);
            sgn_sum += err;
            if (fabs(err) > sum->worst_pct || sum->evaluated == 1) {
                sum->worst_pct = fabs(err);
                snprintf(sum->worst_id, sizeof sum->worst_id, "%.63s", id);
            }
            sum->over15 += fabs(err) > 15;
            sum->over25 += fabs(err) > 25;
            sum->nofit += !fits;
        }
        csv_field(o.f, g[C_ID], 0);
        csv_field(o.f, g[C_SRC], 0);
        csv_field(o.f, g[C_GPUS], 0);
        csv_field(o.f, lay, 0);
        csv_field(o.f, g[C_ITER], 0);
        csv_field(o.f, num[1], 0);
        csv_field(o.f, num[2], 0);
        csv_field(o.f, why[0] ? "" : fits ? "yes" : "no", 0);
        csv_field(o.f, why, 1);
        free(id);
    }
    free(text);
    if (sum->evaluated) {
        sum->mae_pct = abs_sum / sum->evaluated;
        sum->bias_pct = sgn_sum / sum->evaluated;
    }
    if ((rc = cl_out_commit(&o, e))) return rc;
    fprintf(msg, "wrote %s\n", path);
    fprintf(msg, "fidelity: %d runs, %d evaluated, %d not expressed; iteration time error: mean |error| %.1f%%, "
                 "bias %+.1f%%, worst %.1f%% (%s), %d over 15%%, %d over 25%%; %d predicted not to fit\n",
            sum->rows, sum->evaluated, sum->skipped, sum->mae_pct, sum->bias_pct, sum->worst_pct,
            sum->worst_id, sum->over15, sum->over25, sum->nofit);
    return CL_OK;
}
