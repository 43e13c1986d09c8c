/* group_test (group_test.c, group_test_files.c): the sizes, the test device, the TAP line and the
 * ledger helpers both files use, defined in group_test.c; the cases group_test_files.c holds, run
 * from group_test.c's main. */
#ifndef GROUP_TEST_H
#define GROUP_TEST_H

#include <stdint.h>

#include "ga_group.h"
#include "group_layout.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define CAP GIB

/* The directory the ledgers go to (argv[1]) and the first test device's uuid. */
extern const char *g_dir;
extern const uint8_t DEV0[16];

/* One TAP line, numbered; returns ok. */
int tap(int ok, const char *fmt, ...);
ga_group_t *open_or_die(const char *name, const uint8_t *uuid, uint64_t cap);
/* The ledger file mapped by the test itself, to read or forge slots. */
ga_ledger_t *map_ledger(const char *name, const uint8_t *uuid);
uint64_t own_start(void);
/* A live slot for pid written straight into the ledger. */
ga_ledger_slot_t *forge(ga_ledger_t *l, uint32_t pid, uint64_t start, uint64_t pidns,
                        uint64_t committed);

/* group_test_files.c */
void test_removed(void);
void test_fds_closed(void);
void test_fork_orphan(void);
void test_exec(void);
void test_planted(void);
void test_full_folder(void);
void test_full_folder_join(void);
void test_map_refused(void);
void test_exit_threads(void);
void test_files(void);

/* group_test_stale.c */
void test_stale_lock(void);
void test_held_lock_said(void);
void test_long_path(void);
void test_corrupt_sum(void);
void test_killed_while_making(void);

#endif
