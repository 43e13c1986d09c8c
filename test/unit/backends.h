/* Test backends for the arena: a host backend that hands out real, aligned host memory (tests
 * write a pattern into every allocation and read it back to prove no two overlap), and a fake
 * backend that hands out address ranges only, logs every reserve/release, and can be told to
 * refuse sizes or calls (retry smaller, limit and release-before-OOM tests).
 */
#ifndef GA_TEST_BACKENDS_H
#define GA_TEST_BACKENDS_H

#include <stddef.h>
#include <stdint.h>

#include "ga_arena.h"

#define FAKE_LOG_MAX 256

typedef struct fake_backend {
    uintptr_t next_base;       /* where the next range starts (ranges never reuse addresses) */
    uintptr_t fixed_base;      /* non-zero: every range starts here (a broken backend) */
    size_t fail_above;         /* refuse any reserve larger than this; 0 = never */
    size_t capacity;           /* refuse when outstanding + size would exceed this; 0 = never */
    int fail_calls;            /* refuse the next this many reserve calls */
    size_t outstanding;        /* bytes reserved and not released */
    unsigned reserves, releases, refusals;
    size_t asked[FAKE_LOG_MAX]; /* every size asked for, granted or not */
    int granted[FAKE_LOG_MAX];
    unsigned nasked;
} fake_backend_t;

void fake_init(fake_backend_t *f);
ga_backend_t fake_backend(fake_backend_t *f);

typedef struct host_backend {
    unsigned reserves, releases;
    size_t outstanding;
} host_backend_t;

ga_backend_t host_backend(host_backend_t *h);

#endif
