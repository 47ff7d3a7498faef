"""Which files a run lints: explicit files always, `.py` files under directories unless
excluded (ruff's default excludes, plus `exclude`/`extend-exclude`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ._config import Settings


__all__ = ["SourceFile", "discover"]

PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")


@dataclass(frozen=True)
class SourceFile:
    """A file to lint: `display` as the user will see it, `path` to read it."""

    display: str
    path: Path


def _excluded_with_parents(path: Path, settings: Settings) -> bool:
    """Whether `path` or a directory above it (up to the project root) is excluded."""
    resolved = path.resolve()
    root = settings.root.resolve()
    for candidate in (resolved, *resolved.parents):
        if candidate == root or root not in candidate.parents:
            break
        if settings.is_excluded(candidate):
            return True
    return False


def discover(
    arguments: Iterable[str], settings: Settings, *, force_exclude: bool = False
) -> tuple[list[SourceFile], list[str]]:
    """The files under `arguments`, and one error line per argument that does not exist.

    Paths named explicitly are linted even when excluded, unless `force_exclude` (what a
    pre-commit hook wants: it names every staged file).
    """
    files: dict[Path, SourceFile] = {}
    errors: list[str] = []
    for argument in arguments:
        path = Path(argument)
        if not path.exists():
            kind = "broken symbolic link" if path.is_symlink() else "no such file or directory"
            errors.append(f"{argument}: {kind}")
            continue
        if force_exclude and _excluded_with_parents(path, settings):
            continue
        if path.is_file():
            files.setdefault(path.resolve(), SourceFile(argument, path))
            continue
        if not path.is_dir():
            errors.append(f"{argument}: not a regular file or directory")
            continue
        for directory, subdirectories, names in os.walk(path, onerror=None):
            base = Path(directory)
            subdirectories[:] = sorted(
                d for d in subdirectories if not settings.is_excluded(base / d)
            )
            for name in sorted(names):
                if not name.endswith(PYTHON_SUFFIXES):
                    continue
                candidate = base / name
                if settings.is_excluded(candidate) or not candidate.is_file():
                    continue  # excluded, or a broken link found while walking
                display = os.path.normpath(os.path.join(argument, os.path.relpath(candidate, path)))
                files.setdefault(candidate.resolve(), SourceFile(display, candidate))
    return list(files.values()), errors
