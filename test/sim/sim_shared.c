/* simcuda device memory counted across processes, as on a real GPU (SIMCUDA_SHARED=NAME).
 *
 * Every process started with the same NAME maps one segment, /dev/shm/simcuda-NAME, holding the
 * device configuration, a process-shared robust mutex, the exact peak of each device, and one slot
 * per process: its pid, its start time (field 22 of /proc/PID/stat) and its bytes and context
 * overheads on each device. A process's own slot mirrors its local accounting (sim_account.c) and
 * only that process writes it; a charge checks the sum of every live slot against the device total
 * and takes the bytes under the segment's lock, so no interleaving of processes can push a device
 * past its total, and the peak is updated in the same critical section, so it is exact.
 *
 * A slot whose process is gone is given back the next time any process looks (a charge, a query,
 * cuMemGetInfo), as the real driver frees a dead process's memory. "Gone" is decided by pid and
 * start time together: a pid reused by a new process has another start time, so it never inherits
 * the dead one's slot; a zombie holds nothing either. The robust mutex means a process killed while
 * holding the lock blocks no one: the next locker is told (EOWNERDEAD), marks it consistent, and the
 * dead holder's half-written slot is reaped with the rest of it.
 *
 * Calls take the segment's lock with sim_lock held (only setup, inside the one-time configuration,
 * and the exit handler take it alone), and fork holds sim_lock, so a child never inherits it locked. A forked child is a new process: it takes its own slot, starting from the
 * device memory it inherited. Without SIMCUDA_SHARED none of this runs.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SIM_SEG_MAGIC 0x53494d4355444131ULL /* "SIMCUDA1" */
#define SIM_SEG_VERSION 1
#define SIM_SEG_SLOTS 64

typedef struct sim_slot {
    int pid;                                      /* 0: free */
    unsigned long long start;                     /* /proc/PID/stat starttime */
    unsigned long long bytes[SIM_MAX_DEVICES];    /* its device memory */
    unsigned long long overhead[SIM_MAX_DEVICES]; /* its contexts' overhead */
} sim_slot_t;

typedef struct sim_segment {
    unsigned long long magic;
    unsigned version;
    int ready;                        /* 0: new file, 1: being set up, 2: ready */
    int devices;
    unsigned long long total;
    pthread_mutex_t lock;             /* process-shared, robust */
    unsigned long long peak[SIM_MAX_DEVICES];
    sim_slot_t slots[SIM_SEG_SLOTS];
} sim_segment_t;

static sim_segment_t *seg;
static char seg_name[256];
static int my_slot = -1;
static pid_t my_pid;
static unsigned long long my_start;

int sim_shared_on(void)
{
    return seg != NULL;
}

/* ---- processes ---- */

/* The start time of a live process; -1 when pid is gone or a zombie (which holds no memory). */
static int sim_proc_start(pid_t pid, unsigned long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
        return -1;
    for (int field = 3; field <= 22 && p; field++) /* to the space before field 22, starttime */
        p = strchr(p + 1, ' ');
    if (!p)
        return -1;
    *start = strtoull(p + 1, NULL, 10);
    return 0;
}

static void sim_seg_lock(void)
{
    if (pthread_mutex_lock(&seg->lock) == EOWNERDEAD)
        pthread_mutex_consistent(&seg->lock); /* its holder died: its slot is reaped below */
}

static void sim_seg_unlock(void)
{
    pthread_mutex_unlock(&seg->lock);
}

/* Frees the slot of every process that is gone (or whose pid now names another process). */
static void sim_reap_locked(void)
{
    for (int i = 0; i < SIM_SEG_SLOTS; i++) {
        sim_slot_t *s = &seg->slots[i];
        unsigned long long start;
        if (s->pid && (sim_proc_start(s->pid, &start) != 0 || start != s->start))
            memset(s, 0, sizeof *s);
    }
}

static void sim_publish(sim_slot_t *s)
{
    for (int d = 0; d < sim_cfg.devices; d++) {
        s->bytes[d] = sim_dev_in_use_locked(d);
        s->overhead[d] = sim_ctx_overhead_locked(d);
    }
}

/* This process's slot (segment locked); with claim, taken on first use and again after fork (a new
 * process starts from the device memory it holds). NULL when it has none, or every slot is taken
 * by a live process. Queries never claim, so a process that only looks takes no slot. */
