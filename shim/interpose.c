/* gpuarena interposition paths 2 and 3: dlsym and cuGetProcAddress.
 *
 * Path 1 (direct binding) needs no code: the preloaded shim exports the hooked symbols. A program
 * that dlopens libcuda.so.1 and dlsyms an entry point (XLA does) reaches our dlsym; the CUDA
 * runtime asks cuGetProcAddress_v2 for every entry point. In both cases we ask the real function
 * first and map the pointer it returned: if it is the real address of a hooked function, the
 * caller gets the hook of exactly that variant. Mapping by pointer, never by name, makes the ABI
 * right by construction whatever version or stream flavour was asked for.
 */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <sys/stat.h>

/* hooks.def as a table: real slot and hook, for the pointer map. */
typedef struct ga_hook_entry {
    const char *name;
    void **real;
    void *hook;
} ga_hook_entry_t;

static const ga_hook_entry_t ga_hook_table[] = {
#define GA_HOOK(lib, name, ret, params, args) {#name, (void **)&ga_real.name, (void *)name},
#include "hooks.def"
#undef GA_HOOK
};
#define GA_NHOOKS (sizeof ga_hook_table / sizeof ga_hook_table[0])

/* The hook for a real function pointer, or NULL when that function is not hooked. */
static void *ga_hook_for_real(void *fn)
{
    if (!fn)
        return NULL;
    for (size_t i = 0; i < GA_NHOOKS; i++)
        if (*ga_hook_table[i].real == fn)
            return ga_hook_table[i].hook;
    return NULL;
}

static const ga_hook_entry_t *ga_hook_by_name(const char *name)
{
    for (size_t i = 0; i < GA_NHOOKS; i++)
        if (!strcmp(ga_hook_table[i].name, name))
            return &ga_hook_table[i];
    return NULL;
}

static void *ga_dlsym_cuda(void *handle, const char *symbol, void *found);

/* A runtime function found through some handle: remember it as the real one if we had none (the
 * runtime may have been dlopen'ed privately, out of RTLD_NEXT's reach), then hand out the hook. */
static void *ga_map_cudart(const ga_hook_entry_t *e, void *found)
{
    if (!found || found == e->hook)
        return found;
    if (!*e->real)
        __atomic_store_n(e->real, found, __ATOMIC_RELEASE);
    return *e->real == found ? e->hook : found;
}

/* Sanitizer runtimes call dlsym for every interceptor before they are initialised, so the part of
 * dlsym they reach (every name not starting with "cu") is uninstrumented and calls nothing. */
GA_NO_SANITIZE static int ga_is_dlsym_name(const char *s)
{
    return s[0] == 'd' && s[1] == 'l' && s[2] == 's' && s[3] == 'y' && s[4] == 'm' && !s[5];
}

static void *ga_dlsym_lookup(void *handle, const char *symbol);
static void *ga_dlsym_next_cuda(const char *symbol);

/* RTLD_NEXT means "after the caller", and glibc finds the caller from its own return address: so
 * that lookup must be a tail jump into the real dlsym, which then sees our caller's return address
 * (a later interposer gets the definition after itself, not its own wrapper back). The optimize
 * attribute keeps it a jump in -O0/-O1 sanitizer builds too. A CUDA name is the exception
 * (ga_dlsym_next_cuda). */
GA_NO_SANITIZE GA_EXPORT __attribute__((optimize("optimize-sibling-calls")))
void *dlsym(void *handle, const char *symbol)
{
    if (handle == RTLD_NEXT) {
        if (symbol[0] == 'c' && symbol[1] == 'u')
            return ga_dlsym_next_cuda(symbol);
        return ga_real_dlsym_fn()(handle, symbol);
    }
    return ga_dlsym_lookup(handle, symbol);
}

/* RTLD_NEXT for a CUDA name: what comes after any object is the shim's hook (for an object before
 * the shim) or the driver's function (after it), so the lookup is made after the shim and a
 * driver function the shim hooks is answered with its hook, as every other lookup is. Every
 * library a program loads lies after the preloaded shim, and one looking up cuMemAlloc_v2 with
 * RTLD_NEXT got the driver's own, past the cap and uncounted (an outside test, 2026-12-06). */
