/* gpuarena allocator core: arena life cycle, the size-ordered bins, the live table, and the hot
 * paths ga_alloc and ga_free (their bodies in arena_hot.h, which the vmm pool inlines too).
 *
 * Placement is exact best fit: the bin of the request holds a tree ordered by (size, base), and one
 * descent finds the smallest chunk there that fits, lowest address among equal sizes; if none
 * does, the first non-empty bin above it (two bit scans) gives its leftmost chunk, which fits, as
 * does every chunk in later bins, and they are all larger. Every step is O(log n) in the number of
 * free chunks, so an arena fragmented into 100,000 holes of one size costs a few more tree levels,
 * not a list scan. A chunk is split whenever anything is left over (the remainder is then at least
 * GA_ALIGN, the minimum chunk), unlike BFC which keeps up to half a chunk as waste. A free merges
 * at once with free address neighbours. Regions, growth and interior lookup live in region.c; the
 * tree itself in rbtree.c; statistics and the invariant walker in check.c.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "arena_hot.h"

/* Host memory --------------------------------------------------------------------------------- */

long ga_host_fail_after = -1;
uint64_t ga_host_bytes;

static int host_fails(size_t bytes)
{
    __atomic_fetch_add(&ga_host_bytes, (uint64_t)bytes, __ATOMIC_RELAXED);
    if (ga_host_fail_after < 0)
        return 0;
    if (ga_host_fail_after == 0)
        return 1;
    ga_host_fail_after--;
    return 0;
}

void *ga_host_malloc(size_t size) { return host_fails(size) ? NULL : malloc(size); }
void *ga_host_calloc(size_t n, size_t size)
{
    return host_fails(n * size) ? NULL : calloc(n, size);
}
void *ga_host_realloc(void *p, size_t size) { return host_fails(size) ? NULL : realloc(p, size); }
void *ga_host_aligned_alloc(size_t align, size_t size)
{
    return host_fails(size) ? NULL : aligned_alloc(align, (size + align - 1) / align * align);
}

/* Chunk and run struct pool ------------------------------------------------------------------- */

/* Hints that [p, p + bytes) be backed by huge pages; where the kernel has them off, or this is
 * not Linux, nothing happens and the pool works the same. */
static void hint_huge_pages(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#else
    (void)p, (void)bytes;
#endif
}

/* A new block, its items (all but the header) handed out in address order as they are needed, so
 * structs made one after another (a split's remainders) share cache lines and pages. Carved on
 * demand rather than all pushed on the free list at once: a small arena (a short trace's replay,
 * each of vmm's areas) uses a fraction of its first block's 255 items, and the push wrote them all
 * (8 instructions per event of a minimalloc replay; taking items one by one costs about as much,
 * so the gain is the 16 KiB not written). -1 if host memory ran out. */
static int add_block(ga_arena_t *a)
{
    size_t bytes = a->next_block_bytes ? a->next_block_bytes : GA_SLAB_FIRST;
    int huge = bytes >= GA_SLAB_BYTES;
    ga_item_t *blk = ga_host_aligned_alloc(huge ? GA_SLAB_BYTES : GA_CACHE_LINE, bytes);
    if (!blk)
        return -1;
    if (huge)
        hint_huge_pages(blk, bytes);
    blk->block.next = a->blocks;
    blk->block.bytes = bytes;
    a->blocks = blk;
    a->carve = blk + 1;
    a->carve_end = blk + bytes / sizeof *blk;
    a->next_block_bytes = huge ? bytes : bytes * 2;
    return 0;
}

__attribute__((noinline, cold)) ga_item_t *ga_item_new_block(ga_arena_t *a)
{
    if (add_block(a) != 0)
        return NULL;
    return ga_item_new(a);
}

void ga_item_put(ga_arena_t *a, ga_item_t *it)
{
    it->next_spare = a->spare;
    a->spare = it; /* the structs in use are counted by ga_check, not here */
}

/* Live table ---------------------------------------------------------------------------------- */

