"""Bad input gets a clear line and the right exit code, never a traceback, and the run goes on
to the other files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxlint import _runner
from jaxlint import lint_source



LOOP = """\
import equinox as eqx


def f(model, plan):
    for name, layer in plan.items():
        model = eqx.tree_at(lambda m: getattr(m, name), model, layer)
    return model
"""


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def jaxlint(cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m jaxlint ...` in a fresh process, as installed."""
    return subprocess.run(
        [sys.executable, "-m", "jaxlint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def json_findings(stdout: str) -> list[dict]:
    return json.loads(stdout)


def assert_no_traceback(*outputs: str) -> None:
    for output in outputs:
        assert "Traceback" not in output
        assert "internal error" not in output


# -- syntax errors ---------------------------------------------------------------------


def test_syntax_error_is_one_jl000_finding_and_the_run_goes_on(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "a_broken.py", "import jax\n\nx = = 1\n")
    write(tmp_path / "b_good.py", LOOP)
    result = run_cli("check", "--output-format", "json", ".")
    assert result.exit_code == 1, result.output  # findings only: not an error exit
    assert result.stderr == ""
    found = json_findings(result.stdout)
    assert [(f["path"], f["code"]) for f in found] == [("a_broken.py", "JL000"), ("b_good.py", "JL003")]
    syntax = found[0]
    assert syntax["line"] == 3
    assert syntax["rule"] == "syntax-error"
    assert syntax["message"].startswith("SyntaxError")
    assert syntax["fix"] is None


def test_syntax_error_in_text_output(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "broken.py", "import jax\ndef f(:\n    pass\n")
    result = run_cli("check", "broken.py")
    assert result.exit_code == 1
    header = result.stdout.splitlines()[0]
    assert header.startswith("broken.py:")
    assert "JL000" in header and "SyntaxError" in header
    assert "Found 1 finding" in result.stdout


def test_syntax_error_column_points_at_the_token() -> None:
    (finding,) = lint_source("import jax\n\nx = = 1\n")
    assert (finding.line, finding.column) == (3, 5)


def test_fix_leaves_a_file_with_a_syntax_error_alone(tmp_path: Path, run_cli) -> None:
    source = LOOP + "\ndef broken(:\n    pass\n"
    path = write(tmp_path / "broken.py", source)
    result = run_cli("fix", "--unsafe-fixes", "broken.py")
    assert result.exit_code == 1
    assert path.read_text() == source
    assert "JL000" in result.stdout


# -- bytes that are not source -----------------------------------------------------------


def test_undecodable_bytes_are_one_error_line_and_others_are_linted(tmp_path: Path) -> None:
    write(tmp_path / "a_bad.py", b"import jax\nname = '\xff\xfe caf\xe9'\n")
    write(tmp_path / "b_good.py", LOOP)
    proc = jaxlint(tmp_path, "check", "--output-format", "json", ".")
    assert proc.returncode == 2
    assert_no_traceback(proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("jaxlint: error: a_bad.py: ")
    assert [f["path"] for f in json_findings(proc.stdout)] == ["b_good.py"]


def test_undecodable_bytes_with_fix(tmp_path: Path, run_cli) -> None:
    data = b"import jax\nname = '\xff'\n"
    path = write(tmp_path / "bad.py", data)
    result = run_cli("fix", "bad.py")
    assert result.exit_code == 2
    assert result.stderr.startswith("jaxlint: error: bad.py:")
    assert path.read_bytes() == data


@pytest.mark.parametrize(
    "data",
    [
        b"# -*- coding: klingon -*-\nimport jax\n",
        b"# coding: ascii\nimport jax\n# caf\xc3\xa9\n",
        b"\xef\xbb\xbf# coding: latin-1\nimport jax\n",  # a BOM says utf-8, the cookie disagrees
    ],
    ids=["unknown-codec", "wrong-codec", "bom-conflict"],
)
def test_bad_encoding_cookie(tmp_path: Path, run_cli, data: bytes) -> None:
    write(tmp_path / "cookie.py", data)
    write(tmp_path / "good.py", LOOP)
    result = run_cli("check", "--output-format", "json", "cookie.py", "good.py")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxlint: error: cookie.py: "), result.stderr
    assert [f["path"] for f in json_findings(result.stdout)] == ["good.py"]


def test_latin1_cookie_is_fine(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "latin.py", "# -*- coding: latin-1 -*-\n# \u00e9t\u00e9\n".encode("latin-1") + LOOP.encode())
    result = run_cli("check", "--output-format", "json", "latin.py")
    assert result.exit_code == 1
    assert [f["line"] for f in json_findings(result.stdout)] == [8]


def test_binary_file_passed_explicitly(tmp_path: Path) -> None:
    write(tmp_path / "image.py", bytes(range(256)) * 4 + b"jax")
    write(tmp_path / "good.py", LOOP)
    proc = jaxlint(tmp_path, "check", "image.py", "good.py")
    assert proc.returncode in (1, 2)
    assert_no_traceback(proc.stdout, proc.stderr)
    assert "good.py:6:17: JL003" in proc.stdout
    assert len(proc.stderr.strip().splitlines()) <= 1


def test_null_byte_in_source(tmp_path: Path) -> None:
    write(tmp_path / "nul.py", b"import jax\nx = 1\x00\n")
    proc = jaxlint(tmp_path, "check", "nul.py")
    assert proc.returncode in (1, 2)
    assert_no_traceback(proc.stdout, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) <= 1


# -- files that cannot be read -----------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can read anything")
def test_unreadable_file_chmod_000(tmp_path: Path) -> None:
    locked = write(tmp_path / "a_locked.py", LOOP)
    write(tmp_path / "b_good.py", LOOP)
    locked.chmod(0)
    try:
        proc = jaxlint(tmp_path, "check", "--output-format", "concise", ".")
    finally:
        locked.chmod(0o644)
    assert proc.returncode == 2
    assert_no_traceback(proc.stdout, proc.stderr)
    assert proc.stderr.strip() == "jaxlint: error: a_locked.py: permission denied"
    assert "b_good.py:6:17: JL003" in proc.stdout


def test_unreadable_file_is_one_error_line(tmp_path: Path, run_cli, monkeypatch) -> None:
    # The same as chmod 000, for runs as root: the read itself fails.
    write(tmp_path / "a_locked.py", LOOP)
    write(tmp_path / "b_good.py", LOOP)
    real_read = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "a_locked.py":
            raise PermissionError(13, "Permission denied", str(self))
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    result = run_cli("check", "--no-cache", "--output-format", "concise", ".")
    assert result.exit_code == 2
    assert result.stderr.strip() == "jaxlint: error: a_locked.py: permission denied"
    assert "b_good.py:6:17: JL003" in result.stdout
    fixed = run_cli("fix", ".")
    assert fixed.exit_code == 2
    assert "a_locked.py: permission denied" in fixed.stderr


def test_missing_path(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "good.py", LOOP)
    result = run_cli("check", "--output-format", "concise", "nope.py", "good.py", "nodir/")
    assert result.exit_code == 2
    errors = result.stderr.strip().splitlines()
    assert errors == [
        "jaxlint: error: nope.py: no such file or directory",
        "jaxlint: error: nodir/: no such file or directory",
    ]
    assert "good.py:6:17: JL003" in result.stdout
    assert "All checks passed" not in result.output


def test_missing_path_alone_does_not_claim_success(tmp_path: Path, run_cli) -> None:
    result = run_cli("check", "nope.py")
    assert result.exit_code == 2
    assert "All checks passed" not in result.output
    fixed = run_cli("fix", "nope.py")
    assert fixed.exit_code == 2
    assert "All checks passed" not in fixed.output


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_broken_symlinks(tmp_path: Path, run_cli) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "dangling.py").symlink_to(tmp_path / "gone.py")
    write(tmp_path / "pkg" / "good.py", LOOP)
    walked = run_cli("check", "--output-format", "concise", "pkg")
    assert walked.exit_code == 1  # found while walking: skipped
    assert walked.stderr == ""
    explicit = run_cli("check", "pkg/dangling.py")
    assert explicit.exit_code == 2
    assert explicit.stderr.strip() == "jaxlint: error: pkg/dangling.py: broken symbolic link"


# -- odd but valid files -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n",
        "\n\n\n",
        "# jax\n",
        "# uses jax, equinox and optax\n# but only in comments\n",
        "#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n# jax\n",
        "# jax",  # no final newline
        '"""Only a docstring about jax."""\n',
        "import jax\n",
        "\r\n# jax\r\n",
        "\ufeff# jax\n",
    ],
)
def test_empty_and_comment_only_files_are_clean(tmp_path: Path, run_cli, text: str) -> None:
    write(tmp_path / "mod.py", text)
    result = run_cli("check", "mod.py")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert run_cli("fix", "--unsafe-fixes", "mod.py").exit_code == 0
    assert (tmp_path / "mod.py").read_bytes() == text.encode()


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_symlink_loop_terminates(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    write(pkg / "sub" / "mod.py", LOOP)
    (pkg / "sub" / "up").symlink_to(pkg)
    (pkg / "self").symlink_to(".")
    (pkg / "a").symlink_to("b")
    (pkg / "b").symlink_to("a")
    (pkg / "same.py").symlink_to(pkg / "sub" / "mod.py")
    proc = jaxlint(tmp_path, "check", "--output-format", "json", "pkg", timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert_no_traceback(proc.stdout, proc.stderr)
    # Each file once, however many links lead to it.
    assert len(json_findings(proc.stdout)) == 1


def test_huge_file(tmp_path: Path, run_cli) -> None:
    # `tree_at` is imported, so the rule walks all 20k lines (nothing to report, so no
    # positions are computed).
    body = "import jax.numpy as jnp\nfrom equinox import tree_at\n" + "x = jnp.zeros(3)\n" * 20_000
    write(tmp_path / "huge.py", body)
    result = run_cli("check", "--no-cache", "huge.py")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


@pytest.mark.slow
def test_huge_file_with_a_finding_at_the_end(tmp_path: Path, run_cli) -> None:
    body = "import jax.numpy as jnp\n" + "x = jnp.zeros(3)\n" * 20_000
    write(tmp_path / "huge.py", body + LOOP)
    result = run_cli("check", "--no-cache", "--output-format", "json", "huge.py")
    assert result.exit_code == 1, result.output
    assert [f["line"] for f in json_findings(result.stdout)] == [20_001 + 6]


def _deep(depth: int) -> str:
    return "import jax\nimport equinox as eqx\nx = " + "1 + " * depth + "1\ny = eqx.tree_at\n"


def test_deeply_nested_expression(tmp_path: Path) -> None:
    # Deeper than Python's default recursion limit of 1000.
    write(tmp_path / "deep.py", _deep(1_500))
    write(tmp_path / "good.py", LOOP)
    proc = jaxlint(tmp_path, "check", "--no-cache", "--output-format", "concise", "deep.py", "good.py")
    assert proc.returncode in (1, 2)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 1
    assert "good.py:6:17: JL003" in proc.stdout


@pytest.mark.slow
def test_very_deeply_nested_expression(tmp_path: Path) -> None:
    write(tmp_path / "deep.py", _deep(5_000))
    proc = jaxlint(tmp_path, "check", "--no-cache", "deep.py", timeout=300)
    assert proc.returncode in (0, 1, 2)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 1


def test_non_python_file_passed_explicitly(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "notes.txt", LOOP)
    write(tmp_path / "README.md", "# A readme about jax\n\nSome *markdown*.\n")
    write(tmp_path / "script", LOOP)  # an extensionless script
    walked = run_cli("check", "--output-format", "json", ".")
    assert json_findings(walked.stdout) == []  # directories only yield .py files
    explicit = run_cli("check", "--output-format", "json", "notes.txt", "script")
    assert explicit.exit_code == 1
    assert [(f["path"], f["line"]) for f in json_findings(explicit.stdout)] == [("notes.txt", 6), ("script", 6)]
    markdown = run_cli("check", "README.md")
    assert markdown.exit_code in (0, 1)  # at most a JL000 finding
    assert "Traceback" not in markdown.output


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_is_not_read(tmp_path: Path, run_cli) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    write(tmp_path / "good.py", LOOP)
    walked = run_cli("check", "--output-format", "concise", ".")  # would hang if opened
    assert walked.exit_code == 1
    assert walked.stderr == ""
    explicit = run_cli("check", "pipe.py")
    assert explicit.exit_code == 2
    assert explicit.stderr.strip() == "jaxlint: error: pipe.py: not a regular file or directory"


def test_directory_without_python_files(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "data" / "x.csv", "a,b\n")
    result = run_cli("check", "data")
    assert result.exit_code == 0
    assert result.stderr == ""


def test_internal_errors_in_one_file_do_not_stop_the_run(tmp_path: Path, run_cli, monkeypatch) -> None:
    from jaxlint._engine import FileResult

    write(tmp_path / "a.py", LOOP)
    write(tmp_path / "b.py", LOOP)
    real = _runner._lint_one

    def flaky(display, *rest):  # type: ignore[no-untyped-def]
        if display == "a.py":
            return FileResult(display, error=f"{display}: internal error: boom (please report)")
        return real(display, *rest)

    monkeypatch.setattr(_runner, "_lint_one", flaky)
    result = run_cli("check", "--no-cache", "--output-format", "concise", ".")
    assert result.exit_code == 2
    assert "b.py:6:17: JL003" in result.stdout
    assert result.stderr.strip() == "jaxlint: error: a.py: internal error: boom (please report)"
