/* gpuarena options: the one table of environment variables, their parsers, and logging.
 *
 * Every option is read once, at first use (ga_options_load from the shim's start), so the hot path
 * never calls getenv. A bad value is reported with the variable, the value and the accepted forms;
 * the caller then refuses to start CUDA (every hook returns CUDA_ERROR_INVALID_VALUE) rather than
 * run the program with a setting nobody asked for. Sizes are parsed with overflow checks.
 */
#include "shim.h"

#include <ctype.h>
#include "../allocator/ga_names.h"
#include "../allocator/ga_size.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

ga_options_t ga_opt = {
    .mode = GA_MODE_ARENA, .preallocate = 1, .fraction = 0.75, .fraction_grow = 1,
    .fraction_text = "0.75",
    .vmm_keep = GA_VMM_KEEP_DEFAULT, .log = GA_LOG_WARN,
};
static int ga_preallocate_given; /* GPUARENA_PREALLOCATE was set: it decides arena vs grow */

typedef int (*ga_opt_parser)(const char *value);

typedef struct ga_option_def {
    const char *env;
    const char *def;
    ga_opt_parser parse;
    const char *accepted; /* shown after a bad value */
    const char *help;
} ga_option_def_t;

/* Words and numbers are read without the blanks around them (ga_size_trim: "spaces around
 * ignored", as sizes and mode names are); paths are not. Blanks are the size grammar's and
 * ga_mode_parse's: space and \t to \r. They were space and tab alone here, so a value from a file
 * with CRLF line ends (GPUARENA_PREALLOCATE=false\r) was refused while GPUARENA_MODE=vmm\r and
 * GPUARENA_LIMIT=8GiB\r were taken (an outside check, 2026-12-06). */

static int parse_mode(const char *v)
{
    return ga_mode_parse(v, &ga_opt.mode);
}

static int parse_bool(const char *raw, int *out)
{
    /* The words GPUARENA_PREALLOCATE's hint in ga_options lists: keep the two together. */
    static const char *yes[] = {"true", "1", "yes", "on"}, *no[] = {"false", "0", "no", "off"};
    char buf[16];
    const char *v = ga_size_trim(raw, buf, sizeof buf);
    if (!v)
        return -1;
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i]))
            return *out = 1, 0;
        if (!strcasecmp(v, no[i]))
            return *out = 0, 0;
    }
    return -1;
}

static int parse_preallocate(const char *v)
{
    ga_preallocate_given = 1;
    return parse_bool(v, &ga_opt.preallocate);
}

static int parse_free_sync(const char *raw)
{
    char buf[16];
    const char *v = ga_size_trim(raw, buf, sizeof buf);
    if (!v)
        return -1;
    if (!strcasecmp(v, "deferred"))
        ga_opt.free_sync = GA_FREE_SYNC_DEFERRED;
    else if (!strcasecmp(v, "device"))
        ga_opt.free_sync = GA_FREE_SYNC_DEVICE;
    else if (!strcasecmp(v, "none"))
        ga_opt.free_sync = GA_FREE_SYNC_NONE;
    else if (!strcasecmp(v, "lazy"))
        ga_opt.free_sync = GA_FREE_SYNC_LAZY;
    else
        return -1;
    return 0;
}

static int parse_keep(const char *v)
{
    ga_size_t sz;
    if (ga_size_parse(v, GA_SIZE_ZERO, &sz, NULL, 0) != 0)
        return -1;
    ga_opt.vmm_keep = sz.bytes;
    return 0;
}

/* "0.75" (hard) or "0.75+" (may grow past it up to the cap); 0 < f <= 1, with the grammar of the
 * command's --fraction, of gpuarena doctor and of gpuarena-replay --fraction (ga_fraction_parse,
 * allocator/size.c: plain decimals only, no locale). */
static int parse_fraction(const char *raw)
{
    ga_fraction_t f;
    if (ga_fraction_parse(raw, &f) != 0)
        return -1;
    ga_opt.fraction = f.value;
    ga_opt.fraction_grow = f.grow;
    snprintf(ga_opt.fraction_text, sizeof ga_opt.fraction_text, "%s", f.text);
    return 0;
}

