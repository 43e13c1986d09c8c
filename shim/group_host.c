/* group_host.c: what the group ledger (group.c, group_join.c) reads from the host, not the ledger:
 * group names and ledger paths, a process's start time and pid namespace from /proc, this process
 * image's mark, and the device plugins' CUDA_DEVICE_MEMORY_LIMIT[_i] in an environment. Apart
 * from the ledger's files to keep each short; nothing here touches a ledger or its mutex.
 */
#define _GNU_SOURCE
#include "ga_group.h"
#include "group_host.h"
#include "../allocator/ga_size.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- names and paths ---- */

int ga_group_name_ok(const char *name, char *err, size_t errlen)
{
    size_t n = 0;
    for (const char *c = name; *c; c++, n++) {
        int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                 *c == '-' || *c == '_' || *c == '.';
        if (!ok)
            break;
    }
    /* "." and ".." are made of those characters but name directories: said to be reserved, as the
     * rule alone read as if they broke it (scripts/gpuarena_cli/doctor.py says the same). */
    int reserved = !strcmp(name, ".") || !strcmp(name, "..");
    if (n > 0 && n <= GA_GROUP_NAME_MAX && name[n] == '\0' && !reserved)
        return 1;
    if (err)
        snprintf(err, errlen, "gpuarena: GPUARENA_GROUP='%.80s' is not a group name: %suse 1 to %d "
                 "letters, digits, '-', '_' or '.' (e.g. GPUARENA_GROUP=team-a)", name,
                 reserved ? "'.' and '..' are reserved (they name directories); " : "",
                 GA_GROUP_NAME_MAX);
    return 0;
}

int ga_group_path(const char *dir, const char *name, const uint8_t uuid[16], char *out, size_t n)
{
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", uuid[i]);
    int w = snprintf(out, n, "%s/gpuarena-%u-%s-%s", dir ? dir : GA_GROUP_DIR_DEFAULT,
                     (unsigned)getuid(), name, hex);
    return w > 0 && (size_t)w < n ? 0 : -1;
}

/* ---- processes ---- */

/* Start time (field 22) of a process, 0 when it is gone or a zombie (it holds no memory). A
 * process whose main thread has ended (pthread_exit from main) while other threads run shows as a
 * zombie too, with its live threads in field 20: it holds its memory, so it runs. It was taken for
 * dead, and its share given to another member while the driver still held it (600 MiB granted
 * beside its 600 under a 1 GiB group cap: an outside check, 2026-12-07). */
uint64_t ga_proc_start(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == 'X')
        return 0;
    p += 2; /* field 3, the state */
    int zombie = *p == 'Z';
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return 0;
        p++;
        if (field + 1 == 20 && zombie && strtol(p, NULL, 10) < 2)
            return 0; /* a zombie with no thread but its ended main one: gone */
    }
    return strtoull(p, NULL, 10);
}

uint64_t ga_pidns(const char *proc)
{
    struct stat st;
    return stat(proc, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* This process image's mark in its slots: exec keeps the pid and the start time, so only this
 * tells a slot of the image before an exec (which never ran its exit handler) from one of ours.
 * File-local; set once, racing first callers agree through the compare-and-swap. */
static uint64_t ga_image;

uint64_t ga_image_id(void)
{
    uint64_t id = __atomic_load_n(&ga_image, __ATOMIC_ACQUIRE);
    if (id)
        return id;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t want = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
                    ((uint64_t)(uintptr_t)&ts << 17) ^ ((uint64_t)getpid() << 40);
    want |= 1; /* never 0, the value of an older gpuarena's slot */
    uint64_t zero = 0;
    if (!__atomic_compare_exchange_n(&ga_image, &zero, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return zero;
    return want;
}

int ga_proc_exe(pid_t pid, uint64_t *dev, uint64_t *ino)
{
    char path[64];
    struct stat st;
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    else
        snprintf(path, sizeof path, "/proc/self/exe");
    if (stat(path, &st) != 0)
        return 0;
    *dev = (uint64_t)st.st_dev;
    *ino = (uint64_t)st.st_ino;
    return 1;
}

/* ---- HAMi / KAI limits ---- */

static const char *ga_env_lookup(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (char *const *e = envp; e && *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* HAMi-core's README gives the forms "1g, 1024m, 1048576k, 1073741824" for the same limit
 * (https://github.com/Project-HAMi/HAMi-core#usage), and its parser multiplies a final g/m/k (any
 * case) by 2^30/2^20/2^10, a plain number being bytes; a per-device CUDA_DEVICE_MEMORY_LIMIT_<i>
 * overrides the global one. gpuarena's size grammar (ga_size.h) reads every such form to the same
 * bytes (K, M, G are binary there too), so it is used as is; forms HAMi does not know (8GiB, 1.5g)
 * are accepted as the grammar defines them, a percentage is refused (no device total is implied). */
int ga_hami_limit(char *const *envp, int dev, uint64_t *bytes, char *err, size_t errlen)
{
    char name[48];
    snprintf(name, sizeof name, "CUDA_DEVICE_MEMORY_LIMIT_%d", dev);
    const char *v = ga_env_lookup(envp, name);
    if (!v || !*v) {
        snprintf(name, sizeof name, "CUDA_DEVICE_MEMORY_LIMIT");
        v = ga_env_lookup(envp, name);
    }
    if (!v || !*v)
        return 0;
    ga_size_t sz;
    char why[320];
    if (ga_size_parse(v, 0, &sz, why, sizeof why) != 0) {
        if (err)
            snprintf(err, errlen, "gpuarena: %s=%s; HAMi's forms are 8192m, 8g, 1048576k or bytes "
                     "(the device plugin, or the pod spec, sets it)", name, why);
        return -1;
    }
    *bytes = sz.bytes;
    return 1;
}
