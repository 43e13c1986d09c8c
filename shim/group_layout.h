/* group_layout.h: the bytes of a group ledger file (format GA_GROUP_VERSION), private to group.c,
 * group_join.c and the tests that forge slots; `gpuarena top` (scripts/gpuarena_cli/top.py) reads
 * the same offsets with struct.unpack, so every field has a fixed size and offset, checked below.
 *
 * File = header (GA_LEDGER_HEADER bytes) + GA_GROUP_SLOTS slots of GA_LEDGER_SLOT bytes, all
 * integers little-endian as the machine writes them (x86-64 and aarch64 Linux).
 */
#ifndef GA_GROUP_LAYOUT_H
#define GA_GROUP_LAYOUT_H

#include "ga_group.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define GA_LEDGER_MAGIC "GAGROUP" /* 8 bytes with its NUL */
#define GA_LEDGER_HEADER 512
#define GA_LEDGER_SLOT 128
#define GA_LEDGER_SIZE (GA_LEDGER_HEADER + GA_GROUP_SLOTS * GA_LEDGER_SLOT)

enum { GA_SLOT_FREE = 0, GA_SLOT_LIVE = 1 };

/* One member process. state, committed and the figures are read and written with atomics; the
 * rest is written once, under the mutex, before state becomes GA_SLOT_LIVE. */
typedef struct ga_ledger_slot {
    uint32_t state;          /*   0 GA_SLOT_FREE / GA_SLOT_LIVE */
    uint32_t pid;            /*   4 as the member's own pid namespace numbers it */
    uint64_t start;          /*   8 /proc/<pid>/stat field 22, clock ticks after boot */
    uint64_t pidns;          /*  16 inode of /proc/<pid>/ns/pid (0: unknown) */
    uint64_t committed;      /*  24 bytes counted against the cap */
    uint64_t committed_peak; /*  32 highest committed */
    uint64_t in_use;         /*  40 figures the shim reports (ga_group_set_figures) */
    uint64_t reserved;       /*  48 */
    uint64_t peak;           /*  56 */
    char mode[16];           /*  64 NUL-terminated mode name */
    uint64_t image;          /*  80 this process image's mark (exec keeps pid and start time);
                              *     0 in slots of gpuarena before it: top.py does not read it */
    uint32_t exiting;        /*  88 1: the process is in its exit, past gpuarena's handler, and
                              *     keeps its share until it is gone (ga_group_exit) */
    uint32_t spare0;         /*  92 */
    uint64_t exe_dev;        /*  96 the program file of the image that joined (/proc/<pid>/exe): */
    uint64_t exe_ino;        /* 104 another one there is an exec, whose memory went with it;
                              *     0 in slots of gpuarena before it: not compared */
    uint8_t spare[GA_LEDGER_SLOT - 112];
} ga_ledger_slot_t;

typedef struct ga_ledger {
    char magic[8];           /*   0 GA_LEDGER_MAGIC */
    uint32_t version;        /*   8 GA_GROUP_VERSION */
    uint32_t header_size;    /*  12 GA_LEDGER_HEADER */
    uint32_t slot_size;      /*  16 GA_LEDGER_SLOT */
    uint32_t nslots;         /*  20 GA_GROUP_SLOTS */
    uint32_t hwm;            /*  24 slots [0, hwm) have ever been used: the only ones scanned */
    uint32_t uid;            /*  28 owner */
    uint64_t cap;            /*  32 bytes, shared by the group on this device */
    uint8_t uuid[16];        /*  40 the device (cuDeviceGetUuid_v2) */
    char name[72];           /*  56 the group's name, NUL-terminated */
    pthread_mutex_t lock;    /* 128 robust, process-shared */
    uint8_t spare[GA_LEDGER_HEADER - 128 - sizeof(pthread_mutex_t)];
    ga_ledger_slot_t slots[GA_GROUP_SLOTS]; /* 512 */
} ga_ledger_t;

_Static_assert(sizeof(ga_ledger_slot_t) == GA_LEDGER_SLOT, "slot size is part of the format");
_Static_assert(offsetof(ga_ledger_slot_t, mode) == 64, "slot layout is part of the format");
_Static_assert(offsetof(ga_ledger_slot_t, exe_ino) == 104, "slot layout is part of the format");
_Static_assert(offsetof(ga_ledger_t, cap) == 32, "header layout is part of the format");
_Static_assert(offsetof(ga_ledger_t, name) == 56, "header layout is part of the format");
_Static_assert(offsetof(ga_ledger_t, lock) == 128, "the mutex sits after the fields top reads");
_Static_assert(sizeof(pthread_mutex_t) <= 128, "the mutex fits its reserved space");
_Static_assert(offsetof(ga_ledger_t, slots) == GA_LEDGER_HEADER, "slots follow the header");
_Static_assert(sizeof(ga_ledger_t) == GA_LEDGER_SIZE, "the file is header plus slots");

#endif
