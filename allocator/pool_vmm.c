/* gpuarena vmm pool: granule-aware placement over a reserved virtual range, physical memory only
 * where live allocations lie.
 *
 * Physical memory is mapped per granule: a granule is mapped (backend map) when a first live
 * allocation touches it and unmapped when the last one goes (ga_vrange_t says how that is kept
 * at a cost independent of a block's size). Addresses never move, and nothing fragments across
 * regions: freed memory goes back to the device granule by granule. What a vmm pool costs beyond the live bytes is therefore only the
 * unused part of partly used granules, and placement is chosen to keep those few.
 *
 * Placement: the virtual range is a parent arena (ga_arena.h) that holds address space only, and
 * it lends granule-aligned regions to placement areas, each an arena of its own with exact best
 * fit inside (VA only, so an area's idle regions cost nothing physical):
 *   aligned  sizes that are a multiple of the granule: they start and end on granule boundaries,
 *            so they never leave a granule partly used;
 *   class    one area per exact size from half a granule up to 3 granules, made when a second
 *            block of the size is asked for while one is live (GA_VMM_CLASSES at most): equal
 *            blocks side by side tile granules (four 4.5 MiB blocks fill nine 2 MiB granules),
 *            and a hole one leaves is refilled by the same size;
 *   general  everything else: small allocations, which fill partly used granules among
 *            themselves, sizes seen alone, and large odd sizes, whose tail granule others share.
 * A block for the aligned area or a class that would map new granules there is also tried in the
 * general area and goes where fewer granules are new (its own area on a tie): when one size
 * replaces another within a step (gradients allocated as activations are freed), the general
 * area reuses the granules just freed and still mapped, where a separate area would map its own
 * and give the freed ones back, every step.
 * Why: one best-fit arena mixes sizes, so the hole one size leaves is cut up by others at
 * arbitrary offsets, and granules stay mapped for a few bytes each. On the cs336 bf16 forward
 * pass (244 MiB live) that mapped 1.106x the live peak; the areas map 1.032x. Each rule was
 * measured on the shared traces and examples/ex_train (README, "vmm's mapped memory on the
 * traces"): classes for every size seen (single blocks of distinct sizes each leave most of a
 * granule unused: ex_train 1.26x) or without the general-area try (ex_train at widths where its
 * gradients get a class remaps 20x more: 887 maps instead of 44) did worse. An owner entry per
 * granule says which area lent it, so a free or a lookup finds its area in O(1); an allocation
 * from half a granule up costs a size lookup (a small hash) and, when it maps something, a second
 * best fit, no scan. The common case is kept to what arena mode does plus a few counts: a size
 * under half a granule goes to the general area with nothing looked up, and a block inside one
 * granule that another live block uses only moves that granule's count (the bitmap words, the
 * limit check and the kept cache are for blocks that take or leave a granule; a granule-by-granule
 * loop only for blocks that map something).
 *
 * Remapping churn (a training step that frees and reallocates the same buffers) is absorbed by a
 * cache: a granule whose last user goes stays mapped ("kept") while the kept bytes stay within
 * cfg.keep, and is reused by the next allocation that touches it at no backend cost. Whenever a
 * new granule must be mapped, a kept one is given back first, so mapped memory only grows when no
 * kept granule is left: the peak of mapped memory is the same as with no cache at all. Kept
 * granules sit on a stack of runs (a freed block's granules are one run) that is cleaned lazily
 * (a granule reused since is skipped when popped), which keeps reuse O(1) and needs no list
 * surgery; a block freed again whose granules are on the stack already pushes nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena_hot.h"
#include "pool_internal.h"

/* Slow paths (mapping, area choice, size tracking) are kept out of line: inlined, they made every
 * allocation and free save and restore six registers and a large frame for work it rarely does. */
#define OUT_OF_LINE __attribute__((noinline))

/* A granule is in use while a live block touches it. A block spanning granules g0..g1 counts
 * itself in refs[g0] and refs[g1] (once when g0 == g1), the only granules it can share with
 * other blocks; the granules strictly between are its alone and carry a bit in `inner`. So a
 * block's bookkeeping is two counts and a few bitmap words whatever its size, and "is anything
 * here unmapped" is a mask test on `mapped`, not a walk over the granules. */
typedef struct ga_vrange {
    uintptr_t base;
    size_t size;       /* bytes of address space, a multiple of the granularity */
    size_t ngran;
    uint32_t *refs;    /* live blocks that start or end in each granule (the aligned area: 0) */
    uint64_t *inner;   /* bit: inside one live block, neither its first nor its last granule; in
                        * the aligned area, whose blocks share no granule, every granule of a live
                        * block (so a block there is one bit run, set and cleared, and no count) */
    uint64_t *mapped;  /* bit: physical memory is mapped there (handle non-zero) */
    uint64_t *stacked; /* bit: on the kept stack (maybe stale) */
    uint64_t *handle;  /* the backend's handle of a mapped granule; 0 = unmapped */
    uint16_t *owner;   /* 1 + the area the granule is lent to; 0 = not lent */
} ga_vrange_t;

/* A run of kept granules g .. g + n - 1, pushed in that order: the stack of runs, read from its
 * top down, is the stack of single granules it stands for. */
typedef struct ga_kslot {
    uintptr_t base; /* the range's base: a range released since makes the entry stale */
    size_t g, n;
} ga_kslot_t;

/* Placement areas: the general one, the granule-multiple one, then the exact-size classes. */
enum { AREA_GENERAL = 0, AREA_ALIGNED = 1, AREA_FIRST_CLASS = 2 };
#define AREAS_MAX (AREA_FIRST_CLASS + GA_VMM_CLASSES)
/* Sizes tracked for promotion: open addressing, at most TRACK_MAX entries (sizes beyond stay in
 * the general area) in TRACK_SLOTS = 2^TRACK_BITS slots. The table stays under a fifth full: a
 * size that is not in it (every allocation and free of an untracked size asks) is then found
 * missing in about one probe. At 3/4 full (256 slots) that took eight, 95 instructions of a
 * vmm alloc+free pair once random sizes had filled the table (ex_alloctime). */
#define TRACK_BITS 10
#define TRACK_SLOTS (1u << TRACK_BITS)
#define TRACK_MAX 192

typedef struct ga_varea {
    ga_pool_t *pool;
    ga_arena_t *arena; /* made at the area's first allocation */
    size_t size;       /* a class: its size; 0 otherwise */
    uint16_t id;
    uint16_t slot;     /* a class: its size's tracking entry (entries are never removed) */
    uint8_t dirty;     /* changed since `seen` was read */
    struct {
        uint64_t requested, live, total_free, largest_free;
    } seen;            /* the arena's figures when last read (ga_vmm_stats) */
} ga_varea_t;

struct ga_vmm {
    ga_pool_t *pool;
    ga_vrange_t *ranges;
    size_t nranges, cap;
    uintptr_t base0;   /* ranges[0]'s base and size (0: none), copied here: nearly every pointer */
    size_t size0;      /* lies in the first range, found then in two loads and a compare */
    uint32_t *refs0;   /* ranges[0]'s granule counts and owners, copied for the fast paths */
    uint16_t *owner0;
    /* Each owner value's live table: its area's arena's (set when the arena is made; a granule
     * is lent only by an area whose arena exists), or for 0 (not lent) an empty one, so that
     * ga_vmm_live_size goes from the owner to its answer in one probe with no test on the way. */
    const ga_livetab_t *live_of[AREAS_MAX + 1];
    size_t gran;       /* a power of two (checked at create) */
    unsigned gshift;   /* log2(gran): granule arithmetic is shifts and masks, not divisions (a
                        * 64-bit division on every allocation and free cost more than the rest) */
    size_t half;       /* gran / 2: below it a size is neither a multiple nor a class */
    size_t small_lim;  /* sizes 1 .. small_lim round up to under half: half - GA_ALIGN, or 0 */
    size_t small_cut;  /* small_lim once the general area's arena is made, 0 before: the fast
                        * path's one test */
    ga_kslot_t *stack;
    size_t nstack, capstack;
    size_t region;     /* an area's first region at most: the first range */
    ga_varea_t area[AREAS_MAX];
    size_t nareas;
    struct {
        size_t size;   /* 0 = empty slot */
        size_t nlive;  /* live blocks of this size, whatever area */
        uint16_t area; /* its class once promoted; 0 before */
    } track[TRACK_SLOTS];
    size_t ntrack;
    /* The class last allocated in: its size (0: none yet), area and tracking entry. A size keeps
     * its class once it has one, so a repeat of the size skips the lookup (area_for). */
    size_t hot_size;
    uint16_t hot_area;
    int hot_slot;
    /* Statistics over the areas, kept up to date by rereading only the areas changed since the
     * last call: the replay and the shim ask after every free, and a hundred classes each
     * asked for their largest free chunk cost the replay 3-7x its speed. */
    uint16_t dirty[AREAS_MAX];
    size_t ndirty;
    uint64_t requested, live, total_free, largest_free;
    int parent_dirty;  /* the parent lent or took back a region since `parent` was read */
    ga_stats_t parent;
};

