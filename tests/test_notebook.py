"""Notebooks: code cells are linted, findings point at a cell, broken JSON is one error line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from jaxlint._cli import cli
from jaxlint._engine import analyze
from jaxlint._notebook import read_notebook
from jaxlint.rules import TreeAtBatch


def _notebook(*cells: tuple[str, str]) -> bytes:
    return json.dumps(
        {
            "cells": [{"cell_type": kind, "source": source, "metadata": {}} for kind, source in cells],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    ).encode()


LOOP = "for where, value in updates:\n    model = eqx.tree_at(where, model, value)\n"


def test_finding_is_located_in_its_cell() -> None:
    data = _notebook(
        ("markdown", "# Surgery"),
        ("code", ["%load_ext autoreload\n", "import equinox as eqx\n"]),
        ("code", LOOP),
    )
    findings = analyze("nb.ipynb", data, [TreeAtBatch]).result.findings
    assert [(f.cell, f.line, f.column) for f in findings] == [(3, 2, 13)]
    assert findings[0].fix == "unsafe"


def test_ipython_syntax_is_not_a_syntax_error() -> None:
    source = read_notebook(
        _notebook(
            ("code", "!pip install equinox\n%time x = 1\nx?\n"),
            ("code", "%%bash\nls -la | wc\n"),
            ("code", "%%time\nimport jax\n"),
        )
    )
    assert source.text.splitlines() == ["pass", "pass", "pass", "", "", "pass", "import jax"]


def test_broken_notebook_is_one_error_line_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    (tmp_path / "model.py").write_text("import equinox as eqx\n" + LOOP, encoding="utf-8")
    result = CliRunner().invoke(cli, ["check", "--no-cache", "--output-format", "concise", str(tmp_path)])
    assert result.exit_code == 2
    assert "model.py:3:13: JL003" in result.stdout
    errors = [line for line in result.stderr.splitlines() if line]
    assert len(errors) == 1 and "broken.ipynb: broken notebook: invalid JSON" in errors[0]
    assert "Traceback" not in result.output


def test_shell_line_continued_with_a_backslash_is_masked() -> None:
    source = read_notebook(_notebook(("code", "!git clone repo \\\n    --depth 1\nimport jax\n")))
    assert source.text.splitlines() == ["pass", "", "import jax"]


def test_findings_are_ordered_by_cell() -> None:
    data = _notebook(
        ("code", "import equinox as eqx\n" + LOOP),
        ("code", LOOP),
        ("code", "\n\n\n" + LOOP),
    )
    from jaxlint._engine import Finding

    findings = sorted(analyze("nb.ipynb", data, [TreeAtBatch]).result.findings, key=Finding.sort_key)
    assert [f.cell for f in findings] == [1, 2, 3]


def test_an_indented_cell_is_dedented_as_ipython_does() -> None:
    source = read_notebook(_notebook(("code", "  import jax\n  x = jax.numpy.zeros(3)\n")))
    assert source.text.splitlines() == ["import jax", "x = jax.numpy.zeros(3)"]


def test_automagic_lines_without_percent_are_masked() -> None:
    cell = "timeit -n 5 f(x)\npip install equinox\ncd data\ntime = 3\nrun(x)\nls\nout = !nvidia-smi\n"
    source = read_notebook(_notebook(("code", cell)))
    assert source.text.splitlines() == ["pass", "pass", "pass", "time = 3", "run(x)", "ls", "pass"]


def test_a_magic_name_inside_python_is_left_alone() -> None:
    cell = "total = sum([\n    time ,\n    cd + 1,\n])\n"
    source = read_notebook(_notebook(("code", cell)))
    assert source.text.splitlines() == cell.splitlines()


def test_a_percent_continuing_a_bracketed_expression_is_python() -> None:
    cell = "print(\n    'a: %d'\n    % (\n        a,\n    )\n)\n%matplotlib inline\n"
    doc = "x = '''\n%not a magic, docstring text\n'''\n"
    source = read_notebook(_notebook(("code", cell), ("code", doc)))
    assert source.text.splitlines() == [*cell.splitlines()[:-1], "pass", *doc.splitlines()]
    assert source.broken == ()


def test_a_broken_cell_is_reported_in_place_and_the_other_cells_are_still_linted() -> None:
    data = _notebook(
        ("code", "import equinox as eqx\n"),
        ("code", "Licensed under the Apache License\n  http://www.apache.org\n"),
        ("code", LOOP),
    )
    findings = analyze("nb.ipynb", data, [TreeAtBatch]).result.findings
    assert [(f.code, f.cell, f.line) for f in findings] == [("JL000", 2, 1), ("JL003", 3, 2)]
    assert findings[0].message.startswith("SyntaxError: ")


def test_evidence_names_lines_as_the_notebook_shows_them() -> None:
    data = _notebook(
        ("code", ["import equinox as eqx\n", "updates = load()\n", "model = build()\n"]),
        ("code", LOOP),
    )
    (finding,) = analyze("nb.ipynb", data, [TreeAtBatch]).result.findings
    assert finding.cell == 2
    assert any("the loop at line 1," in sentence for sentence in finding.evidence), finding.evidence
