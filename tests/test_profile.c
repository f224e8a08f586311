/* test_profile.c - profile files, interpolation across batch sizes and the
 * roofline derivation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "models/model.h"
#include "profiles/cluster.h"
#include "profiles/profile.h"
#include "exec/probe/profile_layers.h"
#include "test.h"

/* Loaders and prof_derive zero every buffer, so a bitwise comparison
 * covers names, notes and every point. */
static int same_prof(const prof *a, const prof *b)
{
    if (strcmp(a->model, b->model) || strcmp(a->device, b->device) || strcmp(a->note, b->note) ||
        a->source != b->source || a->n_layers != b->n_layers)
        return 0;
    return prof_same_layers(a, b);
}

static void round_trip(const prof *a)
{
    prof b, c;
    cl_err e = {0};
    cJSON *j = prof_to_json(a);
    CU_ASSERT_EQUAL(prof_from_json(&b, j, "mem", &e), CL_OK);
    cJSON_Delete(j);
    CU_ASSERT(same_prof(a, &b));
    char *dir = test_tmpdir(), path[600];
    snprintf(path, sizeof path, "%s/p.json", dir);
    CU_ASSERT_EQUAL(prof_save(a, path, &e), CL_OK);
    CU_ASSERT_EQUAL(prof_load(&c, path, &e), CL_OK);
    CU_ASSERT(same_prof(a, &c));
    if (e.code) fprintf(stderr, "%s\n", e.msg);
    remove(path);
    rmdir(dir);
    free(dir);
    prof_free(&b);
    prof_free(&c);
}

/* The fixture profile of two layers (fc1, relu) at three batch sizes. */
static void load_two_layers(prof *p)
{
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(prof_load(p, "tests/data/profile/two-layers.json", &e), CL_OK);
}

static void test_load_and_round_trip(void)
{
    prof p;
    load_two_layers(&p);
    CU_ASSERT_STRING_EQUAL(p.model, "tiny");
    CU_ASSERT_EQUAL(p.source, PROF_MEASURED);
    CU_ASSERT_EQUAL(p.n_layers, 2);
    CU_ASSERT_EQUAL(p.layers[0].n_points, 3);
    CU_ASSERT_EQUAL(p.layers[0].batch[2], 64);
    CU_ASSERT_EQUAL(p.layers[0].fwd_sd[1], 0.00007);
    CU_ASSERT_EQUAL(p.layers[0].fwd_sd[2], 0);
    CU_ASSERT_EQUAL(p.layers[0].param_bytes, 803840);
    /* written before update_s existed: loads with 0 */
    CU_ASSERT_EQUAL(p.layers[0].update_s, 0);
    CU_ASSERT_EQUAL(p.layers[1].update_s, 0);
    round_trip(&p);
    p.layers[1].update_s = 0.00025;
    round_trip(&p);
    prof_free(&p);

    /* update_s is a time: negative is refused with its path */
    cl_err e = {0};
    cJSON *j = cJSON_Parse("{\"format\": \"cleave-profile\", \"version\": 1, \"model\": \"m\", "
                           "\"device\": \"d\", \"source\": \"measured\", \"layers\": [{\"name\": \"a\", "
                           "\"points\": [{\"batch\": 1, \"fwd_s\": 0, \"bwd_in_s\": 0, \"bwd_w_s\": 0}], "
                           "\"act_bytes\": 0, \"stash_bytes\": 0, \"param_bytes\": 4, \"update_s\": -1e-6}]}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(prof_from_json(&p, j, "mem.json", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "mem.json: layers[0].update_s: negative time"));
    cJSON_Delete(j);
}

/* cleave profile's update_s: the measured SGD update shared by parameter
 * count, so zero exactly where a layer has no parameters and the same
 * seconds per parameter byte everywhere else; it survives a round trip. */
static void test_measured_update(void)
{
    model m;
    prof p;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_load(&m, "models/fmnist-mlp.json", &e), CL_OK);
    const int64_t batches[1] = {8};
    CU_ASSERT_EQUAL_FATAL(exec_profile(&m, "models/fmnist-mlp.json", batches, 1, 1, 3, 1, &p, &e),
                          CL_OK);
    double per_byte = -1, total = 0;
    for (int l = 0; l < p.n_layers; l++) {
        const prof_layer *pl = &p.layers[l];
        CU_ASSERT((pl->param_bytes > 0) == (pl->update_s > 0));
        total += pl->update_s;
        if (pl->param_bytes <= 0) continue;
        if (per_byte < 0) per_byte = pl->update_s / pl->param_bytes;
        CU_ASSERT(test_rel(pl->update_s / pl->param_bytes, per_byte) < 1e-9);
    }
    CU_ASSERT(total > 0 && total < 1.0);
    round_trip(&p);
    prof_free(&p);
    model_free(&m);
}

