/* nvml_test: shim/nvml.c's hooks over the simulated NVML ($(BUILD)/sim/libnvidia-ml.so.1), run
 * with LD_PRELOAD of libganvml.so (nvml.c + the ledger + nvml_view.c's stand-in ga_mem_view), the
 * program bound directly to NVML as nvidia-smi-like tools are. One case per run, chosen by argv[1];
 * prints TAP lines. Device 0's simulated total is SIMCUDA_TOTAL_MEM (the tier sets 16 GiB).
 *   pass     no view: the real figures unchanged
 *   cap      GA_TEST_VIEW="1 GiB 300 MiB": total, used, free and v2's reserved from the view
 *   big      a cap above the device: total stays the device's
 *   over     used above the cap: used = total, free = 0, no underflow
 *   crowded  the device's real free below cap - used: free = real free, total = used + free
 *   procs    GPUARENA_GROUP member missing from the driver's list (SIMCUDA_NVML_HIDE_PIDS=1)
 *   mig      as cap, the device a MIG instance (SIMCUDA_NVML_MIG=1: its UUID "MIG-..."): capped too
 */
#define _GNU_SOURCE
#include "ga_group.h"
#include "../../shim/ga_nvml.h"

#include <cuda.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1ull << 20)
#define GIB (1ull << 30)

static int tap(int ok, const char *what, const char *why)
{
    printf("%s - nvml %s%s%s\n", ok ? "ok" : "not ok", what, ok ? "" : ": ", ok ? "" : why);
    return ok;
}

static void uuid_bytes(nvmlDevice_t d, uint8_t u[16])
{
    char t[NVML_DEVICE_UUID_V2_BUFFER_SIZE], *p = t + 4;
    nvmlDeviceGetUUID(d, t, sizeof t);
    for (int i = 0; i < 16; i++) {
        while (*p == '-')
            p++;
        unsigned v;
        sscanf(p, "%2x", &v);
        u[i] = (uint8_t)v;
        p += 2;
    }
}

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "pass";
    char why[512];
    nvmlDevice_t d;
    if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS)
        return tap(0, c, "nvmlInit or the handle failed"), 0;
    uint64_t real_total = 16 * GIB;
    if (!strcmp(c, "crowded")) { /* this process takes 15.5 GiB straight from the driver */
        CUcontext ctx;
        CUdeviceptr p;
        cuInit(0);
        cuDevicePrimaryCtxRetain(&ctx, 0);
        cuCtxSetCurrent(ctx);
        if (cuMemAlloc(&p, 15 * GIB + 512 * MIB) != CUDA_SUCCESS)
            return tap(0, c, "cuMemAlloc on the simulated driver failed"), 0;
    }
    nvmlMemory_t m = {0};
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    nvmlReturn_t r1 = nvmlDeviceGetMemoryInfo(d, &m), r2 = nvmlDeviceGetMemoryInfo_v2(d, &m2);
    snprintf(why, sizeof why, "rc %d/%d v1 total %llu used %llu free %llu; v2 total %llu reserved "
             "%llu used %llu free %llu", r1, r2, m.total, m.used, m.free, m2.total, m2.reserved,
             m2.used, m2.free);
    int same = r1 == 0 && r2 == 0 && m.total == m2.total && m.used == m2.used && m.free == m2.free &&
               m.total == m.used + m.free && m2.reserved == 0;
    if (!strcmp(c, "pass"))
        tap(same && m.total == real_total, "without a view: the driver's figures", why);
    else if (!strcmp(c, "cap"))
        tap(same && m.total == GIB && m.used == 300 * MIB && m.free == 724 * MIB,
            "capped: total = cap, used = the view's, free = total - used (v1 and v2)", why);
    else if (!strcmp(c, "mig")) {
        char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
        nvmlDeviceGetUUID(d, u, sizeof u);
        char both[640];
        snprintf(both, sizeof both, "uuid %s; %s", u, why);
        tap(same && !strncmp(u, "MIG-", 4) && m.total == GIB && m.used == 300 * MIB &&
                m.free == 724 * MIB,
            "a MIG instance (UUID MIG-...) capped as a GPU: total = cap, used, free (v1 and v2)", both);
    } else if (!strcmp(c, "big"))
        tap(same && m.total == real_total && m.used == GIB, "a cap above the device: its real total",
            why);
    else if (!strcmp(c, "over"))
        tap(same && m.total == GIB && m.used == GIB && m.free == 0,
            "used above the cap: free 0, no underflow", why);
    else if (!strcmp(c, "crowded"))
        tap(same && m.total == 8 * GIB && m.free <= 512 * MIB && m.used == m.total - m.free,
            "free never above the device's real free", why);
    else if (!strcmp(c, "procs")) {
        uint8_t u[16];
        uuid_bytes(d, u);
        char err[512];
        ga_group_t *g = ga_group_open(NULL, getenv("GPUARENA_GROUP"), u, GIB, err, sizeof err);
        if (!g || !ga_group_commit(g, 123 * MIB))
            return tap(0, c, err), 0;
        unsigned n = 0;
        nvmlReturn_t q = nvmlDeviceGetComputeRunningProcesses_v3(d, &n, NULL);
        nvmlProcessInfo_v1_t p1[4];
        nvmlProcessInfo_t p3[4];
        unsigned n1 = 4, n3 = 4;
        nvmlReturn_t a = nvmlDeviceGetComputeRunningProcesses(d, &n1, p1);
        nvmlReturn_t b = nvmlDeviceGetComputeRunningProcesses_v3(d, &n3, p3);
        snprintf(why, sizeof why, "ask %d n %u; v1 %d n %u pid %u bytes %llu; v3 %d n %u pid %u", q,
                 n, a, n1, p1[0].pid, p1[0].usedGpuMemory, b, n3, p3[0].pid);
        tap(q == NVML_ERROR_INSUFFICIENT_SIZE && n == 1, "processes: asking with 0 gives the count "
            "with the group's member", why);
        tap(a == 0 && n1 == 1 && p1[0].pid == (unsigned)getpid() && p1[0].usedGpuMemory == 123 * MIB &&
                b == 0 && n3 == 1 && p3[0].pid == (unsigned)getpid() && p3[0].gpuInstanceId == 0xFFFFFFFFu,
            "processes: the member the driver did not list, with its committed bytes (v1, v3)", why);
        ga_group_close(g);
    }
    nvmlShutdown();
    return 0;
}