/* Granule bitmaps ------------------------------------------------------------------------------ */

/* The bits of word w that lie in granules lo..hi. */
static inline uint64_t word_mask(size_t w, size_t lo, size_t hi)
{
    uint64_t m = ~0ull;
    if (w == lo >> 6)
        m &= ~0ull << (lo & 63);
    if (w == hi >> 6)
        m &= ~0ull >> (63 - (hi & 63));
    return m;
}

/* Granules lo..hi when they lie in one word (a block of up to 64 granules, usually): its mask. */
static inline int one_word(size_t lo, size_t hi) { return lo >> 6 == hi >> 6; }
static inline uint64_t span_mask(size_t lo, size_t hi)
{
    return (~0ull << (lo & 63)) & (~0ull >> (63 - (hi & 63)));
}

static inline int bit_get(const uint64_t *b, size_t g) { return (int)(b[g >> 6] >> (g & 63)) & 1; }

/* Bit counts without a library call (x86-64's baseline has no popcnt instruction). */
static inline size_t popcount64(uint64_t x)
{
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return (size_t)((x * 0x0101010101010101ull) >> 56);
}

/* Whether every bit of granules lo..hi is set (lo <= hi). */
static inline int bits_all(const uint64_t *b, size_t lo, size_t hi)
{
    if (one_word(lo, hi))
        return (b[lo >> 6] | ~span_mask(lo, hi)) == ~0ull;
    for (size_t w = lo >> 6; w <= hi >> 6; w++) {
        uint64_t m = word_mask(w, lo, hi);
        if ((b[w] & m) != m)
            return 0;
    }
    return 1;
}

/* Set bits among granules lo..hi (lo <= hi). */
static size_t bits_count(const uint64_t *b, size_t lo, size_t hi)
{
    size_t n = 0;
    for (size_t w = lo >> 6; w <= hi >> 6; w++)
        n += popcount64(b[w] & word_mask(w, lo, hi));
    return n;
}

/* Sets (on) or clears the bits of granules lo..hi (lo <= hi). */
static inline void bits_put(uint64_t *b, size_t lo, size_t hi, int on)
{
    if (one_word(lo, hi)) {
        uint64_t m = span_mask(lo, hi);
        b[lo >> 6] = on ? b[lo >> 6] | m : b[lo >> 6] & ~m;
        return;
    }
    for (size_t w = lo >> 6; w <= hi >> 6; w++)
        b[w] = on ? b[w] | word_mask(w, lo, hi) : b[w] & ~word_mask(w, lo, hi);
}

/* The first granule of lo..hi whose bit is `on`, or hi + 1 (lo <= hi). */
static size_t bits_next(const uint64_t *b, size_t lo, size_t hi, int on)
{
    for (size_t w = lo >> 6; w <= hi >> 6; w++) {
        uint64_t x = (on ? b[w] : ~b[w]) & word_mask(w, lo, hi);
        if (x)
            return (w << 6) + (size_t)__builtin_ctzll(x);
    }
    return hi + 1;
}

static inline int in_use(const ga_vrange_t *r, size_t g)
{
    return r->refs[g] || bit_get(r->inner, g);
}

/* Address space (the arena's backend) -------------------------------------------------------- */

static ga_vrange_t *range_of(const ga_vmm_t *v, uintptr_t addr)
{
    if (addr - v->base0 < v->size0)
        return v->ranges;
    for (size_t i = 1; i < v->nranges; i++)
        if (addr - v->ranges[i].base < v->ranges[i].size)
            return &v->ranges[i];
    return NULL;
}

static void first_range_changed(ga_vmm_t *v)
{
    v->base0 = v->nranges ? v->ranges[0].base : 0;
    v->size0 = v->nranges ? v->ranges[0].size : 0;
    v->refs0 = v->nranges ? v->ranges[0].refs : NULL;
    v->owner0 = v->nranges ? v->ranges[0].owner : NULL;
}

static void range_free_host(ga_vrange_t *r)
{
    free(r->refs);
    free(r->inner);
    free(r->mapped);
    free(r->stacked);
    free(r->handle);
    free(r->owner);
}

static int va_adapt_reserve(void *ctx, size_t size, uintptr_t *base)
{
    ga_pool_t *p = ctx;
    ga_vmm_t *v = p->vmm;
    size_t vsize = (size + v->gran - 1) & ~(v->gran - 1);
    if (vsize < size || (v->nranges == v->cap && v->cap > SIZE_MAX / 2 / sizeof *v->ranges))
        return -1;
    /* A range larger than the usual is asked for one block (areas grow no further than a range,
     * max_region): when its granules alone pass the limit it could never be mapped, so no
     * address space and no bookkeeping for it (a request for terabytes under a cap of megabytes
     * reserved them, and the bitmaps' host memory with them, before failing). */
    if (vsize > v->region && p->cfg.limit && vsize > p->cfg.limit)
        return -1;
    if (vsize >> v->gshift > GA_VMM_MAX_GRANULES) /* its bookkeeping alone would pass 1 GiB */
        return -1;
    if (v->nranges == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        ga_vrange_t *grown = realloc(v->ranges, cap * sizeof *grown);
        if (!grown)
            return -1;
        v->ranges = grown, v->cap = cap;
    }
    ga_vrange_t r = {.size = vsize, .ngran = vsize / v->gran};
    size_t words = (r.ngran + 63) / 64;
    r.refs = calloc(r.ngran, sizeof *r.refs);
    r.inner = calloc(words, sizeof *r.inner);
    r.mapped = calloc(words, sizeof *r.mapped);
    r.stacked = calloc(words, sizeof *r.stacked);
    r.handle = calloc(r.ngran, sizeof *r.handle);
    r.owner = calloc(r.ngran, sizeof *r.owner);
    if (!r.refs || !r.inner || !r.mapped || !r.stacked || !r.handle || !r.owner ||
        p->be.va_reserve(p->be.ctx, vsize, &r.base) != 0) {
        range_free_host(&r);
        return -1;
    }
    v->ranges[v->nranges++] = r;
    first_range_changed(v);
    p->own.backend_reserves++;
    p->own.va_reserved += vsize;
    *base = r.base;
    return 0;
}

static void unmap_granule(ga_pool_t *p, ga_vrange_t *r, size_t g)
{
    ga_vmm_t *v = p->vmm;
    p->be.unmap(p->be.ctx, r->base + g * v->gran, v->gran, r->handle[g]);
    r->handle[g] = 0;
    r->mapped[g >> 6] &= ~(1ull << (g & 63));
    p->own.reserved -= v->gran;
    p->own.backend_unmaps++;
}

/* The arena gives a range back (empty, or the pool is being destroyed): unmap what is still
 * mapped there (kept granules; everything on destroy), then the address space. */
static void va_adapt_release(void *ctx, uintptr_t base, size_t size)
{
    ga_pool_t *p = ctx;
    ga_vmm_t *v = p->vmm;
    (void)size;
    ga_vrange_t *r = range_of(v, base);
    if (!r)
        return;
    for (size_t w = 0; w < (r->ngran + 63) / 64; w++) { /* the mapped ones only: a word a step */
        for (uint64_t m = r->mapped[w]; m; m &= m - 1) {
            size_t g = w * 64 + (size_t)__builtin_ctzll(m);
            if (!in_use(r, g))
                p->own.kept -= v->gran;
            unmap_granule(p, r, g);
        }
    }
    p->be.va_release(p->be.ctx, r->base, r->size);
    p->own.backend_releases++;
    p->own.va_reserved -= r->size;
    range_free_host(r);
    size_t i = (size_t)(r - v->ranges);
    memmove(r, r + 1, (v->nranges - i - 1) * sizeof *r);
    v->nranges--;
    first_range_changed(v);
}

