/* gpuarena pools: each allocation mode is a pool behind one small interface.
 *
 * A pool serves allocations from memory it gets through an injected backend, and is the only
 * thing that decides where an allocation goes and what it holds. The shim gives each CUDA context
 * one pool whose backend calls the real driver (and checks the cap); gpuarena-replay and the tests
 * give the very same pools a fake or host backend, so a replay and a real run cannot disagree
 * about what a mode does. Four modes, one list (GA_MODE_LIST):
 *   arena     an arena (ga_arena.h) with its first region preallocated; may grow past it
 *   grow      the same arena without preallocation: regions on demand, empty ones given back
 *   vmm       one large virtual range (grown by more ranges only if it ever fills), placement by
 *             best fit in areas that keep granules full (granule multiples, one area per
 *             frequent odd size, the rest), physical memory mapped in granules only where live
 *             allocations lie; a granule that becomes wholly free is unmapped and released, or
 *             kept mapped (a cache of at most `keep` bytes) to avoid remapping churn. Kept
 *             granules are given back first whenever new physical memory is needed, so the cache
 *             never raises the peak of mapped memory.
 *   platform  one backend reservation per allocation (of the size requested; counted rounded to
 *             GA_ALIGN), a pointer table, released at once on free
 * A pool is not thread safe: its owner holds one lock around every call.
 */
#ifndef GA_POOL_H
#define GA_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "ga_arena.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The modes: X(enum suffix, name, one-line description). The names are the only spelling of a
 * mode anywhere (GPUARENA_MODE, the command, the replay tool, the statistics). */
#define GA_MODE_LIST(X)                                                                        \
    X(ARENA, "arena", "preallocated arena: a fraction of the cap at first use, best fit")     \
    X(GROW, "grow", "arena without preallocation: regions on demand, empty ones given back")  \
    X(VMM, "vmm", "one virtual range, physical granules mapped only where allocations lie")   \
    X(PLATFORM, "platform", "one driver allocation per allocation, freed at once")

typedef enum ga_mode {
#define GA_MODE_ENUM(sym, name, desc) GA_MODE_##sym,
    GA_MODE_LIST(GA_MODE_ENUM)
#undef GA_MODE_ENUM
    GA_MODE_COUNT
} ga_mode_t;

const char *ga_mode_name(ga_mode_t mode); /* "invalid" when out of range */
const char *ga_mode_desc(ga_mode_t mode);
/* Case-insensitive, surrounding spaces ignored; 0 and *mode set, or -1. */
int ga_mode_parse(const char *text, ga_mode_t *mode);

/* The backend. arena, grow and platform use reserve/release with the contract of ga_backend_t
 * (ga_arena.h), except that platform asks for exactly the bytes requested (any size, not a
 * multiple of GA_ALIGN) and releases with that same size; a platform block whose release the
 * backend refuses stays live (ga_pool_free answers GA_EHELD). vmm uses the rest:
 *  - va_reserve(ctx, size, &base): a virtual range of `size` bytes (a multiple of granularity),
 *    aligned to granularity, with nothing behind it; non-zero on failure.
 *  - va_release(ctx, base, size): gives back a range va_reserve returned, after every granule in
 *    it was unmapped.
 *  - map(ctx, addr, size, &handle): puts physical memory behind exactly one granule
 *    [addr, addr + size), size == granularity, readable and writable; returns non-zero (nothing
 *    mapped, nothing held) on failure, else sets *handle (non-zero) for the matching unmap.
 *  - unmap(ctx, addr, size, handle): takes it away and releases the physical memory.
 *  - granularity: a power of two, at least GA_ALIGN.
 *  - map_run(ctx, addr, size, n), unmap_run(ctx, addr, size, n): optional, both or neither, for a
 *    backend that needs no handle per granule (gpuarena-replay's, which only counts): the n
 *    granules [addr, addr + n * size) mapped (all or nothing: non-zero, none mapped) or unmapped
 *    in one call; granules mapped together may be unmapped apart, and the reverse. A pool whose
 *    backend has them maps and unmaps through them only (map and unmap may be NULL) and keeps no
 *    handles, and a block of n fresh granules costs a few bitmap words, not n calls. The
 *    driver's backend leaves them NULL: each granule keeps its own handle, given back alone.
 *  - device_free(ctx): optional, vmm: the bytes of physical memory the device could give now (the
 *    driver's free figure); asked before a block maps GA_VMM_PRECHECK granules or more, which is
 *    refused at once (nothing mapped) when they cannot all fit: mapped one by one until the driver
 *    refused, a block of 64 GiB on a device with less took 3 s to fail (an outside test).
 * No call is made re-entrantly from inside another. */
