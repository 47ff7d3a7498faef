"""The `jaxlint` command: check, fix, rule, rules, bench, run, server, clean.

Exit codes (ruff's): 0 nothing found (or everything fixed), 1 findings remain, 2 a usage,
configuration, input or internal error.
"""

from __future__ import annotations

import difflib
import io
import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import click
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

from ._config import ConfigError, Settings, find_config, has_table, load_settings
from . import _discovery
from ._discovery import SourceFile, discover, is_excluded, project_files, real_path, stdin_source
from ._engine import SYNTAX_ERROR_CODE, Finding
from ._registry import SelectionError, all_rules, expand, get_rule
from ._report import FORMATS, STATISTICS_FORMATS, render, render_statistics
from ._rule import Rule
from ._progress import ProgressBar
from ._runner import CACHE_DIRECTORY, CACHE_TAG, Skipped, cache_directory, cache_for, lint_files, project_of, read_source
from ._version import __version__


__all__ = ["main"]

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageProblem(click.ClickException):
    """A one-line error that exits with status 2."""

    exit_code = EXIT_ERROR

    def show(self, file=None) -> None:  # type: ignore[no-untyped-def]
        click.echo(f"jaxlint: error: {self.format_message()}", err=True)


def _split(values: Sequence[str]) -> list[str]:
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def _settings(paths: Sequence[str], config: str | None) -> Settings:
    """The settings of the first path (what discovery and standard input use); each file
    then takes those of its own nearest configuration (`_groups`), unless `--config`."""
    try:
        if config is not None:
            config_path = Path(config)
            if not config_path.is_file():
                raise UsageProblem(f"{config}: no such configuration file")
            if not has_table(config_path):
                raise UsageProblem(f"{config}: no [tool.jaxlint] table")
        else:
            start = Path(paths[0]) if paths else Path.cwd()
            config_path = find_config(start)
        return load_settings(config_path)
    except ConfigError as error:
        raise UsageProblem(str(error)) from None


