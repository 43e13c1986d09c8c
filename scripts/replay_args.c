/* gpuarena-replay's command line: the usage text, each option's value, and the checks that an
 * option changes something (scripts/replay_args.h). Moved from replay_main.c, not rewritten. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ga_names.h"
#include "ga_size.h"
#include "replay_args.h"

static const char usage_head[] =
    "usage: gpuarena-replay [--mode MODE]... [--arena-size SIZE] [--limit SIZE] [--fraction F]\n"
    "                       [--vmm-keep SIZE] [--granularity SIZE] [--min] [--check] [--device N]\n"
    "                       [--json] [--format trace|lifetimes] [--timeline CSV] [--] FILE\n"
    "       gpuarena-replay --list-modes | --version | --help\n"
    "\n"
    "Replays an allocation trace through the gpuarena allocator on the CPU (no GPU needed).\n"
    "FILE is a gpuarena trace (GATRACE magic) or a buffer-lifetime CSV (id,lower,upper,size);\n"
    "the format is detected from the magic or a .csv extension unless --format is given.\n"
    "\n"
    "  --mode M        a mode, or a comma-separated list (repeatable; any case), or all\n"
    "                  (the default):\n";

static const char usage_tail[] =
    "  --arena-size N  arena: the preallocated region (default: twice the trace's peak live\n"
    "                  bytes); whole blocks of 512 bytes: a size rounded up is said\n"
    "  --limit N       grow, vmm, platform: cap on bytes held (vmm: mapped); default none;\n"
    "                  under 512 (one block; vmm: one granule) every allocation is\n"
    "                  refused, and that is said\n"
    "  --fraction F    as GPUARENA_MEM_FRACTION, of --limit as the cap (give the device's\n"
    "                  memory, e.g. 80GiB, for a run without GPUARENA_LIMIT): arena takes\n"
    "                  F x the cap at once; 0.75+ (the shim's default) then grows past it up\n"
    "                  to the cap, 0.75 stops there; grow and vmm are bounded by a fixed F,\n"
    "                  by the cap alone with F+; platform by the cap. --min then finds the\n"
    "                  smallest cap\n"
    "  --vmm-keep N    vmm: wholly free granules kept mapped (GPUARENA_VMM_KEEP; default 64MiB);\n"
    "                  whole granules: a size that is not a multiple of one is said\n"
    "  --granularity N vmm: the granule, a power of two, 512 to 1TiB (default 2MiB, current GPUs)\n"
    "  --device N      replay the events of device N only; a trace with events on several\n"
    "                  devices needs it (the shim keeps one pool per context; a trace names\n"
    "                  no context, so a device's contexts replay as one pool)\n"
    "  --min           also find the smallest size that runs the trace without OOM (arena:\n"
    "                  region size, grow and vmm: limit, platform: peak of rounded sizes): a\n"
    "                  bisection, then every size from the live peak up while 2^22 replayed\n"
    "                  events allow (the smallest then; else the bisection's answer); vmm:\n"
    "                  the peak of mapped bytes with no limit, confirmed by two trials (the\n"
    "                  limit decides no placement there, so that is the smallest)\n"
    "  --check         run the allocator's invariant checker after every event (slow)\n"
    "  --json          print one JSON document instead of the table\n"
    "  --timeline CSV  with one --mode: write CSV time_ns,in_use,reserved after every replayed\n"
    "                  alloc or free (in_use rounded to 512, reserved = bytes from the backend);\n"
    "                  written to a temporary beside CSV and renamed into place when the replay\n"
    "                  succeeds (a link's target is replaced); FILE itself is refused\n"
    "  --list-modes    print the mode names, one per line\n"
    "Sizes: a number and an optional unit, any case: B; K/KiB, M/MiB, G/GiB, T/TiB (x1024);\n"
    "kB, MB, GB, TB (x1000); e.g. 8GiB, 512MiB, 1.5G, 4096.\n"
    "\n"
    "JSON: {\"trace\" (a name's bytes that are not UTF-8 as \\udcXX, Python's surrogateescape),\n"
    "\"format\", \"version\", \"events\" (in the file; with --device, that device's),\n"
    "\"truncated_bytes\", \"device\" (with --device only), \"fraction\" (with --fraction only,\n"
    "as typed: size_limit and min_size are then caps),\n"
    "\"peak_live\" (peak of 512-rounded live bytes), \"units\": {field: bytes|count|ns|ratio|\n"
    "index|rate}, \"modes\": {MODE: {size_limit (null: none), the replay figures\n"
    "(GA_REPLAY_RESULT_LIST in ga_replay.h), final_frag, max_frag, first_oom (event index or\n"
    "null), min_size (null without --min, or when no size up to 2^60 runs the trace),\n"
    "events_per_s}}}. Byte figures are integers.\n"
    "\n"
    "Exit status: 0 ok, 1 unreadable or malformed FILE, a FILE that holds no allocation\n"
    "(nothing to replay), events on several devices without --device (or none on the one\n"
    "given), or an unwritable timeline; 2 usage error (also a --timeline that is FILE itself\n"
    "or a link to it).\n";

static void usage(void)
{
    fputs(usage_head, stdout);
    for (int m = 0; m < GA_MODE_COUNT; m++)
        printf("                  %-9s %s\n", ga_mode_name((ga_mode_t)m),
               ga_mode_desc((ga_mode_t)m));
    fputs(usage_tail, stdout);
}

static int usage_error(const char *msg, const char *arg)
{
    char quoted[GA_SIZE_QUOTE_MAX + 48]; /* a long value by its head, tail and length, as sizes */
    if (arg && strlen(arg) > GA_SIZE_QUOTE_MAX)
        ga_size_quote(arg, quoted, sizeof quoted);
    fprintf(stderr, "gpuarena: %s%s%s (see gpuarena-replay --help)\n", msg, arg ? ": " : "",
            !arg ? "" : strlen(arg) > GA_SIZE_QUOTE_MAX ? quoted : arg);
    return 2;
}

