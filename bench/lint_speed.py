"""How fast jaxlint lints, against the floor: a bare `libcst.parse_module` of the same files.

    python bench/lint_speed.py [DIR_OR_FILE ...] [--repeat N] [--jobs J] [--worst K] [--profile K]

With no paths it lints the project's own `fixtures/` and `examples/`. It prints the number of
files, kLOC, the CPU time (`time.process_time`, one process) of parsing every file with
`libcst.parse_module` (decoded the way jaxlint decodes it), the CPU time of jaxlint linting the
same files with every rule on (`lint_files(..., jobs=1, cache=None)`), and the ratio. The
target is lint <= 2x parse, all rules and the project analysis on (issues 15 and 16; the
research note shared/research/linter-engine.md set 3x before them).

The two measurements are interleaved (parse, lint, parse, lint, ...) after one untimed warm-up
of each, so drift on a shared machine hits both alike; the report gives each run's paired ratio
and the medians. `--jobs J` adds the wall time of a `J`-process pool (what `jaxlint check` does
by default) next to the single-process wall time. `--worst K` times every file on its own and
lists the K files with the highest lint/parse ratio; `--profile K` prints the top K functions
(cumulative time) of one single-process lint under cProfile. `--no-gates` turns off the engine's
token gates (files without `jax`/`flax`/... are not parsed; a rule whose tokens are absent does
not walk), so every file is parsed and walked: the engine's worst case.

`--warm` measures the cache instead (the project target: a warm run after editing one file
costs <= 0.05x the cold run). It copies the files of one directory to a private temporary
folder, lints them cold with a fresh cache (`lint_files(..., jobs=1, cache=...)`, facts and
findings stored as `jaxlint check` stores them), edits one file (`--edit PATH`, relative to the
directory; default: the module that the most other files import) and lints again with the
cache read back from disk, in a new Python process with its own string-hash seed as every
`jaxlint check` is (timed inside it: start-up and imports are not counted; it imports the
jaxlint this process runs, whatever the working directory holds; do not edit jaxlint's own
files during a run: the cache is keyed on their sizes and mtimes), reporting CPU and
wall seconds, the ratio and how many files were linted again. It does so twice: once with a comment appended, once with a new jitted
top-level name appended (the edit changes what the module exports, so the files importing it,
directly or through re-exports, are linted again).

The corpora of the README's figures are the ecosystem check's exports of jax and flax
(`~/.cache/jaxlint-ecosystem/jax-ml+jax`, `.../google+flax`, made by `ecosystem/fetch.py`; a
`git clone --depth 1` of github.com/jax-ml/jax or google/flax gives the same kind of files).

This is a measuring script, not a test: absolute seconds depend on the machine; compare ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import importlib.metadata
import io
import json
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import libcst as cst

from jaxlint._config import load_settings
from jaxlint._discovery import SourceFile, discover
import jaxlint._engine as engine
from jaxlint._engine import FAMILY_TOKENS, SourceError, analyze, decode_source
from jaxlint._registry import all_rules
from jaxlint import _runner
from jaxlint._project import module_name, summarize
from jaxlint._runner import LintCache, lint_files


try:  # notebooks are linted as their concatenated code cells (newer jaxlint)
    from jaxlint._notebook import NotebookError, read_notebook
except ImportError:  # pragma: no cover
    read_notebook = None  # type: ignore[assignment]

    class NotebookError(ValueError):  # type: ignore[no-redef]
        pass


_UNREADABLE = (SourceError, NotebookError)


TARGET_RATIO = 2.0
PROJECT = Path(__file__).resolve().parent.parent


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def source_text(file: SourceFile, data: bytes) -> tuple[str, str]:
    """(text, encoding) as jaxlint's engine reads the file: a notebook's code cells, or the
    decoded source. Raises `SourceError` (or `NotebookError`) on what the engine rejects."""
    if file.display.endswith(".ipynb") and read_notebook is not None:
        return read_notebook(data).text, "utf-8"
    return decode_source(data)


def _default_paths() -> list[str]:
    return [str(PROJECT / name) for name in ("fixtures", "examples") if (PROJECT / name).is_dir()]


class Corpus:
    """The files of a run, with what both measurements need to know about them."""

    def __init__(self, files: Sequence[SourceFile]) -> None:
        self.files = list(files)
        self.bytes = 0
        self.lines = 0
        self.undecodable = 0
        self.gated_in = 0  # files that mention a JAX-family token, so jaxlint parses them
        self.walked = 0  # ... and a token some rule needs, so jaxlint also walks them
        rules = all_rules()
        for file in self.files:
            data = file.path.read_bytes()
            self.bytes += len(data)
            try:
                text, _ = source_text(file, data)
            except _UNREADABLE:
                self.undecodable += 1
                continue
            self.lines += len(text.splitlines())
            if any(token in text for token in FAMILY_TOKENS):
                self.gated_in += 1
                if any(not r.TOKENS or any(t in text for t in r.TOKENS) for r in rules):
                    self.walked += 1


def parse_all(files: Sequence[SourceFile]) -> tuple[int, int]:
    """Read, decode and parse every file, as jaxlint would; (parsed, syntax errors)."""
    parsed = errors = 0
    for file in files:
        data = file.path.read_bytes()
        try:
            text, encoding = source_text(file, data)
        except _UNREADABLE:
            continue
        try:
            cst.parse_module(text, config=cst.PartialParserConfig(encoding=encoding))
            parsed += 1
        except (cst.ParserSyntaxError, RecursionError):
            errors += 1
    return parsed, errors


def lint_all(files: Sequence[SourceFile], jobs: int = 1) -> tuple[int, int]:
    """jaxlint over every file with every rule on; (findings, file errors)."""
    settings = load_settings(None)
    results = lint_files(files, settings, all_rules(), jobs=jobs, cache=None)
    return sum(len(r.findings) for r in results), sum(1 for r in results if r.error)


@contextlib.contextmanager
def no_gates(enabled: bool = True):  # type: ignore[no-untyped-def]
    """Turn off the engine's cheap gates: the JAX-token check before parsing and each rule's
    `TOKENS`, so every file is parsed and walked by every rule (the engine's worst case, and
    what rules without a token gate will cost). Process-local: a forked pool inherits it,
    a spawned one (jaxlint spawns when jax is already imported) does not."""
    if not enabled:
        yield
        return
    saved_family = engine.FAMILY_TOKENS
    saved_tokens = {rule: rule.__dict__.get("TOKENS") for rule in all_rules()}
    engine.FAMILY_TOKENS = ("",)  # "" is in every text
    for rule in saved_tokens:
        rule.TOKENS = ()
    try:
        yield
    finally:
        engine.FAMILY_TOKENS = saved_family
        for rule, tokens in saved_tokens.items():
            if tokens is None:
                del rule.TOKENS
            else:
                rule.TOKENS = tokens


def _cpu(function: Callable[[], object]) -> tuple[float, float, object]:
    """(CPU seconds, wall seconds, result) of one call, after a full collection."""
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    result = function()
    return time.process_time() - cpu, time.perf_counter() - wall, result


def _table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print(line)
    for row in rows:
        print("  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths))))


def _per_file(files: Sequence[SourceFile], worst: int) -> None:
    """Each file parsed and linted alone (best of 3): the files that cost most over the floor."""
    rules = all_rules()
    rows = []
    for file in files:
        data = file.path.read_bytes()
        try:
            text, encoding = source_text(file, data)
        except _UNREADABLE:
            continue
        parse_times, lint_times = [], []
        for _ in range(3):
            start = time.process_time()
            try:
                cst.parse_module(text, config=cst.PartialParserConfig(encoding=encoding))
            except (cst.ParserSyntaxError, RecursionError):
                pass
            parse_times.append(time.process_time() - start)
            start = time.process_time()
            analyze(file.display, data, rules)
            lint_times.append(time.process_time() - start)
        parse, lint = min(parse_times), min(lint_times)
        rows.append((file.display, len(text.splitlines()), parse, lint))
    rows.sort(key=lambda r: -(r[3] / r[2] if r[2] > 0 else 0.0))
    print(f"\nworst {worst} files by lint/parse (each alone, best of 3):")
    _table(
        [(p, str(n), f"{a * 1000:.1f}", f"{b * 1000:.1f}", f"{b / a:.2f}x" if a else "-") for p, n, a, b in rows[:worst]],
        ("file", "lines", "parse ms", "lint ms", "ratio"),
    )


def _profile(files: Sequence[SourceFile], top: int) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    lint_all(files)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    print(f"\ncProfile of one single-process lint, top {top} by cumulative time:")
    print(out.getvalue())


def _most_imported(files: Sequence[SourceFile], root: Path) -> Path:
    """The module of `files` that the most others import (by their facts' import names)."""
    names = {}
    for file in files:
        if file.path.suffix == ".py":
            names[module_name(file.path)] = file.path
    counts = dict.fromkeys(names, 0)
    for file in files:
        try:
            text = file.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        this = module_name(file.path)
        facts = summarize(this, text, package=file.path.stem == "__init__")
        for imported in facts.imports:
            parts = imported.split(".")
            for end in range(len(parts), 0, -1):
                name = ".".join(parts[:end])
                if name in counts and name != this:
                    counts[name] += 1
                    break
    best = max(sorted(counts), key=lambda name: (counts[name], not names[name].name == "__init__.py"))
    return names[best].relative_to(root)


class _Counting:
    """Counts the files `lint_files` lints (not served from the cache)."""

    def __init__(self) -> None:
        self.linted = 0
        self.original = _runner._lint_one

    def __enter__(self) -> _Counting:
        def counting(*args: object) -> object:
            self.linted += 1
            return self.original(*args)  # type: ignore[arg-type]

        _runner._lint_one = counting  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        _runner._lint_one = self.original


def _cached_run(files: Sequence[SourceFile], root: Path, preview: bool) -> tuple[float, float, int]:
    """(CPU s, wall s, files linted) of one `jaxlint check`-like run with the cache in
    `root`: the cache is read from disk, used, and written back."""
    settings = load_settings(None, root)
    settings.preview = preview

    def run() -> int:
        cache = LintCache(root, f"lint_speed preview={preview}")
        with _Counting() as counting:
            lint_files(files, settings, all_rules(), jobs=1, cache=cache)
        cache.save()
        return counting.linted

    cpu, wall, linted = _cpu(run)
    return cpu, wall, linted  # type: ignore[return-value]


def _cached_run_elsewhere(root: Path, preview: bool) -> tuple[float, float, int]:
    """`_cached_run` in a new Python process, as each `jaxlint check` is: its string hash is
    seeded anew, so a cache key that depended on a set's order would miss here."""
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import lint_speed; from pathlib import Path; "
        "from jaxlint._config import load_settings; from jaxlint._discovery import discover; "
        "root = Path(sys.argv[2]); files, _ = discover([str(root)], load_settings(None)); "
        "print(json.dumps(lint_speed._cached_run(files, root, sys.argv[3] == '1')))"
    )
    # The same jaxlint as this process, whatever the working directory holds: `-c` puts the
    # current directory first on the path, and a checkout there (its own `jaxlint/`, other
    # files and mtimes, so another `_code_stamp`) would miss the whole cache.
    path = os.pathsep.join(entry for entry in sys.path if entry)
    env = {**os.environ, "PYTHONHASHSEED": str(random.randrange(1, 2**32)), "PYTHONPATH": path}
    completed = subprocess.run(
        [sys.executable, "-c", script, str(Path(__file__).resolve().parent), str(root), "1" if preview else "0"],
        capture_output=True, text=True, env=env, check=True, cwd=root.parent,
    )  # fmt: skip
    cpu, wall, linted = json.loads(completed.stdout.splitlines()[-1])
    return cpu, wall, linted


