/* test_bounds.c - work and memory stay bounded (docs/testing.md, "Limits").
 *
 * No timing windows: the wall-clock budget is tested with an immediate one
 * (cl_budget_start(0), --max-seconds 0), which every poll sees as spent, so
 * each phase must stop at its first poll; work and memory are counted
 * (steps, sets, boxes, heap bytes) and compared with closed forms. */
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "models/model.h"
#include "planner/cost.h"
#include "planner/exact.h"
#include "planner/instance.h"
#include "planner/search.h"
#include "profiles/cluster.h"
#include "profiles/profile.h"
#include "core/schedule.h"
#include "sim/sim.h"
#include "base/budget.h"
#include "tools/plot_reduce.h"
#include "test.h"

#define PLAN2 "tests/data/sim/fmnist-2stage.json"

/* ------------------------------------------------------ device orders -- */

static int cmp_speed(const void *a, const void *b, void *cx)
{
    const double *sp = cx;
    double x = sp[*(const int *)a], y = sp[*(const int *)b];
    if (x != y) return x < y ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

/* The orders as first written (a scan of every device per node), the
 * reference for the counting sort. */
static int ref_orders(const cluster *cl, const double *speed, int **out)
{
    int N = cl->n_devices, mixed = 0, k = 0, at = 0;
    for (int d = 1; d < N; d++) mixed |= speed[d] != speed[0];
    out[k] = malloc((size_t)N * sizeof(int));
    for (int nd = 0; nd < cl->n_nodes; nd++)
        for (int d = 0; d < N; d++)
            if (cl->devices[d].node == nd) out[k][at++] = d;
    k++;
    if (!mixed) return k;
    double *ns = malloc((size_t)cl->n_nodes * sizeof *ns);
    int *nodes = malloc((size_t)cl->n_nodes * sizeof *nodes);
    for (int nd = 0; nd < cl->n_nodes; nd++) ns[nd] = HUGE_VAL, nodes[nd] = nd;
    for (int d = 0; d < N; d++) ns[cl->devices[d].node] = fmin(ns[cl->devices[d].node], speed[d]);
    qsort_r(nodes, (size_t)cl->n_nodes, sizeof *nodes, cmp_speed, ns);
    for (int dir = 0; dir < 2; dir++) {
        int *o = malloc((size_t)N * sizeof *o);
        at = 0;
        for (int i = 0; i < cl->n_nodes; i++) {
            int nd = nodes[dir == 0 ? i : cl->n_nodes - 1 - i], from = at;
            for (int d = 0; d < N; d++)
                if (cl->devices[d].node == nd) o[at++] = d;
            qsort_r(o + from, (size_t)(at - from), sizeof *o, cmp_speed, (void *)speed);
            if (dir == 1)
                for (int a = from, b = at - 1; a < b; a++, b--) {
                    int t = o[a];
                    o[a] = o[b];
                    o[b] = t;
                }
        }
        int dup = 0;
        for (int j = 0; j < k && !dup; j++) dup = !memcmp(o, out[j], (size_t)N * sizeof *o);
        if (dup) free(o);
        else out[k++] = o;
    }
    free(ns);
    free(nodes);
    return k;
}

/* instance_device_orders (a counting sort by node) gives exactly the orders
 * of the quadratic scan, on random clusters: devices of a node scattered
 * over the list, empty nodes, speeds with ties, one type or mixed. */
static void test_device_orders(void)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int trial = 0; trial < 300; trial++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int N = 1 + (int)(x % 40), nodes = 1 + (int)((x >> 8) % 12), mixed = trial % 3 != 0;
        cluster cl;
        memset(&cl, 0, sizeof cl);
        cl.n_devices = N;
        cl.n_nodes = nodes;
        cl.devices = calloc((size_t)N, sizeof *cl.devices);
        double *speed = malloc((size_t)N * sizeof *speed);
        for (int d = 0; d < N; d++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            cl.devices[d].node = (int)(x % (uint64_t)nodes);
            speed[d] = mixed ? 1.0 + (double)((x >> 20) % 3) : 1.0;
        }
        plan_request rq = {.cluster = &cl};
        search_ctx c = {.rq = &rq, .view = &cl, .n_dev = N, .speed = speed};
        int *got[3] = {0}, *want[3] = {0};
        int ng = instance_device_orders(&c, got), nw = ref_orders(&cl, speed, want);
        CU_ASSERT_EQUAL(ng, nw);
        for (int k = 0; k < ng && k < nw; k++)
            CU_ASSERT_EQUAL(memcmp(got[k], want[k], (size_t)N * sizeof(int)), 0);
        for (int k = 0; k < 3; k++) free(got[k]), free(want[k]);
        free(speed);
        free(cl.devices);
    }
}

