/* gpuarena vmm pool, figures: the statistics summed over the placement areas (reread only where an
 * area changed), the live bases, the occupancy map, and the invariant walker the tests call.
 */
#include <stdio.h>
#include <stdlib.h>

#include "vmm_internal.h"

size_t ga_vmm_live_bases(const ga_pool_t *p, uintptr_t *out, size_t max)
{
    pend_done(p->vmm); /* a pending block is freed: not listed */
    const ga_livetab_t *t = &p->vmm->ltab; /* every area's blocks */
    size_t n = 0;
    for (size_t i = 0; i <= t->mask; i++) {
        const ga_chunk_t *c = t->slots[i].chunk;
        if (c && !(c->u.area & GA_AREA_PARKED) && n++ < max) /* a parked block is freed */
            out[n - 1] = c->base;
    }
    return n;
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
        v->allocs += a.allocs - ar->seen.allocs;
        v->total_free += a.total_free - ar->seen.total_free;
        rescan |= a.largest_free < ar->seen.largest_free &&
                  ar->seen.largest_free == v->largest_free;
        if (a.largest_free > v->largest_free)
            v->largest_free = a.largest_free;
        ar->seen.requested = a.in_use_requested;
        ar->seen.live = a.live;
        ar->seen.allocs = a.allocs;
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

/* Parked blocks are freed memory to their user (an allocation that needs the room gives them back
 * first): their bytes are free, and the largest free block is what giving them back would make
 * (each run of parked blocks side by side, with the free chunks around it). Areas count them
 * allocated: without this, in_use + total_free fell short of the address space by their bytes,
 * and fragmentation read above 0 with nothing live (an outside check, helper-134, 2026-12-07). */
static void parked_free(const ga_vmm_t *v, ga_stats_t *out)
{
    uint64_t bytes = 0, largest = 0;
    for (size_t s = 0; s < PARK_ENTRIES; s++) {
        for (size_t j = 0; j < v->park[s].n; j++) {
            const ga_chunk_t *c = v->park[s].c[j], *pr = c->prev_phys;
            bytes += c->size;
            if (pr && !ga_is_free(pr) && (pr->u.area & GA_AREA_PARKED))
                continue; /* counted from the first of its run */
            uint64_t run = c->size + (pr && ga_is_free(pr) ? pr->size : 0);
            for (const ga_chunk_t *n = c->next_phys;
                 n && (ga_is_free(n) || (n->u.area & GA_AREA_PARKED)); n = n->next_phys)
                run += n->size;
            largest = run > largest ? run : largest;
        }
    }
    out->total_free += bytes;
    if (largest > out->largest_free)
        out->largest_free = largest;
}

/* The bytes of the granules only parked blocks use (all of whose users are parked: kept to their
 * user, for the statistics and cuMemGetInfo), in one pass over the parked blocks: an end granule
 * shared by k parked blocks (k <= 3) is met k times and counted 6/k sixths each time. */
static uint64_t parked_only(const ga_vmm_t *v)
{
    static const unsigned sixths[4] = {0, 6, 3, 2};
    uint64_t six = 0;
    for (size_t s = 0; s < PARK_ENTRIES; s++) {
        for (size_t j = 0; j < v->park[s].n; j++) {
            const ga_chunk_t *c = v->park[s].c[j];
            ga_vrange_t *r;
            size_t g0, g1;
            park_span(v, c->base, c->size, &r, &g0, &g1);
            if ((c->u.area & ~GA_AREA_PARKED) == AREA_ALIGNED) {
                six += 6 * (g1 - g0 + 1);
                continue;
            }
            six += 6 * (g1 > g0 + 1 ? g1 - g0 - 1 : 0);
            for (size_t e = 0; e < 1 + (g1 != g0); e++) {
                size_t g = e ? g1 : g0;
                unsigned k = r->parked[g];
                six += r->refs[g] == k && k <= 3 ? sixths[k] : 0;
            }
        }
    }
    return six / 6 << v->gshift;
}

/* The pool's own figures; live and requested bytes from the areas; free address space is the
 * parent's not lent plus what is free inside the areas' regions. */
void ga_vmm_stats(const ga_pool_t *p, ga_stats_t *out)
{
    ga_vmm_t *v = p->vmm; /* the cached figures change; the pool does not */
    pend_done(v); /* the areas' figures with the pending free done */
    refresh_seen(v);
    *out = p->own;
    /* Parked blocks are live in their areas and freed to their user; each reuse of one is an
     * allocation no area counted. */
    out->allocs = v->allocs - v->undone + v->park_hits;
    out->live = v->live - v->nparked;
    out->frees = out->allocs - out->live;
    out->in_use_requested = v->requested - v->parked_req;
    out->total_free = v->parent.total_free + v->total_free;
    out->largest_free = v->parent.largest_free > v->largest_free ? v->parent.largest_free
                                                                 : v->largest_free;
    out->regions = v->parent.regions;
    if (v->nparked) {
        parked_free(v, out);
        out->kept += parked_only(v);
        /* the highest kept figure seen: the cache's own peak, or this one (it read 0 beside a
         * kept of 10 MiB of parked blocks' granules, helper-135 F2) */
        if (out->kept > out->peak_kept)
            out->peak_kept = out->kept;
    }
}

/* One line per region of each area in use, general first. */
size_t ga_vmm_occupancy_map(const ga_pool_t *p, char *buf, size_t len, unsigned width)
{
    pend_done(p->vmm);
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

typedef struct park_end {
    const uint32_t *ref; /* the granule's count of users: one address per granule */
    const uint8_t *parked;
} park_end_t;

static int end_order(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const park_end_t *)a)->ref;
    uintptr_t y = (uintptr_t)((const park_end_t *)b)->ref;
    return (x > y) - (x < y);
}

