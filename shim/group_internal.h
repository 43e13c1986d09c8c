/* group_internal.h: what the group ledger's two files share, not part of the shim's interface
 * (ga_group.h is). group.c has the ledger's mutex, its slots and the members' accounting;
 * group_join.c joins a ledger, moves to a new one when it was removed, and leaves it. They were
 * one file until it passed the house's ~800 lines, and the halves still meet under the ledger's
 * mutex: a join reclaims and claims slots (group.c), a commit that finds its ledger removed moves
 * to the new one (group_join.c), and both read and write the same struct ga_group. So the struct
 * and these functions are declared here; no variable is shared between the files.
 */
#ifndef GA_GROUP_INTERNAL_H
#define GA_GROUP_INTERNAL_H

#include "ga_group.h"
#include "group_layout.h"

#include <stdint.h>
#include <sys/types.h>

/* l and slot change together only under the old ledger's mutex (ga_move), and a mapping is never
 * unmapped while the process may still run threads (ga_group_close keeps it): a thread that loaded
 * either pointer before a change or a close still touches mapped memory. */
struct ga_group {
    ga_ledger_t *l;
    ga_ledger_slot_t *slot; /* ours; NULL until the first commit takes one (ga_group_open_unjoined,
                             * a forked child) */
    uint64_t cap;           /* the cap this process asks for (GPUARENA_LIMIT on the device) */
    int clash;              /* a first commit found the group running with another cap: said */
    int full;               /* the last first commit found every slot taken (ga_group_full) */
    int broken;             /* the last commit was refused because the ledger cannot be used: its
                             * lock is damaged, or it was removed and could not be made again */
    uint64_t pidns;         /* our pid namespace, to know whose liveness we can judge */
    dev_t dev;              /* the mapped file's identity, to know it is still the one at path */
    ino_t ino;
    int fd;                 /* the mapped file, open: fstat tells at a commit whether it was removed */
    int left;               /* ga_group_close ran: commits refused, the slot is given back */
    int told;               /* the removal of the ledger has been said */
    const char *cap_var;    /* the variable that set this process's cap (a literal) */
    char dir[512];
    char path[512];
};

#define LD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* ---- group.c (each function says more where it is defined) ---- */
/* The ledger's robust mutex, taken in slices of 100 ms; EOWNERDEAD made consistent. 0, or the
 * error that kept it from being taken (a damaged ledger, said once). Whether a mapped ledger's
 * mutex is the kind gpuarena makes. */
int ga_lock(ga_ledger_t *l);
int ga_lock_sound(const ga_ledger_t *l);
void ga_unlock(ga_ledger_t *l);
/* Under the mutex: a slot made free; the dead members' slots freed (returns the members left);
 * the lowest free slot taken for the calling process with `carry` bytes (NULL: the group is full). */
void ga_free_slot(ga_ledger_slot_t *s);
unsigned ga_reclaim(ga_group_t *g);
ga_ledger_slot_t *ga_claim(ga_group_t *g, uint64_t carry);

/* ---- group_join.c ---- */
/* Under the mutex: whether the mapped file is still the one at the path; the move of this
 * process's share to the ledger the path names now (1 moved, 0 not). */
int ga_still_there(const ga_group_t *g);
int ga_move(ga_group_t *g);

#endif
