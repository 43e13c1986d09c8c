/* dlsym(RTLD_NEXT) from another preloaded library, through the shim's exported dlsym.
 *
 * Run with LD_PRELOAD="libgpuarena.so libganext.so": libganext's getppid() wrapper looks up the
 * next getppid with dlsym(RTLD_NEXT). It must get libc's, exactly as without the shim; a shim that
 * forwards the lookup from its own dlsym makes RTLD_NEXT relative to itself and hands back the
 * wrapper (endless recursion in a real interposer, -2 here). Sanitizer runtimes and tools such as
 * libfaketime resolve their real functions this way.
 */
#include "stress_util.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
    int *calls = (int *)dlsym(RTLD_DEFAULT, "ga_next_wrapped_calls");
    if (!calls) {
        tap(0, "next: libganext.so is preloaded");
        return 0;
    }
    pid_t want = (pid_t)syscall(SYS_getppid);
    pid_t got = getppid();
    tap(got == want && *calls == 1, "next: dlsym(RTLD_NEXT) in a library preloaded after the shim "
        "finds the next definition (getppid %d, want %d; -2 = found itself)", (int)got, (int)want);
    /* the driver in the global scope, as for a program linked with -lcuda */
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    void *(*next_cuda)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "ga_next_cuda_alloc");
    void *hook = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"); /* the shim's export, first in the order */
    void *next = next_cuda ? next_cuda() : NULL;
    tap(next && next == hook, "next: dlsym(RTLD_NEXT, \"cuMemAlloc_v2\") in that library is the "
        "shim's hook (%p; the hook %p), not the driver's function past the cap", next, hook);
    if (cuda)
        dlclose(cuda);
    return 0;
}
