"""A user's values in the command's messages, bounded: a value of more than SHOWN_MAX characters
is shown by its head, its tail and its length, so a message is never longer than its words and
the advice after the value is never lost in it (a 5,000-character --mode was quoted whole by
argparse, and a 5,000-character --stats DIR/ twice by the command: an outside check, helper-119).

One rule for every line the command writes on stderr while it runs (cli.main wraps sys.stderr):
argparse's usage errors, the command's own messages, the replay tool's relayed. Each argument on
the command line longer than SHOWN_MAX (and the value of an `--opt=VALUE` or `K=V` one) is
replaced where it appears, quoted or not; any other run of more than SHOWN_MAX characters without
white space (a folder or a path the command made from a value) too. What the program under `run`
or `compare` writes goes to the descriptor itself, never through here, and is never changed.
"""

import contextlib
import re
import sys

SHOWN_MAX = 200  # a path of ordinary length is shown whole
_HEAD, _TAIL = 48, 32
_LONG_WORD = re.compile(r"\S{%d,}" % (SHOWN_MAX + 1))


def shorten(text):
    """text itself when it is SHOWN_MAX characters or fewer, else its head, '...', its tail and
    its length: `xxxx...xxxx (5000 characters)`."""
    if len(text) <= SHOWN_MAX:
        return text
    return f"{text[:_HEAD]}...{text[-_TAIL:]} ({len(text)} characters)"


def _quoted(text):
    return f"'{text[:_HEAD]}...{text[-_TAIL:]}' ({len(text)} characters)"


def long_values(argv):
    """The arguments of argv longer than SHOWN_MAX, and the values after the first '=' of such
    arguments, longest first (a value inside a longer one is replaced after it)."""
    found = set()
    for arg in argv:
        for value in (arg, arg.split("=", 1)[-1]):
            if len(value) > SHOWN_MAX:
                found.add(value)
    return sorted(found, key=len, reverse=True)


def bound(message, values=()):
    """message with each of values (long_values) shortened where it appears: quoted as repr
    quotes it ('...', then its length), or within a word (a path made from it: its length after
    the word); then any other run of more than SHOWN_MAX characters without white space."""
    spaced = []
    for value in values:
        if value in message:
            message = message.replace(repr(value), _quoted(value))
            message = message.replace(f"'{value}'", _quoted(value))
            if _LONG_WORD.fullmatch(value):
                spaced.append(value)
            else:  # a value with white space in it, not quoted: shortened where it is
                message = message.replace(value, shorten(value))

    def word(m):
        text = m.group()
        for value in spaced:
            if value in text:  # its length before the word's closing punctuation
                core = text.rstrip(":;,.)")
                return (core.replace(value, f"{value[:_HEAD]}...{value[-_TAIL:]}") +
                        f" ({len(value)} characters)" + text[len(core):])
        return shorten(text)
    return _LONG_WORD.sub(word, message)


class _Bounding:
    """A text stream that writes through to stream, each piece bounded (bound)."""

    def __init__(self, stream, values):
        self._stream = stream
        self._values = values

    def write(self, text):
        self._stream.write(bound(text, self._values))
        return len(text)

    def __getattr__(self, name):  # flush, fileno, isatty, encoding...: the stream's own
        return getattr(self._stream, name)


@contextlib.contextmanager
def stderr(argv):
    """sys.stderr bounded for the values of argv while the block runs (not when it is closed)."""
    old = sys.stderr
    if old is None:
        yield
        return
    sys.stderr = _Bounding(old, long_values(argv))
    try:
        yield
    finally:
        sys.stderr = old
