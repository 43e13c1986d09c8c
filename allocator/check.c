/* gpuarena allocator diagnostics: statistics, the invariant walker, the occupancy map and the
 * status strings.
 *
 * ga_check is written to be independent of the hot paths' bookkeeping: it recomputes every
 * figure from the structures themselves (region tiling, bin lists, bitmaps, the pointer table)
 * and compares, so a bug in incremental accounting shows up as a count of failures with a
 * readable first few lines rather than as silent drift. It is O(everything) and meant for tests
 * and debug builds, never the hot path.
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

/* Largest free chunk: the highest non-empty bin holds it, but bins above 32 KiB span a size
 * range, so that one list is scanned. */
static uint64_t largest_free(const ga_arena_t *a)
{
    if (!a->fl_bitmap)
        return 0;
    unsigned fl = ga_msb64(a->fl_bitmap);
    if (!a->sl_bitmap[fl]) /* inconsistent bitmaps: ga_check reports them, stay defined here */
        return 0;
    unsigned bin = fl * GA_SL_COUNT + ga_msb64(a->sl_bitmap[fl]);
    uint64_t best = 0;
    for (const ga_chunk_t *c = a->bins[bin]; c; c = c->next_free)
        if (c->size > best)
            best = c->size;
    return best;
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
    case GA_EINVAL: return "invalid argument (size 0, size too large, or NULL pointer)";
    case GA_ENOMEM: return "out of memory (limit reached or the backend refused)";
    case GA_ENOTOWNED: return "address not owned by this arena";
    case GA_EDOUBLE: return "address is already free (double or stale free)";
    case GA_EINTERIOR: return "address is inside an allocation, not its start";
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
} checker_t;

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

/* Every level of the start bitmap summarises the one below, and level 0 has one bit per chunk. */
static void check_bitidx(checker_t *k, const ga_region_t *r, uint64_t nchunks)
{
    const ga_bitidx_t *b = &r->starts;
    uint64_t bits = 0;
    for (size_t w = 0; w < b->words[0]; w++)
        bits += (uint64_t)__builtin_popcountll(b->level[0][w]);
    CHECK(k, bits == nchunks, "region %#lx: %lu start bits for %lu chunks",
          (unsigned long)r->base, (unsigned long)bits, (unsigned long)nchunks);
    for (unsigned l = 0; l + 1 < b->nlevels; l++)
        for (size_t w = 0; w < b->words[l]; w++) {
            int up = (int)((b->level[l + 1][w >> 6] >> (w & 63)) & 1);
            CHECK(k, up == (b->level[l][w] != 0), "region %#lx: bitmap level %u word %zu summary",
                  (unsigned long)r->base, l + 1, w);
        }
}

static void check_chunk(checker_t *k, const ga_region_t *r, const ga_chunk_t *c,
                        const ga_chunk_t *prev, uintptr_t expect)
{
    unsigned long at = (unsigned long)c->base;
    CHECK(k, c->base == expect, "chunk %#lx: expected at %#lx (gap or overlap)", at,
          (unsigned long)expect);
    CHECK(k, c->region == r && c->prev_phys == prev, "chunk %#lx: bad region or back link", at);
    CHECK(k, c->size > 0 && c->size % GA_ALIGN == 0, "chunk %#lx: size %zu not a multiple of %zu",
          at, c->size, GA_ALIGN);
    CHECK(k, c->size <= r->size && c->base - r->base <= r->size - c->size,
          "chunk %#lx: runs past its region", at);
    if (c->base >= r->base && c->base - r->base < r->size)
        CHECK(k, ga_bitidx_test(&r->starts, ga_granule(r, c->base)), "chunk %#lx: no start bit",
              at);
    k->chunks++;
    if (c->is_free) {
        CHECK(k, !prev || !prev->is_free, "chunk %#lx: free next to a free chunk", at);
        CHECK(k, c->bin == ga_bin_of(c->size), "chunk %#lx: in bin %u, belongs in %u", at, c->bin,
              ga_bin_of(c->size));
        k->free_chunks++;
        k->total_free += c->size;
        if (c->size > k->largest)
            k->largest = c->size;
        return;
    }
    ga_chunk_t *h;
    HASH_FIND(hh, k->a->live, &c->base, sizeof c->base, h);
    CHECK(k, h == c, "live chunk %#lx: not in the pointer table", at);
    CHECK(k, c->requested > 0 && c->requested <= c->size && c->size - c->requested < GA_ALIGN,
          "live chunk %#lx: requested %zu does not round to %zu", at, c->requested, c->size);
    k->live++;
    k->in_use += c->size;
    k->requested += c->requested;
}

