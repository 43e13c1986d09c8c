/* nvml.c: NVML's memory queries under gpuarena's cap (issue 11, item 2).
 *
 * vLLM, nvidia-smi and device plugins read device memory through NVML, not cuMemGetInfo; left
 * alone they see the whole device and size themselves past the cap. The hooks here call the real
 * function, then, when the shim caps that device, replace the figures with the shim's view
 * (ga_mem_view, ga_group.h): total = the cap (never above the device's real total), used = what
 * the group (or the process) holds, free = total - used, never an underflow and never more than
 * the device really has free (what the view cannot get counts as used, so total = used + free as
 * NVML promises). nvmlDevice_t is matched to the shim's device by UUID: nvmlDeviceGetUUID's
 * "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" is the same 16 bytes cuDeviceGetUuid gives.
 *
 * nvmlDeviceGetComputeRunningProcesses (and _v2, _v3) add the group's live members with their
 * committed bytes where the driver's list lacks them: in a container without the host's pid
 * namespace NVML lists none of them.
 *
 * The real functions are found, when first needed, in an already loaded libnvidia-ml.so.1
 * (dlopen RTLD_NOLOAD: a framework may have loaded it privately) or else after the shim
 * (RTLD_NEXT), through the real dlsym (dlvsym), so the shim's own dlsym hook never hands a hook
 * back as the "real" function. Nothing here loads NVML or runs before the program calls it.
 * ga_mem_view is referenced weakly: until the shim defines it every answer passes through.
 */
#define _GNU_SOURCE
#include "../allocator/ga_size.h"
#include "ga_group.h"
#include "ga_nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#pragma weak ga_mem_view
#pragma weak ga_mem_view_self

#define GA_NVML_API __attribute__((visibility("default")))

/* The hooked names, once: name and hook address, for ga_nvml_hook_for and the real-pointer cache. */
#define GA_NVML_HOOKS(X)                                                                          \
    X(nvmlDeviceGetMemoryInfo)                                                                    \
    X(nvmlDeviceGetMemoryInfo_v2)                                                                 \
    X(nvmlDeviceGetComputeRunningProcesses)                                                       \
    X(nvmlDeviceGetComputeRunningProcesses_v2)                                                    \
    X(nvmlDeviceGetComputeRunningProcesses_v3)

enum {
#define X(n) GA_NVML_##n,
    GA_NVML_HOOKS(X)
#undef X
    GA_NVML_UUID, /* not hooked: needed to match devices */
    GA_NVML_COUNT
};
static const char *const ga_nvml_names[GA_NVML_COUNT] = {
#define X(n) #n,
    GA_NVML_HOOKS(X)
#undef X
    "nvmlDeviceGetUUID"};
static void *ga_nvml_fn[GA_NVML_COUNT]; /* resolved real functions, atomic */

/* ---- finding the real functions ---- */

typedef void *(*ga_dlsym_fn)(void *, const char *);
static ga_dlsym_fn ga_nvml_dlsym;
static pthread_once_t ga_nvml_once = PTHREAD_ONCE_INIT;