/* The kept cache ------------------------------------------------------------------------------- */

/* Room on the stack for n more runs: 0, or -1 out of host memory. */
static int stack_reserve(ga_vmm_t *v, size_t n)
{
    if (v->nstack + n <= v->capstack)
        return 0;
    size_t cap = v->capstack ? v->capstack : 64;
    while (cap < v->nstack + n)
        cap *= 2;
    ga_kslot_t *grown = realloc(v->stack, cap * sizeof *grown);
    if (!grown)
        return -1;
    v->stack = grown, v->capstack = cap;
    return 0;
}

/* Granules lo..hi of r become kept: those not on the stack yet go on it, as runs, in ascending
 * order (the caller reserved (hi - lo) / 2 + 1 runs: at most that many runs of unstacked
 * granules alternate with stacked ones). */
static void push_kept(ga_vmm_t *v, ga_vrange_t *r, size_t lo, size_t hi)
{
    if (bits_all(r->stacked, lo, hi))
        return; /* a block freed again whose granules were kept before: nothing to push */
    for (size_t g = bits_next(r->stacked, lo, hi, 0); g <= hi;) {
        size_t end = g < hi ? bits_next(r->stacked, g + 1, hi, 1) : hi + 1;
        v->stack[v->nstack++] = (ga_kslot_t){r->base, g, end - g};
        bits_put(r->stacked, g, end - 1, 1);
        g = end < hi ? bits_next(r->stacked, end + 1, hi, 0) : hi + 1;
    }
}

/* Gives back the most recently kept granule still kept; 0 when none was. */
static int release_one_kept(ga_pool_t *p)
{
    ga_vmm_t *v = p->vmm;
    while (p->own.kept && v->nstack) {
        ga_kslot_t *k = &v->stack[v->nstack - 1];
        ga_vrange_t *r = range_of(v, k->base);
        size_t g = k->g + --k->n;
        if (!k->n)
            v->nstack--;
        if (!r || r->base != k->base || g >= r->ngran)
            continue; /* its range was released since */
        r->stacked[g >> 6] &= ~(1ull << (g & 63));
        if (in_use(r, g) || !r->handle[g])
            continue; /* reused since it was kept */
        p->own.kept -= v->gran;
        unmap_granule(p, r, g);
        return 1;
    }
    return 0;
}

static size_t release_all_kept(ga_pool_t *p)
{
    size_t n = 0;
    while (release_one_kept(p))
        n++;
    return n * p->vmm->gran;
}

/* Granules ------------------------------------------------------------------------------------- */

static int map_granule(ga_pool_t *p, ga_vrange_t *r, size_t g)
{
    ga_vmm_t *v = p->vmm;
    ga_stats_t *s = &p->own;
    release_one_kept(p); /* the cache never raises the peak of mapped memory */
    if (p->cfg.limit && s->reserved + v->gran > p->cfg.limit)
        return -1;
    uint64_t h = 0;
    int rc = p->be.map(p->be.ctx, r->base + g * v->gran, v->gran, &h);
    if ((rc != 0 || !h) && release_all_kept(p))
        rc = p->be.map(p->be.ctx, r->base + g * v->gran, v->gran, &h);
    if (rc != 0 || !h)
        return -1;
    r->handle[g] = h;
    r->mapped[g >> 6] |= 1ull << (g & 63);
    s->reserved += v->gran;
    s->backend_maps++;
    if (s->reserved > s->peak_reserved)
        s->peak_reserved = s->reserved;
    return 0;
}

/* Granule g of a block spanning g0..g1 gets the block as a user: 1 if it had one already.
 * `whole`: a block of the aligned area, the only user of each of its granules. */
static int use_one(ga_vrange_t *r, size_t g, size_t g0, size_t g1, int whole)
{
    if (!whole && (g == g0 || g == g1))
        return r->refs[g]++ != 0;
    r->inner[g >> 6] |= 1ull << (g & 63); /* an inner granule: the block's alone */
    return 0;
}

/* The reverse: 1 if granule g has no user left. */
static int unuse_one(ga_vrange_t *r, size_t g, size_t g0, size_t g1, int whole)
{
    if (!whole && (g == g0 || g == g1))
        return --r->refs[g] == 0;
    r->inner[g >> 6] &= ~(1ull << (g & 63));
    return 1;
}

/* Freed granules f0..f1 of which the first `kept` stay kept: those not on the stack yet are pushed
 * (if host memory allows; else they are given back too), the rest unmapped. Out of line: a block
 * freed again whose granules are still kept and stacked, the common case, needs none of it. */
static OUT_OF_LINE size_t keep_or_unmap(ga_pool_t *p, ga_vrange_t *r, size_t f0, size_t f1,
                                        size_t kept)
{
    ga_vmm_t *v = p->vmm;
    if (kept && stack_reserve(v, (kept - 1) / 2 + 1) != 0)
        kept = 0; /* out of host memory: given back instead */
    if (kept)
        push_kept(v, r, f0, f0 + kept - 1);
    for (size_t g = f0 + kept; g <= f1; g++)
        unmap_granule(p, r, g);
    return kept;
}

/* Granules f0..f1 are left with no user: kept while the cache has room, the rest unmapped. */
static inline __attribute__((always_inline)) void keep_freed(ga_pool_t *p, ga_vrange_t *r,
                                                             size_t f0, size_t f1)
{
    ga_stats_t *s = &p->own;
    unsigned sh = p->vmm->gshift;
    size_t n = f1 - f0 + 1;
    size_t room = p->cfg.keep > s->kept ? (size_t)((p->cfg.keep - s->kept) >> sh) : 0;
    size_t kept = n < room ? n : room;
    if (kept < n || !bits_all(r->stacked, f0, f1))
        kept = keep_or_unmap(p, r, f0, f1, kept);
    if (kept) {
        s->kept += (uint64_t)kept << sh;
        if (s->kept > s->peak_kept)
            s->peak_kept = s->kept;
    }
}

static OUT_OF_LINE void keep_freed_slow(ga_pool_t *p, ga_vrange_t *r, size_t f0, size_t f1)
{
    keep_freed(p, r, f0, f1);
}

/* One live block fewer on granules g0..g1 (its first and last); the granules left with no user
 * (always one run) are kept while the cache has room, the rest unmapped. */
static inline __attribute__((always_inline)) void uncover_body(ga_pool_t *p, ga_vrange_t *r,
                                                               size_t g0, size_t g1, int whole)
{
    size_t f0 = g0, f1 = g1; /* the granules freed */
    if (whole) {
        bits_put(r->inner, g0, g1, 0); /* the aligned area's block: all its granules are free */
    } else if (g0 == g1) {
        if (--r->refs[g0])
            return;
    } else {
        f0 += --r->refs[g0] != 0;
        f1 -= --r->refs[g1] != 0;
        if (g1 > g0 + 1)
            bits_put(r->inner, g0 + 1, g1 - 1, 0);
        if (f0 > f1)
            return;
    }
    keep_freed(p, r, f0, f1);
}

/* uncover_body for the paths that do not inline it (the general area's frees of blocks whose
 * granule is left with no user, and the rarer frees). */
static OUT_OF_LINE void uncover_granules(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1)
{
    uncover_body(p, r, g0, g1, 0);
}

static OUT_OF_LINE void uncover_whole_slow(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1)
{
    uncover_body(p, r, g0, g1, 1);
}

/* A block of the aligned area leaves granules g0..g1 (len bytes): in the common case (one bitmap
 * word, room in the cache, the granules still on the kept stack from an earlier free) three word
 * operations and the kept bytes; else as uncover_body. */
static inline __attribute__((always_inline)) void uncover_whole(ga_pool_t *p, ga_vrange_t *r,
                                                                size_t g0, size_t g1, size_t len)
{
    ga_stats_t *s = &p->own;
    if (one_word(g0, g1)) {
        uint64_t m = span_mask(g0, g1);
        size_t w = g0 >> 6;
        r->inner[w] &= ~m;
        if (s->kept + len <= p->cfg.keep && (r->stacked[w] & m) == m) {
            s->kept += len;
            if (s->kept > s->peak_kept)
                s->peak_kept = s->kept;
        } else {
            keep_freed_slow(p, r, g0, g1);
        }
        return;
    }
    uncover_whole_slow(p, r, g0, g1);
}

