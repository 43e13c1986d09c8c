"""`gpuarena top`: the groups (GPUARENA_GROUP) and their member processes, read from the ledgers the
shim keeps in /dev/shm, as a table refreshed like top, as JSON, or as Prometheus text.

A ledger is one file per (user, group, device): /dev/shm/gpuarena-<uid>-<group>-<uuid hex>, whose
layout is shim/group_layout.h's (format 1): a header {magic "GAGROUP", version, header size, slot
size, slot count, slots in use, uid, cap, device UUID, group name} and one 128-byte slot per member
{state, pid, start time, pid namespace, committed, committed peak, in use, reserved, peak, mode,
image, exiting}; exiting (0 in ledgers of gpuarena before it) marks a member in its exit that keeps
its share until its process is gone, shown as "exiting" rather than as an ordinary live member.
The files are only read, never locked: every figure is one aligned word the shim stores atomically.
A member is alive when its pid still runs with the start time it joined with (a reused pid is a
different process), exactly the test the shim applies before taking a dead member's share back;
members of another pid namespace cannot be judged from here and show as unknown (null in JSON).
A user sees their own ledgers; root (the monitoring side: node-exporter's collector runs as root
while pods run as their own users) sees every user's, each believed only when the uid in its name,
its owner and its header agree, so no user can plant a ledger that passes for another's. The
samples carry that uid (a group name is one user's) and each process its ledger slot, so a label set
is never repeated, even for two slots of one pid (a reused pid, a member of another namespace).

Prometheus output follows the text exposition format 0.0.4
(https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format): one `# HELP` and
one `# TYPE name gauge` line per metric, then its samples `name{label="value",...} number`, label
values escaped for backslash, double quote and line feed; node-exporter's textfile collector reads
it from a *.prom file (write it to a temporary name and rename it into place).
"""

import json
import os
import re
import stat
import struct
import sys
import time

from . import GaError
from .fmt import human_bytes, table

MAGIC = b"GAGROUP\0"
VERSION = 1
HEADER = struct.Struct("<8s6IQ16s72s")   # magic .. name, 128 bytes (the mutex follows, unread)
SLOT = struct.Struct("<2I7Q16sQII2Q")   # state .. mode, image, exiting, spare, exe dev/ino: 112 of 128
SLOT_LIVE = 1
# The shim's test of the ledger's lock (shim/group.c, ga_lock_sound): glibc keeps a mutex's kind
# 16 bytes into it (x86-64 and aarch64), and the robust process-shared mutex the shim makes has
# kind 144 (PTHREAD_MUTEX_ROBUST_NORMAL_NP 16 | the process-shared bit 128). Another kind there is a
# damaged lock, which the shim refuses.
LOCK_KIND_AT, LOCK_KIND = 128 + 16, 144
NAME_RE = re.compile(r"^gpuarena-(\d+)-(.+)-([0-9a-f]{32})$")
# What the shim takes as a group name (shim/group_host.c, ga_group_name_ok) and writes as a mode:
# a ledger's bytes are anyone's to forge in /dev/shm, and a name of escape codes was printed as
# it was, into the terminal of whoever ran top (root sees every user's ledgers: helper-82).
GROUP_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
MODE_RE = re.compile(r"[a-z0-9_-]{0,15}")


def uuid_text(raw):
    """The device as nvidia-smi and NVML name it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx."""
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _cstr(b):
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")


