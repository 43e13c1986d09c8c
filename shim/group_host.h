/* group_host.h: group_host.c's helpers that group.c and group_join.c call (not part of the shim's
 * interface). */
#ifndef GA_GROUP_HOST_H
#define GA_GROUP_HOST_H

#include <stdint.h>
#include <sys/types.h>

/* Start time (field 22 of /proc/<pid>/stat) of a process; 0 when it is gone or a zombie. */
uint64_t ga_proc_start(pid_t pid);
/* The inode of a /proc/<pid>/ns/pid link (`proc`): which pid namespace it is; 0 when unknown. */
uint64_t ga_pidns(const char *proc);
/* This process image's mark in its ledger slots (never 0; the same for every call). */
uint64_t ga_image_id(void);
/* The device and inode of the program file /proc/<pid>/exe names (pid 0: this process); 0 when
 * it cannot be read (gone, another user's, a kernel thread). */
int ga_proc_exe(pid_t pid, uint64_t *dev, uint64_t *ino);

#endif
