/* gpuarena start-up: lazy once-only initialisation, loading the real driver, fork and exit.
 *
 * The first hooked call (possibly from another library's constructor, possibly from dlsym while
 * the loader is busy) runs ga_init_slow under pthread_once: options, then dlopen of the real
 * libcuda.so.1 and one dlsym per entry of hooks.def into ga_real. While the shim itself calls the
 * loader or the driver, the thread-local ga_tl_busy sends any call that comes back into the shim
 * straight to the real function, which is what makes init safe against re-entry.
 * Fork: the child gets fresh locks and forgets the parent's contexts (they are not valid there).
 * A bad setting (options, a GPUARENA_LIBCUDA that cannot be loaded, a cap that rounds to nothing)
 * leaves ga_init_error set: every hook, and every path to one (dlsym, cuGetProcAddress), answers
 * with it, so a cap that was asked for never silently disappears.
 */
#define _GNU_SOURCE
#include "shim.h"

#include "outfile.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

ga_real_t ga_real;
_Atomic int ga_init_done;
CUresult ga_init_error;
__thread int ga_tl_busy;
__thread uint8_t ga_tl_api;

static pthread_once_t ga_once = PTHREAD_ONCE_INIT;
static void *(*ga_dlsym_fn)(void *, const char *);
static void *ga_libcuda;
/* No driver at the start, none named: looked for again (ga_take_late_driver). */
static _Atomic int ga_driver_absent;
static unsigned long long ga_driver_looked_adds;
static pthread_mutex_t ga_late_lock = PTHREAD_MUTEX_INITIALIZER;

/* Without a real dlsym (cannot happen with glibc) every lookup fails rather than crashes. */
GA_NO_SANITIZE static void *ga_dlsym_missing(void *handle, const char *name)
{
    (void)handle, (void)name;
    return NULL;
}

/* The real dlsym: versioned lookup, because plain dlsym(RTLD_NEXT, "dlsym") would find ours. */
GA_NO_SANITIZE static void ga_find_real_dlsym(void)
{
    if (ga_dlsym_fn)
        return;
    void *f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!f) {
        dlerror(); /* the shim's own failed lookup leaves no error behind (ga_real_dlsym) */
        f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    }
    ga_dlsym_fn = (void *(*)(void *, const char *))f;
}

GA_NO_SANITIZE ga_dlsym_fn_t ga_real_dlsym_fn(void)
{
    if (GA_UNLIKELY(!ga_dlsym_fn))
        ga_find_real_dlsym();
    return ga_dlsym_fn ? ga_dlsym_fn : ga_dlsym_missing;
}

/* A lookup of the shim's own (an optional entry point, the runtime, what follows the shim): one
 * that fails takes its error back off dlerror's, which the program reads after its own dlsym. A
 * program that cleared dlerror, looked up cuMemAlloc_v2 and then asked dlerror, the POSIX way to
 * tell a failed lookup, was told "libgpuarena.so: undefined symbol: cuInit" (the shim's start
 * looking for a linked driver) and took its successful lookup for a failure (an outside re-test,
 * 2026-12-06). The program's own lookups go through ga_real_dlsym_fn (interpose.c). */
GA_NO_SANITIZE void *ga_real_dlsym(void *handle, const char *name)
{
    if (GA_UNLIKELY(!ga_dlsym_fn))
        ga_find_real_dlsym();
    void *f = ga_dlsym_fn ? ga_dlsym_fn(handle, name) : NULL;
    if (!f)
        dlerror();
    return f;
}

void *ga_libcuda_handle(void)
{
    return ga_libcuda;
}

const char *ga_libcuda_file(void)
{
    struct link_map *lm = NULL;
    if (ga_libcuda && !dlinfo(ga_libcuda, RTLD_DI_LINKMAP, &lm) && lm && lm->l_name && lm->l_name[0])
        return lm->l_name;
    return ga_opt.libcuda ? ga_opt.libcuda : "libcuda.so.1";
}

/* The toolkit's stub (lib64/stubs/libcuda.so, for linking only) answers every call with
 * CUDA_ERROR_STUB_LIBRARY: a program failed with that code and no word from gpuarena when
 * GPUARENA_LIBCUDA named it (an outside check, 2026-12-06). */