/* Parses "8GiB", "512MiB", "8G", "1.5GiB", "123" or "50%" with the one size grammar
 * (allocator/ga_size.h): exactly one of *bytes / *percent is set non-zero. Returns -1 for junk,
 * zero, overflow or a percentage outside (0, 100]. */
int ga_parse_size(const char *s, uint64_t *bytes, double *percent)
{
    ga_size_t sz;
    if (ga_size_parse(s, GA_SIZE_PERCENT, &sz, NULL, 0) != 0)
        return -1;
    *bytes = sz.is_percent ? 0 : sz.bytes;
    *percent = sz.is_percent ? sz.percent : 0;
    return 0;
}

static int parse_limit(const char *v)
{
    return ga_parse_size(v, &ga_opt.limit_bytes, &ga_opt.limit_percent);
}

/* Why the size grammar refuses v ("unknown unit 'XB'", "it is 0 bytes"), cut from its message
 * "'v' is not a size: WHY (try ...)" into buf; "" when it has none to give. */
static const char *size_reason(const char *v, unsigned flags, char *buf, size_t len)
{
    ga_size_t sz;
    char err[512];
    buf[0] = '\0';
    if (ga_size_parse(v, flags, &sz, err, sizeof err) == 0)
        return buf;
    const char *why = strstr(err, "is not a size: "), *end;
    if (why && (end = strstr(why, " (try ")) != NULL) {
        why += strlen("is not a size: ");
        snprintf(buf, len, ": %.*s", (int)(end - why), why);
    }
    return buf;
}

static int parse_path(const char *v, const char **out)
{
    if (!*v)
        return -1;
    *out = v; /* the environment outlives the process's use of it */
    return 0;
}

/* An output path that is relative is taken from the folder the program is in when the settings
 * are read (its first CUDA call), the folder it was named in: the statistics, written at exit,
 * landed in whatever folder the program had moved to by then (a data folder, where a report of
 * another run was replaced), and the trace in the folder of its first allocation, without a word
 * (an outside check, helper-114; the command made its own paths absolute for this). A folder
 * that cannot be named (removed, or too long) or whose name holds "%p" leaves the path as given. */
static int parse_out_path(const char *v, const char **out, char *buf, size_t len)
{
    char cwd[4096];
    if (parse_path(v, out) != 0)
        return -1;
    /* a folder whose name holds "%p" is left out: the template would expand it */
    if (v[0] == '/' || !strcmp(v, "-") || !getcwd(cwd, sizeof cwd) || strstr(cwd, "%p"))
        return 0;
    int n = snprintf(buf, len, "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", v);
    if (n > 0 && (size_t)n < len)
        *out = buf;
    return 0;
}

static char ga_stats_abs[4096], ga_trace_abs[4096];
static int parse_stats(const char *v)
{
    return parse_out_path(v, &ga_opt.stats, ga_stats_abs, sizeof ga_stats_abs);
}
static int parse_trace(const char *v)
{
    return !strcmp(v, "-") ? -1 : parse_out_path(v, &ga_opt.trace, ga_trace_abs, sizeof ga_trace_abs);
}
static int parse_libcuda(const char *v) { return parse_path(v, &ga_opt.libcuda); }

/* Absolute only: members started in different directories must find the same ledgers. */
static int parse_group_dir(const char *v)
{
    return v[0] == '/' ? parse_path(v, &ga_opt.group_dir) : -1;
}

/* The name without the blanks around it, as every other value (a CR from an environment file
 * with CRLF line ends was refused, by a message that showed it as nothing: an outside check,
 * 2026-12-07); nvml.c reads the name the same way. */
static int parse_group(const char *raw)
{
    static char buf[GA_GROUP_NAME_MAX + 1];
    char err[256];
    const char *v = ga_size_trim(raw, buf, sizeof buf);
    if (!v || !ga_group_name_ok(v, err, sizeof err))
        return -1;
    ga_opt.group = v;
    return 0;
}

static int parse_log(const char *raw)
{
    char buf[16];
    const char *v = ga_size_trim(raw, buf, sizeof buf);
    if (!v)
        return -1;
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (!strcasecmp(v, names[i]))
            return ga_opt.log = (ga_log_level_t)i, 0;
    return -1;
}

