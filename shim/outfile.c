/* gpuarena output files: where a report or a trace may be written, and how (rules in outfile.h).
 *
 * The kind of a path decides everything, so it is found once, by following symlinks one hop at a
 * time: the last path reached is what a rename may replace (a link is never replaced, its target
 * is). A link that lives in /proc (an fd link such as /proc/self/fd/1, which /dev/stdout points to)
 * is not followed by hand, since its target may be a pipe or a deleted file that only the kernel
 * can reach: whatever it leads to is written through, opened for appending, because replacing or
 * truncating it would destroy what the program itself wrote there. Devices and FIFOs are opened
 * without blocking, so a FIFO nobody reads is a message rather than a process that never exits.
 * A /proc fd link of this process itself (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N)
 * is not opened anew at all: a new open file description has an offset of its own, so the
 * program's output, which exit() flushes from its stdio buffers after the shim's destructor has
 * run, would land on top of the report. It is written through a dup of the descriptor (one offset
 * for both), after stdout and stderr are flushed, so the program's buffered output comes first,
 * whole and once.
 * Such a descriptor is watched from start: if by exit it was closed, or its number reused for
 * another file, nothing is written to it (that file is not the output that was named).
 * What a path is (its kind, and whether a file there is a trace or a report) is found by
 * outfile_kind.c. Everything here runs at start or at exit, never on the allocation path.
 */
#define _GNU_SOURCE
#include "outfile_internal.h"

#include "shim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* What a descriptor named at start (GPUARENA_STATS=/dev/stdout) referred to then: at exit it must
 * still be that file, or the number was reused and the output would go somewhere never named. */
typedef struct ga_out_watch {
    const char *var; /* NULL: slot unused */
    int fd, was_open;
    dev_t dev;
    ino_t ino;
} ga_out_watch_t;

/* Set at start (before any hook runs), read at exit: the trace's path and whether a report that
 * clashed with it was already reported. */
static char ga_protected[GA_OUTFILE_PATH_MAX];
static const char *ga_protected_var = "GPUARENA_TRACE";
static int ga_clash_said;
/* Set at start (ga_outfile_watch, under the shim's init once), read at exit: one per variable. */
static ga_out_watch_t ga_watched[2]; /* GPUARENA_STATS, GPUARENA_TRACE */

/* ga_outfile_expand without a message: -1 when too long. */
static int ga_out_expand(const char *tmpl, char *out, size_t len)
{
    char pid[24];
    size_t pl = (size_t)snprintf(pid, sizeof pid, "%d", (int)getpid()), o = 0;
    for (const char *s = tmpl; *s;) {
        int is_pid = s[0] == '%' && s[1] == 'p';
        size_t n = is_pid ? pl : 1;
        if (o + n >= len)
            return -1;
        memcpy(out + o, is_pid ? pid : s, n);
        o += n;
        s += is_pid ? 2 : 1;
    }
    out[o] = '\0';
    return 0;
}

int ga_outfile_expand(const char *var, const char *tmpl, char *out, size_t len)
{
    if (ga_out_expand(tmpl, out, len) == 0)
        return 0;
    ga_log(GA_LOG_ERROR, "%s is longer than %zu bytes once %%p is expanded; use a shorter path",
           var, len - 1);
    return -1;
}


void ga_outfile_protect(const char *var, const char *path)
{
    ga_protected_var = var;
    snprintf(ga_protected, sizeof ga_protected, "%s", path);
}

int ga_outfile_clash(const char *var, const char *tmpl)
{
    char path[GA_OUTFILE_PATH_MAX];
    if (!ga_protected[0] || !strcmp(tmpl, "-") ||
        ga_outfile_expand(var, tmpl, path, sizeof path) != 0 || !ga_out_same(path, ga_protected))
        return 0;
    if (!ga_clash_said++)
        ga_log(GA_LOG_ERROR, "%s='%s' names the same file as %s ('%s'): the trace is kept and %s is "
               "not written; give %s another path, e.g. '%s.json'", var, tmpl, ga_protected_var,
               ga_protected, var, var, ga_protected);
    return 1;
}

