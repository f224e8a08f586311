/* test_pipe_sync.c - the pipelined runner against sequential training: the
 * synchronous schedules (and the replicated stages' all-reduce) compute the
 * same update as gradient accumulation over the same microbatches; the
 * measured memory matches the schedule's closed forms; the trace has the
 * simulator's layout and names. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "exec/run/train.h"
#include "sim/sim.h"
#include "sim/trace.h"
#include "base/fileio.h"
#include "test.h"
#include "test_pipe.h"

/* Run fixture `name` for `iters` iterations on threads and compare weights
 * and per-iteration losses with sequential accumulation. */
static void check_sync_for(const char *name, int iters, double tol, plan_for fw)
{
    tp_fixture f;
    if (tp_setup(&f, name, name, iters)) return;
    f.p.framework = fw;
    exec_pipe_result r;
    tp_run(&f.p, &f.o, &r);
    float *ref;
    int64_t n_ref;
    double *loss = cl_calloc((size_t)iters, sizeof *loss);
    tp_ref_sync(&f.p, &f.o, iters, &ref, &n_ref, loss);
    double err = tp_rel_err(&r, ref, n_ref);
    if (!(err <= tol) || getenv("TP_DEBUG")) fprintf(stderr, "\n%s x %d: weights differ by %g (relative)\n", name, iters, err);
    CU_ASSERT(err <= tol);
    CU_ASSERT_EQUAL(r.n_iter, iters);
    for (int k = 0; k < iters; k++) {
        if (!(test_rel(r.iter_loss[k], loss[k]) <= tol))
            fprintf(stderr, "\n%s: iteration %d loss %.9g, sequential %.9g\n", name, k, r.iter_loss[k], loss[k]);
        CU_ASSERT(test_rel(r.iter_loss[k], loss[k]) <= tol);
    }
    /* the loss moved: the comparison is not of two untrained models */
    if (iters > 1) CU_ASSERT(loss[iters - 1] < loss[0]);
    free(loss);
    free(ref);
    exec_pipe_result_free(&r);
    tp_free(&f);
}

static void check_sync(const char *name, int iters, double tol)
{
    check_sync_for(name, iters, tol, PLAN_FOR_ANY);
}

/* One iteration: the update itself (1e-5 relative, as the issue asks). */
static void test_one_iteration(void)
{
    const char *names[] = {"tiny2-gpipe.json", "tiny2-1f1b.json", "tiny-interleaved.json",
                           "tiny2-zbh1.json", "tiny4-1f1b.json", "tiny2-sequential.json"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) check_sync(names[i], 1, 1e-5);
}

/* One stage, one microbatch of the whole batch: four pipelined iterations
 * are two epochs of the sequential trainer (exec/run/train.h) over two batches,
 * bit for bit: the same data order, cosine schedule, dropout masks. */
static void test_equals_trainer(void)
{
    tp_fixture f;
    if (tp_setup(&f, "tiny1-gpipe.json", "t", 4)) return;
    exec_data_limit(&f.train, 2 * f.p.batch); /* f.o.train points at it */
    f.o.lr_schedule = EXEC_LR_COSINE;
    exec_pipe_result r;
    tp_run(&f.p, &f.o, &r);
    cl_err e = {0};
    exec_train_opts to;
    exec_train_defaults(&to);
    to.epochs = 2;
    to.batch = f.p.batch;
    to.lr = f.o.lr;
    to.momentum = f.o.momentum;
    to.weight_decay = f.o.weight_decay;
    to.schedule = EXEC_LR_COSINE;
    to.seed = f.o.seed;
    exec_trainer *t;
    CU_ASSERT_EQUAL_FATAL(exec_trainer_create(&t, &f.p.model, "t", &to, &e), CL_OK);
    exec_epoch ep;
    for (int k = 0; k < 2; k++) exec_trainer_epoch(t, &f.train, NULL, NULL, NULL, &ep);
    exec_net *net = exec_trainer_net(t);
    int same = r.n_tensors == exec_net_n_tensors(net);
    for (int k = 0; same && k < r.n_tensors; k++) {
        const exec_tensor *x = exec_net_tensor(net, k);
        same = x->n == r.tensors[k].n &&
               memcmp(x->data, r.params + r.tensors[k].offset, (size_t)x->n * sizeof(float)) == 0;
    }
    CU_ASSERT(same);
    exec_trainer_destroy(t);
    exec_pipe_result_free(&r);
    tp_free(&f);
}

