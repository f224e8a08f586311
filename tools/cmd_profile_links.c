/* cmd_profile_links.c - `cleave profile --links`: measure point-to-point
 * transfers between two workers (ping-pong, exec/probe/linkprof.h), fit
 * latency + bytes / bandwidth, and write a cluster file for this machine.
 * cmd_profile hands over to cmd_profile_links when --links is given. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "exec/probe/linkprof.h"
#include "profiles/cluster.h"
#include "cli.h"
#include "base/fileio.h"
#include "base/jsonx.h"

typedef struct links_args {
    const char *out, *csv;
    int json, links, backend;   /* backend: exec_link_backend */
    int64_t min_bytes, max_bytes;
    exec_link_opts o;
} links_args;

_Static_assert(EXEC_LINK_THREADS == 0 && EXEC_LINK_MPI == 1, "--backend's words");
#define LA links_args
static const cli_opt links_opts[] = {
    {"backend", 0, CLI_ENUM, CLI_FIELD(LA, backend), .words = "threads|mpi", .arg = "B",
     .help = "threads (two pinned threads, shared-memory channel; default)\n"
             "or mpi (ranks 0 and 1, MPI_Send/MPI_Recv; started through\n"
             "mpirun -np 2 if this process is not in an MPI job)"},
    {"out", 'o', CLI_STR, CLI_FIELD(LA, out), .arg = "FILE", .help = "the cluster file to write (- for stdout)"},
    {"min-bytes", 0, CLI_INT, CLI_FIELD(LA, min_bytes), 8, (int64_t)1 << 30, .arg = "N",
     .help = "smallest message, a power of two (default {})"},
    {"max-bytes", 0, CLI_INT, CLI_FIELD(LA, max_bytes), 8, (int64_t)1 << 30, .arg = "N",
     .help = "largest message, a power of two (default {})"},
    {"seconds", 0, CLI_NUM, CLI_FIELD(LA, o.seconds_per_size), .lo = 0, .hi = 60, .arg = "S",
     .help = "time spent per size, at least (default 0.05)"},
    {"reps", 0, CLI_INT, CLI_FIELD(LA, o.min_reps), 1, 20000, .arg = "N",
     .help = "round trips per size, at least (default 10)"},
    {"csv", 0, CLI_STR, CLI_FIELD(LA, csv), .arg = "FILE",
     .help = "also write the samples and the fit's line as CSV"},
    {"json", 0, CLI_FLAG, CLI_FIELD(LA, json),
     .help = "print the samples and the fit as JSON instead of a table"},
    {"links", 0, CLI_FLAG, CLI_FIELD(LA, links), .help = NULL}, /* how cmd_profile got here */
};
#undef LA
static const cli_spec links_spec = {"profile", links_opts, CLI_N(links_opts), .help_col = 21};

/* The options' values before argv: the link probe's defaults. */
static void defaults(links_args *a)
{
    memset(a, 0, sizeof *a);
    exec_link_opts_default(&a->o);
    a->backend = a->o.backend;
    a->min_bytes = (int64_t)a->o.min_bytes;
    a->max_bytes = (int64_t)a->o.max_bytes;
}

static void help(void)
{
    links_args d;
    defaults(&d);
    printf("usage: cleave profile --links [--backend threads|mpi] -o CLUSTER.json [options]\n"
           "       mpirun -np 2 cleave profile --links --backend mpi -o CLUSTER.json\n\n"
           "Ping-pong one message between two workers over sizes from 8 B to 64 MiB\n"
           "(doubling, repeated), fit one-way time = latency + bytes / bandwidth by weighted\n"
           "least squares (GSL), print the samples and the fit's quality, and write a\n"
           "cluster file for this machine: one node, one cpu-core device per core (peak and\n"
           "efficiency measured here), the intra-node link from the fit.\n\n");
    cli_help(&links_spec, &d, stdout);
}

static int parse(int argc, char **argv, links_args *a)
{
    const char *cmd = "profile";
    defaults(a);
    int rc = cli_parse(&links_spec, argc, argv, a, 0);
    if (rc == CLI_HELP) help();
    if (rc) return rc;
    for (int i = 0; i < 2; i++) {
        int64_t v = i ? a->max_bytes : a->min_bytes;
        if (v & (v - 1))
            return cli_usage_error(cmd, "%s: %lld is not a power of two", i ? "--max-bytes" : "--min-bytes", (long long)v);
    }
    a->o.backend = (exec_link_backend)a->backend;
    a->o.min_bytes = (uint64_t)a->min_bytes;
    a->o.max_bytes = (uint64_t)a->max_bytes;
    if (!a->out) return cli_usage_error(cmd, "-o CLUSTER.json is required");
    if (a->json && !strcmp(a->out, "-"))
        return cli_usage_error(cmd, "--json and -o - both write stdout: give one of them");
    if (a->o.min_bytes > a->o.max_bytes)
        return cli_usage_error(cmd, "--min-bytes exceeds --max-bytes");
    if (a->o.min_bytes == a->o.max_bytes)
        return cli_usage_error(cmd, "the fit needs at least two sizes (--min-bytes below --max-bytes)");
    return 0;
}