static void ga_nvml_find_dlsym(void)
{
    /* glibc 2.34 moved dlsym into libc under a new version; older ones have only 2.2.5. */
    ga_nvml_dlsym = (ga_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!ga_nvml_dlsym)
        ga_nvml_dlsym = (ga_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
}

static void *ga_nvml_lookup(const char *name)
{
    pthread_once(&ga_nvml_once, ga_nvml_find_dlsym);
    if (!ga_nvml_dlsym)
        return NULL;
    void *f = NULL, *h = dlopen("libnvidia-ml.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (h) {
        f = ga_nvml_dlsym(h, name);
        dlclose(h); /* NOLOAD took one more reference; the program's own stays */
    }
    if (!f)
        f = ga_nvml_dlsym(RTLD_NEXT, name);
    if (!h || !f)
        dlerror(); /* the shim's own failed lookups leave the program's dlerror as it was */
    return f;
}

static void *ga_nvml_get(int which)
{
    void *f = __atomic_load_n(&ga_nvml_fn[which], __ATOMIC_ACQUIRE);
    if (!f) {
        f = ga_nvml_lookup(ga_nvml_names[which]);
        if (f)
            __atomic_store_n(&ga_nvml_fn[which], f, __ATOMIC_RELEASE);
    }
    return f;
}

void *ga_nvml_real(const char *symbol)
{
    for (int i = 0; i < GA_NVML_COUNT; i++)
        if (!strcmp(symbol, ga_nvml_names[i]))
            return ga_nvml_get(i);
    return NULL;
}

/* ---- devices and the view ---- */

static int ga_hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The 16 UUID bytes of an NVML device: "GPU-" or "MIG-" and 32 hex digits (dashes between). A MIG
 * instance's handle (nvmlDeviceGetMigDeviceHandleByIndex; the "MIG-" form of drivers since R470)
 * is the CUDA device cuDeviceGetUuid_v2 names with the same bytes, so it gets the same view; until
 * 2026-12-07 it passed through, the whole instance beside cuMemGetInfo's cap (an outside check).
 * 0 for anything else (the older "MIG-GPU-<uuid>/gi/ci" form): passed through. */
static int ga_nvml_uuid(nvmlDevice_t dev, uint8_t uuid[16])
{
    nvmlReturn_t (*get)(nvmlDevice_t, char *, unsigned int) = ga_nvml_get(GA_NVML_UUID);
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    if (!get || get(dev, text, sizeof text) != NVML_SUCCESS ||
        (strncmp(text, "GPU-", 4) != 0 && strncmp(text, "MIG-", 4) != 0))
        return 0;
    int n = 0;
    for (const char *p = text + 4; *p && n < 32; p++) {
        if (*p == '-')
            continue;
        int v = ga_hexval(*p);
        if (v < 0)
            return 0;
        uuid[n / 2] = (uint8_t)(n % 2 ? uuid[n / 2] | v : v << 4);
        n++;
    }
    return n == 32;
}

/* The capped figures for a device whose real answer was total/free; 0 to keep the real ones. */
static int ga_nvml_view(nvmlDevice_t dev, unsigned long long real_total, unsigned long long real_free,
                        unsigned long long *total, unsigned long long *used, unsigned long long *free)
{
    uint8_t uuid[16];
    uint64_t cap, held;
    int view = ga_mem_view && ga_nvml_uuid(dev, uuid) ? ga_mem_view(uuid, real_total, &cap, &held) : 0;
    if (!view)
        return 0;
    unsigned long long t = cap < real_total ? cap : real_total;
    unsigned long long u = held < t ? held : t;
    unsigned long long f = t - u;
    /* Others outside the cap hold the rest of the device. cuMemGetInfo's view (2) has bounded free
     * by the device's free memory already, counting the pools' idle bytes as free, which the
     * device counts as used: bounded again here, NVML said 20 MiB less than cuMemGetInfo. */
    if (view == 1 && f > real_free) {
        f = real_free;
        u = t - f;
    }
    *total = t;
    *used = u;
    *free = f;
    return 1;
}

/* ---- memory ---- */

GA_NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    nvmlReturn_t (*real)(nvmlDevice_t, nvmlMemory_t *) = ga_nvml_get(GA_NVML_nvmlDeviceGetMemoryInfo);
    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t r = real(device, memory);
    if (r == NVML_SUCCESS && memory)
        ga_nvml_view(device, memory->total, memory->free, &memory->total, &memory->used, &memory->free);
    return r;
}

/* v2 reports the driver's and firmware's reservation apart; in the capped view it is 0, since the
 * cap is the budget the program may allocate and the reservation was never part of it. */
