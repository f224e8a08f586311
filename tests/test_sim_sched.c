/* test_sim_sched.c - the schedule module: every built-in kind passes the
 * consistency check (also with replicated stages) and completes; the JSON
 * form round-trips; explicit schedules that are incomplete or deadlock are
 * refused naming the device and op. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "sim/sim.h"
#include "base/jsonx.h"
#include "test.h"

static const cluster_link fast = {1e9, 1e-6};

static sim_uniform uni(sched_kind k, int p, int m, int r, int v)
{
    sim_uniform u = {.stages = p, .chunks = v, .replicas = r, .micro = m, .schedule = k,
                     .fwd_s = 1, .bwd_in_s = 1, .bwd_w_s = 1, .act_bytes = 1e6,
                     .stash_bytes = 1e3, .param_bytes = 4e6, .intra = fast, .inter = fast,
                     .per_node = 4};
    return u;
}

/* pl = the uniform plan uni(k, p, m, r, v); fatal when it cannot be made. */
static void uniform_plan(plan *pl, sched_kind k, int p, int m, int r, int v)
{
    cl_err e = {0};
    sim_uniform u = uni(k, p, m, r, v);
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(pl, &u, &e), 0);
}

static int simulate(const plan *p, const sched *sc, sim_result *r, cl_err *e)
{
    sim_opts o = {0};
    sim *s = sim_create(p, sc, &o, e);
    if (!s) return e->code;
    int rc = sim_run(s, r, e);
    sim_destroy(s);
    return rc;
}