/* Rebuilds the table at `cap` slots (a power of two); -1 if host memory ran out (unchanged). A
 * table of 2 MiB or more gets a block of its own, aligned to 2 MiB and offered for huge pages, as
 * the chunk structs' largest blocks are: at 100,000 live allocations a table of 4 KiB pages took a
 * TLB miss on most probes (bench-scale's mixed pair at 100,000 holes, median of 24 alternated
 * runs on the shared VM: 52.0 -> 48.9 ns). Zeroed here: its rehash writes most pages anyway. */
static int live_resize(ga_livetab_t *t, size_t cap)
{
    size_t bytes = cap * sizeof(ga_live_slot_t);
    ga_live_slot_t *slots;
    if (bytes >= GA_SLAB_BYTES) {
        if (!(slots = ga_host_aligned_alloc(GA_SLAB_BYTES, bytes)))
            return -1;
        hint_huge_pages(slots, bytes);
        memset(slots, 0, bytes);
    } else if (!(slots = ga_host_calloc(cap, sizeof *slots))) {
        return -1;
    }
    ga_livetab_t n = {.slots = slots, .mask = cap - 1, .count = t->count,
                      .limit = cap / GA_LIVE_SPREAD,
                      .shift = 64u - (unsigned)__builtin_ctzll((uint64_t)cap)};
    for (size_t i = 0; t->slots && i <= t->mask; i++) {
        if (!t->slots[i].chunk)
            continue;
        size_t j = ga_live_home(&n, t->slots[i].chunk->base);
        while (slots[j].chunk)
            j = (j + 1) & n.mask;
        slots[j] = t->slots[i];
    }
    free(t->slots);
    *t = n;
    return 0;
}

/* 8192 slots (64 KiB) to start: a fresh arena then serves 1,024 live allocations before its first
 * rehash. Until 2026-12-07 it served 512, so somas_bert_base (peak near 750 live) paid a rehash
 * and a calloc of the doubled table in every replay: 0.11 L1 misses and 3.4 instructions an event
 * (callgrind, 33 replays), 0.4-1.0 ns an event in bench-alloc (from 64, four rehashes). */
int ga_live_grow(ga_livetab_t *t)
{
    return live_resize(t, t->slots ? (t->mask + 1) * 2 : 8192);
}