def _own_pidns():
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def proc_start(pid):
    """Field 22 of /proc/PID/stat (start time), or None when the process is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2:].split()
    # A zombie whose other threads run (its main thread ended with pthread_exit) keeps its memory
    # and runs: field 20 counts them (the shim's ga_proc_start).
    if len(rest) < 20 or rest[0] == b"X" or (rest[0] == b"Z" and int(rest[17]) < 2):
        return None
    return int(rest[19])


def alive(pid, start, pidns, own_ns, exe=(0, 0)):
    """True/False, or None for a member of another pid namespace (cannot be judged here). exe: the
    program file (device, inode) of the image that joined; another one at /proc/PID/exe now is an
    exec, whose memory went with it (the shim's ga_slot_alive; (0, 0): not compared)."""
    if pidns and own_ns and pidns != own_ns:
        return None
    s = proc_start(pid)
    if s is None or s != start:
        return False
    if exe[1]:
        try:
            st = os.stat(f"/proc/{pid}/exe")
        except OSError:
            return True
        return (st.st_dev, st.st_ino) == exe
    return True


def _state(a, exiting):
    """A member's state: "dead" once its process is gone (its slot not yet taken back), "exiting"
    while it runs its exit holding its share, else "running" (or "unknown": another namespace)."""
    if a is False:
        return "dead"
    if exiting:
        return "exiting"
    return "running" if a else "unknown"


def read_ledger(path, own_ns=None, owner=None):
    """One ledger as a dict (group, device, cap, members...), or None if the file is not one;
    owner: the uid it must belong to (default: this user's)."""
    return read_ledger_why(path, own_ns, owner)[0]


def read_ledger_why(path, own_ns=None, owner=None):
    """(ledger, None), or (None, why the file is not believed as a ledger: a few words), or
    (None, None) for a file gone since the directory was listed."""
    own_ns = _own_pidns() if own_ns is None else own_ns
    owner = os.getuid() if owner is None else owner
    # The shim's own test of a ledger (shim/group_join.c, ga_map): a regular file of its user, mode 0600, of
    # the size its header gives. /dev/shm is anyone's to write: a FIFO there blocked the open
    # for ever, and a file another user made was believed (opened without following links and
    # without blocking, then checked on the descriptor).
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None, None  # removed since the listing (its last member left): nothing to say
    except OSError as e:
        return None, ("a symbolic link" if os.path.islink(path) else f"cannot open: {e.strerror}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        if st.st_uid != owner:
            return None, f"a file of uid {st.st_uid}, not of uid {owner}"
        if st.st_mode & 0o077:
            return None, f"mode {stat.S_IMODE(st.st_mode):04o}, a ledger has 0600"
        with os.fdopen(fd, "rb") as f:
            fd = -1
            data = f.read(1 << 20)
    except OSError as e:
        return None, f"cannot read: {e.strerror}"
    finally:
        if fd >= 0:
            os.close(fd)
    damaged = f"{len(data)} bytes, damaged or not a gpuarena ledger"
    if len(data) < HEADER.size:
        return None, damaged
    magic, version, hsize, ssize, nslots, hwm, uid, cap, uuid, name = HEADER.unpack_from(data)
    if magic != MAGIC:
        return None, damaged
    if version != VERSION:
        return None, f"format version {version}, this gpuarena reads {VERSION}"
    if ssize < SLOT.size or len(data) < hsize + nslots * ssize or st.st_size != hsize + nslots * ssize:
        return None, damaged
    if uid != owner:
        return None, f"its header names uid {uid}, its file uid {owner}"
    if struct.unpack_from("<i", data, LOCK_KIND_AT)[0] != LOCK_KIND:
        return None, "its lock is not a ledger's (damaged)"
    group = _cstr(name)
    wanted = NAME_RE.match(os.path.basename(path))
    if (not GROUP_RE.fullmatch(group) or group in (".", "..")
            or (wanted and wanted.group(2) != group)):
        # not a name the shim writes, or not the one its file is named by (never printed)
        return None, "its header's group name is not its file's"
    members = []
    for i in range(min(hwm, nslots)):
        (state, pid, start, pidns, committed, committed_peak, in_use, reserved, peak,
         mode, _image, exiting, _spare, exe_dev, exe_ino) = SLOT.unpack_from(data, hsize + i * ssize)
        if state != SLOT_LIVE:
            continue
        mode = _cstr(mode)
        a = alive(pid, start, pidns, own_ns, (exe_dev, exe_ino))
        members.append({"slot": i, "pid": pid, "alive": a, "exiting": exiting != 0,
                        "state": _state(a, exiting != 0),
                        "mode": mode if MODE_RE.fullmatch(mode) else "?",
                        "committed": committed, "committed_peak": committed_peak,
                        "in_use": in_use, "reserved": reserved, "peak": peak})
    return {"group": group, "device": uuid_text(uuid), "uid": uid, "cap": cap,
            "committed": sum(m["committed"] for m in members),
            "committed_dead": sum(m["committed"] for m in members if m["alive"] is False),
            "committed_exiting": sum(m["committed"] for m in members if m["state"] == "exiting"),
            "in_use": sum(m["in_use"] for m in members),
            "reserved": sum(m["reserved"] for m in members),
            "members": members, "path": path}, None


def scan(directory):
    """(ledgers, others): every ledger this user may read in directory (root: every user's),
    sorted by user, group, device; and how many files named as other users' ledgers were left
    unread (a user other than root cannot check them)."""
    groups, others, _ = scan_all(directory)
    return groups, others


def _safe_name(n):
    """A file name as top prints it: as it is when it is plain, else Python's ascii() of it
    (anyone may name a file in /dev/shm; escape codes must not reach a terminal)."""
    return n if re.fullmatch(r"[A-Za-z0-9._-]+", n) else ascii(n)


def scan_all(directory):
    """(ledgers, others, not_read): as scan, and the files named as ledgers of this user (root:
    any user's) that are not believed, each {"file", "why"}: a damaged, cut or planted file
    there makes the shim refuse that group, and top showed nothing of it."""
    uid = os.getuid()
    others = 0
    not_read = []
    try:
        names = sorted(os.listdir(directory))
    except OSError as e:
        raise GaError(f"cannot read {directory} ({e.strerror}): give the directory the ledgers "
                      "are in with --dir") from None
    own_ns = _own_pidns()
    groups = []
    for n in names:
        m = NAME_RE.match(n)
        if not m:
            continue
        if uid != 0 and int(m.group(1)) != uid:
            others += 1
            continue
        g, why = read_ledger_why(os.path.join(directory, n), own_ns, int(m.group(1)))
        if g is not None:
            groups.append(g)
        elif why:
            not_read.append({"file": _safe_name(n), "why": why})
    return sorted(groups, key=lambda g: (g["uid"], g["group"], g["device"])), others, not_read


def _not_read_text(not_read):
    n = len(not_read)
    return (f"{n} " + ("files named as group ledgers" if n != 1 else "file named as a group ledger")
            + " not read: "
            + "; ".join(f"{f['file']} ({f['why']})" for f in not_read)
            + ". The shim refuses a group whose ledger path holds such a file: stop the group's "
            "processes and remove it")


def _others_text(others):
    return (f"{others} ledger{'s' if others != 1 else ''} of other users not read (run "
            "gpuarena top as root, or as that user, to see them)")


def _alive_text(m):
    if m["state"] == "exiting":
        return "exiting"
    a = m["alive"]
    return "yes" if a else ("?" if a is None else "no")


def render(groups, directory, others=0, not_read=()):
    tail = f"\n{_not_read_text(not_read)}" if not_read else ""
    if not groups:
        return (f"no gpuarena groups in {directory} (a process started with GPUARENA_GROUP=NAME "
                "and GPUARENA_LIMIT makes one; members given GPUARENA_GROUP_DIR keep their ledgers "
                "there: --dir DIR)" + (f"; {_others_text(others)}" if others else "") + tail)
    out = [_others_text(others), ""] if others else []
    users = {g["uid"] for g in groups}
    for g in groups:
        pct = 100.0 * g["committed"] / g["cap"] if g["cap"] else 0.0
        out.append(f"group {g['group']}  " + (f"user {g['uid']}  " if users != {os.getuid()} else "")
                   + f"device {g['device']}  cap {human_bytes(g['cap'])}  "
                   f"committed {human_bytes(g['committed'])} ({pct:.1f}%)  "
                   f"members {len(g['members'])}" + _dead_text(g["members"]))
        if g["committed_dead"] and all(m["alive"] is False for m in g["members"]):
            # Nothing runs that would take it back: the file stays until a process joins.
            out.append(f"  {human_bytes(g['committed_dead'])} held by dead members, and no "
                       "member runs: the next process to join takes it back, or remove the "
                       f"ledger ({g['path']})")
        elif g["committed_dead"]:
            out.append(f"  {human_bytes(g['committed_dead'])} held by dead members: taken back "
                       "when a member needs the room or reads the group (cuMemGetInfo, NVML)")
        if g["committed_exiting"]:
            out.append(f"  {human_bytes(g['committed_exiting'])} held by exiting members: theirs "
                       "until their processes are gone (the driver holds their memory until then)")
        rows = [[str(m["pid"]), _alive_text(m), m["mode"] or "-",
                 human_bytes(m["committed"]), human_bytes(m["in_use"]),
                 human_bytes(m["reserved"]), human_bytes(m["peak"])] for m in g["members"]]
        if rows:
            out.append(table(["PID", "ALIVE", "MODE", "COMMITTED", "IN USE", "RESERVED",
                              "PEAK RESERVED"], rows))
        out.append("")
    return "\n".join(out).rstrip() + tail


def _dead_text(members):
    """' (1 dead)' after the member count when some members' processes are gone (their slots
    not yet taken back): the count alone read as that many processes running (a check of
    2026-12-06; said since 2026-12-07)."""
    dead = sum(1 for m in members if m["alive"] is False)
    return f" ({dead} dead)" if dead else ""


def render_scan(directory):
    groups, others, not_read = scan_all(directory)
    return render(groups, directory, others, not_read)


def to_json(groups, directory, others=0, not_read=()):
    return json.dumps({"format": 1, "dir": directory, "groups": groups,
                       "other_users_ledgers_unread": others, "not_read": list(not_read)},
                      indent=2)


def _esc(v):
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**kv):
    return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in kv.items()) + "}"


