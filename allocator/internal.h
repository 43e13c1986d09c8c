/* gpuarena allocator internals: the structures shared by arena.c (the alloc/free hot path and the
 * size-ordered bins; the path's bodies in arena_hot.h, also inlined by pool_vmm.c), region.c
 * (regions, growth, trim, address lookup), rbtree.c (the balanced tree both orders use) and
 * check.c (statistics, invariant walker, occupancy map). Nothing outside allocator/ includes this
 * header.
 *
 * Layout in one paragraph: an arena holds regions (address ranges from the backend) in an array
 * sorted by base. Each region is tiled exactly by chunks, linked in address order so a free merges
 * with free neighbours in O(1). Free chunks sit in segregated bins indexed TLSF-style by (first
 * level = log2 size, second level = 64 linear steps), with a two-level bitmap so the next non-empty
 * bin is found with two bit scans; inside a bin they form a red-black tree ordered by (size, base),
 * so the exact best fit (smallest size that fits, lowest address among equal sizes) is one descent,
 * O(log n) however many chunks share a bin. Interior addresses resolve through runs: the chunks of
 * a region are cut into runs of at most GA_RUN_MAX consecutive chunks, and the runs form the
 * region's address-ordered red-black tree, so the chunk holding any address is one descent plus a
 * walk of at most GA_RUN_MAX neighbours (O(log n)), with host memory that grows with the number of
 * chunks, never with the region's byte size. A split adds the remainder to its neighbour's run and
 * a merge takes a chunk out of its run: a counter each; the tree changes only when a run fills up
 * (it splits in two, at most once per GA_RUN_MAX / 2 splits) or empties. Live chunks sit in an
 * open-addressing table keyed by base (the exact-pointer free is the hot path: one probe, usually
 * one cache line). Chunk and run structs come from a slab pool and the tree nodes are inside them,
 * so alloc and free allocate no host memory except when a slab block or the live table is added.
 */
#ifndef GA_INTERNAL_H
#define GA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ga_arena.h"

/* Every host allocation of the allocator goes through these, so a test can make them fail from
 * the n-th call on (ga_host_fail_after = n; -1, the default, never) and prove that running out
 * of host memory is a clean GA_ENOMEM with the arena intact. ga_host_bytes counts every byte
 * asked for (a relaxed atomic, so concurrent arenas in the shim stay race-free): tests read it to
 * prove that host memory follows the number of chunks, not the size of a region. */
extern long ga_host_fail_after;
extern uint64_t ga_host_bytes;
void *ga_host_malloc(size_t size);
void *ga_host_calloc(size_t n, size_t size);
void *ga_host_realloc(void *p, size_t size);
void *ga_host_aligned_alloc(size_t align, size_t size);

/* Red-black tree (rbtree.c) ------------------------------------------------------------------- */

/* An intrusive node: the colour lives in the low bit of the parent pointer (1 = black), so a node
 * is three words. The caller descends and links a new leaf itself (it knows the order), then
 * ga_rb_insert_fixup rebalances; ga_rb_erase unlinks any node. */
typedef struct ga_rbnode {
    struct ga_rbnode *left, *right;
    uintptr_t parent_color;
} ga_rbnode_t;

static inline ga_rbnode_t *ga_rb_parent(const ga_rbnode_t *n)
{
    return (ga_rbnode_t *)(n->parent_color & ~(uintptr_t)1);
}
static inline int ga_rb_is_black(const ga_rbnode_t *n) { return !n || (n->parent_color & 1); }

/* Makes n a red leaf hanging from parent at *link (parent NULL: n is the new root). */
static inline void ga_rb_link(ga_rbnode_t *n, ga_rbnode_t *parent, ga_rbnode_t **link)
{
    n->left = n->right = NULL;
    n->parent_color = (uintptr_t)parent;
    *link = n;
}
void ga_rb_insert_fixup(ga_rbnode_t **root, ga_rbnode_t *n);
void ga_rb_erase(ga_rbnode_t **root, ga_rbnode_t *n);
ga_rbnode_t *ga_rb_first(ga_rbnode_t *root);
ga_rbnode_t *ga_rb_last(ga_rbnode_t *root);
ga_rbnode_t *ga_rb_next(const ga_rbnode_t *n);

/* Chunks, regions, arena ---------------------------------------------------------------------- */

/* Second-level subdivisions per power of two. 64 makes every size below 64 granules (32 KiB)
 * an exact bin and keeps larger bins within 1/64 of their size. */
