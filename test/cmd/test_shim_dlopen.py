"""libgpuarena.so loaded with dlopen and closed again (helper-43 F8), as `ctypes.CDLL` does.

The shim is made for LD_PRELOAD: its thread-locals are initial-exec, so a late dlopen needs them to
fit the static TLS glibc keeps spare; a 12 KiB thread-local buffer made it fail in the loader
("cannot allocate memory in static TLS block"). Where it loaded (with more spare TLS through
GLIBC_TUNABLES), dlclose used to unmap it while its trace's thread-key destructor stayed
registered, and the next thread that had traced died at its exit in unmapped code (SIGSEGV). The
shim is linked -z nodelete now: dlclose leaves it mapped, and the process exits 0."""

import os
import subprocess
import sys
import tempfile
import unittest

import gatest

SHIM = os.path.join(gatest.BUILD, "lib", "libgpuarena.so")
SIM_DIR = os.path.join(gatest.BUILD, "sim")

# A thread allocates through the dlopened shim (its trace buffer and thread key come to be), the
# shim is closed while that thread lives, then the thread exits.
PROGRAM = r"""
import ctypes, sys, threading, _ctypes
drv = ctypes.CDLL("libcuda.so.1")
shim = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL)
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert shim.cuInit(0) == 0 and drv.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert drv.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
closed, allocated = threading.Event(), threading.Event()
def work():
    p = ctypes.c_uint64()
    assert drv.cuCtxSetCurrent(ctx) == 0
    assert shim.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
    assert shim.cuMemFree_v2(p) == 0
    allocated.set()
    closed.wait()
t = threading.Thread(target=work)
t.start()
allocated.wait()
_ctypes.dlclose(shim._handle)
closed.set()
t.join()
print("joined")
"""


class ShimDlopen(unittest.TestCase):
    def run_program(self, tunables):
        self.assertTrue(os.path.isfile(SHIM), f"{SHIM} is not built (run make)")
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, LD_LIBRARY_PATH=SIM_DIR,
                       GPUARENA_TRACE=os.path.join(d, "t.gatrace"))
            env.pop("LD_PRELOAD", None)
            env.pop("GLIBC_TUNABLES", None)
            if tunables:
                env["GLIBC_TUNABLES"] = tunables
            p = subprocess.run([sys.executable, "-c", PROGRAM, SHIM], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
                               check=False)
            self.assertEqual((p.returncode, p.stdout), (0, "joined\n"), p.stderr)

    def test_dlclose_then_thread_exit(self):
        self.run_program("glibc.rtld.optional_static_tls=1048576")

    def test_dlopen_with_glibc_spare_static_tls(self):
        # The shim's thread-locals fit the static TLS glibc keeps for late loads (48 bytes; a
        # 12 KiB thread-local buffer of the NVML hooks made dlopen fail in the loader).
        self.run_program(None)


if __name__ == "__main__":
    unittest.main()
