/* gpuarena output files: what a path is (rules in outfile.h; how the kind decides the way it is
 * written: outfile.c's head comment). A path is followed one symlink hop at a time to what a
 * rename may replace; a /proc fd link is not followed by hand (only the kernel reaches its target)
 * and this process's own descriptors are told apart; a regular file is told a trace, a report, a
 * group's ledger or a program by its first bytes. Runs at start or at exit only.
 */
#define _GNU_SOURCE
#include "outfile_internal.h"

#include "../allocator/ga_trace.h"
#include "group_layout.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* p with its directory made canonical (realpath), its last component kept as it is, so that a
 * link there is still seen as a link. A directory that does not exist leaves p as given. */
static int ga_out_canon(const char *p, char *out, size_t len)
{
    const char *slash = strrchr(p, '/'), *base = slash ? slash + 1 : p;
    char dir[GA_OUTFILE_PATH_MAX], real[GA_OUTFILE_PATH_MAX];
    if (!slash)
        strcpy(dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == p ? 1 : (int)(slash - p), p);
    int n = realpath(dir, real) ? snprintf(out, len, "%s%s%s", real, strcmp(real, "/") ? "/" : "",
                                           base)
                                : snprintf(out, len, "%s", p);
    return n >= 0 && (size_t)n < len ? 0 : -1;
}

/* Follows symlinks from path one hop at a time into out (canonical, see above), stopping at a link
 * that lives in /proc (*fdlink = 1): only the kernel can follow those. */
static int ga_out_follow(const char *path, char *out, size_t len, int *fdlink)
{
    char cur[GA_OUTFILE_PATH_MAX], link[GA_OUTFILE_PATH_MAX], next[2 * GA_OUTFILE_PATH_MAX];
    *fdlink = 0;
    if (ga_out_canon(path, cur, sizeof cur) != 0)
        return -1;
    for (int hops = 0; hops < 40; hops++) {
        struct stat st;
        int is_link = lstat(cur, &st) == 0 && S_ISLNK(st.st_mode);
        if (!is_link || !strncmp(cur, "/proc/", 6)) {
            *fdlink = is_link;
            return snprintf(out, len, "%s", cur) < (int)len ? 0 : -1;
        }
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0)
            return -1;
        link[n] = '\0';
        if (link[0] == '/')
            snprintf(next, sizeof next, "%s", link);
        else
            snprintf(next, sizeof next, "%.*s/%s", (int)(strrchr(cur, '/') - cur), cur, link);
        if (ga_out_canon(next, cur, sizeof cur) != 0)
            return -1;
    }
    errno = ELOOP;
    return -1;
}

/* Digits only (strtoul would take a sign or spaces) into *v; the first byte after them. */
const char *ga_out_number(const char *s, unsigned long *v)
{
    if (!isdigit((unsigned char)*s))
        return NULL;
    char *end;
    errno = 0;
    *v = strtoul(s, &end, 10);
    return errno ? NULL : end;
}

/* N when target (as ga_out_follow leaves it) is this process's own descriptor N as /proc shows
 * it, "/proc/PID/fd/N" or "/proc/PID/task/TID/fd/N" with PID ours: what /dev/stdout, /dev/stderr,
 * /dev/fd/N, /proc/self/fd/N and /proc/thread-self/fd/N come to. -1 for anything else (another
 * process's descriptor is opened anew, as any fd link is). */
static int ga_out_own_fd(const char *target)
{
    unsigned long pid, tid, fd;
    const char *s = strncmp(target, "/proc/", 6) ? NULL : ga_out_number(target + 6, &pid);
    if (!s || pid != (unsigned long)getpid())
        return -1;
    if (!strncmp(s, "/task/", 6) && !(s = ga_out_number(s + 6, &tid)))
        return -1;
    if (strncmp(s, "/fd/", 4) || !(s = ga_out_number(s + 4, &fd)) || *s || fd > INT_MAX)
        return -1;
    return (int)fd;
}

/* The kind of what descriptor fd refers to: only the descriptor itself is looked at, so a pipe, a
 * deleted file or a terminal is seen as it is, and a closed descriptor is said at write time. */
int ga_out_classify_own(int fd, ga_out_t *o)
{
    o->own_fd = fd;
    o->kind = GA_OUT_OWN;
    if (fstat(fd, &o->st) != 0) {
        o->own_err = errno;
        return 0;
    }
    if (S_ISDIR(o->st.st_mode))
        o->kind = GA_OUT_DIR;
    else if (!S_ISREG(o->st.st_mode) && !S_ISCHR(o->st.st_mode) && !S_ISFIFO(o->st.st_mode))
        o->kind = GA_OUT_OTHER;
    return 0;
}

/* Whether a regular file begins as a program or library does (ELF, a script's "#!", an archive's
 * "!<arch>"): statistics or a trace written over one destroy it (GPUARENA_STATS naming the shim
 * itself made every later run go uncapped: helper-67 F11; a script and gpuarena's own static
 * library were still replaced: helper-77 R2). */
