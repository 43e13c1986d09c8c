/* gpuarena vmm pool: the table of parked sizes (vmm_internal.h says how it is searched,
 * park_find; pool_vmm.c's head comment what parking is for). Here are its slow paths, out of the
 * allocation and free paths' files: the probe past a size's home entry, the entries moved back
 * when one is freed, and the order in which ga_vmm_unpark_all gives the sizes back.
 */
#include <string.h>

#include "vmm_internal.h"

/* park_find past the home entry, which another size holds. */
OUT_OF_LINE ga_vpark_t *ga_vmm_park_probe(ga_vmm_t *v, ga_vpark_t *home, size_t rounded, int room)
{
    for (ga_vpark_t *k = home + 1; k < home + PARK_PROBE; k++)
        if (!k->n || k->size == rounded)
            return k;
    return room ? &v->park_full : &v->park[PARK_ENTRIES - 1];
}

/* Entry k was freed (park_vacate) and the next one is in use: each entry in use after it, up to
 * the next free one, moves back into the free one before it when that lies on its size's probe
 * path (from its home on), so that park_find, stopping at the first free entry, still finds
 * every size. Only the n blocks an entry holds are copied (one, nearly always). */
void ga_vmm_park_shift(ga_vmm_t *v, ga_vpark_t *k)
{
    ga_vpark_t *hole = k;
    for (ga_vpark_t *e = k + 1; e->n; e++) { /* the last entry is never in use: it ends this */
        if (&v->park[park_home(e->size)] <= hole) {
            hole->size = e->size, hole->n = e->n;
            hole->c[0] = e->c[0]; /* usually its only one: no call for it */
            if (e->n > 1)
                memcpy(hole->c + 1, e->c + 1, (e->n - 1) * sizeof *e->c);
            e->n = 0;
            hole = e;
        }
    }
}

/* The order ga_vmm_unpark_all frees the sizes in: the golden-ratio hash of the size, whose top 5
 * bits chose a size's entry when the table had 32 entries of one size each. The order decides
 * which kept granules stay, and the replays' figures were measured with this one: the entries'
 * order in the table of 128 homes moved the maps by -2.3% to +1.0% and hta_ddp_transformer's
 * peak by 0.04% (replayall.sh, helper-143). Sizes that shared an entry then (none was parked at
 * once) go in the table's order. */
static uint64_t unpark_key(const ga_vpark_t *k)
{
    return ((uint64_t)(k->size / GA_ALIGN) * 0x9E3779B97F4A7C15ull) >> 59;
}

/* An entry's place in ga_vmm_unpark_all's order: its key, then its place in the table. */
static uint64_t unpark_rank(const ga_vmm_t *v, const ga_vpark_t *k)
{
    return unpark_key(k) << 8 | (uint64_t)(k - v->park);
}

/* The entries in use, in unpark_key's order, those of one key in the table's, into in[] (room for
 * PARK_ENTRIES); their count. The entries are found from the marked homes (park_mark): a size's
 * entry lies from its home on, before the first free entry (park_find), so each marked home's run
 * is read up to PARK_PROBE entries and the entries whose home it is are taken; the marks read are
 * cleared, and the walk stops once the blocks found are all the parked ones. Up to 8 entries are
 * then sorted by insertion on unpark_rank (one, the common case, not at all); more are put in
 * the table's order by a bitmap and sorted by the counting sort the walk of all 144 entries made
 * (alt3: 1 entry in use a walk, the walk 1,660 -> 79 instructions at the pool, callgrind). */
size_t ga_vmm_park_order(ga_vmm_t *v, ga_vpark_t **in)
{
    size_t n = 0, left = v->nparked; /* blocks not found yet: none left ends the walk */
    for (size_t w = 0; left && w < PARK_SLOTS / 8; w++) {
        uint64_t m;
        memcpy(&m, v->park_mark + 8 * w, sizeof m);
        if (!m)
            continue;
        memset(v->park_mark + 8 * w, 0, sizeof m);
        for (; left && m; m &= m - 1) { /* a mark is 1: its byte's lowest bit */
            size_t h = 8 * w + (size_t)__builtin_ctzll(m) / 8;
            for (size_t s = h; s < h + PARK_PROBE && v->park[s].n; s++)
                if (park_home(v->park[s].size) == h) {
                    in[n++] = &v->park[s];
                    left -= v->park[s].n;
                }
        }
    }
    if (n <= 8) {
        for (size_t i = 1; i < n; i++) {
            ga_vpark_t *e = in[i];
            uint64_t rank = unpark_rank(v, e);
            size_t j = i;
            for (; j && unpark_rank(v, in[j - 1]) > rank; j--)
                in[j] = in[j - 1];
            in[j] = e;
        }
        return n;
    }
    uint64_t got[(PARK_ENTRIES + 63) / 64] = {0};
    for (size_t i = 0; i < n; i++) {
        size_t s = (size_t)(in[i] - v->park);
        got[s / 64] |= 1ull << (s % 64);
    }
    ga_vpark_t *tab[PARK_ENTRIES];
    size_t at[33] = {0}; /* entries of keys below each key, once summed */
    n = 0;
    for (size_t w = 0; w < sizeof got / sizeof *got; w++)
        for (uint64_t m = got[w]; m; m &= m - 1) {
            tab[n] = &v->park[64 * w + (size_t)__builtin_ctzll(m)];
            at[unpark_key(tab[n++]) + 1]++;
        }
    for (size_t key = 1; key < 33; key++)
        at[key] += at[key - 1];
    for (size_t i = 0; i < n; i++)
        in[at[unpark_key(tab[i])]++] = tab[i];
    return n;
}