void ga_driver_is_stub(void)
{
    static _Atomic int said;
    if (atomic_exchange(&said, 1))
        return;
    if (ga_opt.libcuda)
        ga_log(GA_LOG_ERROR, "GPUARENA_LIBCUDA=%s is the CUDA toolkit's stub library, not a "
               "driver: its cuInit answers CUDA_ERROR_STUB_LIBRARY, so CUDA cannot start; unset "
               "it or name the real libcuda.so.1 (the NVIDIA driver's, for example "
               "/usr/lib/x86_64-linux-gnu/libcuda.so.1)", ga_opt.libcuda);
    else
        ga_log(GA_LOG_ERROR, "the CUDA driver found as libcuda.so.1 (%s) is the CUDA toolkit's "
               "stub library, not a driver: its cuInit answers CUDA_ERROR_STUB_LIBRARY; take the "
               "toolkit's stubs folder out of LD_LIBRARY_PATH, or install the NVIDIA driver",
               ga_libcuda_file());
}

/* GPUARENA_LIBCUDA naming another driver than the one the program is linked to: the hooked calls
 * go to the named one, every other (a memset, a kernel launch) to the linked one, which nothing
 * initialised: CUDA_ERROR_NOT_INITIALIZED, with no word from gpuarena (an outside check,
 * 2026-12-06). Said once, at start; the first definition after the shim is the linked driver's
 * (another interposer's is not a driver, and is left alone). */
static void ga_check_linked_driver(void)
{
    const char *linked = NULL;
    Dl_info own;
    void *next = ga_real_dlsym(RTLD_NEXT, "cuInit");
    if (!ga_opt.libcuda || !next || !ga_real.cuInit || next == (void *)ga_real.cuInit ||
        !ga_is_cuda_driver(next, &linked) || !dladdr((void *)ga_real.cuInit, &own) ||
        !strcmp(own.dli_fname, linked))
        return;
    ga_log(GA_LOG_WARN, "GPUARENA_LIBCUDA=%s is another CUDA driver than the one the program is "
           "linked to (%s): gpuarena's hooks call the first, the program's other calls (copies, "
           "kernel launches) go to the second, which may then fail with "
           "CUDA_ERROR_NOT_INITIALIZED; point GPUARENA_LIBCUDA at %s, or unset it",
           ga_opt.libcuda, linked, linked);
}

/* The real driver by soname, already loaded (the program links it) or loaded here. */
static void *ga_open_libcuda(void)
{
    const char *path = ga_opt.libcuda ? ga_opt.libcuda : "libcuda.so.1";
    struct stat st;
    /* A path the loader would open is a regular file: dlopen opens a FIFO or a terminal and
     * waits for a writer or input, for ever (GPUARENA_LIBCUDA naming a FIFO hung the program at
     * its first CUDA call: an outside check, helper-114). A bad setting, said as such. */
    if (strchr(path, '/') && stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        ga_log(GA_LOG_ERROR, "cannot load the CUDA driver '%s': it is %s, not a library file; "
               "set GPUARENA_LIBCUDA=/path/to/libcuda.so.1, or unset it", path,
               S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device"
               : S_ISSOCK(st.st_mode) ? "a socket" : "a block device");
        return NULL;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) {
        dlerror(); /* not loaded yet: no error of the shim's left for the program */
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h)
        ga_log(GA_LOG_ERROR, "cannot load the CUDA driver '%s' (%s); install the NVIDIA driver "
               "or set GPUARENA_LIBCUDA=/path/to/libcuda.so.1", path, dlerror());
    return h;
}

#define GA_RESOLVE_CUDA(name) (ga_real.name = (__typeof__(ga_real.name))ga_real_dlsym(ga_libcuda, #name))
static void ga_resolve_driver(void)
{
#define GA_HOOK(lib, name, ret, params, args) GA_RESOLVE_##lib(name);
#define GA_RESOLVE_CUDART(name) (void)0 /* late: ga_resolve_cudart */
#define GA_RESOLVE_LIBDL(name) (ga_real.name = ga_dlsym_fn)
#define GA_RESOLVE_NVML(name) (void)0 /* nvml.c finds its own */
#include "hooks.def"
#undef GA_HOOK
#define GA_RESOLVE_UNHOOKED(name, params) GA_RESOLVE_CUDA(name);
    GA_UNHOOKED_LIST(GA_RESOLVE_UNHOOKED)
#undef GA_RESOLVE_UNHOOKED
}

void *ga_resolve_cudart(const char *name, void *hook)
{
    ga_tl_busy++;
    void *f = ga_real_dlsym(RTLD_NEXT, name);
    if (!f || f == hook)
        f = NULL;
    ga_tl_busy--;
    return f;
}