/* A few dozen iterations over more than one pass of the data (256 samples,
 * batch 16: 16 iterations per epoch): losses and weights stay together. */
static void test_many_iterations(void)
{
    const char *names[] = {"tiny2-gpipe.json", "tiny2-1f1b.json", "tiny-interleaved.json",
                           "tiny2-zbh1.json"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) check_sync(names[i], 36, 1e-5);
}

/* A plan for deepspeed runs DeepSpeed's op lists (its TrainSchedule, each
 * output sent a step later: docs/simulator.md, "Blocking transfers"), the
 * same lists the simulator replays; the executor's threads run them with
 * their own channels and train the same model as sequential accumulation. */
static void test_deepspeed_lists(void)
{
    const char *names[] = {"tiny2-1f1b.json", "tiny4-1f1b.json"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        plan p;
        if (tp_plan(names[i], &p)) continue;
        p.framework = PLAN_FOR_DEEPSPEED;
        sched sc;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(sched_build(&p, p.schedule, p.n_micro, 1, &sc, &e), CL_OK);
        CU_ASSERT(sc.blocking_p2p); /* the lists the run below gets */
        sched_free(&sc);
        plan_free(&p);
        check_sync_for(names[i], 1, 1e-5, PLAN_FOR_DEEPSPEED);
        check_sync_for(names[i], 20, 1e-5, PLAN_FOR_DEEPSPEED);
    }
}

/* A replicated stage: microbatches alternate between its two replicas and
 * the ring all-reduce sums their gradients (another summation order, so
 * not bit for bit). */
static void test_replicated(void)
{
    check_sync("tiny-rep-gpipe.json", 1, 1e-5);
    check_sync("tiny-rep-1f1b.json", 1, 1e-5);
    check_sync("tiny-rep-1f1b.json", 20, 1e-4);
}

/* Peak stashed microbatches and weight versions per worker equal the
 * schedule module's closed forms (the planner's and simulator's memory
 * model); weights, gradients and momentum are each one parameter block. */
static void test_memory(void)
{
    const char *names[] = {"tiny2-gpipe.json", "tiny2-1f1b.json", "tiny4-1f1b.json",
                           "tiny2-zbh1.json", "tiny-interleaved.json", "tiny3-pipedream.json",
                           "tiny3-fbp.json"};
    exec_data tr, te;
    tp_data(&tr, &te);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        plan p;
        if (tp_plan(names[i], &p)) continue;
        exec_pipe_opts o;
        tp_opts(&o, &tr, names[i], 3);
        exec_pipe_result r;
        tp_run(&p, &o, &r);
        cl_err e = {0};
        int P = p.n_stages / (p.chunks > 1 ? p.chunks : 1), v = p.chunks > 1 ? p.chunks : 1;
        for (int w = 0; w < r.n_workers; w++) {
            const exec_pipe_worker *x = &r.w[w];
            int s = x->stage;
            int want = sched_inflight(p.schedule, P, s, p.n_micro, v);
            if (x->peak_stash != want)
                fprintf(stderr, "\n%s worker %d: %d stashed, closed form %d\n", names[i], w, x->peak_stash, want);
            CU_ASSERT_EQUAL(x->peak_stash, want);
            CU_ASSERT_EQUAL(x->peak_versions, sched_versions(p.schedule, P, s, p.n_micro));
            /* parameter blocks of the stages it holds, counted from fresh nets */
            double block = 0;
            for (int st = s; st < p.n_stages; st += P) {
                exec_net *n;
                CU_ASSERT_EQUAL_FATAL(exec_net_create(&n, &p.model, p.stages[st].first, p.stages[st].last + 1,
                                                      p.microbatch, 1, 0, "t", &e), CL_OK);
                int64_t nf;
                exec_net_params(n, &nf);
                block += (double)nf * 4;
                exec_net_destroy(n);
            }
            CU_ASSERT_EQUAL(x->at_peak.weights, block);
            CU_ASSERT_EQUAL(x->at_peak.grads, block);
            CU_ASSERT_EQUAL(x->at_peak.optim, block); /* momentum 0.9 */
            CU_ASSERT(x->at_peak.stash > 0);
            CU_ASSERT(x->peak_mem_bytes >= sim_mem_total(&x->at_peak) - 1e-9);
            CU_ASSERT(x->peak_rss_bytes > x->peak_mem_bytes);
        }
        exec_pipe_result_free(&r);
        plan_free(&p);
    }
    exec_data_free(&tr);
    exec_data_free(&te);
}

/* Timing results are consistent: iteration ends increase, busy + wait
 * within the wall time, per-iteration busy sums to the total. */
