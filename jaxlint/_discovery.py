"""Which files a run lints: explicit files always, `.py` files under directories unless
excluded (ruff's default excludes, plus `exclude`/`extend-exclude`).

Directory symlinks are followed (each real directory once, so a link loop ends); a file or
directory reached through a link that leads out of every path the user named is marked
`outside`: it is linted, but `fix` does not write it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ._config import Settings
from ._gitignore import IgnoreRules
from ._gitignore import IgnoreRules


__all__ = ["SourceFile", "discover", "is_excluded", "printable", "project_files", "stdin_source"]

PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")


@dataclass(frozen=True)
class SourceFile:
    """A file to lint: `display` as the user will see it, `path` to read it (and to pick its
    configuration); `outside` when it lies (through a symlink) outside every path named on
    the command line. `content`, when set, is the file's text read from elsewhere (standard
    input for `--stdin-filename`): `path` is then only its name."""

    display: str
    path: Path
    outside: bool = False
    content: bytes | None = field(default=None, compare=False, repr=False)


def printable(text: str) -> str:
    """`text` safe to print and encode: bytes of a file name that are not UTF-8 (which
    Python keeps as lone surrogates) are shown as `\\xff` escapes."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def real_path(path: str | os.PathLike[str]) -> Path:
    """The path with every symlink resolved; unlike `Path.resolve`, never raises on a loop."""
    return Path(os.path.realpath(path))


def _is_within(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def is_excluded(path: Path, settings: Settings) -> bool:
    """Whether `path` or a directory above it (up to the project root) is excluded."""
    resolved = real_path(path)
    root = real_path(settings.root)
    for candidate in (resolved, *resolved.parents):
        if candidate == root or root not in candidate.parents:
            break
        if settings.is_excluded(candidate):
            return True
    return False


def _missing(path: Path) -> str:
    """Why a path that `exists()` denies cannot be read."""
    try:
        os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "symbolic link loop"
        if path.is_symlink():
            return "broken symbolic link"
        if error.errno == errno.EACCES:
            return "permission denied"
    return "no such file or directory"


def discover(
    arguments: Iterable[str], settings: Settings, *, force_exclude: bool = False, limit: int | None = None
) -> tuple[list[SourceFile], list[str]]:
    """The files under `arguments`, and one error line per argument that does not exist.

    Paths named explicitly are linted even when excluded, unless `force_exclude` (what a
    pre-commit hook wants: it names every staged file). With `limit`, the walk stops once it
    has found more than `limit` files.
    """
    files: dict[Path, SourceFile] = {}
    errors: list[str] = []
    arguments = list(arguments)
    roots = [real_path(argument) for argument in arguments]
    for argument in arguments:
        path = Path(argument)
        if not path.exists():
            errors.append(f"{printable(argument)}: {_missing(path)}")
            continue
        if force_exclude and is_excluded(path, settings):
            continue
        if path.is_file():
            files.setdefault(real_path(path), SourceFile(printable(argument), path))
            continue
        if not path.is_dir():
            errors.append(f"{printable(argument)}: not a regular file or directory")
            continue
        seen = {real_path(path)}
        # The .gitignore rules in force in each directory of the walk (None: not respected).
        ignores: dict[str, IgnoreRules | None] = {
            os.fspath(path): IgnoreRules.above(path) if settings.respect_gitignore else None
        }
        for directory, subdirectories, names in os.walk(path, followlinks=True):
            if limit is not None and len(files) > limit:
                break
            base = Path(directory)
            ignore = ignores.pop(directory, None)
            kept = []
            for name in sorted(subdirectories):
                real = real_path(base / name)
                if real in seen or settings.is_excluded(base / name):
                    continue  # a link back to a directory already walked, or excluded
                if ignore is not None and ignore.ignored(real, True):
                    continue
                seen.add(real)
                kept.append(name)
                ignores[os.path.join(directory, name)] = ignore.enter(base / name) if ignore else None
            subdirectories[:] = kept
            for name in sorted(names):
                if not name.endswith(PYTHON_SUFFIXES):
                    continue
                candidate = base / name
                if settings.is_excluded(candidate) or not candidate.is_file():
                    continue  # excluded, or a broken link or link loop found while walking
                if ignore is not None and ignore.ignored(real_path(candidate), False):
                    continue
                display = os.path.normpath(os.path.join(argument, os.path.relpath(candidate, path)))
                real = real_path(candidate)
                files.setdefault(
                    real, SourceFile(printable(display), candidate, outside=not _is_within(real, roots))
                )
    return list(files.values()), errors


def stdin_source(
    name: str, content: bytes, settings: Settings, *, force_exclude: bool = False
) -> list[SourceFile]:
    """The file read from standard input, linted as if it were at `name` (its configuration,
    `per-file-ignores` and kind, `.ipynb` or not), or nothing when `force_exclude` and `name`
    is excluded (what an editor plugin wants for a generated file)."""
    path = Path(name)
    if force_exclude and is_excluded(path, settings):
        return []
    return [SourceFile(name, path, content=content)]


# A folder holding one of these is the root of the project a named file belongs to.
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git", ".hg")
# More files than this around a named file are no one project (a home folder, /tmp): the file
# is linted knowing only the files named with it.
MAX_CONTEXT_FILES = 5000


def project_files(name: str, settings: Settings) -> list[SourceFile] | None:
    """The files of the project that the file `name` (standard input's, or one named on the
    command line) belongs to: what `jaxlint check` discovers from its project root, with the
    same excludes. The root is the folder of its configuration; without one, the nearest
    folder above `name` that holds a `pyproject.toml`, `setup.py`, `setup.cfg`, `.git` or
    `.hg`, up to the working directory, else the working directory. Nothing when `name` lies
    outside that root; None when the root holds more than `MAX_CONTEXT_FILES` files."""
    root = real_path(settings.root)
    path = real_path(name)
    if root not in path.parents:
        return []
    if settings.config_file is None:
        root = next((d for d in path.parents if d == root or any((d / m).exists() for m in PROJECT_MARKERS)), root)
    # Named from the working directory when it holds the root, as `jaxlint check .` names them
    # (a finding that cites another module's line shows the path the user would type).
    relative = os.path.relpath(root)
    files = discover([str(root) if relative.startswith("..") else relative], settings, limit=MAX_CONTEXT_FILES)[0]
    return files if len(files) <= MAX_CONTEXT_FILES else None
