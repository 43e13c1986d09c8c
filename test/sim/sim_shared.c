/* simcuda cross-process device accounting (SIMCUDA_SHARED): not built yet; every function is the
 * single-process answer. */
#define _GNU_SOURCE
#include "sim_internal.h"

int sim_shared_on(void)
{
    return 0;
}

int sim_shared_open(const char *name)
{
    (void)name;
    return -1;
}

unsigned long long sim_shared_used_locked(int dev)
{
    return sim_dev_in_use_locked(dev) + sim_ctx_overhead_locked(dev);
}

int sim_shared_charge_locked(int dev, unsigned long long bytes, unsigned long long overhead)
{
    return sim_dev_fits_locked(dev, bytes + overhead) ? 0 : -1;
}

void sim_shared_sync_locked(void)
{
}
