/* predict_twin.h - replays shared between fbp and pipedream plans that
 * differ only in their schedule (docs/planner.md, "Candidates and ranking":
 * "Replays shared").
 *
 * The simulator runs an fbp plan and a pipedream plan of the same stages
 * alike: both schedules build the same 1F1B stream without flushes, with
 * the same in-flight counts, warm-up iterations, steady-state window and
 * all-reduces (neither splits it under ZeRO); pipedream only marks each
 * op with the weight version it stashes, which the simulator reads for
 * memory alone.  So the second of two such candidates takes the first's
 * replayed prediction instead of replaying it again.  The search keeps the
 * last few replays of asynchronous plans (search_ctx.twins).
 */
#ifndef CL_PLAN_PREDICT_TWIN_H
#define CL_PLAN_PREDICT_TWIN_H

#include "core/plan.h"

#define PRED_TWINS 8        /* replays kept (candidates of one count come a
                               few apart: fbp first, pipedream last)        */

typedef struct pred_twin {
    plan pl;                /* the plan replayed: stages (deep copies of their
                               layer and device lists), scalars; model and
                               cluster as the search's (shallow, not owned) */
    plan_pred closed, sim;  /* its closed form, and the replay's prediction  */
} pred_twin;

typedef struct pred_twins {
    int n, next;            /* slots used; the one to overwrite next         */
    pred_twin slot[PRED_TWINS];
} pred_twins;

/* A replay of a plan that times exactly as pl does (both asynchronous
 * schedules, every field the simulator reads equal, the same closed form
 * `closed`): 1 and its prediction in *out, else 0. */
int pred_twin_find(const pred_twins *T, const plan *pl, const plan_pred *closed, plan_pred *out);
/* Keep the replay of pl (an asynchronous plan): closed form and result. */
void pred_twin_keep(pred_twins *T, const plan *pl, const plan_pred *closed, const plan_pred *sim);
void pred_twins_free(pred_twins *T);

#endif