#define GA_SL_LOG2 6u
#define GA_SL_COUNT (1u << GA_SL_LOG2)
#define GA_FL_COUNT 64u

struct ga_region;
struct ga_run;

/* 64 bytes, one cache line (the slab aligns them): a chunk's region is its run's, its bin follows
 * from its size, and its free flag is the low bit of the run pointer. */
typedef struct ga_chunk {
    uintptr_t base;
    size_t size;             /* multiple of GA_ALIGN, > 0 */
    struct ga_chunk *prev_phys, *next_phys; /* address neighbours in the same region */
    uintptr_t run_free;      /* the run holding this chunk, | 1 while the chunk is free */
    union {
        ga_rbnode_t bin_node; /* free: in its bin's tree, ordered by (size, base) */
        struct {
            size_t requested; /* live: bytes asked for */
            size_t area;      /* live, in an arena on a shared live table: its live_area,
                               * | GA_AREA_PARKED while a vmm pool holds the block for reuse */
            uint32_t gpark;   /* parked in a vmm pool's general area: its place in gpark */
            int32_t slot;     /* ... and its size's tracking entry (-1: none) */
        };
    } u;
} ga_chunk_t;

/* A vmm pool's block freed by its user and held, allocated in its area, for the next allocation
 * of its size (pool_vmm.c, "parked"): its u.area carries this bit until it is reused or freed. */
#define GA_AREA_PARKED ((size_t)1 << 63)

static inline struct ga_run *ga_chunk_run(const ga_chunk_t *c)
{
    return (struct ga_run *)(c->run_free & ~(uintptr_t)1);
}
static inline int ga_is_free(const ga_chunk_t *c) { return (int)(c->run_free & 1); }
static inline void ga_set_run(ga_chunk_t *c, struct ga_run *run)
{
    c->run_free = (uintptr_t)run | (c->run_free & 1);
}

/* A run: 1 to GA_RUN_MAX consecutive chunks of one region, a node of the region's run tree
 * ordered by first->base. 32 keeps the walk inside a run short and run splits rare. */
#define GA_RUN_MAX 32u
typedef struct ga_run {
    ga_rbnode_t node;
    ga_chunk_t *first;       /* lowest chunk of the run */
    struct ga_region *region;
    unsigned count;
} ga_run_t;

#define GA_CONTAINER(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))
static inline ga_chunk_t *ga_bin_chunk(const ga_rbnode_t *n)
{
    return GA_CONTAINER(n, ga_chunk_t, u.bin_node);
}
static inline ga_run_t *ga_run_of(const ga_rbnode_t *n)
{
    return GA_CONTAINER(n, ga_run_t, node);
}

typedef struct ga_region {
    uintptr_t base;
    size_t size;
    ga_chunk_t *first;       /* lowest chunk; the region is empty iff first is free and whole */
    ga_rbnode_t *runs;       /* root of the run tree */
    int refused;             /* the backend refused its last release: kept, empty and usable */
} ga_region_t;

/* A tree of free chunks ordered by (size, base) and its leftmost (smallest, lowest) chunk, kept so
 * that an exact-size bin, the next non-empty bin and a chunk that becomes the new lowest cost no
 * descent. */
typedef struct ga_tree {
    ga_rbnode_t *root;
    ga_chunk_t *min;
} ga_tree_t;

/* A bin's third level: GA_SUB_COUNT trees over equal slices of the bin's sizes (one size each
 * when the bin holds at most GA_SUB_COUNT sizes), and which of them are non-empty. A bin whose
 * tree gets deep is cut into these by the insertion or search that found it deep (see
 * ga_bin_subdivide): at 100,000 free holes of mixed sizes a bin held about 110 chunks of as many
 * sizes, each descent level was another chunk struct's cache line (and page), and a pair cost 4
 * times the 100-hole one; after the cut a fit is usually a slice's lowest chunk. The slices'
 * 1 KiB is asked for opportunistically: without it the bin stays whole, only slower, so neither a
 * free nor an allocation ever fails for it. */
#define GA_SUB_LOG2 6u
#define GA_SUB_COUNT (1u << GA_SUB_LOG2)
typedef struct ga_subbins {
    uint64_t map;
    ga_tree_t t[GA_SUB_COUNT];
} ga_subbins_t;

