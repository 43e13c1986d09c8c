/* Buffer-lifetime CSV reader: turns `id,lower,upper,size` rows into a time-ordered alloc/free trace.
 *
 * These files (minimalloc benchmarks, MindSpore SOMAS tensor sets) describe buffers live over a
 * logical interval [lower, upper). Replay needs events, so each row becomes an alloc at `lower` and a
 * free at `upper`, sorted by time with frees first at equal times (a buffer ending at t and one
 * starting at t never overlap, as in the interval model). A row with lower == upper is live for no
 * time: its alloc and free, side by side, come after the frees and before the allocs of that
 * instant, so it meets only the buffers live across t, the fewest at t (after the allocs, it was
 * counted live beside buffers born at t, which [lower, upper) says it never meets: helper-60 F6).
 * Ties keep file order, so the output is deterministic. The parser is strict: anything that is not
 * a plain non-negative decimal in range is an error naming the file and line, never a guess.
 */
#include "errmsg.h"
#include "ga_trace.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct row {
    uint64_t id, lower, upper, size;
    size_t line;
} row_t;

/* One event before sorting: phase 0 = free, 1 = alloc of a zero-length buffer, 2 = its free,
 * 3 = alloc. */
typedef struct pending {
    uint64_t time;
    unsigned phase;
    size_t row;
} pending_t;

/* Parses one unsigned decimal field ending at ',' or end of line. Returns NULL on error with a
 * reason in *why, else the position after the field (its separator). */
static const char *parse_u64(const char *p, uint64_t *out, const char **why)
{
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '-') {
        *why = "negative value";
        return NULL;
    }
    if (!isdigit((unsigned char)*p)) {
        *why = *p == ',' || *p == '\0' ? "empty field" : "not a number";
        return NULL;
    }
    uint64_t v = 0;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) {
            *why = "number too large (over 2^64-1)";
            return NULL;
        }
        v = v * 10 + d;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p != ',' && *p != '\0') {
        *why = "not a number";
        return NULL;
    }
    *out = v;
    return p;
}

static int parse_row(const char *line, row_t *r, const char **why)
{
    uint64_t *f[4] = {&r->id, &r->lower, &r->upper, &r->size};
    const char *p = line;
    for (int i = 0; i < 4; i++) {
        p = parse_u64(p, f[i], why);
        if (!p)
            return -1;
        if (i < 3 && *p++ != ',') {
            *why = "expected 4 fields: id,lower,upper,size";
            return -1;
        }
    }
    if (*p != '\0') {
        *why = "more than 4 fields";
        return -1;
    }
    if (r->upper < r->lower) {
        *why = "upper is before lower";
        return -1;
    }
    if (r->size == 0) {
        *why = "size 0";
        return -1;
    }
    return 0;
}

/* Strips a trailing CR and surrounding blanks in place; returns the start. */
static char *trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\r' || s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

static int push_row(row_t **rows, size_t *n, size_t *cap, const row_t *r)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        row_t *nr = realloc(*rows, nc * sizeof *nr);
        if (!nr)
            return -1;
        *rows = nr;
        *cap = nc;
    }
    (*rows)[(*n)++] = *r;
    return 0;
}

/* Whether s is the header id,lower,upper,size, any case, blanks around each name, as the
 * command's reader takes it (scripts/gpuarena_cli/csvformats.py): `ID,Lower,Upper,Size` replayed
 * through `gpuarena replay` and was refused here until 2026-12-07 (an outside check, helper-125). */
static int is_header(const char *s)
{
    static const char *const names[4] = {"id", "lower", "upper", "size"};
    for (int i = 0; i < 4; i++) {
        size_t n = strlen(names[i]);
        while (*s == ' ' || *s == '\t')
            s++;
        for (size_t k = 0; k < n; k++, s++)
            if (tolower((unsigned char)*s) != names[i][k])
                return 0;
        while (*s == ' ' || *s == '\t')
            s++;
        if (i < 3 && *s++ != ',')
            return 0;
    }
    return *s == '\0';
}

