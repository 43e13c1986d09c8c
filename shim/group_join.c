/* group_join.c: joining and leaving a group ledger (group.c has its mutex, its slots and the
 * members' accounting; ga_group.h the interface). A ledger is made complete in a file with no name
 * yet and linked into place, so no process maps a half-made one; one found at the path is believed
 * only when it is a regular file of this user, mode 0600, of the ledger's size, format and keys.
 * A ledger removed under its members (a /dev/shm cleanup, systemd-logind's RemoveIPC) is left for
 * the one the path names now, with this process's share (ga_move, called by a commit in group.c).
 * At its exit the last member out removes the ledger, once the members still in their exit are
 * gone, so that nobody joining meanwhile is granted memory the driver still holds.
 */
#define _GNU_SOURCE
#include "ga_group.h"
#include "group_host.h"
#include "group_internal.h"
#include "group_layout.h"

#include <errno.h>
#include <poll.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- opening ---- */

/* How to fix a ledger mmap refused with errno e (the two "cannot map" messages said no fix until
 * 2026-12-07): a file system that cannot map files shared, or no address space left. */
static const char *ga_map_fix(int e)
{
    if (e == ENOMEM)
        return "the process is out of address space or of mappings (see `ulimit -v` and "
               "vm.max_map_count); raise the limits for this program";
    if (e == ENODEV || e == EINVAL || e == EOPNOTSUPP)
        return "its file system cannot map files shared (some network or FUSE mounts); set "
               "GPUARENA_GROUP_DIR to a folder on a local file system such as /dev/shm, the same "
               "for every member";
    return "set GPUARENA_GROUP_DIR to a folder on a local file system such as /dev/shm, the same "
           "for every member, and check the folder's permissions";
}

/* Gives a fresh ledger file real blocks, so a full folder (a container's 64 MiB /dev/shm filled by
 * other programs) is ENOSPC here and never a SIGBUS at the first touch of a page through the
 * mapping. A file system without fallocate gets the zeros written. 0, or an errno. */
