/* gpuarena pointer table: key -> (size, aux), the platform pool's record of what it handed out
 * and the shim's record of pass-through allocations.
 *
 * Every platform-mode free looks a pointer up here, so it is on the hot path: open addressing
 * with linear probing in one flat array, no allocation per insert (only when the table doubles),
 * deletion by backward shift so there are no tombstones to slow later probes. Keys are device
 * pointers (512-aligned) or tagged handles; 0 is the empty slot and is never a key. Not thread
 * safe: the owner holds its lock.
 */
#ifndef GA_PTRMAP_H
#define GA_PTRMAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ga_pentry {
    uint64_t key;  /* 0 = empty slot */
    uint64_t size;
    uint64_t aux;  /* the owner's: bytes requested, an entry-point tag, ... */
} ga_pentry_t;

typedef struct ga_ptrmap {
    ga_pentry_t *slots;
    size_t mask; /* capacity - 1 */
    size_t count;
} ga_ptrmap_t;

/* Inserts or replaces; 0 ok, -1 out of host memory (the table is unchanged). */
int ga_ptrmap_put(ga_ptrmap_t *m, const ga_pentry_t *e);
/* Room for n more keys: the next n puts cannot fail for want of host memory (a caller that must
 * record what it is about to hand out asks first); 0 ok, -1 out of host memory (unchanged). */
int ga_ptrmap_reserve(ga_ptrmap_t *m, size_t n);
ga_pentry_t *ga_ptrmap_get(const ga_ptrmap_t *m, uint64_t key);
/* 1 found and removed (copied to out when non-NULL), 0 not there. */
int ga_ptrmap_take(ga_ptrmap_t *m, uint64_t key, ga_pentry_t *out);
/* Calls fn on every entry (order unspecified); the table must not change meanwhile. */
void ga_ptrmap_each(const ga_ptrmap_t *m, void (*fn)(void *arg, const ga_pentry_t *e), void *arg);
/* Frees the array. */
void ga_ptrmap_fini(ga_ptrmap_t *m);

#ifdef __cplusplus
}
#endif
#endif
