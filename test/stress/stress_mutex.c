/* The shim's lock (shim/mutex.h) on its own: mutual exclusion under contention (threads add to a
 * plain counter under it and count how many are inside at once), a waiter that went to sleep is
 * woken by the release, and a waiter whose wake is lost (the release race mutex.c describes,
 * forced here by dropping the lock without the wake) still gets the lock by its timed naps.
 * Nothing is timed: a test that hangs is a "not ok" from the tier's timeout. Under TSan this is
 * also a check that taking and dropping the lock orders the counter's plain accesses.
 */
#include "stress_util.h"

#include <pthread.h>
#include <sched.h>

#include "../../shim/mutex.h"

static ga_mutex_t lock;
static long counter;             /* plain: only ever touched under the lock */
static _Atomic int inside, most_inside;
static long iters;

static void *adder(void *arg)
{
    (void)arg;
    for (long i = 0; i < iters; i++) {
        ga_mutex_lock(&lock);
        int n = atomic_fetch_add(&inside, 1) + 1;
        if (n > atomic_load(&most_inside))
            atomic_store(&most_inside, n);
        counter++;
        if (i % 64 == 0)
            sched_yield(); /* held across a yield now and then: the others spin, then sleep */
        atomic_fetch_sub(&inside, 1);
        ga_mutex_unlock(&lock);
    }
    return NULL;
}

static _Atomic int got;

static void *taker(void *arg)
{
    (void)arg;
    ga_mutex_lock(&lock);
    atomic_store(&got, 1);
    ga_mutex_unlock(&lock);
    return NULL;
}

/* Holds the lock until a second thread sleeps on it, then drops it (with or without the wake)
 * and returns whether that thread got it. */
static int sleeper_gets_it(int lose_the_wake)
{
    ga_mutex_init(&lock);
    atomic_store(&got, 0);
    ga_mutex_lock(&lock);
    pthread_t t;
    if (pthread_create(&t, NULL, taker, NULL) != 0)
        return 0;
    while (atomic_load(&lock.sleepers) == 0)
        sched_yield();
    if (lose_the_wake)
        atomic_store_explicit(&lock.word, 0, memory_order_release);
    else
        ga_mutex_unlock(&lock);
    pthread_join(t, NULL);
    return atomic_load(&got) && atomic_load(&lock.sleepers) == 0 &&
           atomic_load(&lock.word) == 0;
}

int main(void)
{
    iters = env_long("STRESS_ITERS", 200000);
    enum { THREADS = 4 };
    ga_mutex_init(&lock);
    pthread_t t[THREADS];
    int made = 0;
    for (; made < THREADS; made++)
        if (pthread_create(&t[made], NULL, adder, NULL) != 0)
            break;
    for (int i = 0; i < made; i++)
        pthread_join(t[i], NULL);
    tap(made == THREADS && counter == THREADS * iters && atomic_load(&most_inside) == 1 &&
            atomic_load(&lock.sleepers) == 0,
        "%d threads x %ld increments under the lock: counter %ld (want %ld), at most %d "
        "inside at once, %u sleepers left",
        made, iters, counter, THREADS * iters, atomic_load(&most_inside),
        atomic_load(&lock.sleepers));
    tap(sleeper_gets_it(0), "a sleeping waiter is woken by the release and takes the lock");
    tap(sleeper_gets_it(1), "a waiter whose wake is lost takes the lock after a nap");
    return 0;
}
