/* libFuzzer target for the allocator itself, through ga_replay (allocator/replay.c).
 *
 * Each 4 input bytes become one event: an alloc or free of one of 64 buffer keys, with a size
 * spread from 1 byte to 32 MiB. The sequence is replayed in every mode (preallocated arena, grow
 * with a limit, platform, and vmm twice: 2 MiB granules with the default keep and a limit, and
 * 64 KiB granules with nothing kept in ranges of 128 MiB, so that blocks span many granules and
 * bitmap words and the pool adds ranges as it fills) with ga_check after every event, so any
 * sequence of allocations and frees that breaks an invariant (overlap, uncoalesced neighbours,
 * statistics drift, a granule mapped with no user beyond the keep, a live
 * pointer missing from the table) is a crash with the input saved. Also checked: the limits hold
 * (nothing reserved past the arena size or the limit) and in-use never exceeds reserved.
 */
#include "fuzz_util.h"

#include "ga_replay.h"

#define MAX_EVENTS 512 /* ga_check after every event is O(n): keep inputs short */

static size_t event_size(const uint8_t *b)
{
    unsigned shift = b[2] % 26;                  /* up to 32 MiB */
    size_t base = (size_t)1 << shift;
    return base + ((size_t)b[3] * base) / 256 + (b[3] & 1);
}

static void build_trace(const uint8_t *data, size_t size, ga_trace_t *t)
{
    ga_trace_init(t);
    for (size_t i = 0; i + 4 <= size && t->count < MAX_EVENTS; i += 4) {
        ga_event_t ev;
        memset(&ev, 0, sizeof ev);
        ev.time_ns = i;
        ev.kind = (data[i] & 1) ? GA_EV_FREE : GA_EV_ALLOC;
        ev.addr = 0x1000 + (uint64_t)(data[i + 1] % 64) * 0x1000;
        ev.size = ev.kind == GA_EV_ALLOC ? event_size(data + i) : 0;
        ev.device = 0;
        FUZZ_CHECK(ga_trace_push(t, &ev) == 0, "host memory for the trace");
    }
}

static void replay_one(const ga_trace_t *t, ga_replay_mode_t mode, size_t arena, size_t limit,
                       size_t keep, size_t granularity)
{
    ga_replay_opts_t o;
    memset(&o, 0, sizeof o);
    o.mode = mode;
    o.arena_size = arena;
    o.limit = limit;
    o.keep = keep;
    o.granularity = granularity;
    o.check = 1;
    ga_replay_result_t r;
    char err[256];
    FUZZ_CHECK(ga_replay(t, &o, &r, err, sizeof err) == 0, "replay accepts valid options");
    if (r.check_failures) {
        fprintf(stderr, "mode %s, event %zu: %s\n", ga_replay_mode_name(mode), r.first_check_fail,
                r.check_report);
        FUZZ_CHECK(0, "ga_check finds no invariant failure after any event");
    }
    FUZZ_CHECK(r.peak_in_use <= r.peak_reserved, "in use never above reserved");
    FUZZ_CHECK(mode != GA_REPLAY_ARENA || r.peak_reserved <= arena, "arena mode stays in its region");
    FUZZ_CHECK(!limit || r.peak_reserved <= limit, "grow, platform and vmm stay under the limit");
    FUZZ_CHECK(r.allocs + r.failed_allocs + r.invalid_allocs + r.frees + r.unmatched_frees +
                       r.skipped <= r.events,
               "every event counted at most once");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ga_trace_t t;
    build_trace(data, size, &t);
    replay_one(&t, GA_REPLAY_ARENA, 64u << 20, 0, 0, 0);
    replay_one(&t, GA_REPLAY_GROW, 0, 96u << 20, 0, 0);
    replay_one(&t, GA_REPLAY_PLATFORM, 0, 96u << 20, 0, 0);
    replay_one(&t, GA_REPLAY_VMM, 0, 96u << 20, 64u << 20, 0);
    replay_one(&t, GA_REPLAY_VMM, 128u << 20, 0, 0, 64u << 10); /* more ranges as it fills */
    ga_trace_free(&t);
    return 0;
}
