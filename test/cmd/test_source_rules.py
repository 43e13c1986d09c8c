"""Rules of the code base that a reader can check but a compiler does not, read from the sources:
locks are taken and released in the same function (shim/ and allocator/), and allocator/ touches
neither CUDA nor dlsym (every pool gets its memory through the backend interface). Each rule is
also tried on a small bad sample, so a scanner that found nothing cannot pass by accident.
The lock rule is read per function, not per path: a function that takes a lock must also release
one and the other way round, so a lock handed to a caller or a callee is found; one released on
some paths only is left to review and to the tsan tier."""

import glob
import os
import re
import unittest

import gatest

LOCK = re.compile(r"\b(pthread_mutex_lock|pthread_mutex_trylock|pthread_rwlock_rdlock|"
                  r"pthread_rwlock_wrlock|pthread_spin_lock|ga_lock|ga_mutex_lock|"
                  r"ga_mutex_lock_for)\s*\(")
UNLOCK = re.compile(r"\b(pthread_mutex_unlock|pthread_rwlock_unlock|pthread_spin_unlock|"
                    r"ga_unlock|ga_mutex_unlock)\s*\(")

# Functions that take a lock for another function to release, each for a reason of its own.
HANDOFF = {
    # pthread_atfork: prepare takes every context lock, the parent and the child release them
    ("shim/ctx.c", "ga_ctx_atfork_prepare"),
    ("shim/ctx.c", "ga_ctx_atfork_parent"),
    # the group ledger's robust process-shared mutex (EOWNERDEAD handled inside): the wrappers
    ("shim/group.c", "ga_lock"),
    ("shim/group.c", "ga_unlock"),
}


ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do"}


def strip(src):
    """C source with comments, string and character literals and preprocessor lines (macro
    bodies included) blanked, lengths kept."""
    src = re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*",
                 lambda m: re.sub(r"[^\n]", " ", m.group(0)), src)
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(src):
    """(name, body) of every function defined at file scope."""
    text = strip(src)
    found, depth, start, head = [], 0, 0, 0
    for i, c in enumerate(text):
        if c == "{":
            if depth == 0:
                start = i
                sig = ATTRIBUTE.sub(" ", text[head:i]).strip()
                m = re.search(r"([A-Za-z_]\w*)\s*\([^;{}]*\)$", sig, re.S)
                name = m.group(1) if m and "=" not in sig and m.group(1) not in KEYWORDS else None
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if name:
                    found.append((name, text[start:i + 1]))
                head = i + 1
        elif c == ";" and depth == 0:
            head = i + 1
    return found


def lock_imbalance(path, src):
    """Functions of one file that lock without unlocking, or unlock without locking."""
    bad = []
    for name, body in functions(src):
        locks, unlocks = len(LOCK.findall(body)), len(UNLOCK.findall(body))
        if bool(locks) != bool(unlocks) and (path, name) not in HANDOFF:
            bad.append("%s: %s() takes %d lock(s) and releases %d" % (path, name, locks, unlocks))
    return bad


def sources(*dirs):
    for d in dirs:
        for f in sorted(glob.glob(os.path.join(gatest.REPO, d, "*.[ch]"))):
            with open(f, encoding="utf-8") as fh:
                yield os.path.relpath(f, gatest.REPO), fh.read()


class SourceRules(unittest.TestCase):
    def test_locks_are_released_where_they_are_taken(self):
        bad = []
        for path, src in sources("shim", "allocator"):
            bad += lock_imbalance(path, src)
        self.assertEqual(bad, [], "a lock handed from one function to another")

    def test_the_exceptions_exist(self):
        # An exception for a function that is gone would hide a new one of the same name.
        names = {(p, n) for p, src in sources("shim") for n, _ in functions(src)}
        self.assertEqual(HANDOFF - names, set())

    def test_scanner_finds_a_handoff(self):
        sample = """
static int table[] = { 1, 2 };
/* pthread_mutex_unlock( in a comment does not count */
static ga_ctx_t *find(int k) { pthread_mutex_lock(&c->lock); return c; }
static void use(void) { ga_ctx_t *c = find(1); if (c) { pthread_mutex_unlock(&c->lock); } }
static void fine(void) { pthread_mutex_lock(&m); const char *s = "}"; pthread_mutex_unlock(&m); }
#define LOCKED(m, x) do { \\
        pthread_mutex_lock(m); x; } while (0)
static __attribute__((noinline, cold)) int late(int (*f)(int)) { return f(1); }
"""
        self.assertEqual([f for f, _ in functions(sample)], ["find", "use", "fine", "late"])
        self.assertEqual(lock_imbalance("x.c", sample),
                         ["x.c: find() takes 1 lock(s) and releases 0",
                          "x.c: use() takes 0 lock(s) and releases 1"])

    def test_allocator_has_no_cuda_and_no_dlsym(self):
        bad = []
        for path, src in sources("allocator"):
            text = strip(src)
            if re.search(r'#\s*include\s*[<"](cuda|cudart|nvml)', src):
                bad.append("%s: includes a CUDA header" % path)
            for word in ("dlsym", "dlopen", "CUresult", "CUdeviceptr"):
                if re.search(r"\b%s\b" % word, text):
                    bad.append("%s: %s" % (path, word))
        self.assertEqual(bad, [], "allocator/ reaches for CUDA itself: it has the backend")


if __name__ == "__main__":
    unittest.main()