GA_NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    nvmlReturn_t (*real)(nvmlDevice_t, nvmlMemory_v2_t *) = ga_nvml_get(GA_NVML_nvmlDeviceGetMemoryInfo_v2);
    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t r = real(device, memory);
    if (r == NVML_SUCCESS && memory &&
        ga_nvml_view(device, memory->total, memory->free, &memory->total, &memory->used, &memory->free))
        memory->reserved = 0;
    return r;
}

/* ---- processes ---- */

#define GA_NVML_MAX 512 /* processes merged per call; NVML lists far fewer per device */

typedef struct ga_proc {
    unsigned int pid;
    unsigned long long used;
    unsigned int gi, ci;
} ga_proc_t;

/* GPUARENA_GROUP, as the shim's options table knows it (shim/options.c), read once here too: the
 * process list needs only the name, and this file stays free of the shim's state. */
static const char *ga_nvml_group_name, *ga_nvml_group_dir;
static pthread_once_t ga_nvml_group_once = PTHREAD_ONCE_INIT;

static void ga_nvml_read_group(void)
{
    static char name[GA_GROUP_NAME_MAX + 1];
    const char *g = getenv("GPUARENA_GROUP"), *d = getenv("GPUARENA_GROUP_DIR");
    g = g ? ga_size_trim(g, name, sizeof name) : NULL; /* blanks around it ignored, as options.c */
    ga_nvml_group_name = g && *g ? g : NULL;
    ga_nvml_group_dir = d && *d ? d : NULL; /* NULL: /dev/shm */
    if (d && *d && *d != '/')
        ga_nvml_group_name = NULL; /* refused by the shim (an absolute path only): no group */
}

static const char *ga_nvml_group(void)
{
    pthread_once(&ga_nvml_group_once, ga_nvml_read_group);
    return ga_nvml_group_name;
}

/* The device's list as the driver gives it (in ga_proc_t form), plus the group's members it lacks.
 * Returns the count, or -1 with the driver's error in *err. */
static int ga_nvml_merged(nvmlDevice_t dev, int version, ga_proc_t *out, nvmlReturn_t *err)
{
    static const int which[3] = {GA_NVML_nvmlDeviceGetComputeRunningProcesses,
                                 GA_NVML_nvmlDeviceGetComputeRunningProcesses_v2,
                                 GA_NVML_nvmlDeviceGetComputeRunningProcesses_v3};
    nvmlReturn_t (*real)(nvmlDevice_t, unsigned int *, void *) = ga_nvml_get(which[version - 1]);
    if (!real)
        return *err = NVML_ERROR_FUNCTION_NOT_FOUND, -1;
    unsigned int n = GA_NVML_MAX;
    void *buf = calloc(GA_NVML_MAX, sizeof(nvmlProcessInfo_v2_t));
    if (!buf)
        return *err = NVML_ERROR_UNKNOWN, -1;
    nvmlReturn_t r = real(dev, &n, buf);
    if (r != NVML_SUCCESS) {
        free(buf);
        return *err = r, -1;
    }
    for (unsigned i = 0; i < n; i++) {
        if (version == 1) {
            nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)buf + i;
            out[i] = (ga_proc_t){p->pid, p->usedGpuMemory, 0xFFFFFFFFu, 0xFFFFFFFFu};
        } else {
            nvmlProcessInfo_v2_t *p = (nvmlProcessInfo_v2_t *)buf + i;
            out[i] = (ga_proc_t){p->pid, p->usedGpuMemory, p->gpuInstanceId, p->computeInstanceId};
        }
    }
    free(buf);
    uint8_t uuid[16];
    ga_group_member_t m[GA_NVML_MAX];
    const char *group = ga_nvml_group();
    int have = ga_nvml_uuid(dev, uuid);
    int k = group && have ? ga_group_list(ga_nvml_group_dir, group, uuid, m, GA_NVML_MAX) : -1;
    for (int j = 0; j < k && j < GA_NVML_MAX && n < GA_NVML_MAX; j++) {
        unsigned i = 0;
        while (i < n && out[i].pid != m[j].pid)
            i++;
        if (i == n)
            out[n++] = (ga_proc_t){m[j].pid, m[j].committed, 0xFFFFFFFFu, 0xFFFFFFFFu};
    }
    /* This process's own entry in memory info's view (its pools' idle bytes free, not used), so
     * the list never sums past total - free; other processes keep the driver's figure. */
    uint64_t own;
    if (have && ga_mem_view_self && ga_mem_view_self(uuid, &own))
        for (unsigned i = 0; i < n; i++)
            if (out[i].pid == (unsigned)getpid())
                out[i].used = own;
    return (int)n;
}

