"""What ruff users type without thinking, one test each: check --fix, --show-fixes,
--add-noqa and unused noqa, -o, --color/FORCE_COLOR, .gitignore, --cache-dir and clean,
rule --all, --preview, the nearest configuration per file, --config without a table,
--statistics in each format, rules and rule in JSON, --watch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from test_cli import BOTH, CHAIN, CHAIN_FIXED_LINE, CLEAN, LOOP, write


# -- check --fix, --diff, --unsafe-fixes, --show-fixes ---------------------------------


def test_check_fix_applies_safe_fixes_like_fix(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "a.py", BOTH)
    result = run_cli("check", "--fix", "a.py")
    assert result.exit_code == 1  # the loop's fix is unsafe: it remains
    assert CHAIN_FIXED_LINE in (tmp_path / "a.py").read_text()
    assert "Fixed 1 finding in 1 file." in result.stdout
    assert "a.py:6:17: JL003" in result.stdout


def test_check_fix_unsafe_fixes_and_check_diff(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "a.py", LOOP)
    diff = run_cli("check", "--diff", "--unsafe-fixes", "a.py")
    assert diff.exit_code == 1 and diff.stdout.startswith("--- a/a.py")
    assert (tmp_path / "a.py").read_text() == LOOP
    assert run_cli("check", "--fix", "--unsafe-fixes", "a.py").exit_code == 0
    assert "tree_at_batched" in (tmp_path / "a.py").read_text()


def test_show_fixes_lists_each_file_and_rule(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "a.py", CHAIN)
    write(tmp_path / "b.py", CHAIN)
    result = run_cli("fix", "--show-fixes", ".")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[:5] == [
        "Fixed 2 findings:",
        "- a.py:",
        "    1 × JL003 (tree-at-batch)",
        "- b.py:",
        "    1 × JL003 (tree-at-batch)",
    ]


# -- --add-noqa and unused noqa ---------------------------------------------------------


def test_add_noqa_silences_every_finding_and_keeps_line_endings(tmp_path: Path, run_cli) -> None:
    source = BOTH.replace("\n", "\r\n").replace("model = eqx.tree_at(lambda m: m.encoder", "model = eqx.tree_at(lambda m: m.encoder")
    write(tmp_path / "a.py", source.encode())
    result = run_cli("check", "--add-noqa", "a.py")
    assert result.exit_code == 0
    assert "Added 2 noqa directives." in result.stderr
    text = (tmp_path / "a.py").read_bytes().decode()
    assert text.count("\r\n") == source.count("\r\n")
    assert "model, layer)  # noqa: JL003\r\n" in text
    assert run_cli("check", "a.py").exit_code == 0
    again = run_cli("check", "--add-noqa", "a.py")  # nothing left to add
    assert "Added 0 noqa directives." in again.stderr


def test_add_noqa_extends_an_existing_noqa_list(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "a.py", LOOP.replace("model, layer)", "model, layer)  # noqa: E501"))
    run_cli("check", "--add-noqa", "a.py")
    assert "model, layer)  # noqa: E501, JL003\n" in (tmp_path / "a.py").read_text()


def test_unused_noqa_is_reported_when_selected(tmp_path: Path, run_cli) -> None:
    source = CHAIN.replace("model, enc)", "model, enc)  # noqa: JL003").replace("return model", "return model  # noqa: JL005, JL003, E501")
    write(tmp_path / "a.py", source)
    assert run_cli("check", "a.py").exit_code == 0  # off by default
    result = run_cli("check", "--extend-select", "unused-noqa", "--select", "JL003,JL901", "--output-format", "json", "a.py")
    (finding,) = json.loads(result.stdout)
    assert (finding["code"], finding["line"], finding["column"]) == ("JL901", 7, 19)
    assert finding["message"] == "Unused `noqa` directive (unused: JL003; non-enabled: JL005)"


def test_unused_noqa_fix_removes_only_what_silences_nothing(tmp_path: Path, run_cli) -> None:
    source = CHAIN.replace("model, enc)", "model, enc)  # noqa: JL003").replace("return model", "return model  # noqa: JL003, E501")
    write(tmp_path / "a.py", source)
    result = run_cli("check", "--select", "JL003,JL901", "--fix", "a.py")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "a.py").read_text()
    assert "model, enc)  # noqa: JL003\n" in text  # it silences the chain: kept
    assert "return model  # noqa: E501\n" in text  # another tool's code stays
    # A code of a rule that did not run may be needed by a run that enables it: unsafe.
    write(tmp_path / "b.py", CLEAN.replace("jnp.zeros(3)", "jnp.zeros(3)  # noqa: JL005"))
    assert run_cli("check", "--select", "JL901", "--fix", "b.py").exit_code == 1
    assert run_cli("check", "--select", "JL901", "--fix", "--unsafe-fixes", "b.py").exit_code == 0
    assert (tmp_path / "b.py").read_text() == CLEAN


# -- -o, --color, FORCE_COLOR -----------------------------------------------------------


def test_output_file_gets_the_report(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "a.py", LOOP)
    result = run_cli("check", "--output-format", "json", "-o", "report.json", "a.py")
    assert result.exit_code == 1 and result.stdout == ""
    assert json.loads((tmp_path / "report.json").read_text())[0]["code"] == "JL003"
    text = run_cli("check", "--output-file", "report.txt", "a.py")
    assert text.stdout == "" and "Found 1 finding" in (tmp_path / "report.txt").read_text()


def test_color_always_never_and_force_color(tmp_path: Path, run_cli, monkeypatch) -> None:
    write(tmp_path / "a.py", LOOP)
    assert "\x1b[" in run_cli("check", "--color", "always", "a.py").stdout
    assert "\x1b[" not in run_cli("check", "a.py").stdout  # not a terminal
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\x1b[" in run_cli("check", "a.py").stdout
    assert "\x1b[" not in run_cli("check", "--color", "never", "a.py").stdout


# -- discovery: .gitignore --------------------------------------------------------------


def test_gitignored_files_are_skipped_unless_named(tmp_path: Path, run_cli) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path / ".gitignore", "generated/\n*_pb2.py\n!keep_pb2.py\n/top.py\n")
    for name in ("generated/a.py", "src/x_pb2.py", "src/keep_pb2.py", "top.py", "src/top.py", "src/ok.py"):
        write(tmp_path / name, LOOP)
    write(tmp_path / "src" / ".gitignore", "local.py\n")
    write(tmp_path / "src" / "local.py", LOOP)
    result = run_cli("check", "-q", "--output-format", "concise", ".")
    reported = sorted({line.split(":")[0] for line in result.stdout.splitlines()})
    assert reported == ["src/keep_pb2.py", "src/ok.py", "src/top.py"]
    assert "top.py:" in run_cli("check", "top.py").stdout  # named: always linted
    everything = run_cli("check", "-q", "--no-respect-gitignore", "--output-format", "concise", ".")
    assert len({line.split(":")[0] for line in everything.stdout.splitlines()}) == 7


# -- cache --------------------------------------------------------------------------------


def test_cache_dir_and_clean(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "a.py", LOOP)
    assert run_cli("check", "--cache-dir", "elsewhere", "a.py").exit_code == 1
    assert (tmp_path / "elsewhere" / "CACHEDIR.TAG").is_file()
    assert not (tmp_path / ".jaxlint_cache").exists()
    run_cli("check", "a.py")
    write(tmp_path / "sub" / "b.py", LOOP)
    run_cli("check", "sub/b.py")
    assert (tmp_path / ".jaxlint_cache").is_dir()
    result = run_cli("clean", "--cache-dir", "elsewhere")
    assert result.exit_code == 0
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / ".jaxlint_cache").exists()
    assert "Removing cache at: elsewhere" in result.stderr


def test_clean_leaves_a_folder_that_is_no_cache(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "precious" / "notes.txt", "keep me\n")
    result = run_cli("clean", "--cache-dir", "precious")
    assert (tmp_path / "precious" / "notes.txt").exists()
    assert "not removed" in result.stderr


# -- rules ---------------------------------------------------------------------------------


def test_rule_all_explains_every_rule(run_cli) -> None:
    from jaxlint._registry import all_rules

    result = run_cli("rule", "--all")
    assert result.exit_code == 0
    for rule in all_rules():
        assert f"# {rule.SLUG} ({rule.CODE})" in result.stdout
    assert run_cli("rule").exit_code == 2
    assert run_cli("rule", "--all", "tree-at-batch").exit_code == 2


def test_rules_and_rule_in_json(run_cli) -> None:
    from jaxlint._registry import all_rules

    listed = json.loads(run_cli("rules", "--output-format", "json").stdout)
    assert [r["code"] for r in listed] == [r.CODE for r in all_rules()]
    assert listed[0].keys() == {"code", "name", "summary", "fix", "default", "preview"}
    one = json.loads(run_cli("rule", "tree-at-batch", "--output-format", "json").stdout)
    assert one["name"] == "tree-at-batch" and one["explanation"].startswith("## What it does")
    every = json.loads(run_cli("rule", "--all", "--output-format", "json").stdout)
    assert len(every) == len(all_rules()) and all("explanation" in r for r in every)


def test_preview_rules_run_only_with_preview(tmp_path: Path, run_cli, monkeypatch) -> None:
    from jaxlint.rules import UnusedNoqa

    monkeypatch.setattr(UnusedNoqa, "PREVIEW", True)
    write(tmp_path / "a.py", CHAIN.replace("return model", "return model  # noqa: JL003"))
    quiet = run_cli("check", "--extend-select", "unused-noqa", "a.py")
    assert "JL901" not in quiet.stdout
    assert "unused-noqa (JL901) is in preview: add --preview to run it" in quiet.stderr
    assert "JL901" in run_cli("check", "--preview", "--extend-select", "unused-noqa", "a.py").stdout
    write(tmp_path / "pyproject.toml", '[tool.jaxlint]\npreview = true\nextend-select = ["unused-noqa"]\n')
    assert "JL901" in run_cli("check", "a.py").stdout
    assert "JL901" not in run_cli("check", "--no-preview", "a.py").stdout


def test_findings_a_rule_keeps_in_preview_come_only_with_preview(tmp_path: Path, run_cli) -> None:
    """A rule reads `--preview` (`Rule.preview`) for findings it keeps in preview, and the
    cache tells a preview run apart: missing-jit's light helper that a jitted step also
    traces."""
    source = (Path(__file__).resolve().parent.parent / "fixtures" / "missing-jit" / "ok_light_and_traced_too.py").read_text()
    write(tmp_path / "a.py", source)
    assert "JL001" not in run_cli("check", "--select", "JL001", "a.py").stdout
    loud = run_cli("check", "--preview", "--select", "JL001", "a.py").stdout
    assert loud.count("JL001") == 2 and "cross_entropy" in loud and "features" in loud
    assert "JL001" not in run_cli("check", "--select", "JL001", "a.py").stdout  # not the preview run's cache
    write(tmp_path / "pyproject.toml", "[tool.jaxlint]\npreview = true\n")
    assert run_cli("check", "--select", "JL001", "a.py").stdout.count("JL001") == 2


# -- configuration ---------------------------------------------------------------------


def test_each_file_takes_its_nearest_configuration(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "pyproject.toml", "[tool.jaxlint]\n")
    write(tmp_path / "quiet" / "pyproject.toml", '[tool.jaxlint]\nignore = ["JL003"]\n')
    write(tmp_path / "loud" / "a.py", LOOP)
    write(tmp_path / "quiet" / "a.py", LOOP)
    for order in (("loud", "quiet"), ("quiet", "loud")):  # not the first path's configuration
        result = run_cli("check", "-q", "--output-format", "concise", *order)
        (line,) = result.stdout.splitlines()
        assert line.startswith("loud/a.py:6:17: JL003")
    # --config: one configuration for every file
    assert run_cli("check", "--config", "quiet/pyproject.toml", "loud", "quiet").exit_code == 0


def test_a_subprojects_excludes_apply_to_its_files(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "pyproject.toml", "[tool.jaxlint]\n")
    write(tmp_path / "sub" / "pyproject.toml", '[tool.jaxlint]\nextend-exclude = ["generated"]\n')
    write(tmp_path / "sub" / "generated" / "a.py", LOOP)
    write(tmp_path / "sub" / "b.py", LOOP)
    result = run_cli("check", "-q", "--output-format", "concise", ".")
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["sub/b.py"]
    assert run_cli("check", "sub/generated/a.py").exit_code == 1  # named: always linted


def test_config_without_a_jaxlint_table_is_an_error(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "other.toml", "[tool.ruff]\nline-length = 100\n")
    write(tmp_path / "a.py", LOOP)
    result = run_cli("check", "--config", "other.toml", "a.py")
    assert result.exit_code == 2
    assert result.stderr.strip() == "jaxlint: error: other.toml: no [tool.jaxlint] table"


@pytest.mark.parametrize("output_format", ["json", "jsonl", "text", "concise"])
def test_statistics_honours_the_output_format(tmp_path: Path, run_cli, output_format: str) -> None:
    write(tmp_path / "a.py", BOTH)
    result = run_cli("check", "--statistics", "--output-format", output_format, "a.py")
    assert result.exit_code == 1
    if output_format == "json":
        assert json.loads(result.stdout) == [{"code": "JL003", "name": "tree-at-batch", "count": 2, "fixable": True}]
    elif output_format == "jsonl":
        assert json.loads(result.stdout) == {"code": "JL003", "name": "tree-at-batch", "count": 2, "fixable": True}
    else:
        assert result.stdout.split() == ["2", "JL003", "[*]", "tree-at-batch"]


def test_statistics_in_a_format_it_cannot_print_is_an_error(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "a.py", BOTH)
    result = run_cli("check", "--statistics", "--output-format", "sarif", "a.py")
    assert result.exit_code == 2 and "--statistics prints" in result.stderr


# -- --watch -----------------------------------------------------------------------------


def test_watch_checks_again_when_a_file_changes(tmp_path: Path) -> None:
    write(tmp_path / "a.py", CLEAN)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "jaxlint", "check", "--watch", "--no-cache", "a.py"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    lines: list[str] = []

    def read_until(text: str) -> None:
        timer = threading.Timer(120, process.kill)  # a guard against a hang, not a timing
        timer.start()
        try:
            for line in process.stdout:  # type: ignore[union-attr]
                lines.append(line)
                if text in line:
                    return
            raise AssertionError(f"no {text!r} in {lines}")
        finally:
            timer.cancel()

    try:
        read_until("All checks passed!")
        write(tmp_path / "a.py", LOOP)
        read_until("Found 1 finding")
        write(tmp_path / "a.py", CLEAN)
        read_until("All checks passed!")
    finally:
        process.kill()
        process.wait()
        process.stdout.close()  # type: ignore[union-attr]
    assert any("a.py:6:17: JL003" in line for line in lines)