static int ga_out_is_elf(const char *magic, ssize_t n)
{
    return (n >= 4 && !memcmp(magic, "\177ELF", 4)) || (n >= 2 && !memcmp(magic, "#!", 2)) ||
           (n == 8 && !memcmp(magic, "!<arch>\n", 8));
}

/* A regular file's kind by its first bytes: a program or library (above), a group's ledger (its
 * magic: a trace opened over one truncated it under the members' mappings and a report replaced
 * it, and the next process to join made a new, empty ledger beside the members still holding
 * memory, 81 MiB held by the group under its 64 MiB cap: an outside re-test, 2026-12-06), or
 * neither (GA_OUT_REGULAR). */
static ga_out_kind_t ga_out_regular_kind(const char *path)
{
    char magic[8] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return GA_OUT_REGULAR;
    ssize_t n = read(fd, magic, sizeof magic);
    close(fd);
    if (ga_out_is_elf(magic, n))
        return GA_OUT_PROGRAM;
    if (n == 8 && !memcmp(magic, GA_LEDGER_MAGIC, 8))
        return GA_OUT_LEDGER;
    if (n == 8 && !memcmp(magic, GA_TRACE_MAGIC, 8))
        return GA_OUT_TRACE;
    return GA_OUT_REGULAR;
}

int ga_out_classify(const char *path, ga_out_t *o)
{
    int fdlink;
    memset(o, 0, sizeof *o);
    o->own_fd = -1;
    if (ga_out_follow(path, o->target, sizeof o->target, &fdlink) != 0)
        return -1;
    /* Before stat: a closed descriptor's /proc link does not exist, and is no new file either. */
    int own = ga_out_own_fd(o->target);
    if (own >= 0)
        return ga_out_classify_own(own, o);
    if (stat(o->target, &o->st) != 0) {
        if (errno != ENOENT || fdlink)
            return -1;
        o->kind = GA_OUT_NEW;
        return 0;
    }
    if (S_ISDIR(o->st.st_mode))
        o->kind = GA_OUT_DIR;
    else if (S_ISREG(o->st.st_mode)) {
        o->kind = ga_out_regular_kind(o->target);
        if ((o->kind == GA_OUT_REGULAR || o->kind == GA_OUT_TRACE) && fdlink)
            o->kind = GA_OUT_THROUGH;
    }
    else if (S_ISCHR(o->st.st_mode) || S_ISFIFO(o->st.st_mode))
        o->kind = GA_OUT_THROUGH;
    else
        o->kind = GA_OUT_OTHER;
    return 0;
}

/* Two paths name one file: the same inode when both exist (a character device such as /dev/null
 * is shared harmlessly), the same resolved path when neither does yet. */
int ga_out_same(const char *a, const char *b)
{
    struct stat sa, sb;
    int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino && !S_ISCHR(sa.st_mode);
    char ra[GA_OUTFILE_PATH_MAX], rb[GA_OUTFILE_PATH_MAX];
    int fa, fb;
    return !ea && !eb && ga_out_follow(a, ra, sizeof ra, &fa) == 0 &&
           ga_out_follow(b, rb, sizeof rb, &fb) == 0 && !strcmp(ra, rb);
}

/* The first bytes of the regular file at path into head (len - 1 at most, NUL-terminated);
 * how many, 0 for an empty file, or SIZE_MAX for one that holds bytes this process cannot read
 * (mode 0200): taken for empty, such a file of the user's was replaced (an outside check,
 * helper-116; test unreadable_file_never_replaced). */
static size_t ga_out_head(const char *path, const struct stat *st, char *head, size_t len)
{
    memset(head, 0, len);
    if (st->st_size == 0)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return SIZE_MAX;
    ssize_t n = read(fd, head, len - 1);
    close(fd);
    return n > 0 ? (size_t)n : n < 0 ? SIZE_MAX : 0;
}

/* 1 when the regular file at path holds bytes that are not the start of a trace: a file of the
 * user's, which a trace would replace (a trace cut short before its 8th byte, or an empty file,
 * is not such a file). */
int ga_out_not_a_trace(const char *path, const struct stat *st)
{
    char head[9];
    size_t n = ga_out_head(path, st, head, sizeof head);
    return n == SIZE_MAX ? 2 : n > 0 && memcmp(head, GA_TRACE_MAGIC, n) != 0;
}

/* 1 when the regular file at path holds bytes that are not an earlier statistics report ('{',
 * blanks, then "gpuarena_stats", as every format begins): a file of the user's, which the report
 * would replace (GPUARENA_STATS=notes.txt, or /etc/hostname as root, replaced it silently while
 * the trace refused such a file: an outside check, helper-114). An empty file is not one. */
int ga_out_not_a_report(const char *path, const struct stat *st)
{
    static const char key[] = "\"gpuarena_stats\"";
    char head[64];
    size_t n = ga_out_head(path, st, head, sizeof head);
    if (n == 0 || n == SIZE_MAX) /* 2: cannot be read */
        return n ? 2 : 0;
    const char *s = head + 1;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    return head[0] != '{' || strncmp(s, key, sizeof key - 1) != 0;
}
