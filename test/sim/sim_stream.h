/* simcuda streams, private to the stream files (sim_stream.c, sim_capture.c): the stream record
 * and its queued operations. Everything else sees sim_stream_t as opaque (sim_internal.h). */
#ifndef SIM_STREAM_H
#define SIM_STREAM_H

#include "sim_internal.h"

enum { SIM_CREATED, SIM_LEGACY, SIM_PER_THREAD };

typedef struct sim_op {
    sim_work_t w;
    int sync, finished;      /* sync: the caller waits for finished, reads result, frees it */
    CUresult result;
    struct sim_op *next;
    int ndeps;
    sim_dep_t deps[];
} sim_op_t;

struct sim_stream {
    sim_ctx_t *ctx;
    int kind;
    unsigned flags;           /* CU_STREAM_NON_BLOCKING */
    int alive;                /* a handle that may be used */
    int listed;               /* on ctx->streams */
    int runner;               /* a worker (or an inline caller) is running the queue's head */
    unsigned long long enq, done;
    unsigned long long id;    /* cuStreamGetId: unique in the process, never reused */
    int capturing, invalidated; /* stream capture (sim_capture.c); its work still runs here */
    sim_op_t *head, *tail;
    struct sim_stream *all_next;  /* every stream ever made */
    struct sim_stream *ctx_next;  /* ctx->streams */
};

#endif
