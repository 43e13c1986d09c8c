"""`gpuarena doctor`: what this machine has, and what gpuarena would do here.

Everything that touches a driver, a CUDA runtime or a framework happens in a child process with a
timeout (this same module, run by `python3 -c`, prints JSON), so a hung driver or a framework that
crashes on import cannot take the command down, and no framework is ever imported into it. The
children report: the driver found (where, its version, the GPUs and their memory through the driver
API), the CUDA runtime found, and which frameworks import. The GPUARENA_* settings in force are
parsed here with the shim's rules (the size grammar is fmt.parse_size, the C parser's twin), and a
last child runs under the shim itself and asks cuMemGetInfo, so the cap it reports is the shim's own
verdict, not this module's opinion; a setting the shim refuses shows up there with its message.
The settings' parsing is in settings.py.
"""

import contextlib
import functools
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from fractions import Fraction

from . import GaError
from . import modes as modes_mod
from . import paths
from . import runner
from .fmt import human_bytes, parse_size, percent_of
from .settings import _p_fraction, settings  # noqa: F401 (argtypes takes _p_fraction from here)

FRAMEWORKS = ("torch", "jax", "cupy", "tensorflow")
CUDART_NAMES = ("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0")
GA_ALIGN = 512

# The frameworks' own memory settings and what each value means for gpuarena.
FRAMEWORK_ENV = ("XLA_PYTHON_CLIENT_ALLOCATOR", "XLA_PYTHON_CLIENT_PREALLOCATE",
                 "XLA_PYTHON_CLIENT_MEM_FRACTION", "PYTORCH_NO_CUDA_MEMORY_CACHING",
                 "PYTORCH_CUDA_ALLOC_CONF")


# ------------------------------------------------------------------ children (driver, runtime)

def _mapped(prefix):
    """Path of the first library mapped into this process whose name starts with prefix."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.split(None, 5)[-1].strip()
                if os.path.basename(path).startswith(prefix):
                    return path
    except OSError:
        pass
    return None


def _probe_driver(cu, out):
    import ctypes
    c_int, byref = ctypes.c_int, ctypes.byref
    v = c_int(0)
    if cu.cuDriverGetVersion(byref(v)) == 0:
        out["driver_version"] = v.value
    out["cuInit"] = cu.cuInit(0)
    if out["cuInit"] != 0:
        return
    n = c_int(0)
    cu.cuDeviceGetCount(byref(n))
    out["devices"] = []
    for i in range(n.value):
        dev, total = c_int(0), ctypes.c_size_t(0)
        name = ctypes.create_string_buffer(256)
        cu.cuDeviceGet(byref(dev), i)
        cu.cuDeviceGetName(name, 256, dev)
        cu.cuDeviceTotalMem_v2(byref(total), dev)
        out["devices"].append({"index": i, "name": name.value.decode("utf-8", "replace"),
                               "total": total.value, "vmm": _vmm_supported(cu, dev),
                               "granularity": _vmm_granularity(cu, i)})


CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102  # cuda.h


def _vmm_supported(cu, dev):
    """Whether the device can serve vmm mode (the attribute the shim asks, and the driver's VMM
    calls there): True, False, or None where the driver does not say."""
    import ctypes
    v = ctypes.c_int(0)
    attr = CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
    if cu.cuDeviceGetAttribute(ctypes.byref(v), attr, dev) != 0:
        return None
    try:
        cu.cuMemCreate, cu.cuMemAddressReserve  # an older driver, or a stand-in, without them
    except AttributeError:
        return False
    return bool(v.value)


def _vmm_granularity(cu, index):
    """The granule vmm mode maps on device `index` (cuMemGetAllocationGranularity, recommended,
    for pinned device memory, as the shim asks it), or None where the driver does not say."""
    import ctypes
    prop = (ctypes.c_int * 16)()  # CUmemAllocationProp (32 bytes), zeroed, with room to spare
    prop[0] = 1  # type: CU_MEM_ALLOCATION_TYPE_PINNED
    prop[2], prop[3] = 1, index  # location: CU_MEM_LOCATION_TYPE_DEVICE, the device
    g = ctypes.c_size_t(0)
    try:
        r = cu.cuMemGetAllocationGranularity(ctypes.byref(g), ctypes.byref(prop), 1)  # RECOMMENDED
    except AttributeError:
        return None
    return g.value if r == 0 and g.value else None


def _probe_shim_view(cu, out):
    """Under the shim: the total and free cuMemGetInfo reports on device 0's primary context."""
    import ctypes
    ctx, dev = ctypes.c_void_p(0), ctypes.c_int(0)
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    if cu.cuDeviceGet(ctypes.byref(dev), 0) or cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev):
        return
    cu.cuCtxSetCurrent(ctx)
    out["cuMemGetInfo"] = cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
    out["view"] = {"free": free.value, "total": total.value}
    cu.cuDevicePrimaryCtxRelease(dev)


