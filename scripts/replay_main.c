/* gpuarena-replay: replays a gpuarena trace or a buffer-lifetime CSV through the allocator on the
 * CPU and reports what each mode would have done; the engine behind `gpuarena replay`.
 *
 * It is a thin command-line layer over ga_replay.h: parse options (sizes with the one size grammar,
 * ga_size.h; modes by the names of GA_MODE_LIST), read the file (format by magic or .csv
 * extension), run each mode asked for, print a table for people or one JSON document for the
 * Python command, nested per mode with a "units" map, so the Python side takes field names and
 * units from it and never keeps a copy of the list; and with --timeline a per-event CSV through
 * replay's hook (what `gpuarena report` draws). Exit codes: 0 ok, 1 bad input file (one that
 * holds no allocation too) or an unwritable timeline, 2 usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ga_replay.h"
#include "ga_size.h"
#include "replay_args.h"

static const char *detect_format(const char *path)
{
    FILE *f = fopen(path, "rb");
    char magic[8] = {0};
    if (f) {
        size_t n = fread(magic, 1, sizeof magic, f);
        fclose(f);
        if (n == sizeof magic && memcmp(magic, GA_TRACE_MAGIC, sizeof magic) == 0)
            return "trace";
    }
    size_t n = strlen(path);
    if (n >= 4 && strcmp(path + n - 4, ".csv") == 0)
        return "lifetimes";
    return "trace"; /* the trace reader then explains what is wrong with the file */
}

/* A FILE must be a regular file: a FIFO or a device is read twice here (the format is told from
 * its first bytes, then it is read whole), blocks with no writer, and /dev/zero never ends, so
 * it grew host memory until malloc failed. Refused with what to do instead. */
static int check_regular(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0; /* the reader says why it cannot open it */
    if (S_ISREG(st.st_mode))
        return 0;
    fprintf(stderr, "gpuarena: %s: %s, not a regular file; give a trace or CSV file (save a "
            "stream to a file first, e.g. cat ... > trace.gatrace)\n", path,
            S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
            : S_ISSOCK(st.st_mode) ? "a socket" : "a device");
    return -1;
}

/* Device -1 on a free is the shim's "no device": the free of a pointer no pool owned (passed to
 * the driver or refused), no pool's event (shim/alloc.c). Every other number is a device, negative
 * ones too: counting only 0 and up replayed events on -7 and on 0 through one pool. */
static int no_device(const ga_event_t *e)
{
    return e->device == -1 && e->kind == GA_EV_FREE;
}

