""".gitignore files, as git reads them, for skipping ignored files while walking directories.

What is supported is what git documents for patterns: `#` comments, `!` negation, a trailing
`/` for directories only, a `/` at the start or in the middle anchoring the pattern to the
directory of its .gitignore, `*`, `?`, `[...]` and `**` (`**/x`, `x/**`, `a/**/b`). The
.gitignore files of the directories above a walk count up to the repository's root (the
directory holding `.git`), and so does `.git/info/exclude`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path


__all__ = ["IgnoreRules"]


@dataclass(frozen=True)
class _Pattern:
    base: Path  # the directory of the .gitignore
    regex: re.Pattern[str]
    negate: bool
    directory_only: bool


def _translate(pattern: str) -> str:
    """A gitignore pattern (without `!`, leading or trailing `/`) as a regular expression on
    a `/`-separated path relative to its .gitignore's directory."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i) and i + 2 == n and (i == 0 or pattern[i - 1] == "/"):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out.append(re.escape("["))
                i += 1
                continue
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
            i = end + 1
        elif pattern[i] == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def _parse(line: str, base: Path) -> _Pattern | None:
    if not line.strip() or line.startswith("#"):
        return None
    line = line.rstrip("\n").rstrip("\r")
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    negate = line.startswith("!")
    if negate:
        line = line[1:]
    elif line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    directory_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    body = _translate(line)
    regex = re.compile(body if anchored else f"(?:.*/)?{body}", re.DOTALL)
    return _Pattern(base, regex, negate, directory_only)


def _read(file: Path, base: Path) -> list[_Pattern]:
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [p for p in (_parse(line, base) for line in text.splitlines()) if p is not None]


class IgnoreRules:
    """The ignore patterns that apply inside one directory (its .gitignore and those above)."""

    def __init__(self, patterns: tuple[_Pattern, ...] = ()) -> None:
        self.patterns = patterns

    @classmethod
    def above(cls, directory: Path) -> IgnoreRules:
        """The rules of `directory`'s repository that apply in it: every .gitignore from the
        repository's root down to `directory`, and `.git/info/exclude`."""
        directory = Path(os.path.realpath(directory))
        chain: list[Path] = []
        root = None
        for candidate in (directory, *directory.parents):
            chain.append(candidate)
            if (candidate / ".git").exists():
                root = candidate
                break
        if root is None:
            chain = [directory]  # not in a repository: only the directory's own file
        patterns: list[_Pattern] = []
        if root is not None:
            patterns += _read(root / ".git" / "info" / "exclude", root)
        for folder in reversed(chain):
            patterns += _read(folder / ".gitignore", folder)
        return cls(tuple(patterns))

    def enter(self, directory: Path) -> IgnoreRules:
        """The rules inside `directory`, a subdirectory being walked."""
        own = _read(directory / ".gitignore", Path(os.path.realpath(directory)))
        return IgnoreRules(self.patterns + tuple(own)) if own else self

    def ignored(self, resolved: Path, is_dir: bool) -> bool:
        """Whether `resolved` (an absolute path without symlinks) is ignored; the last
        pattern that matches it decides."""
        result = False
        for pattern in self.patterns:
            if pattern.directory_only and not is_dir:
                continue
            try:
                relative = resolved.relative_to(pattern.base).as_posix()
            except ValueError:
                continue
            if pattern.regex.fullmatch(relative):
                result = not pattern.negate
        return result
