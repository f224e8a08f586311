/* targets.c - every fuzz target, compiled into the CUnit runner by
 * tests/test_fuzz_regress.c, which includes this file (the Makefile builds
 * the C files directly in tests/, not this folder).  All targets share one
 * translation unit here, so their static names start with the target's.
 *
 * Targets for loaders that do not exist yet are picked up as soon as their
 * file does (__has_include), so the plan, schedule and IDX targets plug in
 * by adding tests/fuzz/fuzz_<name>.c alone.  A target with another name
 * needs its two lines here. */
#include "common.c"
#include "fuzz_cluster.c"
#include "fuzz_hfconfig.c"
#include "fuzz_model.c"
#include "fuzz_onnx.c"
#include "fuzz_pipedream.c"
#include "fuzz_profile.c"
#if __has_include("fuzz_plan.c")
#include "fuzz_plan.c"
#define FUZZ_HAVE_PLAN
#endif
#if __has_include("fuzz_schedule.c")
#include "fuzz_schedule.c"
#define FUZZ_HAVE_SCHEDULE
#endif
#include "fuzz_sim.c"
#include "fuzz_search.c"
#if __has_include("fuzz_idx.c")
#include "fuzz_idx.c"
#define FUZZ_HAVE_IDX
#endif

typedef struct fuzz_target {
    const char *name; /* folder name under tests/fuzz/{corpus,regress}/ */
    fuzz_fn fn;
} fuzz_target;

static const fuzz_target fuzz_targets[] = {
    {"cluster", fuzz_cluster},
    {"hfconfig", fuzz_hfconfig},
    {"model", fuzz_model},
    {"onnx", fuzz_onnx},
    {"pipedream", fuzz_pipedream},
    {"profile", fuzz_profile},
#ifdef FUZZ_HAVE_PLAN
    {"plan", fuzz_plan},
#endif
#ifdef FUZZ_HAVE_SCHEDULE
    {"schedule", fuzz_schedule},
#endif
    {"sim", fuzz_sim},
    {"search", fuzz_search},
#ifdef FUZZ_HAVE_IDX
    {"idx", fuzz_idx},
#endif
};
