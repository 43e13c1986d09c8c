/* gpuarena allocator: a best-fit, coalescing sub-allocator over an injected backend.
 *
 * This is the whole public contract of allocator/. It has no CUDA and no dlfcn in it: the arena
 * manages address ranges it got from a backend and never touches the bytes behind them (they are
 * device memory in the shim, a fake range or host memory in tests and replay). Addresses are
 * uintptr_t so that nothing here can be dereferenced by mistake. Metadata lives on the host.
 *
 * An arena is not thread safe by itself: the caller (the shim) holds one lock per arena.
 */
#ifndef GA_ARENA_H
#define GA_ARENA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every size is rounded up to, and every returned address aligned to, this many bytes. */
#define GA_ALIGN ((size_t)512)

/* Result codes. Each failure is distinct so the shim can map it to the driver's own code. */
typedef enum ga_status {
    GA_OK = 0,
    GA_EINVAL = 1,     /* size 0, NULL out-parameter, bad configuration */
    GA_ENOMEM = 2,     /* no room: limit reached or the backend refused every size tried */
    GA_ENOTOWNED = 3,  /* free/lookup of an address in no region of this arena */
    GA_EDOUBLE = 4,    /* free of an address inside a free chunk (double or stale free) */
    GA_EINTERIOR = 5,  /* free of an address inside a live allocation but not its start */
    GA_EHELD = 6,      /* free of a platform block whose release the backend refused: still live */
    GA_ENOHOST = 7,    /* no host memory for the allocator's own records (not the device, not the
                          limit); nothing changed, and the same call may succeed later */
    GA_ETOOBIG = 8,    /* a size within GA_ALIGN - 1 of SIZE_MAX, whose rounding up would wrap:
                          no pool can place it; nothing changed (issue 2: each bad input its own
                          error; it shared GA_EINVAL with size 0 until 2026-12-06) */
} ga_status_t;

/* The backend: where regions come from. Contract:
 *  - reserve(ctx, size, &base) returns 0 and sets base to a GA_ALIGN-aligned range of exactly
 *    `size` usable bytes, or returns non-zero (out of memory) and leaves base untouched. `size` is
 *    always a multiple of GA_ALIGN. It may be called again with a smaller size after a failure.
 *    GA_ENOHOST (7) says the backend's own host memory failed, not the memory it hands out: the
 *    arena then fails with GA_ENOHOST and tries no smaller size.
 *  - release(ctx, base, size) gives back a range reserve returned, with the same size; 0 when it
 *    went back, non-zero when the backend still holds it (the driver refused to free it): the
 *    range is then as it was, and the arena keeps the region (empty, usable) and tries again at
 *    its next release. Only at destroy, or for a region the arena could not record, is a refusal
 *    not kept: the range is forgotten, and what it holds is the backend's business.
 *  - Neither is called re-entrantly from inside the other, and the arena never reads or writes
 *    the bytes of a region. */
typedef struct ga_backend {
    int (*reserve)(void *ctx, size_t size, uintptr_t *base);
    int (*release)(void *ctx, uintptr_t base, size_t size);
    void *ctx;
} ga_backend_t;

/* How an arena obtains regions.
 *  initial:    bytes of the first region, reserved by ga_arena_create (preallocation);
 *              0 = nothing up front, regions on demand.
 *  grow:       non-zero: may reserve more regions when full (geometric growth from min_region,
 *              retrying smaller down to the request on a failed reserve); 0: only the initial region
 *              (with initial 0 there is none, so regions always come on demand).
 *  limit:      hard cap on bytes reserved from the backend; 0 = no cap.
 *  min_region: smallest growth region (default 2 MiB when 0).
 *  max_region: largest growth region, 0 = none: growth doubles up to it and no further (a larger
 *              request gets a region of its own size). Without a limit, an arena that gives its
 *              regions back (trim) and grows again doubles each time; this bounds it. */
typedef struct ga_config {
    size_t initial;
    int grow;
    size_t limit;
    size_t min_region;
    size_t max_region;
    int keep_empty; /* grow: never release an empty region inside ga_alloc to make room (the
                       caller trims instead, with ga_trim, once it may wait for the backend) */
} ga_config_t;

/* Statistics of an arena and of every pool (ga_pool.h): one list, X(name, unit, description),
 * unit bytes, count or ns. A bare arena fills the first block; the fields marked "pool" are filled
 * by the pool layer (0 in a bare arena and in modes they do not apply to). */
