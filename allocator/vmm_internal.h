/* gpuarena vmm pool internals: the structures and granule bitmaps shared by pool_vmm.c (placement
 * areas, the pool, free), vmm_alloc.c (placement and allocation), vmm_granules.c (address ranges,
 * mapping, the kept cache), vmm_stats.c (figures, invariant walker, occupancy map) and
 * vmm_park.c (the table of parked sizes' slow paths), with vmm_cover.h and vmm_uncover.h (the
 * common cases of taking and leaving granules, vmm_alloc.c's and pool_vmm.c's) and vmm_held.h
 * (vmm_alloc.c's: the general area's parked blocks kept past an allocation). pool_vmm.c's
 * head comment says how the pool works. Nothing outside these files includes this header.
 */
#ifndef GA_VMM_INTERNAL_H
#define GA_VMM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "arena_hot.h"
#include "pool_internal.h"

/* bits_count and range_of are static but not inline, as when they lived in pool_vmm.c: the
 * compiler then inlines them where it did before (marked inline, a vmm alloc+free pair took 2-3
 * instructions more, scripts/bench-shim-instr.sh vmm vmm-large); `unused` for the files that do
 * not call them. */
#define VMM_HELPER static __attribute__((unused))

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
    uint8_t *parked;   /* of those, the parked ones (at most 3: blocks from half a granule up, or
                        * a small block alone in its granule: park_touch) */
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

/* Parked blocks (pool_vmm.c): freed blocks from half a granule up held, still allocated in their
 * area, for the next allocation of their rounded size; one stack per size, in a table of entries
 * found by linear probing from the size's home (one of PARK_SLOTS), at most PARK_PROBE entries
 * on (park_find). The table has PARK_PROBE entries more than homes, so that a probe never wraps,
 * and the last is never used: every entry in use has a next one.
 * PARK_DEPTH 62, not 16: examples/ex_train frees 49 blocks of 1 MiB a step; with 16 parked the
 * other 33 were freed and placed again (its recorded loop at the pool, nothing mapped: 596 -> 569
 * instructions a pair, arena 439; scripts/bench-patterns-instr.sh build pool -- trace:FILE). 62,
 * not 64: an entry is then 512 bytes, found by a shift, not a multiply (8 a pair).
 * Probed, not one size an entry: with one size an entry (32 of them, chosen by the size's hash),
 * bench-patterns' sizes40 (40 sizes 8 KiB apart, freed as a burst and allocated again) found 28
 * of its 40 entries held by another size: sizes in steps of 8 KiB hash to a cycle of 9 entries
 * (16 x the multiplier's fraction is within 0.4% of 8/9). Each block not parked left the parked
 * ones to be given back by its size's allocation (ga_vmm_unpark_general), and the area's frees
 * then went unparked for ever longer (gwaste: from the fifth round on, none parked; a count over
 * 20 rounds, helper-143). With 128 entries one a size, 19 of 40 still found theirs taken; probed,
 * the 40 sizes take 2.1 entries a search on average, 5 at most. */
#define PARK_BITS 7
#define PARK_SLOTS (1u << PARK_BITS)
#define PARK_PROBE 16
#define PARK_ENTRIES (PARK_SLOTS + PARK_PROBE)
#define PARK_DEPTH 62
/* The general area's parked blocks at most (each is one of gpark's): 64, not 16, so that a burst
 * of 40 sizes parks whole (sizes40). */
#define GPARK_MAX 64
#define PEND_STEP_MAX 64
#define GSTEP_MIN 8
#define GSTEP_MAX 4096
typedef struct ga_vpark {
    size_t size;      /* the blocks' rounded size; any while n == 0 (the entry is free) */
    size_t n;
    ga_chunk_t *c[PARK_DEPTH];
} ga_vpark_t;