static void print_table(FILE *out, const links_args *a, const exec_link_sample *s, int n,
                        const exec_link_fit *f, const exec_link_fit *fs)
{
    fprintf(out, "link profile, %s backend: one-way time per message (median of round trips / 2)\n",
           exec_link_backend_name(a->o.backend));
    fprintf(out, "%12s %12s %10s %12s %12s %9s %10s %7s %7s %10s %10s\n", "bytes", "median us", "sd us",
           "fit us", "GB/s", "resid", "send us", "reps", "woke", "spin us", "woken us");
    for (int i = 0; i < n; i++) {
        double fit = f->latency_s + s[i].bytes / f->bw_Bps;
        fprintf(out, "%12.0f %12.3f %10.3f %12.3f %12.3f %8.2f%% %10.3f %7d %6.1f%% %10.3f %10.3f\n",
               s[i].bytes, s[i].time_s * 1e6, s[i].sd_s * 1e6, fit * 1e6,
               s[i].bytes / s[i].time_s * 1e-9, 100 * (s[i].time_s - fit) / s[i].time_s,
               s[i].send_s * 1e6, s[i].reps, 100 * s[i].woke, s[i].time_spin_s * 1e6,
               s[i].time_woke_s * 1e6);
    }
    fprintf(out, "fit: latency %.3f us (+- %.3f), bandwidth %.3f GB/s (1/bw +- %.2f%%)\n",
           f->latency_s * 1e6, f->latency_se * 1e6, f->bw_Bps * 1e-9,
           100 * f->inv_bw_se * f->bw_Bps);
    fprintf(out, "     weighted R^2 %.6f, relative residuals rms %.2f%%, largest %.2f%% at %.0f B\n",
           f->r2, 100 * f->rms_rel, 100 * f->max_rel, f->max_rel_bytes);
    fprintf(out, "the sender's share (its send call): %.3f us + bytes / %.3f GB/s (R^2 %.4f)\n",
           fs->latency_s * 1e6, fs->bw_Bps * 1e-9, fs->r2);
    char why[1024];
    if (exec_link_explain(s, n, f, why, sizeof why)) fprintf(out, "%s\n", why);
}

static cJSON *fit_json(const exec_link_fit *f)
{
    const cli_json_num v[] = {
        {"latency_s", f->latency_s},     {"bandwidth_Bps", f->bw_Bps},
        {"latency_se_s", f->latency_se}, {"inv_bandwidth_se_s_per_B", f->inv_bw_se},
        {"r2", f->r2},                   {"rms_rel_residual", f->rms_rel},
        {"max_rel_residual", f->max_rel}, {"max_rel_residual_bytes", f->max_rel_bytes},
    };
    return cli_json_add_numbers(cJSON_CreateObject(), v, CLI_N(v));
}

static int print_json(const links_args *a, const exec_link_sample *s, int n, const exec_link_fit *f,
                      const exec_link_fit *fs)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "backend", exec_link_backend_name(a->o.backend));
    cJSON *arr = cJSON_AddArrayToObject(o, "samples");
    for (int i = 0; i < n; i++) {
        const cli_json_num v[] = {
            {"bytes", s[i].bytes},   {"time_s", s[i].time_s},           {"sd_s", s[i].sd_s},
            {"min_s", s[i].min_s},   {"send_s", s[i].send_s},           {"reps", s[i].reps},
            {"woke", s[i].woke},     {"time_spin_s", s[i].time_spin_s}, {"time_woke_s", s[i].time_woke_s},
        };
        cJSON_AddItemToArray(arr, cli_json_add_numbers(cJSON_CreateObject(), v, CLI_N(v)));
    }
    cJSON_AddItemToObject(o, "fit", fit_json(f));
    cJSON_AddItemToObject(o, "send_fit", fit_json(fs));
    char why[1024];
    int poor = exec_link_explain(s, n, f, why, sizeof why);
    cJSON_AddBoolToObject(o, "reliable", !poor);
    if (poor) cJSON_AddStringToObject(o, "explanation", why);
    return jx_puts(o);
}

