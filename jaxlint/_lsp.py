"""`jaxlint server`: a language server (LSP over stdio, with pygls) for editors.

- Diagnostics when a Python file is opened or saved, and while it is edited (after a pause
  of `DEBOUNCE` seconds, so typing does not lint every keystroke), with the configuration
  that `jaxlint check` would use for the file (the nearest pyproject.toml, per-file-ignores,
  excludes), and what the other modules of the project define (the functions they jit:
  `jaxlint check`'s project analysis), kept current as files are edited and saved.
- Code actions: each finding's fix (quickfix; unsafe ones say so), "fix all" with the safe
  fixes (also as the `source.fixAll.jaxlint` kind editors run on save), and a `# noqa: CODE`
  comment for a finding.
- Hover on a finding: the rule's documentation, as `jaxlint rule` prints it.

Importing this module needs pygls (the `lsp` extra); nothing else in jaxlint imports it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from lsprotocol import types
from pygls.lsp.server import LanguageServer

from ._config import ConfigError, Settings, find_config, load_settings
from ._discovery import discover, stdin_source
from ._engine import SYNTAX_ERROR_CODE, Analysis, Finding, analyze, decode_source
from ._fixer import apply_fixes, fix_source
from ._project import Project, project_for
from ._runner import LintCache, cache_for, settings_key
from ._registry import SelectionError, get_rule
from ._rule import Rule
from ._suppress import parse_suppression
from ._version import __version__


__all__ = ["DEBOUNCE", "create_server", "serve"]

DEBOUNCE = 0.3
# A project larger than this is summarized from its first files only (the summary of a module
# is one `ast` pass; thousands of them would delay the first diagnostics).
_PROJECT_FILES = 2000
SOURCE = "jaxlint"
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.jaxlint"


@dataclass
class _Lint:
    """One lint of a document's text, for code actions and hover."""

    text: str
    analysis: Analysis
    settings: Settings
    rules: tuple[type[Rule], ...]


def _utf16(line: str, column: int) -> int:
    """The UTF-16 offset (LSP's default) of the 0-based code-point `column` in `line`."""
    return len(line[:column].encode("utf-16-le")) // 2


def _range(finding: Finding, lines: Sequence[str]) -> types.Range:
    def position(line: int, column: int) -> types.Position:
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        return types.Position(line=max(line - 1, 0), character=_utf16(text, max(column - 1, 0)))

    return types.Range(start=position(finding.line, finding.column), end=position(finding.end_line, finding.end_column))


def _overlaps(a: types.Range, b: types.Range) -> bool:
    def key(p: types.Position) -> tuple[int, int]:
        return (p.line, p.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def _whole_text_edit(old: str, new: str) -> types.TextEdit:
    """One edit turning `old` into `new`: the lines between their common head and tail."""
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    head = 0
    while head < min(len(old_lines), len(new_lines)) and old_lines[head] == new_lines[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(old_lines), len(new_lines)) - head
        and old_lines[len(old_lines) - 1 - tail] == new_lines[len(new_lines) - 1 - tail]
    ):
        tail += 1
    start = types.Position(line=head, character=0)
    end = types.Position(line=len(old_lines) - tail, character=0)
    return types.TextEdit(range=types.Range(start=start, end=end), new_text="".join(new_lines[head : len(new_lines) - tail]))


class _MemoryCache:
    """Module facts kept in memory only (`LintCache`'s entries, without its file)."""

    def __init__(self) -> None:
        self.entries: dict[str, object] = {}
        self.dirty = False

    def save(self) -> None:
        pass


class JaxlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("jaxlint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.lints: dict[str, _Lint] = {}
        self.pending: dict[str, asyncio.TimerHandle] = {}
        # The project's Python files as on disk, per project root (a saved file is read
        # again), and the cache `jaxlint check` keeps there for each configuration, which
        # holds each module's facts by content hash: what `jaxlint check` knows about the
        # other modules of a run (`_project`).
        self.sources: dict[Path, dict[Path, bytes]] = {}
        self.caches: dict[tuple[Path, str], LintCache | _MemoryCache] = {}

    def project(self, settings: Settings, rules: Sequence[type[Rule]], path: Path, data: bytes) -> Project:
        """What the other modules of the file's project define, with the file, and every other
        open document of the project, as edited (their unsaved text is never stored)."""
        root = settings.root
        sources = self.sources.get(root)
        if sources is None:
            if settings.config_file is not None:
                found = [f.path for f in discover([str(root)], settings)[0]]
            else:  # no pyproject.toml: a loose file and its siblings, not everything below them
                found = sorted(p for p in path.parent.glob("*.py") if not settings.is_excluded(p))
            sources = {}
            for file in found[:_PROJECT_FILES]:
                try:
                    sources[Path(os.path.realpath(file))] = file.read_bytes()
                except OSError:
                    continue
            self.sources[root] = sources
        edited = {path: data}
        for document in list(self.workspace.text_documents.values()):
            if document.uri.startswith("file:") and document.path.endswith(".py"):
                other = Path(os.path.realpath(document.path))
                if other in sources and other not in edited:
                    edited[other] = document.source.encode("utf-8")
        # A loose file (no pyproject.toml) gets no cache folder beside it: facts in memory.
        key = (root, settings_key(settings, rules) if settings.config_file is not None else "")
        cache = self.caches.get(key)
        if cache is None:
            cache = self.caches[key] = cache_for(settings, rules) if key[1] else _MemoryCache()
        known = len(cache.entries)
        project = project_for(
            ((str(p), p, d) for p, d in sources.items() if p not in edited),
            cache.entries,
            library=settings.library,
            unsaved=[(str(p), p, d) for p, d in edited.items()],
        )
        if len(cache.entries) != known:
            cache.dirty = True
            cache.save()
        return project

    def saved(self, uri: str) -> None:
        """A saved document is the project's file on disk from now on."""
        if not uri.startswith("file:"):
            return
        path = Path(os.path.realpath(self.workspace.get_text_document(uri).path))
        for sources in self.sources.values():
            if path in sources:
                try:
                    sources[path] = path.read_bytes()
                except OSError:
                    del sources[path]

    # -- linting ---------------------------------------------------------------------

    def lint(self, uri: str) -> _Lint | None:
        document = self.workspace.get_text_document(uri)
        path = Path(document.path) if uri.startswith("file:") else Path(uri.rsplit("/", 1)[-1])
        if path.suffix not in (".py", ".pyi"):
            return None
        try:
            settings = load_settings(find_config(path), root=path.parent)
            rules = settings.rules()
        except (ConfigError, SelectionError) as error:
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=f"jaxlint: {error}"))
            return None
        text = document.source
        if not stdin_source(str(path), b"", settings, force_exclude=True):
            return None  # excluded in [tool.jaxlint], as `jaxlint check .` would skip it
        ignored = settings.ignored_for(path)
        file_rules = tuple(r for r in rules if r not in ignored)
        data = text.encode("utf-8")
        real = Path(os.path.realpath(path))
        project = self.project(settings, rules, real, data) if uri.startswith("file:") else None
        analysis = analyze(str(real), data, file_rules, settings.lint_options(), project, as_notebook=False)
        lint = _Lint(text, analysis, settings, file_rules)
        self.lints[uri] = lint
        return lint

    def publish(self, uri: str) -> None:
        self.pending.pop(uri, None)
        lint = self.lint(uri)
        diagnostics = [] if lint is None else self.diagnostics(lint)
        if lint is not None and lint.analysis.result.error:
            self.window_log_message(
                types.LogMessageParams(type=types.MessageType.Warning, message=lint.analysis.result.error)
            )
        version = self.workspace.get_text_document(uri).version
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
        )

    def diagnostics(self, lint: _Lint) -> list[types.Diagnostic]:
        lines = lint.text.splitlines()
        return [
            types.Diagnostic(
                range=_range(f, lines),
                message=f.message,
                severity=types.DiagnosticSeverity.Error if f.code == SYNTAX_ERROR_CODE else types.DiagnosticSeverity.Warning,
                code=f.code,
                source=SOURCE,
                data={"rule": f.rule, "fix": f.fix},
            )
            for f in lint.analysis.result.findings
        ]

    def schedule(self, uri: str) -> None:
        """Lint `uri` once it has not changed for `DEBOUNCE` seconds."""
        handle = self.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        self.pending[uri] = asyncio.get_running_loop().call_later(DEBOUNCE, self.publish, uri)

    # -- code actions and hover -------------------------------------------------------

    def code_actions(self, uri: str, wanted: types.Range, only: Sequence[str] | None) -> list[types.CodeAction]:
        lint = self.lints.get(uri)
        document = self.workspace.get_text_document(uri)
        if lint is None or lint.text != document.source:
            lint = self.lint(uri)
        if lint is None:
            return []
        lines = lint.text.splitlines()
        actions: list[types.CodeAction] = []
        for raw, finding in lint.analysis.raw:
            where = _range(finding, lines)
            if not _overlaps(where, wanted):
                continue
            diagnostic = types.Diagnostic(range=where, message=finding.message, code=finding.code, source=SOURCE)
            if raw.fix is not None and lint.analysis.module is not None and finding.fix in ("safe", "unsafe"):
                fixed = self._apply_one(lint, raw.fix)
                if fixed is not None:
                    unsafe = " (unsafe)" if finding.fix == "unsafe" else ""
                    actions.append(
                        self._action(f"jaxlint: {raw.fix.title}{unsafe}", types.CodeActionKind.QuickFix, uri, lint.text, fixed, diagnostic, preferred=finding.fix == "safe")
                    )
            noqa = _with_noqa(lint.text, lines, finding)
            if noqa is not None:
                actions.append(
                    self._action(f"jaxlint: ignore {finding.code} on this line (# noqa)", types.CodeActionKind.QuickFix, uri, lint.text, noqa, diagnostic)
                )
        fixed_all = self._fix_all(lint, uri)
        if fixed_all is not None:
            for kind in (FIX_ALL, types.CodeActionKind.QuickFix):
                actions.append(self._action("jaxlint: fix all safely fixable findings", kind, uri, lint.text, fixed_all))
        if only:
            actions = [a for a in actions if any(str(a.kind) == k or str(a.kind).startswith(f"{k}.") for k in only)]
        return actions

    def _apply_one(self, lint: _Lint, fix) -> str | None:  # type: ignore[no-untyped-def]
        module = lint.analysis.module
        assert module is not None
        try:
            code = apply_fixes(module, [fix]).code
            cst.parse_module(code, config=module.config_for_parsing)
        except Exception:  # noqa: BLE001 - a fix that fails is not offered
            return None
        return code

    def _fix_all(self, lint: _Lint, uri: str) -> str | None:
        if not any(f.fix == "safe" for f in lint.analysis.result.findings):
            return None
        path = self.workspace.get_text_document(uri).path
        outcome = fix_source(path, lint.text.encode("utf-8"), lint.rules, lint.settings.lint_options())
        if outcome.error or not outcome.changed:
            return None
        return decode_source(outcome.fixed)[0]

    @staticmethod
    def _action(
        title: str,
        kind: str,
        uri: str,
        old: str,
        new: str,
        diagnostic: types.Diagnostic | None = None,
        preferred: bool = False,
    ) -> types.CodeAction:
        return types.CodeAction(
            title=title,
            kind=kind,
            diagnostics=[diagnostic] if diagnostic else None,
            is_preferred=preferred or None,
            edit=types.WorkspaceEdit(changes={uri: [_whole_text_edit(old, new)]}),
        )

    def hover(self, uri: str, position: types.Position) -> types.Hover | None:
        lint = self.lints.get(uri)
        if lint is None:
            return None
        lines = lint.text.splitlines()
        point = types.Range(start=position, end=position)
        for finding in lint.analysis.result.findings:
            where = _range(finding, lines)
            if not _overlaps(where, point):
                continue
            if finding.code == SYNTAX_ERROR_CODE:
                return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=finding.message), range=where)
            rule = get_rule(finding.rule)
            fix = rule.FIX.value if rule.FIX else "none"
            text = f"# {rule.SLUG} ({rule.CODE})\n\nFix: {fix}\n\n{rule.docs()}\n"
            return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text), range=where)
        return None


