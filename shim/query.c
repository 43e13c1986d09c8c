/* gpuarena queries: cuInit, cuMemGetInfo, pointer ranges and attributes, IPC handles.
 *
 * These hooks make the pools invisible to the program: cuMemGetInfo reports the process's view
 * (total = its cap, free = what it could still allocate), and range queries on an arena pointer
 * answer with the sub-allocation, not the large driver block behind it, because frameworks use
 * them to find an allocation's base. Everything else goes to the driver unchanged.
 * An arena pointer cannot be exported by IPC: the handle would map the whole driver block, so
 * another process would see the wrong bytes. cuIpcGetMemHandle refuses it with
 * CUDA_ERROR_NOT_SUPPORTED and says once how to run instead.
 */
#include "shim.h"

#include <stdlib.h>

/* cuInit reports option errors: the program stops at its first CUDA call, not later. After the
 * driver's own cuInit, every device's cap is worked out, so a setting that leaves nothing to
 * allocate (a cap or an arena share that rounds to zero bytes) is refused here, before any
 * allocation, as a bad option value is. */
GA_EXPORT CUresult cuInit(unsigned int Flags)
{
    GA_HOOK_ENTER(cuInit, (Flags));
    CUresult r = ga_real.cuInit(Flags);
    if (GA_UNLIKELY(r == CUDA_ERROR_STUB_LIBRARY))
        ga_driver_is_stub();
    int n = 0;
    if (r == CUDA_SUCCESS && ga_real.cuDeviceGetCount && ga_real.cuDeviceGetCount(&n) == CUDA_SUCCESS)
        for (int d = 0; d < n && d < GA_MAX_DEVICES; d++)
            ga_dev_setup(d);
    return r == CUDA_SUCCESS ? ga_init_error : r;
}

/* cuMemGetInfo of either ABI, in full width: the capped view of the current context's device. */
static CUresult ga_mem_info(size_t *free, size_t *total)
{
    if (!free || !total) {
        /* The driver's error first (no context, not initialised), as it would answer; the
         * shim's own places for what it writes, so a NULL is never passed on. */
        size_t f, t;
        CUresult r = ga_real.cuMemGetInfo_v2(&f, &t);
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
    }
    size_t pfree = 0, ptotal = 0;
    CUresult r = ga_real.cuMemGetInfo_v2(&pfree, &ptotal);
    ga_ctx_t *c = r == CUDA_SUCCESS ? ga_current() : NULL;
    /* A context whose state could not be made (no host memory) still answers the capped truth. */
    int dev = c ? c->dev : r == CUDA_SUCCESS ? ga_current_unmade() : -1;
    if (dev < 0)
        return r == CUDA_SUCCESS ? (*free = pfree, *total = ptotal, r) : r;
    uint64_t f, t;
    ga_dev_pass_passed(dev, 0);
    ga_mempool_settle(dev, 0);
    ga_dev_view(dev, c, pfree, ptotal, &f, &t);
    *free = (size_t)f;
    *total = (size_t)t;
    return CUDA_SUCCESS;
}

GA_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    GA_HOOK_ENTER(cuMemGetInfo_v2, (free, total));
    return ga_mem_info(free, total);
}

static unsigned int ga_clamp32(uint64_t n)
{
    return n > UINT32_MAX ? UINT32_MAX : (unsigned int)n;
}

/* The v1 query (hooks.def): the same capped view, asked of the driver's _v2 query (its v1 answer
 * is clamped already, and the view needs the device's true free bytes), each figure clamped to
 * what 32 bits say: a cap above 4 GiB reads as UINT_MAX, as the driver's own v1 answer reads for
 * a device that large. A driver without the _v2 query answers alone. */
GA_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    GA_HOOK_ENTER(cuMemGetInfo, (free, total));
    if (!ga_real.cuMemGetInfo_v2)
        return ga_real.cuMemGetInfo(free, total);
    size_t f = 0, t = 0;
    CUresult r = ga_mem_info(free ? &f : NULL, total ? &t : NULL);
    if (r == CUDA_SUCCESS) {
        *free = ga_clamp32(f);
        *total = ga_clamp32(t);
    }
    return r;
}

typedef struct ga_range_job {
    uintptr_t p, *base;
    size_t *size;
    CUcontext ctx; /* the allocation's context, NULL for an orphan's (its context is gone) */
} ga_range_job_t;

