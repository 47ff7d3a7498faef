"""The `jaxlint` command: check, fix, rule, rules, bench, run.

Exit codes (ruff's): 0 nothing found (or everything fixed), 1 findings remain, 2 a usage,
configuration, input or internal error.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import click
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

from ._config import ConfigError, Settings, find_config, load_settings
from ._discovery import SourceFile, discover, stdin_source
from ._engine import Finding
from ._registry import SelectionError, all_rules, expand, get_rule
from ._report import FORMATS, render, render_statistics
from ._rule import Rule
from ._project import project_for
from ._runner import LintCache, Skipped, lint_files, read_source
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
    try:
        if config is not None:
            config_path = Path(config)
            if not config_path.is_file():
                raise UsageProblem(f"{config}: no such configuration file")
        else:
            start = Path(paths[0]) if paths else Path.cwd()
            config_path = find_config(start)
        return load_settings(config_path)
    except ConfigError as error:
        raise UsageProblem(str(error)) from None


def _rules(
    settings: Settings, select: Sequence[str], ignore: Sequence[str], extend_select: Sequence[str]
) -> tuple[type[Rule], ...]:
    if select:
        # As in ruff, a selection on the command line starts afresh: the configuration's
        # `ignore` and `extend-select` refine the configuration's `select`, not this one.
        settings.select = _split(select)
        settings.ignore = []
        settings.extend_select = []
    if extend_select:
        settings.extend_select = [*settings.extend_select, *_split(extend_select)]
    if ignore:
        settings.ignore = [*settings.ignore, *_split(ignore)]
    try:
        return settings.rules()
    except SelectionError as error:
        raise UsageProblem(str(error)) from None


def _use_color(stream: object) -> bool:
    """Colour only on a terminal, and never when `NO_COLOR` is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


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
    click.option("--config", type=click.Path(dir_okay=False), help="pyproject.toml to read instead of the nearest one."),
    click.option(
        "--force-exclude",
        is_flag=True,
        help="Apply exclude patterns to paths named on the command line too (for pre-commit).",
    ),
]


def _read_stdin(paths: Sequence[str], stdin_filename: str | None) -> tuple[str, bytes] | None:
    """(name, bytes) when the source comes from standard input: the path `-`, or
    `--stdin-filename` with no path (as in ruff)."""
    if "-" not in paths and not (stdin_filename and not paths):
        return None
    if tuple(paths) not in ((), ("-",)):
        raise UsageProblem("`-` (standard input) cannot be combined with other paths")
    return stdin_filename or "-", sys.stdin.buffer.read()


def _inputs(
    paths: Sequence[str], stdin: tuple[str, bytes] | None, settings: Settings, force_exclude: bool
) -> tuple[list[SourceFile], list[str]]:
    if stdin is not None:
        return stdin_source(*stdin, settings, force_exclude=force_exclude), []
    return discover(paths, settings, force_exclude=force_exclude)


def _with_options(options):  # type: ignore[no-untyped-def]
    def decorate(function):  # type: ignore[no-untyped-def]
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="jaxlint")
def cli() -> None:
    """jaxlint: find and fix JAX performance mistakes."""


@cli.command()
@_path_argument
@_with_options(_select_options)
@click.option("--output-format", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings are reported.")
@click.option("--statistics", is_flag=True, help="Print a count per rule instead of each finding.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Processes (default: every core).")
@click.option("--no-cache", is_flag=True, help="Lint every file, ignoring and not writing the cache.")
@click.option(
    "--evidence",
    type=click.Path(dir_okay=False),
    help="A `jaxlint run --output-format json` report: mark findings with what the run measured.",
)
def check(
    paths: tuple[str, ...],
    stdin_filename: str | None,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    config: str | None,
    force_exclude: bool,
    output_format: str,
    exit_zero: bool,
    statistics: bool,
    quiet: bool,
    jobs: int | None,
    no_cache: bool,
    evidence: str | None,
) -> None:
    """Report findings in PATHS (default: the current directory; `-`: standard input)."""
    stdin = _read_stdin(paths, stdin_filename)
    paths = paths or (".",)
    settings = _settings([stdin[0]] if stdin else paths, config)
    rules = _rules(settings, select, ignore, extend_select)
    run = _load_evidence(evidence) if evidence is not None else None
    files, errors = _inputs(paths, stdin, settings, force_exclude)
    cache = None if no_cache or stdin else LintCache(settings.root, _settings_key(settings, rules))
    results = lint_files(files, settings, rules, jobs=jobs, cache=cache)
    if cache is not None:
        cache.save()
    skipped = [r.skipped for r in results if r.skipped]
    errors += [r.error for r in results if r.error]
    findings = sorted((f for r in results for f in r.findings), key=Finding.sort_key)
    if run is not None:
        from ._evidence import apply_evidence

        codes = {r.CODE for r in rules} | {"JL100"}
        findings = apply_evidence(findings, run, [str(f.path) for f in files], codes)
    stdout = sys.stdout
    color = _use_color(stdout)
    if statistics:
        render_statistics(findings, stdout, color=color)
    else:
        render(findings, output_format, stdout, color=color)
    if output_format in ("text", "concise") and not quiet and not statistics:
        if findings or not errors:  # never "All checks passed!" when a file could not be checked
            click.echo(_summary(findings))
    _print_errors([*skipped, *errors])
    if errors:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if findings and not exit_zero else EXIT_CLEAN)