static int write_csv(const char *path, const exec_link_sample *s, int n, const exec_link_fit *f,
                     cl_err *e)
{
    cl_out out;
    int rc = cl_out_open(&out, path, e);
    if (rc) return rc;
    fprintf(out.f, "bytes,time_s,sd_s,min_s,reps,fit_s,send_s\n");
    for (int i = 0; i < n; i++)
        fprintf(out.f, "%.0f,%.9g,%.9g,%.9g,%d,%.9g,%.9g\n", s[i].bytes, s[i].time_s, s[i].sd_s,
                s[i].min_s, s[i].reps, f->latency_s + s[i].bytes / f->bw_Bps, s[i].send_s);
    return cl_out_commit(&out, e);
}

int cmd_profile_links(int argc, char **argv)
{
    links_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    if (a.o.backend == EXEC_LINK_MPI && !exec_link_in_mpi_job()) return exec_link_mpirun(2, "profile", argc, argv);
    cl_err e = {0};
    int rank = 0, size = 1;
    if (a.o.backend == EXEC_LINK_MPI && (rc = exec_link_mpi_init(&rank, &size, &e)))
        return cli_report(&e);
    exec_link_sample s[EXEC_LINK_MAX_SIZES];
    int n = 0;
    exec_link_fit f, fs;
    rc = exec_link_measure(&a.o, s, &n, &e);
    if (!rc && rank == 0) {
        double *b = cl_malloc((size_t)n * sizeof *b), *t = cl_malloc((size_t)n * sizeof *t);
        for (int i = 0; i < n; i++) b[i] = s[i].bytes, t[i] = s[i].time_s;
        rc = exec_link_fit_ls(b, t, NULL, n, &f, &e);
        for (int i = 0; i < n; i++) t[i] = s[i].send_s;
        if (!rc) rc = exec_link_fit_ls(b, t, NULL, n, &fs, &e);
        free(b);
        free(t);
    }
    cluster c;
    memset(&c, 0, sizeof c);
    if (!rc && rank == 0) {
        exec_machine mc;
        exec_machine_measure(1.0, &mc);
        char note[1024], why[1024];
        int poor = exec_link_explain(s, n, &f, why, sizeof why);
        snprintf(note, sizeof note,
                 "Measured by cleave profile --links --backend %s: ping-pong between two workers, %.0f B to %.0f B (%d sizes, doubling), median one-way time; weighted least squares (1/t^2) of time = latency + bytes / bandwidth: R^2 %.6f, relative residuals rms %.2f%%, largest %.2f%% at %.0f B%s. Of the latency, the sender's send call takes %.3g us.%s%s",
                 exec_link_backend_name(a.o.backend), s[0].bytes, s[n - 1].bytes, n, f.r2,
                 100 * f.rms_rel, 100 * f.max_rel, f.max_rel_bytes,
                 f.latency_s < 0 ? "; the fitted latency was negative and is written as 0" : "",
                 fs.latency_s * 1e6, poor ? " UNRELIABLE: R^2 below 0.9 (cleave profile --links prints why: " : "",
                 poor ? "receivers woken from sleep, or a per-byte cost that changes with the size)." : "");
        rc = exec_link_cluster(&c, &mc, &f, a.o.backend, note, &e);
        if (!rc && a.csv) rc = write_csv(a.csv, s, n, &f, &e);
        if (!rc) rc = cluster_save(&c, a.out, &e);
        if (!rc) {
            if (a.json) rc = print_json(&a, s, n, &f, &fs);
            else {
                /* -o -: the cluster file is stdout's, the table stderr's */
                print_table(strcmp(a.out, "-") ? stdout : stderr, &a, s, n, &f, &fs);
                if (strcmp(a.out, "-") != 0)
                    printf("wrote %s: %d x cpu-core (peak %.1f GFLOP/s, efficiency %.3f), intra-node link %.3f GB/s, %.3f us\n",
                           a.out, c.n_devices, mc.peak_flops * 1e-9, c.types[0].efficiency,
                           c.links[CLUSTER_INTRA].bw_Bps * 1e-9,
                           c.links[CLUSTER_INTRA].latency_s * 1e6);
            }
        }
        cluster_free(&c);
    }
    /* rank 0's error before finalising, as validate's (cmd_validate.c) */
    const int status = rc && rank == 0 ? cli_report(&e) : rc;
    if (a.o.backend == EXEC_LINK_MPI) exec_link_mpi_finalize();
    return status;
}