def _warm(paths: Sequence[str], edit: str | None) -> int:
    if len(paths) != 1 or not Path(paths[0]).is_dir():
        print("lint_speed: --warm takes one directory", file=sys.stderr)
        return 2
    source = Path(os.path.realpath(paths[0]))
    originals, _errors = discover([str(source)], load_settings(None))
    with tempfile.TemporaryDirectory(prefix="lint_speed_warm_") as scratch:
        root = Path(scratch) / source.name
        for file in originals:
            target = root / file.path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file.path, target)
        files, _errors = discover([str(root)], load_settings(None))
        edited = root / edit if edit else root / _most_imported(files, root)
        print(f"paths:         {source} ({len(files)} files, copied to a temporary folder)")
        print(f"edited file:   {edited.relative_to(root)}")
        print(f"python:        {sys.version.split()[0]}, libcst {_version('libcst')}")
        print()
        rows = []
        for preview, what, line in (
            (False, "comment appended", "\n# edited by lint_speed --warm\n"),
            (True, "jitted name appended", "\n\nimport jax as _lint_speed_jax\n_lint_speed_step = _lint_speed_jax.jit(abs)\n"),
        ):
            shutil.rmtree(root / ".jaxlint_cache", ignore_errors=True)
            original = edited.read_bytes()
            cold = _cached_run(files, root, preview)
            edited.write_bytes(original + line.encode())
            warm = _cached_run_elsewhere(root, preview)
            edited.write_bytes(original)
            rows.append((what, cold, warm))
        _table(
            [
                (what, f"{c[0]:.2f}", str(c[2]), f"{w[0]:.3f}", f"{w[1]:.3f}", str(w[2]), f"{w[0] / c[0]:.3f}x")
                for what, c, w in rows
            ],
            ("edit", "cold CPU s", "cold linted", "warm CPU s", "warm wall s", "warm linted", "warm/cold CPU"),
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="directories or files (default: fixtures/, examples/)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each (default 5)")
    parser.add_argument("--jobs", type=int, default=None, help="also time a pool of this many processes")
    parser.add_argument(
        "--no-gates", action="store_true", help="parse and walk every file (no token gates)"
    )
    parser.add_argument("--worst", type=int, default=0, metavar="K", help="list the K costliest files")
    parser.add_argument("--profile", type=int, default=0, metavar="K", help="cProfile one lint, top K")
    parser.add_argument("--warm", action="store_true", help="cold run, edit one file, warm run (with the cache)")
    parser.add_argument("--edit", metavar="PATH", help="with --warm: the file to edit, relative to the directory")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    paths = args.paths or _default_paths()
    if args.warm:
        return _warm(paths, args.edit)
    files, errors = discover(paths, load_settings(None))
    for error in errors:
        print(f"lint_speed: {error}", file=sys.stderr)
    if not files:
        print("lint_speed: no Python files found", file=sys.stderr)
        return 2
    corpus = Corpus(files)
    rules = all_rules()
    with no_gates(args.no_gates):
        return _run(args, paths, files, corpus, rules)


