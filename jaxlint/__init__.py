"""jaxlint: a linter and autofixer for JAX performance mistakes.

Public API (everything else is private and may change)::

    from jaxlint import lint_source, Finding, Rule, Applicability

`import jaxlint` never imports jax; the runtime helpers live in `jaxlint.runtime`. The names
below are imported on first use, so that the `jaxlint` command (whose entry point lives in
this package) can answer a Ctrl-C that comes while libcst is still being imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__


if TYPE_CHECKING:
    from ._engine import Finding as Finding, lint_source as lint_source
    from ._rule import (
        Applicability as Applicability,
        Edit as Edit,
        Fix as Fix,
        ImportSpec as ImportSpec,
        Option as Option,
        Rule as Rule,
    )


_HOMES = {
    "Finding": "._engine",
    "lint_source": "._engine",
    "Applicability": "._rule",
    "Edit": "._rule",
    "Fix": "._rule",
    "ImportSpec": "._rule",
    "Option": "._rule",
    "Rule": "._rule",
}

__all__ = [
    "Applicability",
    "Edit",
    "Finding",
    "Fix",
    "ImportSpec",
    "Option",
    "Rule",
    "__version__",
    "lint_source",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'jaxlint' has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