/* Lookups against the straight-line formulas, written out here. */
static void test_interpolation(void)
{
    prof p;
    load_two_layers(&p);
    const prof_layer *fc = &p.layers[0], *relu = &p.layers[1];
    /* exactly the profiled numbers at the profiled batch sizes */
    for (int k = 0; k < fc->n_points; k++) {
        CU_ASSERT_EQUAL(prof_fwd_s(fc, fc->batch[k]), fc->fwd_s[k]);
        CU_ASSERT_EQUAL(prof_bwd_in_s(fc, fc->batch[k]), fc->bwd_in_s[k]);
        CU_ASSERT_EQUAL(prof_bwd_w_s(fc, fc->batch[k]), fc->bwd_w_s[k]);
    }
    /* midpoints: (8, 1.0 ms) - (16, 1.8 ms) - (64, 6.6 ms) */
    CU_ASSERT(test_rel(prof_fwd_s(fc, 12), 0.0014) < 1e-12);
    CU_ASSERT(test_rel(prof_fwd_s(fc, 40), 0.0042) < 1e-12);
    CU_ASSERT(test_rel(prof_bwd_w_s(fc, 40), 0.0021 + 24.0 / 48.0 * (0.0081 - 0.0021)) < 1e-12);
    /* below the range along the first segment: slope 0.1 ms per sample */
    CU_ASSERT(test_rel(prof_fwd_s(fc, 4), 0.0006) < 1e-12);
    CU_ASSERT(test_rel(prof_fwd_s(fc, 0.5), 0.00025) < 1e-12);
    /* above along the last: slope 4.8 ms / 48 = 0.1 ms per sample */
    CU_ASSERT(test_rel(prof_fwd_s(fc, 128), 0.0130) < 1e-12);
    /* bwd_in first segment: (8, 1.2 ms) - (16, 2.0 ms), so at 1: 1.2 - 0.7 = 0.5 ms */
    CU_ASSERT(test_rel(prof_bwd_in_s(fc, 1), 0.0005) < 1e-12);
    /* one point: in proportion to the batch */
    CU_ASSERT(test_rel(prof_fwd_s(relu, 64), 0.0004) < 1e-12);
    CU_ASSERT(test_rel(prof_fwd_s(relu, 8), 0.00005) < 1e-12);
    CU_ASSERT_EQUAL(prof_bwd_w_s(relu, 100), 0);
    /* a steep first segment would go negative below it: clamped at zero */
    prof_layer steep = {.n_points = 2, .batch = (double[]){8, 16}, .fwd_s = (double[]){1.0, 3.0}};
    CU_ASSERT_EQUAL(prof_fwd_s(&steep, 2), 0);
    CU_ASSERT(test_rel(prof_fwd_s(&steep, 6), 0.5) < 1e-12);
    /* a brute-force sweep inside the range against the segment formula */
    for (double b = 8; b <= 64; b += 0.37) {
        int k = b < 16 ? 0 : 1;
        double want = fc->fwd_s[k] + (b - fc->batch[k]) / (fc->batch[k + 1] - fc->batch[k]) *
                                         (fc->fwd_s[k + 1] - fc->fwd_s[k]);
        CU_ASSERT(fabs(prof_fwd_s(fc, b) - want) < 1e-15);
    }
    prof_free(&p);
}

/* A 1000 -> 500 linear layer, a relu and a flatten, with their costs set
 * by hand (independent of model_derive's conventions). */
static void hand_model(model *m, model_dtype dt)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "hand3");
    m->input = (model_shape){1, {1000}};
    m->dtype = dt;
    m->n_layers = 3;
    m->layers = cl_calloc(3, sizeof *m->layers);
    m->layers[0] = (model_layer){.name = "fc", .kind = MODEL_LINEAR, .n_inputs = 1, .inputs = {-1},
                                 .out_elems = 500, .stash_elems = 1000, .params = 500500,
                                 .fwd_flops = 1e6, .bwd_in_flops = 1e6, .bwd_w_flops = 1.0005e6};
    m->layers[1] = (model_layer){.name = "act", .kind = MODEL_RELU, .n_inputs = 1, .inputs = {0},
                                 .out_elems = 500, .stash_elems = 500, .fwd_flops = 500,
                                 .bwd_in_flops = 500};
    m->layers[2] = (model_layer){.name = "flat", .kind = MODEL_FLATTEN, .n_inputs = 1, .inputs = {1},
                                 .out_elems = 500};
}

