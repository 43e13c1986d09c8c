"""gpuarena command-line tools: import, replay, report, run and compare (Python 3 standard library).

The package is split by concern: tracefile (the binary trace format), importers (foreign formats to
traces; the CSV ones in csvformats, the pairing and field checks they share in importbase), paths (where the built shim and replay tool live), replay, report, runner (run/compare), plot
(the optional matplotlib charts), ending (cleanup on SIGTERM and SIGHUP), names (the name a misspelt
one most likely means), argparser (the options and their usage errors) and cli (dispatch, exit codes). Every module raises GaError for a problem in the user's input
or setup (UsageError for options that cannot be used as given); only cli turns it into a
`gpuarena: ...` message and exit code 1 (2 for UsageError), so no traceback reaches a user.
"""


class GaError(Exception):
    """A problem the user can fix: the message says what is wrong and how to fix it."""


class UsageError(GaError):
    """Options that cannot be used as given: exit code 2, like argparse's own usage errors."""
