// side-by-side: gpuarena's arena and Sebastian Aaltonen's OffsetAllocator (an O(1) allocator with
// 256 floating-point size bins, not exact best fit; MIT licence, github.com/sebbbi/OffsetAllocator)
// on the same event streams, in the same loop, in the same minutes. Issue 9 sets gpuarena's target
// relative to OffsetAllocator's speed ("the median over bench-alloc's traces at or below
// OffsetAllocator's"), and this VM's speed moves by up to 1.8x between runs, so a figure measured
// on another day is no yardstick: only a side-by-side run is.
//
// Built and run by scripts/side-by-side.sh, which compiles this file against a checkout of
// OffsetAllocator the user gives it: no code of that project is in this repository.
//
// For every trace given (lifetime CSVs or gpuarena traces), the events are resolved to dense
// slots before any timing, and both allocators get the same capacity: four times the live peak
// (at twice it, minimalloc_I and _K ran out in one or both), in 512-byte units for
// OffsetAllocator, whose offsets are 32-bit (so they cover somas_bert_base's 63 GB). Each
// replay is one timed loop over the events on a fresh allocator (creation not timed); a trace's
// figure is the median of RUNS replays in a row, the best of ROUNDS rounds over all traces, and
// within a round the two allocators alternate per trace, so a slow spell of the VM lands on both. Out-of-memory results are counted and printed
// (a replay that ran out is not comparable; none should).
//
// What the loop does per event is the allocator call and a store of its answer: no statistics,
// no hashing (gpuarena frees by address, OffsetAllocator by the handle its allocate returned;
// each is called the way its interface asks).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <unordered_map>
#include <vector>

#include "ga_arena.h"
#include "ga_trace.h"
#include "offsetAllocator.hpp"

