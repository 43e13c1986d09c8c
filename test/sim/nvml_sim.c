/* The simulated NVML: $(BUILD)/sim/libnvidia-ml.so.1, what nvidia-smi and frameworks (vLLM, PyTorch's
 * memory queries, device plugins) read, answering from the simulated driver's own state so a test can
 * compare NVML's view with cuMemGetInfo's.
 *
 * Devices, their totals and UUIDs are the driver's configuration (SIMCUDA_DEVICES,
 * SIMCUDA_TOTAL_MEM, SIMCUDA_UUID_SEED), read through simcuda.h, so no NVML call needs cuInit.
 * "used" is what the device has handed out to every process, context overheads included: with
 * SIMCUDA_SHARED the processes of the shared segment, otherwise this process alone; the compute
 * process list is the same set of processes with the memory each holds. SIMCUDA_NVML_HIDE_PIDS=1
 * makes that list come back empty, as NVML does in a container that does not share the host's pid
 * namespace. SIMCUDA_NVML_MIG=1 makes the devices' UUIDs "MIG-..." (MIG instances, drivers since
 * R470). The ABI (return codes, struct layouts, version words) is shim/ga_nvml.h's.
 */
#define _GNU_SOURCE
#pragma GCC visibility push(default)
#include "../../shim/ga_nvml.h"
#pragma GCC visibility pop
#include "simcuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NVML_SIM_DRIVER_VERSION "580.65.06" /* a CUDA 13.0 driver, as SIM_DRIVER_VERSION says */

struct nvmlDevice_st {
    int index;
};

static struct nvmlDevice_st nvml_devs[SIMCUDA_MAX_DEVICES];
static int nvml_inits;      /* nvmlInit minus nvmlShutdown calls, atomic */
static int nvml_hide_pids;  /* SIMCUDA_NVML_HIDE_PIDS, read at each first init */

/* ---- initialisation ---- */

/* SIMCUDA_NVML_HIDE_PIDS and SIMCUDA_NVML_MIG are yes/no settings in the words of the driver's
 * SIMCUDA_VMM and the shim's GPUARENA_PREALLOCATE (true/false, 1/0, yes/no, on/off, any case,
 * blanks around ignored): 1 or 0, unset or empty 0, -1 for any other value. Only "0" and "1" were
 * read until 2026-12-07: HIDE_PIDS=true (or " 1") made nvmlInit fail, and MIG=true was taken as
 * no without a word (an outside check; test nvml_yes_no_words). */
static int nvml_yes_no(const char *name)
{
    static const char *yes[] = {"true", "1", "yes", "on"}, *no[] = {"false", "0", "no", "off"};
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    while (*v == ' ' || (*v >= '\t' && *v <= '\r'))
        v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || (v[n - 1] >= '\t' && v[n - 1] <= '\r')))
        n--;
    for (size_t i = 0; i < 4; i++) {
        if (strlen(yes[i]) == n && !strncasecmp(v, yes[i], n))
            return 1;
        if (strlen(no[i]) == n && !strncasecmp(v, no[i], n))
            return 0;
    }
    fprintf(stderr, "gpuarena: simcuda: %s='%s' is not a yes/no (true/false, 1/0, yes/no or "
            "on/off); nvmlInit fails until it is fixed\n", name, getenv(name));
    return -1;
}

static nvmlReturn_t nvml_init(unsigned int flags)
{
    if (flags & ~(unsigned)(NVML_INIT_FLAG_NO_GPUS | NVML_INIT_FLAG_NO_ATTACH))
        return NVML_ERROR_INVALID_ARGUMENT;
    int hide = nvml_yes_no("SIMCUDA_NVML_HIDE_PIDS");
    if (hide < 0 || nvml_yes_no("SIMCUDA_NVML_MIG") < 0)
        return NVML_ERROR_UNKNOWN;
    for (int i = 0; i < SIMCUDA_MAX_DEVICES; i++)
        nvml_devs[i].index = i;
    if (__atomic_fetch_add(&nvml_inits, 1, __ATOMIC_ACQ_REL) == 0)
        __atomic_store_n(&nvml_hide_pids, hide, __ATOMIC_RELEASE);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void) { return nvml_init(0); }
