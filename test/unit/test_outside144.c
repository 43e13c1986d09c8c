/* An outside check at the pool of vmm's rule for a parked block that straddles, near the limit
 * (914fdc5 and 99068aa, 2026-12-07; helper-144; the shim's side is test/preload/t_outside144.c):
 * program shapes (blocks held, blocks freed and parked, then blocks of one size until the limit
 * refuses one) under limits from 8 to 128 MiB and keeps of 0, 2, 4 and 64 MiB. Asked of each:
 * a ga_pool_fits that says 1 is followed by an allocation with no backend map; the pool's check
 * is clean and its reserved bytes are the backend's mapped bytes after every step; the backend
 * never maps past the limit; kept stays within the keep; and every keep fits at least the blocks
 * the keep 0 fits, but for the runs o144_pending names, which fit at most two fewer (2026-12-07,
 * helper-147: the rule's reach, and why the rest is left, there).
 */
#include <stdio.h>
#include <string.h>

#include "vmm_fake.h"

#define KIB ((size_t)1024)
#define O144_MAX 100

typedef struct {
    size_t live[3];
    size_t park[4];
    size_t fill;
    int rounds;
} o144_shape_t;

static const o144_shape_t o144_shapes[] = {
    {{0}, {7 * MIB + 4 * KIB, 3 * MIB / 2}, 3 * MIB / 2, 1}, /* helper-135's */
    {{0}, {7 * MIB + 4 * KIB, 3 * MIB / 2, 64 * KIB}, 3 * MIB / 2, 2},
    {{0}, {3 * MIB / 2, 7 * MIB + 4 * KIB}, 7 * MIB + 4 * KIB, 1},
    {{0}, {3 * MIB / 2, 6 * MIB + 4 * KIB}, 6 * MIB + 4 * KIB, 2},
    {{0}, {64 * KIB, 9 * MIB + 4 * KIB}, 9 * MIB + 4 * KIB, 1},
    {{0}, {64 * KIB, 5 * MIB}, 5 * MIB, 1},
    {{0}, {3 * MIB / 2, 3 * MIB}, 3 * MIB, 1},
    {{0}, {1 * MIB + 4 * KIB, 1 * MIB + 4 * KIB}, 1 * MIB + 4 * KIB, 2},
    {{0}, {5 * MIB, 3 * MIB / 2}, 3 * MIB / 2, 1},
    {{768 * KIB}, {3 * MIB / 2}, 3 * MIB / 2, 2},
    {{1 * MIB + 512 * KIB}, {7 * MIB + 4 * KIB}, 7 * MIB + 4 * KIB, 1},
    {{3 * MIB / 2, 64 * KIB}, {5 * MIB, 3 * MIB / 2}, 5 * MIB, 1},
    {{0}, {768 * KIB, 768 * KIB, 768 * KIB}, 768 * KIB, 2},
    {{1 * MIB + 256 * KIB}, {900 * KIB}, 900 * KIB, 2},
};
#define O144_NSHAPES (sizeof o144_shapes / sizeof o144_shapes[0])

static void o144_consistent(ga_pool_t *p, const vfake_t *f, size_t limit, size_t keep)
{
    POOL_HEALTHY(p);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    REQUIRE(s.reserved == f->mapped, "reserved %llu, backend mapped %zu",
            (unsigned long long)s.reserved, f->mapped);
    REQUIRE(s.kept <= keep, "kept %llu over the keep %zu", (unsigned long long)s.kept, keep);
    REQUIRE(f->peak_mapped <= limit, "backend mapped %zu past the limit %zu", f->peak_mapped,
            limit);
}

/* The blocks of the shape's fill size that fit (-1: the shape's own blocks do not). */
static int o144_count(const o144_shape_t *k, size_t limit, size_t keep)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, limit, keep);
    uintptr_t live[3] = {0}, q[4], b[O144_MAX];
    int n = 0;
    for (int m = 0; m < 3; m++)
        if (k->live[m] && ga_pool_alloc(p, k->live[m], &live[m]) != GA_OK)
            n = -1;
    for (int r = 0; n == 0 && r < k->rounds; r++) {
        for (int m = 0; m < 4; m++)
            if (k->park[m] && ga_pool_alloc(p, k->park[m], &q[m]) != GA_OK)
                n = -1;
        for (int m = 0; n == 0 && m < 4; m++)
            if (k->park[m])
                ck_assert_int_eq(ga_pool_free(p, q[m], NULL), GA_OK);
        o144_consistent(p, &f, limit, keep);
    }
    while (n >= 0 && n < O144_MAX) {
        int fits = ga_pool_fits(p, k->fill);
        unsigned maps = f.maps;
        o144_consistent(p, &f, limit, keep);
        if (ga_pool_alloc(p, k->fill, &b[n]) != GA_OK)
            break;
        REQUIRE(!fits || f.maps == maps, "fits said 1 and the allocation mapped (block %d of %zu "
                "bytes)", n, k->fill);
        o144_consistent(p, &f, limit, keep);
        n++;
    }
    for (int m = 0; m < n; m++)
        ck_assert_int_eq(ga_pool_free(p, b[m], NULL), GA_OK);
    for (int m = 0; m < 3; m++)
        if (live[m])
            ck_assert_int_eq(ga_pool_free(p, live[m], NULL), GA_OK);
    o144_consistent(p, &f, limit, keep);
    destroy_clean(p, &f);
    return n;
}

