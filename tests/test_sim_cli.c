/* test_sim_cli.c - `cleave sim` end to end on plans written by `cleave plan`
 * (tests/data/sim/fmnist-*.json), and the replay against an independent
 * evaluator: with communication off, every op starts when its device is free
 * and its inputs are done, so the makespan is the longest path through the
 * op lists, computed here without events. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/schedule.h"
#include "sim/sim.h"
#include "base/fileio.h"
#include "base/jsonx.h"
#include "test.h"

#define PLAN2 "tests/data/sim/fmnist-2stage.json"
#define PLANR "tests/data/sim/fmnist-replicated.json"

static cJSON *parse_out(const char *out)
{
    cl_err e = {0};
    cJSON *j = NULL;
    if (!out || jx_parse_text("stdout", out, strlen(out), &j, &e)) return NULL;
    return j;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static void test_table_and_json(void)
{
    char *out, *err;
    CU_ASSERT_EQUAL_FATAL(test_run_cli("sim " PLAN2, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "iteration"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "speed-up"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "node0.1"));
    free(out);
    free(err);
    const char *plans[] = {PLAN2, PLANR};
    for (int i = 0; i < 2; i++) {
        char args[256];
        snprintf(args, sizeof args, "sim %s --json", plans[i]);
        CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, &err), 0);
        cJSON *j = parse_out(out);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j);
        /* internal consistency: throughput x time = samples, per-device
         * fractions sum to one, bubble = 1 - mean busy */
        double it = num(j, "iteration_s");
        CU_ASSERT(it > 0);
        CU_ASSERT(test_rel(num(j, "throughput") * it, num(j, "samples_per_iteration")) < 1e-12);
        CU_ASSERT(test_rel(num(j, "speedup"), num(j, "sequential_s") / it) < 1e-12);
        const cJSON *d, *devs = cJSON_GetObjectItem(j, "devices");
        double busy = 0;
        int n = 0;
        cJSON_ArrayForEach(d, devs) {
            CU_ASSERT(fabs(num(d, "busy") + num(d, "idle") + num(d, "comm_wait") - 1) < 1e-9);
            CU_ASSERT(num(d, "peak_mem_bytes") > 0);
            busy += num(d, "busy");
            n++;
        }
        CU_ASSERT(n >= 2);
        CU_ASSERT(fabs(1 - busy / n - num(j, "bubble")) < 1e-12);
        cJSON_Delete(j);
        free(out);
        free(err);
    }
}

static void test_trace_dump_and_reload(void)
{
    char args[1400], tr[512], sc[512];
    char *dir = test_scratch(sizeof tr, "t.json", tr, "s.json", sc, NULL);
    char *out, *err;
    snprintf(args, sizeof args, "sim " PLANR " --json --trace %s --dump-schedule %s", tr, sc);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, &err), 0);
    cJSON *a = parse_out(out);
    free(out);
    free(err);
    /* the trace parses; the dumped lists, loaded back, give the same time */
    cl_err e = {0};
    cJSON *t;
    CU_ASSERT_EQUAL(jx_parse_file(tr, &t, &e), 0);
    if (!e.code) CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItem(t, "traceEvents"));
    cJSON_Delete(t);
    snprintf(args, sizeof args, "sim " PLANR " --json --schedule %s", sc);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, &err), 0);
    cJSON *b = parse_out(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(num(a, "iteration_s"), num(b, "iteration_s"));
    CU_ASSERT_EQUAL(num(a, "events"), num(b, "events"));
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(out);
    free(err);
    remove(tr);
    remove(sc);
    rmdir(dir);
    free(dir);
}

/* Number of pairs of complete events ("ph": "X") on one track (pid, tid) that
 * overlap, in the integer nanoseconds a trace viewer reads them as; -1 when
 * the file does not parse. */
typedef struct { long long pid, tid, t0, t1; } slice;

static int cmp_slice(const void *a, const void *b)
{
    const slice *x = a, *y = b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    return (x->t0 > y->t0) - (x->t0 < y->t0);
}

static int overlapping_slices(const char *path, int *n_slices)
{
    cl_err e = {0};
    cJSON *t;
    if (jx_parse_file(path, &t, &e)) return -1;
    const cJSON *ev = cJSON_GetObjectItem(t, "traceEvents"), *x;
    slice *s = calloc((size_t)cJSON_GetArraySize(ev) + 1, sizeof *s);
    int n = 0, bad = 0;
    cJSON_ArrayForEach(x, ev) {
        const cJSON *ph = cJSON_GetObjectItem(x, "ph");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X")) continue;
        s[n].pid = llround(num(x, "pid"));
        s[n].tid = llround(num(x, "tid"));
        s[n].t0 = llround(num(x, "ts") * 1e3);
        s[n].t1 = s[n].t0 + llround(num(x, "dur") * 1e3);
        n++;
    }
    qsort(s, (size_t)n, sizeof *s, cmp_slice);
    for (int i = 1; i < n; i++)
        if (s[i].pid == s[i - 1].pid && s[i].tid == s[i - 1].tid && s[i].t0 < s[i - 1].t1) bad++;
    free(s);
    cJSON_Delete(t);
    *n_slices = n;
    return bad;
}