static int ga_back_new(int fd)
{
    int rc;
    do
        rc = posix_fallocate(fd, 0, GA_LEDGER_SIZE);
    while (rc == EINTR);
    if (rc != EINVAL && rc != EOPNOTSUPP)
        return rc;
    static const char zeros[4096];
    for (off_t off = 0; off < GA_LEDGER_SIZE;) {
        size_t n = GA_LEDGER_SIZE - off < (off_t)sizeof zeros ? (size_t)(GA_LEDGER_SIZE - off) : sizeof zeros;
        ssize_t w = pwrite(fd, zeros, n, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : ENOSPC;
        off += w;
    }
    return 0;
}

/* The same for a ledger made by an older gpuarena (sparse: sized with ftruncate), at a join: its
 * slots past the first page may have no blocks yet. Mode 0 never changes the bytes; a file system
 * without fallocate is left as it is. 0, or an errno. */
static int ga_back_existing(int fd)
{
    int rc;
    do
        rc = fallocate(fd, 0, 0, GA_LEDGER_SIZE) == 0 ? 0 : errno;
    while (rc == EINTR);
    return rc == EOPNOTSUPP || rc == EINVAL || rc == ENOSYS ? 0 : rc;
}

/* Makes a complete ledger in a file with no name yet (O_TMPFILE) and links it into place, so no
 * process ever maps a half-made one, and a process killed while making it leaves nothing behind:
 * the temporary name it had before (".gpuarena-UID-new-XXXXXX") stayed in the folder for good when
 * the process died between making and removing it, 33 KiB of /dev/shm each time (an outside check,
 * 2026-12-07). A folder whose file system has no O_TMPFILE gets the named temporary as before.
 * 0: it is there now (ours or a racing creator's); -1 with a message. */
static int ga_create_as(const char *dir, const char *path, const char *name, const uint8_t uuid[16],
                        uint64_t cap, char *err, size_t errlen, int named)
{
    char tmp[600] = "";
    int fd = -1;
#ifdef O_TMPFILE
    if (!named)
        fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
    if (fd < 0) {
        snprintf(tmp, sizeof tmp, "%s/.gpuarena-%u-new-XXXXXX", dir, (unsigned)getuid());
        fd = mkostemp(tmp, O_CLOEXEC);
    }
    int e = fd < 0 ? errno : ftruncate(fd, GA_LEDGER_SIZE) != 0 ? errno : ga_back_new(fd);
    if (e) {
        const char *fix = e == ENOENT || e == ENOTDIR ? "create that folder, or set "
                          "GPUARENA_GROUP_DIR to one that exists"
                          : e == EACCES || e == EPERM || e == EROFS
                              ? "make it writable for this user, or set GPUARENA_GROUP_DIR to a "
                                "folder that is"
                              : "free space there, or set GPUARENA_GROUP_DIR to a folder with room";
        snprintf(err, errlen, "gpuarena: cannot create a group ledger in %s (%s): GPUARENA_GROUP "
                 "needs a writable %s with %d KiB free (%s; every member must name the same one)",
                 dir, strerror(e), dir, (GA_LEDGER_SIZE + 1023) / 1024, fix);
        if (fd >= 0) {
            if (tmp[0])
                unlink(tmp);
            close(fd);
        }
        return -1;
    }
    ga_ledger_t *l = mmap(NULL, GA_LEDGER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (l == MAP_FAILED) {
        int e = errno;
        snprintf(err, errlen, "gpuarena: cannot map a new group ledger in %s (%s): %s", dir,
                 strerror(e), ga_map_fix(e));
        if (tmp[0])
            unlink(tmp);
        close(fd);
        return -1;
    }
    memcpy(l->magic, GA_LEDGER_MAGIC, sizeof GA_LEDGER_MAGIC);
    l->version = GA_GROUP_VERSION;
    l->header_size = GA_LEDGER_HEADER;
    l->slot_size = GA_LEDGER_SLOT;
    l->nslots = GA_GROUP_SLOTS;
    l->uid = (uint32_t)getuid();
    l->cap = cap;
    memcpy(l->uuid, uuid, 16);
    snprintf(l->name, sizeof l->name, "%s", name);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&l->lock, &a);
    pthread_mutexattr_destroy(&a);
    munmap(l, GA_LEDGER_SIZE);
    fchmod(fd, 0600); /* whatever the umask: every member opens it for writing */
    int rc;
    if (tmp[0]) {
        rc = link(tmp, path);
        e = errno;
        unlink(tmp);
    } else { /* a file without a name is linked through its /proc entry (no privilege needed) */
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        rc = linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
        e = errno;
    }
    close(fd);
    /* The /proc entry is missing where /proc is not mounted (a chroot, a sandbox): the named
     * temporary then, as before O_TMPFILE (that said "a file system that has hard links" of one
     * that has them, and CUDA was not used: an outside check, 2026-12-07) */
    if (rc != 0 && e != EEXIST && !tmp[0])
        return ga_create_as(dir, path, name, uuid, cap, err, errlen, 1);
    if (rc != 0 && e != EEXIST) {
        snprintf(err, errlen, "gpuarena: cannot create the group ledger %s (%s): GPUARENA_GROUP_DIR "
                 "must be a folder on a file system that has hard links (a tmpfs such as /dev/shm, "
                 "ext4, xfs): set it to one (every member must name the same one)", path, strerror(e));
        return -1;
    }
    return 0;
}

static int ga_create(const char *dir, const char *path, const char *name, const uint8_t uuid[16],
                     uint64_t cap, char *err, size_t errlen)
{
    return ga_create_as(dir, path, name, uuid, cap, err, errlen, 0);
}

/* Why the thing at path is no ledger of ours, with what to do, in err. open_errno: open's error,
 * or 0 when it opened but is not a regular file of ours with mode 0600 and the ledger's size. */
static void ga_say_not_ledger(const char *path, int open_errno, char *err, size_t errlen)
{
    static const char *const fix = "set GPUARENA_GROUP_DIR to a folder of your own (mkdir -m 700; "
                                   "every member must name it) or use another GPUARENA_GROUP";
    struct stat st;
    if (lstat(path, &st) != 0) {
        snprintf(err, errlen, "gpuarena: cannot open the group ledger %s (%s): %s", path,
                 strerror(open_errno ? open_errno : errno), fix);
    } else if (st.st_uid != getuid()) {
        snprintf(err, errlen, "gpuarena: %s, this group's ledger path, is taken by a file of uid "
                 "%u, not of this user (uid %u): another user made it; %s, or ask uid %u or an "
                 "administrator to remove it", path, (unsigned)st.st_uid, (unsigned)getuid(), fix,
                 (unsigned)st.st_uid);
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "gpuarena: %s is %s, not a group ledger: remove it (a ledger is a "
                 "plain file gpuarena makes itself), or %s", path,
                 S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISDIR(st.st_mode) ? "a folder"
                 : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket", fix);
    } else if (S_ISREG(st.st_mode) && (open_errno == EACCES || open_errno == EROFS)) {
        /* This user's own file that it may not write (made read-only, a read-only mount): the
         * fix is the file's mode or the folder, not another folder of one's own, which the message
         * below said of a ledger in a folder that is already this user's (an outside check,
         * 2026-12-07) */
        snprintf(err, errlen, "gpuarena: the group ledger %s cannot be opened for writing (%s; "
                 "mode %04o, a ledger has 0600): %s", path, strerror(open_errno),
                 (unsigned)(st.st_mode & 07777),
                 open_errno == EROFS ? "its file system is read-only: set GPUARENA_GROUP_DIR to a "
                                       "writable folder (every member must name it)"
                                     : "make it writable again (chmod 600), or remove it once no "
                                       "member of the group runs");
    } else if ((st.st_mode & 077) || st.st_size != GA_LEDGER_SIZE) {
        snprintf(err, errlen, "gpuarena: %s is not a gpuarena group ledger of this user (mode %04o "
                 "and size %lld, a ledger has 0600 and %d bytes): remove it, or %s", path,
                 (unsigned)(st.st_mode & 07777), (long long)st.st_size, GA_LEDGER_SIZE, fix);
    } else {
        snprintf(err, errlen, "gpuarena: cannot open the group ledger %s (%s): %s", path,
                 strerror(open_errno ? open_errno : EINVAL), fix);
    }
}

/* Maps an existing ledger after checking that it is ours and of this format. NULL: *gone set when
 * it vanished (try again), else a message. *fd_out: the file, left open. */
static ga_ledger_t *ga_map(const char *path, const char *name, const uint8_t uuid[16], int *gone,
                           dev_t *dev, ino_t *ino, int *fd_out, char *err, size_t errlen)
{
    *gone = 0;
    /* O_NONBLOCK: a FIFO planted at the path must not stop us; only a regular file is believed. */
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        /* a folder on the way that is a file: the folder is missing, as ENOENT says (the
         * create path's message then says to create it) */
        *gone = errno == ENOENT || errno == ENOTDIR;
        if (!*gone)
            ga_say_not_ledger(path, errno, err, errlen);
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) ||
        st.st_size != GA_LEDGER_SIZE) {
        ga_say_not_ledger(path, 0, err, errlen);
        close(fd);
        return NULL;
    }
    int e = ga_back_existing(fd);
    if (e) {
        snprintf(err, errlen, "gpuarena: cannot give the group ledger %s its space (%s): free space "
                 "in its folder, or set GPUARENA_GROUP_DIR to a folder with room for every member",
                 path, strerror(e));
        close(fd);
        return NULL;
    }
    ga_ledger_t *l = mmap(NULL, GA_LEDGER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (l == MAP_FAILED) {
        int e = errno;
        snprintf(err, errlen, "gpuarena: cannot map the group ledger %s (%s): %s", path,
                 strerror(e), ga_map_fix(e));
        close(fd);
        return NULL;
    }
    *dev = st.st_dev;
    *ino = st.st_ino;
    const char *why = NULL;
    if (!memcmp(l->magic, GA_LEDGER_MAGIC, sizeof GA_LEDGER_MAGIC) && l->version != GA_GROUP_VERSION)
        snprintf(err, errlen, "gpuarena: %s is a group ledger of another gpuarena version (format "
                 "%u, this one reads %d): stop the group's processes and remove the file",
                 path, (unsigned)l->version, GA_GROUP_VERSION);
    else if (memcmp(l->magic, GA_LEDGER_MAGIC, sizeof GA_LEDGER_MAGIC) || l->header_size != GA_LEDGER_HEADER ||
             l->slot_size != GA_LEDGER_SLOT || l->nslots != GA_GROUP_SLOTS)
        why = "its header is not a ledger's";
    else if (memcmp(l->uuid, uuid, 16) || strncmp(l->name, name, sizeof l->name))
        why = "it names another group or device";
    else if (!ga_lock_sound(l))
        why = "its lock is not a ledger's";
    else {
        *fd_out = fd;
        return l;
    }
    if (why)
        snprintf(err, errlen, "gpuarena: %s is damaged or not a gpuarena group ledger (%s): stop "
                 "the group's processes and remove the file (or use another GPUARENA_GROUP)",
                 path, why);
    munmap(l, GA_LEDGER_SIZE);
    close(fd);
    return NULL;
}

