"""No input stops the run, no fault loses a byte the user wrote (issue 19's table of faults).

Each test names the row of the table it guards. Principles: one bad file is one error line
and the run goes on; exit 2 when a file could not be read or written, 130 on Ctrl-C; `fix`
never writes a file that changed since it was read, keeps owner, mode and hard links or
refuses, and never writes outside the paths it was given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxlint._runner import LintCache


posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX file system semantics")

CHAIN = """\
import equinox as eqx


def g(model, enc, head):
    model = eqx.tree_at(lambda m: m.encoder, model, enc)
    model = eqx.tree_at(lambda m: m.decoder.head, model, head)
    return model
"""
CHAIN_FIXED_LINE = "    model = eqx.tree_at(lambda m: [m.encoder, m.decoder.head], model, [enc, head])\n"


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def jaxlint(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m jaxlint ...` in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "jaxlint", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def concise(stdout: str) -> list[str]:
    return [line.split(": JL")[0] + ": JL" + line.split(": JL")[1][:3] for line in stdout.splitlines() if ": JL" in line]


# -- row 1: file names that are not UTF-8 ---------------------------------------------------


@posix_only
@pytest.mark.skipif(sys.platform == "darwin", reason="macOS file names are always UTF-8")
@pytest.mark.parametrize("cache", [True, False])
@pytest.mark.parametrize("output_format", ["text", "concise", "github", "json"])
def test_a_file_name_that_is_not_utf8_is_shown_escaped(tmp_path: Path, run_cli, cache: bool, output_format: str) -> None:
    write(Path(os.fsdecode(bytes(tmp_path) + b"/bad\xff.py")), CHAIN)
    write(tmp_path / "good.py", CHAIN)
    args = ["check", "--output-format", output_format, "."] + ([] if cache else ["--no-cache"])
    for _ in range(2):  # the second run is served from the cache
        result = run_cli(*args)
        assert result.exit_code == 1, result.output
        assert result.stderr == ""
        assert "bad\\xff.py" in result.stdout.replace("\\\\", "\\")  # JSON escapes the backslash
        assert "good.py" in result.stdout


@posix_only
@pytest.mark.skipif(sys.platform == "darwin", reason="macOS file names are always UTF-8")
def test_fix_writes_a_file_whose_name_is_not_utf8(tmp_path: Path, run_cli) -> None:
    path = write(Path(os.fsdecode(bytes(tmp_path) + b"/bad\xff.py")), CHAIN)
    result = run_cli("fix", os.fsdecode(b"bad\xff.py"))
    assert result.exit_code == 0, result.output
    assert CHAIN_FIXED_LINE in path.read_text()


# -- row 2: symlink loops ---------------------------------------------------------------------


@posix_only
def test_a_symlink_loop_in_the_tree_is_skipped(tmp_path: Path, run_cli) -> None:
    (tmp_path / "a.py").symlink_to("b.py")
    (tmp_path / "b.py").symlink_to("a.py")
    (tmp_path / "self.py").symlink_to("self.py")
    write(tmp_path / "good.py", CHAIN)
    for command in ("check", "fix --diff"):
        result = run_cli(*command.split(), "--output-format", "concise", ".")
        assert result.exit_code == 1, result.output
        assert "internal error" not in result.output


@posix_only
def test_a_symlink_loop_named_on_the_command_line_is_an_input_error(tmp_path: Path, run_cli) -> None:
    (tmp_path / "self.py").symlink_to("self.py")
    write(tmp_path / "good.py", CHAIN)
    for command in ("check", "fix"):
        result = run_cli(command, "self.py", "good.py")
        assert result.exit_code == 2, result.output
        assert result.stderr == "jaxlint: error: self.py: symbolic link loop\n"
    assert CHAIN_FIXED_LINE in (tmp_path / "good.py").read_text()  # the other file is still fixed


# -- row 4: notebooks and cache files nested very deep ---------------------------------------


@pytest.mark.parametrize(
    "document",
    [
        "[" * 30_000 + "]" * 30_000,
        '{"cells": [' + "[" * 30_000 + "]" * 30_000 + "]}",
    ],
)
def test_a_notebook_nested_too_deep_is_one_error_line(tmp_path: Path, run_cli, document: str) -> None:
    write(tmp_path / "deep.ipynb", document)
    write(tmp_path / "good.py", CHAIN)
    result = run_cli("check", "--output-format", "concise", ".")
    assert result.exit_code == 2
    assert concise(result.stdout) == ["good.py:5:13: JL003"]
    assert result.stderr == "jaxlint: error: deep.ipynb: broken notebook: JSON nested too deeply\n"


def test_a_notebook_with_a_huge_integer_is_linted(tmp_path: Path, run_cli) -> None:
    cell = {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [], "source": CHAIN}
    text = json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    write(tmp_path / "nb.ipynb", text.replace('"execution_count": 1', '"execution_count": ' + "7" * 5000))
    result = run_cli("check", "--output-format", "concise", ".")
    assert result.exit_code == 1, result.output
    assert result.stderr == ""
    assert "JL003" in result.stdout


def test_a_cache_file_nested_too_deep_is_ignored(tmp_path: Path) -> None:
    cache = LintCache(tmp_path, "settings")
    cache.file.parent.mkdir(parents=True)
    cache.file.write_text("[" * 100_000 + "]" * 100_000)
    assert LintCache(tmp_path, "settings").entries == {}


# -- row 13: a coding cookie in a file with only CR line endings -------------------------------


def test_cr_line_endings_with_a_coding_cookie(tmp_path: Path, run_cli) -> None:
    source = ("# -*- coding: latin-1 -*-\n" + CHAIN + "# caf\xe9\n").replace("\n", "\r").encode("latin-1")
    compile(source, "cr.py", "exec")  # CPython reads it
    path = write(tmp_path / "cr.py", source)
    result = run_cli("check", "--output-format", "concise", "cr.py")
    assert result.exit_code == 1, result.output
    assert concise(result.stdout) == ["cr.py:6:13: JL003"]
    assert run_cli("fix", "cr.py").exit_code == 0
    expected = source.decode("latin-1").replace(
        "\r".join(CHAIN.splitlines()[4:6]) + "\r", CHAIN_FIXED_LINE.replace("\n", "\r")
    )
    assert path.read_bytes() == expected.encode("latin-1")  # the last \r included


# -- row 16: the cache validates what it reads -----------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"line": "seven"},
        {"line": True},
        {"line": 0},
        {"message": None},
        {"cell": "1"},
        {"extra": 1},
    ],
)
def test_a_cache_entry_with_wrong_types_is_linted_again(tmp_path: Path, run_cli, change: dict) -> None:
    write(tmp_path / "a.py", CHAIN)
    first = run_cli("check", "--output-format", "json", "a.py")
    assert first.exit_code == 1
    [cache_file] = (tmp_path / ".jaxlint_cache").rglob("*.json")
    entries = json.loads(cache_file.read_text())
    [entry] = entries.values()
    entry["findings"][0].update(change)
    cache_file.write_text(json.dumps(entries))
    for _ in range(2):
        again = run_cli("check", "--output-format", "json", "a.py")
        assert again.exit_code == 1
        assert json.loads(again.stdout) == json.loads(first.stdout)


def test_a_cache_path_that_is_a_directory_leaves_no_temporary_file(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "a.py", CHAIN)
    run_cli("check", "a.py")
    [cache_file] = (tmp_path / ".jaxlint_cache").rglob("*.json")
    cache_file.unlink()
    cache_file.mkdir()
    (tmp_path / "a.py").write_text(CHAIN + "\n")  # a changed file: the cache is saved again
    for _ in range(2):
        assert run_cli("check", "a.py").exit_code == 1
    assert [p.name for p in cache_file.parent.iterdir()] == [cache_file.name]


# -- row 3: brackets nested deeper than any parser should go ---------------------------------


@pytest.mark.parametrize("jax", ["import jax\n", ""])
@pytest.mark.parametrize(
    "expression",
    ["(" * 3000 + "1" + ")" * 3000, "f(" * 1000 + "1" + ")" * 1000, "[" * 300 + "]" * 300],
    ids=["parens-3000", "calls-1000", "lists-300"],
)
def test_brackets_nested_too_deep_are_a_syntax_error(tmp_path: Path, run_cli, jax: str, expression: str) -> None:
    write(tmp_path / "deep.py", f"{jax}x = {expression}\n")
    write(tmp_path / "good.py", CHAIN)
    for command in ("check", "fix"):
        result = run_cli(command, "--output-format", "concise", ".")
        assert result.exit_code == 1, result.output
        [syntax] = [line for line in result.stdout.splitlines() if "JL000" in line]
        assert syntax.startswith(f"deep.py:{1 + bool(jax)}:")
        assert syntax.endswith("SyntaxError: too many nested parentheses")
    assert CHAIN_FIXED_LINE in (tmp_path / "good.py").read_text()


def test_a_parser_crash_in_a_worker_is_reported_against_its_file(tmp_path: Path, monkeypatch) -> None:
    """A worker killed by a signal (a stack overflow in native code) costs its own file
    only: the others are linted, the crashed one is one error."""
    import signal

    from jaxlint import _runner
    from jaxlint._config import load_settings
    from jaxlint._discovery import discover
    from jaxlint._registry import default_rules

    if _runner._pool_context().get_start_method() != "fork":
        pytest.skip("the crash is injected into forked workers")
    lint_one = _runner._lint_one

    def crashing(display, data, slugs, options):  # type: ignore[no-untyped-def]
        if display.endswith("crash.py"):
            os.kill(os.getpid(), signal.SIGSEGV)
        return lint_one(display, data, slugs, options)

    crashing.__module__, crashing.__qualname__ = "jaxlint._runner", "_lint_one"  # pickled by name
    monkeypatch.setattr(_runner, "_lint_one", crashing)
    for index in range(20):
        write(tmp_path / f"m{index:02}.py", CHAIN)
    write(tmp_path / "crash.py", CHAIN)
    settings = load_settings(None, tmp_path)
    files, _ = discover([str(tmp_path)], settings)
    results = _runner.lint_files(files, settings, default_rules(), jobs=2)
    errors = [r.error for r in results if r.error]
    assert errors == [f"{tmp_path}/crash.py: the linter crashed on this file (nested too deeply?); not linted"]
    assert sum(len(r.findings) for r in results) == 20


# -- row 6: pool workers die with their parent -------------------------------------------------


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_pool_workers_die_with_their_parent(tmp_path: Path) -> None:
    import signal
    import time

    script = (
        "import os, sys, time\n"
        "from jaxlint._runner import new_pool\n"
        "pool = new_pool(2)\n"
        "futures = [pool.submit(time.sleep, 600) for _ in range(2)]\n"
        "while len(pool._processes) < 2: time.sleep(0.05)\n"
        "print(*pool._processes, flush=True)\n"
        "time.sleep(600)\n"
    )
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as parent:
        workers = [int(pid) for pid in parent.stdout.readline().split()]  # type: ignore[union-attr]
        assert len(workers) == 2
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        # The workers hold neither stream: both reach their end although they were inherited.
        assert parent.stdout.read() == b""  # type: ignore[union-attr]
        assert parent.stderr.read() == b""  # type: ignore[union-attr]
        deadline = time.monotonic() + 60
        while any(_state(pid) != "Z" for pid in workers):
            assert time.monotonic() < deadline, "pool workers outlived their parent"
            time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"
