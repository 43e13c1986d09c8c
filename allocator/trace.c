/* gpuarena trace files: encoding, reading and writing the format described in ga_trace.h.
 *
 * Records are encoded byte by byte in little-endian order instead of writing the host struct, so a
 * trace recorded on one machine reads back on any other, whatever the compiler's padding. The
 * reader loads the whole file at once (traces are tens of MB at most) and keeps every complete
 * record: a recorder killed mid-write leaves a partial last record, which is reported in
 * truncated_bytes rather than treated as an error. The writer goes through PATH.tmp and rename(2)
 * so that a failed write never leaves a half-written trace under the real name.
 */
#include "errmsg.h"
#include "ga_trace.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const api_names[GA_API_COUNT] = {
#define GA_API_NAME(sym, name) name,
    GA_API_LIST(GA_API_NAME)
#undef GA_API_NAME
};

const char *ga_api_name(unsigned api)
{
    return api < GA_API_COUNT ? api_names[api] : "invalid";
}

int ga_errorf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

const char *ga_open_hint(int e)
{
    switch (e) {
    case ENOENT:
        return "check the path, or give the trace or lifetimes CSV to read";
    case EACCES:
    case EPERM:
        return "make it readable (chmod u+r), or give a copy this user may read";
    case ENAMETOOLONG:
        return "a name in a path is at most 255 bytes, a path 4,095: give a shorter one";
    case ENOTDIR:
        return "a folder in the path is a file: check the path";
    default:
        return "give a trace or lifetimes CSV this user can read";
    }
}

/* Little-endian fields of 2, 4 or 8 bytes: one store or load each once inlined with a constant
 * width (a byte swap first on a big-endian host, where a value's low bytes come last). Recording a
 * trace encodes every allocation event, and a loop over the bytes cost about 250 instructions a
 * record. */
static inline void put_le(unsigned char *p, uint64_t v, unsigned bytes)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, bytes);
}

