"""The `vmtax` command.  Loading vmtax (numpy, scipy, matplotlib) takes a
second or more: a Ctrl-C in that time ends it with the same one line and
exit status as a Ctrl-C later, not a traceback from an import."""
import sys

INTERRUPTED = 130


def main() -> int:
    try:
        from .cli import main as cli_main
        return cli_main()
    except KeyboardInterrupt:
        print("vmtax: interrupted", file=sys.stderr)
        return INTERRUPTED