static void check_region(checker_t *k, const ga_region_t *r)
{
    CHECK(k, r->base % GA_ALIGN == 0 && r->size % GA_ALIGN == 0 && r->size > 0,
          "region %#lx: misaligned", (unsigned long)r->base);
    k->reserved += r->size;
    uint64_t before = k->chunks, bound = r->size / GA_ALIGN;
    uintptr_t expect = r->base;
    const ga_chunk_t *prev = NULL;
    for (const ga_chunk_t *c = r->first; c; prev = c, c = c->next_phys) {
        if (k->chunks - before >= bound) {
            fail(k, "region %#lx: more chunks than granules (a cycle?)", (unsigned long)r->base);
            return;
        }
        check_chunk(k, r, c, prev, expect);
        expect = c->base + c->size;
    }
    CHECK(k, expect == r->base + r->size, "region %#lx: chunks end at %#lx, region at %#lx",
          (unsigned long)r->base, (unsigned long)expect, (unsigned long)(r->base + r->size));
    check_bitidx(k, r, k->chunks - before);
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

/* Every listed chunk is free, in the bin its size maps to, inside a region; bitmaps match. */
static void check_bins(checker_t *k)
{
    const ga_arena_t *a = k->a;
    uint64_t listed = 0;
    for (unsigned b = 0; b < GA_FL_COUNT * GA_SL_COUNT; b++) {
        unsigned fl = b / GA_SL_COUNT, sl = b % GA_SL_COUNT;
        int bit = (int)((a->sl_bitmap[fl] >> sl) & 1);
        CHECK(k, bit == (a->bins[b] != NULL), "bin %u: bitmap bit %d disagrees with list", b, bit);
        const ga_chunk_t *prev = NULL;
        for (const ga_chunk_t *c = a->bins[b]; c; prev = c, c = c->next_free) {
            if (listed++ > k->free_chunks) {
                fail(k, "bin lists hold more chunks than the regions (a cycle?)");
                return;
            }
            CHECK(k, c->is_free && c->bin == b && c->prev_free == prev,
                  "bin %u: chunk %#lx not free, misfiled or badly linked", b,
                  (unsigned long)c->base);
            CHECK(k, ga_region_find(a, c->base) == c->region, "bin %u: chunk %#lx in no region",
                  b, (unsigned long)c->base);
        }
    }
    for (unsigned fl = 0; fl < GA_FL_COUNT; fl++)
        CHECK(k, (int)((a->fl_bitmap >> fl) & 1) == (a->sl_bitmap[fl] != 0),
              "first-level bit %u disagrees with its second level", fl);
    CHECK(k, listed == k->free_chunks, "%lu chunks in bins, %lu free chunks in regions",
          (unsigned long)listed, (unsigned long)k->free_chunks);
}

static void check_table(checker_t *k)
{
    const ga_arena_t *a = k->a;
    uint64_t n = 0;
    for (const ga_chunk_t *c = a->live; c; c = c->hh.next) {
        n++;
        CHECK(k, !c->is_free && ga_region_find(a, c->base) == c->region,
              "table entry %#lx is free or outside its region", (unsigned long)c->base);
    }
    CHECK(k, n == k->live, "%lu table entries, %lu live chunks", (unsigned long)n,
          (unsigned long)k->live);
}

#define CHECK_STAT(k, name, value)                                                       \
    CHECK(k, (k)->a->stats.name == (value), "stats." #name " = %lu, recomputed %lu",     \
          (unsigned long)(k)->a->stats.name, (unsigned long)(value))

static void check_stats(checker_t *k)
{
    const ga_stats_t *s = &k->a->stats;
    CHECK_STAT(k, in_use, k->in_use);
    CHECK_STAT(k, in_use_requested, k->requested);
    CHECK_STAT(k, live, k->live);
    CHECK_STAT(k, total_free, k->total_free);
    CHECK_STAT(k, reserved, k->reserved);
    CHECK_STAT(k, regions, (uint64_t)k->a->nregions);
    CHECK(k, largest_free(k->a) == k->largest, "largest free from bins %lu, recomputed %lu",
          (unsigned long)largest_free(k->a), (unsigned long)k->largest);
    CHECK(k, s->peak_in_use >= s->in_use && s->peak_reserved >= s->reserved,
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
            if (d->is_free)
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
