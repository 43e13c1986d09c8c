/* simcuda virtual memory management: address reservations, physical handles and the mappings
 * between them, on host memory for real, so data written through a mapping reads back and a copy
 * into a hole fails cleanly.
 *
 *   cuMemAddressReserve  PROT_NONE anonymous address space (MAP_NORESERVE), alignment honoured.
 *   cuMemCreate          a memfd of the requested size, charged to the device like any allocation.
 *                        It is mapped once (PROT_NONE) as the handle's "view" and the fd closed,
 *                        so thousands of handles need no descriptors.
 *   cuMemMap             mremap(view + offset, 0, size, MREMAP_FIXED, ptr): a second mapping of the
 *                        same shared pages over the reserved range, still PROT_NONE (no access yet).
 *   cuMemSetAccess       mprotect; access is kept per device, copies check the current device's.
 *   cuMemUnmap           the range becomes PROT_NONE reserved space again.
 *   cuMemRelease         drops the handle's reference; its memory lives on while mapped (the real
 *                        driver documents the same) and is given back at the last unmap.
 *
 * Lifetime: reservations and handles belong to the process, not to a context. cuMemCreate names a
 * device, never a context, and frameworks call it from threads with no current context (HAMi-core
 * PR #172 reports PyTorch doing so with expandable segments), so destroying a context takes nothing
 * of VMM with it here. Pointer queries answer as the real driver: cuMemGetAddressRange gives the
 * mapping that holds the address (libfabric PR #12473, UCX PR #11461 rely on it), and
 * cuPointerGetAttribute(s) gives RANGE_START_ADDR/RANGE_SIZE of the reservation, with MAPPED
 * telling whether the address is backed (NVIDIA DALI's cu_vm_test.cc asserts exactly that).
 * Everything here runs under sim_lock.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct sim_phys {          /* one cuMemCreate handle */
    unsigned long long id;         /* the handle value */
    size_t size;
    int dev;
    char *view;                    /* the memfd mapped once, PROT_NONE, MAP_SHARED */
    unsigned refs;                 /* cuMemCreate + cuMemRetainAllocationHandle - cuMemRelease */
    unsigned maps;                 /* live mappings of it */
    int rdma;                      /* made with allocFlags.gpuDirectRDMACapable */
    int fd;                        /* its memfd, kept open when made exportable (requestedHandleTypes
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR); else -1 */
    struct sim_phys *next;
} sim_phys_t;

typedef struct sim_resv {          /* one cuMemAddressReserve */
    CUdeviceptr base;
    size_t size;
    struct sim_resv *next;
} sim_resv_t;

typedef struct sim_map {           /* one cuMemMap */
    CUdeviceptr va;
    size_t size;
    sim_phys_t *phys;
    unsigned char access[SIM_MAX_DEVICES]; /* CU_MEM_ACCESS_FLAGS_PROT_* per device */
} sim_map_t;

static sim_phys_t *physs;
static sim_resv_t *resvs;
static sim_map_t *maps; /* sorted by va */
static size_t maps_len, maps_cap;

#define SIM_VA(p) ((void *)(uintptr_t)(p))
#define SIM_RESERVE_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)

/* ---- lookups ---- */

static sim_resv_t *sim_resv_find(CUdeviceptr p)
{
    for (sim_resv_t *v = resvs; v; v = v->next)
        if (p - v->base < v->size)
            return v;
    return NULL;
}

static sim_phys_t *sim_phys_find(CUmemGenericAllocationHandle h)
{
    for (sim_phys_t *x = physs; x; x = x->next)
        if (x->id == h && x->refs > 0)
            return x;
    return NULL;
}