static void test_roofline(void)
{
    /* peak 1 TFLOP/s x 0.5 = 5e11 FLOP/s (fp16: 4e12 x 0.5 = 2e12), 100 GB/s */
    cluster_devtype t = {.name = "hand", .peak_fp32_flops = 1e12, .peak_fp16_flops = 4e12,
                         .mem_bytes = 1 << 30, .mem_bw_Bps = 1e11, .efficiency = 0.5};
    model m;
    hand_model(&m, MODEL_F32);
    prof p;
    cl_err e = {0};
    const double batches[2] = {1, 1000};
    CU_ASSERT_EQUAL_FATAL(prof_derive(&p, &m, &t, batches, 2, &e), CL_OK);
    CU_ASSERT_EQUAL(p.source, PROF_DERIVED);
    CU_ASSERT_STRING_EQUAL(p.device, "hand");
    const prof_layer *fc = &p.layers[0], *act = &p.layers[1], *fl = &p.layers[2];
    /* fc forward, b = 1: compute 1e6 / 5e11 = 2e-6 s; memory (1 x (1000 + 500)
     * + 500500) x 4 B = 2,008,000 B / 1e11 = 2.008e-5 s: memory-bound */
    CU_ASSERT(test_rel(fc->fwd_s[0], 2.008e-5) < 1e-12);
    /* b = 1000: compute 1e9 / 5e11 = 2e-3 s; memory 8,002,000 B = 8.002e-5 s */
    CU_ASSERT(test_rel(fc->fwd_s[1], 2e-3) < 1e-12);
    /* input-grad, b = 1: memory (500 + 1000 + 1000 + 500500) x 4 = 2,012,000 B */
    CU_ASSERT(test_rel(fc->bwd_in_s[0], 2.012e-5) < 1e-12);
    CU_ASSERT(test_rel(fc->bwd_in_s[1], 2e-3) < 1e-12);
    /* weight-grad, b = 1: memory (500 + 1000 + 500500) x 4 = 2,008,000 B;
     * b = 1000: compute 1.0005e9 / 5e11 = 2.001e-3 s */
    CU_ASSERT(test_rel(fc->bwd_w_s[0], 2.008e-5) < 1e-12);
    CU_ASSERT(test_rel(fc->bwd_w_s[1], 2.001e-3) < 1e-12);
    /* relu, b = 1: memory (500 + 500) x 4 = 4000 B = 4e-8 s (compute 1e-9 s) */
    CU_ASSERT(test_rel(act->fwd_s[0], 4e-8) < 1e-12);
    CU_ASSERT(test_rel(act->fwd_s[1], 4e-5) < 1e-12);
    /* relu input-grad, b = 1000: 1000 x (500 + 500 + 500) x 4 = 6e6 B = 6e-5 s */
    CU_ASSERT(test_rel(act->bwd_in_s[1], 6e-5) < 1e-12);
    CU_ASSERT_EQUAL(act->bwd_w_s[1], 0);  /* no weights */
    CU_ASSERT_EQUAL(fl->fwd_s[1], 0);     /* a view moves nothing */
    CU_ASSERT_EQUAL(fl->bwd_in_s[1], 0);
    CU_ASSERT_EQUAL(fc->act_bytes, 2000);
    CU_ASSERT_EQUAL(fc->stash_bytes, 4000);
    CU_ASSERT_EQUAL(fc->param_bytes, 2002000);
    CU_ASSERT_EQUAL(prof_check_model(&p, &m, "p.json", &e), CL_OK);
    round_trip(&p);
    prof_free(&p);
    model_free(&m);

    /* 2-byte elements use the fp16 peak: b = 1000 compute 1e9 / 2e12 =
     * 5e-4 s (memory 4,001,000 B = 4.001e-5 s); b = 1 memory (1500 +
     * 500500) x 2 = 1,004,000 B = 1.004e-5 s (compute 5e-7 s) */
    hand_model(&m, MODEL_F16);
    CU_ASSERT_EQUAL_FATAL(prof_derive(&p, &m, &t, batches, 2, &e), CL_OK);
    CU_ASSERT(test_rel(p.layers[0].fwd_s[1], 5e-4) < 1e-12);
    CU_ASSERT(test_rel(p.layers[0].fwd_s[0], 1.004e-5) < 1e-12);
    prof_free(&p);

    const double bad[2] = {8, 8};
    CU_ASSERT_EQUAL(prof_derive(&p, &m, &t, bad, 2, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "must increase"));
    model_free(&m);
}