static inline uint64_t get_le(const unsigned char *p, unsigned bytes)
{
    uint64_t v = 0;
    memcpy(&v, p, bytes);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

void ga_event_encode(const ga_event_t *ev, unsigned char out[GA_TRACE_RECORD_SIZE])
{
    put_le(out + 0, ev->time_ns, 8);
    put_le(out + 8, ev->addr, 8);
    put_le(out + 16, ev->size, 8);
    put_le(out + 24, ev->stream, 8);
    put_le(out + 32, ev->thread, 4);
    put_le(out + 36, ev->duration_ns, 4);
    put_le(out + 40, (uint16_t)ev->device, 2);
    out[42] = ev->kind;
    out[43] = ev->api;
    put_le(out + 44, ev->result, 4);
}

void ga_event_decode(const unsigned char in[GA_TRACE_RECORD_SIZE], ga_event_t *ev)
{
    ev->time_ns = get_le(in + 0, 8);
    ev->addr = get_le(in + 8, 8);
    ev->size = get_le(in + 16, 8);
    ev->stream = get_le(in + 24, 8);
    ev->thread = (uint32_t)get_le(in + 32, 4);
    ev->duration_ns = (uint32_t)get_le(in + 36, 4);
    ev->device = (int16_t)(uint16_t)get_le(in + 40, 2);
    ev->kind = in[42];
    ev->api = in[43];
    ev->result = (uint32_t)get_le(in + 44, 4);
}

void ga_trace_header_encode(uint64_t start_unix_ns, unsigned char out[GA_TRACE_HEADER_SIZE])
{
    memset(out, 0, GA_TRACE_HEADER_SIZE);
    memcpy(out, GA_TRACE_MAGIC, sizeof GA_TRACE_MAGIC); /* includes the NUL: 8 bytes */
    put_le(out + 8, GA_TRACE_VERSION, 4);
    put_le(out + 12, GA_TRACE_RECORD_SIZE, 4);
    put_le(out + 16, start_unix_ns, 8);
    put_le(out + 24, 0, 8); /* flags */
}

void ga_trace_init(ga_trace_t *t)
{
    memset(t, 0, sizeof *t);
}

void ga_trace_free(ga_trace_t *t)
{
    free(t->events);
    ga_trace_init(t);
}

/* Grows to at least `want` events; doubling keeps ga_trace_push amortised O(1). */
static int reserve_events(ga_trace_t *t, size_t want)
{
    if (want <= t->cap)
        return 0;
    size_t cap = t->cap ? t->cap : 64;
    while (cap < want) {
        if (cap > SIZE_MAX / 2 / sizeof(ga_event_t))
            return -1;
        cap *= 2;
    }
    ga_event_t *ev = realloc(t->events, cap * sizeof *ev);
    if (!ev)
        return -1;
    t->events = ev;
    t->cap = cap;
    return 0;
}

int ga_trace_push(ga_trace_t *t, const ga_event_t *ev)
{
    if (t->count == t->cap && reserve_events(t, t->count + 1) != 0)
        return -1;
    t->events[t->count++] = *ev;
    return 0;
}

/* Reads the whole file into a malloc'd buffer. */
static int slurp(const char *path, unsigned char **buf, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ga_errorf(err, errlen, "cannot open %s: %s; %s", path, strerror(errno),
                         ga_open_hint(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap)
            break;
        unsigned char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    int bad = ferror(f) ? errno : 0;
    fclose(f);
    if (!b)
        return ga_errorf(err, errlen, "%s: out of memory reading the file", path);
    if (bad) {
        free(b);
        return ga_errorf(err, errlen, "%s: read error: %s", path, strerror(bad));
    }
    *buf = b;
    *len = n;
    return 0;
}

static int check_header(const char *path, const unsigned char *b, size_t len, char *err,
                        size_t errlen)
{
    if (len < GA_TRACE_HEADER_SIZE && memcmp(b, GA_TRACE_MAGIC, len < 8 ? len : 8) == 0)
        return ga_errorf(err, errlen,
                    "%s: truncated header (%zu of %u bytes): the recording stopped before it "
                    "began; record again",
                    path, len, GA_TRACE_HEADER_SIZE);
    if (len < 8 || memcmp(b, GA_TRACE_MAGIC, 8) != 0)
        return ga_errorf(err, errlen,
                    "%s: not a gpuarena trace (no GATRACE magic); for a lifetimes CSV or "
                    "another format, convert it with 'gpuarena import'",
                    path);
    uint32_t version = (uint32_t)get_le(b + 8, 4);
    uint32_t rsize = (uint32_t)get_le(b + 12, 4);
    if (version != GA_TRACE_VERSION)
        return ga_errorf(err, errlen, "%s: trace format version %u, this build reads version %u: "
                         "%s", path, version, GA_TRACE_VERSION,
                         version > GA_TRACE_VERSION
                             ? "replay it with the newer gpuarena that wrote it, or re-record it "
                               "with this one"
                             : "re-record it with this gpuarena (or import its source again)");
    if (rsize != GA_TRACE_RECORD_SIZE)
        return ga_errorf(err, errlen, "%s: record size %u in the header, expected %u (trace "
                         "format version %u); the file is damaged or from another tool: re-record "
                         "it, or import its source again", path, rsize, GA_TRACE_RECORD_SIZE,
                         GA_TRACE_VERSION);
    return 0;
}

/* Stable merge sort by time: threads append their buffers independently, so a file holds each
 * thread's records in order but interleaves threads in blocks. Equal times keep file order (the
 * lifetimes convention of frees before allocs at one instant depends on it). */
static int sort_by_time(ga_trace_t *t)
{
    size_t n = t->count, i;
    for (i = 1; i < n && t->events[i - 1].time_ns <= t->events[i].time_ns; i++)
        ;
    if (i >= n)
        return 0;
    ga_event_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp)
        return -1;
    ga_event_t *src = t->events, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi)
                dst[k++] = src[b].time_ns < src[a].time_ns ? src[b++] : src[a++];
            while (a < mid)
                dst[k++] = src[a++];
            while (b < hi)
                dst[k++] = src[b++];
        }
        ga_event_t *x = src;
        src = dst;
        dst = x;
    }
    if (src != t->events)
        memcpy(t->events, src, n * sizeof *src);
    free(tmp);
    return 0;
}

