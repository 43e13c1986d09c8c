/* The tests' own reading of a process's start time (field 22 of /proc/PID/stat, clock ticks after
 * boot), which the group ledger records beside each member's pid: the tests forge slots with it
 * and compare against it, so it is not taken from the code under test. 0 when the process is gone. */
#ifndef GA_TEST_PROCSTAT_H
#define GA_TEST_PROCSTAT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static inline uint64_t ga_test_start_of(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

#endif