/* ------------------------------------------------------------ budget -- */

static void vgg_request(model *m, prof *pf, cluster *c, plan_request *rq)
{
    CU_ASSERT_EQUAL_FATAL(test_pipedream("vgg16", m, pf), 0);
    cluster_devtype t = {.name = "gpu", .peak_fp32_flops = 1e12, .mem_bytes = (uint64_t)1 << 53,
                         .mem_bw_Bps = 1e12, .efficiency = 1};
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cluster_uniform(c, &t, 4, 0, (cluster_link){1e9, 0}, (cluster_link){1e9, 0}, &e),
                          CL_OK);
    *rq = (plan_request){.model = m, .prof = pf, .cluster = c, .batch = (int)pf->layers[0].batch[0],
                         .schedule = -1, .algo = PLAN_ALGO_AUTO, .comm = 1, .replication = 1};
}

/* A spent budget stops each phase at its first poll, with one line naming
 * the limit, the phase and the option that raises it; nothing is left
 * allocated (heap bytes in use compared before and after).  Without a
 * budget the same calls succeed. */
static void test_budget_phases(void)
{
    cl_err e = {0};
    /* the op-list builder */
    plan p;
    CU_ASSERT_EQUAL_FATAL(plan_load(&p, PLAN2, &e), CL_OK);
    sched sc;
    size_t before = mallinfo2().uordblks;
    cl_budget_start(0, "--max-seconds");
    CU_ASSERT(cl_budget_over());
    CU_ASSERT_EQUAL(sched_build(&p, p.schedule, 64, 1000, &sc, &e), CL_EINPUT);
    CU_ASSERT_PTR_NULL(sc.ops);
    /* nothing kept: the lists would take megabytes; the slack covers the
     * error message's scratch string, which glibc's thread cache still
     * counts as in use after it is freed */
    CU_ASSERT((long long)mallinfo2().uordblks - (long long)before < 65536);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "schedule: wall-time budget exhausted: 0 s (--max-seconds) ran out while building the op lists (hint: raise --max-seconds"));
    /* the simulator's event loop: the lists built without a budget, the run
     * under a spent one */
    cl_budget_clear();
    cl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(sched_build(&p, p.schedule, 64, 20, &sc, &e), CL_OK);
    sim_opts so = {0};
    sim *s = sim_create(&p, &sc, &so, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    sim_result r;
    cl_budget_start(0, "--max-seconds");
    CU_ASSERT_EQUAL(sim_run(s, &r, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "wall-time budget exhausted"));
    sim_result_free(&r);
    sim_destroy(s);
    sched_free(&sc);
    plan_free(&p);

    /* the plan search */
    model m;
    prof pf;
    cluster c;
    plan_request rq;
    vgg_request(&m, &pf, &c, &rq);
    plan_result res;
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(plan_search(&rq, &res, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "ran out while searching plans (hint: raise --max-seconds"));
    /* the exact search alone, on the search's own instance */
    cl_budget_clear();
    int order[4] = {0, 1, 2, 3};
    double speed[4] = {1, 1, 1, 1};
    search_ctx ctx = {.rq = &rq, .view = rq.cluster, .n_dev = 4, .speed = speed, .order = order};
    plan_inst I;
    instance_build(&ctx, 4, &I);
    plan_lattice L;
    plan_lattice_prefix(&L, &I);
    plan_layout y;
    plan_exact_opts xo = {.upper_s = HUGE_VAL};
    plan_exact_stats st = {0};
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(plan_exact(&I, &L, &xo, &y, &st, &e), PLAN_EXACT_FOUND);
    plan_layout_free(&y);
    CU_ASSERT(st.steps > 0);
    cl_budget_start(0, "--max-seconds");
    memset(&st, 0, sizeof st);
    CU_ASSERT_EQUAL(plan_exact(&I, &L, &xo, &y, &st, &e), PLAN_EXACT_GAVE_UP);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "ran out while searching partitions"));
    cl_budget_clear();
    plan_lattice_free(&L);
    plan_inst_free(&I);
    /* and without a budget the search plans */
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(plan_search(&rq, &res, &e), CL_OK);
    plan_result_free(&res);
    cluster_free(&c);
    model_free(&m);
    prof_free(&pf);
}