METRICS = (
    # name, help, what it reads: ("group", key) | ("process", key) | ("device", key)
    ("gpuarena_group_cap_bytes", "Cap shared by the group on the device, bytes.", "group", "cap"),
    ("gpuarena_group_committed_bytes", "Bytes the group's members hold against the cap (a dead "
     "member's until the shim takes them back, at the next refusal).", "group", "committed"),
    ("gpuarena_group_members", "Member processes in the group's ledger (dead ones until taken "
     "back: see gpuarena_process_alive).", "group", "members"),
    ("gpuarena_process_committed_bytes", "Bytes the process holds against its group's cap.",
     "process", "committed"),
    ("gpuarena_process_in_use_bytes", "Bytes the process's allocations use.", "process", "in_use"),
    ("gpuarena_process_reserved_bytes", "Bytes the process has reserved from the driver.",
     "process", "reserved"),
    ("gpuarena_process_peak_bytes", "Peak bytes the process has reserved from the driver "
     "(the peak of reserved_bytes, not of in_use_bytes).", "process", "peak"),
    ("gpuarena_process_alive", "1 if the member process runs, 0 if it died (-1: another pid "
     "namespace, unknown).", "process", "alive"),
    ("gpuarena_process_exiting", "1 if the member is in its exit, keeping its share until its "
     "process is gone, else 0.", "process", "exiting"),
    ("gpuarena_device_cap_bytes", "Sum of the caps of the groups on the device, bytes.",
     "device", "cap"),
    ("gpuarena_device_committed_bytes", "Bytes all groups hold on the device.", "device",
     "committed"),
    ("gpuarena_device_groups", "Groups with a ledger on the device.", "device", "groups"),
)


