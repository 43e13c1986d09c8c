/* Helpers shared by the stress programs in test/stress/.
 *
 * Each program runs under LD_PRELOAD of the shim on the simulated driver, prints TAP lines
 * ("ok - what" / "not ok - what: why") on stdout and exits 0 when it ran to the end, whatever the
 * results: the tier runner (run-stress.sh) turns crashes, hangs and non-zero exits into "not ok"
 * lines of their own. Randomness is a seeded xorshift so a failing run repeats exactly; run
 * length is an iteration count, never a time, so a slow machine only makes the run longer.
 */
#ifndef GA_STRESS_UTIL_H
#define GA_STRESS_UTIL_H

#define _GNU_SOURCE
#include <cuda.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcuda.h"

/* One TAP line; the description is printf-formatted. Returns ok so callers can chain. */
static inline int tap(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s - ", ok ? "ok" : "not ok");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    return ok;
}

/* A setup step that must succeed: on failure the program says which and stops (exit 0: the
 * "not ok" line carries the failure, and the runner counts lines). */
#define REQUIRE_CU(call)                                                                  \
    do {                                                                                  \
        CUresult req_rc_ = (call);                                                        \
        if (req_rc_ != CUDA_SUCCESS) {                                                    \
            tap(0, "%s returned %d at %s:%d", #call, (int)req_rc_, __FILE__, __LINE__);   \
            exit(0);                                                                      \
        }                                                                                 \
    } while (0)

/* xorshift64*: small, fast, and the same sequence on every machine for a given seed. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* An integer from the environment (the runner scales iteration counts down under TSan). */
static inline long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 0) : dflt;
}

/* A size with a unit suffix (KiB, MiB, GiB) as the runner passes GPUARENA_LIMIT; 0 if unset. */
static inline unsigned long long env_size(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (*end == 'K')
        n <<= 10;
    else if (*end == 'M')
        n <<= 20;
    else if (*end == 'G')
        n <<= 30;
    return n;
}

#endif