/* Why a path cannot take output, for the kinds that are refused; NULL for the others. */
static const char *ga_out_refusal(const ga_out_t *o)
{
    if (o->kind == GA_OUT_DIR)
        return "is a directory";
    if (o->kind == GA_OUT_OTHER)
        return S_ISBLK(o->st.st_mode) ? "is a block device" : "is not a file, a device or a FIFO";
    if (o->kind == GA_OUT_PROGRAM)
        return "is a program or library (an ELF file, a script or an archive), which the output "
               "would replace";
    if (o->kind == GA_OUT_LEDGER)
        return "is a gpuarena group's ledger (GPUARENA_GROUP), which the output would destroy, "
               "and with it the group's count of the memory its members hold";
    return NULL;
}

/* Opens a device, a FIFO or an fd link to append to, without blocking on a FIFO nobody reads. */
static int ga_out_open_through(const ga_out_t *o)
{
    int fd = open(o->target, O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

static void ga_out_open_failed(const char *var, const char *path, const ga_out_t *o, int err,
                               const char *consequence)
{
    if (err == ENXIO && S_ISFIFO(o->st.st_mode))
        ga_log(GA_LOG_ERROR, "%s='%s' is a FIFO that nobody is reading: %s; start its reader "
               "before the program writes", var, path, consequence);
    else if (err == EFBIG)
        ga_log(GA_LOG_ERROR, "cannot write %s='%s' (%s): %s; it does not fit under the "
               "process's file size limit (ulimit -f): raise the limit", var, path,
               strerror(err), consequence);
    else if (err == EMFILE || err == ENFILE) /* the path is not at fault (helper-47 F16) */
        ga_log(GA_LOG_ERROR, "cannot write %s='%s' (%s): %s; no file descriptor was free %s: "
               "raise the limit or close the descriptors the program no longer uses", var, path,
               strerror(err), consequence, err == EMFILE ? "in the process (ulimit -n)"
                                                         : "in the system (fs.file-max)");
    else if (err == ENOMEM)
        ga_log(GA_LOG_ERROR, "cannot write %s='%s' (%s): %s; the process was out of memory",
               var, path, strerror(err), consequence);
    else if (err == EPIPE) /* the path was fine: it said to check for a writable directory */
        ga_log(GA_LOG_ERROR, "cannot write %s='%s' (%s): the pipe's reader went away (a `| head` "
               "that has read enough, say), so the report is cut short or missing; keep the "
               "reader until the program exits, or give a file path", var, path, strerror(err));
    else
        ga_log(GA_LOG_ERROR, "cannot write %s='%s' (%s): %s; check that the path names a file "
               "in a writable directory", var, path, strerror(err), consequence);
}

/* "-" is the process's descriptor 2, as /dev/stderr is (helper-47 F10: "-" wrote the report into
 * whatever file the program had opened under number 2 by exit, where /dev/stderr was refused). */
static int ga_out_classify_tmpl(const char *tmpl, char *path, size_t len, ga_out_t *o)
{
    if (!strcmp(tmpl, "-")) {
        memset(o, 0, sizeof *o);
        snprintf(path, len, "-");
        return ga_out_classify_own(2, o);
    }
    return ga_out_expand(tmpl, path, len) == 0 ? ga_out_classify(path, o) : -1;
}

void ga_outfile_watch(const char *var, const char *tmpl)
{
    char path[GA_OUTFILE_PATH_MAX];
    ga_out_t o;
    if (!tmpl || ga_out_classify_tmpl(tmpl, path, sizeof path, &o) != 0 || o.own_fd < 0)
        return;
    for (size_t i = 0; i < sizeof ga_watched / sizeof *ga_watched; i++)
        if (!ga_watched[i].var || !strcmp(ga_watched[i].var, var)) {
            ga_watched[i] = (ga_out_watch_t){.var = var, .fd = o.own_fd, .was_open = !o.own_err,
                                             .dev = o.st.st_dev, .ino = o.st.st_ino};
            return;
        }
}

static const ga_out_watch_t *ga_out_watch_of(const char *var, int fd)
{
    for (size_t i = 0; i < sizeof ga_watched / sizeof *ga_watched; i++)
        if (ga_watched[i].var && !strcmp(ga_watched[i].var, var) && ga_watched[i].fd == fd)
            return &ga_watched[i];
    return NULL;
}

/* Why descriptor o->own_fd must not take var's output, or NULL: closed, reused for another file
 * since start (writing there would put the report into a file nobody named), or read-only. */
static const char *ga_out_own_refusal(const char *var, const ga_out_t *o)
{
    const ga_out_watch_t *w = ga_out_watch_of(var, o->own_fd);
    if (o->own_err == EBADF)
        return "which is closed (the program closed it, or it was never open)";
    if (w && !w->was_open)
        return "which was closed when gpuarena started and now refers to a file the program "
               "opened since";
    if (w && (w->dev != o->st.st_dev || w->ino != o->st.st_ino))
        return "which now refers to another file than at start (the program closed or redirected "
               "it)";
    if ((fcntl(o->own_fd, F_GETFL) & O_ACCMODE) == O_RDONLY)
        return "which is open for reading only";
    return NULL;
}

/* A dup of o->own_fd, sharing its offset, for var's output; -1 with a message (consequence, and
 * a file path to use instead, e.g. example) when it cannot take it. Above 2, so that the trace's
 * copy never takes a standard number the program closed and means to reopen. The descriptor's
 * flags are the program's (its O_NONBLOCK too): they are shared, so never changed here. */
static int ga_out_dup_own(const char *var, const char *path, const ga_out_t *o,
                          const char *consequence, const char *example)
{
    if (o->own_err && o->own_err != EBADF) { /* not closed, yet fstat failed: say why */
        ga_out_open_failed(var, path, o, o->own_err, consequence);
        return -1;
    }
    const char *why = ga_out_own_refusal(var, o);
    /* Not said when the descriptor refused is 2, where gpuarena's messages go: the message would
     * land in the very file the output was kept out of (it did: helper-47 F10). */
    if (why && o->own_fd != 2)
        ga_log(GA_LOG_ERROR, "%s='%s' names descriptor %d, %s: %s; give %s a file path instead, "
               "e.g. '%s'", var, path, o->own_fd, why, consequence, var, example);
    if (why)
        return -1;
    int fd = fcntl(o->own_fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE))
        return -2; /* no descriptor free for a copy: the caller may write through the program's */
    if (fd < 0)
        ga_out_open_failed(var, path, o, errno, consequence);
    return fd;
}

/* 1 when a regular file that is there must not be replaced or truncated for being read-only: the
 * process may not write it, or nobody may (no write bit at all, which root's access() passes; a
 * rename replaced such a file, as the process needs write access to its folder alone: an outside
 * check, helper-114). */
static int ga_out_read_only(const ga_out_t *o)
{
    if (!(o->st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)))
        return 1;
    return faccessat(AT_FDCWD, o->target, W_OK, AT_EACCESS) != 0 && errno == EACCES;
}

