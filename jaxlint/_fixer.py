"""Apply fixes: non-overlapping edits per pass, re-lint until nothing changes, write atomically."""

from __future__ import annotations

import os
import re
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from ._discovery import SourceFile
from ._project import Project
from ._engine import SYNTAX_ERROR_CODE, Finding, analyze
from ._notebook import NotebookError, code_cells, load_notebook
from ._notebook_edit import fix_text, rebuild, source_spans, split_cells
from ._rule import Applicability, Edit, Fix, Rule
from ._walk import iter_children


__all__ = ["FixOutcome", "WriteRefused", "fix_source", "write_fix", "write_fixed", "MAX_PASSES"]

MAX_PASSES = 10


@dataclass
class FixOutcome:
    """The result of fixing one file."""

    path: str
    original: bytes
    fixed: bytes
    applied: int = 0
    fixed_codes: list[str] = field(default_factory=list)  # the code of each applied fix
    remaining: list[Finding] = field(default_factory=list)
    error: str | None = None
    found: list[Finding] = field(default_factory=list)  # the findings before any fix

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


def apply_fixes(module: cst.Module, fixes: Sequence[Fix], *, imports: bool = True) -> cst.Module:
    """The module with every edit of `fixes` applied (they must not overlap), and the
    imports they need added unless `imports` is false."""
    edits: dict[int, list[Edit]] = {}
    for fix in fixes:
        for edit in fix.edits:
            edits.setdefault(id(edit.node), []).append(edit)
    fixed = module.visit(_EditApplier(edits))
    needed = [spec for fix in fixes for spec in fix.imports] if imports else []
    if needed:
        context = CodemodContext()
        for spec in needed:
            AddImportsVisitor.add_needed_import(context, spec.module, spec.name, spec.alias)
        fixed = _add_imports(fixed, context)
    return fixed


def _add_imports(module: cst.Module, context: CodemodContext) -> cst.Module:
    """libcst's `AddImportsVisitor`, except that a docstring sharing its line with other
    statements (`\"\"\"doc\"\"\"; import x`) stays first: libcst would put the imports above
    that line, and the module would lose its docstring. The imports go below the line."""
    first = module.body[0] if module.body else None
    if not (
        isinstance(first, cst.SimpleStatementLine)
        and len(first.body) > 1
        and isinstance(first.body[0], cst.Expr)
        and isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    ):
        return AddImportsVisitor(context).transform_module(module)
    marker = first.with_changes(body=[first.body[0].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)])
    result = AddImportsVisitor(context).transform_module(module.with_changes(body=[marker, *module.body[1:]]))
    body = list(result.body)
    for index, statement in enumerate(body):
        if statement.deep_equals(marker):
            body[index] = first
            return result.with_changes(body=body)
    raise ValueError("the docstring line was rewritten by the import adder")


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
    as an internal error; the file's bytes are then left as they were. A notebook (`.ipynb`)
    has its code cells fixed in place, the rest of its JSON kept byte for byte.
    """
    fixing = set(rules if fix_rules is None else fix_rules)
    if path.endswith(".ipynb"):
        return _fix_notebook(path, data, rules, options, unsafe, fixing, project)
    return _fix_python(path, data, rules, options, unsafe, fixing, project)


def _fix_python(
    path: str,
    data: bytes,
    rules: Sequence[type[Rule]],
    options: dict[str, dict[str, object]] | None,
    unsafe: bool,
    fixing: Collection[type[Rule]],
    project: Project | None = None,
    vet: _Vet | None = None,
) -> FixOutcome:
    """The fix loop on Python source. `vet`, when given, decides which fixes may be applied:
    each one alone (its edits without the imports it adds) and the pass's result."""
    outcome = FixOutcome(path, data, data)
    for _ in range(MAX_PASSES):
        analysis = analyze(path, outcome.fixed, rules, options, project, as_notebook=False)
        outcome.remaining = analysis.result.findings
        if outcome.fixed is data:
            outcome.found = outcome.remaining
        if analysis.result.error:
            outcome.error = analysis.result.error
            return outcome
        if analysis.module is None or any(f.code == SYNTAX_ERROR_CODE for f in outcome.remaining):
            return outcome
        codes = {
            id(raw.fix): raw.rule.CODE
            for raw, _ in analysis.raw
            if raw.fix is not None and raw.rule in fixing and _allowed(raw.fix, unsafe)
        }
        candidates = [raw.fix for raw, _ in analysis.raw if raw.fix is not None and id(raw.fix) in codes]
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
            if vet is not None:
                chosen = vet.choose(analysis.module, chosen)
                if not chosen:
                    return outcome
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
            outcome.fixed_codes = []
            return outcome
        if new_bytes == outcome.fixed:
            return outcome
        outcome.fixed = new_bytes
        outcome.applied += len(chosen)
        outcome.fixed_codes += [codes[id(fix)] for fix in chosen]
    outcome.error = f"{path}: internal error: fixes did not converge after {MAX_PASSES} passes"
    outcome.fixed = data
    outcome.applied = 0
    outcome.fixed_codes = []
    return outcome


