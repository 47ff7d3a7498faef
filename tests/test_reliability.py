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


for batch in loader:
    model = g(model, *batch)
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
    # A jitted function makes the file's module name part of the project's facts.
    write(Path(os.fsdecode(bytes(tmp_path) + b"/bad\xff.py")), "import jax\n" + CHAIN + "\n\n@jax.jit\ndef f(x):\n    return x\n")
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
    [entry] = [value for key, value in entries.items() if not key.startswith("facts:")]  # not module facts
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


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_file_that_would_crash_the_parser_is_one_error(monkeypatch) -> None:
    """A file that may crash libcst (a line of many thousand operators: SIGSEGV past about
    10,000) is parsed in a forked child first; when the child dies, the file is one error
    and this process lives on. The crash is injected: the real one takes minutes."""
    import signal

    import libcst

    from jaxlint import _engine
    from jaxlint._registry import default_rules

    def crash(*args: object, **kwargs: object) -> None:
        import faulthandler

        faulthandler.disable()  # pytest's, inherited: it would print the crash
        os.kill(os.getpid(), signal.SIGSEGV)

    source = "import jax\nx = " + "1 + " * 3000 + "1\n"  # a line over 10,000 characters
    monkeypatch.setattr(libcst, "parse_module", crash)
    result = _engine.analyze("long.py", source.encode(), default_rules()).result
    assert result.error == "long.py: nested too deeply to parse (the parser crashed on it)"


def _lint_folder_in_fresh_interpreter(folder: Path, patch: str) -> list[str]:
    """Run `patch` (Python source that alters `_runner`), then lint `folder` with two jobs, in
    a fresh interpreter: the pools fork, and this one may have started jax's threads. Returns
    the printed lines: the files' errors, then the number of results and of findings."""
    script = (
        "from jaxlint import _runner\n"
        "from jaxlint._config import load_settings\n"
        "from jaxlint._discovery import discover\n"
        "from jaxlint._registry import default_rules\n"
        + patch
        + "settings = load_settings(None)\n"
        "files, _ = discover(['.'], settings)\n"
        "results = _runner.lint_files(files, settings, default_rules(), jobs=2)\n"
        "print([r.error for r in results if r.error])\n"
        "print(len(results), sum(len(r.findings) for r in results))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=folder, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.skipif(sys.platform != "linux", reason="the crash is injected into forked workers")
def test_a_parser_crash_in_a_worker_is_reported_against_its_file(tmp_path: Path) -> None:
    """A worker killed by a signal (a stack overflow in native code) costs its own file
    only: the others are linted, the crashed one is one error."""
    for index in range(20):
        write(tmp_path / f"m{index:02}.py", CHAIN)
    write(tmp_path / "crash.py", CHAIN)
    crash = (
        "import os, signal\n"
        "lint_one = _runner._lint_one\n"
        "def crashing(display, data, slugs, options):\n"
        "    if display.endswith('crash.py'):\n"
        "        os.kill(os.getpid(), signal.SIGSEGV)\n"
        "    return lint_one(display, data, slugs, options)\n"
        "crashing.__module__, crashing.__qualname__ = 'jaxlint._runner', '_lint_one'  # pickled by name\n"
        "_runner._lint_one = crashing\n"
    )
    assert _lint_folder_in_fresh_interpreter(tmp_path, crash) == [
        "['crash.py: the linter crashed on this file (nested too deeply?); not linted']",
        "21 20",
    ]


def test_a_pool_broken_while_files_are_handed_out_still_lints_every_file(tmp_path: Path) -> None:
    """A worker may die before every file is handed to the pool: `submit` itself then raises.
    The files not handed out are linted one by one, like those the dead pool did not finish."""
    for index in range(20):
        write(tmp_path / f"m{index:02}.py", CHAIN)
    breaks = (
        "from concurrent.futures.process import BrokenProcessPool\n"
        "real_pool = _runner.new_pool\n"
        "class BreaksAtThirdFile:\n"
        "    def __init__(self):\n"
        "        self.pool, self.handed = real_pool(1), 0\n"
        "    def submit(self, *args):\n"
        "        self.handed += 1\n"
        "        if self.handed == 3:\n"
        "            raise BrokenProcessPool('a worker died')\n"
        "        return self.pool.submit(*args)\n"
        "    def shutdown(self, *args, **kwargs):\n"
        "        self.pool.shutdown()\n"
        "pools = iter([BreaksAtThirdFile()])\n"
        "_runner.new_pool = lambda workers: next(pools, None) or real_pool(workers)\n"
    )
    assert _lint_folder_in_fresh_interpreter(tmp_path, breaks) == ["[]", "20 20"]


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


# -- rows 5, 8, 10, 11, 14: what `fix` writes -------------------------------------------------


def test_fix_does_not_overwrite_an_edit_saved_meanwhile(tmp_path: Path, run_cli, monkeypatch) -> None:
    """Row 5: the file is compared with what was read just before the new one replaces it."""
    from jaxlint import _fixer

    path = write(tmp_path / "a.py", CHAIN)
    write(tmp_path / "b.py", CHAIN)
    edited = CHAIN + "# saved by the editor while fix ran\n"
    fix_source = _fixer.fix_source

    def fix_while_the_user_saves(display, data, *args, **kwargs):  # type: ignore[no-untyped-def]
        outcome = fix_source(display, data, *args, **kwargs)
        if display == "a.py":
            path.write_text(edited)
        return outcome

    monkeypatch.setattr(_fixer, "fix_source", fix_while_the_user_saves)
    result = run_cli("fix", "a.py", "b.py")
    assert result.exit_code == 2
    assert result.stderr == "jaxlint: error: a.py: changed since jaxlint read it; not fixed\n"
    assert path.read_text() == edited
    assert CHAIN_FIXED_LINE in (tmp_path / "b.py").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]


