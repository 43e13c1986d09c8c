/* gpuarena's lock for the state every hooked allocation and free touches: a context's pool and
 * counters, a device's handle table, a thread's trace buffer (mutex.c: the contended path, and
 * why this is not a pthread mutex).
 *
 * Taking it is one compare-and-swap; dropping it is a plain release store and a load of the
 * sleeper count, with no atomic read-modify-write, so an allocation or a free through the shim
 * pays one locked instruction instead of two. A thread that finds it held spins a little, then
 * sleeps on the lock word with a short timeout: a release that races with a thread going to
 * sleep may miss it (the sleeper count is read without a fence), and the timeout bounds that
 * thread's wait instead. Only threads of this process share these locks (private futexes); a
 * forked child releases the ones the fork handlers took and resets the devices' (ctx.c). TSan follows the lock
 * through the atomics: acquire when taken, release when dropped.
 */
#ifndef GA_MUTEX_H
#define GA_MUTEX_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct ga_mutex {
    _Atomic uint32_t word;     /* 0 free, 1 held */
    _Atomic uint32_t sleepers; /* threads that may be asleep on word */
    _Atomic uint32_t waking;   /* a wake was sent that no sleeper has seen yet */
} ga_mutex_t;

/* Also resets a lock that some thread of a forked parent held or slept on. */
static inline void ga_mutex_init(ga_mutex_t *m)
{
    atomic_store_explicit(&m->word, 0, memory_order_relaxed);
    atomic_store_explicit(&m->sleepers, 0, memory_order_relaxed);
    atomic_store_explicit(&m->waking, 0, memory_order_relaxed);
}

void ga_mutex_wait(ga_mutex_t *m); /* mutex.c: returns with the lock taken */
/* mutex.c: waits at most ns for the lock; 0 when taken, -1 when it is still held. For the exit
 * path only, where the holder may never let go (see there). */
int ga_mutex_lock_for(ga_mutex_t *m, uint64_t ns);
#define GA_MUTEX_EXIT_WAIT_NS 1000000000ull /* how long the exit path waits for one lock: 1 s */
void ga_mutex_wake(ga_mutex_t *m);

static inline void ga_mutex_lock(ga_mutex_t *m)
{
    uint32_t free_ = 0;
    if (__builtin_expect(!atomic_compare_exchange_strong_explicit(
                             &m->word, &free_, 1, memory_order_acquire, memory_order_relaxed),
                         0))
        ga_mutex_wait(m);
}

/* 1 when the lock was free and is now taken; 0 (nothing changed) when it is held. */
static inline int ga_mutex_trylock(ga_mutex_t *m)
{
    uint32_t free_ = 0;
    return atomic_compare_exchange_strong_explicit(&m->word, &free_, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

static inline void ga_mutex_unlock(ga_mutex_t *m)
{
    atomic_store_explicit(&m->word, 0, memory_order_release);
    if (__builtin_expect(atomic_load_explicit(&m->sleepers, memory_order_relaxed) != 0, 0))
        ga_mutex_wake(m);
}

#endif
