"""Reader and writer of gpuarena binary traces, the layout allocator/ga_trace.h defines.

A trace is a 32-byte header (magic "GATRACE\\0", u32 version 1, u32 record size 48, u64 start wall
clock in ns, u64 flags) then 48-byte little-endian records '<QQQQIIhBBI'. A process killed mid-write
leaves a partial last record, so reading keeps every complete record and reports the leftover bytes
instead of failing. Writing goes to a fresh temporary beside OUT (a new name, created exclusively,
so a file or link already there is never written through or deleted) and is renamed into place, so
a failure never leaves a half-written trace under the requested name; an OUT that is a symbolic
link is replaced by the file, as the shim's own writer does, never written through.
"""

import errno
import fcntl
import os
import stat
import struct
import sys
import tempfile

from . import GaError

MAGIC = b"GATRACE\0"
VERSION = 1
HEADER = struct.Struct("<8sIIQQ")
RECORD = struct.Struct("<QQQQIIhBBI")
assert HEADER.size == 32 and RECORD.size == 48, "layout must match allocator/ga_trace.h"

ALLOC, FREE, ALLOC_FAILED = 1, 2, 3
KIND_NAMES = {ALLOC: "alloc", FREE: "free", ALLOC_FAILED: "alloc_failed"}
# Same order as GA_API_LIST in allocator/ga_trace.h: the index is the on-disk value.
API_NAMES = ["unknown", "cuMemAlloc", "cuMemAllocPitch", "cuMemFree", "cudaMalloc", "cudaFree",
             "cuMemAllocAsync", "cuMemFreeAsync", "cuMemAllocManaged", "cuMemCreate",
             "cuMemRelease", "cuMemAllocFromPoolAsync", "import", "ctx-teardown"]
API_IMPORT = API_NAMES.index("import")
CUDA_ERROR_OUT_OF_MEMORY = 2

# Field positions in an event tuple, in record order.
T_TIME, T_ADDR, T_SIZE, T_STREAM, T_THREAD, T_DUR, T_DEVICE, T_KIND, T_API, T_RESULT = range(10)

U64 = (1 << 64) - 1
U32 = (1 << 32) - 1


def event(time_ns, addr, size, kind, stream=0, thread=0, duration_ns=0, device=0,
          api=API_IMPORT, result=0):
    """One event tuple in record order; values are clamped into their field widths."""
    return (min(max(int(time_ns), 0), U64), int(addr) & U64, min(max(int(size), 0), U64),
            int(stream) & U64, int(thread) & U32, min(max(int(duration_ns), 0), U32),
            max(-32768, min(int(device), 32767)), kind, api, int(result) & U32)


class Trace:
    """An in-memory trace: event tuples plus what the reader learned about the file."""

    def __init__(self, events=None, start_unix_ns=0):
        self.events = events if events is not None else []
        self.start_unix_ns = start_unix_ns
        self.truncated_bytes = 0  # bytes of an incomplete last record that were ignored


def is_trace_header(head):
    """True when the first bytes of a file carry the trace magic."""
    return head[:8] == MAGIC


def parse(data, name="trace"):
    """Decodes a whole trace held in bytes; raises GaError naming `name` when it is not one."""
    if len(data) < HEADER.size:
        raise GaError(f"{name}: {len(data)} bytes is shorter than the 32-byte trace header; "
                      "it is not a gpuarena trace (record one with GPUARENA_TRACE or use "
                      "`gpuarena import`)")
    magic, version, rsize, start, _flags = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise GaError(f"{name}: bad magic {magic!r}, not a gpuarena trace (for other formats use "
                      "`gpuarena import auto FILE -o OUT`)")
    if version != VERSION:
        fix = ("replay it with the newer gpuarena that wrote it, or re-record it with this one"
               if version > VERSION else
               "re-record it with this gpuarena (or import its source again)")
        raise GaError(f"{name}: trace format version {version}, this gpuarena reads version "
                      f"{VERSION}: {fix}")
    if rsize != RECORD.size:
        raise GaError(f"{name}: record size {rsize} in the header, expected {RECORD.size}; "
                      "the file is damaged or from another tool")
    again = data.find(bytes(data[:16]), HEADER.size)  # magic, version, record size
    if again >= 0:
        # Two traces joined (`cat a.gatrace b.gatrace`): b's header was read as part of a record
        # and b's records 32 bytes out of step, garbage events without a word (an outside
        # check, helper-125); allocator/trace.c says the same.
        raise GaError(f"{name}: a second trace header at byte {again}: traces joined end to end "
                      "(cat a.gatrace b.gatrace > c.gatrace)? a trace holds one process's "
                      "recording, its times counted from its own start: replay each file on its "
                      "own")
    body = memoryview(data)[HEADER.size:]
    whole = len(body) - len(body) % RECORD.size
    events = list(RECORD.iter_unpack(body[:whole]))
    # Threads append their buffers independently: a recorded file is in time order per thread only.
    # Python's sort is stable, so equal times keep file order (frees before allocs in imports).
    if any(events[i - 1][0] > events[i][0] for i in range(1, len(events))):
        events.sort(key=lambda e: e[0])
    trace = Trace(events, start)
    trace.truncated_bytes = len(body) - whole
    return trace