/* ------------------------------------------------------- cut listing -- */

/* A graph of n layers: a chain, and every fourth layer also read by the
 * layer two further on (a skip edge that adds no cut, as the chain already
 * orders them).  Every layer has work, so none is inert. */
static void skip_chain(plan_inst *I, int n)
{
    int n_in = n + (n - 3) / 4 + 1;
    plan_inst_alloc(I, n, n_in, 1);
    int at = 0;
    for (int i = 0; i < n; i++) {
        I->fwd_s[i] = 1e-3;
        I->in_off[i] = at;
        if (i >= 2 && i % 4 == 0) I->in_idx[at++] = i - 2;
        I->in_idx[at++] = i - 1; /* -1 for the first: the model input */
    }
    I->in_off[n] = at;
    I->speed[0] = 1;
    I->mem_cap[0] = 1e18;
}

/* The listing checks each layer's inputs (it used to compare n-bit masks,
 * n^2 / 4 bytes of them): on the skip chain the downsets are exactly the n
 * + 1 prefixes, each one layer above the last, n edges (the nested pairs,
 * n (n + 1) / 2 of them, are no longer listed: exact_subs.c walks the
 * edges).  Past --max-cuts sets, or its step limit (20,000 per allowed
 * cut), the listing stops and says so, naming --max-cuts. */
static void test_dag_listing(void)
{
    plan_inst I;
    plan_lattice L;
    cl_err e = {0};
    int n = 1500;
    skip_chain(&I, n);
    CU_ASSERT_EQUAL_FATAL(plan_lattice_downsets(&L, &I, 100000, &e), CL_OK);
    CU_ASSERT_EQUAL(L.n_sets, n + 1);
    CU_ASSERT_EQUAL(L.n_edges, (int64_t)n);
    for (int t = 1; t <= n; t++) {
        CU_ASSERT_EQUAL(L.down_off[t + 1] - L.down_off[t], 1);
        CU_ASSERT_EQUAL(L.down[L.down_off[t]], t - 1);
    }
    plan_lattice_free(&L);
    plan_inst_free(&I);

    /* one set over the limit stops it (n = 100: 101 sets) */
    n = 100;
    skip_chain(&I, n);
    CU_ASSERT_EQUAL(plan_lattice_downsets(&L, &I, 50, &e), CL_ERUN);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "more than 50 downsets (cuts); listing stopped (raise --max-cuts)"));
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(plan_lattice_downsets(&L, &I, 100, &e), CL_ERUN);
    cl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(plan_lattice_downsets(&L, &I, 101, &e), CL_OK);
    CU_ASSERT_EQUAL(L.n_sets, 101);
    plan_lattice_free(&L);
    plan_inst_free(&I);

    /* 30,000 layers: every set costs more than 30,000 steps, so 1,000
     * allowed sets stop the listing before the 1,000th */
    n = 30000;
    skip_chain(&I, n);
    size_t before = mallinfo2().uordblks;
    CU_ASSERT_EQUAL(plan_lattice_downsets(&L, &I, 1000, &e), CL_ERUN);
    /* nothing kept: the lists would take megabytes; the slack covers the
     * error message's scratch string, which glibc's thread cache still
     * counts as in use after it is freed */
    CU_ASSERT((long long)mallinfo2().uordblks - (long long)before < 65536);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "listing the cuts of the layer graph took more than"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "(20000 per allowed cut x --max-cuts 1000)"));
    long long sets = -1;
    const char *a = strstr(e.msg, " after ");
    if (a) sets = atoll(a + 7);
    CU_ASSERT(sets > 0 && sets <= 20000LL * 1000 / n + 1);
    /* a spent budget stops it too */
    cl_err_clear(&e);
    cl_budget_start(0, "--max-seconds");
    CU_ASSERT_EQUAL(plan_lattice_downsets(&L, &I, 100000, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "ran out while listing the cuts of the layer graph"));
    cl_budget_clear();
    plan_inst_free(&I);
}

