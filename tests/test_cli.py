"""The `jaxlint` command as users drive it: exit codes, selection, fix, cache, jobs."""

from __future__ import annotations

import difflib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import jaxlint
from jaxlint import _runner


# One unsafe finding (loop) at 6:17.
LOOP = """\
import equinox as eqx


def f(model, plan):
    for name, layer in plan.items():
        model = eqx.tree_at(lambda m: getattr(m, name), model, layer)
    return model
"""

# One safe finding (chain) at 5:13: `g` runs on every step of the loop after it.
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

BOTH = LOOP + "\n\n" + CHAIN.split("\n", 3)[3]  # the loop, then the chain at line 11

CLEAN = "import jax.numpy as jnp\n\nx = jnp.zeros(3)\n"


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def findings(result) -> list[dict]:  # type: ignore[no-untyped-def]
    return json.loads(result.stdout)


def assert_one_line_error(result, *needles: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("jaxlint: error: "), lines
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_sample_sources_are_what_the_tests_assume(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "both.py", BOTH)
    found = findings(run_cli("check", "--output-format", "json", "both.py"))
    assert [(f["line"], f["column"], f["fix"]["applicability"]) for f in found] == [
        (6, 17, "unsafe"),
        (11, 13, "safe"),
    ]


# -- exit codes -----------------------------------------------------------------------


def test_exit_0_when_clean(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "clean.py", CLEAN)
    result = run_cli("check", "clean.py")
    assert result.exit_code == 0
    assert "All checks passed!" in result.stdout


def test_exit_1_with_findings(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "bad.py", LOOP)
    result = run_cli("check", "bad.py")
    assert result.exit_code == 1
    assert "bad.py:6:17: JL003" in result.stdout
    assert "Found 1 finding" in result.stdout


def test_exit_2_on_usage_error(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "bad.py", LOOP)
    assert run_cli("check", "--no-such-option", "bad.py").exit_code == 2
    assert run_cli("check", "--output-format", "xml", "bad.py").exit_code == 2
    assert run_cli("check", "--jobs", "0", "bad.py").exit_code == 2


def test_exit_zero_flag(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "bad.py", LOOP)
    result = run_cli("check", "--exit-zero", "bad.py")
    assert result.exit_code == 0
    assert "bad.py:6:17: JL003" in result.stdout


def test_exit_zero_does_not_hide_errors(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "bad.py", LOOP)
    result = run_cli("check", "--exit-zero", "bad.py", "missing.py")
    assert result.exit_code == 2
    assert "missing.py" in result.stderr


def test_statistics(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "a.py", BOTH)
    write(tmp_path / "b.py", CHAIN)
    result = run_cli("check", "--statistics", "a.py", "b.py")
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, result.stdout
    assert lines[0].split() == ["3", "JL003", "[*]", "tree-at-batch"]
    assert "model = eqx" not in result.stdout  # no source lines


def test_quiet_prints_findings_but_no_summary(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "bad.py", LOOP)
    write(tmp_path / "clean.py", CLEAN)
    result = run_cli("check", "-q", "bad.py")
    assert result.exit_code == 1
    assert "bad.py:6:17: JL003" in result.stdout
    assert "Found" not in result.output
    quiet_clean = run_cli("check", "--quiet", "clean.py")
    assert quiet_clean.exit_code == 0
    assert quiet_clean.output.strip() == ""


# -- selection -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--select", "tree-at-batch"],
        ["--select", "JL003"],
        ["--select", "jl003"],
        ["--select", "JL"],
        ["--select", "JL0"],
        ["--select", "ALL"],
        ["--select", "JL003,tree-at-batch"],
        ["--select", " JL003 , tree-at-batch "],
        ["--select", "JL", "--extend-select", "JL003"],
    ],
)
def test_select_spellings_report(tmp_path: Path, run_cli, args: list[str]) -> None:
    write(tmp_path / "bad.py", LOOP)
    result = run_cli("check", *args, "bad.py")
    assert result.exit_code == 1, result.output
    assert "JL003" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--ignore", "tree-at-batch"],
        ["--ignore", "JL003"],
        ["--ignore", "JL"],
        ["--ignore", "ALL"],
        ["--ignore", "tree-at-batch,JL003"],
        ["--select", "JL", "--ignore", "JL003"],
        ["--select", "tree-at-batch", "--ignore", "JL"],
    ],
)
def test_ignore_spellings_silence(tmp_path: Path, run_cli, args: list[str]) -> None:
    write(tmp_path / "bad.py", LOOP)
    result = run_cli("check", *args, "bad.py")
    assert result.exit_code == 0, result.output
    assert "JL003" not in result.stdout


