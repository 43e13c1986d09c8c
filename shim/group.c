/* group.c: the group ledger behind GPUARENA_GROUP (ga_group.h): its mutex, its slots and the
 * members' accounting (commits, figures, reading a ledger without joining). Joining a ledger
 * (making, mapping, checking it), moving to a new one when it was removed, and leaving it (the
 * exit's wait for members still in theirs) are in group_join.c; what it reads from the host
 * (names, paths, /proc, the device plugins' CUDA_DEVICE_MEMORY_LIMIT[_i]) is in group_host.c.
 *
 * One file per (user, group, device) in /dev/shm, mapped shared by every member; its bytes are
 * group_layout.h's. Why a robust mutex and not a lock-free total: the check "total + bytes <= cap"
 * and the reclaiming of dead members' slots must see one consistent set of slots, and a member may
 * die anywhere, lock held included. A robust process-shared mutex hands the next locker EOWNERDEAD
 * instead of a deadlock; every change made under it is a single store (a slot becomes live only by
 * its last store), so the ledger is consistent whatever point the dead owner reached, and
 * pthread_mutex_consistent is all the repair needed.
 *
 * Why the total can never pass the cap: a slot's committed bytes grow only inside the mutex, by
 * ga_group_commit, right after it summed every live slot. Outside the mutex they can only shrink
 * (ga_group_uncommit), and slots become live (at zero) or free only inside it. So the sum read
 * under the mutex is at least the true total at the moment of the add, and sum + bytes <= cap
 * bounds the new total. Threads of one process and processes are alike here.
 *
 * A member is dead when /proc/<pid>/stat is gone, names a zombie with no thread left running
 * (one whose main thread ended while others run holds its memory), or gives another start time
 * (field 22, proc(5)): a pid reused by a new process has a later start time, so it is never
 * mistaken for the member; or when /proc/<pid>/exe names another program file than the one that
 * joined (an exec, whose memory went with it). A member from another pid namespace (a container sharing /dev/shm but
 * not pids) cannot be judged from here and counts as alive.
 */
#define _GNU_SOURCE
#include "ga_group.h"
#include "group_host.h"
#include "group_internal.h"
#include "group_layout.h"
#include "../allocator/ga_size.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- processes ---- */

/* Whether a live slot's process still runs. Another pid namespace's member: assumed alive. */
static int ga_slot_alive(const ga_group_t *g, const ga_ledger_slot_t *s)
{
    if (s->pidns && g->pidns && s->pidns != g->pidns)
        return 1;
    uint64_t start = ga_proc_start((pid_t)s->pid);
    if (start == 0 || start != s->start)
        return 0;
    /* The same process, but another program since an exec (pid and start time stay): the image
     * that joined is gone, and its device memory with it. Its share stayed until the process
     * exited, where the new program never joins (a launcher that execs a program without CUDA):
     * 600 MiB of a 1 GiB cap refused to another member while `sleep` ran (an outside check,
     * 2026-12-07). An exec of the same program file is not seen here; if it joins, its join
     * frees the slot (ga_free_pre_exec). Unreadable (another user's): alive. */
    uint64_t dev, ino;
    return !s->exe_ino || !ga_proc_exe((pid_t)s->pid, &dev, &ino) ||
           (dev == s->exe_dev && ino == s->exe_ino);
}

/* ---- the mutex ---- */

/* The robust mutex's futex word as glibc keeps it (its first int): the owner's thread id, and the
 * kernel's bits for "waiters" and "owner died" (futex(2), robust futexes). */
#define GA_FUTEX_WAITERS 0x80000000u
#define GA_FUTEX_OWNER_DIED 0x40000000u
#define GA_FUTEX_TID 0x3fffffffu
#define GA_LOCK_STALE_SLICES 10 /* 1 s of one unchanged word held by a thread gone: taken over */
#define GA_LOCK_SAY_SLICES 30   /* 3 s: said once, with what to do */

/* Whether a live slot of the ledger is of another pid namespace than `ns` (thread ids there are
 * not ours to judge). Read without the mutex: a hint, the slots' states are single stores. */
static int ga_foreign_member(const ga_ledger_t *l, uint64_t ns)
{
    uint32_t hwm = LD(&l->hwm);
    for (uint32_t i = 0; i < hwm && i < GA_GROUP_SLOTS; i++) {
        const ga_ledger_slot_t *s = &l->slots[i];
        if (LD(&s->state) == GA_SLOT_LIVE && s->pidns && ns && s->pidns != ns)
            return 1;
    }
    return !ns;
}