/* Whether mapping `need` new granules while reusing `reuse` kept ones takes mapped bytes past
 * the limit: new granules are mapped after giving back as many kept granules (other than the
 * ones reused here) as there are. Checked first so that a refusal maps nothing at all. */
static int over_limit(const ga_pool_t *p, uint64_t need, uint64_t reuse)
{
    uint64_t other_kept = (p->own.kept >> p->vmm->gshift) - reuse;
    uint64_t grows = need > other_kept ? need - other_kept : 0;
    return p->own.reserved + grows * p->vmm->gran > p->cfg.limit;
}

/* cover_granules when some of the `fresh` granules u0..u1 the block is the first user of are not
 * mapped: granule by granule, mapping what is not; on failure nothing is left mapped or counted
 * for the block. */
static OUT_OF_LINE int cover_mapping(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1,
                                     size_t u0, size_t u1, size_t fresh, int whole)
{
    ga_vmm_t *v = p->vmm;
    size_t need = fresh - bits_count(r->mapped, u0, u1);
    if (p->cfg.limit && over_limit(p, need, fresh - need))
        return -1;
    size_t reused = 0; /* kept granules taken back, settled before a map reads the kept bytes */
    for (size_t g = g0; g <= g1; g++) {
        if (use_one(r, g, g0, g1, whole))
            continue;
        if (r->handle[g]) { /* a kept granule: reused at no cost */
            reused++;
            continue;
        }
        p->own.kept -= (uint64_t)reused << v->gshift;
        reused = 0;
        if (map_granule(p, r, g) != 0) {
            unuse_one(r, g, g0, g1, whole);
            for (size_t h = g0; h < g; h++)
                if (unuse_one(r, h, g0, g1, whole))
                    unmap_granule(p, r, h);
            return -1;
        }
    }
    p->own.kept -= (uint64_t)reused << v->gshift;
    return 0;
}

/* A block on granules g0..g1 of r, all mapped, `kept` bytes of them (kept granules) without a
 * user before: its counts, its inner granules' bits, the kept bytes it takes. */
static inline __attribute__((always_inline)) void take_mapped(ga_pool_t *p, ga_vrange_t *r,
                                                              size_t g0, size_t g1, uint64_t kept)
{
    r->refs[g0]++;
    if (g1 != g0)
        r->refs[g1]++;
    if (g1 > g0 + 1)
        bits_put(r->inner, g0 + 1, g1 - 1, 1);
    p->own.kept -= kept;
}

/* One live block more on granules g0..g1 of r (its first and last). The granules it is the first
 * user of are one run, u0..u1; when all of them are mapped (free, kept ones) the block takes them
 * in a few word operations, nothing to map and the limit not concerned. */
static OUT_OF_LINE int cover_granules(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1)
{
    size_t u0 = g0 + (r->refs[g0] != 0), u1 = g1 - (g1 != g0 && r->refs[g1] != 0);
    size_t fresh = u0 <= u1 ? u1 - u0 + 1 : 0;
    if (fresh && !bits_all(r->mapped, u0, u1))
        return cover_mapping(p, r, g0, g1, u0, u1, fresh, 0);
    take_mapped(p, r, g0, g1, (uint64_t)fresh << p->vmm->gshift);
    return 0;
}

/* One block of the aligned area more on the granules of [a, a + len) (granule boundaries), of
 * which it is the only user: taken at once when all are mapped (kept), else mapped granule by
 * granule. */
static OUT_OF_LINE int cover_whole(ga_pool_t *p, uintptr_t a, size_t len)
{
    ga_vmm_t *v = p->vmm;
    ga_vrange_t *r = range_of(v, a);
    if (!r)
        return -1;
    size_t off = a - r->base, g0 = off >> v->gshift, g1 = (off + len - 1) >> v->gshift;
    if (!bits_all(r->mapped, g0, g1))
        return cover_mapping(p, r, g0, g1, g0, g1, g1 - g0 + 1, 1);
    bits_put(r->inner, g0, g1, 1);
    p->own.kept -= (uint64_t)(g1 - g0 + 1) << v->gshift;
    return 0;
}

/* One live block more on the granules of [a, a + len). Most blocks lie inside one granule that
 * a live block already uses: one count more, nothing to map, the limit not concerned. */
static inline __attribute__((always_inline)) int cover(ga_pool_t *p, uintptr_t a, size_t len)
{
    ga_vmm_t *v = p->vmm;
    ga_vrange_t *r = range_of(v, a);
    if (!r)
        return -1;
    size_t off = a - r->base, g0 = off >> v->gshift, g1 = (off + len - 1) >> v->gshift;
    if (g0 == g1 && r->refs[g0]) {
        r->refs[g0]++;
        return 0;
    }
    return cover_granules(p, r, g0, g1);
}

/* One live block fewer on the granules of the block of len bytes at offset off in r. In the
 * common case, inside one granule that another block still uses, there is nothing to give back. */
static inline __attribute__((always_inline)) void uncover(ga_pool_t *p, ga_vrange_t *r, size_t off,
                                                          size_t len)
{
    unsigned sh = p->vmm->gshift;
    size_t g0 = off >> sh, g1 = (off + len - 1) >> sh;
    if (g0 == g1 && r->refs[g0] > 1)
        r->refs[g0]--;
    else
        uncover_granules(p, r, g0, g1);
}

/* Placement areas ----------------------------------------------------------------------------- */

static size_t gran_up(const ga_vmm_t *v, size_t size)
{
    size_t up = (size + v->gran - 1) & ~(v->gran - 1);
    return up < size ? 0 : up;
}

static void set_owner(ga_vmm_t *v, uintptr_t base, size_t size, uint16_t owner)
{
    ga_vrange_t *r = range_of(v, base);
    for (size_t g = (base - r->base) >> v->gshift, n = size >> v->gshift; n--; g++)
        r->owner[g] = owner;
}

static void mark_dirty(ga_vmm_t *v, ga_varea_t *ar)
{
    if (!ar->dirty) {
        ar->dirty = 1;
        v->dirty[v->ndirty++] = ar->id;
    }
}

/* The general area changes with nearly every allocation and free: it stays on the dirty list, so
 * that the fast paths mark nothing. */
static void always_dirty(ga_vmm_t *v)
{
    v->area[AREA_GENERAL].dirty = 0;
    mark_dirty(v, &v->area[AREA_GENERAL]);
}

/* Gives the empty regions of every area but `except` back to the parent. */
static void trim_areas(ga_vmm_t *v, size_t except)
{
    for (size_t i = 0; i < v->nareas; i++) {
        if (v->area[i].arena && i != except) {
            ga_trim(v->area[i].arena);
            mark_dirty(v, &v->area[i]);
        }
    }
}

/* An area's backend: its regions are granule-aligned blocks of the parent arena's address space,
 * rounded up to whole granules so that no two areas ever share one. */
static int area_reserve(void *ctx, size_t size, uintptr_t *base)
{
    ga_varea_t *ar = ctx;
    ga_pool_t *p = ar->pool;
    ga_vmm_t *v = p->vmm;
    size_t whole = gran_up(v, size);
    uintptr_t b = 0;
    if (!whole)
        return -1;
    ga_stats_t ps;
    ga_get_stats(p->arena, &ps);
    if (ps.largest_free < whole) /* empty regions of the other areas first, then a new range */
        trim_areas(v, ar->id);
    if (ga_alloc(p->arena, whole, &b) != GA_OK)
        return -1;
    ga_vrange_t *r = range_of(v, b);
    if (!r || (b - r->base) % v->gran || whole > r->size - (b - r->base)) {
        ga_free(p->arena, b); /* the parent broke granule alignment: refuse rather than share */
        return -1;
    }
    set_owner(v, b, whole, (uint16_t)(ar->id + 1));
    v->parent_dirty = 1;
    *base = b;
    return 0;
}

static void area_release(void *ctx, uintptr_t base, size_t size)
{
    ga_varea_t *ar = ctx;
    ga_pool_t *p = ar->pool;
    set_owner(p->vmm, base, gran_up(p->vmm, size), 0);
    ga_free(p->arena, base);
    p->vmm->parent_dirty = 1;
}

