/* Preload integration tests: the runner and helpers (see preload_test.h for how the tests work). */
#include "preload_test.h"

#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void pt_env(const char *first, ...)
{
    va_list ap;
    va_start(ap, first);
    for (const char *kv = first; kv; kv = va_arg(ap, const char *))
        ck_assert_msg(putenv((char *)kv) == 0, "putenv %s", kv);
    va_end(ap);
}

CUcontext pt_start(void)
{
    CUdevice dev;
    CUcontext ctx;
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    return ctx;
}

simcuda_counters_t pt_counters(void)
{
    simcuda_counters_t c;
    simcuda_get_counters(&c);
    return c;
}

int pt_in_shim(void *fn, const char **name)
{
    Dl_info info;
    if (!fn || !dladdr(fn, &info) || !info.dli_fname)
        return 0;
    if (name)
        *name = info.dli_sname;
    return strstr(info.dli_fname, "libgpuarena.so") != NULL;
}

void pt_copy_lib(const char *src, char *dir, const char *name, char *copy, size_t len)
{
    char cmd[1024];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(copy, len, "%s/%s", dir, name);
    if (!src) {
        /* The driver's file from the loader, not from a CUDA name: a dlsym of one would start
         * the shim here, with the driver on the library path, before a child names the copy. */
        struct link_map *lm = NULL;
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        ck_assert_ptr_nonnull(h);
        ck_assert_int_eq(dlinfo(h, RTLD_DI_LINKMAP, &lm), 0);
        src = lm->l_name;
    }
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, copy);
    ck_assert_int_eq(system(cmd), 0);
}

void pt_child_report_and_hold(int fd, char ok)
{
    if (write(fd, &ok, 1) != 1)
        _exit(2);
    pause();
    _exit(0);
}

char pt_child_report_read(int fd)
{
    char ok = 0;
    ck_assert_int_eq(read(fd, &ok, 1), 1);
    return ok;
}

void pt_copy_lib_remove(char *dir, char *copy)
{
    unlink(copy);
    rmdir(dir);
}

int pt_run_child(void (*fn)(void *), void *arg, char *buf, size_t len)
{
    char path[] = "/tmp/gpuarena-preload-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_msg(fd >= 0, "mkstemp");
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork");
    if (pid == 0) {
        dup2(fd, 2);
        fn(arg);
        exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ssize_t n = pread(fd, buf, len - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int pt_json_check(const char *path, const char *expr)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "env -u LD_PRELOAD python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); "
             "sys.exit(0 if (%s) else 1)\" '%s'", expr, path);
    return system(cmd);
}

int main(void)
{
    Suite *s = suite_create("preload");
    suite_add_tcase(s, pt_tcase_interpose());
    suite_add_tcase(s, pt_tcase_runtime());
    suite_add_tcase(s, pt_tcase_modes());
    suite_add_tcase(s, pt_tcase_cap());
    suite_add_tcase(s, pt_tcase_errors());
    suite_add_tcase(s, pt_tcase_teardown());
    suite_add_tcase(s, pt_tcase_reports());
    suite_add_tcase(s, pt_tcase_oom());
    suite_add_tcase(s, pt_tcase_files());
    suite_add_tcase(s, pt_tcase_vmm());
    suite_add_tcase(s, pt_tcase_vmm_hostile());
    suite_add_tcase(s, pt_tcase_vmm_outside());
    suite_add_tcase(s, pt_tcase_hardening());
    suite_add_tcase(s, pt_tcase_group());
    suite_add_tcase(s, pt_tcase_stream());
    suite_add_tcase(s, pt_tcase_nvml());
    suite_add_tcase(s, pt_tcase_mempool());
    suite_add_tcase(s, pt_tcase_v1());
    suite_add_tcase(s, pt_tcase_capture());
    suite_add_tcase(s, pt_tcase_hostile());
    suite_add_tcase(s, pt_tcase_outside3());
    suite_add_tcase(s, pt_tcase_outside4());
    suite_add_tcase(s, pt_tcase_hardening3());
    suite_add_tcase(s, pt_tcase_stream_outside());
    suite_add_tcase(s, pt_tcase_hostile2());
    suite_add_tcase(s, pt_tcase_outside116());
    suite_add_tcase(s, pt_tcase_outside118());
    suite_add_tcase(s, pt_tcase_stream_kernelctx());
    suite_add_tcase(s, pt_tcase_group_outside122());
    suite_add_tcase(s, pt_tcase_outside124());
    suite_add_tcase(s, pt_tcase_trace_race());
    suite_add_tcase(s, pt_tcase_outside123());
    suite_add_tcase(s, pt_tcase_outside127());
    suite_add_tcase(s, pt_tcase_recheck126());
    suite_add_tcase(s, pt_tcase_outside128());
    suite_add_tcase(s, pt_tcase_outside130());
    suite_add_tcase(s, pt_tcase_outside132());
    suite_add_tcase(s, pt_tcase_outside133());
    suite_add_tcase(s, pt_tcase_outside135());
    suite_add_tcase(s, pt_tcase_outside144());
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
