/* gpuarena pointer table (ga_ptrmap.h). Keys are mostly 512-aligned device pointers, so the hash
 * drops the low 9 bits before a multiplicative mix and folds the high half back in.
 */
#include "ga_ptrmap.h"

#include <stdlib.h>
#include <string.h>

static size_t ga_hash(uint64_t key, size_t mask)
{
    uint64_t h = (key >> 9) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29)) & mask;
}

static int ga_ptrmap_grow(ga_ptrmap_t *m)
{
    size_t ncap = m->slots ? (m->mask + 1) * 2 : 1024;
    ga_pentry_t *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; m->slots && i <= m->mask; i++) {
        if (!m->slots[i].key)
            continue;
        size_t j = ga_hash(m->slots[i].key, ncap - 1);
        while (ns[j].key)
            j = (j + 1) & (ncap - 1);
        ns[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = ns;
    m->mask = ncap - 1;
    return 0;
}

int ga_ptrmap_put(ga_ptrmap_t *m, const ga_pentry_t *e)
{
    if (!m->slots || (m->count + 1) * 2 > m->mask + 1) {
        if (ga_ptrmap_grow(m))
            return -1;
    }
    size_t i = ga_hash(e->key, m->mask);
    while (m->slots[i].key && m->slots[i].key != e->key)
        i = (i + 1) & m->mask;
    if (!m->slots[i].key)
        m->count++;
    m->slots[i] = *e;
    return 0;
}

int ga_ptrmap_reserve(ga_ptrmap_t *m, size_t n)
{
    while (!m->slots || (m->count + n) * 2 > m->mask + 1)
        if (ga_ptrmap_grow(m))
            return -1;
    return 0;
}

ga_pentry_t *ga_ptrmap_get(const ga_ptrmap_t *m, uint64_t key)
{
    if (!m->slots || !key)
        return NULL;
    for (size_t i = ga_hash(key, m->mask);; i = (i + 1) & m->mask) {
        if (m->slots[i].key == key)
            return &m->slots[i];
        if (!m->slots[i].key)
            return NULL;
    }
}

/* Backward shift: pull later entries of the probe run into the hole when that is still on (or
 * before) their home slot, so every run stays contiguous. */
static void ga_ptrmap_close_hole(ga_ptrmap_t *m, size_t hole)
{
    for (size_t j = (hole + 1) & m->mask; m->slots[j].key; j = (j + 1) & m->mask) {
        size_t home = ga_hash(m->slots[j].key, m->mask);
        /* Entry j may move to hole iff home is not cyclically in (hole, j]. */
        int in_range = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (in_range)
            continue;
        m->slots[hole] = m->slots[j];
        hole = j;
    }
    memset(&m->slots[hole], 0, sizeof m->slots[hole]);
}

int ga_ptrmap_take(ga_ptrmap_t *m, uint64_t key, ga_pentry_t *out)
{
    ga_pentry_t *e = ga_ptrmap_get(m, key);
    if (!e)
        return 0;
    if (out)
        *out = *e;
    ga_ptrmap_close_hole(m, (size_t)(e - m->slots));
    m->count--;
    return 1;
}

void ga_ptrmap_each(const ga_ptrmap_t *m, void (*fn)(void *arg, const ga_pentry_t *e), void *arg)
{
    for (size_t i = 0; m->slots && i <= m->mask; i++)
        if (m->slots[i].key)
            fn(arg, &m->slots[i]);
}

void ga_ptrmap_fini(ga_ptrmap_t *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}
