/* Test backends: see backends.h. The fake one separates ranges by a gap so that an arena bug
 * that merged chunks across regions would show up as a tiling failure in ga_check. */
#include <stdlib.h>
#include <string.h>

#include "backends.h"

static int fake_reserve(void *ctx, size_t size, uintptr_t *base)
{
    fake_backend_t *f = ctx;
    if (f->nasked < FAKE_LOG_MAX)
        f->asked[f->nasked] = size;
    int refuse = (f->fail_above && size > f->fail_above) ||
                 (f->capacity && f->outstanding + size > f->capacity) || f->fail_calls > 0;
    if (f->fail_calls > 0)
        f->fail_calls--;
    if (f->nasked < FAKE_LOG_MAX)
        f->granted[f->nasked++] = !refuse;
    if (refuse) {
        f->refusals++;
        return 1;
    }
    *base = f->fixed_base ? f->fixed_base : f->next_base;
    f->next_base += size + ((size_t)1 << 20);
    f->outstanding += size;
    f->reserves++;
    return 0;
}

static int fake_release(void *ctx, uintptr_t base, size_t size)
{
    fake_backend_t *f = ctx;
    (void)base;
    f->outstanding -= size;
    f->releases++;
    return 0;
}

void fake_init(fake_backend_t *f)
{
    memset(f, 0, sizeof *f);
    f->next_base = (uintptr_t)1 << 40;
}

ga_backend_t fake_backend(fake_backend_t *f)
{
    ga_backend_t b = {fake_reserve, fake_release, f};
    return b;
}

static int host_reserve(void *ctx, size_t size, uintptr_t *base)
{
    host_backend_t *h = ctx;
    void *p = aligned_alloc(GA_ALIGN, size);
    if (!p)
        return 1;
    *base = (uintptr_t)p;
    h->reserves++;
    h->outstanding += size;
    return 0;
}

static int host_release(void *ctx, uintptr_t base, size_t size)
{
    host_backend_t *h = ctx;
    free((void *)base);
    h->releases++;
    h->outstanding -= size;
    return 0;
}

ga_backend_t host_backend(host_backend_t *h)
{
    memset(h, 0, sizeof *h);
    ga_backend_t b = {host_reserve, host_release, h};
    return b;
}
