/* tp_count.c - a rank's collectives counted as its net runs them
 * (net.h, exec_net_create_counted): what `cleave profile --tensor` writes
 * into a rank profile and `cleave validate` prices, taken from the
 * executor itself rather than from a second statement of its rules (which
 * layer gathers, which reduce-scatters, where a stage's first and last
 * split layers differ).
 */
#include "net.h"

static void count(exec_tp_counter *k, double steps, double floats)
{
    if (!k->into || !k->net) return;
    prof_coll *c = &k->into[(exec_net_pass_layer(k->net) - k->first) * PROF_PASSES +
                            exec_net_pass(k->net)];
    c->calls += 1;
    c->steps += steps;
    c->floats += steps * floats;
}

static void counted_allreduce(void *ctx, int rank, float *buf, int64_t n)
{
    exec_tp_counter *k = ctx;
    count(k, 2, (double)n);
    k->solo->allreduce(k->solo->ctx, rank, buf, n);
}

/* the whole buffer: every rank's chunk of every block */
static void counted_reduce_scatter(void *ctx, int rank, float *dst, const float *src,
                                   int64_t blocks, int64_t chunk)
{
    exec_tp_counter *k = ctx;
    count(k, 1, (double)blocks * (double)chunk * k->c.size);
    k->solo->reduce_scatter(k->solo->ctx, rank, dst, src, blocks, chunk);
}

static void counted_all_gather(void *ctx, int rank, float *dst, const float *src, int64_t blocks,
                               int64_t chunk)
{
    exec_tp_counter *k = ctx;
    count(k, 1, (double)blocks * (double)chunk * k->c.size);
    k->solo->all_gather(k->solo->ctx, rank, dst, src, blocks, chunk);
}

int exec_net_create_counted(exec_net **out, exec_tp_counter *k, const model *m, int first, int last,
                            int max_batch, uint64_t seed, int flags, int size, const char *file,
                            cl_err *e)
{
    const int split = size > 1 && exec_net_has_split(m, first, last);
    *k = (exec_tp_counter){.c = {.rank = 0, .size = size, .allreduce = counted_allreduce,
                                 .reduce_scatter = counted_reduce_scatter,
                                 .all_gather = counted_all_gather, .ctx = k},
                           .solo = split ? exec_tp_comm_solo(size) : NULL, .first = first};
    int rc = exec_net_create_tp(out, m, first, last, max_batch, seed, flags, split ? &k->c : NULL,
                                file, e);
    k->net = rc ? NULL : *out;
    return rc;
}

_Static_assert(PROF_F == 0 && PROF_B == 1 && PROF_W == 2, "exec_net_pass indexes the passes");
