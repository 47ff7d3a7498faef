"""Positions computed around reported statements equal libcst's whole-file PositionProvider."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from jaxlint._nodes import iter_subtree
from jaxlint._positions import positions


ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "jaxlint").rglob("*.py"))

SYNTHETIC = {
    "header-and-crlf": "# header comment\r\n\r\nimport jax\r\nx = jax.jit(f)(1)\r\n",
    "no-trailing-newline": "import jax\n\ndef f():\n    return jax.jit(g)(\n        1,\n    )",
    "decorated-and-nested": (
        "import jax\n\n\n@jax.jit\ndef f(x):\n    # comment\n    return g(x)\n\n\n"
        "class A:\n    def m(self):\n        if True:\n            return h(1); k(2)\n"
    ),
    "tabs-and-semicolons": "import jax\nif x:\n\ty = f(1); z = g(2)\n",
}


def _compare(source: str) -> None:
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    for statement in module.body:
        nodes = [n for n in iter_subtree(statement) if isinstance(n, (cst.Call, cst.Name))]
        if not nodes:
            continue
        computed = positions(module, [(n, statement) for n in nodes])
        for node in nodes:
            assert computed[node] == expected[node], module.code_for_node(node)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_positions_match_position_provider_on_files(path: Path) -> None:
    _compare(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_positions_match_position_provider(name: str) -> None:
    _compare(SYNTHETIC[name])


def test_unknown_statement_falls_back_to_the_whole_file() -> None:
    module = cst.parse_module("import jax\nx = f(1)\n")
    call = module.body[1].body[0].value  # type: ignore[attr-defined]
    assert positions(module, [(call, None)])[call].start.line == 2