static void test_timing(void)
{
    tp_fixture f;
    if (tp_setup(&f, "tiny2-1f1b.json", "t", 6)) return;
    exec_pipe_result r;
    tp_run(&f.p, &f.o, &r);
    for (int k = 0; k < r.n_iter; k++) {
        CU_ASSERT(r.iter_s[k] > 0);
        CU_ASSERT(fabs(r.iter_s[k] - (r.iter_end_s[k] - (k ? r.iter_end_s[k - 1] : 0))) < 1e-12);
    }
    CU_ASSERT_DOUBLE_EQUAL(r.wall_s, r.iter_end_s[r.n_iter - 1], 1e-12);
    for (int w = 0; w < r.n_workers; w++) {
        double sum = 0;
        for (int k = 0; k < r.n_iter; k++) sum += r.w[w].iter_busy_s[k];
        CU_ASSERT_DOUBLE_EQUAL(sum, r.w[w].busy_s, 1e-9);
        CU_ASSERT(r.w[w].busy_s > 0 && r.w[w].busy_s + r.w[w].wait_s <= r.wall_s + 1e-3);
        CU_ASSERT(r.w[w].sent_bytes > 0);
    }
    CU_ASSERT_EQUAL(r.n_epochs, 1);
    exec_pipe_result_free(&r);
    tp_free(&f);
}

/* ------------------------------------------------------------- trace -- */

typedef struct tinfo {
    char *threads[64];     /* "pid tid name" of metadata, sorted for comparison */
    int n_threads;
    char *slices[4096];    /* "tid name stage mb iter" of compute slices */
    int n_slices;
    char *xfers[4096];     /* "name stage mb iter from to" of transfers */
    int n_xfers;
    int n_links, n_mem;
} tinfo;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void read_trace(const char *path, tinfo *t)
{
    memset(t, 0, sizeof *t);
    char *text;
    size_t len;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cl_read_file(path, 1 << 26, &text, &len, &e), CL_OK);
    cJSON *root = cJSON_Parse(text);
    free(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(root, "traceEvents"))
    {
        const char *ph = cJSON_GetObjectItem(ev, "ph")->valuestring;
        const char *name = cJSON_GetObjectItem(ev, "name")->valuestring;
        int pid = cJSON_GetObjectItem(ev, "pid")->valueint;
        const cJSON *args = cJSON_GetObjectItem(ev, "args");
        char buf[256];
        if (!strcmp(ph, "M") && !strcmp(name, "thread_name") && t->n_threads < 64) {
            /* link lanes (" #2") depend on timing; compare the links themselves */
            snprintf(buf, sizeof buf, "%d %s", pid, cJSON_GetObjectItem(args, "name")->valuestring);
            char *lane = strstr(buf, " #");
            if (lane) continue;
            t->threads[t->n_threads++] = cl_strdup(buf);
        } else if (!strcmp(ph, "X") && pid == TRACE_PID_DEVICES && t->n_slices < 4096) {
            snprintf(buf, sizeof buf, "%d %s %d %d %d", cJSON_GetObjectItem(ev, "tid")->valueint, name,
                     cJSON_GetObjectItem(args, "stage")->valueint, cJSON_GetObjectItem(args, "mb")->valueint,
                     cJSON_GetObjectItem(args, "iter")->valueint);
            t->slices[t->n_slices++] = cl_strdup(buf);
        } else if (!strcmp(ph, "X")) {
            t->n_links++;
            CU_ASSERT(cJSON_GetObjectItem(args, "bytes")->valuedouble > 0);
            if (strcmp(name, "AR") && t->n_xfers < 4096) {
                snprintf(buf, sizeof buf, "%s %d %d %d %d %d", name,
                         cJSON_GetObjectItem(args, "stage")->valueint, cJSON_GetObjectItem(args, "mb")->valueint,
                         cJSON_GetObjectItem(args, "iter")->valueint, cJSON_GetObjectItem(args, "from")->valueint,
                         cJSON_GetObjectItem(args, "to")->valueint);
                t->xfers[t->n_xfers++] = cl_strdup(buf);
            }
        } else if (!strcmp(ph, "C")) {
            t->n_mem++;
            CU_ASSERT(!strncmp(name, "memory dev ", 11));
        }
    }
    cJSON_Delete(root);
    qsort(t->threads, (size_t)t->n_threads, sizeof *t->threads, cmp_str);
    qsort(t->slices, (size_t)t->n_slices, sizeof *t->slices, cmp_str);
    qsort(t->xfers, (size_t)t->n_xfers, sizeof *t->xfers, cmp_str);
}