/* Where a second header lies in the body (its magic, version and record size: 16 bytes no record
 * holds by chance), or 0 for none. `cat a.gatrace b.gatrace > c.gatrace` read b's header as part
 * of a record and b's records 32 bytes out of step: garbage events, exit 0, and a note blaming a
 * killed recorder for the 32 bytes left over (an outside check, helper-125). */
static size_t second_header(const unsigned char *b, size_t len)
{
    unsigned char sig[GA_TRACE_HEADER_SIZE];
    ga_trace_header_encode(0, sig);
    for (size_t at = GA_TRACE_HEADER_SIZE; at + 16 <= len; at++) {
        const unsigned char *p = memchr(b + at, sig[0], len - 16 + 1 - at);
        if (!p)
            break;
        at = (size_t)(p - b);
        if (memcmp(p, sig, 16) == 0)
            return at;
    }
    return 0;
}

int ga_trace_read(const char *path, ga_trace_t *out, char *err, size_t errlen)
{
    unsigned char *b = NULL;
    size_t len = 0;
    ga_trace_init(out);
    if (!path)
        return ga_errorf(err, errlen, "no trace path given");
    if (slurp(path, &b, &len, err, errlen) != 0)
        return -1;
    if (check_header(path, b, len, err, errlen) != 0) {
        free(b);
        return -1;
    }
    size_t again = second_header(b, len);
    if (again) {
        free(b);
        return ga_errorf(err, errlen, "%s: a second trace header at byte %zu: traces joined end to "
                         "end (cat a.gatrace b.gatrace > c.gatrace)? a trace holds one process's "
                         "recording, its times counted from its own start: replay each file on "
                         "its own", path, again);
    }
    size_t body = len - GA_TRACE_HEADER_SIZE;
    size_t n = body / GA_TRACE_RECORD_SIZE;
    if (reserve_events(out, n) != 0) {
        free(b);
        return ga_errorf(err, errlen, "%s: out of memory for %zu events", path, n);
    }
    for (size_t i = 0; i < n; i++)
        ga_event_decode(b + GA_TRACE_HEADER_SIZE + i * GA_TRACE_RECORD_SIZE, &out->events[i]);
    out->count = n;
    out->start_unix_ns = get_le(b + 16, 8);
    out->truncated_bytes = body % GA_TRACE_RECORD_SIZE;
    free(b);
    if (sort_by_time(out) != 0) {
        ga_trace_free(out);
        return ga_errorf(err, errlen, "%s: out of memory sorting %zu events", path, n);
    }
    return 0;
}

static int write_all(FILE *f, const ga_trace_t *t)
{
    unsigned char rec[GA_TRACE_RECORD_SIZE > GA_TRACE_HEADER_SIZE ? GA_TRACE_RECORD_SIZE
                                                                   : GA_TRACE_HEADER_SIZE];
    ga_trace_header_encode(t->start_unix_ns, rec);
    if (fwrite(rec, GA_TRACE_HEADER_SIZE, 1, f) != 1)
        return -1;
    for (size_t i = 0; i < t->count; i++) {
        ga_event_encode(&t->events[i], rec);
        if (fwrite(rec, GA_TRACE_RECORD_SIZE, 1, f) != 1)
            return -1;
    }
    return 0;
}

int ga_trace_write(const char *path, const ga_trace_t *t, char *err, size_t errlen)
{
    if (!path || !t)
        return ga_errorf(err, errlen, "no trace or path given");
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp)
        return ga_errorf(err, errlen, "out of memory");
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        ga_errorf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    int bad = write_all(f, t);
    int saved = errno;
    if (fclose(f) != 0 && !bad) {
        bad = -1;
        saved = errno;
    }
    if (!bad && rename(tmp, path) != 0) {
        bad = -1;
        saved = errno;
    }
    if (bad) {
        remove(tmp);
        ga_errorf(err, errlen, "cannot write %s: %s", path, strerror(saved));
    }
    free(tmp);
    return bad ? -1 : 0;
}
