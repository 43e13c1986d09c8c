/* ex_train: the allocation pattern of a training loop. Weights and optimizer state live for the whole
 * run; each step allocates activations layer by layer (growing), small workspaces that die at once,
 * then walks back: gradients, optimizer temporaries, activations freed in reverse. This is where a
 * caching arena pays off against one driver call per tensor, and what `gpuarena compare` measures.
 *
 * Every activation gets a small step- and layer-dependent stamp written and read back, folded into a
 * checksum that must be the same in every mode. cuMemGetInfo is checked for consistency.
 *
 * usage: ex_train [steps=50] [layers=16] [width_kib=1024]; prints time per step (over every step, and
 * over the steps after the first: what a pool that maps memory in its first step costs later) and the
 * checksum.
 */
#include "ex_common.h"

#include <string.h>

typedef struct {
    int layers;
    size_t width;
    CUdeviceptr *act, *grad;
} model_t;

static CUdeviceptr alloc(size_t n)
{
    CUdeviceptr p;
    EX_CHECK(cuMemAlloc(&p, n));
    return p;
}

/* Writes a stamp into the first 64 bytes of p and folds the read-back into *sum. */
static void stamp(CUdeviceptr p, unsigned v, unsigned long long *sum)
{
    unsigned in[16], out[16];
    EX_CHECK(cuMemsetD32(p, v, 16));
    EX_CHECK(cuMemcpyDtoH(out, p, sizeof out));
    for (int i = 0; i < 16; i++)
        in[i] = v;
    if (memcmp(in, out, sizeof in) != 0) {
        fprintf(stderr, "ex_train: activation stamp %u read back wrong\n", v);
        exit(1);
    }
    *sum = *sum * 1000003ULL + out[15];
}

static void forward(model_t *m, int step, unsigned long long *sum)
{
    for (int l = 0; l < m->layers; l++) {
        /* activations grow along the network, as with widening feature maps */
        m->act[l] = alloc(m->width * (size_t)(2 + l % 4) / 2 + 512 * (size_t)l);
        CUdeviceptr ws = alloc(m->width / 8 + 256); /* matmul workspace, dies at once */
        stamp(m->act[l], (unsigned)(step * 1000 + l), sum);
        EX_CHECK(cuMemFree(ws));
    }
}

static void backward(model_t *m)
{
    for (int l = m->layers - 1; l >= 0; l--) {
        m->grad[l] = alloc(m->width);
        CUdeviceptr tmp = alloc(m->width / 2 + 1000);
        EX_CHECK(cuMemFree(tmp));
        EX_CHECK(cuMemFree(m->act[l]));
    }
}

static void optimizer(model_t *m)
{
    for (int l = 0; l < m->layers; l++) {
        CUdeviceptr t1 = alloc(m->width), t2 = alloc(m->width / 4 + 4096);
        EX_CHECK(cuMemFree(t2));
        EX_CHECK(cuMemFree(t1));
        EX_CHECK(cuMemFree(m->grad[l]));
    }
}

int main(int argc, char **argv)
{
    ex_prog = "ex_train";
    ex_error_name = cuGetErrorName;
    int steps = (int)ex_count(argc, argv, 1, 50, 1);
    model_t m = {(int)ex_count(argc, argv, 2, 16, 1), (size_t)(ex_arg(argc, argv, 3, 1024) * 1024), 0, 0};
    CUcontext ctx;
    EX_CHECK(cuInit(0));
    EX_CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    EX_CHECK(cuCtxSetCurrent(ctx));
    m.act = calloc((size_t)m.layers, sizeof *m.act);
    m.grad = calloc((size_t)m.layers, sizeof *m.grad);
    CUdeviceptr *weights = calloc((size_t)m.layers * 3, sizeof *weights);
    if (!m.act || !m.grad || !weights)
        return 1;
    for (int i = 0; i < m.layers * 3; i++) /* weights, then Adam's two moments */
        weights[i] = alloc(m.width);

    size_t free_start, free_peak = (size_t)-1, free_end, total;
    EX_CHECK(cuMemGetInfo(&free_start, &total));
    unsigned long long sum = 0;
    double t0 = ex_now(), t1 = t0;
    for (int s = 0; s < steps; s++) {
        if (s == 1)
            t1 = ex_now(); /* the steps after the first: a pool that maps in its first step has
                            * nothing more to map there */
        size_t f;
        forward(&m, s, &sum);
        EX_CHECK(cuMemGetInfo(&f, &total));
        free_peak = f < free_peak ? f : free_peak;
        backward(&m);
        optimizer(&m);
    }
    double t2 = ex_now(), dt = t2 - t0, later = steps > 1 ? (t2 - t1) / (steps - 1) : dt;
    EX_CHECK(cuMemGetInfo(&free_end, &total));
    if (free_start > total || free_end > total || free_peak > free_end) {
        fprintf(stderr, "ex_train: cuMemGetInfo is inconsistent: total %zu, free %zu at start, %zu at the "
                        "peak, %zu at the end\n", total, free_start, free_peak, free_end);
        return 1;
    }
    for (int i = 0; i < m.layers * 3; i++)
        EX_CHECK(cuMemFree(weights[i]));
    EX_CHECK(cuDevicePrimaryCtxRelease(0));
    printf("ex_train: %d steps, %d layers, %.3f ms/step (%.1f us/step after the first), checksum %016llx, "
           "free %zu MiB of %zu MiB at the peak\n", steps, m.layers, dt * 1e3 / steps, later * 1e6, sum,
           free_peak >> 20, total >> 20);
    free(m.act), free(m.grad), free(weights);
    return 0;
}