/* Reads and validates every data row. The header is id,lower,upper,size (is_header). */
static int read_rows(FILE *f, const char *path, row_t **rows, size_t *n, size_t *open_line,
                     char *err, size_t errlen)
{
    char buf[512];
    size_t cap = 0, lineno = 0;
    *open_line = 0;
    int header = 0;
    for (;;) {
        /* Filled with newlines first, so the last NUL is the one fgets ended the line with: one
         * before it was in the file, and would cut the line (a size "1\0002" read as 1) or pass
         * for "line too long". */
        memset(buf, '\n', sizeof buf);
        if (!fgets(buf, sizeof buf, f))
            break;
        lineno++;
        size_t end = sizeof buf - 1;
        while (buf[end] != '\0')
            end--;
        if (lineno == 1 && end >= 2) { /* a byte-order mark: saved by a Windows tool */
            const unsigned char *u = (const unsigned char *)buf;
            const char *enc = (end >= 4 && ((u[0] == 0xff && u[1] == 0xfe && !u[2] && !u[3]) ||
                                            (!u[0] && !u[1] && u[2] == 0xfe && u[3] == 0xff)))
                                  ? "UTF-32"
                              : ((u[0] == 0xff && u[1] == 0xfe) || (u[0] == 0xfe && u[1] == 0xff))
                                  ? "UTF-16"
                                  : NULL;
            if (enc)
                return ga_errorf(err, errlen, "%s: %s text, not UTF-8; convert it first: iconv "
                                 "-f %s -t UTF-8 FILE > FILE.utf8.csv", path, enc, enc);
        }
        if (strlen(buf) < end)
            return ga_errorf(err, errlen, "%s:%zu: a NUL byte; not a text CSV", path, lineno);
        int ended = strchr(buf, '\n') != NULL;
        const char *cr = strchr(buf, '\r');
        if (cr && cr[1] != '\n' && cr[1] != '\0') /* CR line ends read as one wrong header */
            return ga_errorf(err, errlen, "%s:%zu: a carriage return (CR) not followed by a line "
                             "feed: a CSV's lines end in LF or CRLF; convert CR line ends (old "
                             "Mac) with tr '\\r' '\\n'", path, lineno);
        if (!ended && !feof(f))
            return ga_errorf(err, errlen, "%s:%zu: line too long", path, lineno);
        char *s = trim(buf);
        if (lineno == 1 && strncmp(s, "\xef\xbb\xbf", 3) == 0) /* a UTF-8 byte order mark */
            s = trim(s + 3);
        if (*s == '\0')
            continue;
        if (!header) {
            if (!is_header(s))
                return ga_errorf(err, errlen,
                            "%s:%zu: header must be 'id,lower,upper,size' (a buffer-lifetime CSV)",
                            path, lineno);
            header = 1;
            continue;
        }
        row_t r = {.line = lineno};
        const char *why = "";
        if (parse_row(s, &r, &why) != 0)
            return ga_errorf(err, errlen, "%s:%zu: %s; fix or remove that row", path, lineno,
                             why);
        if (push_row(rows, n, &cap, &r) != 0)
            return ga_errorf(err, errlen, "%s: out of memory", path);
        *open_line = ended ? 0 : lineno;
    }
    if (ferror(f))
        return ga_errorf(err, errlen, "%s: read error: %s", path, strerror(errno));
    if (!header)
        return ga_errorf(err, errlen, "%s: empty file, expected header 'id,lower,upper,size'", path);
    return 0;
}

static int cmp_row_id(const void *a, const void *b)
{
    const row_t *x = *(const row_t *const *)a, *y = *(const row_t *const *)b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

/* Duplicate ids would pair the wrong alloc with a free; sort pointers by id to find them. */
static int check_unique(const row_t *rows, size_t n, const char *path, char *err, size_t errlen)
{
    if (n < 2)
        return 0;
    const row_t **by = malloc(n * sizeof *by);
    if (!by)
        return ga_errorf(err, errlen, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++)
        by[i] = &rows[i];
    qsort(by, n, sizeof *by, cmp_row_id);
    int rc = 0;
    for (size_t i = 1; i < n && rc == 0; i++)
        if (by[i]->id == by[i - 1]->id)
            rc = ga_errorf(err, errlen, "%s:%zu: duplicate id %llu (first on line %zu)", path,
                      by[i]->line, (unsigned long long)by[i]->id, by[i - 1]->line);
    free(by);
    return rc;
}

static int cmp_pending(const void *a, const void *b)
{
    const pending_t *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    /* a zero-length buffer's pair (phases 1, 2) stays together: by row, then alloc first */
    unsigned gx = x->phase == 2 ? 1 : x->phase, gy = y->phase == 2 ? 1 : y->phase;
    if (gx != gy)
        return gx < gy ? -1 : 1;
    if (x->row != y->row)
        return x->row < y->row ? -1 : 1;
    return x->phase < y->phase ? -1 : x->phase > y->phase;
}

static int build_events(const row_t *rows, size_t n, ga_trace_t *out)
{
    if (n > SIZE_MAX / 2 / sizeof(pending_t))
        return -1;
    pending_t *p = malloc((n ? 2 * n : 1) * sizeof *p);
    if (!p)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int empty = rows[i].upper == rows[i].lower;
        p[2 * i] = (pending_t){rows[i].lower, empty ? 1 : 3, i};
        p[2 * i + 1] = (pending_t){rows[i].upper, empty ? 2 : 0, i};
    }
    qsort(p, 2 * n, sizeof *p, cmp_pending);
    int rc = 0;
    for (size_t i = 0; i < 2 * n && rc == 0; i++) {
        const row_t *r = &rows[p[i].row];
        ga_event_t ev = {.time_ns = p[i].time, .addr = r->id, .size = r->size, .device = 0,
                         .kind = p[i].phase % 2 ? GA_EV_ALLOC : GA_EV_FREE, .api = GA_API_IMPORT};
        rc = ga_trace_push(out, &ev);
    }
    free(p);
    return rc;
}

int ga_lifetimes_read(const char *path, ga_trace_t *out, char *err, size_t errlen)
{
    ga_trace_init(out);
    if (!path)
        return ga_errorf(err, errlen, "no lifetimes path given");
    FILE *f = fopen(path, "r");
    if (!f)
        return ga_errorf(err, errlen, "cannot open %s: %s; %s", path, strerror(errno),
                         ga_open_hint(errno));
    row_t *rows = NULL;
    size_t n = 0, open_line = 0;
    int rc = read_rows(f, path, &rows, &n, &open_line, err, errlen);
    fclose(f);
    if (rc == 0)
        rc = check_unique(rows, n, path, err, errlen);
    if (rc == 0 && build_events(rows, n, out) != 0) {
        ga_trace_free(out);
        rc = ga_errorf(err, errlen, "%s: out of memory for %zu events", path, 2 * n);
    }
    if (rc == 0)
        out->open_last_line = open_line;
    free(rows);
    return rc;
}