void ga_live_fini(ga_livetab_t *t)
{
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* Bins ---------------------------------------------------------------------------------------- */

/* A tree that already holds chunks: a new lowest chunk hangs left of the old one (which has no
 * left child; the root is then not even read, which matters when the tree is large and cold),
 * anything else descends by (size, base). A red leaf under a black parent breaks no rule, so the
 * rebalancing is called only under a red one: a tree of one or two chunks, most of the non-empty
 * bins on the somas traces, never needs it. */
static inline __attribute__((always_inline)) int tree_insert_at(ga_tree_t *t, ga_chunk_t *c)
{
    ga_rbnode_t **link, *parent;
    int depth = 0;
    if (ga_bin_less(c, t->min)) {
        parent = &t->min->u.bin_node;
        link = &parent->left;
        t->min = c;
    } else {
        link = &t->root;
        parent = NULL;
        for (; *link; depth++) {
            parent = *link;
            /* left or right by arithmetic: written as a conditional, gcc made it a branch */
            size_t step = offsetof(ga_rbnode_t, right) - offsetof(ga_rbnode_t, left);
            size_t off = offsetof(ga_rbnode_t, right) - (size_t)ga_bin_less(c, ga_bin_chunk(parent)) * step;
            link = (ga_rbnode_t **)(void *)((char *)parent + off);
        }
    }
    ga_rb_link(&c->u.bin_node, parent, link);
    if (!(parent->parent_color & 1))
        ga_rb_insert_fixup(&t->root, &c->u.bin_node);
    return depth;
}

int ga_tree_insert_slow(ga_tree_t *t, ga_chunk_t *c)
{
    return tree_insert_at(t, c);
}

/* Removal from a tree that keeps at least one chunk. Two cases need no rebalancing and are most
 * removals from small bins: a red leaf goes (a red node never changes a black height), and a root
 * with one child (which then is a red leaf) is replaced by that child, made black. The successor
 * that becomes the new lowest chunk is then the leaf's parent or the root's right child. */
void ga_tree_remove_slow(ga_tree_t *t, ga_chunk_t *c)
{
    ga_rbnode_t *n = &c->u.bin_node, *p = ga_rb_parent(n);
    if (!n->left && !n->right && !(n->parent_color & 1)) { /* a red leaf: it has a parent */
        if (p->left == n) {
            p->left = NULL;
            if (t->min == c)
                t->min = ga_bin_chunk(p);
        } else {
            p->right = NULL;
        }
        return;
    }
    if (!p && (!n->left != !n->right)) {
        ga_rbnode_t *child = n->left ? n->left : n->right;
        child->parent_color = 1; /* a black root */
        t->root = child;
        if (t->min == c)
            t->min = ga_bin_chunk(child);
        return;
    }
    if (t->min == c)
        t->min = ga_bin_chunk(ga_rb_next(n));
    ga_rb_erase(&t->root, n);
}

/* A subdivided bin: the chunk goes to its slice, and the bin's lowest chunk is the lowest
 * non-empty slice's. */
void ga_sub_insert(ga_arena_t *a, ga_bin_t *b, unsigned bin, ga_chunk_t *c)
{
    ga_subbins_t *sub = ga_bin_sub(b);
    unsigned s = ga_sub_of(c->size);
    ga_tree_t *t = &sub->t[s];
    if (t->root) {
        (void)tree_insert_at(t, c); /* inline: one call, not two */
    } else {
        ga_tree_set_root(t, c);
        if (!sub->map)
            ga_bin_mark(a, bin);
        sub->map |= 1ull << s;
    }
    b->t.min = sub->t[__builtin_ctzll(sub->map)].min;
}

void ga_sub_remove(ga_arena_t *a, ga_bin_t *b, unsigned bin, ga_chunk_t *c)
{
    ga_subbins_t *sub = ga_bin_sub(b);
    unsigned s = ga_sub_of(c->size);
    if (ga_tree_remove(&sub->t[s], c)) {
        sub->map &= ~(1ull << s);
        if (!sub->map) { /* empty: whole again, its slices kept for the next subdivision */
            sub->t[0].root = (ga_rbnode_t *)(void *)a->spare_subs;
            a->spare_subs = sub;
            b->t.root = NULL;
            b->t.min = NULL;
            ga_bin_unmark(a, bin);
            return;
        }
    }
    b->t.min = sub->t[__builtin_ctzll(sub->map)].min;
}

/* ga_bin_insert's other cases: a subdivided bin's slice, or a descent of the bin's tree, which
 * cuts the bin into slices when it went deep. */
void ga_bin_insert_slow(ga_arena_t *a, ga_bin_t *b, unsigned bin, ga_chunk_t *c)
{
    if (ga_bin_sub(b))
        ga_sub_insert(a, b, bin, c);
    else if (tree_insert_at(&b->t, c) >= GA_SUB_DEPTH) /* inline: one call, not two */
        ga_bin_subdivide(a, bin);
}

/* ga_bin_remove_at's other cases: a subdivided bin's slice, or a tree that keeps chunks. */
void ga_bin_remove_slow(ga_arena_t *a, ga_bin_t *b, unsigned bin, ga_chunk_t *c)
{
    if (ga_bin_sub(b))
        ga_sub_remove(a, b, bin, c);
    else
        ga_tree_remove_slow(&b->t, c);
}

/* Flattens a tree into a list in order, linked by ->right, with right rotations (the first
 * phase of Day-Stout-Warren): O(n), no memory. */
static ga_rbnode_t *tree_to_list(ga_rbnode_t *root)
{
    ga_rbnode_t head = {.right = root}, *tail = &head, *rest = root;
    while (rest) {
        if (!rest->left) {
            tail = rest;
            rest = rest->right;
        } else {
            ga_rbnode_t *l = rest->left;
            rest->left = l->right;
            l->right = rest;
            rest = l;
            tail->right = l;
        }
    }
    return head.right;
}

/* Cuts an undivided bin into slices. A bin of one size (the first 2 * GA_SL_COUNT bins) is left
 * whole: its lowest chunk always fits. On host memory exhaustion the bin stays one tree, which is
 * as correct, only slower. O(n log n) in the bin's chunks, once per bin. */
__attribute__((noinline, cold)) void ga_bin_subdivide(ga_arena_t *a, unsigned bin)
{
    ga_bin_t *b = &a->bins[bin];
    if (bin < 2 * GA_SL_COUNT || ga_bin_sub(b))
        return;
    ga_subbins_t *sub = a->spare_subs;
    if (sub) {
        a->spare_subs = (ga_subbins_t *)(void *)sub->t[0].root;
        memset(sub, 0, sizeof *sub);
    } else if (!(sub = ga_host_calloc(1, sizeof *sub))) {
        return;
    }
    ga_rbnode_t *n = tree_to_list(b->t.root);
    while (n) {
        ga_rbnode_t *next = n->right;
        ga_chunk_t *c = ga_bin_chunk(n);
        unsigned s = ga_sub_of(c->size);
        ga_tree_insert(&sub->t[s], c);
        sub->map |= 1ull << s;
        n = next;
    }
    a->sliced++;
    b->t.root = (ga_rbnode_t *)((uintptr_t)sub | 1); /* b->t.min, the lowest chunk, unchanged */
}

/* The smallest chunk of at least `need` bytes in one tree (lowest address among equal sizes):
 * the leftmost node not below (need, 0). *depth gets the number of levels descended. */
static ga_chunk_t *tree_fit(const ga_rbnode_t *n, size_t need, int *depth)
{
    ga_chunk_t *best = NULL;
    int d = 0;
    for (; n; d++) { /* selects, not branches: the direction is data, not a pattern */
        ga_chunk_t *c = ga_bin_chunk(n);
        int fits = c->size >= need;
        best = fits ? c : best;
        n = fits ? n->left : n->right;
    }
    *depth = d;
    return best;
}

/* The descent of an undivided bin whose lowest chunk is too small; a deep one subdivides the bin
 * (the chunk found stays the best fit wherever it moves). */
__attribute__((noinline)) ga_chunk_t *ga_bin_fit(ga_arena_t *a, unsigned bin, size_t need)
{
    int depth;
    ga_chunk_t *c = tree_fit(a->bins[bin].t.root, need, &depth);
    if (depth >= GA_SUB_DEPTH)
        ga_bin_subdivide(a, bin);
    return c;
}

/* Best fit inside a subdivided bin: the request's slice (its lowest chunk, or one descent of a
 * small tree), else the lowest chunk of the next non-empty slice; NULL if nothing fits. */
__attribute__((noinline)) ga_chunk_t *ga_sub_fit(const ga_subbins_t *sub, size_t rounded)
{
    unsigned s = ga_sub_of(rounded);
    const ga_tree_t *t = &sub->t[s];
    if (t->min) {
        if (t->min->size >= rounded)
            return t->min;
        int depth;
        ga_chunk_t *c = tree_fit(t->root, rounded, &depth);
        if (c)
            return c;
    }
    uint64_t above = sub->map & (~1ull << s); /* the slices above s (none for the last) */
    return above ? sub->t[__builtin_ctzll(above)].min : NULL;
}

/* Rounding ------------------------------------------------------------------------------------ */

size_t ga_round_size(size_t size)
{
    return ga_round_up(size);
}

/* Life cycle ---------------------------------------------------------------------------------- */

static ga_status_t normalise(ga_config_t *cfg)
{
    if (cfg->initial) {
        cfg->initial = ga_round_size(cfg->initial);
        if (!cfg->initial)
            return GA_EINVAL;
    }
    if (!cfg->initial) /* no initial region to stay within: regions can only come on demand */
        cfg->grow = 1;
    /* Reserve sizes are multiples of GA_ALIGN, so the limit is rounded down to one; a limit under
     * GA_ALIGN stays as it is (no region fits under it) rather than becoming 0, which means none. */
    if (cfg->limit >= GA_ALIGN)
        cfg->limit &= ~(GA_ALIGN - 1);
    if (!cfg->min_region)
        cfg->min_region = (size_t)2 << 20;
    cfg->min_region = ga_round_size(cfg->min_region);
    if (!cfg->min_region)
        return GA_EINVAL;
    cfg->max_region = ga_round_size(cfg->max_region); /* 0 stays 0; too large to round: none */
    if (cfg->max_region && cfg->max_region < cfg->min_region)
        return GA_EINVAL;
    if (cfg->limit && cfg->initial > cfg->limit)
        return GA_ENOMEM;
    return GA_OK;
}

static ga_arena_t *fail_create(ga_arena_t *a, ga_status_t st, ga_status_t *status)
{
    if (status)
        *status = st;
    ga_arena_destroy(a);
    return NULL;
}

ga_arena_t *ga_arena_create(const ga_backend_t *backend, const ga_config_t *config,
                            ga_status_t *status)
{
    if (!backend || !backend->reserve || !backend->release)
        return fail_create(NULL, GA_EINVAL, status);
    ga_arena_t *a = ga_host_malloc(sizeof *a);
    if (!a)
        return fail_create(NULL, GA_ENOHOST, status);
    memset(a, 0, offsetof(ga_arena_t, bins)); /* the bins are read only once written */
    a->backend = *backend;
    if (config)
        a->config = *config;
    ga_status_t st = normalise(&a->config);
    a->lt = &a->live;
    if (st == GA_OK && ga_live_grow(&a->live) != 0) /* the table every arena needs, made now */
        st = GA_ENOHOST;
    if (st == GA_OK && a->config.initial)
        st = ga_region_add(a, a->config.initial);
    if (st != GA_OK)
        return fail_create(a, st, status);
    if (status)
        *status = GA_OK;
    return a;
}

void ga_arena_share_live(ga_arena_t *a, ga_livetab_t *t, size_t area)
{
    ga_live_fini(&a->live); /* no entries: only its count is kept, 0 */
    a->stats.frees = a->stats.allocs;
    a->lt = t;
    a->live_area = area;
}

void ga_arena_destroy(ga_arena_t *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->nregions; i++) {
        ga_region_t *r = a->regions[i];
        (void)a->backend.release(a->backend.ctx, r->base, r->size); /* refused: forgotten */
        free(r);
    }
    free(a->regions);
    for (unsigned i = 0; a->sliced && i < GA_FL_COUNT * GA_SL_COUNT; i++)
        if (ga_bin_marked(a, i)) /* an empty bin is whole */
            free(ga_bin_sub(&a->bins[i]));
    while (a->spare_subs) {
        ga_subbins_t *next = (ga_subbins_t *)(void *)a->spare_subs->t[0].root;
        free(a->spare_subs);
        a->spare_subs = next;
    }
    ga_live_fini(&a->live);
    while (a->blocks) {
        ga_item_t *next = a->blocks->block.next;
        free(a->blocks);
        a->blocks = next;
    }
    free(a);
}

