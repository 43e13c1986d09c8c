/* libFuzzer target for the shim's option parsers (shim/options.c), compiled alone into the
 * fuzzer: options.c has no CUDA calls, only the shim's types, so no driver is needed.
 *
 * An input is up to three lines; each line's first byte picks a GPUARENA_* variable and the rest
 * is its value. The target puts them in the environment, runs ga_options_load() exactly as the
 * shim does at first use, and checks that whatever was accepted is in range (a mode, a fraction in
 * (0,1], a size > 0 or a percentage in (0,100], a log level) and that each bad value counts once.
 * It also feeds every line to ga_parse_size directly, the parser with the overflow arithmetic.
 * Run with -close_fd_mask=2: rejected values print a `gpuarena:` line each.
 */
#include "fuzz_util.h"

#include "../../shim/shim.h"

static const char *const names[] = {
    "GPUARENA_LOG", "GPUARENA_MODE", "GPUARENA_PREALLOCATE", "GPUARENA_MEM_FRACTION",
    "GPUARENA_LIMIT", "GPUARENA_STATS", "GPUARENA_TRACE", "GPUARENA_LIBCUDA", "GPUARENA_VMM_KEEP", "GPUARENA_FREE_SYNC",
};
#define NNAMES (sizeof names / sizeof names[0])
#define MAXLINES 3

/* putenv keeps the pointer, so each line lives in a static buffer until the next input. */
static char envbuf[MAXLINES][4096 + 64];

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
            const char *name = names[data[i] % NNAMES];
            int len = snprintf(envbuf[n], sizeof envbuf[n], "%s=", name);
            memcpy(envbuf[n] + len, data + i + 1, j - i - 1);
            envbuf[n][len + (int)(j - i - 1)] = 0;
            check_size(envbuf[n] + len);
            putenv(envbuf[n]);
            n++;
        }
        i = j + 1;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < NNAMES; i++)
        unsetenv(names[i]);
    ga_opt = defaults;
    int set = set_env(data, size);
    int bad = ga_options_load();
    FUZZ_CHECK(bad >= 0 && bad <= set, "each bad value counted at most once");
    if (bad == 0)
        check_options();
    for (size_t i = 0; i < NNAMES; i++)
        unsetenv(names[i]);
    return 0;
}
