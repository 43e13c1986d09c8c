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

/* The entries in use, in unpark_key's order, those of one key in the table's, into in[] (room for
 * PARK_ENTRIES); their count. A counting sort: no pass over the entries per key, no
 * comparisons. */
size_t ga_vmm_park_order(ga_vmm_t *v, ga_vpark_t **in)
{
    size_t at[33] = {0}; /* entries of keys below each key, once summed */
    for (size_t s = 0; s < PARK_ENTRIES; s++)
        if (v->park[s].n)
            at[unpark_key(&v->park[s]) + 1]++;
    for (size_t key = 1; key < 33; key++)
        at[key] += at[key - 1];
    size_t n = at[32];
    for (size_t s = 0; s < PARK_ENTRIES; s++)
        if (v->park[s].n)
            in[at[unpark_key(&v->park[s])]++] = &v->park[s];
    return n;
}