/* At a join: frees the slots of this very process (pid, start time, pid namespace) made by the
 * program it was before an exec. That image's memory went with the exec; its slot would keep its
 * share until the process exits, and refuse the program it became. */
static void ga_free_pre_exec(ga_group_t *g)
{
    uint32_t pid = (uint32_t)getpid();
    uint64_t start = ga_proc_start(getpid()), image = ga_image_id();
    for (uint32_t i = 0; i < g->l->hwm && i < GA_GROUP_SLOTS; i++) {
        ga_ledger_slot_t *s = &g->l->slots[i];
        if (LD(&s->state) == GA_SLOT_LIVE && s->pid == pid && s->start == start &&
            s->pidns == g->pidns && s->image != image)
            ga_free_slot(s);
    }
}

/* Under the mutex, in a mapped ledger: settle the cap and (claim) take a slot holding `carry`
 * bytes. 1 joined, 0 the file was removed meanwhile (try again), -1 refused with a message. */
static int ga_join(ga_group_t *g, uint64_t cap, uint64_t carry, int claim, char *err,
                   size_t errlen)
{
    ga_ledger_t *l = g->l;
    struct stat st;
    /* Its last member may have removed it while we waited for the mutex, and a newcomer made a
     * fresh one at the same path: only the file the path names now is the group's. */
    if (stat(g->path, &st) != 0 || st.st_nlink == 0 || st.st_dev != g->dev || st.st_ino != g->ino)
        return 0; /* a fresh one must be made, or the new one joined */
    ga_free_pre_exec(g);
    unsigned live = ga_reclaim(g);
    if (l->cap != cap && live > 0) {
        snprintf(err, errlen, "gpuarena: group '%s' already runs with a cap of %" PRIu64 " bytes "
                 "(%.2f GiB) on this device and this process asks for %" PRIu64 " bytes (%.2f GiB): "
                 "give every member the same cap (this process's comes from %s; the cap is fixed "
                 "while the group has members)", l->name, l->cap, (double)l->cap / (1 << 30), cap,
                 (double)cap / (1 << 30), g->cap_var ? g->cap_var : "GPUARENA_LIMIT");
        return -1;
    }
    l->cap = cap;
    if (!claim) /* the slot comes at the first commit (ga_group_open_unjoined) */
        return 1;
    ga_ledger_slot_t *s = ga_claim(g, carry);
    if (!s) {
        snprintf(err, errlen, "gpuarena: group '%s' is full (%d processes on this device): use "
                 "another GPUARENA_GROUP for further processes", l->name, GA_GROUP_SLOTS);
        return -1;
    }
    ST(&g->slot, s);
    return 1;
}

