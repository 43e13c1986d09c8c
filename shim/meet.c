/* Contexts gpuarena learns where the program makes them or makes them current: cuCtxCreate in
 * every form and cuCtxPushCurrent in both (cuCtxSetCurrent is ctx.c's hook, and does the same).
 *
 * The fence waits for every context of a device that gpuarena knows before it hands a freed block
 * out again (fence.c, sync.c). A context was known only once the program allocated, freed or asked
 * for memory with it current, or freed a block on one of its streams; one made with cuCtxCreate and
 * only used to launch kernels was not, and a kernel there that wrote another context's freed block
 * could see the block handed out again (an outside check, 2026-12-06: 37 of 45 blocks intact under
 * deferred, lazy and device alike). Every context a thread can launch in is made current first, by
 * one of these calls, so each gets its state on success, as at a first allocation: the pool is
 * still made only at the first allocation, a context already known costs a look at the thread's
 * cache, and one alone on its device adds no synchronisation (the fence waits for the device's
 * other contexts only). The state goes where the context ends (teardown.c: cuCtxDestroy,
 * cuCtxDetach, the primary context's last release and reset), and a later context with the same
 * handle gets a new one. A refused call meets nothing; a NULL out-parameter is the driver's to
 * refuse, with its own code, as every argument is. No lock is held: the state is made after the
 * driver's call has returned (ga_ctx_meet, ctx.c).
 */
#include "shim.h"

/* The call's answer; on success its context, now current in this thread, is met. */
static CUresult ga_made_current(CUresult r, CUcontext ctx)
{
    if (r == CUDA_SUCCESS)
        ga_ctx_meet(ctx);
    return r;
}

/* The context a create made (and pushed), or none when the call failed or had nowhere to put it. */
static CUcontext ga_created(CUresult r, const CUcontext *pctx)
{
    return r == CUDA_SUCCESS && pctx ? *pctx : NULL;
}

GA_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    GA_HOOK_ENTER(cuCtxCreate, (pctx, flags, dev));
    CUresult r = ga_real.cuCtxCreate(pctx, flags, dev);
    return ga_made_current(r, ga_created(r, pctx));
}

GA_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    GA_HOOK_ENTER(cuCtxCreate_v2, (pctx, flags, dev));
    CUresult r = ga_real.cuCtxCreate_v2(pctx, flags, dev);
    return ga_made_current(r, ga_created(r, pctx));
}

GA_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                  unsigned int flags, CUdevice dev)
{
    GA_HOOK_ENTER(cuCtxCreate_v3, (pctx, paramsArray, numParams, flags, dev));
    CUresult r = ga_real.cuCtxCreate_v3(pctx, paramsArray, numParams, flags, dev);
    return ga_made_current(r, ga_created(r, pctx));
}

GA_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                  unsigned int flags, CUdevice dev)
{
    GA_HOOK_ENTER(cuCtxCreate_v4, (pctx, ctxCreateParams, flags, dev));
    CUresult r = ga_real.cuCtxCreate_v4(pctx, ctxCreateParams, flags, dev);
    return ga_made_current(r, ga_created(r, pctx));
}

GA_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    GA_HOOK_ENTER(cuCtxPushCurrent_v2, (ctx));
    return ga_made_current(ga_real.cuCtxPushCurrent_v2(ctx), ctx);
}

GA_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx)
{
    GA_HOOK_ENTER(cuCtxPushCurrent, (ctx));
    return ga_made_current(ga_real.cuCtxPushCurrent(ctx), ctx);
}
