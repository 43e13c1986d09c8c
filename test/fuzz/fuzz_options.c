/* libFuzzer target for the shim's option parsers (shim/options.c), compiled alone into the
 * fuzzer: options.c has no CUDA calls, only the shim's types, so no driver is needed.
 *
 * An input is up to three lines; each line's first byte picks a GPUARENA_* variable and the rest
 * is its value. The target puts them in the environment, runs ga_options_load() exactly as the
 * shim does at first use, and checks that whatever was accepted is in range (a mode, a fraction in
 * (0,1], a size > 0 or a percentage in (0,100], a log level) and that each bad value counts once.
 * It also feeds every line to ga_parse_size directly, the parser with the overflow arithmetic.
 * Selectors past the table's ten reach the other settings read from the environment: the group
 * name and folder (checked against the rule written out here: blanks around the name ignored,
 * then 1 to 64 of [A-Za-z0-9._-], not "." or ".."), a device plugin's CUDA_DEVICE_MEMORY_LIMIT and
 * CUDA_DEVICE_MEMORY_LIMIT_0 (ga_hami_limit: the per-device one first, a size > 0 or a message),
 * and a free-form GPUARENA_<name>=<value> line, the unknown-setting path and its closest-name
 * match (ga_closest_name: NULL or one of the names it was given). These were not fuzzed before.
 * Run with -close_fd_mask=2: rejected values print a `gpuarena:` line each.
 */
#include "fuzz_util.h"

#include "../../allocator/ga_names.h"
#include "../../allocator/ga_size.h"
#include "../../shim/ga_group.h"
#include "../../shim/shim.h"

static const char *const names[] = {
    "GPUARENA_LOG", "GPUARENA_MODE", "GPUARENA_PREALLOCATE", "GPUARENA_MEM_FRACTION",
    "GPUARENA_LIMIT", "GPUARENA_STATS", "GPUARENA_TRACE", "GPUARENA_LIBCUDA", "GPUARENA_VMM_KEEP", "GPUARENA_FREE_SYNC",
    "GPUARENA_GROUP", "GPUARENA_GROUP_DIR", "CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_MEMORY_LIMIT_0",
    "GPUARENA_", /* free form: the line's value is the rest of a name, '=', a value */
};
#define FREE_FORM (sizeof names / sizeof names[0] - 1)
#define NNAMES (sizeof names / sizeof names[0])
#define MAXLINES 3

/* putenv keeps the pointer, so each line lives in a static buffer until the next input; the
 * free-form lines' names, to unset them after it. */
static char envbuf[MAXLINES][4096 + 64];
static char freename[MAXLINES][4096 + 64];
static int nfree;

static const ga_options_t defaults = {
    .mode = GA_MODE_ARENA, .preallocate = 1, .fraction = 0.75, .fraction_grow = 1,
    .vmm_keep = GA_VMM_KEEP_DEFAULT, .log = GA_LOG_WARN,
};

static void check_size(const char *s)
{
    uint64_t bytes = 12345;
    double pct = -1;
    if (ga_parse_size(s, &bytes, &pct) != 0)
        return;
    FUZZ_CHECK((bytes > 0) != (pct > 0), "an accepted size sets exactly one of bytes/percent");
    FUZZ_CHECK(pct >= 0 && pct <= 100, "a percentage is in (0,100]");
}

static void check_options(void)
{
    FUZZ_CHECK((unsigned)ga_opt.mode < GA_MODE_COUNT, "mode valid");
    FUZZ_CHECK(ga_opt.preallocate == 0 || ga_opt.preallocate == 1, "preallocate is a bool");
    FUZZ_CHECK(ga_opt.mode != GA_MODE_ARENA || ga_opt.preallocate, "arena preallocates");
    FUZZ_CHECK(ga_opt.mode != GA_MODE_GROW || !ga_opt.preallocate, "grow does not");
    FUZZ_CHECK(ga_opt.fraction > 0 && ga_opt.fraction <= 1, "fraction in (0,1]");
    FUZZ_CHECK(ga_opt.log <= GA_LOG_DEBUG, "log level valid");
    FUZZ_CHECK(ga_opt.limit_percent >= 0 && ga_opt.limit_percent <= 100, "limit percent valid");
    FUZZ_CHECK(!ga_opt.stats || *ga_opt.stats, "stats path not empty");
    FUZZ_CHECK(!ga_opt.trace || (*ga_opt.trace && strcmp(ga_opt.trace, "-")),
               "trace path not empty and not stdout");
}

