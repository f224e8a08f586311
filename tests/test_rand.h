/* test_rand.h - the xorshift64 generator of the random-instance suites
 * (plan_exact, plan_merge, plan_mono).  Each suite has its own copy of the
 * state and seeds it (rng_state = seed), so a failing seed replays alone. */
#ifndef CL_TEST_RAND_H
#define CL_TEST_RAND_H

#include <stdint.h>

static uint64_t rng_state;

static inline uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
/* uniform in [0, 1), 53 bits */
static inline double urand(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }
/* uniform in lo..hi */
static inline int irand(int lo, int hi) { return lo + (int)(rnd() % (uint64_t)(hi - lo + 1)); }

#endif
