/* White-box tests, the only ones that include the private header. The invariant walker itself:
 * a checker that never fails proves nothing, so these corrupt one structure at a time and expect
 * ga_check to count a failure and say what it found, then restore and expect silence. And host
 * memory exhaustion: every host allocation the arena makes is failed in turn, and each failure
 * must be a clean GA_ENOMEM that leaves a healthy arena and leaks nothing; and host memory follows
 * the number of chunks, not the size of a region.
 */
#include <stdlib.h>

#include "internal.h"
#include "testutil.h"

static ga_arena_t *busy_arena(fake_backend_t *f, uintptr_t *p)
{
    ga_arena_t *a = fake_arena(f, 0, 1, 0, 0);
    for (int i = 0; i < 6; i++)
        p[i] = must_alloc(a, (size_t)(i + 1) * KIB);
    ck_assert_int_eq(ga_free(a, p[1]), GA_OK);
    ck_assert_int_eq(ga_free(a, p[3]), GA_OK);
    ASSERT_HEALTHY(a);
    return a;
}

static void expect_failure(const ga_arena_t *a, const char *what)
{
    char rep[512];
    int n = ga_check(a, rep, sizeof rep);
    ck_assert_msg(n > 0, "ga_check missed: %s", what);
    ck_assert_msg(rep[0] != '\0', "ga_check gave no report for: %s", what);
}

static ga_chunk_t *live_chunk(ga_arena_t *a, uintptr_t p)
{
    ga_chunk_t *c = ga_live_find(&a->live, p);
    ck_assert_ptr_nonnull(c);
    return c;
}