static void test_all_kinds_check_and_complete(void)
{
    int bad = 0, n = 0;
    for (int k = 0; k < SCHED_COUNT; k++)
        for (int p = 1; p <= 5; p++)
            for (int r = 1; r <= 3; r++)
                for (int v = 1; v <= 2; v++)
                    for (int m = 1; m <= 9; m++) {
                        if (v > 1 && (k != SCHED_INTERLEAVED || m % p)) continue;
                        if (sched_is_async((sched_kind)k) && m % r) continue;
                        cl_err e = {0};
                        plan pl;
                        uniform_plan(&pl, (sched_kind)k, p, m, r, v);
                        int iters = sched_is_async((sched_kind)k) ? 3 : 2;
                        sched sc;
                        int rc = sched_build(&pl, (sched_kind)k, m, iters, &sc, &e);
                        if (!rc) rc = sched_check(&pl, &sc, "built", &e);
                        sim_result res = {0};
                        if (!rc) rc = simulate(&pl, &sc, &res, &e);
                        if (rc) {
                            fprintf(stderr, "%s p=%d r=%d v=%d m=%d: %s\n", sched_kind_name((sched_kind)k),
                                    p, r, v, m, e.msg);
                            bad++;
                        }
                        n++;
                        sim_result_free(&res);
                        sched_free(&sc);
                        sim_uniform_free(&pl);
                    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(n > 500);
}

static int same_ops(const sched *a, const sched *b)
{
    if (a->n_dev != b->n_dev || a->n_ops != b->n_ops || a->n_micro != b->n_micro ||
        a->n_iter != b->n_iter || a->kind != b->kind)
        return 0;
    for (int w = 0; w <= a->n_dev; w++)
        if (a->off[w] != b->off[w] || (w < a->n_dev && a->dev[w] != b->dev[w])) return 0;
    for (int64_t i = 0; i < a->n_ops; i++) {
        const sched_op *x = &a->ops[i], *y = &b->ops[i];
        if (x->kind != y->kind || x->flags != y->flags || x->chunk != y->chunk || x->stage != y->stage ||
            x->peer != y->peer || x->micro != y->micro ||
            x->iter != y->iter || x->wver != y->wver || x->bytes != y->bytes) {
            fprintf(stderr, "op %lld differs\n", (long long)i);
            return 0;
        }
    }
    return 1;
}

static void test_json_round_trip(void)
{
    struct { sched_kind k; int p, m, r, v, it; } cases[] = {
        {SCHED_1F1B, 4, 8, 1, 1, 2}, {SCHED_ZBH1, 3, 6, 2, 1, 1}, {SCHED_INTERLEAVED, 2, 4, 1, 2, 1},
        {SCHED_PIPEDREAM, 3, 4, 2, 1, 3}, {SCHED_SEQUENTIAL, 3, 2, 1, 1, 1}, {SCHED_GPIPE, 2, 3, 3, 1, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        cl_err e = {0};
        plan pl;
        uniform_plan(&pl, cases[c].k, cases[c].p, cases[c].m, cases[c].r, cases[c].v);
        sched a, b;
        CU_ASSERT_EQUAL_FATAL(sched_build(&pl, cases[c].k, cases[c].m, cases[c].it, &a, &e), 0);
        cJSON *j = sched_to_json(&a);
        int rc = sched_from_json(&pl, j, "rt.json", &b, &e);
        if (rc) fprintf(stderr, "round trip %s: %s\n", sched_kind_name(cases[c].k), e.msg);
        CU_ASSERT_EQUAL(rc, 0);
        if (!rc) CU_ASSERT_TRUE(same_ops(&a, &b));
        /* without the transfers, loading inserts the very same ones */
        cJSON *devs = cJSON_GetObjectItem(j, "devices"), *d;
        cJSON_ArrayForEach(d, devs) {
            cJSON *ops = cJSON_GetObjectItem(d, "ops");
            for (int i = cJSON_GetArraySize(ops) - 1; i >= 0; i--) {
                const char *k = cJSON_GetObjectItem(cJSON_GetArrayItem(ops, i), "op")->valuestring;
                if (!strcmp(k, "SEND") || !strcmp(k, "RECV")) cJSON_DeleteItemFromArray(ops, i);
            }
        }
        sched b2;
        rc = sched_from_json(&pl, j, "rt.json", &b2, &e);
        CU_ASSERT_EQUAL(rc, 0);
        if (!rc) CU_ASSERT_TRUE(same_ops(&a, &b2));
        cJSON_Delete(j);
        sched_free(&a);
        sched_free(&b);
        sched_free(&b2);
        sim_uniform_free(&pl);
    }
}

/* A hand-written schedule file loaded against the two-stage 1F1B plan pl:
 * sched_load's code. */
static int load_two_stage(const char *path, plan *pl, sched *sc, cl_err *e)
{
    uniform_plan(pl, SCHED_1F1B, 2, 2, 1, 1);
    return sched_load(pl, path, sc, e);
}

static void test_deadlock_is_reported(void)
{
    plan pl;
    sched sc;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(load_two_stage("tests/data/sim/deadlock.json", &pl, &sc, &e), 0);
    sim_result r = {0};
    CU_ASSERT_EQUAL(simulate(&pl, &sc, &r, &e), CL_EINPUT);
    /* both devices named, each with the op it waits at */
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "deadlock"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "device 0 (worker 0) waits at op 2 RECV gradient of stage 0 microbatch 0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "device 1 (worker 1) waits at op 0 RECV activation of stage 1 microbatch 1"));
    sched_free(&sc);
    sim_uniform_free(&pl);
}

static void test_incomplete_is_refused(void)
{
    plan pl;
    sched sc;
    cl_err e = {0};
    CU_ASSERT_EQUAL(load_two_stage("tests/data/sim/missing_recv.json", &pl, &sc, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "missing_recv.json: devices[1].ops[0] (F stage 1 mb 0 iter 0): no RECV"));
    /* a bad member is named by its JSON path */
    const char *bad = "{\"format\": \"cleave-schedule\", \"version\": 1, \"microbatches\": 1, "
                      "\"devices\": [{\"device\": 0, \"ops\": [{\"op\": \"F\", \"stage\": 5, \"mb\": 0}, "
                      "{\"op\": \"B\", \"stage\": 0, \"mb\": 0}, {\"op\": \"F\", \"stage\": 1, \"mb\": 0}, "
                      "{\"op\": \"B\", \"stage\": 1, \"mb\": 0}]}]}";
    cJSON *j;
    CU_ASSERT_EQUAL_FATAL(jx_parse_text("x.json", bad, strlen(bad), &j, &e), 0);
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(sched_from_json(&pl, j, "x.json", &sc, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "x.json: devices[0].ops[0].stage: 5 is out of range"));
    cJSON_Delete(j);
    /* a file claiming more microbatches than its ops can hold is refused
     * before anything that size is allocated */
    const char *big = "{\"format\": \"cleave-schedule\", \"version\": 1, \"microbatches\": 1000000, "
                      "\"iterations\": 1, \"devices\": [{\"device\": 0, \"ops\": []}]}";
    CU_ASSERT_EQUAL_FATAL(jx_parse_text("y.json", big, strlen(big), &j, &e), 0);
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(sched_from_json(&pl, j, "y.json", &sc, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "y.json: microbatches: 1000000 microbatches x 1 iterations x 2 stages need at least 4000000 ops"));
    cJSON_Delete(j);
    sim_uniform_free(&pl);
}

static void test_hand_written_schedule(void)
{
    /* stage 0 splits B and W, stage 1 fuses them; unit times, free links:
     * s0 F0 [0,1] F1 [1,2]; s1 F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7];
     * s0 B0 [4,5] W0 [5,6] B1 [7,8] W1 [8,9]  ->  9 */
    plan pl;
    cl_err e = {0};
    sim_uniform u = uni(SCHED_1F1B, 2, 2, 1, 1);
    u.intra = u.inter = (cluster_link){1e300, 0};
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&pl, &u, &e), 0);
    sched sc;
    CU_ASSERT_EQUAL_FATAL(sched_load(&pl, "tests/data/sim/hand_1f1b.json", &sc, &e), 0);
    CU_ASSERT_EQUAL(sc.kind, -1);
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(simulate(&pl, &sc, &r, &e), 0);
    CU_ASSERT(fabs(r.iteration_s - 9) < 1e-9);
    CU_ASSERT_EQUAL(r.dev[0].peak_stash, 2);
    sim_result_free(&r);
    sched_free(&sc);
    sim_uniform_free(&pl);
}