/* Maps (making it when there is none) the ledger at g->path and joins it with `carry` bytes; fills
 * g->l, g->slot, g->dev, g->ino, g->fd. 0, or -1 with a message; 1 when the path names the file
 * `held` has mapped and locked (a move finds the ledger still there: locking it again through
 * the second mapping would wait on ourselves). */
static int ga_attach(ga_group_t *g, const ga_group_t *held, const char *name, const uint8_t uuid[16],
                     uint64_t cap, uint64_t carry, int claim, char *err, size_t errlen)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        int gone, fd = -1;
        ga_ledger_t *l = ga_map(g->path, name, uuid, &gone, &g->dev, &g->ino, &fd, err, errlen);
        if (!l && gone) {
            if (ga_create(g->dir, g->path, name, uuid, cap, err, errlen) != 0)
                return -1;
            continue;
        }
        if (!l)
            return -1;
        if (held && g->dev == held->dev && g->ino == held->ino) {
            munmap(l, GA_LEDGER_SIZE);
            close(fd);
            return 1;
        }
        g->l = l;
        int e = ga_lock(l);
        if (e) { /* damaged since the check above (said) */
            snprintf(err, errlen, "gpuarena: the lock of the group ledger %s cannot be taken (%s): "
                     "stop the group's processes and remove the file (or use another "
                     "GPUARENA_GROUP)", g->path, strerror(e));
            g->l = NULL;
            munmap(l, GA_LEDGER_SIZE);
            close(fd);
            return -1;
        }
        int rc = ga_join(g, cap, carry, claim, err, errlen);
        ga_unlock(l);
        if (rc == 1) {
            g->fd = fd;
            return 0;
        }
        g->l = NULL;
        munmap(l, GA_LEDGER_SIZE);
        close(fd);
        if (rc < 0)
            return -1;
    }
    snprintf(err, errlen, "gpuarena: the group ledger %s kept changing under 100 tries to join it: "
             "is something removing files in %s?", g->path, g->dir);
    return -1;
}