static void *ga_dlsym_next_cuda(const char *symbol)
{
    void *found = ga_real_dlsym_fn()(RTLD_NEXT, symbol);
    if (!found || ga_tl_busy)
        return found;
    return ga_dlsym_cuda(RTLD_NEXT, symbol, found);
}

/* dlerror after a CUDA name's lookup is the program's lookup's, as without the shim: the shim's
 * start and checks in between make lookups of their own (which leave no error, ga_real_dlsym),
 * so a failed lookup is made again last for its error, and a hook answered where the driver's
 * lookup failed (the libcuda handle answers every hooked name) leaves none. */
static void *ga_dlsym_answer(void *handle, const char *symbol, void *found, void *answer)
{
    if (!answer)
        return found ? NULL : ga_real_dlsym_fn()(handle, symbol);
    if (!found)
        dlerror();
    return answer;
}

GA_NO_SANITIZE static void *ga_dlsym_lookup(void *handle, const char *symbol)
{
    void *found = ga_real_dlsym_fn()(handle, symbol);
    if (found && ga_is_dlsym_name(symbol))
        return (void *)dlsym; /* a caller fetching dlsym itself keeps going through us */
    if (symbol[0] == 'n' && symbol[1] == 'v' && symbol[2] == 'm' && symbol[3] == 'l' && !ga_tl_busy)
        return ga_nvml_hook_for(symbol, found); /* NVML's memory queries (nvml.c) */
    /* Only CUDA names concern us; anything else (and the loader's own early calls) is untouched. */
    if (symbol[0] != 'c' || symbol[1] != 'u' || ga_tl_busy)
        return found;
    return ga_dlsym_answer(handle, symbol, found, ga_dlsym_cuda(handle, symbol, found));
}

/* The name an object gives itself (DT_SONAME), or "". A copy of the driver keeps libcuda.so.1
 * whatever its file is called. Most loaders relocate the dynamic section in place; where one
 * leaves it as linked (the address below the object's load bias), the bias is added. */
static const char *ga_soname(const struct link_map *lm)
{
    const char *strtab = NULL;
    size_t off = (size_t)-1;
    for (const ElfW(Dyn) *d = lm->l_ld; d && d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_STRTAB)
            strtab = (const char *)d->d_un.d_ptr;
        else if (d->d_tag == DT_SONAME)
            off = d->d_un.d_val;
    }
    if (!strtab || off == (size_t)-1)
        return "";
    if ((uintptr_t)strtab < lm->l_addr)
        strtab += lm->l_addr;
    return strtab + off;
}

/* Whether the object at base (its link map lm, which glibc's dlsym takes as a handle, in any
 * namespace) defines name itself, not through a library it depends on. */
static int ga_defines(struct link_map *lm, const void *base, const char *name)
{
    Dl_info in;
    void *f = ga_real_dlsym(lm, name);
    return f && dladdr(f, &in) && in.dli_fbase == base;
}

/* Whether the object that holds found is a CUDA driver: a file named libcuda.so*, or an object
 * that calls itself so (DT_SONAME libcuda.so*) and defines the driver's cuDriverGetVersion and
 * cuMemAlloc_v2 itself (a copy under another name: one named libnvcuda-compat.so was handed out
 * unhooked, past the cap: an outside check, 2026-12-06). Exports alone would also take an
 * interposer of its own (device plugins' hijack libraries define both names, under their own
 * soname) for a driver. gpuarena's shim is never one. Cheap: only an object that calls itself
 * libcuda gets the two lookups, and lookups of hooked names outside the shim's driver are few. */
int ga_is_cuda_driver(void *found, const char **file)
{
    struct link_map *lm = NULL;
    Dl_info info, self;
    if (!dladdr1(found, &info, (void **)&lm, RTLD_DL_LINKMAP) || !info.dli_fname || !lm)
        return 0;
    if (dladdr((void *)ga_is_cuda_driver, &self) && self.dli_fbase == info.dli_fbase)
        return 0;
    *file = info.dli_fname;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    if (!strncmp(base, "libcuda.so", 10))
        return 1;
    return !strncmp(ga_soname(lm), "libcuda.so", 10) &&
           ga_defines(lm, info.dli_fbase, "cuDriverGetVersion") &&
           ga_defines(lm, info.dli_fbase, "cuMemAlloc_v2");
}

