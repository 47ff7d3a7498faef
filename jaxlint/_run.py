"""`jaxlint run`: run a Python program in this process under `jaxlint.runtime.profile()` and
report what it measured, with the codes and formats of `jaxlint check`.

The program runs as `python` would run it (`sys.argv`, `sys.path[0]`, `__main__`), after the
instrumentation is in place, so its own `from jax import jit` and `eqx.tree_at` go through it.
Its stdout is untouched; the report goes to stderr or a file. Its exit status and traceback
pass through. jax is imported only here, never by `import jaxlint`.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from ._engine import Finding
from ._report import render
from ._report._machine import finding_dict


__all__ = ["RunError", "Target", "parse_target", "run_program", "to_findings", "write_report"]

JAX_MISSING = 'jaxlint run needs jax: pip install "jaxlint[runtime]"'
RUN_FORMAT_VERSION = 1


class RunError(Exception):
    """A problem that stops `jaxlint run` before the program starts (one line, exit 2)."""


@dataclass(frozen=True)
class Target:
    """What to run: a script path or a module name, and the program's own arguments."""

    script: str | None
    module: str | None
    args: tuple[str, ...]

    @property
    def argv0(self) -> str:
        return self.script if self.script is not None else str(self.module)


def parse_target(command: Sequence[str]) -> Target:
    """`python script.py ARGS`, `python -m module ARGS`, or the same without `python`."""
    argv = list(command)
    if argv and os.path.basename(argv[0]).startswith("python") and not argv[0].endswith(".py"):
        argv = argv[1:]
    if not argv:
        raise RunError("nothing to run: give a program, as in `jaxlint run -- python train.py`")
    if argv[0] == "-m":
        if len(argv) < 2:
            raise RunError("-m needs a module name")
        return Target(None, argv[1], tuple(argv[2:]))
    if argv[0].startswith("-"):
        raise RunError(f"unsupported python option {argv[0]!r}: run a script or `-m module`")
    if not os.path.isfile(argv[0]):
        raise RunError(f"{argv[0]}: no such file")
    return Target(argv[0], None, tuple(argv[1:]))


@dataclass
class Outcome:
    """How the program ended."""

    exit_code: int
    stopped: bool = False  # --max-seconds ran out
    error: BaseException | None = None


def _execute(target: Target) -> None:
    if target.script is not None:
        sys.argv = [target.script, *target.args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(target.script)))
        runpy.run_path(target.script, run_name="__main__")
    else:
        sys.argv = [str(target.module), *target.args]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(str(target.module), run_name="__main__", alter_sys=True)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"), as Python prints it
    return 1


def run_program(target: Target, max_seconds: float | None) -> tuple[Outcome, Any]:
    """Run the program under `profile()`; return how it ended and the `RunReport`."""
    try:
        import jax  # noqa: F401
    except ImportError:
        raise RunError(JAX_MISSING) from None
    from jaxlint.runtime import profile

    saved_argv, saved_path = list(sys.argv), list(sys.path)
    stop = threading.Event()
    finished = threading.Event()
    timer = None
    if max_seconds is not None:
        import _thread

        def interrupt() -> None:
            stop.set()
            # Again each second until the program has ended: an interrupt that lands in code
            # which catches and drops KeyboardInterrupt would otherwise leave it running.
            while not finished.is_set():
                _thread.interrupt_main()
                finished.wait(1.0)

        timer = threading.Timer(max_seconds, interrupt)
        timer.daemon = True
    # `interrupt_main` does nothing while SIGINT is ignored or left to the system (a test
    # worker, a parent that ignores it): Python's own handler is put back for the run.
    saved_handler = None
    if timer is not None and threading.current_thread() is threading.main_thread():
        saved_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    outcome = Outcome(0)
    try:
        with profile() as report:
            if timer is not None:
                timer.start()
            try:
                _execute(target)
            except SystemExit as exit_:
                outcome.exit_code = _exit_code(exit_.code)
            except KeyboardInterrupt as error:
                finished.set()
                if stop.is_set():
                    outcome.stopped = True
                else:
                    outcome.exit_code, outcome.error = 130, error
            except BaseException as error:  # noqa: BLE001 - the program's own failure
                outcome.exit_code, outcome.error = 1, error
            finally:
                finished.set()
                if timer is not None:
                    timer.cancel()
    finally:
        sys.argv[:], sys.path[:] = saved_argv, saved_path
        if saved_handler is not None:
            signal.signal(signal.SIGINT, saved_handler)
    if outcome.error is not None:
        _print_traceback(outcome.error)
    return outcome, report