static ga_group_t *ga_group_open_as(const char *dir, const char *name, const uint8_t uuid[16],
                                    uint64_t cap, const char *cap_var, int claim, char *err,
                                    size_t errlen)
{
    char scratch[8];
    if (!err) {
        err = scratch;
        errlen = sizeof scratch;
    }
    if (!ga_group_name_ok(name, err, errlen))
        return NULL;
    if (cap == 0) {
        snprintf(err, errlen, "gpuarena: GPUARENA_GROUP=%s needs a cap: set GPUARENA_LIMIT", name);
        return NULL;
    }
    ga_group_t *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "gpuarena: GPUARENA_GROUP=%s: out of memory", name);
        return NULL;
    }
    /* Said apart, with the fix: "out of memory or ledger path too long" left a user with a deep
     * GPUARENA_GROUP_DIR guessing which (an outside check, 2026-12-07). */
    if (ga_group_path(dir, name, uuid, g->path, sizeof g->path) != 0) {
        const char *d = dir ? dir : GA_GROUP_DIR_DEFAULT;
        snprintf(err, errlen, "gpuarena: GPUARENA_GROUP=%s: the group's ledger path in %.60s%s (%zu "
                 "bytes) would pass the %zu bytes gpuarena keeps for it: set GPUARENA_GROUP_DIR to "
                 "a shorter folder (every member must name the same one)", name, d,
                 strlen(d) > 60 ? "..." : "", strlen(d), sizeof g->path - 1);
        free(g);
        return NULL;
    }
    snprintf(g->dir, sizeof g->dir, "%s", dir ? dir : GA_GROUP_DIR_DEFAULT);
    g->pidns = ga_pidns("/proc/self/ns/pid");
    g->fd = -1;
    g->cap = cap;
    g->cap_var = cap_var;
    if (ga_attach(g, NULL, name, uuid, cap, 0, claim, err, errlen) == 0)
        return g;
    free(g);
    return NULL;
}

ga_group_t *ga_group_open(const char *dir, const char *name, const uint8_t uuid[16], uint64_t cap,
                          char *err, size_t errlen)
{
    return ga_group_open_as(dir, name, uuid, cap, NULL, 1, err, errlen);
}

ga_group_t *ga_group_open_from(const char *dir, const char *name, const uint8_t uuid[16],
                               uint64_t cap, const char *cap_var, char *err, size_t errlen)
{
    return ga_group_open_as(dir, name, uuid, cap, cap_var, 1, err, errlen);
}

ga_group_t *ga_group_open_unjoined(const char *dir, const char *name, const uint8_t uuid[16],
                                   uint64_t cap, const char *cap_var, char *err, size_t errlen)
{
    return ga_group_open_as(dir, name, uuid, cap, cap_var, 0, err, errlen);
}

/* ---- a removed ledger ---- */

/* Whether the mapped file is still the one at the path (under its mutex: only its own members
 * remove it, under the same mutex, so the answer holds until the unlock unless a stranger acts). */
int ga_still_there(const ga_group_t *g)
{
    struct stat st;
    if (fstat(g->fd, &st) == 0 && st.st_dev == g->dev && st.st_ino == g->ino)
        return st.st_nlink > 0;
    /* The program closed our descriptor (a daemon closing every fd), maybe reused it: the path. */
    return stat(g->path, &st) == 0 && st.st_dev == g->dev && st.st_ino == g->ino;
}

/* Closes the ledger's descriptor unless the program closed it and reused the number. */
static void ga_close_fd(int fd, dev_t dev, ino_t ino)
{
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino)
        close(fd);
}

/* Under the removed ledger's mutex (a /dev/shm cleanup, systemd-logind's RemoveIPC, or its last
 * member's exit while a forked child had no slot yet): joins the ledger the path names now (made
 * when there is none) with this process's share, so the group counts it again and newcomers do not
 * get the whole cap beside it. The old mapping stays (other threads may still hold pointers into
 * it); an uncommit racing the move lands in the old slot and is lost, which overcounts only.
 * 1 moved, 0 not (said once: commits are then refused). */
