/* First fit over one range of device addresses: see ga_vafit.h for why the replay and the
 * simulated driver share it. The taken places are a sorted array: the allocations that reach a
 * backend are regions (few: growth doubles), so a search and an insertion that move the array are
 * cheap, and the floor (everything below it taken) makes the common rising case start at the end
 * of what is packed. */
#include "ga_vafit.h"

#include <stdlib.h>
#include <string.h>

static uintptr_t unit_up(uintptr_t x)
{
    return (x + GA_VA_UNIT - 1) & ~(uintptr_t)(GA_VA_UNIT - 1);
}

void ga_vafit_init(ga_vafit_t *v, uintptr_t lo, uintptr_t hi)
{
    memset(v, 0, sizeof *v);
    v->lo = unit_up(lo);
    v->hi = hi < v->lo ? v->lo : hi;
    v->floor = v->lo;
}

/* The index of the first place whose base is at or above addr. */
static size_t first_at(const ga_vafit_t *v, uintptr_t addr)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v->live[mid].base < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int grow_list(ga_vafit_t *v)
{
    if (v->n < v->cap)
        return 0;
    size_t cap = v->cap ? 2 * v->cap : 16;
    ga_va_place_t *p = realloc(v->live, cap * sizeof *p);
    if (!p)
        return -1;
    v->live = p, v->cap = cap;
    return 0;
}

/* x rounded up to align (a power of two), or 0 when that wraps. */
static uintptr_t align_up(uintptr_t x, size_t align)
{
    uintptr_t up = (x + align - 1) & ~(uintptr_t)(align - 1);
    return up < x ? 0 : up;
}

int ga_vafit_take_aligned(ga_vafit_t *v, size_t size, size_t align, uintptr_t *base)
{
    if (size == 0 || size > SIZE_MAX - GA_VA_UNIT || (align & (align - 1)))
        return -1;
    if (grow_list(v) != 0)
        return -2;
    if (align < GA_VA_UNIT)
        align = GA_VA_UNIT;
    size_t span = unit_up(size);
    size_t i = first_at(v, v->floor);
    uintptr_t at = v->floor, gap = 0; /* gap: where the first free space from the floor starts */
    int seen_gap = 0;
    for (; i < v->n; i++) {
        uintptr_t next = v->live[i].base, cand = align_up(at, align);
        if (next > at && !seen_gap)
            gap = at, seen_gap = 1;
        if (cand && cand <= next && next - cand >= span) {
            at = cand;
            break;
        }
        at = v->live[i].base + v->live[i].span;
    }
    if (!seen_gap)
        gap = at;
    if (i == v->n) {
        at = align_up(at, align);
        if (!at || at > v->hi || v->hi - at < span)
            return -1;
    }
    memmove(&v->live[i + 1], &v->live[i], (v->n - i) * sizeof *v->live);
    v->live[i] = (ga_va_place_t){at, span};
    v->n++;
    if (at == gap) /* it filled the first free space from its start: the floor moves past it */
        v->floor = at + span;
    else /* the first free space (an aligned place's padding too) stays free */
        v->floor = gap;
    *base = at;
    return 0;
}

int ga_vafit_take(ga_vafit_t *v, size_t size, uintptr_t *base)
{
    return ga_vafit_take_aligned(v, size, GA_VA_UNIT, base);
}

int ga_vafit_take_at(ga_vafit_t *v, size_t size, uintptr_t base)
{
    if (size == 0 || size > SIZE_MAX - GA_VA_UNIT || base % GA_VA_UNIT || base < v->lo ||
        base >= v->hi)
        return -1;
    size_t span = unit_up(size);
    size_t i = first_at(v, base);
    if (v->hi - base < span || (i < v->n && v->live[i].base - base < span) ||
        (i > 0 && v->live[i - 1].base + v->live[i - 1].span > base))
        return -1;
    if (grow_list(v) != 0)
        return -2;
    memmove(&v->live[i + 1], &v->live[i], (v->n - i) * sizeof *v->live);
    v->live[i] = (ga_va_place_t){base, span};
    v->n++;
    if (base == v->floor)
        v->floor = base + span;
    return 0;
}

size_t ga_vafit_give(ga_vafit_t *v, uintptr_t base)
{
    size_t i = first_at(v, base);
    if (i == v->n || v->live[i].base != base)
        return 0;
    size_t span = v->live[i].span;
    memmove(&v->live[i], &v->live[i + 1], (v->n - i - 1) * sizeof *v->live);
    v->n--;
    if (base < v->floor)
        v->floor = base;
    return span;
}

void ga_vafit_fini(ga_vafit_t *v)
{
    free(v->live);
    memset(v, 0, sizeof *v);
}