typedef struct ga_varea {
    ga_pool_t *pool;
    ga_arena_t *arena; /* made at the area's first allocation */
    size_t size;       /* a class: its size; 0 otherwise */
    uint16_t id;
    uint16_t slot;     /* a class: its size's tracking entry (entries are never removed) */
    uint8_t dirty;     /* changed since `seen` was read */
    uint8_t unmapped_fit; /* a class: its best fit was found to lie on unmapped granules, and
                           * the area has not changed since (mark_dirty clears it) */
    struct {
        uint64_t requested, live, total_free, largest_free, allocs;
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
    uint64_t *mapped0; /* and its mapped bits */
    /* The live blocks of every area, one table (each area's arena enters its chunks here, and a
     * chunk says its area: ga_arena_share_live): a free finds its block and area in one probe,
     * and the live-size query its answer, with no owner looked up on the way. */
    ga_livetab_t ltab;
    size_t gran;       /* a power of two (checked at create) */
    size_t gmask;      /* gran - 1: a granule multiple's test in ga_vmm_alloc is one AND */
    unsigned gshift;   /* log2(gran): granule arithmetic is shifts and masks, not divisions (a
                        * 64-bit division on every allocation and free cost more than the rest) */
    size_t half;       /* gran / 2: below it a size is neither a multiple nor a class */
    size_t small_lim;  /* sizes 1 .. small_lim round up to under half: half - GA_ALIGN, or 0 */
    size_t small_cut;  /* small_lim once the general area's arena is made, 0 before: the fast
                        * path's one test */
    size_t class_end;  /* 3 granules: a size from it up is never a class (class_size) */
    size_t general_cut; /* class_end once the general area's arena is made, SIZE_MAX before:
                         * sizes from it up that are no granule multiple go to the general area
                         * with nothing looked up (ga_vmm_alloc) */
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
    /* The pool's allocations and frees are not counted on its paths: each area's arena counts
     * its own, so the pool's are the areas' allocations less those it took back at once (a
     * losing trial in place_tried, a block whose granules were refused: `undone`), and its frees
     * those less the live blocks (2 instructions a pair fewer, scripts/bench-shim-instr.sh vmm). */
    uint64_t allocs, undone;
    int parent_dirty;  /* the parent lent or took back a region since `parent` was read */
    /* The pending block (pend, below) was alone in its granules (their end counts 1) and they
     * became kept at its free: its counts and inner bits were left as they were (pend_gran_undo
     * sets them as the free would have), so that the allocation that resizes it changes only
     * what its new span changes (vmm_cover.h, cover_resized). No other block's free reads those
     * granules' counts or bits, and every allocation meets the hold first. Here, in the hole
     * after parent_dirty: placed by pend, it moved the parking table to a 512-byte boundary,
     * and each park entry's address took two instructions more (one-4k, one-1m +4 a pair). */
    int pend_gran;
    ga_stats_t parent;
    /* Parked blocks: their count and requested bytes (the areas count them live: ga_vmm_stats
     * takes them off), and the allocations served from them (which no area counts). park_min:
     * half a granule with a keep, SIZE_MAX without: the free path's one test. */
    size_t park_min;
    /* The keep less the granules parked blocks touch (park_touch): the room freed granules have
     * to stay kept, so that kept granules and parked blocks together hold at most the keep. */
    size_t keep_now;
    /* The mapped bytes from which the room left under the pool's limit is at most the keep
     * (tight(); at the keep itself kept granules could fill it all: under an 8 MiB limit with a
     * 4 MiB keep, the 1 MiB + 4 KiB shape of test_outside144.c fit 6 blocks where the keep 0 fits
     * 7): a parked block that would hold a granule more than its size needs is then not taken
     * back where it lies (vmm_alloc.c, alloc_parked), and kept granules count as new where a
     * block's area is chosen (fresh_in). Fixed at creation (the limit and the keep never change),
     * so that a test compares one word with the reserved bytes. A flag kept up at every map and
     * unmap (set_tight, helper-135) cost about 11 instructions a call and kept mapped_now from
     * being inlined: through the shim step-past-keep (62 maps and 62 unmaps a round) 9,744 ->
     * 9,687 a pair with tight(), the take-backs unchanged (scripts/bench-patterns-instr.sh build
     * pool shim). */
    uint64_t tight_at;
    size_t nparked;
    /* The parked blocks of the general area (at most GPARK_MAX, ngparked of them): while there
     * are any, small_cut is 0, so that an allocation under half a granule takes the parked path,
     * which gives them back first. gwaste: set (to gstep) when an allocation gave them back unused, each a
     * general-area free not parked, so that sizes taking turns stop parking what they never
     * take back (two sizes in one slot: 1.6-1.7x arena's through the shim, helper-136 F1). A
     * block's place in gpark is its u.gpark while it is parked there (park_leave: no search). */
    size_t ngparked, gwaste, gstep;
    ga_chunk_t *gpark[GPARK_MAX];
    /* The rounded sizes of the last two allocations under half a granule: a small block alone in
     * its granule is parked when freed only when both were its size (a loop freeing and
     * allocating one size again); of any other size it would be given back at the next
     * allocation (30 instructions a pair more on bench-shim's loop of 12 sizes). */
    size_t small_last, small_prev;
    uint64_t parked_req, park_hits;
    /* A freed general-area block whose arena free is put off (pool_vmm.c, pend_hold, says why):
     * its figures and granules went at its free; its chunk stays live in the area, marked
     * parked, until an allocation gives it the new size in place (where its free and a best fit
     * would place it at its base) or a call that needs the area finishes the free
     * (ga_vmm_pend_finish). small_cut is 0 while there is one, so that every allocation sees
     * it. NULL: none. */
    ga_chunk_t *pend;
    /* A pending free finished, not taken by a resize, makes the next pend_skip frees of the
     * area's fast paths free at once (each finished hold doubles pend_step, up to PEND_STEP_MAX;
     * a resize sets it back to 1): a training step's bursts of frees finished nearly every hold
     * (an extra call, and an allocation's check that failed). */
    size_t pend_skip, pend_step;
    /* park_mark[h]: set by park_find for a block about to park (maybe: it may find no room),
     * cleared only by ga_vmm_park_order's walk (vmm_park.c): every home with an entry in use is
     * marked, a home whose entries all left may stay marked until the walk. The walk reads these
     * 128 bytes and the runs from the marked homes, not the 144 entries of 512 B twice (through
     * the shim alt3 3,056 -> 2,568 instructions a pair, step-past-keep 10,118 -> 9,971; at the
     * pool 1,983 -> 1,495 and 2,089 -> 1,941; stopping once every parked block is found, 2,529
     * and 9,744, 1,465 and 1,899). A byte stored on the home park_find has in a
     * register: 1 instruction a park (one-1m, park20-1.5m, park20-2m, sizes40 +1 a pair at the
     * pool); stored in park() the home was computed again (one-1m 350 -> 356, park20-1.5m 312
     * -> 319, sizes40 361 -> 367); scripts/bench-patterns-instr.sh build pool shim. */
    uint8_t park_mark[PARK_SLOTS];
    ga_vpark_t park[PARK_ENTRIES];
    ga_vpark_t park_full; /* no entry left for a size: n is PARK_DEPTH (park_find) */
    /* tight_at, or 0 while the general area's parked blocks stay past an allocation they did
     * not serve on the one-chunk test (vmm_alloc.c, gen_fit_stands's 2: held()): each taken
     * back must then lie where that allocation would land with them given back (vmm_held.h,
     * held_serves); alloc_parked's one compare of the reserved bytes with it tests both. Back
     * to tight_at with the last of them. gw_*: the last answer of the one-chunk test,
     * remembered while held() (gen_whole_at). */
    uint64_t park_at;
    uintptr_t gw_start;
    size_t gw_n;
    uint64_t gw_allocs, gw_frees;
};

/* The home entry of a rounded size (from half a granule up): the top bits of the size times an
 * odd constant. Not the golden ratio's (2^64 / phi, as the tracking table's hash): times 2^j it
 * loses what makes it spread, and sizes in steps of 512 B x 2^j fell in runs (sizes40's 8 KiB
 * steps: a cycle of 9 entries). This one was the best of 600 random odd constants on sizes in
 * steps of 512 B and 1.5 KiB x 2^j (j = 0..14) and random ones, each set parked and taken back
 * as sizes40 does on this table, and held on two sets it was not chosen on (other steps, random
 * sizes): 1.05-1.15 entries read a search and moved back a take-back, on average, against
 * 1.21-2.63 for the golden ratio's; for sizes40, 1.00 (no two sizes share a home) against 2.65 (the simulation:
 * helper-143's report). Folding the golden ratio's top bits with the next ones spread as well
 * but cost 4 instructions a search (sizes40 at the pool, vmm: 441 -> 395 a pair, one-1m
 * 368 -> 376, scripts/bench-patterns-instr.sh). */
static inline size_t park_home(size_t rounded)
{
    return (size_t)(((uint64_t)rounded * 0x2217BEADDBC496CBull) >> (64 - PARK_BITS));
}

/* vmm_park.c: park_find's probe past the home entry; the entries in use in the order
 * ga_vmm_unpark_all gives them back (into in[], room for PARK_ENTRIES), their count. */
ga_vpark_t *ga_vmm_park_probe(ga_vmm_t *v, ga_vpark_t *home, size_t rounded, int room);
size_t ga_vmm_park_order(ga_vmm_t *v, ga_vpark_t **in);

/* The entry of a rounded size's parked blocks or, when none is parked, the free entry it would
 * take (`room`: for a block to park), or an entry with none (to find a block): the first entry,
 * from its home on, that holds the size or is free (n == 0). No entry in use lies behind a free
 * one on its size's probe path (an entry is freed when its last block leaves: park_vacate), so a
 * home entry that is free, or holds the size (a free one's stale size too: nothing of it can lie
 * beyond), ends the search in two tests, the cost the table had with one size an entry; the
 * rest is out of line. With PARK_PROBE entries after the home in use by other sizes, a block to
 * park finds park_full (PARK_DEPTH blocks: no room), a block to find the table's last entry,
 * never used (none). */
static inline ga_vpark_t *park_find(ga_vmm_t *v, size_t rounded, int room)
{
    size_t h = park_home(rounded);
    if (room) /* a block about to park, maybe: its home marked (park_mark) */
        v->park_mark[h] = 1;
    ga_vpark_t *k = &v->park[h];
    if (__builtin_expect(k->size == rounded || !k->n, 1))
        return k;
    return ga_vmm_park_probe(v, k, rounded, room);
}

/* vmm_park.c: entry k was freed and the next one is in use. */
void ga_vmm_park_shift(ga_vmm_t *v, ga_vpark_t *k);

/* Entry k's last block left (its n is 0): the entry is free again. The next entry free, the
 * common case, is one test; else the entries after it move back as they can
 * (ga_vmm_park_shift). */
static inline void park_vacate(ga_vmm_t *v, ga_vpark_t *k)
{
    if (k[1].n)
        ga_vmm_park_shift(v, k);
}

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

/* The granules strictly between two of one word, lo < hi, from their bits b0 = 1 << (lo & 63)
 * and b1 = 1 << (hi & 63): b1 - 2 b0 is the bits lo + 1 .. hi - 1 (none when hi is lo + 1), one
 * subtraction where span_mask and clearing the ends took eight. */
static inline uint64_t inner_mask(uint64_t b0, uint64_t b1) { return b1 - (b0 << 1); }

/* Granule g's bit in its word, by one bts on the whole index (which takes it mod 64): no shift
 * count moved to cl, nor the index narrowed first, as ga_bit_set's unsigned would. */
static inline uint64_t gran_bit(size_t g)
{
#if defined(__x86_64__)
    uint64_t w = 0;
    __asm__("btsq %1, %0" : "+r"(w) : "r"((uint64_t)g) : "cc");
    return w;
#else
    return 1ull << (g & 63);
#endif
}

/* The same for the n granules from g (n >= 1), as a granule multiple knows them (its count by
 * one shift): whether they lie in one word, and then their mask, n low bits shifted once. */
static inline int run_one_word(size_t g, size_t n) { return (g & 63) + n <= 64; }
static inline uint64_t run_mask(size_t g, size_t n)
{
    /* The n low bits from a table (n <= 64 once run_one_word holds): one load where computing
     * them took four instructions, on every allocation and free of a granule multiple (vmm-large
     * 903 -> 897 a pair, scripts/bench-shim-instr.sh; ~0 >> (64 - n) gave 902). */
    static const uint64_t low[65] = {
#define GA_LOW4(k) ((1ull << (k)) - 1), ((1ull << ((k) + 1)) - 1), ((1ull << ((k) + 2)) - 1), \
                   ((1ull << ((k) + 3)) - 1)
        GA_LOW4(0),  GA_LOW4(4),  GA_LOW4(8),  GA_LOW4(12), GA_LOW4(16), GA_LOW4(20),
        GA_LOW4(24), GA_LOW4(28), GA_LOW4(32), GA_LOW4(36), GA_LOW4(40), GA_LOW4(44),
        GA_LOW4(48), GA_LOW4(52), GA_LOW4(56), ((1ull << 60) - 1), ((1ull << 61) - 1),
        ((1ull << 62) - 1), ((1ull << 63) - 1), ~0ull
#undef GA_LOW4
    };
    return low[n] << (g & 63);
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
VMM_HELPER size_t bits_count(const uint64_t *b, size_t lo, size_t hi)
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

static inline int in_use(const ga_vrange_t *r, size_t g)
{
    return r->refs[g] || bit_get(r->inner, g);
}

/* The range holding addr; NULL when none does. */
VMM_HELPER ga_vrange_t *range_of(const ga_vmm_t *v, uintptr_t addr)
{
    if (addr - v->base0 < v->size0)
        return v->ranges;
    for (size_t i = 1; i < v->nranges; i++)
        if (addr - v->ranges[i].base < v->ranges[i].size)
            return &v->ranges[i];
    return NULL;
}

/* Parking and the granules: a parked block stays a user of its granules. The keep bounds the
 * granules parked blocks touch, each counted once (`parked` counts the parked blocks ending in a
 * granule; a block's inner granules and an aligned block's every granule are its own): kept
 * granules plus these stay within the keep, and the granules only parked blocks use, a subset,
 * with them. Kept up at park and take-back alone, in O(1), whatever live blocks do meanwhile (a
 * count of the granules only parked blocks use would change with every live block's allocation
 * and free on a shared granule). park_span finds a block's range and granules; park_touch counts
 * it at its ends (by +1, returning what parking it adds) or takes it off (by -1, returning what
 * that takes away); free_large reads the ends first, to see whether the keep has room. */
static inline void park_span(const ga_vmm_t *v, uintptr_t base, size_t len, ga_vrange_t **r,
                             size_t *g0, size_t *g1)
{
    /* In the first range the offset is the one its test computed (base0 is ranges[0]'s base):
     * no second subtraction from the range's own base (at the pool, vmm: one-1m 354 -> 349 a
     * pair, over-16 309 -> 304, scripts/bench-patterns-instr.sh). */
    ga_vrange_t *rr = v->ranges;
    size_t off = base - v->base0;
    if (__builtin_expect(off >= v->size0, 0)) {
        rr = range_of(v, base);
        off = base - rr->base;
    }
    *r = rr, *g0 = off >> v->gshift, *g1 = (off + len - 1) >> v->gshift;
}
static inline size_t park_touch(const ga_vmm_t *v, ga_vrange_t *r, size_t g0, size_t g1,
                                size_t area, int by)
{
    if (area == AREA_ALIGNED)
        return (g1 - g0 + 1) << v->gshift;
    unsigned sh = v->gshift; /* read before the byte stores, which may alias it */
    uint8_t was0 = r->parked[g0], none = by > 0 ? 0 : 1; /* the count before it, alone */
    size_t n = g1 - g0 + 1 - (was0 != none);
    r->parked[g0] = (uint8_t)(was0 + by);
    if (g1 != g0) {
        uint8_t was1 = r->parked[g1];
        r->parked[g1] = (uint8_t)(was1 + by);
        n -= was1 != none;
    }
    return n << sh;
}

/* Parked block c of area `area` stops being parked (taken back by an allocation, or given back to
 * its area): its mark and the counts, what it alone held back in the keep's room, and for the
 * general area its place in gpark (the small blocks' fast path back once none is left). */
static inline __attribute__((always_inline)) void park_leave(ga_vmm_t *v, ga_chunk_t *c,
                                                             size_t area)
{
    if (area == AREA_ALIGNED) { /* its granules its own */
        v->keep_now += c->size;
    } else {
        ga_vrange_t *r;
        size_t g0, g1;
        park_span(v, c->base, c->size, &r, &g0, &g1);
        v->keep_now += park_touch(v, r, g0, g1, area, -1);
    }
    c->u.area = area;
    v->nparked--;
    v->parked_req -= c->u.requested;
    if (area == AREA_GENERAL) { /* the last one takes its place */
        ga_chunk_t *last = v->gpark[--v->ngparked];
        v->gpark[c->u.gpark] = last;
        last->u.gpark = c->u.gpark;
        if (!v->ngparked)
            v->small_cut = v->small_lim, v->park_at = v->tight_at;
    }
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

static inline void mark_dirty(ga_vmm_t *v, ga_varea_t *ar)
{
    ar->unmapped_fit = 0;
    if (!ar->dirty) {
        ar->dirty = 1;
        v->dirty[v->ndirty++] = ar->id;
    }
}

/* The general and the aligned area change with nearly every allocation and free: they stay on the
 * dirty list, so that the fast paths mark nothing (rereading an area that did not change gives the
 * same sums). */
static inline void always_dirty(ga_vmm_t *v)
{
    for (uint16_t i = AREA_GENERAL; i <= AREA_ALIGNED; i++) {
        v->area[i].dirty = 0;
        mark_dirty(v, &v->area[i]);
    }
}

/* pool_vmm.c: an area's arena made at its first use; a size's tracking entry (vmm_alloc.c's
 * area choice and pool_vmm.c's free both look sizes up). */
void ga_vmm_area_make(ga_vmm_t *v, ga_varea_t *ar);
int ga_vmm_track_find(ga_vmm_t *v, size_t size, int add);

/* Area `id`, its arena made at first use; NULL when host memory ran out. */
static inline ga_varea_t *area_ready(ga_vmm_t *v, uint16_t id)
{
    ga_varea_t *ar = &v->area[id];
    if (!ar->arena)
        ga_vmm_area_make(v, ar);
    return ar->arena ? ar : NULL;
}

/* pool_vmm.c: the pending free done as ga_vmm_free would have done it (the arena's free; its
 * granules and figures went at the free). Every entry point that reads an area calls pend_done
 * first. */
void ga_vmm_pend_finish(ga_vmm_t *v);

/* The pending free's stores on its granules, put off (pend_gran): the block of len bytes at
 * offset off of the first range leaves its end counts (1, its own) and its inner bits. */
static inline void pend_gran_undo(ga_vmm_t *v, size_t off, size_t len)
{
    size_t g0 = off >> v->gshift, g1 = (off + len - 1) >> v->gshift;
    v->refs0[g0] = 0;
    v->refs0[g1] = 0;
    if (g1 != g0)
        v->ranges->inner[g0 >> 6] &= ~inner_mask(1ull << (g0 & 63), 1ull << (g1 & 63));
    v->pend_gran = 0;
}

static inline void pend_done(ga_vmm_t *v)
{
    if (__builtin_expect(v->pend != NULL, 0))
        ga_vmm_pend_finish(v);
}

/* Whether the general area's parked blocks stay past an allocation they did not serve (see
 * park_at). A limit at or under the keep (tight_at 0) never has them so: the test needs room. */
static inline int held(const ga_vmm_t *v) { return v->park_at != v->tight_at; }

/* Whether the room under the pool's limit is at most the keep (see tight_at). */
static inline int tight(const ga_pool_t *p)
{
    return p->own.reserved >= p->vmm->tight_at;
}

/* From half a granule up to (not including) 3 granules, no granule multiple. Compared with a
 * precomputed end, not by dividing by 3: 17 instructions a call, on every allocation and free of
 * a size from half a granule up (pool level, 7 MiB + 4 KiB blocks). */
static inline int class_size(const ga_vmm_t *v, size_t rounded)
{
    return rounded < v->class_end && rounded >= v->half && (rounded & v->gmask);
}


/* vmm_granules.c: the parent arena's backend (address ranges), the kept cache, and the out-of-line
 * paths of covering and uncovering granules (the common cases, inline: vmm_cover.h and
 * vmm_uncover.h). */
int ga_vmm_va_reserve(void *ctx, size_t size, uintptr_t *base);
int ga_vmm_va_release(void *ctx, uintptr_t base, size_t size); /* always 0 */
size_t ga_vmm_release_all_kept(ga_pool_t *p);
void ga_vmm_keep_freed_slow(ga_pool_t *p, ga_vrange_t *r, size_t f0, size_t f1);
void ga_vmm_uncover_granules(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1);
void ga_vmm_uncover_whole_slow(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1);
int ga_vmm_cover_granules(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1);
int ga_vmm_cover_whole(ga_pool_t *p, uintptr_t a, size_t len);
/* What the two return, besides 0 and -1, when a granule would have to be mapped while blocks are
 * parked: nothing changed; the caller gives its block back, unparks every block
 * (ga_vmm_unpark_all) and places the allocation again, so that mapped memory grows only when no
 * parked block is left (pool_vmm.c). */
#define GA_VMM_UNPARK (-2)
void ga_vmm_unpark_all(ga_pool_t *p);
void ga_vmm_unpark_general(ga_pool_t *p);

#endif
