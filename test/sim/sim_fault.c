/* simcuda fault injection: per-entry-point call counts and the rules that make chosen calls fail.
 *
 * SIMCUDA_FAIL=<entry>:<n>[+][:<code>][,...] (or simcuda_fail_add with the same text) makes the
 * n-th call of that exported entry point (1-based, counted since start or the last
 * simcuda_reset_counters) return CUDA_ERROR_OUT_OF_MEMORY or the code given, by number or by name;
 * "n+" fails the n-th call and every later one. The injected error is returned by SIM_ENTER before
 * the entry point looks at its arguments or touches any state, so nothing half happens: exactly
 * what a test of "the driver refused midway" needs. Every call is counted (an atomic add) whether or
 * not rules exist; the rule table is read under its own lock only when it is not empty, and that
 * lock is never held while the driver's lock is taken, so SIM_ENTER can stand first in any entry.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_MAX_RULES 64

typedef struct sim_rule {
    int fn;
    unsigned long long n;
    int and_later;  /* "n+": every call from the n-th on */
    CUresult code;
} sim_rule_t;

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static sim_rule_t rules[SIM_MAX_RULES]; /* under fault_lock */
static int nrules;                       /* written under fault_lock, read atomically */
static unsigned long long calls[SIM_FN_COUNT];

static const char sim_fail_hint[] =
    "entry:n[+][:code] items separated by commas, e.g. cuMemAlloc_v2:3 or "
    "cuMemCreate:2+:CUDA_ERROR_INVALID_VALUE";

CUresult sim_fault_enter(sim_fn_t fn)
{
    sim_setup(); /* SIMCUDA_FAIL is read with the rest of the configuration */
    unsigned long long n = __atomic_add_fetch(&calls[fn], 1, __ATOMIC_RELAXED);
    if (!__atomic_load_n(&nrules, __ATOMIC_ACQUIRE))
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&fault_lock);
    for (int i = 0; i < nrules && r == CUDA_SUCCESS; i++)
        if (rules[i].fn == (int)fn && (n == rules[i].n || (rules[i].and_later && n > rules[i].n)))
            r = rules[i].code;
    pthread_mutex_unlock(&fault_lock);
    if (r != CUDA_SUCCESS)
        SIM_COUNT(injected_failures);
    return r;
}

void sim_fault_reset_counts(void)
{
    for (int i = 0; i < SIM_FN_COUNT; i++)
        __atomic_store_n(&calls[i], 0, __ATOMIC_RELAXED);
}

/* A positive decimal number that fits; *end gets what follows it. */
static int sim_parse_count(const char *s, unsigned long long *out, char **end)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    *out = strtoull(s, end, 10);
    return errno || *out == 0 ? -1 : 0;
}

/* "2", "CUDA_ERROR_INVALID_VALUE": a non-zero CUresult. */
static int sim_parse_code(const char *s, CUresult *out)
{
    unsigned long long v;
    char *end;
    if (*s >= '0' && *s <= '9') {
        if (sim_parse_count(s, &v, &end) != 0 || *end || v > 0x7fffffff)
            return -1;
        *out = (CUresult)v;
        return 0;
    }
    return sim_error_by_name(s, out) == 0 && *out != CUDA_SUCCESS ? 0 : -1;
}

/* One item "entry:n[+][:code]" (modified in place) into *rule; *why says what is wrong. */
static int sim_parse_rule(char *item, sim_rule_t *rule, const char **why)
{
    char *colon = strchr(item, ':');
    *why = *item ? "it has no ':n' after the entry point" : "an item is empty";
    if (!colon)
        return -1;
    *colon = '\0';
    rule->fn = sim_fn_index(item);
    *why = "the entry point is not one this driver exports (name the exported symbol, as nm -D "
           "shows it: cuMemAlloc_v2, not cuMemAlloc)";
    if (rule->fn < 0)
        return -1;
    char *end;
    *why = "the call number is not a positive integer";
    if (sim_parse_count(colon + 1, &rule->n, &end) != 0)
        return -1;
    rule->and_later = *end == '+';
    end += rule->and_later;
    rule->code = CUDA_ERROR_OUT_OF_MEMORY;
    *why = "the error code is neither a CUDA_ERROR_* name nor a non-zero number";
    if (*end == ':')
        return sim_parse_code(end + 1, &rule->code);
    *why = "there is junk after the call number";
    return *end ? -1 : 0;
}

/* All items are checked before any is added: a bad spec changes nothing. */
int sim_fault_parse(const char *spec, const char *origin)
{
    sim_rule_t parsed[SIM_MAX_RULES];
    int n = 0;
    char *copy = strdup(spec ? spec : "");
    const char *why = copy ? "empty" : "out of host memory";
    int bad = !copy || !*copy;
    for (char *rest = copy, *item; !bad && (item = strsep(&rest, ",")) != NULL;) {
        char shown[128];
        snprintf(shown, sizeof shown, "%s", item);
        why = "it names more than 64 calls";
        bad = n == SIM_MAX_RULES || sim_parse_rule(item, &parsed[n++], &why) != 0;
        if (bad)
            fprintf(stderr, "gpuarena: simcuda: %s='%s': in '%s' %s (use %s)\n", origin, spec, shown,
                    why, sim_fail_hint);
    }
    if (bad && (!copy || !*copy))
        fprintf(stderr, "gpuarena: simcuda: %s: the spec is %s (use %s)\n", origin, why, sim_fail_hint);
    free(copy);
    if (bad)
        return -1;
    pthread_mutex_lock(&fault_lock);
    int ok = nrules + n <= SIM_MAX_RULES;
    for (int i = 0; ok && i < n; i++)
        rules[nrules + i] = parsed[i];
    if (ok)
        __atomic_store_n(&nrules, nrules + n, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fault_lock);
    if (!ok)
        fprintf(stderr, "gpuarena: simcuda: %s: more than %d failures to inject in all\n", origin,
                SIM_MAX_RULES);
    return ok ? 0 : -1;
}

int simcuda_fail_add(const char *spec)
{
    sim_setup();
    return sim_fault_parse(spec, "simcuda_fail_add");
}

void simcuda_fail_clear(void)
{
    pthread_mutex_lock(&fault_lock);
    __atomic_store_n(&nrules, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fault_lock);
}

unsigned long long simcuda_entry_calls(const char *entry)
{
    int fn = sim_fn_index(entry);
    return fn < 0 ? 0 : __atomic_load_n(&calls[fn], __ATOMIC_RELAXED);
}
