/* The replay's fake backend: see replay_fake.h for what it hands out and why. */
#include "replay_fake.h"

#include "ga_arena.h"

static int fake_reserve(void *ctx, size_t size, uintptr_t *base)
{
    fake_backend_t *fb = ctx;
    uint64_t a = fb->align > GA_ALIGN ? fb->align : GA_ALIGN;
    uint64_t at = (fb->next + a - 1) & ~(a - 1);
    if (size == 0 || (!fb->placed && (at > fb->end || size > fb->end - at)))
        return -1;
    if (fb->cap && (size > fb->cap || fb->held > fb->cap - size))
        return -1;
    if (fb->placed) {
        int got = ga_vafit_take(&fb->fit, size, base);
        if (got != 0)
            return got == -2 ? GA_ENOHOST : -1;
    } else {
        *base = (uintptr_t)at;
        fb->next = at + (((uint64_t)size + GA_ALIGN - 1) & ~(uint64_t)(GA_ALIGN - 1));
    }
    fb->held += size;
    fb->reserves++;
    return 0;
}

static int fake_release(void *ctx, uintptr_t base, size_t size)
{
    fake_backend_t *fb = ctx;
    if (fb->placed)
        (void)ga_vafit_give(&fb->fit, base);
    fb->held -= size;
    fb->releases++;
    return 0;
}

/* vmm's ranges: placed by the model too, aligned to the granularity, as the simulated driver's
 * cuMemAddressReserve places them: under a cap vmm reserves a second range and more, and best
 * fit's ties between ranges follow their order as between regions. */
static int fake_va_reserve(void *ctx, size_t size, uintptr_t *base)
{
    fake_backend_t *fb = ctx;
    int got = ga_vafit_take_aligned(&fb->fit, size, fb->align, base);
    if (got != 0)
        return got == -2 ? GA_ENOHOST : -1;
    fb->held += size;
    fb->reserves++;
    return 0;
}

static void fake_va_release(void *ctx, uintptr_t base, size_t size)
{
    fake_backend_t *fb = ctx;
    (void)ga_vafit_give(&fb->fit, base);
    fb->held -= size;
    fb->releases++;
}

static int fake_map_run(void *ctx, uintptr_t addr, size_t size, size_t n)
{
    fake_backend_t *fb = ctx;
    (void)addr, (void)size;
    fb->maps += n;
    return 0;
}

static void fake_unmap_run(void *ctx, uintptr_t addr, size_t size, size_t n)
{
    fake_backend_t *fb = ctx;
    (void)addr, (void)size;
    fb->unmaps += n;
}


void ga_fake_init(fake_backend_t *fb, size_t align, uint64_t cap, int placed)
{
    *fb = (fake_backend_t){.next = FAKE_BASE, .end = FAKE_END, .align = align, .cap = cap,
                           .placed = placed};
    ga_vafit_init(&fb->fit, FAKE_BASE, FAKE_END);
}

ga_pool_backend_t ga_fake_backend(fake_backend_t *fb, size_t granularity)
{
    return (ga_pool_backend_t){.reserve = fake_reserve, .release = fake_release,
                               .va_reserve = fake_va_reserve, .va_release = fake_va_release,
                               .map_run = fake_map_run, .unmap_run = fake_unmap_run,
                               .granularity = granularity, .ctx = fb};
}

void ga_fake_fini(fake_backend_t *fb)
{
    ga_vafit_fini(&fb->fit);
}
