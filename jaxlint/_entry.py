"""The `jaxlint` console script. Importing the linter takes a moment (libcst, rich); a
Ctrl-C meanwhile exits 130 with one line, like a Ctrl-C later, not with a traceback."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from jaxlint._cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("jaxlint: interrupted\n")
        sys.exit(130)
    cli_main()
