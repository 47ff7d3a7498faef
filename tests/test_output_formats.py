"""Output formats: json, jsonl, sarif, github, concise, text; paths as given; no colour
unless on a terminal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest



LOOP = """\
import equinox as eqx


def f(model, plan):
    for name, layer in plan.items():
        model = eqx.tree_at(lambda m: getattr(m, name), model, layer)
    return model
"""

CHAIN = """\
import equinox as eqx


def g(model, enc, head):
    model = eqx.tree_at(lambda m: m.encoder, model, enc)
    model = eqx.tree_at(lambda m: m.decoder.head, model, head)
    return model


for batch in loader:
    model = g(model, *batch)
"""

BROKEN = "import jax\n\nx = = 1\n"

KEYS = {"path", "line", "column", "end_line", "end_column", "code", "rule", "message", "fix", "evidence"}
ANSI = re.compile(r"\x1b\[")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name, text in {"src/pkg/loop.py": LOOP, "src/chain.py": CHAIN, "src/broken.py": BROKEN}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def check(run_cli, fmt: str, *paths: str):  # type: ignore[no-untyped-def]
    result = run_cli("check", "--no-cache", "--output-format", fmt, *(paths or ("src",)))
    assert result.exit_code == 1, result.output
    assert result.stderr == ""
    assert not ANSI.search(result.stdout)
    return result.stdout


# -- json / jsonl ------------------------------------------------------------------------


def test_json_schema(project: Path, run_cli) -> None:
    found = json.loads(check(run_cli, "json"))
    assert isinstance(found, list) and len(found) == 3
    for item in found:
        assert set(item) == KEYS
        assert all(isinstance(item[k], int) and item[k] >= 1 for k in ("line", "column", "end_line", "end_column"))
        assert (item["end_line"], item["end_column"]) >= (item["line"], item["column"])
        assert isinstance(item["message"], str) and item["message"]
        if item["fix"] is not None:
            assert item["fix"]["applicability"] in ("safe", "unsafe", "display-only")
            assert set(item["fix"]) <= {"applicability", "title"}
    by_path = {item["path"]: item for item in found}
    assert sorted(by_path) == ["src/broken.py", "src/chain.py", "src/pkg/loop.py"]
    loop = by_path["src/pkg/loop.py"]
    assert (loop["code"], loop["rule"], loop["fix"]["applicability"]) == ("JL003", "tree-at-batch", "unsafe")
    assert by_path["src/chain.py"]["fix"]["applicability"] == "safe"
    broken = by_path["src/broken.py"]
    assert (broken["code"], broken["rule"], broken["line"], broken["fix"]) == ("JL000", "syntax-error", 3, None)


def test_json_positions_span_the_call(project: Path, run_cli) -> None:
    for item in json.loads(check(run_cli, "json")):
        if item["code"] != "JL003":
            continue
        lines = (project / item["path"]).read_text().splitlines()
        start = lines[item["line"] - 1][item["column"] - 1 :]
        assert start.startswith("eqx.tree_at(")
        end_line = lines[item["end_line"] - 1]
        assert end_line[item["end_column"] - 2] == ")"  # end column is exclusive


def test_json_when_clean(tmp_path: Path, run_cli) -> None:
    (tmp_path / "clean.py").write_text("import jax\n")
    result = run_cli("check", "--output-format", "json", "clean.py")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == []


def test_jsonl_is_one_object_per_line(project: Path, run_cli) -> None:
    lines = check(run_cli, "jsonl").splitlines()
    assert len(lines) == 3
    objects = [json.loads(line) for line in lines]
    assert all(set(o) == KEYS for o in objects)
    assert objects == json.loads(check(run_cli, "json"))


# -- sarif -------------------------------------------------------------------------------


def test_sarif(project: Path, run_cli) -> None:
    document = json.loads(check(run_cli, "sarif"))
    assert document["version"] == "2.1.0"
    assert "sarif" in document["$schema"] and "2.1.0" in document["$schema"]
    (run,) = document["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "jaxlint"
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert "JL003" in rule_ids and "JL000" in rule_ids
    results = run["results"]
    assert len(results) == 3
    for result in results:
        assert result["ruleId"] in rule_ids
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] in ("error", "warning", "note")
        assert result["message"]["text"]
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"]["uri"].startswith("src/")
        region = physical["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert (region["endLine"], region["endColumn"]) >= (region["startLine"], region["startColumn"])
    loop = next(r for r in results if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/pkg/loop.py")
    assert loop["locations"][0]["physicalLocation"]["region"]["startLine"] == 6


def test_sarif_when_clean(tmp_path: Path, run_cli) -> None:
    (tmp_path / "clean.py").write_text("import jax\n")
    result = run_cli("check", "--output-format", "sarif", "clean.py")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["runs"][0]["results"] == []


# -- github ------------------------------------------------------------------------------


def test_github_annotations(project: Path, run_cli) -> None:
    lines = check(run_cli, "github").splitlines()
    assert len(lines) == 3
    for line in lines:
        assert re.match(r"^::(warning|error) file=src/[\w/]+\.py,line=\d+,col=\d+,", line), line
    loop = next(line for line in lines if "file=src/pkg/loop.py" in line)
    assert loop.startswith("::warning file=src/pkg/loop.py,line=6,col=17,")
    assert "::JL003 " in loop


def test_github_escapes_newlines_and_commas_in_properties(tmp_path: Path, run_cli) -> None:
    odd = tmp_path / "a,b:c.py"
    odd.write_text(LOOP)
    result = run_cli("check", "--output-format", "github", "a,b:c.py")
    (line,) = result.stdout.splitlines()
    assert line.startswith("::warning file=a%2Cb%3Ac.py,line=6,")


# -- concise and text --------------------------------------------------------------------


def test_concise(project: Path, run_cli) -> None:
    lines = [line for line in check(run_cli, "concise").splitlines() if line]
    findings = [line for line in lines if not line.startswith("Found")]
    assert len(findings) == 3
    pattern = re.compile(r"^(?P<path>src/[\w/]+\.py):(?P<line>\d+):(?P<col>\d+): (?P<code>JL\d{3}) (\[\*\] )?\[(?P<slug>[\w-]+)\] \S")
    matches = [pattern.match(line) for line in findings]
    assert all(matches), findings
    assert [(m["path"], m["line"], m["col"], m["code"], m["slug"]) for m in matches] == [  # type: ignore[index]
        ("src/broken.py", "3", "5", "JL000", "syntax-error"),
        ("src/chain.py", "5", "13", "JL003", "tree-at-batch"),
        ("src/pkg/loop.py", "6", "17", "JL003", "tree-at-batch"),
    ]
    assert "[*]" in findings[1] and "[*]" not in findings[2]  # safe fix vs unsafe fix
    assert lines[-1].startswith("Found 3 findings")


def test_text_shows_the_source_line_and_a_caret(tmp_path: Path, run_cli) -> None:
    (tmp_path / "loop.py").write_text(LOOP)
    out = check(run_cli, "text", "loop.py")
    lines = out.splitlines()
    assert lines[0].startswith("loop.py:6:17: JL003 [tree-at-batch] ")
    source_index = next(i for i, line in enumerate(lines) if line.startswith("6 |"))
    source = lines[source_index]
    assert source == "6 | " + LOOP.splitlines()[5]
    caret = lines[source_index + 1]
    prefix = len("6 | ")
    assert caret.index("^") - prefix == 16  # column 17
    assert caret.rstrip().endswith("^")
    assert len(caret.rstrip()) - prefix == len(LOOP.splitlines()[5])  # to the closing paren
    assert "fix (unsafe)" in out
    assert "Found 1 finding" in out


def test_text_caret_under_tab_indented_code(tmp_path: Path, run_cli) -> None:
    (tmp_path / "tabs.py").write_text(LOOP.replace("        ", "\t\t").replace("    ", "\t"))
    lines = check(run_cli, "text", "tabs.py").splitlines()
    assert lines[0].startswith("tabs.py:6:11: ")  # columns count characters
    source_index = next(i for i, line in enumerate(lines) if line.startswith("6 |"))
    source, caret = lines[source_index], lines[source_index + 1]
    assert "\t" not in source
    assert source[caret.index("^") :].startswith("eqx.tree_at(")
    assert source[len(caret.rstrip()) - 1] == ")"


def test_text_does_not_wrap_or_interpret_markup(tmp_path: Path, run_cli) -> None:
    marked = '"[bold]red[/] :warning:' + "x" * 150 + '"'
    source = LOOP.replace("getattr(m, name)", f"getattr(m, name + {marked})")
    (tmp_path / "[odd].py").write_text(source)
    out = check(run_cli, "text", "[odd].py")
    assert out.splitlines()[0].startswith("[odd].py:6:17: JL003")
    assert marked in out


def test_text_source_line_after_a_form_feed(tmp_path: Path, run_cli) -> None:
    (tmp_path / "ff.py").write_text(LOOP.replace("\n\n\ndef", "\n\x0c\n\ndef"))
    out = check(run_cli, "text", "ff.py")
    assert "6 |         model = eqx.tree_at(" in out


def test_statistics_output(project: Path, run_cli) -> None:
    result = run_cli("check", "--no-cache", "--statistics", "src")
    lines = sorted(line.split() for line in result.stdout.splitlines() if line.strip())
    assert lines == [["1", "JL000", "syntax-error"], ["2", "JL003", "[*]", "tree-at-batch"]]


# -- paths ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("src", "src/pkg/loop.py"),
        ("src/", "src/pkg/loop.py"),
        ("./src", "src/pkg/loop.py"),
        ("src/pkg", "src/pkg/loop.py"),
        ("src/pkg/loop.py", "src/pkg/loop.py"),
        ("./src/pkg/loop.py", "./src/pkg/loop.py"),
        ("src/../src/pkg", "src/pkg/loop.py"),
    ],
)
def test_path_is_as_given_joined_with_the_path_under_it(project: Path, run_cli, argument: str, expected: str) -> None:
    found = json.loads(run_cli("check", "--output-format", "json", argument).stdout)
    assert expected in {f["path"] for f in found}


def test_absolute_and_parent_paths(project: Path, run_cli, monkeypatch) -> None:
    absolute = str(project / "src" / "pkg")
    found = json.loads(run_cli("check", "--output-format", "json", absolute).stdout)
    assert [f["path"] for f in found] == [os.path.join(absolute, "loop.py")]
    (project / "elsewhere").mkdir()
    monkeypatch.chdir(project / "elsewhere")
    found = json.loads(run_cli("check", "--output-format", "json", "../src/pkg").stdout)
    assert [f["path"] for f in found] == ["../src/pkg/loop.py"]


# -- colour ------------------------------------------------------------------------------


def test_no_ansi_when_piped(project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "FORCE_COLOR")}
    env.update(TERM="xterm-256color")
    for args in (["check", "src"], ["check", "--statistics", "src"], ["rule", "JL003"], ["rules"]):
        proc = subprocess.run(
            [sys.executable, "-m", "jaxlint", *args],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert proc.returncode in (0, 1), proc.stderr
        assert proc.stdout and not ANSI.search(proc.stdout + proc.stderr), args


def _on_a_terminal(cwd: Path, *args: str, **environ: str) -> tuple[int, str]:
    """Run `python -m jaxlint` with stdout on a pseudo-terminal; (exit code, output)."""
    import pty

    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.update(TERM="xterm-256color", **environ)
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "jaxlint", *args],
            cwd=cwd,
            stdout=follower,
            stderr=subprocess.PIPE,
            env=env,
            timeout=60,
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO once the terminal is drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_colour_on_a_terminal(project: Path) -> None:
    code, output = _on_a_terminal(project, "check", "--no-cache", "src/pkg/loop.py")
    assert code == 1
    assert ANSI.search(output), output
    assert "JL003" in output


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_no_color_environment_variable_on_a_terminal(project: Path) -> None:
    code, output = _on_a_terminal(project, "check", "--no-cache", "src/pkg/loop.py", NO_COLOR="1")
    assert code == 1
    assert "JL003" in output
    assert not ANSI.search(output), output


# -- evidence ----------------------------------------------------------------------------

COPY_LOOP = """\
import jax
import jax.numpy as jnp


@jax.jit
def step(params, batch):
    return params - 0.1 * jnp.mean(batch)


def train(params, loader, history):
    for batch in loader:
        params = step(params, batch)
        history.append(float(params))
    return params
"""


def test_evidence_in_every_format(tmp_path: Path, run_cli) -> None:
    """A finding states why its line is costly: how often it runs, where that comes from."""
    (tmp_path / "train.py").write_text(COPY_LOOP)
    why = "runs on every iteration of the loop at line 11, which runs over `loader`"
    found = json.loads(check(run_cli, "json", "train.py"))
    assert [(f["code"], f["line"], f["evidence"]) for f in found] == [("JL005", 13, [why])]
    sarif = json.loads(check(run_cli, "sarif", "train.py"))
    assert sarif["runs"][0]["results"][0]["properties"]["evidence"] == [why]
    assert f"= why: {why}" in check(run_cli, "text", "train.py")
