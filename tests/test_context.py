"""The shared analysis rules rely on: jit decorators, loop bindings, enclosing statements."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from jaxlint._context import FileContext
from jaxlint._walk import walk


def _visit_all(source: str, node_type: type[cst.CSTNode], probe):  # type: ignore[no-untyped-def]
    """Walk `source` and call `probe(ctx, node)` for every node of `node_type`."""
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    ctx = FileContext("<test>", source, module)
    results = []
    walk(module, {node_type: [lambda node: results.append(probe(ctx, node))]}, {}, ctx.ancestors)
    return results


@pytest.mark.parametrize(
    ("decorator", "expected"),
    [
        ("@jax.jit", "jax.jit"),
        ("@jit", "jax.jit"),
        ("@partial(jax.jit, static_argnums=1)", "jax.jit"),
        ("@ft.partial(jax.jit, static_argnames=('n',))", "jax.jit"),
        ("@eqx.filter_jit", "equinox.filter_jit"),
        ("@eqx.filter_jit(donate='all')", "equinox.filter_jit"),
        ("@nnx.jit", "flax.nnx.jit"),
        ("@pjit", "jax.experimental.pjit.pjit"),
        ("@staticmethod", None),
        ("@my.jit", None),
    ],
)
def test_function_info_finds_the_jit_decorator(decorator: str, expected: str | None) -> None:
    source = f"""
    import functools as ft
    from functools import partial
    import jax
    from jax import jit
    import equinox as eqx
    from flax import nnx
    from jax.experimental.pjit import pjit

    class Model:
        {decorator}
        def step(self, x, n):
            return x
    """
    infos = _visit_all(source, cst.FunctionDef, lambda ctx, node: ctx.function_info(node).jit)
    assert infos == [expected]


def test_decorator_resolution_ignores_names_bound_inside_the_function() -> None:
    source = """
    import jax

    @jax.jit
    def f(jax):
        return jax
    """
    assert _visit_all(source, cst.FunctionDef, lambda ctx, n: ctx.function_info(n).jit) == ["jax.jit"]


def test_loop_bindings_are_the_names_a_loop_rebinds() -> None:
    source = """
    for i, (a, b) in enumerate(pairs):
        total = a + b
        total += 1
        with open(p) as handle:
            pass
        def inner():
            hidden = 1
    """
    names = _visit_all(source, cst.For, lambda ctx, node: ctx.loop_bindings(node))
    assert names == [frozenset({"i", "a", "b", "total", "handle", "inner"})]


def test_enclosing_function_and_statement() -> None:
    source = """
    def outer():
        def inner():
            return eqx.tree_at(w, m, r)
        return inner
    """

    def probe(ctx: FileContext, node: cst.Call):  # type: ignore[no-untyped-def]
        function = ctx.enclosing_function()
        statement = ctx.statement(node)
        return function.name.value, type(statement).__name__

    assert _visit_all(source, cst.Call, probe) == [("inner", "SimpleStatementLine")]