static void test_build_refusals(void)
{
    static const struct {
        sched_kind plan_kind;
        int p, m, r, v;             /* the uniform plan */
        sched_kind kind;
        int micro, iters;           /* what sched_build is asked for */
        const char *msg;
    } c[] = {
        {SCHED_INTERLEAVED, 4, 6, 1, 2, SCHED_INTERLEAVED, 6, 1, "multiple of the pipeline depth 4"},
        {SCHED_INTERLEAVED, 4, 6, 1, 2, SCHED_1F1B, 8, 1, "need the interleaved schedule"},
        {SCHED_FBP, 2, 5, 2, 1, SCHED_FBP, 5, 3, "multiple of 2"},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        cl_err e = {0};
        plan pl;
        sched sc;
        uniform_plan(&pl, c[i].plan_kind, c[i].p, c[i].m, c[i].r, c[i].v);
        CU_ASSERT_EQUAL(sched_build(&pl, c[i].kind, c[i].micro, c[i].iters, &sc, &e), CL_EINPUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, c[i].msg));
        sim_uniform_free(&pl);
    }
}

static void test_labels_and_fields(void)
{
    /* ops describe themselves: the executor needs no other source */
    cl_err e = {0};
    plan pl;
    uniform_plan(&pl, SCHED_PIPEDREAM, 2, 2, 1, 1);
    sched sc;
    CU_ASSERT_EQUAL_FATAL(sched_build(&pl, SCHED_PIPEDREAM, 2, 2, &sc, &e), 0);
    /* stage 0 of a 2-stage PipeDream: F0 F1 then (RECV B SEND UPDATE) and F */
    const sched_op *o = sc.ops;
    char buf[32];
    CU_ASSERT_STRING_EQUAL(sched_op_label(&sc, &o[0], buf, sizeof buf), "F0");
    CU_ASSERT_EQUAL(o[1].kind, SCHED_SEND);
    CU_ASSERT_EQUAL(o[1].peer, 1);
    CU_ASSERT_EQUAL(o[1].bytes, 1e6);
    CU_ASSERT_STRING_EQUAL(sched_op_label(&sc, &o[1], buf, sizeof buf), "A0");
    CU_ASSERT_EQUAL(o[4].kind, SCHED_RECV);
    CU_ASSERT_EQUAL(o[4].flags, SCHED_GRAD);
    CU_ASSERT_EQUAL(o[5].kind, SCHED_B);
    CU_ASSERT_EQUAL(o[5].wver, 0);
    CU_ASSERT_EQUAL(o[6].kind, SCHED_UPDATE);
    /* F of microbatch 2 (iteration 1, mb 0) runs after one update: version 1 */
    CU_ASSERT_EQUAL(o[7].kind, SCHED_F);
    CU_ASSERT_EQUAL(o[7].iter, 1);
    CU_ASSERT_EQUAL(o[7].micro, 0);
    CU_ASSERT_EQUAL(o[7].wver, 1);
    sched_free(&sc);
    sim_uniform_free(&pl);
}

TEST_SUITE(sim_sched)
{
    test_add_suite("sim_sched");
    test_add("every kind x stages x replicas x chunks passes the check and completes",
             test_all_kinds_check_and_complete);
    test_add("JSON round trip, with and without explicit transfers", test_json_round_trip);
    test_add("a deadlocked explicit schedule names each device and op", test_deadlock_is_reported);
    test_add("an incomplete explicit schedule is refused with its JSON path", test_incomplete_is_refused);
    test_add("a hand-written split/fused schedule gives the hand-computed time", test_hand_written_schedule);
    test_add("combinations that cannot be built are refused", test_build_refusals);
    test_add("op fields and labels", test_labels_and_fields);
}