@posix_only
def test_a_signal_while_fix_writes_leaves_no_temporary_file(tmp_path: Path) -> None:
    """Row 8: Ctrl-C just after the temporary file is made waits for the write to end."""
    write(tmp_path / "a.py", CHAIN)
    script = (
        "import os, signal, sys\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)  # a parent may ignore it\n"
        "from jaxlint import _fixer\n"
        "from jaxlint._cli import main\n"
        "mkstemp = _fixer.tempfile.mkstemp\n"
        "def interrupted(*args, **kwargs):\n"
        "    made = mkstemp(*args, **kwargs)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    return made\n"
        "_fixer.tempfile.mkstemp = interrupted\n"
        "main(['fix', 'a.py'])\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 130, result.stderr
    assert result.stderr.endswith("jaxlint: interrupted\n")
    assert "Traceback" not in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]
    assert CHAIN_FIXED_LINE in (tmp_path / "a.py").read_text()  # written whole before stopping


@posix_only
def test_fix_removes_temporary_files_a_killed_run_left(tmp_path: Path, run_cli) -> None:
    """Row 8: SIGKILL cannot be caught; the next run removes what a dead process left."""
    write(tmp_path / "a.py", CHAIN)
    write(tmp_path / ".jaxlint-999999999-x1y2.tmp", CHAIN[:20])  # no such process
    write(tmp_path / ".jaxlint-keep.tmp", "not ours")
    assert run_cli("fix", "a.py").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [".jaxlint-keep.tmp", "a.py"]


@posix_only
def test_fix_leaves_read_only_files_alone(tmp_path: Path, run_cli) -> None:
    """Row 10 (and issue 18): one line per read-only file, exit 2, the others fixed."""
    import stat

    locked = write(tmp_path / "locked.py", CHAIN)
    locked.chmod(0o444)
    write(tmp_path / "open.py", CHAIN)
    result = run_cli("fix", "--output-format", "concise", ".")
    assert result.exit_code == 2
    assert result.stderr == "jaxlint: error: locked.py: read-only; not fixed\n"
    assert locked.read_text() == CHAIN
    assert stat.S_IMODE(locked.stat().st_mode) == 0o444
    assert CHAIN_FIXED_LINE in (tmp_path / "open.py").read_text()
    assert "Fixed 1 finding in 1 file." in result.stdout
    assert concise(result.stdout) == ["locked.py:5:13: JL003"]  # its finding remains