/* The descriptor by which this process has the regular file o->target open for writing, or -1:
 * the program's own output (`fopen(out, "w")`, or `prog > out`), empty while its stdio buffer
 * waits for exit(), which flushes it only after the report. A report renamed over it lost the
 * program's output (written on into the replaced file), and a trace appended to it was written
 * over by the program's own offset (helper-130). Found by /proc/self/fd; where that cannot be
 * read (no descriptor free, no /proc) the file is taken as not open. */
static int ga_out_open_here(const ga_out_t *o)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int found = -1;
    struct dirent *e;
    while (found < 0 && (e = readdir(d)) != NULL) {
        unsigned long n;
        const char *end = ga_out_number(e->d_name, &n);
        struct stat st;
        int fd = (int)n;
        if (!end || *end || n > INT_MAX || fd == dirfd(d) || fstat(fd, &st) != 0)
            continue;
        int mode = fcntl(fd, F_GETFL);
        if (st.st_dev == o->st.st_dev && st.st_ino == o->st.st_ino && mode >= 0 &&
            (mode & O_ACCMODE) != O_RDONLY)
            found = fd;
    }
    closedir(d);
    return found;
}

static void ga_out_said_open_here(const char *var, const char *path, int fd,
                                  const char *consequence)
{
    /* a report may follow the program's own output on its stdout or stderr (GA_OUT_OWN); a
     * trace, binary, is never mixed into it */
    int std = fd == 1 || fd == 2, trace = !strcmp(var, "GPUARENA_TRACE");
    ga_log(GA_LOG_ERROR, "%s='%s' is a file this program has open for writing (descriptor %d, "
           "its own output): %s, and the file is left to the program; name another path, e.g. "
           "'%s.%s'%s%s%s", var, path, fd, consequence, path, trace ? "gatrace" : "json",
           std && !trace ? ", or " : "", std && !trace ? var : "",
           std && !trace ? (fd == 1 ? "=/dev/stdout to add the report after the program's output"
                                    : "=/dev/stderr to add the report after the program's output")
                         : "");
}