_KIND_AT = struct.calcsize("<QQQQIIh")  # where a record's kind lies


def frees_only(path):
    """The number of events in the trace at path when every one is a free (0 for a header alone);
    None at its first other event, read no further (the first, in a recorded trace), and None for
    a file that is not a readable trace (the reader that follows says why). Reads in pieces of
    3 MiB, a partial last record ignored as read() ignores it."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER.size)
            if len(head) < HEADER.size or HEADER.unpack(head)[:3] != (MAGIC, VERSION, RECORD.size):
                return None
            n, rest = 0, b""
            while True:
                piece = f.read(RECORD.size << 16)
                if not piece:
                    return n
                data = rest + piece
                whole = len(data) - len(data) % RECORD.size
                kinds = data[_KIND_AT:whole:RECORD.size]
                if kinds.count(FREE) != len(kinds):
                    return None
                n, rest = n + len(kinds), data[whole:]
    except OSError:
        return None


def read(path):
    """Reads the trace at path (see parse); OS errors become GaError."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise read_error(path, e) from None
    return parse(data, path)


def read_error(path, e):
    """The GaError of an input that could not be opened or read, with what to do: it said the
    reason alone (`cannot read t.gatrace: No such file or directory`: an outside check)."""
    hint = {errno.ENOENT: "check the path, or give the trace or record file to read",
            errno.EACCES: "make it readable (chmod u+r), or give a copy this user may read",
            errno.EPERM: "make it readable (chmod u+r), or give a copy this user may read",
            errno.ENAMETOOLONG: "a name in a path is at most 255 bytes, a path 4,095: give a "
                                "shorter one",
            errno.ENOTDIR: "a folder in the path is a file: check the path"}.get(
                e.errno, "give a trace or record file this user can read")
    return GaError(f"cannot read {path}: {e.strerror}; {hint}")


def encode(trace):
    """The bytes of a trace file: header then every record."""
    parts = [HEADER.pack(MAGIC, VERSION, RECORD.size, trace.start_unix_ns & U64, 0)]
    pack = RECORD.pack
    try:
        parts.extend(pack(*ev) for ev in trace.events)
    except struct.error as e:
        raise GaError(f"internal: an event does not fit the trace record ({e})") from None
    return b"".join(parts)


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temp_beside(path):
    """(fd, name) of a new file in path's folder, named path's name + '.XXXXXXXX.tmp', created
    exclusively (O_EXCL) with the mode a plain open() would give (0666 less the umask)."""
    folder, base = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=base + ".", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    except OSError:
        pass
    return fd, tmp


def via_proc(path):
    """The /proc path a link leads through (/dev/stdout -> /proc/self/fd/1: a descriptor,
    whatever file it is, never a link to replace), or None."""
    for _ in range(40):
        try:
            target = os.readlink(path)
        except OSError:
            return None
        path = os.path.join(os.path.dirname(path), target)
        if path.startswith("/proc/"):
            return path
    return None


def _own_fd(proc_path):
    """A copy of this process's descriptor N for /proc/self/fd/N (or None): written through it,
    the trace shares the descriptor's offset with what this process prints there after it,
    instead of being overwritten by it (`-o /dev/stdout > file`)."""
    head, _, num = proc_path.rpartition("/")
    if head not in ("/proc/self/fd", f"/proc/{os.getpid()}/fd") or not num.isdigit():
        return None
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        return os.dup(int(num))
    except OSError:
        return None