/* An unknown option, with the one it most likely means (allocator/ga_names.h, the rule of the
 * shim's misspelt settings and of the command's options: --limt said "unknown option" alone). */
static int unknown_option(const char *a)
{
    static const char *const known[] = {"--mode", "--arena-size", "--limit", "--fraction", "--vmm-keep",
        "--granularity", "--min", "--check", "--device", "--json", "--format", "--timeline",
        "--list-modes", "--version", "--help"};
    const char *near = ga_closest_name(a, known, sizeof known / sizeof known[0], 2, 0);
    if (!near)
        return usage_error("unknown option", a);
    fprintf(stderr, "gpuarena: unknown option: %s (did you mean %s?) (see gpuarena-replay "
            "--help)\n", a, near);
    return 2;
}

/* A size option with the one grammar (flags: GA_SIZE_ZERO where 0 bytes is a value); prints the
 * parser's message (usage error) when refused. */
static int parse_size_opt(const char *opt, const char *v, unsigned flags, size_t *out)
{
    ga_size_t sz;
    char err[512];
    if (ga_size_parse(v, flags, &sz, err, sizeof err) != 0) {
        fprintf(stderr, "gpuarena: %s: %s\n", opt, err);
        return -1;
    }
    if (sz.bytes > SIZE_MAX) {
        fprintf(stderr, "gpuarena: %s: '%s' is more than this machine can address\n", opt, v);
        return -1;
    }
    *out = (size_t)sz.bytes;
    return 0;
}

/* "all" in any case, spaces around ignored, like the mode names themselves. */
static int is_all(const char *m)
{
    while (*m == ' ' || *m == '\t')
        m++;
    size_t n = strlen(m);
    while (n && (m[n - 1] == ' ' || m[n - 1] == '\t'))
        n--;
    return n == 3 && strncasecmp(m, "all", 3) == 0;
}

static int set_mode(options_t *o, const char *m)
{
    /* A list, as gpuarena replay --mode takes it (arena,vmm was refused until 2026-12-06). */
    char buf[256], *save, *part;
    if (m && strchr(m, ',') && strlen(m) < sizeof buf) {
        int seen = 0;
        for (part = strtok_r(strcpy(buf, m), ",", &save); part; part = strtok_r(NULL, ",", &save))
            if (strspn(part, " \t") < strlen(part) && (seen = 1, set_mode(o, part) != 0))
                return -1; /* blank parts skipped, as the command skips them */
        return seen ? 0 : -1;
    }
    ga_replay_mode_t mode;
    if (m && is_all(m)) {
        for (int i = 0; i < GA_MODE_COUNT; i++)
            o->modes[i] = 1;
        return 0;
    }
    if (ga_replay_mode_parse(m, &mode) != 0)
        return -1;
    o->modes[mode] = 1;
    return 0;
}

