"""The `vmtax` command.  Loading vmtax (numpy, scipy, matplotlib) takes a
second or more: a Ctrl-C in that time ends it with the same one line and
exit status as a Ctrl-C later, not a traceback from an import.  The
Ctrl-C is held while the modules load (numpy turns a KeyboardInterrupt
inside its C-extension import into an ImportError that quotes a
traceback) and acted on as soon as they have.  A process started with
SIGINT ignored keeps ignoring it.  The handler comes from _signal, a
built-in module: `signal` would load enum and collections first, time in
which a Ctrl-C still ends in a traceback."""

import _signal  # type: ignore[import-not-found]  # no stub: signal.py's own core
import sys

INTERRUPTED = 130


def main() -> int:
    held = []
    installed, previous = False, None
    try:
        if _signal.getsignal(_signal.SIGINT) != _signal.SIG_IGN:
            previous = _signal.signal(_signal.SIGINT, lambda *_: held.append(True))
            installed = True
    except ValueError:  # not the main thread: load as it comes
        pass
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        held.append(True)
    finally:
        if installed:  # a handler set outside Python reads as None: Python's own then
            _signal.signal(_signal.SIGINT, previous if previous is not None else _signal.default_int_handler)
    try:
        if held:
            raise KeyboardInterrupt
        return cli_main()
    except KeyboardInterrupt:
        print("vmtax: interrupted", file=sys.stderr)
        return INTERRUPTED
