"""`[tool.jaxlint]` in pyproject.toml: finding it, validating it, and what it selects.

```toml
[tool.jaxlint]
select = ["JL"]                 # slugs, codes or code prefixes; default: every default rule
extend-select = []
ignore = ["missing-jit"]
exclude = [".git", "build"]     # replaces the default excludes
extend-exclude = ["generated"]  # adds to them
per-file-ignores = { "tests/*" = ["JL003"] }
max-file-size = "4MB"           # larger files are skipped with a warning; 0: no limit
runtime-helpers = true          # false: no fix may import jaxlint.runtime
respect-gitignore = true        # skip files that .gitignore ignores
preview = false                 # true: also run rules that are still in preview
cache-dir = ".jaxlint_cache"    # relative to this pyproject.toml
extend-jit-wrappers = ["mylib.compile"]   # add to a section of the library table

[tool.jaxlint.tree-at-batch]    # options of one rule, if it has any
```

Every key is checked: a typo is an error (exit 2), never silently ignored.
"""

from __future__ import annotations

import difflib
import fnmatch
import itertools
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _jaxapi
from ._registry import SelectionError, all_rules, expand, select_rules
from ._rule import PREVIEW_OPTION, Rule


if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


__all__ = ["ConfigError", "Settings", "find_config", "has_table", "load_settings", "DEFAULT_EXCLUDES"]

DEFAULT_EXCLUDES = (
    ".git",
    ".hg",
    ".svn",
    ".bzr",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    ".eggs",
    "*.egg-info",
    "build",
    "dist",
    "__pycache__",
    "node_modules",
    "site-packages",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".jaxlint_cache",
    ".ipynb_checkpoints",
)

_LIST_KEYS = ("select", "extend-select", "ignore", "exclude", "extend-exclude")
# Whether fixes may import `jaxlint.runtime` (the code they write then needs jaxlint).
RUNTIME_HELPERS = "runtime-helpers"
_BOOL_KEYS = ("respect-gitignore", "preview")
# `extend-jit-wrappers = ["mylib.compile"]`: names added to a section of the library table
# (`jaxlint/library.toml`), ruff's `extend-*` convention.
_LIBRARY_KEYS = {f"extend-{section}": section for section in _jaxapi.EXTENSIBLE}

# Files larger than this are skipped with a warning: libcst needs about 1 GB and a minute
# for a 2 MB file of generated code, and aborts in its allocator on 20 MB.
DEFAULT_MAX_FILE_SIZE = 4 * 1024 * 1024
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(|b|k|kb|kib|m|mb|mib|g|gb|gib)", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


class ConfigError(ValueError):
    """A malformed or unknown setting."""


@dataclass
class Settings:
    """Resolved settings for one run."""

    root: Path
    config_file: Path | None = None
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDES))
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # bytes; 0: no limit
    respect_gitignore: bool = True
    preview: bool = False
    cache_dir: Path | None = None  # None: `.jaxlint_cache` in `root`
    library: _jaxapi.Library = field(default_factory=_jaxapi.base_library)  # with `extend-*`

    def lint_options(self) -> dict[str, dict[str, Any]]:
        """The options the rules run with: `rule_options`, and with `preview`, `preview =
        true` in every rule's (`Rule.preview`: a rule reports what it keeps in preview)."""
        if not self.preview:
            return self.rule_options
        return {r.SLUG: {**self.rule_options.get(r.SLUG, {}), PREVIEW_OPTION: True} for r in all_rules()}

    def rules(self) -> tuple[type[Rule], ...]:
        """The selected rules; preview rules only with `preview`."""
        return tuple(r for r in select_rules(self.select, self.ignore, self.extend_select) if self.preview or not r.PREVIEW)

    def is_excluded(self, path: Path) -> bool:
        """Whether a discovered file or directory matches an exclude pattern (by its name or
        its path relative to the project root)."""
        name = path.name
        relative = _relative(path, self.root)
        for pattern in self.exclude:
            if pattern.endswith("/"):  # `generated/`: directories only
                pattern = pattern.rstrip("/")
                if not pattern or not path.is_dir():
                    continue
            if glob_match(name, pattern) or glob_match(relative, pattern):
                return True
        return False

    def ignored_for(self, path: Path) -> frozenset[type[Rule]]:
        """Rules that `per-file-ignores` turns off for `path`."""
        relative = _relative(path, self.root)
        ignored: set[type[Rule]] = set()
        for pattern, selectors in self.per_file_ignores.items():
            if glob_match(relative, pattern) or glob_match(path.name, pattern):
                for selector in selectors:
                    ignored.update(expand(selector))
        return frozenset(ignored)


def glob_match(text: str, pattern: str) -> bool:
    """fnmatch (`*` also crosses `/`, as in ruff's globs), where `**/` also matches no
    directory at all: `**/generated/*` matches `generated/a.py`, `tests/**/*.py` matches
    `tests/test_a.py`."""
    if fnmatch.fnmatchcase(text, pattern):
        return True
    parts = pattern.split("**/")
    if len(parts) == 1 or len(parts) > 5:
        return False
    # Each `**/` is either one or more directories (fnmatch's reading, tried above) or none.
    for keep in itertools.product(("**/", ""), repeat=len(parts) - 1):
        variant = parts[0] + "".join(k + p for k, p in zip(keep, parts[1:]))
        if fnmatch.fnmatchcase(text, variant):
            return True
    return False