@dataclass(frozen=True)
class _Vet:
    """Which fixes a pass may apply: each must pass `one` on its own edits (imports left
    out), and their result `whole` (else they are added one at a time, while it holds)."""

    one: Callable[[str], bool]
    whole: Callable[[str], bool]

    def choose(self, module: cst.Module, fixes: Sequence[Fix]) -> list[Fix]:
        fixes = [f for f in fixes if self.one(apply_fixes(module, [f], imports=False).code)]
        if not fixes or self.whole(apply_fixes(module, fixes).code):
            return list(fixes)
        kept: list[Fix] = []
        for fix in fixes:
            if self.whole(apply_fixes(module, [*kept, fix]).code):
                kept.append(fix)
        return kept


def _fix_notebook(
    path: str,
    data: bytes,
    rules: Sequence[type[Rule]],
    options: dict[str, dict[str, object]] | None,
    unsafe: bool,
    fixing: Collection[type[Rule]],
    project: Project | None = None,
) -> FixOutcome:
    """Fix a notebook's code cells as one module (see `_notebook_edit`), then put the changed
    cells back into its JSON; what remains is reported per cell."""
    outcome = FixOutcome(path, data, data)
    try:
        cells = code_cells(load_notebook(data))
    except NotebookError as error:
        outcome.error = f"{path}: {error}"
        return outcome
    text = data.decode("utf-8")
    base = fix_text(cells, text)

    def one_cell(code: str) -> bool:
        # A fix that moves code from one cell to another changes what running a cell does.
        changed = split_cells(code, base)
        return changed is not None and len(changed) <= 1

    vet = _Vet(one=one_cell, whole=lambda code: split_cells(code, base) is not None)
    inner = _fix_python(path, base.text.encode("utf-8"), rules, options, unsafe, fixing, project, vet)
    outcome.error = inner.error
    changed = split_cells(inner.fixed.decode("utf-8"), base) if inner.changed else None
    spans = source_spans(text) if changed else {}
    if changed and set(changed) <= set(spans):
        outcome.fixed = rebuild(text, spans, changed).encode("utf-8")
        outcome.applied = inner.applied
        outcome.fixed_codes = inner.fixed_codes
    analysis = analyze(path, outcome.fixed, rules, options, project, as_notebook=True).result
    outcome.remaining = analysis.findings
    # What it had before the fix, should the fixed notebook not be written.
    outcome.found = (
        outcome.remaining if not outcome.changed else analyze(path, data, rules, options, project, as_notebook=True).result.findings
    )
    outcome.error = outcome.error or analysis.error
    return outcome


class WriteRefused(Exception):
    """A fixed file that is not written, with the one-line reason."""


_HELD_SIGNALS = {getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)}
_TEMPORARY = re.compile(r"\.jaxlint-(\d+)-[^/]*\.tmp")
_swept: set[str] = set()


@contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C and termination wait until the block is done (delivered right after it), so a
    fix is written completely or not at all and its temporary file never stays behind."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _sweep(directory: str) -> None:
    """Remove temporary files that a killed `jaxlint fix` (SIGKILL, a power cut) left in
    `directory`: those named after a process that no longer exists."""
    if directory in _swept:
        return
    _swept.add(directory)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        match = _TEMPORARY.fullmatch(name)
        if match is None or _alive(int(match.group(1))):
            continue
        with suppress(OSError):
            os.unlink(os.path.join(directory, name))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process
    return True


def write_fixed(path: str, original: bytes, data: bytes) -> None:
    """Replace the file at `path` (through symlinks), which held `original` when it was
    read, with `data`. Atomic: a crash or signal leaves the old file or the new one. The
    file keeps its mode, owner and group.

    Raises `WriteRefused` (nothing written) when the file is read-only, has other hard
    links (a new file would split them), cannot keep its owner or group, or no longer holds
    `original` (it was edited meanwhile: writing would lose that edit); `OSError` when the
    file system refuses.
    """
    real = os.path.realpath(path)
    before = os.stat(real)
    if not stat.S_ISREG(before.st_mode):
        raise WriteRefused("not a regular file")
    if not before.st_mode & 0o222 or not os.access(real, os.W_OK):
        raise WriteRefused("read-only")
    if before.st_nlink > 1:
        raise WriteRefused(f"has {before.st_nlink} hard links, which a rewritten file would split")
    directory = os.path.dirname(real) or "."
    _sweep(directory)
    with _signals_held():
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".jaxlint-{os.getpid()}-", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
            os.chmod(temporary, stat.S_IMODE(before.st_mode))
            made = os.stat(temporary)
            if (made.st_uid, made.st_gid) != (before.st_uid, before.st_gid):
                try:
                    os.chown(temporary, before.st_uid, before.st_gid)
                except PermissionError:
                    raise WriteRefused("its owner or group would change (jaxlint writes a new file)") from None
                os.chmod(temporary, stat.S_IMODE(before.st_mode))  # chown clears setuid bits
            with open(real, "rb") as current:
                if current.read() != original:
                    raise WriteRefused("changed since jaxlint read it")
            os.replace(temporary, real)
        except BaseException:
            with suppress(OSError):
                os.unlink(temporary)
            raise


def write_fix(file: SourceFile, outcome: FixOutcome) -> str | None:
    """Write `outcome` to `file`; None when written, else the error line to report (the
    file is then left as it was)."""
    if file.outside:
        return f"{file.display}: outside the paths given (through a symbolic link); not fixed"
    try:
        write_fixed(str(file.path), outcome.original, outcome.fixed)
    except WriteRefused as reason:
        return f"{file.display}: {reason}; not fixed"
    except OSError as error:
        return f"{file.display}: cannot write: {error.strerror or error}"
    return None