def _probe_cudart(out):
    import ctypes
    import glob
    tries = list(CUDART_NAMES)
    for base in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if base:
            tries += sorted(glob.glob(os.path.join(base, "lib64", "libcudart.so*")))
    for name in tries:
        try:
            rt = ctypes.CDLL(name)
        except OSError:
            continue
        v = ctypes.c_int(0)
        out["cudart"] = {"name": name, "path": _mapped("libcudart") or name,
                         "version": v.value if rt.cudaRuntimeGetVersion(ctypes.byref(v)) == 0
                         else None}
        return


def probe_main(lib, what):
    """A child's whole job: load the driver `lib`, report as JSON on stdout. what: "machine"
    (driver, devices, runtime) or "shim" (cuInit and cuMemGetInfo under the preloaded shim)."""
    import ctypes
    out = {}
    try:
        cu = ctypes.CDLL(lib)
    except OSError as e:
        out["driver_error"] = str(e)
    else:
        out["driver_path"] = _mapped("libcuda") or lib
        _probe_driver(cu, out)
        if what == "shim":
            out["shim_loaded"] = _mapped("libgpuarena") is not None
            if out.get("cuInit") == 0:
                _probe_shim_view(cu, out)
    if what == "machine":
        _probe_cudart(out)
    json.dump(out, sys.stdout)
    return 0


def _dies_with_us():
    """preexec_fn of a check's child: SIGTERM when the command dies, however it dies (a SIGKILL,
    `timeout -s KILL`): a child of its own session is killed by nothing else, and a hung
    framework import ran on for good (helper-82)."""
    return functools.partial(paths.die_with_parent, os.getpid())


@contextlib.contextmanager
def _killed_on_the_way_out(procs):
    """Kills the process groups of procs still running when the command is ended meanwhile (a
    SIGTERM, ending.Ended, or Ctrl-C): they run in sessions of their own, and a `timeout` that
    ended doctor left them running up to --timeout, perhaps holding the GPU (helper-82)."""
    try:
        yield
    except BaseException:
        for p in procs:
            if p.poll() is None:
                _kill_group(p)
        raise