@posix_only
@pytest.mark.skipif(os.name == "posix" and os.geteuid() == 0, reason="root writes into read-only directories")
def test_fix_in_a_read_only_directory_says_nothing_was_fixed(tmp_path: Path, run_cli) -> None:
    path = write(tmp_path / "pkg" / "a.py", CHAIN)
    (tmp_path / "pkg").chmod(0o555)
    try:
        result = run_cli("fix", "pkg")
    finally:
        (tmp_path / "pkg").chmod(0o755)
    assert result.exit_code == 2
    assert "Fixed" not in result.output
    assert path.read_text() == CHAIN


@posix_only
def test_fix_refuses_to_split_hard_links(tmp_path: Path, run_cli) -> None:
    """Row 11: a rename would give the fixed file a new inode, leaving the link the old one."""
    path = write(tmp_path / "a.py", CHAIN)
    os.link(path, tmp_path / "b.py")
    result = run_cli("fix", "a.py")
    assert result.exit_code == 2
    assert result.stderr == "jaxlint: error: a.py: has 2 hard links, which a rewritten file would split; not fixed\n"
    assert path.read_text() == CHAIN
    assert path.stat().st_ino == (tmp_path / "b.py").stat().st_ino


@posix_only
@pytest.mark.skipif(os.name == "posix" and os.geteuid() != 0, reason="only root can give a file away")
def test_fix_keeps_owner_group_and_mode(tmp_path: Path, run_cli) -> None:
    """Row 11: run as root, the fixed file was given to root:root."""
    import stat

    path = write(tmp_path / "a.py", CHAIN)
    os.chown(path, 4321, 4322)
    path.chmod(0o640)
    assert run_cli("fix", "a.py").exit_code == 0
    assert CHAIN_FIXED_LINE in path.read_text()
    info = path.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4322, 0o640)


@posix_only
def test_fix_does_not_write_through_a_link_out_of_the_paths_given(tmp_path: Path, run_cli) -> None:
    """Row 14: a link in the tree to a file elsewhere is linted, not rewritten; directory
    links are followed."""
    outside = write(tmp_path / "elsewhere" / "target.py", CHAIN)
    write(tmp_path / "elsewhere" / "lib" / "mod.py", CHAIN)
    write(tmp_path / "proj" / "own.py", CHAIN)
    (tmp_path / "proj" / "link.py").symlink_to(outside)
    (tmp_path / "proj" / "lib").symlink_to(tmp_path / "elsewhere" / "lib")
    checked = run_cli("check", "--output-format", "concise", "proj")
    assert checked.exit_code == 1
    assert concise(checked.stdout) == ["proj/lib/mod.py:5:13: JL003", "proj/link.py:5:13: JL003", "proj/own.py:5:13: JL003"]
    fixed = run_cli("fix", "proj")
    assert fixed.exit_code == 2
    assert sorted(fixed.stderr.splitlines()) == [
        "jaxlint: error: proj/lib/mod.py: outside the paths given (through a symbolic link); not fixed",
        "jaxlint: error: proj/link.py: outside the paths given (through a symbolic link); not fixed",
    ]
    assert outside.read_text() == CHAIN
    assert (tmp_path / "elsewhere" / "lib" / "mod.py").read_text() == CHAIN
    assert CHAIN_FIXED_LINE in (tmp_path / "proj" / "own.py").read_text()
    # Named as well, the target is among the paths given.
    assert run_cli("fix", "proj", "elsewhere/target.py").exit_code == 2
    assert CHAIN_FIXED_LINE in outside.read_text()


