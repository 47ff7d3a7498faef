"""The rule API: what a rule declares, what it reports, and how a fix is described.

A rule is a class in `jaxlint.rules` whose module docstring is its documentation (ruff's
headings: What it does / Why is this bad? / Example / Use instead / Fix safety). It declares
its identity as class attributes and defines `visit_<Node>` / `leave_<Node>` methods, named
after libcst node classes, that the engine calls during its single walk of each file::

    class TreeAtBatch(Rule):
        CODE = "JL003"
        SLUG = "tree-at-batch"
        MESSAGE = "`eqx.tree_at` called repeatedly on the same tree"
        FIX = Applicability.UNSAFE      # the best fix it can offer; None if it never fixes
        TOKENS = ("tree_at",)           # skip the rule on files that mention none of these

        def visit_Call(self, node: cst.Call) -> None:
            if self.ctx.is_call_to(node, TREE_AT) and self.ctx.loops(node):
                self.report(node, "...", fix=Fix(...))

`self.ctx` is the file's shared analysis (`FileContext`): import resolution, enclosing loops,
functions and statements. `finish()` runs after the walk, for rules that need the whole file.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import libcst as cst

from ._frequency import never_runs


if TYPE_CHECKING:
    from ._context import FileContext


__all__ = [
    "Applicability",
    "Edit",
    "Fix",
    "ImportSpec",
    "Option",
    "PREVIEW_OPTION",
    "RawFinding",
    "Rule",
    "unused_name",
]


class Applicability(enum.Enum):
    """How far a fix can be trusted (ruff's contract).

    - `SAFE`: the fixed program behaves the same in every case; `jaxlint fix` applies it.
    - `UNSAFE`: it can change behaviour in corner cases the rule documents; applied only with
      `--unsafe-fixes`.
    - `DISPLAY_ONLY`: shown as a suggestion, never applied.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display-only"


@dataclass(frozen=True)
class ImportSpec:
    """An import a fix needs: `import module` or `from module import name [as alias]`."""

    module: str
    name: str | None = None
    alias: str | None = None


@dataclass(frozen=True)
class Edit:
    """One change to the tree, anchored on a node of the tree the rule was given.

    `replacement` replaces the node (None keeps it); `before`/`after` insert statements
    around it (the node must then be a statement); `remove` deletes a statement.
    """

    node: cst.CSTNode
    replacement: cst.CSTNode | None = None
    before: tuple[cst.BaseStatement, ...] = ()
    after: tuple[cst.BaseStatement, ...] = ()
    remove: bool = False


@dataclass(frozen=True)
class Fix:
    """A set of edits that must be applied together, and how safe they are."""

    applicability: Applicability
    edits: tuple[Edit, ...]
    title: str
    imports: tuple[ImportSpec, ...] = ()


@dataclass
class RawFinding:
    """A finding as a rule reports it, before positions are resolved."""

    rule: type[Rule]
    node: cst.CSTNode
    message: str
    fix: Fix | None = None
    statement: cst.CSTNode | None = None  # the top-level statement containing `node`
    evidence: tuple[str, ...] = ()  # the facts the finding relies on, one sentence each


# The entry `Settings.lint_options` adds to every rule's options with `--preview`.
PREVIEW_OPTION = "preview"


@dataclass(frozen=True)
class Option:
    """A rule option, set in `[tool.jaxlint.<slug>]`."""

    type: type
    default: Any
    help: str


class Rule:
    """Base class of every rule. See the module docstring for the contract."""

    CODE: ClassVar[str]
    SLUG: ClassVar[str]
    MESSAGE: ClassVar[str]
    FIX: ClassVar[Applicability | None] = None
    TOKENS: ClassVar[tuple[str, ...]] = ()
    OPTIONS: ClassVar[Mapping[str, Option]] = {}
    DEFAULT_ON: ClassVar[bool] = True
    # A rule in preview runs only with `--preview` (or `preview = true`), as in ruff.
    PREVIEW: ClassVar[bool] = False
    SINCE: ClassVar[str] = "0.1.0"

    def __init__(self, ctx: FileContext, options: Mapping[str, Any] | None = None) -> None:
        self.ctx = ctx
        self.options = {name: opt.default for name, opt in self.OPTIONS.items()}
        if options:
            self.options.update(options)
        self.findings: list[RawFinding] = []

    def report(
        self,
        node: cst.CSTNode,
        message: str | None = None,
        *,
        fix: Fix | None = None,
        ancestors: Sequence[cst.CSTNode] | None = None,
        evidence: Sequence[str] = (),
    ) -> None:
        """Report a finding at `node`, with an optional fix.

        `evidence`: the facts the finding relies on, as the engine states them ("runs on every
        iteration of the loop at line 40 over `train_loader`"), one sentence each, so that a
        reader sees why the line is costly.

        `ancestors` (default: those of the node being visited) lets the engine locate the
        finding without computing positions for the whole file; pass the ancestors saved at
        visit time when reporting from `finish()`.
        """
        if fix is not None and not self.runtime_helpers and any(
            spec.module.split(".")[0] == "jaxlint" for spec in fix.imports
        ):
            fix = None  # `runtime-helpers = false`: the fixed code may not import jaxlint
        path = [*(self.ctx.ancestors if ancestors is None else ancestors), node]
        if never_runs(path):
            return  # after a `raise` or `return` in its block: it costs nothing
        statement = path[1] if len(path) > 1 and path[0] is self.ctx.module else None
        self.findings.append(RawFinding(type(self), node, message or self.MESSAGE, fix, statement, tuple(evidence)))

    @property
    def preview(self) -> bool:
        """Whether the run asks for what is in preview (`--preview`, `preview = true`): a rule
        reports the findings it keeps in preview (weaker evidence, measured before it becomes
        the default) only then."""
        return bool(self.options.get(PREVIEW_OPTION))

    @property
    def runtime_helpers(self) -> bool:
        """Whether this rule's fixes may import `jaxlint.runtime` (`runtime-helpers` in
        `[tool.jaxlint]`, or in the rule's own table where it declares that option). A rule
        that can write plain JAX or equinox instead asks this; any other fix importing
        jaxlint is dropped by `report` when it is false."""
        return bool(self.options.get("runtime-helpers", True))

    def finish(self) -> None:
        """Called once after the walk; override to report from whole-file facts."""

    @classmethod
    def docs(cls) -> str:
        """The rule's documentation: its module's docstring."""
        import sys

        return (sys.modules[cls.__module__].__doc__ or "").strip()

    @classmethod
    def handlers(cls) -> dict[str, Sequence[str]]:
        """`{"visit": [...node class names], "leave": [...]}` this rule defines."""
        visit = [n[len("visit_") :] for n in dir(cls) if n.startswith("visit_")]
        leave = [n[len("leave_") :] for n in dir(cls) if n.startswith("leave_")]
        return {"visit": visit, "leave": leave}


def node_class(name: str) -> type[cst.CSTNode]:
    """The libcst class a `visit_<name>` method refers to; a typo is a clear error."""
    node_type = getattr(cst, name, None)
    if not (isinstance(node_type, type) and issubclass(node_type, cst.CSTNode)):
        raise TypeError(f"visit_{name}/leave_{name}: libcst has no node class {name!r}")
    return node_type


@dataclass
class RuleSet:
    """The rules selected for a run, with their options."""

    rules: tuple[type[Rule], ...]
    options: dict[str, dict[str, Any]] = field(default_factory=dict)


_words: tuple[str, frozenset[str]] = ("", frozenset())


def _words_of(source: str) -> frozenset[str]:
    """The words of `source`, for the source asked about last (a file's fixes all ask about
    the same one: one scan per file, not one per fix)."""
    global _words
    if _words[0] is not source:
        _words = (source, frozenset(re.findall(r"\w+", source)))
    return _words[1]


def unused_name(source: str, base: str, taken: set[str] | None = None) -> str:
    """`base`, or `base_2`, `base_3`...: the first that appears nowhere in `source` as a word
    and is not in `taken` (names already handed out in this pass, added to it)."""
    name, suffix = base, 1
    words = _words_of(source)
    while (taken is not None and name in taken) or name in words:
        suffix += 1
        name = f"{base}_{suffix}"
    if taken is not None:
        taken.add(name)
    return name
