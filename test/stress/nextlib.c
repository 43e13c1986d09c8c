/* libganext.so: a second interposer, preloaded after the shim (stress_next.c drives it).
 *
 * It wraps getppid() the usual way, finding the next definition with dlsym(RTLD_NEXT, ...). The
 * shim exports dlsym, so that lookup passes through it; RTLD_NEXT means "after the caller", and
 * the caller must stay this library, not the shim, or the lookup finds this very wrapper and the
 * call recurses. The depth counter turns such a recursion into a visible answer (-2).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <unistd.h>

__attribute__((visibility("default"))) int ga_next_wrapped_calls;
static __thread int depth;

/* A CUDA name looked up the same way must come back as the shim's hook, not the driver's own
 * function (which would allocate past the cap): stress_next.c compares it with the hook. */
__attribute__((visibility("default"))) void *ga_next_cuda_alloc(void)
{
    return dlsym(RTLD_NEXT, "cuMemAlloc_v2");
}

__attribute__((visibility("default"))) pid_t getppid(void)
{
    if (depth > 0)
        return -2; /* re-entered: RTLD_NEXT found this wrapper again */
    pid_t (*next)(void) = (pid_t(*)(void))dlsym(RTLD_NEXT, "getppid");
    if (!next)
        return -3;
    depth++;
    pid_t r = next();
    depth--;
    ga_next_wrapped_calls++;
    return r;
}