/* Every lock (ctx.c takes the list, context and device locks), so the child inherits pools and
 * tables that no thread was half-way through changing. */
static void ga_atfork_prepare(void)
{
    ga_ctx_atfork_prepare();
}

static void ga_atfork_parent(void)
{
    ga_ctx_atfork_parent();
}

/* The child: one thread, the parent's CUDA contexts unusable, their memory not the child's.
 * Fresh locks, no inherited contexts, every count from zero (a child's statistics are its own). */
static void ga_atfork_child(void)
{
    pthread_mutex_init(&ga_late_lock, NULL);
    ga_ctx_fork_child();
    ga_capture_fork_child();
    ga_stats_fork_child();
    ga_trace_fork_child();
    ga_oom_fork_child();
}

static void ga_fini(void);

void ga_init_fail(CUresult error)
{
    ga_init_error = error;
}

/* 1 when h is gpuarena's shim, 2 when it is a copy of it (the same GNU build ID: defining dlsym
 * and cuMemAlloc_v2, as was asked before, also takes a device plugin's interposer for a copy, an
 * outside check, 2026-12-06), else 0. */
static int ga_is_shim(void *h)
{
    void *alloc = ga_real_dlsym(h, "cuMemAlloc_v2");
    Dl_info a;
    /* By the object, not by comparing with cuMemAlloc_v2, which in a shim loaded without
     * LD_PRELOAD binds to the driver's: the driver was then called the shim itself. */
    return alloc && dladdr(alloc, &a) ? ga_is_shim_build(a.dli_fbase) : 0;
}

/* The driver at h taken as gpuarena's: its functions into ga_real; the error it leaves (0: usable). */
static CUresult ga_take_driver(void *h)
{
    int shim;
    ga_libcuda = h;
    if ((shim = ga_is_shim(h))) {
        /* GPUARENA_LIBCUDA naming the shim: every call to "the driver" came back to the shim
         * (cuGetProcAddress spun for ever: an outside check, 2026-12-06); a copy of it was
         * refused as lacking cuMemAlloc_v2, which it exports. */
        ga_log(GA_LOG_ERROR, "GPUARENA_LIBCUDA='%s' is gpuarena's shim itself%s, not the CUDA "
               "driver: point it at the driver's libcuda.so.1, or unset it; CUDA will not be "
               "initialised", ga_opt.libcuda ? ga_opt.libcuda : "libcuda.so.1",
               shim > 1 ? " (a copy of it)" : "");
        return CUDA_ERROR_INVALID_VALUE;
    }
    ga_resolve_driver();
    if (!ga_real.cuMemAlloc_v2 || !ga_real.cuMemFree_v2 || !ga_real.cuCtxGetCurrent) {
        /* Asked for by GPUARENA_LIBCUDA, a library that loads but is no driver is a bad
         * setting: NOT_INITIALIZED let the program's own dlsym and cuGetProcAddress reach
         * the real driver past the shim, uncapped (an outside check, 2026-12-06: 200 MiB
         * under a 64 MiB cap with GPUARENA_LIBCUDA=libm.so.6). */
        ga_log(GA_LOG_ERROR, "the CUDA driver loaded (%s) lacks cuMemAlloc_v2, cuMemFree_v2 "
               "or cuCtxGetCurrent: point GPUARENA_LIBCUDA at a real libcuda.so.1%s",
               ga_opt.libcuda ? ga_opt.libcuda : "libcuda.so.1",
               ga_opt.libcuda ? "; CUDA will not be initialised" : "");
        return ga_opt.libcuda ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    }
    ga_check_linked_driver();
    return CUDA_SUCCESS;
}

/* No libcuda.so.1 could be loaded at the start (and none was named): the program may load the
 * driver itself later, from a path the loader does not search (dlopen("/opt/nvidia/libcuda.so.1"),
 * numba's NUMBA_CUDA_DRIVER). A start made earlier, by a lookup of any cu* name (a probe
 * dlsym(RTLD_DEFAULT, "cuInit"), cublasCreate_v2), kept "no driver" for ever, and every later
 * lookup in the driver the program loaded was answered with the driver's own function: 100 MiB
 * under a 64 MiB cap (an outside check, helper-132, 2026-12-07). So while none is known, each
 * start check looks again, when the loader has loaded something since the last look (its count
 * of objects loaded, dlpi_adds: cheap), for an object already loaded under the soname. */

static int ga_adds_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1;
}