START_TEST(test_check_sees_stats_drift)
{
    fake_backend_t f;
    uintptr_t p[6];
    ga_arena_t *a = busy_arena(&f, p);
    a->stats.in_use += 512;
    expect_failure(a, "in_use off by one granule");
    a->stats.in_use -= 512;
    a->live.count++; /* frees and live are derived from it (ga_get_stats) */
    expect_failure(a, "a free too few counted (live off by one)");
    a->live.count--;
    a->stats.reserved += GA_ALIGN;
    expect_failure(a, "reserved drift");
    a->stats.reserved -= GA_ALIGN;
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_check_sees_structure_damage)
{
    fake_backend_t f;
    uintptr_t p[6];
    ga_arena_t *a = busy_arena(&f, p);
    ga_chunk_t *c = live_chunk(a, p[4]);
    c->size += GA_ALIGN; /* overlaps its neighbour */
    expect_failure(a, "chunk overlapping its neighbour");
    c->size -= GA_ALIGN;
    c->run_free |= 1; /* free but in no bin, and missing from the free count */
    expect_failure(a, "free chunk outside the bins");
    c->run_free &= ~(uintptr_t)1;
    ga_run_t *run = ga_chunk_run(c);
    run->count++;
    expect_failure(a, "run counting one chunk too many");
    run->count--;
    c->run_free = 0;
    expect_failure(a, "chunk not pointing to its run");
    ga_set_run(c, run);
    ga_chunk_t *freed = c->prev_phys; /* p[3], free */
    ck_assert(ga_is_free(freed));
    freed->size += GA_ALIGN; /* now belongs to another bin, and overlaps its neighbour */
    expect_failure(a, "chunk filed in the wrong bin");
    freed->size -= GA_ALIGN;
    unsigned fl = 0;
    while (!a->sl_bitmap[fl])
        fl++;
    a->fl_bitmap ^= 1ull << fl;
    expect_failure(a, "first-level bitmap bit cleared over non-empty bins");
    a->fl_bitmap ^= 1ull << fl;
    ck_assert(!a->sl_bitmap[40]);
    a->fl_bitmap |= 1ull << 40; /* a stale bit (cleared lazily) is allowed */
    ASSERT_HEALTHY(a);
    ck_assert_ptr_eq(ga_live_take_made(&a->live, c->base), c);
    expect_failure(a, "live chunk missing from the table");
    ga_live_insert(&a->live, c);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

/* An arena with one bin of many free chunks (equal holes between live separators) and many runs. */
static ga_arena_t *holey_arena(fake_backend_t *f, uintptr_t *hole0)
{
    ga_arena_t *a = fake_arena(f, 16 * MIB, 0, 0, 0);
    uintptr_t p[400];
    for (int i = 0; i < 400; i++)
        p[i] = must_alloc(a, 4 * KIB);
    for (int i = 0; i < 400; i += 2)
        ck_assert_int_eq(ga_free(a, p[i]), GA_OK);
    *hole0 = p[0];
    ASSERT_HEALTHY(a);
    return a;
}

/* A bin cut into slices: its slice map, a slice's lowest chunk, the bin's lowest chunk and a
 * chunk filed in the wrong slice are all checked. 200 holes of distinct sizes in one ranged bin
 * (4 MiB to 4 MiB + 128 granules), freed in address order so each insertion descends. */
START_TEST(test_check_sees_slice_damage)
{
    enum { N = 200 };
    uintptr_t sep[N], hole[N];
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, N * (4 * MIB + 128 * GA_ALIGN) + 1 * MIB, 0, 0, 0);
    for (int i = 0; i < N; i++) {
        sep[i] = must_alloc(a, GA_ALIGN);
        hole[i] = must_alloc(a, 4 * MIB + (size_t)((i * 37) % 128) * GA_ALIGN);
    }
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(ga_free(a, hole[i]), GA_OK);
    ga_bin_t *bin = &a->bins[ga_bin_of(4 * MIB)];
    ck_assert_ptr_nonnull(ga_bin_sub(bin));
    ASSERT_HEALTHY(a);
    ga_subbins_t *sub = ga_bin_sub(bin);
    unsigned s = (unsigned)__builtin_ctzll(sub->map);
    sub->map ^= 1ull << s;
    expect_failure(a, "slice map bit cleared");
    sub->map ^= 1ull << s;
    ga_chunk_t *min = bin->t.min;
    bin->t.min = sub->t[ga_msb64(sub->map)].min;
    expect_failure(a, "the bin's lowest chunk is not its lowest slice's");
    bin->t.min = min;
    ga_tree_t *t = &sub->t[s], *u = &sub->t[ga_msb64(sub->map)];
    ga_chunk_t *c = t->min;
    ga_tree_remove(t, c);
    ga_tree_insert(u, c);
    expect_failure(a, "a chunk filed in the wrong slice");
    ga_tree_remove(u, c);
    ga_tree_insert(t, c);
    bin->t.min = sub->t[__builtin_ctzll(sub->map)].min;
    ASSERT_HEALTHY(a);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(ga_free(a, sep[i]), GA_OK);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_check_sees_bin_tree_damage)
{
    fake_backend_t f;
    uintptr_t hole0;
    ga_arena_t *a = holey_arena(&f, &hole0);
    ga_bin_t *bin = &a->bins[ga_bin_of(4 * KIB)];
    ga_rbnode_t **root = &bin->t.root;
    ga_rbnode_t *r = *root, *l = r->left, *rt = r->right;
    ck_assert(l && rt);
    r->left = rt, r->right = l;
    expect_failure(a, "bin tree children swapped (order)");
    r->left = l, r->right = rt;
    l->parent_color ^= 1;
    expect_failure(a, "bin tree node recoloured (black height)");
    l->parent_color ^= 1;
    uintptr_t pc = l->parent_color;
    l->parent_color = (uintptr_t)rt | (pc & 1);
    expect_failure(a, "bin tree parent link");
    l->parent_color = pc;
    ga_rbnode_t *leaf = ga_rb_last(r);
    leaf->right = r;
    expect_failure(a, "bin tree cycle");
    leaf->right = NULL;
    ga_chunk_t *min = bin->t.min;
    bin->t.min = ga_bin_chunk(rt);
    expect_failure(a, "a bin's lowest chunk is not its leftmost");
    bin->t.min = min;
    ga_chunk_t *c = ga_bin_chunk(rt);
    ga_rb_erase(root, rt);
    expect_failure(a, "free chunk missing from its bin tree");
    ga_bin_insert(a, c);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_check_sees_run_and_table_damage)
{
    fake_backend_t f;
    uintptr_t hole0;
    ga_arena_t *a = holey_arena(&f, &hole0);
    ga_region_t *reg = a->regions[0];
    ga_rbnode_t *root = reg->runs;
    ck_assert(root && root->left && root->right);
    ga_run_t *run = ga_run_of(root);
    ga_chunk_t *first = run->first;
    run->first = first->next_phys;
    expect_failure(a, "run starting one chunk late");
    run->first = first;
    root->left->parent_color ^= 1;
    expect_failure(a, "run tree node recoloured");
    root->left->parent_color ^= 1;
    ga_rbnode_t *l = root->left;
    root->left = root->right, root->right = l;
    expect_failure(a, "run tree children swapped");
    root->right = root->left, root->left = l;
    /* the live table: an entry moved where no probe from its home reaches it, a slot naming a
     * free chunk, then a wrong count */
    ga_livetab_t *t = &a->live;
    size_t i = 0;
    while (!t->slots[i].chunk)
        i++;
    size_t far = (i + (t->mask + 1) / 2) & t->mask;
    while (t->slots[far].chunk || t->slots[(far - 1) & t->mask].chunk)
        far = (far + 1) & t->mask; /* an empty slot after an empty one: outside every probe run */
    t->slots[far] = t->slots[i];
    t->slots[i].chunk = NULL;
    expect_failure(a, "live table entry out of its probe run");
    t->slots[i] = t->slots[far];
    t->slots[far].chunk = NULL;
    ga_chunk_t *live = t->slots[i].chunk;
    live->run_free |= 1;
    expect_failure(a, "live table entry naming a free chunk");
    live->run_free &= ~(uintptr_t)1;
    t->count++;
    expect_failure(a, "live table count off by one");
    t->count--;
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_check_report_is_bounded)
{
    fake_backend_t f;
    uintptr_t p[6];
    ga_arena_t *a = busy_arena(&f, p);
    a->stats.in_use++;
    a->stats.allocs++;
    a->stats.regions++;
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    ck_assert_int_ge(ga_check(a, tiny, sizeof tiny), 3);
    ck_assert_uint_lt(strlen(tiny), sizeof tiny);
    ck_assert_int_ge(ga_check(a, NULL, 0), 3);
    ga_arena_destroy(a);
}
END_TEST

