/* gpuarena traces: the on-disk record of allocation events, its reader and writer, and replay.
 *
 * Format (all integers little-endian), chosen so a process killed at any byte leaves a file that
 * reads back up to its last complete record: a fixed 32-byte header, then fixed 48-byte records
 * appended with plain write(2) and no trailer, no index, no compression.
 *
 *   header:  char magic[8] = "GATRACE\0"; u32 version = 1; u32 record_size = 48;
 *            u64 start_unix_ns (wall clock at trace start, 0 if unknown); u64 flags (0)
 *   record:  u64 time_ns     time since trace start (imported traces: their own clock, in ns);
 *                            recorded allocs are stamped when the call returned, frees when it
 *                            was entered, so time order is a valid order across threads
 *            u64 addr        the device pointer, or for imported traces any key that pairs an
 *                            alloc with its free (buffer id)
 *            u64 size        bytes requested (alloc, failed alloc); 0 or the size for a free
 *            u64 stream      CUstream handle, 0 = default stream / unknown
 *            u32 thread      OS thread id (0 unknown)
 *            u32 duration_ns time spent inside the call, saturating at UINT32_MAX
 *            i16 device      device ordinal, -1 unknown
 *            u8  kind        ga_event_kind
 *            u8  api         ga_event_api: the entry point the call came through
 *            u32 result      CUresult of the call (0 success)
 * The Python side (scripts/) writes the same layout with struct format '<QQQQIIhBBI'.
 */
#ifndef GA_TRACE_H
#define GA_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GA_TRACE_MAGIC "GATRACE"
#define GA_TRACE_VERSION 1u
#define GA_TRACE_HEADER_SIZE 32u
#define GA_TRACE_RECORD_SIZE 48u

typedef enum ga_event_kind {
    GA_EV_ALLOC = 1,
    GA_EV_FREE = 2,
    GA_EV_ALLOC_FAILED = 3,
} ga_event_kind_t;

/* Entry points, one list: X(enum suffix, name printed in reports). CTXTEARDOWN: the free of a
 * block a context's teardown took with it (cuCtxDestroy, a primary context's reset or last
 * release, a last cuCtxDetach), recorded by the shim with the context's device. */
#define GA_API_LIST(X)                  \
    X(UNKNOWN, "unknown")               \
    X(CUMEMALLOC, "cuMemAlloc")         \
    X(CUMEMALLOCPITCH, "cuMemAllocPitch")\
    X(CUMEMFREE, "cuMemFree")           \
    X(CUDAMALLOC, "cudaMalloc")         \
    X(CUDAFREE, "cudaFree")             \
    X(CUMEMALLOCASYNC, "cuMemAllocAsync")\
    X(CUMEMFREEASYNC, "cuMemFreeAsync") \
    X(CUMEMALLOCMANAGED, "cuMemAllocManaged") \
    X(CUMEMCREATE, "cuMemCreate")       \
    X(CUMEMRELEASE, "cuMemRelease")     \
    X(CUMEMALLOCFROMPOOL, "cuMemAllocFromPoolAsync") \
    X(IMPORT, "import")                 \
    X(CTXTEARDOWN, "ctx-teardown")

typedef enum ga_event_api {
#define GA_API_ENUM(sym, name) GA_API_##sym,
    GA_API_LIST(GA_API_ENUM)
#undef GA_API_ENUM
    GA_API_COUNT
} ga_event_api_t;

typedef struct ga_event {
    uint64_t time_ns;
    uint64_t addr;
    uint64_t size;
    uint64_t stream;
    uint32_t thread;
    uint32_t duration_ns;
    int16_t device;
    uint8_t kind;
    uint8_t api;
    uint32_t result;
} ga_event_t;

const char *ga_api_name(unsigned api);

/* Encoding to/from the 48-byte little-endian record, independent of host struct layout. */
void ga_event_encode(const ga_event_t *ev, unsigned char out[GA_TRACE_RECORD_SIZE]);
void ga_event_decode(const unsigned char in[GA_TRACE_RECORD_SIZE], ga_event_t *ev);
void ga_trace_header_encode(uint64_t start_unix_ns, unsigned char out[GA_TRACE_HEADER_SIZE]);

/* An in-memory trace: what readers produce and replay consumes. */
typedef struct ga_trace {
    ga_event_t *events;
    size_t count;
    size_t cap;
    uint64_t start_unix_ns;
    size_t truncated_bytes; /* bytes of an incomplete last record that were ignored */
    size_t open_last_line;  /* a CSV whose last row has no line end: its line number (a file cut
                               short there reads as a row with its last number cut), else 0 */
} ga_trace_t;

void ga_trace_init(ga_trace_t *t);
void ga_trace_free(ga_trace_t *t);
int ga_trace_push(ga_trace_t *t, const ga_event_t *ev); /* 0 ok, -1 out of memory */

/* Readers return 0, or -1 with a message (no "gpuarena:" prefix) in err. ga_trace_read returns the
 * events in time order, stably (equal times keep file order): the shim's threads append their
 * buffers independently, so a recorded file is in order per thread only. */
int ga_trace_read(const char *path, ga_trace_t *out, char *err, size_t errlen);
int ga_trace_write(const char *path, const ga_trace_t *t, char *err, size_t errlen);
/* Buffer-lifetime CSV (header id,lower,upper,size): alloc at lower, free at upper, frees before
 * allocs at equal times; addr is the buffer id. */
int ga_lifetimes_read(const char *path, ga_trace_t *out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