/* For the check: from the parked blocks themselves (their ends sorted by their counts' addresses,
 * one per granule), the bytes of the granules they touch, each once (what keep_now is kept less
 * of, at park and take-back), and of those only parked blocks use; in *bad the granules whose
 * `parked` count disagrees with the parked blocks ending there (every other granule's count must
 * be 0). */
static uint64_t parked_touched(const ga_vmm_t *v, uint64_t *only, uint64_t *bad)
{
    /* On the heap: 2 * 32 * 64 ends are 64 KiB, too much for a small thread stack. Without it,
     * the ends are not compared (the inner granules still are). */
    size_t max = 2 * v->nparked, n = 0;
    park_end_t *end = max ? malloc(max * sizeof *end) : NULL;
    int whole = !max || end; /* every end compared */
    if (!end)
        max = 0;
    uint64_t g = 0, o = 0, marks = 0;
    for (size_t s = 0; s < PARK_ENTRIES; s++) {
        for (size_t j = 0; j < v->park[s].n; j++) {
            const ga_chunk_t *c = v->park[s].c[j];
            ga_vrange_t *r = range_of(v, c->base);
            if (!r)
                continue;
            size_t off = c->base - r->base, g0 = off >> v->gshift,
                   g1 = (off + c->size - 1) >> v->gshift;
            size_t inner = (c->u.area & ~GA_AREA_PARKED) == AREA_ALIGNED ? g1 - g0 + 1
                           : g1 > g0 + 1 ? g1 - g0 - 1 : 0;
            g += inner, o += inner;
            if ((c->u.area & ~GA_AREA_PARKED) != AREA_ALIGNED && n + 2 <= max) {
                end[n++] = (park_end_t){&r->refs[g0], &r->parked[g0]};
                if (g1 != g0)
                    end[n++] = (park_end_t){&r->refs[g1], &r->parked[g1]};
            }
        }
    }
    if (n)
        qsort(end, n, sizeof end[0], end_order);
    for (size_t i = 0, k; i < n; i = k) {
        for (k = i + 1; k < n && end[k].ref == end[i].ref; k++)
            ;
        g++;
        o += *end[i].ref == k - i;
        *bad += *end[i].parked != k - i;
    }
    for (size_t i = 0; i < v->nranges; i++)
        for (size_t x = 0; x < v->ranges[i].ngran; x++)
            marks += v->ranges[i].parked[x];
    *bad += whole && marks != n;
    free(end);
    *only = o << v->gshift;
    return g << v->gshift;
}

/* The areas and the granule state agree with the figures: a granule in use is mapped and lent
 * to an area, kept = mapped with no user, every kept granule is findable on the stack, mapped
 * bytes = reserved. */