static void ga_out_said_read_only(const char *var, const char *path, const ga_out_t *o,
                                  const char *consequence)
{
    int none = !(o->st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH));
    ga_log(GA_LOG_ERROR, "%s='%s' is %s (mode %04o): %s, and the file is left as it was; "
           "make it writable (chmod u+w) or name another path", var, path,
           none ? "read-only" : "not writable by this process", (unsigned)(o->st.st_mode & 07777),
           consequence);
}

/* An old trace with other names (a hard link kept as a copy: `ln t.gatrace keep.gatrace`) is not
 * truncated, which emptied every name of it (an outside check, helper-114): a new file, locked,
 * takes its name by rename, the others keep the old trace. old: the old file's descriptor, held
 * under the lock until the new one has the name, so that no second process takes the path. The
 * new file's descriptor (O_APPEND), or -1 with a message. */
static int ga_out_fresh_log(const char *var, const char *path, const ga_out_t *o, int old)
{
    char tmp[GA_OUTFILE_PATH_MAX + 32];
    int fd = -1;
    for (unsigned i = 0; fd < 0 && i < 100; i++) {
        snprintf(tmp, sizeof tmp, "%s.%d-%u.tmp", o->target, (int)getpid(), i);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    int e = errno;
    if (fd >= 0 && (fchmod(fd, o->st.st_mode & 07777), flock(fd, LOCK_EX | LOCK_NB)) == 0 &&
        rename(tmp, o->target) == 0) {
        close(old);
        return fd;
    }
    if (fd >= 0) {
        e = errno;
        unlink(tmp);
        close(fd);
    }
    close(old);
    ga_out_open_failed(var, path, o, e, "this process runs untraced");
    return -1;
}

/* fd, or -1 (closed, said) when it is a terminal: the trace is binary records, for a file, as
 * GPUARENA_TRACE=- is refused for; written to the terminal (/dev/stdout, /dev/tty) they showed
 * as garbage among the program's output and could set the terminal's modes (helper-130). */
static int ga_out_not_a_terminal(const char *var, const char *path, int fd)
{
    if (!isatty(fd))
        return fd;
    close(fd);
    ga_log(GA_LOG_ERROR, "%s='%s' is a terminal: the trace is binary records, for a file, and "
           "this process runs untraced; name a file, e.g. '/tmp/trace-%%p.gatrace' (or send the "
           "program's output to one: prog > out)", var, path);
    return -1;
}

int ga_outfile_open_log(const char *var, const char *path)
{
    static const char *untraced = "this process runs untraced";
    int users;
    ga_out_t o;
    if (ga_out_classify(path, &o) != 0) {
        ga_out_open_failed(var, path, &o, errno, untraced);
        return -1;
    }
    if (o.kind == GA_OUT_TRACE) /* an old trace: a new run replaces it */
        o.kind = GA_OUT_REGULAR;
    /* Any other file that holds something is the user's: a trace replaced it, a typo
     * (GPUARENA_TRACE=notes.txt) destroying the file (an outside check, helper-102). */
    else if (o.kind == GA_OUT_REGULAR && (users = ga_out_not_a_trace(o.target, &o.st))) {
        ga_log(GA_LOG_ERROR, "%s='%s' %s: %s, and the file is left as it was; name another path "
               "(e.g. '%s.gatrace'), or remove the file first", var, path, users == 2 ?
               "holds bytes this process cannot read, which may be no trace" :
               "is there and is not a gpuarena trace", untraced, path);
        return -1;
    }
    const char *why = ga_out_refusal(&o);
    if (why) {
        ga_log(GA_LOG_ERROR, "%s='%s' %s: %s; name a file, e.g. '%s/trace-%%p.gatrace'", var, path,
               why, untraced, o.kind == GA_OUT_DIR ? path : "/tmp");
        return -1;
    }
    if (o.kind == GA_OUT_REGULAR && ga_out_read_only(&o)) {
        ga_out_said_read_only(var, path, &o, untraced);
        return -1;
    }
    int here = o.kind == GA_OUT_REGULAR ? ga_out_open_here(&o) : -1;
    if (here >= 0) {
        ga_out_said_open_here(var, path, here, untraced);
        return -1;
    }
    if (o.kind == GA_OUT_OWN) { /* written through, never locked nor truncated */
        int fd = ga_out_dup_own(var, path, &o, untraced, "/tmp/trace-%p.gatrace");
        if (fd == -2) /* a trace needs a descriptor of its own, kept open to the end */
            ga_out_open_failed(var, path, &o, EMFILE, untraced);
        return fd < 0 ? -1 : ga_out_not_a_terminal(var, path, fd);
    }
    int fd = o.kind == GA_OUT_THROUGH
                 ? ga_out_open_through(&o)
                 : open(o.target, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        ga_out_open_failed(var, path, &o, errno, untraced);
        return -1;
    }
    if (o.kind == GA_OUT_THROUGH)
        return ga_out_not_a_terminal(var, path, fd);
    /* A regular file: truncated only by the process that holds it, for as long as it lives. */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        ga_log(GA_LOG_ERROR, "%s='%s' is being written by another running process: %s, and that "
               "trace is left whole; put %%p in the path (it becomes the pid) for one trace per "
               "process", var, path, untraced);
        close(fd);
        return -1;
    }
    /* The file locked may no longer be the one at the path: a writer that found the old trace
     * hard-linked renamed a fresh file onto the path (ga_out_fresh_log) after this process opened
     * it and before it took the lock, which that writer released after its rename. Its link
     * count is then 1 (the other name alone), and truncating it emptied the kept copy (helper-114,
     * two writers to one path). The path's file is then the other writer's: said as a live
     * writer is, and this process runs untraced. */
    struct stat now, named;
    if (fstat(fd, &now) != 0 || stat(o.target, &named) != 0 || now.st_dev != named.st_dev ||
        now.st_ino != named.st_ino) {
        ga_log(GA_LOG_ERROR, "%s='%s' was taken by another process's trace while this process "
               "opened it (two writers to one path): %s, and that trace and the old one's other "
               "names are left whole; put %%p in the path (it becomes the pid) for one trace per "
               "process", var, path, untraced);
        close(fd);
        return -1;
    }
    if (now.st_nlink > 1)
        return ga_out_fresh_log(var, path, &o, fd);
    if (ftruncate(fd, 0) != 0) {
        ga_out_open_failed(var, path, &o, errno, untraced);
        close(fd);
        return -1;
    }
    return fd;
}