def _run(args: argparse.Namespace, paths: Sequence[str], files: Sequence[SourceFile], corpus: Corpus, rules: Sequence[type]) -> int:

    # Untimed warm-up: imports, lru caches, the OS file cache.
    parsed, syntax_errors = parse_all(files)
    findings, file_errors = lint_all(files)

    runs: list[tuple[float, float, float, float]] = []  # parse cpu, lint cpu, parse wall, lint wall
    for _ in range(args.repeat):
        parse_cpu, parse_wall, _unused = _cpu(lambda: parse_all(files))
        lint_cpu, lint_wall, _unused = _cpu(lambda: lint_all(files))
        runs.append((parse_cpu, lint_cpu, parse_wall, lint_wall))

    print(f"paths:         {' '.join(paths)}")
    print(f"rules:         {', '.join(f'{r.CODE} {r.SLUG}' for r in rules)}")
    if args.no_gates:
        print("gates:         OFF (--no-gates): every file parsed and walked by every rule")
    gated = (
        f"gates off: all {len(files)} parsed and walked"
        if args.no_gates
        else f"{corpus.gated_in} pass jaxlint's JAX-token gate and are parsed, "
        f"{corpus.walked} also walked by a rule"
    )
    print(
        f"files:         {len(files)} ({gated}; {syntax_errors} do not parse; "
        f"{corpus.undecodable} undecodable)"
    )
    print(f"size:          {corpus.lines / 1000:.1f} kLOC, {corpus.bytes / 1e6:.2f} MB")
    print(f"lint result:   {findings} findings, {file_errors} file errors")
    print(f"python:        {sys.version.split()[0]}, libcst {_version('libcst')}")
    print()
    _table(
        [
            (str(i + 1), f"{p:.3f}", f"{l:.3f}", f"{l / p:.2f}x", f"{pw:.3f}", f"{lw:.3f}")
            for i, (p, l, pw, lw) in enumerate(runs)
        ],
        ("run", "parse CPU s", "lint CPU s", "lint/parse", "parse wall s", "lint wall s"),
    )
    parse_median = statistics.median(r[0] for r in runs)
    lint_median = statistics.median(r[1] for r in runs)
    ratio_median = statistics.median(r[1] / r[0] for r in runs)
    print()
    print(f"median parse CPU:   {parse_median:.3f} s  ({corpus.lines / 1000 / parse_median:.1f} kLOC/s)")
    print(f"median lint CPU:    {lint_median:.3f} s  ({corpus.lines / 1000 / lint_median:.1f} kLOC/s)")
    verdict = "within" if ratio_median <= TARGET_RATIO else "OVER"
    print(f"lint/parse:         {ratio_median:.2f}x (median of paired runs; {verdict} the {TARGET_RATIO:g}x target)")

    if args.jobs:
        walls = []
        for _ in range(args.repeat):
            gc.collect()
            start = time.perf_counter()
            lint_all(files, jobs=args.jobs)
            walls.append(time.perf_counter() - start)
        single = statistics.median(r[3] for r in runs)
        pooled = statistics.median(walls)
        print(
            f"wall, --jobs {args.jobs}:     {pooled:.3f} s median (1 process: {single:.3f} s; "
            f"speed-up {single / pooled:.2f}x)"
        )
    if args.worst:
        _per_file(files, args.worst)
    if args.profile:
        _profile(files, args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
