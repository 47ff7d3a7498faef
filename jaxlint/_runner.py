"""Lint many files: per-file rule selection, a content-hash cache, and a process pool."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, fields
from pathlib import Path

from ._config import Settings, format_size
from ._discovery import SourceFile, real_path
from ._engine import FileResult, Finding, analyze
from ._project import Project, project_for
from ._registry import all_rules
from ._rule import Rule
from ._version import __version__


__all__ = [
    "CACHE_DIRECTORY", "CACHE_TAG", "LintCache", "Skipped", "cache_directory", "cache_for", "lint_files", "project_of",
    "read_source", "settings_key",
]  # fmt: skip

CACHE_DIRECTORY = ".jaxlint_cache"
# https://bford.info/cachedir/: backup tools skip the folder, and `jaxlint clean` only
# removes a folder that has it.
CACHE_TAG = "CACHEDIR.TAG"
CACHE_TAG_TEXT = "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by jaxlint.\n"

# Below this many files a pool costs more to start than it saves.
_POOL_THRESHOLD = 16


class Skipped(str):
    """The line saying why a file is not read on purpose (larger than `max-file-size`)."""


def read_source(file: SourceFile, max_size: int = 0) -> bytes | str:
    """The file's bytes, or an error line (a `Skipped` one when it is over `max_size`
    bytes, unless that is 0). `file.content`, when set, is the file's text (standard input)."""
    if file.content is not None:
        return file.content
    try:
        size = file.path.stat().st_size
        if max_size and size > max_size:
            return Skipped(
                f"{file.display}: {format_size(size)}, over max-file-size ({format_size(max_size)}); skipped"
            )
        return file.path.read_bytes()
    except IsADirectoryError:
        return f"{file.display}: is a directory"
    except PermissionError:
        return f"{file.display}: permission denied"
    except OSError as error:
        return f"{file.display}: cannot read: {error.strerror or error}"


def _rules_for(file: SourceFile, settings: Settings, rules: Sequence[type[Rule]]) -> list[type[Rule]]:
    ignored = settings.ignored_for(file.path)
    return [r for r in rules if r not in ignored]


# What the other files of the run define (`_project`); set before linting, inherited by
# forked workers and handed to spawned ones by `_worker_start`.
_PROJECT: Project | None = None


def _lint_one(
    display: str, data: bytes, slugs: tuple[str, ...], options: dict[str, dict[str, object]]
) -> FileResult:
    by_slug = {rule.SLUG: rule for rule in all_rules()}
    return analyze(display, data, [by_slug[s] for s in slugs], options, _PROJECT).result


