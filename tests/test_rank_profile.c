/* test_rank_profile.c - rank profiles (`cleave profile --tensor t`) and the
 * plans priced from them: the collectives a profile records for each layer
 * against the placement Korthikanti et al. (2022) give, derived here from
 * the layer's neighbours in the whole model; the shard's parameter bytes;
 * a plan's stage times equal to the profile's layer times plus those
 * collectives priced as rings on the node's link, worked out here; the
 * refusals (sweep and compare among them); and the file format's checks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/plan.h"
#include "models/model.h"
#include "models/tfm_rank.h"
#include "profiles/profile.h"

#include "test.h"

#define VIT "models/fmnist-vit.json"
enum { T = 2, TOK = 16, D = 64 };

static int split_at(const model *m, int l)
{
    return m->layers[l].kind == MODEL_ATTENTION || m->layers[l].kind == MODEL_MLP;
}

/* Profile the ViT at batch 4 as rank 0 of T (sp: sequence parallel) into
 * path and load it; 1 after a failed assertion. */
static int rank_profile(const char *path, int sp, prof *p, model *m)
{
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "profile --model %s --batch 4 --reps 1 --warmup 0 --tensor %d%s -o %s", VIT,
             T, sp ? " --sequence-parallel" : "", path);
    int rc = test_run_cli(args, &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) printf("\n    %s", err ? err : "");
    free(out);
    free(err);
    cl_err e = {0};
    if (rc || prof_load(p, path, &e)) return 1;
    if (model_load(m, VIT, &e)) {
        prof_free(p);
        return 1;
    }
    return 0;
}

static int coll_is(const prof_coll *c, double calls, double steps, double floats, double fixed)
{
    int ok = c->calls == calls && c->steps == steps && c->floats == floats && c->fixed == fixed;
    if (!ok)
        printf("\n    counted %g calls %g steps %g floats %g fixed, derived %g %g %g %g ", c->calls,
               c->steps, c->floats, c->fixed, calls, steps, floats, fixed);
    return ok;
}

/* Each split layer's collectives per sample, as a whole-model stage runs
 * them (the weight gradient right after the input gradient): i, the layer
 * before is not split (its input is whole); o, the layer after is not.
 * With sequence parallelism: forward all-gather of LN(x), reduce-scatter
 * of the partial sums, all-gather of the output if o; input gradient
 * all-gather of the output gradient unless o, reduce-scatter, all-gather
 * of the input gradient if i; weight gradient all-gather of LN(x) again
 * and the all-reduce of the layer norm's 2 D gradient floats, which does
 * not grow with the batch.  Without: one all-reduce of the output in the
 * forward and of dLN(x) in the input gradient.  Other layers: none. */
static void test_rank_profile_counts(void)
{
    char pp[512], ps[512];
    char *dir = test_scratch(sizeof pp, "t2.json", pp, "t2-sp.json", ps, NULL);
    const double W = (double)TOK * D; /* a whole activation's floats per sample */
    for (int sp = 0; sp <= 1; sp++) {
        prof p;
        model m;
        if (rank_profile(sp ? ps : pp, sp, &p, &m)) break;
        CU_ASSERT_EQUAL(p.tensor, T);
        CU_ASSERT_EQUAL(p.seq_par, sp);
        CU_ASSERT_EQUAL(p.recompute, TFM_RECOMP_NONE);
        int n_split = 0, calls = 0;
        for (int l = 0; l < m.n_layers; l++) {
            const prof_coll *c = prof_coll_of(&p, l);
            const double whole = (double)m.layers[l].params * 4;
            if (!split_at(&m, l)) {
                for (int q = 0; q < PROF_PASSES; q++) CU_ASSERT(coll_is(&c[q], 0, 0, 0, 0));
                CU_ASSERT_EQUAL(p.layers[l].param_bytes, whole);
                continue;
            }
            n_split++;
            /* a shard: the split weights halve, the layer norm and the
             * row-parallel product's bias stay whole */
            CU_ASSERT(p.layers[l].param_bytes > whole / T && p.layers[l].param_bytes < 0.6 * whole);
            const int i = !split_at(&m, l - 1), o = !split_at(&m, l + 1);
            calls += sp ? (2 + o) + (!o + 1 + i) + 2 : 2;
            if (sp) {
                CU_ASSERT(coll_is(&c[PROF_F], 2 + o, 2 + o, (2 + o) * W, 0));
                CU_ASSERT(coll_is(&c[PROF_B], !o + 1 + i, !o + 1 + i, (!o + 1 + i) * W, 0));
                CU_ASSERT(coll_is(&c[PROF_W], 2, 3, W, 2 * 2.0 * D));
            } else {
                CU_ASSERT(coll_is(&c[PROF_F], 1, 2, 2 * W, 0));
                CU_ASSERT(coll_is(&c[PROF_B], 1, 2, 2 * W, 0));
                CU_ASSERT(coll_is(&c[PROF_W], 0, 0, 0, 0));
            }
        }
        CU_ASSERT_EQUAL(n_split, 8);
        /* inspect says what the times are of, and how many collectives
         * they leave out */
        char args[1024], want[256], *out = NULL, *err = NULL;
        snprintf(args, sizeof args, "inspect %s", sp ? ps : pp);
        CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
        snprintf(want, sizeof want, "rank profile: rank 0's share at tensor 2%s, recompute none; %d collectives a step",
                 sp ? ", sequence parallel" : "", calls);
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, want));
        free(out);
        free(err);
        prof_free(&p);
        model_free(&m);
    }
    test_rmtree(dir);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* A plan from a rank profile: one stage on one group of T ranks, its
 * forward, input- and weight-gradient times the profile's layer sums at
 * the microbatch plus every layer's collectives as rings on the node's
 * link, (T - 1) (steps latency + 4 (floats b + fixed) / (T bandwidth));
 * the file says tensor T and sequence parallelism; the refusals. */