static int ga_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Whether found, a hooked driver function found somewhere else than in the driver the shim uses,
 * lies in another CUDA driver (GPUARENA_LIBCUDA naming a copy or the toolkit's stub while the
 * program loads the system's; a copy the program loads itself; the same file loaded again into
 * another namespace by dlmopen). Its functions would run past the cap, silently (an outside
 * check, 2026-12-06: 100 MiB under a 64 MiB cap, exit 0), so the hook answers instead, which
 * calls the shim's driver; said once. Another library's function of a driver name (an
 * interposer of its own, such as a device plugin's) is left to it. */
static int ga_other_driver(const char *symbol, void *found)
{
    static _Atomic int said;
    const char *file = NULL;
    if (!ga_is_cuda_driver(found, &file))
        return 0;
    if (atomic_exchange(&said, 1))
        return 1;
    const char *own = ga_libcuda_file();
    if (ga_same_file(file, own))
        ga_log(GA_LOG_WARN, "the program looks up %s in a second instance of the CUDA driver "
               "gpuarena uses (%s, loaded again apart from it, as dlmopen does): it gets "
               "gpuarena's hook, which calls gpuarena's instance, so the cap holds; but nothing "
               "initialises that instance (its cuInit is gpuarena's too), so the calls gpuarena "
               "does not hook (cuDeviceGet, copies, launches) fail there with "
               "CUDA_ERROR_NOT_INITIALIZED: load the driver once (dlopen, not dlmopen)",
               symbol, file);
    else
        ga_log(GA_LOG_WARN, "the program looks up %s in %s, another CUDA driver than the one "
               "gpuarena uses (%s): it gets gpuarena's hook, which calls gpuarena's driver, so the "
               "cap holds; %s", symbol, file, own,
               ga_opt.libcuda ? "point GPUARENA_LIBCUDA at the driver the program loads, or unset it"
                              : "if the program needs that driver, set GPUARENA_LIBCUDA to it");
    return 1;
}

/* The GNU build ID of the object loaded at fbase (its NT_GNU_BUILD_ID note), or 0 bytes. */
static size_t ga_build_id(const void *fbase, const unsigned char **id)
{
    const ElfW(Ehdr) *eh = fbase;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
        return 0;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)fbase + eh->e_phoff);
    uintptr_t bias = 0;
    int have_bias = 0;
    for (int i = 0; i < eh->e_phnum && !have_bias; i++)
        if (ph[i].p_type == PT_LOAD) {
            bias = (uintptr_t)fbase - (ph[i].p_vaddr & ~(uintptr_t)(ph[i].p_align ? ph[i].p_align - 1 : 0));
            have_bias = 1;
        }
    for (int i = 0; have_bias && i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_NOTE)
            continue;
        const char *n = (const char *)(bias + ph[i].p_vaddr), *end = n + ph[i].p_memsz;
        while (n + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)n;
            const char *name = n + sizeof *nh;
            const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                (const char *)desc + nh->n_descsz <= end) {
                *id = desc;
                return nh->n_descsz;
            }
            n = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 0;
}

/* Whether found lies in a copy of gpuarena's shim (another object with this one's build ID) that
 * the program loaded itself: its hooks would keep a second pool and a second cap (an outside
 * check, 2026-12-06: 64 MiB through the copy and 64 MiB through this shim under a 64 MiB cap).
 * The hook answers instead; said once. */
int ga_is_shim_build(const void *fbase)
{
    Dl_info self;
    const unsigned char *a = NULL, *b = NULL;
    if (!fbase || !dladdr((void *)ga_is_shim_build, &self))
        return 0;
    if (fbase == self.dli_fbase)
        return 1;
    size_t na = ga_build_id(fbase, &a), nb = ga_build_id(self.dli_fbase, &b);
    return na && na == nb && !memcmp(a, b, na) ? 2 : 0;
}