def _write_through(path, fill):
    """True when path is a character device or a FIFO, a link to one, or a link through /proc
    (/dev/stdout), written through here by fill; False for anything else (a new or regular
    file, a link to one, a directory: the caller's rename handles or refuses it). A FIFO nobody
    reads is an error, not a hang."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    proc = via_proc(path)
    if not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode) or proc):
        return False
    fd = _own_fd(proc) if proc else None
    try:
        if fd is None:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ENXIO:
            raise GaError(f"{path} is a FIFO that nobody is reading; start its reader first, "
                          "or give a file path") from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as f:
        fill(f)
    return True


# A folder that refuses a new file (no write permission) while the file in it may be written: the
# temporary beside it cannot be made, and a report (an import's trace, a --stats file) that the
# user may write was refused or left as it was (an outside check, helper-119). It is then written
# in place, as the shim writes a trace, where nothing is lost by it (in_place_refusal).
_FOLDER_REFUSED = (errno.EACCES, errno.EPERM)


def in_place_refusal(path):
    """Why path cannot be written in place instead of replaced (a phrase), or None where it can:
    it is a regular file there already, not a symbolic link (which a rename replaces itself, never
    its target), of one name (a hard link's other names would change with it: a rename leaves
    them the old file), that this user may write."""
    try:
        st = os.lstat(path)
    except OSError:
        return "no file is there yet to write in place"
    if stat.S_ISLNK(st.st_mode):
        return "the path is a symbolic link, which is replaced, never written through"
    if not stat.S_ISREG(st.st_mode):
        return "the path is not a regular file"
    if st.st_nlink > 1:
        return (f"the file has {st.st_nlink - 1} other name(s) (hard links), which keep the old "
                "file when it is replaced and would change with it if it were written in place")
    if not st.st_mode & 0o222 or not os.access(path, os.W_OK):
        return "the file is read-only"
    return None


def _fill_in_place(path, fill):
    """fill's bytes made in a temporary under TMPDIR first (a fill that fails leaves path as it
    was), then copied over path's own, the rest cut off. path is opened without following a
    link, locked as the shim locks a trace it writes (one being written is refused: in place,
    the two would write over each other), and checked again to be the file of one name it was."""
    with tempfile.TemporaryFile() as staged:
        fill(staged)
        size = staged.tell()
        staged.seek(0)
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        with os.fdopen(fd, "wb") as f:
            try:  # the lock a writer of a trace holds for its life (shim/outfile.c)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OSError(errno.EBUSY, "a running process is writing it (a run's trace, "
                              "which its writer holds locked); nothing was written") from None
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
                raise OSError(errno.EPERM, "the file changed while it was written (a hard link "
                              "made, or another file put in its place); nothing was written")
            while True:
                piece = staged.read(1 << 20)
                if not piece:
                    break
                f.write(piece)
            f.truncate(size)


def replace_from_temp(path, fill):
    """Creates a temporary beside path (temp_beside), lets fill(file object) write it, renames it
    onto path; on any failure the temporary is removed and the exception goes on. A symbolic link
    at path is replaced itself, never written through. A character device or a FIFO at path
    (`-o /dev/null`), or a link to one (`-o /dev/stdout`), is written through, never replaced:
    renamed over, /dev/null became a regular file for the whole machine."""
    if _write_through(path, fill):
        return
    try:
        fd, tmp = temp_beside(path)
    except OSError as e:
        if e.errno not in _FOLDER_REFUSED:
            raise
        why = in_place_refusal(path)
        if why:
            folder = os.path.dirname(os.path.abspath(path))
            raise OSError(e.errno, f"{e.strerror}: the folder {folder} refuses the temporary file "
                          f"written beside it and renamed into place, and {why}") from None
        _fill_in_place(path, fill)
        return
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_atomic(path, data):
    """Writes bytes to a fresh temporary beside path, then renames: readers never see a partial
    file."""
    write_filled(path, lambda f: f.write(data))


def write_filled(path, fill):
    """write_atomic for a file that fill(file object) writes in pieces."""
    try:
        replace_from_temp(path, fill)
    except OSError as e:
        raise GaError(f"cannot write {path}: {e.strerror} ({write_hint(path, e.errno)})") \
            from None


def write_hint(path, err):
    """What to do when a write failed: a full disk was told to "check the folder exists and is
    writable", a full TMPDIR too, named by a temporary path the user never gave (outside check)."""
    if err not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return "check the folder exists and is writable"
    tmp = os.path.realpath(tempfile.gettempdir())
    folder = os.path.dirname(os.path.realpath(path))
    if os.path.dirname(folder) == tmp and os.path.basename(folder).startswith("gpuarena-"):
        return (f"free space in {tmp}, or set TMPDIR to a folder with room: the command keeps a "
                "trace of the input there while it runs")
    return "free space there, or give a path on a file system with room"


def write(path, trace):
    """Writes a trace file atomically."""
    write_atomic(path, encode(trace))