/* A bin: either one tree (or empty), or subdivided and holding chunks, its t.root then the slices' address | 1 (never a node:
 * nodes are word-aligned). In both, t.min is the bin's lowest chunk, NULL iff the bin is empty.
 * The tagged root, being neither NULL nor any chunk's node, sends a subdivided bin off the hot
 * paths by the tests they make anyway (an insertion into an empty whole bin: root NULL; a removal
 * of a tree's last chunk: root is that chunk's node), so those paths read no slices pointer (3
 * instructions an operation, about 7 an event), and a bin is 16 bytes rather than 24: the bin
 * array 64 KiB rather than 96, fewer of its lines touched by a trace. */
typedef struct ga_bin {
    ga_tree_t t;
} ga_bin_t;

/* The bin's slices, or NULL for a whole bin. */
static inline ga_subbins_t *ga_bin_sub(const ga_bin_t *b)
{
    uintptr_t r = (uintptr_t)b->t.root;
    return r & 1 ? (ga_subbins_t *)(r - 1) : NULL;
}

/* The live table: open addressing, linear probing, at most an eighth full, backward-shift deletion
 * (no tombstones). A slot is the chunk pointer alone and the key is the chunk's base: 8 bytes a
 * slot rather than 16 halves the table, and the chunk a probe finds is the one the free reads next
 * anyway (cachegrind, 33 replays of somas_bert_base: 40,000 L1 misses and 1.8 million instructions
 * fewer). An empty slot is NULL, so any address, 0 included, can be a key. How full: half was 4 ns
 * per operation slower on somas_bert_base than a quarter (longer probe runs); an eighth (since
 * 2026-12-07; somas_bert_base's table 64 KiB rather than 32) mispredicts less where a free closes
 * its hole (the next slot is taken less often): callgrind on 33 replays of somas_bert_base, per
 * event, 1.678 -> 1.598 mispredictions for 0.687 -> 0.786 L1 misses, and bench-alloc's
 * somas_bert_base 25.0-27.1 -> 23.9-27.5 ns/op (median 26.6 -> 24.7) in 12 alternated runs on the
 * shared VM; bench-scale's mixed pair at 100,000 holes 47.3-51.7 -> 44.8-50.6 ns (5 alternated).
 * (An eighth full with 16-byte slots, 128 KiB, was tried before: 38,000 mispredictions fewer but
 * 46,000 misses more, and no faster.) */
#define GA_LIVE_SPREAD 8u
typedef struct ga_live_slot {
    ga_chunk_t *chunk;
} ga_live_slot_t;

typedef struct ga_livetab {
    ga_live_slot_t *slots;
    size_t mask;             /* capacity - 1; capacity is a power of two */
    size_t count;
    size_t limit;            /* entries allowed before the table doubles: capacity / SPREAD */
    unsigned shift;          /* 64 - log2(capacity), for Fibonacci hashing */
} ga_livetab_t;

/* Chunk and run structs are carved from blocks in address order as they are first needed, and
 * kept on one free list once given back; an item is one cache line and blocks are aligned to it,
 * so a chunk never straddles two lines. Blocks double from 16 KiB to GA_SLAB_BYTES, and those of
 * that size are aligned to it and offered to the kernel for huge pages: at 100,000 free chunks
 * the structs span 12 MB, and a descent through 4 KiB pages took a TLB miss on most levels. The
 * first item of a block is its header. */
#define GA_CACHE_LINE 64u
#define GA_SLAB_FIRST ((size_t)16 << 10)
#define GA_SLAB_BYTES ((size_t)2 << 20)
typedef union ga_item {
    ga_chunk_t chunk;
    ga_run_t run;
    union ga_item *next_spare;
    struct {
        union ga_item *next; /* the next block */
        size_t bytes;        /* this block's size */
    } block;
} __attribute__((aligned(GA_CACHE_LINE))) ga_item_t;
_Static_assert(sizeof(ga_item_t) == GA_CACHE_LINE, "a chunk or run struct fills one cache line");

