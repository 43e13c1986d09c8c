/* gpuarena names: the known name a misspelt one most likely means, one rule for the shim's unknown
 * GPUARENA_* settings (shim/options.c), gpuarena-replay's unknown options and, word for word in
 * Python, gpuarena doctor's warnings and the command's unknown options
 * (scripts/gpuarena_cli/names.py). Pure C: no CUDA, no allocation.
 *
 * After the first `skip` characters of both names (the GPUARENA_ or -- prefix), in capitals when
 * `fold` (ASCII: GPUARENA_mode means GPUARENA_MODE), a known name is near when the edit distance
 * (a swap of two neighbours counting as one edit) is at most a third of the shorter part, at least
 * 1 (LIMT, MODES, GROUPDIR, LMIIT), or when one part holds the other and the shorter has 3
 * characters or more (PREALLOC, FRACTION, KEEP, MEMORY_LIMIT, LIMIT_GB); the nearest wins, then
 * the first in alphabetical order. Names of 64 characters or more are near nothing.
 */
#ifndef GA_NAMES_H
#define GA_NAMES_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Edits from a to b; (size_t)-1 when either has 63 characters or more. */
size_t ga_edit_distance(const char *a, const char *b);

/* The element of known[0..n) that typed most likely means, or NULL when none is near. */
const char *ga_closest_name(const char *typed, const char *const *known, size_t n, size_t skip,
                            int fold);

#ifdef __cplusplus
}
#endif

#endif