/* writer's output into fd, which it closes; 0 when every byte was written. */
static int ga_out_fill(int fd, void (*writer)(FILE *f))
{
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return -1;
    }
    errno = 0;
    writer(f);
    int bad = fflush(f) != 0 || ferror(f), e = errno;
    if (fclose(f) != 0 && !bad)
        bad = 1, e = errno;
    errno = e ? e : EIO;
    return bad ? -1 : 0;
}

/* ga_out_fill with SIGPIPE and SIGXFSZ blocked in this thread: a reader of a pipe or FIFO that
 * went away (EPIPE), or a file grown past the size limit (`ulimit -f`: EFBIG), is an error and a
 * message, not the death of a program that is exiting. (SIGXFSZ killed a program whose report
 * passed the limit, its exit status and buffered output lost: helper-43 F4.) A signal raised here
 * is taken back before the mask is restored; one already pending stays. */
static int ga_out_fill_guarded(int fd, void (*writer)(FILE *f))
{
    static const int sigs[2] = {SIGPIPE, SIGXFSZ};
    sigset_t guard, old, pending, mine;
    sigemptyset(&guard);
    sigemptyset(&pending);
    sigemptyset(&mine);
    sigpending(&pending);
    for (int i = 0; i < 2; i++) {
        sigaddset(&guard, sigs[i]);
        if (sigismember(&pending, sigs[i]) != 1)
            sigaddset(&mine, sigs[i]);
    }
    pthread_sigmask(SIG_BLOCK, &guard, &old);
    int r = ga_out_fill(fd, writer), e = errno;
    struct timespec zero = {0, 0};
    while (sigtimedwait(&mine, NULL, &zero) > 0)
        ;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return r;
}