struct ga_arena {
    ga_backend_t backend;
    ga_config_t config;      /* normalised: sizes rounded, min_region defaulted */
    ga_stats_t stats;        /* frees, live, total_free and largest_free: filled in by ga_get_stats */
    ga_livetab_t live;
    /* The table the live chunks are entered in: `live`, or one a vmm pool shares among its
     * placement areas (ga_arena_share_live), so that a free or a size query there finds the
     * chunk, and from it the area, in one probe. On a shared table `live` holds no entries, the
     * frees are counted (stats.frees; ga_get_stats derives them otherwise), no peak_in_use is
     * kept (the pool's is its own: 4-5 instructions an allocation) and each live chunk says its
     * area (u.area). Arena mode's hot paths use `live` directly: the pointer costs them
     * nothing. */
    ga_livetab_t *lt;
    size_t live_area;
    uint64_t fl_bitmap;
    uint64_t sl_bitmap[GA_FL_COUNT];
    ga_region_t **regions;   /* sorted by base */
    size_t nregions, cap_regions;
    size_t last_region_size; /* growth doubles from this */
    ga_item_t *spare;        /* free list of chunk and run structs given back */
    ga_item_t *carve, *carve_end; /* the newest block's items never handed out yet */
    ga_item_t *blocks;       /* block headers, newest first */
    size_t next_block_bytes;
    size_t sliced;           /* bins ever subdivided: destroy scans the bins only if any */
    struct ga_subbins *spare_subs; /* slices of bins that emptied, kept for the next subdivision */
    /* Last, and never zeroed: a bin is read only while its bitmap bit says it holds chunks (an
     * insertion into an empty one writes it whole), so ga_arena_create clears what comes before
     * and not these 64 KiB, which a fresh arena then neither writes nor, mostly, touches. */
    ga_bin_t bins[GA_FL_COUNT * GA_SL_COUNT];
};

/* Size <-> bin mapping (sizes in bytes, multiples of GA_ALIGN). */
static inline unsigned ga_msb64(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }
/* For g = size in granules, g >= 64 lands in first level m - 5 (m = msb(g)) at second level
 * (g >> (m - 6)) - 64, so bin = (m - 6) * 64 + (g >> (m - 6)); below 64 the bin is g itself,
 * which is the same formula with the shift clamped to 0 (msb of g | 64 is at least 6). No branch:
 * sizes alternate between small and large on real traces and the branch mispredicted. */
static inline unsigned ga_bin_of(size_t size)
{
    /* The same in bytes, without the division: m = msb(size | 64 granules) = shift + 15, and
     * g >> shift = size >> (m - 6) (a shift of 9 or more, so size's bits under GA_ALIGN drop).
     * On x86-64 m is one bsr: written as 63 - clz, gcc keeps the clz and pays an xor and a
     * subtraction more for each of m's two uses (1.6 bins an event: about 2 instructions). */
    _Static_assert(GA_ALIGN == 512 && GA_SL_COUNT == 64, "15 is log2(GA_SL_COUNT * GA_ALIGN)");
    uint64_t x = (uint64_t)size | (uint64_t)GA_SL_COUNT * GA_ALIGN;
#if defined(__x86_64__)
    uint64_t m;
    __asm__("bsrq %1, %0" : "=r"(m) : "r"(x) : "cc");
#else
    uint64_t m = ga_msb64(x);
#endif
    return (unsigned)((m - 15u) * GA_SL_COUNT + ((uint64_t)size >> (m - GA_SL_LOG2)));
}

/* The bin-tree order: by size, then by base. Computed without a branch (bitwise, not
 * short-circuit): a descent's left-or-right at each level is a coin toss the predictor loses about
 * half the time, and as a data dependency it costs the compare, not a pipeline flush. */
static inline int ga_bin_less(const ga_chunk_t *x, const ga_chunk_t *y)
{
    return (x->size < y->size) | ((x->size == y->size) & (x->base < y->base));
}

/* The slice of its bin that a size falls in: the size's offset in the bin, scaled down to
 * GA_SUB_COUNT slices when the bin spans more sizes than that. Monotonic in the size. */
static inline unsigned ga_sub_of(size_t size)
{
    uint64_t g = size / GA_ALIGN;
    unsigned shift = ga_msb64(g | GA_SL_COUNT) - GA_SL_LOG2; /* the bin spans 2^shift sizes */
    uint64_t offset = g & ((1ull << shift) - 1);
    return (unsigned)(shift > GA_SUB_LOG2 ? offset >> (shift - GA_SUB_LOG2) : offset);
}

/* arena.c */
/* ga_item_new when the free list and the newest block are used up */
ga_item_t *ga_item_new_block(ga_arena_t *a);
void ga_item_put(ga_arena_t *a, ga_item_t *it);
size_t ga_round_size(size_t size); /* 0 when size is 0 or rounding would overflow */
int ga_tree_insert_slow(ga_tree_t *t, ga_chunk_t *c); /* returns the levels descended */
void ga_bin_subdivide(ga_arena_t *a, unsigned bin);

