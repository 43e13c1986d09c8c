/* ga_group.h: the group ledger (GPUARENA_GROUP=NAME), one cap per device shared by every process of
 * one user that names the same group, and the parser for the device plugins' limit variables
 * (HAMi, KAI: CUDA_DEVICE_MEMORY_LIMIT[_i]).
 *
 * Plain C with no CUDA types and no shim globals, so the ledger can be driven by a standalone
 * multi-process test (test/group/) and read by `gpuarena top` without the shim. The on-disk layout
 * below is a contract with scripts/gpuarena_cli/top.py: change GA_GROUP_VERSION with it.
 *
 * Ledger: /dev/shm/gpuarena-<uid>-<name>-<uuid as 32 hex digits>, mode 0600, owned by the user.
 * A header (magic, version, cap, device UUID, group name, a robust process-shared mutex) and
 * GA_GROUP_SLOTS slots, one per member process {pid, start time, pid namespace, committed bytes,
 * figures for top}. Every increase of a member's committed bytes happens under the mutex after
 * summing all slots, so the group's total can never pass the cap (group.c explains why). A member
 * killed at any point is found dead (pid gone, or its /proc start time differs, so a reused pid is
 * not mistaken for it) and its share taken back, at the latest before another member is refused.
 */
#ifndef GA_GROUP_H
#define GA_GROUP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GA_GROUP_NAME_MAX 64   /* letters, digits, '-', '_', '.'; at most this many */
#define GA_GROUP_VERSION 1     /* the ledger's format; top.py reads the same number */
#define GA_GROUP_SLOTS 256     /* member processes per group and device */
#define GA_GROUP_DIR_DEFAULT "/dev/shm"
/* The size of the buffers the group's messages (and every ga_log line) are built in: a ledger's
 * messages name its folder twice (up to 511 bytes each) and end with the fix, which 512 bytes cut
 * off under a long GPUARENA_GROUP_DIR (an outside check, helper-144). */
#define GA_MSG_MAX 4096

typedef struct ga_group ga_group_t;

/* 1 when name is a valid group name, else 0 with "gpuarena: GPUARENA_GROUP='...' ..." in err. */
int ga_group_name_ok(const char *name, char *err, size_t errlen);

/* Joins (or creates) the ledger of group `name` on the device with this UUID (the 16 bytes of
 * cuDeviceGetUuid_v2) and takes a slot for the calling process. dir: where ledgers live (NULL:
 * GA_GROUP_DIR_DEFAULT; tests pass their own). cap: GPUARENA_LIMIT in bytes for this device.
 * The cap is fixed while the group has live members: a different cap is refused with a message
 * naming both values; a ledger whose members are all gone takes the newcomer's cap.
 * Returns NULL with a "gpuarena: ..." message (saying how to fix it) in err on failure. */
ga_group_t *ga_group_open(const char *dir, const char *name, const uint8_t uuid[16], uint64_t cap,
                          char *err, size_t errlen);

/* ga_group_open for a cap set by cap_var (a literal such as "CUDA_DEVICE_MEMORY_LIMIT", which a
 * refusal names; NULL: GPUARENA_LIMIT). */
ga_group_t *ga_group_open_from(const char *dir, const char *name, const uint8_t uuid[16],
                               uint64_t cap, const char *cap_var, char *err, size_t errlen);

/* As ga_group_open (the ledger made or mapped, the name, the folder and the cap checked, every
 * refusal the same), but no slot is taken: the process becomes a member at its first commit, so
 * `gpuarena top` lists it only on devices it uses. The shim opens every device's ledger so at
 * cuInit. That first commit settles the cap as a join does: refused (said once on stderr) while
 * the group's live members run with another cap, the newcomer's when it has none; and refused
 * when the group is full (ga_group_member then says 0). Until then the process holds nothing.
 * cap_var: as ga_group_open_from. */
ga_group_t *ga_group_open_unjoined(const char *dir, const char *name, const uint8_t uuid[16],
                                   uint64_t cap, const char *cap_var, char *err, size_t errlen);

/* Adds bytes to this process's share if the group's total stays within the cap (dead members'
 * shares are taken back first when it would not). 1: committed; 0: over the cap, nothing changed.
 * Thread safe. When the ledger file was removed from its path meanwhile (a /dev/shm cleanup,
 * systemd-logind's RemoveIPC), the process first moves its share to the ledger the path names now
 * (making one), saying so on stderr once, so old and new members count against one cap again. */
int ga_group_commit(ga_group_t *g, uint64_t bytes);

/* Adds bytes the process holds already, whatever the cap says (a driver pool found keeping more
 * than was counted, mempool.c): the total may then stand above the cap until they go. */
void ga_group_hold(ga_group_t *g, uint64_t bytes);

/* Gives bytes of this process's share back (never below zero). Thread safe, lock free. */
void ga_group_uncommit(ga_group_t *g, uint64_t bytes);

/* The group's committed total over its live members (dead members' shares taken back first). */
uint64_t ga_group_used(ga_group_t *g);

/* The group's cap, and this process's own committed bytes. */
uint64_t ga_group_cap(const ga_group_t *g);
uint64_t ga_group_mine(const ga_group_t *g);

/* Figures `gpuarena top` shows for this process (mode: a short name, cut to 15 characters). */
void ga_group_set_figures(ga_group_t *g, uint64_t in_use, uint64_t reserved, uint64_t peak,
                          const char *mode);

/* In a forked child (call it from the atfork child handler, before any other ga_group_ call, and
 * before the child gives up its copy of the parent's memory): the parent's slot and share stay the
 * parent's; the child takes a slot of its own, at zero, at its first commit (a child that never
 * allocates takes none). Returns 1. */
int ga_group_fork_child(ga_group_t *g);

