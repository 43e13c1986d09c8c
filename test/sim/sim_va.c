/* simcuda device addresses: where cuMemAlloc and its kin put an allocation.
 *
 * A real driver hands out device addresses from its own address space, rising, and a freed range
 * is handed out again (cuMemAlloc after cuMemFree of the same size commonly returns the same
 * address). Each allocation used to be its own mmap anywhere, so the addresses were Linux's:
 * falling, reused from the top. The shim's arena orders its regions by address and breaks best
 * fit's ties by the lower one, so under a cap the shim on this driver and the replay (whose regions
 * rose) refused different allocations, up to 31 on a shared trace (an outside check, 2026-12-07).
 * Now one range of address space is reserved (PROT_NONE, no memory) at the first allocation and
 * every allocation is placed in it by the model the replay's backend uses, compiled in from
 * allocator/va_fit.c (ga_vafit.h: the lowest free place, in units of 64 KiB), so a trace replayed
 * and the same trace played through the shim here place their regions alike by construction.
 * cuMemAddressReserve places its ranges there too (sim_va_reserve_locked), aligned, as the
 * replay's backend places vmm's. The range is 4 times the device's memory and 64 GiB more (at most
 * a quarter of the room an address-space limit, ulimit -v, leaves; halved until the system grants
 * it, and none under 1 GiB); an allocation or reservation it has no room for, and a 32-bit (v1) allocation, is
 * mapped anywhere as before. All under sim_lock.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../../allocator/ga_vafit.h"

#define SIM_VA_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
#define SIM_VA_ALIGN ((size_t)2 << 20) /* the range starts on a 2 MiB boundary, as GPU pages do */
#define SIM_VA_LEAST ((size_t)1 << 30)

static ga_vafit_t va;
static int va_tried;

/* The address space this process may still take under `ulimit -v` (RLIMIT_AS less what it holds,
 * /proc/self/statm's first figure), or SIZE_MAX: the range counts against that limit, so it takes
 * a quarter of the room at most and leaves the program the rest. */
static size_t sim_va_as_room(void)
{
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY)
        return SIZE_MAX;
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    unsigned long long held = pages * (unsigned long long)sysconf(_SC_PAGESIZE);
    return held < as.rlim_cur ? (size_t)(as.rlim_cur - held) : 0;
}

/* The range, reserved once: as large as asked for or the largest half of it the system gives. */
static void sim_va_setup_locked(void)
{
    va_tried = 1;
    unsigned long long total = sim_cfg.total_mem;
    size_t want = total > (SIZE_MAX >> 4) ? SIZE_MAX >> 2 : (size_t)(4 * total) + ((size_t)64 << 30);
    size_t room = sim_va_as_room();
    if (want > room / 4)
        want = room / 4;
    for (size_t size = want; size >= SIM_VA_LEAST; size /= 2) {
        size &= ~(SIM_VA_ALIGN - 1);
        char *p = mmap(NULL, size + SIM_VA_ALIGN, PROT_NONE, SIM_VA_FLAGS, -1, 0);
        if (p == MAP_FAILED)
            continue;
        char *lo = (char *)(((uintptr_t)p + SIM_VA_ALIGN - 1) & ~(uintptr_t)(SIM_VA_ALIGN - 1));
        if (lo > p)
            munmap(p, (size_t)(lo - p));
        munmap(lo + size, (size_t)(p + SIM_VA_ALIGN - lo));
        ga_vafit_init(&va, (uintptr_t)lo, (uintptr_t)lo + size);
        return;
    }
}

static int sim_va_inside(uintptr_t p)
{
    return va.hi && p >= va.lo && p < va.hi;
}

/* mapped bytes (a whole number of pages) of read-write memory: at the lowest free place of the
 * range, or anywhere when the range has none. MAP_FAILED when there is no memory. */
void *sim_va_map_locked(size_t mapped)
{
    if (!va_tried)
        sim_va_setup_locked();
    uintptr_t at;
    if (va.hi && (size_t)sysconf(_SC_PAGESIZE) <= GA_VA_UNIT && ga_vafit_take(&va, mapped, &at) == 0) {
        void *p = mmap((void *)at, mapped, PROT_READ | PROT_WRITE, SIM_VA_FLAGS | MAP_FIXED, -1, 0);
        if (p != MAP_FAILED)
            return p;
        (void)ga_vafit_give(&va, at);
        return MAP_FAILED;
    }
    return mmap(NULL, mapped, PROT_READ | PROT_WRITE, SIM_VA_FLAGS, -1, 0);
}

/* The mapping at p goes: inside the range its place is reserved again (no memory) and free for the
 * next allocation; outside it, it is unmapped. */
void sim_va_unmap_locked(void *p, size_t mapped)
{
    if (!sim_va_inside((uintptr_t)p)) {
        munmap(p, mapped);
        return;
    }
    size_t span = (mapped + GA_VA_UNIT - 1) & ~(GA_VA_UNIT - 1);
    if (mmap(p, span, PROT_NONE, SIM_VA_FLAGS | MAP_FIXED, -1, 0) == p)
        (void)ga_vafit_give(&va, (uintptr_t)p);
    else
        munmap(p, mapped); /* its place stays taken: no later allocation is mapped over a hole */
}

/* size bytes of address space (no memory) aligned to align for cuMemAddressReserve: at addr when
 * that lies in the range, aligned and free (the hint taken as given), else at the lowest free place
 * of the range that holds it, else NULL; given back with sim_va_unmap_locked. */
void *sim_va_reserve_locked(size_t size, size_t align, uintptr_t addr)
{
    if (!va_tried)
        sim_va_setup_locked();
    uintptr_t at = addr;
    if (!va.hi || (size_t)sysconf(_SC_PAGESIZE) > GA_VA_UNIT)
        return NULL;
    if (addr && sim_va_inside(addr) && addr % align == 0 && ga_vafit_take_at(&va, size, addr) == 0)
        return (void *)at;
    if (ga_vafit_take_aligned(&va, size, align, &at) != 0)
        return NULL;
    return (void *)at; /* reserved already: the range is PROT_NONE where nothing is mapped */
}