/* Index of the first mapping whose va is above p. */
static size_t sim_map_upper(CUdeviceptr p)
{
    size_t lo = 0, hi = maps_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (maps[mid].va <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static sim_map_t *sim_map_find(CUdeviceptr p)
{
    size_t i = sim_map_upper(p);
    return i && p - maps[i - 1].va < maps[i - 1].size ? &maps[i - 1] : NULL;
}

/* [p, p+n) is exactly a run of whole, adjacent mappings: the first index and the count. */
static int sim_map_span(CUdeviceptr p, size_t n, size_t *first, size_t *count)
{
    sim_map_t *m = sim_map_find(p);
    if (!m || m->va != p || n == 0 || p + n < p)
        return -1;
    size_t i = (size_t)(m - maps), j = i;
    CUdeviceptr at = p;
    while (j < maps_len && maps[j].va == at && at < p + n)
        at += maps[j++].size;
    if (at != p + n)
        return -1;
    *first = i, *count = j - i;
    return 0;
}

int sim_vmm_reserved_locked(CUdeviceptr p)
{
    return sim_resv_find(p) != NULL;
}

int sim_vmm_mapping_locked(CUdeviceptr p, CUdeviceptr *base, size_t *size)
{
    const sim_map_t *m = sim_map_find(p);
    if (m)
        *base = m->va, *size = m->size;
    return m != NULL;
}

int sim_vmm_range_ok_locked(CUdeviceptr p, size_t n, int dev, int write)
{
    unsigned need = write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ;
    const sim_map_t *m = sim_map_find(p);
    if (!m || n == 0 || p + n < p)
        return 0;
    CUdeviceptr at = p;
    for (size_t i = (size_t)(m - maps); i < maps_len && at < p + n; i++) {
        if (maps[i].va > at || (maps[i].access[dev] & need) != need)
            return 0; /* a hole, or memory this device may not touch this way */
        at = maps[i].va + maps[i].size;
    }
    return at >= p + n;
}

/* ---- counters ---- */

static void sim_peak(unsigned long long now, unsigned long long *peak)
{
    if (now > *peak)
        *peak = now;
}

static void sim_count_phys(sim_phys_t *x, int add)
{
    if (add) {
        sim_counters.vmm_bytes_in_use += x->size;
        sim_peak(sim_counters.vmm_bytes_in_use, &sim_counters.peak_vmm_bytes_in_use);
    } else {
        sim_counters.vmm_bytes_in_use -= x->size;
    }
}

static void sim_count_map(size_t size, int add)
{
    if (add) {
        sim_counters.vmm_mapped_bytes += size;
        sim_counters.vmm_mappings++;
        sim_peak(sim_counters.vmm_mapped_bytes, &sim_counters.peak_vmm_mapped_bytes);
    } else {
        sim_counters.vmm_mapped_bytes -= size;
        sim_counters.vmm_mappings--;
    }
}

/* Frees a handle nobody references or maps any more: its pages, its device bytes. */
static void sim_phys_drop(sim_phys_t *x)
{
    if (x->refs || x->maps)
        return;
    sim_phys_t **pp = &physs;
    while (*pp != x)
        pp = &(*pp)->next;
    *pp = x->next;
    munmap(x->view, x->size);
    if (x->fd >= 0)
        close(x->fd);
    sim_uncharge_locked(x->dev, x->size);
    sim_count_phys(x, 0);
    free(x);
}

/* ---- granularity and properties ---- */

/* A property block this driver can serve: pinned device memory on an existing device. */
static CUresult sim_prop_check(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    return prop->location.id >= 0 && prop->location.id < sim_cfg.devices ? CUDA_SUCCESS
                                                                         : CUDA_ERROR_INVALID_DEVICE;
}

/* What cuMemCreate checks beyond sim_prop_check: the handle types asked for (POSIX descriptors
 * alone on Linux: the Windows types and fabric handles CUDA_ERROR_NOT_SUPPORTED, bits no type has
 * CUDA_ERROR_INVALID_VALUE), the compression type (none or generic) and the usage bits (tile pool,
 * hardware decompression), each as cuda.h defines them. */
static CUresult sim_create_prop_check(const CUmemAllocationProp *prop)
{
    unsigned ht = (unsigned)prop->requestedHandleTypes;
    if (ht & ~(unsigned)(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_WIN32 |
                         CU_MEM_HANDLE_TYPE_WIN32_KMT | CU_MEM_HANDLE_TYPE_FABRIC))
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->allocFlags.compressionType > CU_MEM_ALLOCATION_COMP_GENERIC ||
        (prop->allocFlags.usage & ~(CU_MEM_CREATE_USAGE_TILE_POOL | CU_MEM_CREATE_USAGE_HW_DECOMPRESS)))
        return CUDA_ERROR_INVALID_VALUE;
    return ht & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ? CUDA_ERROR_NOT_SUPPORTED
                                                                   : CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    SIM_COUNT(granularity_calls);
    SIM_ENTER(cuMemGetAllocationGranularity);
    CUresult r = sim_check_init();
    if (r == CUDA_SUCCESS && (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                                               option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = sim_prop_check(prop);
    if (r == CUDA_SUCCESS)
        *granularity = (size_t)sim_cfg.vmm_granularity;
    return r;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
    SIM_COUNT(handle_query_calls);
    SIM_ENTER(cuMemGetAllocationPropertiesFromHandle);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    const sim_phys_t *x = sim_phys_find(handle);
    if (x) {
        memset(prop, 0, sizeof *prop);
        prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop->location.id = x->dev;
    }
    pthread_mutex_unlock(&sim_lock);
    return x ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- physical memory ---- */

/* The host refused a mapping that cuMemCreate or cuMemMap needs (under sim_lock). The call answers
 * CUDA_ERROR_OUT_OF_MEMORY, as the driver does when it has no memory, but the simulated device may
 * have room: what runs out first is most often the host's count of mappings a process may hold
 * (vm.max_map_count, 65,530 by default), and each live granule takes two (the handle's view and
 * its mapping), so some 32,700 granules are the most: 2 GiB at 64 KiB granules. Said once, with
 * what to change: a program on small granules read "the device itself is full" from the shim
 * with most of the device free (an outside check, 2026-12-07, test vmm127_host_mappings_said). */
static void sim_host_refused(const char *call, int err)
{
    static int said;
    if (said)
        return;
    said = 1;
    size_t handles = 0;
    for (const sim_phys_t *x = physs; x; x = x->next)
        handles++;
    long max = -1;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (f) {
        if (fscanf(f, "%ld", &max) != 1)
            max = -1;
        fclose(f);
    }
    char most[64] = "a limit";
    if (max > 0)
        snprintf(most, sizeof most, "%ld", max);
    fprintf(stderr, "gpuarena: simcuda: the host refused a memory mapping that %s needs (%s; %zu "
            "handles and %zu mappings live, each taking a host mapping, of the %s a process may "
            "hold, vm.max_map_count): answered CUDA_ERROR_OUT_OF_MEMORY, though the simulated "
            "device may have room; use larger granules (SIMCUDA_VMM_GRANULARITY), fewer at a "
            "time, or a larger vm.max_map_count (said once)\n",
            call, strerror(err), handles, maps_len, most);
}

/* A memfd of size bytes, mapped once PROT_NONE; NULL when the host refuses. keep: the memfd is
 * kept open in *fd (an exportable handle's), else closed (-1). */
static char *sim_phys_view(size_t size, int keep, int *fd_out)
{
    *fd_out = -1;
    int fd = memfd_create("simcuda-vmm", MFD_CLOEXEC);
    if (fd < 0)
        return NULL;
    void *v = ftruncate(fd, (off_t)size) == 0 ? mmap(NULL, size, PROT_NONE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (keep && v != MAP_FAILED)
        *fd_out = fd;
    else
        close(fd);
    return v == MAP_FAILED ? NULL : v;
}

static CUresult sim_create_locked(CUmemGenericAllocationHandle *handle, size_t size, int dev, int keep_fd)
{
    if (sim_charge_locked(dev, size) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim_phys_t *x = calloc(1, sizeof *x);
    int fd = -1;
    char *view = x ? sim_phys_view(size, keep_fd, &fd) : NULL;
    if (!view) {
        if (x)
            sim_host_refused("cuMemCreate", errno);
        free(x);
        sim_uncharge_locked(dev, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *x = (sim_phys_t){sim_next_id_locked(), size, dev, view, 1, 0, 0, fd, physs};
    physs = x;
    sim_count_phys(x, 1);
    *handle = x->id;
    return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    SIM_COUNT(create_calls);
    SIM_ENTER_ALLOC(cuMemCreate);
    CUresult r = sim_check_init();
    if (r == CUDA_SUCCESS && sim_cfg.no_vmm)
        r = CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS && (!handle || size == 0 || size % sim_cfg.vmm_granularity || flags))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = sim_prop_check(prop);
    if (r == CUDA_SUCCESS)
        r = sim_create_prop_check(prop);
    if (r == CUDA_SUCCESS) {
        sim_latency();
        pthread_mutex_lock(&sim_lock);
        r = sim_create_locked(handle, size, prop->location.id,
                              (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0);
        if (r == CUDA_SUCCESS) /* "CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE": asked for here */
            physs->rdma = prop->allocFlags.gpuDirectRDMACapable != 0;
        pthread_mutex_unlock(&sim_lock);
    }
    if (r != CUDA_SUCCESS)
        SIM_COUNT(failed_allocs);
    return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    SIM_COUNT(release_calls);
    SIM_ENTER(cuMemRelease);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_latency();
    pthread_mutex_lock(&sim_lock);
    sim_phys_t *x = sim_phys_find(handle);
    if (x) {
        x->refs--;
        sim_phys_drop(x);
    }
    pthread_mutex_unlock(&sim_lock);
    return x ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    SIM_COUNT(retain_handle_calls);
    SIM_ENTER(cuMemRetainAllocationHandle);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    sim_map_t *m = sim_map_find((CUdeviceptr)(uintptr_t)addr);
    if (m) {
        m->phys->refs++;
        *handle = m->phys->id;
    }
    pthread_mutex_unlock(&sim_lock);
    if (m)
        sim_hold_import(); /* simcuda_hold_next_import: its reference taken */
    return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Export and import (POSIX file descriptors alone: the other handle types are Windows' or a
 * fabric's). A handle made with requestedHandleTypes CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR keeps
 * its memfd; its export is a new descriptor of it (the caller's to close). An import of a
 * descriptor of one of this process's live handles is another reference to that handle, the same
 * value (as cuMemRetainAllocationHandle gives): the memory is not charged again, and it lives until
 * every reference is released and every mapping unmapped. A descriptor of no live handle of this
 * driver (another process's, a plain file) is CUDA_ERROR_INVALID_VALUE: this driver does not share
 * memory between processes. */
CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SIM_ENTER(cuMemExportToShareableHandle);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!shareableHandle || flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return handleType == CU_MEM_HANDLE_TYPE_WIN32 || handleType == CU_MEM_HANDLE_TYPE_WIN32_KMT ||
                       handleType == CU_MEM_HANDLE_TYPE_FABRIC
                   ? CUDA_ERROR_NOT_SUPPORTED
                   : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    const sim_phys_t *x = sim_phys_find(handle);
    int fd = x && x->fd >= 0 ? fcntl(x->fd, F_DUPFD_CLOEXEC, 0) : -1;
    r = !x || x->fd < 0 ? CUDA_ERROR_INVALID_VALUE : fd < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    pthread_mutex_unlock(&sim_lock);
    if (r == CUDA_SUCCESS)
        *(int *)shareableHandle = fd;
    return r;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                        CUmemAllocationHandleType shHandleType)
{
    SIM_ENTER(cuMemImportFromShareableHandle);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return shHandleType == CU_MEM_HANDLE_TYPE_WIN32 || shHandleType == CU_MEM_HANDLE_TYPE_WIN32_KMT ||
                       shHandleType == CU_MEM_HANDLE_TYPE_FABRIC
                   ? CUDA_ERROR_NOT_SUPPORTED
                   : CUDA_ERROR_INVALID_VALUE;
    struct stat want, st;
    if (fstat((int)(intptr_t)osHandle, &want) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    sim_phys_t *x = physs;
    for (; x; x = x->next)
        if (x->fd >= 0 && fstat(x->fd, &st) == 0 && st.st_ino == want.st_ino && st.st_dev == want.st_dev)
            break;
    if (x) {
        x->refs++;
        *handle = x->id;
    }
    pthread_mutex_unlock(&sim_lock);
    if (x)
        sim_hold_import(); /* simcuda_hold_next_import: its reference taken */
    return x ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- address reservations ---- */

/* size bytes of PROT_NONE address space aligned to align, at addr when that is free. */
static void *sim_reserve_space(size_t size, size_t align, CUdeviceptr addr)
{
    if (addr && addr % align == 0) {
        void *p = mmap(SIM_VA(addr), size, PROT_NONE, SIM_RESERVE_FLAGS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == SIM_VA(addr))
            return p;
        if (p != MAP_FAILED)
            munmap(p, size);
    }
    pthread_mutex_lock(&sim_lock); /* in the device's range, rising, as allocations (sim_va.c) */
    void *in = sim_va_reserve_locked(size, align, (uintptr_t)addr);
    pthread_mutex_unlock(&sim_lock);
    if (in)
        return in;
    if (size > SIZE_MAX - align)
        return NULL;
    char *p = mmap(NULL, size + align, PROT_NONE, SIM_RESERVE_FLAGS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    char *base = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    if (base > p)
        munmap(p, (size_t)(base - p));
    if (p + size + align > base + size)
        munmap(base + size, (size_t)(p + size + align - (base + size)));
    return base;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    SIM_COUNT(reserve_calls);
    SIM_ENTER(cuMemAddressReserve);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (sim_cfg.no_vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!ptr || size == 0 || size % page || addr % page || flags || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment ? (alignment < page ? page : alignment) : (size_t)sim_cfg.vmm_granularity;
    sim_resv_t *v = malloc(sizeof *v);
    void *base = v ? sim_reserve_space(size, align, addr) : NULL;
    if (!base) {
        free(v);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&sim_lock);
    *v = (sim_resv_t){(CUdeviceptr)(uintptr_t)base, size, resvs};
    resvs = v;
    sim_counters.vmm_reserved_bytes += size;
    pthread_mutex_unlock(&sim_lock);
    *ptr = v->base;
    return CUDA_SUCCESS;
}

/* Only a whole reservation, as reserved, and only once nothing in it is mapped any more: freeing
 * address space under live mappings is refused (CUDA_ERROR_INVALID_VALUE), the stricter reading of
 * a point the driver documentation leaves open, so a shim that tears down in the wrong order is
 * caught here. */
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    SIM_COUNT(address_free_calls);
    SIM_ENTER(cuMemAddressFree);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_lock);
    sim_resv_t **pp = &resvs;
    while (*pp && ((*pp)->base != ptr || (*pp)->size != size))
        pp = &(*pp)->next;
    sim_resv_t *v = *pp;
    size_t i = v ? sim_map_upper(ptr - 1) : 0;
    int busy = v && i < maps_len && maps[i].va < ptr + size && maps[i].va >= ptr;
    if (v && !busy) {
        *pp = v->next;
        sim_va_unmap_locked(SIM_VA(v->base), v->size); /* reserved again if in the range */
        sim_counters.vmm_reserved_bytes -= v->size;
    }
    pthread_mutex_unlock(&sim_lock);
    if (!v || busy)
        return CUDA_ERROR_INVALID_VALUE;
    free(v);
    return CUDA_SUCCESS;
}

/* ---- mappings ---- */

static int sim_map_insert(const sim_map_t *m)
{
    if (maps_len == maps_cap) {
        size_t cap = maps_cap ? maps_cap * 2 : 256;
        sim_map_t *t = realloc(maps, cap * sizeof *t);
        if (!t)
            return -1;
        maps = t, maps_cap = cap;
    }
    size_t i = sim_map_upper(m->va);
    memmove(&maps[i + 1], &maps[i], (maps_len - i) * sizeof *maps);
    maps[i] = *m;
    maps_len++;
    return 0;
}

/* Why [ptr, ptr+size) cannot take a mapping of x at offset: 0 when it can. */
static CUresult sim_map_check(CUdeviceptr ptr, size_t size, size_t offset, const sim_phys_t *x)
{
    const sim_resv_t *v = sim_resv_find(ptr);
    if (!x || offset > x->size || size > x->size - offset || !v || size > v->base + v->size - ptr)
        return CUDA_ERROR_INVALID_VALUE;
    size_t i = sim_map_upper(ptr);
    if ((i > 0 && maps[i - 1].va + maps[i - 1].size > ptr) || (i < maps_len && maps[i].va < ptr + size))
        return CUDA_ERROR_INVALID_VALUE; /* part of the range is mapped already */
    return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    SIM_COUNT(map_calls);
    SIM_ENTER(cuMemMap);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    size_t g = (size_t)sim_cfg.vmm_granularity;
    if (flags || size == 0 || ptr % g || size % g || offset % g)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    sim_phys_t *x = sim_phys_find(handle);
    r = sim_map_check(ptr, size, offset, x);
    sim_map_t m = {.va = ptr, .size = size, .phys = x};
    if (r == CUDA_SUCCESS &&
        (mremap(x->view + offset, 0, size, MREMAP_MAYMOVE | MREMAP_FIXED, SIM_VA(ptr)) != SIM_VA(ptr) ||
         sim_map_insert(&m) != 0)) {
        sim_host_refused("cuMemMap", errno);
        mmap(SIM_VA(ptr), size, PROT_NONE, SIM_RESERVE_FLAGS | MAP_FIXED, -1, 0); /* reserved again */
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        x->maps++;
        sim_count_map(size, 1);
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    SIM_COUNT(unmap_calls);
    SIM_ENTER(cuMemUnmap);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_lock);
    size_t first, count;
    if (sim_map_span(ptr, size, &first, &count) != 0) {
        pthread_mutex_unlock(&sim_lock);
        return CUDA_ERROR_INVALID_VALUE; /* not the whole of one or more mappings */
    }
    mmap(SIM_VA(ptr), size, PROT_NONE, SIM_RESERVE_FLAGS | MAP_FIXED, -1, 0);
    for (size_t i = first + count; i-- > first;) {
        sim_phys_t *x = maps[i].phys;
        sim_count_map(maps[i].size, 0);
        memmove(&maps[i], &maps[i + 1], (maps_len - i - 1) * sizeof *maps);
        maps_len--;
        x->maps--;
        sim_phys_drop(x);
    }
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

/* ---- access ---- */

static CUresult sim_location_check(const CUmemLocation *l)
{
    if (l->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    return l->id >= 0 && l->id < sim_cfg.devices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static CUresult sim_access_check(const CUmemAccessDesc *desc, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        CUresult r = sim_location_check(&desc[i].location);
        if (r != CUDA_SUCCESS)
            return r;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* The host protection that lets every device do what it was granted on m. */
static int sim_host_prot(const sim_map_t *m)
{
    unsigned any = 0;
    for (int d = 0; d < SIM_MAX_DEVICES; d++)
        any |= m->access[d];
    return any & 2 ? PROT_READ | PROT_WRITE : any & 1 ? PROT_READ : PROT_NONE;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    SIM_COUNT(set_access_calls);
    SIM_ENTER(cuMemSetAccess);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!desc || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = sim_access_check(desc, count)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_lock);
    size_t first, n;
    if (sim_map_span(ptr, size, &first, &n) != 0)
        r = CUDA_ERROR_INVALID_VALUE; /* the range must be whole mappings, all mapped */
    for (size_t i = first; r == CUDA_SUCCESS && i < first + n; i++) {
        for (size_t k = 0; k < count; k++)
            maps[i].access[desc[k].location.id] = (unsigned char)desc[k].flags;
        mprotect(SIM_VA(maps[i].va), maps[i].size, sim_host_prot(&maps[i]));
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    SIM_COUNT(get_access_calls);
    SIM_ENTER(cuMemGetAccess);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags || !location)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = sim_location_check(location)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_lock);
    const sim_map_t *m = sim_map_find(ptr);
    if (m)
        *flags = m->access[location->id];
    pthread_mutex_unlock(&sim_lock);
    return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- pointer attributes of VMM addresses ---- */

/* A mapped address: what the driver reports for memory it backs. */
static CUresult sim_mapped_attr(CUpointer_attribute attr, const sim_map_t *m, CUdeviceptr p, void *data)
{
    const sim_phys_t *x = m->phys;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = NULL; break; /* VMM memory has no context */
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data = CU_MEMORYTYPE_DEVICE; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = p; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void **)data = NULL; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: *(unsigned *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = x->dev; break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = x->id; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: *(unsigned long long *)data = x->id; break;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: *(void **)data = SIM_VA(m->va); break;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: *(size_t *)data = m->size; break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: *(unsigned *)data = m->access[x->dev]; break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: *(unsigned *)data = x->rdma; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

int sim_vmm_attr_locked(CUpointer_attribute attr, CUdeviceptr p, void *data, CUresult *r)
{
    const sim_resv_t *v = sim_resv_find(p);
    if (!v)
        return 0;
    const sim_map_t *m = sim_map_find(p);
    *r = CUDA_SUCCESS;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = v->base; return 1;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = v->size; return 1;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned *)data = m != NULL; return 1;
    default:
        if (!m)
            return 0; /* reserved but not backed: like an unknown pointer */
        *r = sim_mapped_attr(attr, m, p, data);
        return 1;
    }
}