/* THE options table. Parsed in this order; GPUARENA_LOG first so it governs the other messages. */
static const ga_option_def_t ga_options[] = {
    {"GPUARENA_LOG", "warn", parse_log, "error, warn, info or debug",
     "messages on stderr, prefixed gpuarena:"},
    {"GPUARENA_MODE", "arena", parse_mode, "arena, grow, vmm or platform (any case)",
     "arena: a preallocated arena, best fit; grow: the arena without preallocation; vmm: one "
     "virtual range, physical memory mapped in granules only where allocations lie; platform: one "
     "driver call per allocation"},
    {"GPUARENA_PREALLOCATE", "true", parse_preallocate, "true/false, 1/0, yes/no, on/off",
     "arena: take the arena at the first allocation of a context"},
    {"GPUARENA_MEM_FRACTION", "0.75+", parse_fraction, "a fraction in (0,1], e.g. 0.75 or 0.75+",
     "arena size as a fraction of the cap; '+' lets it grow past that up to the cap"},
    {"GPUARENA_LIMIT", "device total", parse_limit, "try 8GiB, 512MiB or 50%",
     "hard cap on device memory per device, every mode"},
    {"GPUARENA_FREE_SYNC", "deferred", parse_free_sync, "deferred, lazy, device or none",
     "cuMemFree of pool memory: deferred = reused once the next allocation has synchronised the "
     "context (safe, one synchronisation per burst of frees); lazy = the same, but an allocation "
     "the pool serves without the freed memory does not synchronise (safe, the CPU runs ahead); "
     "device = each free synchronises "
     "the context (safe, as the driver's cuMemFree); none = reused at once (unsafe unless the "
     "program synchronises before freeing)"},
    {"GPUARENA_VMM_KEEP", "64MiB", parse_keep, "try 64MiB, 512MiB or 0",
     "vmm: bytes of wholly free granules kept mapped to avoid remapping (0: give each back at once)"},
    {"GPUARENA_STATS", "unset", parse_stats, "a file path, or - for stderr",
     "write statistics as JSON at exit; %p in the path becomes the process id"},
    {"GPUARENA_TRACE", "unset", parse_trace,
     "a file path, not -: the trace is binary records for a file; GPUARENA_STATS=- is the one "
     "that writes to stderr",
     "record every allocation event (allocator/ga_trace.h format)"},
    {"GPUARENA_GROUP", "unset", parse_group,
     "a name of letters, digits, '-', '_' and '.', at most 64 characters, other than '.' and "
     "'..' (they name directories)",
     "processes of one user naming the same group share GPUARENA_LIMIT on each device"},
    {"GPUARENA_GROUP_DIR", "/dev/shm", parse_group_dir, "an absolute path to a directory",
     "where group ledgers live (every member must name the same one; `gpuarena top --dir`)"},
    {"GPUARENA_LIBCUDA", "libcuda.so.1", parse_libcuda, "a path to the real libcuda.so.1",
     "where the real driver is, for unusual installs"},
};

/* GPUARENA_* variables this table does not know (a typo would otherwise be silently ignored),
 * and the names other gpuarena parts read (the command, the groups). */
static void ga_warn_unknown(void)
{
    enum { NOPT = sizeof ga_options / sizeof ga_options[0] };
    static const char *const others[] = {"GPUARENA_BUILD", "GPUARENA_NO_MATPLOTLIB"};
    const char *known[NOPT + sizeof others / sizeof others[0]];
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        known[i] = i < NOPT ? ga_options[i].env : others[i - NOPT];
    extern char **environ;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "GPUARENA_", 9) != 0)
            continue;
        size_t n = strcspn(*e, "="), i;
        for (i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strlen(known[i]) == n && !strncmp(*e, known[i], n))
                break;
        if (i < sizeof known / sizeof known[0])
            continue;
        /* The rule of allocator/ga_names.h, which gpuarena doctor follows too (test
         * test_unknown_names_one_rule runs one list of names through both). */
        char name[64];
        const char *best = NULL;
        if (n < sizeof name) {
            memcpy(name, *e, n);
            name[n] = '\0';
            best = ga_closest_name(name, known, sizeof known / sizeof known[0], 9, 1);
        }
        if (best)
            ga_log(GA_LOG_WARN, "unknown setting %.*s (did you mean %s?); it is ignored", (int)n,
                   *e, best);
        else
            ga_log(GA_LOG_WARN, "unknown setting %.*s; it is ignored (the README's Options table "
                   "lists the settings; gpuarena doctor checks them)", (int)n, *e);
    }
}

