"""Notebooks: code cells are linted, findings point at a cell, broken JSON is one error line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from jaxlint._cli import cli
from jaxlint._engine import analyze
from jaxlint._notebook import read_notebook
from jaxlint.rules import MissingJit, TreeAtBatch


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


def test_a_message_names_lines_as_the_notebook_shows_them() -> None:
    # missing-jit's message names the loop's line: within the finding's cell, or with its cell.
    helper = "def energy(x):\n    return jnp.sum(jnp.sin(x) ** 2) + jnp.mean(jnp.cos(x))\n"
    loop = "total = 0.0\nfor i in range(500):\n    total = total + energy(xs[i])\n"
    data = _notebook(
        ("code", ["import jax.numpy as jnp\n", "xs = jnp.ones((500, 8))\n"]),
        ("code", helper),
        ("code", loop),
    )
    (finding,) = analyze("nb.ipynb", data, [MissingJit]).result.findings
    assert finding.cell == 2
    assert "(line 2 of cell 3)" in finding.message, finding.message
    together = _notebook(("code", ["import jax.numpy as jnp\n", "xs = jnp.ones((500, 8))\n"]), ("code", helper + loop))
    (finding,) = analyze("nb.ipynb", together, [MissingJit]).result.findings
    assert "(line 4)" in finding.message, finding.message


# A package that jits its data normalization, and a notebook beside it whose active-learning
# loop grows the data: the notebook never spells `jit`, so only the project says it is JAX code.
_STEPS = "import jax\nimport jax.numpy as jnp\n\n\n@jax.jit\ndef normalize(x, y):\n    return (x - x.mean(0)) / x.std(0), y - y.mean()\n"
_EXPLORE = (
    "import numpy as onp\nfrom gp.utils import normalize\n\nx, y = onp.zeros((4, 2)), onp.zeros(4)\n",
    "for it in range(40):\n    batch = normalize(x, y)\n    x = onp.concatenate([x, onp.ones((1, 2))], axis=0)\n"
    "    y = onp.concatenate([y, onp.ones(1)], axis=0)\n",
)


def _project_with_notebook(tmp_path: Path, notebook: bytes) -> None:
    (tmp_path / "gp").mkdir()
    (tmp_path / "gp" / "__init__.py").write_text("")
    (tmp_path / "gp" / "utils.py").write_text(_STEPS)
    (tmp_path / "explore.ipynb").write_bytes(notebook)


def test_a_notebook_knows_what_its_project_jits(tmp_path: Path, monkeypatch) -> None:
    """A notebook that calls a function the project jits is linted as JAX code, knowing that
    the function is jitted (in the folder's run, and piped with --stdin-filename)."""
    notebook = _notebook(*(("code", cell) for cell in _EXPLORE))
    _project_with_notebook(tmp_path, notebook)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["check", "--no-cache", "--output-format", "concise", "."])
    assert result.exit_code == 1, result.output
    assert [line.split(" [")[0] for line in result.stdout.splitlines() if "JL" in line] == [
        "explore.ipynb:cell 2:2:13: JL008"
    ]
    piped = CliRunner().invoke(
        cli, ["check", "--output-format", "concise", "--stdin-filename", "explore.ipynb", "-"], input=notebook
    )
    assert "explore.ipynb:cell 2:2:13: JL008" in piped.stdout, piped.output


def test_what_a_notebook_jits_is_not_importable(tmp_path: Path, monkeypatch) -> None:
    """Nothing imports a notebook: a notebook named like a module that jits `normalize` does not
    make `from utils import normalize` in a script the jitted function."""
    (tmp_path / "utils.ipynb").write_bytes(_notebook(("code", _STEPS)))
    (tmp_path / "utils.py").write_text("import numpy as np\n\n\ndef normalize(x, y):\n    return x / np.abs(x).max(), y\n")
    (tmp_path / "run.py").write_text(
        "import numpy as onp\nimport jax\nfrom utils import normalize\n\nx, y = onp.zeros((4, 2)), onp.zeros(4)\n"
        + _EXPLORE[1]
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["check", "--no-cache", "--output-format", "concise", "."])
    assert result.exit_code == 0, result.output


_DEMO = (
    "import jax\n\n"
    "def step(i):\n    return i + 1\n\n"
    "def demo_lambda(x, n):\n    i = 0\n    while i < n:\n        i = jax.jit(lambda v: step(v))(i)\n    return x + i\n\n"
    "def train(x, n):\n    i = 0\n    while i < n:\n        i = jax.jit(lambda v: step(v))(i)\n    return x + i\n"
)


def test_timeit_lines_name_the_functions_a_notebook_benchmarks() -> None:
    source = read_notebook(
        _notebook(
            ("code", "%timeit demo_lambda(10, 20).block_until_ready()\nt = %timeit -o -n 3 other(1)\n%time train(1, 2)\n"),
            ("code", "timeit jax.block_until_ready(third(2))\n"),
        )
    )
    assert {"demo_lambda", "other", "third"} <= source.timed
    assert "train" not in source.timed  # `%time` runs it once, as the program would


def test_a_function_a_notebook_times_with_timeit_is_a_benchmark() -> None:
    from jaxlint.rules import JitInLoop

    data = _notebook(
        ("code", _DEMO),
        ("code", "%timeit demo_lambda(10, 20).block_until_ready()\n%time train(10, 20)\n"),
    )
    findings = analyze("nb.ipynb", data, [JitInLoop]).result.findings
    assert [(f.cell, f.line) for f in findings] == [(1, 15)]  # `train`'s, not the benchmarked demo's