typedef struct ga_pool_backend {
    int (*reserve)(void *ctx, size_t size, uintptr_t *base);
    int (*release)(void *ctx, uintptr_t base, size_t size);
    int (*va_reserve)(void *ctx, size_t size, uintptr_t *base);
    void (*va_release)(void *ctx, uintptr_t base, size_t size);
    int (*map)(void *ctx, uintptr_t addr, size_t size, uint64_t *handle);
    void (*unmap)(void *ctx, uintptr_t addr, size_t size, uint64_t handle);
    size_t granularity;
    void *ctx;
    int (*map_run)(void *ctx, uintptr_t addr, size_t size, size_t n);
    void (*unmap_run)(void *ctx, uintptr_t addr, size_t size, size_t n);
    size_t (*device_free)(void *ctx);
    /* optional, platform: the backend's reserve answered an address the pool still holds as a
     * live block, which a correct backend gives only once that block is gone (the driver freed it
     * by a path the pool did not see: a program's second cuMemFree of a pointer, racing another
     * thread's allocation that was just given the same address). forget(ctx, base, size) drops
     * that block's bytes with no backend call; the new block takes its place. Without it such an
     * address is a broken contract: the new block is released and the allocation fails. */
    void (*forget)(void *ctx, uintptr_t base, size_t size);
} ga_pool_backend_t;

/* vmm: a block that maps this many granules or more asks the backend's device_free first. */
#define GA_VMM_PRECHECK 16

/* How a pool holds memory.
 *  mode        which pool
 *  initial     arena: bytes of the region taken at creation (0: nothing up front)
 *  grow        arena: may take more regions when full (grow mode always does)
 *  limit       bytes held from the backend at most (arena/grow: reserved; vmm: mapped; platform:
 *              the sum of reservations); 0 = none
 *  min_region  arena/grow: smallest growth region (0: the arena's default, 2 MiB)
 *  va_size     vmm: bytes of the first virtual range (rounded up to the granularity; later ranges,
 *              only if one ever fills, at least double); required for vmm
 *  keep        vmm: wholly free granules kept mapped, bytes (0: give every one back at once)
 *  keep_empty  grow: an allocation never gives back an empty region to make room; the caller
 *              trims (ga_pool_trim) when it may wait for the backend's release */
typedef struct ga_pool_config {
    ga_mode_t mode;
    size_t initial;
    int grow;
    size_t limit;
    size_t min_region;
    size_t va_size;
    size_t keep;
    int keep_empty;
} ga_pool_config_t;

/* vmm: bytes of wholly free granules kept mapped unless GPUARENA_VMM_KEEP says otherwise. */
#define GA_VMM_KEEP_DEFAULT ((size_t)64 << 20)

typedef struct ga_pool ga_pool_t;

/* NULL with *status GA_EINVAL (bad config or backend), GA_ENOHOST (host memory), or GA_ENOMEM (the initial
 * region could not be had). */
ga_pool_t *ga_pool_create(const ga_pool_backend_t *backend, const ga_pool_config_t *config,
                          ga_status_t *status);
/* Gives everything back through the backend, live allocations or not, and frees the pool. */
void ga_pool_destroy(ga_pool_t *pool);
ga_mode_t ga_pool_mode(const ga_pool_t *pool);

