/* replay_fake.h: the replay's fake backend (replay_fake.c), which replay.c gives its pools.
 *
 * Address ranges far from anything real. Arena and grow mode's regions are placed as a driver
 * places them (ga_vafit.h: the lowest free place, freed places reused), the model the simulated
 * driver shares, because the arena's choices follow its regions' address order: with a bump
 * pointer here and Linux's falling mmap addresses there, a replay under a cap refused up to 31
 * allocations more or fewer than the shim (an outside check, 2026-12-07); vmm's virtual ranges
 * too, aligned to the granularity. Platform's blocks come from a bump pointer, never reused:
 * nothing there depends on their order, and platform reserves once per allocation, too often for
 * a search. Granule maps only count, a run of them in one call (map_run, ga_pool.h): a trace of
 * blocks of 1 TiB maps 524,288 granules a block, and granule by granule that was ~8 ns each, 4.2 s
 * for 1,000 such blocks.
 */
#ifndef GA_REPLAY_FAKE_H
#define GA_REPLAY_FAKE_H

#include <stddef.h>
#include <stdint.h>

#include "ga_pool.h"
#include "ga_vafit.h"

typedef struct fake_backend {
    int placed;     /* regions through fit (arena, grow), else the bump pointer */
    ga_vafit_t fit;
    uint64_t next, end;
    uint64_t reserves, releases, maps, unmaps;
    size_t align; /* vmm: ranges aligned to the granularity */
    /* grow: the limit, enforced here as the shim's backend enforces the cap (a region that would
     * pass it refused, the arena halving), not as the pool's own limit, which sizes a region to the
     * room left at once: a replay under --limit then took other regions than a run under
     * GPUARENA_LIMIT and refused other allocations (an outside check, 2026-12-07). 0: none. */
    uint64_t cap, held;
} fake_backend_t;

#define FAKE_BASE ((uint64_t)1 << 40)
#define FAKE_END ((uint64_t)1 << 62)

/* An empty backend: vmm ranges aligned to align, regions bounded by cap (0: none), and placed by
 * the address model when placed is set (arena, grow), else from the bump pointer. */
void ga_fake_init(fake_backend_t *fb, size_t align, uint64_t cap, int placed);
/* The pool's backend over fb, with the granularity vmm maps. */
ga_pool_backend_t ga_fake_backend(fake_backend_t *fb, size_t granularity);
void ga_fake_fini(fake_backend_t *fb);

#endif
