"""cupy_small: a small real-GPU CuPy job for scripts/gpu-check.sh.

Seeded random matrices, a few matmuls and reductions, and arrays of many sizes made and dropped,
with the data checked against NumPy on the host. CuPy allocates through the CUDA runtime
(cudaMalloc), so gpuarena sees its memory pool's blocks; with --no-pool CuPy's pool is switched off
and every array reaches cudaMalloc (the fair comparison):
    LD_PRELOAD=build/lib/libgpuarena.so python3 examples/cupy_small.py --no-pool
Exits 0 on success, 1 on error.
"""
import sys


def main(no_pool):
    import numpy as np
    import cupy as cp

    if no_pool:
        cp.cuda.set_allocator(None)
    rng = np.random.default_rng(0)
    host = rng.standard_normal((2048, 2048), dtype=np.float32)
    a = cp.asarray(host)
    for _ in range(4):
        a = cp.tanh(a @ a / 64.0)
    checksum = float(a.sum())
    # arrays of many sizes, each written, read back and dropped
    for i in range(200):
        n = int(rng.integers(1, 1 << 20))
        v = cp.arange(n, dtype=cp.int64) * 3 + i
        if not np.array_equal(cp.asnumpy(v), np.arange(n, dtype=np.int64) * 3 + i):
            print(f"cupy_small: array {i} of {n} elements read back wrong", file=sys.stderr)
            return 1
        del v
    cp.cuda.Device().synchronize()
    free, total = cp.cuda.runtime.memGetInfo()
    pool = cp.get_default_memory_pool()
    print(f"cupy_small: matmul checksum {checksum:.3f}, 200 arrays intact, "
          f"pool {'off' if no_pool else 'on'} (holds {pool.total_bytes() >> 20} MiB), "
          f"mem_get_info free {free >> 20} of {total >> 20} MiB")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main("--no-pool" in sys.argv[1:]))
    except Exception as e:  # a CUDA error surfaces as a CUDARuntimeError naming it
        print(f"cupy_small: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