/* A descent this deep (a tree of some 10 to 30 chunks), by an insertion or a search, cuts the
 * bin into slices. 5 rather than 6: at 10,000 mixed holes (about 11 chunks a bin, whole at 6)
 * the pair took about 45 ns against 50 to 59; the real traces still slice no bin. */
#define GA_SUB_DEPTH 5
void ga_sub_insert(ga_arena_t *a, ga_bin_t *b, unsigned bin, ga_chunk_t *c);
void ga_sub_remove(ga_arena_t *a, ga_bin_t *b, unsigned bin, ga_chunk_t *c);

/* Tree insert and remove: the common cases (an empty tree, the last chunk of a tree) are a store;
 * the rest goes through the red-black tree. Each returns whether the tree was, or became, empty. */
/* Makes c the only chunk of empty tree t (the tree's old fields are not read). */
static inline void ga_tree_set_root(ga_tree_t *t, ga_chunk_t *c)
{
    ga_rbnode_t *n = &c->u.bin_node;
    n->left = n->right = NULL;
    n->parent_color = 1; /* a black root */
    t->root = n;
    t->min = c;
}

static inline int ga_tree_insert(ga_tree_t *t, ga_chunk_t *c)
{
    if (t->root) {
        (void)ga_tree_insert_slow(t, c);
        return 0;
    }
    ga_tree_set_root(t, c);
    return 1;
}

void ga_tree_remove_slow(ga_tree_t *t, ga_chunk_t *c); /* the tree keeps at least one chunk */

static inline int ga_tree_remove(ga_tree_t *t, ga_chunk_t *c)
{
    ga_rbnode_t *n = &c->u.bin_node;
    if (t->root != n || n->left || n->right) {
        ga_tree_remove_slow(t, c);
        return 0;
    }
    t->root = NULL;
    t->min = NULL;
    return 1;
}

/* The second level follows bin emptiness exactly. The first level is set with it but cleared
 * lazily: a clear bit says its second-level word is zero, a set one only that it may not be, and
 * ga_next_bin clears a stale bit when it meets one. A bin empties on most allocations of the real
 * traces, and testing its word for zero there cost 7 of the 13 instructions of taking the bit. */
/* w with bit k (mod 64) set, or cleared. On x86-64 one bts or btr, which takes its bit number
 * from any register: a shift's count must be in cl, and a bin mark's two shifts cost gcc four
 * moves to get it there (8 instructions a mark rather than 11, on about half of all events). */
static inline uint64_t ga_bit_set(uint64_t w, unsigned k)
{
#if defined(__x86_64__)
    __asm__("btsq %q1, %0" : "+r"(w) : "r"((uint64_t)k) : "cc");
    return w;
#else
    return w | 1ull << (k % 64);
#endif
}

static inline uint64_t ga_bit_clear(uint64_t w, unsigned k)
{
#if defined(__x86_64__)
    __asm__("btrq %q1, %0" : "+r"(w) : "r"((uint64_t)k) : "cc");
    return w;
#else
    return w & ~(1ull << (k % 64));
#endif
}

/* Whether the bin holds chunks, from the bitmap: the bins' array is 64 KiB and an empty bin's
 * line is often cold (a fresh arena, a size not seen for a while), where the bitmap's 512 bytes
 * are read by every search. Two thirds of the traces' allocations find their own bin empty, and
 * a free's insertion into an empty bin then writes the bin's line without reading it. */
static inline int ga_bin_marked(const ga_arena_t *a, unsigned bin)
{
    return (int)((a->sl_bitmap[bin / GA_SL_COUNT] >> (bin % GA_SL_COUNT)) & 1);
}

static inline void ga_bin_mark(ga_arena_t *a, unsigned bin)
{
    uint64_t *sl = &a->sl_bitmap[bin / GA_SL_COUNT];
    *sl = ga_bit_set(*sl, bin);
    a->fl_bitmap = ga_bit_set(a->fl_bitmap, bin / GA_SL_COUNT);
}

static inline void ga_bin_unmark(ga_arena_t *a, unsigned bin)
{
    uint64_t *sl = &a->sl_bitmap[bin / GA_SL_COUNT];
    *sl = ga_bit_clear(*sl, bin);
}