/* Makes area ar's arena, at its first use. */
static OUT_OF_LINE void area_make(ga_vmm_t *v, ga_varea_t *ar)
{
    /* First regions of 32 granules (a class: 16 blocks), doubling as the area grows, up to a
     * range's size: the shim trims on every out-of-memory, and an area that gave its regions back
     * and grew again, doubling each time, asked for ever larger address space (under an 8 MiB
     * cap, 64 TiB after 800 allocations). A class region much smaller than that cuts its tiling
     * short (capped at 1/16 of a range twice the live peak, the bf16 forward pass mapped 2%
     * more). */
    size_t min = ar->size ? gran_up(v, 16 * ar->size) : 32 * v->gran;
    if (min > v->region)
        min = v->region;
    ga_backend_t be = {area_reserve, area_release, ar};
    ga_config_t ac = {.initial = 0, .grow = 1, .limit = 0, .min_region = min,
                      .max_region = v->region};
    ar->arena = ga_arena_create(&be, &ac, NULL);
    if (!ar->arena)
        return;
    v->live_of[ar->id + 1] = &ar->arena->live;
    if (ar->id == AREA_GENERAL)
        v->small_cut = v->small_lim;
}

/* Area `id`, its arena made at first use; NULL when host memory ran out. */
static inline ga_varea_t *area_ready(ga_vmm_t *v, uint16_t id)
{
    ga_varea_t *ar = &v->area[id];
    if (!ar->arena)
        area_make(v, ar);
    return ar->arena ? ar : NULL;
}

static int class_size(const ga_vmm_t *v, size_t rounded)
{
    return rounded >= v->half && (rounded & (v->gran - 1)) && rounded / 3 < v->gran;
}

/* The tracking entry of a size that may get a class; with `add`, made at first sight while
 * fewer than TRACK_MAX are tracked; -1 when there is none. */
static int track_find(ga_vmm_t *v, size_t size, int add)
{
    size_t h = (size_t)(((uint64_t)(size / GA_ALIGN) * 0x9E3779B97F4A7C15ull) >> (64 - TRACK_BITS));
    for (; v->track[h].size; h = (h + 1) & (TRACK_SLOTS - 1))
        if (v->track[h].size == size)
            return (int)h;
    if (!add || v->ntrack == TRACK_MAX)
        return -1;
    v->track[h].size = size;
    v->ntrack++;
    return (int)h;
}

/* A block of a size that may be tracked (class_size) is freed. */
static OUT_OF_LINE void untrack(ga_vmm_t *v, size_t size)
{
    int slot = track_find(v, size, 0);
    if (slot >= 0)
        v->track[slot].nlive--;
}

/* The area an allocation of `rounded` bytes goes to, its arena made if need be; NULL when host
 * memory ran out. *slot: the size's tracking entry (-1: none), whose live count the caller keeps.
 * A size gets a class when a second block of it is asked for while one is live (while fewer than
 * GA_VMM_CLASSES have one): sizes that never coexist, such as a layer's activations in a
 * training step, stay in the general area, where their freed granules serve other sizes. */
static ga_varea_t *area_for(ga_pool_t *p, size_t rounded, int *slot)
{
    ga_vmm_t *v = p->vmm;
    uint16_t id = AREA_GENERAL;
    *slot = -1;
    if ((rounded & (v->gran - 1)) == 0) {
        id = AREA_ALIGNED;
    } else if (class_size(v, rounded) && (*slot = track_find(v, rounded, 1)) >= 0) {
        if (!v->track[*slot].area && v->track[*slot].nlive && v->nareas < AREAS_MAX) {
            uint16_t c = (uint16_t)v->nareas++;
            v->area[c] = (ga_varea_t){.pool = v->pool, .size = rounded, .id = c,
                                      .slot = (uint16_t)*slot};
            v->track[*slot].area = c;
        }
        if (v->track[*slot].area)
            id = v->track[*slot].area;
    }
    return area_ready(v, id);
}

/* The area whose region holds ptr, and the range; NULL area when ptr is in none. */
static ga_varea_t *area_of(const ga_vmm_t *v, uintptr_t ptr, ga_vrange_t **range)
{
    ga_vrange_t *r = range_of(v, ptr);
    if (range)
        *range = r;
    uint16_t o = r ? r->owner[(ptr - r->base) >> v->gshift] : 0;
    return o ? (ga_varea_t *)&v->area[(size_t)o - 1] : NULL;
}

/* The pool ------------------------------------------------------------------------------------ */

ga_status_t ga_vmm_create(ga_pool_t *p)
{
    ga_vmm_t *v = calloc(1, sizeof *v);
    if (!v)
        return GA_ENOMEM;
    v->pool = p;
    v->gran = p->be.granularity;
    if (v->gran < GA_ALIGN || (v->gran & (v->gran - 1))) {
        free(v);
        return GA_EINVAL; /* drivers give powers of two; the shim and the replay check too */
    }
    v->gshift = (unsigned)__builtin_ctzll((unsigned long long)v->gran);
    v->half = v->gran / 2;
    v->small_lim = v->half > GA_ALIGN ? v->half - GA_ALIGN : 0; /* half: a multiple of GA_ALIGN */
    v->nareas = AREA_FIRST_CLASS;
    static const ga_livetab_t none; /* no entries: every probe answers NULL at once */
    for (size_t i = 0; i <= AREAS_MAX; i++)
        v->live_of[i] = &none;
    for (uint16_t i = 0; i < AREA_FIRST_CLASS; i++)
        v->area[i] = (ga_varea_t){.pool = p, .id = i};
    always_dirty(v);
    v->parent_dirty = 1;
    p->vmm = v;
    size_t va = gran_up(v, p->cfg.va_size);
    if (!va) {
        free(v);
        p->vmm = NULL;
        return GA_EINVAL;
    }
    if (va >> v->gshift > GA_VMM_MAX_GRANULES) /* the host memory of one range, bounded */
        va = GA_VMM_MAX_GRANULES << v->gshift;
    ga_backend_t be = {va_adapt_reserve, va_adapt_release, p};
    ga_status_t st = GA_OK;
    for (;;) {
        v->region = va;
        ga_config_t ac = {.initial = va, .grow = 1, .limit = 0, .min_region = va, .max_region = va};
        p->arena = ga_arena_create(&be, &ac, &st);
        /* Address space refused (a driver with less of it than twice the cap: the simulated
         * one with 64 TiB of memory): a smaller first range, down to 64 granules; the pool adds
         * ranges as it fills. */
        if (p->arena || st != GA_ENOMEM || va >> v->gshift <= 64) /* no shift of 64 by gshift:
                                                                   * it wraps for granules of 2^58 */
            break;
        va = gran_up(v, va / 2);
    }
    if (!p->arena) {
        free(v->ranges);
        free(v);
        p->vmm = NULL;
        return st;
    }
    return GA_OK;
}

void ga_vmm_destroy(ga_pool_t *p)
{
    ga_vmm_t *v = p->vmm;
    for (size_t i = 0; i < v->nareas; i++)
        ga_arena_destroy(v->area[i].arena); /* their regions go back to the parent */
    ga_arena_destroy(p->arena); /* releases every range, unmapping what is mapped there */
    free(v->ranges);
    free(v->stack);
    free(v);
}

/* Granules of [a, a + len) with nothing mapped: what a block placed there would map. */
static inline size_t unmapped_in(const ga_vmm_t *v, uintptr_t a, size_t len)
{
    const ga_vrange_t *r = range_of(v, a);
    size_t g0 = (a - r->base) >> v->gshift, g1 = (a + len - 1 - r->base) >> v->gshift;
    if (one_word(g0, g1)) /* a block of up to 64 granules, usually: one count, no loop */
        return popcount64(~r->mapped[g0 >> 6] & span_mask(g0, g1));
    return bits_all(r->mapped, g0, g1) ? 0 : g1 - g0 + 1 - bits_count(r->mapped, g0, g1);
}

/* The rest of placing a block in area *ar once its own arena answered (st, *a). A block of the
 * aligned area or a class that would map new granules there is also tried in the general area,
 * and goes where fewer granules are new (its own area on a tie; the trial is freed, which leaves
 * the general area's free space as it was). alloc_fresh makes the same choice without the
 * trial where it can; this is for the rest (an area that grows first, the general area's own
 * blocks, the general area growing for the trial). */
