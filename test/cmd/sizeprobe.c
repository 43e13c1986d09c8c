/* sizeprobe: what a program sees of device 0's memory, for the size-grammar table (test_sizes.py).
 *
 * `sizeprobe sim` prints the total cuDeviceTotalMem_v2 reports (the simulated driver read
 * SIMCUDA_TOTAL_MEM); `sizeprobe shim` prints the total cuMemGetInfo_v2 reports in device 0's
 * primary context (under the preloaded shim: its cap, from GPUARENA_LIMIT). Either prints
 * "err N" when cuInit fails. A C program rather than Python with ctypes because the table has a
 * hundred rows, each needing a fresh process (the driver and the shim read their settings once).
 * The driver is reached through dlopen and dlsym, as frameworks reach it. Under GPUARENA_STATS,
 * `sizeprobe shim` also allocates and frees one block: the shim writes statistics only for a
 * process that allocated (test_shim_vmm_keep reads the options from them).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*init_fn)(unsigned);
typedef int (*dev_get_fn)(int *, int);
typedef int (*total_fn)(size_t *, int);
typedef int (*retain_fn)(void **, int);
typedef int (*set_fn)(void *);
typedef int (*info_fn)(size_t *, size_t *);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);

/* dlsym into a function pointer without the object-to-function cast warning. */
static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p)
        fprintf(stderr, "sizeprobe: %s missing\n", name);
    return p;
}

int main(int argc, char **argv)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (argc != 2 || !h) {
        fprintf(stderr, "usage: sizeprobe sim|shim (libcuda.so.1 on the library path)\n");
        return 2;
    }
    init_fn init;
    dev_get_fn dev_get;
    *(void **)&init = sym(h, "cuInit");
    *(void **)&dev_get = sym(h, "cuDeviceGet");
    int rc = init(0), dev = 0;
    if (rc != 0) {
        printf("err %d\n", rc);
        return 0;
    }
    dev_get(&dev, 0);
    size_t total = 0, free_ = 0;
    if (!strcmp(argv[1], "sim")) {
        total_fn tot;
        *(void **)&tot = sym(h, "cuDeviceTotalMem_v2");
        rc = tot(&total, dev);
    } else {
        retain_fn retain;
        set_fn set;
        info_fn info;
        void *ctx = NULL;
        *(void **)&retain = sym(h, "cuDevicePrimaryCtxRetain");
        *(void **)&set = sym(h, "cuCtxSetCurrent");
        *(void **)&info = sym(h, "cuMemGetInfo_v2");
        rc = retain(&ctx, dev);
        rc = rc ? rc : set(ctx);
        rc = rc ? rc : info(&free_, &total);
        if (!rc && getenv("GPUARENA_STATS")) {
            alloc_fn alloc;
            free_fn release;
            unsigned long long p = 0;
            *(void **)&alloc = sym(h, "cuMemAlloc_v2");
            *(void **)&release = sym(h, "cuMemFree_v2");
            if (alloc(&p, 512) == 0)
                release(p);
        }
    }
    if (rc != 0)
        printf("err %d\n", rc);
    else
        printf("ok %zu\n", total);
    return 0;
}