/* GPUARENA_STATS=1 (or true, yes, on: the way many tools' variables are turned on) is a file of
 * that name, as the Options table says; the statistics went to a file named "1" in the program's
 * folder without a word, where the user looked for them on stderr. Still written as named (a
 * guess could put them where the user did not ask), and said once with where they go and the
 * fix. */
static int ga_switch_word(const char *v)
{
    static const char *const words[] = {"1", "true", "yes", "on"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strcasecmp(v, words[i]))
            return 1;
    return 0;
}

static void ga_warn_switch_paths(void)
{
    const char *s = getenv("GPUARENA_STATS"), *t = getenv("GPUARENA_TRACE");
    if (s && ga_opt.stats && ga_switch_word(s))
        ga_log(GA_LOG_WARN, "GPUARENA_STATS=%s names a file: the statistics will be written to "
               "'%s' at exit; for stderr set GPUARENA_STATS=-, or name a file such as "
               "stats.json", s, ga_opt.stats);
    if (t && ga_opt.trace && ga_switch_word(t))
        ga_log(GA_LOG_WARN, "GPUARENA_TRACE=%s names a file: the trace will be written to '%s'; "
               "name a file such as run.trace (a trace is binary records, it has no stderr form)",
               t, ga_opt.trace);
}

/* What each key ga_options_json writes means, for the report's about_keys.options. */
#define GA_OPTIONS_JSON_KEYS(X)                                                                 \
    X(preallocate, "whether the arena takes its memory at the first allocation: GPUARENA_MODE arena, not grow") \
    X(fraction, "the share of the cap taken then, GPUARENA_MEM_FRACTION")                       \
    X(fraction_grow, "whether the arena grows past that share, GPUARENA_MEM_FRACTION ending in +") \
    X(limit, "the cap in bytes per device, or null for none")                                   \
    X(limit_from, "the variable that set limit: GPUARENA_LIMIT or a device plugin's CUDA_DEVICE_MEMORY_LIMIT") \
    X(limit_percent, "present when GPUARENA_LIMIT is a percentage of the device: that percentage") \
    X(vmm_keep, "bytes of wholly free granules vmm keeps mapped, GPUARENA_VMM_KEEP")           \
    X(free_sync, "how freed memory waits for the device before reuse, GPUARENA_FREE_SYNC")

void ga_options_json_about(FILE *f)
{
    const char *sep = "";
    fputc('{', f);
#define GA_OPTION_ABOUT(key, desc) fprintf(f, "%s\"%s\": \"%s\"", sep, #key, desc), sep = ", ";
    GA_OPTIONS_JSON_KEYS(GA_OPTION_ABOUT)
#undef GA_OPTION_ABOUT
    fputc('}', f);
}