static OUT_OF_LINE ga_status_t place_tried(ga_pool_t *p, ga_varea_t **ar, size_t size,
                                           size_t rounded, uintptr_t *a, ga_status_t st)
{
    ga_vmm_t *v = p->vmm;
    mark_dirty(v, *ar);
    if ((*ar)->id == AREA_GENERAL)
        return st;
    size_t fresh = st == GA_OK ? unmapped_in(v, *a, rounded) : 0;
    ga_varea_t *gen = fresh ? area_ready(v, AREA_GENERAL) : NULL;
    uintptr_t b = 0;
    if (!gen || ga_alloc(gen->arena, size, &b) != GA_OK)
        return st;
    mark_dirty(v, gen);
    if (unmapped_in(v, b, rounded) < fresh) {
        ga_free((*ar)->arena, *a);
        *ar = gen, *a = b;
    } else {
        ga_free(gen->arena, b);
    }
    return GA_OK;
}

/* The allocation's figures, once it is placed and covered. */
static inline void count_alloc(ga_pool_t *p, size_t rounded)
{
    ga_stats_t *s = &p->own;
    s->allocs++;
    s->in_use += rounded;
    if (s->in_use > s->peak_in_use)
        s->peak_in_use = s->in_use;
}

/* A block placed at `a` in area ar: its granules taken (a refusal gives the block back to the
 * area and is an out-of-memory), its size's live count and the figures kept. */
static inline ga_status_t cover_placed(ga_pool_t *p, ga_varea_t *ar, int slot, uintptr_t a,
                                       size_t rounded, uintptr_t *out)
{
    if ((ar->id == AREA_ALIGNED ? cover_whole(p, a, rounded) : cover(p, a, rounded)) != 0) {
        ga_free(ar->arena, a);
        p->own.failed_allocs++;
        return GA_ENOMEM;
    }
    if (slot >= 0)
        p->vmm->track[slot].nlive++;
    count_alloc(p, rounded);
    *out = a;
    return GA_OK;
}

/* A block the fast path of ga_vmm_alloc placed in the general area that maps or reuses a
 * granule, or lies outside the first range. */
static OUT_OF_LINE ga_status_t alloc_cover(ga_pool_t *p, size_t rounded, uintptr_t a,
                                           uintptr_t *out)
{
    return cover_placed(p, &p->vmm->area[AREA_GENERAL], -1, a, rounded, out);
}

/* A best fit the area's arena found could not be taken (out of host memory): as ga_alloc fails. */
static OUT_OF_LINE ga_status_t take_failed(ga_pool_t *p, ga_varea_t *ar, size_t rounded)
{
    ga_fail_nomem(ar->arena, rounded);
    mark_dirty(p->vmm, ar);
    p->own.failed_allocs++;
    return GA_ENOMEM;
}

/* A block of a class or the aligned area whose best fit there, chunk c (of bin `bin`), maps new
 * granules or lies outside the first range: the choice place_tried makes, from the two areas'
 * best fits found but not yet taken, so that neither the losing area's block nor its free is
 * paid for (an allocation and a free in an arena, about 300 instructions, on every such block).
 * Finding a best fit changes nothing and taking it is what the allocation would do, so the block
 * lands where it did with the trial. Only when the general area has no fit (it would grow, and a
 * region it takes may come from the own area's empty ones) is the own block taken first and the
 * trial made as before. */
static OUT_OF_LINE ga_status_t alloc_fresh(ga_pool_t *p, ga_varea_t *ar, int slot, ga_chunk_t *c,
                                           unsigned bin, size_t size, size_t rounded,
                                           uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    uintptr_t a = c->base;
    size_t fresh = unmapped_in(v, a, rounded);
    ga_varea_t *gen = fresh ? area_ready(v, AREA_GENERAL) : NULL;
    unsigned gbin = 0;
    ga_chunk_t *gc = gen ? ga_find_fit(gen->arena, rounded, &gbin) : NULL;
    mark_dirty(v, ar);
    if (gc && unmapped_in(v, gc->base, rounded) < fresh &&
        ga_take(gen->arena, gc, gbin, rounded, size) == GA_OK) {
        mark_dirty(v, gen);
        return cover_placed(p, gen, slot, gc->base, rounded, out);
    }
    if (ga_take(ar->arena, c, bin, rounded, size) != GA_OK)
        return take_failed(p, ar, rounded);
    if (gen && !gc)
        place_tried(p, &ar, size, rounded, &a, GA_OK); /* GA_OK whatever it chooses */
    return cover_placed(p, ar, slot, a, rounded, out);
}

/* A block for area ar that its arena has no best fit for yet (it grows, or fails), or any block of
 * the general area from alloc_slow: the allocation first, as ga_alloc, and the placement from its
 * answer. Out of line, so that the callers' fast paths take no local's address. */
static OUT_OF_LINE ga_status_t alloc_first(ga_pool_t *p, ga_varea_t *ar, int slot, size_t size,
                                           size_t rounded, uintptr_t *out)
{
    uintptr_t a = 0;
    ga_status_t st = ga_alloc_short(ar->arena, size, &a);
    if (place_tried(p, &ar, size, rounded, &a, st) != GA_OK) {
        p->own.failed_allocs++;
        return GA_ENOMEM;
    }
    return cover_placed(p, ar, slot, a, rounded, out);
}

/* Everything else ga_vmm_alloc does not do itself: sizes from half a granule up (an area to
 * choose), and any size before the general area's first use. */
static OUT_OF_LINE ga_status_t alloc_slow(ga_pool_t *p, size_t size, size_t rounded,
                                          uintptr_t *out)
{
    if (!rounded)
        return GA_EINVAL;
    ga_vmm_t *v = p->vmm;
    int slot = -1;
    ga_varea_t *ar;
    if (rounded == v->hot_size) {
        ar = &v->area[v->hot_area];
        slot = v->hot_slot;
    } else if ((ar = area_for(p, rounded, &slot)) && ar->size) {
        v->hot_size = rounded, v->hot_area = ar->id, v->hot_slot = slot;
    }
    if (!ar) {
        p->own.failed_allocs++;
        return GA_ENOMEM;
    }
    unsigned bin = 0;
    ga_chunk_t *c = ar->size ? ga_find_fit(ar->arena, rounded, &bin) : NULL;
    if (!c) /* the general area, or a class that grows */
        return alloc_first(p, ar, slot, size, rounded, out);
    uintptr_t a = c->base; /* the class's best fit, taken below once the area is settled */
    size_t off = a - v->base0;
    if (off < v->size0) {
        /* A class's block in the first range on granules all mapped: nothing new to map, so no
         * trial in the general area (place_tried would make none) and nothing the limit sees. */
        ga_vrange_t *r = v->ranges;
        size_t g0 = off >> v->gshift, g1 = (off + rounded - 1) >> v->gshift;
        int shared = g0 == g1 && r->refs[g0]; /* inside a granule a live block uses: mapped */
        if (shared || bits_all(r->mapped, g0, g1)) {
            if (ga_take(ar->arena, c, bin, rounded, size) != GA_OK)
                return take_failed(p, ar, rounded);
            mark_dirty(v, ar);
            if (shared) {
                r->refs[g0]++;
            } else {
                size_t u0 = g0 + (r->refs[g0] != 0), u1 = g1 - (g1 != g0 && r->refs[g1] != 0);
                take_mapped(p, r, g0, g1, u0 <= u1 ? (uint64_t)(u1 - u0 + 1) << v->gshift : 0);
            }
            v->track[slot].nlive++;
            count_alloc(p, rounded);
            *out = a;
            return GA_OK;
        }
    }
    return alloc_fresh(p, ar, slot, c, bin, size, rounded, out);
}

/* A granule multiple (the aligned area). Its blocks start and end on granule boundaries and
 * share no granule, so when the one its area's best fit gives lies in the first range on granules
 * all still mapped (kept since a block there was freed: a training step's large buffers), the
 * block takes them in a few word operations: no area choice, no second best fit, nothing mapped.
 * Otherwise the placement goes on as alloc_slow's would from the same first answer. */