static int ga_range_owned(ga_ctx_t *c, const ga_owner_t *o, void *arg)
{
    ga_range_job_t *j = arg;
    if (o->in_pass || ga_pool_mode(c->pool) == GA_MODE_PLATFORM)
        return 0; /* the driver's own allocation */
    ga_status_t st = ga_pool_lookup(c->pool, j->p, j->base, j->size);
    if (st == GA_OK && ga_fence_is_pending(c, *j->base))
        st = GA_ENOTOWNED; /* freed by the program, waiting for the device */
    const ga_pentry_t *e = st == GA_OK && c->async.count ? ga_ptrmap_get(&c->async, *j->base) : NULL;
    size_t asked = e ? (size_t)ga_async_asked(e) : 0;
    if (e && asked < *j->size) {
        /* A chunk handed over whole to a smaller stream-ordered allocation (fence.c): the
         * allocation is what the program asked for (rounded, as the pool rounds every block);
         * the rest is no allocation's. */
        if (j->p - *j->base < asked)
            *j->size = asked;
        else
            st = GA_ENOTOWNED;
    }
    if (st != GA_OK)
        *j->base = 0, *j->size = 0;
    j->ctx = atomic_load(&c->orphan) ? NULL : c->ctx;
    return st == GA_OK ? 1 : -1;
}

/* Base and size of the live pool allocation containing p: 1 found, 0 not a pool pointer,
 * -1 inside a pool's memory but in no live allocation. Platform pointers are the driver's own
 * allocations, which the driver describes exactly: they are left to it (0). */
static int ga_pool_range(CUdeviceptr p, uintptr_t *base, size_t *size, CUcontext *ctx)
{
    ga_range_job_t j = {(uintptr_t)p, base, size, NULL};
    int found = ga_with_owner((uintptr_t)p, ga_range_owned, &j, 0);
    if (ctx)
        *ctx = j.ctx;
    return found;
}

#define GA_NOT_POOL (-1) /* no CUresult is negative */

/* A range query's answer for a pool pointer (the block's range in *base, *size), or GA_NOT_POOL
 * for an address no pool holds, which the driver answers. */
static int ga_pool_range_answer(CUdeviceptr dptr, uintptr_t *base, size_t *size)
{
    int found = ga_pool_range(dptr, base, size, NULL);
    if (found == 0)
        return GA_NOT_POOL;
    /* the driver's call needs a live current context, and says why not (helper-49 F8) */
    CUresult cr = ga_current_status();
    if (cr != CUDA_SUCCESS)
        return cr;
    return found < 0 ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

GA_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    GA_HOOK_ENTER(cuMemGetAddressRange_v2, (pbase, psize, dptr));
    uintptr_t base = 0;
    size_t size = 0;
    int r = ga_pool_range_answer(dptr, &base, &size);
    if (r == GA_NOT_POOL)
        return ga_real.cuMemGetAddressRange_v2(pbase, psize, dptr);
    if (r == CUDA_SUCCESS && pbase)
        *pbase = (CUdeviceptr)base;
    if (r == CUDA_SUCCESS && psize)
        *psize = size;
    return (CUresult)r;
}

/* The v1 query (hooks.def): a v1 allocation is the driver's, which answers it with its v1 function;
 * a 32-bit address inside a pool block (never one on today's GPUs, whose pool addresses are above
 * 4 GiB) answers with the block, its size clamped to 32 bits. Out-parameters are optional, as
 * the _v2 query's are. */
GA_EXPORT CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize, CUdeviceptr_v1 dptr)
{
    GA_HOOK_ENTER(cuMemGetAddressRange, (pbase, psize, dptr));
    uintptr_t base = 0;
    size_t size = 0;
    int r = ga_pool_range_answer((CUdeviceptr)dptr, &base, &size);
    if (r == GA_NOT_POOL)
        return ga_real.cuMemGetAddressRange(pbase, psize, dptr);
    if (r == CUDA_SUCCESS && pbase)
        *pbase = (CUdeviceptr_v1)base;
    if (r == CUDA_SUCCESS && psize)
        *psize = ga_clamp32(size);
    return (CUresult)r;
}

/* The attributes a live pool allocation answers itself: its own range, never the region (or
 * the granule) the driver sees; its context, which the driver does not know for a vmm
 * mapping (it answered NULL where arena mode, and a plain cuMemAlloc, give the context: found
 * by an outside test on 2026-12-05); and IS_LEGACY_CUDA_IPC_CAPABLE, 0, as cuIpcGetMemHandle
 * below refuses it (the driver said 1 for the arena's region: helper-48 F6, a transport that
 * asks before choosing legacy IPC then failed instead of falling back). */
static int ga_is_range_attr(CUpointer_attribute a, CUcontext ctx)
{
    return a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR || a == CU_POINTER_ATTRIBUTE_RANGE_SIZE ||
           a == CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE ||
           (a == CU_POINTER_ATTRIBUTE_CONTEXT && ctx);
}