def _print_traceback(error: BaseException) -> None:
    """The program's traceback as Python prints it, without jaxlint's own frames on top."""
    tb = error.__traceback__
    while tb is not None and _is_ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    sys.stderr.flush()
    traceback.print_exception(type(error), error, tb, file=sys.stderr)


def _is_ours(filename: str) -> bool:
    return filename in (__file__, runpy.__file__, "<frozen runpy>")


def _display(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _source_line(path: str, line: int) -> str:
    import linecache

    # By its absolute name, checked against the file: a relative `prog.py` cached by an earlier
    # run in this process (the Python API, tests) may be another directory's file.
    path = os.path.abspath(path)
    linecache.checkcache(path)
    return linecache.getline(path, line).rstrip("\r\n")


def to_findings(report: Any) -> list[tuple[Finding, Any]]:
    """The run's findings as `jaxlint check` findings (for the same renderers), each with the
    `RunFinding` it came from; findings outside readable files are left out."""
    out = []
    for rf in report.findings:
        source = _source_line(rf.path, rf.line)
        if not source:
            continue
        column = len(source) - len(source.lstrip()) + 1
        finding = Finding(
            path=_display(rf.path), line=rf.line, column=column, end_line=rf.line,
            end_column=len(source) + 1, code=rf.code, rule=rf.rule, message=rf.message,
            source_line=source,
        )  # fmt: skip
        out.append((finding, rf))
    return out


def document(report: Any, findings: Sequence[tuple[Finding, Any]], outcome: Outcome, target: Target) -> dict[str, Any]:
    """The JSON document of a run: the summary, the findings in `check`'s schema plus what was
    measured, and everything measured per line (`jaxlint check --evidence` reads it)."""
    data = report.to_dict()
    rows = []
    for finding, rf in findings:
        row = finding_dict(finding)
        row["file"] = rf.path
        row["measured"] = {"seconds": rf.seconds, "count": rf.count, **rf.detail}
        rows.append(row)
    lines = [{**r, "path": _display(r["path"]), "file": r["path"]} for r in data["lines"]]
    return {
        "jaxlint_run": RUN_FORMAT_VERSION,
        "program": [target.argv0, *target.args],
        "exit_code": outcome.exit_code,
        "stopped_by_max_seconds": outcome.stopped,
        "device": data["device"],
        "wall_seconds": data["wall_seconds"],
        "compile_seconds": data["compile_seconds"],
        "compiles": data["compiles"],
        "host_wait_seconds": data["host_wait_seconds"],
        "findings": rows,
        "lines": lines,
    }


def write_report(
    report: Any, outcome: Outcome, target: Target, output_format: str, stream: TextIO, *, color: bool
) -> None:
    findings = to_findings(report)
    plain = [f for f, _ in findings]
    if output_format == "json":
        json.dump(document(report, findings, outcome, target), stream, indent=2)
        stream.write("\n")
        return
    render(plain, output_format, stream, color=color)
    if output_format in ("text", "concise"):
        if outcome.stopped:
            stream.write(f"jaxlint run: stopped the program after --max-seconds ({_elapsed(report)}).\n")
        stream.write(report.summary(relative_to=os.getcwd()) + "\n")
        count = len(plain)
        stream.write(f"Found {count} finding{'s' * (count != 1)} in the run.\n" if count else "No findings in the run.\n")


def _elapsed(report: Any) -> str:
    from ._bench import _fmt_time

    return _fmt_time(report.wall_seconds)
