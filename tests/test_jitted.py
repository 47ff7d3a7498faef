"""The shared "what is jitted / what dispatches device work" analysis."""

from __future__ import annotations

import textwrap

import libcst as cst

from jaxlint._context import FileContext
from jaxlint._walk import walk


def _calls(source: str):  # type: ignore[no-untyped-def]
    """{callee text: (jit API of the callee, dispatches, traced)} for every call."""
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    ctx = FileContext("<test>", source, module)
    table = {}

    def probe(call: cst.Call) -> None:
        key = module.code_for_node(call.func)
        table[key] = (
            ctx.jit.callee(call, ctx.ancestors),
            ctx.dispatches(call),
            ctx.jit.is_traced(ctx.ancestors),
        )

    walk(module, {cst.Call: [probe]}, {}, ctx.ancestors)
    return table


def test_decorated_wrapped_and_method_jits() -> None:
    table = _calls(
        """
        import functools
        import jax
        import jax.numpy as jnp
        import equinox as eqx

        @jax.jit
        def step(x):
            return jnp.sin(x)

        @functools.partial(jax.jit, static_argnames="n")
        def scan_step(x, n):
            return x

        def loss(x):
            return x

        loss = jax.jit(loss)
        fast = eqx.filter_jit(loss)

        class Trainer:
            @eqx.filter_jit
            def update(self, x):
                return x

            def run(self, x):
                return self.update(x)

        def plain(x):
            return x

        step(1)
        scan_step(1, n=2)
        loss(2)
        fast(3)
        plain(4)
        jnp.zeros(3)
        jax.jit(plain)(5)
        jax.vmap(plain)(6)
        print(7)
        """
    )
    assert table["step"] == ("jax.jit", True, False)
    assert table["scan_step"] == ("jax.jit", True, False)
    assert table["loss"] == ("jax.jit", True, False)
    assert table["fast"] == ("equinox.filter_jit", True, False)
    assert table["self.update"] == ("equinox.filter_jit", True, False)
    assert table["plain"] == (None, False, False)
    assert table["jnp.zeros"] == (None, True, False)
    assert table["jax.jit(plain)"] == ("jax.jit", True, False)
    assert table["jax.vmap(plain)"] == (None, True, False)
    assert table["print"] == (None, False, False)
    assert table["jnp.sin"][2] is True  # inside a jitted function: traced, not dispatched


def test_a_name_bound_to_something_else_is_not_trusted() -> None:
    table = _calls(
        """
        import jax

        step = jax.jit(lambda x: x)
        step = make_step()
        step(1)
        """
    )
    assert table["step"][0] is None
