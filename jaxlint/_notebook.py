"""Jupyter notebooks: lint the code cells as one module, report findings per cell.

A cell that is not valid Python is reported (JL000, in that cell) and left out, so the other
cells are still linted.

IPython syntax (`%magic`, `!shell`, `?help`, automagic `pip install x`) is not Python; such lines are replaced by `pass`
at the same indentation so line numbers and blocks stay intact. Fixes rewrite the code cells
in place (`_notebook_edit`).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


__all__ = ["CodeCell", "NotebookError", "NotebookSource", "code_cells", "load_notebook", "read_notebook"]


class NotebookError(ValueError):
    """A notebook whose JSON or structure cannot be read."""


@dataclass(frozen=True)
class NotebookSource:
    """The concatenated code cells and where each line came from."""

    text: str
    # For each line of `text` (0-based): (cell number, 1-based; line within the cell, 1-based).
    origins: tuple[tuple[int, int], ...]
    # Cells that are not valid Python even with IPython syntax masked: (cell number, the
    # masked code). They are blank in `text`, so that one broken cell does not hide the
    # findings of the others (Jupyter runs the other cells too).
    broken: tuple[tuple[int, str], ...] = ()
    # For each code cell: the line of the `.ipynb` text where each of its lines is written.
    file_lines: Mapping[int, Sequence[int]] = field(default_factory=dict)
    # The names called in `%timeit` lines (`%timeit f(10, 20).block_until_ready()`), masked
    # out of `text`: functions the notebook benchmarks.
    timed: frozenset[str] = frozenset()

    def locate(self, line: int) -> tuple[int, int]:
        """(cell, line in cell) of a 1-based line of `text`."""
        if 1 <= line <= len(self.origins):
            return self.origins[line - 1]
        return self.origins[-1] if self.origins else (1, line)

    def file_line(self, cell: int, line: int) -> int | None:
        """The 1-based line of the `.ipynb` text holding line `line` of cell `cell`."""
        lines = self.file_lines.get(cell)
        if not lines:
            return None
        return lines[min(max(line, 1), len(lines)) - 1]


# Cell magics whose body is still Python.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})


# Line magics and shell aliases that IPython's automagic (on by default) runs without a `%`.
_AUTOMAGICS = frozenset(
    {
        "alias", "autoawait", "autocall", "automagic", "autoreload", "bookmark", "cat", "cd",
        "clear", "colors", "conda", "config", "cp", "debug", "dhist", "dirs", "doctest_mode",
        "ed", "edit", "env", "gui", "hist", "history", "killbgscripts", "ldir", "less",
        "load", "load_ext", "loadpy", "logoff", "logon", "logstart", "logstate", "logstop",
        "ls", "lsmagic", "lx", "macro", "magic", "mamba", "man", "matplotlib", "micromamba",
        "mkdir", "more", "mv", "notebook", "page", "pastebin", "pdb", "pdef", "pdoc", "pfile",
        "pinfo", "pinfo2", "pip", "popd", "pprint", "precision", "prun", "psearch", "psource",
        "pushd", "pwd", "pycat", "pylab", "quickref", "recall", "rehashx", "reload_ext",
        "rerun", "reset", "reset_selective", "rm", "rmdir", "run", "save", "sc", "set_env",
        "store", "sx", "system", "tb", "time", "timeit", "unalias", "unload_ext", "uv", "who",
        "who_ls", "whos", "xdel", "xmode",
    }
)  # fmt: skip


_CAPTURED_MAGIC = re.compile(r"[A-Za-z_][\w.]*(\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*[!%]")


def _is_ipython_syntax(line: str, automagic: bool) -> bool:
    stripped = line.lstrip()
    if stripped.startswith(("%", "!")) or (stripped.endswith("?") and not stripped.startswith("#")):
        return True
    if _CAPTURED_MAGIC.match(stripped):
        return True  # `files = !ls`, `t = %timeit -o f(x)`
    return automagic and _is_automagic(stripped)


def _is_automagic(stripped: str) -> bool:
    """`timeit -n 5 f(x)`, `pip install jax`, `cd data`: a magic name, a space, then text
    that is not Python. `time = 3` or `run(x)` stay Python, as IPython keeps them."""
    name, space, rest = stripped.partition(" ")
    if not space or name not in _AUTOMAGICS or not rest.strip():
        return False
    try:
        compile(stripped, "<cell line>", "exec")
    except SyntaxError:
        return True
    return False


def _leading_indent(lines: list[str]) -> str:
    first = next((line for line in lines if line.strip()), "")
    return first[: len(first) - len(first.lstrip())]


def _strip_leading_indent(lines: list[str]) -> list[str]:
    """IPython removes the indentation of a cell's first line from every line that has it
    (its `leading_indent` transform), so an indented cell still runs."""
    prefix = _leading_indent(lines)
    if not prefix:
        return lines
    return [line[len(prefix) :] if line.startswith(prefix) else line for line in lines]


@dataclass(frozen=True)
class CodeCell:
    """One code cell: its number (1-based, among all cells), its source as stored, the lines
    as IPython runs them (`prefix`, the first line's indentation, removed), the same lines
    with IPython syntax masked, and whether it is Python at all (`broken`: it is not)."""

    number: int
    source: str
    prefix: str
    lines: tuple[str, ...]
    masked: tuple[str, ...]
    broken: bool


def load_notebook(data: bytes) -> dict:
    """The notebook's JSON document, or `NotebookError` with a one-line reason."""
    try:
        # Numbers are kept as text: no cell needs them, and a huge integer in the metadata
        # would otherwise exceed Python's int conversion limit.
        document = json.loads(data.decode("utf-8"), parse_int=str)
    except UnicodeDecodeError as error:
        raise NotebookError(f"broken notebook: not UTF-8 ({error.reason})") from None
    except json.JSONDecodeError as error:
        raise NotebookError(
            f"broken notebook: invalid JSON at line {error.lineno} column {error.colno}: {error.msg}"
        ) from None
    except RecursionError:
        raise NotebookError("broken notebook: JSON nested too deeply") from None
    except ValueError as error:
        raise NotebookError(f"broken notebook: {str(error).splitlines()[0]}") from None
    if not isinstance(document, dict) or not isinstance(document.get("cells"), list):
        raise NotebookError("broken notebook: no list of cells")
    return document


def code_cells(document: dict) -> list[CodeCell]:
    """The code cells of a notebook document, masked for linting."""
    cells: list[CodeCell] = []
    for number, cell in enumerate(document["cells"], start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(s for s in source if isinstance(s, str))
        if not isinstance(source, str):
            raise NotebookError(f"broken notebook: cell {number} has no source text")
        original = source.splitlines()
        cell_lines = _strip_leading_indent(original)
        prefix = _leading_indent(original)
        masked = _mask_cell(cell_lines, automagic=False)
        broken = False
        if not _parses("\n".join(masked)):
            # Only then look for automagic: `cd ,` inside a bracket is Python, not a magic.
            masked = _mask_cell(cell_lines, automagic=True)
            broken = not _parses("\n".join(masked))
        cells.append(CodeCell(number, source, prefix, tuple(cell_lines), tuple(masked), broken))
    return cells


def read_notebook(data: bytes) -> NotebookSource:
    """The code of a notebook's code cells, or `NotebookError` with a one-line reason."""
    from ._notebook_edit import cell_file_lines, source_spans

    document = load_notebook(data)
    json_text = data.decode("utf-8")
    spans = source_spans(json_text)
    lines: list[str] = []
    origins: list[tuple[int, int]] = []
    broken: list[tuple[int, str]] = []
    file_lines: dict[int, list[int]] = {}
    timed: list[str] = []
    for cell in code_cells(document):
        timed.extend(timed_calls(cell.lines, cell.masked))
        if cell.number in spans:
            file_lines[cell.number] = cell_file_lines(json_text, spans[cell.number])
        masked = list(cell.masked)
        if cell.broken:
            broken.append((cell.number, "\n".join(masked) + "\n"))
            masked = [""] * len(masked)
        lines.extend(masked)
        origins.extend((cell.number, index) for index in range(1, len(masked) + 1))
    text = "\n".join(lines) + ("\n" if lines else "")
    return NotebookSource(text, tuple(origins), tuple(broken), file_lines, frozenset(timed))


# `%timeit [options] statement`, also captured (`t = %timeit -o f(x)`) or as automagic.
_TIMEIT = re.compile(r"^(?:[A-Za-z_][\w.]*\s*=\s*)?%?timeit\s+(?P<rest>.*)$")
_CALLED = re.compile(r"([A-Za-z_]\w*)\s*\(")


def timed_calls(lines: Sequence[str], masked: Sequence[str]) -> list[str]:
    """The names called in the `%timeit` lines of a cell (those its masking replaced): the
    functions it benchmarks, each run many times on purpose, compiles and all."""
    found: list[str] = []
    for line, mask in zip(lines, masked):
        if line.strip() == mask.strip():
            continue
        match = _TIMEIT.match(line.strip())
        if match is not None:
            found.extend(_CALLED.findall(match.group("rest")))
    return found


def _mask_cell(cell_lines: list[str], automagic: bool) -> list[str]:
    """The cell's lines with IPython-only lines blanked or replaced by `pass`."""
    first = cell_lines[0].strip() if cell_lines else ""
    if first.startswith("%%") and first[2:].split(" ", 1)[0] not in _PYTHON_CELL_MAGICS:
        return [""] * len(cell_lines)  # `%%bash`, `%%writefile`...: the cell is not Python
    masked: list[str] = []
    continued = False
    python = _LineScanner()
    for line in cell_lines:
        if continued:
            continued = line.endswith("\\")
            line = ""  # the rest of a `!cmd \` shell line
        elif python.at_statement_start and _is_ipython_syntax(line, automagic):
            continued = line.endswith("\\")
            indent = line[: len(line) - len(line.lstrip())]
            line = f"{indent}pass"
        else:
            # `% (a, b)` continuing a bracketed `'%d' % ...`, or a line inside a docstring,
            # is Python even though it starts like a magic.
            python.scan(line)
        masked.append(line)
    return masked


class _LineScanner:
    """Tracks, line by line, whether the next line starts a new statement: not inside
    brackets, a string, or after a backslash continuation."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote = ""  # the open triple quote, if any
        self.backslash = False

    @property
    def at_statement_start(self) -> bool:
        return self.depth == 0 and not self.quote and not self.backslash

    def scan(self, line: str) -> None:
        self.backslash = False
        i, n = 0, len(line)
        while i < n:
            if self.quote:
                end = line.find(self.quote, i)
                while end > 0 and _escaped(line, end):
                    end = line.find(self.quote, end + 1)
                if end < 0:
                    return
                i, self.quote = end + 3, ""
                continue
            char = line[i]
            if char == "#":
                return
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            elif char in "'\"":
                if line.startswith(char * 3, i):
                    self.quote = char * 3
                    i += 3
                    continue
                end = i + 1
                while end < n and (line[end] != char or _escaped(line, end)):
                    end += 1
                i = end  # an unterminated one-line string ends the line
            elif char == "\\" and i == n - 1:
                self.backslash = True
            i += 1


def _escaped(line: str, index: int) -> bool:
    """Whether the character at `index` follows an odd number of backslashes."""
    count = 0
    while index > 0 and line[index - 1] == "\\":
        count += 1
        index -= 1
    return count % 2 == 1


def _parses(code: str) -> bool:
    try:
        compile(code, "<cell>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except (SyntaxError, ValueError):
        return False
    return True