/* A regular or new file: a temporary file beside the target (a unique name, created exclusively,
 * with the mode of the file it replaces), then rename: a reader sees the old file or the new one. */
static int ga_out_write_atomic(const char *var, const char *path, const ga_out_t *o,
                               void (*writer)(FILE *f))
{
    char tmp[GA_OUTFILE_PATH_MAX + 32];
    int fd = -1;
    for (unsigned i = 0; fd < 0 && i < 100; i++) {
        snprintf(tmp, sizeof tmp, "%s.%d-%u.tmp", o->target, (int)getpid(), i);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        ga_out_open_failed(var, path, o, errno, "nothing was written");
        return -1;
    }
    if (o->kind == GA_OUT_REGULAR)
        (void)fchmod(fd, o->st.st_mode & 07777);
    if (ga_out_fill_guarded(fd, writer) == 0 && rename(tmp, o->target) == 0)
        return 0;
    int e = errno;
    unlink(tmp);
    ga_out_open_failed(var, path, o, e, "nothing was written");
    return -1;
}

/* The program's buffered output, flushed now: exit() would flush it only after this destructor,
 * after the report (or, through an offset of its own, over it). SIGPIPE is held back meanwhile,
 * not swallowed: a reader of the program's output that went away still ends the program, as
 * exit()'s own flush would have, but only once the report is out (ga_out_flushed unblocks it). */
static void ga_out_flush_program(sigset_t *old)
{
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, old);
    /* stdout and stderr only, and only when no thread holds them: fflush(NULL) locks every stream,
     * and a thread still blocked reading stdin (it holds stdin's lock for good) would hang the exit
     * (exit()'s own flush takes no locks). A stream busy in another thread is left to exit(). */
    FILE *streams[2] = {stdout, stderr};
    for (int i = 0; i < 2; i++)
        if (ftrylockfile(streams[i]) == 0) {
            fflush_unlocked(streams[i]);
            funlockfile(streams[i]);
        }
}

static int ga_out_flushed(const sigset_t *old, int r)
{
    pthread_sigmask(SIG_SETMASK, old, NULL);
    return r;
}

/* A report through the program's own descriptor, after the program's own buffered output. */
static int ga_out_write_own(const char *var, const char *path, const ga_out_t *o,
                            void (*writer)(FILE *f))
{
    static const char *nothing = "nothing was written";
    int fd = ga_out_dup_own(var, path, o, nothing, "/tmp/stats-%p.json");
    if (fd == -2) {
        /* Every descriptor in use at exit: the report is made in memory and written through the
         * program's own descriptor, which needs none (GPUARENA_STATS=- wrote nothing then since
         * b8dea78, where it had written the report to descriptor 2; helper-57's N3). */
        char *buf = NULL;
        size_t len = 0, off = 0;
        FILE *m = open_memstream(&buf, &len);
        if (!m) {
            ga_out_open_failed(var, path, o, EMFILE, nothing);
            return -1;
        }
        writer(m);
        int bad = ferror(m);
        fclose(m);
        sigset_t old;
        ga_out_flush_program(&old);
        while (!bad && off < len) {
            ssize_t w = write(o->own_fd, buf + off, len - off);
            if (w > 0)
                off += (size_t)w;
            else if (!(w < 0 && errno == EINTR))
                break;
        }
        int e = errno;
        free(buf);
        if (bad || off < len) {
            ga_out_open_failed(var, path, o, bad ? ENOMEM : e, nothing);
            return ga_out_flushed(&old, -1);
        }
        return ga_out_flushed(&old, 0);
    }
    if (fd < 0)
        return -1;
    sigset_t old;
    ga_out_flush_program(&old);
    if (ga_out_fill_guarded(fd, writer) != 0) {
        ga_out_open_failed(var, path, o, errno, nothing);
        return ga_out_flushed(&old, -1);
    }
    return ga_out_flushed(&old, 0);
}