/* The mode names, one list for the usage message and errors: "arena, grow, vmm or platform". */
static const char *mode_names(void)
{
    static char buf[128];
    if (buf[0])
        return buf;
    for (int m = 0; m < GA_MODE_COUNT; m++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s",
                 m == 0 ? "" : m + 1 == GA_MODE_COUNT ? " or " : ", ", ga_mode_name((ga_mode_t)m));
    return buf;
}

/* Options that answer at once: --help, --version, --list-modes. Returns 0 if one was given. */
static int answer_at_once(const char *a)
{
    if (!strcmp(a, "--help") || !strcmp(a, "-h"))
        usage();
    else if (!strcmp(a, "--version"))
        printf("gpuarena-replay %s\n", GA_VERSION);
    else if (!strcmp(a, "--list-modes"))
        for (int m = 0; m < GA_MODE_COUNT; m++)
            puts(ga_mode_name((ga_mode_t)m));
    else
        return -1;
    return 0;
}

/* One option with its value v; 0, or an exit status. */
static int parse_opt(options_t *o, const char *a, const char *v)
{
    char what[160];
    if (!strcmp(a, "--mode")) {
        snprintf(what, sizeof what, "--mode takes %s, or all, not", mode_names());
        if (set_mode(o, v) != 0)
            return usage_error(what, v);
    } else if (!strcmp(a, "--arena-size")) {
        if (parse_size_opt(a, v, 0, &o->arena_size) != 0)
            return 2;
    } else if (!strcmp(a, "--limit")) {
        if (parse_size_opt(a, v, 0, &o->limit) != 0)
            return 2;
    } else if (!strcmp(a, "--fraction")) { /* GPUARENA_MEM_FRACTION's grammar, one parser */
        if (ga_fraction_parse(v, &o->fraction) != 0)
            return usage_error("--fraction takes a fraction in (0, 1] as GPUARENA_MEM_FRACTION "
                               "does (0.75, or 0.75+ to grow past it up to the cap), not", v);
        o->has_fraction = 1;
    } else if (!strcmp(a, "--vmm-keep")) {
        if (parse_size_opt(a, v, GA_SIZE_ZERO, &o->keep) != 0) /* 0: keep nothing */
            return 2;
        o->keep_set = 1;
    } else if (!strcmp(a, "--granularity")) {
        if (parse_size_opt(a, v, 0, &o->granularity) != 0)
            return 2;
        if (o->granularity < GA_ALIGN || o->granularity > MAX_GRANULARITY ||
            (o->granularity & (o->granularity - 1)))
            return usage_error("--granularity takes a power of two from 512 bytes to 1TiB, not", v);
    } else if (!strcmp(a, "--format")) { /* any case, blanks around ignored, as --mode */
        size_t b = strspn(v, " \t\n\v\f\r"), n = strlen(v + b);
        while (n && strchr(" \t\n\v\f\r", v[b + n - 1]))
            n--;
        if ((n != 5 || strncasecmp(v + b, "trace", 5)) &&
            (n != 9 || strncasecmp(v + b, "lifetimes", 9)))
            return usage_error("--format takes trace or lifetimes, not", v);
        o->format = n == 5 ? "trace" : "lifetimes";
    } else if (!strcmp(a, "--timeline")) {
        /* '-' made a file named '-' in the current folder (the JSON owns stdout) */
        if (!v[0] || !strcmp(v, "-"))
            return usage_error("--timeline takes a file path (stdout carries the table or JSON), "
                               "not", v[0] ? v : "''");
        o->timeline = v;
    } else if (!strcmp(a, "--device")) {
        char *end;
        errno = 0;
        long d = strtol(v, &end, 10);
        /* negative numbers too: a trace's device is 16 bits, and -7 is a device of its own */
        const char *digits = v[0] == '-' ? v + 1 : v;
        if (!*v || *end || errno || d < -32768 || d > 32767 || digits[0] < '0' || digits[0] > '9')
            return usage_error("--device takes a device number from -32768 to 32767, not", v);
        o->device = (int)d;
        o->has_device = 1;
    }
    return 0;
}

/* A share that rounds to no block where it bounds the pool (arena; grow and vmm under a fixed
 * fraction) leaves nothing to allocate: said as the shim says it at cuInit, with the smallest cap
 * that gives a share of one block, the fraction as typed. -1 or an exit. */