static OUT_OF_LINE ga_status_t alloc_aligned(ga_pool_t *p, size_t size, size_t rounded,
                                             uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    ga_varea_t *ar = area_ready(v, AREA_ALIGNED);
    if (!ar) {
        p->own.failed_allocs++;
        return GA_ENOMEM;
    }
    unsigned bin = 0;
    ga_chunk_t *c = ga_find_fit(ar->arena, rounded, &bin);
    if (!c) /* the area grows */
        return alloc_first(p, ar, -1, size, rounded, out);
    uintptr_t a = c->base; /* the area's best fit, taken below once the area is settled */
    size_t off = a - v->base0;
    if (off < v->size0) {
        ga_vrange_t *r = v->ranges;
        size_t g0 = off >> v->gshift, g1 = (off + rounded - 1) >> v->gshift;
        /* no other user there: every granule a kept one; one word's mask computed once */
        uint64_t m = one_word(g0, g1) ? span_mask(g0, g1) : 0;
        if (m ? (r->mapped[g0 >> 6] & m) == m : bits_all(r->mapped, g0, g1)) {
            if (ga_take(ar->arena, c, bin, rounded, size) != GA_OK)
                return take_failed(p, ar, rounded);
            mark_dirty(v, ar);
            if (m)
                r->inner[g0 >> 6] |= m;
            else
                bits_put(r->inner, g0, g1, 1);
            p->own.kept -= rounded;
            count_alloc(p, rounded);
            *out = a;
            return GA_OK;
        }
    }
    return alloc_fresh(p, ar, -1, c, bin, size, rounded, out);
}

/* The common case is kept to what arena mode does plus one granule count: a size under half a
 * granule (neither a multiple nor a class) goes to the general area with nothing looked up, and
 * when it lands in the first range inside one granule another live block uses, nothing is
 * mapped. The general area is always reread for statistics (refresh_seen), so nothing is marked
 * here either. A block that maps or reuses a granule takes alloc_cover. */
static OUT_OF_LINE ga_status_t alloc_small(ga_pool_t *p, size_t size, uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    size_t rounded = ga_pool_round(size);
    uintptr_t a = 0;
    if (ga_alloc_short(v->area[AREA_GENERAL].arena, size, &a) != GA_OK) { /* ga_alloc, inlined */
        p->own.failed_allocs++;
        return GA_ENOMEM;
    }
    size_t off = a - v->base0, g0 = off >> v->gshift;
    if (off < v->size0 && g0 == (off + rounded - 1) >> v->gshift && v->refs0[g0]) {
        v->refs0[g0]++;
        count_alloc(p, rounded);
        *out = a;
        return GA_OK;
    }
    return alloc_cover(p, rounded, a, out);
}

/* Only chooses the path and jumps to it, before any frame is set up: a granule-multiple or class
 * block does not pay for the registers the general fast path saves (measured alone: vmm-large
 * -22 instructions a pair, small blocks -2 with the one-compare size test). The size test is on
 * the unrounded size: 1 <= size <= small_lim is exactly a rounded size under half a granule; it
 * also says the general area exists (small_cut is 0 before). */
ga_status_t ga_vmm_alloc(ga_pool_t *p, size_t size, uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    if (size - 1 < v->small_cut)
        return alloc_small(p, size, out);
    size_t rounded = ga_pool_round(size);
    if (rounded && !(rounded & (v->gran - 1)))
        return alloc_aligned(p, size, rounded, out);
    return alloc_slow(p, size, rounded, out);
}

/* Whether ga_vmm_alloc would serve size with no backend call: said for the fast path's sizes only
 * (under half a granule, the general area), when the general area's best fit lies in the first
 * range on granules all mapped; 0 otherwise (the caller then takes the safe way). */
int ga_vmm_fits(ga_pool_t *p, size_t size)
{
    ga_vmm_t *v = p->vmm;
    size_t rounded = ga_pool_round(size);
    ga_arena_t *gen = v->area[AREA_GENERAL].arena;
    uintptr_t a = 0;
    if (rounded - 1 >= v->half - 1 || !gen || !ga_arena_fits(gen, size, &a) ||
        a - v->base0 >= v->size0 || v->size0 - (a - v->base0) < rounded)
        return 0;
    return unmapped_in(v, a, rounded) == 0;
}

/* The figures of a freed block of len bytes, and its size's tracking; `ar`: its area when known
 * (NULL for the general area's fast path), a class's block counted through the class's own entry
 * (a class holds only blocks of its size), any other block of a size that may be tracked looked
 * up (blocks of a class size placed in the general area, before or after the class was made). */
static inline __attribute__((always_inline)) void count_free(ga_pool_t *p, const ga_varea_t *ar,
                                                             size_t len, size_t *size)
{
    if (ar && ar->size)
        p->vmm->track[ar->slot].nlive--;
    else if (len >= p->vmm->half && class_size(p->vmm, len))
        untrack(p->vmm, len);
    p->own.frees++;
    p->own.in_use -= len;
    if (size)
        *size = len;
}

/* Frees ptr in area ar of range r: an interior pointer or one not live there is refused with
 * nothing changed (a free one is a double free); else its granules and figures follow. With
 * `aligned` (a constant: the aligned area, whose blocks share no granule, so every granule of the
 * block is left with no user) they are given back by uncover_whole, inline in the common case. */
static inline __attribute__((always_inline)) ga_status_t free_in(ga_pool_t *p, ga_varea_t *ar,
                                                                ga_vrange_t *r, uintptr_t ptr,
                                                                size_t *size, int aligned)
{
    size_t len = 0;
    ga_status_t st = ga_free_body(ar->arena, ptr, &len);
    if (st != GA_OK)
        return st == GA_ENOTOWNED ? GA_EDOUBLE : st;
    mark_dirty(p->vmm, ar);
    if (aligned) { /* a granule multiple: never a class size, nothing to untrack */
        unsigned sh = p->vmm->gshift;
        size_t off = ptr - r->base;
        uncover_whole(p, r, off >> sh, (off + len - 1) >> sh, len);
        p->own.frees++;
        p->own.in_use -= len;
        if (size)
            *size = len;
    } else {
        uncover(p, r, ptr - r->base, len);
        count_free(p, ar, len, size);
    }
    return GA_OK;
}

/* ga_vmm_free but for a block of the general or the aligned area in the first range. */
static OUT_OF_LINE ga_status_t free_slow(ga_pool_t *p, uintptr_t ptr, size_t *size)
{
    ga_vrange_t *r = NULL;
    ga_varea_t *ar = area_of(p->vmm, ptr, &r);
    if (!ar)
        return r ? GA_EDOUBLE : GA_ENOTOWNED;
    if (ar->id == AREA_ALIGNED) /* outside the first range */
        return free_in(p, ar, r, ptr, size, 1);
    return free_in(p, ar, r, ptr, size, 0);
}

/* ga_vmm_free of a pointer in the first range on a granule the aligned area holds: no search for
 * the area and the range, and its granules given back inline. */
static OUT_OF_LINE ga_status_t free_aligned(ga_pool_t *p, uintptr_t ptr, size_t *size)
{
    return free_in(p, &p->vmm->area[AREA_ALIGNED], p->vmm->ranges, ptr, size, 1);
}

/* ga_vmm_free of a pointer in the first range on a granule a class holds: no search for the
 * range, and the size's live count found through the class. */
static OUT_OF_LINE ga_status_t free_class(ga_pool_t *p, ga_varea_t *ar, uintptr_t ptr,
                                          size_t *size)
{
    return free_in(p, ar, p->vmm->ranges, ptr, size, 0);
}

/* ga_vmm_free of a pointer in the first range on a granule the general area holds. The common
 * case (a block whose granule another live block still uses) costs an owner load and a count
 * beyond the arena's own free. */
static OUT_OF_LINE ga_status_t free_general(ga_pool_t *p, uintptr_t ptr, size_t *size)
{
    ga_vmm_t *v = p->vmm;
    size_t len = 0;
    if (ga_free_body(v->area[AREA_GENERAL].arena, ptr, &len) != GA_OK)
        return free_slow(p, ptr, size); /* says why */
    size_t off = ptr - v->base0, g0 = off >> v->gshift, g1 = (off + len - 1) >> v->gshift;
    if (g0 == g1 && v->refs0[g0] > 1)
        v->refs0[g0]--;
    else
        uncover_granules(p, v->ranges, g0, g1);
    count_free(p, NULL, len, size);
    return GA_OK;
}

/* As a single arena would answer: an address in the range but in no live allocation is a double
 * free, one outside every range is not ours. The owner of the pointer's granule in the first
 * range (nearly every pointer) picks the path before any frame is set up: each path is a
 * function of its own, entered by a jump. */
