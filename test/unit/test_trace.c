/* Unit tests for trace I/O (allocator/trace.c) and the buffer-lifetime CSV reader (lifetimes.c).
 *
 * They assert from the outside: bytes on disk against a hand-encoded record, files cut at every
 * byte offset, malformed headers and CSVs written to a private temp dir, and the real lifetime
 * files in $GA_TRACES_DIR/lifetimes checked against figures the test computes on its own (line
 * counts, per-id intervals), never against the reader's own idea of them.
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ga_trace.h"

void ga_test_each_lifetime_file(void (*fn)(const char *path));

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lifetime CSVs under $GA_TRACES_DIR/lifetimes, sorted, as malloc'd paths; fails the calling
 * test with a clear message when the directory is missing. */
static size_t lifetime_files(char ***out)
{
    const char *dir = getenv("GA_TRACES_DIR");
    ck_assert_msg(dir && *dir, "GA_TRACES_DIR is not set: point it at shared/traces "
                               "(make sets it to $(CURDIR)/../shared/traces)");
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/lifetimes", dir);
    DIR *d = opendir(sub);
    ck_assert_msg(d != NULL, "cannot open %s: is shared/traces beside the repo?", sub);
    size_t n = 0, cap = 32;
    char **files = malloc(cap * sizeof *files);
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".csv") != 0)
            continue;
        if (n == cap)
            files = realloc(files, (cap *= 2) * sizeof *files);
        files[n] = malloc(strlen(sub) + len + 2);
        sprintf(files[n++], "%s/%s", sub, de->d_name);
    }
    closedir(d);
    qsort(files, n, sizeof *files, cmp_str);
    *out = files;
    return n;
}

/* Calls fn on every shared lifetime CSV (all 14 must be there). Shared with test_replay.c. */
void ga_test_each_lifetime_file(void (*fn)(const char *path))
{
    char **files;
    size_t n = lifetime_files(&files);
    ck_assert_msg(n >= 14, "expected the 14 lifetime CSVs, found %zu", n);
    for (size_t i = 0; i < n; i++) {
        fn(files[i]);
        free(files[i]);
    }
    free(files);
}

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ga-test-trace-XXXXXX");
    ck_assert_msg(mkdtemp(tmpdir) != NULL, "cannot create a temp dir under /tmp");
}

static void remove_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    struct dirent *de;
    char p[512];
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", tmpdir, de->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(tmpdir);
}

static void write_bytes(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
}

static ga_event_t sample_event(unsigned i)
{
    ga_event_t e = {
        .time_ns = 1000u * i + 7, .addr = 0x7f0000000000ull + 512u * i, .size = 4096u + i,
        .stream = i % 3, .thread = 100 + i, .duration_ns = 50 + i, .device = (int16_t)(i % 2),
        .kind = (uint8_t)(1 + i % 3), .api = (uint8_t)(i % GA_API_COUNT), .result = i % 5 == 4};
    return e;
}

static void assert_event_eq(const ga_event_t *a, const ga_event_t *b)
{
    ck_assert_uint_eq(a->time_ns, b->time_ns);
    ck_assert_uint_eq(a->addr, b->addr);
    ck_assert_uint_eq(a->size, b->size);
    ck_assert_uint_eq(a->stream, b->stream);
    ck_assert_uint_eq(a->thread, b->thread);
    ck_assert_uint_eq(a->duration_ns, b->duration_ns);
    ck_assert_int_eq(a->device, b->device);
    ck_assert_uint_eq(a->kind, b->kind);
    ck_assert_uint_eq(a->api, b->api);
    ck_assert_uint_eq(a->result, b->result);
}