/* A fixed workload (small allocations, frees, and a growth-forcing 3 MiB one every 50 steps)
 * with host allocations failing from the n-th on: every failure is GA_ENOHOST. */
static void oom_workload(ga_arena_t *a)
{
    uintptr_t p[600];
    int np = 0;
    for (int i = 0; i < 600; i++) {
        size_t size = i % 50 == 49 ? 3 * MIB : 512 * (size_t)(1 + (i * 37) % 64);
        ga_stats_t before = stats_of(a);
        ga_status_t st = ga_alloc(a, size, &p[np]);
        if (st == GA_OK) {
            np++;
        } else {
            ga_stats_t after = stats_of(a);
            /* the backend has no limit: a failure is the host's, with its own status, and no
             * fragmentation (helper-47 F1: it was GA_ENOMEM, explained as the device's) */
            REQUIRE(st == GA_ENOHOST, "ga_alloc: %s", ga_status_str(st));
            REQUIRE_EQ(after.failed_allocs, before.failed_allocs + 1);
            REQUIRE_EQ(after.frag_failures, before.frag_failures);
            REQUIRE_EQ(after.live, before.live);
            REQUIRE_EQ(after.in_use, before.in_use);
        }
        ASSERT_HEALTHY(a);
        if (i % 3 == 2 && np)
            ASSERT_STATUS(ga_free(a, p[--np]), GA_OK);
    }
}

START_TEST(test_host_oom_everywhere)
{
    int failed_somewhere = 0;
    for (long n = 0; n < 150; n++) {
        fake_backend_t f;
        fake_init(&f);
        ga_backend_t b = fake_backend(&f);
        ga_config_t cfg = {.initial = 1 * MIB, .grow = 1};
        ga_status_t st = GA_OK;
        ga_host_fail_after = n;
        ga_arena_t *a = ga_arena_create(&b, &cfg, &st);
        if (!a) {
            ga_host_fail_after = -1;
            REQUIRE(st == GA_ENOHOST, "create: %s", ga_status_str(st));
            REQUIRE_EQ(f.outstanding, 0);
            continue;
        }
        oom_workload(a);
        failed_somewhere |= ga_host_fail_after == 0;
        ga_host_fail_after = -1;
        must_alloc(a, 4096); /* host memory is back: the arena works again */
        ASSERT_HEALTHY(a);
        ga_arena_destroy(a);
        REQUIRE_EQ(f.outstanding, 0);
    }
    ck_assert_msg(failed_somewhere, "no host allocation was ever failed: the hook is not wired");
}
END_TEST

/* Issue 8 item 9: a replay region of terabytes once cost a bitmap of 1/4096 of its bytes (1 GiB
 * for 2^42) and a ga_check that walked all of it. Now host memory and checking follow the number
 * of chunks: thousands of operations of about 2^40 bytes in a 2^42-byte region, with ga_check,
 * interior lookups and bad frees after each, must ask the host for almost nothing. */