static void test_rank_profile_plan(void)
{
    char pp[512], pl[512], args[2048];
    char *dir = test_scratch(sizeof pp, "t2-sp.json", pp, "plan.json", pl, NULL);
    prof p;
    model m;
    if (rank_profile(pp, 1, &p, &m)) {
        test_rmtree(dir);
        return;
    }
    const double bw = 5e9, lat = 20e-6, b = 4;
    snprintf(args, sizeof args, "plan --model %s --profile %s --devices 2 --per-node 2 --bandwidth %g --latency %g --batch 4 --microbatches 1 --schedule gpipe -o %s",
             VIT, pp, bw, lat, pl);
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "tensor: 2 with sequence parallelism"));
    free(out);
    free(err);
    char *text = test_slurp(pl);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(num(j, "tensor"), T);
    CU_ASSERT(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "sequence_parallel")));
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "stages");
    CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(st), 1);
    const cJSON *s0 = cJSON_GetArrayItem(st, 0);
    double want[3] = {0, 0, 0};
    for (int l = 0; l < p.n_layers; l++) {
        const prof_layer *x = &p.layers[l];
        want[0] += prof_fwd_s(x, b), want[1] += prof_bwd_in_s(x, b), want[2] += prof_bwd_w_s(x, b);
        for (int q = 0; q < PROF_PASSES; q++) {
            const prof_coll *c = &prof_coll_of(&p, l)[q];
            want[q] += (T - 1) * (c->steps * lat + 4 * (c->floats * b + c->fixed) / (T * bw));
        }
    }
    CU_ASSERT_DOUBLE_EQUAL(num(s0, "fwd_s"), want[0], 1e-12 * want[0]);
    CU_ASSERT_DOUBLE_EQUAL(num(s0, "bwd_in_s"), want[1], 1e-12 * want[1]);
    CU_ASSERT_DOUBLE_EQUAL(num(s0, "bwd_w_s"), want[2], 1e-12 * want[2]);
    cJSON_Delete(j);
    /* the profile's degree and modes are the plan's */
    snprintf(args, sizeof args, "plan --model %s --profile %s --devices 4 --tensor 4 -o %s/x.json", VIT, pp, dir);
    test_cli_refused(args, "is rank 0's share at --tensor 2 --sequence-parallel, recompute none");
    snprintf(args, sizeof args, "plan --model %s --profile %s --devices 4 --recompute full -o %s/x.json", VIT, pp, dir);
    test_cli_refused(args, "is rank 0's share at --tensor 2");
    /* sweeps plan from whole-model profiles: a rank profile is refused, not
     * read as one */
    snprintf(args, sizeof args, "sweep --model %s --profile %s --device cpu-core --devices 2,4 -o %s/sw", VIT, pp, dir);
    test_cli_refused(args, "tensor: a rank profile (rank 0's share at tensor 2, recompute none)");
    /* recomputation alone (tensor 1): a rank profile too, whose plan
     * recomputes */
    snprintf(args, sizeof args, "profile --model %s --batch 4 --reps 1 --warmup 0 --recompute selective -o %s/rs.json", VIT, dir);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    free(out);
    free(err);
    snprintf(args, sizeof args, "plan --model %s --profile %s/rs.json --devices 2 --batch 4 -o %s/rs-plan.json", VIT, dir, dir);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    free(out);
    free(err);
    char rp[600];
    snprintf(rp, sizeof rp, "%s/rs-plan.json", dir);
    text = test_slurp(rp);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "\"recompute\":\t\"selective\""));
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "\"tensor\":\t1,"));
    free(text);
    /* a whole-model profile cannot answer a tensor-parallel question */
    snprintf(args, sizeof args, "profile --model %s --batch 4 --reps 1 --warmup 0 -o %s/whole.json", VIT, dir);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    free(out);
    free(err);
    snprintf(args, sizeof args, "plan --model %s --profile %s/whole.json --devices 4 --tensor 2 -o %s/x.json", VIT, dir, dir);
    test_cli_refused(args, "or profile one rank's share: cleave profile --tensor T");
    /* nothing to split, and --sequence-parallel alone */
    snprintf(args, sizeof args, "profile --model models/fmnist-cnn.json --reps 1 --tensor 2 -o %s/x.json", dir);
    test_cli_refused(args, "--tensor 2 splits attention and mlp layers, and this model has none");
    snprintf(args, sizeof args, "profile --model %s --reps 1 --sequence-parallel -o %s/x.json", VIT, dir);
    test_cli_refused(args, "--sequence-parallel splits the sequence over tensor-parallel ranks");
    char x[600];
    snprintf(x, sizeof x, "%s/x.json", dir);
    CU_ASSERT(access(x, F_OK) != 0); /* no output from a refusal */
    prof_free(&p);
    model_free(&m);
    test_rmtree(dir);
}

