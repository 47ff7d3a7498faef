"""Jupyter notebooks: lint the code cells as one module, report findings per cell.

IPython syntax (`%magic`, `!shell`, `?help`) is not Python; such lines are replaced by `pass`
at the same indentation so line numbers and blocks stay intact. Fixes are not applied to
notebooks (their JSON would have to be rewritten cell by cell); findings are reported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


__all__ = ["NotebookError", "NotebookSource", "read_notebook"]


class NotebookError(ValueError):
    """A notebook whose JSON or structure cannot be read."""


@dataclass(frozen=True)
class NotebookSource:
    """The concatenated code cells and where each line came from."""

    text: str
    # For each line of `text` (0-based): (cell number, 1-based; line within the cell, 1-based).
    origins: tuple[tuple[int, int], ...]

    def locate(self, line: int) -> tuple[int, int]:
        """(cell, line in cell) of a 1-based line of `text`."""
        if 1 <= line <= len(self.origins):
            return self.origins[line - 1]
        return self.origins[-1] if self.origins else (1, line)


# Cell magics whose body is still Python.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})


def _is_ipython_syntax(line: str) -> bool:
    stripped = line.lstrip()
    return stripped.startswith(("%", "!")) or (stripped.endswith("?") and not stripped.startswith("#"))


def _strip_leading_indent(lines: list[str]) -> list[str]:
    """IPython removes the indentation of a cell's first line from every line that has it
    (its `leading_indent` transform), so an indented cell still runs."""
    first = next((line for line in lines if line.strip()), "")
    prefix = first[: len(first) - len(first.lstrip())]
    if not prefix:
        return lines
    return [line[len(prefix) :] if line.startswith(prefix) else line for line in lines]


def read_notebook(data: bytes) -> NotebookSource:
    """The code of a notebook's code cells, or `NotebookError` with a one-line reason."""
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise NotebookError(f"broken notebook: not UTF-8 ({error.reason})") from None
    except json.JSONDecodeError as error:
        raise NotebookError(
            f"broken notebook: invalid JSON at line {error.lineno} column {error.colno}: {error.msg}"
        ) from None
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("broken notebook: no list of cells")
    lines: list[str] = []
    origins: list[tuple[int, int]] = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(s for s in source if isinstance(s, str))
        if not isinstance(source, str):
            raise NotebookError(f"broken notebook: cell {number} has no source text")
        cell_lines = _strip_leading_indent(source.splitlines())
        first = cell_lines[0].strip() if cell_lines else ""
        foreign = first.startswith("%%") and first[2:].split(" ", 1)[0] not in _PYTHON_CELL_MAGICS
        continued = False
        for index, line in enumerate(cell_lines, start=1):
            if foreign:
                line = ""  # `%%bash`, `%%writefile`...: the cell is not Python
            elif continued:
                continued = line.endswith("\\")
                line = ""  # the rest of a `!cmd \` shell line
            elif _is_ipython_syntax(line):
                continued = line.endswith("\\")
                indent = line[: len(line) - len(line.lstrip())]
                line = f"{indent}pass"
            lines.append(line)
            origins.append((number, index))
    return NotebookSource("\n".join(lines) + ("\n" if lines else ""), tuple(origins))