/* The out-of-line ends of the two below: a bin that holds chunks already, or is subdivided. */
void ga_bin_insert_slow(ga_arena_t *a, ga_bin_t *b, unsigned bin, ga_chunk_t *c);
void ga_bin_remove_slow(ga_arena_t *a, ga_bin_t *b, unsigned bin, ga_chunk_t *c);

/* An empty bin (always whole: a subdivided bin that empties is made whole, ga_sub_remove) takes
 * the chunk as its root; anything else (a tree, slices) goes out of line. */
static inline void ga_bin_insert(ga_arena_t *a, ga_chunk_t *c)
{
    unsigned bin = ga_bin_of(c->size);
    ga_bin_t *b = &a->bins[bin];
    c->run_free |= 1;
    if (!ga_bin_marked(a, bin)) {
        ga_tree_set_root(&b->t, c);
        ga_bin_mark(a, bin);
    } else {
        ga_bin_insert_slow(a, b, bin, c);
    }
}

/* Takes free chunk c out of its bin, whose index the caller may already know. The bin's last
 * chunk (a childless root) empties it here; anything else goes out of line. */
static inline void ga_bin_remove_at(ga_arena_t *a, ga_chunk_t *c, unsigned bin)
{
    ga_bin_t *b = &a->bins[bin];
    ga_rbnode_t *n = &c->u.bin_node;
    c->run_free &= ~(uintptr_t)1;
    if (b->t.root == n && !((uintptr_t)n->left | (uintptr_t)n->right)) {
        b->t.root = NULL;
        b->t.min = NULL;
        ga_bin_unmark(a, bin);
    } else {
        ga_bin_remove_slow(a, b, bin, c);
    }
}

static inline void ga_bin_remove(ga_arena_t *a, ga_chunk_t *c)
{
    ga_bin_remove_at(a, c, ga_bin_of(c->size));
}

/* Free chunk n, the arena's only one (alone in bin nb, the only bin marked, no stale first-level
 * bit), moved to empty bin nb2 by stores: what ga_bin_remove_at and ga_bin_insert leave (but a
 * first-level bit they would leave stale), without their tests and read-modify-writes (two
 * sizes taking turns at an area's end move its tail between bins at about every allocation:
 * alt2-large, alt2-mix; vmm_alloc.c's alloc_pend). */
static inline void ga_bin_move_only(ga_arena_t *a, ga_chunk_t *n, unsigned nb, unsigned nb2)
{
    ga_tree_t *from = &a->bins[nb].t, *to = &a->bins[nb2].t;
    from->root = NULL;
    from->min = NULL;
    n->u.bin_node.parent_color = 1; /* a black root, childless already */
    to->root = &n->u.bin_node;
    to->min = n;
    a->sl_bitmap[nb / GA_SL_COUNT] = 0;
    a->sl_bitmap[nb2 / GA_SL_COUNT] = ga_bit_set(0, nb2); /* bts: nb2 mod 64, no shift count */
    a->fl_bitmap = ga_bit_set(0, nb2 / GA_SL_COUNT);
}

/* Takes an item from the pool: one given back if any, else the newest block's next item, else
 * the first item of a new block; NULL if host memory is exhausted. The caller sets every field it
 * uses (an item from the free list holds stale ones). Inline: a split takes one on most
 * allocations, and the call cost more than the two loads it does. */
static inline ga_item_t *ga_item_new(ga_arena_t *a)
{
    ga_item_t *it = a->spare;
    if (__builtin_expect(it != NULL, 1))
        a->spare = it->next_spare;
    else if (a->carve != a->carve_end)
        it = a->carve++;
    else
        return ga_item_new_block(a);
    return it;
}

/* region.c */
ga_status_t ga_grow(ga_arena_t *a, size_t rounded);
ga_status_t ga_region_add(ga_arena_t *a, size_t size);
size_t ga_release_empty(ga_arena_t *a);
int ga_region_release(ga_arena_t *a, size_t index); /* 0 released, 1 the backend refused */
ga_region_t *ga_region_find(const ga_arena_t *a, uintptr_t p);
/* The chunk of region r whose range holds p (p must lie in r): one descent of the run tree and a
 * walk inside one run. */
ga_chunk_t *ga_chunk_at(const ga_region_t *r, uintptr_t p);
/* Runs: a region's first run, the remainder of a split joining its neighbour's run (with a spare
 * struct, taken beforehand, for when the run must split), and a chunk leaving its run on merge. */