@dataclass(frozen=True)
class _Selection:
    """What the command line says about rules, applied on top of each configuration."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    preview: bool | None = None


def _rules(settings: Settings, selection: _Selection) -> tuple[type[Rule], ...]:
    if selection.select:
        # As in ruff, a selection on the command line starts afresh: the configuration's
        # `ignore` and `extend-select` refine the configuration's `select`, not this one.
        settings.select = _split(selection.select)
        settings.ignore = []
        settings.extend_select = []
    if selection.extend_select:
        settings.extend_select = [*settings.extend_select, *_split(selection.extend_select)]
    if selection.ignore:
        settings.ignore = [*settings.ignore, *_split(selection.ignore)]
    if selection.preview is not None:
        settings.preview = selection.preview
    try:
        rules = settings.rules()
        named = {s.lower() for s in [*(settings.select or ()), *settings.extend_select]}
        for rule in all_rules():
            if rule.PREVIEW and not settings.preview and {rule.CODE.lower(), rule.SLUG} & named:
                _warn(f"{rule.SLUG} ({rule.CODE}) is in preview: add --preview to run it")
        return rules
    except SelectionError as error:
        raise UsageProblem(str(error)) from None


@dataclass
class _Group:
    """Files that share a configuration, and the rules it selects."""

    settings: Settings
    rules: tuple[type[Rule], ...]
    files: list[SourceFile]


def _groups(
    files: Sequence[SourceFile],
    base: Settings,
    config: str | None,
    selection: _Selection,
    named: Sequence[str] = (),
) -> list[_Group]:
    """Each file with the configuration nearest to it (ruff's hierarchical configuration);
    with `--config`, every file with that one. A file found by walking a directory that its
    own configuration excludes (`exclude`, `extend-exclude` of a subproject) is left out, as
    the walk leaves out what the first path's configuration excludes; a file named in
    `named` is always kept."""
    base_rules = _rules(base, selection)
    if config is not None:
        return [_Group(base, base_rules, list(files))]
    found: dict[Path, Path | None] = {}
    groups: dict[Path | None, _Group] = {base.config_file.resolve() if base.config_file else None: _Group(base, base_rules, [])}
    try:
        for file in files:
            folder = file.path.parent.resolve()
            if folder not in found:
                nearest = find_config(folder)
                found[folder] = nearest.resolve() if nearest else None
            key = found[folder]
            if key not in groups:
                settings = load_settings(key)
                groups[key] = _Group(settings, _rules(settings, selection), [])
            group = groups[key]
            if group.settings is not base and file.display not in named and is_excluded(file.path, group.settings):
                continue
            group.files.append(file)
    except ConfigError as error:
        raise UsageProblem(str(error)) from None
    return [group for group in groups.values() if group.files] or [_Group(base, base_rules, [])]


def _warn(message: str) -> None:
    click.echo(f"jaxlint: warning: {message}", err=True)


_color_mode = "auto"


def _use_color(stream: object) -> bool:
    """`--color always|never`; by default colour on a terminal only, forced by `FORCE_COLOR`
    (https://force-color.org) and never with `NO_COLOR` (https://no-color.org)."""
    if _color_mode != "auto":
        return _color_mode == "always"
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _set_color(ctx: click.Context, param: click.Parameter, value: str) -> str:
    global _color_mode
    _color_mode = value
    return value


def _print_errors(errors: Sequence[str]) -> None:
    for error in errors:
        if isinstance(error, Skipped):  # not an error: the exit code does not count it
            click.echo(f"jaxlint: warning: {error}", err=True)
        else:
            click.echo(f"jaxlint: error: {error}", err=True)


def _summary(findings: Sequence[Finding], unsafe_hint: bool = True) -> str:
    if not findings:
        return "All checks passed!"
    count = len(findings)
    safe = sum(1 for f in findings if f.fix == "safe")
    unsafe = sum(1 for f in findings if f.fix == "unsafe")
    text = f"Found {count} finding{'s' if count != 1 else ''}"
    details = []
    if safe:
        details.append(f"{safe} fixable with `jaxlint fix`")
    if unsafe and unsafe_hint:
        details.append(f"{unsafe} more with `jaxlint fix --unsafe-fixes`")
    return text + (f" ({', '.join(details)})" if details else "") + "."


_path_argument = click.argument("paths", nargs=-1, type=click.Path(allow_dash=True))
_select_options = [
    click.option(
        "--stdin-filename",
        metavar="PATH",
        help="Read the source from standard input (`-`), linted as the file PATH: its configuration and kind.",
    ),
    click.option("--select", multiple=True, help="Rules to run: slugs, codes or prefixes (comma-separated)."),
    click.option("--extend-select", multiple=True, help="Rules to add to the selection."),
    click.option("--ignore", multiple=True, help="Rules to turn off (comma-separated)."),
    click.option("--preview/--no-preview", default=None, help="Also run rules that are still in preview."),
    click.option(
        "--config",
        type=click.Path(dir_okay=False),
        help="pyproject.toml to read for every file, instead of the one nearest to each.",
    ),
    click.option(
        "--force-exclude",
        is_flag=True,
        help="Apply exclude patterns to paths named on the command line too (for pre-commit).",
    ),
    click.option(
        "--respect-gitignore/--no-respect-gitignore",
        default=None,
        help="Skip files that .gitignore ignores (default: yes, or `respect-gitignore`).",
    ),
    click.option("--output-format", type=click.Choice(FORMATS), default="text", show_default=True),
    click.option("-o", "--output-file", type=click.Path(dir_okay=False, writable=True), help="Write the report to this file."),
    click.option(
        "--color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        show_default=True,
        expose_value=False,
        is_eager=True,
        callback=_set_color,
        help="Colour the report: on a terminal (auto; FORCE_COLOR and NO_COLOR are honoured), always or never.",
    ),
    click.option("--show-fixes", is_flag=True, help="List the fixes applied, per file and rule."),
    click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that can change behaviour in corner cases."),
    click.option("--diff", is_flag=True, help="Print a unified diff of the fixes; write nothing."),
    click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain."),
    click.option("--no-cache", is_flag=True, help="Lint every file, ignoring and not writing the cache."),
    click.option("--cache-dir", type=click.Path(file_okay=False), help="Where the cache lives (default: .jaxlint_cache)."),
    click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary."),
]


def _read_stdin(paths: Sequence[str], stdin_filename: str | None) -> tuple[str, bytes] | None:
    """(name, bytes) when the source comes from standard input: the path `-`, or
    `--stdin-filename` with no path (as in ruff)."""
    if "-" not in paths and not (stdin_filename and not paths):
        return None
    if tuple(paths) not in ((), ("-",)):
        raise UsageProblem("`-` (standard input) cannot be combined with other paths")
    return stdin_filename or "-", sys.stdin.buffer.read()


def _with_options(options):  # type: ignore[no-untyped-def]
    def decorate(function):  # type: ignore[no-untyped-def]
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


@dataclass
class _Run:
    """One `check` or `fix`: the command line, resolved."""

    paths: tuple[str, ...]
    stdin: tuple[str, bytes] | None
    settings: Settings
    selection: _Selection
    config: str | None
    force_exclude: bool
    output_format: str
    output_file: str | None
    quiet: bool
    exit_zero: bool

    @classmethod
    def from_options(cls, paths: tuple[str, ...], options: dict) -> _Run:  # type: ignore[type-arg]
        stdin = _read_stdin(paths, options["stdin_filename"])
        paths = paths or (".",)
        settings = _settings([stdin[0]] if stdin else paths, options["config"])
        if options["respect_gitignore"] is not None:
            settings.respect_gitignore = options["respect_gitignore"]
        selection = _Selection(options["select"], options["ignore"], options["extend_select"], options["preview"])
        return cls(
            paths, stdin, settings, selection, options["config"], options["force_exclude"],
            options["output_format"], options["output_file"], options["quiet"], options["exit_zero"],
        )  # fmt: skip

    def context(self, group: _Group) -> list[SourceFile]:
        """The rest of the project when the run lints part of it (standard input's named
        file, or the files a pre-commit hook passes): its other modules are summarized, not
        linted, so that a file's findings are the same however it is named (`project_files`:
        the marked root above the file; none, with a warning, past `MAX_CONTEXT_FILES`)."""
        if not group.files or (self.stdin is not None and self.stdin[0] == "-"):
            return []
        root = real_path(group.settings.root)
        if self.stdin is None and any(real_path(p) in (root, *root.parents) for p in self.paths):
            return []  # the run discovers the whole project itself
        named = {real_path(f.path) for f in group.files}
        around = project_files(str(group.files[0].path), group.settings)
        if around is None:
            _warn(
                f"more than {_discovery.MAX_CONTEXT_FILES} Python files around {group.files[0].display}: linted without the "
                "rest of its project (a pyproject.toml with a [tool.jaxlint] table marks the project's root)"
            )
            return []
        return [f for f in around if real_path(f.path) not in named]

    def inputs(self) -> tuple[list[_Group], list[str]]:
        """The files to lint, grouped by configuration, and one error line per bad path."""
        if self.stdin is not None:
            files = stdin_source(*self.stdin, self.settings, force_exclude=self.force_exclude)
            return [_Group(self.settings, _rules(self.settings, self.selection), files)], []
        files, errors = discover(self.paths, self.settings, force_exclude=self.force_exclude)
        return _groups(files, self.settings, self.config, self.selection, self.paths), errors

    def report_stream(self, default: TextIO) -> TextIO:
        if self.output_file is None:
            return default
        try:
            return open(self.output_file, "w", encoding="utf-8")  # noqa: SIM115 - closed by the caller
        except OSError as error:
            raise UsageProblem(f"{self.output_file}: cannot write: {error.strerror or error}") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="jaxlint")
def cli() -> None:
    """jaxlint: find and fix JAX performance mistakes."""


@cli.command()
@_path_argument
@_with_options(_select_options)
@click.option("--fix", "apply_fixes", is_flag=True, help="Apply safe fixes (as `jaxlint fix`), then report what remains.")
@click.option("--statistics", is_flag=True, help="Print a count per rule instead of each finding.")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` comments to every line with a finding.")
@click.option("-w", "--watch", is_flag=True, help="Check again whenever a file changes (Ctrl-C stops).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Processes (default: every core).")
@click.option(
    "--evidence",
    type=click.Path(dir_okay=False),
    help="A `jaxlint run --output-format json` report: mark findings with what the run measured.",
)
def check(paths: tuple[str, ...], **options: object) -> None:
    """Report findings in PATHS (default: the current directory; `-`: standard input)."""
    run = _Run.from_options(paths, options)
    if options["apply_fixes"] or options["diff"]:
        sys.exit(_fix_run(run, options, only=None))
    if options["add_noqa"]:
        sys.exit(_add_noqa(run))
    if options["statistics"] and options["output_format"] not in STATISTICS_FORMATS:
        raise UsageProblem(f"--statistics prints {', '.join(STATISTICS_FORMATS)}, not {options['output_format']}")
    if not options["watch"]:
        sys.exit(_check_once(run, options))
    if run.stdin is not None:
        raise UsageProblem("--watch reads files, not standard input")
    _watch(run, options)


def _check_once(run: _Run, options: dict) -> int:  # type: ignore[type-arg]
    measured = _load_evidence(options["evidence"]) if options["evidence"] is not None else None  # type: ignore[arg-type]
    groups, errors = run.inputs()
    results = []
    # On a terminal, a run that lasts shows how far it is (on stderr; never with -q).
    bar = ProgressBar(sum(len(g.files) for g in groups), sys.stderr if not run.quiet else io.StringIO())
    try:
        for group in groups:
            context = run.context(group)
            cache = None
            if not options["no_cache"] and (run.stdin is None or context):
                cache = cache_for(group.settings, group.rules, options["cache_dir"])  # type: ignore[arg-type]
            results += lint_files(
                group.files, group.settings, group.rules, jobs=options["jobs"], cache=cache, progress=bar.advance,  # type: ignore[arg-type]
                context=context,
            )  # fmt: skip
            if cache is not None:
                cache.save()
    finally:
        bar.close()
    skipped = [r.skipped for r in results if r.skipped]
    errors += [r.error for r in results if r.error]
    findings = sorted((f for r in results for f in r.findings), key=Finding.sort_key)
    if measured is not None:
        from ._evidence import apply_evidence

        codes = {r.CODE for group in groups for r in group.rules} | {"JL100"}
        files = [str(f.path) for group in groups for f in group.files]
        findings = apply_evidence(findings, measured, files, codes)
    stream = run.report_stream(sys.stdout)
    color = _use_color(stream)
    try:
        if options["statistics"]:
            render_statistics(findings, run.output_format, stream, color=color)
        else:
            render(findings, run.output_format, stream, color=color)
        if run.output_format in ("text", "concise") and not run.quiet and not options["statistics"]:
            if findings or not errors:  # never "All checks passed!" when a file could not be checked
                click.echo(_summary(findings), file=stream)
    finally:
        if run.output_file is not None:
            stream.close()
    return _exit_code(errors, bool(findings), run.exit_zero, skipped)


def _snapshot(run: _Run) -> dict[Path, tuple[int, int]]:
    """(mtime, size) of every file the run would lint, and of the configurations."""
    files, _ = discover(run.paths, run.settings, force_exclude=run.force_exclude)
    state = {}
    for path in [f.path for f in files] + [Path(c) for c in (run.config,) if c] + (
        [run.settings.config_file] if run.settings.config_file else []
    ):
        try:
            stat = path.stat()
        except OSError:
            continue
        state[path] = (stat.st_mtime_ns, stat.st_size)
    return state


def _watch(run: _Run, options: dict) -> None:  # type: ignore[type-arg]
    """Check, then again each time a file is added, removed or changed (polling twice a
    second: no dependency, and it works on every file system)."""
    import time

    click.echo("Watching for file changes (Ctrl-C to stop).", err=True)
    while True:
        before = _snapshot(run)
        _check_once(run, options)
        while _snapshot(run) == before:
            time.sleep(0.5)
        click.echo("File change detected: checking again.", err=True)


def _load_evidence(path: str):  # type: ignore[no-untyped-def]
    from ._evidence import EvidenceError, load_evidence

    try:
        return load_evidence(path)
    except EvidenceError as error:
        raise UsageProblem(str(error)) from None


@cli.command()
@_path_argument
@click.option("--rule", "fix_rules", multiple=True, help="Fix only this rule (repeatable; slug or code).")
@_with_options(_select_options)
def fix(paths: tuple[str, ...], fix_rules: tuple[str, ...], **options: object) -> None:
    """Apply fixes in PATHS, then report what remains.

    With `-` (standard input), the fixed source goes to standard output and the report to
    standard error."""
    try:
        only = {r for selector in _split(fix_rules) for r in expand(selector)} if fix_rules else None
    except SelectionError as error:
        raise UsageProblem(str(error)) from None
    sys.exit(_fix_run(_Run.from_options(paths, options), options, only))


def _fix_run(run: _Run, options: dict, only: set[type[Rule]] | None) -> int:  # type: ignore[type-arg]
    from ._fixer import fix_source, write_fix

    unsafe_fixes, diff = bool(options["unsafe_fixes"]), bool(options["diff"])
    groups, errors = run.inputs()
    remaining: list[Finding] = []
    skipped: list[str] = []
    fixed_files = applied = 0
    shown: dict[str, Counter[str]] = {}
    stdout = sys.stdout
    # Fixing standard input: the source is the output, everything else is a message.
    to_stdout = run.stdin is not None and not diff
    report = run.report_stream(sys.stderr if to_stdout else stdout)
    if to_stdout and not any(group.files for group in groups):  # excluded: pass it through
        sys.stdout.buffer.write(run.stdin[1])  # type: ignore[index]
    for group in groups:
        sources = [read_source(file, group.settings.max_file_size) for file in group.files]
        # What the other files define, as `check` sees it (read before any file is rewritten).
        context = run.context(group)
        # The facts of the rest of the project come from the cache `check` keeps.
        cache = None
        if context and not options["no_cache"]:
            cache = cache_for(group.settings, group.rules, options["cache_dir"])  # type: ignore[arg-type]
        project = project_of(group.files, sources, group.settings, cache, context)
        if cache is not None:
            cache.save()
        for file, data in zip(group.files, sources):
            if isinstance(data, str):
                (skipped if isinstance(data, Skipped) else errors).append(data)
                continue
            file_rules = [r for r in group.rules if r not in group.settings.ignored_for(file.path)]
            fix_only = [r for r in file_rules if only is None or r in only]
            outcome = fix_source(
                file.display, data, file_rules, group.settings.lint_options(), unsafe=unsafe_fixes, fix_rules=fix_only,
                project=project,
            )  # fmt: skip
            if outcome.error:
                errors.append(outcome.error)
            if to_stdout:
                sys.stdout.buffer.write(outcome.fixed)
            elif outcome.changed and not diff:
                problem = write_fix(file, outcome)
                if problem is not None:  # left as it was: what it had before the fix remains
                    errors.append(problem)
                    remaining.extend(outcome.found)
                    continue
            if outcome.changed:
                if diff:
                    _print_diff(file, outcome.original, outcome.fixed, stdout)
                fixed_files += 1
                applied += outcome.applied
                shown[file.display] = Counter(outcome.fixed_codes)
            remaining.extend(outcome.remaining)
    remaining.sort(key=Finding.sort_key)
    try:
        if not diff:
            render(remaining, run.output_format, report, color=_use_color(report))
        if run.output_format in ("text", "concise") and not run.quiet:
            messages = report if not diff else sys.stderr
            verb = "Would fix" if diff else "Fixed"
            if options["show_fixes"] and shown:
                _print_fixes(shown, verb, messages)
            elif applied:
                click.echo(f"{verb} {_count(applied, 'finding')} in {_count(fixed_files, 'file')}.", file=messages)
            if not diff and (remaining or not errors):
                click.echo(_summary(remaining, unsafe_hint=not unsafe_fixes), file=report)
    finally:
        if run.output_file is not None:
            report.close()
    # --diff: 1 when there are fixes to apply.
    return _exit_code(errors, bool(fixed_files if diff else remaining), run.exit_zero, skipped)


def _exit_code(errors: Sequence[str], found: bool, exit_zero: bool, skipped: Sequence[str] = ()) -> int:
    """Print the warnings and errors; 2 if there are errors, else 1 when something was
    `found`."""
    _print_errors([*skipped, *errors])
    if errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if found and not exit_zero else EXIT_CLEAN


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' if number != 1 else ''}"


def _print_fixes(shown: dict[str, Counter[str]], verb: str, stream: TextIO) -> None:
    """ruff's --show-fixes: each file, then each rule's count of applied fixes."""
    slugs = {r.CODE: r.SLUG for r in all_rules()}
    total = sum(sum(counts.values()) for counts in shown.values())
    click.echo(f"{verb} {_count(total, 'finding')}:", file=stream)
    for path in sorted(shown):
        click.echo(f"- {path}:", file=stream)
        for code, count in sorted(shown[path].items()):
            click.echo(f"    {count} × {code} ({slugs.get(code, '')})", file=stream)


def _add_noqa(run: _Run) -> int:
    """ruff's --add-noqa: a `# noqa: CODE` comment on the first line of every finding (added
    to a `# noqa:` list already there), in place; the line endings and encoding are kept."""
    from ._fixer import FixOutcome, write_fix
    from ._suppress import add_noqa

    if run.stdin is not None:
        raise UsageProblem("--add-noqa edits files, not standard input")
    groups, errors = run.inputs()
    skipped: list[str] = []
    added = 0
    for group in groups:
        results = lint_files(group.files, group.settings, group.rules)
        for file, result in zip(group.files, results):
            if result.skipped or result.error:
                (skipped if result.skipped else errors).append(result.skipped or result.error)  # type: ignore[arg-type]
                continue
            codes: dict[int, set[str]] = {}
            for finding in result.findings:
                if finding.cell is None and finding.code not in (SYNTAX_ERROR_CODE, "JL901"):
                    codes.setdefault(finding.line, set()).add(finding.code)
            data = read_source(file, group.settings.max_file_size) if codes else ""
            if isinstance(data, str):
                continue
            new, count = add_noqa(data, codes)
            problem = write_fix(file, FixOutcome(file.display, data, new)) if count else None
            if problem is not None:
                errors.append(problem)
                continue
            added += count
    if not run.quiet:
        click.echo(f"Added {_count(added, 'noqa directive')}.", err=True)
    return _exit_code(errors, False, True, skipped)


def _print_diff(file: SourceFile, before: bytes, after: bytes, stream) -> None:  # type: ignore[no-untyped-def]
    """A unified diff of the fix; for a notebook, one per changed cell, of its source."""
    if file.path.name.endswith(".ipynb"):
        from ._notebook import code_cells, load_notebook

        old_cells = {c.number: c.source for c in code_cells(load_notebook(before))}
        new_cells = {c.number: c.source for c in code_cells(load_notebook(after))}
        pairs = [
            (f"{file.display}:cell {number}", old_cells[number], new_cells.get(number, ""))
            for number in sorted(old_cells)
            if old_cells[number] != new_cells.get(number, "")
        ]
    else:
        from ._engine import decode_source

        pairs = [(file.display, decode_source(before)[0], decode_source(after)[0])]
    for name, old, new in pairs:
        lines = difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=f"a/{name}", tofile=f"b/{name}"
        )
        for line in lines:
            stream.write(line if line.endswith("\n") else line + "\n")


def _rule_dict(rule: type[Rule], explanation: bool) -> dict[str, object]:
    """A rule as `rules`/`rule --output-format json` print it (ruff's fields)."""
    data: dict[str, object] = {
        "code": rule.CODE,
        "name": rule.SLUG,
        "summary": rule.MESSAGE,
        "fix": rule.FIX.value if rule.FIX else None,
        "default": rule.DEFAULT_ON,
        "preview": rule.PREVIEW,
    }
    if explanation:
        data["explanation"] = rule.docs()
    return data


_rule_format = click.option(
    "--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)


@cli.command(name="rule")
@click.argument("name", required=False)
@click.option("--all", "every", is_flag=True, help="Explain every rule.")
@_rule_format
def rule_command(name: str | None, every: bool, output_format: str) -> None:
    """Explain a rule: what it finds, why it is slow, the fix and its safety."""
    if every == (name is not None):
        raise UsageProblem("give a rule's name or --all")
    try:
        rules = all_rules() if every else (get_rule(name),)  # type: ignore[arg-type]
    except SelectionError as error:
        raise UsageProblem(str(error)) from None
    stdout = sys.stdout
    if output_format == "json":
        payload = [_rule_dict(r, explanation=True) for r in rules]
        stdout.write(json.dumps(payload if every else payload[0], indent=2) + "\n")
        return
    console = Console(file=stdout, force_terminal=_use_color(stdout), no_color=not _use_color(stdout))
    for rule in rules:
        fix = rule.FIX.value if rule.FIX else "none"
        text = f"# {rule.SLUG} ({rule.CODE})\n\nFix: {fix}\n\n{rule.docs()}\n"
        if _use_color(stdout):
            console.print(Markdown(text))
        else:
            stdout.write(text + ("\n" if every else ""))


@cli.command(name="rules")
@_rule_format
def rules_command(output_format: str) -> None:
    """List every rule."""
    stdout = sys.stdout
    if output_format == "json":
        stdout.write(json.dumps([_rule_dict(r, explanation=False) for r in all_rules()], indent=2) + "\n")
        return
    console = Console(file=stdout, force_terminal=_use_color(stdout), no_color=not _use_color(stdout), width=120)
    table = Table("code", "slug", "fix", "default", "what it finds", box=None)
    for rule in all_rules():
        table.add_row(
            rule.CODE,
            rule.SLUG,
            rule.FIX.value if rule.FIX else "-",
            ("on" if rule.DEFAULT_ON else "off") + (" (preview)" if rule.PREVIEW else ""),
            rule.MESSAGE,
        )
    console.print(table)


@cli.command(name="clean")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="The cache to remove (default: as `check`).")
def clean_command(cache_dir: str | None) -> None:
    """Remove jaxlint's cache: the project's, and any `.jaxlint_cache` under this directory."""
    import shutil

    settings = _settings([], None)
    targets = {cache_directory(settings, cache_dir)}
    for directory, subdirectories, _ in os.walk("."):
        if CACHE_DIRECTORY in subdirectories:
            targets.add(Path(directory) / CACHE_DIRECTORY)
        subdirectories[:] = [d for d in subdirectories if d != CACHE_DIRECTORY and not settings.is_excluded(Path(directory) / d)]
    for target in sorted(targets):
        if not target.is_dir():
            continue
        if target.name != CACHE_DIRECTORY and not (target / CACHE_TAG).is_file():
            _warn(f"{target}: not removed, it holds no {CACHE_TAG} (not a jaxlint cache)")
            continue
        click.echo(f"Removing cache at: {target}", err=True)
        shutil.rmtree(target, ignore_errors=True)


@cli.command(name="bench")
@click.option("--rule", "bench_rules", multiple=True, help="Only this rule's fixtures (repeatable; slug or code).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document instead of a table.")
@click.option("--trials", type=click.IntRange(min=1), default=10, show_default=True, help="Timed rounds per fixture.")
def bench_command(bench_rules: tuple[str, ...], as_json: bool, trials: int) -> None:
    """Time every rule's runnable fixture before and after its fix, on this machine."""
    from ._bench import BenchError, run_bench

    try:
        slugs = [r.SLUG for selector in _split(bench_rules) for r in expand(selector)]
    except SelectionError as error:
        raise UsageProblem(str(error)) from None
    stdout = sys.stdout
    try:
        sys.exit(run_bench(slugs, trials, as_json, stdout, _use_color(stdout)))
    except BenchError as error:
        raise UsageProblem(str(error)) from None


@cli.command(name="run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--output-format", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("-o", "--output-file", type=click.Path(dir_okay=False), help="Write the report here, not to stderr.")
@click.option("--max-seconds", type=click.FloatRange(min=0, min_open=True), help="Stop the program after this long, and report.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run_command(output_format: str, output_file: str | None, max_seconds: float | None, command: tuple[str, ...]) -> None:
    """Run a program and report the compiles, host waits and overhead it measured.

    \b
    jaxlint run -- python train.py --epochs 1
    jaxlint run -o run.json --output-format json -- python -m mypkg.train
    """
    from ._run import RunError, parse_target, run_program, write_report

    try:
        target = parse_target(command)
        stream = open(output_file, "w", encoding="utf-8") if output_file else None  # noqa: SIM115
    except RunError as error:
        raise UsageProblem(str(error)) from None
    except OSError as error:
        raise UsageProblem(f"{output_file}: cannot write: {error.strerror or error}") from None
    try:
        try:
            outcome, report = run_program(target, max_seconds)
        except RunError as error:
            raise UsageProblem(str(error)) from None
        sys.stdout.flush()
        out = stream if stream is not None else sys.stderr
        write_report(report, outcome, target, output_format, out, color=stream is None and _use_color(out))
    finally:
        if stream is not None:
            stream.close()
    sys.exit(outcome.exit_code)


@cli.command(name="server")
def server_command() -> None:
    """Run the language server (LSP over standard input and output) for editors."""
    try:
        from ._lsp import serve
    except ImportError as error:
        raise UsageProblem(f"jaxlint server needs pygls (the lsp extra: pip install pygls): {error}") from None
    serve()


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command stopped by Ctrl-C


def _quiet(unraisable: object) -> None:
    """An unraisable-exception hook that reports nothing."""


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the `jaxlint` console script."""
    try:
        # Not click's standalone mode: it turns Ctrl-C into "Aborted!" and exit 1, the code
        # that means "findings remain".
        code = cli.main(args=list(argv) if argv is not None else None, prog_name="jaxlint", standalone_mode=False)
    except SystemExit:
        raise
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("jaxlint: interrupted", err=True)
        # A process pool stopped mid-run can have its threads write to a pipe already closed
        # while the interpreter shuts down ("Exception ignored in: <module 'threading'>",
        # a race in Python 3.11's concurrent.futures): noise after the one line a Ctrl-C gets.
        sys.unraisablehook = _quiet
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except BrokenPipeError:
        # The reader went away (`jaxlint check | head`): stop quietly, as click does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except Exception as error:  # noqa: BLE001 - never show a traceback to a user
        click.echo(f"jaxlint: internal error: {type(error).__name__}: {error}", err=True)
        sys.exit(EXIT_ERROR)
    sys.exit(code if isinstance(code, int) else EXIT_CLEAN)
