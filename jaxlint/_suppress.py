"""Line suppression comments: `# noqa`, `# noqa: JL003`, `# jaxlint: ignore[tree-at-batch]`.

A comment on the first or the last line of the reported code suppresses it. Codes and slugs
are both accepted; `# noqa: E501` (another tool's code) does not suppress jaxlint findings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


__all__ = ["is_suppressed", "parse_suppression"]

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


def is_suppressed(lines: Sequence[str], start: int, end: int, code: str, slug: str) -> bool:
    """Whether a finding of `code`/`slug` spanning lines `start..end` (1-based) is suppressed."""
    for number in {start, end}:
        if 1 <= number <= len(lines):
            codes = parse_suppression(lines[number - 1])
            if codes is not None and (codes is ALL or code.lower() in codes or slug in codes):
                return True
    return False