static int share_of_nothing(const options_t *o)
{
    int bounds = o->modes[GA_MODE_ARENA] ||
                 (!o->fraction.grow && (o->modes[GA_MODE_GROW] || o->modes[GA_MODE_VMM]));
    if (!bounds || ga_fraction_share(o->limit, o->fraction.value, GA_ALIGN))
        return -1;
    char what[400];
    double least = (double)GA_ALIGN / o->fraction.value;
    int n = snprintf(what, sizeof what, "--fraction %s%s of --limit %zu is a share that rounds to "
                     "0 bytes, which bounds the %s pool: nothing could ever be allocated; give a "
                     "larger --fraction", o->fraction.text, o->fraction.grow ? "+" : "", o->limit,
                     o->modes[GA_MODE_ARENA] ? "arena" : o->modes[GA_MODE_GROW] ? "grow" : "vmm");
    if (least < 1e19) { /* the smallest cap whose share is one block, as the shim names it */
        uint64_t need = (uint64_t)least;
        while (!ga_fraction_share(need, o->fraction.value, GA_ALIGN))
            need++;
        snprintf(what + n, sizeof what - (size_t)n, ", or a --limit of at least %llu bytes",
                 (unsigned long long)need);
    }
    return usage_error(what, NULL);
}

/* --fraction: a share of the cap, so --limit gives the cap; the arena's size is the share, so
 * not --arena-size too; and, as `gpuarena run --fraction`, a mode it changes among those replayed
 * ("F+" changes arena mode only: grow and vmm answer to the cap alone then). -1 or an exit. */
static int check_fraction(const options_t *o)
{
    char what[300];
    if (!o->has_fraction)
        return -1;
    const char *f = o->fraction.text, *plus = o->fraction.grow ? "+" : "";
    if (!o->limit) {
        snprintf(what, sizeof what, "--fraction %s%s is a share of the cap: give the cap with "
                 "--limit (GPUARENA_LIMIT, or the device's memory for a run without it, e.g. "
                 "--limit 80GiB)", f, plus);
        return usage_error(what, NULL);
    }
    if (o->arena_size) {
        snprintf(what, sizeof what, "--fraction %s%s sizes the arena (%s of --limit): give "
                 "--fraction or --arena-size, not both", f, plus, f);
        return usage_error(what, NULL);
    }
    if (o->fraction.grow && !o->modes[GA_MODE_ARENA]) {
        snprintf(what, sizeof what, "--fraction %s+ changes arena mode only (grow and vmm then "
                 "answer to the cap alone, --limit): add --mode arena, or give a fixed fraction "
                 "such as %s", f, f);
        return usage_error(what, NULL);
    }
    if (!o->modes[GA_MODE_ARENA] && !o->modes[GA_MODE_GROW] && !o->modes[GA_MODE_VMM])
        return usage_error("--fraction applies to arena, grow and vmm (platform takes no share): "
                           "add one of them to --mode", NULL);
    return share_of_nothing(o);
}

/* An option whose mode is not among those replayed would be ignored, and the user would read
 * figures of what they did not ask for: a usage error naming the mode to add. Returns -1 to
 * continue, or 2. */
static int check_modes_used(const options_t *o)
{
    if (o->arena_size && !o->modes[GA_MODE_ARENA])
        return usage_error("--arena-size applies to arena mode only: add --mode arena", NULL);
    int rc = check_fraction(o);
    if (rc >= 0)
        return rc;
    if (o->limit && !o->has_fraction && !o->modes[GA_MODE_GROW] && !o->modes[GA_MODE_VMM] &&
        !o->modes[GA_MODE_PLATFORM])
        return usage_error("--limit applies to grow, vmm and platform (an arena is bounded by "
                           "--arena-size): add one of them to --mode", NULL);
    if ((o->keep_set || o->granularity) && !o->modes[GA_MODE_VMM])
        return usage_error(o->keep_set ? "--vmm-keep applies to vmm mode only: add --mode vmm"
                           : "--granularity applies to vmm mode only: add --mode vmm", NULL);
    return -1;
}

/* Whether p and q hold the same value of the one-value option a. */
static int same_value(const options_t *p, const options_t *q, const char *a)
{
    if (!strcmp(a, "--arena-size"))
        return p->arena_size == q->arena_size;
    if (!strcmp(a, "--limit"))
        return p->limit == q->limit;
    if (!strcmp(a, "--fraction"))
        return p->fraction.value == q->fraction.value && p->fraction.grow == q->fraction.grow;
    if (!strcmp(a, "--vmm-keep"))
        return p->keep == q->keep;
    if (!strcmp(a, "--granularity"))
        return p->granularity == q->granularity;
    if (!strcmp(a, "--format"))
        return p->format == q->format; /* one of two static names */
    if (!strcmp(a, "--timeline"))
        return !strcmp(p->timeline, q->timeline);
    return p->device == q->device; /* --device */
}