/* The runs (shape, limit, keep) where a keep fits fewer blocks than the keep 0, each one fewer
 * (two for shapes 0 and 1 under 128 MiB with the 64 MiB keep). Since 2026-12-07 (helper-147),
 * while the room under the limit is at most the keep, kept granules count as new where a block's
 * area is chosen (vmm_cover.h, fresh_in), as a straddling parked block is placed afresh: that
 * met 10 of the 36 runs found before (shapes 0 and 1 under 32 MiB and shape 7 under 8-64 MiB
 * with the 64 MiB keep, shape 7 and 8 under 8 MiB with 4 MiB). What is left is decided while the
 * room is over the keep, where neither rule reaches, and is kept so on purpose: through the shim
 * the limit is the device's cap whenever GPUARENA_LIMIT is not set, so a rule that reached every
 * room would change every program's placement and leave the replay with no limit, whose figures
 * the shim's must equal, and it would cost the take-back (two class sizes taking turns: 338 ->
 * 488 instructions a pair at the pool). Counted:
 * - steering (shape 7, 1 MiB + 4 KiB, under 12 MiB with the 4 MiB keep): the parked block given
 *   back leaves granule 0 kept; the first block maps granule 32 for the class, so the room is
 *   8 MiB, over the keep, when the second is placed: the class's fit would map granule 33, the
 *   general area's lies on kept granule 0, and it goes there, alone in its granule, where the
 *   class packs them end to end (about two a granule): 10 blocks fit, 11 with the keep 0 (the
 *   same with 2 and 4 MiB keeps under every limit; shapes 0, 1 and 8, 1.5 MiB, under 32 and
 *   128 MiB with 4 MiB);
 * - a straddling block taken back far from the cap (shapes 0 and 1 under 96 and 128 MiB with the
 *   64 MiB keep): the 1.5 MiB block parked across granules 3 and 4 is taken back while the room
 *   is 118 MiB and stays live across its extra granule when the cap is reached: under 128 MiB
 *   83 blocks of 1.5 MiB fit where 85 do with the keep 0, under 96 MiB 62 where 63 (shape 2
 *   under 128 MiB, 6 and 7 under 96 MiB, the same keep: one of the two, decided over 64 MiB of
 *   room). */
static int o144_pending(size_t i, size_t limit_mib, size_t keep_mib)
{
    if (keep_mib == 64)
        return (i <= 1 && limit_mib >= 96) || (i == 2 && limit_mib == 128) ||
               ((i == 6 || i == 7) && limit_mib == 96);
    if (i == 7)
        return keep_mib == 2 || limit_mib >= 12;
    return keep_mib == 4 && (i <= 1 || i == 8) && (limit_mib == 32 || limit_mib == 128);
}

START_TEST(vmm_keep_never_fits_fewer_at_the_pool)
{
    static const size_t limits[] = {8, 12, 16, 24, 32, 64, 96, 128};
    static const size_t keeps[] = {2 * MIB, 4 * MIB, 64 * MIB};
    for (size_t i = 0; i < O144_NSHAPES; i++)
        for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++) {
            int n0 = o144_count(&o144_shapes[i], limits[l] * MIB, 0);
            if (n0 < 0)
                continue;
            for (size_t j = 0; j < sizeof keeps / sizeof keeps[0]; j++) {
                int n = o144_count(&o144_shapes[i], limits[l] * MIB, keeps[j]);
                ck_assert_msg(n >= n0 || (o144_pending(i, limits[l], keeps[j] / MIB) &&
                                           n >= n0 - 2),
                              "shape %zu, limit %zu MiB, keep %zu MiB: %d blocks of %zu "
                              "bytes (keep 0: %d)", i, limits[l], keeps[j] / MIB, n,
                              o144_shapes[i].fill, n0);
            }
        }
}
END_TEST

Suite *outside144_suite(void)
{
    Suite *s = suite_create("outside144");
    TCase *tc = tcase_create("vmm_straddle");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, vmm_keep_never_fits_fewer_at_the_pool);
    suite_add_tcase(s, tc);
    return s;
}