def _code_stamp() -> str:
    """Sizes and mtimes of jaxlint's own modules (and its library table), so an edited install never serves stale
    findings (a release bumps the version; a development checkout changes files)."""
    import jaxlint
    import jaxlint.rules

    parts = []
    for package in (jaxlint, jaxlint.rules):
        for directory in package.__path__:
            for entry in sorted([*Path(directory).rglob("*.py"), *Path(directory).glob("library.toml")]):
                stat = entry.stat()
                parts.append(f"{entry.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return ",".join(parts)


class LintCache:
    """Findings of unchanged files, keyed by content hash, jaxlint version and settings.

    Stored as one JSON file per settings under `.jaxlint_cache/` in the project root.
    """

    def __init__(self, root: Path, settings_key: str, directory: Path | None = None) -> None:
        stamp = f"{__version__}\0{_code_stamp()}\0{settings_key}"
        digest = hashlib.sha256(stamp.encode()).hexdigest()[:16]
        self.directory = directory if directory is not None else root / CACHE_DIRECTORY
        self.file = self.directory / __version__ / f"{digest}.json"
        self.entries: dict[str, dict[str, object]] = {}
        self.dirty = False
        try:
            entries = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            entries = {}
        # A cache is only ever a shortcut: one that is not what `save` writes is ignored.
        self.entries = entries if isinstance(entries, dict) else {}

    @staticmethod
    def key(display: str, data: bytes) -> str:
        return hashlib.sha256(display.encode() + b"\0" + data).hexdigest()

    def get(self, key: str) -> FileResult | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        result = _cached_result(entry)
        if result is None:
            del self.entries[key]  # corrupt: lint the file again and rewrite the entry
        return result

    def put(self, key: str, result: FileResult) -> None:
        if result.error is not None:
            return
        self.entries[key] = {"path": result.path, "findings": [asdict(f) for f in result.findings]}
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            for name, text in ((".gitignore", "*\n"), (CACHE_TAG, CACHE_TAG_TEXT)):
                if not (self.directory / name).exists():
                    (self.directory / name).write_text(text, encoding="utf-8")
            temporary = self.file.with_suffix(f".{os.getpid()}.tmp")
            try:
                temporary.write_text(json.dumps(self.entries), encoding="utf-8")
                os.replace(temporary, self.file)
            finally:
                if temporary.exists():
                    temporary.unlink()
        except OSError:
            pass  # a cache that cannot be written is only slower, never wrong


def cache_directory(settings: Settings, option: str | None = None) -> Path:
    """`--cache-dir`, then `JAXLINT_CACHE_DIR`, then `cache-dir`, then `.jaxlint_cache` in
    the project root."""
    if option:
        return Path(option)
    if os.environ.get("JAXLINT_CACHE_DIR"):
        return Path(os.environ["JAXLINT_CACHE_DIR"])
    return settings.cache_dir or settings.root / CACHE_DIRECTORY


def settings_key(settings: Settings, rules: Sequence[type[Rule]]) -> str:
    """What findings depend on besides the source: one cache file per key."""
    return json.dumps(
        {
            "rules": [r.SLUG for r in rules],
            "options": settings.lint_options(),
            "per_file_ignores": settings.per_file_ignores,
        },
        sort_keys=True,
    )


def cache_for(settings: Settings, rules: Sequence[type[Rule]], directory: str | None = None) -> LintCache:
    """The cache `jaxlint check` keeps for files of these settings linted with `rules`
    (`directory`: `--cache-dir`)."""
    return LintCache(settings.root, settings_key(settings, rules), cache_directory(settings, directory))


# A notebook finding's cell, and the lines of the `.ipynb` text it is on: None or >= 1.
_OPTIONAL_LINES = ("cell", "ipynb_line", "ipynb_end_line")
_FINDING_TYPES = {
    field.name: (int,) if field.type == "int" else (str,) if field.type == "str" else (str, type(None))
    for field in fields(Finding)
    if field.name not in (*_OPTIONAL_LINES, "evidence")
}


def _cached_result(entry: object) -> FileResult | None:
    """The result a cache entry holds, or None unless every value has the type `put`
    writes (a cache file is data that anything may have changed)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
        return None
    raw = entry.get("findings")
    if not isinstance(raw, list):
        return None
    findings = []
    for item in raw:
        if not isinstance(item, dict) or set(item) != {*_FINDING_TYPES, *_OPTIONAL_LINES, "evidence"}:
            return None
        evidence = item["evidence"]
        if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
            return None
        for name, types in _FINDING_TYPES.items():
            value = item[name]
            if not isinstance(value, types) or isinstance(value, bool):
                return None
        for name in _OPTIONAL_LINES:
            value = item[name]
            if not (value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)):
                return None
        if min(item["line"], item["column"], item["end_line"], item["end_column"]) < 1:
            return None
        findings.append(Finding(**{**item, "evidence": tuple(evidence)}))
    return FileResult(entry["path"], findings)


def _pool_context() -> multiprocessing.context.BaseContext:
    """Fork is the cheapest start, but forking a process in which jax has started its
    runtime is unsafe (jax warns); the CLI never imports jax, an embedding program may."""
    if "jax" in sys.modules or sys.platform != "linux":
        return multiprocessing.get_context("spawn")
    return multiprocessing.get_context("fork")


def _worker_start(parent: int, project: Project | None = None) -> None:
    """Set up a pool worker: Ctrl-C is the parent's to handle (it stops the pool), and the
    worker exits when its parent dies, however it died, without holding the parent's
    stdout and stderr open meanwhile (a reader of them would never see their end)."""
    global _PROJECT
    _PROJECT = project
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.25)
        os._exit(1)

    threading.Thread(target=watch, name="jaxlint-parent-watch", daemon=True).start()


def new_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool whose workers die with this process and leave Ctrl-C to it."""
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=_pool_context(), initializer=_worker_start, initargs=(os.getpid(), _PROJECT)
    )


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop `pool` now: end the workers and cancel what has not started (on Ctrl-C, the
    file a worker is in the middle of is not worth waiting for, and Python would wait for
    it on exit)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # private, hence the care
    for process in processes:
        if isinstance(process, multiprocessing.process.BaseProcess) and process.is_alive():
            process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def _crashed(display: str) -> FileResult:
    return FileResult(display, error=f"{display}: the linter crashed on this file (nested too deeply?); not linted")


_Item = tuple[int, str, bytes, tuple[str, ...], "str | None"]