static void ga_write_range_attr(CUpointer_attribute a, void *data, uintptr_t base, size_t size,
                                CUcontext ctx)
{
    if (a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
        *(CUdeviceptr *)data = (CUdeviceptr)base;
    else if (a == CU_POINTER_ATTRIBUTE_CONTEXT)
        *(CUcontext *)data = ctx;
    else if (a == CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE)
        *(unsigned *)data = 0;
    else
        *(size_t *)data = size;
}

/* The attributes a live pool allocation answers as a cuMemAlloc block does where the driver, asked
 * about the memory behind it, would answer otherwise: MEMPOOL_HANDLE, NULL (no driver pool: "the
 * mempool handle for the allocation if it was allocated from a mempool. Otherwise returns NULL",
 * cuda.h). In vmm mode the driver was asked about the granule's cuMemCreate mapping, which it
 * refused (CUDA_ERROR_INVALID_VALUE), and cuPointerGetAttributes with it in the list failed
 * whole, where arena mode and the bare driver answer NULL (helper-68 F8; CCCL's
 * is_pointer_accessible asks it beside the memory type). A pool-served cuMemAllocAsync block
 * answers NULL too, as in arena mode: the driver's pools never held it. The other attributes the
 * driver answers for the mapping are left to it (README, "A live pool allocation's attributes"). */
static int ga_is_block_attr(CUpointer_attribute a)
{
    return a == CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE;
}

/* The attribute the driver is asked in a block attribute's place in cuPointerGetAttributes, so that
 * it still checks the call as a whole: one it answers for any pointer, no wider than the slot
 * (a CUmemoryPool), overwritten after the call. */
#define GA_BLOCK_ATTR_STANDIN CU_POINTER_ATTRIBUTE_MEMORY_TYPE

GA_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    GA_HOOK_ENTER(cuPointerGetAttribute, (data, attribute, ptr));
    if (!data)
        return GA_REFUSAL_CODE(CUDA_SUCCESS, 0);
    uintptr_t base = 0;
    size_t size = 0;
    CUcontext ctx = NULL;
    int found = ga_pool_range(ptr, &base, &size, &ctx);
    if (found < 0) /* freed pool memory: the driver's answer for a pointer it does not know */
        return CUDA_ERROR_INVALID_VALUE;
    if (found > 0 && ga_is_block_attr(attribute)) {
        *(CUmemoryPool *)data = NULL;
        return CUDA_SUCCESS;
    }
    if (found == 0 || !ga_is_range_attr(attribute, ctx))
        return ga_real.cuPointerGetAttribute(data, attribute, ptr);
    ga_write_range_attr(attribute, data, base, size, ctx);
    return CUDA_SUCCESS;
}

/* Whether the attribute is one this build's cuda.h names: a list's first unknown entry may be where
 * the driver stops (it answers in order and refuses an attribute it does not know), so nothing
 * after it is read before the driver has taken it. */
static int ga_is_known_attr(CUpointer_attribute a)
{
    return a >= CU_POINTER_ATTRIBUTE_CONTEXT && a <= CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE;
}

/* The length of the list's next piece for the driver: up to and including its first unknown
 * attribute, or all n. */
static unsigned ga_attrs_piece(unsigned n, const CUpointer_attribute *attrs)
{
    unsigned i = 0;
    while (i < n && ga_is_known_attr(attrs[i]))
        i++;
    return i < n ? i + 1 : n;
}

/* cuPointerGetAttributes' list for the driver: attrs itself, or (for a pool allocation whose list
 * names a block attribute) a copy in buf (n entries) or in *heap with each block attribute
 * replaced by GA_BLOCK_ATTR_STANDIN. NULL: no host memory for the copy. */
static CUpointer_attribute *ga_attrs_for_driver(unsigned n, CUpointer_attribute *attrs,
                                                CUpointer_attribute *buf, unsigned nbuf,
                                                CUpointer_attribute **heap)
{
    unsigned i = 0;
    while (i < n && !ga_is_block_attr(attrs[i]))
        i++;
    if (i == n)
        return attrs;
    CUpointer_attribute *out = n <= nbuf ? buf : (*heap = malloc(n * sizeof *out));
    for (i = 0; out && i < n; i++)
        out[i] = ga_is_block_attr(attrs[i]) ? GA_BLOCK_ATTR_STANDIN : attrs[i];
    return out;
}

/* One piece of a pool allocation's list (ga_attrs_piece): asked of the driver, then its own range
 * and block attributes written. */
