/* sim_alloc.h: the simulated driver's allocation records, shared by sim_memory.c (which makes,
 * keeps and frees them, under sim_lock) and sim_query.c (which answers the memory information and
 * pointer queries from them). Nothing else includes it. */
#ifndef SIM_ALLOC_H
#define SIM_ALLOC_H

#include "sim_internal.h"

typedef enum { SIM_PLAIN, SIM_ASYNC, SIM_MANAGED } sim_kind_t;

typedef struct sim_alloc {
    CUdeviceptr base;
    size_t size;      /* as requested: what the counters see */
    size_t mapped;    /* rounded to pages: what mmap got */
    int dev;
    const sim_ctx_t *ctx;
    sim_kind_t kind;
    unsigned long long id;
    int free_queued;  /* cuMemFreeAsync called: goes when its stream gets there */
    struct sim_pool *pool; /* SIM_ASYNC: the memory pool it came from (NULL for the others) */
} sim_alloc_t;

/* The allocation containing addr, or NULL; sim_lock held. */
sim_alloc_t *sim_find_locked(CUdeviceptr addr);

#endif
