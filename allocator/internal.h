/* gpuarena allocator internals: the structures shared by arena.c (the alloc/free hot path),
 * region.c (regions, growth, trim, address lookup) and check.c (statistics, invariant walker,
 * occupancy map). Nothing outside allocator/ includes this header.
 *
 * Layout in one paragraph: an arena holds regions (address ranges from the backend) in an array
 * sorted by base. Each region is tiled exactly by chunks, linked in address order so a free
 * merges with free neighbours in O(1). Free chunks sit in segregated lists indexed TLSF-style by
 * (first level = log2 size, second level = 64 linear steps), with a two-level bitmap so the next
 * non-empty list is found with two bit scans. Live chunks sit in a uthash table keyed by base (the
 * exact-pointer free is the hot path). Interior addresses resolve through a per-region
 * hierarchical bitmap with one bit per GA_ALIGN granule marking chunk starts: setting a bit on
 * split and clearing it on merge is O(1), and "nearest chunk start at or below p" is a few word
 * scans, so the hot path pays almost nothing for an O(log n) interior lookup.
 * Chunk structs come from a slab pool so alloc and free do not call malloc per operation.
 */
#ifndef GA_INTERNAL_H
#define GA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ga_arena.h"

/* uthash: keys are chunk bases (multiples of GA_ALIGN), so drop the zero low bits and use a
 * Fibonacci multiply; uthash keeps the low bits of hashv, which the multiply mixes well. Far
 * cheaper than the default Jenkins hash for an 8-byte key. */
#define HASH_FUNCTION(keyptr, keylen, hashv)                                   \
    do {                                                                       \
        uint64_t k_;                                                           \
        (void)(keylen);                                                        \
        memcpy(&k_, (keyptr), sizeof k_);                                      \
        (hashv) = (unsigned)(((k_ >> 9) * 0x9E3779B97F4A7C15ull) >> 29);       \
    } while (0)
/* Host malloc failing inside uthash must become GA_ENOMEM, never exit(): with NONFATAL_OOM a
 * failed HASH_ADD leaves the item out of the table with hh.tbl == NULL, which the caller tests. */
#define HASH_NONFATAL_OOM 1
#define uthash_malloc(sz) ga_host_malloc(sz)

/* Every host allocation of the allocator goes through these, so a test can make them fail from
 * the n-th call on (ga_host_fail_after = n; -1, the default, never) and prove that running out
 * of host memory is a clean GA_ENOMEM with the arena intact. Not thread safe: tests only. */
extern long ga_host_fail_after;
void *ga_host_malloc(size_t size);
void *ga_host_calloc(size_t n, size_t size);
void *ga_host_realloc(void *p, size_t size);
#include <uthash.h>

/* Second-level subdivisions per power of two. 64 makes every size below 64 granules (32 KiB)
 * an exact bin and keeps larger bins within 1/64 of their size. */
#define GA_SL_LOG2 6u
#define GA_SL_COUNT (1u << GA_SL_LOG2)
#define GA_FL_COUNT 64u

struct ga_region;

typedef struct ga_chunk {
    uintptr_t base;
    size_t size;             /* multiple of GA_ALIGN, > 0 */
    size_t requested;        /* bytes asked for (live chunks only) */
    struct ga_chunk *prev_phys, *next_phys; /* address neighbours in the same region */
    struct ga_chunk *prev_free, *next_free; /* bin list (free chunks only) */
    struct ga_region *region;
    unsigned bin;            /* fl * GA_SL_COUNT + sl, valid while free */
    int is_free;
    UT_hash_handle hh;       /* live table, keyed by base */
} ga_chunk_t;

/* Hierarchical bitmap: level 0 has one bit per granule, level k+1 one bit per non-zero word of
 * level k, up to a level that fits in one word. */
#define GA_BITIDX_MAX_LEVELS 12
typedef struct ga_bitidx {
    uint64_t *level[GA_BITIDX_MAX_LEVELS];
    size_t words[GA_BITIDX_MAX_LEVELS];
    unsigned nlevels;
} ga_bitidx_t;

typedef struct ga_region {
    uintptr_t base;
    size_t size;
    ga_chunk_t *first;       /* lowest chunk; the region is empty iff first is free and whole */
    ga_bitidx_t starts;      /* chunk starts, one bit per granule from base */
} ga_region_t;

/* Chunk structs are carved from blocks of this many, kept on a free list. */
#define GA_CHUNK_BLOCK 256u
typedef struct ga_chunk_block {
    struct ga_chunk_block *next;
    ga_chunk_t chunks[GA_CHUNK_BLOCK];
} ga_chunk_block_t;