/* Hot paths ----------------------------------------------------------------------------------- */

__attribute__((noinline, cold)) ga_status_t ga_fail_nomem(ga_arena_t *a, size_t rounded)
{
    a->stats.failed_allocs++;
    if (a->stats.reserved - a->stats.in_use >= rounded) /* bytes free in total */
        a->stats.frag_failures++;
    return GA_ENOMEM;
}

__attribute__((noinline, cold)) ga_status_t ga_fail_nohost(ga_arena_t *a)
{
    a->stats.failed_allocs++;
    return GA_ENOHOST;
}

/* The bodies are in arena_hot.h, shared with the vmm pool's common case. ga_alloc and ga_free
 * first take a shorter path: what could fail or needs the rare steps (growth, room in the live
 * table or the struct pool, a run that fills, a bad free) is checked before anything changes (a
 * run that a free empties leaves its tree there, which cannot fail), and only then is the chunk taken or given back; those cases go to the full path (the
 * bodies), which starts afresh. Same placement and the same structures either way; the gain is
 * the full path's work for failures it never has on the common path. Counted with callgrind
 * (one arena replaying a trace again and again, per 100 operations): minimalloc_G 20,816 ->
 * 19,921, somas_bert_base 19,252 -> 18,976; side by side with OffsetAllocator on the 14 lifetime
 * traces (scripts/side-by-side.sh), the median 12.4-12.8 -> 11.1-11.2 ns/op in the same minutes.
 * ga_alloc's short path is in arena_hot.h too (ga_alloc_short), for the vmm pool to inline. */