def _with_noqa(text: str, lines: Sequence[str], finding: Finding) -> str | None:
    """The text with `# noqa: CODE` on the finding's first line (added to a `# noqa:` list
    already there), or None where a comment cannot go (inside a multi-line string)."""
    if finding.code == SYNTAX_ERROR_CODE or not 0 < finding.line <= len(lines):
        return None
    kept = text.splitlines(keepends=True)
    line = lines[finding.line - 1]
    ending = kept[finding.line - 1][len(line) :]
    if parse_suppression(line) is not None and "noqa:" in line:
        head, _, codes = line.rpartition("noqa:")
        new_line = f"{head}noqa: {codes.strip()}, {finding.code}"
    else:
        new_line = f"{line}  # noqa: {finding.code}"
    text = "".join([*kept[: finding.line - 1], new_line + ending, *kept[finding.line :]])
    try:
        cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None
    return text


def create_server() -> JaxlintServer:
    server = JaxlintServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: JaxlintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: JaxlintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: JaxlintServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.saved(params.text_document.uri)
        ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: JaxlintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        handle = ls.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        ls.lints.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL]
        ),
    )
    def code_action(ls: JaxlintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return ls.code_actions(params.text_document.uri, params.range, params.context.only)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: JaxlintServer, params: types.HoverParams) -> types.Hover | None:
        return ls.hover(params.text_document.uri, params.position)

    return server


def serve() -> None:
    """Run the server on standard input and output until the client says `exit`."""
    create_server().start_io()