/* ------------------------------------------------------- long chains -- */

/* Past PLAN_EXACT_AUTO_MAX_LAYERS layers --algo auto plans by partition-
 * and-merge alone (the exact search is quadratic in a chain) and says so;
 * one layer fewer, it still runs the exact search. */
static void test_long_chain_auto(void)
{
    for (int extra = 0; extra <= 1; extra++) {
        int n = PLAN_EXACT_AUTO_MAX_LAYERS + extra;
        model m;
        memset(&m, 0, sizeof m);
        snprintf(m.name, sizeof m.name, "chain%d", n);
        m.input = (model_shape){1, {256, 0, 0}};
        m.n_layers = n;
        m.layers = cl_calloc((size_t)n, sizeof *m.layers);
        prof pf;
        memset(&pf, 0, sizeof pf);
        prof_alloc(&pf, n, 1);
        for (int i = 0; i < n; i++) {
            char name[32];
            snprintf(name, sizeof name, "l%d", i);
            model_block_init(&m.layers[i], name, 1e6, 1000, 1024, 1024);
            prof_layer *l = &pf.layers[i];
            snprintf(l->name, sizeof l->name, "%s", name);
            l->batch[0] = 4;
            l->fwd_s[0] = l->bwd_in_s[0] = l->bwd_w_s[0] = 1e-3 * (1 + i % 3);
            l->act_bytes = l->stash_bytes = 1024;
            l->param_bytes = 4000;
        }
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(model_derive(&m, "chain", &e), CL_OK);
        cluster c;
        cluster_devtype t = {.name = "gpu", .peak_fp32_flops = 1e12, .mem_bytes = (uint64_t)1 << 53,
                             .mem_bw_Bps = 1e12, .efficiency = 1};
        CU_ASSERT_EQUAL_FATAL(cluster_uniform(&c, &t, 2, 0, (cluster_link){1e9, 0}, (cluster_link){1e9, 0}, &e),
                              CL_OK);
        plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .batch = 4, .schedule = SCHED_1F1B,
                           .microbatches = 4, .algo = PLAN_ALGO_AUTO, .comm = 1, .replication = 0};
        plan_result res;
        CU_ASSERT_EQUAL_FATAL(plan_search(&rq, &res, &e), CL_OK);
        int noted = 0;
        for (int i = 0; i < res.n_notes; i++) noted |= strstr(res.notes[i], "exact search was skipped") != NULL;
        CU_ASSERT_EQUAL(noted, extra);
        CU_ASSERT_EQUAL(res.exact_steps == 0, extra);
        CU_ASSERT_STRING_EQUAL(res.algo, extra ? "merge" : "exact");
        plan_result_free(&res);
        cluster_free(&c);
        model_free(&m);
        prof_free(&pf);
    }
}

/* A profile layer holds its points, not room for 64 of them: a profile of
 * 20,000 layers at 2 batch sizes takes under 300 bytes a layer (it took
 * 2.6 KB), counted as the usable size of every block it allocates (so under
 * any allocator, the sanitizers' included). */
static void test_profile_bytes(void)
{
    int n = 20000;
    prof pf;
    memset(&pf, 0, sizeof pf);
    prof_alloc(&pf, n, 2);
    double bytes = (double)malloc_usable_size(pf.layers);
    for (int i = 0; i < n; i++) {
        CU_ASSERT_EQUAL_FATAL(pf.layers[i].n_points, 2);
        CU_ASSERT_PTR_EQUAL(pf.layers[i].fwd_sd, pf.layers[i].batch + 8);
        bytes += (double)malloc_usable_size(pf.layers[i].batch);
    }
    CU_ASSERT(bytes / n < 300);
    CU_ASSERT(bytes / n >= sizeof(prof_layer) + 10 * sizeof(double));
    prof_free(&pf);
}

/* --------------------------------------------------------------- plot -- */

