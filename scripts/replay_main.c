/* gpuarena-replay: replays a gpuarena trace or a buffer-lifetime CSV through the allocator on the
 * CPU and reports what each mode would have done; the engine behind `gpuarena replay`.
 *
 * It is a thin command-line layer over ga_replay.h: parse options, read the file (format by magic
 * or .csv extension), run each mode asked for, print a table for people or one flat JSON object for
 * the Python command (keys listed in --help, so the Python side never parses the table), and with
 * --timeline a per-event CSV through replay's hook (what `gpuarena report` draws). Exit codes: 0 ok,
 * 1 bad input file or an unwritable timeline, 2 usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ga_replay.h"

typedef struct options {
    int modes[3]; /* indexed by ga_replay_mode_t */
    size_t arena_size, limit;
    int want_min, check, json;
    const char *format; /* NULL = auto */
    const char *path;
    const char *timeline; /* --timeline FILE, NULL = none */
} options_t;

static const char usage_text[] =
    "usage: gpuarena-replay [--mode arena|grow|platform|all] [--arena-size BYTES] [--limit BYTES]\n"
    "                       [--min] [--check] [--json] [--format trace|lifetimes]\n"
    "                       [--timeline CSV] FILE\n"
    "\n"
    "Replays an allocation trace through the gpuarena allocator on the CPU (no GPU needed).\n"
    "FILE is a gpuarena trace (GATRACE magic) or a buffer-lifetime CSV (id,lower,upper,size);\n"
    "the format is detected from the magic or a .csv extension unless --format is given.\n"
    "\n"
    "  --mode M        arena: preallocated single region of --arena-size, no growth\n"
    "                  grow: regions on demand up to --limit (0 or absent = no limit)\n"
    "                  platform: one driver reservation per allocation (pass-through model)\n"
    "                  all: the three modes (default)\n"
    "  --arena-size N  arena mode region size (default: twice the trace's peak live bytes);\n"
    "                  rounded up to 512 bytes\n"
    "  --limit N       cap on bytes reserved in grow and platform modes\n"
    "  --min           also find, by bisection, the smallest size that runs the trace without\n"
    "                  OOM (arena: region size, grow: limit, platform: peak of rounded sizes)\n"
    "  --check         run the allocator's invariant checker after every event (slow)\n"
    "  --json          print one flat JSON object instead of the table\n"
    "  --timeline CSV  with one --mode: write CSV time_ns,in_use,reserved after every replayed\n"
    "                  alloc or free (in_use rounded to 512, reserved = bytes from the backend)\n"
    "Sizes take units: 512MiB, 8GiB, 8G (binary), 8GB (decimal), or plain bytes.\n"
    "\n"
    "JSON keys: file, format, events_in_file, truncated_bytes, modes (comma-separated list),\n"
    "then for each mode M in modes: M_size (arena size or limit, 0 = none), M_events, M_allocs,\n"
    "M_frees, M_unmatched_frees, M_reused_addrs, M_skipped, M_invalid_allocs, M_failed_allocs,\n"
    "M_peak_in_use, M_peak_requested, M_peak_reserved, M_final_in_use, M_final_reserved,\n"
    "M_backend_reserves, M_backend_releases,\n"
    "M_check_failures, M_ns_total, M_final_frag, M_max_frag, M_first_oom (event index, -1 none),\n"
    "and with --min: M_min_size. Byte figures are integers in bytes.\n"
    "\n"
    "Exit status: 0 ok, 1 unreadable or malformed FILE or unwritable timeline, 2 usage error.\n";

static int usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "gpuarena: %s%s%s (see gpuarena-replay --help)\n", msg, arg ? ": " : "",
            arg ? arg : "");
    return 2;
}

/* Multiplier of a unit suffix, 0 if unknown. */
static uint64_t unit_factor(const char *u)
{
    static const struct { const char *name; uint64_t f; } units[] = {
        {"", 1}, {"B", 1}, {"K", 1ull << 10}, {"KiB", 1ull << 10}, {"M", 1ull << 20},
        {"MiB", 1ull << 20}, {"G", 1ull << 30}, {"GiB", 1ull << 30}, {"T", 1ull << 40},
        {"TiB", 1ull << 40}, {"KB", 1000ull}, {"MB", 1000000ull}, {"GB", 1000000000ull},
        {"TB", 1000000000000ull},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(u, units[i].name) == 0)
            return units[i].f;
    return 0;
}

/* Parses a size with an optional unit; rejects junk, negatives and overflow. */
static int parse_size(const char *s, size_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    uint64_t f = unit_factor(end);
    if (errno || f == 0 || (v && f > UINT64_MAX / v) || v * f > SIZE_MAX)
        return -1;
    *out = (size_t)(v * f);
    return 0;
}