def _lint_in_pool(
    order: Sequence[_Item],
    workers: int,
    options: dict[str, dict[str, object]],
    progress: Callable[[], None] | None = None,
) -> list[tuple[_Item, FileResult]]:
    """Lint `order` in a pool of `workers`. A worker that dies (a crash in native code)
    breaks the pool; every file it left unlinted is then linted again in a process of its
    own, so the crash is reported against its file and the other files are still linted."""
    computed: list[tuple[_Item, FileResult]] = []
    unfinished: list[_Item] = []
    pool = new_pool(workers)
    try:
        futures = []
        for position, item in enumerate(order):
            try:
                futures.append((item, pool.submit(_lint_one, item[1], item[2], item[3], options)))
            except BrokenProcessPool:
                # A worker died while files were still being handed out: the rest are linted
                # one by one below, as are those the dead pool did not finish.
                unfinished.extend(order[position:])
                break
        for item, future in futures:
            try:
                computed.append((item, future.result()))
            except BrokenProcessPool:
                unfinished.append(item)
            if progress is not None:
                progress()
    except BaseException:
        stop_pool(pool)
        raise
    pool.shutdown()
    for item in unfinished:
        alone = new_pool(1)
        try:
            computed.append((item, alone.submit(_lint_one, item[1], item[2], item[3], options).result()))
        except BrokenProcessPool:
            computed.append((item, _crashed(item[1])))
        except BaseException:
            stop_pool(alone)
            raise
        alone.shutdown()
    return computed


def project_of(
    files: Sequence[SourceFile],
    sources: Sequence[bytes | str],
    settings: Settings,
    cache: LintCache | None = None,
    context: Sequence[SourceFile] = (),
) -> Project:
    """What the `files` of a run define (`sources`: what `read_source` gave for each), and the
    files of `context`: the rest of their project, summarized but not linted (standard input's
    file is linted knowing what its project defines). Module facts live in `cache` beside the
    findings ("facts:" keys), so a warm run summarizes only what changed; a file whose text
    is not on disk (`content`) is summarized from that text and never stored, and it stands
    for the file of `context` at its path."""
    on_disk: list[tuple[str, Path, bytes]] = []
    unsaved: list[tuple[str, Path, bytes]] = []
    for file, data in zip(files, sources):
        if not isinstance(data, str):
            (unsaved if file.content is not None else on_disk).append((file.display, file.path, data))
    taken = {real_path(f.path) for f in files}
    for file in context:
        if real_path(file.path) not in taken:
            data = read_source(file, settings.max_file_size)
            if not isinstance(data, str):
                on_disk.append((file.display, file.path, data))
    known = len(cache.entries) if cache is not None else 0
    project = project_for(
        on_disk, cache.entries if cache is not None else None, library=settings.library, unsaved=unsaved
    )
    if cache is not None and len(cache.entries) != known:
        cache.dirty = True
    return project


def lint_files(
    files: Sequence[SourceFile],
    settings: Settings,
    rules: Sequence[type[Rule]],
    *,
    jobs: int | None = None,
    cache: LintCache | None = None,
    progress: Callable[[], None] | None = None,
    context: Sequence[SourceFile] = (),
) -> list[FileResult]:
    """Lint `files`; results come back in the order of `files`. Every file is linted knowing
    what the others define (`_project`): the files of one run are one project, with
    `context`, the rest of their project when they are not all of it (`project_of`)."""
    global _PROJECT
    results: list[FileResult | None] = [None] * len(files)
    pending: list[tuple[int, str, bytes, tuple[str, ...], str | None]] = []
    sources = [read_source(file, settings.max_file_size) for file in files]
    _PROJECT = project_of(files, sources, settings, cache, context)
    for index, (file, data) in enumerate(zip(files, sources)):
        if isinstance(data, Skipped):
            results[index] = FileResult(file.display, skipped=data)
            continue
        if isinstance(data, str):
            results[index] = FileResult(file.display, error=data)
            continue
        slugs = tuple(r.SLUG for r in _rules_for(file, settings, rules))
        # A file's findings depend on its bytes and on the facts of the other modules. Text
        # from standard input is not kept: an editor pipes a new one at every pause.
        key = None
        if cache is not None and file.content is None:
            key = LintCache.key(f"{file.display}\0{','.join(slugs)}\0{_PROJECT.digest_for(file.display)}", data)
        cached = cache.get(key) if cache and key else None
        if cached is not None:
            results[index] = cached
            continue
        pending.append((index, file.display, data, slugs, key))

    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    if workers > 1 and len(pending) >= _POOL_THRESHOLD:
        # Largest files first, so the pool does not end waiting on one big file.
        order = sorted(pending, key=lambda item: -len(item[2]))
        computed = _lint_in_pool(order, workers, settings.lint_options(), progress)
    else:
        computed = []
        for item in pending:
            computed.append((item, _lint_one(item[1], item[2], item[3], settings.lint_options())))
            if progress is not None:
                progress()
    for (index, _display, _data, _slugs, key), result in computed:
        results[index] = result
        if cache is not None and key is not None:
            cache.put(key, result)
    return [r for r in results if r is not None]