/* Boxes rasterised to columns: exact on column boundaries, runs of one
 * category merged, idle wins a column it mostly fills, and however many
 * boxes come in, at most one per column of a row goes out. */
static void test_plot_raster(void)
{
    /* span 0..100 us over 10 columns of 10 us */
    plot_slice a[] = {{0, 1, 0, 20}, {0, 1, 20, 30}, {0, 2, 50, 10}, {0, 3, 91, 4}, {1, 1, 10, 10}};
    int64_t n = 0;
    plot_slice *o = plot_raster_boxes(a, 5, 4, 0, 100, 10, &n);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT(o[0].row == 0 && o[0].cat == 1 && o[0].t0_us == 0 && o[0].dur_us == 50);
    CU_ASSERT(o[1].row == 0 && o[1].cat == 2 && o[1].t0_us == 50 && o[1].dur_us == 10);
    /* 4 us of 10 in the last column: idle wins it */
    CU_ASSERT(o[2].row == 1 && o[2].cat == 1 && o[2].t0_us == 10 && o[2].dur_us == 10);
    free(o);

    /* 300,000 boxes of alternating categories, 0.3 columns each, on 3 rows,
     * covering the span: at most 1,000 boxes per row, and covering it all */
    int64_t N = 300000;
    int cols = 1000;
    plot_slice *b = malloc((size_t)N * sizeof *b);
    for (int64_t i = 0; i < N; i++) {
        int64_t k = i / 3;
        b[i] = (plot_slice){(int)(i % 3), (int)(k % 2), (double)k * 0.3, 0.3};
    }
    double span = (double)(N / 3) * 0.3;
    o = plot_raster_boxes(b, N, 2, 0, span, cols, &n);
    CU_ASSERT(n >= 3 && n <= 3 * cols);
    double cover[3] = {0};
    for (int64_t i = 0; i < n; i++) cover[o[i].row] += o[i].dur_us;
    for (int r = 0; r < 3; r++) CU_ASSERT(fabs(cover[r] - span) < 1e-6 * span);
    free(o);
    free(b);
}

/* Memory rows: exact step function up to max_rows samples; past it at most
 * max_rows rows, each track's peak kept, the last row the final values. */
static void test_plot_memory_rows(void)
{
    plot_sample s[4] = {{0, 0, 5}, {1, 1, 7}, {0, 2, 3}, {1, 3, 1}};
    double t[4], v[8];
    CU_ASSERT_EQUAL_FATAL(plot_memory_rows(s, 4, 2, 4, t, v), 4);
    double want[8] = {5, 0, 5, 7, 3, 7, 3, 1};
    CU_ASSERT_EQUAL(memcmp(v, want, sizeof want), 0);
    CU_ASSERT(t[3] == 3);

    int64_t N = 200000, R = 101;
    plot_sample *b = malloc((size_t)N * sizeof *b);
    uint64_t x = 12345;
    double peak[2] = {0, 0}, last[2] = {0, 0};
    for (int64_t i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int line = (int)(x & 1);
        double bytes = (double)(x >> 40);
        b[i] = (plot_sample){line, (double)i, bytes};
        peak[line] = fmax(peak[line], bytes);
        last[line] = bytes;
    }
    double *rt = malloc((size_t)R * sizeof *rt), *rv = malloc((size_t)R * 2 * sizeof *rv);
    int64_t nr = plot_memory_rows(b, N, 2, R, rt, rv);
    CU_ASSERT(nr >= 2 && nr <= R);
    double got[2] = {0, 0};
    for (int64_t i = 0; i < nr; i++)
        for (int l = 0; l < 2; l++) got[l] = fmax(got[l], rv[i * 2 + l]);
    CU_ASSERT(got[0] == peak[0] && got[1] == peak[1]);
    CU_ASSERT(rv[(nr - 1) * 2] == last[0] && rv[(nr - 1) * 2 + 1] == last[1]);
    CU_ASSERT(rt[nr - 1] == (double)(N - 1));
    free(rt);
    free(rv);
    free(b);
}

/* ---------------------------------------------------------------- CLI -- */

/* Run cleave with argv (NULL-terminated), output to /dev/null; returns the
 * exit status and the child's peak resident set in KiB (wait4). */
