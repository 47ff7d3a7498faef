"""Print a site of the exported corpus with its context, for judging it.

    python ecosystem/show.py REPO PATH LINE [--context N]

PATH is as in labels.tsv: `file.py`, or `file.ipynb#CELL` with LINE counted within that cell.
A notebook site prints the code cells before it too (with `# cell N` markers), since a cell
runs after the ones above it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import cache_dir, repo_folder  # noqa: E402

from jaxlint._notebook import read_notebook  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo")
    parser.add_argument("path")
    parser.add_argument("line", type=int)
    parser.add_argument("--context", type=int, default=40, help="lines before and after (files)")
    args = parser.parse_args(argv)
    path, _, cell = args.path.partition("#")
    file = cache_dir() / repo_folder(args.repo) / path
    if not file.is_file():
        print(f"error: no exported file {file} (run ecosystem/export.py)", file=sys.stderr)
        return 2
    if cell:
        notebook = read_notebook(file.read_bytes())
        previous = None
        for number, text in enumerate(notebook.text.splitlines(), start=1):
            at_cell, at_line = notebook.locate(number)
            if at_cell > int(cell):
                break
            if at_cell != previous:
                print(f"# ---- cell {at_cell}")
                previous = at_cell
            mark = ">>" if (at_cell, at_line) == (int(cell), args.line) else "  "
            print(f"{mark}{at_line:5d}  {text}")
        return 0
    lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    low = max(1, args.line - args.context)
    high = min(len(lines), args.line + args.context)
    for number in range(low, high + 1):
        mark = ">>" if number == args.line else "  "
        print(f"{mark}{number:5d}  {lines[number - 1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