int ga_move(ga_group_t *g)
{
    ga_ledger_t *old = g->l;
    ga_ledger_slot_t *mine = LD(&g->slot);
    ga_group_t n = {.pidns = g->pidns, .fd = -1, .cap_var = g->cap_var};
    memcpy(n.dir, g->dir, sizeof n.dir);
    memcpy(n.path, g->path, sizeof n.path);
    char name[sizeof old->name], err[GA_MSG_MAX];
    snprintf(name, sizeof name, "%s", old->name);
    uint64_t carry = mine ? __atomic_exchange_n(&mine->committed, 0, __ATOMIC_ACQ_REL) : 0;
    n.cap = g->cap;
    /* Our own cap: the removed ledger's may be a newcomer's that we never agreed to (unjoined) */
    uint64_t cap = g->cap ? g->cap : old->cap;
    /* A process without a slot (unjoined, a forked child) stays one: it joins at its first
     * commit, as it would have in the removed ledger (a view that moves it took it a slot). */
    int rc = ga_attach(&n, g, name, old->uuid, cap, carry, mine != NULL, err, sizeof err),
        moved = rc == 0;
    if (!moved && mine)
        __atomic_add_fetch(&mine->committed, carry, __ATOMIC_ACQ_REL);
    if (rc == 1)
        return 1; /* still ours at the path after all: nothing to move */
    if (!LD(&g->told) && (mine || !moved)) {
        ST(&g->told, 1);
        fprintf(stderr, "gpuarena: the group ledger %s was removed while this process (pid %d) was "
                "a member (a cleanup of %s, or systemd-logind's RemoveIPC=yes at logout): %s; keep "
                "ledgers where nothing removes them (GPUARENA_GROUP_DIR, or RemoveIPC=no in "
                "logind.conf)\n", g->path, (int)getpid(), g->dir,
                moved ? "this process moved its share to the group's new ledger at that path"
                      : err + (strncmp(err, "gpuarena: ", 10) ? 0 : 10));
        if (!moved)
            fprintf(stderr, "gpuarena: this process's further allocations in group '%s' are "
                    "refused\n", name);
    }
    if (!moved)
        return 0;
    ga_close_fd(g->fd, g->dev, g->ino);
    g->dev = n.dev;
    g->ino = n.ino;
    g->fd = n.fd;
    if (mine && n.slot) { /* its figures too: `top` showed it blank until its next ones */
        ST(&n.slot->in_use, LD(&mine->in_use));
        ST(&n.slot->reserved, LD(&mine->reserved));
        ST(&n.slot->peak, LD(&mine->peak));
        const uint64_t *from = (const uint64_t *)(const void *)mine->mode;
        uint64_t *to = (uint64_t *)(void *)n.slot->mode;
        ST(&to[0], LD(&from[0]));
        ST(&to[1], LD(&from[1]));
    }
    ST(&g->slot, n.slot);
    if (mine)
        ga_free_slot(mine);
    ST(&g->l, n.l); /* last: a thread waiting on the old mutex sees it moved and follows */
    return 1;
}

/* ---- leaving ---- */

/* Live members other than slot `mine` that are not in their exit (ga_reclaim first). */
static unsigned ga_staying(const ga_group_t *g, const ga_ledger_slot_t *mine)
{
    unsigned n = 0;
    for (uint32_t i = 0; i < g->l->hwm && i < GA_GROUP_SLOTS; i++) {
        const ga_ledger_slot_t *s = &g->l->slots[i];
        n += s != mine && LD(&s->state) == GA_SLOT_LIVE && !LD(&s->exiting);
    }
    return n;
}

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture (Linux 5.3) */
#endif
#define GA_EXIT_WAIT_MS 2000
#define GA_EXIT_WAIT_MAX 16

/* At exit with no member staying: the live slots of members still in their exit (their pids, at
 * most GA_EXIT_WAIT_MAX, in pids; those of another pid namespace make it -1: not waited for).
 * Under the mutex. */
