/* Shared helpers for the example programs: checking a driver call and printing its CUresult name,
 * reading numeric arguments, a seeded generator, a clock.
 *
 * The examples run unchanged on a real GPU and on the simulated driver, so they use only the driver
 * API (never libcudart). Programs that resolve the driver themselves (dlsym, cuGetProcAddress) set
 * ex_error_name from what they resolved, so errors still print by name.
 */
#ifndef EX_COMMON_H
#define EX_COMMON_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static CUresult (*ex_error_name)(CUresult, const char **);
static const char *ex_prog = "example";

/* Prints "prog: call failed: CUDA_ERROR_NAME (code) at file:line" and exits 1. */
static inline void ex_fail(const char *what, CUresult r, const char *file, int line)
{
    const char *name = NULL;
    if (!ex_error_name || ex_error_name(r, &name) != CUDA_SUCCESS || !name)
        name = "unknown CUresult";
    fprintf(stderr, "%s: %s failed: %s (%d) at %s:%d\n", ex_prog, what, name, (int)r, file, line);
    exit(1);
}

#define EX_CHECK(call)                                           \
    do {                                                         \
        CUresult ex_r_ = (call);                                 \
        if (ex_r_ != CUDA_SUCCESS)                               \
            ex_fail(#call, ex_r_, __FILE__, __LINE__);           \
    } while (0)

/* v, read from argv[i]: refused (exit 2) unless ok (the caller's test: a positive number, or a
 * whole number of at least its least) and at most 2147483647. Counts and
 * sizes in KiB or MiB: beyond int they overflowed the callers' conversions (a step count of 2^32
 * ran no step and blamed the driver's figures). */
static inline double ex_bounded(char **argv, int i, double v, int ok)
{
    if (!ok) {
        fprintf(stderr, "%s: argument %d '%s' is not a positive number\n", ex_prog, i, argv[i]);
        exit(2);
    }
    if (v > 2147483647.0) {
        fprintf(stderr, "%s: argument %d '%s' is too large (at most 2147483647)\n", ex_prog, i,
                argv[i]);
        exit(2);
    }
    return v;
}

/* argv[i] as a positive number, or def when absent. Junk is an error, not a silent default. */
static inline double ex_arg(int argc, char **argv, int i, double def)
{
    if (i >= argc)
        return def;
    char *end;
    double v = strtod(argv[i], &end);
    return ex_bounded(argv, i, v, !*end && v > 0);
}

/* argv[i] as a whole number of at least min (0 or 1; a count: steps, layers, blocks, rounds,
 * pairs, a multiple, or whole MiB), or def when absent. A fraction was cut to its whole part:
 * ex_train 1.5 ran 1 step, and ex_train 0.5 ran none and blamed the driver's memory figures; and
 * ex_alloctime's hold, 0 by default, refused an explicit 0. */
static inline double ex_count(int argc, char **argv, int i, double def, int min)
{
    if (i >= argc)
        return def;
    const char *c = argv[i];
    while (*c >= '0' && *c <= '9')
        c++;
    if (*c || c == argv[i]) {
        fprintf(stderr, "%s: argument %d '%s' is not a whole number (digits only, %d or more)\n",
                ex_prog, i, argv[i], min);
        exit(2);
    }
    double v = strtod(argv[i], NULL);
    return ex_bounded(argv, i, v, v >= min);
}

/* xorshift64: deterministic sizes from a fixed seed, the same on every machine. */
static inline unsigned long long ex_rand(unsigned long long *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static inline double ex_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#endif /* EX_COMMON_H */
