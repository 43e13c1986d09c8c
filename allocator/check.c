/* gpuarena allocator diagnostics: statistics, the invariant walker, the occupancy map and the
 * status strings.
 *
 * ga_check is written to be independent of the hot paths' bookkeeping: it recomputes every
 * figure from the structures themselves (region tiling, bin trees, run trees, bitmaps, the
 * live table) and compares, so a bug in incremental accounting shows up as a count of failures
 * with a readable first few lines rather than as silent drift. Each red-black tree is checked for
 * order, parent links, colours and black height, and for membership both ways (every node it holds
 * belongs there, every chunk that belongs there is found by a descent or an in-order walk). Its cost is O(n log n) in
 * the number of chunks, never in the bytes of a region, and every walk is bounded by the number of
 * chunk structs in use, so a corrupted link (a cycle) ends the walk with a failure instead of a
 * hang. Meant for tests and debug builds, never the hot path.
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

/* Largest free chunk: the rightmost chunk of the highest non-empty bin. */
static uint64_t largest_free(const ga_arena_t *a)
{
    uint64_t flmap = a->fl_bitmap;
    while (flmap && !a->sl_bitmap[ga_msb64(flmap)]) /* first-level bits are cleared lazily */
        flmap &= ~(1ull << ga_msb64(flmap));
    if (!flmap)
        return 0;
    unsigned fl = ga_msb64(flmap);
    const ga_bin_t *b = &a->bins[fl * GA_SL_COUNT + ga_msb64(a->sl_bitmap[fl])];
    const ga_subbins_t *sub = ga_bin_sub(b);
    ga_rbnode_t *root = b->t.root;
    if (sub)
        root = sub->map ? sub->t[ga_msb64(sub->map)].root : NULL;
    const ga_rbnode_t *n = ga_rb_last(root);
    return n ? ga_bin_chunk(n)->size : 0;
}

void ga_get_stats(const ga_arena_t *a, ga_stats_t *out)
{
    if (!out)
        return;
    if (!a) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = a->stats;
    /* Derived rather than counted on the hot paths: every free takes its entry out of the live
     * table, so the frees are the allocations less the entries left. */
    out->live = a->lt != &a->live ? a->stats.allocs - a->stats.frees : a->live.count;
    out->frees = a->stats.allocs - out->live; /* on a shared table: counted */
    out->total_free = a->stats.reserved - a->stats.in_use;
    out->largest_free = largest_free(a);
}

double ga_fragmentation(const ga_stats_t *s)
{
    if (!s || s->total_free == 0)
        return 0.0;
    return 1.0 - (double)s->largest_free / (double)s->total_free;
}

const char *ga_status_str(ga_status_t st)
{
    switch (st) {
    case GA_OK: return "ok";
    case GA_EINVAL: return "invalid argument (size 0, NULL pointer or bad configuration)";
    case GA_ENOMEM: return "out of memory (limit reached or the backend refused)";
    case GA_ENOTOWNED: return "address not owned by this arena";
    case GA_EDOUBLE: return "address is already free (double or stale free)";
    case GA_EINTERIOR: return "address is inside an allocation, not its start";
    case GA_EHELD: return "the backend refused to release it (still allocated)";
    case GA_ENOHOST: return "out of host memory for the allocator's records";
    case GA_ETOOBIG: return "size too large to round up (within 511 bytes of SIZE_MAX)";
    }
    return "unknown status";
}

/* Invariant walker ---------------------------------------------------------------------------- */

typedef struct checker {
    const ga_arena_t *a;
    char *report;
    size_t len, used;
    int failures;
    /* figures recomputed from the structures */
    uint64_t in_use, requested, live, free_chunks, total_free, largest, reserved, chunks;
    size_t items; /* chunk and run structs in use: bounds the walks */
} checker_t;

/* Chunk and run structs handed out: every item carved from the blocks (the newest block's up to
 * the carving point) less those on the free list. Counted here rather than on every split and
 * merge of the hot paths. */
