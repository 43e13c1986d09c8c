/* An outside check of issues 2 and 9 through the public pool interface (ga_pool.h) and the replay
 * (ga_replay.h), written from the headers and the README alone (helper-134, 2026-12-07).
 *
 * The backend is this file's: real host memory (aligned_alloc for arena, grow and platform; an
 * mmap'ed PROT_NONE range whose granules are made readable and writable by map for vmm), so
 * every live block gets its own bytes written and read back at its free (a block placed on an
 * unmapped vmm granule, or two blocks that overlap, show up as a fault or a wrong byte), and the
 * backend counts what it holds, so the pool's statistics are compared with the backend's own
 * books. The backend can refuse its Nth reserve (vmm: its Nth map or range) and the allocator's
 * host memory can fail from the Nth call (ga_host_fail_after, the hook the allocator's own tests
 * use). After every step: ga_pool_check clean, the statistics add up, every answer is one the
 * header allows. The replay's figures are compared with a best-fit model in
 * test_outside134_replay.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "ga_pool.h"
#include "ga_replay.h"
#include "testutil.h"

extern long ga_host_fail_after; /* internal.h: the allocator's host-failure hook for tests */

static uint64_t rs;
static uint64_t rnd(void) { return tu_splitmix(&rs); }

/* Backend ------------------------------------------------------------------------------------- */
#define GRAN ((size_t)64 * KIB)
#define MAXR 4096
typedef struct {
    long refuse_at;   /* refuse the call with this number (reserve, va_reserve or map); -1 never */
    long calls;       /* reserve + va_reserve + map calls so far */
    long refused;
    size_t held;      /* bytes of reserve ranges not released */
    size_t mapped;    /* bytes of granules mapped */
    size_t va_held;
    unsigned nheld;   /* reserve ranges held */
    int refuse_release; /* release answers non-zero, keeping the range */
    struct {
        uintptr_t base;
        size_t size;
        void *mem;
    } r[MAXR];
} hb_t;
static hb_t hb;

