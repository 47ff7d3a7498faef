"""Lint one file: decode, gate, parse once, one walk for every rule, positions, suppression."""

from __future__ import annotations

import ast
import io
import itertools
import os
import re
import sys
import tokenize
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

import libcst as cst

from . import _jaxapi
from ._callgraph import is_test_file
from ._context import FileContext
from ._notebook import NotebookError, NotebookSource, read_notebook
from ._positions import positions
from ._project import Project
from ._rule import Applicability, Edit, Fix, RawFinding, Rule, node_class
from ._suppress import suppressing_line, suppression_comments, without_names
from ._walk import walk


__all__ = ["Finding", "FileResult", "Analysis", "analyze", "lint_source", "SYNTAX_ERROR_CODE"]

SYNTAX_ERROR_CODE = "JL000"
SYNTAX_ERROR_SLUG = "syntax-error"
UNUSED_NOQA_SLUG = "unused-noqa"  # reported here, after suppression (rules/unused_noqa.py)

# Files that mention none of these are not JAX code; they are not even parsed.
FAMILY_TOKENS = ("jax", "flax", "equinox", "optax", "eqx")

_PARSER_PREFIX = re.compile(r"^(parser error: )?(error at \d+:\d+: )?")
_IGNORE_FILE = re.compile(r"^[ \t]*#[ \t]*jaxlint:[ \t]*ignore-file\b", re.MULTILINE)

# libcst and the walk recurse once per nesting level; real code nests a few dozen deep, but
# generated code (long `a + b + ...` chains) can go far deeper than Python's default 1000.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))


@dataclass(frozen=True)
class Finding:
    """A reported finding, as plain data (picklable, cacheable, serialisable)."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    rule: str
    message: str
    fix: str | None = None  # the fix's applicability ("safe", "unsafe"), None without one
    fix_title: str | None = None
    source_line: str = ""
    cell: int | None = None  # for notebooks: the 1-based cell; `line` is then within the cell
    evidence: tuple[str, ...] = ()  # why the line is costly: the facts the rule relied on
    # For notebooks: the lines of the `.ipynb` text where the finding's first and last lines
    # are written (what GitHub annotations and SARIF regions point at).
    ipynb_line: int | None = None
    ipynb_end_line: int | None = None

    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.line, self.column, self.code)


@dataclass
class FileResult:
    """What linting one file gave: findings, or an error that stopped it."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    skipped: str | None = None  # why the file was not linted on purpose (too large)


@dataclass
class Analysis:
    """Everything the fixer needs from one lint of a file (never leaves the process)."""

    result: FileResult
    module: cst.Module | None = None
    raw: list[tuple[RawFinding, Finding]] = field(default_factory=list)


class SourceError(Exception):
    """A file that cannot be read as Python source (bad bytes, bad encoding cookie)."""


def decode_source(data: bytes) -> tuple[str, str]:
    """Decode `data` as Python source (PEP 263 cookie, BOM); return (text, encoding)."""
    try:
        encoding, _ = tokenize.detect_encoding(_first_lines(data))
        return data.decode(encoding), encoding
    except (SyntaxError, LookupError, UnicodeDecodeError) as error:
        reason = error.reason if isinstance(error, UnicodeDecodeError) else str(error)
        raise SourceError(f"cannot decode source: {reason}") from None


_BYTE_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)?")


def _first_lines(data: bytes) -> Callable[[], bytes]:
    """A `readline` over `data` that ends lines at `\\r` too, as CPython's tokenizer does
    (`tokenize.detect_encoding` with `BytesIO.readline` would read a file with only `\\r`
    line endings as one line, and miss a coding cookie on its first or second line)."""
    position = 0

    def readline() -> bytes:
        nonlocal position
        match = _BYTE_LINE.match(data, position)
        line = match.group() if match else b""
        position += len(line)
        return line

    return readline


@lru_cache(maxsize=None)
def _concrete_classes(node_type: type[cst.CSTNode]) -> tuple[type[cst.CSTNode], ...]:
    found: list[type[cst.CSTNode]] = []
    pending = [node_type]
    while pending:
        cls = pending.pop()
        if not getattr(cls, "__abstractmethods__", None) and not cls.__name__.startswith("Base"):
            found.append(cls)
        pending.extend(cls.__subclasses__())
    return tuple(dict.fromkeys(found))


