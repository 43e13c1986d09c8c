/* gpuarena output files: the files the shim writes (the statistics report, the trace), named by
 * path templates in the environment, written so that no file is destroyed by accident.
 *
 * One rule set for every output (issue 8 item 8):
 * - "%p" in a template becomes the pid (GPUARENA_STATS and GPUARENA_TRACE alike).
 * - A report goes to a regular file (or a new one) atomically: a temporary file beside the target,
 *   then rename onto it. A symlink is followed and its target replaced, never the link itself.
 * - A character device, a FIFO, or a file reached through a /proc fd link (/dev/null,
 *   /proc/PID/fd/1 of another process) is written through: opened for appending, never replaced
 *   nor truncated. A directory, a block device or a socket is refused with a message.
 * - The process's own descriptor (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N) is
 *   written through a dup of it, sharing the program's offset, after fflush(NULL) for a report, so
 *   the program's buffered output comes first and nothing overwrites anything. A descriptor
 *   closed by then, or whose number now names another file than at start, is a message and no
 *   write (the report would land in a file nobody named). "-" is descriptor 2, as /dev/stderr; a
 *   refusal of descriptor 2 is not said, since the message would go there.
 * - The trace path is protected: a report that names the same file (same path after %p, or a
 *   symlink or hard link to it) is not written; the trace wins.
 * - A trace that is a regular file is truncated only under an exclusive flock held for the life of
 *   the writer: a second live process given the same path runs on untraced and says so.
 * Messages go through ga_log, prefixed "gpuarena:", and say how to fix; nothing here changes the
 * program's exit status. Only shim/ uses this (it logs through ga_log).
 */
#ifndef GA_OUTFILE_H
#define GA_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

#define GA_OUTFILE_PATH_MAX 4096

/* Expands every "%p" of tmpl to the pid into out. 0, or -1 (message naming var) if too long. */
int ga_outfile_expand(const char *var, const char *tmpl, char *out, size_t len);

/* Remembers path (expanded) as the trace that variable var names: no report may be written over
 * it. Call once, at start. */
void ga_outfile_protect(const char *var, const char *path);

/* 1 when the report template tmpl (for variable var) names the protected file; the first time
 * it says so (the trace is kept, the report is not written), later calls are quiet. */
int ga_outfile_clash(const char *var, const char *tmpl);

/* Notes, at start, which file the descriptor that tmpl (for variable var) names refers to, when
 * tmpl names one of the process's own (/dev/stdout...): at exit it is written only if it still
 * refers to that file. Quiet; call once per variable, before any output is opened. */
void ga_outfile_watch(const char *var, const char *tmpl);

/* Opens path (expanded) to append a trace, by the rules above: a regular or new file is locked and
 * truncated, a device or FIFO written through, the process's own descriptor duplicated. The
 * descriptor (close-on-exec; O_APPEND unless it is a dup, which shares the program's offset), or
 * -1 with a message saying why and that the process runs on without it. */
int ga_outfile_open_log(const char *var, const char *path);

/* Writes a report: writer(f) fills f, and the result lands at the file tmpl names ("-": stderr)
 * by the rules above. 0 written, -1 not (a message said why). */
int ga_outfile_write(const char *var, const char *tmpl, void (*writer)(FILE *f));

/* 1 when tmpl names a regular file (or none yet), which a write replaces whole: one that can be
 * written again (a stream, a device or a FIFO would get a second report after the first). */
int ga_outfile_is_file(const char *tmpl);

#endif
