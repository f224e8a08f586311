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
/* A draw that leaves the stream alone (splitmix64's finaliser of the
 * state): for choices added to a generator after its seeds were fixed. */
static inline uint64_t state_hash(void)
{
    uint64_t z = rng_state + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#endif