static int ga_exiting_pids(const ga_group_t *g, pid_t *pids)
{
    int n = 0;
    for (uint32_t i = 0; i < g->l->hwm && i < GA_GROUP_SLOTS; i++) {
        const ga_ledger_slot_t *s = &g->l->slots[i];
        if (LD(&s->state) != GA_SLOT_LIVE)
            continue;
        if (n == GA_EXIT_WAIT_MAX || (s->pidns && g->pidns && s->pidns != g->pidns))
            return -1;
        pids[n++] = (pid_t)s->pid;
    }
    return n;
}

/* Waits, up to GA_EXIT_WAIT_MS in all, for processes pids to be gone (a zombie is: its device
 * memory went with its files), without the mutex. 1: all gone. */
static int ga_wait_gone(const pid_t *pids, int n)
{
    struct pollfd fds[GA_EXIT_WAIT_MAX];
    int open = 0, ok = 1;
    for (int i = 0; i < n; i++) {
        int fd = (int)syscall(SYS_pidfd_open, pids[i], 0);
        if (fd >= 0)
            fds[open++] = (struct pollfd){.fd = fd, .events = POLLIN};
        else if (errno != ESRCH)
            ok = 0; /* no pidfd (an older kernel): not waited for */
    }
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int left = open; ok && left > 0;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ms = GA_EXIT_WAIT_MS - ((now.tv_sec - t0.tv_sec) * 1000L +
                                     (now.tv_nsec - t0.tv_nsec) / 1000000L);
        if (ms <= 0) {
            ok = 0;
            break;
        }
        int r = poll(fds, (nfds_t)open, (int)ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            ok = 0;
            break;
        }
        for (int i = 0; i < open; i++)
            if (fds[i].fd >= 0 && fds[i].revents)
                close(fds[i].fd), fds[i].fd = -fds[i].fd - 1, left--; /* poll skips it now */
    }
    for (int i = 0; i < open; i++)
        if (fds[i].fd >= 0)
            close(fds[i].fd);
    return ok;
}

/* at_exit: the process is exiting (ga_group_exit). */
static void ga_group_leave(ga_group_t *g, int at_exit)
{
    if (!g)
        return;
    for (;;) {
        ga_ledger_t *l = LD(&g->l);
        ga_lock(l);
        if (LD(&g->l) != l) {
            ga_unlock(l);
            continue;
        }
        ST(&g->left, 1);
        ga_ledger_slot_t *s = LD(&g->slot);
        unsigned staying = 0;
        if (at_exit) {
            ga_reclaim(g);
            staying = ga_staying(g, s);
        }
        ST(&g->slot, NULL);
        if (s && staying) { /* kept, with its share, until the process is gone (ga_group_exit) */
            ST(&s->exiting, 1);
            ga_unlock(l);
            return;
        }
        if (s)
            ga_free_slot(s);
        /* At exit with members still in their exit (none staying): they hold their device memory
         * until they are gone, and a ledger removed now let a process joining meanwhile be
         * granted it (40 + 40 MiB held under a 64 MiB cap: an outside re-check, 2026-12-06;
         * test group_last_out_waits_for_exiting_members). Waited for, up to GA_EXIT_WAIT_MS,
         * without the mutex; the ledger is then removed if nobody is left, else left for them
         * (the next process to join takes their slots back once they are gone). */
        pid_t pids[GA_EXIT_WAIT_MAX];
        int n = at_exit ? ga_exiting_pids(g, pids) : 0;
        if (n != 0) {
            ga_unlock(l);
            if (n < 0 || !ga_wait_gone(pids, n))
                return;
            ga_lock(l);
            if (LD(&g->l) != l) { /* moved meanwhile: the path names another ledger */
                ga_unlock(l);
                return;
            }
        }
        /* Removed under the mutex, and a joiner checks the link count under it: nobody can join a
         * removed ledger while a new one is made beside it. Only if the path still names our file:
         * after a removal it names a newer group's live ledger, which is not ours to remove. */
        struct stat st;
        if (ga_reclaim(g) == 0 && stat(g->path, &st) == 0 && st.st_dev == g->dev &&
            st.st_ino == g->ino)
            unlink(g->path);
        ga_unlock(l);
        return;
    }
}

void ga_group_close(ga_group_t *g)
{
    ga_group_leave(g, 0);
}

void ga_group_exit(ga_group_t *g)
{
    ga_group_leave(g, 1);
}

void ga_group_free(ga_group_t *g)
{
    if (!g)
        return;
    ga_group_close(g);
    munmap(g->l, GA_LEDGER_SIZE);
    ga_close_fd(g->fd, g->dev, g->ino);
    free(g);
}