def _kill_group(p):
    """Kills a child started with start_new_session and every process it started (a framework
    import's workers, a wrapper script's interpreter): killing the child alone left them running,
    perhaps holding GPU memory."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        p.kill()
    p.communicate()


# What is kept of a child's output: its last bytes on each stream (the answer, a version or a
# JSON document, comes last, and so does the message that says why an import failed). A child
# that prints without end (a noisy or hung framework import, a --python that is not Python) grew
# the command by the whole of it until the timeout, 2.6 GB in 2 s (an outside test, 2026-12-06).
CHILD_OUTPUT_KEPT = 1 << 20


def _communicate(p, timeout):
    """(stdout, stderr) of child p, the last CHILD_OUTPUT_KEPT bytes of each, once it has ended;
    subprocess.TimeoutExpired (the child's process group killed) past timeout seconds."""
    deadline = time.monotonic() + timeout
    kept = {p.stdout: bytearray(), p.stderr: bytearray()}
    with selectors.DefaultSelector() as sel:
        for f in kept:
            sel.register(f, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                _kill_group(p)
                raise subprocess.TimeoutExpired(p.args, timeout)
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = kept[key.fileobj]
                buf += chunk
                if len(buf) > 2 * CHILD_OUTPUT_KEPT:
                    del buf[:len(buf) - CHILD_OUTPUT_KEPT]
    try:
        p.wait(timeout=max(deadline - time.monotonic(), 0.001))
    except subprocess.TimeoutExpired:
        _kill_group(p)
        raise
    for f in kept:
        f.close()
    return tuple(bytes(kept[f][-CHILD_OUTPUT_KEPT:]) for f in (p.stdout, p.stderr))


def _run(argv, timeout, **kw):
    """subprocess.run(argv, timeout=...) whose timeout kills the child's whole process group, and
    which keeps only the end of what the child prints (_communicate)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, preexec_fn=_dies_with_us(), **kw)
    with _killed_on_the_way_out([p]):
        out, err = _communicate(p, timeout)
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def _child(args, env, timeout):
    """(parsed JSON or None, stderr text, problem or None) of a probe child."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from gpuarena_cli import doctor; "
            "sys.exit(doctor.probe_main(sys.argv[2], sys.argv[3]))")
    try:
        p = _run([sys.executable, "-c", code, paths.SCRIPTS_DIR] + args, timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, "", f"did not answer within {timeout} s"
    err = p.stderr.decode("utf-8", "replace").strip()
    try:
        return json.loads(p.stdout), err, None
    except ValueError:
        why = f"crashed ({_ended(p.returncode)})" if p.returncode else "printed no answer"
        return None, err, why


# ------------------------------------------------------------------ frameworks

_IMPORT = ("import importlib.util, sys\n"
           "if importlib.util.find_spec(sys.argv[1]) is None:\n    sys.exit(4)\n"
           "m = __import__(sys.argv[1])\nprint(getattr(m, '__version__', 'unknown'))\n")


def check_python(python, timeout):
    """GaError unless `python` runs as a Python interpreter (a program that runs but is not one,
    /bin/false say, would otherwise read as every framework failing to import)."""
    probe = "import sys; print('gpuarena-python', sys.version_info[0])"
    try:
        p = _run([python, "-c", probe], timeout, stdin=subprocess.DEVNULL)
    except OSError as e:
        raise GaError(f"cannot run {python}: {e.strerror} (give --python a Python "
                      "interpreter)") from None
    except subprocess.TimeoutExpired:
        raise GaError(f"{python} did not run `python -c` within {timeout} s; give --python a "
                      "Python interpreter") from None
    if p.returncode != 0 or not p.stdout.startswith(b"gpuarena-python 3"):
        said = p.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GaError(f"{python} did not run as a Python 3 interpreter (exit status "
                      f"{p.returncode}{', ' + said[-1][:200] if said else ', no message'}); give "
                      "--python a Python 3 interpreter, e.g. --python /usr/bin/python3")


def frameworks(python, timeout):
    """{name: {"status": "imports"|"absent"|"fails"|"timeout", "detail": text}}, checked in one
    child per framework, all at once, each killed after timeout seconds."""
    check_python(python, timeout)
    procs = {}
    for name in FRAMEWORKS:
        try:
            procs[name] = subprocess.Popen([python, "-c", _IMPORT, name], stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                           start_new_session=True,
                                           preexec_fn=_dies_with_us())
        except OSError as e:
            raise GaError(f"cannot run {python}: {e.strerror} (give --python a Python "
                          "interpreter)") from None
    out = {}
    start = time.monotonic()
    with _killed_on_the_way_out(procs.values()):
        _collect(procs, timeout, start, out)
    return out


def _collect(procs, timeout, start, out):
    """frameworks()'s answers into out, each child's as it ends."""
    for name, p in procs.items():
        try: # all started together: each has what is left of the one timeout
            so, se = _communicate(p, max(timeout - (time.monotonic() - start), 0.001))
        except subprocess.TimeoutExpired:
            out[name] = {"status": "timeout", "detail": f"import did not finish in {timeout} s"}
            continue
        last = (se.decode("utf-8", "replace").strip().splitlines() or ["no message"])[-1]
        if p.returncode == 0:
            # the version is the child's last line: an import may print before it (a banner)
            said = so.decode("utf-8", "replace").strip().splitlines()
            out[name] = {"status": "imports", "detail": (said[-1][:200] if said else "") or "unknown"}
        elif p.returncode == 4:
            out[name] = {"status": "absent", "detail": "not installed"}
        elif p.returncode < 0:  # a crash in the import (a framework's native library)
            out[name] = {"status": "fails", "detail": f"the import {_ended(p.returncode)}" +
                         (f"; its last line: {last}" if se.strip() else "")}
        else:
            out[name] = {"status": "fails", "detail": last}


def _ended(code):
    """A child's end in words: "exit 3", or "killed by SIGSEGV" for a negative returncode."""
    if code >= 0:
        return f"exit {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def framework_env(env):
    """[(variable, value or None, what it means for gpuarena)]."""
    def get(k):
        return env.get(k)
    alloc = (get("XLA_PYTHON_CLIENT_ALLOCATOR") or "").strip().lower()
    if alloc == "platform":
        jax = ("JAX allocates every buffer from the driver and frees it at once: each one reaches "
               "gpuarena (the fair comparison of modes)")
    elif alloc == "cuda_async":
        jax = ("JAX uses the stream-ordered allocator (cuMemAllocAsync): gpuarena's pool serves "
               "it, stream-ordered, in the arena, grow and vmm modes (platform mode passes it "
               "through, counted toward the cap)")
    else:
        jax = ("JAX keeps its own pool, sized from what cuMemGetInfo reports (gpuarena's cap); "
               "gpuarena sees the pool's blocks, not each buffer (JAX 0.11 takes its pool with "
               "cuMemCreate, which gpuarena counts toward the cap but passes through, so in arena "
               "mode both preallocate). XLA_PYTHON_CLIENT_ALLOCATOR=platform sends every buffer "
               "to gpuarena")
    pre = (get("XLA_PYTHON_CLIENT_PREALLOCATE") or "").strip().lower()
    prealloc = ("JAX grows its pool on demand: gpuarena sees each growth step"
                if pre in ("false", "0") else
                "JAX takes its pool at start (when its allocator is the default one)")
    frac = get("XLA_PYTHON_CLIENT_MEM_FRACTION")
    fraction = (f"JAX's pool is {frac} of the total cuMemGetInfo reports, that is of gpuarena's "
                "cap" if frac else "JAX's pool is 75% of the total cuMemGetInfo reports, that is "
                "of gpuarena's cap")
    if frac and _jax_fraction(frac) is None:
        fraction = (f"{frac!r} is not a fraction in (0, 1]: JAX will not start with it "
                    "(e.g. 0.5)")
    if alloc and alloc not in JAX_ALLOCATORS:
        jax = (f"{get('XLA_PYTHON_CLIENT_ALLOCATOR')!r} is not an allocator JAX knows "
               f"({', '.join(JAX_ALLOCATORS)}): JAX will not start with it")
    nocache = (get("PYTORCH_NO_CUDA_MEMORY_CACHING") or "").strip()
    torch = ("PyTorch's caching allocator is off: every tensor is a cudaMalloc/cudaFree that "
             "gpuarena serves" if nocache not in ("", "0") else
             "PyTorch caches memory in segments of its own: gpuarena sees the segments, "
             "rarely freed. PYTORCH_NO_CUDA_MEMORY_CACHING=1 sends every tensor to gpuarena")
    conf = (get("PYTORCH_CUDA_ALLOC_CONF") or "").replace(" ", "").lower()
    notes = []
    if "backend:cudamallocasync" in conf:
        notes.append("backend:cudaMallocAsync uses cuMemAllocAsync, which gpuarena's pool serves, "
                     "stream-ordered, in the arena, grow and vmm modes (platform mode passes it "
                     "through, counted toward the cap)")
    if "expandable_segments:true" in conf:
        notes.append("expandable_segments maps memory with cuMemCreate/cuMemMap, which gpuarena "
                     "counts toward the cap but passes through")
    torch_conf = "; ".join(notes) or "nothing in it changes what reaches gpuarena"
    meanings = [jax, prealloc, fraction, torch, torch_conf]
    return [(k, get(k), m) for k, m in zip(FRAMEWORK_ENV, meanings)]


JAX_ALLOCATORS = ("default", "platform", "bfc", "cuda_async")  # XLA_PYTHON_CLIENT_ALLOCATOR


def _jax_fraction(text):
    try:
        f = float(text)
    except ValueError:
        return None
    return f if 0 < f <= 1 else None


def framework_warnings(env):
    """A framework variable whose value the framework refuses: said as a warning (gpuarena runs,
    the framework does not), not explained as if it held."""
    out = []
    frac = env.get("XLA_PYTHON_CLIENT_MEM_FRACTION")
    if frac and _jax_fraction(frac) is None:
        out.append(f"XLA_PYTHON_CLIENT_MEM_FRACTION={frac} is not a fraction in (0, 1]: JAX will "
                   "not start with it")
    alloc = (env.get("XLA_PYTHON_CLIENT_ALLOCATOR") or "").strip().lower()
    if alloc and alloc not in JAX_ALLOCATORS:
        out.append(f"XLA_PYTHON_CLIENT_ALLOCATOR={env['XLA_PYTHON_CLIENT_ALLOCATOR']} is not an "
                   f"allocator JAX knows ({', '.join(JAX_ALLOCATORS)}): JAX will not start with it")
    return out


VMM_GRANULE = 2 << 20  # the recommended granularity of current GPUs (the shim asks the driver)


def hami_limit(env, dev):
    """(bytes, variable) of a device plugin's cap for CUDA device dev, as the shim reads it
    (shim/group_host.c ga_hami_limit): CUDA_DEVICE_MEMORY_LIMIT_<dev>, else
    CUDA_DEVICE_MEMORY_LIMIT, in the size grammar (HAMi's 8192m, 8g, bytes); (None, None) when
    neither is set. GaError for a value the shim refuses."""
    for name in (f"CUDA_DEVICE_MEMORY_LIMIT_{dev}", "CUDA_DEVICE_MEMORY_LIMIT"):
        v = env.get(name)
        if v:
            try:
                return parse_size(v), name
            except GaError as e:
                raise GaError(f"{name}={e}; HAMi's forms are 8192m, 8g, 1048576k or bytes (the "
                              "device plugin, or the pod spec, sets it)") from None
    return None, None


def plan(values, devices, env=None):
    """[{device, total, cap, cap_from, arena, note}] per device: what the shim would hold."""
    mode, limit = values["GPUARENA_MODE"], values["GPUARENA_LIMIT"]
    frac, grow = values["GPUARENA_MEM_FRACTION"]
    out = []
    for d in devices:
        total = d["total"]
        cap, cap_from = total, "the device's total"
        if limit is not None:
            want = percent_of(limit, total)
            if isinstance(limit, Fraction) or want < total:
                cap, cap_from = want, "GPUARENA_LIMIT"
            elif want > total:  # said, as `run` says it: a typo (80GiB for 8GiB) caps nothing
                cap_from = (f"the device's total; GPUARENA_LIMIT={human_bytes(want)} is above "
                            "the device and caps nothing")
        # The device plugin's cap where it is the smaller, GPUARENA_LIMIT or not, as the shim
        # takes it (shim/ctx.c ga_dev_setup): the plugin enforces it itself.
        try:
            hami, name = hami_limit(env or {}, d["index"])
        except GaError:
            hami = None  # reported by diagnose: a problem, or left out beside GPUARENA_LIMIT
        if hami is not None and hami < cap:
            cap, cap_from = hami, name
        share = int(cap * frac) & ~(GA_ALIGN - 1)
        if mode is None or values.get("refused"):
            arena, note = 0, ("no pool: the shim refuses " + ", ".join(values.get("refused") or
                                                                     ["GPUARENA_MODE"])
                              + " and initialises no CUDA (see the problems)")
        elif mode == "arena":
            arena = share
            note = (f"arena of {human_bytes(share)} taken at the first allocation"
                    + (", may grow up to the cap" if grow else ", never more"))
            if share == 0:
                note = "GPUARENA_MEM_FRACTION of this cap rounds to 0 bytes: refused"
        elif mode in ("grow", "vmm"):
            arena, note = 0, ("regions taken on demand (from 2 MiB, doubling), empty ones given back"
                              if mode == "grow" else "one virtual range; physical memory mapped "
                              "only where allocations lie")
            if share == 0 and not grow:  # a fixed fraction bounds the pool: nothing fits
                note = "GPUARENA_MEM_FRACTION of this cap rounds to 0 bytes: refused"
        else:
            arena, note = 0, "one driver allocation per allocation, freed at once"
        if cap < GA_ALIGN:
            note = f"the cap is under one {GA_ALIGN}-byte block: refused"
        out.append({"device": d["index"], "total": total, "cap": cap, "cap_from": cap_from,
                    "arena": arena, "note": note, "granularity": d.get("granularity")})
    return out


def plugin_below(values, plan_):
    """The warning the shim gives once when GPUARENA_LIMIT is above a device plugin's
    CUDA_DEVICE_MEMORY_LIMIT[_i]: the plugin's is the cap (it enforces it itself, so reporting
    more would mislead a framework that sizes itself from cuMemGetInfo); one per device here."""
    if values["GPUARENA_LIMIT"] is None:
        return []
    return [f"device {p['device']}: GPUARENA_LIMIT is above the device plugin's {p['cap_from']} "
            f"({human_bytes(p['cap'])}), which the plugin enforces itself: the cap is the "
            "plugin's, and cuMemGetInfo reports no more; set GPUARENA_LIMIT at or below it (or "
            "leave it unset)" for p in plan_ if p["cap_from"].startswith("CUDA_DEVICE_MEMORY_LIMIT")]


# ------------------------------------------------------------------ the report

def diagnose(sim=False, python=None, timeout=120, env=None):
    """The doctor's findings as one JSON-able dict; "ok" says whether gpuarena would run."""
    env = dict(os.environ if env is None else env)
    env.pop("LD_PRELOAD", None)
    doc = {"version": paths.version(), "sim": sim, "problems": [], "warnings": []}
    lib = env.get("GPUARENA_LIBCUDA") or "libcuda.so.1"
    if sim:
        sim_dir = paths.sim_dir()
        lib = os.path.join(sim_dir, "libcuda.so.1")
        env["LD_LIBRARY_PATH"] = ":".join(x for x in (sim_dir, env.get("LD_LIBRARY_PATH")) if x)
    machine, _err, why = _child([lib, "machine"], env, timeout)
    machine = machine or {"driver_error": f"the driver probe {why}"}
    doc["machine"] = machine
    if "driver_error" in machine:
        doc["problems"].append(f"no CUDA driver can be loaded ({machine['driver_error']}); "
                               "to try gpuarena without a GPU, add --sim (the simulated driver): "
                               "gpuarena doctor --sim")
    elif machine.get("cuInit") not in (0, None):
        # The simulated driver says why (a SIMCUDA_* setting it cannot read): its line is the
        # reason, where the question about the GPU's visibility misled (helper-67 F17.10).
        said = " ".join(ln.split("gpuarena: ", 1)[-1] for ln in (_err or "").splitlines()
                        if ln.split("gpuarena: ", 1)[-1].startswith("simcuda: "))
        doc["problems"].append(f"the driver was found but cuInit failed with error "
                               f"{machine['cuInit']} ("
                               + (said or "is the GPU visible to this user/container?") + ")")
    doc["frameworks"] = frameworks(python or sys.executable, timeout)
    doc["python"] = python or sys.executable
    doc["framework_env"] = [{"name": n, "value": v, "meaning": m}
                            for n, v, m in framework_env(env)]
    doc["warnings"] += framework_warnings(env)
    values, shown, problems, warnings = settings(env)
    doc["problems"] += problems
    doc["warnings"] += warnings
    doc["settings"] = [{"name": n, "value": raw, "shown": s} for n, raw, s in shown]
    doc["mode"] = values["GPUARENA_MODE"]
    for d in machine.get("devices") or []:  # the shim reads a device plugin's cap
        try:
            hami_limit(env, d["index"])
        except GaError as e:
            if values["GPUARENA_LIMIT"] is None:
                doc["problems"].append(f"{e}; the shim will not initialise CUDA")
            else:  # as the shim says it: the cap is GPUARENA_LIMIT's
                doc["warnings"].append(f"{e}; left out: the cap is GPUARENA_LIMIT's")
            break
    doc["plan"] = plan(values, machine.get("devices") or [], env)
    doc["warnings"] += plugin_below(values, doc["plan"])
    for d in machine.get("devices") or []:  # the shim starts, but every allocation would fail
        if values["GPUARENA_MODE"] == "vmm" and d.get("vmm") is False:
            doc["problems"].append(
                f"device {d['index']} does not support virtual memory management "
                "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0, as on some vGPU "
                "and WSL setups): every allocation there fails in vmm mode "
                "(CUDA_ERROR_NOT_SUPPORTED); use GPUARENA_MODE=arena or grow")
            for p in doc["plan"]:
                if p["device"] == d["index"]:
                    p["note"] = ("no virtual memory management on this device: every "
                                 "allocation fails")
    for p in doc["plan"]:  # the shim starts, but every allocation would fail
        gran = p.get("granularity") or VMM_GRANULE
        if values["GPUARENA_MODE"] == "vmm" and p["cap"] < gran:
            doc["warnings"].append(
                f"device {p['device']}: vmm maps physical memory in granules of "
                f"{human_bytes(gran)} ("
                + ("current GPUs" if gran == VMM_GRANULE else "this device's")
                + f"), and a cap of {human_bytes(p['cap'])} "
                "holds none: every allocation would fail; raise GPUARENA_LIMIT to at least "
                f"{human_bytes(gran)}, or use GPUARENA_MODE=grow or platform")
    # Grow by its name, not by GPUARENA_PREALLOCATE=false, does not use the setting either.
    named = (env.get("GPUARENA_MODE") or "").strip(" \t").lower()
    unused = ["GPUARENA_PREALLOCATE"] if values["GPUARENA_MODE"] in ("vmm", "platform") or (
        values["GPUARENA_MODE"] == "grow" and named == "grow") else []
    if values["GPUARENA_MODE"] not in ("vmm", None):  # kept granules are vmm mode's alone
        unused.append("GPUARENA_VMM_KEEP")
    if values["GPUARENA_MODE"] == "platform":  # no pool, no share, frees wait: the shim says so
        unused += ["GPUARENA_MEM_FRACTION", "GPUARENA_FREE_SYNC"]
    doc["settings"] = [dict(e, shown=e["shown"] + f" (not used in {values['GPUARENA_MODE']} "
                            "mode)") if e["name"] in unused else e for e in doc["settings"]]
    doc["shim"] = paths.shim(required=False)
    build = os.environ.get("GPUARENA_BUILD")
    if not doc["shim"] and build:  # paths.find looks there only
        doc["problems"].append(f"the shim libgpuarena.so is not in GPUARENA_BUILD={build} ("
                               + ("no such folder; point it at a build folder or unset it"
                                  if not os.path.isdir(build) else
                                  f"build it there: make BUILD={build}") + ")")
    elif not doc["shim"]:
        doc["problems"].append("the shim libgpuarena.so is not built; run make")
    elif runner.preload_problem(doc["shim"]):
        doc["problems"].append(runner.preload_problem(doc["shim"]))
    elif "driver_error" not in machine:
        doc["shim_check"] = shim_check(doc["shim"], lib, env, timeout)
        # cuInit failing without the shim too says it all: the check under the shim adds nothing
        if machine.get("cuInit") in (0, None) or not doc["shim_check"].get("refused"):
            doc["problems"] += shim_check_problems(doc["shim_check"], doc["plan"], doc["shim"],
                                                   values["GPUARENA_MODE"])
        if doc["shim_check"].get("refused"):  # whatever the settings say, no pool is made
            for p in doc["plan"]:
                if not p["note"].startswith("no pool"):
                    p["note"] = "no pool: cuInit fails under the shim (see the problems)"
    doc["ok"] = not doc["problems"]
    return doc


def shim_check_problems(chk, plan_, shim, mode=None):
    """What the check under the shim shows to be wrong: cuInit refused, the shim not loaded, or
    a total from cuMemGetInfo that is not the cap planned for device 0 (in vmm mode, what can be
    mapped under it: the cap less what does not fill a granule)."""
    if chk.get("refused"):
        return ["under the shim, cuInit failed: " + chk["refused"]]
    if chk.get("shim_loaded") is False:
        return [f"the shim {shim} was not loaded into the check under LD_PRELOAD (the loader "
                "dropped it); programs would run without the cap"]
    view, want = chk.get("view"), plan_[0]["cap"] if plan_ else None
    gran = (plan_[0].get("granularity") if plan_ else None) or VMM_GRANULE
    vmm_ok = mode == "vmm" and view and want and want - gran < view["total"] <= want
    if view and want and view["total"] != want and not vmm_ok:
        return [f"under the shim, cuMemGetInfo says total {human_bytes(view['total'])} "
                f"({view['total']} bytes) on device 0, not the cap of {human_bytes(want)} "
                f"({want} bytes) these settings give; the shim is not capping as set up"]
    return []


def shim_check(shim, lib, env, timeout):
    """cuInit and cuMemGetInfo under the shim, with the settings in force."""
    env = dict(env, LD_PRELOAD=shim)
    env.pop("GPUARENA_STATS", None)  # a diagnosis writes no files
    env.pop("GPUARENA_TRACE", None)
    got, err, why = _child([lib, "shim"], env, timeout)
    # The shim's own lines, without its "gpuarena: " prefix: doctor prints them inside its own.
    msgs = [ln[len("gpuarena: "):] for ln in err.splitlines() if ln.startswith("gpuarena: ")]
    if got is None:
        return {"refused": f"the check under the shim {why}: {' '.join(msgs) or err[-300:]}"}
    if got.get("cuInit", 0) != 0:
        return {"refused": " ".join(msgs) or f"error {got['cuInit']}"}
    return {"view": got.get("view"), "messages": msgs, "shim_loaded": got.get("shim_loaded")}


def _line(label, text):
    return f"  {label:<22} {text}"


def _version(v):
    return f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) else "unknown"


def render(doc):
    """The findings as text for a person."""
    m = doc["machine"]
    lines = [f"gpuarena {doc['version']} doctor" + (" (simulated driver)" if doc["sim"] else ""),
             "", "This machine"]
    if "driver_error" in m:
        lines.append(_line("CUDA driver", f"not found: {m['driver_error']}"))
    else:
        lines.append(_line("CUDA driver", f"{m.get('driver_path')} (CUDA "
                           f"{_version(m.get('driver_version'))}, cuInit {m.get('cuInit')})"))
    devs = m.get("devices") or []
    lines.append(_line("GPUs", f"{len(devs)}" if devs else "none found"))
    for d in devs:
        lines.append(_line("", f"{d['index']}: {d['name']}, {human_bytes(d['total'])}"))
    rt = m.get("cudart")
    lines.append(_line("CUDA runtime", f"{rt['path']} (CUDA {_version(rt['version'])})" if rt
                       else "libcudart not found (frameworks usually bring their own)"))
    said = {"imports": "{d} imports", "absent": "not installed", "fails": "fails to import ({d})",
            "timeout": "{d}"}
    fw = ", ".join(f"{n} " + said[f["status"]].format(d=f["detail"])
                   for n, f in doc["frameworks"].items())
    lines.append(_line("frameworks", f"{fw} (under {doc['python']})"))
    lines += ["", "Frameworks' memory settings"]
    for e in doc["framework_env"]:
        val = e["value"] if e["value"] is not None else "unset"
        lines.append(f"  {e['name']}={val}")
        lines.append(f"      {e['meaning']}")
    lines += ["", "What gpuarena would do here"]
    lines.append(_line("shim", doc["shim"] or "not built (run make)"))
    for s in doc["settings"]:
        lines.append(_line(s["name"], s["shown"]))
    if doc["mode"] is None:
        lines.append(_line("mode", "none: GPUARENA_MODE is refused (see the problems)"))
    else:
        lines.append(_line("mode", f"{doc['mode']}: "
                           f"{modes_mod.DESCRIPTIONS.get(doc['mode'], '')}"))
    for p in doc["plan"]:
        lines.append(_line(f"device {p['device']}", f"cap {human_bytes(p['cap'])} "
                           f"({p['cap_from']}) of {human_bytes(p['total'])}; {p['note']}"))
    chk = doc.get("shim_check") or {}
    if chk.get("view"):
        v = chk["view"]
        lines.append(_line("under the shim", f"cuMemGetInfo says total {human_bytes(v['total'])}"
                           f", free {human_bytes(v['free'])} on device 0"))
    for msg in chk.get("messages") or []:
        lines.append(_line("the shim said", msg))
    for w in doc["warnings"]:
        lines.append(f"gpuarena: warning: {w}")
    for p in doc["problems"]:
        lines.append(f"gpuarena: problem: {p}")
    lines.append("")
    lines.append("gpuarena would run here" if doc["ok"] else
                 "gpuarena would not run here as set up: fix the problems above")
    return "\n".join(lines)