int ga_outfile_is_file(const char *tmpl)
{
    char path[GA_OUTFILE_PATH_MAX];
    ga_out_t o;
    if (!tmpl || !strcmp(tmpl, "-") || ga_out_expand(tmpl, path, sizeof path) != 0 ||
        ga_out_classify(path, &o) != 0)
        return 0;
    return o.kind == GA_OUT_NEW || o.kind == GA_OUT_REGULAR || o.kind == GA_OUT_TRACE;
}

int ga_outfile_write(const char *var, const char *tmpl, void (*writer)(FILE *f))
{
    char path[GA_OUTFILE_PATH_MAX];
    ga_out_t o;
    if (!strcmp(tmpl, "-")) { /* descriptor 2, exactly as /dev/stderr */
        ga_out_classify_tmpl(tmpl, path, sizeof path, &o);
        return ga_out_write_own(var, path, &o, writer);
    }
    if (ga_outfile_expand(var, tmpl, path, sizeof path) != 0 || ga_outfile_clash(var, tmpl))
        return -1;
    if (ga_out_classify(path, &o) != 0) {
        ga_out_open_failed(var, path, &o, errno, "nothing was written");
        return -1;
    }
    const char *why = ga_out_refusal(&o);
    if (why) {
        ga_log(GA_LOG_ERROR, "%s='%s' %s: nothing was written; name a file, e.g. "
               "'%s/stats-%%p.json'", var, path, why, o.kind == GA_OUT_DIR ? path : "/tmp");
        return -1;
    }
    /* A trace, this run's or another's (one still being written too: the rename left that
     * process writing into a file no name reached, an outside re-test, 2026-12-06), is what
     * cannot be made again; the statistics can (gpuarena replay of the trace). */
    if (o.kind == GA_OUT_TRACE) {
        ga_log(GA_LOG_ERROR, "%s='%s' is a gpuarena trace (GPUARENA_TRACE of this or another "
               "run), which the statistics would replace: nothing was written; name another file, "
               "e.g. '%s.json'", var, path, path);
        return -1;
    }
    /* Said once: a hook after the report (a library's destructor) writes it again (stats.c). */
    static _Atomic int said_users, said_ro;
    int users = o.kind == GA_OUT_REGULAR ? ga_out_not_a_report(o.target, &o.st) : 0;
    if (users) {
        if (!atomic_exchange(&said_users, 1))
            ga_log(GA_LOG_ERROR, "%s='%s' %s: nothing was written, and the file is left as it "
                   "was; name another path (e.g. '%s.json'), or remove the file first", var, path,
                   users == 2 ? "holds bytes this process cannot read, which may be no report"
                              : "is there and is not a gpuarena statistics file", path);
        return -1;
    }
    if (o.kind == GA_OUT_REGULAR && ga_out_read_only(&o)) {
        if (!atomic_exchange(&said_ro, 1))
            ga_out_said_read_only(var, path, &o, "nothing was written");
        return -1;
    }
    int here = o.kind == GA_OUT_REGULAR ? ga_out_open_here(&o) : -1;
    if (here >= 0) {
        if (!atomic_exchange(&said_ro, 1))
            ga_out_said_open_here(var, path, here, "nothing was written");
        return -1;
    }
    if (o.kind == GA_OUT_OWN)
        return ga_out_write_own(var, path, &o, writer);
    if (o.kind != GA_OUT_THROUGH)
        return ga_out_write_atomic(var, path, &o, writer);
    int fd = ga_out_open_through(&o);
    if (fd < 0 || ga_out_fill_guarded(fd, writer) != 0) {
        ga_out_open_failed(var, path, &o, errno, "nothing was written");
        return -1;
    }
    return 0;
}
