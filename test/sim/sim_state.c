/* simcuda state: configuration from the environment, the global lock, the counters, the JSON report
 * written at exit, and the counter half of the test-instrument API (simcuda.h).
 *
 * Configuration is read once (pthread_once) at the first driver call, so a test can set the
 * environment before it loads or first calls the driver. Counters are plain fields: the byte
 * counters change only under sim_lock (peak must be exact), the call counters by atomic add.
 */
#define _GNU_SOURCE
#include "sim_internal.h"
#include "../../allocator/ga_size.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

sim_config_t sim_cfg = {.devices = 1, .total_mem = 8ULL << 30, .vmm_granularity = 2ULL << 20};
pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
simcuda_counters_t sim_counters;

static pthread_once_t sim_once = PTHREAD_ONCE_INIT;
static int sim_ready; /* sim_read_env has run (read at exit without the once) */

/* fork() while another thread holds sim_lock would leave the child's copy locked forever (the
 * stress tier forks during allocations): hold it across fork so both sides get it unlocked. */
static void sim_fork_prepare(void)
{
    pthread_mutex_lock(&sim_lock);
    sim_stream_fork_prepare(); /* the lock order: sim_lock, then the streams' */
}
static void sim_fork_parent(void)
{
    sim_stream_fork_parent();
    pthread_mutex_unlock(&sim_lock);
}
static void sim_fork_child(void)
{
    sim_stream_fork_child();
    pthread_mutex_unlock(&sim_lock);
}
__attribute__((constructor)) static void sim_fork_register(void)
{
    pthread_atfork(sim_fork_prepare, sim_fork_parent, sim_fork_child);
}

/* SIMCUDA_* settings read with the grammar of the shim's GPUARENA_* ones: sizes by the one size
 * grammar (allocator/ga_size.h; zero in every spelling where zero is a value), whole numbers as
 * digits alone, yes/no as the shim's GPUARENA_PREALLOCATE words, blanks around ignored in all.
 * Until 2026-12-06 each read its own way: SIMCUDA_CONTEXT_OVERHEAD took 0 but refused 0MiB, the
 * counts took units and fractions (SIMCUDA_DEVICES=1.5 was 1 device, 2B was 2, SIMCUDA_LATENCY_NS=
 * 20kB was 20000), SIMCUDA_STREAM_DELAY_US and SIMCUDA_VMM refused a blank, SIMCUDA_VMM took only
 * 0 and 1 (an outside check). Each bad value says so and makes cuInit fail. */
static void sim_bad(const char *name, const char *v, const char *what, const char *why)
{
    fprintf(stderr, "gpuarena: simcuda: %s='%s' is not %s%s%s; cuInit will fail until it is fixed\n",
            name, v, what, why && *why ? ": " : "", why ? why : "");
    sim_cfg.bad = 1;
}

static void sim_read_size(const char *name, unsigned long long *dst, unsigned flags, const char *hint)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return;
    ga_size_t sz;
    char err[512] = "", why[256] = "", what[400];
    if (ga_size_parse(v, flags, &sz, err, sizeof err) == 0) {
        *dst = sz.bytes;
        return;
    }
    /* The grammar's reason alone ("exponents are not accepted: ..."), between its quote of the
     * text and its examples, said in the shim's order: the reason, then what to try (it was
     * "is not a size (try ...): reason" until 2026-12-07, an outside check). */
    const char *r = strstr(err, " is not a size: ");
    const char *e = r ? strstr(r, " (try ") : NULL;
    if (r && e)
        snprintf(why, sizeof why, "%.*s", (int)(e - r - 16), r + 16);
    if (why[0])
        snprintf(what, sizeof what, "a size: %s (try %s)", why, hint);
    else
        snprintf(what, sizeof what, "a size (try %s)", hint);
    sim_bad(name, v, what, NULL);
}

/* A count or a duration: digits alone (no unit, sign, fraction or exponent), lo..hi. */
static void sim_read_count(const char *name, unsigned long long *dst, unsigned long long lo,
                           unsigned long long hi, const char *example)
{
    const char *raw = getenv(name);
    if (!raw || !*raw)
        return;
    char buf[32], what[160];
    const char *v = ga_size_trim(raw, buf, sizeof buf);
    unsigned long long n = 0;
    int ok = v && *v && strspn(v, "0123456789") == strlen(v);
    for (const char *c = v; ok && *c; c++) {
        if (n > (hi - (unsigned long long)(*c - '0')) / 10)
            ok = 0; /* above hi, also before it would overflow */
        else
            n = n * 10 + (unsigned long long)(*c - '0');
    }
    if (!ok || n < lo) {
        snprintf(what, sizeof what, "a whole number from %llu to %llu (digits alone, no unit; try %s)",
                 lo, hi, example);
        sim_bad(name, raw, what, NULL);
        return;
    }
    *dst = n;
}