@lru_cache(maxsize=None)
def _rule_handlers(rule: type[Rule]) -> tuple[tuple[str, type[cst.CSTNode], str], ...]:
    """(kind, node class, method name) for every handler `rule` defines."""
    table: list[tuple[str, type[cst.CSTNode], str]] = []
    for kind, names in rule.handlers().items():
        for name in names:
            for cls in _concrete_classes(node_class(name)):
                table.append((kind, cls, f"{kind}_{name}"))
    return tuple(table)


def _active_rules(rules: Sequence[type[Rule]], text: str) -> list[type[Rule]]:
    return [r for r in rules if not r.TOKENS or any(t in text for t in r.TOKENS)]


def _run_rules(
    ctx: FileContext, rules: Sequence[type[Rule]], options: dict[str, dict[str, object]]
) -> list[RawFinding]:
    instances = [rule(ctx, options.get(rule.SLUG)) for rule in rules]
    visit: dict[type[cst.CSTNode], list[Callable[[cst.CSTNode], object]]] = {
        cst.Import: [ctx.note_import],
        cst.ImportFrom: [ctx.note_import],
    }
    leave: dict[type[cst.CSTNode], list[Callable[[cst.CSTNode], object]]] = {}
    for instance in instances:
        for kind, cls, method in _rule_handlers(type(instance)):
            table = visit if kind == "visit" else leave
            table.setdefault(cls, []).append(getattr(instance, method))
    walk(ctx.module, visit, leave, ctx.ancestors)
    findings: list[RawFinding] = []
    for instance in instances:
        instance.finish()
        findings.extend(instance.findings)
    return findings


def analyze(
    path: str,
    data: bytes,
    rules: Sequence[type[Rule]],
    options: dict[str, dict[str, object]] | None = None,
    project: Project | None = None,
    *,
    as_notebook: bool | None = None,
) -> Analysis:
    """Lint `data` (the bytes of the file at `path`) with `rules`; `project` holds what the
    other files of the run define (`_project`), None for a file alone. `data` is a
    notebook's JSON when `as_notebook` (default: when `path` ends with `.ipynb`)."""
    # The library table the run uses (the user's `extend-*` names): the project's.
    with _jaxapi.using(project.library if project is not None else None):
        return _analyze(path, data, rules, options, project, as_notebook)


