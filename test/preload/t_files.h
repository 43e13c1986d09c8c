/* Preload tests of the output files (t_files.c, t_files_own.c, t_files_exit.c): the scratch
 * directory each test works in, the trace reader and the other helpers they share, defined in
 * t_files_util.c. */
#ifndef T_FILES_H
#define T_FILES_H

#include "preload_test.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../allocator/ga_trace.h"

#define TF_EVENTS 9 /* tf_workload: 6 allocations, 3 frees */

typedef struct tf_dir {
    char path[64];
} tf_dir_t;

void tf_mkdir(tf_dir_t *d);

/* d->path/name into out. */
char *tf_at(const tf_dir_t *d, const char *name, char *out, size_t len);

/* Entries of a directory other than . and ..; the first one's name into first (optional). */
int tf_entries(const char *dir, char *first, size_t len);

void tf_rmtree(const char *path);

/* Events in a trace file, or -1 when it does not read back as a trace. */
long tf_trace_events(const char *path, uint32_t only_thread);

void tf_setenv(const char *name, const char *value);

/* A fresh folder d holding a link `name` to `to` (/dev/stdout, /dev/stderr, ...), named by var. */
void tf_own_link(tf_dir_t *d, const char *var, const char *to, const char *name,
                 char *link_path, size_t len);

mode_t tf_lkind(const char *path);

/* Waits for the child: its exit status, its stderr in buf. */
int tf_wait(pid_t pid, FILE *err, char *buf, size_t len);

void tf_expect_dev_null(void);

/* The tests of t_files_own.c and t_files_exit.c, added to the "files" case. */
void pt_files_own_add(TCase *tc);
void pt_files_exit_add(TCase *tc);

#endif
