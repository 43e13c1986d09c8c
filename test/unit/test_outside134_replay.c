/* An outside check of the replay (ga_replay.h) against a best-fit model written here, from the
 * header and the README alone (helper-134, 2026-12-07; the pools' part is test_outside134.c): 20
 * seeded traces of 400 events replayed in arena mode on a 256 KiB arena (failures, the first
 * out-of-memory, peaks, fragmentation as the model's) and in platform mode (every allocation
 * served, its peak that of every block live), and the smallest arena that runs each trace. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ga_pool.h"
#include "ga_replay.h"
#include "testutil.h"

static uint64_t rs;
static uint64_t rnd(void) { return tu_splitmix(&rs); }
static size_t rounded(size_t s) { return (s + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN; }

/* Replay against a model ---------------------------------------------------------------------- */
/* A best-fit model of one region of R bytes: chunks in address order. */
#define MCH 4096
typedef struct {
    size_t off, size;
    int used;
    uint64_t id;
} mch_t;
static mch_t mc[MCH];
static unsigned nmc;

static int model_alloc(size_t size, uint64_t id)
{
    size = rounded(size);
    int best = -1;
    for (unsigned i = 0; i < nmc; i++)
        if (!mc[i].used && mc[i].size >= size && (best < 0 || mc[i].size < mc[best].size))
            best = (int)i;
    if (best < 0)
        return 0;
    if (mc[best].size > size) {
        memmove(&mc[best + 1], &mc[best], (nmc - (unsigned)best) * sizeof *mc);
        nmc++;
        mc[best + 1].off = mc[best].off + size, mc[best + 1].size -= size;
        mc[best].size = size;
    }
    mc[best].used = 1, mc[best].id = id;
    return 1;
}
static void model_free(uint64_t id)
{
    unsigned i = 0;
    while (i < nmc && !(mc[i].used && mc[i].id == id))
        i++;
    ck_assert_msg(i < nmc, "model: free of %lu", (unsigned long)id);
    mc[i].used = 0;
    if (i + 1 < nmc && !mc[i + 1].used) {
        mc[i].size += mc[i + 1].size;
        memmove(&mc[i + 1], &mc[i + 2], (nmc - i - 2) * sizeof *mc);
        nmc--;
    }
    if (i > 0 && !mc[i - 1].used) {
        mc[i - 1].size += mc[i].size;
        memmove(&mc[i], &mc[i + 1], (nmc - i - 1) * sizeof *mc);
        nmc--;
    }
}
static double model_frag(void)
{
    size_t tot = 0, big = 0;
    for (unsigned i = 0; i < nmc; i++)
        if (!mc[i].used) {
            tot += mc[i].size;
            if (mc[i].size > big)
                big = mc[i].size;
        }
    return tot ? 1.0 - (double)big / (double)tot : 0.0;
}