/* On or off, in the words of the shim's GPUARENA_PREALLOCATE (shim/options.c), any case. */
static void sim_read_bool(const char *name, int *dst, const char *meaning)
{
    static const char *yes[] = {"true", "1", "yes", "on"}, *no[] = {"false", "0", "no", "off"};
    const char *raw = getenv(name);
    if (!raw || !*raw)
        return;
    char buf[16];
    const char *v = ga_size_trim(raw, buf, sizeof buf);
    for (size_t i = 0; v && i < 4; i++) {
        if (!strcasecmp(v, yes[i]))
            return (void)(*dst = 1);
        if (!strcasecmp(v, no[i]))
            return (void)(*dst = 0);
    }
    sim_bad(name, raw, "true/false, 1/0, yes/no or on/off", meaning);
}

/* SIMCUDA_STREAM_DELAY_US and SIMCUDA_LATENCY_NS: at most 10 s, so that a typo cannot hang a
 * test run. */
#define SIM_MAX_STREAM_DELAY_US 10000000ULL
#define SIM_MAX_LATENCY_NS 10000000000ULL

/* FNV-1a of a setting (NULL or empty: the fixed default), so any text can seed the UUIDs. */
static unsigned long long sim_hash(const char *s)
{
    unsigned long long h = 0xcbf29ce484222325ULL;
    for (s = s && *s ? s : "simcuda"; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

/* SIMCUDA_VMM_GRANULARITY: a power of two, at least a host page, as on a GPU (2 MiB by default). */
static void sim_read_granularity(void)
{
    unsigned long long g = sim_cfg.vmm_granularity;
    sim_read_size("SIMCUDA_VMM_GRANULARITY", &g, 0, "2MiB");
    if (g < (unsigned long long)sysconf(_SC_PAGESIZE) || (g & (g - 1))) {
        fprintf(stderr, "gpuarena: simcuda: SIMCUDA_VMM_GRANULARITY=%llu must be a power of two of at least "
                "%ld bytes (try 2MiB or 64KiB)\n", g, sysconf(_SC_PAGESIZE));
        sim_cfg.bad = 1;
        g = 2ULL << 20;
    }
    sim_cfg.vmm_granularity = g;
}

static void sim_read_env(void)
{
    unsigned long long devices = 1;
    sim_read_count("SIMCUDA_DEVICES", &devices, 1, SIM_MAX_DEVICES, "1 or 2");
    sim_cfg.devices = (int)devices;
    sim_read_size("SIMCUDA_TOTAL_MEM", &sim_cfg.total_mem, 0, "8GiB, 512MiB or 8G");
    sim_read_count("SIMCUDA_LATENCY_NS", &sim_cfg.latency_ns, 0, SIM_MAX_LATENCY_NS, "20000");
    sim_read_size("SIMCUDA_CONTEXT_OVERHEAD", &sim_cfg.ctx_overhead, GA_SIZE_ZERO, "300MiB or 0");
    sim_read_granularity();
    sim_read_count("SIMCUDA_STREAM_DELAY_US", &sim_cfg.stream_delay_us, 0, SIM_MAX_STREAM_DELAY_US,
                   "1000");
    int vmm = 1;
    sim_read_bool("SIMCUDA_VMM", &vmm, "0 for devices without virtual memory management, 1 (the "
                  "default) for devices with it");
    sim_cfg.no_vmm = !vmm;
    sim_cfg.uuid_seed = sim_hash(getenv("SIMCUDA_UUID_SEED"));
    const char *shared = getenv("SIMCUDA_SHARED");
    if (shared && *shared && !sim_cfg.bad && sim_shared_open(shared) != 0)
        sim_cfg.bad = 1;
    const char *r = getenv("SIMCUDA_REPORT");
    sim_cfg.report = (r && *r) ? strdup(r) : NULL;
    const char *fail = getenv("SIMCUDA_FAIL");
    if (fail && *fail && sim_fault_parse(fail, "SIMCUDA_FAIL") != 0)
        sim_cfg.bad = 1;
    __atomic_store_n(&sim_ready, 1, __ATOMIC_RELEASE);
}

void sim_setup(void)
{
    pthread_once(&sim_once, sim_read_env);
}

void sim_latency(void)
{
    if (!sim_cfg.latency_ns)
        return;
    /* Busy-wait, not sleep: a real driver call burns CPU, and sleeps are far too coarse. */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((unsigned long long)(t.tv_sec - t0.tv_sec) * 1000000000ULL + (unsigned long long)t.tv_nsec -
                 (unsigned long long)t0.tv_nsec < sim_cfg.latency_ns);
}

void sim_bytes_add_locked(unsigned long long n)
{
    sim_counters.bytes_in_use += n;
    sim_counters.bytes_allocated_total += n;
    sim_counters.live_allocations++;
    if (sim_counters.bytes_in_use > sim_counters.peak_bytes_in_use)
        sim_counters.peak_bytes_in_use = sim_counters.bytes_in_use;
}

void sim_bytes_sub_locked(unsigned long long n)
{
    sim_counters.bytes_in_use -= n;
    sim_counters.live_allocations--;
}

void simcuda_get_counters(simcuda_counters_t *out)
{
    if (!out)
        return;
    pthread_mutex_lock(&sim_lock);
#define SIM_COPY(name, desc) out->name = __atomic_load_n(&sim_counters.name, __ATOMIC_RELAXED);
    SIMCUDA_COUNTERS(SIM_COPY)
#undef SIM_COPY
    pthread_mutex_unlock(&sim_lock);
}

void simcuda_reset_counters(void)
{
    pthread_mutex_lock(&sim_lock);
    simcuda_counters_t keep = sim_counters;
    memset(&sim_counters, 0, sizeof sim_counters);
    /* what is live stays; peaks restart from it */
    sim_counters.bytes_in_use = sim_counters.peak_bytes_in_use = keep.bytes_in_use;
    sim_counters.live_allocations = keep.live_allocations;
    sim_counters.vmm_bytes_in_use = sim_counters.peak_vmm_bytes_in_use = keep.vmm_bytes_in_use;
    sim_counters.vmm_mapped_bytes = sim_counters.peak_vmm_mapped_bytes = keep.vmm_mapped_bytes;
    sim_counters.vmm_mappings = keep.vmm_mappings;
    sim_counters.vmm_reserved_bytes = keep.vmm_reserved_bytes;
    sim_counters.pools_live = keep.pools_live;
    sim_counters.pool_kept_bytes = keep.pool_kept_bytes;
    sim_getproc_log_clear_locked();
    sim_fault_reset_counts();
    pthread_mutex_unlock(&sim_lock);
}

int simcuda_device_count(void)
{
    sim_setup();
    return sim_cfg.devices;
}

unsigned long long simcuda_device_total(void)
{
    sim_setup();
    return sim_cfg.total_mem;
}

int simcuda_device_uuid(int dev, unsigned char uuid[16])
{
    sim_setup();
    if (dev < 0 || dev >= sim_cfg.devices || !uuid)
        return -1;
    sim_device_uuid(dev, uuid);
    return 0;
}

unsigned long long simcuda_device_bytes_in_use(int dev)
{
    sim_setup();
    if (dev < 0 || dev >= sim_cfg.devices)
        return 0;
    pthread_mutex_lock(&sim_lock);
    unsigned long long n = sim_dev_in_use_locked(dev);
    pthread_mutex_unlock(&sim_lock);
    return n;
}

static void sim_write_json(FILE *f, const simcuda_counters_t *c)
{
    fprintf(f, "{\n  \"counters\": {");
    const char *sep = "\n";
#define SIM_JSON(name, desc) fprintf(f, "%s    \"%s\": %llu", sep, #name, c->name), sep = ",\n";
    SIMCUDA_COUNTERS(SIM_JSON)
#undef SIM_JSON
    fprintf(f, "\n  },\n  \"devices\": [");
    for (int d = 0; d < sim_cfg.devices; d++)
        fprintf(f, "%s{\"total\": %llu, \"bytes_in_use\": %llu}", d ? ", " : "", sim_cfg.total_mem,
                simcuda_device_bytes_in_use(d));
    fprintf(f, "]\n}\n");
}

/* Written at exit into a temporary file then renamed, so a reader never sees half a report. */
__attribute__((destructor)) static void sim_report(void)
{
    /* A process that never used the driver and wants no report does not set it up now: setting
     * up opens (and creates) a SIMCUDA_SHARED segment, which a test had just removed. */
    const char *want = getenv("SIMCUDA_REPORT");
    if (!__atomic_load_n(&sim_ready, __ATOMIC_ACQUIRE) && (!want || !*want))
        return;
    sim_setup();
    if (!sim_cfg.report)
        return;
    simcuda_counters_t c;
    simcuda_get_counters(&c);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", sim_cfg.report, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "gpuarena: simcuda: cannot write SIMCUDA_REPORT=%s: %s\n", sim_cfg.report,
                strerror(errno));
        return;
    }
    sim_write_json(f, &c);
    if (fclose(f) != 0 || rename(tmp, sim_cfg.report) != 0) {
        fprintf(stderr, "gpuarena: simcuda: cannot write SIMCUDA_REPORT=%s: %s\n", sim_cfg.report,
                strerror(errno));
        unlink(tmp);
    }
}