/* NVML's contract: a count too small gets INSUFFICIENT_SIZE with the count needed. */
static nvmlReturn_t ga_nvml_running(nvmlDevice_t dev, unsigned int *count, void *infos, int version)
{
    /* NVML's own checks first, in its order: initialised, a device it knows (its answer to
     * nvmlDeviceGetUUID), then the arguments. *count was read first: a bad device with a bad
     * count pointer ended in SIGSEGV where NVML answers NVML_ERROR_INVALID_ARGUMENT, and a NULL
     * count before nvmlInit answered that where NVML answers NVML_ERROR_UNINITIALIZED (an
     * outside check, helper-102). */
    nvmlReturn_t (*get)(nvmlDevice_t, char *, unsigned int) = ga_nvml_get(GA_NVML_UUID);
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    nvmlReturn_t st = get ? get(dev, text, sizeof text) : NVML_SUCCESS;
    if (st != NVML_SUCCESS)
        return st;
    if (!count || (*count && !infos))
        return NVML_ERROR_INVALID_ARGUMENT;
    /* On the heap, not a thread-local: 12 KiB of initial-exec TLS is more than glibc keeps spare
     * for a library loaded late, so dlopen of the shim failed ("cannot allocate memory in static
     * TLS block"; helper-43 F8). */
    ga_proc_t *list = malloc(GA_NVML_MAX * sizeof *list);
    if (!list)
        return NVML_ERROR_MEMORY;
    nvmlReturn_t err = NVML_SUCCESS;
    int n = ga_nvml_merged(dev, version, list, &err);
    if (n < 0) {
        free(list);
        return err;
    }
    if (*count < (unsigned)n) {
        *count = (unsigned)n;
        free(list);
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (int i = 0; i < n; i++) {
        if (version == 1)
            ((nvmlProcessInfo_v1_t *)infos)[i] = (nvmlProcessInfo_v1_t){list[i].pid, list[i].used};
        else
            ((nvmlProcessInfo_v2_t *)infos)[i] =
                (nvmlProcessInfo_v2_t){list[i].pid, list[i].used, list[i].gi, list[i].ci};
    }
    *count = (unsigned)n;
    free(list);
    return NVML_SUCCESS;
}

GA_NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                              nvmlProcessInfo_v1_t *infos)
{
    return ga_nvml_running(device, infoCount, infos, 1);
}

GA_NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                                 nvmlProcessInfo_v2_t *infos)
{
    return ga_nvml_running(device, infoCount, infos, 2);
}

GA_NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                                 nvmlProcessInfo_t *infos)
{
    return ga_nvml_running(device, infoCount, infos, 3);
}

void *ga_nvml_hook_for(const char *symbol, void *found)
{
    if (!found)
        return found;
#define X(n)                                                                                      \
    if (!strcmp(symbol, #n)) {                                                                    \
        if (!__atomic_load_n(&ga_nvml_fn[GA_NVML_##n], __ATOMIC_ACQUIRE) && found != (void *)n)  \
            __atomic_store_n(&ga_nvml_fn[GA_NVML_##n], found, __ATOMIC_RELEASE);                 \
        return (void *)n;                                                                         \
    }
    GA_NVML_HOOKS(X)
#undef X
    return found;
}
