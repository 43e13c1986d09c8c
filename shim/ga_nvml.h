/* ga_nvml.h: the few declarations of NVIDIA's NVML ABI that gpuarena needs, written here because the
 * CUDA toolkit on the build machines ships no nvml.h. Both the shim (which hooks the memory queries)
 * and the simulated NVML of the test suite (test/sim/nvml_sim.c) include it, so the two agree on
 * every layout by construction.
 *
 * Every name, value and layout below is NVML's own, as the NVML API Reference documents it
 * (https://docs.nvidia.com/deploy/nvml-api/): it is a binary contract with libnvidia-ml.so.1, so
 * nothing here may be renamed or reordered. Layouts are checked by _Static_assert at the end (x86-64
 * and aarch64 LP64: unsigned int 4 bytes, unsigned long long 8 and 8-aligned).
 */
#ifndef GA_NVML_H
#define GA_NVML_H

#ifdef __cplusplus
extern "C" {
#endif

/* nvmlReturn_t: "Return values for NVML API calls" (API Reference, Device Enums). Only the codes
 * gpuarena produces or tests for are listed; the values are fixed by the ABI. */
typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

/* An opaque device handle (nvmlDevice_t, API Reference, Device Structs). */
typedef struct nvmlDevice_st *nvmlDevice_t;

/* Constants (API Reference, Constants): buffer sizes guaranteed large enough for the queries. */
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96        /* nvmlDeviceGetName */
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96        /* nvmlDeviceGetUUID ("GPU-xxxxxxxx-...") */
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80 /* nvmlSystemGetDriverVersion */

/* usedGpuMemory when the amount is not known (Device Structs, nvmlProcessInfo_t). */
#define NVML_VALUE_NOT_AVAILABLE (-1)

/* nvmlInitWithFlags flags (Initialization and Cleanup). */
#define NVML_INIT_FLAG_NO_GPUS 1   /* initialise even when no GPU is found */
#define NVML_INIT_FLAG_NO_ATTACH 2 /* do not attach GPUs */

/* nvmlMemory_t (Device Structs): v1, nvmlDeviceGetMemoryInfo. used includes the reserved part. */
typedef struct nvmlMemory_st {
    unsigned long long total; /* total physical device memory, bytes */
    unsigned long long free;  /* unallocated */
    unsigned long long used;  /* allocated */
} nvmlMemory_t;

/* nvmlMemory_v2_t (Device Structs, "Memory allocation information for a device (v2)"),
 * nvmlDeviceGetMemoryInfo_v2: version must be nvmlMemory_v2, and reserved (driver and firmware)
 * is reported on its own. */
typedef struct nvmlMemory_v2_st {
    unsigned int version;        /* nvmlMemory_v2 */
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

/* NVML's versioned-struct convention: the struct's size in the low bits, the version in the top
 * byte. nvmlMemory_v2 = 40 | (2 << 24) = 0x02000028. */
#define NVML_STRUCT_VERSION(data, ver) (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

/* nvmlProcessInfo_v1_t (Device Structs, "legacy version for older versions of the API"): what
 * nvmlDeviceGetComputeRunningProcesses (no suffix) fills. */
typedef struct nvmlProcessInfo_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* bytes, or NVML_VALUE_NOT_AVAILABLE */
} nvmlProcessInfo_v1_t;

/* nvmlProcessInfo_v2_t (Device Structs): nvmlDeviceGetComputeRunningProcesses_v2 fills it, and
 * nvmlProcessInfo_t, which _v3 fills, has the same four members in the same order. The instance
 * ids are 0xFFFFFFFF when MIG is off. */
typedef struct nvmlProcessInfo_v2_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;
typedef nvmlProcessInfo_v2_t nvmlProcessInfo_t;

_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t is three unsigned long long");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t: version padded to 8, then four counts");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t: pid padded to 8, then bytes");
_Static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "nvmlProcessInfo_v2_t: v1 plus two instance ids");

/* The entry points (Initialization and Cleanup, Error Reporting, System Queries, Device Queries).
 * Each unsuffixed name is the oldest ABI of that call, as libnvidia-ml.so.1 still exports it. */
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos);

#ifdef __cplusplus
}
#endif

#endif /* GA_NVML_H */