int ga_vmm_check(const ga_pool_t *p, char *report, size_t len)
{
    pend_done(p->vmm);
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
    if (!bad && (v->pend || v->pend_gran)) { /* finished above, its granules' stores too */
        bad++;
        if (report && len)
            snprintf(report, len, "vmm pool: a pending free left (granules put off: %d)",
                     v->pend_gran);
    }
    if (!bad && live != v->ltab.count) { /* the shared table holds each area's live blocks */
        bad++;
        if (report && len)
            snprintf(report, len, "vmm pool: %zu blocks in the live table, the areas have %llu",
                     v->ltab.count, (unsigned long long)live);
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
            /* a backend that maps runs has no handles: the mapped bit is all there is */
            uint64_t h = r->handle ? r->handle[g] : (uint64_t)bit_get(r->mapped, g);
            mapped += h ? v->gran : 0;
            orphan += used && !h;
            unlent += used && (!r->owner[g] || r->owner[g] > v->nareas);
            /* the mapped bit is the handle; an inner granule is no block's end; the aligned
             * area keeps no counts */
            bits += bit_get(r->mapped, g) != (h != 0) ||
                    (bit_get(r->inner, g) && r->refs[g]) ||
                    (r->owner[g] == 1 + AREA_ALIGNED && r->refs[g]);
            if (!used && h) {
                kept += v->gran;
                unstacked += !bit_get(r->stacked, g);
            }
        }
    }
    /* Parked blocks: each in the live table, marked, of its entry's size, its entry the one its
     * size's probe finds, its home marked (park_mark); the table's last entry never used; their
     * sums. */
    uint64_t pn = 0, pbytes = 0, preq = 0, pbad = 0, pg = 0, ponly = 0;
    uint64_t phold = parked_touched(v, &ponly, &pbad);
    pbad += ponly != parked_only(v);
    for (size_t s = 0; s < PARK_ENTRIES; s++) {
        pbad += v->park[s].n > PARK_DEPTH;
        pbad += v->park[s].n && !v->park_mark[park_home(v->park[s].size)]; /* the walk's marks */
        for (size_t j = 0; j < v->park[s].n; j++) {
            const ga_chunk_t *c = v->park[s].c[j];
            pn++, pbytes += c->size, preq += c->u.requested;
            pg += c->u.area == (AREA_GENERAL | GA_AREA_PARKED);
            pbad += c->size != v->park[s].size || park_find(v, c->size, 0) != &v->park[s] ||
                    !(c->u.area & GA_AREA_PARKED) || ga_live_find_made(&v->ltab, c->base) != c;
        }
    }
    for (size_t i = 0; i < v->ngparked; i++) /* the general area's, each once */
        for (size_t j = 0; j <= i; j++)
            pbad += v->gpark[i]->u.area != (AREA_GENERAL | GA_AREA_PARKED) ||
                    v->gpark[i]->u.gpark != i || (j < i && v->gpark[j] == v->gpark[i]);
    pbad += v->park[PARK_ENTRIES - 1].n != 0 || v->park_full.n != PARK_DEPTH;
    pbad += pg != v->ngparked || (v->ngparked && v->small_cut) || (held(v) && !v->ngparked) ||
            (!v->ngparked && v->area[AREA_GENERAL].arena && v->small_cut != v->small_lim);
    if (!bad && (pbad || pn != v->nparked || preq != v->parked_req ||
                 phold + v->keep_now != p->cfg.keep || p->own.kept > v->keep_now)) {
        bad++;
        if (report && len)
            snprintf(report, len, "vmm pool: %llu parked blocks of %llu bytes (%llu requested, "
                     "holding %llu), %llu of them misplaced; counted %zu (%llu requested), keep "
                     "%zu, %zu of it left, %llu kept",
                     (unsigned long long)pn, (unsigned long long)pbytes, (unsigned long long)preq,
                     (unsigned long long)phold, (unsigned long long)pbad, v->nparked,
                     (unsigned long long)v->parked_req, p->cfg.keep, v->keep_now,
                     (unsigned long long)p->own.kept);
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

size_t ga_vmm_granules(const ga_pool_t *p)
{
    pend_done(p->vmm);
    size_t n = 0;
    for (size_t i = 0; i < p->vmm->nranges; i++)
        n += p->vmm->ranges[i].ngran;
    return n;
}