# -- row 7: Ctrl-C exits 130 ----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["check", "fix"])
def test_ctrl_c_exits_130_with_one_line(tmp_path: Path, monkeypatch, capsys, command: str) -> None:
    from jaxlint import _cli, _fixer

    write(tmp_path / "a.py", CHAIN)
    monkeypatch.chdir(tmp_path)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_cli, "lint_files", interrupted)
    monkeypatch.setattr(_fixer, "fix_source", interrupted)
    with pytest.raises(SystemExit) as exit:
        _cli.main([command, "a.py"])
    assert exit.value.code == 130
    captured = capsys.readouterr()
    assert captured.err.strip() == "jaxlint: interrupted"
    assert "Aborted" not in captured.err


def test_ctrl_c_while_the_linter_is_imported_exits_130(tmp_path: Path) -> None:
    """The console script's first import is the package: a Ctrl-C while libcst loads."""
    script = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'libcst':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "from jaxlint._entry import main\n"
        "main()\n"
    )
    result = subprocess.run([sys.executable, "-c", script, "check", "."], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 130
    assert result.stderr == "jaxlint: interrupted\n"


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_ctrl_c_stops_a_pool_at_once(tmp_path: Path) -> None:
    """Ctrl-C reaches the whole process group: the workers ignore it, the parent ends them
    and exits 130 without waiting for the files they were linting (Python would otherwise
    wait for them on exit)."""
    import importlib.util
    import signal
    import time

    spec = importlib.util.spec_from_file_location("many_findings", Path(__file__).parent.parent / "bench" / "many_findings.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    source = bench.generate(4000, 60)
    for index in range(40):
        write(tmp_path / f"m{index:02}.py", source)
    with subprocess.Popen(
        # `python -m jaxlint` with Python's SIGINT handler, even where this test's parent
        # ignores SIGINT (a job started with `&` in a non-interactive shell)
        [sys.executable, "-c", _WITH_SIGINT + "runpy.run_module('jaxlint', run_name='__main__')", "check", "--no-cache", "-j", "2", "."],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    ) as parent:
        deadline = time.monotonic() + 60
        while len(_children(parent.pid)) < 2 and parent.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        if parent.poll() is not None:
            pytest.skip("the run ended before it could be interrupted")
        workers = _children(parent.pid)
        os.killpg(parent.pid, signal.SIGINT)
        _, stderr = parent.communicate(timeout=30)
    assert parent.returncode == 130
    assert stderr.decode().endswith("jaxlint: interrupted\n")
    assert b"Traceback" not in stderr
    assert all(_state(pid) == "Z" for pid in workers)


_WITH_SIGINT = "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


# -- row 15: no deprecated click API ---------------------------------------------------------------


def test_the_cli_does_not_use_click_get_text_stream(tmp_path: Path, run_cli, monkeypatch) -> None:
    """Deprecated in Click 8.5, removed in 9.0 (`click>=8.1` has no upper bound)."""
    import click

    def removed(*args: object) -> None:
        raise AssertionError("click.get_text_stream is removed in Click 9")

    monkeypatch.setitem(vars(click), "get_text_stream", removed)  # (getattr would warn)
    write(tmp_path / "a.py", CHAIN)
    for args in (["check", "a.py"], ["check", "--statistics", "a.py"], ["fix", "--diff", "a.py"], ["rules"], ["rule", "JL003"]):
        result = run_cli(*args)
        assert result.exit_code in (0, 1), (args, result.output)


# -- issue 18: max-file-size ----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["check", "fix"])
def test_a_file_over_max_file_size_is_skipped_with_a_warning(tmp_path: Path, run_cli, command: str) -> None:
    write(tmp_path / "pyproject.toml", '[tool.jaxlint]\nmax-file-size = "1KB"\n')
    big = write(tmp_path / "big.py", CHAIN + "# padding\n" * 200)
    write(tmp_path / "small.py", CHAIN)
    result = run_cli(command, "--output-format", "concise", ".")
    assert result.exit_code == (1 if command == "check" else 0), result.output
    assert result.stderr == "jaxlint: warning: big.py: 2.2 KiB, over max-file-size (1 KiB); skipped\n"
    assert big.read_text() == CHAIN + "# padding\n" * 200
    if command == "check":
        assert concise(result.stdout) == ["small.py:5:13: JL003"]
    else:
        assert CHAIN_FIXED_LINE in (tmp_path / "small.py").read_text()


def test_max_file_size_zero_is_no_limit(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "pyproject.toml", "[tool.jaxlint]\nmax-file-size = 0\n")
    write(tmp_path / "big.py", CHAIN + "# padding\n" * 200)
    result = run_cli("check", "big.py")
    assert result.exit_code == 1
    assert result.stderr == ""


def test_the_default_max_file_size_is_a_few_megabytes() -> None:
    from jaxlint._config import load_settings

    assert 2 * 1024**2 <= load_settings(None).max_file_size <= 10 * 1024**2


@pytest.mark.parametrize("value", ["-1", "true", '"lots"', "1.5", '"4 TB"', "[1]"])
def test_a_bad_max_file_size_is_a_config_error(tmp_path: Path, run_cli, value: str) -> None:
    write(tmp_path / "pyproject.toml", f"[tool.jaxlint]\nmax-file-size = {value}\n")
    write(tmp_path / "a.py", CHAIN)
    result = run_cli("check", "a.py")
    assert result.exit_code == 2
    assert result.stderr.endswith(
        "[tool.jaxlint]: 'max-file-size' must be a size in bytes, or a string such as \"4MB\" (0: no limit)\n"
    )


# -- row 12: a docstring that shares its line ------------------------------------------------------

LOOP_BODY = """

def f(model, plan):
    for name, layer in plan.items():
        model = eqx.tree_at(lambda m: getattr(m, name), model, layer)
    return model
"""


@pytest.mark.parametrize(
    "first_line",
    ['"""Doc."""; import equinox as eqx', '"""Doc."""; from __future__ import annotations; import equinox as eqx'],
)
def test_an_added_import_goes_below_a_docstring_sharing_its_line(tmp_path: Path, run_cli, first_line: str) -> None:
    import ast

    path = write(tmp_path / "doc.py", first_line + "\n" + LOOP_BODY)
    result = run_cli("fix", "--unsafe-fixes", "doc.py")
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert text.startswith(first_line + "\nfrom jaxlint.runtime import tree_at_batched\n")
    assert ast.get_docstring(ast.parse(text)) == "Doc."
    compile(text, "doc.py", "exec")  # a __future__ import stays first


# -- row 9: the cost of many findings stays linear in the size of the file --------------------------


def test_each_statement_is_generated_a_bounded_number_of_times(monkeypatch) -> None:
    """Positions and fixes regenerated the whole module per finding (352 s for a 50k-line
    file with 805 findings). Counted, not timed: however many findings a file has, each
    top-level function's source is generated at most twice (its line count, its positions).
    `python bench/many_findings.py` measures the time against the parse."""
    import importlib.util

    import libcst as cst

    from jaxlint._engine import analyze
    from jaxlint._registry import default_rules

    spec = importlib.util.spec_from_file_location("many_findings", Path(__file__).parent.parent / "bench" / "many_findings.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    data = bench.generate(3000, 80).encode()

    generated: dict[int, int] = {}
    codegen = cst.FunctionDef._codegen_impl

    def counting(self, state, *args, **kwargs):  # type: ignore[no-untyped-def]
        generated[id(self)] = generated.get(id(self), 0) + 1
        return codegen(self, state, *args, **kwargs)

    monkeypatch.setattr(cst.FunctionDef, "_codegen_impl", counting)
    result = analyze("many.py", data, default_rules()).result
    assert len(result.findings) == 80
    assert max(generated.values()) <= 2