static unsigned long long ga_loader_adds(void)
{
    unsigned long long n = 0;
    dl_iterate_phdr(ga_adds_cb, &n);
    return n;
}

/* One thread looks at a time; another meanwhile goes on as before the load (a try-lock: the look
 * takes the loader's lock, which a thread running a library's constructor holds while that
 * constructor's CUDA call would wait here). */
static void ga_take_late_driver(void)
{
    if (pthread_mutex_trylock(&ga_late_lock) != 0)
        return;
    unsigned long long adds = ga_loader_adds();
    if (atomic_load(&ga_driver_absent) && adds != ga_driver_looked_adds) {
        ga_driver_looked_adds = adds;
        ga_tl_busy++;
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (!h) {
            dlerror(); /* still none: no error of the shim's left for the program */
        } else {
            CUresult r = ga_take_driver(h);
            if (r == CUDA_SUCCESS && ga_opt.trace)
                ga_trace_start();
            atomic_store(&ga_driver_absent, 0);
            __atomic_store_n(&ga_init_error, r, __ATOMIC_RELEASE);
            if (r == CUDA_SUCCESS)
                ga_log(GA_LOG_WARN, "the program loaded the CUDA driver itself (%s) after "
                       "gpuarena had found none: gpuarena serves it from now on, so the "
                       "message above does not apply; to start with it, set "
                       "GPUARENA_LIBCUDA=%s", ga_libcuda_file(), ga_libcuda_file());
        }
        ga_tl_busy--;
    }
    pthread_mutex_unlock(&ga_late_lock);
}

static void ga_init_once(void)
{
    void *h;
    ga_tl_busy++;
    ga_find_real_dlsym();
    int bad = ga_options_load();
    ga_stats_start();
    if (bad) {
        ga_init_error = CUDA_ERROR_INVALID_VALUE;
    } else if (!(h = ga_open_libcuda())) {
        /* A driver path that was asked for and is not there is a bad setting, like any other. */
        ga_init_error = ga_opt.libcuda ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        if (!ga_opt.libcuda) {
            ga_driver_looked_adds = ga_loader_adds();
            atomic_store(&ga_driver_absent, 1);
        }
    } else {
        ga_init_error = ga_take_driver(h);
    }
    if (!ga_init_error && ga_opt.trace)
        ga_trace_start();
    pthread_atfork(ga_atfork_prepare, ga_atfork_parent, ga_atfork_child);
    /* quick_exit runs no destructor: the report and the threads' buffered trace records were
     * lost (helper-43 F10). _exit and a fatal signal still lose them. */
    at_quick_exit(ga_fini);
    ga_log(GA_LOG_INFO, "started: mode=%s preallocate=%d fraction=%s%s",
           ga_mode_name(ga_opt.mode), ga_opt.preallocate,
           ga_opt.fraction_text, ga_opt.fraction_grow ? "+" : "");
    atomic_store_explicit(&ga_init_done, 1, memory_order_release);
    ga_tl_busy--;
}

CUresult ga_init_slow(void)
{
    pthread_once(&ga_once, ga_init_once);
    if (GA_UNLIKELY(atomic_load(&ga_driver_absent)) && !ga_tl_busy)
        ga_take_late_driver();
    return __atomic_load_n(&ga_init_error, __ATOMIC_ACQUIRE);
}

/* Statistics and trace at exit. A process that never used CUDA memory (a launcher script, a
 * forked helper) writes nothing, so it cannot overwrite the report of the process that did:
 * neither one with no context nor one that only made contexts or asked cuMemGetInfo. One with no
 * context that made allocation or free calls (cuMemCreate needs none; a refused call) did use it:
 * it wrote nothing until an outside recheck (helper-126, 2026-12-07). */
__attribute__((destructor)) static void ga_fini(void)
{
    if (!atomic_load(&ga_init_done))
        return;
    if (!ga_ctx_first() && !ga_stats_any_call())
        return;
    ga_tl_busy++;
    ga_trace_flush_all();
    if (ga_opt.stats && ga_stats_any_call()) {
        ga_stats_write();
        /* From now on every hook's trace test marks the report stale, and exit's stdio flush,
         * after the destructors of libraries loaded after the shim, writes it again. */
        if (ga_outfile_is_file(ga_opt.stats)) {
            ga_stats_arm_final();
            atomic_fetch_or(&ga_tracing, GA_TRACE_LATE_STATS);
        }
    }
    ga_dev_close_groups();
    ga_tl_busy--;
}