def _analyze(
    path: str,
    data: bytes,
    rules: Sequence[type[Rule]],
    options: dict[str, dict[str, object]] | None,
    project: Project | None,
    as_notebook: bool | None,
) -> Analysis:
    result = FileResult(path)
    notebook: NotebookSource | None = None
    if as_notebook is None:
        as_notebook = path.endswith(".ipynb")
    try:
        if as_notebook:
            notebook = read_notebook(data)
            text, encoding = notebook.text, "utf-8"
        else:
            text, encoding = decode_source(data)
    except (SourceError, NotebookError) as error:
        result.error = f"{path}: {error}"
        return Analysis(result)
    if _ignores_file(text):
        return Analysis(result)
    if notebook is not None:
        result.findings.extend(
            _in_file(_broken_cell_finding(path, number, code), notebook) for number, code in notebook.broken
        )
    # Test code is no hot path, and every rule is about time spent where a program runs many
    # times: a test file is only checked for syntax, like a file that is not JAX code.
    # A file that mentions no JAX library may still call what another module of the project
    # jits (`from .steps import train_step`): then it is JAX code too.
    # So is a file that mentions a module whose names the user added to the library table.
    calls_jax = project is not None and (project.calls_jitted(path) or project.library.mentioned_in(text))
    lint = (calls_jax or any(token in text for token in FAMILY_TOKENS)) and not is_test_file(path)
    if _may_nest_deeply(text):
        deep = _nesting_problem(path, text)
        if isinstance(deep, Finding):
            result.findings.append(_locate_in_notebook(deep, notebook))
            return Analysis(result)
        if deep is not None:
            result.error = deep
            return Analysis(result)
    if not lint:
        # No rule can fire, so only check that it parses (CPython's parser is ~6x faster
        # than libcst's; libcst decides when they disagree on new syntax).
        if _cpython_syntax_error(text) is None:
            return Analysis(result)
    try:
        module = cst.parse_module(text, config=cst.PartialParserConfig(encoding=encoding))
    except cst.ParserSyntaxError as error:
        result.findings.append(_locate_in_notebook(_syntax_finding(path, text, error), notebook))
        return Analysis(result)
    except RecursionError:
        result.error = f"{path}: nested too deeply to parse"
        return Analysis(result)
    if not lint:
        return Analysis(result, module)
    unused_noqa = next((r for r in rules if r.SLUG == UNUSED_NOQA_SLUG), None)
    used: set[tuple[int, str]] = set()  # (line, code) of each suppression that silenced something
    active = list(rules) if calls_jax else _active_rules(rules, text)
    if not active:
        return Analysis(result, module)
    ctx = FileContext(path, text, module, project)
    if notebook is not None:
        ctx.timed = notebook.timed
    try:
        raw = _run_rules(ctx, active, options or {})
    except RecursionError:
        result.error = f"{path}: nested too deeply to analyse"
        return Analysis(result, module)
    except Exception as error:  # noqa: BLE001 - one file's bug must not stop the run
        if os.environ.get("JAXLINT_TRACEBACK"):
            raise
        result.error = f"{path}: internal error: {type(error).__name__}: {error} (please report)"
        return Analysis(result, module)
    analysis = Analysis(result, module)
    lines = source_lines(text)
    spans = positions(module, [(item.node, item.statement) for item in raw]) if raw else {}
    for item in raw:
        span = spans[item.node]
        suppressor = suppressing_line(lines, span.start.line, span.end.line, item.rule.CODE, item.rule.SLUG)
        if suppressor is not None:
            used.add((suppressor, item.rule.CODE))
            continue
        finding = Finding(
            path=path,
            line=span.start.line,
            column=span.start.column + 1,
            end_line=span.end.line,
            end_column=span.end.column + 1,
            code=item.rule.CODE,
            rule=item.rule.SLUG,
            message=item.message,
            fix=item.fix.applicability.value if item.fix else None,
            fix_title=item.fix.title if item.fix else None,
            source_line=lines[span.start.line - 1] if span.start.line <= len(lines) else "",
            evidence=item.evidence,
        )
        finding = _locate_in_notebook(finding, notebook)
        analysis.raw.append((item, finding))
        result.findings.append(finding)
    if unused_noqa is not None:
        for raw_finding, finding in _unused_suppressions(path, text, lines, rules, used, unused_noqa, module):
            finding = _locate_in_notebook(finding, notebook)
            if raw_finding is not None:
                analysis.raw.append((raw_finding, finding))
            result.findings.append(finding)
    result.findings.sort(key=Finding.sort_key)
    return analysis


def _unused_suppressions(
    path: str,
    text: str,
    lines: Sequence[str],
    rules: Sequence[type[Rule]],
    used: set[tuple[int, str]],
    rule: type[Rule],
    module: cst.Module,
) -> list[tuple[RawFinding | None, Finding]]:
    """JL901: comments naming jaxlint rules that silenced none of their findings (ruff's
    RUF100); codes of rules that did not run are "non-enabled". The fix takes the unused
    names out of a comment at the end of a line (the whole comment when nothing else is
    left): safe when every name removed is of a rule that ran, else unsafe."""
    if "noqa" not in text and "jaxlint:" not in text:
        return []
    from ._registry import all_rules

    known = {r.CODE.lower(): r for r in all_rules()} | {r.SLUG: r for r in all_rules()}
    ran = set(rules)
    found: list[tuple[int, int, str, set[str], bool, str]] = []
    for line, column, comment, names in suppression_comments(text):
        unused, disabled, drop = [], [], set()
        for name in sorted(names):
            named = known.get(name)
            if named is None or named is rule or (line, named.CODE) in used:
                continue
            (unused if named in ran else disabled).append(named.CODE)
            drop.add(name)
        if not unused and not disabled:
            continue
        parts = [f"unused: {', '.join(unused)}"] if unused else []
        parts += [f"non-enabled: {', '.join(disabled)}"] if disabled else []
        found.append((line, column, comment, drop, not disabled, "; ".join(parts)))
    comments = _trailing_comments(module, {line for line, *_ in found}) if found else {}
    results: list[tuple[RawFinding | None, Finding]] = []
    for line, column, comment, drop, safe, parts in found:
        finding = Finding(
            path=path,
            line=line,
            column=column + 1,
            end_line=line,
            end_column=column + 1 + len(comment),
            code=rule.CODE,
            rule=rule.SLUG,
            message=f"Unused `noqa` directive ({parts})",
            source_line=lines[line - 1] if line <= len(lines) else "",
        )
        trailing = comments.get(line)
        raw_finding = None
        if trailing is not None and trailing.comment is not None and trailing.comment.value == comment:
            kept = without_names(comment, drop)
            replacement = (
                trailing.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)
                if kept is None
                else trailing.with_changes(comment=cst.Comment(kept))
            )
            fix = Fix(
                Applicability.SAFE if safe else Applicability.UNSAFE,
                (Edit(trailing, replacement=replacement),),
                "Remove the unused suppression" if kept is None else "Remove the unused codes",
            )
            raw_finding = RawFinding(rule, trailing, finding.message, fix)
            finding = replace(finding, fix=fix.applicability.value, fix_title=fix.title)
        results.append((raw_finding, finding))
    return results