static void free_trace(tinfo *t)
{
    for (int i = 0; i < t->n_threads; i++) free(t->threads[i]);
    for (int i = 0; i < t->n_slices; i++) free(t->slices[i]);
    for (int i = 0; i < t->n_xfers; i++) free(t->xfers[i]);
}

/* The measured trace and the simulator's trace of the same plan and
 * iterations have the same tracks, the same compute slices (names, stage,
 * microbatch, iteration) and the same transfers (names, sender's stage,
 * microbatch, iteration, devices); memory counters are there. */
static void test_trace_matches_sim(void)
{
    const char *names[] = {"tiny2-1f1b.json", "tiny-interleaved.json", "tiny-rep-gpipe.json",
                           "tiny3-pipedream.json"};
    exec_data tr, te;
    tp_data(&tr, &te);
    char *dir = test_tmpdir();
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        plan p;
        if (tp_plan(names[i], &p)) continue;
        char mpath[512], spath[512];
        snprintf(mpath, sizeof mpath, "%s/measured.json", dir);
        snprintf(spath, sizeof spath, "%s/sim.json", dir);
        int iters = 2;
        exec_pipe_opts o;
        tp_opts(&o, &tr, names[i], iters);
        o.trace_path = mpath;
        exec_pipe_result r;
        tp_run(&p, &o, &r);
        exec_pipe_result_free(&r);
        cl_err e = {0};
        sched sc;
        CU_ASSERT_EQUAL_FATAL(sched_build(&p, p.schedule, p.n_micro, iters, &sc, &e), CL_OK);
        sim_opts so = {.record = 1};
        sim *s = sim_create(&p, &sc, &so, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        sim_result sr;
        CU_ASSERT_EQUAL_FATAL(sim_run(s, &sr, &e), CL_OK);
        CU_ASSERT_EQUAL_FATAL(sim_write_trace(s, spath, &e), CL_OK);
        sim_result_free(&sr);
        sim_destroy(s);
        sched_free(&sc);
        tinfo a, b;
        read_trace(mpath, &a);
        read_trace(spath, &b);
        CU_ASSERT_EQUAL(a.n_threads, b.n_threads);
        for (int k = 0; k < a.n_threads && k < b.n_threads; k++) {
            if (strcmp(a.threads[k], b.threads[k]))
                fprintf(stderr, "\n%s: track \"%s\" measured, \"%s\" simulated\n", names[i], a.threads[k], b.threads[k]);
            CU_ASSERT_STRING_EQUAL(a.threads[k], b.threads[k]);
        }
        CU_ASSERT_EQUAL(a.n_slices, b.n_slices);
        for (int k = 0; k < a.n_slices && k < b.n_slices; k++) CU_ASSERT_STRING_EQUAL(a.slices[k], b.slices[k]);
        CU_ASSERT_EQUAL(a.n_xfers, b.n_xfers);
        for (int k = 0; k < a.n_xfers && k < b.n_xfers; k++) {
            if (strcmp(a.xfers[k], b.xfers[k]))
                fprintf(stderr, "\n%s: transfer \"%s\" measured, \"%s\" simulated\n", names[i], a.xfers[k], b.xfers[k]);
            CU_ASSERT_STRING_EQUAL(a.xfers[k], b.xfers[k]);
        }
        CU_ASSERT(a.n_links > 0);
        CU_ASSERT(a.n_mem > 0);
        free_trace(&a);
        free_trace(&b);
        remove(mpath);
        remove(spath);
        plan_free(&p);
    }
    rmdir(dir);
    free(dir);
    exec_data_free(&tr);
    exec_data_free(&te);
}

TEST_SUITE(pipe_sync)
{
    test_add_suite("pipe_sync");
    test_add("synchronous schedules: one iteration equals sequential accumulation", test_one_iteration);
    test_add("synchronous schedules: 36 iterations of losses and weights", test_many_iterations);
    test_add("one stage, one microbatch: the sequential trainer bit for bit", test_equals_trainer);
    test_add("replicated stage: ring all-reduce equals sequential", test_replicated);
    test_add("deepspeed plans: DeepSpeed's op lists train as sequential accumulation", test_deepspeed_lists);
    test_add("memory: stash and versions equal the closed forms", test_memory);
    test_add("timing: iteration ends, busy and wait are consistent", test_timing);
    test_add("trace: the simulator's tracks and op names", test_trace_matches_sim);
}