static sim_slot_t *sim_my_slot_locked(int claim)
{
    pid_t pid = getpid();
    if (my_slot >= 0 && my_pid == pid && seg->slots[my_slot].pid == pid &&
        seg->slots[my_slot].start == my_start)
        return &seg->slots[my_slot];
    if (!claim)
        return NULL;
    if (my_pid != pid) {
        my_pid = pid;
        if (sim_proc_start(pid, &my_start) != 0)
            my_start = 0;
    }
    sim_reap_locked();
    for (int i = 0; i < SIM_SEG_SLOTS; i++) {
        sim_slot_t *s = &seg->slots[i];
        if (s->pid == 0) {
            memset(s, 0, sizeof *s);
            s->pid = pid, s->start = my_start;
            sim_publish(s);
            my_slot = i;
            return s;
        }
    }
    static int told;
    if (!told++)
        fprintf(stderr, "gpuarena: simcuda: SIMCUDA_SHARED=%s has no free slot (%d live processes); "
                "device memory is refused until one ends\n", seg_name + 9, SIM_SEG_SLOTS);
    return NULL;
}

/* Sum over every live process on dev: allocations, and with_overhead their contexts too. */
static unsigned long long sim_sum_locked(int dev, int with_overhead)
{
    unsigned long long n = 0;
    for (int i = 0; i < SIM_SEG_SLOTS; i++)
        if (seg->slots[i].pid)
            n += seg->slots[i].bytes[dev] + (with_overhead ? seg->slots[i].overhead[dev] : 0);
    return n;
}

/* ---- what sim_account.c asks ---- */

unsigned long long sim_shared_used_locked(int dev)
{
    sim_seg_lock();
    sim_reap_locked();
    unsigned long long n = sim_sum_locked(dev, 1);
    if (!sim_my_slot_locked(0)) /* not counted above: count this process itself */
        n += sim_dev_in_use_locked(dev) + sim_ctx_overhead_locked(dev);
    sim_seg_unlock();
    return n;
}

int sim_shared_charge_locked(int dev, unsigned long long bytes, unsigned long long overhead)
{
    sim_seg_lock();
    sim_reap_locked();
    sim_slot_t *me = sim_my_slot_locked(1);
    unsigned long long used = sim_sum_locked(dev, 1), want = bytes + overhead;
    int ok = me && want >= bytes && used <= sim_cfg.total_mem && want <= sim_cfg.total_mem - used;
    if (ok) {
        me->bytes[dev] += bytes;
        me->overhead[dev] += overhead;
        unsigned long long all = sim_sum_locked(dev, 0);
        if (all > seg->peak[dev])
            seg->peak[dev] = all;
    }
    sim_seg_unlock();
    return ok ? 0 : -1;
}

void sim_shared_sync_locked(void)
{
    if (!seg)
        return;
    sim_seg_lock();
    sim_slot_t *me = sim_my_slot_locked(1);
    if (me)
        sim_publish(me);
    sim_seg_unlock();
}

/* A process that ends normally gives its slot back at once (without sim_lock: another thread may
 * be stopped holding it while the process exits). */
__attribute__((destructor)) static void sim_shared_leave(void)
{
    if (!seg)
        return;
    sim_seg_lock();
    if (my_slot >= 0 && my_pid == getpid() && seg->slots[my_slot].pid == my_pid)
        memset(&seg->slots[my_slot], 0, sizeof seg->slots[my_slot]);
    sim_seg_unlock();
}

/* ---- opening the segment ---- */

static int sim_name_ok(const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n <= 200 && strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                             "0123456789._-") == n && name[0] != '.';
}