/* A slice of ga_lock timed out: the mutex is held. The kernel marks a robust mutex "owner died"
 * when its owner exits, but only then: a ledger whose word still names a thread that is gone (a
 * machine that crashed with a member inside the lock, a ledger kept on disk through GPUARENA_GROUP_DIR
 * and used after a reboot, a damaged or copied file) waited for ever, every member hanging in its
 * next allocation without a word (an outside check, 2026-12-07). Such a word, unchanged for
 * GA_LOCK_STALE_SLICES slices, is marked as the kernel marks it, so the next lock returns
 * EOWNERDEAD and the ledger is used as after any member's death; never when a live member is of
 * another pid namespace, whose thread ids say nothing here. A lock held for longer by a thread
 * that runs (a stopped process, a debugger) is said once. seen/same: the word last seen and for
 * how many slices; slices: how many timed out. */
static void ga_lock_stalled(ga_ledger_t *l, uint32_t *seen, unsigned *same, unsigned slices)
{
#ifdef __GLIBC__
    uint32_t *word = (uint32_t *)(void *)&l->lock.__data.__lock;
    uint32_t v = LD(word);
    *same = v == *seen ? *same + 1 : 0;
    *seen = v;
    pid_t tid = (pid_t)(v & GA_FUTEX_TID);
    int gone = v != 0 && !(v & GA_FUTEX_OWNER_DIED) && (tid == 0 || (kill(tid, 0) != 0 && errno == ESRCH));
    uint64_t ns = ga_pidns("/proc/self/ns/pid");
    if (gone && *same >= GA_LOCK_STALE_SLICES && !ga_foreign_member(l, ns)) {
        uint32_t want = (v & GA_FUTEX_WAITERS) | GA_FUTEX_OWNER_DIED;
        if (__atomic_compare_exchange_n(word, &v, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0); /* shared: no PRIVATE flag */
        return;
    }
#else
    uint32_t v = 0;
    pid_t tid = 0;
    int gone = 0;
    (void)seen;
    (void)same;
#endif
    if (slices != GA_LOCK_SAY_SLICES)
        return;
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", l->uuid[i]);
    fprintf(stderr, "gpuarena: group '%.64s': this process (pid %d) has waited %d s for the lock of "
            "the group's ledger (gpuarena-%u-%.64s-%s in GPUARENA_GROUP_DIR, default /dev/shm), "
            "held by thread %d%s: if that process is stopped, resume it (kill -CONT); if no member "
            "of the group runs any more, remove the ledger file (this process keeps waiting)\n", l->name,
            (int)getpid(), GA_LOCK_SAY_SLICES / 10, (unsigned)l->uid, l->name, hex, (int)tid,
            gone ? ", which does not run in this pid namespace (a member of another one, or a "
            "ledger kept from before a reboot)" : v ? "" : " (unknown)");
}

/* Taken in slices of 100 ms: a waiter that misses its wake-up looks at the lock again then instead
 * of sleeping for ever. Seen once (2026-12-06, a clean-clone CI run): test/group's stress run
 * stalled for 150 s with the mutex free and its waiters asleep, until a debugger's attach woke
 * them; the cause (robust process-shared futexes, threads of several processes) was not found, so
 * a lost wake-up now costs one slice. Each slice that times out looks at the holder
 * (ga_lock_stalled). */
int ga_lock(ga_ledger_t *l)
{
    int rc;
    uint32_t seen = 0;
    unsigned same = 0, slices = 0;
    do {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 100000000;
        if (t.tv_nsec >= 1000000000) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000;
        }
        rc = pthread_mutex_timedlock(&l->lock, &t);
        if (rc == ETIMEDOUT)
            ga_lock_stalled(l, &seen, &same, ++slices);
    } while (rc == ETIMEDOUT);
    if (rc == EOWNERDEAD)
        pthread_mutex_consistent(&l->lock); /* every change under it is one store: nothing to undo */
    if (rc == 0 || rc == EOWNERDEAD)
        return 0;
    /* Not taken (EINVAL: the mutex's bytes are no robust mutex's, ENOTRECOVERABLE...): the ledger
     * is damaged. Until an outside check (2026-12-07) the caller went on as if it held the lock,
     * and every member then summed and claimed slots unlocked, without a word. */
    static int told;
    if (!__atomic_exchange_n(&told, 1, __ATOMIC_ACQ_REL))
        fprintf(stderr, "gpuarena: group '%.64s': the lock of its ledger (gpuarena-%u-%.64s-... in "
                "GPUARENA_GROUP_DIR, default /dev/shm) cannot be taken (%s): the file is damaged; "
                "stop the group's processes and remove it (this process's allocations under the "
                "group are refused meanwhile)\n", l->name, (unsigned)l->uid, l->name, strerror(rc));
    return rc;
}