/* Back-to-back slices on a track share an end point to the nanosecond: the
 * README's VGG-16 plan on PCIe cards (1F1B, communication on) and a
 * replicated fixture plan, every op and transfer of their traces. */
static void test_trace_slices_never_overlap(void)
{
    char args[1400], pl[512], tr[512];
    char *dir = test_scratch(sizeof pl, "p.json", pl, "t.json", tr, NULL);
    char *out, *err;
    snprintf(args, sizeof args, "plan --model models/vgg16.json --cluster "
             "profiles/clusters/v100-8-pcie.json --schedule 1f1b -o %s", pl);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, &err), 0);
    free(out);
    free(err);
    const char *plans[] = {pl, PLANR};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "sim %s --iterations 3 --trace %s", plans[i], tr);
        CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
        free(out);
        free(err);
        int n = 0, bad = overlapping_slices(tr, &n);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT(n > 50);
        remove(tr);
    }
    remove(pl);
    rmdir(dir);
    free(dir);
}

static void test_bad_input(void)
{
    char *dir = test_tmpdir(), args[1400], tr[512];
    snprintf(tr, sizeof tr, "%s/t.json", dir);
    char *out, *err;
    /* a deadlocked explicit schedule: exit 2, every waiting device named,
     * and no trace left behind */
    snprintf(args, sizeof args, "sim " PLAN2 " --schedule tests/data/sim/deadlock.json --trace %s", tr);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cleave: tests/data/sim/deadlock.json: cannot complete (deadlock"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "device 0 (worker 0) waits at op 2 RECV gradient"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "device 1 (worker 1) waits at op 0 RECV activation"));
    CU_ASSERT_NOT_EQUAL(access(tr, F_OK), 0);
    free(out);
    free(err);
    CU_ASSERT_EQUAL(test_run_cli("sim " PLAN2 " --schedule tests/data/sim/missing_recv.json", &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "devices[1].ops[0] (F stage 1 mb 0 iter 0): no RECV for its input"));
    free(out);
    free(err);
    CU_ASSERT_EQUAL(test_run_cli("sim " PLAN2 " --schedule pipedream --iterations 1", &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--iterations"));
    free(out);
    free(err);
    CU_ASSERT_EQUAL(test_run_cli("sim tests/data/sim/no-such-plan.json", &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no-such-plan.json"));
    free(out);
    free(err);
    CU_ASSERT_EQUAL(test_run_cli("sim " PLAN2 " --max-events 5", &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cleave: " PLAN2 ": simulation stopped at"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "event budget exhausted"));
    free(out);
    free(err);
    CU_ASSERT_EQUAL(test_run_cli("sim " PLAN2 " --comm sideways", &out, &err), 2);
    free(out);
    free(err);
    /* the builder's and simulator's messages name the plan file, not a
     * placeholder */
    CU_ASSERT_EQUAL(test_run_cli("sim " PLAN2 " --microbatches 16777216", &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cleave: " PLAN2 ": schedule: 16777216 microbatches"));
    free(out);
    free(err);
    /* the real-time budget covers building the op lists: a million
     * microbatches take longer than a millisecond to list */
    snprintf(args, sizeof args, "sim " PLAN2 " --microbatches 1000000 --max-seconds 0.001 --trace %s", tr);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cleave: " PLAN2 ": schedule: wall-time budget exhausted"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "while building the op lists (hint: raise --max-seconds"));
    CU_ASSERT_NOT_EQUAL(access(tr, F_OK), 0);
    free(out);
    free(err);
    rmdir(dir);
    free(dir);
}

/* ------------------------------------------- independent evaluator -- */

/* Makespan of op lists with free communication, by repeated sweeps: a
 * device's next op runs as soon as its inputs are done (F after the
 * previous stage's F, B after its F and the next stage's B, W after its B,
 * UPDATE after every replica posted the stage's all-reduce).  Returns -1 if
 * some list cannot finish. */
static double longest_path(const plan *p, const sched *sc)
{
    int S = p->n_stages, m = sc->n_micro;
    int64_t G = (int64_t)m * sc->n_iter, n = G * S;
    double *fe = malloc((size_t)n * sizeof *fe), *be = malloc((size_t)n * sizeof *be);
    double *we = malloc((size_t)n * sizeof *we);
    for (int64_t i = 0; i < n; i++) fe[i] = be[i] = we[i] = -1;
    /* all-reduce k of stage s: latest post time and posts so far */
    int64_t nar = (int64_t)S * (G + sc->n_iter + 1);
    double *arT = calloc((size_t)nar, sizeof *arT);
    int *arN = calloc((size_t)nar, sizeof *arN);
    int64_t *pc = malloc((size_t)sc->n_dev * sizeof *pc);
    double *t = calloc((size_t)sc->n_dev, sizeof *t);
    int *posted = calloc((size_t)sc->n_dev * S, sizeof *posted), *upd = calloc((size_t)sc->n_dev * S, sizeof *upd);
    for (int w = 0; w < sc->n_dev; w++) pc[w] = sc->off[w];
    int progress = 1;
    while (progress) {
        progress = 0;
        for (int w = 0; w < sc->n_dev; w++)
            while (pc[w] < sc->off[w + 1]) {
                const sched_op *op = &sc->ops[pc[w]];
                int s = op->stage;
                int64_t g = (int64_t)op->iter * m + op->micro, k = g * S + s;
                double ready = t[w], d = 0;
                if (op->kind == SCHED_F) {
                    if (s > 0 && fe[k - 1] < 0) break;
                    if (s > 0 && fe[k - 1] > ready) ready = fe[k - 1];
                    d = p->stages[s].fwd_s;
                } else if (op->kind == SCHED_B) {
                    if (fe[k] < 0 || (s < S - 1 && be[k + 1] < 0)) break;
                    if (fe[k] > ready) ready = fe[k];
                    if (s < S - 1 && be[k + 1] > ready) ready = be[k + 1];
                    d = p->stages[s].bwd_in_s + ((op->flags & SCHED_FUSED_W) ? p->stages[s].bwd_w_s : 0);
                } else if (op->kind == SCHED_W) {
                    if (be[k] < 0) break;
                    if (be[k] > ready) ready = be[k];
                    d = p->stages[s].bwd_w_s;
                } else if (op->kind == SCHED_ALLREDUCE) {
                    int64_t a = (int64_t)s * (G + sc->n_iter + 1) + posted[w * S + s]++;
                    arN[a]++;
                    if (t[w] > arT[a]) arT[a] = t[w];
                } else if (op->kind == SCHED_UPDATE && p->stages[s].n_replicas > 1 && posted[w * S + s]) {
                    int64_t a = (int64_t)s * (G + sc->n_iter + 1) + upd[w * S + s];
                    if (arN[a] < p->stages[s].n_replicas) break;
                    if (arT[a] > ready) ready = arT[a];
                    upd[w * S + s]++;
                }
                t[w] = ready + d;
                if (op->kind == SCHED_F) fe[k] = t[w];
                if (op->kind == SCHED_B) be[k] = t[w];
                if (op->kind == SCHED_W) we[k] = t[w];
                pc[w]++;
                progress = 1;
            }
    }
    double end = 0;
    for (int w = 0; w < sc->n_dev; w++) {
        if (pc[w] < sc->off[w + 1]) end = -1;
        if (end >= 0 && t[w] > end) end = t[w];
    }
    free(fe); free(be); free(we); free(arT); free(arN); free(pc); free(t); free(posted); free(upd);
    return end;
}

static void test_replay_equals_longest_path(void)
{
    /* both fixture plans, every kind that fits, free communication */
    const char *plans[] = {PLAN2, PLANR};
    int checked = 0;
    for (int i = 0; i < 2; i++) {
        cl_err e = {0};
        plan p;
        CU_ASSERT_EQUAL_FATAL(plan_load(&p, plans[i], &e), 0);
        for (int k = 0; k < SCHED_COUNT; k++) {
            int m = 12, P = p.n_stages;
            sched sc;
            if (sched_build(&p, (sched_kind)k, m, sched_default_iters((sched_kind)k, P, m), &sc, &e)) {
                cl_err_clear(&e);
                continue;
            }
            sim_opts o = {.comm_off = 1};
            sim *s = sim_create(&p, &sc, &o, &e);
            sim_result r;
            CU_ASSERT_EQUAL_FATAL(sim_run(s, &r, &e), 0);
            double want = longest_path(&p, &sc);
            if (test_rel(r.makespan_s, want) > 1e-12)
                fprintf(stderr, "%s %s: replay %.12g, longest path %.12g\n", plans[i],
                        sched_kind_name((sched_kind)k), r.makespan_s, want);
            CU_ASSERT(test_rel(r.makespan_s, want) < 1e-12);
            checked++;
            sim_result_free(&r);
            sim_destroy(s);
            sched_free(&sc);
        }
        plan_free(&p);
    }
    CU_ASSERT(checked >= 10);
}

static void test_random_plans_longest_path(void)
{
    /* random stage times and replica counts: the replay with free links is
     * the longest path, for every kind */
    uint64_t x = 0x2545F4914F6CDD1Dull;
    int bad = 0, n = 0;
    for (int trial = 0; trial < 60; trial++) {
        int P = 1 + (int)((x = x * 6364136223846793005ull + 1) >> 61) % 4;
        int r[4], D = 0;
        for (int j = 0; j < P; j++) r[j] = 1 + (int)((x = x * 6364136223846793005ull + 1) >> 62) % 3, D += r[j];
        cl_err e = {0};
        plan p;
        sim_uniform u = {.stages = D, .micro = 12, .schedule = SCHED_1F1B, .fwd_s = 1, .bwd_in_s = 1,
                         .bwd_w_s = 1, .act_bytes = 1, .intra = {1e9, 0}, .inter = {1e9, 0}};
        CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), 0);
        for (int j = P; j < D; j++) free(p.stages[j].devices);
        p.n_stages = P;
        for (int j = 0, dev = 0; j < P; j++) {
            plan_stage *st = &p.stages[j];
            st->n_replicas = r[j];
            st->devices = cl_realloc(st->devices, (size_t)r[j] * sizeof(int));
            for (int q = 0; q < r[j]; q++) st->devices[q] = dev++;
            st->fwd_s = 0.5 + (double)((x = x * 6364136223846793005ull + 1) >> 40) / (1 << 24);
            st->bwd_in_s = 0.5 + (double)((x = x * 6364136223846793005ull + 1) >> 40) / (1 << 24);
            st->bwd_w_s = (double)((x = x * 6364136223846793005ull + 1) >> 40) / (1 << 24);
        }
        for (int k = 0; k < SCHED_COUNT; k++) {
            int m = 12;
            sched sc;
            if (k == SCHED_INTERLEAVED ||
                sched_build(&p, (sched_kind)k, m, sched_default_iters((sched_kind)k, P, m), &sc, &e)) {
                cl_err_clear(&e);
                continue;
            }
            sim_opts o = {.comm_off = 1};
            sim *s = sim_create(&p, &sc, &o, &e);
            sim_result res;
            int rc = sim_run(s, &res, &e);
            double want = longest_path(&p, &sc);
            if (rc || test_rel(res.makespan_s, want) > 1e-12) {
                fprintf(stderr, "random %s P=%d: rc %d %s replay %.12g want %.12g\n",
                        sched_kind_name((sched_kind)k), P, rc, e.msg, rc ? 0 : res.makespan_s, want);
                bad++;
            }
            n++;
            if (!rc) sim_result_free(&res);
            sim_destroy(s);
            sched_free(&sc);
        }
        sim_uniform_free(&p);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(n > 300);
}

/* A plan made with --comm off is simulated without communication unless the
 * user asks for it, so planner and simulator answer the same question. */
static void test_comm_follows_plan(void)
{
    char buf[512];
    const char *pd = test_shared("pipedream/vgg16.txt", buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pd);
    char *dir = test_tmpdir(), plan_path[600], args[1400];
    snprintf(plan_path, sizeof plan_path, "%s/p.json", dir);
    snprintf(args, sizeof args, "plan --profile %s --devices 4 --comm off --no-replication --schedule fbp -o %s",
             pd, plan_path);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
    double it[3];
    const char *comm[3] = {"", "--comm off", "--comm on"};
    for (int k = 0; k < 3; k++) {
        char *out = NULL;
        snprintf(args, sizeof args, "sim %s --json %s", plan_path, comm[k]);
        CU_ASSERT_EQUAL(test_run_cli(args, &out, NULL), 0);
        cJSON *j = parse_out(out);
        it[k] = j ? num(j, "iteration_s") : NAN;
        cJSON_Delete(j);
        free(out);
    }
    CU_ASSERT_EQUAL(it[0], it[1]);
    CU_ASSERT(it[2] > it[0] * 1.05);
    /* FBP's steady state is the slowest stage: the planner's 0.216450 s */
    CU_ASSERT(fabs(it[0] - 0.216450) < 0.216450 * 0.01);
    remove(plan_path);
    rmdir(dir);
    free(dir);
}

TEST_SUITE(sim_cli)
{
    test_add_suite("sim_cli");
    test_add("table and --json on planner-written plans", test_table_and_json);
    test_add("--trace and --dump-schedule; the dump reloads to the same time", test_trace_dump_and_reload);
    test_add("trace: slices on one track never overlap, to the nanosecond", test_trace_slices_never_overlap);
    test_add("bad input: deadlock, incomplete file, budgets, exit 2, no output left", test_bad_input);
    test_add("replay = longest path through the op lists (fixture plans)", test_replay_equals_longest_path);
    test_add("replay = longest path on random replicated plans, every kind", test_random_plans_longest_path);
    test_add("a --comm off plan is simulated without communication by default", test_comm_follows_plan);
}
