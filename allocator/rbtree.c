/* gpuarena allocator: an intrusive red-black tree, the ordered structure behind the bins (free
 * chunks by size, then address) and the regions (runs of chunks by address).
 *
 * Why red-black rather than AVL or a skip list: its bounds are worst-case O(log n) per operation
 * (a skip list's are only expected), and its rebalancing is amortised O(1) rotations for both
 * insertion and deletion (AVL deletion may rotate all the way up), which matters because bins
 * gain and lose chunks on nearly every allocation and free. The nodes live inside the chunk
 * structs and the caller links a new leaf where its own order says (ga_rb_link), so nothing here
 * compares keys or allocates. The colour is the low bit of the parent pointer (1 = black); a NULL
 * child is a black leaf. Written from the textbook algorithm (Cormen et al., "Introduction to
 * Algorithms", ch. 13) with NULL leaves, so the fixups track the parent of a possibly-NULL node.
 */
#include "internal.h"

static inline void set_parent(ga_rbnode_t *n, ga_rbnode_t *p)
{
    n->parent_color = (uintptr_t)p | (n->parent_color & 1);
}
static inline void set_black(ga_rbnode_t *n) { n->parent_color |= 1; }
static inline void set_red(ga_rbnode_t *n) { n->parent_color &= ~(uintptr_t)1; }
static inline int is_red(const ga_rbnode_t *n) { return n && !(n->parent_color & 1); }

/* Puts `to` where `from` hangs under its parent (or at the root). */
static inline void replace_child(ga_rbnode_t **root, ga_rbnode_t *parent, ga_rbnode_t *from,
                                 ga_rbnode_t *to)
{
    if (!parent)
        *root = to;
    else if (parent->left == from)
        parent->left = to;
    else
        parent->right = to;
}

static void rotate_left(ga_rbnode_t **root, ga_rbnode_t *x)
{
    ga_rbnode_t *y = x->right, *p = ga_rb_parent(x);
    x->right = y->left;
    if (y->left)
        set_parent(y->left, x);
    set_parent(y, p);
    replace_child(root, p, x, y);
    y->left = x;
    set_parent(x, y);
}

static void rotate_right(ga_rbnode_t **root, ga_rbnode_t *x)
{
    ga_rbnode_t *y = x->left, *p = ga_rb_parent(x);
    x->left = y->right;
    if (y->right)
        set_parent(y->right, x);
    set_parent(y, p);
    replace_child(root, p, x, y);
    y->right = x;
    set_parent(x, y);
}

void ga_rb_insert_fixup(ga_rbnode_t **root, ga_rbnode_t *n)
{
    ga_rbnode_t *p;
    while ((p = ga_rb_parent(n)) && is_red(p)) {
        ga_rbnode_t *g = ga_rb_parent(p); /* exists: a red node is never the root */
        int left = p == g->left;
        ga_rbnode_t *uncle = left ? g->right : g->left;
        if (is_red(uncle)) { /* push the red up two levels */
            set_black(p);
            set_black(uncle);
            set_red(g);
            n = g;
            continue;
        }
        if (n == (left ? p->right : p->left)) { /* inner grandchild: make it outer */
            if (left)
                rotate_left(root, p);
            else
                rotate_right(root, p);
            n = p;
            p = ga_rb_parent(n);
        }
        set_black(p);
        set_red(g);
        if (left)
            rotate_right(root, g);
        else
            rotate_left(root, g);
        break;
    }
    set_black(*root);
}

/* Restores the black height after a black node left the tree; x (maybe NULL) carries an extra
 * black and hangs from xp. */
static void erase_fixup(ga_rbnode_t **root, ga_rbnode_t *x, ga_rbnode_t *xp)
{
    while (x != *root && !is_red(x)) {
        int left = x == xp->left;
        ga_rbnode_t *w = left ? xp->right : xp->left; /* exists: its side is a black taller */
        if (is_red(w)) {
            set_black(w);
            set_red(xp);
            if (left)
                rotate_left(root, xp);
            else
                rotate_right(root, xp);
            w = left ? xp->right : xp->left;
        }
        ga_rbnode_t *near = left ? w->left : w->right, *far = left ? w->right : w->left;
        if (!is_red(near) && !is_red(far)) {
            set_red(w);
            x = xp;
            xp = ga_rb_parent(x);
            continue;
        }
        if (!is_red(far)) {
            set_black(near);
            set_red(w);
            if (left)
                rotate_right(root, w);
            else
                rotate_left(root, w);
            w = left ? xp->right : xp->left;
            far = left ? w->right : w->left;
        }
        w->parent_color = (w->parent_color & ~(uintptr_t)1) | (xp->parent_color & 1);
        set_black(xp);
        set_black(far);
        if (left)
            rotate_left(root, xp);
        else
            rotate_right(root, xp);
        x = *root;
        break;
    }
    if (x)
        set_black(x);
}

void ga_rb_erase(ga_rbnode_t **root, ga_rbnode_t *z)
{
    ga_rbnode_t *x, *xp, *zp = ga_rb_parent(z);
    int removed_black;
    if (!z->left || !z->right) { /* at most one child: it takes z's place */
        x = z->left ? z->left : z->right;
        xp = zp;
        removed_black = ga_rb_is_black(z);
        replace_child(root, zp, z, x);
        if (x)
            set_parent(x, zp);
    } else { /* two children: the successor y (no left child) takes z's place and colour */
        ga_rbnode_t *y = z->right;
        while (y->left)
            y = y->left;
        removed_black = ga_rb_is_black(y);
        x = y->right;
        if (ga_rb_parent(y) == z) {
            xp = y;
        } else {
            xp = ga_rb_parent(y);
            xp->left = x;
            if (x)
                set_parent(x, xp);
            y->right = z->right;
            set_parent(y->right, y);
        }
        replace_child(root, zp, z, y);
        y->parent_color = z->parent_color; /* z's parent and z's colour */
        y->left = z->left;
        set_parent(y->left, y);
    }
    if (removed_black)
        erase_fixup(root, x, xp);
}

ga_rbnode_t *ga_rb_first(ga_rbnode_t *n)
{
    if (n)
        while (n->left)
            n = n->left;
    return n;
}

ga_rbnode_t *ga_rb_last(ga_rbnode_t *n)
{
    if (n)
        while (n->right)
            n = n->right;
    return n;
}

ga_rbnode_t *ga_rb_next(const ga_rbnode_t *n)
{
    if (n->right)
        return ga_rb_first(n->right);
    const ga_rbnode_t *p;
    while ((p = ga_rb_parent(n)) && n == p->right)
        n = p;
    return (ga_rbnode_t *)p;
}