/* The devices the events name, in order, listed into buf ("0, 1"); their number. */
static int list_devices(const ga_trace_t *t, char *buf, size_t len)
{
    static unsigned char seen[65536];
    memset(seen, 0, sizeof seen);
    for (size_t i = 0; i < t->count; i++)
        if (!no_device(&t->events[i]))
            seen[t->events[i].device + 32768] = 1;
    int n = 0;
    size_t used = 0;
    buf[0] = '\0';
    for (int d = -32768; d < 32768; d++) {
        if (!seen[d + 32768])
            continue;
        if (n++ < 8 && used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%d", n > 1 ? ", " : "", d);
    }
    if (n > 8 && used < len)
        snprintf(buf + used, len - used, " and %d more", n - 8);
    return n;
}

/* One pool per device: the shim keeps one per context, and a trace names no context, so the
 * contexts of a device replay merged into one pool (helper-49 F5: the refusal said the shim
 * keeps one per device); a trace over several devices replayed through one pool mixed their peaks. With --device N only N's events are kept; without it such
 * a trace is refused with the devices it names. */
static int pick_device(const options_t *o, ga_trace_t *t)
{
    char devs[256];
    int n = list_devices(t, devs, sizeof devs);
    if (!o->has_device) {
        if (n <= 1)
            return 0;
        fprintf(stderr, "gpuarena: %s has events on %d devices (%s); a device's memory is its "
                "own (gpuarena keeps one pool per context, and a replay merges a device's contexts "
                "into one pool), so replay one device at a time: --device N\n", o->path, n, devs);
        return -1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < t->count; i++)
        if (t->events[i].device == o->device)
            t->events[kept++] = t->events[i];
    if (!kept && t->count) {
        fprintf(stderr, "gpuarena: %s has no events on device %d (its devices: %s)\n", o->path,
                o->device, devs);
        return -1;
    }
    t->count = kept;
    return 0;
}

/* A trace that holds no allocation (a header alone, a CSV of its header line, an import of a file
 * with none) has nothing to replay: every mode printed zeros and a min_size of 512 bytes, which
 * read as a result. Refused as a 0-byte input and a device without events are (exit 1), in the
 * words `gpuarena replay` and `report` use for it (replay.py). */
static int holds_allocation(const options_t *o, const ga_trace_t *t)
{
    for (size_t i = 0; i < t->count; i++)
        if (t->events[i].kind != GA_EV_FREE)
            return 1;
    char on[32] = "", only[48] = ", nor any free";
    if (o->has_device)
        snprintf(on, sizeof on, " on device %d", o->device);
    if (t->count)
        snprintf(only, sizeof only, ", only %zu free%s", t->count, t->count == 1 ? "" : "s");
    fprintf(stderr, "gpuarena: %s holds no allocation%s%s: nothing to replay; record a run that "
            "allocates GPU memory (a process that ends before its first allocation leaves none), "
            "or give the file meant\n", o->path, on, only);
    return 0;
}

static int load(options_t *o, ga_trace_t *t)
{
    char err[512];
    if (check_regular(o->path) != 0)
        return -1;
    if (!o->format)
        o->format = detect_format(o->path);
    int rc = strcmp(o->format, "lifetimes") == 0 ? ga_lifetimes_read(o->path, t, err, sizeof err)
                                                 : ga_trace_read(o->path, t, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "gpuarena: %s\n", err);
        return rc;
    }
    if (t->open_last_line)
        fprintf(stderr, "gpuarena: %s:%zu: the last row has no line end; if the file was cut "
                "short there, its last number is cut too (check the row against the source)\n",
                o->path, t->open_last_line);
    if (pick_device(o, t) != 0 || !holds_allocation(o, t)) {
        ga_trace_free(t);
        return -1;
    }
    return 0;
}

/* The timeline CSV: one line per replayed event (two for a recorded out-of-memory tried and served:
 * its moment of use, then after its free), written through stdio's buffer into a temporary beside
 * the target (a unique name, created exclusively, with the mode of the file it replaces), renamed
 * into place once the replay succeeded, as every other gpuarena output: a reader never sees half a
 * timeline, and a failed replay leaves an old file alone. A symlink is followed and its target
 * replaced; a device or a FIFO (/dev/null) is written through. */
typedef struct timeline {
    FILE *f;
    char target[PATH_MAX]; /* what the temporary is renamed onto; "" when written through */
    char tmp[PATH_MAX + 32];
} timeline_t;

static void timeline_point(void *ctx, const ga_replay_point_t *p)
{
    timeline_t *tl = ctx;
    fprintf(tl->f, "%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", p->time_ns, p->in_use, p->reserved);
}

/* The input itself, or a link to it (hard or symbolic), as --timeline truncated the trace it was
 * replaying and exited 0 (helper-60 F1): refused before anything is read or written. */
static int timeline_is_input(const options_t *o)
{
    struct stat in, out;
    if (!o->timeline || stat(o->path, &in) != 0 || stat(o->timeline, &out) != 0)
        return 0;
    if (in.st_dev != out.st_dev || in.st_ino != out.st_ino)
        return 0;
    fprintf(stderr, "gpuarena: --timeline %s is the input file %s (the same file, or a link to "
            "it): writing it would destroy the input; name another file (see gpuarena-replay "
            "--help)\n", o->timeline, o->path);
    return 1;
}

/* Where the temporary goes: beside the file a rename may replace (a symlink's target, found by
 * realpath), or nowhere (tl->target "") for what is written through. */
static int timeline_target(const char *path, timeline_t *tl, struct stat *st, int *exists)
{
    *exists = stat(path, st) == 0;
    tl->target[0] = '\0';
    if (*exists && !S_ISREG(st->st_mode))
        return 0;
    if (*exists ? !realpath(path, tl->target) : strlen(path) >= sizeof tl->target)
        return -1;
    if (!*exists)
        strcpy(tl->target, path);
    return 0;
}