static int refuse_now(void)
{
    long n = hb.calls++;
    if (hb.refuse_at >= 0 && n == hb.refuse_at) {
        hb.refused++;
        return 1;
    }
    return 0;
}
static int hb_reserve(void *ctx, size_t size, uintptr_t *base)
{
    (void)ctx;
    if (refuse_now())
        return 1;
    if (size > ((size_t)1 << 32))
        return 1; /* more host memory than a test should take */
    void *m = aligned_alloc(GA_ALIGN, (size + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN);
    if (!m)
        return 1;
    for (unsigned i = 0; i < MAXR; i++)
        if (!hb.r[i].mem) {
            hb.r[i].mem = m, hb.r[i].base = (uintptr_t)m, hb.r[i].size = size;
            hb.held += size, hb.nheld++;
            *base = (uintptr_t)m;
            return 0;
        }
    free(m);
    return 1;
}
static int hb_release(void *ctx, uintptr_t base, size_t size)
{
    (void)ctx;
    if (hb.refuse_release)
        return 1;
    for (unsigned i = 0; i < MAXR; i++)
        if (hb.r[i].mem && hb.r[i].base == base) {
            ck_assert_msg(hb.r[i].size == size, "release of %#lx with size %zu, reserved %zu",
                          (unsigned long)base, size, hb.r[i].size);
            free(hb.r[i].mem);
            hb.r[i].mem = NULL;
            hb.held -= size, hb.nheld--;
            return 0;
        }
    ck_abort_msg("release of %#lx, which the backend never gave", (unsigned long)base);
    return 1;
}
static int hb_va_reserve(void *ctx, size_t size, uintptr_t *base)
{
    (void)ctx;
    if (refuse_now())
        return 1;
    void *m = mmap(NULL, size + GRAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return 1;
    uintptr_t b = ((uintptr_t)m + GRAN - 1) & ~(uintptr_t)(GRAN - 1);
    for (unsigned i = 0; i < MAXR; i++)
        if (!hb.r[i].mem) {
            hb.r[i].mem = m, hb.r[i].base = b, hb.r[i].size = size;
            hb.va_held += size;
            *base = b;
            return 0;
        }
    munmap(m, size + GRAN);
    return 1;
}
static void hb_va_release(void *ctx, uintptr_t base, size_t size)
{
    (void)ctx;
    for (unsigned i = 0; i < MAXR; i++)
        if (hb.r[i].mem && hb.r[i].base == base) {
            ck_assert_msg(hb.r[i].size == size, "va_release size %zu, reserved %zu", size,
                          hb.r[i].size);
            munmap(hb.r[i].mem, size + GRAN);
            hb.r[i].mem = NULL;
            hb.va_held -= size;
            return;
        }
    ck_abort_msg("va_release of %#lx, never reserved", (unsigned long)base);
}
static uint64_t next_handle = 1;
static int hb_map(void *ctx, uintptr_t addr, size_t size, uint64_t *handle)
{
    (void)ctx;
    ck_assert_msg(size == GRAN && addr % GRAN == 0, "map of %#lx + %zu", (unsigned long)addr, size);
    if (refuse_now())
        return 1;
    ck_assert_msg(mprotect((void *)addr, size, PROT_READ | PROT_WRITE) == 0, "mprotect");
    hb.mapped += size;
    *handle = next_handle++;
    return 0;
}
static void hb_unmap(void *ctx, uintptr_t addr, size_t size, uint64_t handle)
{
    (void)ctx;
    ck_assert_msg(handle != 0 && size == GRAN, "unmap handle %lu size %zu", (unsigned long)handle,
                  size);
    /* the bytes go with the memory: a block that still lay here reads back wrong */
    madvise((void *)addr, size, MADV_DONTNEED);
    mprotect((void *)addr, size, PROT_NONE);
    hb.mapped -= size;
}

static ga_pool_backend_t hb_backend(void)
{
    ga_pool_backend_t b = {.reserve = hb_reserve, .release = hb_release,
                           .va_reserve = hb_va_reserve, .va_release = hb_va_release,
                           .map = hb_map, .unmap = hb_unmap, .granularity = GRAN};
    return b;
}
static void hb_reset(long refuse_at)
{
    memset(&hb, 0, sizeof hb);
    hb.refuse_at = refuse_at;
}

/* vmm's keep: 4 granules, or 0 (nothing kept, nothing parked) */
static size_t vmm_keep = 4 * GRAN;

/* Off until fixed (vmm_stats.c is the lead's): with a keep, a parked block's bytes are in neither
 * in_use nor total_free, so in_use + total_free falls short of va_reserved by the parked bytes
 * (random_every_mode, vmm, step 2412: 26,361,344 + 174,900,224 of 201,326,592; the smallest case
 * is vmm_parked_bytes_are_free). Build with -DOUTSIDE134_VMM_PARKED_FREE=1 to run both. */
#ifndef OUTSIDE134_VMM_PARKED_FREE
#define OUTSIDE134_VMM_PARKED_FREE 1
#endif

static ga_pool_t *make_pool(ga_mode_t mode, size_t limit, ga_status_t *st)
{
    ga_pool_backend_t b = hb_backend();
    ga_pool_config_t c = {.mode = mode, .limit = limit};
    if (mode == GA_MODE_ARENA)
        c.initial = 4 * MIB, c.grow = 1;
    if (mode == GA_MODE_GROW)
        c.grow = 1, c.min_region = 1 * MIB;
    if (mode == GA_MODE_VMM)
        c.va_size = 64 * MIB, c.keep = vmm_keep;
    return ga_pool_create(&b, &c, st);
}

/* A workload -------------------------------------------------------------------------------- */
#define NLIVE 256
typedef struct {
    uintptr_t p;
    size_t size;
    uint64_t tag;
} blk_t;

static void fill(const blk_t *b)
{
    uint64_t *w = (uint64_t *)b->p;
    w[0] = b->tag;
    memcpy((char *)b->p + b->size - 8, &b->tag, 8);
}
static void verify(const blk_t *b, long step)
{
    uint64_t a, z;
    memcpy(&a, (void *)b->p, 8);
    memcpy(&z, (char *)b->p + b->size - 8, 8);
    REQUIRE(a == b->tag && z == b->tag, "step %ld: block %#lx (%zu B) reads %#lx/%#lx, wrote %#lx",
            step, (unsigned long)b->p, b->size, (unsigned long)a, (unsigned long)z,
            (unsigned long)b->tag);
}

static size_t rounded(size_t s) { return (s + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN; }

static size_t cur_limit; /* the workload's limit, 0 none */

static void pool_healthy(ga_pool_t *p, ga_mode_t mode, long step, uint64_t live_bytes,
                         uint64_t live_n, uint64_t peak)
{
    char rep[512];
    int n = ga_pool_check(p, rep, sizeof rep);
    REQUIRE(n == 0, "%s step %ld: ga_pool_check: %d failures: %s", ga_mode_name(mode), step, n, rep);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    REQUIRE(s.in_use == live_bytes, "%s step %ld: in_use %lu, model %lu", ga_mode_name(mode), step,
            (unsigned long)s.in_use, (unsigned long)live_bytes);
    REQUIRE(s.live == live_n && s.allocs - s.frees == live_n,
            "%s step %ld: live %lu allocs %lu frees %lu, model %lu", ga_mode_name(mode), step,
            (unsigned long)s.live, (unsigned long)s.allocs, (unsigned long)s.frees,
            (unsigned long)live_n);
    REQUIRE(s.peak_in_use == peak, "%s step %ld: peak_in_use %lu, model %lu", ga_mode_name(mode),
            step, (unsigned long)s.peak_in_use, (unsigned long)peak);
    REQUIRE(s.peak_reserved >= s.reserved, "%s step %ld: peak_reserved < reserved",
            ga_mode_name(mode), step);
    REQUIRE(s.largest_free <= s.total_free, "%s step %ld: largest_free > total_free",
            ga_mode_name(mode), step);
    REQUIRE(!cur_limit || (s.peak_reserved <= cur_limit && hb.held <= cur_limit &&
                           hb.mapped <= cur_limit),
            "%s step %ld: limit %zu passed: peak_reserved %lu, backend %zu + %zu mapped",
            ga_mode_name(mode), step, cur_limit, (unsigned long)s.peak_reserved, hb.held,
            hb.mapped);
    switch (mode) {
    case GA_MODE_ARENA:
    case GA_MODE_GROW:
        REQUIRE(s.in_use + s.total_free == s.reserved,
                "%s step %ld: in_use %lu + total_free %lu != reserved %lu", ga_mode_name(mode),
                step, (unsigned long)s.in_use, (unsigned long)s.total_free,
                (unsigned long)s.reserved);
        REQUIRE(s.reserved == hb.held && s.regions == hb.nheld,
                "%s step %ld: reserved %lu regions %lu, backend holds %zu in %u",
                ga_mode_name(mode), step, (unsigned long)s.reserved, (unsigned long)s.regions,
                hb.held, hb.nheld);
        break;
    case GA_MODE_PLATFORM:
        REQUIRE(s.reserved == s.in_use && s.total_free == 0 && s.live == hb.nheld,
                "platform step %ld: reserved %lu in_use %lu free %lu, backend ranges %u", step,
                (unsigned long)s.reserved, (unsigned long)s.in_use, (unsigned long)s.total_free,
                hb.nheld);
        break;
    case GA_MODE_VMM:
        REQUIRE(s.reserved == hb.mapped, "vmm step %ld: reserved %lu, backend mapped %zu", step,
                (unsigned long)s.reserved, hb.mapped);
        REQUIRE(s.va_reserved == hb.va_held, "vmm step %ld: va_reserved %lu, backend %zu", step,
                (unsigned long)s.va_reserved, hb.va_held);
        REQUIRE(s.in_use + s.total_free == s.va_reserved ||
                    (!OUTSIDE134_VMM_PARKED_FREE && vmm_keep &&
                     s.in_use + s.total_free < s.va_reserved),
                "vmm step %ld: in_use %lu + total_free %lu != va_reserved %lu", step,
                (unsigned long)s.in_use, (unsigned long)s.total_free,
                (unsigned long)s.va_reserved);
        REQUIRE(s.kept <= vmm_keep && s.kept <= s.reserved, "vmm step %ld: kept %lu", step,
                (unsigned long)s.kept);
        break;
    default:
        break;
    }
}

/* Runs `steps` random allocs and frees on a pool of `mode`; the backend refuses call
 * `refuse_at` (-1 none) and the allocator's host memory fails from its `host_at`-th call for
 * `host_for` steps (-1 none). Every failure must be one the header allows for what was done. */
static void workload(ga_mode_t mode, uint64_t seed, int steps, size_t limit, long refuse_at,
                     long host_at, int host_for)
{
    hb_reset(refuse_at);
    cur_limit = limit;
    rs = seed;
    ga_status_t st = GA_EINVAL;
    ga_pool_t *p = make_pool(mode, limit, &st);
    if (!p) {
        /* only arena preallocates: a refused first region is GA_ENOMEM, nothing held */
        REQUIRE(mode == GA_MODE_ARENA && refuse_at == 0 && st == GA_ENOMEM,
                "%s: create failed: %s", ga_mode_name(mode), ga_status_str(st));
        REQUIRE(hb.held == 0, "failed create holds %zu", hb.held);
        return;
    }
    blk_t live[NLIVE];
    unsigned n = 0;
    uint64_t live_bytes = 0, peak = 0;
    int host_left = -1;
    for (long step = 0; step < steps; step++) {
        if (host_at >= 0 && step == host_at / 4)
            ga_host_fail_after = host_at % 4, host_left = host_for;
        int do_alloc = n == 0 || (n < NLIVE && rnd() % 100 < 55);
        if (do_alloc) {
            size_t size;
            switch (rnd() % 4) {
            case 0: size = 1 + rnd() % 4096; break;
            case 1: size = (1 + rnd() % 64) * GA_ALIGN; break;
            case 2: size = 1 + rnd() % (256 * KIB); break;
            default: size = (1 + rnd() % 8) * GRAN - (rnd() % 2) * GA_ALIGN; break;
            }
            if (size < 16)
                size = 16;
            ga_stats_t before;
            ga_pool_stats(p, &before);
            uintptr_t out = 0;
            int fits = ga_pool_fits(p, size);
            long calls = hb.calls;
            size_t held = hb.held, mapped = hb.mapped;
            st = ga_pool_alloc(p, size, &out);
            REQUIRE(!fits || mode != GA_MODE_PLATFORM, "platform fits");
            REQUIRE(!fits || (st == GA_OK && hb.calls == calls && hb.held == held &&
                              hb.mapped <= mapped) ||
                        (st == GA_ENOHOST && ga_host_fail_after == 0),
                    "%s step %ld: fits(%zu) said 1, then %s with %ld backend calls",
                    ga_mode_name(mode), step, size, ga_status_str(st), hb.calls - calls);
            if (st == GA_OK) {
                REQUIRE(out % GA_ALIGN == 0, "unaligned %#lx", (unsigned long)out);
                blk_t b = {out, size, rnd() | 1};
                fill(&b);
                live[n++] = b;
                live_bytes += rounded(size);
                if (live_bytes > peak)
                    peak = live_bytes;
            } else {
                REQUIRE(st == GA_ENOMEM || st == GA_ENOHOST, "%s step %ld: alloc(%zu): %s",
                        ga_mode_name(mode), step, size, ga_status_str(st));
                REQUIRE(st != GA_ENOHOST || ga_host_fail_after == 0,
                        "%s step %ld: GA_ENOHOST with host memory there", ga_mode_name(mode), step);
                REQUIRE(st != GA_ENOMEM || limit || hb.refused || ga_host_fail_after == 0,
                        "%s step %ld: GA_ENOMEM of %zu with no limit and no refusal",
                        ga_mode_name(mode), step, size);
                ga_stats_t after;
                ga_pool_stats(p, &after);
                REQUIRE(after.in_use == before.in_use && after.live == before.live,
                        "%s step %ld: a failed alloc changed in_use/live", ga_mode_name(mode), step);
            }
        } else {
            unsigned i = (unsigned)(rnd() % n);
            verify(&live[i], step);
            size_t fs = 0;
            st = ga_pool_free(p, live[i].p, &fs);
            REQUIRE(st == GA_OK, "%s step %ld: free: %s", ga_mode_name(mode), step,
                    ga_status_str(st));
            REQUIRE(fs == rounded(live[i].size), "free size %zu of %zu", fs, live[i].size);
            live_bytes -= fs;
            live[i] = live[--n];
        }
        if (rnd() % 150 == 0) { /* a trim midway gives back what it says, and only idle memory */
            size_t held = hb.held, mapped = hb.mapped, idle = ga_pool_idle(p);
            size_t back = ga_pool_trim(p);
            REQUIRE(back == (held - hb.held) + (mapped - hb.mapped),
                    "%s step %ld: trim said %zu, the backend got back %zu + %zu mapped",
                    ga_mode_name(mode), step, back, held - hb.held, mapped - hb.mapped);
            REQUIRE(mode == GA_MODE_VMM || back == idle, "%s step %ld: trim %zu, idle said %zu",
                    ga_mode_name(mode), step, back, idle);
            for (unsigned i = 0; i < n; i++)
                verify(&live[i], step);
        }
        if (host_left >= 0 && host_left-- == 0)
            ga_host_fail_after = -1;
        pool_healthy(p, mode, step, live_bytes, n, peak);
        if (step % 97 == 0) { /* lookups of every live block, interior too */
            uintptr_t bases[NLIVE];
            size_t nb = ga_pool_live_bases(p, bases, NLIVE);
            REQUIRE(nb == n, "%s step %ld: live_bases %zu, live %u", ga_mode_name(mode), step, nb,
                    n);
            for (unsigned i = 0; i < n; i++) {
                size_t j = 0;
                while (j < nb && bases[j] != live[i].p)
                    j++;
                REQUIRE(j < nb, "%s step %ld: live_bases lacks %#lx", ga_mode_name(mode), step,
                        (unsigned long)live[i].p);
                REQUIRE(ga_pool_owns(p, live[i].p), "owns");
            }
            for (unsigned i = 0; i < n; i++) {
                uintptr_t base = 0;
                size_t sz = 0;
                /* platform answers exact bases only (the driver knows its own ranges) */
                uintptr_t q = mode == GA_MODE_PLATFORM ? live[i].p : live[i].p + live[i].size - 1;
                st = ga_pool_lookup(p, q, &base, &sz);
                REQUIRE(st == GA_OK && base == live[i].p && sz == rounded(live[i].size),
                        "%s step %ld: lookup of the last byte of %#lx: %s", ga_mode_name(mode),
                        step, (unsigned long)live[i].p, ga_status_str(st));
                REQUIRE(ga_pool_live_size(p, live[i].p) == rounded(live[i].size), "live_size");
            }
        }
    }
    ga_host_fail_after = -1;
    for (unsigned i = 0; i < n; i++) {
        verify(&live[i], steps);
        ASSERT_STATUS(ga_pool_free(p, live[i].p, NULL), GA_OK);
    }
    pool_healthy(p, mode, steps, 0, 0, peak);
    ga_pool_trim(p);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    if (mode != GA_MODE_VMM) /* vmm keeps its range; every granule goes back */
        REQUIRE(s.reserved == 0 && hb.held == 0, "%s: after trim reserved %lu, backend %zu",
                ga_mode_name(mode), (unsigned long)s.reserved, hb.held);
    else
        REQUIRE(s.reserved == 0 && hb.mapped == 0 && s.kept == 0,
                "vmm: after trim mapped %lu (backend %zu), kept %lu", (unsigned long)s.reserved,
                hb.mapped, (unsigned long)s.kept);
    ga_pool_destroy(p);
    REQUIRE(hb.held == 0 && hb.mapped == 0 && hb.va_held == 0,
            "%s: destroy left held %zu mapped %zu va %zu", ga_mode_name(mode), hb.held, hb.mapped,
            hb.va_held);
}

START_TEST(random_every_mode)
{
    for (int m = 0; m < GA_MODE_COUNT; m++)
        for (uint64_t seed = 1; seed <= 3; seed++)
            workload((ga_mode_t)m, seed * 7919 + (uint64_t)m, 3000, 0, -1, -1, 0);
    vmm_keep = 0; /* nothing parked: in_use + total_free == va_reserved must hold exactly */
    for (uint64_t seed = 1; seed <= 3; seed++)
        workload(GA_MODE_VMM, seed * 31, 3000, 0, -1, -1, 0);
    vmm_keep = 4 * GRAN;
}
END_TEST

START_TEST(random_every_mode_limited)
{
    for (int m = 0; m < GA_MODE_COUNT; m++)
        workload((ga_mode_t)m, 42 + (uint64_t)m, 3000, 8 * MIB, -1, -1, 0);
}
END_TEST

/* The backend refuses its Nth call (reserve, range or map), for N over the first 40 calls. */
START_TEST(backend_refuses_nth_call)
{
    for (int m = 0; m < GA_MODE_COUNT; m++)
        for (long k = 0; k < 40; k++)
            workload((ga_mode_t)m, 1000 + (uint64_t)k, 600, 0, k, -1, 0);
}
END_TEST

/* The allocator's host memory fails from its Nth call for a few steps, at many points. */
START_TEST(host_memory_fails_midway)
{
    for (int m = 0; m < GA_MODE_COUNT; m++)
        for (long k = 0; k < 400; k += 7)
            workload((ga_mode_t)m, 500 + (uint64_t)k, 400, 0, -1, k, 5);
}
END_TEST

/* Bad input, every mode: each answer distinct and documented, the pool unchanged. */
START_TEST(bad_input_every_mode)
{
    for (int m = 0; m < GA_MODE_COUNT; m++) {
        ga_mode_t mode = (ga_mode_t)m;
        hb_reset(-1);
        ga_status_t st;
        ga_pool_t *p = make_pool(mode, 0, &st);
        ck_assert_msg(p, "%s: create: %s", ga_mode_name(mode), ga_status_str(st));
        uintptr_t a = 0, b = 0, out = 7;
        ASSERT_STATUS(ga_pool_alloc(p, 3 * GA_ALIGN, &a), GA_OK);
        ASSERT_STATUS(ga_pool_alloc(p, 5 * GA_ALIGN, &b), GA_OK);
        ga_stats_t s0;
        ga_pool_stats(p, &s0);
        ck_assert_msg(ga_pool_alloc(p, 64, NULL) == GA_EINVAL, "%s: NULL out", ga_mode_name(mode));
        ck_assert_msg(ga_pool_alloc(p, 0, &out) == GA_EINVAL, "%s: size 0", ga_mode_name(mode));
        for (size_t d = 0; d < GA_ALIGN - 1; d += 97) {
            st = ga_pool_alloc(p, SIZE_MAX - d, &out);
            ck_assert_msg(st == GA_ETOOBIG, "%s: SIZE_MAX - %zu: %s", ga_mode_name(mode), d,
                          ga_status_str(st));
        }
        st = ga_pool_alloc(p, SIZE_MAX - GA_ALIGN + 1, &out); /* rounds to SIZE_MAX+1-512: fits */
        ck_assert_msg(st == GA_ENOMEM, "%s: SIZE_MAX - 511: %s", ga_mode_name(mode),
                      ga_status_str(st));
        st = ga_pool_alloc(p, SIZE_MAX / 2 + 1, &out);
        ck_assert_msg(st == GA_ENOMEM, "%s: 2^63: %s", ga_mode_name(mode), ga_status_str(st));
        ck_assert_msg(out == 7, "%s: a failed alloc wrote its out-parameter", ga_mode_name(mode));
        st = ga_pool_free(p, a + GA_ALIGN, NULL);
        ck_assert_msg(st == GA_EINTERIOR || (mode == GA_MODE_PLATFORM && st == GA_ENOTOWNED),
                      "%s: interior free: %s", ga_mode_name(mode), ga_status_str(st));
        st = ga_pool_free(p, 0, NULL);
        ck_assert_msg(st == GA_ENOTOWNED, "%s: free(0): %s", ga_mode_name(mode), ga_status_str(st));
        int local;
        st = ga_pool_free(p, (uintptr_t)&local, NULL);
        ck_assert_msg(st == GA_ENOTOWNED, "%s: foreign free: %s", ga_mode_name(mode),
                      ga_status_str(st));
        uintptr_t base = 1;
        size_t sz = 1;
        st = ga_pool_lookup(p, (uintptr_t)&local, &base, &sz);
        ck_assert_msg(st == GA_ENOTOWNED, "%s: foreign lookup: %s", ga_mode_name(mode),
                      ga_status_str(st));
        ck_assert_msg(ga_pool_live_size(p, a + GA_ALIGN) == 0, "live_size of interior");
        ck_assert_msg(ga_pool_lookup(p, a, NULL, NULL) == GA_OK, "%s: lookup with NULL outs",
                      ga_mode_name(mode));
        st = ga_pool_lookup(p, a + 1, &base, &sz);
        ck_assert_msg(mode == GA_MODE_PLATFORM ? st == GA_ENOTOWNED
                                               : st == GA_OK && base == a && sz == 3 * GA_ALIGN,
                      "%s: interior lookup: %s", ga_mode_name(mode), ga_status_str(st));
        ga_stats_t s1;
        ga_pool_stats(p, &s1);
        ck_assert_msg(s1.in_use == s0.in_use && s1.live == s0.live && s1.frees == s0.frees &&
                          s1.reserved == s0.reserved,
                      "%s: bad input changed the statistics", ga_mode_name(mode));
        ASSERT_STATUS(ga_pool_free(p, a, NULL), GA_OK);
        st = ga_pool_free(p, a, NULL);
        ck_assert_msg(st == GA_EDOUBLE || (mode == GA_MODE_PLATFORM && st == GA_ENOTOWNED),
                      "%s: double free: %s", ga_mode_name(mode), ga_status_str(st));
        char rep[256];
        ck_assert_msg(ga_pool_check(p, rep, sizeof rep) == 0, "%s: %s", ga_mode_name(mode), rep);
        ASSERT_STATUS(ga_pool_free(p, b, NULL), GA_OK);
        ga_pool_destroy(p);
        ck_assert_msg(hb.held == 0 && hb.mapped == 0 && hb.va_held == 0, "%s: destroy left some",
                      ga_mode_name(mode));
    }
}
END_TEST

/* Bad configurations: GA_EINVAL each, nothing reserved; a first region past the limit GA_ENOMEM. */
START_TEST(bad_config)
{
    hb_reset(-1);
    ga_pool_backend_t b = hb_backend();
    const ga_pool_config_t bad[] = {
        {.mode = (ga_mode_t)GA_MODE_COUNT},
        {.mode = GA_MODE_VMM},                             /* no va_size */
        {.mode = GA_MODE_VMM, .va_size = SIZE_MAX},        /* rounding would wrap */
        {.mode = GA_MODE_ARENA, .initial = SIZE_MAX},
        {.mode = GA_MODE_GROW, .grow = 1, .min_region = SIZE_MAX},
    };
    ga_status_t st = GA_OK;
    for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++) {
        st = GA_OK;
        ck_assert_msg(!ga_pool_create(&b, &bad[i], &st) && st == GA_EINVAL, "config %u: %s", i,
                      ga_status_str(st));
    }
    ck_assert_msg(!ga_pool_create(NULL, &bad[1], &st) && st == GA_EINVAL, "NULL backend");
    ck_assert_msg(!ga_pool_create(&b, NULL, &st) && st == GA_EINVAL, "NULL config");
    ga_pool_backend_t nog = b;
    nog.granularity = 3 * GA_ALIGN; /* not a power of two */
    ga_pool_config_t v = {.mode = GA_MODE_VMM, .va_size = MIB};
    ck_assert_msg(!ga_pool_create(&nog, &v, &st) && st == GA_EINVAL, "granularity 1536");
    ga_pool_config_t over = {.mode = GA_MODE_ARENA, .initial = 8 * MIB, .limit = 4 * MIB};
    ck_assert_msg(!ga_pool_create(&b, &over, &st) && st == GA_ENOMEM, "initial past the limit: %s",
                  ga_status_str(st));
    ck_assert_msg(hb.held == 0 && hb.va_held == 0 && hb.nheld == 0, "a refused create holds memory");
    uintptr_t o;
    ck_assert_msg(ga_pool_alloc(NULL, 1, &o) == GA_EINVAL && ga_pool_free(NULL, 1, NULL) == GA_EINVAL,
                  "NULL pool");
}
END_TEST

/* Releases the backend refuses: platform's free is GA_EHELD with the block live and unchanged, a
 * later free goes; an arena's or grow's trim keeps the empty region (ga_pool_refused_idle) and
 * gives it back at the next trim the backend takes. */
START_TEST(refused_releases)
{
    hb_reset(-1);
    ga_status_t st;
    ga_pool_t *p = make_pool(GA_MODE_PLATFORM, 0, &st);
    uintptr_t a;
    ASSERT_STATUS(ga_pool_alloc(p, 1000, &a), GA_OK);
    hb.refuse_release = 1;
    size_t sz = 7;
    ASSERT_STATUS(ga_pool_free(p, a, &sz), GA_EHELD);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_msg(s.live == 1 && s.in_use == 1024 && s.reserved == 1024 && s.frees == 0 &&
                      ga_pool_live_size(p, a) == 1024 && hb.nheld == 1,
                  "a refused platform free changed the pool: live %lu in_use %lu frees %lu",
                  (unsigned long)s.live, (unsigned long)s.in_use, (unsigned long)s.frees);
    hb.refuse_release = 0;
    ASSERT_STATUS(ga_pool_free(p, a, &sz), GA_OK);
    ck_assert_msg(sz == 1024 && hb.nheld == 0, "second free: size %zu, backend %u", sz, hb.nheld);
    char rep[256];
    ck_assert_msg(ga_pool_check(p, rep, sizeof rep) == 0, "%s", rep);
    ga_pool_destroy(p);

    for (int m = GA_MODE_ARENA; m <= GA_MODE_GROW; m++) {
        hb_reset(-1);
        p = make_pool((ga_mode_t)m, 0, &st);
        ASSERT_STATUS(ga_pool_alloc(p, 100 * KIB, &a), GA_OK);
        ASSERT_STATUS(ga_pool_free(p, a, NULL), GA_OK);
        size_t held = hb.held, largest = 0;
        ck_assert_msg(held > 0, "%s: nothing held", ga_mode_name((ga_mode_t)m));
        hb.refuse_release = 1;
        ck_assert_msg(ga_pool_trim(p) == 0, "%s: trim counted a refused release",
                      ga_mode_name((ga_mode_t)m));
        ck_assert_msg(ga_pool_refused_idle(p, &largest) == held && largest == held,
                      "%s: refused idle %zu (largest %zu), held %zu", ga_mode_name((ga_mode_t)m),
                      ga_pool_refused_idle(p, NULL), largest, held);
        ga_pool_stats(p, &s);
        ck_assert_msg(s.reserved == held && ga_pool_check(p, rep, sizeof rep) == 0,
                      "%s: reserved %lu held %zu %s", ga_mode_name((ga_mode_t)m),
                      (unsigned long)s.reserved, held, rep);
        ASSERT_STATUS(ga_pool_alloc(p, 100 * KIB, &a), GA_OK); /* the kept region serves */
        ck_assert_msg(hb.held == held, "%s: a new region beside a kept one",
                      ga_mode_name((ga_mode_t)m));
        ASSERT_STATUS(ga_pool_free(p, a, NULL), GA_OK);
        hb.refuse_release = 0;
        ck_assert_msg(ga_pool_trim(p) == held && hb.held == 0 && ga_pool_refused_idle(p, NULL) == 0,
                      "%s: the next trim left %zu", ga_mode_name((ga_mode_t)m), hb.held);
        ga_pool_destroy(p);
    }
}
END_TEST

#if OUTSIDE134_VMM_PARKED_FREE
/* The smallest reproduction of the parked bytes missing from total_free: 8 blocks of one granule
 * less 512 bytes, all freed, then one allocated and freed again (parked). Nothing is live, yet
 * total_free was va_reserved - 65,024. With a keep (the block parked) the free figures are those
 * of the same steps with none (nothing parked): every byte free, and the same largest free block
 * (the areas keep their regions until a trim, so it is not the whole range in either). */
START_TEST(vmm_parked_bytes_are_free)
{
    ga_stats_t s[2];
    for (int k = 0; k < 2; k++) {
        hb_reset(-1);
        vmm_keep = k ? 4 * GRAN : 0;
        ga_status_t st;
        ga_pool_t *p = make_pool(GA_MODE_VMM, 0, &st);
        uintptr_t x[8], a;
        for (int j = 0; j < 8; j++)
            ASSERT_STATUS(ga_pool_alloc(p, GRAN - GA_ALIGN, &x[j]), GA_OK);
        for (int j = 0; j < 8; j++)
            ASSERT_STATUS(ga_pool_free(p, x[j], NULL), GA_OK);
        ASSERT_STATUS(ga_pool_alloc(p, GRAN - GA_ALIGN, &a), GA_OK);
        ASSERT_STATUS(ga_pool_free(p, a, NULL), GA_OK);
        ga_pool_stats(p, &s[k]);
        ck_assert_msg(s[k].in_use == 0 && s[k].total_free == s[k].va_reserved,
                      "keep %d: nothing live: in_use %lu, total_free %lu, va_reserved %lu", k,
                      (unsigned long)s[k].in_use, (unsigned long)s[k].total_free,
                      (unsigned long)s[k].va_reserved);
        ga_pool_destroy(p);
    }
    ck_assert_msg(s[1].largest_free == s[0].largest_free,
                  "largest free %lu with the block parked, %lu with nothing parked",
                  (unsigned long)s[1].largest_free, (unsigned long)s[0].largest_free);
}
END_TEST
#endif

/* Placement, as the README says: exact best fit, lowest address among equal fits, immediate
 * coalescing. A grow pool of one 1 MiB region; holes of 4, 2, 2 and 3 blocks cut in it. */
START_TEST(best_fit_lowest_address)
{
    hb_reset(-1);
    ga_pool_backend_t be = hb_backend();
    ga_pool_config_t c = {.mode = GA_MODE_ARENA, .initial = 1 * MIB};
    ga_status_t st;
    ga_pool_t *p = ga_pool_create(&be, &c, &st);
    ck_assert_msg(p, "create: %s", ga_status_str(st));
    const size_t sizes[] = {4, 1, 2, 1, 2, 1, 3, 1};
    uintptr_t q[8];
    for (int i = 0; i < 8; i++)
        ASSERT_STATUS(ga_pool_alloc(p, sizes[i] * GA_ALIGN, &q[i]), GA_OK);
    for (int i = 1; i < 8; i++)
        ck_assert_msg(q[i] == q[i - 1] + sizes[i - 1] * GA_ALIGN, "not packed in order");
    ASSERT_STATUS(ga_pool_free(p, q[0], NULL), GA_OK); /* hole 4 */
    ASSERT_STATUS(ga_pool_free(p, q[4], NULL), GA_OK); /* hole 2 (higher) */
    ASSERT_STATUS(ga_pool_free(p, q[2], NULL), GA_OK); /* hole 2 (lower) */
    ASSERT_STATUS(ga_pool_free(p, q[6], NULL), GA_OK); /* hole 3 */
    uintptr_t x;
    ASSERT_STATUS(ga_pool_alloc(p, 2 * GA_ALIGN, &x), GA_OK);
    ck_assert_msg(x == q[2], "2 blocks went to %#lx, the lowest 2-hole is %#lx", (unsigned long)x,
                  (unsigned long)q[2]);
    ASSERT_STATUS(ga_pool_alloc(p, 3 * GA_ALIGN - 100, &x), GA_OK);
    ck_assert_msg(x == q[6], "3 blocks went to %#lx, the 3-hole is %#lx", (unsigned long)x,
                  (unsigned long)q[6]);
    ASSERT_STATUS(ga_pool_alloc(p, 1, &x), GA_OK); /* smallest fit: the remaining 2-hole */
    ck_assert_msg(x == q[4], "1 block went to %#lx, best fit %#lx", (unsigned long)x,
                  (unsigned long)q[4]);
    /* coalescing: free q[1] (between hole 4 and live q[2]) gives one hole of 5 */
    ASSERT_STATUS(ga_pool_free(p, q[1], NULL), GA_OK);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_msg(s.largest_free == 1 * MIB - (4 + 1 + 2 + 1 + 2 + 1 + 3 + 1) * GA_ALIGN,
                  "largest %lu", (unsigned long)s.largest_free);
    ASSERT_STATUS(ga_pool_alloc(p, 5 * GA_ALIGN, &x), GA_OK);
    ck_assert_msg(x == q[0], "5 blocks at %#lx, the merged hole is %#lx", (unsigned long)x,
                  (unsigned long)q[0]);
    char rep[256];
    ck_assert_msg(ga_pool_check(p, rep, sizeof rep) == 0, "%s", rep);
    ga_pool_destroy(p);
    ck_assert_msg(hb.held == 0, "destroy left %zu", hb.held);
}
END_TEST

Suite *outside134_suite(void)
{
    Suite *s = suite_create("outside134");
    TCase *tc = tcase_create("pools");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, random_every_mode);
    tcase_add_test(tc, random_every_mode_limited);
    tcase_add_test(tc, backend_refuses_nth_call);
    tcase_add_test(tc, host_memory_fails_midway);
    tcase_add_test(tc, bad_input_every_mode);
    tcase_add_test(tc, bad_config);
    tcase_add_test(tc, refused_releases);
#if OUTSIDE134_VMM_PARKED_FREE
    tcase_add_test(tc, vmm_parked_bytes_are_free);
#endif
    tcase_add_test(tc, best_fit_lowest_address);
    suite_add_tcase(s, tc);
    return s;
}
