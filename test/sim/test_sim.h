/* test-sim: helpers shared by the files of the simulated driver's own test tier.
 *
 * The tier is one Check binary (test_sim.c holds the runner and the core tests); each test_sim_*.c
 * contributes one test case through a ts_tcase_* function declared here. Every test runs in its own
 * forked process, so it may set SIMCUDA_* variables before its first driver call.
 */
#ifndef TEST_SIM_H
#define TEST_SIM_H

#define _GNU_SOURCE
#include <check.h>
#include <cuda.h>

#include "simcuda.h"

#define CK(call) ck_assert_int_eq((call), CUDA_SUCCESS)
#define MiB (1024ULL * 1024ULL)

/* A consistent snapshot of the driver's counters. */
simcuda_counters_t ts_counters(void);
/* cuInit, then the primary context of device 0 made current; returns it. */
CUcontext ts_start(void);
/* The driver's exported function `name` (fails the test when it is missing). */
void *ts_sym(const char *name);

TCase *ts_tcase_fault(void);
TCase *ts_tcase_lean(void);
TCase *ts_tcase_vmm(void);
TCase *ts_tcase_shared(void);
TCase *ts_tcase_nvml(void);
TCase *ts_tcase_stream(void);
TCase *ts_tcase_pool(void);

/* The driver case's tests in test_sim_driver.c, added to it. */
void ts_driver_more_add(TCase *tc);

#endif