def _relative(path: Path, root: Path) -> str:
    try:
        return Path(os.path.realpath(path)).relative_to(os.path.realpath(root)).as_posix()
    except ValueError:
        return path.as_posix()


def has_table(config_file: Path) -> bool:
    """Whether `config_file` has a `[tool.jaxlint]` table."""
    try:
        data = tomllib.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{config_file}: {error}") from None
    return "jaxlint" in data.get("tool", {})


def find_config(start: Path) -> Path | None:
    """The nearest pyproject.toml with a `[tool.jaxlint]` table, from `start` upwards."""
    current = Path(os.path.realpath(start))  # never raises on a symlink loop, unlike resolve()
    if current.is_file() or not current.exists():
        current = current.parent
    for directory in (current, *current.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and has_table(candidate):
            return candidate
    return None


def _string_list(table: dict[str, Any], key: str, where: str) -> list[str]:
    value = table[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: '{key}' must be a list of strings")
    return value


def load_settings(config_file: Path | None, root: Path | None = None) -> Settings:
    """Settings from `config_file` (defaults if None), validated."""
    if config_file is None:
        return Settings(root=Path(os.path.realpath(root or Path.cwd())))
    where = f"{config_file} [tool.jaxlint]"
    try:
        data = tomllib.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{config_file}: {error}") from None
    table = data.get("tool", {}).get("jaxlint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    settings = Settings(root=Path(os.path.realpath(config_file.parent)), config_file=config_file)
    slugs = {rule.SLUG: rule for rule in all_rules()}
    known = (*_LIST_KEYS, "per-file-ignores", "max-file-size", RUNTIME_HELPERS, *_BOOL_KEYS, "cache-dir", *_LIBRARY_KEYS, *slugs)
    for key, value in table.items():
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"{where}: unknown key '{key}'{hint}")
        if key in slugs:
            settings.rule_options[key] = _rule_options(slugs[key], value, f"{where}.{key}")
    if RUNTIME_HELPERS in table:
        if not isinstance(table[RUNTIME_HELPERS], bool):
            raise ConfigError(f"{where}: '{RUNTIME_HELPERS}' must be true or false")
        # Every rule sees it as its own option; a rule's table may still say otherwise.
        for slug in slugs:
            settings.rule_options.setdefault(slug, {}).setdefault(RUNTIME_HELPERS, table[RUNTIME_HELPERS])
    for key in _BOOL_KEYS:
        if key in table:
            if not isinstance(table[key], bool):
                raise ConfigError(f"{where}: '{key}' must be true or false")
            setattr(settings, key.replace("-", "_"), table[key])
    if "cache-dir" in table:
        if not isinstance(table["cache-dir"], str):
            raise ConfigError(f"{where}: 'cache-dir' must be a string")
        settings.cache_dir = settings.root / table["cache-dir"]
    if "select" in table:
        settings.select = _string_list(table, "select", where)
    if "extend-select" in table:
        settings.extend_select = _string_list(table, "extend-select", where)
    if "ignore" in table:
        settings.ignore = _string_list(table, "ignore", where)
    if "exclude" in table:
        settings.exclude = _string_list(table, "exclude", where)
    if "extend-exclude" in table:
        settings.exclude = [*settings.exclude, *_string_list(table, "extend-exclude", where)]
    extensions = {}
    for key, section in _LIBRARY_KEYS.items():
        if key in table:
            names = _string_list(table, key, where)
            for name in names:
                if not _jaxapi.DOTTED_NAME.fullmatch(name):
                    raise ConfigError(f"{where}: '{key}': {name!r} is not a dotted name such as 'mylib.compile'")
            extensions[section] = names
    settings.library = _jaxapi.base_library().extended(extensions)
    if "max-file-size" in table:
        settings.max_file_size = parse_size(table["max-file-size"], f"{where}: 'max-file-size'")
    if "per-file-ignores" in table:
        per_file = table["per-file-ignores"]
        if not isinstance(per_file, dict):
            raise ConfigError(f"{where}: 'per-file-ignores' must be a table of glob = [rules]")
        for pattern in per_file:
            settings.per_file_ignores[pattern] = _string_list(per_file, pattern, f"{where}.per-file-ignores")
    try:
        for selector in (
            *(settings.select or ()),
            *settings.extend_select,
            *settings.ignore,
            *(s for values in settings.per_file_ignores.values() for s in values),
        ):
            expand(selector)
    except SelectionError as error:
        raise ConfigError(f"{where}: {error}") from None
    return settings


def parse_size(value: Any, what: str) -> int:
    """A size in bytes from an integer or a string such as "4MB" or "512 KiB" (K, M and G
    are powers of 1024, with or without B or iB); 0 means no limit."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    match = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise ConfigError(f'{what} must be a size in bytes, or a string such as "4MB" (0: no limit)')
    return int(float(match.group(1)) * _UNITS[match.group(2)[:1].lower()])


def format_size(size: int) -> str:
    """`size` bytes in the largest binary unit that keeps a number of at least 1."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} bytes"


def _rule_options(rule: type[Rule], value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be a table of options")
    options: dict[str, Any] = {}
    for key, option_value in value.items():
        option = rule.OPTIONS.get(key)
        if option is None:
            names = ", ".join(rule.OPTIONS) or "none"
            raise ConfigError(f"{where}: unknown option '{key}' (options: {names})")
        if not isinstance(option_value, option.type) or (
            option.type is int and isinstance(option_value, bool)
        ):
            raise ConfigError(f"{where}: '{key}' must be of type {option.type.__name__}")
        options[key] = option_value
    return options
