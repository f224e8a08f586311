/* plan_tp.c - the plan file's tensor-parallel members (see plan.h):
 * "tensor" t, "sequence_parallel", "recompute" none|selective|full,
 * "context" c. */
#include <stdio.h>

#include <cJSON.h>

#include "base/jsonx.h"
#include "core/plan.h"
#include "models/tfm_rank.h"

static const char *const recomp_words[] = {"none", "selective", "full"};

int plan_tp_read(struct jx *j, const cJSON *root, plan *p)
{
    int64_t t = 1, c = 1;
    int sp = 0, rc, r = TFM_RECOMP_NONE;
    if ((rc = jx_int(j, root, "", "tensor", 0, 1, CLUSTER_MAX_DEVICES, &t)) ||
        (rc = jx_int(j, root, "", "context", 0, 1, CLUSTER_MAX_DEVICES, &c)) ||
        (rc = jx_bool(j, root, "", "sequence_parallel", 0, &sp)) ||
        (rc = jx_enum(j, root, "", "recompute", 0, recomp_words, 3, &r)))
        return rc;
    if (sp && t == 1)
        return jx_fail(j, "sequence_parallel", "true with tensor 1 (hint: sequence parallelism splits the sequence over tensor-parallel ranks; drop it or give tensor)");
    p->tensor = (int)t;
    p->seq_par = sp;
    p->recompute = r;
    p->context = (int)c;
    return CL_OK;
}

void plan_tp_write(cJSON *root, const plan *p)
{
    if (!plan_per_rank(p)) return;
    cJSON_AddNumberToObject(root, "tensor", plan_tensor(p));
    cJSON_AddBoolToObject(root, "sequence_parallel", p->seq_par);
    cJSON_AddStringToObject(root, "recompute", recomp_words[p->recompute]);
    if (plan_context(p) > 1) cJSON_AddNumberToObject(root, "context", plan_context(p));
}

void plan_cp_str(const plan *p, double throughput, char *buf, size_t cap)
{
    int c = plan_context(p);
    buf[0] = 0;
    if (c > 1)
        snprintf(buf, cap, "context %d: a sample below is one of a sequence's %d chunks (1/%d of its tokens); "
                 "batch %d sequences, %.4g sequences/s", c, c, c, p->batch / c, throughput / c);
}

void plan_layout_str(const plan *p, char *buf, size_t cap)
{
    int pp = p->n_stages / (p->chunks > 0 ? p->chunks : 1), same = !plan_uneven_stage(p);
    char d[32];
    int c = plan_context(p);
    if (same) snprintf(d, sizeof d, "%d", p->stages[0].n_replicas / c);
    else snprintf(d, sizeof d, "(%d devices over the stages)", plan_device_count(p));
    if (c > 1)
        snprintf(buf, cap, "t x cp x p x d = %d x %d x %d x %s = %lld GPUs", plan_tensor(p), c, pp, d,
                 (long long)plan_tensor(p) * plan_device_count(p));
    else
        snprintf(buf, cap, "t x p x d = %d x %d x %s = %lld GPUs", plan_tensor(p), pp, d,
                 (long long)plan_tensor(p) * plan_device_count(p));
}

int plan_exec_refuse(const plan *p, const char *file, const char *what, cl_err *e)
{
    if (plan_context(p) > 1)
        return cl_fail(e, CL_EINPUT,
                       "%s: context: a plan with context parallelism %d is a per-rank prediction; %s does not "
                       "run context parallelism (hint: `cleave sim` replays it)",
                       file, plan_context(p), what);
    return CL_OK;
}