struct ga_arena {
    ga_backend_t backend;
    ga_config_t config;      /* normalised: sizes rounded, min_region defaulted */
    ga_stats_t stats;        /* largest_free is filled in by ga_get_stats */
    ga_chunk_t *live;        /* uthash head */
    uint64_t fl_bitmap;
    uint64_t sl_bitmap[GA_FL_COUNT];
    ga_chunk_t *bins[GA_FL_COUNT * GA_SL_COUNT];
    ga_region_t **regions;   /* sorted by base */
    size_t nregions, cap_regions;
    size_t last_region_size; /* growth doubles from this */
    ga_chunk_t *spare;       /* chunk struct free list */
    ga_chunk_block_t *blocks;
};

/* Size <-> bin mapping (sizes in bytes, multiples of GA_ALIGN). */
static inline unsigned ga_msb64(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }
static inline unsigned ga_bin_of(size_t size)
{
    uint64_t g = size / GA_ALIGN;
    if (g < GA_SL_COUNT)
        return (unsigned)g;
    unsigned m = ga_msb64(g);
    unsigned fl = m - GA_SL_LOG2 + 1u;
    unsigned sl = (unsigned)(g >> (m - GA_SL_LOG2)) - GA_SL_COUNT;
    return fl * GA_SL_COUNT + sl;
}

/* arena.c */
ga_chunk_t *ga_chunk_new(ga_arena_t *a);
void ga_chunk_put(ga_arena_t *a, ga_chunk_t *c);
size_t ga_round_size(size_t size); /* 0 when size is 0 or rounding would overflow */

/* region.c */
ga_status_t ga_grow(ga_arena_t *a, size_t rounded);
ga_status_t ga_region_add(ga_arena_t *a, size_t size);
size_t ga_release_empty(ga_arena_t *a);
void ga_region_release(ga_arena_t *a, size_t index);
ga_region_t *ga_region_find(const ga_arena_t *a, uintptr_t p);
/* The live chunk containing p, or NULL (p free or outside); *in_region says whether p lies in
 * any region. */
ga_chunk_t *ga_live_at(const ga_arena_t *a, uintptr_t p, int *in_region);

/* bitidx (region.c) */
int ga_bitidx_init(ga_bitidx_t *b, size_t bits);
void ga_bitidx_fini(ga_bitidx_t *b);
int ga_bitidx_test(const ga_bitidx_t *b, size_t i);
int64_t ga_bitidx_prev(const ga_bitidx_t *b, size_t i); /* highest set index <= i, or -1 */

/* Hot helpers, inline because alloc and free call them on every operation. */

static inline void ga_bitidx_set(ga_bitidx_t *b, size_t i)
{
    for (unsigned l = 0; l < b->nlevels; l++, i >>= 6) {
        uint64_t *w = &b->level[l][i >> 6];
        uint64_t was = *w;
        *w |= 1ull << (i & 63);
        if (was) /* the summary bits above already say this word is non-empty */
            return;
    }
}

static inline void ga_bitidx_clear(ga_bitidx_t *b, size_t i)
{
    for (unsigned l = 0; l < b->nlevels; l++, i >>= 6) {
        uint64_t *w = &b->level[l][i >> 6];
        *w &= ~(1ull << (i & 63));
        if (*w)
            return;
    }
}

/* Free lists: push front, and keep the two bitmap levels in step with list emptiness. */
static inline void ga_bin_insert(ga_arena_t *a, ga_chunk_t *c)
{
    unsigned bin = ga_bin_of(c->size);
    c->bin = bin;
    c->is_free = 1;
    c->prev_free = NULL;
    c->next_free = a->bins[bin];
    if (c->next_free)
        c->next_free->prev_free = c;
    a->bins[bin] = c;
    a->sl_bitmap[bin / GA_SL_COUNT] |= 1ull << (bin % GA_SL_COUNT);
    a->fl_bitmap |= 1ull << (bin / GA_SL_COUNT);
}

static inline void ga_bin_remove(ga_arena_t *a, ga_chunk_t *c)
{
    unsigned bin = c->bin;
    if (c->prev_free)
        c->prev_free->next_free = c->next_free;
    else
        a->bins[bin] = c->next_free;
    if (c->next_free)
        c->next_free->prev_free = c->prev_free;
    c->is_free = 0;
    if (!a->bins[bin]) {
        unsigned fl = bin / GA_SL_COUNT;
        a->sl_bitmap[fl] &= ~(1ull << (bin % GA_SL_COUNT));
        if (!a->sl_bitmap[fl])
            a->fl_bitmap &= ~(1ull << fl);
    }
}

static inline size_t ga_granule(const ga_region_t *r, uintptr_t p)
{
    return (size_t)((p - r->base) / GA_ALIGN);
}

#endif
