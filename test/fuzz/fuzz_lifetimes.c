/* libFuzzer target for ga_lifetimes_read (allocator/), the buffer-lifetime CSV reader
 * (header id,lower,upper,size) used by `gpuarena replay` on compiler buffer sets.
 *
 * Text parsers are where overflow and off-by-one bugs live, so besides running under ASan/UBSan
 * it checks what every accepted file must give: only alloc and free events, in time order, one
 * free per alloc, each free after its own alloc.
 */
#include "fuzz_util.h"

#include "ga_trace.h"

/* Every alloc has exactly one later free with the same key (the buffer id). */
static void check_pairs(const ga_trace_t *t)
{
    size_t allocs = 0, frees = 0;
    for (size_t i = 0; i < t->count; i++) {
        const ga_event_t *e = &t->events[i];
        FUZZ_CHECK(e->kind == GA_EV_ALLOC || e->kind == GA_EV_FREE, "only alloc/free events");
        FUZZ_CHECK(i == 0 || t->events[i - 1].time_ns <= e->time_ns, "events in time order");
        if (e->kind == GA_EV_ALLOC)
            allocs++;
        else
            frees++;
    }
    FUZZ_CHECK(allocs == frees, "one free per alloc");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    char err[512];
    int fd = fuzz_memfd(data, size, path, sizeof path);
    ga_trace_t t;
    err[0] = 0;
    int rc = ga_lifetimes_read(path, &t, err, sizeof err);
    close(fd);
    FUZZ_CHECK(rc == 0 || rc == -1, "reader returns 0 or -1");
    if (rc == 0)
        check_pairs(&t);
    else
        FUZZ_CHECK(err[0] != 0, "a rejected file comes with a message");
    ga_trace_free(&t);
    return 0;
}
