/* hazard: does an allocator hand out memory that queued GPU work still writes?
 *
 *   hazard blocking|nonblocking|perthread sync|async THREADS [naive]
 *
 * Each of THREADS threads, for ROUNDS rounds: queues a slow stand-in kernel (simcuda_launch, 100 ms)
 * that sets buffer A to 0xAA on stream S (a created blocking stream, a CU_STREAM_NON_BLOCKING one,
 * or its per-thread default stream), frees A (cuMemFree or cuMemFreeAsync on S), allocates B of the
 * same size, writes 0x55 into B through a second, non-blocking stream W and waits for W, then waits
 * for the whole context and reads B back. A correct allocator gives B bytes nothing queued still
 * writes (or the driver's cuMemFree waits for the kernel first), so B reads 0x55. An allocator that
 * reuses A's bytes too early gives B the kernel's 0xAA, written after the program's own 0x55.
 *
 * The writer is a non-blocking stream on purpose: a write on the legacy default stream would wait
 * for the kernel on a blocking S by the legacy stream's implicit synchronisation, and hide the
 * hazard even from a naive allocator (as it would on a GPU).
 *
 * "naive": the program plays the naive allocator itself (A and B are the same block, freed without
 * any synchronisation), to show that this program does detect reuse (expect exit 1).
 *
 * Runs on the simulated driver only (simcuda_launch), unchanged under the shim:
 *   LD_PRELOAD=build/libgpuarena.so LD_LIBRARY_PATH=build/sim build/sim/hazard nonblocking sync 4
 * Exit: 0 every byte intact; 1 corrupted bytes read back (a message says where); 2 bad arguments or
 * a driver call failed.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcuda.h"

#define ROUNDS 3
#define BYTES (1u << 20)
#define KERNEL_US 100000u

typedef struct job {
    CUcontext ctx;
    int kind;   /* 0 blocking, 1 nonblocking, 2 perthread */
    int async;  /* cuMemFreeAsync */
    int naive;
    int id;
    int result; /* 0 intact, 1 corrupted, 2 error */
} job_t;

#define CALL(j, call)                                                                        \
    do {                                                                                     \
        CUresult r_ = (call);                                                                \
        if (r_ != CUDA_SUCCESS) {                                                            \
            fprintf(stderr, "hazard: thread %d: %s failed with %d\n", (j)->id, #call, (int)r_); \
            (j)->result = 2;                                                                 \
            return;                                                                          \
        }                                                                                    \
    } while (0)

/* One round; j->result stays 0 when B reads back 0x55 everywhere. */
static void round_once(job_t *j, int round, unsigned char *host, CUdeviceptr naive_block)
{
    CUstream s = CU_STREAM_PER_THREAD, w;
    CUdeviceptr a, b;
    if (j->kind != 2)
        CALL(j, cuStreamCreate(&s, j->kind == 1 ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT));
    CALL(j, cuStreamCreate(&w, CU_STREAM_NON_BLOCKING));
    if (j->naive)
        a = naive_block;
    else
        CALL(j, cuMemAlloc(&a, BYTES));
    CALL(j, (CUresult)simcuda_launch(s, a, 0xAA, BYTES, KERNEL_US));
    if (!j->naive && j->async)
        CALL(j, cuMemFreeAsync(a, s));
    else if (!j->naive)
        CALL(j, cuMemFree(a));
    if (j->naive)
        b = naive_block; /* reused at once: what an allocator must not do */
    else
        CALL(j, cuMemAlloc(&b, BYTES));
    memset(host, 0x55, BYTES);
    CALL(j, cuMemcpyHtoDAsync(b, host, BYTES, w));
    CALL(j, cuStreamSynchronize(w));
    CALL(j, cuCtxSynchronize());
    memset(host, 0, BYTES);
    CALL(j, cuMemcpyDtoH(host, b, BYTES));
    for (size_t i = 0; i < BYTES; i++) {
        if (host[i] != 0x55) {
            fprintf(stderr, "hazard: thread %d round %d: byte %zu of the new buffer reads 0x%02x, not 0x55: "
                    "memory was handed out again while queued work still wrote it\n", j->id, round, i, host[i]);
            j->result = 1;
            break;
        }
    }
    if (!j->naive)
        CALL(j, cuMemFree(b));
    CALL(j, cuStreamDestroy(w));
    if (j->kind != 2)
        CALL(j, cuStreamDestroy(s));
}

static void *run(void *arg)
{
    job_t *j = arg;
    unsigned char *host = malloc(BYTES);
    CUdeviceptr block = 0;
    if (!host) {
        j->result = 2;
        return NULL;
    }
    if (cuCtxSetCurrent(j->ctx) != CUDA_SUCCESS || (j->naive && cuMemAlloc(&block, BYTES) != CUDA_SUCCESS)) {
        fprintf(stderr, "hazard: thread %d: no context or memory\n", j->id);
        j->result = 2;
    }
    for (int r = 0; r < ROUNDS && j->result == 0; r++)
        round_once(j, r, host, block);
    if (block) {
        cuCtxSynchronize();
        cuMemFree(block);
    }
    free(host);
    return NULL;
}

static int usage(void)
{
    fprintf(stderr, "usage: hazard blocking|nonblocking|perthread sync|async THREADS [naive]\n"
                    "  exit 0: data intact, 1: corrupted data read back, 2: bad arguments or a driver error\n");
    return 2;
}

int main(int argc, char **argv)
{
    static const char *const kinds[] = {"blocking", "nonblocking", "perthread"};
    int kind = -1, threads = 0;
    if (argc < 4 || argc > 5)
        return usage();
    for (int k = 0; k < 3; k++)
        kind = strcmp(argv[1], kinds[k]) == 0 ? k : kind;
    int async = strcmp(argv[2], "async") == 0;
    char *end;
    long n = strtol(argv[3], &end, 10);
    threads = *end || n < 1 || n > 64 ? 0 : (int)n;
    int naive = argc == 5 && strcmp(argv[4], "naive") == 0;
    if (kind < 0 || (!async && strcmp(argv[2], "sync") != 0) || !threads || (argc == 5 && !naive))
        return usage();
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS) {
        fprintf(stderr, "hazard: no CUDA device\n");
        return 2;
    }
    job_t jobs[64];
    pthread_t tids[64];
    for (int i = 0; i < threads; i++) {
        jobs[i] = (job_t){.ctx = ctx, .kind = kind, .async = async, .naive = naive, .id = i};
        if (pthread_create(&tids[i], NULL, run, &jobs[i]) != 0) {
            fprintf(stderr, "hazard: cannot start thread %d\n", i);
            return 2;
        }
    }
    int worst = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tids[i], NULL);
        worst = jobs[i].result > worst ? jobs[i].result : worst;
    }
    cuDevicePrimaryCtxRelease(0);
    if (worst == 0)
        printf("hazard: %s streams, %s frees, %d threads x %d rounds: data intact\n", kinds[kind],
               async ? "async" : "sync", threads, ROUNDS);
    return worst;
}