def _samples(kind, key, groups):
    if kind == "group":
        for g in groups:
            v = len(g["members"]) if key == "members" else g[key]
            yield _labels(group=g["group"], uid=g["uid"], device=g["device"]), v
    elif kind == "process":
        for g in groups:
            for m in g["members"]:
                v = m[key]
                if key == "alive":
                    v = -1 if v is None else int(v)
                elif key == "exiting":
                    v = int(v)
                yield _labels(group=g["group"], uid=g["uid"], device=g["device"], pid=m["pid"],
                              slot=m["slot"], mode=m["mode"]), v
    else:
        devices = {}
        for g in groups:
            d = devices.setdefault(g["device"], {"cap": 0, "committed": 0, "groups": 0})
            d["cap"] += g["cap"]
            d["committed"] += g["committed"]
            d["groups"] += 1
        for dev in sorted(devices):
            yield _labels(device=dev), devices[dev][key]


def to_prometheus(groups, others=0, not_read=()):
    lines = [f"# gpuarena: {_others_text(others)}"] if others else []
    lines += [f"# gpuarena: {_not_read_text(not_read)}"] if not_read else []
    for name, text, kind, key in METRICS:
        lines.append(f"# HELP {name} {text}")
        lines.append(f"# TYPE {name} gauge")
        for labels, value in _samples(kind, key, groups):
            lines.append(f"{name}{labels} {value}")
    lines.append("# HELP gpuarena_ledgers_not_read Files named as group ledgers that are not "
                 "ledgers top can read (the shim refuses their groups until they are removed).")
    lines.append("# TYPE gpuarena_ledgers_not_read gauge")
    lines.append(f"gpuarena_ledgers_not_read {len(not_read)}")
    return "\n".join(lines) + "\n"


def run(directory, once, as_json, prometheus, interval, iterations=None):
    """The subcommand. Live mode redraws every interval seconds until Ctrl-C (or iterations)."""
    if interval <= 0:
        raise GaError(f"--interval {interval}: must be above 0 seconds")
    if as_json or prometheus:
        groups, others, not_read = scan_all(directory)
        sys.stdout.write(to_prometheus(groups, others, not_read) if prometheus else
                         to_json(groups, directory, others, not_read) + "\n")
        return 0
    if once:
        print(render_scan(directory))
        return 0
    n = 0
    # Into a file or a pipe (a log, a sidecar's output) frames follow one another, without the
    # terminal's clear-screen codes (they were written there too: helper-67 F10).
    tty = sys.stdout.isatty()
    while iterations is None or n < iterations:
        if tty:
            sys.stdout.write("\x1b[H\x1b[2J")  # home and clear, as top does
        print(f"gpuarena top - {time.strftime('%H:%M:%S')} - every {interval:g} s" +
              (", Ctrl-C quits\n" if tty else "\n"))
        print(render_scan(directory))
        sys.stdout.flush()
        n += 1
        if iterations is None or n < iterations:
            time.sleep(interval)
    return 0
