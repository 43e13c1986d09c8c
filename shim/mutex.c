/* The contended path of ga_mutex_t (mutex.h).
 *
 * Why not pthread_mutex_t. glibc's lock and unlock each cost a locked instruction and about 55
 * instructions behind a call; a futex mutex that knows about sleepers from the lock word itself
 * (Drepper's "Futexes Are Tricky") still needs a locked exchange to drop it. Measured on
 * `scripts/bench-shim-compare.sh` (alternated builds, best of 8 rounds, null driver, ns per
 * alloc+free pair): such an inline futex mutex saved 100 instructions per pair and no time in
 * arena mode (85.4 -> 85.2 ns); dropping with a plain store, as here, 85.3 -> 80.1 ns in arena
 * and 98.8 -> 94.6 in vmm mode. (In platform mode on the null driver, where each call does
 * several other atomic operations on the driver's and the device's counters, the pair was 8 ns
 * slower, 78.7 -> 86.8, for a reason the counters this machine lacks would have to show; a real
 * driver's allocation there takes microseconds.)
 *
 * The price of the plain store: a thread going to sleep can miss the wake of a release that read
 * the sleeper count just before the sleeper raised it. Sleeps are therefore short (GA_MUTEX_NAP_NS,
 * then the lock is tried again), so a missed wake costs one nap, never a hang.
 *
 * Contention (`make bench-threads`, 2 cores, threads allocating on one context): the shim holds
 * these locks for one pool operation, well under a microsecond, so a waiter first spins; 16 tries
 * did best of 0, 4, 16, 32 and 128 (128 gave four and eight threads half the throughput: spinners
 * took the core the holder needed). Only one wake is in flight at a time: with every release
 * waking while a sleeper was still getting up, two threads ran at half glibc's throughput; with
 * one, 16-20 million operations per second against glibc's 10-11.
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mutex.h"

#define GA_MUTEX_SPIN 16         /* tries before sleeping */
#define GA_MUTEX_NAP_NS 200000    /* the longest sleep between tries: 0.2 ms */

static inline void ga_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int ga_mutex_try(ga_mutex_t *m)
{
    uint32_t free_ = 0;
    return atomic_load_explicit(&m->word, memory_order_relaxed) == 0 &&
           atomic_compare_exchange_strong_explicit(&m->word, &free_, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

__attribute__((noinline, cold)) void ga_mutex_wait(ga_mutex_t *m)
{
    for (int i = 0; i < GA_MUTEX_SPIN; i++) {
        ga_cpu_relax();
        if (ga_mutex_try(m))
            return;
    }
    /* Counted before the last try, so a release after that try sees a sleeper and wakes it. */
    atomic_fetch_add_explicit(&m->sleepers, 1, memory_order_seq_cst);
    while (!ga_mutex_try(m)) {
        struct timespec nap = {0, GA_MUTEX_NAP_NS};
        syscall(SYS_futex, &m->word, FUTEX_WAIT_PRIVATE, 1, &nap, NULL, 0);
        atomic_store_explicit(&m->waking, 0, memory_order_relaxed); /* the next release may wake */
    }
    atomic_fetch_sub_explicit(&m->sleepers, 1, memory_order_relaxed);
}

/* One wake in flight at a time: while a woken sleeper has not run yet, the holder's further
 * releases make no system call (without this, every release paid one while a sleeper woke up,
 * and two threads on one context ran at half the throughput of pthread's mutex). */
__attribute__((noinline, cold)) void ga_mutex_wake(ga_mutex_t *m)
{
    if (atomic_exchange_explicit(&m->waking, 1, memory_order_relaxed))
        return;
    syscall(SYS_futex, &m->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* The exit path's lock (the statistics and the trace written by the shim's destructor). Its
 * holder may be this very thread, in a hook that a signal interrupted before the handler called
 * exit(), or a thread that waits in the driver for work that never ends, or one cancelled inside
 * the driver: waiting for it without a bound kept the process from ever exiting. Naps as the
 * contended path does, without counting as a sleeper (a release need not wake it). */
int ga_mutex_lock_for(ga_mutex_t *m, uint64_t ns)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (ga_mutex_try(m))
            return 0;
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t spent = (uint64_t)(now.tv_sec - t0.tv_sec) * 1000000000ull +
                         (uint64_t)now.tv_nsec - (uint64_t)t0.tv_nsec;
        if (spent >= ns)
            return -1;
        struct timespec nap = {0, GA_MUTEX_NAP_NS};
        syscall(SYS_futex, &m->word, FUTEX_WAIT_PRIVATE, 1, &nap, NULL, 0);
    }
}
