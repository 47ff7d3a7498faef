"""Apply fixes: non-overlapping edits per pass, re-lint until nothing changes, write atomically."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from ._project import Project
from ._engine import SYNTAX_ERROR_CODE, Finding, analyze
from ._rule import Applicability, Edit, Fix, Rule
from ._walk import iter_children


__all__ = ["FixOutcome", "fix_source", "write_atomic", "MAX_PASSES"]

MAX_PASSES = 10


@dataclass
class FixOutcome:
    """The result of fixing one file."""

    path: str
    original: bytes
    fixed: bytes
    applied: int = 0
    remaining: list[Finding] = field(default_factory=list)
    error: str | None = None

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


def _allowed(fix: Fix, unsafe: bool) -> bool:
    if fix.applicability is Applicability.SAFE:
        return True
    return unsafe and fix.applicability is Applicability.UNSAFE


def _parents(module: cst.Module) -> dict[int, cst.CSTNode]:
    parents: dict[int, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for child in iter_children(node):
            parents[id(child)] = node
            stack.append(child)
    return parents


def _non_overlapping(module: cst.Module, fixes: Sequence[Fix]) -> list[Fix]:
    """Keep fixes in order, dropping any whose edits touch a node that an earlier kept fix
    edits, contains or is contained by; the next pass picks the dropped ones up again."""
    parents = _parents(module)

    def lineage(node: cst.CSTNode) -> set[int]:
        ids = {id(node)}
        current = parents.get(id(node))
        while current is not None:
            ids.add(id(current))
            current = parents.get(id(current))
        return ids

    claimed: set[int] = set()
    claimed_lineage: set[int] = set()
    kept: list[Fix] = []
    for fix in fixes:
        nodes = {id(e.node) for e in fix.edits}
        ancestry = set().union(*(lineage(e.node) for e in fix.edits))
        if nodes & claimed_lineage or ancestry & claimed:
            continue
        kept.append(fix)
        claimed |= nodes
        claimed_lineage |= ancestry
    return kept


class _EditApplier(cst.CSTTransformer):
    def __init__(self, edits: Mapping[int, list[Edit]]) -> None:
        super().__init__()
        self._edits = edits

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[override]
        edits = self._edits.get(id(original_node))
        if not edits:
            return updated_node
        replacement: cst.CSTNode = updated_node
        before: list[cst.CSTNode] = []
        after: list[cst.CSTNode] = []
        remove = False
        for edit in edits:
            if edit.replacement is not None:
                replacement = edit.replacement
            before.extend(edit.before)
            after.extend(edit.after)
            remove = remove or edit.remove
        if before and not remove:
            # Blank lines and comments above a statement stay above whatever is inserted
            # before it, keeping the spacing the author chose.
            leading = getattr(replacement, "leading_lines", None)
            if leading:
                before[0] = before[0].with_changes(leading_lines=[*leading, *before[0].leading_lines])
                replacement = replacement.with_changes(leading_lines=[])
        nodes = [*before, *([] if remove else [replacement]), *after]
        if not nodes:
            return cst.RemovalSentinel.REMOVE
        if len(nodes) == 1:
            return nodes[0]
        return cst.FlattenSentinel(nodes)


def apply_fixes(module: cst.Module, fixes: Sequence[Fix]) -> cst.Module:
    """The module with every edit of `fixes` applied (they must not overlap)."""
    edits: dict[int, list[Edit]] = {}
    for fix in fixes:
        for edit in fix.edits:
            edits.setdefault(id(edit.node), []).append(edit)
    fixed = module.visit(_EditApplier(edits))
    imports = [spec for fix in fixes for spec in fix.imports]
    if imports:
        context = CodemodContext()
        for spec in imports:
            AddImportsVisitor.add_needed_import(context, spec.module, spec.name, spec.alias)
        fixed = AddImportsVisitor(context).transform_module(fixed)
    return fixed


def fix_source(
    path: str,
    data: bytes,
    rules: Sequence[type[Rule]],
    options: dict[str, dict[str, object]] | None = None,
    *,
    unsafe: bool = False,
    fix_rules: Collection[type[Rule]] | None = None,
    project: Project | None = None,
) -> FixOutcome:
    """Fix `data` until no applicable fix is left (at most `MAX_PASSES` passes).

    `rules` are linted (and reported as remaining); only findings of `fix_rules` (default:
    all of `rules`) are fixed. A pass whose output does not parse is discarded and reported
    as an internal error; the file's bytes are then left as they were.
    """
    outcome = FixOutcome(path, data, data)
    fixing = set(rules if fix_rules is None else fix_rules)
    for _ in range(MAX_PASSES):
        analysis = analyze(path, outcome.fixed, rules, options, project)
        outcome.remaining = analysis.result.findings
        if analysis.result.error:
            outcome.error = analysis.result.error
            return outcome
        if path.endswith(".ipynb"):
            return outcome  # notebooks are reported, not rewritten
        if analysis.module is None or any(f.code == SYNTAX_ERROR_CODE for f in outcome.remaining):
            return outcome
        candidates = [
            raw.fix
            for raw, _ in analysis.raw
            if raw.fix is not None and raw.rule in fixing and _allowed(raw.fix, unsafe)
        ]
        if not candidates:
            return outcome
        # libcst drops the last line ending of a file with only `\r` line endings; what it
        # cannot reproduce at the end is put back after the fix, anything else is refused.
        unchanged = analysis.module.bytes
        if not outcome.fixed.startswith(unchanged):
            outcome.error = f"{path}: cannot fix: the parser does not reproduce this file byte for byte"
            outcome.fixed = data
            outcome.applied = 0
            return outcome
        lost_tail = outcome.fixed[len(unchanged) :]
        chosen = _non_overlapping(analysis.module, candidates)
        try:
            fixed_module = apply_fixes(analysis.module, chosen)
            new_bytes = fixed_module.bytes + lost_tail
            cst.parse_module(fixed_module.code, config=analysis.module.config_for_parsing)
        except Exception as error:  # noqa: BLE001 - a broken fix must never reach the disk
            rules_involved = ", ".join(sorted({f.title for f in chosen}))
            outcome.error = (
                f"{path}: internal error: a fix produced invalid code ({rules_involved}): "
                f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            )
            outcome.fixed = data
            outcome.applied = 0
            return outcome
        if new_bytes == outcome.fixed:
            return outcome
        outcome.fixed = new_bytes
        outcome.applied += len(chosen)
    outcome.error = f"{path}: internal error: fixes did not converge after {MAX_PASSES} passes"
    outcome.fixed = data
    outcome.applied = 0
    return outcome


def write_atomic(path: str, data: bytes) -> None:
    """Replace the file at `path` (through symlinks) with `data`, keeping its permissions;
    a crash leaves either the old or the new file, never half of one."""
    real = os.path.realpath(path)
    directory = os.path.dirname(real) or "."
    mode = os.stat(real).st_mode & 0o7777
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".jaxlint-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, real)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