START_TEST(test_huge_region_host_memory_follows_chunks)
{
    uint64_t before = __atomic_load_n(&ga_host_bytes, __ATOMIC_RELAXED);
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, (size_t)1 << 42, 0, 0, 0);
    uintptr_t p[64];
    size_t sz[64], n = 0;
    uint64_t rng = 0x42;
    int ooms = 0;
    for (int step = 0; step < 4000; step++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        size_t size = ((size_t)1 << 38) + (size_t)((rng >> 17) % ((size_t)1 << 40));
        if (n && ((rng >> 61) < 3 || n == 64)) {
            size_t i = (size_t)(rng >> 8) % n;
            ASSERT_STATUS(ga_free(a, p[i] + sz[i] / 2), GA_EINTERIOR);
            ASSERT_STATUS(ga_free(a, p[i]), GA_OK);
            ASSERT_STATUS(ga_free(a, p[i] + sz[i] / 3), GA_EDOUBLE);
            p[i] = p[--n], sz[i] = sz[n];
        } else if (ga_alloc(a, size, &p[n]) == GA_OK) {
            sz[n] = ga_round_size(size);
            uintptr_t b = 0;
            ASSERT_STATUS(ga_lookup(a, p[n] + sz[n] - 1, &b, NULL), GA_OK);
            REQUIRE_EQ(b, p[n]);
            n++;
        } else {
            ooms++;
        }
        ASSERT_HEALTHY(a);
    }
    ck_assert_int_gt(ooms, 100); /* the region was full often: many chunks, large ones */
    uint64_t used = __atomic_load_n(&ga_host_bytes, __ATOMIC_RELAXED) - before;
    ck_assert_msg(used < 256 * KIB, "host memory asked for: %lu bytes", (unsigned long)used);
    ga_arena_destroy(a);
}
END_TEST

/* A live table of 2 MiB and more (past 16,384 live blocks at an eighth full) is made on its own
 * 2 MiB-aligned block offered for huge pages (issue 9: at 100,000 holes a probe of the 4 MiB
 * table took a TLB miss). Its doubling past that size keeps every entry, fails cleanly when the
 * host refuses the block, and shrinks back to nothing at destroy. */
START_TEST(test_live_table_past_2mib)
{
    enum { N = 70000 };
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, (size_t)N * 1024, 0, 0, 0);
    uintptr_t *p = malloc(N * sizeof *p);
    ck_assert_ptr_nonnull(p);
    size_t n = 0;
    for (; n < 65536; n++) /* the table is 512 Ki slots (4 MiB) from the 32,769th on */
        p[n] = must_alloc(a, 512);
    ga_host_fail_after = 0; /* the doubling to 8 MiB is refused: nothing changes */
    uintptr_t x = 0;
    ga_status_t st = ga_alloc(a, 512, &x);
    ga_host_fail_after = -1;
    ASSERT_STATUS(st, GA_ENOHOST);
    ga_stats_t s;
    ga_get_stats(a, &s);
    REQUIRE_EQ(s.live, 65536);
    for (; n < N; n++)
        p[n] = must_alloc(a, 512);
    ASSERT_HEALTHY(a);
    for (size_t i = 0; i < N; i += 2) { /* every other block, by its base; then the rest */
        ASSERT_STATUS(ga_free(a, p[i] + 256), GA_EINTERIOR);
        ASSERT_STATUS(ga_free(a, p[i]), GA_OK);
        ASSERT_STATUS(ga_free(a, p[i]), GA_EDOUBLE);
    }
    ASSERT_HEALTHY(a);
    for (size_t i = 1; i < N; i += 2)
        ASSERT_STATUS(ga_free(a, p[i]), GA_OK);
    ga_get_stats(a, &s);
    REQUIRE_EQ(s.live, 0);
    REQUIRE_EQ(s.in_use, 0);
    ASSERT_HEALTHY(a);
    free(p);
    ga_arena_destroy(a);
}
END_TEST

Suite *check_suite(void)
{
    Suite *s = suite_create("check");
    TCase *tc = tcase_create("walker");
    tcase_add_test(tc, test_check_sees_stats_drift);
    tcase_add_test(tc, test_check_sees_structure_damage);
    tcase_add_test(tc, test_check_sees_slice_damage);
    tcase_add_test(tc, test_check_report_is_bounded);
    tcase_add_test(tc, test_check_sees_bin_tree_damage);
    tcase_add_test(tc, test_check_sees_run_and_table_damage);
    suite_add_tcase(s, tc);
    TCase *oom = tcase_create("host_oom");
    tcase_set_timeout(oom, 60);
    tcase_add_test(oom, test_host_oom_everywhere);
    tcase_add_test(oom, test_huge_region_host_memory_follows_chunks);
    tcase_add_test(oom, test_live_table_past_2mib);
    suite_add_tcase(s, oom);
    return s;
}