def test_extend_select_adds_to_an_empty_selection(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "pyproject.toml", "[tool.jaxlint]\nselect = []\n")
    write(tmp_path / "bad.py", LOOP)
    assert run_cli("check", "bad.py").exit_code == 0
    for spelling in ("tree-at-batch", "JL003", "JL"):
        result = run_cli("check", "--extend-select", spelling, "bad.py")
        assert result.exit_code == 1, (spelling, result.output)


@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select"])
def test_unknown_rule_is_a_one_line_error_with_suggestion(tmp_path: Path, run_cli, option: str) -> None:
    write(tmp_path / "bad.py", LOOP)
    result = run_cli("check", option, "tree-at-bach", "bad.py")
    assert_one_line_error(result, "tree-at-bach", "did you mean 'tree-at-batch'")
    assert result.stdout == ""


def test_unknown_rule_in_a_comma_list(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "bad.py", LOOP)
    result = run_cli("check", "--select", "JL003,JL03", "bad.py")
    assert_one_line_error(result, "JL03")


def test_unknown_rule_through_python_m_has_no_traceback(tmp_path: Path) -> None:
    write(tmp_path / "bad.py", LOOP)
    proc = subprocess.run(
        [sys.executable, "-m", "jaxlint", "check", "--select", "tree_at_batch", "bad.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "did you mean 'tree-at-batch'" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_unknown_rule_in_fix_rule_and_rule_command(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "bad.py", CHAIN)
    result = run_cli("fix", "--rule", "tree-at-bath", "bad.py")
    assert_one_line_error(result, "did you mean 'tree-at-batch'")
    assert (tmp_path / "bad.py").read_text() == CHAIN
    assert_one_line_error(run_cli("rule", "tree-at-bach"), "did you mean 'tree-at-batch'")


# -- rule, rules, version, python -m ---------------------------------------------------


@pytest.mark.parametrize("name", ["tree-at-batch", "JL003"])
def test_rule_command_prints_the_docs(run_cli, name: str) -> None:
    result = run_cli("rule", name)
    assert result.exit_code == 0
    out = result.stdout
    assert "tree-at-batch" in out and "JL003" in out
    headings = ["## What it does", "## Why is this bad?", "## Example", "## Fix safety"]
    positions = [out.find(h) for h in headings]
    assert all(p >= 0 for p in positions), out
    assert positions == sorted(positions)
    assert "\x1b[" not in out


def test_rules_command_lists_every_rule(run_cli) -> None:
    from jaxlint._registry import all_rules

    result = run_cli("rules")
    assert result.exit_code == 0
    for rule in all_rules():
        line = next(line for line in result.stdout.splitlines() if rule.SLUG in line)
        assert rule.CODE in line
    assert "\x1b[" not in result.stdout


def test_version(run_cli) -> None:
    result = run_cli("--version")
    assert result.exit_code == 0
    assert jaxlint.__version__ in result.stdout
    assert "jaxlint" in result.stdout


def test_python_m_jaxlint(tmp_path: Path) -> None:
    write(tmp_path / "bad.py", LOOP)
    proc = subprocess.run(
        [sys.executable, "-m", "jaxlint", "check", "--output-format", "concise", "bad.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("bad.py:6:17: JL003 ")
    version = subprocess.run(
        [sys.executable, "-m", "jaxlint", "--version"], capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0 and jaxlint.__version__ in version.stdout


def test_default_path_is_the_current_directory(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "pkg" / "mod.py", LOOP)
    write(tmp_path / "top.py", CHAIN)
    result = run_cli("check", "--output-format", "concise")
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if "JL003" in line]
    assert [line.split(" ")[0] for line in lines] == ["pkg/mod.py:6:17:", "top.py:5:13:"]
    fixed = run_cli("fix")
    assert fixed.exit_code == 1  # the unsafe loop remains
    assert CHAIN_FIXED_LINE in (tmp_path / "top.py").read_text()


# -- fix -------------------------------------------------------------------------------


def test_fix_writes_the_file(tmp_path: Path, run_cli) -> None:
    path = write(tmp_path / "bad.py", CHAIN)
    result = run_cli("fix", "bad.py")
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert CHAIN_FIXED_LINE in text
    assert text.count("tree_at") == 1
    assert "Fixed 1 finding in 1 file" in result.stdout
    assert run_cli("check", "bad.py").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [".jaxlint_cache", "bad.py"]  # no temp files


def test_fix_diff_writes_nothing_and_prints_a_unified_diff(tmp_path: Path, run_cli) -> None:
    path = write(tmp_path / "bad.py", CHAIN)
    before = path.stat()
    result = run_cli("fix", "--diff", "bad.py")
    assert result.exit_code == 1  # there is something to fix
    assert path.read_text() == CHAIN
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert not list(tmp_path.glob(".jaxlint-*"))  # no temporary files left either
    # The diff is exactly the change `fix` makes.
    copy = write(tmp_path / "copy" / "bad.py", CHAIN)
    assert run_cli("fix", "copy/bad.py").exit_code == 0
    expected = "".join(
        difflib.unified_diff(
            CHAIN.splitlines(keepends=True),
            copy.read_text().splitlines(keepends=True),
            fromfile="a/bad.py",
            tofile="b/bad.py",
        )
    )
    assert result.stdout == expected
    assert result.stdout.startswith("--- a/bad.py\n+++ b/bad.py\n@@ ")


def test_fix_diff_on_clean_file_prints_nothing(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "clean.py", CLEAN)
    result = run_cli("fix", "--diff", "clean.py")
    assert result.exit_code == 0
    assert result.stdout == ""


@pytest.mark.parametrize("spelling", ["tree-at-batch", "JL003"])
def test_fix_rule(tmp_path: Path, run_cli, spelling: str) -> None:
    path = write(tmp_path / "bad.py", CHAIN)
    result = run_cli("fix", "--rule", spelling, "bad.py")
    assert result.exit_code == 0, result.output
    assert CHAIN_FIXED_LINE in path.read_text()


def test_fix_rule_not_selected_fixes_nothing(tmp_path: Path, run_cli) -> None:
    path = write(tmp_path / "bad.py", CHAIN)
    result = run_cli("fix", "--rule", "tree-at-batch", "--ignore", "JL003", "bad.py")
    assert result.exit_code == 0
    assert path.read_text() == CHAIN


def test_fix_without_unsafe_fixes_leaves_the_loop(tmp_path: Path, run_cli) -> None:
    path = write(tmp_path / "bad.py", LOOP)
    result = run_cli("fix", "bad.py")
    assert path.read_text() == LOOP
    assert result.exit_code == 1
    assert "bad.py:6:17: JL003" in result.stdout
    assert "--unsafe-fixes" in result.stdout


def test_fix_with_unsafe_fixes_rewrites_the_loop(tmp_path: Path, run_cli) -> None:
    path = write(tmp_path / "bad.py", LOOP)
    result = run_cli("fix", "--unsafe-fixes", "bad.py")
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert text != LOOP
    compile(text, "bad.py", "exec")
    # The call left is after the loop, not in it.
    call_line = next(i for i, line in enumerate(text.splitlines()) if "tree_at_batched(" in line and "import" not in line)
    loop_line = next(i for i, line in enumerate(text.splitlines()) if line.lstrip().startswith("for "))
    assert call_line > loop_line
    assert run_cli("check", "bad.py").exit_code == 0


def test_fix_keeps_crlf_line_endings(tmp_path: Path, run_cli) -> None:
    data = BOTH.replace("\n", "\r\n").encode()
    path = write(tmp_path / "crlf.py", data)
    result = run_cli("fix", "--unsafe-fixes", "crlf.py")
    assert result.exit_code == 0, result.output
    fixed = path.read_bytes()
    assert fixed != data
    assert fixed.count(b"\n") == fixed.count(b"\r\n") > 10
    assert b"[m.encoder, m.decoder.head]" in fixed


def test_fix_keeps_latin1_encoding(tmp_path: Path, run_cli) -> None:
    header = "# -*- coding: latin-1 -*-\n# caf\u00e9, na\u00efve, \u00bd\n"
    data = (header + CHAIN).encode("latin-1")
    path = write(tmp_path / "latin.py", data)
    result = run_cli("fix", "latin.py")
    assert result.exit_code == 0, result.output
    fixed = path.read_bytes()
    assert fixed.startswith(header.encode("latin-1"))
    with pytest.raises(UnicodeDecodeError):
        fixed.decode("utf-8")
    text = fixed.decode("latin-1")
    assert CHAIN_FIXED_LINE in text
    assert text.count("\u00e9") == 1


def test_fix_keeps_utf8_bom(tmp_path: Path, run_cli) -> None:
    data = b"\xef\xbb\xbf" + ("# \u00fcber\n" + CHAIN).encode("utf-8")
    path = write(tmp_path / "bom.py", data)
    result = run_cli("fix", "bom.py")
    assert result.exit_code == 0, result.output
    fixed = path.read_bytes()
    assert fixed.startswith(b"\xef\xbb\xbf# \xc3\xbcber\n")
    assert fixed.count(b"\xef\xbb\xbf") == 1
    assert CHAIN_FIXED_LINE.encode() in fixed


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_fix_keeps_permissions(tmp_path: Path, run_cli) -> None:
    path = write(tmp_path / "script.py", "#!/usr/bin/env python\n" + CHAIN)
    path.chmod(0o755)
    assert run_cli("fix", "script.py").exit_code == 0
    assert CHAIN_FIXED_LINE in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    path.chmod(0o640)
    write(path, CHAIN)
    path.chmod(0o640)
    assert run_cli("fix", "script.py").exit_code == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_fix_through_a_symlink_edits_the_target(tmp_path: Path, run_cli) -> None:
    target = write(tmp_path / "real" / "target.py", CHAIN)
    link = tmp_path / "link.py"
    link.symlink_to(Path("real") / "target.py")
    result = run_cli("fix", "link.py")
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert os.readlink(link) == str(Path("real") / "target.py")
    assert CHAIN_FIXED_LINE in target.read_text()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".jaxlint")) == [
        "link.py",
        "real",
    ]
    assert [p.name for p in (tmp_path / "real").iterdir()] == ["target.py"]


def test_fix_is_idempotent(tmp_path: Path, run_cli) -> None:
    path = write(tmp_path / "bad.py", BOTH)
    first = run_cli("fix", "--unsafe-fixes", "bad.py")
    assert first.exit_code == 0, first.output
    once = path.read_bytes()
    assert once != BOTH.encode()
    second = run_cli("fix", "--unsafe-fixes", "bad.py")
    assert second.exit_code == 0
    assert path.read_bytes() == once
    assert "Fixed" not in second.stdout
    assert run_cli("fix", "--diff", "--unsafe-fixes", "bad.py").stdout == ""


def test_fix_leaves_other_files_alone(tmp_path: Path, run_cli) -> None:
    clean = write(tmp_path / "clean.py", CLEAN)
    loop = write(tmp_path / "loop.py", LOOP)
    mtimes = {p: p.stat().st_mtime_ns for p in (clean, loop)}
    write(tmp_path / "chain.py", CHAIN)
    run_cli("fix", ".")
    assert {p: p.stat().st_mtime_ns for p in (clean, loop)} == mtimes


# -- jobs and cache --------------------------------------------------------------------


def _many_files(root: Path, count: int) -> None:
    for index in range(count):
        source = (LOOP if index % 2 else CHAIN).replace("model", f"model_{index}")
        write(root / f"pkg{index % 3}" / f"mod_{index:02d}.py", source)


def test_jobs_2_gives_the_same_findings_as_jobs_1(tmp_path: Path, run_cli, monkeypatch) -> None:
    count = max(_runner._POOL_THRESHOLD, 16) + 4
    _many_files(tmp_path, count)
    pools = []
    real_pool = _runner.ProcessPoolExecutor

    class SpyPool(real_pool):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            pools.append(kwargs.get("max_workers"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_runner, "ProcessPoolExecutor", SpyPool)
    one = run_cli("check", "--no-cache", "--jobs", "1", "--output-format", "json", ".")
    assert pools == []
    two = run_cli("check", "--no-cache", "--jobs", "2", "--output-format", "json", ".")
    assert pools == [2], "the process pool was not used"
    assert one.exit_code == two.exit_code == 1
    assert len(findings(one)) == count
    assert one.stdout == two.stdout


def test_cache_second_run_is_identical_and_served_from_cache(tmp_path: Path, run_cli, monkeypatch) -> None:
    write(tmp_path / "bad.py", BOTH)
    write(tmp_path / "clean.py", CLEAN)
    first = run_cli("check", ".")
    assert first.exit_code == 1
    assert (tmp_path / ".jaxlint_cache").is_dir()

    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("linted again instead of using the cache")

    monkeypatch.setattr(_runner, "_lint_one", boom)
    second = run_cli("check", ".")
    assert (second.exit_code, second.stdout, second.stderr) == (first.exit_code, first.stdout, first.stderr)
    json_second = run_cli("check", "--output-format", "json", ".")
    assert len(findings(json_second)) == 2


def test_cache_notices_an_edited_file(tmp_path: Path, run_cli) -> None:
    path = write(tmp_path / "bad.py", LOOP)
    assert run_cli("check", ".").exit_code == 1
    write(path, CLEAN)
    result = run_cli("check", ".")
    assert result.exit_code == 0, result.output
    write(path, CHAIN)
    result = run_cli("check", "--output-format", "concise", ".")
    assert result.exit_code == 1
    assert result.stdout.startswith("bad.py:5:13: JL003")


def test_cache_depends_on_the_selection(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "bad.py", LOOP)
    assert run_cli("check", ".").exit_code == 1
    assert run_cli("check", "--ignore", "JL003", ".").exit_code == 0
    write(tmp_path / "pyproject.toml", '[tool.jaxlint]\nper-file-ignores = {"bad.py" = ["JL003"]}\n')
    assert run_cli("check", ".").exit_code == 0


def test_no_cache_neither_reads_nor_writes(tmp_path: Path, run_cli, monkeypatch) -> None:
    from jaxlint._engine import FileResult

    write(tmp_path / "bad.py", LOOP)
    assert run_cli("check", "--no-cache", ".").exit_code == 1
    assert not (tmp_path / ".jaxlint_cache").exists()
    assert run_cli("check", ".").exit_code == 1  # fills the cache
    # A linter that finds nothing: --no-cache must use it, a cached run must not.
    monkeypatch.setattr(_runner, "_lint_one", lambda display, *rest: FileResult(display))
    assert run_cli("check", "--no-cache", ".").exit_code == 0
    assert run_cli("check", ".").exit_code == 1


def test_fix_json_output_is_only_the_remaining_findings(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "both.py", BOTH)
    result = run_cli("fix", "--output-format", "json", "both.py")
    assert result.exit_code == 1
    remaining = findings(result)  # stdout is pure JSON
    assert [(f["line"], f["fix"]["applicability"]) for f in remaining] == [(6, "unsafe")]


def test_fix_reports_a_file_it_cannot_write(tmp_path: Path, run_cli, monkeypatch) -> None:
    from jaxlint import _fixer

    path = write(tmp_path / "bad.py", CHAIN)

    def refuse(*args: object) -> None:
        raise PermissionError(13, "Permission denied", "bad.py")

    monkeypatch.setattr(_fixer.os, "replace", refuse)
    result = run_cli("fix", "bad.py")
    assert result.exit_code == 2
    assert result.stderr.strip() == "jaxlint: error: bad.py: cannot write: Permission denied"
    assert "Fixed" not in result.output  # nothing was (issue 19, row 10)
    assert [p.name for p in tmp_path.iterdir()] == ["bad.py"]  # nor any temporary file
    assert path.read_text() == CHAIN


def test_a_file_named_twice_is_linted_once(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "pkg" / "bad.py", LOOP)
    result = run_cli("check", "--output-format", "json", "pkg", "pkg/bad.py", "./pkg/bad.py", "pkg/")
    assert len(findings(result)) == 1


@pytest.mark.parametrize(
    "content",
    ["", "{not json", "[]", "null", '{"x": 1}', '{"x": {"path": "p"}}', "\x00\xff"],
    ids=["empty", "truncated", "list", "null", "bad-entry", "partial-entry", "binary"],
)
def test_a_corrupt_cache_is_ignored(tmp_path: Path, run_cli, content: str) -> None:
    write(tmp_path / "bad.py", LOOP)
    first = run_cli("check", ".")
    cache_files = list((tmp_path / ".jaxlint_cache").rglob("*.json"))
    assert cache_files
    for cache_file in cache_files:
        data = json.loads(cache_file.read_text())
        if content.startswith("{") and '"x"' in content:
            # Break the entry the next run will look up, keeping the file valid JSON.
            broken = {key: json.loads(content)["x"] for key in data}
            cache_file.write_text(json.dumps(broken))
        else:
            cache_file.write_text(content, encoding="latin-1")
    second = run_cli("check", ".")
    assert (second.exit_code, second.stdout) == (first.exit_code, first.stdout)


# -- test code --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["test_surgery.py", "surgery_test.py", "conftest.py", "tests/surgery.py"])
def test_test_files_are_no_hot_path_but_are_still_syntax_checked(tmp_path: Path, run_cli, name: str) -> None:
    write(tmp_path / name, LOOP)
    write(tmp_path / "surgery.py", LOOP)
    found = findings(run_cli("check", "--output-format", "json", "."))
    assert [f["path"] for f in found] == ["surgery.py"]
    write(tmp_path / name, "def broken(:\n")
    found = findings(run_cli("check", "--output-format", "json", name))
    assert [f["code"] for f in found] == ["JL000"]