START_TEST(encode_is_little_endian)
{
    ga_event_t e = {.time_ns = 0x0102030405060708ull, .addr = 0x1112131415161718ull,
                    .size = 0x2122232425262728ull, .stream = 0x3132333435363738ull,
                    .thread = 0x41424344u, .duration_ns = 0x51525354u, .device = -2,
                    .kind = GA_EV_ALLOC_FAILED, .api = GA_API_IMPORT, .result = 0x61626364u};
    static const unsigned char want[48] = {
        8, 7, 6, 5, 4, 3, 2, 1, 0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,
        0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21, 0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31,
        0x44, 0x43, 0x42, 0x41, 0x54, 0x53, 0x52, 0x51, 0xfe, 0xff, 3, 12, 0x64, 0x63, 0x62, 0x61};
    unsigned char got[48];
    ga_event_encode(&e, got);
    ck_assert_mem_eq(got, want, 48);
    ga_event_t back;
    ga_event_decode(got, &back);
    assert_event_eq(&back, &e);
    unsigned char h[32];
    ga_trace_header_encode(0x0a0b0c0d0e0f1011ull, h);
    static const unsigned char hwant[32] = {'G', 'A', 'T', 'R', 'A', 'C', 'E', 0, 1, 0, 0, 0,
                                            48, 0, 0, 0, 0x11, 0x10, 0x0f, 0x0e, 0x0d, 0x0c,
                                            0x0b, 0x0a};
    ck_assert_mem_eq(h, hwant, 32);
}
END_TEST

START_TEST(api_names)
{
    ck_assert_str_eq(ga_api_name(GA_API_UNKNOWN), "unknown");
    ck_assert_str_eq(ga_api_name(GA_API_CUMEMALLOC), "cuMemAlloc");
    ck_assert_str_eq(ga_api_name(GA_API_CUMEMALLOCFROMPOOL), "cuMemAllocFromPoolAsync");
    ck_assert_str_eq(ga_api_name(GA_API_IMPORT), "import");
    ck_assert_str_eq(ga_api_name(GA_API_COUNT), "invalid");
    ck_assert_str_eq(ga_api_name(~0u), "invalid");
}
END_TEST

START_TEST(round_trip_every_field)
{
    ga_trace_t t, back;
    ga_trace_init(&t);
    t.start_unix_ns = UINT64_MAX;
    /* in time order, so the reader's sort leaves them where they are */
    ga_event_t hi = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT32_MAX, UINT32_MAX,
                     INT16_MAX, UINT8_MAX, UINT8_MAX, UINT32_MAX};
    ga_event_t lo = {0, 0, 0, 0, 0, 0, INT16_MIN, 0, 0, 0};
    ga_event_t neg = {.device = -1};
    ck_assert_int_eq(ga_trace_push(&t, &lo), 0);
    ck_assert_int_eq(ga_trace_push(&t, &neg), 0);
    for (unsigned i = 0; i < 1000; i++) {
        ga_event_t e = sample_event(i);
        ck_assert_int_eq(ga_trace_push(&t, &e), 0);
    }
    ck_assert_int_eq(ga_trace_push(&t, &hi), 0);
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/rt.gatrace", tmpdir);
    ck_assert_msg(ga_trace_write(path, &t, err, sizeof err) == 0, "write failed: %s", err);
    ck_assert_msg(ga_trace_read(path, &back, err, sizeof err) == 0, "read failed: %s", err);
    ck_assert_uint_eq(back.count, t.count);
    ck_assert_uint_eq(back.start_unix_ns, UINT64_MAX);
    ck_assert_uint_eq(back.truncated_bytes, 0);
    for (size_t i = 0; i < t.count; i++)
        assert_event_eq(&back.events[i], &t.events[i]);
    snprintf(path, sizeof path, "%s/rt.gatrace.tmp", tmpdir);
    ck_assert_msg(access(path, F_OK) != 0, "the .tmp file must be renamed away");
    ga_trace_free(&t);
    ga_trace_free(&back);
}
END_TEST

