"""The command ended by SIGTERM or SIGHUP: its temporary files removed first, then its death.

Python's default for these signals is to die at once, without unwinding: every
tempfile.TemporaryDirectory the command had open stayed behind (a /tmp/gpuarena-XXXXXXXX holding
`imported.gatrace`, a converted trace as large as the input, after `timeout 5 gpuarena replay
big.pickle`; the test suite's own SIGTERM left one per run: helper-82, 2026-12-06). install()
turns the first of them into an Ended exception, raised where the command is, so every `with`
block on the way out cleans up as it does on an error (the child tools it waits for are killed by
subprocess on the way); cli.main() then ends the command by the same signal (die()), so a shell
or a supervisor sees what it sent: status 128+N, or "killed by signal N" to a parent that asks.
A second signal while cleaning up is ignored, so the cleanup is not itself cut short.
SIGINT keeps Python's KeyboardInterrupt, which unwinds the same way. A signal the command was
started with ignored (nohup's SIGHUP) stays ignored. Where run and compare pass signals on to the
program (runner.Forwarding), their own handlers are in place meanwhile. temporary_folder() is the
command's temporary folder, removed with these signals held back.
"""

import contextlib
import os
import shutil
import signal
import sys
import tempfile

ENDING = (signal.SIGTERM, signal.SIGHUP)


class Ended(BaseException):
    """A SIGTERM or SIGHUP arrived; a BaseException, so no `except Exception` keeps it."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_got = []


def _handle(signum, _frame):
    if _got:  # already ending: let the cleanup finish
        return
    _got.append(signum)
    raise Ended(signum)


def install():
    """From here on, SIGTERM and SIGHUP raise Ended (unless they were ignored at start); returns
    the handlers before, for restore() (main() runs in a test's own process too)."""
    del _got[:]
    old = {}
    for s in ENDING:
        if signal.getsignal(s) is not signal.SIG_IGN:
            old[s] = signal.signal(s, _handle)
    return old


def restore(old):
    for s, h in old.items():
        signal.signal(s, h)


def die(signum):
    """Ends this process by signum with its default action, after flushing what was printed;
    returns 128+signum where the signal does not kill (a container's first process, for which
    the kernel drops a signal it has no handler for)."""
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError, AttributeError):  # AttributeError: started with it closed
            pass
    try:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    except (OSError, ValueError):
        pass
    return 128 + signum


@contextlib.contextmanager
def temporary_folder(prefix="gpuarena-", dir=None):
    """tempfile.TemporaryDirectory whose removal no signal cuts short: SIGTERM, SIGHUP and SIGINT
    are held back while it is removed and arrive once it is gone (a first signal that came
    during the removal on the way out of a finished command raised in the middle of it, and part
    of the folder stayed)."""
    path = tempfile.mkdtemp(prefix=prefix, dir=dir)
    try:
        yield path
    finally:
        held = ENDING + (signal.SIGINT,)
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            shutil.rmtree(path, ignore_errors=True)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