/* A one-value option given again: the same value is taken, another is a usage error, as the
 * command's rule (the last was taken without a word: --limit 1G --limit 2G replayed under 2 GiB;
 * an outside check, helper-131). seen[] holds the first text of each option, by its index in
 * ONE_VALUE. Returns 0, or an exit status. */
static const char *const ONE_VALUE[] = {"--arena-size", "--limit", "--fraction", "--vmm-keep",
                                        "--granularity", "--format", "--timeline", "--device"};
#define N_ONE_VALUE (sizeof ONE_VALUE / sizeof ONE_VALUE[0])

static int parse_once(options_t *o, const char *a, const char *v, const char **seen)
{
    size_t k = 0;
    while (k < N_ONE_VALUE && strcmp(a, ONE_VALUE[k]))
        k++;
    if (k == N_ONE_VALUE)
        return parse_opt(o, a, v); /* --mode: repeatable */
    if (!seen[k]) {
        seen[k] = v;
        return parse_opt(o, a, v);
    }
    options_t again = *o;
    int rc = parse_opt(&again, a, v);
    if (rc)
        return rc;
    if (!same_value(o, &again, a)) {
        fprintf(stderr, "gpuarena: %s given twice (%s %s, then %s %s): it takes one value; give "
                "it once (see gpuarena-replay --help)\n", a, a, seen[k], a, v);
        return 2;
    }
    return 0;
}

static int size_opt(const char *a)
{
    return !strcmp(a, "--limit") || !strcmp(a, "--arena-size") || !strcmp(a, "--vmm-keep") ||
           !strcmp(a, "--granularity");
}

/* Returns -1 to continue, or an exit status (0 after --help, --version, --list-modes). */
int replay_parse_args(int argc, char **argv, options_t *o)
{
    int files_only = 0; /* after "--": a FILE whose name starts with '-' */
    const char *seen[N_ONE_VALUE] = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!files_only && !strcmp(a, "--")) {
            files_only = 1;
            continue;
        }
        if (files_only) {
            if (o->path)
                return usage_error("more than one FILE given", a);
            o->path = a;
            continue;
        }
        int takes = !strcmp(a, "--mode") || !strcmp(a, "--arena-size") || !strcmp(a, "--limit") ||
                    !strcmp(a, "--fraction") ||
                    !strcmp(a, "--format") || !strcmp(a, "--timeline") ||
                    !strcmp(a, "--vmm-keep") || !strcmp(a, "--granularity") ||
                    !strcmp(a, "--device");
        if (takes && !v)
            return usage_error("missing value after", a);
        if (answer_at_once(a) == 0)
            return 0;
        if (takes) {
            int rc = parse_once(o, a, v, seen);
            if (rc)
                return rc;
            i++;
        } else if (!strcmp(a, "--min")) {
            o->want_min = 1;
        } else if (!strcmp(a, "--check")) {
            o->check = 1;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            return unknown_option(a);
        } else if (i >= 3 && ga_size_is_unit(a) && size_opt(argv[i - 2]) &&
                   strspn(argv[i - 1], "0123456789.") == strlen(argv[i - 1])) {
            fprintf(stderr, "gpuarena: %s %s %s: the shell splits a size written with a space in "
                    "two; write it without the space (%s%s) or quote it ('%s %s') (see "
                    "gpuarena-replay --help)\n", argv[i - 2], argv[i - 1], a, argv[i - 1], a,
                    argv[i - 1], a);
            return 2;
        } else if (o->path) {
            return usage_error("more than one FILE given", a);
        } else {
            o->path = a;
        }
    }
    if (!o->path)
        return usage_error("no trace FILE given", NULL);
    if (!*o->path) /* it said "cannot open : No such file or directory" */
        return usage_error("the FILE name is empty (a \"$VAR\" that is unset?): give a trace "
                           "or CSV file", NULL);
    int nmodes = 0;
    for (int i = 0; i < GA_MODE_COUNT; i++)
        nmodes += o->modes[i];
    if (o->timeline && nmodes != 1)
        return usage_error("--timeline needs exactly one --mode", NULL);
    if (!nmodes)
        set_mode(o, "all");
    return check_modes_used(o);
}