static void test_check_model(void)
{
    model m;
    hand_model(&m, MODEL_F32);
    prof p;
    load_two_layers(&p);
    cl_err e = {0};
    CU_ASSERT_EQUAL(prof_check_model(&p, &m, "two-layers.json", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "two-layers.json: layers: the profile has 2 layers but model \"hand3\" has 3"));
    cl_err_clear(&e);
    m.n_layers = 2;
    CU_ASSERT_EQUAL(prof_check_model(&p, &m, "two-layers.json", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "two-layers.json: layers[0].name: \"fc1\", but layer 0 of model \"hand3\" is \"fc\""));
    m.n_layers = 3;
    prof_free(&p);
    model_free(&m);
}

static void test_bad_files(void)
{
    static const struct { const char *file, *want; } cases[] = {
        {"bad-batch-order.json", "layers[1].points[1].batch: 16 does not exceed the previous point's batch 16"},
        {"bad-negative-time.json", "layers[0].points[0].bwd_w_s: negative time -0.001 s"},
        {"bad-format.json", "format: expected \"cleave-profile\", got \"cleave-cluster\""},
        {"bad-empty.json", "empty file"},
        {"bad-truncated.json", "truncated JSON"},
        {"bad-source.json", "source: unknown value \"guessed\""},
        {"bad-dup-layer.json", "layers[2].name: \"a\" is already the name of layers[0]"},
        {"bad-version.json", "version: 2 is newer than this cleave reads"},
        {"bad-no-points.json", "layers[0].points: has 0 elements"},
        {"bad-batch-zero.json", "layers[0].points[0].batch: expected a positive number, got 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256], want[512];
        snprintf(path, sizeof path, "tests/data/profile/%s", cases[i].file);
        snprintf(want, sizeof want, "%s: %s", path, cases[i].want);
        prof p;
        cl_err e = {0};
        CU_ASSERT_EQUAL(prof_load(&p, path, &e), CL_EINPUT);
        CU_ASSERT_EQUAL(strncmp(e.msg, want, strlen(want)), 0);
        if (strncmp(e.msg, want, strlen(want)) != 0)
            fprintf(stderr, "\n  %s\n  got:  %s\n  want: %s...\n", cases[i].file, e.msg, want);
        CU_ASSERT_PTR_NULL(p.layers);
    }
    /* NaN is not JSON: the parser names line and column */
    prof p;
    cl_err e = {0};
    CU_ASSERT_EQUAL(prof_load(&p, "tests/data/profile/bad-nan.json", &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "tests/data/profile/bad-nan.json:1:"));
}

static void test_cli(void)
{
    char *out, *err;
    int rc = test_run_cli("inspect tests/data/profile/two-layers.json", &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    /* at batch 64: fc1 profiled 6.6 + 6.8 + 8.1 ms, relu1 scaled from
     * batch 32: 2 x (0.2 + 0.25) ms; total 22.4 ms */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "22.400"));
    free(out);
    free(err);
    rc = test_run_cli("inspect tests/data/profile/bad-negative-time.json", &out, &err);
    CU_ASSERT_EQUAL(rc, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cleave: tests/data/profile/bad-negative-time.json: layers[0].points[0].bwd_w_s:"));
    free(out);
    free(err);
}

TEST_SUITE(profile)
{
    test_add_suite("profile");
    test_add("load and round trip (update_s optional, 0 when absent)", test_load_and_round_trip);
    test_add("interpolation: exact points, midpoints, extrapolation, one point", test_interpolation);
    test_add("cleave profile: update_s shared by parameter count", test_measured_update);
    test_add("roofline derivation on a hand-made model", test_roofline);
    test_add("profile must match the model's layers", test_check_model);
    test_add("bad profile files name file and JSON path", test_bad_files);
    test_add("cleave inspect on profiles", test_cli);
}