void ga_options_json(FILE *f, uint64_t percent_cap)
{
    fprintf(f, "{\"preallocate\": %s, \"fraction\": %g, \"fraction_grow\": %s, \"limit\": ",
            ga_opt.mode == GA_MODE_ARENA ? "true" : "false", ga_opt.fraction,
            ga_opt.fraction_grow ? "true" : "false");
    /* The cap in force and the variable that set it: GPUARENA_LIMIT, or a device plugin's
     * CUDA_DEVICE_MEMORY_LIMIT where it is unset or above the plugin's, as ctx.c takes the
     * smaller (per-device forms show in each device entry's cap). */
    extern char **environ;
    uint64_t hami = 0, ours = ga_opt.limit_bytes ? ga_opt.limit_bytes
                              : ga_opt.limit_percent > 0 ? percent_cap : 0;
    const char *from = "GPUARENA_LIMIT";
    int plugin = ga_hami_limit(environ, -1, &hami, NULL, 0) > 0 && (!ours || hami < ours);
    if (plugin)
        fprintf(f, "%llu", (unsigned long long)hami), from = "CUDA_DEVICE_MEMORY_LIMIT";
    else if (ours)
        fprintf(f, "%llu", (unsigned long long)ours);
    else
        fprintf(f, "null"), from = NULL;
    if (from)
        fprintf(f, ", \"limit_from\": \"%s\"", from);
    else
        fprintf(f, ", \"limit_from\": null");
    if (ga_opt.limit_percent > 0)
        fprintf(f, ", \"limit_percent\": %g", ga_opt.limit_percent);
    fprintf(f, ", \"vmm_keep\": %llu, \"free_sync\": \"%s\"}", (unsigned long long)ga_opt.vmm_keep,
            ga_opt.free_sync == GA_FREE_SYNC_NONE     ? "none"
            : ga_opt.free_sync == GA_FREE_SYNC_DEVICE ? "device"
            : ga_opt.free_sync == GA_FREE_SYNC_LAZY   ? "lazy"
                                                      : "deferred");
}

/* Each option's value as read (NULL: unset; ga_opt_uncopied: set, but no host memory to keep a
 * copy, so no later value is called a change: helper-47 F3 was told its variable had been unset),
 * for ga_options_recheck. */
static char *ga_opt_read[sizeof ga_options / sizeof ga_options[0]];
static char ga_opt_uncopied[1];

int ga_options_load(void)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof ga_options / sizeof ga_options[0]; i++) {
        const ga_option_def_t *o = &ga_options[i];
        const char *v = getenv(o->env);
        if (ga_opt_read[i] != ga_opt_uncopied) /* a second load (the options fuzzer's) */
            free(ga_opt_read[i]);
        ga_opt_read[i] = !v ? NULL : strdup(v);
        if (v && !ga_opt_read[i])
            ga_opt_read[i] = ga_opt_uncopied;
        if (!v)
            continue;
        if (o->parse(v) == 0) {
            ga_log(GA_LOG_DEBUG, "%s=%s", o->env, v);
            continue;
        }
        bad++;
        char why[200] = "", quoted[GA_SIZE_QUOTE_MAX + 48];
        const char *what = "is not valid";
        if (o->parse == parse_limit || o->parse == parse_keep) {
            what = "is not a size";
            size_reason(v, o->parse == parse_limit ? GA_SIZE_PERCENT : GA_SIZE_ZERO, why,
                        sizeof why);
        }
        ga_size_quote(v, quoted, sizeof quoted); /* 5,000 digits cut the reason off */
        ga_log(GA_LOG_ERROR, "%s=%s %s%s (%s); CUDA will not be initialised", o->env, quoted, what,
               why, o->accepted);
    }
    /* One name per mode: the arena without preallocation is grow, and only arena preallocates.
     * Preallocation asked for in another mode does nothing: said, as a keep outside vmm mode is
     * (GPUARENA_MODE=grow GPUARENA_PREALLOCATE=true ran grow without a word: an outside check,
     * 2026-12-06). GPUARENA_PREALLOCATE=false there is what gpuarena run sets, and is silent. */
    const char *pre = ga_preallocate_given && ga_opt.preallocate ? getenv("GPUARENA_PREALLOCATE")
                                                                   : NULL;
    if (ga_opt.mode == GA_MODE_ARENA && !ga_opt.preallocate)
        ga_opt.mode = GA_MODE_GROW;
    else if (ga_opt.mode != GA_MODE_ARENA)
        ga_opt.preallocate = 0;
    if (!bad && pre && ga_opt.mode != GA_MODE_ARENA)
        ga_log(GA_LOG_WARN, "GPUARENA_PREALLOCATE=%.16s applies to arena mode only and does nothing in "
               "%s mode: set GPUARENA_MODE=arena to preallocate, or unset it", pre,
               ga_mode_name(ga_opt.mode));
    ga_opt.free_waits = ga_opt.free_sync == GA_FREE_SYNC_DEVICE || ga_opt.mode == GA_MODE_PLATFORM;
    /* A keep set for another mode does nothing: said, as the command refuses --vmm-keep outside
     * vmm mode (it was ignored without a word: an outside test, 2026-12-06, helper-84 F7). */
    const char *keep = getenv("GPUARENA_VMM_KEEP");
    if (!bad && keep && *keep && ga_opt.mode != GA_MODE_VMM)
        ga_log(GA_LOG_WARN, "GPUARENA_VMM_KEEP applies to vmm mode only and is ignored in %s mode: "
               "set GPUARENA_MODE=vmm to use it, or unset it", ga_mode_name(ga_opt.mode));
    /* A share set for platform mode does nothing (it answers to the cap alone): said, as a keep
     * outside vmm mode is, and as `gpuarena run` refuses --fraction there (it was taken without a
     * word: an outside check, helper-124). */
    const char *frac = getenv("GPUARENA_MEM_FRACTION");
    if (!bad && frac && *frac && ga_opt.mode == GA_MODE_PLATFORM)
        ga_log(GA_LOG_WARN, "GPUARENA_MEM_FRACTION applies to the pools of arena, grow and vmm "
               "modes and is ignored in platform mode, which answers to GPUARENA_LIMIT alone: "
               "unset it, or use one of those modes");
    /* Platform mode's frees wait for the device whatever GPUARENA_FREE_SYNC says (free_waits: the
     * driver's own cuMemFree does): `none` there still synchronised at every free, without a word
     * (helper-124: 100 cuCtxSynchronize for 100 frees under each of the four values). */
    const char *fsync = getenv("GPUARENA_FREE_SYNC");
    if (!bad && fsync && *fsync && ga_opt.mode == GA_MODE_PLATFORM)
        ga_log(GA_LOG_WARN, "GPUARENA_FREE_SYNC applies to the pools of arena, grow and vmm modes "
               "and is ignored in platform mode, whose frees wait for the device as the driver's "
               "own cuMemFree does: unset it, or use one of those modes");
    if (!bad)
        ga_warn_switch_paths();
    ga_warn_unknown();
    return bad;
}