START_TEST(empty_after_header_is_valid)
{
    unsigned char h[32];
    ga_trace_header_encode(42, h);
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/empty.gatrace", tmpdir);
    write_bytes(path, h, sizeof h);
    ga_trace_t t;
    ck_assert_msg(ga_trace_read(path, &t, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(t.count, 0);
    ck_assert_uint_eq(t.start_unix_ns, 42);
    ck_assert_uint_eq(t.truncated_bytes, 0);
    ga_trace_free(&t);
}
END_TEST

/* Threads append their buffers in blocks, so a recorded file is in time order per thread only:
 * the reader returns time order, and equal times keep file order. */
START_TEST(read_sorts_by_time_stably)
{
    ga_trace_t t, back;
    ga_trace_init(&t);
    /* two "threads" of 300 events each, flushed in blocks of 64, the second block first */
    for (unsigned blk = 0; blk < 10; blk++)
        for (unsigned i = 0; i < 60; i++) {
            unsigned thread = blk % 2, k = (blk / 2) * 60 + i;
            ga_event_t e = sample_event(k);
            e.time_ns = 10u * k + thread; /* interleaved times */
            e.thread = thread;
            e.addr = k; /* file order among equal times, checked below */
            ck_assert_int_eq(ga_trace_push(&t, &e), 0);
        }
    ga_event_t tie1 = sample_event(0), tie2 = sample_event(0);
    tie1.time_ns = tie2.time_ns = 5; /* equal times: must stay in file order */
    tie1.addr = 1000111;
    tie2.addr = 1000222;
    ck_assert_int_eq(ga_trace_push(&t, &tie1), 0);
    ck_assert_int_eq(ga_trace_push(&t, &tie2), 0);
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/sorted.gatrace", tmpdir);
    ck_assert_msg(ga_trace_write(path, &t, err, sizeof err) == 0, "write failed: %s", err);
    ck_assert_msg(ga_trace_read(path, &back, err, sizeof err) == 0, "read failed: %s", err);
    ck_assert_uint_eq(back.count, t.count);
    int seen111 = 0;
    for (size_t i = 1; i < back.count; i++) {
        ck_assert_msg(back.events[i - 1].time_ns <= back.events[i].time_ns, "not sorted at %zu", i);
        if (back.events[i].addr == 1000111)
            seen111 = 1;
        if (back.events[i].addr == 1000222)
            ck_assert_msg(seen111, "equal times must keep file order");
    }
    ga_trace_free(&t);
    ga_trace_free(&back);
}
END_TEST

/* A file cut at any byte keeps exactly the complete records before the cut. */
START_TEST(truncated_at_every_offset)
{
    enum { N = 6 };
    unsigned char buf[32 + N * 48];
    ga_trace_header_encode(99, buf);
    ga_event_t ev[N];
    for (unsigned i = 0; i < N; i++) {
        ev[i] = sample_event(i * 7 + 1);
        ga_event_encode(&ev[i], buf + 32 + 48 * i);
    }
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/cut.gatrace", tmpdir);
    for (size_t len = 0; len <= sizeof buf; len++) {
        write_bytes(path, buf, len);
        ga_trace_t t;
        err[0] = '\0';
        int rc = ga_trace_read(path, &t, err, sizeof err);
        if (len < 32) {
            ck_assert_msg(rc == -1, "a %zu-byte header must be rejected", len);
            ck_assert_msg(strstr(err, "truncated header") != NULL, "len %zu: %s", len, err);
            ck_assert_uint_eq(t.count, 0);
            continue;
        }
        ck_assert_msg(rc == 0, "len %zu: %s", len, err);
        ck_assert_uint_eq(t.count, (len - 32) / 48);
        ck_assert_uint_eq(t.truncated_bytes, (len - 32) % 48);
        for (size_t i = 0; i < t.count; i++)
            assert_event_eq(&t.events[i], &ev[i]);
        ga_trace_free(&t);
    }
}
END_TEST

static void expect_read_error(const unsigned char *h, size_t len, const char *needle)
{
    char path[300], err[256] = "";
    snprintf(path, sizeof path, "%s/bad.gatrace", tmpdir);
    write_bytes(path, h, len);
    ga_trace_t t;
    ck_assert_int_eq(ga_trace_read(path, &t, err, sizeof err), -1);
    ck_assert_msg(strstr(err, needle) != NULL, "error '%s' should mention '%s'", err, needle);
    ck_assert_msg(strstr(err, path) != NULL, "error '%s' should name the file", err);
    ck_assert_uint_eq(t.count, 0);
}

START_TEST(malformed_headers)
{
    unsigned char h[32 + 48];
    memset(h, 0, sizeof h);
    ga_trace_header_encode(0, h);
    h[0] = 'X';
    expect_read_error(h, sizeof h, "not a gpuarena trace");
    expect_read_error((const unsigned char *)"id,lower,upper,size\n0,0,1,1\n", 28,
                      "not a gpuarena trace");
    ga_trace_header_encode(0, h);
    h[8] = 2;
    expect_read_error(h, sizeof h, "version 2");
    ga_trace_header_encode(0, h);
    h[12] = 40;
    expect_read_error(h, sizeof h, "record size 40");
}
END_TEST

START_TEST(missing_and_unwritable_paths)
{
    char path[300], err[256] = "";
    ga_trace_t t;
    snprintf(path, sizeof path, "%s/does-not-exist.gatrace", tmpdir);
    ck_assert_int_eq(ga_trace_read(path, &t, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "cannot open") && strstr(err, path), "%s", err);
    ck_assert_int_eq(ga_trace_read(NULL, &t, err, sizeof err), -1);
    ck_assert_int_eq(ga_lifetimes_read(path, &t, err, sizeof err), -1);
    ck_assert_msg(strstr(err, path) != NULL, "%s", err);
    ga_trace_init(&t);
    snprintf(path, sizeof path, "%s/no-such-dir/out.gatrace", tmpdir);
    ck_assert_int_eq(ga_trace_write(path, &t, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "cannot create") != NULL, "%s", err);
    ck_assert_int_eq(ga_trace_write(NULL, &t, err, sizeof err), -1);
    /* The rename onto a directory fails: an error, and no PATH.tmp left behind. */
    ck_assert_int_eq(ga_trace_write(tmpdir, &t, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "cannot write") != NULL, "%s", err);
    snprintf(path, sizeof path, "%s.tmp", tmpdir);
    ck_assert_msg(access(path, F_OK) != 0, "%s must be removed after a failed write", path);
    ck_assert_int_eq(ga_trace_read(tmpdir, &t, err, sizeof err), -1);
    ck_assert_int_eq(ga_lifetimes_read(tmpdir, &t, err, sizeof err), -1);
    /* No error buffer at all must not crash. */
    ck_assert_int_eq(ga_trace_read(path, &t, NULL, 0), -1);
}
END_TEST

/* ---- lifetimes CSV ---- */

typedef struct csv_row {
    unsigned long long id, lower, upper, size;
} csv_row_t;

/* Independent parse of a lifetimes file: sscanf per data line. */
static size_t parse_csv(const char *path, csv_row_t **rows)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char line[512];
    size_t n = 0, cap = 1024;
    *rows = malloc(cap * sizeof **rows);
    ck_assert_msg(fgets(line, sizeof line, f) != NULL, "%s has no header", path);
    while (fgets(line, sizeof line, f)) {
        csv_row_t r;
        if (sscanf(line, "%llu,%llu,%llu,%llu", &r.id, &r.lower, &r.upper, &r.size) != 4)
            continue;
        if (n == cap)
            *rows = realloc(*rows, (cap *= 2) * sizeof **rows);
        (*rows)[n++] = r;
    }
    fclose(f);
    return n;
}

static void check_lifetimes_file(const char *path)
{
    csv_row_t *rows;
    size_t n = parse_csv(path, &rows);
    ck_assert_msg(n > 0, "%s: no data lines", path);
    ga_trace_t t;
    char err[512];
    ck_assert_msg(ga_lifetimes_read(path, &t, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(t.count == 2 * n, "%s: %zu events for %zu lines", path, t.count, n);
    for (size_t i = 0; i < t.count; i++) {
        const ga_event_t *e = &t.events[i];
        ck_assert_uint_eq(e->api, GA_API_IMPORT);
        ck_assert_int_eq(e->device, 0);
        ck_assert_msg(e->kind == GA_EV_ALLOC || e->kind == GA_EV_FREE, "bad kind");
        if (i > 0) {
            const ga_event_t *p = &t.events[i - 1];
            ck_assert_msg(p->time_ns <= e->time_ns, "%s: events not sorted at %zu", path, i);
            ck_assert_msg(!(p->time_ns == e->time_ns && p->kind == GA_EV_ALLOC &&
                            e->kind == GA_EV_FREE),
                          "%s: alloc before free at equal time (event %zu)", path, i);
        }
    }
    /* Every row appears as exactly one alloc at lower and one free at upper, with its size. */
    for (size_t r = 0; r < n; r++) {
        int allocs = 0, frees = 0;
        for (size_t i = 0; i < t.count; i++) {
            const ga_event_t *e = &t.events[i];
            if (e->addr != rows[r].id)
                continue;
            ck_assert_uint_eq(e->size, rows[r].size);
            if (e->kind == GA_EV_ALLOC) {
                allocs++;
                ck_assert_uint_eq(e->time_ns, rows[r].lower);
            } else {
                frees++;
                ck_assert_uint_eq(e->time_ns, rows[r].upper);
            }
        }
        ck_assert_msg(allocs == 1 && frees == 1, "%s: id %llu has %d allocs, %d frees", path,
                      rows[r].id, allocs, frees);
    }
    free(rows);
    ga_trace_free(&t);
}

START_TEST(lifetimes_real_files)
{
    ga_test_each_lifetime_file(check_lifetimes_file);
}
END_TEST

static void expect_csv(const char *content, int want_rc, const char *needle)
{
    char path[300], err[512] = "";
    snprintf(path, sizeof path, "%s/x.csv", tmpdir);
    write_bytes(path, content, strlen(content));
    ga_trace_t t;
    int rc = ga_lifetimes_read(path, &t, err, sizeof err);
    ck_assert_msg(rc == want_rc, "csv %s: rc %d (%s)", content, rc, err);
    if (needle)
        ck_assert_msg(strstr(err, needle) != NULL, "error '%s' should contain '%s'", err, needle);
    if (rc == 0)
        ga_trace_free(&t);
    else
        ck_assert_uint_eq(t.count, 0);
}

START_TEST(lifetimes_malformed)
{
    const char *h = "id,lower,upper,size\n";
    char buf[256];
#define BAD(body, needle)                                    \
    do {                                                     \
        snprintf(buf, sizeof buf, "%s%s", h, body);          \
        expect_csv(buf, -1, needle);                         \
    } while (0)
    expect_csv("", -1, "empty file");
    expect_csv("id,start,end,size\n0,0,1,1\n", -1, "x.csv:1: header");
    BAD("0,0,1,1\n1,0,x,1\n", "x.csv:3: not a number");
    BAD("0,-1,1,1\n", "x.csv:2: negative");
    BAD("0,5,4,1\n", "x.csv:2: upper is before lower");
    BAD("0,0,4,0\n", "x.csv:2: size 0");
    BAD("7,0,4,1\n8,0,4,1\n7,1,2,3\n", "x.csv:4: duplicate id 7 (first on line 2)");
    BAD("0,0,18446744073709551616,1\n", "x.csv:2: number too large");
    BAD("0,0,1\n", "expected 4 fields");
    BAD("0,0,1,1,5\n", "more than 4 fields");
    BAD("0,,1,1\n", "empty field");
    BAD("0,0,1,1x\n", "not a number");
    BAD("0,0,1,0x10\n", "not a number");
#undef BAD
    /* Accepted: CRLF, blank lines, blanks around fields, the largest u64, an empty trace. */
    expect_csv("id,lower,upper,size\r\n0,0,1,1\r\n\r\n 1 , 2 ,3,18446744073709551615\n", 0,
               NULL);
    expect_csv("id,lower,upper,size\n", 0, NULL);
}
END_TEST

/* Frees come before allocs at one instant; a zero-length buffer stays alloc-then-free, between
 * the frees and the allocs of its instant (after the allocs, it met buffers born there: helper-60
 * F6). */
START_TEST(lifetimes_order_at_equal_times)
{
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/order.csv", tmpdir);
    const char *csv = "id,lower,upper,size\n1,0,5,10\n2,5,9,20\n3,5,5,30\n4,0,5,40\n";
    write_bytes(path, csv, strlen(csv));
    ga_trace_t t;
    ck_assert_msg(ga_lifetimes_read(path, &t, err, sizeof err) == 0, "%s", err);
    static const struct { uint64_t time, id; uint8_t kind; } want[] = {
        {0, 1, GA_EV_ALLOC}, {0, 4, GA_EV_ALLOC}, {5, 1, GA_EV_FREE}, {5, 4, GA_EV_FREE},
        {5, 3, GA_EV_ALLOC}, {5, 3, GA_EV_FREE}, {5, 2, GA_EV_ALLOC}, {9, 2, GA_EV_FREE}};
    ck_assert_uint_eq(t.count, 8);
    for (size_t i = 0; i < 8; i++) {
        ck_assert_uint_eq(t.events[i].time_ns, want[i].time);
        ck_assert_uint_eq(t.events[i].addr, want[i].id);
        ck_assert_uint_eq(t.events[i].kind, want[i].kind);
    }
    ga_trace_free(&t);
}
END_TEST

/* A NUL byte is refused wherever it is (it cut "1\0002" to a size of 1 on the last line, and
 * passed for "line too long" elsewhere), and a UTF-8 byte order mark before the header, as
 * spreadsheets write it, is read past. */
START_TEST(lifetimes_nul_and_bom)
{
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/nul.csv", tmpdir);
    static const char at_end[] = "id,lower,upper,size\n0,0,5,1\0002";
    static const char mid[] = "id,lower,upper,size\n0,0,5,1\0002\n1,0,5,7\n";
    const struct { const char *b; size_t n; } bad[] = {{at_end, sizeof at_end - 1},
                                                       {mid, sizeof mid - 1}};
    for (size_t i = 0; i < 2; i++) {
        write_bytes(path, bad[i].b, bad[i].n);
        ga_trace_t t;
        ck_assert_int_eq(ga_lifetimes_read(path, &t, err, sizeof err), -1);
        ck_assert_msg(strstr(err, "nul.csv:2: a NUL byte") != NULL, "%s", err);
    }
    static const char bom[] = "\xef\xbb\xbfid,lower,upper,size\r\n0,0,5,100\r\n";
    write_bytes(path, bom, sizeof bom - 1);
    ga_trace_t t;
    ck_assert_msg(ga_lifetimes_read(path, &t, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(t.count, 2);
    ck_assert_uint_eq(t.events[0].size, 100);
    ga_trace_free(&t);
}
END_TEST

/* Seeded random CSV bodies from a small alphabet: the reader returns 0 or -1, never crashes, and a
 * success always pairs every alloc with a free. */
START_TEST(lifetimes_random_garbage)
{
    static const char alphabet[] = "0123456789,,,-\n\n \r9x";
    uint64_t seed = 12345;
    char body[256], path[300], err[256];
    snprintf(path, sizeof path, "%s/fuzz.csv", tmpdir);
    for (int round = 0; round < 500; round++) {
        size_t n = (size_t)snprintf(body, sizeof body, "id,lower,upper,size\n");
        size_t len = n + round % 200;
        for (; n < len && n < sizeof body - 1; n++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            body[n] = alphabet[(seed >> 33) % (sizeof alphabet - 1)];
        }
        write_bytes(path, body, n);
        ga_trace_t t;
        int rc = ga_lifetimes_read(path, &t, err, sizeof err);
        ck_assert_msg(rc == 0 || rc == -1, "rc %d", rc);
        if (rc == 0) {
            size_t allocs = 0;
            for (size_t i = 0; i < t.count; i++)
                allocs += t.events[i].kind == GA_EV_ALLOC;
            ck_assert_uint_eq(2 * allocs, t.count);
            ga_trace_free(&t);
        } else {
            ck_assert_msg(strstr(err, "fuzz.csv:") != NULL, "error without a line: %s", err);
        }
    }
}
END_TEST

Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_add_checked_fixture(tc, make_tmpdir, remove_tmpdir);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, encode_is_little_endian);
    tcase_add_test(tc, api_names);
    tcase_add_test(tc, round_trip_every_field);
    tcase_add_test(tc, empty_after_header_is_valid);
    tcase_add_test(tc, read_sorts_by_time_stably);
    tcase_add_test(tc, truncated_at_every_offset);
    tcase_add_test(tc, malformed_headers);
    tcase_add_test(tc, missing_and_unwritable_paths);
    tcase_add_test(tc, lifetimes_real_files);
    tcase_add_test(tc, lifetimes_malformed);
    tcase_add_test(tc, lifetimes_order_at_equal_times);
    tcase_add_test(tc, lifetimes_random_garbage);
    tcase_add_test(tc, lifetimes_nul_and_bom);
    suite_add_tcase(s, tc);
    return s;
}
