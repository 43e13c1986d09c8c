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

/* Little-endian fields of fixed width: one load or store each (a byte swap first on a big-endian
 * host). Recording a trace encodes every allocation event, and a byte loop of variable length
 * cost about 250 instructions a record. */
static inline uint64_t le64(uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_bswap64(v);
#else
    return v;
#endif
}
static inline uint32_t le32(uint32_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_bswap32(v);
#else
    return v;
#endif
}
static inline uint16_t le16(uint16_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_bswap16(v);
#else
    return v;
#endif
}
static inline void put_le64(unsigned char *p, uint64_t v) { v = le64(v); memcpy(p, &v, 8); }
static inline void put_le32(unsigned char *p, uint32_t v) { v = le32(v); memcpy(p, &v, 4); }
static inline void put_le16(unsigned char *p, uint16_t v) { v = le16(v); memcpy(p, &v, 2); }
static inline uint64_t get_le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64(v);
}
static inline uint32_t get_le32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32(v);
}
static inline uint16_t get_le16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return le16(v);
}

void ga_event_encode(const ga_event_t *ev, unsigned char out[GA_TRACE_RECORD_SIZE])
{
    put_le64(out + 0, ev->time_ns);
    put_le64(out + 8, ev->addr);
    put_le64(out + 16, ev->size);
    put_le64(out + 24, ev->stream);
    put_le32(out + 32, ev->thread);
    put_le32(out + 36, ev->duration_ns);
    put_le16(out + 40, (uint16_t)ev->device);
    out[42] = ev->kind;
    out[43] = ev->api;
    put_le32(out + 44, ev->result);
}

void ga_event_decode(const unsigned char in[GA_TRACE_RECORD_SIZE], ga_event_t *ev)
{
    ev->time_ns = get_le64(in + 0);
    ev->addr = get_le64(in + 8);
    ev->size = get_le64(in + 16);
    ev->stream = get_le64(in + 24);
    ev->thread = (uint32_t)get_le32(in + 32);
    ev->duration_ns = (uint32_t)get_le32(in + 36);
    ev->device = (int16_t)(uint16_t)get_le16(in + 40);
    ev->kind = in[42];
    ev->api = in[43];
    ev->result = (uint32_t)get_le32(in + 44);
}

void ga_trace_header_encode(uint64_t start_unix_ns, unsigned char out[GA_TRACE_HEADER_SIZE])
{
    memset(out, 0, GA_TRACE_HEADER_SIZE);
    memcpy(out, GA_TRACE_MAGIC, sizeof GA_TRACE_MAGIC); /* includes the NUL: 8 bytes */
    put_le32(out + 8, GA_TRACE_VERSION);
    put_le32(out + 12, GA_TRACE_RECORD_SIZE);
    put_le64(out + 16, start_unix_ns);
    put_le64(out + 24, 0); /* flags */
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
        return ga_errorf(err, errlen, "cannot open %s: %s", path, strerror(errno));
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
    uint32_t version = (uint32_t)get_le32(b + 8);
    uint32_t rsize = (uint32_t)get_le32(b + 12);
    if (version != GA_TRACE_VERSION)
        return ga_errorf(err, errlen, "%s: trace format version %u, this build reads version %u",
                    path, version, GA_TRACE_VERSION);
    if (rsize != GA_TRACE_RECORD_SIZE)
        return ga_errorf(err, errlen, "%s: record size %u in header, version %u uses %u", path, rsize,
                    GA_TRACE_VERSION, GA_TRACE_RECORD_SIZE);
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
    size_t body = len - GA_TRACE_HEADER_SIZE;
    size_t n = body / GA_TRACE_RECORD_SIZE;
    if (reserve_events(out, n) != 0) {
        free(b);
        return ga_errorf(err, errlen, "%s: out of memory for %zu events", path, n);
    }
    for (size_t i = 0; i < n; i++)
        ga_event_decode(b + GA_TRACE_HEADER_SIZE + i * GA_TRACE_RECORD_SIZE, &out->events[i]);
    out->count = n;
    out->start_unix_ns = get_le64(b + 16);
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