/* Splits the input into lines, each "<selector byte><value>"; returns how many were set. */
static int set_env(const uint8_t *data, size_t size)
{
    int n = 0;
    size_t i = 0;
    while (i < size && n < MAXLINES) {
        size_t j = i;
        while (j < size && data[j] != '\n' && data[j] != 0)
            j++;
        if (j > i && j - i - 1 <= 4096) {
            size_t sel = data[i] % NNAMES;
            const char *name = names[sel];
            int len = snprintf(envbuf[n], sizeof envbuf[n], sel == FREE_FORM ? "%s" : "%s=", name);
            memcpy(envbuf[n] + len, data + i + 1, j - i - 1);
            envbuf[n][len + (int)(j - i - 1)] = 0;
            if (sel == FREE_FORM) {
                /* GPUARENA_<name>=<value>: a line without '=' gets one at its end */
                char *eq = strchr(envbuf[n], '=');
                if (!eq)
                    strcat(envbuf[n], "="), eq = strchr(envbuf[n], '=');
                memcpy(freename[nfree], envbuf[n], (size_t)(eq - envbuf[n]));
                freename[nfree][eq - envbuf[n]] = 0;
                nfree++;
            } else {
                check_size(envbuf[n] + len);
            }
            putenv(envbuf[n]);
            n++;
        }
        i = j + 1;
    }
    return n;
}

/* The group name rule, written out: what the shim takes must be exactly this. */
static int group_ok(const char *raw, char *out, size_t len)
{
    const char *b = " \t\n\v\f\r";
    while (*raw && strchr(b, *raw))
        raw++;
    size_t n = strlen(raw);
    while (n && strchr(b, raw[n - 1]))
        n--;
    if (n == 0 || n > GA_GROUP_NAME_MAX || n >= len)
        return 0;
    for (size_t k = 0; k < n; k++) {
        char c = raw[k];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    memcpy(out, raw, n);
    out[n] = 0;
    return strcmp(out, ".") && strcmp(out, "..");
}

static void check_group(void)
{
    char want[GA_GROUP_NAME_MAX + 2];
    const char *group_value = getenv("GPUARENA_GROUP"); /* a free-form line may set it too */
    int ok = group_value && group_ok(group_value, want, sizeof want);
    FUZZ_CHECK(ok == (ga_opt.group != NULL),
               "a group name is taken exactly when it keeps the rule, blanks around it ignored");
    FUZZ_CHECK(!ok || !strcmp(ga_opt.group, want), "the group is the name without the blanks");
    FUZZ_CHECK(!ga_opt.group_dir || ga_opt.group_dir[0] == '/', "the group folder is absolute");
}

static void check_plugin(void)
{
    extern char **environ;
    uint64_t bytes = 0;
    char err[512] = "";
    int r = ga_hami_limit(environ, 0, &bytes, err, sizeof err);
    FUZZ_CHECK(r >= -1 && r <= 1, "a plugin limit is set, unset or refused");
    if (r == 1)
        FUZZ_CHECK(bytes > 0, "a plugin limit is a size");
    if (r == -1)
        FUZZ_CHECK(!strncmp(err, "gpuarena: CUDA_DEVICE_MEMORY_LIMIT", 34), "a refusal names it");
    /* The per-device variable wins when set and not empty. */
    const char *dev0 = getenv("CUDA_DEVICE_MEMORY_LIMIT_0"), *all = getenv("CUDA_DEVICE_MEMORY_LIMIT");
    const char *v = dev0 && *dev0 ? dev0 : all;
    FUZZ_CHECK((r != 0) == (v && *v), "set exactly when one of the variables is");
    if (r == 1) {
        ga_size_t sz;
        FUZZ_CHECK(ga_size_parse(v, 0, &sz, NULL, 0) == 0 && sz.bytes == bytes,
                   "the per-device limit first, then the global one");
    }
}

static void check_free_form(void)
{
    for (int k = 0; k < nfree; k++) {
        const char *best = ga_closest_name(freename[k], names, FREE_FORM, 9, 1);
        int member = best == NULL;
        for (size_t i = 0; i < FREE_FORM && !member; i++)
            member = best == names[i];
        FUZZ_CHECK(member, "a suggestion is one of the known names");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < FREE_FORM; i++)
        unsetenv(names[i]);
    ga_opt = defaults;
    nfree = 0;
    int set = set_env(data, size);
    int bad = ga_options_load();
    FUZZ_CHECK(bad >= 0 && bad <= set, "each bad value counted at most once");
    if (bad == 0)
        check_options();
    check_group();
    check_plugin();
    check_free_form();
    for (size_t i = 0; i < FREE_FORM; i++)
        unsetenv(names[i]);
    for (int k = 0; k < nfree; k++)
        if (freename[k][0])
            unsetenv(freename[k]);
    return 0;
}
