/* libFuzzer target for ga_trace_read (allocator/trace.c), the binary trace reader.
 *
 * Beyond "does not crash under ASan/UBSan", it checks the reader's contract on every input it
 * accepts: the file is exactly header + count records + truncated_bytes (a partial last record is
 * ignored, never an error), the events come back in time order, and writing the trace back with
 * ga_trace_write reproduces the input's records byte for byte (as a set: the reader sorts them by
 * time) and its header except the flags word (written as 0). That round trip is what
 * `gpuarena replay` and the importers rely on.
 */
#include "fuzz_util.h"

#include "ga_trace.h"

static int cmp_record(const void *a, const void *b)
{
    return memcmp(a, b, GA_TRACE_RECORD_SIZE);
}

static void check_round_trip(const uint8_t *data, const ga_trace_t *t)
{
    char out[128];
    char err[256];
    snprintf(out, sizeof out, "%s/trace.gat", fuzz_scratch_dir());
    FUZZ_CHECK(ga_trace_write(out, t, err, sizeof err) == 0, "an accepted trace writes back");
    size_t len;
    unsigned char *b = fuzz_slurp(out, &len);
    unlink(out);
    size_t want = GA_TRACE_HEADER_SIZE + t->count * GA_TRACE_RECORD_SIZE;
    FUZZ_CHECK(len == want, "written size is header + records");
    FUZZ_CHECK(memcmp(b, data, 24) == 0, "header magic, version, size, start time kept");
    for (size_t i = 1; i < t->count; i++)
        FUZZ_CHECK(t->events[i - 1].time_ns <= t->events[i].time_ns, "events in time order");
    /* the same records as the input, as a set: sort both sides' raw records and compare */
    size_t body = want - GA_TRACE_HEADER_SIZE;
    unsigned char *in = malloc(body ? body : 1);
    FUZZ_CHECK(in != NULL, "scratch memory");
    memcpy(in, data + GA_TRACE_HEADER_SIZE, body);
    qsort(in, t->count, GA_TRACE_RECORD_SIZE, cmp_record);
    qsort(b + GA_TRACE_HEADER_SIZE, t->count, GA_TRACE_RECORD_SIZE, cmp_record);
    FUZZ_CHECK(memcmp(b + GA_TRACE_HEADER_SIZE, in, body) == 0,
               "every record re-encodes to the same 48 bytes");
    free(in);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    char err[512];
    int fd = fuzz_memfd(data, size, path, sizeof path);
    ga_trace_t t;
    err[0] = 0;
    int rc = ga_trace_read(path, &t, err, sizeof err);
    close(fd);
    FUZZ_CHECK(rc == 0 || rc == -1, "reader returns 0 or -1");
    if (rc != 0) {
        FUZZ_CHECK(err[0] != 0, "a rejected trace comes with a message");
        FUZZ_CHECK(t.count == 0 || t.events != NULL, "no dangling events on error");
        ga_trace_free(&t);
        return 0;
    }
    FUZZ_CHECK(t.truncated_bytes < GA_TRACE_RECORD_SIZE, "at most one partial record");
    FUZZ_CHECK(GA_TRACE_HEADER_SIZE + t.count * GA_TRACE_RECORD_SIZE + t.truncated_bytes == size,
               "header + records + truncated tail is the whole file");
    check_round_trip(data, &t);
    ga_trace_free(&t);
    return 0;
}
