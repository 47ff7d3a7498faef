"""Line suppression comments: `# noqa`, `# noqa: JL003`, `# jaxlint: ignore[tree-at-batch]`.

A comment on the first or the last line of the reported code suppresses it. Codes and slugs
are both accepted; `# noqa: E501` (another tool's code) does not suppress jaxlint findings.
Only real comments count: `"# noqa"` inside a string literal suppresses nothing.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence


__all__ = ["is_suppressed", "parse_suppression", "suppressing_line", "suppression_comments"]

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[\w\-]+(?:\s*,\s*[\w\-]+)*))?", re.IGNORECASE)
_JAXLINT = re.compile(r"#\s*jaxlint:\s*ignore(?:\[(?P<codes>[^\]]*)\])?(?!-)")

ALL = frozenset({"*"})


def parse_suppression(line: str) -> frozenset[str] | None:
    """The codes/slugs a line suppresses (`{"*"}` for all), or None if it has no comment."""
    if "#" not in line:
        return None
    found: set[str] = set()
    for pattern in (_NOQA, _JAXLINT):
        for match in pattern.finditer(line):
            codes = match.group("codes")
            if codes is None:
                return ALL
            found.update(c.strip().lower() for c in codes.split(",") if c.strip())
    return frozenset(found) if found else None


# The comments of the last file asked about: `is_suppressed` is called once per finding with
# the same list of lines, and tokenizing is only needed when a line looks suppressed.
_last: tuple[Sequence[str], dict[int, str] | None] | None = None


def _comments(lines: Sequence[str]) -> dict[int, str] | None:
    """The comment text on each line (1-based) of `lines`; None when they do not tokenize."""
    global _last
    if _last is not None and _last[0] is lines:
        return _last[1]
    comments: dict[int, str] | None = {}
    try:
        text = "\n".join(lines) + "\n"
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.string  # type: ignore[index]
    except (tokenize.TokenError, SyntaxError, ValueError):
        comments = None
    _last = (lines, comments)
    return comments


def _line_suppression(lines: Sequence[str], number: int) -> frozenset[str] | None:
    codes = parse_suppression(lines[number - 1])
    if codes is None:
        return None  # the cheap, common case: nothing that looks like a suppression
    comments = _comments(lines)
    if comments is None:
        return codes  # cannot tell comments from strings: trust the line as written
    comment = comments.get(number)
    return parse_suppression(comment) if comment is not None else None


def suppressing_line(lines: Sequence[str], start: int, end: int, code: str, slug: str) -> int | None:
    """The line (1-based) whose comment suppresses a finding of `code`/`slug` spanning lines
    `start..end`, or None."""
    for number in sorted({start, end}):
        if 1 <= number <= len(lines):
            codes = _line_suppression(lines, number)
            if codes is not None and (codes is ALL or code.lower() in codes or slug in codes):
                return number
    return None


def is_suppressed(lines: Sequence[str], start: int, end: int, code: str, slug: str) -> bool:
    """Whether a finding of `code`/`slug` spanning lines `start..end` (1-based) is suppressed."""
    return suppressing_line(lines, start, end, code, slug) is not None


def suppression_comments(text: str) -> list[tuple[int, int, str, frozenset[str]]]:
    """Every comment of `text` naming rules to suppress: (line, column, comment, the codes
    and slugs it names, lower-cased). Bare `# noqa` / `# jaxlint: ignore` are left out."""
    found: list[tuple[int, int, str, frozenset[str]]] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                codes = parse_suppression(token.string)
                if codes is not None and codes is not ALL:
                    found.append((token.start[0], token.start[1], token.string, codes))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return []
    return found


def add_noqa(data: bytes, codes: dict[int, set[str]]) -> tuple[bytes, int]:
    """`data` (Python source) with `# noqa: CODE, ...` on each line of `codes` (1-based line
    -> codes), merged into a `# noqa: ...` comment already there; and how many lines changed.
    A line where a comment cannot go (inside a multi-line string) is left alone. Line endings
    and the encoding are kept."""
    from ._engine import decode_source

    text, encoding = decode_source(data)
    lines = text.splitlines(keepends=True)
    comments = _comments([line.rstrip("\r\n") for line in lines]) or {}
    changed = 0
    for number, needed in sorted(codes.items()):
        if not 0 < number <= len(lines) or number not in comments and _in_string(lines, number):
            continue
        line = lines[number - 1]
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        comment = comments.get(number, "")
        present = parse_suppression(comment) if comment else None
        if present is ALL:
            continue
        missing = sorted(c for c in needed if present is None or c.lower() not in present)
        if not missing:
            continue
        match = _NOQA.search(comment) if comment else None
        if match and match.group("codes"):
            at = body.rindex(comment) + match.end()
            body = f"{body[:at]}, {', '.join(missing)}{body[at:]}"
        else:
            body = f"{body}  # noqa: {', '.join(missing)}"
        lines[number - 1] = body + ending
        changed += 1
    return "".join(lines).encode(encoding), changed


def _in_string(lines: Sequence[str], number: int) -> bool:
    """Whether line `number` ends inside a string (a comment there would be text)."""
    text = "".join(lines[:number]).rstrip("\r\n") + "  # noqa\n" + "".join(lines[number:])
    try:
        return all(
            token.string != "# noqa" for token in tokenize.generate_tokens(io.StringIO(text).readline) if token.type == tokenize.COMMENT
        )
    except (tokenize.TokenError, SyntaxError, ValueError):
        return True


def without_names(comment: str, names: set[str]) -> str | None:
    """`comment` with the codes and slugs `names` (lower-case) taken out of its `# noqa:` and
    `# jaxlint: ignore[...]` lists; a list left empty goes with its directive, and None when
    nothing of the comment is left."""

    def rewrite(match: re.Match[str]) -> str:
        codes = match.group("codes") or ""
        kept = [c.strip() for c in codes.split(",") if c.strip() and c.strip().lower() not in names]
        if len(kept) == len([c for c in codes.split(",") if c.strip()]):
            return match.group(0)
        if not kept:
            return ""
        start, end = match.span("codes")
        offset = match.start()
        whole = match.group(0)
        return whole[: start - offset] + ", ".join(kept) + whole[end - offset :]

    text = _JAXLINT.sub(rewrite, _NOQA.sub(rewrite, comment))
    text = re.sub(r"\s{2,}(?=#)", "  ", text).strip()
    if not text.lstrip("#").strip():
        return None
    return text if text.startswith("#") else f"# {text}"