static int set_mode(options_t *o, const char *m)
{
    ga_replay_mode_t mode;
    if (m && strcmp(m, "all") == 0) {
        o->modes[0] = o->modes[1] = o->modes[2] = 1;
        return 0;
    }
    if (ga_replay_mode_parse(m, &mode) != 0)
        return -1;
    o->modes[mode] = 1;
    return 0;
}

/* Returns -1 to continue, or an exit status (0 after --help). */
static int parse_args(int argc, char **argv, options_t *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = !strcmp(a, "--mode") || !strcmp(a, "--arena-size") || !strcmp(a, "--limit") ||
                    !strcmp(a, "--format") || !strcmp(a, "--timeline");
        if (takes && !v)
            return usage_error("missing value after", a);
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        } else if (!strcmp(a, "--mode")) {
            if (set_mode(o, v) != 0)
                return usage_error("--mode takes arena, grow, platform or all, not", v);
        } else if (!strcmp(a, "--arena-size")) {
            if (parse_size(v, &o->arena_size) != 0 || o->arena_size == 0)
                return usage_error("--arena-size is not a size (try 8GiB, 512MiB, 8G)", v);
        } else if (!strcmp(a, "--limit")) {
            if (parse_size(v, &o->limit) != 0)
                return usage_error("--limit is not a size (try 8GiB, 512MiB, 8G)", v);
        } else if (!strcmp(a, "--format")) {
            if (strcmp(v, "trace") && strcmp(v, "lifetimes"))
                return usage_error("--format takes trace or lifetimes, not", v);
            o->format = v;
        } else if (!strcmp(a, "--timeline")) {
            o->timeline = v;
        } else if (!strcmp(a, "--min")) {
            o->want_min = 1;
        } else if (!strcmp(a, "--check")) {
            o->check = 1;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage_error("unknown option", a);
        } else if (o->path) {
            return usage_error("more than one FILE given", a);
        } else {
            o->path = a;
            continue;
        }
        if (takes)
            i++;
    }
    if (!o->path)
        return usage_error("no trace FILE given", NULL);
    int nmodes = o->modes[0] + o->modes[1] + o->modes[2];
    if (o->timeline && nmodes != 1)
        return usage_error("--timeline needs exactly one --mode (arena, grow or platform)", NULL);
    if (!nmodes)
        set_mode(o, "all");
    return -1;
}

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

static int load(options_t *o, ga_trace_t *t)
{
    char err[512];
    if (!o->format)
        o->format = detect_format(o->path);
    int rc = strcmp(o->format, "lifetimes") == 0 ? ga_lifetimes_read(o->path, t, err, sizeof err)
                                                 : ga_trace_read(o->path, t, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "gpuarena: %s\n", err);
    return rc;
}

/* The timeline CSV: one line per replayed event, written through stdio's buffer. */
typedef struct timeline {
    FILE *f;
} timeline_t;

static void timeline_point(void *ctx, const ga_replay_point_t *p)
{
    timeline_t *tl = ctx;
    fprintf(tl->f, "%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", p->time_ns, p->in_use, p->reserved);
}

static int timeline_open(const char *path, timeline_t *tl)
{
    tl->f = fopen(path, "w");
    if (!tl->f) {
        fprintf(stderr, "gpuarena: cannot write the timeline '%s': %s (check the directory "
                "exists and is writable)\n", path, strerror(errno));
        return -1;
    }
    setvbuf(tl->f, NULL, _IOFBF, 1 << 16);
    fputs("time_ns,in_use,reserved\n", tl->f);
    return 0;
}

/* Returns 0, or -1 (message printed) when a write failed, e.g. a full disk. */
static int timeline_close(const char *path, timeline_t *tl)
{
    int bad = ferror(tl->f);
    if (fclose(tl->f) != 0 || bad) {
        fprintf(stderr, "gpuarena: writing the timeline '%s' failed (disk full?)\n", path);
        return -1;
    }
    return 0;
}

typedef struct mode_run {
    ga_replay_result_t res;
    size_t size, min_size;
} mode_run_t;

