/* An outside check at the pool of vmm's rule for a parked block that straddles, near the limit
 * (914fdc5 and 99068aa, 2026-12-07; helper-144; the shim's side is test/preload/t_outside144.c):
 * program shapes (blocks held, blocks freed and parked, then blocks of one size until the limit
 * refuses one) under limits from 8 to 128 MiB and keeps of 0, 2, 4 and 64 MiB. Asked of each:
 * a ga_pool_fits that says 1 is followed by an allocation with no backend map; the pool's check
 * is clean and its reserved bytes are the backend's mapped bytes after every step; the backend
 * never maps past the limit; kept stays within the keep; and every keep fits at least the blocks
 * the keep 0 fits, but for the pairs o144_pending names (pending: O144_PENDING).
 */
#include <stdio.h>
#include <string.h>

#include "vmm_fake.h"

#ifndef O144_PENDING
#define O144_PENDING 0
#endif

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

/* The (shape, limit) pairs where a keep fits fewer than the keep 0 at the pool (found 2026-12-07;
 * none fits fewer than on 198349c), the same as through the shim (t_outside144.c's o144_pending
 * says why), and under 96 and 128 MiB, well over the room the case's parked blocks take from the
 * keep: the test for "near the limit" is made when the straddling block is taken back, and one
 * taken back while the room is over the keep stays live across its extra granule (shapes 0 and
 * 1: 62 blocks of 1.5 MiB against 63 under 96 MiB with the 64 MiB keep; shape 2 under 128 MiB,
 * shape 6 under 96 MiB: a block fewer). */
static int o144_pending(size_t i, size_t limit_mib)
{
    return limit_mib >= 96 || ((i == 0 || i == 1) && limit_mib == 32) || i == 7 ||
           (i == 8 && (limit_mib == 8 || limit_mib == 32));
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
                ck_assert_msg(n >= n0 || (!O144_PENDING && o144_pending(i, limits[l])),
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
