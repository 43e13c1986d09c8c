/* test-sim, streams (test_sim_stream.c, test_sim_stream_more.c): the buffer size, the per-thread
 * entry points and the helpers both files use, defined in test_sim_stream.c. */
#ifndef TEST_SIM_STREAM_H
#define TEST_SIM_STREAM_H

#include "test_sim.h"

#define N 4096

/* The _ptsz forms, which cuda.h declares only to per-thread compilation units. */
typedef CUresult (*stream_fn)(CUstream);
typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
#define PTSZ(name, type) ((type)ts_sym(#name))
#define QUERY_PTSZ(s) PTSZ(cuStreamQuery_ptsz, stream_fn)(s)
#define SYNC_PTSZ(s) PTSZ(cuStreamSynchronize_ptsz, stream_fn)(s)

/* Every byte of device range p is v. */
void expect_bytes(CUdeviceptr p, unsigned char v);
/* A block of N bytes. */
CUdeviceptr alloc_n(void);

/* The tests of test_sim_stream_more.c, added to the "stream" case. */
void ts_stream_more_add(TCase *tc);

#endif