ga_status_t ga_vmm_free(ga_pool_t *p, uintptr_t ptr, size_t *size)
{
    ga_vmm_t *v = p->vmm;
    size_t off = ptr - v->base0;
    if (off < v->size0) {
        uint16_t o = v->owner0[off >> v->gshift];
        if (o == 1 + AREA_GENERAL) /* the area lent it: it exists */
            return free_general(p, ptr, size);
        if (o == 1 + AREA_ALIGNED)
            return free_aligned(p, ptr, size);
        if (o > 1 + AREA_ALIGNED) /* a class's granule: the class exists */
            return free_class(p, &v->area[o - 1], ptr, size);
    }
    return free_slow(p, ptr, size); /* also says why a refused free was refused */
}

ga_status_t ga_vmm_lookup(const ga_pool_t *p, uintptr_t ptr, uintptr_t *base, size_t *size)
{
    ga_varea_t *ar = area_of(p->vmm, ptr, NULL);
    return ar ? ga_lookup(ar->arena, ptr, base, size) : GA_ENOTOWNED;
}

/* The first range's owner table answers for nearly every pointer: no search over ranges, and
 * the owner indexes the live table to probe (live_of; 9 instructions fewer a pair than testing
 * the owner and the area's arena on the way, scripts/bench-shim-instr.sh vmm and vmm-large). */
size_t ga_vmm_live_size(const ga_pool_t *p, uintptr_t ptr)
{
    const ga_vmm_t *v = p->vmm;
    size_t off = ptr - v->base0;
    if (off < v->size0) {
        const ga_chunk_t *c = ga_live_find(v->live_of[v->owner0[off >> v->gshift]], ptr);
        return c ? c->size : 0;
    }
    ga_varea_t *ar = area_of(v, ptr, NULL);
    return ar ? ga_live_size(ar->arena, ptr) : 0;
}

size_t ga_vmm_live_bases(const ga_pool_t *p, uintptr_t *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < p->vmm->nareas; i++) {
        size_t got = ga_live_bases(p->vmm->area[i].arena, out ? out + (n < max ? n : max) : NULL,
                                   n < max ? max - n : 0);
        n += got;
    }
    return n;
}

/* Kept granules back to the device, then the areas' empty regions back to the parent (address
 * space only, not counted). */
size_t ga_vmm_trim(ga_pool_t *p)
{
    size_t bytes = release_all_kept(p);
    trim_areas(p->vmm, AREAS_MAX);
    return bytes;
}

/* Rereads the areas changed since the last call into the running sums; the largest free chunk
 * over all areas is recomputed only when the area that held it shrank. */
static void refresh_seen(ga_vmm_t *v)
{
    int rescan = 0;
    for (size_t i = 0; i < v->ndirty; i++) {
        ga_varea_t *ar = &v->area[v->dirty[i]];
        ga_stats_t a;
        if (!ar->arena)
            continue; /* the general area before its first use */
        ga_get_stats(ar->arena, &a);
        v->requested += a.in_use_requested - ar->seen.requested;
        v->live += a.live - ar->seen.live;
        v->total_free += a.total_free - ar->seen.total_free;
        rescan |= a.largest_free < ar->seen.largest_free &&
                  ar->seen.largest_free == v->largest_free;
        if (a.largest_free > v->largest_free)
            v->largest_free = a.largest_free;
        ar->seen.requested = a.in_use_requested;
        ar->seen.live = a.live;
        ar->seen.total_free = a.total_free;
        ar->seen.largest_free = a.largest_free;
        ar->dirty = 0;
    }
    v->ndirty = 0;
    always_dirty(v);
    for (size_t i = 0; rescan && i < v->nareas; i++)
        if (i == 0 || v->area[i].seen.largest_free > v->largest_free)
            v->largest_free = v->area[i].seen.largest_free;
    if (v->parent_dirty) {
        ga_get_stats(v->pool->arena, &v->parent);
        v->parent_dirty = 0;
    }
}

/* The pool's own figures; live and requested bytes from the areas; free address space is the
 * parent's not lent plus what is free inside the areas' regions. */
void ga_vmm_stats(const ga_pool_t *p, ga_stats_t *out)
{
    ga_vmm_t *v = p->vmm; /* the cached figures change; the pool does not */
    refresh_seen(v);
    *out = p->own;
    out->in_use_requested = v->requested;
    out->live = v->live;
    out->total_free = v->parent.total_free + v->total_free;
    out->largest_free = v->parent.largest_free > v->largest_free ? v->parent.largest_free
                                                                 : v->largest_free;
    out->regions = v->parent.regions;
}

/* One line per region of each area in use, general first. */
size_t ga_vmm_occupancy_map(const ga_pool_t *p, char *buf, size_t len, unsigned width)
{
    size_t n = 0;
    if (buf && len)
        buf[0] = '\0';
    for (size_t i = 0; i < p->vmm->nareas; i++) {
        size_t room = buf && n < len ? len - n : 0;
        if (p->vmm->area[i].arena)
            n += ga_occupancy_map(p->vmm->area[i].arena, room ? buf + n : NULL, room, width);
    }
    return n;
}

/* The areas and the granule state agree with the figures: a granule in use is mapped and lent
 * to an area, kept = mapped with no user, every kept granule is findable on the stack, mapped
 * bytes = reserved. */
int ga_vmm_check(const ga_pool_t *p, char *report, size_t len)
{
    int bad = ga_check(p->arena, report, len);
    ga_vmm_t *v = p->vmm; /* refreshes the cached figures, as ga_vmm_stats does */
    refresh_seen(v);
    uint64_t requested = 0, live = 0, total_free = 0, largest = 0;
    for (size_t i = 0; i < v->nareas; i++) {
        if (!v->area[i].arena)
            continue;
        bad += ga_check(v->area[i].arena, bad ? NULL : report, bad ? 0 : len);
        ga_stats_t a;
        ga_get_stats(v->area[i].arena, &a);
        requested += a.in_use_requested, live += a.live, total_free += a.total_free;
        largest = a.largest_free > largest ? a.largest_free : largest;
    }
    if (!bad && (requested != v->requested || live != v->live || total_free != v->total_free ||
                 largest != v->largest_free)) {
        bad++;
        if (report && len)
            snprintf(report, len, "vmm pool: area figures kept %llu requested, %llu live, %llu "
                     "free, %llu largest; the areas say %llu, %llu, %llu, %llu",
                     (unsigned long long)v->requested, (unsigned long long)v->live,
                     (unsigned long long)v->total_free, (unsigned long long)v->largest_free,
                     (unsigned long long)requested, (unsigned long long)live,
                     (unsigned long long)total_free, (unsigned long long)largest);
    }
    uint64_t mapped = 0, kept = 0, orphan = 0, unstacked = 0, unlent = 0, bits = 0;
    for (size_t i = 0; i < v->nranges; i++) {
        const ga_vrange_t *r = &v->ranges[i];
        for (size_t g = 0; g < r->ngran; g++) {
            int used = in_use(r, g);
            mapped += r->handle[g] ? v->gran : 0;
            orphan += used && !r->handle[g];
            unlent += used && (!r->owner[g] || r->owner[g] > v->nareas);
            /* the mapped bit is the handle; an inner granule is no block's end; the aligned
             * area keeps no counts */
            bits += bit_get(r->mapped, g) != (r->handle[g] != 0) ||
                    (bit_get(r->inner, g) && r->refs[g]) ||
                    (r->owner[g] == 1 + AREA_ALIGNED && r->refs[g]);
            if (!used && r->handle[g]) {
                kept += v->gran;
                unstacked += !bit_get(r->stacked, g);
            }
        }
    }
    int mine = (mapped != p->own.reserved) + (kept != p->own.kept) + (orphan != 0) +
               (unstacked != 0) + (unlent != 0) + (bits != 0) + (p->own.kept > p->cfg.keep);
    if (mine && !bad && report && len)
        snprintf(report, len, "vmm pool: mapped %llu vs reserved %llu, kept %llu vs %llu, %llu "
                 "granules in use but unmapped, %llu in use but lent to no area, %llu kept but "
                 "not stacked, %llu with bitmaps that disagree, keep %zu",
                 (unsigned long long)mapped, (unsigned long long)p->own.reserved,
                 (unsigned long long)kept, (unsigned long long)p->own.kept,
                 (unsigned long long)orphan, (unsigned long long)unlent,
                 (unsigned long long)unstacked, (unsigned long long)bits, p->cfg.keep);
    return bad + mine;
}
