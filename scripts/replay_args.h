/* gpuarena-replay's options (scripts/replay_args.c): what the command line asked for, parsed with
 * the one size grammar (ga_size.h), the mode names of GA_MODE_LIST and, for a misspelt option,
 * the closest-name rule (ga_names.h). Split from replay_main.c (functions moved, not rewritten). */
#ifndef GA_REPLAY_ARGS_H
#define GA_REPLAY_ARGS_H

#include <stddef.h>

#include "ga_replay.h"
#include "ga_size.h"

/* The largest --granularity: 1 TiB, far above any GPU's (2 MiB). Past 2^57 vmm's smallest first
 * range (64 granules) no longer fits 64 bits and creating the pool never ended; replay.c refuses
 * the same bound. */
#define MAX_GRANULARITY ((size_t)1 << 40)

/* The largest default arena: 2^61 bytes, under the 2^62 - 2^40 of address space replay's backend
 * hands out (allocator/replay.c). */
#define DEFAULT_ARENA_MAX ((size_t)1 << 61)

#ifndef GA_VERSION
#define GA_VERSION "unknown"
#endif

typedef struct options {
    int modes[GA_MODE_COUNT]; /* indexed by ga_mode_t */
    size_t arena_size, limit;
    ga_fraction_t fraction; /* --fraction: the shim's GPUARENA_MEM_FRACTION; has_fraction: given */
    int has_fraction;
    size_t keep, granularity; /* vmm; keep_set: --vmm-keep given (0 is a value) */
    int keep_set;
    int device, has_device; /* --device N: only that device's events */
    int want_min, check, json;
    const char *format; /* NULL = auto */
    const char *path;
    const char *timeline; /* --timeline FILE, NULL = none */
} options_t;

/* Parses argv into *o. Returns -1 to continue, or an exit status (0 after --help, --version,
 * --list-modes; 2 for a usage error, said on stderr). */
int replay_parse_args(int argc, char **argv, options_t *o);

#endif
