"""`-` and `--stdin-filename`: what an editor plugin pipes through jaxlint."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import CHAIN, CHAIN_FIXED_LINE, CLEAN, LOOP, write


def test_check_reads_standard_input_as_the_named_file(tmp_path: Path, run_cli) -> None:
    result = run_cli("check", "--stdin-filename", "src/model.py", "--output-format", "json", "-", input=LOOP)
    assert result.exit_code == 1, result.output
    (finding,) = json.loads(result.stdout)
    assert (finding["path"], finding["line"], finding["code"]) == ("src/model.py", 6, "JL003")
    assert not (tmp_path / "src").exists()  # the file need not exist
    assert not (tmp_path / ".jaxlint_cache").exists()


def test_stdin_filename_alone_reads_standard_input(run_cli) -> None:
    result = run_cli("check", "--stdin-filename", "a.py", input=CLEAN)
    assert result.exit_code == 0, result.output
    assert "All checks passed!" in result.stdout


def test_dash_without_a_name(run_cli) -> None:
    result = run_cli("check", "--output-format", "concise", "-", input=LOOP)
    assert result.exit_code == 1
    assert result.stdout.startswith("-:6:17: JL003")


def test_stdin_takes_the_configuration_of_the_named_path(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "project" / "pyproject.toml", '[tool.jaxlint]\nper-file-ignores = { "legacy/*" = ["JL003"] }\n')
    write(tmp_path / "other" / "pyproject.toml", "[tool.jaxlint]\nignore = []\n")
    ignored = run_cli("check", "--stdin-filename", "project/legacy/m.py", "-", input=LOOP)
    assert ignored.exit_code == 0, ignored.output
    reported = run_cli("check", "--stdin-filename", "project/new/m.py", "-", input=LOOP)
    assert reported.exit_code == 1


def test_force_exclude_applies_to_the_named_path(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "pyproject.toml", '[tool.jaxlint]\nextend-exclude = ["generated"]\n')
    args = ("--force-exclude", "--stdin-filename", "generated/m.py", "-")
    assert run_cli("check", *args, input=LOOP).exit_code == 0
    fixed = run_cli("fix", *args, input=CHAIN)
    assert fixed.exit_code == 0 and fixed.stdout == CHAIN  # passed through unchanged


def test_fix_writes_the_fixed_source_to_stdout_and_the_report_to_stderr(tmp_path: Path, run_cli) -> None:
    result = run_cli("fix", "--stdin-filename", "m.py", "-", input=CHAIN + "\n\n" + LOOP.split("\n", 2)[2])
    assert result.exit_code == 1  # the loop's fix is unsafe: it remains
    assert CHAIN_FIXED_LINE in result.stdout
    assert "JL003" not in result.stdout and "Found" not in result.stdout
    assert "m.py:" in result.stderr and "Fixed 1 finding" in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_fix_of_clean_input_echoes_it_byte_for_byte(run_cli) -> None:
    source = CLEAN.replace("\n", "\r\n").encode()
    result = run_cli("fix", "--stdin-filename", "m.py", "-", input=source)
    assert result.exit_code == 0
    assert result.stdout_bytes == source


def test_fix_diff_from_stdin(run_cli) -> None:
    result = run_cli("fix", "--diff", "--stdin-filename", "m.py", "-", input=CHAIN)
    assert result.exit_code == 1
    assert result.stdout.startswith("--- a/m.py\n+++ b/m.py\n")
    assert "+" + CHAIN_FIXED_LINE in result.stdout


def test_fix_of_a_syntax_error_echoes_the_input(run_cli) -> None:
    result = run_cli("fix", "--stdin-filename", "m.py", "-", input="import jax\ndef f(:\n")
    assert result.exit_code == 1
    assert result.stdout == "import jax\ndef f(:\n"
    assert "JL000" in result.stderr


def test_dash_with_other_paths_is_a_usage_error(tmp_path: Path, run_cli) -> None:
    write(tmp_path / "a.py", CLEAN)
    result = run_cli("check", "-", "a.py", input=CLEAN)
    assert result.exit_code == 2
    assert result.stderr.startswith("jaxlint: error: ")