#define GA_STATS_LIST(X)                                                                      \
    X(in_use, bytes, "bytes in live allocations, rounded to GA_ALIGN")                        \
    X(in_use_requested, bytes, "bytes in live allocations as requested")                     \
    X(peak_in_use, bytes, "highest in_use seen")                                              \
    X(reserved, bytes, "bytes held from the backend (vmm: physical bytes mapped)")           \
    X(peak_reserved, bytes, "highest reserved seen")                                          \
    X(allocs, count, "successful allocations")                                                \
    X(frees, count, "successful frees")                                                       \
    X(failed_allocs, count, "allocations that returned GA_ENOMEM")                            \
    X(frag_failures, count, "failed allocations while enough bytes were free in total")      \
    X(backend_reserves, count, "successful backend reserve calls (vmm: virtual ranges)")     \
    X(backend_releases, count, "backend release calls")                                       \
    X(regions, count, "regions currently held")                                               \
    X(live, count, "allocations currently live")                                              \
    X(largest_free, bytes, "largest free chunk, bytes")                                       \
    X(total_free, bytes, "bytes free inside held regions (vmm: inside the virtual ranges)")  \
    X(va_reserved, bytes, "pool, vmm: bytes of virtual address ranges held")                 \
    X(kept, bytes, "pool, vmm: wholly free granules kept mapped (GPUARENA_VMM_KEEP)")       \
    X(backend_maps, count, "pool, vmm: granules mapped (create + map + set access)")         \
    X(backend_unmaps, count, "pool, vmm: granules unmapped and released")                    \
    X(peak_kept, bytes, "pool, vmm: highest kept seen")

typedef struct ga_stats {
#define GA_STATS_FIELD(name, unit, desc) uint64_t name;
    GA_STATS_LIST(GA_STATS_FIELD)
#undef GA_STATS_FIELD
} ga_stats_t;

typedef struct ga_arena ga_arena_t;

/* Creates an arena. Returns NULL if out of host memory, or if the initial reservation fails
 * (then *status, when non-NULL, is GA_ENOMEM); config NULL means all zero (grow on demand). */
ga_arena_t *ga_arena_create(const ga_backend_t *backend, const ga_config_t *config,
                            ga_status_t *status);
/* Releases every region to the backend, live allocations or not, and frees the metadata. */
void ga_arena_destroy(ga_arena_t *arena);

/* Allocates size bytes (rounded up to GA_ALIGN); *out is GA_ALIGN-aligned. */
ga_status_t ga_alloc(ga_arena_t *arena, size_t size, uintptr_t *out);
/* 1 when ga_alloc of size would be served from the regions held now (no region added), and then
 * *at (optional) is where it would place it. Changes nothing a caller can see (placement,
 * statistics); like ga_alloc it may tidy the bins' index, so it needs the same exclusion. */
int ga_arena_fits(ga_arena_t *arena, size_t size, uintptr_t *at);
/* Frees an address ga_alloc returned. On any error the arena is unchanged. */
ga_status_t ga_free(ga_arena_t *arena, uintptr_t ptr);
/* ga_free, and *size (when non-NULL) gets the freed block's rounded size: one search for callers
 * that account the bytes (the pools), where a lookup before the free cost a second one. */
ga_status_t ga_free_sized(ga_arena_t *arena, uintptr_t ptr, size_t *size);
/* Finds the live allocation containing ptr (which may be interior): its base and rounded size.
 * Either out-parameter may be NULL. GA_ENOTOWNED if ptr is in no live allocation. */
ga_status_t ga_lookup(ga_arena_t *arena, uintptr_t ptr, uintptr_t *base, size_t *size);
/* The rounded size of the live allocation whose base is exactly ptr; 0 for any other address
 * (interior, free, not this arena's) or a NULL arena. One probe of the live table: a free that
 * must know the size before it frees (the shim's, which queues it) asks this, not ga_lookup. */
size_t ga_live_size(const ga_arena_t *arena, uintptr_t ptr);
/* The number of live allocations; the first `max` of their bases (in no order) go to out. */
size_t ga_live_bases(const ga_arena_t *arena, uintptr_t *out, size_t max);
/* Non-zero if ptr lies inside any region of this arena (live, free or interior). */
int ga_owns(const ga_arena_t *arena, uintptr_t ptr);
/* Releases every completely free region; returns the bytes released. */
size_t ga_trim(ga_arena_t *arena);
/* Bytes of the completely free regions whose last release the backend refused (kept, empty and
 * usable: they serve blocks up to their size, but cannot be given back to make room for a larger
 * one); *largest (optional) gets the largest such region. Walks the regions: not for a hot path. */
size_t ga_refused_idle(const ga_arena_t *arena, size_t *largest);
/* The bytes ga_trim would release now (completely free regions); changes nothing. */
size_t ga_idle(const ga_arena_t *arena);

void ga_get_stats(const ga_arena_t *arena, ga_stats_t *out);
/* 1 - largest_free / total_free, 0 when nothing is free. */
double ga_fragmentation(const ga_stats_t *stats);
/* Walks every structure and counts invariant failures (0 = healthy). Tests call it after each
 * step. If report is non-NULL, a description of the first failures is written to it. */
int ga_check(const ga_arena_t *arena, char *report, size_t report_len);
/* A compact occupancy picture for diagnostics: `width` characters per region, one line per
 * region, '#' mostly used, '+' partly, '.' free. Returns the characters written (snprintf-like). */
size_t ga_occupancy_map(const ga_arena_t *arena, char *buf, size_t len, unsigned width);

const char *ga_status_str(ga_status_t status);

#ifdef __cplusplus
}
#endif
#endif