/* Whether the ledger's mutex is the robust, process-shared one ga_create_as made (glibc keeps the
 * kind in the mutex): a damaged or forged ledger's lock answered EINVAL at every lock, or was a
 * plain mutex that a member killed inside it held for ever. */
int ga_lock_sound(const ga_ledger_t *l)
{
#ifdef __GLIBC__
    pthread_mutex_t m;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&m, &a);
    pthread_mutexattr_destroy(&a);
    int same = LD(&l->lock.__data.__kind) == m.__data.__kind;
    pthread_mutex_destroy(&m);
    return same;
#else
    (void)l;
    return 1;
#endif
}

void ga_unlock(ga_ledger_t *l)
{
    pthread_mutex_unlock(&l->lock);
}

/* ---- slots (under the mutex) ---- */

/* Saturating: a slot's count damaged to near 2^64 (a stray write, a forged file) wrapped the sum
 * past zero, and a commit beside it was granted above the cap (an outside check, 2026-12-07). */
static uint64_t ga_sum(const ga_ledger_t *l)
{
    uint64_t sum = 0;
    uint32_t hwm = l->hwm;
    for (uint32_t i = 0; i < hwm && i < GA_GROUP_SLOTS; i++)
        if (LD(&l->slots[i].state) == GA_SLOT_LIVE) {
            uint64_t c = LD(&l->slots[i].committed);
            sum = c > UINT64_MAX - sum ? UINT64_MAX : sum + c;
        }
    return sum;
}

void ga_free_slot(ga_ledger_slot_t *s)
{
    ST(&s->state, GA_SLOT_FREE);
    ST(&s->committed, 0);
}

/* Frees the slots of dead members; returns how many members remain. */
unsigned ga_reclaim(ga_group_t *g)
{
    unsigned live = 0;
    for (uint32_t i = 0; i < g->l->hwm && i < GA_GROUP_SLOTS; i++) {
        ga_ledger_slot_t *s = &g->l->slots[i];
        if (LD(&s->state) != GA_SLOT_LIVE)
            continue;
        if (s == g->slot || ga_slot_alive(g, s))
            live++;
        else
            ga_free_slot(s);
    }
    return live;
}

/* Takes the lowest free slot for the calling process, holding `carry` bytes (a share brought from a
 * removed ledger, else 0). NULL when the group is full. */
ga_ledger_slot_t *ga_claim(ga_group_t *g, uint64_t carry)
{
    ga_ledger_t *l = g->l;
    for (uint32_t i = 0; i < GA_GROUP_SLOTS; i++) {
        ga_ledger_slot_t *s = &l->slots[i];
        if (LD(&s->state) != GA_SLOT_FREE)
            continue;
        if (i + 1 > l->hwm)
            l->hwm = i + 1;
        memset(s, 0, sizeof *s);
        s->pid = (uint32_t)getpid();
        s->start = ga_proc_start(getpid());
        s->pidns = g->pidns;
        s->image = ga_image_id();
        if (!ga_proc_exe(0, &s->exe_dev, &s->exe_ino))
            s->exe_dev = s->exe_ino = 0;
        s->committed = carry;
        s->committed_peak = carry;
        ST(&s->state, GA_SLOT_LIVE); /* last: a member dying before it leaves the slot free */
        return s;
    }
    return NULL;
}

/* ---- the member's operations ---- */

/* Under the mutex, a process's first commit (a member opened unjoined, a forked child): a slot of
 * its own, dead members' freed first. The cap is settled as a join settles it: the group's stays
 * while it has live members, and this process, which held nothing until now, is refused if it asks
 * for another (said once: the ledger's members may all have left since the open, and a newcomer
 * set its own cap); with no live member the group takes this process's. 1 with g->slot set. */