static CUresult ga_attrs_pool_piece(unsigned n, CUpointer_attribute *attributes, void **data,
                                    CUdeviceptr ptr, uintptr_t base, size_t size, CUcontext ctx)
{
    CUpointer_attribute buf[32], *heap = NULL;
    CUpointer_attribute *asked = ga_attrs_for_driver(n, attributes, buf, 32, &heap);
    if (!asked)
        return ga_refuse_nohost("cuPointerGetAttributes", "a copy of its attribute list",
                                n * sizeof *attributes);
    CUresult r = ga_real.cuPointerGetAttributes(n, asked, data, ptr);
    free(heap);
    for (unsigned i = 0; r == CUDA_SUCCESS && i < n; i++) {
        if (!data[i])
            continue;
        if (ga_is_block_attr(attributes[i]))
            *(CUmemoryPool *)data[i] = NULL;
        else if (ga_is_range_attr(attributes[i], ctx))
            ga_write_range_attr(attributes[i], data[i], base, size, ctx);
    }
    return r;
}

GA_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                          void **data, CUdeviceptr ptr)
{
    GA_HOOK_ENTER(cuPointerGetAttributes, (numAttributes, attributes, data, ptr));
    if (numAttributes && (!attributes || !data))
        return GA_REFUSAL_CODE(CUDA_SUCCESS, 0);
    if (!numAttributes) /* nothing to copy or answer for: the driver's own answer (it was read as a
                         * failed copy, an out-of-memory: an outside check, 2026-12-06) */
        return ga_real.cuPointerGetAttributes(0, attributes, data, ptr);
    uintptr_t base = 0;
    size_t size = 0;
    CUcontext ctx = NULL;
    int found = ga_pool_range(ptr, &base, &size, &ctx);
    /* Freed pool memory, or memory the pools do not hold: the list as it is. Freed pool memory
     * answers every attribute as the driver answers for a pointer it does not know, which is what
     * it answers for 0 (defaults, in each attribute's own width). */
    if (found <= 0)
        return ga_real.cuPointerGetAttributes(numAttributes, attributes, data, found < 0 ? 0 : ptr);
    /* A live pool allocation: its own range, never the whole region the driver sees, and the
     * block attributes as a cuMemAlloc block answers them. Read and asked piece by piece, each
     * ending at an attribute this build does not know, where the driver may stop: the list was
     * read to numAttributes first, past the end of a shorter array that the driver refused at
     * its bad entry (a crash: an outside check, 2026-12-06, test
     * pointer_attributes_read_no_further_than_the_driver). */
    CUresult r = CUDA_SUCCESS;
    for (unsigned at = 0, n; r == CUDA_SUCCESS && at < numAttributes; at += n) {
        n = ga_attrs_piece(numAttributes - at, attributes + at);
        r = ga_attrs_pool_piece(n, attributes + at, data + at, ptr, base, size, ctx);
    }
    return r;
}

/* 1: a pointer of the driver's own allocation (pass-through or platform), whose handle is exact. */
static int ga_whole_owned(ga_ctx_t *c, const ga_owner_t *o, void *arg)
{
    (void)arg;
    return o->in_pass || ga_pool_mode(c->pool) == GA_MODE_PLATFORM;
}

GA_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    GA_HOOK_ENTER(cuIpcGetMemHandle, (pHandle, dptr));
    if (!pHandle) { /* as the driver checks: the context first */
        CUresult cr = ga_current_status();
        return cr != CUDA_SUCCESS ? cr : CUDA_ERROR_INVALID_VALUE;
    }
    if (ga_with_owner((uintptr_t)dptr, ga_whole_owned, NULL, 1)) /* the driver's own allocation */
        return ga_real.cuIpcGetMemHandle(pHandle, dptr);
    CUresult cr = ga_current_status(); /* the driver's answer; the pool block is not shown to it */
    if (cr != CUDA_SUCCESS)
        return cr;
    /* Freed pool memory (a stale pointer, a free byte of a region or mapped granule, a block
     * pending after its free) answers as memory the driver does not know, as the other queries
     * do: it answered CUDA_ERROR_NOT_SUPPORTED and blamed sub-allocation (an outside test,
     * 2026-12-06). */
    uintptr_t base = 0;
    size_t size = 0;
    if (ga_pool_range(dptr, &base, &size, NULL) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    static _Atomic int said;
    if (!atomic_exchange(&said, 1))
        ga_log(GA_LOG_ERROR, "cuIpcGetMemHandle on a sub-allocated pointer (%#llx) is refused: "
               "the handle would map a whole pool block; run with GPUARENA_MODE=platform to "
               "share memory between processes", (unsigned long long)dptr);
    return CUDA_ERROR_NOT_SUPPORTED;
}