/* The first opener sets the segment up; the others wait (a bounded while) until it has. */
static int sim_seg_setup(void)
{
    int fresh = 0;
    if (__atomic_compare_exchange_n(&seg->ready, &fresh, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        pthread_mutex_init(&seg->lock, &a);
        pthread_mutexattr_destroy(&a);
        seg->magic = SIM_SEG_MAGIC, seg->version = SIM_SEG_VERSION;
        seg->devices = sim_cfg.devices, seg->total = sim_cfg.total_mem;
        __atomic_store_n(&seg->ready, 2, __ATOMIC_RELEASE);
        return 0;
    }
    for (int i = 0; i < 2000 && __atomic_load_n(&seg->ready, __ATOMIC_ACQUIRE) != 2; i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    return __atomic_load_n(&seg->ready, __ATOMIC_ACQUIRE) == 2 && seg->magic == SIM_SEG_MAGIC &&
                   seg->version == SIM_SEG_VERSION
               ? 0
               : -1;
}

/* Every process of one NAME must see the same devices. A segment left by processes that are all
 * gone takes the new configuration; one in use by live processes with another is refused. */
static int sim_seg_agree(void)
{
    sim_seg_lock();
    sim_reap_locked();
    int live = 0;
    for (int i = 0; i < SIM_SEG_SLOTS; i++)
        live += seg->slots[i].pid != 0;
    int same = seg->devices == sim_cfg.devices && seg->total == sim_cfg.total_mem;
    if (!same && !live) {
        seg->devices = sim_cfg.devices, seg->total = sim_cfg.total_mem;
        memset(seg->peak, 0, sizeof seg->peak);
    }
    int devices = seg->devices;
    unsigned long long total = seg->total;
    sim_seg_unlock();
    if (same || !live)
        return 0;
    fprintf(stderr, "gpuarena: simcuda: SIMCUDA_SHARED=%s is in use by processes with SIMCUDA_DEVICES=%d "
            "SIMCUDA_TOTAL_MEM=%llu; use the same settings or another name\n", seg_name + 9, devices, total);
    return -1;
}

int sim_shared_open(const char *name)
{
    if (!sim_name_ok(name)) {
        fprintf(stderr, "gpuarena: simcuda: SIMCUDA_SHARED='%s' is not a name (letters, digits, '.', '_', "
                "'-'; at most 200; try SIMCUDA_SHARED=gpu0)\n", name);
        return -1;
    }
    snprintf(seg_name, sizeof seg_name, "/simcuda-%s", name);
    int fd = shm_open(seg_name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    struct stat st;
    int ok = fd >= 0 && fstat(fd, &st) == 0 &&
             ((size_t)st.st_size >= sizeof *seg || ftruncate(fd, sizeof *seg) == 0);
    void *p = ok ? mmap(NULL, sizeof *seg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    int err = errno;
    if (fd >= 0)
        close(fd);
    if (p == MAP_FAILED) {
        fprintf(stderr, "gpuarena: simcuda: SIMCUDA_SHARED=%s: cannot use /dev/shm%s: %s\n", name, seg_name,
                strerror(err));
        return -1;
    }
    seg = p;
    if (sim_seg_setup() != 0) {
        fprintf(stderr, "gpuarena: simcuda: /dev/shm%s was not made by this simulated driver (or its "
                "maker died setting it up); remove it or use another SIMCUDA_SHARED name\n", seg_name);
        munmap(p, sizeof *seg);
        seg = NULL;
        return -1;
    }
    return sim_seg_agree();
}

/* ---- the instrument API ---- */

unsigned long long simcuda_device_bytes_all(int dev)
{
    sim_setup();
    if (dev < 0 || dev >= sim_cfg.devices)
        return 0;
    pthread_mutex_lock(&sim_lock);
    unsigned long long n = sim_dev_in_use_locked(dev);
    if (seg) {
        sim_seg_lock();
        sim_reap_locked();
        n = sim_sum_locked(dev, 0) + (sim_my_slot_locked(0) ? 0 : n);
        sim_seg_unlock();
    }
    pthread_mutex_unlock(&sim_lock);
    return n;
}

unsigned long long simcuda_device_peak_all(int dev)
{
    sim_setup();
    if (dev < 0 || dev >= sim_cfg.devices)
        return 0;
    pthread_mutex_lock(&sim_lock);
    unsigned long long n = seg ? __atomic_load_n(&seg->peak[dev], __ATOMIC_RELAXED) : sim_dev_peak_locked(dev);
    pthread_mutex_unlock(&sim_lock);
    return n;
}

/* One entry for each process holding memory or a context on dev; returns how many there are. */
int simcuda_device_processes(int dev, simcuda_process_t *out, int max)
{
    sim_setup();
    if (dev < 0 || dev >= sim_cfg.devices || max < 0 || (max > 0 && !out))
        return -1;
    int n = 0;
    pthread_mutex_lock(&sim_lock);
    if (!seg) {
        simcuda_process_t self = {getpid(), 0, sim_dev_in_use_locked(dev), sim_ctx_overhead_locked(dev)};
        if (self.bytes || self.overhead) {
            sim_proc_start(self.pid, &self.start_time);
            if (max > 0)
                out[0] = self;
            n = 1;
        }
    } else {
        sim_seg_lock();
        sim_reap_locked();
        for (int i = 0; i < SIM_SEG_SLOTS; i++) {
            const sim_slot_t *s = &seg->slots[i];
            if (s->pid && (s->bytes[dev] || s->overhead[dev]) && n++ < max)
                out[n - 1] = (simcuda_process_t){s->pid, s->start, s->bytes[dev], s->overhead[dev]};
        }
        sim_seg_unlock();
    }
    pthread_mutex_unlock(&sim_lock);
    return n;
}

int simcuda_shared_inject(int pid, unsigned long long start_time, int dev, unsigned long long bytes)
{
    sim_setup();
    if (!seg || pid <= 0 || dev < 0 || dev >= sim_cfg.devices)
        return -1;
    int done = -1;
    pthread_mutex_lock(&sim_lock);
    sim_seg_lock();
    for (int i = 0; i < SIM_SEG_SLOTS && done; i++) {
        sim_slot_t *s = &seg->slots[i];
        if (s->pid == 0) {
            memset(s, 0, sizeof *s);
            s->pid = pid, s->start = start_time, s->bytes[dev] = bytes;
            done = 0;
        }
    }
    sim_seg_unlock();
    pthread_mutex_unlock(&sim_lock);
    return done;
}
