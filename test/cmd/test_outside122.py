"""Findings of an outside check of groups (issue 11), helper-122, in `gpuarena top`, each a test
that failed before its fix: a member that exec'd another program (pid and start time kept, its
device memory gone with the exec) shows as dead, as the shim now takes its slot back; one whose main
thread ended while another runs shows as running, as the shim now keeps its share; a ledger whose
lock is damaged is not believed, as the shim refuses it."""

import json
import os
import struct
import subprocess
import sys
import time
import unittest

import gatest
from gpuarena_cli import top

MIB = 1 << 20
GIB = 1 << 30
DEV = "112233445566778899aabbccddeeff00"
MEMBER = gatest.GROUP_MEMBER


class ExecdMember(gatest.MemberProcs, unittest.TestCase):
    prefix = "gpuarena-o122-"

    def member(self, commit):
        p = subprocess.Popen([MEMBER, self.dir, "ex", DEV, str(GIB), str(commit)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        line = p.stdout.readline()
        self.assertTrue(line.startswith("ready "), f"group_member did not join: {line!r}")
        return p.pid

    def test_member_that_execd_another_program_is_dead(self):
        """The slot keeps the program file (/proc/PID/exe, offsets 96 and 104) of the image that
        joined. One whose file is another now (an exec, forged here by changing the slot's inode)
        is dead: top showed it alive, 600 MiB held, while the shim takes its slot back."""
        execd = self.member(600 * MIB)
        stays = self.member(100 * MIB)
        path = [os.path.join(self.dir, n) for n in os.listdir(self.dir) if "-ex-" in n][0]
        with open(path, "r+b") as f:
            data = bytearray(f.read())
            hsize, ssize = top.HEADER.unpack_from(data)[2:4]
            ino = struct.unpack_from("<Q", data, hsize + 104)[0]
            self.assertEqual(ino, os.stat(MEMBER).st_ino, "the slot names the member's program")
            struct.pack_into("<Q", data, hsize + 104, ino + 1)
            f.seek(0)
            f.write(data)
        p = gatest.cli("top", "--dir", self.dir, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        g = json.loads(p.stdout)["groups"][0]
        members = {m["pid"]: m for m in g["members"]}
        self.assertEqual((members[execd]["state"], members[stays]["state"]), ("dead", "running"))
        self.assertEqual(g["committed_dead"], 600 * MIB)


    def test_member_whose_main_thread_ended_runs(self):
        """A process whose main thread ended (pthread_exit) while another runs shows as a zombie
        in /proc/PID/stat, field 20 counting its threads; it holds its memory. top showed such a
        member dead (and the shim gave its share away). The slot is forged to name one."""
        z = subprocess.Popen([sys.executable, "-c",
                              "import ctypes, threading, time\n"
                              "threading.Thread(target=time.sleep, args=(60,)).start()\n"
                              "print('ready', flush=True)\n"
                              "ctypes.CDLL(None).pthread_exit(None)\n"],
                             stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(z.stdout.readline().strip(), "ready")
            for _ in range(500):  # the main thread's end, shown as a zombie
                with open(f"/proc/{z.pid}/stat", "rb") as f:
                    stat = f.read()
                if stat[stat.rfind(b")") + 2:].split()[0] == b"Z":
                    break
                time.sleep(0.01)
            rest = stat[stat.rfind(b")") + 2:].split()
            self.assertEqual(rest[0], b"Z", "the main thread has ended")
            self.member(300 * MIB)
            path = [os.path.join(self.dir, n) for n in os.listdir(self.dir) if "-ex-" in n][0]
            with open(path, "r+b") as f:
                data = bytearray(f.read())
                hsize = top.HEADER.unpack_from(data)[2]
                struct.pack_into("<I", data, hsize + 4, z.pid)
                struct.pack_into("<Q", data, hsize + 8, int(rest[19]))
                struct.pack_into("<QQ", data, hsize + 96, 0, 0)  # its program file: not compared
                f.seek(0)
                f.write(data)
            p = gatest.cli("top", "--dir", self.dir, "--json")
            self.assertEqual(p.returncode, 0, p.stderr)
            m = json.loads(p.stdout)["groups"][0]["members"][0]
            self.assertEqual((m["pid"], m["state"], m["alive"]), (z.pid, "running", True))
        finally:
            z.kill()
            z.wait(timeout=30)
            z.stdout.close()


    def test_ledger_with_a_damaged_lock_not_believed(self):
        """The shim refuses a ledger whose mutex is not the robust process-shared one it makes
        (t_group_outside122.c); top listed it as a working group. It is named under not_read."""
        self.member(100 * MIB)
        path = [os.path.join(self.dir, n) for n in os.listdir(self.dir) if "-ex-" in n][0]
        with open(path, "r+b") as f:
            f.seek(128)
            f.write(b"\xff" * 40)
        p = gatest.cli("top", "--dir", self.dir, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        d = json.loads(p.stdout)
        self.assertEqual(d["groups"], [])
        self.assertEqual([(os.path.basename(path), "its lock is not a ledger's (damaged)")],
                         [(n["file"], n["why"]) for n in d["not_read"]])


if __name__ == "__main__":
    unittest.main()