static int ga_first_claim(ga_group_t *g, ga_ledger_t *l)
{
    unsigned live = ga_reclaim(g);
    if (g->cap && l->cap != g->cap) {
        if (live > 0) {
            if (!LD(&g->clash))
                fprintf(stderr, "gpuarena: group '%s' runs with a cap of %" PRIu64 " bytes on this "
                        "device and this process asks for %" PRIu64 " bytes: give every member "
                        "the same cap (this process's comes from %s; the cap is fixed while the "
                        "group has members); this process's allocations on the device are "
                        "refused\n", l->name, l->cap, g->cap,
                        g->cap_var ? g->cap_var : "GPUARENA_LIMIT");
            ST(&g->clash, 1);
            return 0;
        }
        l->cap = g->cap;
    }
    ga_ledger_slot_t *mine = ga_claim(g, 0);
    if (mine)
        ST(&g->slot, mine);
    ST(&g->full, mine == NULL);
    return mine != NULL;
}

/* force: the bytes are held already (ga_group_hold), so they go in whatever the cap says. */
static int ga_group_add(ga_group_t *g, uint64_t bytes, int force)
{
    if (bytes == 0)
        return 1;
    for (;;) {
        ga_ledger_t *l = LD(&g->l);
        if (ga_lock(l) != 0) { /* damaged (said): held bytes are counted, nothing new granted */
            if (force && LD(&g->slot))
                __atomic_add_fetch(&LD(&g->slot)->committed, bytes, __ATOMIC_ACQ_REL);
            ST(&g->broken, 1);
            return force;
        }
        if (LD(&g->l) != l) { /* another thread moved us to the group's new ledger meanwhile */
            ga_unlock(l);
            continue;
        }
        if (LD(&g->left)) { /* the process is leaving: its share went already, its own cap holds */
            ga_unlock(l);
            return 1;
        }
        if (!ga_still_there(g) && !ga_move(g)) {
            ga_unlock(l);
            ST(&g->broken, 1);
            return 0;
        }
        ST(&g->broken, 0);
        if (LD(&g->l) != l) { /* moved just now: commit in the new one */
            ga_unlock(l);
            continue;
        }
        if (!g->slot && !ga_first_claim(g, l)) {
            ga_unlock(l);
            return 0; /* the group is full (ga_group_member says so), or runs with another cap */
        }
        uint64_t sum = ga_sum(l), cap = l->cap;
        if (bytes > cap || sum > cap - bytes) {
            ga_reclaim(g); /* the latest moment: before saying no */
            sum = ga_sum(l);
        }
        int ok = force || (bytes <= cap && sum <= cap - bytes);
        if (ok) {
            uint64_t now = __atomic_add_fetch(&g->slot->committed, bytes, __ATOMIC_ACQ_REL);
            if (now > LD(&g->slot->committed_peak))
                ST(&g->slot->committed_peak, now);
        }
        ga_unlock(l);
        return ok;
    }
}

int ga_group_commit(ga_group_t *g, uint64_t bytes)
{
    return ga_group_add(g, bytes, 0);
}

void ga_group_hold(ga_group_t *g, uint64_t bytes)
{
    ga_group_add(g, bytes, 1);
}

void ga_group_uncommit(ga_group_t *g, uint64_t bytes)
{
    ga_ledger_slot_t *s = LD(&g->slot);
    if (!s)
        return;
    uint64_t cur = LD(&s->committed), next;
    do {
        next = cur >= bytes ? cur - bytes : 0;
    } while (!__atomic_compare_exchange_n(&s->committed, &cur, next, 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_ACQUIRE));
}

uint64_t ga_group_used(ga_group_t *g)
{
    for (;;) {
        ga_ledger_t *l = LD(&g->l);
        if (ga_lock(l) != 0)
            return ga_sum(l); /* damaged (said): the slots as they are (commits are refused) */
        if (LD(&g->l) != l) {
            ga_unlock(l);
            continue;
        }
        /* Removed since this process mapped it (its last member left, a cleanup): the group is
         * the ledger the path names now, joined as a commit joins it. Summing the removed one told
         * a process that had not allocated yet the whole cap free beside the new ledger's members
         * (an outside check, 2026-12-07). */
        if (!LD(&g->left) && !ga_still_there(g)) {
            int moved = ga_move(g);
            ST(&g->broken, !moved);
            if (moved) {
                ga_unlock(l);
                continue;
            }
        }
        ga_reclaim(g);
        uint64_t sum = ga_sum(l);
        ga_unlock(l);
        return sum;
    }
}

uint64_t ga_group_cap(const ga_group_t *g)
{
    return LD(&LD(&g->l)->cap);
}

