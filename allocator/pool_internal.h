/* gpuarena pools, internals shared by pool.c (modes, dispatch, the arena modes), pool_platform.c
 * and pool_vmm.c. Nothing outside allocator/ includes this header.
 */
#ifndef GA_POOL_INTERNAL_H
#define GA_POOL_INTERNAL_H

#include "ga_pool.h"
#include "ga_ptrmap.h"

typedef struct ga_vmm ga_vmm_t;

/* vmm: exact-size placement classes at most (pool_vmm.c); sizes seen after these go to the
 * general area. */
#define GA_VMM_CLASSES 16

/* vmm: granules in one virtual range at most. A range keeps about 14.5 bytes of host memory per
 * granule (counts, handle, owner, three bits), so this bounds one at about 1 GiB: 128 TiB of
 * address space with 2 MiB granules (a GPU's range is twice its memory), 32 GiB with 512-byte
 * ones. A replay of a trace that peaks at a petabyte asked for 2^30 granules: a minute and 10 GB
 * of host memory before this bound; its blocks past the bound are now out-of-memory at once. */
#define GA_VMM_MAX_GRANULES ((size_t)1 << 26)

struct ga_pool {
    ga_mode_t mode;
    ga_pool_config_t cfg;
    ga_pool_backend_t be;
    ga_arena_t *arena;   /* arena, grow; vmm: the virtual ranges, lent to placement areas */
    ga_ptrmap_t table;   /* platform: ptr -> rounded size, aux = bytes requested */
    ga_stats_t own;      /* platform: every figure; vmm: the ones the arena cannot know */
    ga_vmm_t *vmm;       /* vmm: ranges and granules */
};

static inline size_t ga_pool_round(size_t size)
{
    return size && size <= SIZE_MAX - (GA_ALIGN - 1) ? (size + GA_ALIGN - 1) & ~(GA_ALIGN - 1) : 0;
}

/* The modes' allocations, frees and lookups are kept out of line (link-time optimisation would
 * otherwise inline them into pool.c's switch): inlined, the platform and vmm paths made every
 * arena-mode call save and restore six registers and set up a frame it does not use; out of
 * line, the switch tail-calls each mode (in `make bench-shim`'s loop, 28 instructions fewer per
 * arena-mode pair, and fewer for vmm). */
#define GA_MODE_FN __attribute__((noinline))

/* pool_platform.c */
GA_MODE_FN ga_status_t ga_platform_alloc(ga_pool_t *p, size_t size, uintptr_t *out);
GA_MODE_FN ga_status_t ga_platform_free(ga_pool_t *p, uintptr_t ptr, size_t *size);
void ga_platform_destroy(ga_pool_t *p);

/* pool_vmm.c; ga_vmm_alloc and ga_vmm_fits: vmm_alloc.c */
ga_status_t ga_vmm_create(ga_pool_t *p);
void ga_vmm_destroy(ga_pool_t *p);
GA_MODE_FN ga_status_t ga_vmm_alloc(ga_pool_t *p, size_t size, uintptr_t *out);
GA_MODE_FN ga_status_t ga_vmm_free(ga_pool_t *p, uintptr_t ptr, size_t *size);
GA_MODE_FN ga_status_t ga_vmm_lookup(const ga_pool_t *p, uintptr_t ptr, uintptr_t *base, size_t *size);
GA_MODE_FN size_t ga_vmm_live_size(const ga_pool_t *p, uintptr_t ptr);
size_t ga_vmm_trim(ga_pool_t *p);
size_t ga_vmm_live_bases(const ga_pool_t *p, uintptr_t *out, size_t max);
int ga_vmm_fits(ga_pool_t *p, size_t size);
void ga_vmm_stats(const ga_pool_t *p, ga_stats_t *out);
int ga_vmm_check(const ga_pool_t *p, char *report, size_t len);
size_t ga_vmm_granules(const ga_pool_t *p);
size_t ga_vmm_occupancy_map(const ga_pool_t *p, char *buf, size_t len, unsigned width);

#endif
