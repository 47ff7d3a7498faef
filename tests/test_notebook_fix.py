"""Fixing notebooks: code cells rewritten in place, every other byte of the JSON kept; SARIF
and GitHub annotations point at the cell's line in the `.ipynb` text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jaxlint._fixer import fix_source
from jaxlint.rules import TreeAtBatch


CHAIN = [
    "def reset(model, w, b):\n",
    "    model = eqx.tree_at(lambda m: m.head.weight, model, w)\n",
    "    model = eqx.tree_at(lambda m: m.head.bias, model, b)\n",
    "    !echo reset  # a shell line inside the function\n",
    "    return model\n",
    "for batch in loader:  # the reset runs on every step\n",
    "    model = reset(model, *batch)\n",
]
CHAIN_FIXED = "    model = eqx.tree_at(lambda m: [m.head.weight, m.head.bias], model, [w, b])\n"
LOOP = ["for where, value in updates:\n", "    model = eqx.tree_at(where, model, value)"]


def notebook(chain: list[str] | str = CHAIN, **dump: object) -> dict:
    """A notebook as Jupyter saves it after a run: outputs, execution counts, cell ids,
    metadata, a markdown cell with non-ASCII text, magics."""
    return {
        "metadata": {"kernelspec": {"display_name": "Python 3", "name": "python3"}, "language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
        "cells": [
            {"id": "md-1", "cell_type": "markdown", "metadata": {}, "source": ["# Model surgery — résumé\n"]},
            {
                "cell_type": "code",
                "execution_count": 1,
                "id": "imports",
                "metadata": {"tags": ["setup"], "collapsed": False},
                "outputs": [{"name": "stdout", "output_type": "stream", "text": ["loaded ✓\n"]}],
                "source": ["%load_ext autoreload\n", "import equinox as eqx"],
            },
            {
                "cell_type": "code",
                "execution_count": 2,
                "id": "reset",
                "metadata": {},
                "outputs": [
                    {
                        "data": {"image/png": "iVBORw0KGgo=\n", "text/plain": ["<Figure size 640x480>"]},
                        "metadata": {"needs_background": "light"},
                        "output_type": "display_data",
                    }
                ],
                "source": chain,
            },
            {"cell_type": "code", "execution_count": None, "id": "shell", "metadata": {}, "outputs": [], "source": "%%bash\nls -la\n"},
        ],
    }


def dumps(document: dict, **options: object) -> bytes:
    options = {"indent": 1, "ensure_ascii": False, **options}
    trailing = options.pop("trailing", "\n")
    return (json.dumps(document, **options) + trailing).encode()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "options",
    [
        {},  # nbformat's own style: indent 1, raw UTF-8, a trailing newline
        {"indent": 2, "trailing": ""},
        {"indent": 4, "ensure_ascii": True, "separators": (",", ": ")},
        {"indent": None, "trailing": ""},  # all on one line
    ],
    ids=["nbformat", "indent2", "ascii", "one-line"],
)
def test_a_notebook_with_outputs_round_trips_byte_for_byte_except_the_fixed_lines(options: dict) -> None:
    data = dumps(notebook(), **options)
    expected = dumps(notebook([CHAIN[0], CHAIN_FIXED, *CHAIN[3:]]), **options)
    outcome = fix_source("nb.ipynb", data, [TreeAtBatch])
    assert outcome.error is None
    assert outcome.applied == 1
    assert outcome.fixed == expected
    assert outcome.remaining == []
    again = fix_source("nb.ipynb", outcome.fixed, [TreeAtBatch])  # idempotent
    assert again.fixed == outcome.fixed and again.applied == 0


def test_a_one_string_source_stays_one_string() -> None:
    data = dumps(notebook("".join(CHAIN)))
    outcome = fix_source("nb.ipynb", data, [TreeAtBatch])
    assert outcome.fixed == dumps(notebook("".join([CHAIN[0], CHAIN_FIXED, *CHAIN[3:]])))


def test_magics_and_shell_lines_are_kept_in_a_fixed_cell() -> None:
    magics = ["%time x = 1\n", "!pip install equinox \\\n", "    --quiet\n"]
    chain = [*magics, "for batch in loader:\n", *CHAIN[1:3], "x?\n"]
    outcome = fix_source("nb.ipynb", dumps(notebook(chain)), [TreeAtBatch])
    (cell,) = [c for c in json.loads(outcome.fixed)["cells"] if c.get("id") == "reset"]
    assert cell["source"] == [*magics, "for batch in loader:\n", CHAIN_FIXED, "x?\n"]


def test_an_indented_cell_keeps_its_indentation() -> None:
    chain = ["  " + line for line in CHAIN if not line.lstrip().startswith("!")]
    outcome = fix_source("nb.ipynb", dumps(notebook(chain)), [TreeAtBatch])
    (cell,) = [c for c in json.loads(outcome.fixed)["cells"] if c.get("id") == "reset"]
    assert cell["source"] == ["  " + CHAIN[0], "  " + CHAIN_FIXED, *("  " + line for line in CHAIN[4:])]


def test_an_unsafe_fix_adds_its_import_to_the_notebook() -> None:
    outcome = fix_source("nb.ipynb", dumps(notebook(LOOP)), [TreeAtBatch], unsafe=True)
    assert outcome.error is None and outcome.applied == 1
    cells = {c.get("id"): c["source"] for c in json.loads(outcome.fixed)["cells"]}
    assert cells["imports"] == [
        "%load_ext autoreload\n",
        "import equinox as eqx\n",
        "from jaxlint.runtime import tree_at_batched",
    ]
    assert "model = tree_at_batched(model, tree_at_updates)" in "".join(cells["reset"])
    assert cells["shell"] == "%%bash\nls -la\n"


def test_a_fix_that_would_move_code_between_cells_is_not_applied(monkeypatch) -> None:
    # A chain split across two cells runs once at the top level, so the rule would be silent;
    # it reports it here as if a loop ran it: what is tested is the fixer's guard.
    monkeypatch.setattr(TreeAtBatch, "_repeated", lambda self, call: "runs on every step")
    document = notebook(["model = eqx.tree_at(lambda m: m.a, model, 1)"])
    document["cells"].insert(3, {**document["cells"][2], "id": "next", "source": ["model = eqx.tree_at(lambda m: m.b, model, 2)"]})
    data = dumps(document)
    outcome = fix_source("nb.ipynb", data, [TreeAtBatch])
    assert outcome.fixed == data and outcome.error is None
    assert [(f.code, f.cell) for f in outcome.remaining] == [("JL003", 3)]


def test_fix_and_fix_diff_on_a_notebook(tmp_path: Path, run_cli) -> None:
    path = tmp_path / "nb.ipynb"
    data = dumps(notebook())
    path.write_bytes(data)
    diff = run_cli("fix", "--diff", "nb.ipynb")
    assert diff.exit_code == 1
    assert path.read_bytes() == data
    assert diff.stdout.splitlines() == [
        "--- a/nb.ipynb:cell 3",
        "+++ b/nb.ipynb:cell 3",
        "@@ -1,6 +1,5 @@",
        " def reset(model, w, b):",
        "-" + CHAIN[1].rstrip("\n"),
        "-" + CHAIN[2].rstrip("\n"),
        "+" + CHAIN_FIXED.rstrip("\n"),
        " " + CHAIN[3].rstrip("\n"),
        " " + CHAIN[4].rstrip("\n"),
        " " + CHAIN[5].rstrip("\n"),
    ]
    assert "Would fix 1 finding in 1 file." in diff.stderr
    fixed = run_cli("fix", "nb.ipynb")
    assert fixed.exit_code == 0, fixed.output
    assert "Fixed 1 finding in 1 file." in fixed.stdout
    assert path.read_bytes() == dumps(notebook([CHAIN[0], CHAIN_FIXED, *CHAIN[3:]]))


def test_fix_a_notebook_from_stdin(run_cli) -> None:
    result = run_cli("fix", "--stdin-filename", "nb.ipynb", "-", input=dumps(notebook()))
    assert result.exit_code == 0
    assert result.stdout_bytes == dumps(notebook([CHAIN[0], CHAIN_FIXED, *CHAIN[3:]]))


def _line_of(data: bytes, needle: str) -> int:
    (number,) = [n for n, line in enumerate(data.decode().splitlines(), start=1) if needle in line]
    return number


def test_github_annotations_point_at_the_cells_line_in_the_ipynb_text(tmp_path: Path, run_cli) -> None:
    data = dumps(notebook())
    (tmp_path / "nb.ipynb").write_bytes(data)
    result = run_cli("check", "--output-format", "github", "nb.ipynb")
    line = _line_of(data, "m.head.weight")
    assert result.stdout.startswith(f"::warning file=nb.ipynb,line={line},endLine={line},title=JL003 tree-at-batch::")
    assert "(cell 3, line 2, column 13)" in result.stdout


def test_sarif_has_the_ipynb_region_and_the_cell_in_a_property(tmp_path: Path, run_cli) -> None:
    data = dumps(notebook("".join(CHAIN)))  # one string: every line of the cell is on one line
    (tmp_path / "nb.ipynb").write_bytes(data)
    result = run_cli("check", "--output-format", "sarif", "nb.ipynb")
    (finding,) = json.loads(result.stdout)["runs"][0]["results"]
    line = _line_of(data, "m.head.weight")
    assert finding["locations"][0]["physicalLocation"]["region"] == {"startLine": line, "endLine": line}
    assert finding["properties"] == {
        "cell": 3,
        "cellRegion": {"startLine": 2, "startColumn": 13, "endLine": 2, "endColumn": 59},
        "evidence": ["called at line 7, on every iteration of the loop at line 6, which runs over `loader`"],
    }
