#!/usr/bin/env python3
"""probe129: a scriptable CUDA process for the outside check of groups (t_outside129.py).

Run under the shim on the simulated driver (LD_PRELOAD, LD_LIBRARY_PATH=build/sim). It binds
libcuda.so.1 and libnvidia-ml.so.1 through dlopen+dlsym (ctypes), as Python frameworks do, then
reads one command a line on stdin and answers one line on stdout:

  init [DEV]        cuInit, retain DEV's primary context (default 0) and make it current -> ok
  alloc BYTES       cuMemAlloc_v2 -> "ok IDX" or "err CODE"
  managed BYTES     cuMemAllocManaged (global) -> "ok IDX" or "err CODE"
  free IDX          cuMemFree_v2 -> "ok" or "err CODE"
  sync              cuCtxSynchronize -> "ok" / "err CODE"
  reset [DEV]       cuDevicePrimaryCtxReset, then retain and make current again -> "ok" / "err CODE"
  info              cuMemGetInfo_v2 -> "info FREE TOTAL" or "err CODE"
  nvml [DEV]        nvmlDeviceGetMemoryInfo of NVML's device DEV -> "nvml TOTAL USED FREE"
  procs [DEV]       nvmlDeviceGetComputeRunningProcesses_v3 -> "procs PID:USED ..."
  fork BYTES        fork; the child allocates BYTES, says "child PID ok|err CODE" and waits for
                    SIGKILL; the parent answers "ok"
  churn SEED N MAX  N seeded random allocations (up to MAX bytes) and frees, every block freed
                    at the end -> "churn ALLOCS REFUSED"
  exec PROG ARG..   execv PROG (os.execv)
  exit CODE         leave through exit() (atexit and library destructors run)
  kill              SIGKILL itself (nothing runs)
"""
import ctypes
import os
import signal
import sys

cuda = ctypes.CDLL("libcuda.so.1")
ptrs = []
ctx = ctypes.c_void_p()


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def init(dev):
    r = cuda.cuInit(0)
    if r:
        return r
    d = ctypes.c_int()
    r = cuda.cuDeviceGet(ctypes.byref(d), dev)
    if r:
        return r
    r = cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), d)
    if r:
        return r
    return cuda.cuCtxSetCurrent(ctx)


def alloc(fn, n, *extra):
    p = ctypes.c_uint64()
    r = fn(ctypes.byref(p), ctypes.c_size_t(n), *extra)
    if r:
        return "err %d" % r
    ptrs.append(p.value)
    return "ok %d" % (len(ptrs) - 1)


class Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Proc(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong), ("gi", ctypes.c_uint),
                ("ci", ctypes.c_uint)]


nvml = None


def nvml_dev(idx):
    global nvml
    if nvml is None:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        r = nvml.nvmlInit_v2()
        if r:
            return None, r
    h = ctypes.c_void_p()
    r = nvml.nvmlDeviceGetHandleByIndex_v2(idx, ctypes.byref(h))
    return h, r


def main():
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        c = w[0]
        if c == "init":
            r = init(int(w[1]) if len(w) > 1 else 0)
            say("ok" if r == 0 else "err %d" % r)
        elif c == "alloc":
            say(alloc(cuda.cuMemAlloc_v2, int(w[1])))
        elif c == "managed":
            say(alloc(cuda.cuMemAllocManaged, int(w[1]), ctypes.c_uint(1)))
        elif c == "free":
            r = cuda.cuMemFree_v2(ctypes.c_uint64(ptrs[int(w[1])]))
            say("ok" if r == 0 else "err %d" % r)
        elif c == "sync":
            r = cuda.cuCtxSynchronize()
            say("ok" if r == 0 else "err %d" % r)
        elif c == "reset":
            dev = int(w[1]) if len(w) > 1 else 0
            r = cuda.cuDevicePrimaryCtxReset_v2(dev)
            if r == 0:
                cuda.cuDevicePrimaryCtxRelease_v2(dev)
                r = init(dev)
            say("ok" if r == 0 else "err %d" % r)
        elif c == "info":
            f, t = ctypes.c_size_t(), ctypes.c_size_t()
            r = cuda.cuMemGetInfo_v2(ctypes.byref(f), ctypes.byref(t))
            say("info %d %d" % (f.value, t.value) if r == 0 else "err %d" % r)
        elif c == "nvml":
            h, r = nvml_dev(int(w[1]) if len(w) > 1 else 0)
            m = Mem()
            if r == 0:
                r = nvml.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m))
            say("nvml %d %d %d" % (m.total, m.used, m.free) if r == 0 else "err %d" % r)
        elif c == "procs":
            h, r = nvml_dev(int(w[1]) if len(w) > 1 else 0)
            n = ctypes.c_uint(64)
            arr = (Proc * 64)()
            if r == 0:
                r = nvml.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), arr)
            say("procs " + " ".join("%d:%d" % (arr[i].pid, arr[i].used) for i in range(n.value))
                if r == 0 else "err %d" % r)
        elif c == "fork":
            pid = os.fork()
            if pid == 0:
                say("child %d %s" % (os.getpid(), alloc(cuda.cuMemAlloc_v2, int(w[1]))))
                while True:
                    signal.pause()
            say("ok")
        elif c == "churn":
            import random
            rnd = random.Random(int(w[1]))
            live, ok, no = [], 0, 0
            for _ in range(int(w[2])):
                if live and rnd.random() < 0.45:
                    cuda.cuMemFree_v2(ctypes.c_uint64(live.pop(rnd.randrange(len(live)))))
                    continue
                p = ctypes.c_uint64()
                if cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(rnd.randrange(1, int(w[3])))):
                    no += 1
                else:
                    ok += 1
                    live.append(p.value)
            for q in live:
                cuda.cuMemFree_v2(ctypes.c_uint64(q))
            say("churn %d %d" % (ok, no))
        elif c == "exec":
            sys.stdout.flush()
            os.execv(w[1], w[1:])
        elif c == "exit":
            sys.stdout.flush()
            sys.exit(int(w[1]))
        elif c == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        else:
            say("usage")


if __name__ == "__main__":
    main()