/* The file format: collectives saved and read back; a negative count, an
 * unknown pass and sequence parallelism at tensor 1 refused, naming the
 * member. */
static void test_rank_profile_format(void)
{
    static const char *const bad[][2] = {
        {"\"tensor\": 2, \"layers\": [{\"name\": \"a\", \"points\": [{\"batch\": 1, \"fwd_s\": 1, \"bwd_in_s\": 1, \"bwd_w_s\": 1}], \"act_bytes\": 4, \"stash_bytes\": 4, \"param_bytes\": 4, \"collectives\": {\"fwd\": {\"calls\": -1, \"steps\": 1, \"floats\": 1}}}]",
         "layers[0].collectives.fwd.calls"},
        {"\"tensor\": 2, \"layers\": [{\"name\": \"a\", \"points\": [{\"batch\": 1, \"fwd_s\": 1, \"bwd_in_s\": 1, \"bwd_w_s\": 1}], \"act_bytes\": 4, \"stash_bytes\": 4, \"param_bytes\": 4, \"collectives\": {\"back\": {\"calls\": 1, \"steps\": 1, \"floats\": 1}}}]",
         "layers[0].collectives"},
        {"\"sequence_parallel\": true, \"layers\": [{\"name\": \"a\", \"points\": [{\"batch\": 1, \"fwd_s\": 1, \"bwd_in_s\": 1, \"bwd_w_s\": 1}], \"act_bytes\": 4, \"stash_bytes\": 4, \"param_bytes\": 4}]",
         "sequence_parallel"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char text[1024];
        snprintf(text, sizeof text, "{\"format\": \"cleave-profile\", \"version\": 1, \"model\": \"m\", \"device\": \"d\", \"source\": \"measured\", %s}", bad[k][0]);
        cJSON *j = cJSON_Parse(text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j);
        prof p;
        cl_err e = {0};
        CU_ASSERT_EQUAL(prof_from_json(&p, j, "p.json", &e), CL_EINPUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[k][1]));
        cJSON_Delete(j);
    }
    /* saved and read back, bit for bit */
    prof a = {0};
    snprintf(a.model, sizeof a.model, "m");
    snprintf(a.device, sizeof a.device, "d");
    a.tensor = 4, a.seq_par = 1, a.recompute = TFM_RECOMP_SELECTIVE;
    prof_alloc(&a, 1, 1);
    snprintf(a.layers[0].name, sizeof a.layers[0].name, "a");
    a.layers[0].batch[0] = 2, a.layers[0].fwd_s[0] = 1e-3;
    prof_coll_of(&a, 0)[PROF_W] = (prof_coll){2, 3, 1024.5, 256};
    cJSON *j = prof_to_json(&a);
    prof b;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(prof_from_json(&b, j, "mem", &e), CL_OK);
    CU_ASSERT(prof_same_layers(&a, &b));
    CU_ASSERT(b.tensor == 4 && b.seq_par == 1 && b.recompute == TFM_RECOMP_SELECTIVE);
    cJSON_Delete(j);
    prof_free(&a);
    prof_free(&b);
}

TEST_SUITE(rank_profile)
{
    test_add_suite("rank_profile");
    test_add("profile --tensor 2: each layer's collectives the derived ones, its shard's bytes",
             test_rank_profile_counts);
    test_add("plan --profile of a rank profile: stage times the layers' plus their rings; refusals",
             test_rank_profile_plan);
    test_add("rank profile file: collectives saved and read back; bad members named",
             test_rank_profile_format);
}
