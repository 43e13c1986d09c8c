/* Preload tests of stream-ordered safety (t_stream.c, t_stream_wait.c, t_stream_async.c): the
 * buffer size and the check they share. */
#ifndef T_STREAM_H
#define T_STREAM_H

#include "preload_test.h"

#define N (1u << 20)

/* 1 when all N bytes at p read back as want (all_bytes, t_stream.c). */
int all_bytes(CUdeviceptr p, unsigned char want);

/* The tests of t_stream_wait.c and t_stream_async.c, added to the "stream" case. */
void pt_stream_wait_add(TCase *tc);
void pt_stream_async_add(TCase *tc);

#endif
