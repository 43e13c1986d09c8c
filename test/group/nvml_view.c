/* A stand-in for the shim's ga_mem_view (ga_group.h), for nvml_test only: the view comes from
 * GA_TEST_VIEW="CAP USED" (bytes) for every device, or passes through when it is unset. The shim
 * proper defines the real one; this lets shim/nvml.c be tested on the simulated NVML alone. */
#include "ga_group.h"

#include <stdio.h>
#include <stdlib.h>

__attribute__((visibility("default"))) int ga_mem_view(const uint8_t uuid[16], uint64_t real_total, uint64_t *total,
                                                           uint64_t *used)
{
    (void)uuid, (void)real_total;
    const char *v = getenv("GA_TEST_VIEW");
    unsigned long long t, u;
    if (!v || sscanf(v, "%llu %llu", &t, &u) != 2)
        return 0;
    *total = t;
    *used = u;
    return 1;
}