def _trailing_comments(module: cst.Module, wanted: set[int]) -> dict[int, cst.TrailingWhitespace]:
    """The end-of-line comments of `module` on the `wanted` lines (positions are computed
    only here: for a file that has an unused suppression)."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)  # keep the nodes fixes edit
    spans = wrapper.resolve(PositionProvider)
    return {
        spans[node].start.line: node
        for node in spans
        if isinstance(node, cst.TrailingWhitespace) and node.comment is not None and spans[node].start.line in wanted
    }


def _locate_in_notebook(finding: Finding, notebook: NotebookSource | None) -> Finding:
    if notebook is None:
        return finding
    cell, line = notebook.locate(finding.line)
    end_cell, end_line = notebook.locate(finding.end_line)

    def in_cells(match: re.Match[str]) -> str:
        if match.group(1) is not None:  # quoted code is left as written
            return match.group(0)
        # messages and evidence name lines of the joined cells: say them as the notebook shows them
        other_cell, other_line = notebook.locate(int(match.group(2)))
        return f"line {other_line}" if other_cell == cell else f"line {other_line} of cell {other_cell}"

    evidence = tuple(_TEXT_LINE.sub(in_cells, sentence) for sentence in finding.evidence)
    located = replace(
        finding, cell=cell, line=line, end_line=end_line if end_cell == cell else line,
        message=_TEXT_LINE.sub(in_cells, finding.message), evidence=evidence,
    )  # fmt: skip
    return _in_file(located, notebook)


# "line 40" in a message or evidence sentence; a `quoted` span of code matches whole (group 1).
_TEXT_LINE = re.compile(r"(`[^`]*`)|\bline (\d+)\b")


def _in_file(finding: Finding, notebook: NotebookSource) -> Finding:
    """`finding` (located in its cell) with the lines of the `.ipynb` text it is on."""
    assert finding.cell is not None
    return replace(
        finding,
        ipynb_line=notebook.file_line(finding.cell, finding.line),
        ipynb_end_line=notebook.file_line(finding.cell, finding.end_line),
    )


def _broken_cell_finding(path: str, cell: int, code: str) -> Finding:
    """JL000 for a notebook cell that does not parse on its own."""
    error = _cpython_syntax_error(code)
    if error is None:
        return _jl000_at(path, code, 1, 1, "invalid syntax", cell=cell)
    return _jl000_at(path, code, error.lineno or 1, max(error.offset or 1, 1), error.msg, cell=cell)


# CPython refuses more than 200 nested brackets; libcst's parser takes minutes on a thousand
# and dies of a stack overflow (SIGSEGV) beyond about two thousand, as it does on expressions
# of many thousand operators on one line.
_BRACKETS_ONLY = re.compile(r"[^()\[\]{}]+")
_RISKY_DEPTH = 100
_RISKY_LINE = 10_000
_NESTING_MESSAGES = ("too many nested", "too many levels of indentation", "too many statically nested")


def _may_nest_deeply(text: str) -> bool:
    """A cheap look (about 0.2% of a parse) for what could crash or stall the parser:
    brackets nested 100 deep (strings included, so it can only over-report) or a very long
    line."""
    brackets = _BRACKETS_ONLY.sub("", text)
    if len(brackets) >= _RISKY_DEPTH:
        depth = itertools.accumulate(1 if c in "([{" else -1 for c in brackets)
        if max(depth) >= _RISKY_DEPTH:
            return True
    return len(text) > _RISKY_LINE and max(map(len, source_lines(text))) > _RISKY_LINE


def _nesting_problem(path: str, text: str) -> Finding | str | None:
    """For a file that may nest too deeply: a JL000 finding when CPython refuses its
    nesting, an error line when it cannot be parsed safely, None when it can."""
    try:
        compile(text, "<jaxlint>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        if error.msg.startswith(_NESTING_MESSAGES):
            return _jl000_at(path, text, error.lineno or 1, max(error.offset or 1, 1), error.msg)
    except (RecursionError, MemoryError):
        return f"{path}: nested too deeply to parse"
    except ValueError:
        pass
    if not _parser_survives(text):
        return f"{path}: nested too deeply to parse (the parser crashed on it)"
    return None


def _parser_survives(text: str) -> bool:
    """Whether libcst parses `text` without killing the process, tried in a forked child
    (a stack overflow in its native parser is a SIGSEGV, which no `except` catches)."""
    if not hasattr(os, "fork"):
        return True
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():
        # Python 3.12 warns on forking a threaded process (a pool worker watches its
        # parent), and so does jax when a program that imported it lints: the child only
        # parses and exits, touching neither threads nor jax.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            cst.parse_module(text)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return not os.WIFSIGNALED(status)


def _cpython_syntax_error(text: str) -> SyntaxError | None:
    try:
        compile(text, "<jaxlint>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        return error
    except (ValueError, RecursionError, MemoryError):
        return None  # NUL bytes, absurd nesting: let libcst decide
    return None


def _syntax_finding(path: str, text: str, error: cst.ParserSyntaxError) -> Finding:
    """A JL000 finding. CPython's parser places and words syntax errors better than libcst's
    (`'(' was never closed` at the parenthesis), so its report is used when it agrees that
    the file is invalid."""
    line, column = max(1, error.raw_line), error.raw_column + 1
    message = _PARSER_PREFIX.sub("", error.message)
    cpython = _cpython_syntax_error(text)
    if cpython is not None and cpython.lineno:
        line, column, message = cpython.lineno, max(cpython.offset or 1, 1), cpython.msg
    return _jl000_at(path, text, line, column, message)


def _jl000_at(path: str, text: str, line: int, column: int, message: str, *, cell: int | None = None) -> Finding:
    """A JL000 finding at (line, column) of `text`."""
    lines = source_lines(text)
    return Finding(
        path=path,
        line=line,
        column=column,
        end_line=line,
        end_column=column,
        code=SYNTAX_ERROR_CODE,
        rule=SYNTAX_ERROR_SLUG,
        message=f"SyntaxError: {message}",
        source_line=lines[line - 1] if line <= len(lines) else "",
        cell=cell,
    )


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def source_lines(text: str) -> list[str]:
    """The lines of `text` as Python counts them: only \\n, \\r\\n and \\r end a line (not the
    form feeds and Unicode separators that `str.splitlines` also splits on)."""
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _ignores_file(text: str) -> bool:
    """Whether `# jaxlint: ignore-file` appears as a real comment (not inside a string)."""
    if not _IGNORE_FILE.search(text):
        return False
    try:
        tokens = tokenize.generate_tokens(io.StringIO(text).readline)
        return any(
            token.type == tokenize.COMMENT and _IGNORE_FILE.match(token.string) for token in tokens
        )
    except (tokenize.TokenError, SyntaxError):
        return True  # unterminated code: trust the text match

def lint_source(
    source: str | bytes,
    rules: Iterable[type[Rule]] | None = None,
    *,
    path: str = "<string>",
) -> list[Finding]:
    """Lint a string of source with `rules` (all default rules if None)."""
    from ._registry import default_rules

    data = source.encode("utf-8") if isinstance(source, str) else source
    selected = tuple(rules) if rules is not None else default_rules()
    result = analyze(path, data, selected).result
    if result.error:
        raise SourceError(result.error)
    return result.findings