START_TEST(replay_matches_model)
{
    for (uint64_t seed = 1; seed <= 20; seed++) {
        rs = seed * 104729;
        ga_trace_t t;
        ga_trace_init(&t);
        uint64_t live[64];
        size_t lsz[64];
        unsigned n = 0;
        uint64_t next_addr = 0x10000, tm = 0;
        for (int i = 0; i < 400; i++) {
            ga_event_t ev;
            memset(&ev, 0, sizeof ev);
            ev.time_ns = ++tm;
            if (n == 0 || (n < 64 && rnd() % 100 < 55)) {
                ev.kind = GA_EV_ALLOC;
                ev.addr = next_addr += 0x100000;
                ev.size = 1 + rnd() % (24 * KIB);
                live[n] = ev.addr, lsz[n++] = ev.size;
            } else {
                unsigned k = (unsigned)(rnd() % n);
                ev.kind = GA_EV_FREE;
                ev.addr = live[k];
                live[k] = live[--n], lsz[k] = lsz[n];
            }
            ck_assert_int_eq(ga_trace_push(&t, &ev), 0);
        }
        (void)lsz;
        /* the model: a region of R bytes, failures, peaks, fragmentation */
        const size_t R = 256 * KIB;
        nmc = 1;
        mc[0] = (mch_t){0, R, 0, 0};
        uint64_t in_use = 0, peak = 0, req = 0, peak_req = 0, fails = 0, allocs = 0, frees = 0;
        double maxf = 0;
        size_t first_oom = SIZE_MAX;
        /* served ids: addresses of allocations the model served */
        static uint64_t served[4096];
        static size_t served_sz[4096];
        unsigned ns = 0;
        for (size_t i = 0; i < t.count; i++) {
            const ga_event_t *ev = &t.events[i];
            if (ev->kind == GA_EV_ALLOC) {
                if (model_alloc(ev->size, ev->addr)) {
                    served[ns] = ev->addr, served_sz[ns++] = ev->size;
                    in_use += rounded(ev->size), req += ev->size, allocs++;
                    if (in_use > peak)
                        peak = in_use;
                    if (req > peak_req)
                        peak_req = req;
                } else {
                    fails++;
                    if (first_oom == SIZE_MAX)
                        first_oom = i;
                }
            } else {
                unsigned k = 0;
                while (k < ns && served[k] != ev->addr)
                    k++;
                if (k < ns) {
                    model_free(ev->addr);
                    in_use -= rounded(served_sz[k]), req -= served_sz[k], frees++;
                    served[k] = served[--ns], served_sz[k] = served_sz[ns];
                }
            }
            double f = model_frag();
            if (f > maxf)
                maxf = f;
        }
        ga_replay_opts_t o;
        memset(&o, 0, sizeof o);
        o.mode = GA_MODE_ARENA;
        o.arena_size = R;
        o.check = 1;
        ga_replay_result_t r;
        char err[256] = "";
        ck_assert_msg(ga_replay(&t, &o, &r, err, sizeof err) == 0, "replay: %s", err);
        ck_assert_msg(r.check_failures == 0, "seed %lu: check failures: %s", (unsigned long)seed,
                      r.check_report);
        ck_assert_msg(r.failed_allocs == fails && r.allocs == allocs && r.frees == frees,
                      "seed %lu: replay failed %lu allocs %lu frees %lu, model %lu %lu %lu",
                      (unsigned long)seed, (unsigned long)r.failed_allocs,
                      (unsigned long)r.allocs, (unsigned long)r.frees, (unsigned long)fails,
                      (unsigned long)allocs, (unsigned long)frees);
        ck_assert_msg(r.first_oom == first_oom, "seed %lu: first_oom %zu, model %zu",
                      (unsigned long)seed, r.first_oom, first_oom);
        ck_assert_msg(r.peak_in_use == peak && r.peak_requested == peak_req,
                      "seed %lu: peaks %lu/%lu, model %lu/%lu", (unsigned long)seed,
                      (unsigned long)r.peak_in_use, (unsigned long)r.peak_requested,
                      (unsigned long)peak, (unsigned long)peak_req);
        ck_assert_msg(r.final_in_use == in_use && r.peak_reserved == R && r.final_reserved == R,
                      "seed %lu: final_in_use %lu (model %lu), reserved %lu/%lu",
                      (unsigned long)seed, (unsigned long)r.final_in_use, (unsigned long)in_use,
                      (unsigned long)r.peak_reserved, (unsigned long)r.final_reserved);
        double ff = model_frag();
        ck_assert_msg(r.final_frag > ff - 1e-9 && r.final_frag < ff + 1e-9 &&
                          r.max_frag > maxf - 1e-9 && r.max_frag < maxf + 1e-9,
                      "seed %lu: frag final %.6f max %.6f, model %.6f %.6f", (unsigned long)seed,
                      r.final_frag, r.max_frag, ff, maxf);
        /* platform: every allocation served, its peak that of every block live */
        uint64_t pl = 0, plpeak = 0;
        for (size_t i = 0; i < t.count; i++) {
            const ga_event_t *ev = &t.events[i];
            if (ev->kind == GA_EV_ALLOC) {
                pl += rounded(ev->size);
                if (pl > plpeak)
                    plpeak = pl;
            } else {
                for (size_t j = 0; j < i; j++) /* its alloc: the one event of that address */
                    if (t.events[j].kind == GA_EV_ALLOC && t.events[j].addr == ev->addr)
                        pl -= rounded(t.events[j].size);
            }
        }
        o.mode = GA_MODE_PLATFORM;
        o.arena_size = 0;
        ck_assert_msg(ga_replay(&t, &o, &r, err, sizeof err) == 0, "replay: %s", err);
        ck_assert_msg(r.failed_allocs == 0 && r.peak_in_use == plpeak && r.peak_reserved == plpeak &&
                          r.check_failures == 0,
                      "seed %lu: platform failed %lu peak %lu reserved %lu, model %lu",
                      (unsigned long)seed, (unsigned long)r.failed_allocs,
                      (unsigned long)r.peak_in_use, (unsigned long)r.peak_reserved,
                      (unsigned long)plpeak);
        /* the smallest arena: runs without a failure, one block less fails (or is the peak) */
        size_t minsz = 0;
        o.mode = GA_MODE_ARENA;
        ck_assert_msg(ga_replay_min_size(&t, &o, GA_ALIGN, &minsz, err, sizeof err) == 0, "%s",
                      err);
        ck_assert_msg(minsz >= plpeak, "seed %lu: min size %zu under the live peak %lu",
                      (unsigned long)seed, minsz, (unsigned long)plpeak);
        o.arena_size = minsz;
        ck_assert_msg(ga_replay(&t, &o, &r, err, sizeof err) == 0 && r.failed_allocs == 0,
                      "seed %lu: min size %zu fails %lu", (unsigned long)seed, minsz,
                      (unsigned long)r.failed_allocs);
        if (minsz > plpeak) {
            o.arena_size = minsz - GA_ALIGN;
            ck_assert_msg(ga_replay(&t, &o, &r, err, sizeof err) == 0 && r.failed_allocs > 0,
                          "seed %lu: %zu, under the min size, runs", (unsigned long)seed,
                          minsz - GA_ALIGN);
        }
        ga_trace_free(&t);
    }
}
END_TEST

Suite *outside134_replay_suite(void)
{
    Suite *s = suite_create("outside134_replay");
    TCase *tc = tcase_create("replay_model");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, replay_matches_model);
    suite_add_tcase(s, tc);
    return s;
}