/* 1 when this process holds a slot (a forked child: once a commit took one). A commit refused
 * while this says 0 was refused because the group is full, not for want of bytes. */
int ga_group_member(const ga_group_t *g);
/* 1 when this process's first commit found every slot taken: what ga_group_member's 0 means to
 * an out-of-memory line. A process that has made no commit yet (a vmm member whose first block the
 * group's room refused before any commit) is no member and not refused for fullness: it was told
 * "the group is full" in a group of two (an outside check, 2026-12-07). */
int ga_group_full(const ga_group_t *g);
/* 1 when this process's last commit was refused because the ledger cannot be used (its lock is
 * damaged, or it was removed and could not be made again; said when it happened), not for bytes:
 * the out-of-memory line said "the device itself is full" of a removed ledger's folder (an outside
 * check, 2026-12-07). */
int ga_group_broken(const ga_group_t *g);
/* 1 when this process, which holds no slot, asks for another cap than the one the group runs with
 * while the group holds bytes (group_used: ga_group_used) or since its first commit was refused for
 * it (said then): its commits are refused whatever the bytes, so no room is promised and its
 * out-of-memory names the clash. cuMemGetInfo and NVML said 724 MiB free of 1 GiB beside a member
 * that set 2 GiB, and the refusal blamed a full device or group (an outside check, 2026-12-07). */
int ga_group_clashes(const ga_group_t *g, uint64_t group_used);

/* Leaves the group: the slot and its share are given back; the last member out removes the
 * ledger, if the path still names the file it joined (after a removal it names a newer group's).
 * The mapping and g stay valid, so other threads still inside a ga_group_ call (a program that
 * returns from main while its threads allocate) touch mapped memory; later commits pass without
 * the ledger (the process is leaving, its share is already given back, and the shim's own per-process
 * cap still bounds it), so exiting threads see no out-of-memory. For the process's exit: the kernel
 * takes the mapping. NULL is accepted. */
void ga_group_close(ga_group_t *g);

/* ga_group_close for the process's exit (the shim's destructor). While other members live, the
 * slot stays, with its share, for them to reclaim once the process is gone (ga_reclaim: its
 * /proc entry gone, or a zombie): until then the driver holds the process's device memory, and
 * the share given back at the destructor let another member be granted memory the device still
 * held (66 MiB held under a 64 MiB group cap, an outside test, 2026-12-06). The slot is marked
 * exiting. With no member staying (none, or all in their exit too), as ga_group_close: the slot
 * freed, the ledger removed. NULL is accepted. */
void ga_group_exit(ga_group_t *g);

/* ga_group_close, then the mapping and g are freed: for an owner that knows no other thread can
 * call in any more (tests, a group given up early). NULL is accepted. */
void ga_group_free(ga_group_t *g);

/* The ledger's path for these keys (for messages and tests); 0, or -1 when it does not fit. */
int ga_group_path(const char *dir, const char *name, const uint8_t uuid[16], char *out, size_t n);

/* The live members of a group's ledger on one device, read without joining (NVML's process list,
 * tools). Fills at most max entries; returns how many members live (may exceed max), or -1 when
 * there is no readable ledger of this format. */
typedef struct ga_group_member {
    uint32_t pid;
    uint64_t committed;
} ga_group_member_t;
int ga_group_list(const char *dir, const char *name, const uint8_t uuid[16], ga_group_member_t *out,
                  int max);
/* ga_group_list that also gives the cap the ledger runs with (*cap, where the result is >= 0). */
int ga_group_peek(const char *dir, const char *name, const uint8_t uuid[16], ga_group_member_t *out,
                  int max, uint64_t *cap);

/* HAMi and KAI device plugins' limits: CUDA_DEVICE_MEMORY_LIMIT_<dev> if set and not empty, else
 * CUDA_DEVICE_MEMORY_LIMIT, looked up in envp (an environ-style array: pure, no getenv). dev is
 * the CUDA ordinal the process sees. Returns 1 with *bytes set, 0 when neither is set, -1 with a
 * "gpuarena: ..." message in err when the value is not a size. */
int ga_hami_limit(char *const *envp, int dev, uint64_t *bytes, char *err, size_t errlen);

/* The capped memory view of one device, for cuMemGetInfo and NVML's memory queries. Provided by
 * the shim (not by group.c). uuid: the device's 16 bytes; real_total: its total as NVML says.
 * Returns 1 when gpuarena caps that device, with *total = the cap (never above the device's real
 * total) and *used = what the group (or, without a group, this process) holds against it,
 * *used <= *total; 0 to pass the real answer through (no cap, or a bad setting). Before the
 * process's first CUDA call the cap comes from the options alone (shim/ctx.c). Never calls NVML. */
/* Returns 2 when the view is cuMemGetInfo's own (the device's free memory and the pools' idle
 * bytes already in it: nothing more to apply), 1 when the device's free memory is not in it (before
 * the first CUDA call, or no context on the device: the caller bounds free by it). */
int ga_mem_view(const uint8_t uuid[16], uint64_t real_total, uint64_t *total, uint64_t *used);
/* This process's own use of the device in that view (what it holds less its pools' idle bytes),
 * for NVML's process list; 0 when the shim has not set the device up. Provided by the shim. */
int ga_mem_view_self(const uint8_t uuid[16], uint64_t *used);

/* shim/nvml.c's entry points for the interposition code: the hook for an NVML name, given what the
 * real dlsym found (returned unchanged for names nvml.c does not hook, or when found is NULL); and
 * the real NVML function of that name (not the hook), or NULL. */
void *ga_nvml_hook_for(const char *symbol, void *found);
void *ga_nvml_real(const char *symbol);

#ifdef __cplusplus
}
#endif
#endif