static int timeline_open(const char *path, timeline_t *tl)
{
    struct stat st;
    int exists, fd = -1;
    if (timeline_target(path, tl, &st, &exists) != 0) {
        fprintf(stderr, "gpuarena: cannot write the timeline '%s': %s\n", path, strerror(errno));
        return -1;
    }
    if (!tl->target[0]) {
        tl->f = fopen(path, "w");
    } else {
        for (unsigned i = 0; fd < 0 && i < 100; i++) {
            snprintf(tl->tmp, sizeof tl->tmp, "%s.%d-%u.tmp", tl->target, (int)getpid(), i);
            fd = open(tl->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (fd < 0 && errno != EEXIST)
                break;
        }
        if (fd >= 0 && exists)
            (void)fchmod(fd, st.st_mode & 07777);
        tl->f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (fd >= 0 && !tl->f) {
            close(fd);
            unlink(tl->tmp);
        }
    }
    if (!tl->f) {
        fprintf(stderr, "gpuarena: cannot write the timeline '%s': %s (check the directory "
                "exists and is writable)\n", path, strerror(errno));
        return -1;
    }
    setvbuf(tl->f, NULL, _IOFBF, 1 << 16);
    fputs("time_ns,in_use,reserved\n", tl->f);
    return 0;
}

/* Returns 0, or -1 (message printed) when a write failed, e.g. a full disk. keep: the replay
 * succeeded, so the temporary replaces the target; otherwise it is removed. */
static int timeline_close(const char *path, timeline_t *tl, int keep)
{
    int bad = ferror(tl->f);
    if (fclose(tl->f) != 0 || bad) {
        fprintf(stderr, "gpuarena: writing the timeline '%s' failed (disk full?)%s\n", path,
                tl->target[0] ? "; nothing was written" : "");
        keep = 0;
        bad = 1;
    }
    if (!tl->target[0])
        return bad ? -1 : 0;
    if (keep && rename(tl->tmp, tl->target) != 0) {
        fprintf(stderr, "gpuarena: cannot write the timeline '%s': %s\n", path, strerror(errno));
        keep = 0;
        bad = 1;
    }
    if (!keep)
        unlink(tl->tmp);
    return bad ? -1 : 0;
}

typedef struct mode_run {
    ga_replay_result_t res;
    size_t size, min_size;
    int min_none; /* --min found no size that runs the trace: min_size null, the rest reported */
} mode_run_t;

/* vmm's virtual range for a peak or a cap of n bytes: twice it, in whole GA_ALIGN units, at least
 * `least`, saturating for sizes past a quarter of the address space. */
static size_t vmm_range(size_t n, size_t least)
{
    size_t r = n > SIZE_MAX / 4 ? SIZE_MAX / 4 * 2 / GA_ALIGN * GA_ALIGN
                                : (2 * n + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN;
    return r < least ? least : r;
}

static int run_mode(const ga_trace_t *t, const options_t *o, ga_replay_mode_t m, size_t peak,
                    mode_run_t *mr)
{
    char err[512];
    size_t min_range = 0;
    ga_replay_opts_t ro = {.mode = m, .check = o->check};
    int frac = o->has_fraction && m != GA_REPLAY_PLATFORM; /* platform: the cap alone */
    if (frac) { /* the shim's pool under GPUARENA_MEM_FRACTION and a cap of --limit */
        ro.fraction = o->fraction.value;
        ro.fraction_grow = o->fraction.grow;
        ro.limit = o->limit;
        mr->size = o->limit; /* size_limit: the cap; --min's answer is a cap too */
    } else if (m == GA_REPLAY_ARENA) {
        /* Twice the peak, and the rounding up, saturate rather than wrap (a 2^63-byte block).
         * The default stays within replay's address space (2^62 - 2^40 bytes): twice a 2^61-byte
         * peak was a region no backend call could give, and the whole replay failed with it. */
        size_t top = SIZE_MAX / GA_ALIGN * GA_ALIGN;
        size_t s = o->arena_size ? o->arena_size : !peak ? GA_ALIGN
                   : peak > DEFAULT_ARENA_MAX / 2 ? DEFAULT_ARENA_MAX : 2 * peak;
        ro.arena_size = s > top ? top : (s + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN;
        mr->size = ro.arena_size;
    } else {
        ro.limit = o->limit;
        mr->size = o->limit;
    }
    if (m == GA_REPLAY_VMM) {
        /* The virtual range: twice the peak, as the shim reserves twice the cap, and at least 64
         * granules, the least the pool itself ever takes. A trace of 1 MiB had a range of one
         * granule: its best fit outgrew it and a second range mapped a second granule (4.00x the
         * live peak on minimalloc_K, where a GPU's range, twice its memory, maps one). Under
         * --limit, twice the limit, as the shim's under that cap: with twice the peak the replay
         * placed blocks where the shim does not, and refused others (hta under 700 MiB: 8,451
         * against the shim's 8,596; an outside check, 2026-12-06). The smallest-size search keeps
         * twice the peak (min_range): its trials vary the limit over one fixed range. Under a
         * limit no floor of 64 granules: the shim's range is twice the cap, however small (a
         * 48 MiB cap: 96 MiB, where the floor made 128 MiB, the areas lay otherwise, and after the
         * first refusal the replay mapped 59 granules in 305 steps of a churn to the shim's 57: an
         * outside check, helper-135, 2026-12-07; test o135_replay_matches_the_shim). */
        size_t gran = o->granularity ? o->granularity : GA_REPLAY_GRANULARITY;
        size_t least = gran > SIZE_MAX / 4 / 64 ? gran : 64 * gran;
        min_range = vmm_range(peak, least);
        ro.arena_size = o->limit ? vmm_range(o->limit, gran) : min_range;
        ro.keep = o->keep_set ? o->keep : GA_VMM_KEEP_DEFAULT;
        ro.granularity = o->granularity; /* 0: GA_REPLAY_GRANULARITY */
    }
    timeline_t tl = {0};
    if (o->timeline) {
        if (timeline_open(o->timeline, &tl) != 0)
            return -1;
        ro.on_event = timeline_point;
        ro.hook_ctx = &tl;
    }
    int rc = ga_replay(t, &ro, &mr->res, err, sizeof err);
    if (o->timeline && timeline_close(o->timeline, &tl, rc == 0) != 0)
        return -1;
    ro.on_event = NULL;
    if (m == GA_REPLAY_VMM) /* under a fraction the range follows the cap, twice it */
        ro.arena_size = frac ? 0 : min_range;
    int mrc = rc == 0 && o->want_min ? ga_replay_min_size(t, &ro, 0, &mr->min_size, err, sizeof err)
                                     : 0;
    if (rc != 0 || mrc < 0) {
        fprintf(stderr, "gpuarena: %s mode: %s\n", ga_replay_mode_name(m), err);
        return -1;
    }
    if (mrc == 1) { /* a result, not an error: the other figures stand */
        mr->min_none = 1;
        fprintf(stderr, "gpuarena: %s mode: %s (its smallest size is reported as none)\n",
                ga_replay_mode_name(m), err);
    }
    return 0;
}

/* Length of the well-formed UTF-8 sequence at s (1 to 4), or 0 when s starts none. */
static int utf8_len(const unsigned char *s)
{
    unsigned char c = s[0];
    int n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
            : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    /* the second byte's range excludes overlong forms, surrogates and code points past U+10FFFF */
    unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    for (int i = 1; i < n; i++)
        if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf))
            return 0;
    return n;
}

/* A JSON string. A byte that is no part of well-formed UTF-8 (a file name is bytes) is written
 * as the escape \udcXX of Python's surrogateescape, which json.loads reads back and
 * os.fsencode turns into that byte: written raw, it made the document invalid JSON (helper-60
 * F9). */
static void print_json_string(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    putchar('"');
    while (*s) {
        int n = utf8_len(s);
        if (!n)
            printf("\\udc%02x", *s);
        else if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if (*s < 0x20)
            printf("\\u%04x", *s);
        else
            fwrite(s, 1, (size_t)n, stdout);
        s += n ? n : 1;
    }
    putchar('"');
}

/* ", \"name\": N" or null when absent. */
static void json_u64_or_null(const char *name, int present, uint64_t v)
{
    if (present)
        printf(", \"%s\": %" PRIu64, name, v);
    else
        printf(", \"%s\": null", name);
}

static void print_json_units(void)
{
    printf(", \"units\": {\"size_limit\": \"bytes\"");
#define GA_JSON_UNIT(name, unit, desc) printf(", \"" #name "\": \"" #unit "\"");
    GA_REPLAY_RESULT_LIST(GA_JSON_UNIT)
#undef GA_JSON_UNIT
    printf(", \"final_frag\": \"ratio\", \"max_frag\": \"ratio\", \"first_oom\": \"index\", "
           "\"min_size\": \"bytes\", \"events_per_s\": \"rate\"}");
}

static void print_json_mode(const options_t *o, const mode_run_t *run)
{
    const ga_replay_result_t *r = &run->res;
    printf("{\"size_limit\": ");
    if (run->size)
        printf("%zu", run->size);
    else
        printf("null");
#define GA_JSON_FIELD(name, unit, desc) printf(", \"" #name "\": %" PRIu64, r->name);
    GA_REPLAY_RESULT_LIST(GA_JSON_FIELD)
#undef GA_JSON_FIELD
    printf(", \"final_frag\": %.6f, \"max_frag\": %.6f", r->final_frag, r->max_frag);
    json_u64_or_null("first_oom", r->first_oom != SIZE_MAX, r->first_oom);
    json_u64_or_null("min_size", o->want_min && !run->min_none, run->min_size);
    printf(", \"events_per_s\": %.0f}",
           r->ns_total ? (double)r->events * 1e9 / (double)r->ns_total : 0.0);
}

static void print_json(const options_t *o, const ga_trace_t *t, const mode_run_t *runs,
                       size_t peak)
{
    printf("{\"trace\": ");
    print_json_string(o->path);
    printf(", \"format\": \"%s\", \"version\": \"%s\", \"events\": %zu, \"truncated_bytes\": %zu, "
           "\"peak_live\": %zu",
           o->format, GA_VERSION, t->count, t->truncated_bytes, peak);
    if (o->has_device)
        printf(", \"device\": %d", o->device);
    if (o->has_fraction) /* as typed, "0.75+": the arena's share of size_limit */
        printf(", \"fraction\": \"%s%s\"", o->fraction.text, o->fraction.grow ? "+" : "");
    print_json_units();
    printf(", \"modes\": {");
    for (int m = 0, first = 1; m < GA_MODE_COUNT; m++) {
        if (!o->modes[m])
            continue;
        printf("%s\"%s\": ", first ? "" : ", ", ga_mode_name((ga_mode_t)m));
        print_json_mode(o, &runs[m]);
        first = 0;
    }
    printf("}}\n");
}

static void print_row_u64(const char *label, const options_t *o, const mode_run_t *runs,
                          size_t off)
{
    printf("%-20s", label);
    for (int m = 0; m < GA_MODE_COUNT; m++)
        if (o->modes[m])
            printf(" %16" PRIu64, *(const uint64_t *)((const char *)&runs[m].res + off));
    putchar('\n');
}

static void print_table(const options_t *o, const ga_trace_t *t, const mode_run_t *runs)
{
    printf("%s (%s, %zu events", o->path, o->format, t->count);
    if (o->has_fraction)
        printf(", fraction %s%s of the cap", o->fraction.text, o->fraction.grow ? "+" : "");
    if (t->truncated_bytes)
        printf(", %zu trailing bytes of a partial record ignored", t->truncated_bytes);
    printf(")\n%-20s", "");
    for (int m = 0; m < GA_MODE_COUNT; m++)
        if (o->modes[m])
            printf(" %16s", ga_replay_mode_name((ga_replay_mode_t)m));
    printf("\n%-20s", "size/limit");
    for (int m = 0; m < GA_MODE_COUNT; m++)
        if (o->modes[m])
            printf(" %16zu", runs[m].size);
    putchar('\n');
#define GA_TABLE_ROW(name, unit, desc) \
    print_row_u64(#name, o, runs, offsetof(ga_replay_result_t, name));
    GA_REPLAY_RESULT_LIST(GA_TABLE_ROW)
#undef GA_TABLE_ROW
    const char *labels[] = {"final_frag", "max_frag"};
    for (int k = 0; k < 2; k++) {
        printf("%-20s", labels[k]);
        for (int m = 0; m < GA_MODE_COUNT; m++)
            if (o->modes[m])
                printf(" %16.4f", k ? runs[m].res.max_frag : runs[m].res.final_frag);
        putchar('\n');
    }
    if (!o->want_min)
        return;
    printf("%-20s", "min_size");
    for (int m = 0; m < GA_MODE_COUNT; m++) {
        if (o->modes[m] && runs[m].min_none)
            printf(" %16s", "none");
        else if (o->modes[m])
            printf(" %16zu", runs[m].min_size);
    }
    putchar('\n');
}

/* After the output: each mode whose replay found invariant failures (--check's ga_check, or the
 * pool refusing a pointer it gave) said on stderr, and exit 1. The checker never fails on correct
 * code, so a failure is a bug; it was printed as a count in the output only, and the tool exited 0,
 * which a script or CI run of --check took for a pass. */
static int report_check_failures(const options_t *o, const mode_run_t *runs)
{
    int rc = 0;
    for (int m = 0; m < GA_MODE_COUNT; m++) {
        const ga_replay_result_t *r = &runs[m].res;
        if (!o->modes[m] || !r->check_failures)
            continue;
        fprintf(stderr, "gpuarena: %s mode: the invariant checker found %" PRIu64 " failure%s",
                ga_replay_mode_name((ga_replay_mode_t)m), r->check_failures,
                r->check_failures == 1 ? "" : "s");
        if (r->first_check_fail != SIZE_MAX)
            fprintf(stderr, " (first after event %zu: %s)", r->first_check_fail, r->check_report);
        fprintf(stderr, "; this is a bug in gpuarena's allocator: please report it with the trace "
                "'%s' and this command line\n", o->path);
        rc = 1;
    }
    return rc;
}

/* vmm maps whole granules: under a --limit of less than one, every allocation is refused, and
 * the replay said nothing of why (an outside check, 2026-12-07). Said before the figures, which
 * stand: it is what vmm does under such a cap (the shim explains each such out-of-memory). */
static void say_limit_under_granule(const options_t *o)
{
    size_t g = o->granularity ? o->granularity : GA_REPLAY_GRANULARITY;
    /* Under one block no region, block or granule fits in any mode (README, "Choices": the replay
     * models such a cap, which the shim refuses at cuInit): said once for every mode. */
    if (o->limit && o->limit < GA_ALIGN) {
        fprintf(stderr, "gpuarena: --limit %zu is under one block of %zu bytes: every allocation "
                "is refused in every mode given it (the shim refuses GPUARENA_LIMIT under %zu at "
                "cuInit); give a --limit of at least %zu\n", o->limit, (size_t)GA_ALIGN,
                (size_t)GA_ALIGN, (size_t)GA_ALIGN);
        return;
    }
    if (!o->modes[GA_REPLAY_VMM] || !o->limit)
        return;
    if (o->has_fraction && !o->fraction.grow) { /* a fixed share bounds vmm's mapped bytes */
        uint64_t share = ga_fraction_share(o->limit, o->fraction.value, GA_ALIGN);
        if (share && share < g)
            fprintf(stderr, "gpuarena: vmm mode: --fraction %s of --limit %zu is %" PRIu64
                    " bytes, under one granule (%zu bytes): vmm maps whole granules, so every "
                    "allocation is refused; give a larger fraction or --limit\n",
                    o->fraction.text, o->limit, share, g);
        return;
    }
    if (o->limit >= g)
        return;
    fprintf(stderr, "gpuarena: vmm mode: --limit %zu is under one granule (%zu bytes: %s): vmm "
            "maps whole granules, so every allocation is refused; give a --limit of at least "
            "%zu, or (gpuarena-replay) a smaller --granularity to model a device with smaller "
            "granules\n",
            o->limit, g, o->granularity ? "--granularity" : "2 MiB, current GPUs' granule", g);
}

/* Sizes the replay uses other than as given, said before the figures (they were rounded without a
 * word: an outside check, 2026-12-07). An arena is whole blocks: --arena-size 100 replayed an arena
 * of 512 bytes, 1000 one of 1024. vmm keeps whole granules: a --vmm-keep under one keeps none, as
 * --vmm-keep 0 does. Both still run (a one-block arena, a keep of nothing are results); a --limit
 * under one block or granule is said by say_limit_under_granule. */
static void say_sizes_rounded(const options_t *o)
{
    size_t a = o->arena_size, top = SIZE_MAX / GA_ALIGN * GA_ALIGN;
    if (a && o->modes[GA_REPLAY_ARENA] && a % GA_ALIGN) {
        size_t used = a > top ? top : (a + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN;
        if (a < GA_ALIGN)
            fprintf(stderr, "gpuarena: arena mode: --arena-size %zu is under one block (%zu "
                    "bytes): an arena is whole blocks, so it is %zu bytes; give at least %zu\n",
                    a, (size_t)GA_ALIGN, used, (size_t)GA_ALIGN);
        else
            fprintf(stderr, "gpuarena: arena mode: --arena-size %zu is not a whole number of "
                    "blocks (%zu bytes each): an arena is whole blocks, so it is %zu bytes; give "
                    "a multiple of %zu (e.g. %zu)\n", a, (size_t)GA_ALIGN, used,
                    (size_t)GA_ALIGN, used);
    }
    size_t g = o->granularity ? o->granularity : GA_REPLAY_GRANULARITY;
    if (!o->keep_set || !o->modes[GA_REPLAY_VMM] || o->keep % g == 0)
        return;
    const char *gs = o->granularity ? "--granularity" : "2 MiB, current GPUs' granule";
    if (o->keep < g)
        fprintf(stderr, "gpuarena: vmm mode: --vmm-keep %zu is under one granule (%zu bytes: %s): "
                "vmm keeps whole granules, so none is kept mapped, as with --vmm-keep 0; give 0, "
                "or at least %zu to keep one\n", o->keep, g, gs, g);
    else
        fprintf(stderr, "gpuarena: vmm mode: --vmm-keep %zu is not a whole number of granules "
                "(%zu bytes each: %s): vmm keeps whole granules, so at most %zu bytes (%zu "
                "granule%s) are kept mapped; give a multiple of %zu\n", o->keep, g, gs,
                o->keep / g * g, o->keep / g, o->keep / g == 1 ? "" : "s", g);
}

int main(int argc, char **argv)
{
    options_t o = {.device = 0};
    int rc = replay_parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (timeline_is_input(&o))
        return 2;
    ga_trace_t t;
    if (load(&o, &t) != 0)
        return 1;
    mode_run_t runs[GA_MODE_COUNT];
    memset(runs, 0, sizeof runs);
    /* The peak of live bytes (platform model, no limit) sets the default arena size. It is 0
     * when nothing is ever live (ga_replay_min_size would say one GA_ALIGN, the smallest cap). */
    size_t peak = 0;
    char err[512];
    ga_replay_opts_t po = {.mode = GA_REPLAY_PLATFORM, .no_frag_track = 1};
    ga_replay_result_t pr;
    if (ga_replay(&t, &po, &pr, err, sizeof err) != 0) {
        fprintf(stderr, "gpuarena: %s\n", err);
        rc = 1;
    } else if (!pr.failed_allocs) { /* else a block no size serves: peak stays 0, and every
                                       mode reports its failed allocation */
        peak = (size_t)pr.peak_in_use;
    } else if (pr.first_oom < t.count) { /* said, so the failures are not read as a real OOM */
        uint64_t big = t.events[pr.first_oom].size;
        fprintf(stderr, "gpuarena: %s: the block of %" PRIu64 " bytes at event %zu%s is more than "
                "the replay's address space can place (with what is live then); each mode counts "
                "every block it cannot place as a failed allocation (%" PRIu64 " in platform "
                "mode), no size runs the trace, and peak_live is 0; fix or remove that "
                "event\n", o.path, big, pr.first_oom,
                big > ((uint64_t)1 << 63) ? " (over 2^63: a negative size written unsigned?)" : "",
                pr.failed_allocs);
    }
    say_limit_under_granule(&o);
    say_sizes_rounded(&o);
    for (int m = 0; m < GA_MODE_COUNT && rc < 0; m++)
        if (o.modes[m] && run_mode(&t, &o, (ga_replay_mode_t)m, peak, &runs[m]) != 0)
            rc = 1;
    if (rc < 0) {
        if (o.json)
            print_json(&o, &t, runs, peak);
        else
            print_table(&o, &t, runs);
        fflush(stdout);
        rc = report_check_failures(&o, runs);
    }
    ga_trace_free(&t);
    return rc;
}
