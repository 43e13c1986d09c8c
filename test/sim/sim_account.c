/* simcuda device accounting: how many bytes each device has handed out, and the one check every
 * kind of device memory passes before it is taken (cuMemAlloc and friends, managed and async
 * memory, cuMemCreate handles, the overhead of a context).
 *
 * Keeping the check in one place is what lets every kind count against the same device total, and
 * lets the cross-process ledger (SIMCUDA_SHARED, sim_shared.c) see each charge and release. All
 * functions here run under sim_lock.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

static unsigned long long dev_in_use[SIM_MAX_DEVICES]; /* this process's device bytes */
static unsigned long long dev_peak[SIM_MAX_DEVICES];
static unsigned long long next_id = 1;

unsigned long long sim_dev_in_use_locked(int dev)
{
    return dev_in_use[dev];
}

unsigned long long sim_dev_peak_locked(int dev)
{
    return dev_peak[dev];
}

unsigned long long sim_next_id_locked(void)
{
    return next_id++;
}

/* What the device has handed out, context overheads included: this process's share, or every
 * process's when the ledger is shared (dead processes' shares are given back first). */
unsigned long long sim_dev_used_locked(int dev)
{
    if (sim_shared_on())
        return sim_shared_used_locked(dev);
    return dev_in_use[dev] + sim_ctx_overhead_locked(dev);
}

int sim_dev_fits_locked(int dev, unsigned long long size)
{
    unsigned long long used = sim_dev_used_locked(dev);
    return used <= sim_cfg.total_mem && size <= sim_cfg.total_mem - used;
}

/* The overhead of one more live context on dev, checked (and published) like memory; the caller
 * then marks the context alive, which is what sim_ctx_overhead_locked counts. */
int sim_ctx_charge_locked(int dev)
{
    if (sim_shared_on())
        return sim_shared_charge_locked(dev, 0, sim_cfg.ctx_overhead);
    return sim_dev_fits_locked(dev, sim_cfg.ctx_overhead) ? 0 : -1;
}

int sim_charge_locked(int dev, unsigned long long size)
{
    if (sim_shared_on() ? sim_shared_charge_locked(dev, size, 0) != 0 : !sim_dev_fits_locked(dev, size))
        return -1;
    dev_in_use[dev] += size;
    if (dev_in_use[dev] > dev_peak[dev])
        dev_peak[dev] = dev_in_use[dev];
    sim_bytes_add_locked(size);
    return 0;
}

/* Bytes a device's memory pool keeps after the allocations that used them went (sim_memory.c):
 * device memory the process holds, in no allocation. Taken without a check (the bytes were
 * charged to the allocation they came from) and given back without one. */
void sim_pool_hold_locked(int dev, unsigned long long n)
{
    dev_in_use[dev] += n;
    if (dev_in_use[dev] > dev_peak[dev])
        dev_peak[dev] = dev_in_use[dev];
    sim_counters.bytes_in_use += n;
    if (sim_counters.bytes_in_use > sim_counters.peak_bytes_in_use)
        sim_counters.peak_bytes_in_use = sim_counters.bytes_in_use;
    sim_shared_sync_locked();
}

void sim_pool_drop_locked(int dev, unsigned long long n)
{
    dev_in_use[dev] -= n;
    sim_counters.bytes_in_use -= n;
    sim_shared_sync_locked();
}

void sim_uncharge_locked(int dev, unsigned long long size)
{
    dev_in_use[dev] -= size;
    sim_bytes_sub_locked(size);
    sim_shared_sync_locked();
}