__attribute__((noinline)) ga_status_t ga_alloc_full(ga_arena_t *a, size_t size, uintptr_t *out)
{
    if (a->lt != &a->live) /* a vmm area's, on the pool's shared table */
        return ga_alloc_body(a, a->lt, 1, a->live_area, size, out);
    return ga_alloc_body(a, &a->live, 0, 0, size, out);
}

ga_status_t ga_alloc(ga_arena_t *a, size_t size, uintptr_t *out)
{
    if (!a || !out)
        return GA_EINVAL;
    return ga_alloc_short(a, size, out);
}

int ga_arena_fits(ga_arena_t *a, size_t size, uintptr_t *at)
{
    size_t rounded = ga_round_size(size);
    unsigned bin;
    ga_chunk_t *c = a && rounded ? ga_find_fit(a, rounded, &bin) : NULL;
    if (c && at)
        *at = c->base; /* ga_alloc places at the start of the chunk it finds */
    return c != NULL;
}

/* Why a free of an address that is not a live base fails; nothing is changed. */
__attribute__((noinline, cold)) ga_status_t ga_classify_bad_free(const ga_arena_t *a, uintptr_t ptr)
{
    int in_region = 0;
    ga_chunk_t *c = ga_live_at(a, ptr, &in_region);
    if (!in_region)
        return GA_ENOTOWNED;
    return c ? GA_EINTERIOR : GA_EDOUBLE;
}

