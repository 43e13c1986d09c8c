/* gpuarena device addresses: the one model of where a driver puts an allocation in its address
 * space, shared by the replay's fake backend (replay.c) and the simulated driver (test/sim/sim_va.c,
 * which links va_fit.c as it links size.c).
 *
 * The arena's choices depend on the order of its regions' addresses (best fit breaks a tie by the
 * lower address, and the regions lie in address order), so a replay agrees with the shim on a
 * driver only if both place regions alike. The model: one range of device addresses, each
 * allocation taking the lowest free place that holds it (first fit, rising), a freed place free
 * again at once; places are whole units of GA_VA_UNIT bytes, so the replay's 512-byte sizes and the
 * simulated driver's page-sized mappings give the same layout. Real drivers hand out rising
 * addresses and reuse freed ones (cuMemAlloc after cuMemFree of the same size commonly returns the
 * same address); Linux's mmap, which the simulated driver used before, hands out falling ones.
 * Pure C: no CUDA; the list of places is the caller's host memory (malloc).
 */
#ifndef GA_VAFIT_H
#define GA_VAFIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GA_VA_UNIT ((size_t)64 << 10) /* a place's size is a whole number of these */

typedef struct ga_va_place {
    uintptr_t base;
    size_t span; /* the size rounded up to GA_VA_UNIT */
} ga_va_place_t;

typedef struct ga_vafit {
    uintptr_t lo, hi;     /* the range [lo, hi), lo a multiple of GA_VA_UNIT */
    uintptr_t floor;      /* nothing below it is free: the search starts there */
    ga_va_place_t *live;  /* taken places, sorted by base */
    size_t n, cap;
} ga_vafit_t;

/* An empty range [lo, hi) (lo rounded up to GA_VA_UNIT). */
void ga_vafit_init(ga_vafit_t *v, uintptr_t lo, uintptr_t hi);
/* The lowest free place of size bytes: 0 and *base set, -1 when the range has no such place, -2
 * when there is no host memory to record it (nothing changed). */
int ga_vafit_take(ga_vafit_t *v, size_t size, uintptr_t *base);
/* The same at the lowest free place whose base is a multiple of align (a power of two; under
 * GA_VA_UNIT it is one unit): a vmm range, aligned to the granularity. -1 for another align. */
int ga_vafit_take_aligned(ga_vafit_t *v, size_t size, size_t align, uintptr_t *base);
/* The place at base exactly (a multiple of GA_VA_UNIT) when it is free: an address a caller asked
 * for (cuMemAddressReserve's hint). 0, -1 when it is not free, -2 as above. */
int ga_vafit_take_at(ga_vafit_t *v, size_t size, uintptr_t base);
/* Gives back the place at base: its span, or 0 when no place starts there. */
size_t ga_vafit_give(ga_vafit_t *v, uintptr_t base);
void ga_vafit_fini(ga_vafit_t *v);

#ifdef __cplusplus
}
#endif

#endif
