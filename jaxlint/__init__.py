"""jaxlint: a linter and autofixer for JAX performance mistakes.

Public API (everything else is private and may change)::

    from jaxlint import lint_source, Finding, Rule, Applicability

`import jaxlint` never imports jax; the runtime helpers live in `jaxlint.runtime`.
"""

from ._engine import Finding as Finding, lint_source as lint_source
from ._rule import (
    Applicability as Applicability,
    Edit as Edit,
    Fix as Fix,
    ImportSpec as ImportSpec,
    Option as Option,
    Rule as Rule,
)
from ._version import __version__ as __version__


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