uint64_t ga_group_mine(const ga_group_t *g)
{
    ga_ledger_slot_t *s = LD(&g->slot);
    return s ? LD(&s->committed) : 0;
}

void ga_group_set_figures(ga_group_t *g, uint64_t in_use, uint64_t reserved, uint64_t peak,
                          const char *mode)
{
    ga_ledger_slot_t *s = LD(&g->slot);
    if (!s)
        return;
    ST(&s->in_use, in_use);
    ST(&s->reserved, reserved);
    /* The peak of what was written as reserved: the process's level peak may lag the figure a
     * commit writes (the pool raises it after the driver call), which showed a peak of 0 beside
     * 768 MiB reserved in `gpuarena top`; and it never goes down. */
    uint64_t want = peak > reserved ? peak : reserved, had = LD(&s->peak);
    while (want > had && !__atomic_compare_exchange_n(&s->peak, &had, want, 1, __ATOMIC_RELEASE,
                                                      __ATOMIC_RELAXED))
        ;
    if (mode) {
        /* Two atomic words, so concurrent callers never tear each other's name mid-byte. */
        uint64_t w[2] = {0, 0};
        memcpy(w, mode, strnlen(mode, 15));
        uint64_t *dst = (uint64_t *)(void *)s->mode;
        ST(&dst[0], w[0]);
        ST(&dst[1], w[1]);
    }
}

int ga_group_fork_child(ga_group_t *g)
{
    /* The parent's slot stays the parent's: nothing the child does from here (its copy of the
     * parent's pools given up, its own allocations) may touch it. A slot of its own is taken at
     * its first commit, so children that never allocate (data-loader workers) take none. */
    g->slot = NULL;
    g->clash = 0;
    g->full = 0;
    g->pidns = ga_pidns("/proc/self/ns/pid");
    return 1;
}

int ga_group_member(const ga_group_t *g)
{
    /* after a close, or a clash of caps (said), no refusal is for fullness */
    return LD(&g->left) || LD(&g->slot) != NULL || LD(&g->clash);
}

int ga_group_broken(const ga_group_t *g)
{
    return LD(&g->broken);
}

int ga_group_clashes(const ga_group_t *g, uint64_t group_used)
{
    const ga_ledger_t *l = LD(&g->l);
    return !LD(&g->slot) && !LD(&g->left) && g->cap && LD(&l->cap) != g->cap &&
           (group_used > 0 || LD(&g->clash));
}

int ga_group_full(const ga_group_t *g)
{
    return !ga_group_member(g) && LD(&g->full);
}

/* ---- reading without joining ---- */

int ga_group_list(const char *dir, const char *name, const uint8_t uuid[16], ga_group_member_t *out,
                  int max)
{
    return ga_group_peek(dir, name, uuid, out, max, NULL);
}

int ga_group_peek(const char *dir, const char *name, const uint8_t uuid[16], ga_group_member_t *out,
                  int max, uint64_t *cap)
{
    char path[512];
    if (!ga_group_name_ok(name, NULL, 0) || ga_group_path(dir, name, uuid, path, sizeof path) != 0)
        return -1;
    /* As ga_map and `gpuarena top`: a FIFO planted at the path must not hang NVML's caller, and
     * only a regular file of this user, mode 0600, of the ledger's size is believed. */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() ||
        (st.st_mode & 077) || st.st_size != GA_LEDGER_SIZE) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    const ga_ledger_t *l = mmap(NULL, GA_LEDGER_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (l == MAP_FAILED)
        return -1;
    int n = -1;
    if (!memcmp(l->magic, GA_LEDGER_MAGIC, sizeof GA_LEDGER_MAGIC) && l->version == GA_GROUP_VERSION) {
        ga_group_t me = {.pidns = ga_pidns("/proc/self/ns/pid")};
        n = 0;
        if (cap)
            *cap = LD(&l->cap);
        for (uint32_t i = 0; i < LD(&l->hwm) && i < GA_GROUP_SLOTS; i++) {
            const ga_ledger_slot_t *s = &l->slots[i];
            if (LD(&s->state) != GA_SLOT_LIVE || !ga_slot_alive(&me, s))
                continue;
            if (n < max)
                out[n] = (ga_group_member_t){s->pid, LD(&s->committed)};
            n++;
        }
    }
    munmap((void *)l, GA_LEDGER_SIZE);
    return n;
}