ga_status_t ga_free(ga_arena_t *a, uintptr_t ptr)
{
    return ga_free_sized(a, ptr, NULL);
}

static __attribute__((noinline)) ga_status_t free_full(ga_arena_t *a, uintptr_t ptr, size_t *size)
{
    return ga_free_body(a, &a->live, 0, ptr, size);
}

/* Chunk x, merged into its lower neighbour, leaves its run and goes back to the pool: the run's
 * count and first chunk inline, and a run left empty out of its tree by ga_run_leave, which
 * cannot fail. (Until 2026-12-06 the free's short path instead checked beforehand that each run
 * a merge takes a chunk from kept one, and took the full path otherwise: a load of the run's
 * count before anything was decided, on every free that merges.) */
static inline void leaf_run_leave(ga_arena_t *a, ga_chunk_t *x)
{
    ga_run_t *run = ga_chunk_run(x);
    if (run->count > 1) {
        run->count--;
        if (run->first == x)
            run->first = x->next_phys;
    } else {
        ga_run_leave(a, x);
    }
    ga_item_put(a, (ga_item_t *)x);
}

ga_status_t ga_free_sized(ga_arena_t *a, uintptr_t ptr, size_t *size)
{
    if (!a)
        return GA_EINVAL;
    ga_livetab_t *t = &a->live; /* its slots exist from ga_arena_create on: no count test */
    size_t i = ga_live_home(t, ptr);
    ga_chunk_t *c;
    while ((c = t->slots[i].chunk) && c->base != ptr)
        i = (i + 1) & t->mask;
    if (!c)
        goto full; /* not a live base: the full path says why */
    ga_chunk_t *prev = c->prev_phys, *next = c->next_phys;
    int pf = prev && ga_is_free(prev), nf = next && ga_is_free(next);
    /* Committed: nothing below can fail. */
    ga_live_close_hole(t, i);
    t->count--;
    if (size)
        *size = c->size;
    ga_stats_t *s = &a->stats;
    s->in_use -= c->size;
    s->in_use_requested -= c->u.requested; /* frees: derived (ga_get_stats) */
    if (nf) {
        ga_bin_remove(a, next);
        c->size += next->size;
        c->next_phys = next->next_phys;
        if (c->next_phys)
            c->next_phys->prev_phys = c;
        leaf_run_leave(a, next);
    }
    if (pf) {
        ga_bin_remove(a, prev);
        prev->size += c->size;
        prev->next_phys = c->next_phys;
        if (prev->next_phys)
            prev->next_phys->prev_phys = prev;
        leaf_run_leave(a, c);
        c = prev;
    }
    ga_bin_insert(a, c);
    return GA_OK;
full:
    return free_full(a, ptr, size);
}