/* size bytes, rounded up to GA_ALIGN; *out is GA_ALIGN-aligned. GA_ENOMEM: no room (the limit, or
 * the backend refused); GA_ENOHOST: no host memory for the pool's records, nothing mapped or
 * counted, except that a vmm pool may keep a further address range it reserved on the way (empty,
 * reused by the next allocation, counted in va_reserved: address space, not memory; an outside
 * check, helper-95, 2026-12-06, saw 64 -> 264 MiB of it once, never more on retries). */
ga_status_t ga_pool_alloc(ga_pool_t *pool, size_t size, uintptr_t *out);
/* 1 when ga_pool_alloc of size would be served from memory the pool holds now, with no backend
 * call (vmm: when the place the allocation would take without a choice lies on mapped granules;
 * 0 where it would choose or grow; platform: never); changes nothing a caller sees (vmm may give
 * its general area's parked blocks back first, as the allocation would). */
int ga_pool_fits(ga_pool_t *pool, size_t size);
/* Frees an address ga_pool_alloc returned; *size (optional) gets its rounded size. On any error
 * the pool is unchanged: GA_ENOTOWNED (not this pool's), GA_EDOUBLE, GA_EINTERIOR, and for
 * platform GA_EHELD (the backend refused to release the block: it stays live, free it again). */
ga_status_t ga_pool_free(ga_pool_t *pool, uintptr_t ptr, size_t *size);
/* The live allocation containing ptr (interior allowed; platform: its base only, an interior
 * address is GA_ENOTOWNED, as the driver knows its own ranges): base and rounded size, either
 * out-parameter may be NULL; GA_ENOTOWNED. (Interior was said of every mode until 2026-12-07: an
 * outside check, test_outside134.c.) */
ga_status_t ga_pool_lookup(const ga_pool_t *pool, uintptr_t ptr, uintptr_t *base, size_t *size);
/* The rounded size of the live allocation whose base is exactly ptr, 0 for any other address
 * (ga_pool_lookup answers those): the hot path of a free that queues it before freeing. */
size_t ga_pool_live_size(const ga_pool_t *pool, uintptr_t ptr);
/* Non-zero if ptr lies in memory this pool holds (live, free or interior; platform: live only). */
int ga_pool_owns(const ga_pool_t *pool, uintptr_t ptr);
/* The number of live allocations; the first `max` of their bases (in no order) go to out. Not for
 * a hot path: it walks every live table (the shim frees what a destroyed context leaves). */
size_t ga_pool_live_bases(const ga_pool_t *pool, uintptr_t *out, size_t max);
/* Gives back what is held and idle: empty regions (arena, grow; a preallocated region with
 * nothing live is taken again at the next allocation), kept granules (vmm). Returns bytes. */
size_t ga_pool_trim(ga_pool_t *pool);
/* ga_refused_idle of an arena or grow pool; 0 for vmm (the shim keeps refused granules itself)
 * and platform (a refused block stays live). */
size_t ga_pool_refused_idle(const ga_pool_t *pool, size_t *largest);
/* arena, grow: the bytes of empty regions ga_pool_trim would give back now; 0 for the other
 * modes (vmm's kept granules are not counted). Changes nothing. */
size_t ga_pool_idle(const ga_pool_t *pool);
void ga_pool_stats(const ga_pool_t *pool, ga_stats_t *out);
/* Invariant walk: failures counted, the first described in report (see ga_check). */
int ga_pool_check(const ga_pool_t *pool, char *report, size_t len);
/* What one ga_pool_check walks beyond the pool's chunks: a vmm pool's granules (every granule of
 * its ranges: 2^23 for a 16 TiB range of 2 MiB granules), 0 for the other modes. */
size_t ga_pool_check_granules(const ga_pool_t *pool);
/* Occupancy picture (ga_occupancy_map) for arena, grow and vmm; 0 characters for platform. */
size_t ga_pool_occupancy_map(const ga_pool_t *pool, char *buf, size_t len, unsigned width);

#ifdef __cplusplus
}
#endif
#endif