void ga_run_split(ga_run_t *run, ga_run_t *fresh);
void ga_run_leave(ga_arena_t *a, ga_chunk_t *c);
/* The live chunk containing p, or NULL (p free or outside); *in_region says whether p lies in
 * any region. */
ga_chunk_t *ga_live_at(const ga_arena_t *a, uintptr_t p, int *in_region);

/* Live table: growth in arena.c; the probe, insertion and removal inline, because every
 * allocation and free uses one of them (arena.c and the vmm pool, see arena_hot.h). */
int ga_live_grow(ga_livetab_t *t); /* doubles the table: 0, or -1 out of host memory */
/* Puts arena a, which has no live chunk, on table t, its chunks there marked `area`; a's own
 * table is given back. Only the vmm pool's paths (which pass the table) may then allocate and
 * free there: ga_alloc, ga_free and ga_live_size use the arena's own table. Such an arena keeps
 * no peak of its bytes in use (stats.peak_in_use stays 0): the pool counts its own, once. */
void ga_arena_share_live(ga_arena_t *a, ga_livetab_t *t, size_t area);
void ga_live_fini(ga_livetab_t *t);

static inline size_t ga_live_home(const ga_livetab_t *t, uintptr_t key)
{
    /* Fibonacci hashing: the top bits of the product are the best mixed. On the address itself,
     * not its granule number: a base's 9 low bits are 0, so the product is the granule's shifted
     * up by 9, whose top bits are the granule product's bits 40 to 54, as well mixed, for one
     * instruction less a probe. */
    return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> t->shift);
}

/* Room for one more entry: 0, or -1 out of host memory (the table is then unchanged). */
static inline int ga_live_reserve(ga_livetab_t *t)
{
    if (t->count < t->limit) /* 0 while there are no slots */
        return 0;
    return ga_live_grow(t);
}

static inline ga_chunk_t *ga_live_find(const ga_livetab_t *t, uintptr_t key)
{
    if (!t->count)
        return NULL;
    for (size_t i = ga_live_home(t, key);; i = (i + 1) & t->mask) {
        ga_chunk_t *c = t->slots[i].chunk;
        if (!c || c->base == key)
            return c;
    }
}

/* ga_live_find and ga_live_take for a table whose slots exist: an arena's has them from
 * ga_arena_create on, so its count need not be tested first (the vmm pool's free and live-size
 * query, 2 and 3 instructions a pair fewer: scripts/bench-shim-instr.sh vmm). */
static inline ga_chunk_t *ga_live_find_made(const ga_livetab_t *t, uintptr_t key)
{
    for (size_t i = ga_live_home(t, key);; i = (i + 1) & t->mask) {
        ga_chunk_t *c = t->slots[i].chunk;
        if (!c || c->base == key)
            return c;
    }
}

/* After ga_live_reserve. */
static inline void ga_live_insert(ga_livetab_t *t, ga_chunk_t *c)
{
    size_t i = ga_live_home(t, c->base);
    while (t->slots[i].chunk)
        i = (i + 1) & t->mask;
    t->slots[i].chunk = c;
    t->count++;
}

/* Backward shift: each later entry of the probe run moves into the hole unless its home lies
 * cyclically in (hole, j], so every run stays contiguous and lookups never need tombstones. */
static inline void ga_live_close_hole(ga_livetab_t *t, size_t hole)
{
    for (size_t j = (hole + 1) & t->mask; t->slots[j].chunk; j = (j + 1) & t->mask) {
        size_t home = ga_live_home(t, t->slots[j].chunk->base);
        if (((j - home) & t->mask) < ((j - hole) & t->mask))
            continue;
        t->slots[hole] = t->slots[j];
        hole = j;
    }
    t->slots[hole].chunk = NULL;
}

/* Removes key's entry and returns its chunk, or NULL when key is not a live base; the table's
 * slots exist (ga_live_find_made: every arena's, the only tables this is called on). */
static inline ga_chunk_t *ga_live_take_made(ga_livetab_t *t, uintptr_t key)
{
    for (size_t i = ga_live_home(t, key);; i = (i + 1) & t->mask) {
        ga_chunk_t *c = t->slots[i].chunk;
        if (!c)
            return NULL;
        if (c->base == key) {
            ga_live_close_hole(t, i);
            t->count--;
            return c;
        }
    }
}

#endif