static size_t items_in_use(const ga_arena_t *a)
{
    size_t carved = 0, spare = 0;
    for (const ga_item_t *b = a->blocks; b; b = b->block.next)
        carved += (b == a->blocks ? (size_t)(a->carve - b) : b->block.bytes / sizeof *b) - 1;
    for (const ga_item_t *it = a->spare; it && spare < carved; it = it->next_spare)
        spare++;
    return carved - spare;
}

#define REPORT_MAX_LINES 8

static void fail(checker_t *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(checker_t *k, const char *fmt, ...)
{
    if (k->failures++ >= REPORT_MAX_LINES || !k->report || k->used + 1 >= k->len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(k->report + k->used, k->len - k->used, fmt, ap);
    va_end(ap);
    if (n > 0)
        k->used += (size_t)n < k->len - k->used ? (size_t)n : k->len - k->used - 1;
    if (k->used + 1 < k->len) {
        k->report[k->used++] = '\n';
        k->report[k->used] = '\0';
    }
}

#define CHECK(k, cond, ...)                                                    \
    do {                                                                       \
        if (!(cond))                                                           \
            fail((k), __VA_ARGS__);                                            \
    } while (0)

/* Red-black trees ----------------------------------------------------------------------------- */

/* What one tree walk needs: how to compare two nodes, where to report, and a budget of nodes. */
typedef struct tree_walk {
    checker_t *k;
    const char *what;       /* "bin 12" or "region 0x..." for messages */
    int (*less)(const ga_rbnode_t *x, const ga_rbnode_t *y);
    const ga_rbnode_t *prev; /* in-order predecessor of the node being visited */
    const ga_rbnode_t *first; /* the first node visited: the leftmost */
    uint64_t nodes, budget;
    void (*visit)(struct tree_walk *w, const ga_rbnode_t *n);
    void *ctx;
} tree_walk_t;

/* A red-black tree of n nodes is at most 2 log2(n + 1) deep; deeper than this is a cycle. */
#define RB_MAX_DEPTH 128

/* Returns the black height of the subtree, or -1 once a failure made it meaningless. */
static int walk_tree(tree_walk_t *w, const ga_rbnode_t *n, const ga_rbnode_t *parent, int depth)
{
    if (!n)
        return 1;
    checker_t *k = w->k;
    if (depth > RB_MAX_DEPTH || ++w->nodes > w->budget) {
        fail(k, "%s: tree deeper or larger than the chunks in use (a cycle?)", w->what);
        return -1;
    }
    CHECK(k, ga_rb_parent(n) == parent, "%s: bad parent link", w->what);
    CHECK(k, ga_rb_is_black(n) || (ga_rb_is_black(n->left) && ga_rb_is_black(n->right)),
          "%s: red node with a red child", w->what);
    int lh = walk_tree(w, n->left, n, depth + 1);
    if (lh < 0)
        return -1;
    if (w->prev)
        CHECK(k, w->less(w->prev, n), "%s: nodes out of order", w->what);
    else
        w->first = n;
    w->prev = n;
    if (w->visit)
        w->visit(w, n);
    int rh = walk_tree(w, n->right, n, depth + 1);
    if (rh < 0)
        return -1;
    CHECK(k, lh == rh, "%s: black heights %d and %d differ", w->what, lh, rh);
    return lh + ga_rb_is_black(n);
}

static void check_tree(tree_walk_t *w, const ga_rbnode_t *root)
{
    CHECK(w->k, ga_rb_is_black(root), "%s: red root", w->what);
    walk_tree(w, root, NULL, 0);
}

static int bin_less(const ga_rbnode_t *x, const ga_rbnode_t *y)
{
    return ga_bin_less(ga_bin_chunk(x), ga_bin_chunk(y));
}

static int run_less(const ga_rbnode_t *x, const ga_rbnode_t *y)
{
    return ga_run_of(x)->first->base < ga_run_of(y)->first->base;
}

/* Whether c is reachable in its bin's tree by the descent an allocation would make. */
static int in_bin_tree(const ga_arena_t *a, const ga_chunk_t *c)
{
    if (!ga_bin_marked(a, ga_bin_of(c->size))) /* an empty bin's fields are not set */
        return 0;
    const ga_bin_t *b = &a->bins[ga_bin_of(c->size)];
    const ga_subbins_t *sub = ga_bin_sub(b);
    const ga_rbnode_t *n = sub ? sub->t[ga_sub_of(c->size)].root : b->t.root;
    for (int depth = 0; n && depth <= RB_MAX_DEPTH; depth++) {
        const ga_chunk_t *x = ga_bin_chunk(n);
        if (x == c)
            return 1;
        n = ga_bin_less(c, x) ? n->left : n->right;
    }
    return 0;
}

/* ga_live_find with at most one pass over the table, so a corrupted table cannot hang it. */
static const ga_chunk_t *live_probe(const ga_livetab_t *t, uintptr_t key)
{
    if (!t->slots)
        return NULL;
    size_t i = ga_live_home(t, key);
    for (size_t step = 0; step <= t->mask; step++, i = (i + 1) & t->mask)
        if (!t->slots[i].chunk || t->slots[i].chunk->base == key)
            return t->slots[i].chunk;
    return NULL;
}

/* Regions ------------------------------------------------------------------------------------- */

static void check_chunk(checker_t *k, const ga_region_t *r, const ga_chunk_t *c,
                        const ga_chunk_t *prev, uintptr_t expect)
{
    unsigned long at = (unsigned long)c->base;
    CHECK(k, c->base == expect, "chunk %#lx: expected at %#lx (gap or overlap)", at,
          (unsigned long)expect);
    const ga_run_t *run = ga_chunk_run(c);
    CHECK(k, run && run->region == r && c->prev_phys == prev,
          "chunk %#lx: bad region or back link", at);
    CHECK(k, c->size > 0 && c->size % GA_ALIGN == 0, "chunk %#lx: size %zu not a multiple of %zu",
          at, c->size, GA_ALIGN);
    CHECK(k, c->size <= r->size && c->base - r->base <= r->size - c->size,
          "chunk %#lx: runs past its region", at);
    k->chunks++;
    if (ga_is_free(c)) {
        CHECK(k, !prev || !ga_is_free(prev), "chunk %#lx: free next to a free chunk", at);
        CHECK(k, in_bin_tree(k->a, c), "chunk %#lx: free but not found in its bin's tree", at);
        k->free_chunks++;
        k->total_free += c->size;
        if (c->size > k->largest)
            k->largest = c->size;
        return;
    }
    CHECK(k, live_probe(k->a->lt, c->base) == c, "live chunk %#lx: not in the live table", at);
    CHECK(k, c->u.requested > 0 && c->u.requested <= c->size && c->size - c->u.requested < GA_ALIGN,
          "live chunk %#lx: requested %zu does not round to %zu", at, c->u.requested, c->size);
    k->live++;
    k->in_use += c->size;
    k->requested += c->u.requested;
}

/* The run tree, visited in order, must cut the chunk chain into consecutive runs: each run starts
 * where the previous one ended and holds `count` chunks (1 to GA_RUN_MAX) that point back to it. */
typedef struct run_cursor {
    const ga_chunk_t *next; /* the chunk the next run must start at */
    uint64_t chunks;
} run_cursor_t;

static void visit_run(tree_walk_t *w, const ga_rbnode_t *n)
{
    const ga_run_t *run = ga_run_of(n);
    run_cursor_t *cur = w->ctx;
    checker_t *k = w->k;
    CHECK(k, run->first == cur->next, "%s: a run starts at %#lx, expected %#lx", w->what,
          (unsigned long)run->first->base, cur->next ? (unsigned long)cur->next->base : 0ul);
    CHECK(k, run->count >= 1 && run->count <= GA_RUN_MAX, "%s: a run of %u chunks", w->what,
          run->count);
    const ga_chunk_t *c = run->first;
    unsigned i = 0;
    for (; c && i < run->count && i < GA_RUN_MAX; i++, c = c->next_phys) {
        CHECK(k, ga_chunk_run(c) == run, "%s: chunk %#lx does not point to its run", w->what,
              (unsigned long)c->base);
        cur->chunks++;
    }
    CHECK(k, i == run->count, "%s: a run of %u chunks ends after %u", w->what, run->count, i);
    cur->next = c;
}

static void check_runs(checker_t *k, const ga_region_t *r, uint64_t nchunks)
{
    char what[48];
    snprintf(what, sizeof what, "region %#lx", (unsigned long)r->base);
    run_cursor_t cur = {.next = r->first};
    tree_walk_t w = {.k = k, .what = what, .less = run_less, .budget = k->items,
                     .visit = visit_run, .ctx = &cur};
    check_tree(&w, r->runs);
    CHECK(k, cur.next == NULL && cur.chunks == nchunks,
          "%s: runs cover %lu chunks, the region has %lu", what, (unsigned long)cur.chunks,
          (unsigned long)nchunks);
}

static void check_region(checker_t *k, const ga_region_t *r)
{
    CHECK(k, r->base % GA_ALIGN == 0 && r->size % GA_ALIGN == 0 && r->size > 0,
          "region %#lx: misaligned", (unsigned long)r->base);
    k->reserved += r->size;
    uint64_t before = k->chunks;
    uintptr_t expect = r->base;
    const ga_chunk_t *prev = NULL;
    for (const ga_chunk_t *c = r->first; c; prev = c, c = c->next_phys) {
        if (k->chunks >= k->items) {
            fail(k, "region %#lx: more chunks than structs in use (a cycle?)",
                 (unsigned long)r->base);
            return;
        }
        check_chunk(k, r, c, prev, expect);
        expect = c->base + c->size;
    }
    CHECK(k, expect == r->base + r->size, "region %#lx: chunks end at %#lx, region at %#lx",
          (unsigned long)r->base, (unsigned long)expect, (unsigned long)(r->base + r->size));
    check_runs(k, r, k->chunks - before);
}

static void check_regions(checker_t *k)
{
    const ga_arena_t *a = k->a;
    for (size_t i = 0; i < a->nregions; i++) {
        const ga_region_t *r = a->regions[i];
        if (i > 0) {
            const ga_region_t *p = a->regions[i - 1];
            CHECK(k, p->base < r->base && r->base - p->base >= p->size,
                  "regions %#lx and %#lx overlap or are unsorted", (unsigned long)p->base,
                  (unsigned long)r->base);
        }
        check_region(k, r);
    }
}

/* Bins ---------------------------------------------------------------------------------------- */

/* The bin (and slice, for a subdivided bin) being walked, for visit_bin. */
typedef struct bin_at {
    unsigned bin;
    int slice; /* -1: the bin is one tree */
} bin_at_t;

static void visit_bin(tree_walk_t *w, const ga_rbnode_t *n)
{
    const ga_chunk_t *c = ga_bin_chunk(n);
    const bin_at_t *at = w->ctx;
    CHECK(w->k, ga_is_free(c) && ga_bin_of(c->size) == at->bin &&
                    (at->slice < 0 || ga_sub_of(c->size) == (unsigned)at->slice),
          "%s: chunk %#lx not free or misfiled", w->what, (unsigned long)c->base);
    CHECK(w->k, ga_chunk_run(c) && ga_region_find(w->k->a, c->base) == ga_chunk_run(c)->region,
          "%s: chunk %#lx in no region", w->what, (unsigned long)c->base);
}

/* One tree of a bin: well formed, only chunks of its bin and slice, min its leftmost; returns
 * the number of chunks. */
static uint64_t check_bin_tree(checker_t *k, const ga_tree_t *t, unsigned b, int slice)
{
    if (!t->root) {
        CHECK(k, t->min == NULL, "bin %u slice %d: empty, with a lowest chunk", b, slice);
        return 0;
    }
    char what[40];
    snprintf(what, sizeof what, slice < 0 ? "bin %u" : "bin %u slice %d", b, slice);
    bin_at_t at = {b, slice};
    tree_walk_t w = {.k = k, .what = what, .less = bin_less, .budget = k->items,
                     .visit = visit_bin, .ctx = &at};
    check_tree(&w, t->root);
    CHECK(k, w.first && t->min == ga_bin_chunk(w.first),
          "%s: the lowest chunk is not the tree's leftmost", what);
    return w.nodes;
}

/* A subdivided bin: each slice's tree, the slice map, and the bin's lowest chunk (that of its
 * lowest non-empty slice); returns the number of chunks. */
static uint64_t check_slices(checker_t *k, const ga_bin_t *bin, unsigned b)
{
    const ga_subbins_t *sub = ga_bin_sub(bin);
    uint64_t n = 0;
    const ga_chunk_t *lowest = NULL;
    for (unsigned s = 0; s < GA_SUB_COUNT; s++) {
        const ga_tree_t *t = &sub->t[s];
        CHECK(k, (int)((sub->map >> s) & 1) == (t->root != NULL),
              "bin %u: slice map bit %u disagrees with its tree", b, s);
        n += check_bin_tree(k, t, b, (int)s);
        if (!lowest)
            lowest = t->min;
    }
    CHECK(k, bin->t.min == lowest, "bin %u: the lowest chunk is not its lowest slice's", b);
    return n;
}

/* Every tree is well formed and holds only free chunks of its size class; bitmaps match. */
static void check_bins(checker_t *k)
{
    const ga_arena_t *a = k->a;
    uint64_t listed = 0;
    for (unsigned b = 0; b < GA_FL_COUNT * GA_SL_COUNT; b++) {
        unsigned fl = b / GA_SL_COUNT, sl = b % GA_SL_COUNT;
        int bit = (int)((a->sl_bitmap[fl] >> sl) & 1);
        const ga_bin_t *bin = &a->bins[b];
        if (!bit) /* empty: its fields are not set (never zeroed); its chunks, if any, are not */
            continue; /* listed, which the count below finds */
        CHECK(k, bin->t.min != NULL, "bin %u: bitmap bit set over an empty bin", b);
        listed += ga_bin_sub(bin) ? check_slices(k, bin, b) : check_bin_tree(k, &bin->t, b, -1);
    }
    for (unsigned fl = 0; fl < GA_FL_COUNT; fl++) /* a set bit over an empty word is allowed */
        CHECK(k, ((a->fl_bitmap >> fl) & 1) || !a->sl_bitmap[fl],
              "first-level bit %u is clear over a non-empty second level", fl);
    CHECK(k, listed == k->free_chunks, "%lu chunks in bins, %lu free chunks in regions",
          (unsigned long)listed, (unsigned long)k->free_chunks);
}

/* Live table ---------------------------------------------------------------------------------- */

static void check_table(checker_t *k)
{
    const ga_livetab_t *t = k->a->lt;
    int shared = t != &k->a->live; /* a vmm pool's: the other areas' entries are skipped */
    uint64_t n = 0;
    CHECK(k, !t->slots || (t->mask + 1) % 64 == 0, "live table: capacity %zu", t->mask + 1);
    CHECK(k, !t->slots || t->count * GA_LIVE_SPREAD <= t->mask + 1,
          "live table: %zu entries in %zu slots",
          t->count, t->mask + 1);
    CHECK(k, t->limit == (t->slots ? (t->mask + 1) / GA_LIVE_SPREAD : 0),
          "live table: limit %zu for %zu slots", t->limit, t->slots ? t->mask + 1 : 0);
    for (size_t i = 0; t->slots && i <= t->mask; i++) {
        const ga_live_slot_t *s = &t->slots[i];
        if (!s->chunk)
            continue;
        const ga_chunk_t *c = s->chunk;
        if (shared && ((c->u.area & ~GA_AREA_PARKED) != k->a->live_area || ga_is_free(c))) {
            /* another area's (its own check sees it), or a free chunk: then no area's */
            CHECK(k, !ga_is_free(c), "shared live table entry %#lx is free",
                  (unsigned long)c->base);
            continue;
        }
        n++;
        CHECK(k, !ga_is_free(c) && ga_chunk_run(c) &&
                     ga_region_find(k->a, c->base) == ga_chunk_run(c)->region,
              "live table entry %#lx is stale, free or outside its region", (unsigned long)c->base);
        CHECK(k, live_probe(t, c->base) == c, "live table entry %#lx: not reachable by a probe",
              (unsigned long)c->base);
    }
    CHECK(k, (shared || n == t->count) && n == k->live,
          "%lu table entries, count %zu, %lu live chunks", (unsigned long)n, t->count,
          (unsigned long)k->live);
}

#define CHECK_STAT(k, name, value)                                                       \
    CHECK(k, s->name == (value), "stats." #name " = %lu, recomputed %lu",                 \
          (unsigned long)s->name, (unsigned long)(value))

/* The figures as ga_get_stats gives them (live and total_free are derived there) against the
 * walk's recount. */
static void check_stats(checker_t *k)
{
    ga_stats_t all;
    ga_get_stats(k->a, &all);
    const ga_stats_t *s = &all;
    CHECK_STAT(k, in_use, k->in_use);
    CHECK_STAT(k, in_use_requested, k->requested);
    CHECK_STAT(k, live, k->live);
    CHECK_STAT(k, total_free, k->total_free);
    CHECK_STAT(k, reserved, k->reserved);
    CHECK_STAT(k, regions, (uint64_t)k->a->nregions);
    CHECK(k, largest_free(k->a) == k->largest, "largest free from bins %lu, recomputed %lu",
          (unsigned long)largest_free(k->a), (unsigned long)k->largest);
    CHECK(k, (s->peak_in_use >= s->in_use || k->a->lt != &k->a->live) && /* shared: no peak */
                 s->peak_reserved >= s->reserved,
          "a peak is below its current value");
    CHECK(k, s->allocs - s->frees == s->live, "allocs - frees != live");
    CHECK(k, s->frag_failures <= s->failed_allocs, "more fragmentation failures than failures");
    CHECK(k, s->backend_reserves - s->backend_releases == s->regions,
          "backend reserves - releases != regions");
    CHECK(k, s->in_use + s->total_free == s->reserved, "in_use + total_free != reserved");
}

int ga_check(const ga_arena_t *a, char *report, size_t report_len)
{
    checker_t k = {.a = a, .report = report, .len = report_len};
    if (report && report_len)
        report[0] = '\0';
    if (!a) {
        fail(&k, "arena is NULL");
        return k.failures;
    }
    k.items = items_in_use(a);
    check_regions(&k);
    check_bins(&k);
    check_table(&k);
    check_stats(&k);
    return k.failures;
}

/* Occupancy map ------------------------------------------------------------------------------- */

typedef struct sink {
    char *buf;
    size_t len, n;
} sink_t;

static void put(sink_t *s, char ch)
{
    if (s->n + 1 < s->len)
        s->buf[s->n] = ch;
    s->n++;
}

/* Start of cell i of `width` over a region; 128-bit so size * i cannot overflow. */
static uintptr_t cell_start(const ga_region_t *r, unsigned width, unsigned i)
{
    return r->base + (uintptr_t)(((unsigned __int128)r->size * i) / width);
}

/* One region: the chunk pointer only moves forward, so this is O(chunks + width). */
static void map_region(sink_t *s, const ga_region_t *r, unsigned width)
{
    const ga_chunk_t *c = r->first;
    for (unsigned i = 0; i < width; i++) {
        uintptr_t lo = cell_start(r, width, i), hi = cell_start(r, width, i + 1);
        if (hi == lo) /* more cells than bytes: show the byte at lo */
            hi = lo + 1;
        while (c && c->base + c->size <= lo)
            c = c->next_phys;
        uint64_t used = 0;
        for (const ga_chunk_t *d = c; d && d->base < hi; d = d->next_phys) {
            if (ga_is_free(d))
                continue;
            uintptr_t from = d->base > lo ? d->base : lo;
            uintptr_t to = d->base + d->size < hi ? d->base + d->size : hi;
            used += to - from;
        }
        put(s, used == 0 ? '.' : used * 2 > (uint64_t)(hi - lo) ? '#' : '+');
    }
    put(s, '\n');
}

size_t ga_occupancy_map(const ga_arena_t *a, char *buf, size_t len, unsigned width)
{
    sink_t s = {.buf = buf, .len = buf ? len : 0};
    if (a && width)
        for (size_t i = 0; i < a->nregions; i++)
            map_region(&s, a->regions[i], width);
    if (s.len)
        s.buf[s.n < s.len ? s.n : s.len - 1] = '\0';
    return s.n;
}