namespace {

const int RUNS = 11;
const int ROUNDS = 3;

struct Op {
    uint32_t slot;
    uint32_t alloc; // 1 alloc, 0 free
    uint64_t size;
};

struct Trace {
    std::string name;
    std::vector<Op> ops;
    size_t slots = 0;
    uint64_t peak = 0; // live bytes, 512-rounded
    double ns_ga = 1e30, ns_oa = 1e30;
    uint64_t oom_ga = 0, oom_oa = 0;
};

uint64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t round512(uint64_t n) { return (n + 511) & ~(uint64_t)511; }

// Resolves the trace's addresses (buffer ids for a CSV) to dense slots; frees of an address not
// live are dropped, as ga_replay skips them.
bool load(const char *path, Trace *t)
{
    ga_trace_t tr;
    char err[512];
    size_t n = strlen(path);
    bool csv = n > 4 && strcmp(path + n - 4, ".csv") == 0;
    if ((csv ? ga_lifetimes_read(path, &tr, err, sizeof err)
             : ga_trace_read(path, &tr, err, sizeof err)) != 0) {
        fprintf(stderr, "gpuarena: %s: %s\n", path, err);
        return false;
    }
    const char *base = strrchr(path, '/');
    t->name = base ? base + 1 : path;
    std::unordered_map<uint64_t, uint32_t> live; // address -> slot
    std::vector<uint64_t> slot_size;
    std::vector<uint32_t> spare;
    uint64_t in_use = 0;
    for (size_t i = 0; i < tr.count; i++) {
        const ga_event_t &e = tr.events[i];
        if (e.kind == GA_EV_ALLOC && e.size) {
            auto it = live.find(e.addr);
            if (it != live.end()) { // an address reused while live: free the old one first
                t->ops.push_back({it->second, 0, 0});
                in_use -= round512(slot_size[it->second]);
                spare.push_back(it->second);
                live.erase(it);
            }
            uint32_t s;
            if (!spare.empty()) {
                s = spare.back();
                spare.pop_back();
            } else {
                s = (uint32_t)slot_size.size();
                slot_size.push_back(0);
            }
            slot_size[s] = e.size;
            live[e.addr] = s;
            t->ops.push_back({s, 1, e.size});
            in_use += round512(e.size);
            t->peak = std::max(t->peak, in_use);
        } else if (e.kind == GA_EV_FREE) {
            auto it = live.find(e.addr);
            if (it == live.end())
                continue;
            t->ops.push_back({it->second, 0, 0});
            in_use -= round512(slot_size[it->second]);
            spare.push_back(it->second);
            live.erase(it);
        }
    }
    t->slots = slot_size.size();
    ga_trace_free(&tr);
    return !t->ops.empty();
}

// A backend that hands out address space only: the arena never touches a region's bytes.
int fake_reserve(void *, size_t, uintptr_t *base)
{
    *base = (uintptr_t)1 << 44;
    return 0;
}
void fake_release(void *, uintptr_t, size_t) {}

double replay_ga(const Trace &t, uint64_t cap, uint64_t *oom)
{
    ga_backend_t be = {fake_reserve, fake_release, nullptr};
    ga_config_t cfg = {cap, 0, 0, 0};
    ga_arena_t *a = ga_arena_create(&be, &cfg, nullptr);
    if (!a) {
        fprintf(stderr, "gpuarena: no arena of %llu bytes\n", (unsigned long long)cap);
        exit(1);
    }
    std::vector<uintptr_t> ptr(t.slots, 0); // 0: the slot's allocation failed
    uint64_t fails = 0;
    uint64_t t0 = now_ns();
    for (const Op &op : t.ops) {
        if (op.alloc) {
            if (ga_alloc(a, op.size, &ptr[op.slot]) != GA_OK) {
                ptr[op.slot] = 0;
                fails++;
            }
        } else if (ptr[op.slot]) {
            ga_free(a, ptr[op.slot]);
        }
    }
    uint64_t t1 = now_ns();
    ga_arena_destroy(a);
    *oom += fails;
    return (double)(t1 - t0) / (double)t.ops.size();
}

double replay_oa(const Trace &t, uint64_t cap, uint64_t *oom)
{
    OffsetAllocator::Allocator a((uint32_t)(cap / 512), 128 * 1024);
    std::vector<OffsetAllocator::Allocation> h(t.slots);
    uint64_t fails = 0;
    uint64_t t0 = now_ns();
    for (const Op &op : t.ops) {
        if (op.alloc) {
            h[op.slot] = a.allocate((uint32_t)((op.size + 511) / 512));
            fails += h[op.slot].offset == OffsetAllocator::Allocation::NO_SPACE;
        } else if (h[op.slot].offset != OffsetAllocator::Allocation::NO_SPACE) {
            a.free(h[op.slot]);
        }
    }
    uint64_t t1 = now_ns();
    *oom += fails;
    return (double)(t1 - t0) / (double)t.ops.size();
}

template <typename F> double median_of_runs(F f)
{
    double ns[RUNS];
    for (int i = 0; i < RUNS; i++)
        ns[i] = f();
    std::sort(ns, ns + RUNS);
    return ns[RUNS / 2];
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s TRACE...\n(built by scripts/side-by-side.sh)\n", argv[0]);
        return 2;
    }
    std::vector<Trace> traces;
    for (int i = 1; i < argc; i++) {
        Trace t;
        if (!load(argv[i], &t))
            return 1;
        if (4 * t.peak / 512 > 0xfffffff0ull) {
            fprintf(stderr, "gpuarena: %s: a live peak of %llu bytes is beyond 32-bit 512-byte "
                    "units; skipped\n", t.name.c_str(), (unsigned long long)t.peak);
            continue;
        }
        traces.push_back(std::move(t));
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (Trace &t : traces) {
            uint64_t cap = 4 * (t.peak ? t.peak : 512);
            uint64_t oom = 0;
            double g = median_of_runs([&] { return replay_ga(t, cap, &oom); });
            t.oom_ga = std::max(t.oom_ga, oom);
            oom = 0;
            double o = median_of_runs([&] { return replay_oa(t, cap, &oom); });
            t.oom_oa = std::max(t.oom_oa, oom);
            t.ns_ga = std::min(t.ns_ga, g);
            t.ns_oa = std::min(t.ns_oa, o);
        }
    }
    printf("| trace | events | gpuarena ns/op | OffsetAllocator ns/op | gpuarena / OffsetAllocator |\n"
           "|---|---:|---:|---:|---:|\n");
    std::vector<double> g, o;
    for (const Trace &t : traces) {
        printf("| %s | %zu | %.1f | %.1f | %.2f |\n", t.name.c_str(), t.ops.size(), t.ns_ga, t.ns_oa,
               t.ns_ga / t.ns_oa);
        g.push_back(t.ns_ga);
        o.push_back(t.ns_oa);
        if (t.oom_ga || t.oom_oa)
            printf("(%s: out of memory in replay, gpuarena %llu, OffsetAllocator %llu)\n",
                   t.name.c_str(), (unsigned long long)t.oom_ga, (unsigned long long)t.oom_oa);
    }
    if (!traces.empty())
        printf("\nmedian over %zu traces: gpuarena %.1f ns/op, OffsetAllocator %.1f; slowest: "
               "gpuarena %.1f, OffsetAllocator %.1f (each the median of %d replays in a row, best "
               "of %d rounds, the two alternated per trace; capacity four times the live peak)\n",
               traces.size(), median(g), median(o), *std::max_element(g.begin(), g.end()),
               *std::max_element(o.begin(), o.end()), RUNS, ROUNDS);
    return 0;
}