/* The settings are read once, at the first CUDA call, which can come before the program's own
 * setenv: a dlsym of a CUDA function (a framework resolving the driver at import) starts the
 * shim. A GPUARENA_LIMIT set after that was ignored without a word, and the program ran uncapped
 * (helper-43 F7). Asked when a device is first set up (its cap is decided there): a variable whose
 * value differs from the one read is said once. */
void ga_options_recheck(void)
{
    static int told[sizeof ga_options / sizeof ga_options[0]];
    for (size_t i = 0; i < sizeof ga_options / sizeof ga_options[0]; i++) {
        const char *v = getenv(ga_options[i].env), *was = ga_opt_read[i];
        if (told[i] || was == ga_opt_uncopied || (!v && !was) || (v && was && !strcmp(v, was)))
            continue;
        told[i] = 1;
        ga_log(GA_LOG_WARN, "%s is '%.100s' now but was %s%.100s%s when gpuarena read its settings "
               "(at the process's first CUDA call or lookup of a CUDA function): the value read "
               "then holds; set GPUARENA_* in the environment before the program starts, or "
               "before it calls or looks up any CUDA function", ga_options[i].env,
               v ? v : "(unset)", was ? "'" : "", was ? was : "unset", was ? "'" : "");
    }
}

void ga_options_print_help(void)
{
    for (size_t i = 0; i < sizeof ga_options / sizeof ga_options[0]; i++)
        fprintf(stderr, "  %-22s %s (default %s; %s)\n", ga_options[i].env, ga_options[i].help,
                ga_options[i].def, ga_options[i].accepted);
}

/* One write(2) per message so lines from several threads do not interleave. */
void ga_log(ga_log_level_t level, const char *fmt, ...)
{
    if (level > ga_opt.log)
        return;
    char buf[GA_MSG_MAX];
    int n = snprintf(buf, sizeof buf, "gpuarena: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    buf[len++] = '\n';
    ssize_t w = write(2, buf, len);
    (void)w;
}