def _load_evidence(path: str):  # type: ignore[no-untyped-def]
    from ._evidence import EvidenceError, load_evidence

    try:
        return load_evidence(path)
    except EvidenceError as error:
        raise UsageProblem(str(error)) from None


def _settings_key(settings: Settings, rules: Sequence[type[Rule]]) -> str:
    import json

    return json.dumps(
        {
            "rules": [r.SLUG for r in rules],
            "options": settings.rule_options,
            "per_file_ignores": settings.per_file_ignores,
        },
        sort_keys=True,
    )


@cli.command()
@_path_argument
@click.option("--rule", "fix_rules", multiple=True, help="Fix only this rule (repeatable; slug or code).")
@_with_options(_select_options)
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that can change behaviour in corner cases.")
@click.option("--diff", is_flag=True, help="Print a unified diff of the fixes; write nothing.")
@click.option("--output-format", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("-q", "--quiet", is_flag=True, help="Print remaining findings only, no summary.")
def fix(
    paths: tuple[str, ...],
    fix_rules: tuple[str, ...],
    stdin_filename: str | None,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    config: str | None,
    force_exclude: bool,
    unsafe_fixes: bool,
    diff: bool,
    output_format: str,
    exit_zero: bool,
    quiet: bool,
) -> None:
    """Apply fixes in PATHS, then report what remains.

    With `-` (standard input), the fixed source goes to standard output and the report to
    standard error."""
    from ._fixer import fix_source, write_fix

    stdin = _read_stdin(paths, stdin_filename)
    paths = paths or (".",)
    settings = _settings([stdin[0]] if stdin else paths, config)
    rules = _rules(settings, select, ignore, extend_select)
    try:
        only = {r for selector in _split(fix_rules) for r in expand(selector)} if fix_rules else None
    except SelectionError as error:
        raise UsageProblem(str(error)) from None
    files, errors = _inputs(paths, stdin, settings, force_exclude)
    remaining: list[Finding] = []
    skipped: list[str] = []
    fixed_files = applied = 0
    stdout = sys.stdout
    # Fixing standard input: the source is the output, everything else is a message.
    to_stdout = stdin is not None and not diff
    report = sys.stderr if to_stdout else stdout
    if to_stdout and not files:  # excluded (--force-exclude): pass it through unchanged
        sys.stdout.buffer.write(stdin[1])  # type: ignore[index]
    sources = [read_source(file, settings.max_file_size) for file in files]
    # What the other files define, as `check` sees it (read before any file is rewritten).
    project = project_for((f.display, f.path, d) for f, d in zip(files, sources) if not isinstance(d, str))
    for file, data in zip(files, sources):
        if isinstance(data, str):
            (skipped if isinstance(data, Skipped) else errors).append(data)
            continue
        file_rules = [r for r in rules if r not in settings.ignored_for(file.path)]
        fix_only = [r for r in file_rules if only is None or r in only]
        outcome = fix_source(
            file.display, data, file_rules, settings.rule_options, unsafe=unsafe_fixes, fix_rules=fix_only,
            project=project,
        )
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
            fixed_files += 1
            applied += outcome.applied
            if diff:
                _print_diff(file, outcome.original, outcome.fixed, stdout)
        remaining.extend(outcome.remaining)
    remaining.sort(key=Finding.sort_key)
    if not diff:
        render(remaining, output_format, report, color=_use_color(report))
    if output_format in ("text", "concise") and not quiet:
        verb = "Would fix" if diff else "Fixed"
        if applied:
            click.echo(f"{verb} {applied} finding{'s' if applied != 1 else ''} in {fixed_files} file{'s' if fixed_files != 1 else ''}.", err=diff or to_stdout)
        if not diff and (remaining or not errors):
            click.echo(_summary(remaining, unsafe_hint=not unsafe_fixes), err=to_stdout)
    _print_errors([*skipped, *errors])
    if errors:
        sys.exit(EXIT_ERROR)
    if diff:
        sys.exit(EXIT_FINDINGS if fixed_files and not exit_zero else EXIT_CLEAN)
    sys.exit(EXIT_FINDINGS if remaining and not exit_zero else EXIT_CLEAN)


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


@cli.command(name="rule")
@click.argument("name")
def rule_command(name: str) -> None:
    """Explain a rule: what it finds, why it is slow, the fix and its safety."""
    try:
        rule = get_rule(name)
    except SelectionError as error:
        raise UsageProblem(str(error)) from None
    stdout = sys.stdout
    console = Console(file=stdout, force_terminal=_use_color(stdout), no_color=not _use_color(stdout))
    fix = rule.FIX.value if rule.FIX else "none"
    text = f"# {rule.SLUG} ({rule.CODE})\n\nFix: {fix}\n\n{rule.docs()}\n"
    if _use_color(stdout):
        console.print(Markdown(text))
    else:
        stdout.write(text)


@cli.command(name="rules")
def rules_command() -> None:
    """List every rule."""
    stdout = sys.stdout
    console = Console(file=stdout, force_terminal=_use_color(stdout), no_color=not _use_color(stdout), width=120)
    table = Table("code", "slug", "fix", "default", "what it finds", box=None)
    for rule in all_rules():
        table.add_row(
            rule.CODE,
            rule.SLUG,
            rule.FIX.value if rule.FIX else "-",
            "on" if rule.DEFAULT_ON else "off",
            rule.MESSAGE,
        )
    console.print(table)


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
