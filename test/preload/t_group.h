/* Preload tests of process groups (t_group.c, t_group_edges.c): the helpers they share, defined in
 * t_group.c. */
#ifndef T_GROUP_H
#define T_GROUP_H

#include "preload_test.h"

#include <stdint.h>
#include <sys/types.h>

/* The test's ledger folder and "GPUARENA_GROUP=name" (group_env). */
extern char g_dir[64], g_group[64];
/* The member's context, for its threads. */
extern CUcontext g_ctx;

/* A fresh group, ledger folder and shared driver counter for this test. */
void group_env(const char *limit);
void group_cleanup(void);
void member_start(const char *mode);
pid_t group_holder(size_t bytes);
/* The member's slot's figure at `field` (its offset in the slot: in_use, reserved, peak) in the
 * ledger of device dev. */
uint64_t ledger_figure_on(int dev, pid_t pid, size_t field);

/* The tests of t_group_edges.c, added to the "group" case. */
void pt_group_edges_add(TCase *tc);

#endif
