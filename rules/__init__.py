"""jaxlint's rules, one module per rule; each module's docstring is the rule's documentation."""

from __future__ import annotations

from jaxlint._rule import Rule

from .tree_at_batch import TreeAtBatch as TreeAtBatch


ALL_RULES: tuple[type[Rule], ...] = (TreeAtBatch,)

__all__ = ["ALL_RULES", "TreeAtBatch"]
