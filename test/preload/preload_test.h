/* Preload integration tests: shared helpers.
 *
 * The test binary runs under LD_PRELOAD=libgpuarena.so on the simulated driver (LD_LIBRARY_PATH=
 * $(BUILD)/sim) in Check's fork mode: every test is a fresh child in which the shim has not started
 * yet, so a test sets its GPUARENA_* and SIMCUDA_* variables first, then makes its first CUDA call,
 * and asserts from the outside: the simulated driver's counters say what reached the driver.
 */
#ifndef PRELOAD_TEST_H
#define PRELOAD_TEST_H

#define _GNU_SOURCE
#include <check.h>
#include <cuda.h>
#include <stddef.h>

#include "simcuda.h"

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)

/* The modes a test runs its child under, one list each (an array's initializer, so that `sizeof`
 * counts them where it is used): every mode, and the modes that serve blocks from a pool of their
 * own (platform passes each to the driver). */
#define PT_ALL_MODES                                                                               \
    {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow", "GPUARENA_MODE=vmm", "GPUARENA_MODE=platform"}
#define PT_POOL_MODES {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow", "GPUARENA_MODE=vmm"}

/* Sets a list of NAME=VALUE strings (NULL-terminated) in the environment. */
void pt_env(const char *first, ...);
/* cuInit, device 0's primary context retained and made current; returns it. */
CUcontext pt_start(void);
simcuda_counters_t pt_counters(void);
/* Non-zero if fn lies in libgpuarena.so; *name (optional) gets its symbol name. */
int pt_in_shim(void *fn, const char **name);
/* Runs fn in a child process with stderr captured into buf; returns the child's exit status. */
int pt_run_child(void (*fn)(void *), void *arg, char *buf, size_t len);

/* A fresh folder (dir: a mkdtemp template) holding a copy of src named name; copy gets its path.
 * src NULL: the simulated driver's file. */
void pt_copy_lib(const char *src, char *dir, const char *name, char *copy, size_t len);
/* Removes what pt_copy_lib made. */
void pt_copy_lib_remove(char *dir, char *copy);

/* Loads the JSON file at path as d and evaluates a Python expression on it: 0 when true. */
int pt_json_check(const char *path, const char *expr);
/* A forked child's one-byte report to its parent (ok: 'y' or what it says) down fd, then the child
 * holds what it allocated until it is killed (the group, NVML and OOM tests read the figures
 * meanwhile); and the parent's read of it. */
__attribute__((noreturn)) void pt_child_report_and_hold(int fd, char ok);
char pt_child_report_read(int fd);

TCase *pt_tcase_interpose(void);
TCase *pt_tcase_runtime(void);
TCase *pt_tcase_modes(void);
TCase *pt_tcase_cap(void);
TCase *pt_tcase_errors(void);
TCase *pt_tcase_teardown(void);
TCase *pt_tcase_reports(void);
TCase *pt_tcase_oom(void);
TCase *pt_tcase_files(void);
TCase *pt_tcase_vmm(void);
TCase *pt_tcase_vmm_hostile(void);
TCase *pt_tcase_vmm_outside(void);
TCase *pt_tcase_hardening(void);
TCase *pt_tcase_group(void);
TCase *pt_tcase_stream(void);
TCase *pt_tcase_nvml(void);
TCase *pt_tcase_mempool(void);
TCase *pt_tcase_v1(void);
TCase *pt_tcase_capture(void);
TCase *pt_tcase_hostile(void);
TCase *pt_tcase_outside3(void); /* t_outside3.c */
TCase *pt_tcase_outside4(void); /* t_outside4.c */
TCase *pt_tcase_hardening3(void);
TCase *pt_tcase_stream_outside(void);
TCase *pt_tcase_hostile2(void); /* t_hostile2.c */
TCase *pt_tcase_outside116(void); /* t_outside116.c */
TCase *pt_tcase_outside118(void); /* t_outside118.c */
TCase *pt_tcase_stream_kernelctx(void); /* t_stream_kernelctx.c */
TCase *pt_tcase_group_outside122(void); /* t_group_outside122.c */
TCase *pt_tcase_outside124(void); /* t_outside124.c */
TCase *pt_tcase_trace_race(void); /* t_trace_race.c */
TCase *pt_tcase_outside123(void); /* t_outside123.c */
TCase *pt_tcase_recheck126(void); /* t_recheck126.c */
TCase *pt_tcase_outside127(void); /* t_outside127.c */
TCase *pt_tcase_outside128(void); /* t_outside128.c */
TCase *pt_tcase_outside130(void); /* t_outside130.c */
TCase *pt_tcase_outside132(void); /* t_outside132.c */
TCase *pt_tcase_outside133(void); /* t_outside133.c */
TCase *pt_tcase_outside135(void); /* t_outside135.c */
TCase *pt_tcase_outside144(void); /* t_outside144.c */

/* Tests a case's file leaves to a second file (added to that case, under its name). */
void pt_teardown_edges_add(TCase *tc); /* t_teardown_edges.c, to "teardown" */
void pt_vmm_contexts_add(TCase *tc);   /* t_vmm_contexts.c, to "vmm" */
void pt_vmm_pending_add(TCase *tc);    /* t_vmm_pending.c, to "vmm" */

#endif