static int run_rss(char *const argv[], long *maxrss_kib)
{
    const char *bin = getenv("CLEAVE_BIN");
    if (!bin) bin = "build/cleave";
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(bin, argv);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    if (wait4(pid, &st, 0, &ru) != pid) return -1;
    *maxrss_kib = ru.ru_maxrss;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* --max-seconds 0 on every long command (plan, sim, plot, sweep, compare):
 * exit 2, the one line names the limit and the option, no output file; sim stops before building a
 * million iterations of op lists (those take over a gigabyte). */
static void test_cli_budget(void)
{
    char *dir = test_tmpdir(), path[600], args[1400];
    snprintf(path, sizeof path, "%s/out.json", dir);
    snprintf(args, sizeof args, "sim " PLAN2 " --trace %s/t.json", dir); /* a trace to plot */
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
    const char *phase[] = {"while searching plans", "while building the op lists", "while reading",
                           "while searching plans", "while searching plans"};
    for (int i = 0; i < 5; i++) {
        char made[700];
        snprintf(made, sizeof made, "%s", path);
        if (i == 0)
            snprintf(args, sizeof args, "plan --model models/vgg16.json --device A100-80GB --devices 8 --max-seconds 0 -o %s", path);
        else if (i == 1)
            snprintf(args, sizeof args, "sim " PLAN2 " --microbatches 4 --iterations 1000000 --max-seconds 0 --trace %s", path);
        else if (i == 2) {
            snprintf(made, sizeof made, "%s.png", path);
            snprintf(args, sizeof args, "plot %s/t.json --max-seconds 0 -o %s", dir, made);
        }
        else if (i == 3)
            snprintf(args, sizeof args, "sweep --model models/vgg16.json --device A100-80GB --devices 1,2 --max-seconds 0 --csv %s", path);
        else
            snprintf(args, sizeof args, "compare --model models/vgg16.json --clusters profiles/clusters/dgx-a100-1node.json --max-seconds 0 --csv %s", path);
        char *out = NULL, *err = NULL;
        CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 2);
        CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "wall-time budget exhausted: 0 s (--max-seconds) ran out"));
        CU_ASSERT_PTR_NOT_NULL(err && strstr(err, phase[i]));
        CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "(hint: raise --max-seconds"));
        if (err && !strstr(err, phase[i])) fprintf(stderr, "\n  %s: %s", args, err);
        CU_ASSERT_NOT_EQUAL(access(made, F_OK), 0);
        free(out);
        free(err);
    }
    /* a million iterations stop where one does: the child's peak RSS (KiB)
     * grows by less than 20 MB (building them takes over a gigabyte) */
    long kib1 = 0, kib = 0;
    char *argv1[] = {"cleave", "sim", PLAN2, "--microbatches", "4", "--iterations", "1",
                     "--max-seconds", "0", NULL};
    char *argv[] = {"cleave", "sim", PLAN2, "--microbatches", "4", "--iterations", "1000000",
                    "--max-seconds", "0", NULL};
    CU_ASSERT_EQUAL(run_rss(argv1, &kib1), 2);
    CU_ASSERT_EQUAL(run_rss(argv, &kib), 2);
    CU_ASSERT(kib1 > 0 && kib > 0 && kib < kib1 + 20 * 1024);
    snprintf(args, sizeof args, "%s/t.json", dir);
    unlink(args);
    rmdir(dir);
    free(dir);
}

TEST_SUITE(bounds)
{
    test_add_suite("bounds");
    test_add("device orders: the counting sort matches the scan per node", test_device_orders);
    test_add("a spent budget stops op lists, simulation, plan and exact search", test_budget_phases);
    test_add("cut listing: closed-form counts, step limit, budget", test_dag_listing);
    test_add("auto skips the exact search past 10,000 layers", test_long_chain_auto);
    test_add("a profile layer holds its points only", test_profile_bytes);
    test_add("plot: boxes rasterised to columns", test_plot_raster);
    test_add("plot: memory rows fold to columns, peaks kept", test_plot_memory_rows);
    test_add("--max-seconds 0 on plan, sim, plot, sweep, compare", test_cli_budget);
}