static int run_mode(const ga_trace_t *t, const options_t *o, ga_replay_mode_t m, size_t peak,
                    mode_run_t *mr)
{
    char err[512];
    ga_replay_opts_t ro = {.mode = m, .check = o->check};
    if (m == GA_REPLAY_ARENA) {
        size_t s = o->arena_size ? o->arena_size : (peak ? 2 * peak : GA_ALIGN);
        ro.arena_size = (s + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN;
        mr->size = ro.arena_size;
    } else {
        ro.limit = o->limit;
        mr->size = o->limit;
    }
    timeline_t tl = {0};
    if (o->timeline) {
        if (timeline_open(o->timeline, &tl) != 0)
            return -1;
        ro.on_event = timeline_point;
        ro.hook_ctx = &tl;
    }
    int rc = ga_replay(t, &ro, &mr->res, err, sizeof err);
    if (o->timeline && timeline_close(o->timeline, &tl) != 0)
        return -1;
    ro.on_event = NULL;
    if (rc != 0 ||
        (o->want_min && ga_replay_min_size(t, &ro, 0, &mr->min_size, err, sizeof err) != 0)) {
        fprintf(stderr, "gpuarena: %s mode: %s\n", ga_replay_mode_name(m), err);
        return -1;
    }
    return 0;
}

static void print_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_json(const options_t *o, const ga_trace_t *t, const mode_run_t *runs)
{
    printf("{\"file\": ");
    print_json_string(o->path);
    printf(", \"format\": \"%s\", \"events_in_file\": %zu, \"truncated_bytes\": %zu, \"modes\": \"",
           o->format, t->count, t->truncated_bytes);
    for (int m = 0, first = 1; m < 3; m++)
        if (o->modes[m]) {
            printf("%s%s", first ? "" : ",", ga_replay_mode_name((ga_replay_mode_t)m));
            first = 0;
        }
    putchar('"');
    for (int m = 0; m < 3; m++) {
        if (!o->modes[m])
            continue;
        const char *n = ga_replay_mode_name((ga_replay_mode_t)m);
        const ga_replay_result_t *r = &runs[m].res;
        printf(", \"%s_size\": %zu", n, runs[m].size);
#define GA_JSON_FIELD(name, unit, desc) printf(", \"%s_" #name "\": %" PRIu64, n, r->name);
        GA_REPLAY_RESULT_LIST(GA_JSON_FIELD)
#undef GA_JSON_FIELD
        printf(", \"%s_final_frag\": %.6f, \"%s_max_frag\": %.6f, \"%s_first_oom\": %lld", n,
               r->final_frag, n, r->max_frag, n,
               r->first_oom == SIZE_MAX ? -1LL : (long long)r->first_oom);
        if (o->want_min)
            printf(", \"%s_min_size\": %zu", n, runs[m].min_size);
    }
    printf("}\n");
}

static void print_row_u64(const char *label, const options_t *o, const mode_run_t *runs,
                          size_t off)
{
    printf("%-20s", label);
    for (int m = 0; m < 3; m++)
        if (o->modes[m])
            printf(" %16" PRIu64, *(const uint64_t *)((const char *)&runs[m].res + off));
    putchar('\n');
}

static void print_table(const options_t *o, const ga_trace_t *t, const mode_run_t *runs)
{
    printf("%s (%s, %zu events", o->path, o->format, t->count);
    if (t->truncated_bytes)
        printf(", %zu trailing bytes of a partial record ignored", t->truncated_bytes);
    printf(")\n%-20s", "");
    for (int m = 0; m < 3; m++)
        if (o->modes[m])
            printf(" %16s", ga_replay_mode_name((ga_replay_mode_t)m));
    printf("\n%-20s", "size/limit");
    for (int m = 0; m < 3; m++)
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
        for (int m = 0; m < 3; m++)
            if (o->modes[m])
                printf(" %16.4f", k ? runs[m].res.max_frag : runs[m].res.final_frag);
        putchar('\n');
    }
    if (!o->want_min)
        return;
    printf("%-20s", "min_size");
    for (int m = 0; m < 3; m++)
        if (o->modes[m])
            printf(" %16zu", runs[m].min_size);
    putchar('\n');
}

int main(int argc, char **argv)
{
    options_t o = {0};
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    ga_trace_t t;
    if (load(&o, &t) != 0)
        return 1;
    mode_run_t runs[3];
    memset(runs, 0, sizeof runs);
    /* The peak of live bytes (platform model, no limit) sets the default arena size. */
    size_t peak = 0;
    char err[512];
    ga_replay_opts_t po = {.mode = GA_REPLAY_PLATFORM};
    if (ga_replay_min_size(&t, &po, 0, &peak, err, sizeof err) != 0) {
        fprintf(stderr, "gpuarena: %s\n", err);
        rc = 1;
    }
    for (int m = 0; m < 3 && rc < 0; m++)
        if (o.modes[m] && run_mode(&t, &o, (ga_replay_mode_t)m, peak, &runs[m]) != 0)
            rc = 1;
    if (rc < 0) {
        if (o.json)
            print_json(&o, &t, runs);
        else
            print_table(&o, &t, runs);
        rc = 0;
    }
    ga_trace_free(&t);
    return rc;
}
