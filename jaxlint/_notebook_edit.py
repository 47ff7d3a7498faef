"""Rewriting a notebook's code cells in place, and where a cell's lines sit in the `.ipynb` text.

A fix sees the code cells as one module, as the linter does, with two kinds of marker
comments that survive libcst's rewrites: one line `#<mark> cell N` before each cell, and
`#<mark> keep K` on every line that is not Python (IPython syntax, a cell that does not
parse), which stands for that line as written. After fixing, the module is cut at the cell
markers and the kept lines are put back; a fix that loses or moves a marker (one that merges
statements of two cells) is not applied.

Only the `source` values of the changed cells are replaced in the JSON text, in the style
they were written in (a list of lines or one string, the same indentation, and the same
escaping of lines that did not change); every other byte (outputs, metadata, cell ids, key
order, indentation, the trailing newline) is kept.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]

from ._notebook import CodeCell


__all__ = ["FixText", "SourceSpan", "cell_file_lines", "fix_text", "rebuild", "source_spans", "split_cells"]

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")


# -- where things are in the JSON text -------------------------------------------------


@dataclass(frozen=True)
class SourceSpan:
    """A code cell's `source` value in the JSON text: [start, end), and for a list, the
    spans of its string elements."""

    start: int
    end: int
    elements: tuple[tuple[int, int], ...] | None  # None: the source is one string


def _skip(text: str, index: int) -> int:
    return _WHITESPACE.match(text, index).end()  # type: ignore[union-attr]


def _members(text: str, index: int) -> tuple[list[tuple[str, int, int]], int]:
    """An object at `index`: [(key, value start, value end)], and the end of the object."""
    members: list[tuple[str, int, int]] = []
    index = _skip(text, index + 1)
    if text[index] == "}":
        return members, index + 1
    while True:
        key, index = scanstring(text, index + 1)
        index = _skip(text, _skip(text, index) + 1)  # past the colon
        end = _value_end(text, index)
        members.append((key, index, end))
        index = _skip(text, end)
        if text[index] == "}":
            return members, index + 1
        index = _skip(text, index + 1)


def _elements(text: str, index: int) -> tuple[list[tuple[int, int]], int]:
    """An array at `index`: [(element start, element end)], and the end of the array."""
    elements: list[tuple[int, int]] = []
    index = _skip(text, index + 1)
    if text[index] == "]":
        return elements, index + 1
    while True:
        end = _value_end(text, index)
        elements.append((index, end))
        index = _skip(text, end)
        if text[index] == "]":
            return elements, index + 1
        index = _skip(text, index + 1)


def _value_end(text: str, index: int) -> int:
    char = text[index]
    if char == '"':
        return scanstring(text, index + 1)[1]
    if char == "{":
        return _members(text, index)[1]
    if char == "[":
        return _elements(text, index)[1]
    match = _SCALAR.match(text, index)
    if match is None:
        raise ValueError(f"not JSON at offset {index}")
    return match.end()


def source_spans(text: str) -> dict[int, SourceSpan]:
    """The `source` value of each cell (1-based number) of a notebook's JSON text, which
    `json.loads` has already accepted. As `json.loads` does, the last of repeated keys wins.
    A document nested too deeply for this reader gives none."""
    try:
        return _source_spans(text)
    except RecursionError:
        return {}


def _source_spans(text: str) -> dict[int, SourceSpan]:
    top, _ = _members(text, _skip(text, 0))
    cells_at = {key: start for key, start, _ in top}.get("cells")
    if cells_at is None or text[cells_at] != "[":
        return {}
    spans: dict[int, SourceSpan] = {}
    cells, _ = _elements(text, cells_at)
    for number, (start, _end) in enumerate(cells, start=1):
        if text[start] != "{":
            continue
        values = {key: (value_start, value_end) for key, value_start, value_end in _members(text, start)[0]}
        if "source" not in values:
            continue
        value_start, value_end = values["source"]
        elements = tuple(_elements(text, value_start)[0]) if text[value_start] == "[" else None
        spans[number] = SourceSpan(value_start, value_end, elements)
    return spans


def cell_file_lines(text: str, span: SourceSpan) -> list[int]:
    """For each line of the cell's source, the 1-based line of the `.ipynb` text where it is
    written (for a list source, each element is on its own line; a one-string source is on
    one line)."""
    breaks = [match.start() for match in re.finditer("\n", text)]

    def file_line(offset: int) -> int:
        return bisect.bisect_left(breaks, offset) + 1

    if span.elements is None:
        value = json.loads(text[span.start : span.end])
        return [file_line(span.start)] * max(len(value.splitlines()), 1)
    lines: list[int] = []
    at_line_start = True
    for start, end in span.elements:
        value = json.loads(text[start:end])
        if not isinstance(value, str):
            continue
        for char in value:
            if at_line_start:
                lines.append(file_line(start))
                at_line_start = False
            if char == "\n":
                at_line_start = True
    return lines


# -- the module a fix sees, and the cells it gives back --------------------------------


@dataclass(frozen=True)
class FixText:
    """The code cells as one module with markers (see the module docstring)."""

    text: str
    mark: str
    kept: tuple[str, ...]  # the lines the `keep K` markers stand for
    cells: tuple[CodeCell, ...]


def fix_text(cells: Sequence[CodeCell], document_text: str) -> FixText:
    mark = "@jaxlint-nb"
    while mark in document_text:
        mark += "@"
    lines: list[str] = []
    kept: list[str] = []

    def keep(line: str) -> str:
        kept.append(line)
        return f"#{mark} keep {len(kept) - 1}"

    for cell in cells:
        lines.append(f"#{mark} cell {cell.number}")
        for original, masked in zip(cell.lines, cell.masked):
            if cell.broken and original.strip():
                lines.append(keep(original))
            elif masked == original:
                lines.append(original)
            elif masked.strip() == "pass" and masked != "pass":
                # A magic inside a block, which may be its only statement: keep a statement.
                lines.append(f"{masked}  {keep(original)}")
            else:
                lines.append(keep(original))
    return FixText("\n".join(lines) + "\n", mark, tuple(kept), tuple(cells))


def _chunks(text: str, mark: str) -> list[tuple[int, list[str]]]:
    """The lines of each cell in a marked module, in order. Lines above the first cell's
    marker (an import a fix added at the very top) belong to the first cell."""
    cell_marker = re.compile(rf"^[ \t]*#{re.escape(mark)} cell (\d+)$")
    chunks: list[tuple[int, list[str]]] = []
    above: list[str] = []
    for line in text.splitlines():
        match = cell_marker.match(line)
        if match:
            chunks.append((int(match.group(1)), above if not chunks else []))
        else:
            (chunks[-1][1] if chunks else above).append(line)
    return chunks


def split_cells(fixed: str, base: FixText) -> dict[int, str] | None:
    """The new source of every cell that a fix changed, or None when the markers did not
    survive in order (a fix merged or moved code across cells)."""
    chunks = _chunks(fixed, base.mark)
    if [number for number, _ in chunks] != [cell.number for cell in base.cells]:
        return None
    original = dict(_chunks(base.text, base.mark))
    keep_marker = re.compile(rf"^[ \t]*(?:pass  )?#{re.escape(base.mark)} keep (\d+)$")
    changed: dict[int, str] = {}
    used: set[int] = set()
    for cell, (_, lines) in zip(base.cells, chunks):
        if lines == original[cell.number]:
            continue
        restored: list[str] = []
        for line in lines:
            match = keep_marker.match(line)
            if match:
                index = int(match.group(1))
                if index in used:
                    return None
                used.add(index)
                restored.append(base.kept[index])
            elif base.mark in line:
                return None  # a marker a fix moved into a line of code
            else:
                restored.append(line)
        while restored and not restored[-1].strip() and _blank_tail(restored) > _blank_tail(cell.lines):
            restored.pop()  # blank lines a fix left at the end of the cell (after an import)
        if cell.prefix:  # IPython dedented the cell; indent it back as it was written
            restored = [cell.prefix + line if line.strip() else line for line in restored]
        source = "\n".join(restored)
        if cell.source.endswith("\n") or (not cell.source and restored):
            source += "\n"
        changed[cell.number] = source
    return changed


def _blank_tail(lines: Sequence[str]) -> int:
    count = 0
    for line in reversed(lines):
        if line.strip():
            break
        count += 1
    return count


# -- writing the JSON back -------------------------------------------------------------


def _ensure_ascii(text: str) -> bool:
    """Whether the notebook escapes non-ASCII characters (nbformat does not)."""
    if any(ord(char) > 127 for char in text):
        return False
    return re.search(r"\\u(?!00[0-7])[0-9a-fA-F]{4}", text) is not None


def rebuild(text: str, spans: dict[int, SourceSpan], changed: dict[int, str]) -> str:
    """`text` with the `source` of each changed cell replaced, in the style it was written."""
    ascii_only = _ensure_ascii(text)
    pieces: list[str] = []
    position = 0
    for number in sorted(changed, key=lambda n: spans[n].start):
        span = spans[number]
        pieces.append(text[position : span.start])
        pieces.append(_render_source(text, span, changed[number], ascii_only))
        position = span.end
    pieces.append(text[position:])
    return "".join(pieces)


def _render_source(text: str, span: SourceSpan, source: str, ascii_only: bool) -> str:
    if span.elements is None:
        return json.dumps(source, ensure_ascii=ascii_only)
    # Lines that did not change keep their exact JSON spelling.
    spelled: dict[str, list[str]] = {}
    for start, end in span.elements:
        spelled.setdefault(json.loads(text[start:end]), []).append(text[start:end])
    items = []
    for line in source.splitlines(keepends=True):
        same = spelled.get(line)
        items.append(same.pop(0) if same else json.dumps(line, ensure_ascii=ascii_only))
    if not items:
        return "[]"
    first_gap, separator, last_gap = _list_layout(text, span)
    return "[" + first_gap + separator.join(items) + last_gap + "]"


def _list_layout(text: str, span: SourceSpan) -> tuple[str, str, str]:
    """The whitespace after `[`, between elements (with the comma) and before `]`."""
    elements = span.elements or ()
    if elements:
        first_gap = text[span.start + 1 : elements[0][0]]
        last_gap = text[elements[-1][1] : span.end - 1]
        if len(elements) > 1:
            separator = text[elements[0][1] : elements[1][0]]
        else:
            separator = "," + first_gap
        return first_gap, separator, last_gap
    # An empty list: one space deeper than the line holding `"source"` (nbformat's indent).
    line_start = text.rfind("\n", 0, span.start) + 1
    line = text[line_start : span.start]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    return "\n" + indent + " ", ",\n" + indent + " ", "\n" + indent