static int ga_shim_copy(const char *symbol, void *found)
{
    static _Atomic int said;
    Dl_info in;
    if (!dladdr(found, &in) || ga_is_shim_build(in.dli_fbase) != 2)
        return 0;
    if (!atomic_exchange(&said, 1))
        ga_log(GA_LOG_WARN, "the program looks up %s in %s, a copy of gpuarena's shim loaded "
               "apart from the preloaded one: it gets the preloaded shim's hook, so one pool and "
               "one cap hold; load only the preloaded shim", symbol,
               in.dli_fname ? in.dli_fname : "?");
    return 1;
}

/* The instrumented part of dlsym: a CUDA name. */
static void *ga_dlsym_cuda(void *handle, const char *symbol, void *found)
{
    CUresult err = ga_ensure_init();
    if (err == CUDA_ERROR_NOT_INITIALIZED && !ga_real.cuMemAlloc_v2)
        return found; /* no driver here at all: the loader's answer */
    if (GA_UNLIKELY(err != CUDA_SUCCESS)) {
        /* A bad setting: a hooked name gets its hook, which refuses as the direct path does. */
        const ga_hook_entry_t *bad = found ? ga_hook_by_name(symbol) : NULL;
        return bad ? bad->hook : found;
    }
    void *hook = ga_hook_for_real(found);
    if (hook)
        return hook;
    const ga_hook_entry_t *e = ga_hook_by_name(symbol);
    if (!e)
        return found;
    if (symbol[2] == 'd' && symbol[3] == 'a') /* cuda*: the runtime */
        return ga_map_cudart(e, found);
    /* The libcuda handle itself answers by name too, even if the lookup failed there. */
    if (handle == ga_libcuda_handle() && *e->real)
        return e->hook;
    if (found && *e->real && (ga_other_driver(symbol, found) || ga_shim_copy(symbol, found)))
        return e->hook;
    return found;
}

/* Shared tail of both cuGetProcAddress hooks: swap a real hooked function for its hook. At debug
 * level every answer is logged, which is also how a test sees what the CUDA runtime was given. */
static void ga_map_proc(const char *via, const char *symbol, int version, cuuint64_t flags,
                        void **pfn)
{
    void *hook = ga_hook_for_real(*pfn);
    if (hook)
        *pfn = hook;
    if (GA_UNLIKELY(ga_opt.log >= GA_LOG_DEBUG))
        ga_log(GA_LOG_DEBUG, "%s('%s', %d, %llu) -> %s", via, symbol ? symbol : "(null)", version,
               (unsigned long long)flags, hook ? "gpuarena hook" : "driver");
}

GA_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    CUresult e = GA_UNLIKELY(ga_tl_busy) ? CUDA_ERROR_NOT_INITIALIZED : ga_ensure_init();
    if (e == CUDA_ERROR_NOT_INITIALIZED)
        return ga_real.cuGetProcAddress_v2
                   ? ga_real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus)
                   : CUDA_ERROR_NOT_INITIALIZED;
    if (GA_UNLIKELY(e != CUDA_SUCCESS))
        return e; /* a bad setting: no entry point leaves the shim uncapped */
    if (!ga_real.cuGetProcAddress_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = ga_real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn)
        ga_map_proc("cuGetProcAddress_v2", symbol, cudaVersion, flags, pfn);
    return r;
}

GA_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    CUresult e = GA_UNLIKELY(ga_tl_busy) ? CUDA_ERROR_NOT_INITIALIZED : ga_ensure_init();
    if (e == CUDA_ERROR_NOT_INITIALIZED)
        return ga_real.cuGetProcAddress ? ga_real.cuGetProcAddress(symbol, pfn, cudaVersion, flags)
                                        : CUDA_ERROR_NOT_INITIALIZED;
    if (GA_UNLIKELY(e != CUDA_SUCCESS))
        return e;
    if (!ga_real.cuGetProcAddress)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = ga_real.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn)
        ga_map_proc("cuGetProcAddress", symbol, cudaVersion, flags, pfn);
    return r;
}