nvmlReturn_t nvmlInit_v2(void) { return nvml_init(0); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { return nvml_init(flags); }

/* Reference counted as in NVML: one shutdown per init. */
nvmlReturn_t nvmlShutdown(void)
{
    int n = __atomic_load_n(&nvml_inits, __ATOMIC_ACQUIRE);
    while (n > 0 && !__atomic_compare_exchange_n(&nvml_inits, &n, n - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    return n > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static int nvml_ready(void)
{
    return __atomic_load_n(&nvml_inits, __ATOMIC_ACQUIRE) > 0;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

/* Copies text into buf of length len; INSUFFICIENT_SIZE when it does not fit with its NUL. */
static nvmlReturn_t nvml_text(char *buf, unsigned int len, const char *text)
{
    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(text) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, text, strlen(text) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    return nvml_ready() ? nvml_text(version, length, NVML_SIM_DRIVER_VERSION) : NVML_ERROR_UNINITIALIZED;
}

/* ---- devices ---- */

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    if (!nvml_ready())
        return NVML_ERROR_UNINITIALIZED;
    if (!deviceCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = (unsigned)simcuda_device_count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) { return nvmlDeviceGetCount_v2(deviceCount); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!nvml_ready())
        return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= (unsigned)simcuda_device_count())
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &nvml_devs[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* The ordinal behind a handle, or -1 for anything that is not one of ours. */
static int nvml_dev(nvmlDevice_t device)
{
    for (int i = 0; i < simcuda_device_count(); i++)
        if (device == &nvml_devs[i])
            return i;
    return -1;
}

/* "GPU-" and the driver's 16 UUID bytes in the 8-4-4-4-12 form nvidia-smi prints; "MIG-" with
 * SIMCUDA_NVML_MIG=1, the devices standing for MIG instances (the form drivers since R470 give a
 * MIG device, whose 16 bytes cuDeviceGetUuid_v2 returns for it). */
static void nvml_uuid_text(int dev, char out[NVML_DEVICE_UUID_V2_BUFFER_SIZE])
{
    unsigned char u[16];
    simcuda_device_uuid(dev, u);
    int n = snprintf(out, NVML_DEVICE_UUID_V2_BUFFER_SIZE,
                     nvml_yes_no("SIMCUDA_NVML_MIG") > 0 ? "MIG-" : "GPU-");
    for (int i = 0; i < 16; i++)
        n += snprintf(out + n, (size_t)(NVML_DEVICE_UUID_V2_BUFFER_SIZE - n), "%s%02x",
                      i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", u[i]);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    int d = nvml_dev(device);
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    if (!nvml_ready())
        return NVML_ERROR_UNINITIALIZED;
    if (d < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvml_uuid_text(d, text);
    return nvml_text(uuid, length, text);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    if (!nvml_ready())
        return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int d = 0; d < simcuda_device_count(); d++) {
        char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        nvml_uuid_text(d, text);
        if (strcmp(text, uuid) == 0)
            return *device = &nvml_devs[d], NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    int d = nvml_dev(device);
    char text[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    if (!nvml_ready())
        return NVML_ERROR_UNINITIALIZED;
    if (d < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(text, sizeof text, "simcuda device %d", d); /* as cuDeviceGetName */
    return nvml_text(name, length, text);
}

/* ---- memory and processes ---- */

/* Every process on dev (at most NVML_MAX_PROCS) and the bytes they use together. */
#define NVML_MAX_PROCS 256
static int nvml_processes(int dev, simcuda_process_t *list, unsigned long long *used)
{
    int n = simcuda_device_processes(dev, list, NVML_MAX_PROCS);
    n = n < 0 ? 0 : n > NVML_MAX_PROCS ? NVML_MAX_PROCS : n;
    *used = 0;
    for (int i = 0; i < n; i++)
        *used += list[i].bytes + list[i].overhead;
    return n;
}

static nvmlReturn_t nvml_memory(nvmlDevice_t device, unsigned long long *total, unsigned long long *used)
{
    static __thread simcuda_process_t list[NVML_MAX_PROCS];
    int d = nvml_dev(device);
    if (!nvml_ready())
        return NVML_ERROR_UNINITIALIZED;
    if (d < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *total = simcuda_device_total();
    nvml_processes(d, list, used);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    unsigned long long total, used;
    nvmlReturn_t r = nvml_memory(device, &total, &used);
    if (r == NVML_SUCCESS && !memory)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *memory = (nvmlMemory_t){total, used > total ? 0 : total - used, used};
    return r;
}

/* reserved is 0: the simulated device sets nothing aside beyond what SIMCUDA_CONTEXT_OVERHEAD
 * charges to each context, which counts as used. */
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    unsigned long long total, used;
    nvmlReturn_t r = nvml_memory(device, &total, &used);
    if (r == NVML_SUCCESS && !memory)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && memory->version != nvmlMemory_v2)
        r = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (r == NVML_SUCCESS)
        *memory = (nvmlMemory_v2_t){nvmlMemory_v2, total, 0, used > total ? 0 : total - used, used};
    return r;
}

/* The three ABIs differ only in the record written: v1 has no instance ids. As in NVML, a count too
 * small (0 with infos NULL to ask) gets INSUFFICIENT_SIZE and the count needed. */
static nvmlReturn_t nvml_running(nvmlDevice_t device, unsigned int *count, void *infos, int v1)
{
    static __thread simcuda_process_t list[NVML_MAX_PROCS];
    int d = nvml_dev(device);
    if (!nvml_ready())
        return NVML_ERROR_UNINITIALIZED;
    if (d < 0 || !count || (*count && !infos))
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long used;
    unsigned n = __atomic_load_n(&nvml_hide_pids, __ATOMIC_ACQUIRE) ? 0 : (unsigned)nvml_processes(d, list, &used);
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; i++) {
        unsigned long long bytes = list[i].bytes + list[i].overhead;
        if (v1)
            ((nvmlProcessInfo_v1_t *)infos)[i] = (nvmlProcessInfo_v1_t){(unsigned)list[i].pid, bytes};
        else
            ((nvmlProcessInfo_v2_t *)infos)[i] =
                (nvmlProcessInfo_v2_t){(unsigned)list[i].pid, bytes, 0xFFFFFFFFu, 0xFFFFFFFFu};
    }
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos)
{
    return nvml_running(device, infoCount, infos, 1);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_v2_t *infos)
{
    return nvml_running(device, infoCount, infos, 0);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    return nvml_running(device, infoCount, infos, 0);
}
